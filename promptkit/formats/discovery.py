"""Find log files under paths, read each with its format, and put every session's calls in time order.

>>> result = read_logs("fixtures/real-logs/deepseek")
>>> len(result.records), result.formats
(154, {'mini-swe-agent': 4})
"""

from __future__ import annotations

import os
import stat
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from promptkit.errors import LogFileError, RecordFormatError, UsageError
from promptkit.formats.base import (
    STDIN_PATHS,
    LogFormat,
    Source,
    check_regular,
    get_format,
    read_items,
    sniff_format,
)
from promptkit.formats.fields import (
    check_request,
    clean_message,
    mend_identifiers,
    parse_layout,
    parse_timestamp,
)
from promptkit.layout import LoadProblem, LoadResult, RequestRecord

__all__ = [
    "LOG_SUFFIXES",
    "LogListing",
    "LogStream",
    "choose_format",
    "find_log_files",
    "format_of",
    "intern_messages",
    "is_log_name",
    "iter_log_paths",
    "iter_sessions",
    "list_log_files",
    "order_session",
    "passed_notes",
    "read_file",
    "read_logs",
    "records_from_requests",
    "reordered_notes",
    "session_order_notes",
    "stream_logs",
    "with_inferred_provider",
]

#: File name endings a directory search reads (each also gzip- or zstd-compressed).
LOG_SUFFIXES: Final[tuple[str, ...]] = (".jsonl", ".json", ".ndjson", ".traj", ".har")
_COMPRESSED: Final[tuple[str, ...]] = ("", ".gz", ".zst", ".zstd")


def is_log_name(name: str) -> bool:
    """Whether a directory search reads a file of this name (:data:`LOG_SUFFIXES`, each also gzip- or
    zstd-compressed).

    >>> is_log_name("a.traj.json"), is_log_name("calls.jsonl.zst"), is_log_name("notes.txt")
    (True, True, False)
    """
    return any(name.endswith(s + c) for s in LOG_SUFFIXES for c in _COMPRESSED)


def _walk(root: Path, errors: list[LoadProblem], hidden: list[str] | None = None) -> Iterator[Path]:
    """Every entry under ``root`` but hidden ones (named in ``hidden``, a folder with a trailing ``/``,
    in a walk's order: top down, each folder's entries sorted) and folders; a symlink to a folder is an
    entry (never followed); an unreadable directory is a problem naming it (appended to ``errors``),
    never passed over in silence. perf: one ``scandir`` per folder, its entries' types from it, and a
    path made for the entries yielded only (3,000 logs in 10,000 folders: 0.1 s, where ``os.walk`` and
    a ``Path`` for every folder took 0.3 s)."""

    todo = [str(root)]
    while todo:
        folder = todo.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            where = exc.filename if exc.filename is not None else str(root)
            reason = f"directory cannot be read: {exc.strerror or exc}; its logs were not read"
            errors.append(LoadProblem(str(where), None, reason))
            continue
        folders: list[str] = []
        hidden_names: list[str] = []
        for entry in entries:
            try:
                is_dir = entry.is_dir()  # through a symlink, as os.walk sorts its entries
            except OSError:
                is_dir = False
            if entry.name.startswith("."):
                if hidden is not None and is_dir:
                    hidden.append(entry.path + "/")
                elif hidden is not None and is_log_name(entry.name):
                    hidden_names.append(entry.path)
            elif not is_dir or entry.is_symlink():  # a symlink to a folder is listed, not followed
                yield Path(entry.path)
            else:
                folders.append(entry.path)
        if hidden is not None:
            hidden.extend(hidden_names)
        todo.extend(reversed(folders))  # top down, in name order


