"""The local plan: every stage of the analysis in one loop, in this process, request after request —
the reference the other plans give the same frames as.

For each record (:meth:`LocalRun.add`): stage 1 prepares and tokenizes it and makes the columns that need
no cache outcome (:mod:`promptkit.analysis.prepare`), stage 2 replays it through the cache
(:meth:`~promptkit.analysis.replay.Replayer.step`), stage 3 attributes a divergence to its message at
once (:func:`~promptkit.analysis.attribute.attribute`); the run's frames then go to stage 4
(:func:`~promptkit.analysis.assemble.finish_group`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from promptkit.analysis.assemble import ChunkResult, PendingComposition
from promptkit.analysis.attribute import ATTRIBUTED, attribute
from promptkit.analysis.columns import ROW_VALUES, RowTable
from promptkit.analysis.prepare import PreparedRequest, Preparer
from promptkit.analysis.replay import Replayer
from promptkit.analysis.runtime import gc_paused
from promptkit.analysis.spec import AnalysisContext, AnalysisSpec, context_for
from promptkit.formats.opaque_head import opaque_decoder
from promptkit.layout import RequestRecord

__all__ = ["LocalRun", "analyze_chunk", "run_local"]


class LocalRun:
    """One run of the local plan over a chunk of records (:func:`run_local`): the replay (a cache over
    every session in the simulated view, each session's previous request in the consecutive one), the
    prepared requests stage 3 looks back at, and what the chunk produces (rows, composition, problems,
    the notes' counts)."""

    def __init__(self, ctx: AnalysisContext) -> None:
        self.ctx = ctx
        self.model, self.view, self.timed = ctx.model, ctx.spec.view, ctx.spec.timed
        self.stage1 = Preparer(ctx)
        self.rows = RowTable()
        self.replay = Replayer(self.model, self.view, ruled=not ctx.profile.exact_tokenizer)
        self.prepared: dict[int, PreparedRequest] = {}  # position -> request, to attribute divergences
        self.decoders: dict[str | None, Callable[[Sequence[int]], str]] = {}  # thinking render -> decode
        # perf: where the attributed columns stand in the replay's columns, found once
        self.attributed_at = tuple(self.replay.columns.index(c) for c in ATTRIBUTED)

    def order(self, items: Sequence[tuple[int, RequestRecord]]) -> list[int]:
        """The order the records are analyzed in: time (simulated view, all timed), else position."""
        if self.view == "simulated" and self.timed:
            return sorted(range(len(items)), key=lambda j: (items[j][1].timestamp, items[j][0]))
        return sorted(range(len(items)), key=lambda j: items[j][0])

    def add(self, pos: int, record: RequestRecord) -> None:
        """Analyze one record and add its row (or its problem)."""
        done = self.stage1.prepare(pos, record)  # stage 1
        if done is None:
            return
        p, tok, think, local, row = done.prepared, done.tok, done.think, done.local, done.fixed
        rt = self.ctx.request_tokenizer(think)
        replay = self.replay
        self.prepared[pos] = p
        values = replay.step(  # stage 2
            pos,
            record.session,
            record.index,
            record.timestamp if self.timed else None,
            row["model"],
            tok.tokens,
            local.plan,
            local,
            record.usage,
            done.events,
            think,
            tok=tok,
            known=rt.shared_prefix if rt is not None else None,
        )
        if replay.divergent is not None:  # stage 3
            values = self.attributed(values, tok, think)
        if (
            replay.released >= 0 and replay.released != pos
        ):  # memory: the consecutive view looks back at a session's predecessor only
            self.prepared.pop(replay.released, None)
        row.update(zip(replay.columns, values, strict=True))
        self.rows.add(ROW_VALUES(row), pos)

    def attributed(self, values: tuple[Any, ...], tok: Any, think: str | None) -> tuple[Any, ...]:
        """``values`` with the columns stage 3 gives for the request the replay found divergent (a
        change of model was classified by the replay: its class stays)."""
        d = self.replay.divergent
        assert d is not None
        decode = self.decoders.get(think)
        if decode is None:
            rt = self.ctx.request_tokenizer(think)
            assert rt is not None  # a run tokenizes where it runs (AnalysisContext)
            decode = self.decoders[think] = opaque_decoder(rt.decode)
        got = attribute(d, self.prepared, decode, tok)
        out = list(values)
        for at, value in zip(
            self.attributed_at if d.against >= 0 else self.attributed_at[:-2], got, strict=False
        ):
            out[at] = value
        return tuple(out)

    def partial(self) -> ChunkResult:
        """What the run produced."""
        stage1 = self.stage1
        return ChunkResult(
            self.rows.frame(),
            PendingComposition((stage1.composition,)),  # memory: a frame only when read
            stage1.problems,
            self.replay.writes_nothing,
            stage1.thinking,
            stage1.mended,
        )


def run_local(
    ctx: AnalysisContext,
    items: Sequence[tuple[int, RequestRecord]],
    progress: bool = False,
) -> ChunkResult:
    """Analyze ``items`` (``(position, record)`` pairs) in this process: whole sessions in the
    consecutive view, every record of the group in the simulated view."""
    state = LocalRun(ctx)
    order: Iterable[int] = state.order(items)
    bar: Any = None
    if progress:  # imported only when asked for: tqdm.auto warns in a kernel without ipywidgets
        from tqdm.auto import tqdm

        order = bar = tqdm(order, total=len(items), desc=f"analyze ({state.view})", unit="req", delay=0.5)
    for j in order:
        state.add(*items[j])
    if bar is not None:
        bar.close()
    return state.partial()


@gc_paused()  # perf: a worker's task (see promptkit.analysis.runtime)
def analyze_chunk(spec: AnalysisSpec, items: Sequence[tuple[int, RequestRecord]]) -> ChunkResult:
    """The consecutive view of whole sessions (runs in a worker)."""
    return run_local(context_for(spec), items)
