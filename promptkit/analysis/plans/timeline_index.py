"""The first pass of the streamed simulated view (:mod:`promptkit.analysis.plans.timeline`): every log
file read once, keeping only a few numbers per record, so that the second pass can replay the records
in time order while it holds only what the cache can still read.

For each record, in read order (file after file, line after line), :func:`index_logs` keeps its
session (a code), its timestamp, its provider group and whether it is a call of a conversation tree;
from them it works out what :func:`~promptkit.formats.read_logs` and the local plan would do with the
whole list in memory: the record's place in the load order (``pos``: a session's calls fill the
places its records had, in time order), its number in its session (``index``), the order the
simulated view replays it in (``rank``: by time, then place) and, per file, how far its records are
from that order.

**Disorder.** Each file is read in order with a look-ahead window of :data:`LOOKAHEAD` records: a
record may come up to that many records after one it precedes in time. That covers a log written
nearly in time order (streamed duplicates, parallel tool calls, sub-agent calls in the main thread's
file). A file whose records are out of order by more is still replayed in exact time order: the
second pass holds the whole file for it, and a note names the file, the line of its first such record
and how many there are (:attr:`TimelineIndex.notes`): never a silent reorder, and memory is only
bounded for the files within the window.
"""

from __future__ import annotations

import os
from array import array
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs
import numpy as np

from promptkit.errors import LogFileError
from promptkit.formats.base import LogFormat, Source, read_items
from promptkit.formats.discovery import find_log_files, format_of, passed_notes, session_order_notes
from promptkit.formats.fields import mend_identifiers
from promptkit.layout import LoadProblem, RequestRecord

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.providers.registry import ProviderProfile

__all__ = ["LOOKAHEAD", "FileSpan", "TimelineIndex", "index_logs", "stamp_of"]

#: The look-ahead window of the streamed simulated view, in records per file (see the module's doc).
LOOKAHEAD: Final[int] = 1024


def stamp_of(path: Path) -> tuple[int, int, int]:
    """A file's size, modification time and inode: the second pass checks the file is unchanged."""
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns, st.st_ino


@attrs.frozen(slots=True)
class FileSpan:
    """One log file of the index: its path and format, its records' read numbers ``start`` to
    ``stop`` (exclusive), the replay rank of its earliest record, the look-ahead its records need
    (:data:`LOOKAHEAD`, or the whole file when they are out of order by more) and its stamp."""

    path: Path
    format: LogFormat
    start: int
    stop: int
    first_rank: int
    window: int
    stamp: tuple[int, int, int]


@attrs.frozen(slots=True, eq=False)
class TimelineIndex:
    """What the first pass found (:func:`index_logs`).

    Per record, by read number ``r``: ``pos[r]`` (its place in the load order), ``index[r]`` (its
    number in its session), ``rank[r]`` (its turn in the replay), ``group[r]`` (its provider group's
    number in ``groups``), ``last[r]`` (whether it is its session's last call). ``groups``: the
    provider group keys (a name, or the profile passed), in the order the load order meets them;
    ``timed``: per group, whether every record has a timestamp; ``defaulted``: how many sessions no
    provider was recognised for (they go to the default one); ``tree``: whether every record is a call
    of a conversation tree (the default view is then the simulated one). ``problems`` and ``notes``
    are those :func:`~promptkit.formats.read_logs` gives, and the notes on files out of time order.
    """

    files: tuple[FileSpan, ...]
    pos: np.ndarray
    index: np.ndarray
    rank: np.ndarray
    group: np.ndarray
    last: np.ndarray
    groups: tuple[Any, ...]
    timed: tuple[bool, ...]
    defaulted: int
    tree: bool
    problems: tuple[LoadProblem, ...]
    formats: dict[str, int]
    notes: tuple[str, ...]

    @property
    def records(self) -> int:
        """How many records the logs hold."""
        return int(self.pos.shape[0])