def iter_log_paths(paths: Iterable[str | os.PathLike[str]]) -> Iterator[str]:
    """The log files under ``paths``, lazily, in the order the directory search walks them (a file named
    in ``paths`` whatever its name; hidden entries and unreadable folders passed over): a cheap look
    ahead that neither sniffs, sizes nor reports (its caller reads what it needs), not the listing the
    analysis reads (:func:`find_log_files`, which names every problem).

    >>> [Path(p).name for p in iter_log_paths(["fixtures/real-logs/gemini"])]
    ['django__django-14376.traj.json', 'sympy__sympy-16597.traj.json']
    """
    for p in paths:
        path = os.fspath(p)
        if os.path.isdir(path):
            yield from (str(f) for f in _walk(Path(path), []) if is_log_name(f.name))
        else:
            yield path


def _skipped(f: Path) -> str | None:
    """Why a log-named directory entry cannot be read (a dangling symlink, a FIFO...), or None."""
    try:
        mode = os.stat(f).st_mode
    except FileNotFoundError:
        return (
            "a dangling symlink (its target does not exist); skipped"
            if f.is_symlink()
            else "vanished; skipped"
        )
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}; skipped"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a symlink to a directory (not followed); skipped"
    kind = "a pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
    return f"is {kind}, not a regular file; skipped"


def find_log_files(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    problems: list[LoadProblem] | None = None,
) -> tuple[list[tuple[Path, bool]], Counter[str]]:
    """The files to read: ``(path, named)`` pairs (``named``: given explicitly rather than found in a
    directory) and a count of the files a directory search passed over, by suffix. Raises
    :class:`~promptkit.errors.LogFileError` for a missing path or a directory with no log files.

    A directory entry that cannot be read (an unreadable subdirectory; a log-named dangling symlink,
    FIFO, socket or device) is appended to ``problems`` naming its path and why, never passed over in
    silence; a named path of that kind raises (:func:`~promptkit.formats.base.check_regular`).
    """
    if isinstance(paths, bytes | bytearray | Mapping) or not isinstance(paths, str | os.PathLike | Iterable):
        raise UsageError(f"paths: expected a path or a list of paths, got {type(paths).__name__}")
    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    for i, item in enumerate(items):
        if not isinstance(item, str | os.PathLike):
            raise UsageError(f"paths[{i}]: expected a path (str or os.PathLike), got {type(item).__name__}")
    files: list[tuple[Path, bool]] = []
    passed: Counter[str] = Counter()
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = []
            skipped = 0
            walk_errors: list[LoadProblem] = []
            hidden: list[str] = []
            # the order of the paths (Path order, as rglob was)
            for f in sorted(_walk(p, walk_errors, hidden)):
                why = _skipped(f)
                if why is not None:
                    if is_log_name(f.name) or f.is_symlink():
                        skipped += 1
                        if problems is not None:
                            problems.append(LoadProblem(str(f), None, why))
                    else:
                        passed[f.suffix or f.name] += 1
                    continue
                if is_log_name(f.name):
                    found.append((f, False))
                else:
                    passed[f.suffix or f.name] += 1
            for error in walk_errors:
                if error.file is not None and Path(error.file) == p:  # the named directory itself
                    raise LogFileError(p, error.reason.removesuffix("; its logs were not read"))
            if problems is not None:
                problems.extend(walk_errors)
            for name in hidden:  # a hidden log or folder is not read, and the notes say so
                passed[HIDDEN_PREFIX + name] += 1
            if not found and not skipped and not walk_errors:
                raise LogFileError(
                    p,
                    f"directory holds no log files ({', '.join('*' + s for s in LOG_SUFFIXES)}, optionally .gz/.zst)"
                    + (f"; hidden entries are not read: {', '.join(hidden[:4])}" if hidden else ""),
                )
            files.extend(found)
        elif p.exists() or p.is_symlink():
            check_regular(p)
            files.append((p, True))
        else:
            if str(p) in STDIN_PATHS:
                check_regular(p)  # standard input gets its own message
            raise LogFileError(p, "no such file or directory")
    return _once(files, problems), passed


