"""The timeline plan: the simulated view streamed in time order, holding what the cache can still read
rather than the whole history (:func:`analyze_timeline`); the consecutive view streamed the same way,
holding each open session's previous request.

A provider's cache holds live entries only, so the replay needs those, not every request before. The
plan reads the logs twice:

1. :func:`~promptkit.analysis.plans.timeline_index.index_logs` reads every file once and keeps a few
   numbers per record: where :func:`~promptkit.formats.read_logs` would put it, its number in its
   session and its turn in the replay (time, then place), as the local plan orders the records;
2. the files are read again, lazily and merged in that order (:func:`in_time_order`: a heap over the
   files, a file opened when its first record's turn comes, each read with a look-ahead window); each
   record goes through the local plan's stages (:class:`~promptkit.analysis.plans.local.LocalRun`, the
   reference) as it comes, and is let go of once nothing can look back at it
   (:class:`BoundedRun`): a request's prepared body, its facts and its ruler are kept while some run or
   exact entry of the cache (or of a shadow cache that tells an expiry from "never stored") names it
   as the request that stored it last (:meth:`~promptkit.analysis.simulator.CacheSimulator.sources`),
   the only requests a later lookup can name; a session's resume state goes at its last call (in the
   consecutive view, its previous request too); the result rows become columnar frames every
   :data:`FLUSH_ROWS` requests, written to disk (:class:`~promptkit.analysis.plans.sink.FrameSink`)
   and read back when the run ends.

The frames are the local plan's, request for request (``tests/analysis/test_timeline.py`` compares
them on every golden log and on generated corpora). What stays is the cache's content (a radix tree
of the distinct prompts the shadow cache keeps to tell an expiry from "never stored"), the requests it
names, and the sessions open at once; the frames are on disk until the run ends, then read back whole
for the report.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

from promptkit.analysis.assemble import (
    VIEW_NOTE,
    ChunkResult,
    PendingComposition,
    combine_groups,
    defaulted_note,
    finish_group,
)
from promptkit.analysis.columns import RowTable
from promptkit.analysis.composition import CompositionRows
from promptkit.analysis.plans.local import LocalRun
from promptkit.analysis.plans.sink import FrameSink, SpilledRows
from promptkit.analysis.plans.stream import STREAM_CACHE_TOKENS
from promptkit.analysis.plans.timeline_index import FileSpan, TimelineIndex, index_logs, stamp_of
from promptkit.analysis.simulator import CacheSimulator
from promptkit.analysis.spec import AnalysisContext, AnalysisSpec
from promptkit.errors import LogFileError
from promptkit.formats.base import LogFormat, Source, get_format, read_items
from promptkit.formats.discovery import intern_messages, with_inferred_provider
from promptkit.formats.fields import mend_identifiers
from promptkit.layout import RequestRecord

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from promptkit.analysis.result import AnalysisResult
    from promptkit.providers.registry import ProviderProfile
    from promptkit.tokens.cache_models import CacheModel

__all__ = ["FLUSH_ROWS", "SWEEP_MIN", "BoundedRun", "analyze_timeline", "in_time_order"]

#: Requests between two flushes of the result rows into columnar frames.
FLUSH_ROWS: Final[int] = 4096

#: The fewest requests a replay remembers before it looks for those nothing can read any more; a look
#: happens when it remembers twice as many as after the last (amortized: linear in the requests).
SWEEP_MIN: Final[int] = 1024


class BoundedRun(LocalRun):
    """The local plan's run (:class:`~promptkit.analysis.plans.local.LocalRun`) that lets go of what no
    later request can look back at (:meth:`release`) and hands its rows, every :data:`FLUSH_ROWS`
    requests, to a :class:`~promptkit.analysis.plans.sink.FrameSink` that writes them to disk (None:
    the frames are held in memory)."""

    def __init__(self, ctx: AnalysisContext, sink: FrameSink | None = None) -> None:
        super().__init__(ctx)
        if self.view == "simulated":
            # memory: the cache keeps its own copies of the runs it stores, not views that would keep
            # each session's whole token buffer alive after the session ended
            self.replay.sim = CacheSimulator(self.model, share_tokens=False)
        self.kept = 0  # requests remembered after the last sweep
        self.sweeps = 0
        self.sink = sink
        self.requests_frames: list[pl.DataFrame] = []  # without a sink
        self.composition_rows: list[CompositionRows | SpilledRows] = []  # memory: a frame only when read
        self.flushed = 0  # rows already in frames
        self.most_rows = 0  # the most rows held at once (memory: at most FLUSH_ROWS)

    def release(self, session: str, last: bool) -> None:
        """After a request of ``session`` (``last``: its session's last call): let go of its session's
        state when it was the last, and, now and then, of every request no stored run names."""
        replay = self.replay
        self.most_rows = max(self.most_rows, len(self.rows))
        if last and replay.sim is None:
            self.end_consecutive(session)
        elif last:
            for part, sim in replay.sims.items():  # a per-model cache keys the session by its model too
                key = session if part is None else (session, part)
                replay.session_tokens.pop(key, None)
                sim.end_session(key)
        if replay.sim is not None and len(replay.facts) >= max(SWEEP_MIN, 2 * self.kept):
            self.sweep()
        if len(self.rows) >= FLUSH_ROWS:
            self.flush()

    def end_consecutive(self, session: str) -> None:
        """The consecutive view after ``session``'s last call: forget its previous request (in every
        part of a per-model cache), that request's facts, ruler and prepared body."""
        replay = self.replay
        keys = [k for k in replay.previous if k == session or (isinstance(k, tuple) and k[0] == session)]
        for key in keys:
            stored = replay.previous.pop(key)
            gone = replay.facts.pop(stored.source, None)
            if gone is not None:
                self.prepared.pop(gone.pos, None)
            if replay.rulers is not None:
                replay.rulers.pop(stored.source, None)

    def sweep(self) -> None:
        """Forget the requests that no run or exact entry of the cache names (a lookup can name no
        other): their prepared bodies, facts and rulers."""
        replay = self.replay
        assert replay.sim is not None  # the simulated view
        live = set().union(*(sim.sources() for sim in replay.sims.values()))
        facts, rulers = replay.facts, replay.rulers
        for source_id in [s for s in facts if s not in live]:
            gone = facts.pop(source_id)
            self.prepared.pop(gone.pos, None)
            if rulers is not None:
                rulers.pop(source_id, None)
        self.kept = len(facts)
        self.sweeps += 1

    def flush(self) -> None:
        """Turn the rows held so far into a frame (their analysis order continues across flushes) and
        write it to the sink, or hold it without one."""
        import polars as pl

        if not len(self.rows):
            return
        frame = self.rows.frame().with_columns(pl.col("_seq") + self.flushed)
        self.flushed += frame.height
        if self.sink is not None:
            self.composition_rows.append(self.sink.write(frame, self.stage1.composition))
        else:
            self.requests_frames.append(frame)
            self.composition_rows.append(self.stage1.composition)
        self.rows = RowTable()
        self.stage1.composition = CompositionRows()

    def partial(self) -> ChunkResult:
        """What the run produced, its frames joined (read back from the sink)."""
        import polars as pl

        self.flush()
        empty = super().partial()  # the problems and counts, and empty frames of the right schemas
        frames = self.requests_frames
        if self.sink is not None and self.sink.batches:
            frames = [self.sink.requests()]
        requests = pl.concat(frames) if frames else empty.requests
        composition = PendingComposition(tuple(self.composition_rows))
        self.requests_frames, self.composition_rows = [], []
        return attrs.evolve(empty, requests=requests, composition=composition)


