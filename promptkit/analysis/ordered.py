"""The ordered cache simulation of a parallel simulated view, over columns: its coordinator holds no
record.

The simulated view's one part that cannot be divided is the cache: a call reads what any earlier call
of any session stored, so the calls are simulated one after the other, in time order, in one process.
Everything else is done where the records are:

- phase 1, on the workers (:func:`~promptkit.analysis.engine._tokenize_chunk` with ``facts``), ships
  per request its tokens as deltas, its cache plan, and the columns of its row that need no cache
  outcome (:class:`~promptkit.analysis.engine._ChunkFacts`: the record's figures, its problems, its
  thinking render);
- the coordinator (:func:`simulate`) runs the cache over the requests in time order and makes only
  the columns that need its outcome (cached and written tokens, source, divergence token, causes'
  facts): per request a simulation step, a few dictionary look-ups and one tuple;
- a worker (:func:`attribute`) then reads the messages of the requests whose prompt diverged (and of
  the requests they diverged from), attributes each divergence to its message, classifies the change
  and decodes the excerpts. The records reach it as phase 1 left them, one pickle per file, which
  the coordinator passes on without unpickling (or its path, or a Dask future: :func:`attribute`); a
  coordinator that holds the records (a session split across files: the records plan) sends the
  worker the few it needs (:func:`attribute_records`).

Both parallel plans run their simulated view here. The result is the one of a single process
(:class:`~promptkit.analysis.engine._RunState`), column for column (the tests compare both on the
same logs). Ruler mode (a provider whose tokenizer is not public)
runs here too: placing a position in the provider's units needs each call's reported usage and log
events, which phase 1 ships with the columns, and its source's anchors, which the coordinator keeps in
order (:mod:`promptkit.analysis.ruler`).
"""

from __future__ import annotations

import operator
import pickle
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from promptkit.analysis.runtime import gc_paused

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import polars as pl

    from promptkit.analysis.engine import _Described, _Partial, _Spec, _Undelta
    from promptkit.layout import LoadProblem, RequestRecord

__all__ = ["Divergent", "attribute", "attribute_records", "files_holding", "read_by", "simulate"]

#: Records as phase 1 ships them: (the load-order position of a file's first record, the pickled tuple of
#: the file's records, or the path of the file a worker of this machine wrote it to; on a Dask cluster,
#: the coordinator holds the future of the worker that keeps the pickle, and the cluster hands
#: :func:`attribute` its bytes).
RecordBlobs = Sequence[tuple[int, bytes | str]]


class Divergent(NamedTuple):
    """A request whose prompt left the cached content, as the coordinator hands it to :func:`attribute`:
    its row and position, the position of the request whose entry it read (``source``, -1: none) and of
    the one its change is classified against (``against``, -1: none), the divergence token, its message
    offsets and head (to place the token in a message) and the excerpts' token ids."""

    row: int
    pos: int
    source: int
    against: int
    token: int
    starts: tuple[int, ...]
    ends: tuple[int, ...] | None
    header_len: int
    prompt_len: int
    think: str | None
    cached_ids: list[int] | None
    prompt_ids: list[int]
    context_ids: list[int]


#: The columns :func:`attribute` returns for each :class:`Divergent`, in order.
ATTRIBUTED = (
    "divergence_message", "divergence_role", "divergence_anchor", "divergence_key", "divergence_cached_text",
    "divergence_prompt_text", "divergence_context_text", "change_class", "change_detail",
)  # fmt: skip


def files_holding(blobs: RecordBlobs, positions: Iterable[int]) -> list[tuple[int, bytes | str]]:
    """The files of ``blobs`` (all of a load, in its order) that hold a record at one of ``positions``:
    what :func:`attribute` is sent."""
    wanted = set(positions)
    ends: list[int | None] = [offset for offset, _ in blobs[1:]]
    return [
        (offset, blob)
        for (offset, blob), end in zip(blobs, [*ends, None], strict=True)
        if any(offset <= p and (end is None or p < end) for p in wanted)
    ]


def _records_at(blobs: RecordBlobs, positions: set[int]) -> dict[int, RequestRecord]:
    """The records at ``positions`` (load order) in the files ``blobs`` (:func:`files_holding`)."""
    found: dict[int, RequestRecord] = {}
    for offset, blob in blobs:
        records = pickle.loads(Path(blob).read_bytes() if isinstance(blob, str) else blob)
        found.update((p, records[p - offset]) for p in positions if 0 <= p - offset < len(records))
    return found


