"""The stage 1 → 2 contract of a parallel simulated view, and the stage 2 → 3 one: what crosses
between processes, by name.

The simulated view's cache cannot be divided (a call reads what any earlier call of any session
stored), so its replay runs in one process, the coordinator, in time order; stage 1 runs where the
records are. What crosses:

- :func:`tokenize_chunk` (stage 1 over a chunk of whole sessions, on a worker) returns a
  :class:`TokenizedChunk`: the tokens as per-session delta streams (:class:`DeltaStream`, each new
  token once), each request's cache plan and head in columns, its composition rows, and the columns
  of its row that need no cache outcome (:class:`ChunkFacts`);
- the coordinator reads the streams back with a :class:`DeltaReader`, a request at a time, as the
  replay asks (:class:`~promptkit.analysis.replay.Replayer`);
- the replay names each request whose prompt left the cached content as a :class:`Divergent` (where,
  against which requests, the excerpts' token ids), which stage 3
  (:func:`~promptkit.analysis.attribute.attribute`) turns into message, slot, excerpts and change
  class, in the coordinator's process or on a worker that holds the records.

>>> EXCERPT_TOKENS
12
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import attrs

from promptkit.analysis.columns import FIXED_COLUMNS, frame_schemas
from promptkit.analysis.prepare import PreparedRecord, Preparer, RequestLocal, composition_frame
from promptkit.analysis.runtime import gc_paused
from promptkit.analysis.spec import AnalysisSpec, context_for
from promptkit.layout import LoadProblem, RequestRecord
from promptkit.tokens.cache_models import PlanColumns

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import polars as pl

    from promptkit.tokens.tokenize import TokenBuffer, TokenizedRequest

__all__ = [
    "EXCERPT_TOKENS",
    "ChunkFacts",
    "DeltaReader",
    "DeltaStream",
    "Divergent",
    "FactRows",
    "ShippedRequest",
    "TokenizedChunk",
    "tokenize_chunk",
]

#: Tokens decoded on each side of a divergence for ``divergence_cached_text`` / ``divergence_prompt_text``.
EXCERPT_TOKENS: Final[int] = 12


class Divergent(NamedTuple):
    """A request whose prompt left the cached content, as the replay hands it to stage 3
    (:func:`~promptkit.analysis.attribute.attribute`): its row (its place among the rows the replay
    made) and position, the position of the request whose entry it read (``source``, -1: none) and of
    the one its change is classified against (``against``, -1: none), the divergence token, its message
    offsets and head (to place the token in a message), its thinking render and the excerpts' token
    ids (:data:`EXCERPT_TOKENS` on each side)."""

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


class ShippedRequest(NamedTuple):
    """One tokenized request, as phase 1 puts it in a :class:`DeltaStream`."""

    position: int
    base: int  # the position of its session's previous tokenized request, -1 for none
    shared: int  # its first tokens that are that request's
    tail: np.ndarray  # the tokens after those
    tok: TokenizedRequest
    local: RequestLocal


class DeltaStream:
    """Phase 1's tokenized requests of a chunk, as it ships them: per-session token delta streams in
    columns (perf: a handful of arrays per chunk, which the coordinator unpickles in a few calls: the
    streams of the benchmark's 20 files in 0.5 ms, where an object of three arrays per request had it
    rebuild about 7,600 small arrays).

    A request's tokens are those it shares with its session's previous tokenized request (``base``,
    a position, -1 for none; ``shared`` tokens), left out, followed by its ``tail``, sent (int32 when
    the ids fit): a session's stream so carries each new token once, exactly (what a Mooncake
    block-hash chain carries, plus the token ids that place a divergence to the token). Row ``i``'s
    tail is ``tails[tail_at[i]:tail_at[i + 1]]``, its message offsets ``starts[starts_at[i]:...]`` and
    ``ends[...]`` (``has_ends``: the render gave them). ``room``: the most tokens of a request of the
    session from this one on (the buffer phase 2 rebuilds them in is made that large once).

    The request-local facts (:class:`RequestLocal`) travel as columns too: ``head_end``, ``marked`` (-1:
    None) and the plans (``plans``, :class:`~promptkit.tokens.cache_models._PlanColumns`). A record
    that could not be tokenized is not in the stream (its problem travels with the chunk's facts,
    :class:`ChunkFacts`)."""

    __slots__ = (
        "base", "ends", "has_ends", "head_end", "header_len", "marked", "plans", "positions", "prompt_len", "room",
        "shared", "starts", "starts_at", "tail_at", "tails",
    )  # fmt: skip

    def __init__(self) -> None:
        import numpy as np

        empty = np.zeros(0, np.int64)
        self.positions, self.base, self.shared, self.header_len, self.prompt_len, self.room = (empty,) * 6
        self.head_end, self.marked = empty, empty
        self.plans = PlanColumns()
        self.tails, self.starts, self.ends = empty, empty.astype(np.int32), empty.astype(np.int32)
        self.tail_at = self.starts_at = np.zeros(1, np.int64)
        self.has_ends = np.zeros(0, bool)

    @classmethod
    def of(cls, rows: Sequence[ShippedRequest]) -> DeltaStream:
        """The stream of ``rows``."""
        import numpy as np

        stream = cls()
        if not rows:
            return stream
        n = len(rows)

        def column(values: Iterable[Any], dtype: Any = np.int64) -> np.ndarray:
            return np.fromiter(values, dtype, n)

        def concat(parts: Sequence[Sequence[Any] | np.ndarray], dtype: Any) -> tuple[np.ndarray, np.ndarray]:
            at = np.zeros(len(parts) + 1, np.int64)
            np.cumsum([len(x) for x in parts], out=at[1:])
            return (np.concatenate(parts).astype(dtype, copy=False) if at[-1] else np.zeros(0, dtype)), at

        toks = [r.tok for r in rows]
        stream.positions, stream.base = column(r.position for r in rows), column(r.base for r in rows)
        stream.shared = column(r.shared for r in rows)
        stream.header_len = column(t.header_len for t in toks)
        stream.prompt_len = column(t.prompt_len for t in toks)
        tails = [r.tail for r in rows]
        low = min((int(t.min()) for t in tails if t.size), default=0)
        high = max((int(t.max()) for t in tails if t.size), default=0)
        stream.tails, stream.tail_at = concat(
            tails, np.int32 if -(2**31) <= low and high < 2**31 else np.int64
        )
        stream.starts, stream.starts_at = concat([t.message_starts for t in toks], np.int32)
        stream.ends, _ = concat([t.message_ends or t.message_starts for t in toks], np.int32)
        stream.has_ends = column((t.message_ends is not None for t in toks), bool)
        stream.head_end = column(r.local.head_end for r in rows)
        stream.marked = column(-1 if r.local.marked is None else r.local.marked for r in rows)
        stream.plans = PlanColumns.of(r.local.plan for r in rows)
        # a row's room: the longest request of its chain from it on (rows are in position order, and a
        # row's base is an earlier row's position)
        room = (stream.shared + np.diff(stream.tail_at)).tolist()
        row_of = {r.position: i for i, r in enumerate(rows)}
        for i in range(n - 1, -1, -1):
            if rows[i].base >= 0:
                j = row_of[rows[i].base]
                room[j] = max(room[j], room[i])
        stream.room = np.asarray(room, np.int64)
        return stream


@attrs.frozen(slots=True)
class ChunkFacts:
    """What the coordinator of a parallel simulated view needs of a chunk's records, so that it holds
    none of them (:mod:`promptkit.analysis.plans.coordinator`).

    ``frame``: one row per record, in position order (``_pos``): whether it was tokenized (``_ok``),
    its thinking render (``_think``) and the columns of its row that need no cache outcome
    (:data:`FIXED_COLUMNS`; of a record that was not tokenized, only session, index and timestamp).
    ``problems``: (position, problem) of a record that could not be tokenized and of the usage
    contradictions of one that was (each session's calls in position order, which is their order in
    the analysis too); ``mended``: (position, where) of the records whose lone surrogates were mended."""

    frame: pl.DataFrame
    problems: list[tuple[int, LoadProblem]]
    mended: list[tuple[int, str]]
    # ruler mode: position -> (the usage a request reported, its log events): what places its positions
    # (:func:`~promptkit.analysis.ruler.place_row`) that is not a column the coordinator makes
    ruler_inputs: dict[int, tuple[Any, str | None]]


@attrs.frozen(slots=True)
class TokenizedChunk:
    """What phase 1 of a parallel simulated view returns for a chunk: the per-session token delta
    streams (:class:`DeltaStream`), and the chunk's composition rows (``_pos`` its records'
    positions), which need no cache outcome: the worker that tokenized a request also places its
    tokens in its blocks, and the coordinator only joins the columns. ``facts``: what the row of each
    request needs of its record (:class:`ChunkFacts`)."""

    deltas: DeltaStream
    composition: pl.DataFrame
    facts: ChunkFacts
    names: tuple[str, str]  # the tokenizer's and the render's: the coordinator loads neither


class FactRows:
    """Stage 1's :class:`ChunkFacts` of a chunk, a record at a time (what :class:`~promptkit.analysis.prepare.Preparer`
    made of it: its problems and mended records are the preparer's)."""

    def __init__(self, exact: bool) -> None:
        self.exact = exact
        self.rows: list[tuple[Any, ...]] = []
        self.ruler_inputs: dict[int, tuple[Any, str | None]] = {}

    def add(self, pos: int, record: RequestRecord, think: str | None, done: PreparedRecord | None) -> None:
        """The record at ``pos``: prepared (``done``) or not (None: only its session, index and time)."""
        if done is None:
            known = dict(session=record.session, index=record.index, timestamp=record.timestamp)
            self.rows.append((pos, False, think, *(known.get(c) for c in FIXED_COLUMNS)))
            return
        fixed = done.fixed
        self.rows.append((pos, True, think, *(fixed[c] for c in FIXED_COLUMNS)))
        if not self.exact and (record.usage is not None or done.events is not None):
            self.ruler_inputs[pos] = (record.usage, done.events)

    def facts(self, problems: list[tuple[int, LoadProblem]], mended: list[tuple[int, str]]) -> ChunkFacts:
        """The chunk's facts, with the ``problems`` and ``mended`` records of its preparer."""
        import polars as pl

        requests = frame_schemas()[0]
        schema = {
            "_pos": pl.Int64,
            "_ok": pl.Boolean,
            "_think": pl.String,
            **{c: requests[c] for c in FIXED_COLUMNS},
        }
        columns = [list(c) for c in zip(*self.rows, strict=True)] or [[] for _ in schema]
        frame = pl.DataFrame(dict(zip(schema, columns, strict=True)), schema=schema)
        return ChunkFacts(frame, problems, mended, self.ruler_inputs)