@attrs.frozen(slots=True, eq=False)
class LogListing:
    """The log files under some paths, listed once (:func:`list_log_files`): what
    :func:`find_log_files` returns, the walk's problems, and each file's size in bytes (as stored; 0
    where it cannot be read: its reader says why). perf: the analysis on workers sizes the logs (are
    they worth the workers?) and cuts them into tasks from the one listing, where it walked the folders
    twice (0.2-0.3 s each for 3,000 files in 10,000 folders)."""

    files: tuple[tuple[Path, bool], ...]
    passed: Counter[str]
    problems: tuple[LoadProblem, ...]
    sizes: tuple[int, ...]

    @property
    def size(self) -> int:
        """The bytes of all the files."""
        return sum(self.sizes)


def list_log_files(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> LogListing:
    """:func:`find_log_files` of ``paths``, its problems kept, and each file's size; the same errors.

    >>> listing = list_log_files("fixtures/real-logs/deepseek")
    >>> len(listing.files), listing.size == sum(p.stat().st_size for p, _ in listing.files)
    (4, True)
    """
    problems: list[LoadProblem] = []
    files, passed = find_log_files(paths, problems=problems)
    sizes = []
    for path, _ in files:
        try:
            sizes.append(os.stat(path).st_size)
        except OSError:
            sizes.append(0)
    return LogListing(tuple(files), passed, tuple(problems), tuple(sizes))


#: A key of ``find_log_files``' passed-over counter that names a hidden entry (see :func:`passed_notes`).
HIDDEN_PREFIX: Final[str] = "hidden:"


def passed_notes(passed: Counter[str]) -> list[str]:
    """The notes that say which files a directory search passed over: files not named like logs, by
    suffix, and hidden logs and folders (``.a.jsonl``, ``.cache/``), which are never read, by name.

    >>> passed_notes(Counter({".txt": 2, "hidden:logs/.a.jsonl": 1}))
    ['2 file(s) not named like logs were passed over (2 .txt)', '1 hidden log file(s) or folder(s) were not read (logs/.a.jsonl); name a file to read it']
    """
    notes: list[str] = []
    plain = Counter({k: n for k, n in passed.items() if not k.startswith(HIDDEN_PREFIX)})
    hidden = [k.removeprefix(HIDDEN_PREFIX) for k in passed if k.startswith(HIDDEN_PREFIX)]
    if plain:
        listed = ", ".join(f"{n} {s}" for s, n in plain.most_common(4))
        notes.append(f"{sum(plain.values())} file(s) not named like logs were passed over ({listed})")
    if hidden:
        more = f", and {len(hidden) - 4} more" if len(hidden) > 4 else ""
        notes.append(
            f"{len(hidden)} hidden log file(s) or folder(s) were not read ({', '.join(hidden[:4])}{more}); "
            "name a file to read it"
        )
    return notes


def _once(files: list[tuple[Path, bool]], problems: list[LoadProblem] | None) -> list[tuple[Path, bool]]:
    """``files`` with each file once: the same file given twice, or through a link or another path, is read
    the first time only, and a problem names the other path (it would count every call twice)."""
    seen: dict[tuple[int, int], Path] = {}
    out: list[tuple[Path, bool]] = []
    for path, named in files:
        try:
            st = os.stat(path)
        except OSError:  # reported when it is read
            out.append((path, named))
            continue
        key = (st.st_dev, st.st_ino)
        first = seen.get(key)
        if first is not None and key != (0, 0):
            if problems is not None:
                problems.append(
                    LoadProblem(
                        str(path),
                        None,
                        f"the same file as {first} (given twice, or through a link); read once",
                    )
                )
            continue
        seen[key] = path
        out.append((path, named))
    return out


def with_inferred_provider(record: RequestRecord) -> RequestRecord:
    """``record`` with the provider recognised from its model name, URL or usage shape
    (:func:`~promptkit.providers.registry.infer_record_provider`); the record itself when none is
    recognised or it already names that one."""
    from promptkit.providers.registry import infer_record_provider

    provider = infer_record_provider(record)
    return (
        record if provider is None or provider == record.provider else attrs.evolve(record, provider=provider)
    )


def intern_messages(previous: RequestRecord | None, record: RequestRecord) -> RequestRecord:
    """``record`` with each message equal to the one at the same place in ``previous`` (the session's
    previous record) replaced by that very object, and likewise a completion equal to the message that
    follows it and a tool list equal to the previous record's: a log that repeats the whole conversation
    on every line then holds each message once per session. Equality decides, so nothing the analysis
    sees changes; the record's request dict is updated in place (the loader's own, freshly parsed).

    >>> from promptkit.formats import records_from_requests
    >>> a, b = records_from_requests([{"messages": [{"role": "user", "content": "hi"}]},
    ...                               {"messages": [{"role": "user", "content": "hi"},
    ...                                             {"role": "user", "content": "more"}]}])
    >>> intern_messages(a, b).request["messages"][0] is a.request["messages"][0]
    True
    """
    if previous is None:
        return record
    old = previous.request.get("messages")
    new = record.request.get("messages")
    if not isinstance(old, list) or not isinstance(new, list) or not isinstance(record.request, dict):
        return record
    n = min(len(old), len(new))
    # perf: a conversation's next call repeats the previous call's messages (the same objects where the
    # loader keeps them), all of them or all but the last (where the previous call had its breakpoint):
    # that head is compared in one C pass (identity first, as the loop does), and the loop reads the rest
    last_same = n > 0 and (old[n - 1] is new[n - 1] or old[n - 1] == new[n - 1])
    head = n if last_same and old[:n] == new[:n] else n - 1 if n > 1 and old[: n - 1] == new[: n - 1] else 0
    rest = [o if o is m or o == m else m for o, m in zip(old[head:n], new[head:n], strict=True)]
    if len(new) > n:
        message = new[n]
        if n == len(old) and previous.completion is not None and previous.completion == message:
            message = previous.completion
        rest += [message, *new[n + 1 :]]
    # memory: one list of exactly its length (a list grown in place keeps an eighth more of room)
    record.request["messages"] = (old if head == len(old) else old[:head]) + rest
    tools = record.request.get("tools")
    if tools is not None:  # the tool definitions, usually the same on every call: held once too
        old_tools = previous.request.get("tools")
        if old_tools is not tools and old_tools == tools:
            record.request["tools"] = old_tools
    return record


def order_session(
    group: list[RequestRecord],
) -> tuple[list[RequestRecord], list[str] | None, bool]:
    """One session's calls in time order (load order breaks ties, and is kept when a record has no
    timestamp) and numbered from 0: the records, the files the session spans when more than one (else
    None), and whether it was reordered."""
    files = list(dict.fromkeys(r.file for r in group if r.file is not None))
    reordered = False
    if all(r.timestamp is not None for r in group):
        ordered = sorted(group, key=lambda r: r.timestamp or 0.0)
        if ordered != group:
            reordered = True
        group = ordered
    out = [r if r.index == i else attrs.evolve(r, index=i) for i, r in enumerate(group)]
    return out, (files if len(files) > 1 else None), reordered


def session_order_notes(split: list[tuple[str, list[str]]], reordered: list[str], notes: list[str]) -> None:
    """Append to ``notes`` what :func:`order_session` did: the first session of ``split`` (session,
    files) merged from several files, and the first of the ``reordered`` sessions (each with a count of
    the others)."""
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
        group, files, moved = order_session([records[k] for k in slots])
        if files is not None:
            split.append((session, files))
        if moved:
            reordered.append(session)
        for k, r in zip(slots, group, strict=True):
            out[k] = r
    session_order_notes(split, reordered, notes)
    return tuple(out)


def _open_source(path: Path, *, named: bool, problems: list[LoadProblem]) -> Source | None:
    """:meth:`Source.open`; a file found in a directory that cannot be opened (unreadable, broken
    compression) is a problem naming it and None; a named one raises."""
    try:
        return Source.open(path)
    except LogFileError as exc:
        if named:
            raise
        problems.append(LoadProblem(str(path), None, f"{exc.reason}; skipped"))
        return None


def choose_format(
    source: Source,
    fmt: LogFormat | None,
    *,
    named: bool,
    problems: list[LoadProblem],
    formats: Sequence[LogFormat] | None = None,
) -> LogFormat | None:
    """The format to read ``source`` with: ``fmt`` when forced, else the one sniffed (among ``formats``,
    default the registry's). A file of no known format raises when it was named explicitly; found in a
    directory, it is a problem and None."""
    try:
        return fmt if fmt is not None else sniff_format(source, formats)
    except LogFileError as exc:
        if named:
            raise
        problems.append(LoadProblem(str(source.path), None, exc.reason))
        return None


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
    if format is not None and not isinstance(format, str | LogFormat):
        raise UsageError(
            f"read_logs: format: expected a format name, a LogFormat or None, got {type(format).__name__}"
        )
    if on_file is not None and not callable(on_file):
        raise UsageError(f"read_logs: on_file: expected a callable or None, got {type(on_file).__name__}")
    fmt = get_format(format) if isinstance(format, str) else format
    problems: list[LoadProblem] = []
    files, passed = find_log_files(paths, problems=problems)
    records: list[RequestRecord] = []
    formats: Counter[str] = Counter()
    notes: list[str] = []
    last: dict[str, RequestRecord] = {}  # each session's latest record, to share its messages
    for path, named in files:
        if on_file is not None:
            on_file(path)
        source = _open_source(path, named=named, problems=problems)
        if source is None:
            continue
        chosen = choose_format(source, fmt, named=named, problems=problems)
        if chosen is None:
            continue
        formats[chosen.name] += 1
        got, trouble, _ = read_file(source, chosen, last=last)
        records.extend(got)
        problems.extend(trouble)
        for record in got:  # what a format noted while reading (a resumed session's copies merged)
            notes.extend(n for n in record.meta.get("load_notes", ()) if n not in notes)
    notes.extend(passed_notes(passed))
    return LoadResult(_order_sessions(records, notes), tuple(problems), dict(formats), tuple(notes))


def read_file(
    source: Source,
    fmt: LogFormat,
    *,
    last: dict[str, RequestRecord] | None = None,
    in_time_order: bool = False,
) -> tuple[list[RequestRecord], list[LoadProblem], list[str]]:
    """One log file's records as :func:`read_logs` loads them, its problems (a file with no requests is
    one) and, with ``in_time_order``, the sessions whose calls it put in time order. Records without a
    ``provider`` get the one recognised from their model name, URL or usage shape; a record's messages
    equal to its session's previous record's are that record's objects (:func:`intern_messages`;
    ``last``: each session's latest record, kept across files). ``in_time_order``: each session's calls
    of this file in time order and numbered in the slots its records had (:func:`read_logs` orders the
    sessions of all its files at once instead).

    >>> import json, pathlib, tempfile
    >>> from promptkit.formats import get_format
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "log.jsonl"
    >>> _ = path.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\\n")
    >>> records, problems, _ = read_file(Source.open(path), get_format("promptkit"))
    >>> len(records), problems
    (1, [])
    """
    last = {} if last is None else last
    records: list[RequestRecord] = []
    problems: list[LoadProblem] = []
    for item in read_items(fmt, source):
        if isinstance(item, RequestRecord):
            item, mended = mend_identifiers(item)
            if mended:
                problems.append(LoadProblem(item.file or str(source.path), item.line, mended))
            item = intern_messages(last.get(item.session), with_inferred_provider(item))
            last[item.session] = item
            records.append(item)
        else:
            problems.append(item)
    path = str(source.path)
    if not records and not any(p.file == path for p in problems):
        problems.append(LoadProblem(path, None, f"no requests in this {fmt.name} log"))
    reordered: list[str] = []
    if in_time_order:
        slots: dict[str, list[int]] = defaultdict(list)
        for k, r in enumerate(records):
            slots[r.session].append(k)
        for session, places in slots.items():
            group, _, moved = order_session([records[k] for k in places])
            if moved:
                reordered.append(session)
            for k, r in zip(places, group, strict=True):
                records[k] = r
    return records, problems, reordered


def format_of(
    source: Source,
    fmt: LogFormat | None = None,
    *,
    named: bool = True,
    problems: list[LoadProblem] | None = None,
    formats: Sequence[LogFormat] | None = None,
) -> LogFormat | None:
    """The format :func:`read_logs` reads ``source`` with: ``fmt`` when forced, else the one sniffed
    (among ``formats``, default the registry's). A file of no known format raises
    :class:`~promptkit.errors.LogFileError` when it was ``named`` explicitly; found in a directory, it
    is a problem added to ``problems`` and None."""
    return choose_format(
        source, fmt, named=named, problems=problems if problems is not None else [], formats=formats
    )


def reordered_notes(reordered: list[str]) -> list[str]:
    """The note :func:`read_logs` gives on sessions whose calls it put in time order (none: no note)."""
    notes: list[str] = []
    session_order_notes([], reordered, notes)
    return notes


@attrs.define(slots=True, eq=False)
class LogStream:
    """Request logs read by streaming: one pass indexes them (where each session ends, the problems,
    which formats), then :meth:`sessions` reads them again and yields each session's records as soon as
    its last record has been read, in time order and numbered as :func:`read_logs` does. Memory then
    holds the sessions still open in the file order (one, for a log written session by session) rather
    than every record. Made by :func:`stream_logs`.

    ``problems``, ``formats`` and ``records`` (how many records) are known after indexing; ``notes``
    gains the session notes (merged files, reordered calls) once :meth:`sessions` is exhausted.
    ``timed`` maps each recognised provider (None: none recognised) to whether all its records have a
    timestamp; ``first`` to the position of its first record.
    """

    files: list[tuple[Path, LogFormat]]
    problems: tuple[LoadProblem, ...]
    formats: dict[str, int]
    notes: list[str]
    records: int
    timed: dict[str | None, bool]
    first: dict[str | None, int]
    _ends: dict[str, int]
    # each file's size, modification time and inode when it was indexed: the second pass checks them
    _stamps: dict[Path, tuple[int, int, int]] = attrs.field(factory=dict)

    def _unchanged(self, path: Path) -> None:
        """Raise :class:`~promptkit.errors.LogFileError` when ``path`` is not the file that was indexed (a
        log rewritten between the passes, even to the same number of records, would be read wrong)."""
        if path in self._stamps and _stamp(path) != self._stamps[path]:
            raise LogFileError(
                path,
                "changed while it was analyzed (its size, time or inode differ from the first pass of "
                "--stream); analyze it again once it is written",
            )

    def positioned(self) -> Iterator[list[tuple[int, RequestRecord]]]:
        """Each session as ``(position, record)`` pairs: ``position`` is where :func:`read_logs` would
        put the record in its ``records`` (a session's calls fill its places in time order)."""
        open_sessions: dict[str, list[tuple[int, RequestRecord]]] = {}
        first_seen: dict[str, int] = {}
        split: list[tuple[int, str, list[str]]] = []
        reordered: list[tuple[int, str]] = []

        def close(session: str) -> list[tuple[int, RequestRecord]]:
            items = open_sessions.pop(session)
            began = first_seen.pop(session)  # memory: only open sessions are remembered
            group, files, moved = order_session([r for _, r in items])
            if files is not None:
                split.append((began, session, files))
            if moved:
                reordered.append((began, session))
            return [(pos, r) for (pos, _), r in zip(items, group, strict=True)]

        pos = 0
        for path, fmt in self.files:
            self._unchanged(path)
            for item in fmt.read(Source.open(path)):
                if not isinstance(item, RequestRecord):
                    continue
                item = mend_identifiers(item)[0]  # said on the first pass
                session = item.session
                items = open_sessions.setdefault(session, [])
                first_seen.setdefault(session, pos)
                item = intern_messages(items[-1][1] if items else None, with_inferred_provider(item))
                items.append((pos, item))
                if self._ends.get(session) == pos:
                    yield close(session)
                pos += 1
            self._unchanged(path)
        if pos != self.records:
            raise LogFileError(
                self.files[-1][0] if self.files else Path("."),
                f"changed while being read: {pos} records on the second pass, {self.records} on the first",
            )
        for session in list(open_sessions):
            yield close(session)
        session_order_notes(
            [(s, f) for _, s, f in sorted(split, key=lambda t: t[0])],
            [s for _, s in sorted(reordered)],
            self.notes,
        )

    def sessions(self) -> Iterator[tuple[RequestRecord, ...]]:
        """Each session's records (time order, numbered), one session at a time."""
        for items in self.positioned():
            yield tuple(r for _, r in sorted(items, key=lambda t: t[0]))


def _stamp(path: Path) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns, st.st_ino


def stream_logs(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    format: str | LogFormat | None = None,
) -> LogStream:
    """Index the request logs under ``paths`` for streaming (the same files, formats, problems and
    errors as :func:`read_logs`); see :class:`LogStream`.

    >>> stream = stream_logs("fixtures/real-logs/deepseek")
    >>> stream.records, sum(len(s) for s in stream.sessions())
    (154, 154)
    """
    from promptkit.providers.registry import infer_record_provider

    fmt = get_format(format) if isinstance(format, str) else format
    problems: list[LoadProblem] = []
    files, passed = find_log_files(paths, problems=problems)
    chosen_files: list[tuple[Path, LogFormat]] = []
    stamps: dict[Path, tuple[int, int, int]] = {}
    formats: Counter[str] = Counter()
    ends: dict[str, int] = {}
    timed: dict[str | None, bool] = {}
    first: dict[str | None, int] = {}
    pos = 0
    for path, named in files:
        source = _open_source(path, named=named, problems=problems)
        if source is None:
            continue
        chosen = choose_format(source, fmt, named=named, problems=problems)
        if chosen is None:
            continue
        formats[chosen.name] += 1
        chosen_files.append((path, chosen))
        stamps[path] = _stamp(path)
        before = pos
        for item in read_items(chosen, source):
            if isinstance(item, RequestRecord):
                item, mended = mend_identifiers(item)
                if mended:
                    problems.append(LoadProblem(item.file or str(path), item.line, mended))
                ends[item.session] = pos
                name = infer_record_provider(item)
                timed[name] = timed.get(name, True) and item.timestamp is not None
                first.setdefault(name, pos)
                pos += 1
            else:
                problems.append(item)
        if pos == before and not any(p.file == str(path) for p in problems):
            problems.append(LoadProblem(str(path), None, f"no requests in this {chosen.name} log"))
    notes: list[str] = []
    notes.extend(passed_notes(passed))
    return LogStream(chosen_files, tuple(problems), dict(formats), notes, pos, timed, first, ends, stamps)


def iter_sessions(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    format: str | LogFormat | None = None,
) -> Iterator[tuple[RequestRecord, ...]]:
    """Each session's records under ``paths``, one session at a time (see :func:`stream_logs`); load
    problems are not reported here (use :func:`stream_logs` for them).

    >>> [len(s) for s in iter_sessions("fixtures/real-logs/deepseek")]
    [74, 42, 38]
    """
    return stream_logs(paths, format=format).sessions()


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
        record = RequestRecord(request, session, index=i, timestamp=ts, completion=completion, layout=layout)
        records.append(mend_identifiers(record)[0])
    return tuple(records)