@gc_paused()  # perf: a worker's task (see promptkit.analysis.runtime)
def attribute(spec: _Spec, blobs: RecordBlobs, divergent: Sequence[Divergent]) -> list[tuple[Any, ...]]:
    """The :data:`ATTRIBUTED` columns of each request of ``divergent`` (runs in a worker, whose tokenizer
    decodes the excerpts): the message its prompt diverged in (compared with its source's messages),
    that message's role and layout slot, the excerpts' text and the class of the change."""
    return attribute_records(spec, _records_at(blobs, read_by(divergent)), divergent)


def read_by(divergent: Sequence[Divergent]) -> set[int]:
    """The positions of the records :func:`attribute` reads for ``divergent``: each request's own, its
    source's and the one its change is classified against."""
    return {p for d in divergent for p in (d.pos, d.source, d.against) if p >= 0}


@gc_paused()  # perf: a worker's task (see promptkit.analysis.runtime)
def attribute_records(
    spec: _Spec, records: Mapping[int, RequestRecord], divergent: Sequence[Divergent]
) -> list[tuple[Any, ...]]:
    """:func:`attribute` with the records at hand (``records``: position -> record, those of
    :func:`read_by`): the records plan, whose coordinator holds them, sends a worker only those."""
    import numpy as np

    from promptkit.analysis.causes import classify_change
    from promptkit.analysis.engine import _context_for, _divergence, _prepare
    from promptkit.formats.opaque_head import opaque_decoder
    from promptkit.tokens.tokenize import TokenizedRequest

    ctx = _context_for(spec)
    prepared = {pos: _prepare(record) for pos, record in records.items()}
    empty = np.zeros(0, np.int64)
    out = []
    for d in divergent:
        p = prepared[d.pos]
        tok = TokenizedRequest._trusted(empty, d.starts, d.header_len, d.prompt_len, d.ends)
        source = prepared[d.source].body["messages"] if d.source >= 0 else None
        message, role, anchor, key = _divergence(p, tok, d.token, source)
        decode = opaque_decoder(ctx.request_tokenizer(d.think).decode)  # type: ignore[union-attr]
        change: tuple[str | None, str | None] = (None, None)
        if d.against >= 0:
            change = classify_change(prepared[d.against].body, p.body, message, shifted=p.shifted)
        out.append(
            (
                message,
                role,
                anchor,
                key,
                decode(d.cached_ids) if d.cached_ids is not None else None,
                decode(d.prompt_ids),
                decode(d.context_ids),
                *change,
            )
        )
    return out


