"""Scale-out by file: the workers read, parse and analyze their own log files; the coordinator ships
paths and joins columnar pieces.

:func:`~promptkit.analysis.api.analyze` with ``jobs`` > 1 or ``engine="dask"`` runs this plan
(:func:`analyze_files`). One task per chunk of consecutive files of the listing (:func:`plan_chunks`:
about four a worker, at most :data:`CHUNK_MAX_BYTES` of logs each), on any
:class:`~promptkit.analysis.executors.Executor`; a chunk's files are read one after the other and
analyzed as one load, so below "the file" means the chunk's files:

- the coordinator lists the files and sends a worker the paths, never records; it reads none of a
  file found in a directory (the worker sniffs its format), and sniffs a file named explicitly first,
  so that one of no known format fails before any work;
- the worker reads and parses the file (each session's calls in time order, as
  :func:`~promptkit.formats.read_logs` puts them), groups its records by provider and, for each group:
  in the consecutive view analyzes them (sessions are independent) and returns the requests and
  composition frames as Arrow IPC bytes; in the simulated view tokenizes them and returns per-session
  token delta streams in columns (each new token once: what a request adds to its session's previous
  one) with each request's cache plan and head in columns too, its composition rows and the columns
  of its row that need no cache outcome as Arrow IPC, and the file's records, pickled once in the
  worker (a session's interned messages are written once);
- the coordinator puts the pieces at their places in the load order (a file's positions follow the
  files before it) and finishes each provider's frames. In the simulated view it runs the replay
  over the delta streams and makes the columns that need its outcome
  (:mod:`promptkit.analysis.plans.coordinator`), without a tokenizer of its own (it never loads one, in either
  view: it names the workers') and without reading a record: a worker attributes the divergences to
  their messages and decodes their excerpts afterwards, from the files' pickles: a worker of this
  machine (:class:`~promptkit.analysis.executors.ProcessPool`) writes its file's to a temporary folder
  that the analysis removes when it ends, and the coordinator passes the path on; a Dask worker, which
  may be on another machine, keeps them (a future: the cluster moves them to the worker that needs
  them, never through the coordinator).

A worker of this machine (``executor.shares_files``) leaves what a later reader needs in a temporary
folder that the analysis removes when it ends: the simulated view's records and, when this process
has pyarrow (the ``arrow`` extra), its frames as uncompressed Arrow files and its delta streams'
arrays, which the coordinator memory-maps instead of receiving and decoding them (:func:`~promptkit.analysis.plans.transport.frame_in`,
:func:`~promptkit.analysis.plans.transport.arrays_in`). A worker holds one file at a time; the coordinator never unpickles a record. The
result is the one of ``jobs=1``: a session that spans files (its calls must be merged before any is
analyzed) makes the plan step back to the records-shipping plan of
:func:`~promptkit.analysis.api.analyze_requests`, and a group whose records turn out not all timed
is re-analyzed without times in the files that assumed them.

Example::

    >>> from promptkit.analysis.executors import ProcessPool
    >>> with ProcessPool(2) as pool:                                              # doctest: +SKIP
    ...     result = analyze_files("fixtures/real-logs/deepseek", executor=pool)
"""

from __future__ import annotations

import contextlib
import os
import pickle
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Final, Protocol

import attrs

from promptkit.analysis.assemble import (
    VIEW_NOTE,
    ChunkResult,
    combine_groups,
    composition_of,
    defaulted_note,
    finish_group,
)
from promptkit.analysis.attribute import attribute_records, read_by
from promptkit.analysis.plans.coordinator import replay_shipped
from promptkit.analysis.plans.local import run_local
from promptkit.analysis.plans.transport import (
    RecordBlobs,
    arrays_in,
    arrays_out,
    files_holding,
    frame_in,
    frame_out,
    maps_arrow,
    records_at,
    spill_records,
    to_ipc,
)
from promptkit.analysis.runtime import gc_paused
from promptkit.analysis.spec import (
    DEFAULT_PROVIDER,
    AnalysisSpec,
    DescribedContext,
    context_for,
    default_view,
    profile_and_model,
)
from promptkit.analysis.wire import DeltaReader, DeltaStream, Divergent, tokenize_chunk
from promptkit.formats.base import Source, available_formats, get_format
from promptkit.formats.discovery import (
    LogListing,
    format_of,
    list_log_files,
    passed_notes,
    read_file,
    reordered_notes,
)
from promptkit.layout import LoadProblem, RequestRecord
from promptkit.providers.registry import ProviderProfile, infer_record_provider
from promptkit.tokens.cache_models import CacheModel

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.analysis.executors import Executor
    from promptkit.analysis.result import AnalysisResult
    from promptkit.formats.base import LogFormat