@gc_paused()  # perf: a worker's task (see promptkit.analysis.runtime)
def tokenize_chunk(spec: AnalysisSpec, items: Sequence[tuple[int, RequestRecord]]) -> TokenizedChunk:
    """Stage 1 of a parallel simulated view (runs in a worker): prepare each record of whole sessions
    (:class:`~promptkit.analysis.prepare.Preparer`) into per-session delta streams (:class:`DeltaStream`),
    its composition rows and what each request's row needs of its record (:class:`ChunkFacts`)."""
    import numpy as np

    ctx = context_for(spec)
    stage1 = Preparer(ctx)
    last: dict[str, tuple[int, np.ndarray]] = {}
    rows: list[ShippedRequest] = []
    fact_rows = FactRows(ctx.profile.exact_tokenizer)
    for pos, record in sorted(items, key=lambda t: t[0]):
        done = stage1.prepare(pos, record)
        if done is not None:  # one that is not is a problem of the facts
            result = done.tok
            tokens = result.tokens
            base, shared = -1, 0
            prev = last.get(record.session)
            if prev is not None:
                n = min(len(prev[1]), len(tokens))
                diff = np.flatnonzero(prev[1][:n] != tokens[:n])
                base, shared = prev[0], int(diff[0]) if diff.size else n
            rows.append(ShippedRequest(pos, base, shared, tokens[shared:], result, done.local))
            last[record.session] = (pos, tokens)
        fact_rows.add(pos, record, stage1.think, done)
    return TokenizedChunk(
        DeltaStream.of(rows),
        composition_frame(stage1.composition),
        fact_rows.facts(stage1.problems, stage1.mended),
        (ctx.tokenizer_name, ctx.render_name),
    )


