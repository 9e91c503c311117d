"""The replay of a parallel simulated view, in the coordinator, over columns: it holds no record and
loads no tokenizer.

The simulated view's one part that cannot be divided is the cache: a call reads what any earlier call
of any session stored, so the calls are replayed one after the other, in time order, in one process.
Everything else is done where the records are:

- stage 1, on the workers (:func:`~promptkit.analysis.wire.tokenize_chunk`), ships per request its
  tokens as deltas, its cache plan, and the columns of its row that need no cache outcome
  (:class:`~promptkit.analysis.wire.ChunkFacts`);
- the coordinator (:func:`replay_shipped`) steps the requests through the same
  :class:`~promptkit.analysis.replay.Replayer` as the local plan, and makes only the columns that need
  the outcome;
- a worker then attributes the divergences (:func:`~promptkit.analysis.attribute.attribute_records`),
  reading the messages of the requests whose prompt diverged and of the requests they are compared with.

Both parallel plans (:mod:`~promptkit.analysis.plans.records`, :mod:`~promptkit.analysis.plans.files`)
run their simulated view here. The result is the local plan's, column for column (the tests compare
both on the same logs). Ruler mode runs here too: phase 1 ships each call's reported usage and log
events, and the replay keeps each source's anchors in order (:mod:`promptkit.analysis.ruler`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from promptkit.analysis.assemble import ChunkResult
from promptkit.analysis.attribute import ATTRIBUTED
from promptkit.analysis.columns import REQUEST_COLUMNS, frame_schemas
from promptkit.analysis.composition import CompositionRows
from promptkit.analysis.prepare import composition_frame
from promptkit.analysis.replay import Replayer
from promptkit.analysis.wire import DeltaReader, Divergent

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from promptkit.analysis.spec import DescribedContext
    from promptkit.layout import LoadProblem

__all__ = ["replay_shipped"]


class _Order(NamedTuple):
    """The requests of a group in the order they are replayed (time, then position; position where
    some record has no time), as Python lists (perf: one conversion per column, not one per request)."""

    pos: list[int]
    ok: list[bool]
    session: list[str]
    number: list[int]  # the record's index in its session
    timestamp: list[float | None]
    model: list[str | None]
    think: list[str | None]


def _order(facts: pl.DataFrame, timed: bool) -> _Order:
    ordered = facts.sort(["timestamp", "_pos"] if timed else ["_pos"])
    return _Order(
        *(ordered[c].to_list() for c in ("_pos", "_ok", "session", "index", "timestamp", "model", "_think"))
    )


def replay_shipped(
    ctx: DescribedContext,
    shipped: DeltaReader,
    facts: pl.DataFrame,
    problems: Sequence[tuple[int, LoadProblem]],
    mended: Sequence[tuple[int, str]],
    ruler_inputs: Mapping[int, tuple[Any, str | None]],
    attribute_divergent: Callable[[list[Divergent]], list[tuple[Any, ...]]],
) -> ChunkResult:
    """The replay of one provider group from stage 1's columns (``facts``: the frames of
    :class:`~promptkit.analysis.wire.ChunkFacts`, joined, positions in the load order; ``problems``,
    ``mended`` and ``ruler_inputs`` theirs), the divergences attributed by ``attribute_divergent`` (stage
    3, on a worker): the group's chunk result, as the local plan makes it."""
    import polars as pl

    order = _order(facts, ctx.spec.timed)
    timed = ctx.spec.timed
    replay = Replayer(
        ctx.model, "simulated", ruled=not ctx.profile.exact_tokenizer, offsets=shipped.with_offsets
    )
    ruled = replay.rulers is not None
    thinking: dict[str, int] = {}
    rows: list[tuple[Any, ...]] = []
    divergent: list[Divergent] = []
    step, take, none = replay.step, shipped.tokens, (None, None)  # perf: bound once
    for k, pos in enumerate(order.pos):
        think = order.think[k]
        if think is not None:
            thinking.setdefault(think, pos)
        if not order.ok[k]:
            continue
        session = order.session[k]
        tokens = take(pos, session)  # stage 1 tokenized it (``_ok``)
        local = shipped.local
        assert local is not None
        usage, events = ruler_inputs.get(pos, none) if ruled else none
        now = order.timestamp[k] if timed else None
        values = step(
            pos, session, order.number[k], now, order.model[k], tokens, local.plan, local, usage, events, think,
            shared=shipped.shared,
        )  # fmt: skip
        rows.append((*values, pos, len(rows)))
        if replay.divergent is not None:
            divergent.append(replay.divergent)
    requests = _frame(replay.columns, rows, divergent, facts, attribute_divergent)
    seq = {pos: k for k, pos in enumerate(order.pos)}  # the order problems and mended records are named in
    composition = shipped.composition or [composition_frame(CompositionRows())]
    return ChunkResult(
        requests,
        pl.concat(composition),
        sorted(problems, key=lambda t: seq[t[0]]),
        replay.writes_nothing,
        thinking,
        sorted(mended, key=lambda t: seq[t[0]]),
    )


def _frame(
    made: tuple[str, ...],
    rows: list[tuple[Any, ...]],
    divergent: list[Divergent],
    facts: pl.DataFrame,
    attribute_divergent: Callable[[list[Divergent]], list[tuple[Any, ...]]],
) -> pl.DataFrame:
    """The requests frame: the columns the replay ``made`` (``rows``), the divergences' columns from
    ``attribute_divergent`` and stage 1's fixed columns, joined on the position."""
    import polars as pl

    names = (*made, "_pos", "_seq")
    columns = [list(c) for c in zip(*rows, strict=True)] or [[] for _ in names]
    if divergent:
        at = {name: names.index(name) for name in ATTRIBUTED}
        # a model switch's change class was set by the replay (``against`` is -1: nothing to classify)
        for d, values in zip(divergent, attribute_divergent(divergent), strict=True):
            for name, value in zip(ATTRIBUTED if d.against >= 0 else ATTRIBUTED[:-2], values, strict=False):
                columns[at[name]][d.row] = value
    schema = frame_schemas()[0]
    outcome = pl.DataFrame(
        dict(zip(names, columns, strict=True)),
        schema={**{c: schema[c] for c in made}, "_pos": pl.Int64, "_seq": pl.Int64},
    )
    fixed = facts.filter(pl.col("_ok")).drop("_ok", "_think", *(c for c in made if c in facts.columns))
    # in position order, as assemble.finish_group puts the frame (perf: it then has nothing to sort)
    joined = outcome.join(fixed, on="_pos", how="left").sort("_pos")
    return joined.select(*REQUEST_COLUMNS, "_pos", "_seq")