class _Order(NamedTuple):
    """The requests of a group in the order they are simulated (time, then position; position where
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


def simulate(
    ctx: _Described,
    shipped: _Undelta,
    facts: pl.DataFrame,
    problems: Sequence[tuple[int, LoadProblem]],
    mended: Sequence[tuple[int, str]],
    ruler_inputs: Mapping[int, tuple[Any, str | None]],
    attribute_divergent: Callable[[list[Divergent]], list[tuple[Any, ...]]],
) -> _Partial:
    """The ordered simulation of one provider group from phase 1's columns (``facts``: the frames of
    :class:`~promptkit.analysis.engine._ChunkFacts`, joined, positions in the load order; ``problems``,
    ``mended`` and ``ruler_inputs`` theirs), the divergences attributed by ``attribute_divergent``
    (:func:`attribute`, on a worker): the group's partial, as :func:`~promptkit.analysis.engine._run`
    makes it."""
    import polars as pl

    from promptkit.analysis.composition import CompositionRows
    from promptkit.analysis.engine import _composition_frame, _Partial

    order = _order(facts, ctx.spec.timed)
    run = _Replay(ctx, shipped, ruler_inputs)
    thinking: dict[str, int] = {}
    add = run.add
    for k, pos in enumerate(order.pos):
        think = order.think[k]
        if think is not None:
            thinking.setdefault(think, pos)
        if order.ok[k]:
            add(pos, order.session[k], order.number[k], order.timestamp[k], order.model[k], think)
    requests = run.frame(facts, attribute_divergent)
    seq = {pos: k for k, pos in enumerate(order.pos)}  # the order problems and mended records are named in
    composition = shipped.composition or [_composition_frame(CompositionRows())]
    return _Partial(
        requests,
        pl.concat(composition),
        sorted(problems, key=lambda t: seq[t[0]]),
        run.writes_nothing,
        thinking,
        sorted(mended, key=lambda t: seq[t[0]]),
    )


#: Ruler mode: the row's columns that need no cache outcome but that ruler mode converts with the outcome
#: (the coordinator knows them: the plan's prompt, the head's end, no basis yet).
_RULED: Final = ("prompt_tokens", "head_end_tokens", "position_basis")


class _Replay:
    """The coordinator's state over one group: the cache, what later requests look back at (each
    request's model, time, stored tokens and position; recent tokens for the excerpts; ruler mode: each
    request's anchors) and the columns made so far (one tuple per request: the columns that need the
    outcome, :data:`~promptkit.analysis.engine._OUTCOME_COLUMNS`, and in ruler mode :data:`_RULED`)."""

    def __init__(
        self,
        ctx: _Described,
        shipped: _Undelta,
        ruler_inputs: Mapping[int, tuple[Any, str | None]],
    ) -> None:
        from promptkit.analysis import engine
        from promptkit.analysis.simulator import CacheSimulator

        self.model, self.timed, self.shipped, self.ruler_inputs = (
            ctx.model,
            ctx.spec.timed,
            shipped,
            ruler_inputs,
        )
        self.sim = CacheSimulator(self.model, share_tokens=True)
        self.facts: dict[str, Any] = {}  # request id -> engine._Facts (no body: the records are elsewhere)
        self.recent: OrderedDict[str, np.ndarray] = OrderedDict()  # request id -> tokens (excerpts)
        # ruler mode (the local tokenizer is not the provider's): request id -> its Ruler
        self.rulers: dict[str, Any] | None = None if ctx.profile.exact_tokenizer else {}
        self.columns = engine._OUTCOME_COLUMNS + (_RULED if self.rulers is not None else ())
        self.rows: list[tuple[Any, ...]] = []
        self.divergent: list[Divergent] = []
        self.writes_nothing = 0
        # perf: bound once, not looked up per request
        self._e = engine
        self._values = operator.itemgetter(*self.columns)
        self._keep = engine._EXCERPT_SOURCES
        # ruler mode: where it reads the outcome's figures in the tuple of engine._outcome_values
        self._read_at = tuple(
            engine._OUTCOME_COLUMNS.index(c)
            for c in ("prefix_tokens", "predicted_cached_tokens", "unexpired_cached_tokens")
        )

    def add(
        self,
        pos: int,
        session: str,
        index: int,
        timestamp: float | None,
        model: str | None,
        think: str | None,
    ) -> None:
        """Simulate the request at ``pos`` and make its outcome's columns."""
        e = self._e
        tokens = self.shipped.tokens(pos, session)  # phase 1 tokenized it (``_ok``)
        local = self.shipped.local
        assert local is not None
        plan = local.plan
        if not plan.entries:
            self.writes_nothing += 1
        now = timestamp if self.timed else None
        source_id = f"{session}#{index}"
        outcome = self.sim.step(tokens, plan, now, source_id, session=session, shared=self.shipped.shared)
        outcome, src_id, src, switched, idle = e._source_facts(
            self.facts, self.model, outcome, plan, model, now
        )
        self.facts[source_id] = e._Facts(None, model, now, e._stored_tokens(plan), pos)
        prompt_len = plan.prompt_len
        prefix = min(outcome.prefix_tokens, prompt_len)
        div = e._NO_DIVERGENCE
        if outcome.diverged and prefix < prompt_len:
            div = e._Divergence(token=prefix)
            self._diverged(
                pos, think, tokens, outcome.source, src if switched is None else None, prefix, prompt_len
            )
        recent = self.recent
        recent[source_id] = tokens
        if len(recent) > self._keep:
            recent.popitem(last=False)
        change: tuple[str | None, str | None] = (None, None)
        if switched is not None:
            change = ("model_switch", f"{src.model if src else None} -> {model}")
        causes = e._Causes(idle, src.stored_tokens if src is not None else None, switched, *change)
        values = e._outcome_values(plan, outcome, div, causes)
        if self.rulers is not None:
            values = self._measure(values, pos, source_id, src_id, plan, local)
        self.rows.append((*values, pos, len(self.rows)))

    def _measure(
        self, values: tuple[Any, ...], pos: int, source_id: str, src_id: str | None, plan: Any, local: Any
    ) -> tuple[Any, ...]:
        """Ruler mode: the outcome's ``values`` and the :data:`_RULED` columns, the request's positions in
        the provider's units, as a single process places them
        (:meth:`~promptkit.analysis.engine._RunState.measure`)."""
        e = self._e
        assert self.rulers is not None
        usage, events = self.ruler_inputs.get(pos, (None, None))
        prefix_at, cached_at, unexpired_at = self._read_at
        shared = max(values[prefix_at] or 0, values[unexpired_at] or 0)
        ruler = e._ruler_of(self.rulers, source_id, src_id, plan.prompt_len, shared, plan, usage)
        if e._stays_local(ruler, usage, local.marked):  # perf: only the basis is made: no dict of the row
            return (*values, plan.prompt_len, local.head_end, e._local_basis(values[cached_at] or 0))
        fields = dict(zip(e._OUTCOME_COLUMNS, values, strict=True))
        fields.update(prompt_tokens=plan.prompt_len, head_end_tokens=local.head_end, position_basis=None)
        # read by the placing of a marked head (engine._place_head), not a column made here
        fields["log_events"] = events
        e._measure(fields, ruler, self.rulers, source_id, src_id, plan, usage, self.model, local.marked)
        return self._values(fields)  # type: ignore[no-any-return]

    def _diverged(
        self,
        pos: int,
        think: str | None,
        tokens: np.ndarray,
        source: str | None,
        against: Any,
        prefix: int,
        prompt_len: int,
    ) -> None:
        """Keep what :func:`attribute` needs of a request whose prompt left the cached content at
        ``prefix`` (``against``: the facts of the request its change is classified against, or None)."""
        full = self.shipped.with_offsets(tokens)
        excerpt = self._e.EXCERPT_TOKENS
        cached = self.recent.get(source) if source is not None else None
        self.divergent.append(
            Divergent(
                len(self.rows),
                pos,
                self.facts[source].pos if source is not None else -1,
                against.pos if against is not None else -1,
                prefix,
                full.message_starts,
                full.message_ends,
                full.header_len,
                full.prompt_len,
                think,
                cached[prefix : prefix + excerpt].tolist()
                if cached is not None and prefix < len(cached)
                else None,
                tokens[prefix : min(prefix + excerpt, prompt_len)].tolist(),
                tokens[max(0, prefix - excerpt) : prefix].tolist(),
            )
        )

    def frame(
        self, facts: pl.DataFrame, attribute_divergent: Callable[[list[Divergent]], list[tuple[Any, ...]]]
    ) -> pl.DataFrame:
        """The requests frame: the outcome columns made here, the divergences' columns from
        ``attribute_divergent`` and phase 1's fixed columns, joined on the position."""
        import polars as pl

        from promptkit.analysis.engine import REQUEST_COLUMNS, _schemas

        names = (*self.columns, "_pos", "_seq")
        columns = [list(c) for c in zip(*self.rows, strict=True)] or [[] for _ in names]
        if self.divergent:
            at = {name: names.index(name) for name in ATTRIBUTED}
            # a model switch's change class was set here (``against`` is -1: nothing to classify)
            for d, values in zip(self.divergent, attribute_divergent(self.divergent), strict=True):
                for name, value in zip(
                    ATTRIBUTED if d.against >= 0 else ATTRIBUTED[:-2], values, strict=False
                ):
                    columns[at[name]][d.row] = value
        schema = _schemas()[0]
        outcome = pl.DataFrame(
            dict(zip(names, columns, strict=True)),
            schema={**{c: schema[c] for c in self.columns}, "_pos": pl.Int64, "_seq": pl.Int64},
        )
        fixed = facts.filter(pl.col("_ok")).drop(
            "_ok", "_think", *(c for c in self.columns if c in facts.columns)
        )
        # in position order, as engine._finish puts the frame (perf: it then has nothing to sort)
        joined = outcome.join(fixed, on="_pos", how="left").sort("_pos")
        return joined.select(*REQUEST_COLUMNS, "_pos", "_seq")