__all__ = [
    "CHUNK_MAX_BYTES",
    "TASKS_PER_WORKER",
    "FileOptions",
    "FilePiece",
    "GroupPiece",
    "analyze_files",
    "attribute_files",
    "chunk_task",
    "chunk_task_held",
    "file_task",
    "file_task_held",
    "finish_group_task",
    "plan_chunks",
]

_Key = str | ProviderProfile  # a provider group: the name (or profile) its records are analyzed with

#: About how many tasks the file plan cuts the listing into per worker (:func:`plan_chunks`): enough for
#: the workers to finish together, few enough that a task's fixed costs stay small.
TASKS_PER_WORKER: Final[int] = 4
#: The most bytes of logs one task reads (unless one file is larger): what a worker holds at once.
CHUNK_MAX_BYTES: Final[int] = 2 * 1024 * 1024


@attrs.frozen(slots=True)
class FileOptions:
    """The analysis' settings, as a worker needs them (picklable)."""

    provider: str | ProviderProfile | None
    tokenizer: Any
    render: Any
    cache_model: str | CacheModel | None
    view: str | None  # None: each file's own default (:func:`~promptkit.analysis.spec.default_view`)
    # the formats a worker sniffs a file found in a directory with: the caller's registry, in order (a
    # format registered at run time is the caller's only); None: the worker's own (see _shippable)
    formats: tuple[LogFormat, ...] | None = None
    # workers of this machine: the folder each worker leaves its file's records in (simulated view, see
    # spill) and, when ``mapped``, its frames and delta streams (frame_out, arrays_out); None: bytes
    spill: str | None = None
    # the coordinator maps Arrow files (see _mapped): a worker writes its large frames (composition rows;
    # the requests of the consecutive view) to ``spill`` as Arrow files, not as bytes through the pipe
    mapped: bool = False


@attrs.frozen(slots=True)
class GroupPiece:
    """One provider group of one file, as the worker returns it. Positions are the file's own (0 =
    its first record). ``requests`` / ``composition``: Arrow IPC bytes, or the path of the Arrow file
    the worker wrote them to (:func:`frame_out`; ``requests``: consecutive view only); ``deltas``: the
    token delta streams (simulated view)."""

    key: _Key
    first: int
    count: int
    timed: bool
    requests: bytes | str | None
    composition: bytes | str | None
    problems: tuple[tuple[int, LoadProblem], ...]
    writes_nothing: int
    thinking: dict[str, int]
    mended: tuple[tuple[int, str], ...]
    deltas: DeltaStream | str | None  # or the path of the file holding them (arrays_out)
    names: tuple[str, str]  # the tokenizer's and the render's names
    # simulated view: the frame of wire.ChunkFacts (Arrow IPC) and its ruler inputs; ``problems`` and
    # ``mended`` are then its own
    facts: bytes | None = None
    ruler_inputs: dict[int, tuple[Any, str | None]] = attrs.field(factory=dict)


@attrs.frozen(slots=True)
class FilePiece:
    """What a worker returns for one task (a file, or a chunk of consecutive files of the listing read
    as one: :func:`chunk_task`): its record count, load problems, sessions (in first-seen order), the
    sessions whose calls it reordered and those no provider was recognised for, and one piece per
    provider group (positions: the task's own, its first file's first record 0)."""

    records: int
    problems: tuple[LoadProblem, ...]
    sessions: tuple[str, ...]
    reordered: tuple[str, ...]
    defaulted: tuple[str, ...]
    groups: tuple[GroupPiece, ...]
    # simulated view: the records, one pickle (below), or the file holding it, or (in the coordinator) the
    # future of a Dask worker that holds it
    loaded: bytes | str | Any = b""
    view: str | None = None  # the view the file was analyzed in (None: it has no records)
    # the format each file of the task was read in (None: none known), in the task's order
    formats: tuple[LogFormat | None, ...] = ()
    # what the format noted while reading (a resumed session's copies left out), as read_logs collects them
    notes: tuple[str, ...] = ()
    spans: bool = False  # a session of one of the task's files has calls in another of them