def _changed(path: Any) -> LogFileError:
    return LogFileError(
        path,
        "changed while it was analyzed (it differs from the first pass); analyze it again once it is written",
    )


def _file_records(span: FileSpan, index: TimelineIndex) -> Iterator[tuple[int, int, RequestRecord]]:
    """One file's records as ``(turn, read number, record)`` in turn order, read with the file's
    look-ahead window (:attr:`FileSpan.window` records held at most)."""
    if stamp_of(span.path) != span.stamp:
        raise _changed(span.path)
    rank = index.rank
    held: list[tuple[int, int, RequestRecord]] = []
    r = span.start
    for item in read_items(span.format, Source.open(span.path)):
        if not isinstance(item, RequestRecord):
            continue
        if r >= span.stop:
            raise _changed(span.path)
        heapq.heappush(held, (int(rank[r]), r, with_inferred_provider(mend_identifiers(item)[0])))
        r += 1
        if len(held) > span.window:
            yield heapq.heappop(held)
    if r != span.stop:
        raise _changed(span.path)
    while held:
        yield heapq.heappop(held)


def in_time_order(index: TimelineIndex) -> Iterator[tuple[int, RequestRecord]]:
    """Every record of ``index``'s files as ``(read number, record)``, in the replay's order (time, then
    place): a heap over the files, each opened when its first record's turn comes."""
    heap = [(span.first_rank, k) for k, span in enumerate(index.files) if span.stop > span.start]
    heapq.heapify(heap)
    feeds: dict[int, Iterator[tuple[int, int, RequestRecord]]] = {}
    heads: dict[int, tuple[int, int, RequestRecord]] = {}
    turn = 0
    while heap:
        _, k = heapq.heappop(heap)
        if k in heads:
            head = heads.pop(k)
        else:
            feeds[k] = _file_records(index.files[k], index)
            head = next(feeds[k])
        if head[0] != turn:  # a file read differently than on the first pass
            raise _changed(index.files[k].path)
        turn += 1
        yield head[1], head[2]
        nxt = next(feeds[k], None)
        if nxt is None:
            del feeds[k]
        else:
            heads[k] = nxt
            heapq.heappush(heap, (nxt[0], k))


