"""Find log files under paths, read each with its format, and put every session's calls in time order.

>>> result = read_logs("fixtures/real-logs/deepseek")
>>> len(result.records), result.formats
(154, {'mini-swe-agent': 4})
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from promptkit.errors import LogFileError, RecordFormatError
from promptkit.formats.base import LogFormat, Source, get_format, sniff_format
from promptkit.formats.fields import check_request, clean_message, parse_layout, parse_timestamp
from promptkit.layout import LoadProblem, LoadResult, RequestRecord

__all__ = ["LOG_SUFFIXES", "find_log_files", "read_logs", "records_from_requests"]

#: File name endings a directory search reads (each also gzip- or zstd-compressed).
LOG_SUFFIXES: Final[tuple[str, ...]] = (".jsonl", ".json", ".ndjson", ".traj", ".har")
_COMPRESSED: Final[tuple[str, ...]] = ("", ".gz", ".zst", ".zstd")


def _is_log_name(name: str) -> bool:
    return any(name.endswith(s + c) for s in LOG_SUFFIXES for c in _COMPRESSED)


def find_log_files(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
) -> tuple[list[tuple[Path, bool]], Counter[str]]:
    """The files to read: ``(path, named)`` pairs (``named``: given explicitly rather than found in a
    directory) and a count of the files a directory search passed over, by suffix. Raises
    :class:`~promptkit.errors.LogFileError` for a missing path or a directory with no log files."""
    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    files: list[tuple[Path, bool]] = []
    passed: Counter[str] = Counter()
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = []
            for f in sorted(p.rglob("*")):
                if not f.is_file() or any(part.startswith(".") for part in f.relative_to(p).parts):
                    continue
                if _is_log_name(f.name):
                    found.append((f, False))
                else:
                    passed[f.suffix or f.name] += 1
            if not found:
                raise LogFileError(
                    p, f"directory holds no log files ({', '.join('*' + s for s in LOG_SUFFIXES)}, optionally .gz/.zst)"
                )
            files.extend(found)
        elif p.exists():
            files.append((p, True))
        else:
            raise LogFileError(p, "no such file or directory")
    return files, passed


def _infer(record: RequestRecord) -> RequestRecord:
    from promptkit.providers.registry import infer_record_provider

    provider = infer_record_provider(record)
    return record if provider is None or provider == record.provider else attrs.evolve(record, provider=provider)


def _order_sessions(records: list[RequestRecord], notes: list[str]) -> tuple[RequestRecord, ...]:
    """Order each session's calls by time (load order breaks ties, and is kept for a session where a
    record has no timestamp) and number them; records keep their places in the load order otherwise
    (a session's calls fill the slots its records had)."""
    by_session: dict[str, list[int]] = defaultdict(list)
    for k, r in enumerate(records):
        by_session[r.session].append(k)
    split: list[tuple[str, list[str]]] = []
    reordered: list[str] = []
    out: list[RequestRecord] = list(records)
    for session, slots in by_session.items():
        group = [records[k] for k in slots]
        files = list(dict.fromkeys(r.file for r in group if r.file is not None))
        if len(files) > 1:
            split.append((session, files))
        if all(r.timestamp is not None for r in group):
            ordered = sorted(group, key=lambda r: r.timestamp or 0.0)
            if ordered != group:
                reordered.append(session)
            group = ordered
        for i, (k, r) in enumerate(zip(slots, group, strict=True)):
            out[k] = r if r.index == i else attrs.evolve(r, index=i)
    if split:
        session, files = split[0]
        more = f" (and {len(split) - 1} more)" if len(split) > 1 else ""
        shown = ", ".join(Path(f).name for f in files[:3]) + (", …" if len(files) > 3 else "")
        notes.append(
            f"session {session!r} spans {len(files)} files ({shown}){more}: its calls were merged in time order"
        )
    if reordered:
        more = f" and {len(reordered) - 1} more" if len(reordered) > 1 else ""
        notes.append(
            f"session {reordered[0]!r}{more}: calls were not in time order in the log; analyzed in time order"
        )
    return tuple(out)


def read_logs(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    format: str | LogFormat | None = None,
    on_file: Callable[[Path], None] | None = None,
) -> LoadResult:
    """Read every request log under ``paths`` (files, and directories searched recursively for
    :data:`LOG_SUFFIXES`, plain or gzip/zstd-compressed) into one :class:`~promptkit.layout.LoadResult`.

    Each file's format is found by sniffing (:func:`~promptkit.formats.sniff_format`) unless ``format``
    forces one; a folder of mixed formats works. A file named explicitly that no format accepts raises
    :class:`~promptkit.errors.LogFileError` naming the formats tried; one found in a directory becomes a
    problem. Every record that cannot be used is a :class:`~promptkit.layout.LoadProblem` with file,
    line and field. Each session's calls are put in time order and numbered; records without a
    ``provider`` get the one recognised from their model name, URL or usage shape. ``on_file`` is
    called before each file is read (for progress displays).
    """
    fmt = get_format(format) if isinstance(format, str) else format
    files, passed = find_log_files(paths)
    records: list[RequestRecord] = []
    problems: list[LoadProblem] = []
    formats: Counter[str] = Counter()
    notes: list[str] = []
    for path, named in files:
        if on_file is not None:
            on_file(path)
        source = Source.open(path)
        try:
            chosen = fmt if fmt is not None else sniff_format(source)
        except LogFileError as exc:
            if named:
                raise
            problems.append(LoadProblem(str(path), None, exc.reason))
            continue
        formats[chosen.name] += 1
        before = len(records)
        for item in chosen.read(source):
            if isinstance(item, RequestRecord):
                records.append(_infer(item))
            else:
                problems.append(item)
        if len(records) == before and not any(p.file == str(path) for p in problems):
            problems.append(LoadProblem(str(path), None, f"no requests in this {chosen.name} log"))
    if passed:
        listed = ", ".join(f"{n} {s}" for s, n in passed.most_common(4))
        notes.append(f"{sum(passed.values())} file(s) not named like logs were passed over ({listed})")
    return LoadResult(_order_sessions(records, notes), tuple(problems), dict(formats), tuple(notes))


def records_from_requests(
    items: Iterable[Mapping[str, Any] | tuple[Mapping[str, Any], Any]],
    *,
    session: str = "requests",
    timestamps: Sequence[float | str | None] | None = None,
    completions: Sequence[Mapping[str, Any] | None] | None = None,
) -> tuple[RequestRecord, ...]:
    """Records for requests built in code, one session in the given order.

    Each item is a chat-completions body or a ``(body, layout)`` pair; a layout is a sequence aligned
    with the body's messages of ``{"slot": ..., "key": ...}`` mappings, ``(slot, key)`` pairs or
    :class:`~promptkit.layout.LayoutEntry` s (an ``AssembledPrompt``'s ``layout``). ``timestamps`` and
    ``completions`` (the assistant message each call generated) are optional and aligned with
    ``items``. Raises :class:`~promptkit.errors.RecordFormatError` naming the item and field.

    Example::

        >>> body = {"messages": [{"role": "system", "content": "You are terse."},
        ...                      {"role": "user", "content": "hi"}]}
        >>> recs = records_from_requests([(body, [("identity", "card"), ("current", None)])])
        >>> recs[0].layout
        (LayoutEntry(slot='identity', key='card'), LayoutEntry(slot='current', key=None))
    """
    items = list(items)
    for name, aligned in (("timestamps", timestamps), ("completions", completions)):
        if aligned is not None and len(aligned) != len(items):
            raise RecordFormatError(f"{name}: {len(aligned)} values for {len(items)} requests")
    records = []
    for i, item in enumerate(items):
        where = f"requests[{i}]"
        if isinstance(item, tuple):
            if len(item) != 2:
                raise RecordFormatError(
                    f"{where}: expected a body or a (body, layout) pair, got a {len(item)}-tuple"
                )
            body, raw_layout = item
        else:
            body, raw_layout = item, None
        request = check_request(body, where)
        layout = parse_layout(raw_layout, len(request["messages"]), f"{where}.layout")
        ts = parse_timestamp(timestamps[i], f"timestamps[{i}]") if timestamps is not None else None
        completion = None
        if completions is not None and completions[i] is not None:
            completion = clean_message(completions[i], f"completions[{i}]")  # type: ignore[arg-type]
        records.append(
            RequestRecord(request, session, index=i, timestamp=ts, completion=completion, layout=layout)
        )
    return tuple(records)