@attrs.define(slots=True)
class _Scan:
    """What the first pass collects, record by record."""

    sessions: dict[str, int] = attrs.field(factory=dict)
    # memory: typed arrays, 8 bytes a record each (a list holds a boxed number per record)
    session: array[int] = attrs.field(factory=lambda: array("q"))
    times: array[float] = attrs.field(factory=lambda: array("d"))
    untimed: set[int] = attrs.field(factory=set)  # sessions with a record without a timestamp
    group: array[int] = attrs.field(factory=lambda: array("q"))
    groups: dict[Any, int] = attrs.field(factory=dict)
    lines: array[int] = attrs.field(factory=lambda: array("q"))
    files_of: dict[int, list[str]] = attrs.field(factory=dict)  # session -> files, in first-seen order
    tree: bool = True
    notes: list[str] = attrs.field(factory=list)
    defaulted: set[str] = attrs.field(factory=set)  # sessions no provider was recognised for

    def add(self, record: RequestRecord, key: Any, defaulted: bool) -> None:
        code = self.sessions.setdefault(record.session, len(self.sessions))
        if defaulted:
            self.defaulted.add(record.session)
        self.session.append(code)
        self.times.append(record.timestamp if record.timestamp is not None else np.nan)
        if record.timestamp is None:
            self.untimed.add(code)
        self.group.append(self.groups.setdefault(key, len(self.groups)))
        self.lines.append(record.line if record.line is not None else 0)
        if record.file is not None:
            files = self.files_of.setdefault(code, [])
            if record.file not in files:
                files.append(record.file)
        self.tree = self.tree and bool(record.meta.get("conversation_tree"))
        for note in record.meta.get("load_notes", ()):
            if note not in self.notes:
                self.notes.append(note)


def _read_file(
    path: Path, fmt: LogFormat, scan: _Scan, problems: list[LoadProblem], group_of: Any
) -> int | None:
    """Scan one file's records into ``scan``; return how many there were (None: the scan stopped at a
    record the streamed plan cannot replay: one without a timestamp)."""
    count = 0
    items = read_items(fmt, Source.open(path))
    try:
        for item in items:
            if isinstance(item, RequestRecord):
                item, mended = mend_identifiers(item)
                if mended:
                    problems.append(LoadProblem(item.file or str(path), item.line, mended))
                scan.add(item, *group_of(item))
                count += 1
                if scan.untimed:
                    return None
            else:
                problems.append(item)
    finally:
        closing = getattr(items, "close", None)
        if closing is not None:
            closing()
    if not count and not any(p.file == str(path) for p in problems):
        problems.append(LoadProblem(str(path), None, f"no requests in this {fmt.name} log"))
    return count


def _session_places(scan: _Scan) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """``pos``, ``index`` and ``last`` of every record, as :func:`~promptkit.formats.read_logs` orders
    each session (time order where every call has a timestamp, else read order, in the places its
    records had), and the sessions it reordered (in first-seen order)."""
    session = np.frombuffer(scan.session, np.int64)
    times = np.frombuffer(scan.times, np.float64)
    n = session.shape[0]
    if not n:
        empty = np.zeros(0, np.int64)
        return empty, empty, np.zeros(0, bool), []
    # read order within each session, then (where the session is timed) a stable sort by time
    by_read = np.lexsort((np.arange(n), session))
    timed = np.ones(len(scan.sessions), bool)
    timed[list(scan.untimed)] = False
    key = np.where(timed[session], times, 0.0)
    by_time = np.lexsort((np.arange(n), key, session))  # stable: ties keep the read order
    pos = np.empty(n, np.int64)
    pos[by_time] = by_read  # the k-th call in time takes the k-th place the session's records had
    starts = np.searchsorted(session[by_read], np.arange(len(scan.sessions)))
    index = np.empty(n, np.int64)
    index[by_time] = np.arange(n) - np.repeat(starts, np.diff(np.append(starts, n)))
    last = np.zeros(n, bool)
    last[by_time[np.append(starts[1:], n) - 1]] = True
    moved = np.flatnonzero(by_time != by_read)
    names = list(scan.sessions)
    reordered = list(dict.fromkeys(names[c] for c in session[by_read[moved]])) if moved.size else []
    first_seen = {names[c]: k for k, c in enumerate(dict.fromkeys(session.tolist()))}
    reordered.sort(key=first_seen.__getitem__)
    return pos, index, last, reordered


def _window(ranks: np.ndarray) -> int:
    """The first record (offset in its file) that comes more than :data:`LOOKAHEAD` records after one
    whose turn is later, or -1 when there is none (then a look-ahead of that many records replays the
    file in exact order: a popped record is never later than one still to be read)."""
    if ranks.shape[0] <= LOOKAHEAD + 1:
        return -1
    earlier = np.maximum.accumulate(ranks[: -LOOKAHEAD - 1])
    late = np.flatnonzero(ranks[LOOKAHEAD + 1 :] < earlier)
    return int(late[0]) + LOOKAHEAD + 1 if late.size else -1