def _shared(options: FileOptions) -> str | None:
    """The shared folder a worker writes its large frames and delta streams to (None: it returns them)."""
    return options.spill if options.mapped else None


@gc_paused()  # perf: a worker's task (see promptkit.analysis.runtime)
def attribute_files(
    spec: AnalysisSpec, blobs: RecordBlobs, divergent: Sequence[Divergent]
) -> list[tuple[Any, ...]]:
    """Stage 3 on a worker (:func:`~promptkit.analysis.attribute.attribute_records`), the records read
    from the files' pickles ``blobs`` (:func:`~promptkit.analysis.plans.transport.files_holding`): the
    coordinator passes them on without unpickling them."""
    return attribute_records(spec, records_at(blobs, read_by(divergent)), divergent)


def _group_piece(
    options: FileOptions, key: _Key, items: list[tuple[int, RequestRecord]], untimed: bool
) -> GroupPiece:
    """Analyze (consecutive) or tokenize (simulated) one provider group of a file."""

    timed = all(r.timestamp is not None for _, r in items)
    spec = AnalysisSpec(
        key,
        options.tokenizer,
        options.render,
        options.cache_model,
        options.view or "consecutive",
        timed and not untimed,
    )
    ctx = context_for(spec)
    names = (ctx.tokenizer_name, ctx.render_name)
    if options.view != "consecutive":  # phase 1: the token deltas, and the composition rows as Arrow
        # and the rows' columns that need no cache outcome: the coordinator reads no record
        # (promptkit.analysis.plans.coordinator)
        phase1 = tokenize_chunk(spec, items)
        composition = frame_out(phase1.composition, _shared(options))
        facts = phase1.facts
        return GroupPiece(
            key,
            items[0][0],
            len(items),
            timed,
            None,
            composition,
            tuple(facts.problems),
            0,
            {},
            tuple(facts.mended),
            arrays_out(phase1.deltas, _shared(options)),
            names,
            to_ipc(facts.frame),
            facts.ruler_inputs,
        )
    part = run_local(ctx, items)
    return GroupPiece(
        key,
        items[0][0],
        len(items),
        timed,
        frame_out(part.requests, _shared(options)),
        frame_out(composition_of(part), _shared(options)),
        tuple(part.problems),
        part.writes_nothing,
        part.thinking,
        tuple(part.mended),
        None,
        names,
    )


def _read_chunk(
    options: FileOptions, files: Sequence[tuple[str, LogFormat | None]]
) -> tuple[list[RequestRecord], list[LoadProblem], list[str], list[LogFormat | None], bool]:
    """The records of ``files`` read one after the other (each file's sessions' calls in time order),
    with their load problems, reordered sessions, each file's format (a file found in a directory, None,
    is sniffed here: one of no known format adds the problem that says so) and whether a session has
    calls in two of the files."""
    records: list[RequestRecord] = []
    problems: list[LoadProblem] = []
    reordered: list[str] = []
    formats: list[LogFormat | None] = []
    owner: dict[str, int] = {}  # session -> the file it was first seen in
    spans = False
    for k, (path, fmt) in enumerate(files):
        if fmt is None:
            fmt = format_of(Source.open(path), None, named=False, problems=problems, formats=options.formats)
            if fmt is None:
                formats.append(None)
                continue
        got, found, moved = read_file(Source.open(path), fmt, in_time_order=True)
        for r in got:
            spans = spans or owner.setdefault(r.session, k) != k
        records.extend(got)
        problems.extend(found)
        reordered.extend(moved)
        formats.append(fmt)
    return records, problems, reordered, formats, spans