class DeltaReader:
    """Phase 2's tokens from phase 1's delta streams (:class:`DeltaStream`, each with the offset of
    its positions in the load order), rebuilt as phase 2 asks for them: a request's tokens are its
    session's previous tokenized request's first ``shared`` tokens and its ``tail``.
    memory: a session's requests are views of one growing buffer, as the tokenizer hands them out
    (``TokenBuffer``): what the simulator stores of them is held once, not once per request.
    perf: a request comes without its message offsets (they grow with the conversation); phase 2 asks
    for them where it diverged (:meth:`with_offsets`)."""

    __slots__ = (
        "_at", "_columns", "_extend", "_last", "_taken", "_trusted", "composition", "local", "shared",
    )  # fmt: skip

    def __init__(
        self, streams: Sequence[tuple[int, DeltaStream]], composition: Sequence[pl.DataFrame] = ()
    ) -> None:
        from promptkit.tokens.tokenize import TokenBuffer, TokenizedRequest

        # perf: looked up once, not per request
        self._extend, self._trusted = TokenBuffer.extend, TokenizedRequest.trusted
        self.composition = list(composition)  # phase 1's composition rows (``_pos``: record positions)
        self._last: dict[str, TokenBuffer] = {}
        self.shared = 0  # the last request taken: its first tokens that are its session's previous one's
        self.local: RequestLocal | None = None  # the last request taken: its request-local facts
        self._taken = (0, 0)  # the last request taken: (stream, row)
        # perf: each stream's small columns as Python ints once (a numpy scalar per request costs more)
        self._columns: list[tuple[Any, ...]] = []
        self._at: dict[int, tuple[int, int]] = {}  # load-order position -> (stream, row)
        for offset, stream in streams:
            k = len(self._columns)
            self._columns.append(
                (
                    stream.room.tolist(),
                    stream.base.tolist(),
                    stream.shared.tolist(),
                    stream.header_len.tolist(),
                    stream.prompt_len.tolist(),
                    stream.tail_at.tolist(),
                    stream.tails,
                    stream.head_end.tolist(),
                    [None if m < 0 else m for m in stream.marked.tolist()],
                    stream.plans,
                    stream,  # memory: the message offsets stay arrays (rebuilt only where asked for)
                )
            )
            self._at.update((pos + offset, (k, i)) for i, pos in enumerate(stream.positions.tolist()))

    def tokens(self, pos: int, session: str) -> np.ndarray:
        """The tokens of the tokenized request at ``pos`` (of ``session``), alone: its request-local facts
        are :attr:`local` until the next call."""
        k, i = self._taken = self._at.pop(pos)
        room, base, shared, _, _, tail_at, tails, head_end, marked, plans, _ = self._columns[k]
        buffer = self._last.get(session) if base[i] >= 0 else None
        self.shared = shared[i] if buffer is not None else 0
        # perf: the int32 tail is written into the int64 buffer as it is (no int64 copy of it first); a
        # new buffer holds the session's longest request to come (its prefix is copied once)
        tokens, self._last[session], _ = self._extend(
            buffer, self.shared, tails[tail_at[i] : tail_at[i + 1]], room[i]
        )
        self.local = RequestLocal(plans.plan(i), head_end[i], marked[i])
        return tokens

    def with_offsets(self, tokens: np.ndarray) -> TokenizedRequest:
        """The last request taken (its ``tokens``), with its message offsets."""
        k, i = self._taken
        columns = self._columns[k]
        stream = columns[-1]
        a, b = int(stream.starts_at[i]), int(stream.starts_at[i + 1])
        return self._trusted(
            tokens,
            tuple(stream.starts[a:b].tolist()),
            columns[3][i],
            columns[4][i],
            tuple(stream.ends[a:b].tolist()) if stream.has_ends[i] else None,
        )