def analyze_timeline(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    fmt: str | LogFormat | None,
    *,
    provider: str | ProviderProfile | None = None,
    tokenizer: Any = None,
    render: Any = None,
    cache_model: str | CacheModel | None = None,
    view: str | None = None,
    progress: bool = False,
    spill: bool = True,
) -> AnalysisResult | None:
    """The logs under ``paths`` in ``view`` (None: the records' default view) streamed in time order
    (see the module's doc); the same result as :func:`~promptkit.analysis.api.analyze` with one job.
    ``spill``: the frames are written to disk as they are made (:class:`FrameSink`) and read back at
    the end, else held. None (nothing done but the first pass) where the plan does not apply: no
    records, or a provider group has a record without a timestamp (the simulated view then replays in
    load order, and the consecutive view's order within a session is the load order)."""
    index = index_logs(paths, get_format(fmt) if isinstance(fmt, str) else fmt, provider)
    if index is None:
        return None
    chosen = view if view is not None else ("simulated" if index.tree else "consecutive")
    if not index.records or not all(index.timed):
        return None
    # memory: the consecutive view's segment cache bounded as the stream plan's (the heads sessions share)
    bound = STREAM_CACHE_TOKENS if chosen == "consecutive" else None
    contexts = [
        AnalysisContext(AnalysisSpec(key, tokenizer, render, cache_model, chosen, True, bound))
        for key in index.groups
    ]
    runs = [BoundedRun(ctx, FrameSink() if spill else None) for ctx in contexts]
    counts = [0] * len(runs)
    records: Iterator[tuple[int, RequestRecord]] = in_time_order(index)
    bar: Any = None
    if progress:  # imported only when asked for: tqdm.auto warns in a kernel without ipywidgets
        from tqdm.auto import tqdm

        records = bar = tqdm(
            records, total=index.records, desc=f"analyze ({chosen}, streamed)", unit="req", delay=0.5
        )
    latest: dict[str, RequestRecord] = {}  # each open session's latest record, to share its messages
    for r, record in records:
        g, at, last = int(index.group[r]), int(index.index[r]), bool(index.last[r])
        if record.index != at:
            record = attrs.evolve(record, index=at)
        session = record.session
        record = intern_messages(latest.pop(session, None), record)
        if not last:
            latest[session] = record
        runs[g].add(int(index.pos[r]), record)
        runs[g].release(session, last)
        counts[g] += 1
    if bar is not None:
        bar.close()
    notes = list(index.notes)
    if view is None and chosen == "simulated":
        notes.append(VIEW_NOTE)
    if index.defaulted:
        notes.append(defaulted_note(index.defaulted))
    results = [
        finish_group(ctx, [run.partial()], list(index.problems) if g == 0 else [], counts[g])
        for g, (ctx, run) in enumerate(zip(contexts, runs, strict=True))
    ]
    return attrs.evolve(combine_groups(results, notes, chosen), provider_assumed=index.defaulted > 0)