@gc_paused()  # perf: a worker holds a chunk's records while it builds many objects (api.analyze's reason)
def chunk_task(
    options: FileOptions,
    files: Sequence[tuple[str, LogFormat | None]],
    untimed: frozenset[_Key] = frozenset(),
) -> FilePiece:
    """A worker's task: read and parse the log files ``files`` (consecutive files of the listing, each
    with its format; None: a file found in a directory, sniffed here, perf: the coordinator reads none
    of it) and analyze (or tokenize) their records as one load (``untimed``: the groups to analyze
    without times, as some record of theirs elsewhere has none). A file of no known format is a
    problem of the piece. perf: one task per chunk of files, not per file: a task's fixed costs (its
    frames built, written and read back, its pickles, the pool's round trip: about 5 ms) were most of
    the work for the small files of an agent's history (:func:`plan_chunks`)."""

    records, problems, reordered, formats, spans = _read_chunk(options, files)
    if options.view is None:  # the view the records call for (the coordinator checks that all agree)
        options = attrs.evolve(options, view=default_view(records))
    groups: dict[_Key, list[tuple[int, RequestRecord]]] = {}
    defaulted: dict[str, None] = {}
    for k, r in enumerate(records):
        name = options.provider if options.provider is not None else infer_record_provider(r)
        if name is None:
            name = DEFAULT_PROVIDER
            defaulted[r.session] = None
        groups.setdefault(name, []).append((k, r))
    pieces = tuple(_group_piece(options, key, items, key in untimed) for key, items in groups.items())
    sessions = tuple(dict.fromkeys(r.session for r in records))
    # simulated view: the records go back for phase 2 (the messages a divergence is read from). One
    # pickle holds them all, and the loader interned each session's repeated messages (and tools): each
    # message object is serialized once, so what is shipped grows with the new content, not with the
    # prompts (a log that repeats the conversation on every line is parsed here, once). perf: pickled
    # here, so that the coordinator receives bytes, or the path of the file they were written to (spill):
    # it passes them on to the worker that reads the divergences' messages without unpickling them
    # (promptkit.analysis.plans.coordinator)
    loaded: bytes | str = b""
    if options.view != "consecutive" and records:
        loaded = pickle.dumps(tuple(records), protocol=5)
        if options.spill is not None:
            loaded = spill_records(options.spill, loaded)
    view = options.view if records else None
    noted = tuple(dict.fromkeys(n for r in records for n in r.meta.get("load_notes", ())))
    return FilePiece(
        len(records),
        tuple(problems),
        sessions,
        tuple(reordered),
        tuple(defaulted),
        pieces,
        loaded,
        view,
        tuple(formats),
        noted,
        spans,
    )


def file_task(
    options: FileOptions, path: str, fmt: LogFormat | None, untimed: frozenset[_Key] = frozenset()
) -> FilePiece:
    """:func:`chunk_task` of the one file at ``path``."""
    return chunk_task(options, ((path, fmt),), untimed)


def chunk_task_held(
    options: FileOptions, files: Sequence[tuple[str, LogFormat | None]]
) -> tuple[FilePiece, bytes]:
    """:func:`chunk_task`, its piece without the records, and the records (which a Dask cluster keeps on
    the worker: :meth:`~promptkit.analysis.executors.DaskExecutor.map_held`)."""
    piece = chunk_task(options, files)
    assert not isinstance(piece.loaded, str)  # no folder to write to: they are bytes
    return attrs.evolve(piece, loaded=b""), piece.loaded


def file_task_held(options: FileOptions, path: str, fmt: LogFormat | None) -> tuple[FilePiece, bytes]:
    """:func:`chunk_task_held` of the one file at ``path``."""
    return chunk_task_held(options, ((path, fmt),))