def index_logs(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    fmt: LogFormat | None,
    provider: str | ProviderProfile | None,
) -> TimelineIndex | None:
    """The first pass over the logs under ``paths`` (``fmt``: a forced format; ``provider``: one group
    for every record, else a group per recognised provider, and the default one): see
    :class:`TimelineIndex`. Files, formats, problems and errors are those of
    :func:`~promptkit.formats.read_logs`. None where the pass stopped early, at the first record the
    streamed plan cannot replay (one without a timestamp: the analysis then replays in load order).
    perf: the loaded analysis that then runs reads every file again; a pass read to the end
    first cost a 46 MB history of Codex and Claude Code files 8 of its 13 s (jobs40's profile)."""
    from promptkit.analysis.spec import DEFAULT_PROVIDER
    from promptkit.providers.registry import infer_record_provider

    def group_of(record: RequestRecord) -> tuple[Any, bool]:
        if provider is not None:
            return (provider if isinstance(provider, str) else ("profile", id(provider))), False
        name = infer_record_provider(record)
        return (name, False) if name is not None else (DEFAULT_PROVIDER, True)

    problems: list[LoadProblem] = []
    found, passed = find_log_files(paths, problems=problems)
    scan = _Scan()
    formats: Counter[str] = Counter()
    spans: list[tuple[Path, LogFormat, int, int, tuple[int, int, int]]] = []
    for path, named in found:
        try:
            source = Source.open(path)
        except LogFileError as exc:
            if named:
                raise
            problems.append(LoadProblem(str(path), None, f"{exc.reason}; skipped"))
            continue
        chosen = format_of(source, fmt, named=named, problems=problems)
        if chosen is None:
            continue
        formats[chosen.name] += 1
        start = len(scan.session)
        stamp = stamp_of(path)
        count = _read_file(path, chosen, scan, problems, group_of)
        if count is None:
            return None
        spans.append((path, chosen, start, start + count, stamp))
    return _finish(scan, spans, problems, formats, passed_notes(passed), provider)


def _finish(
    scan: _Scan,
    spans: list[tuple[Path, LogFormat, int, int, tuple[int, int, int]]],
    problems: list[LoadProblem],
    formats: Counter[str],
    passed: list[str],
    provider: Any,
) -> TimelineIndex:
    """The index from what the pass scanned: places, ranks, look-ahead windows and notes."""
    pos, index, last, reordered = _session_places(scan)
    n = pos.shape[0]
    times = np.frombuffer(scan.times, np.float64)
    rank = np.empty(n, np.int64)
    rank[np.lexsort((pos, np.nan_to_num(times, nan=0.0)))] = np.arange(n)
    notes = scan.notes + passed
    names = list(scan.sessions)
    split = [(names[c], files) for c, files in scan.files_of.items() if len(files) > 1]
    session_order_notes(split, reordered, notes)
    files: list[FileSpan] = []
    for path, fmt, start, stop, stamp in spans:
        ranks = rank[start:stop]
        late = _window(ranks)
        window = LOOKAHEAD
        if late >= 0:
            window = stop - start
            count = int(
                np.count_nonzero(ranks[LOOKAHEAD + 1 :] < np.maximum.accumulate(ranks[: -LOOKAHEAD - 1]))
            )
            notes.append(
                f"{path}: line {scan.lines[start + late]}: {count} record(s) out of time order by more than "
                f"{LOOKAHEAD} records in the file; the file was held whole to replay it in time order"
            )
        first = int(ranks.min()) if stop > start else n
        files.append(FileSpan(path, fmt, start, stop, first, window, stamp))
    group = np.frombuffer(scan.group, np.int64)
    keys = list(scan.groups)
    # the groups in the order the load order meets them (the records at places 0, 1, ...)
    at_place = np.empty(n, np.int64)
    at_place[pos] = group
    order = list(dict.fromkeys(at_place.tolist()))
    renumber = np.empty(max(len(keys), 1), np.int64)
    renumber[order] = np.arange(len(order))
    group = renumber[group] if n else group
    times_ok = ~np.isnan(times)
    timed = tuple(bool(times_ok[group == g].all()) for g in range(len(order)))
    groups = tuple(provider if provider is not None else keys[g] for g in order)
    return TimelineIndex(
        tuple(files), pos, index, rank, group, last, groups, timed, len(scan.defaulted), scan.tree and n > 0,
        tuple(problems), dict(formats), tuple(notes),
    )  # fmt: skip