def plan_chunks(sizes: Sequence[int], workers: int) -> list[range]:
    """The tasks of a listing of files of ``sizes`` bytes for ``workers`` workers: runs of consecutive
    files (so that a task's positions follow the ones before it), each filled up to its share of the
    bytes (about :data:`TASKS_PER_WORKER` tasks a worker) and never past :data:`CHUNK_MAX_BYTES` unless one
    file is larger (a worker holds a task's records at once: memory per worker stays flat however large
    the history).

    >>> plan_chunks([10] * 8, 1)
    [range(0, 2), range(2, 4), range(4, 6), range(6, 8)]
    >>> plan_chunks([100, 1, 1, 1], 1)
    [range(0, 1), range(1, 4)]
    """
    target = min(CHUNK_MAX_BYTES, max(1, -(-sum(sizes) // (TASKS_PER_WORKER * max(1, workers)))))
    chunks: list[range] = []
    start, held = 0, 0
    for k, size in enumerate(sizes):
        if k > start and held + size > target:
            chunks.append(range(start, k))
            start, held = k, 0
        held += size
    if start < len(sizes):
        chunks.append(range(start, len(sizes)))
    return chunks


def _shifted(piece: GroupPiece, offset: int) -> ChunkResult:
    """A consecutive group piece as the engine's partial, its positions moved to the load order's."""

    assert piece.requests is not None and piece.composition is not None
    requests = frame_in(piece.requests, offset)
    composition = frame_in(piece.composition, offset)
    return ChunkResult(
        requests,
        composition,
        [(pos + offset, problem) for pos, problem in piece.problems],
        piece.writes_nothing,
        {name: pos + offset for name, pos in piece.thinking.items()},
        [(pos + offset, source) for pos, source in piece.mended],
    )


def _tasks(
    listing: LogListing, fmt: str | LogFormat | None
) -> tuple[list[tuple[str, LogFormat | None]], list[str], list[LoadProblem]]:
    """The files of ``listing`` to read, each with its format (None: a file found in a directory, which
    its worker sniffs), the loader's notes on files passed over, and the directory walk's problems (a
    dangling symlink, a FIFO, an unreadable folder, a file given twice), as
    :func:`~promptkit.formats.read_logs` reports them. A file named explicitly is sniffed here: one of
    no known format raises before any work starts, as :func:`~promptkit.formats.read_logs` does."""

    forced = get_format(fmt) if isinstance(fmt, str) else fmt
    out: list[tuple[str, LogFormat | None]] = []
    for path, named in listing.files:
        chosen = format_of(Source.open(path), forced, named=True, problems=[]) if named else forced
        out.append((str(path), chosen))
    return out, passed_notes(listing.passed), list(listing.problems)


def _shippable(notes: list[str]) -> tuple[LogFormat, ...] | None:
    """The registered log formats, in sniffing order, for the workers to sniff the files found in a
    directory with: a format registered at run time (:func:`~promptkit.formats.register_format`) is
    known here only. None when one cannot be pickled (its functions are not importable by name, e.g.
    defined in a notebook): the workers then sniff with their own registry, and a note in ``notes``
    names the formats they lack."""

    formats = tuple(available_formats().values())
    stuck = []
    for fmt in formats:
        try:
            pickle.dumps(fmt)
        except (pickle.PicklingError, AttributeError, TypeError):
            stuck.append(fmt.name)
    if not stuck:
        return formats
    notes.append(
        f"log format(s) {', '.join(stuck)} cannot be sent to the workers (not importable by name): a file "
        "of them found in a directory is read as of no known format; register them from an importable "
        "module, or analyze with jobs=1"
    )
    return None


@gc_paused()  # perf: the coordinator holds the pieces (and the simulated view's records) as it joins them
def analyze_files(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    executor: Executor,
    format: str | LogFormat | None = None,
    provider: str | ProviderProfile | None = None,
    tokenizer: Any = None,
    render: Any = None,
    cache_model: str | CacheModel | None = None,
    view: str | None = "consecutive",
    progress: bool = False,
    listing: LogListing | None = None,
) -> AnalysisResult | None:
    """Analyze the logs under ``paths`` with one task per file on ``executor`` (see the module
    docstring; ``progress`` shows a bar over the files); None when a session spans files (the caller
    then loads the records and ships them). ``view`` None: the default view of the records
    (``simulated`` when all are conversation trees), chosen by each worker for its file; files that
    chose ``simulated`` are analyzed again when another file's records make it ``consecutive``.
    ``listing``: the files under ``paths`` with their sizes, when the caller listed them already
    (:func:`~promptkit.formats.discovery.list_log_files`)."""
    if listing is None:
        listing = list_log_files(paths)
    files, notes, walked = _tasks(listing, format)
    formats = _shippable(notes) if any(fmt is None for _, fmt in files) else None
    # workers of this machine leave what the coordinator or a later task reads in a temporary folder
    # (removed when the analysis ends, whatever the outcome): the simulated view's records, and the
    # frames as Arrow files when this process maps them
    mapped = executor.shares_files and maps_arrow()
    with _spill_folder(executor, view, mapped) as spill:
        options = FileOptions(provider, tokenizer, render, cache_model, view, formats, spill, mapped)
        chunks = [tuple(files[k] for k in run) for run in plan_chunks(listing.sizes, executor.workers)]
        calls = [(options, chunk) for chunk in chunks]
        results: Any
        if view != "consecutive" and spill is None and executor.holds_results:
            # a Dask cluster: each chunk's records stay on its worker (a future), not sent to the client
            results = (attrs.evolve(p, loaded=kept) for p, kept in executor.map_held(chunk_task_held, calls))
        else:
            results = executor.map(chunk_task, calls)
        pieces = dict(enumerate(_shown(results, chunks, view) if progress else results))
        seen: set[str] = set()
        for piece in pieces.values():
            if piece.spans or seen.intersection(piece.sessions):
                return None  # a session spans files: its calls are merged before any is analyzed
            seen.update(piece.sessions)
        if not seen:
            return None
        if view is None:
            options = _choose_view(pieces, chunks, options, executor)
        if options.view == "consecutive":
            _retime(pieces, chunks, options, executor)
        chosen_view = view is None and options.view == "simulated"
        return _assemble(pieces, notes, options, executor, chosen_view, walked)


def _shown(
    results: Iterable[FilePiece], chunks: Sequence[Sequence[Any]], view: str | None
) -> Iterator[FilePiece]:
    """``results`` with a progress bar over the files of ``chunks`` (a chunk's files counted when its piece
    comes back) and the requests read."""
    from tqdm.auto import tqdm  # imported only when asked for: tqdm.auto warns in a kernel without ipywidgets

    total = sum(len(chunk) for chunk in chunks)
    with tqdm(total=total, desc=f"analyze ({view}, by file)", unit="file", delay=0.5) as bar:
        requests = 0
        for chunk, piece in zip(chunks, results, strict=False):
            requests += piece.records
            bar.set_postfix_str(f"{requests:,} requests", refresh=False)
            bar.update(len(chunk))
            yield piece


def _spill_folder(
    executor: Executor, view: str | None, mapped: bool
) -> contextlib.AbstractContextManager[str | None]:
    """A temporary folder for what the workers leave for a later reader when they run on this machine
    (``executor.shares_files``): the records when the simulated view may be taken (:func:`~promptkit.analysis.plans.transport.spill_records`), the
    Arrow files of their frames when this process maps them (``mapped``: :func:`frame_out`). Else
    None: everything comes back as bytes (a Dask cluster's workers may be on other machines)."""
    if not executor.shares_files or (view == "consecutive" and not mapped):
        return contextlib.nullcontext()
    return tempfile.TemporaryDirectory(prefix="promptkit-pieces-", ignore_cleanup_errors=True)


def _again(
    chunk: Sequence[tuple[str, LogFormat | None]], piece: FilePiece
) -> tuple[tuple[str, LogFormat | None], ...]:
    """The files of ``chunk`` with the formats its piece found (none is sniffed twice)."""
    return tuple((path, fmt) for (path, _), fmt in zip(chunk, piece.formats, strict=True))


def _choose_view(
    pieces: dict[int, FilePiece],
    chunks: Sequence[Sequence[tuple[str, LogFormat | None]]],
    options: FileOptions,
    executor: Executor,
) -> FileOptions:
    """The default view of all the files' records: ``simulated`` when every chunk with records chose it,
    else ``consecutive`` (the chunks that chose ``simulated`` are analyzed again in it)."""
    chosen = {piece.view for piece in pieces.values() if piece.view is not None}
    options = attrs.evolve(options, view="simulated" if chosen == {"simulated"} else "consecutive")
    redo = [k for k, piece in pieces.items() if piece.view not in (None, options.view)]
    calls = [(options, _again(chunks[k], pieces[k])) for k in redo]
    for k, piece in zip(redo, executor.map(chunk_task, calls), strict=True):
        pieces[k] = piece
    return options


def _retime(
    pieces: dict[int, FilePiece],
    chunks: Sequence[Sequence[tuple[str, LogFormat | None]]],
    options: FileOptions,
    executor: Executor,
) -> None:
    """Re-analyze without times the chunks whose group assumed times some other chunk's records lack."""
    timed: dict[_Key, bool] = {}
    for piece in pieces.values():
        for group in piece.groups:
            timed[group.key] = timed.get(group.key, True) and group.timed
    redo = {
        k: frozenset(g.key for g in piece.groups if g.timed and not timed[g.key])
        for k, piece in pieces.items()
    }
    redo = {k: keys for k, keys in redo.items() if keys}
    calls = [(options, _again(chunks[k], pieces[k]), keys) for k, keys in redo.items()]
    for k, piece in zip(redo, executor.map(chunk_task, calls), strict=True):
        pieces[k] = piece


def _assemble(
    pieces: dict[int, FilePiece],
    notes: list[str],
    options: FileOptions,
    executor: Executor,
    chosen_view: bool = False,
    walked: Sequence[LoadProblem] = (),
) -> AnalysisResult:
    """The result from the files' pieces (one per file, by its place in the listing): each group's
    frames finished in load order, then joined
    (``chosen_view``: the simulated view was chosen as the records' default, a note says so; ``walked``:
    the directory walk's problems, first, as :func:`~promptkit.formats.read_logs` lists them)."""

    problems: list[LoadProblem] = list(walked)
    reordered: list[str] = []
    defaulted: set[str] = set()
    groups: dict[_Key, list[tuple[int, GroupPiece]]] = {}
    loaded: list[tuple[int, Any]] = []  # simulated view: each file's records (one pickle) and offset
    noted: list[str] = []  # the formats' notes, first, in file order (as read_logs lists them)
    offset = 0
    for k in sorted(pieces):
        piece = pieces[k]
        noted.extend(n for n in piece.notes if n not in noted)
        problems.extend(piece.problems)
        reordered.extend(piece.reordered)
        if piece.loaded:
            loaded.append((offset, piece.loaded))
        defaulted.update(piece.defaulted)
        for group in piece.groups:
            groups.setdefault(group.key, []).append((offset, group))
        offset += piece.records
    notes[:0] = noted
    notes.extend(reordered_notes(reordered))
    if chosen_view:
        notes.append(VIEW_NOTE)
    if defaulted:
        notes.append(defaulted_note(len(defaulted)))
    order = sorted(groups, key=lambda key: groups[key][0][0] + groups[key][0][1].first)
    shares = [problems if i == 0 else [] for i in range(len(order))]
    # the simulated view's groups are caches of their own: they replay on the (idle) workers, side by
    # side; this process replays the largest only when there are more groups than workers
    away = _replayed_away(order, groups, options, executor)
    futures = {
        key: executor.submit(finish_group_task, key, groups[key], shares[i], options, loaded)
        for i, key in enumerate(order)
        if key in away
    }
    results = [
        futures[key].result()
        if key in futures
        else _finish_group(key, groups[key], shares[i], options, loaded, executor)
        for i, key in enumerate(order)
    ]
    return combine_groups(results, notes, options.view or "consecutive")


def _replayed_away(
    order: Sequence[_Key],
    groups: dict[_Key, list[tuple[int, GroupPiece]]],
    options: FileOptions,
    executor: Executor,
) -> set[_Key]:
    """The provider groups whose replay runs on a worker: in the simulated view, on workers of this
    machine (they read the pieces' files), when there are two groups or more: every group when each
    has a worker of its own (the workers are idle once stage 1 is done: this process then replays
    nothing and only waits, and holds no group's cache), else every group but the one of the most
    requests (which this process replays meanwhile). Each group is a cache of its own (its
    provider's), replayed in its own time order: the frames are the ones of one process, joined in the
    same order. A single group stays here (a worker would replay it no sooner, and its frames would
    cross the pipe)."""
    if options.view == "consecutive" or not executor.shares_files or len(order) < 2:
        return set()
    if len(order) <= executor.workers:
        return set(order)
    largest = max(order, key=lambda key: sum(group.count for _, group in groups[key]))
    return {key for key in order if key != largest}


class _Submits(Protocol):
    """What the simulated view's finishing asks of an executor: to run the attribution somewhere."""

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any: ...


class _InThisProcess:
    """Runs a submitted call at once (a worker that replays a group attributes its divergences itself)."""

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(fn(*args))
        return future


@gc_paused()  # perf: a worker's task (see promptkit.analysis.runtime)
def finish_group_task(
    key: _Key,
    parts: list[tuple[int, GroupPiece]],
    problems: list[LoadProblem],
    options: FileOptions,
    loaded: list[tuple[int, Any]],
) -> AnalysisResult:
    """One provider group's replay and attribution on a worker of this machine (it maps the pieces'
    files and reads the records the workers left): the group's result, as the coordinator makes it."""
    return _finish_group(key, parts, problems, options, loaded, _InThisProcess())


def _finish_group(
    key: _Key,
    parts: list[tuple[int, GroupPiece]],
    problems: list[LoadProblem],
    options: FileOptions,
    loaded: list[tuple[int, Any]],
    executor: _Submits,
) -> AnalysisResult:
    """One provider group's result: its pieces' frames (consecutive) or the replay over
    their token deltas (simulated)."""

    timed = all(group.timed for _, group in parts)
    spec = AnalysisSpec(
        key, options.tokenizer, options.render, options.cache_model, options.view or "consecutive", timed
    )
    count = sum(group.count for _, group in parts)
    if options.view == "consecutive":
        profile, model = profile_and_model(key, options.cache_model)
        described = DescribedContext(spec, profile, model, *parts[0][1].names)
        return finish_group(described, [_shifted(group, offset) for offset, group in parts], problems, count)
    return _simulate(spec, parts, problems, loaded, executor)


def _simulate(
    spec: Any,
    parts: list[tuple[int, GroupPiece]],
    problems: list[LoadProblem],
    loaded: list[tuple[int, Any]],
    executor: _Submits,
) -> AnalysisResult:
    """Stage 2 of the simulated view over one group: the replay in this process, with no tokenizer
    loaded here and no record read: stage 1's columns of every request
    (:func:`~promptkit.analysis.plans.coordinator.replay_shipped`); a worker reads the divergences'
    messages and decodes their excerpts (:func:`attribute_files`)."""
    import polars as pl

    streams = []
    composed: list[pl.DataFrame] = []
    for offset, group in parts:
        assert group.deltas is not None and group.composition is not None
        streams.append((offset, arrays_in(group.deltas)))
        composed.append(frame_in(group.composition, offset))
    shipped = DeltaReader(streams, composed)
    profile, model = profile_and_model(spec.provider, spec.cache_model)
    described = DescribedContext(spec, profile, model, *parts[0][1].names)
    facts = pl.concat([frame_in(group.facts, offset) for offset, group in parts if group.facts is not None])
    own = [(pos + offset, problem) for offset, group in parts for pos, problem in group.problems]
    mended = [(pos + offset, where) for offset, group in parts for pos, where in group.mended]
    ruler_inputs = {pos + offset: got for offset, group in parts for pos, got in group.ruler_inputs.items()}

    def attribute_on_worker(divergent: list[Divergent]) -> list[tuple[Any, ...]]:
        blobs = files_holding(loaded, read_by(divergent))
        return executor.submit(attribute_files, spec, blobs, divergent).result()  # type: ignore[no-any-return]

    partial = replay_shipped(described, shipped, facts, own, mended, ruler_inputs, attribute_on_worker)
    return finish_group(described, [partial], problems, facts.height)
