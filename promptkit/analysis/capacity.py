"""Hit ratio against cache capacity, in one pass: LRU stack distances over a trace's blocks.

A prefix cache of blocks (one Mooncake hash id, or one block of ``block_size`` tokens of a tokenized
log) evicting the least recently used block first is a *stack algorithm* (Mattson, Gecsei, Slutz and
Traiger, "Evaluation techniques for storage hierarchies", IBM Systems Journal 9(2), 1970): a cache of
``C`` blocks always holds the ``C`` most recently used blocks. So one pass that records, for every
block a request reads, how many distinct blocks were used since that block's last use (its *stack
distance*) gives the hit ratio at every capacity at once: a read hits at capacity ``C`` exactly when
its distance is at most ``C``.

The recency order is the one of :func:`promptkit.analysis.trace.simulate_trace` (a
:class:`~promptkit.analysis.simulator.RadixCache` over the block ids): a request uses all its blocks at
once, and among them the deeper block counts as less recent (the radix tree trims a leaf from its
tail). A block is then never more recent than its prefix, the cache is always a set of whole
prefixes, and a request's hit (its longest cached prefix) is the number of its blocks whose distance
is at most ``C``. ``tests/analysis/test_capacity.py`` checks the curve against the simulator.

The distances are counted with a merge-sort tree built by numpy (``O(n log n)`` for ``n`` block
reads), so the whole curve costs about one simulation at a single capacity
(``benchmarks/capacity_curve.py`` prints the ratio).

**Sampling** (SHARDS: Waldspurger, Park, Garthwaite and Ahmad, "Efficient MRC construction with
SHARDS", FAST'15): with ``sample_rate=R < 1`` only the blocks whose id hashes below ``R`` are kept
(spatial sampling: a kept block is kept in every request that reads it), their distances are counted
among kept blocks only and scaled by ``1/R``, with the paper's SHARDS_adj correction (a sample that
missed a hot block reads fewer tokens than ``R`` expects; the difference counts as hits at the
shortest distance). Memory and time fall with ``R``. The error is that of a sample, measured, not
bounded: on Mooncake's conversation trace (288,500 block reads of 182,790 distinct blocks), the
largest absolute error of the hit ratio at 1M, 4M, 16M, 64M tokens and unbounded, over seeds 0 to 4,
is 0.007 at ``R = 0.5``, 0.008 at ``R = 0.1``, 0.041 at ``R = 0.01`` and 0.19 at ``R = 0.001``
(``python benchmarks/capacity_curve.py --sampling PATH``). Keep ``R × distinct blocks`` above about
10,000; a trace whose hits sit on a few hot blocks needs more.

Example::

    >>> from promptkit.analysis.trace import TraceRecord
    >>> trace = [TraceRecord(0, 1024, 0, [1, 2]), TraceRecord(1, 512, 0, [3]), TraceRecord(2, 1024, 0, [1, 2])]
    >>> capacity_curve(trace, [512, 1024, 1536]).select("capacity_tokens", "hit_ratio").rows()
    [(512, 0.0), (1024, 0.2), (1536, 0.4)]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import attrs
import numpy as np

from promptkit.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from promptkit.analysis.trace import TraceRecord

__all__ = ["StackDistances", "capacity_curve", "stack_distances"]

_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix64(ids: np.ndarray, seed: int) -> np.ndarray:
    """splitmix64 of ``ids`` xor a seed: a uniform 64-bit hash per block id (for spatial sampling)."""
    with np.errstate(over="ignore"):
        z = ids.astype(np.uint64) ^ np.uint64(seed & 0xFFFFFFFFFFFFFFFF)
        z = (z + np.uint64(0x9E3779B97F4A7C15)) & _MASK64
        z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK64
        z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK64
        return z ^ (z >> np.uint64(31))


def _sampled(ids: np.ndarray, rate: float, seed: int) -> np.ndarray:
    """Which ids SHARDS keeps at ``rate``: those whose hash, read as a fraction of 2**24, is below it."""
    return (_mix64(ids, seed) >> np.uint64(40)).astype(np.int64) < int(rate * (1 << 24))


def _count_before_at_least(values: np.ndarray, ends: np.ndarray, lows: np.ndarray) -> np.ndarray:
    """For each query k: how many ``values[i]`` with ``i < ends[k]`` are ``>= lows[k]``.

    A merge-sort tree built level by level with numpy: at level ``j`` the positions fall in segments
    of ``2**j``, each sorted by value (one composite key ``segment * big + value``); ``[0, end)`` is the
    union of one segment per set bit of ``end``, and each is counted with one ``searchsorted``.
    Values lie in ``[-1, len(values))``.
    """
    n = int(values.shape[0])
    out = np.zeros(ends.shape[0], np.int64)
    if n == 0 or ends.shape[0] == 0:
        return out
    big = n + 2
    level = np.arange(n, dtype=np.int64) * big + (values + 1)  # level 0: segments of one position
    for j in range(n.bit_length()):
        chosen = np.flatnonzero((ends >> j) & 1)
        if chosen.shape[0]:
            segment = (ends[chosen] >> j) - 1
            first = np.searchsorted(level, segment * big + lows[chosen] + 1, side="left")
            stop = np.minimum((segment + 1) << j, n)
            out[chosen] += stop - first
        # the next level: segments twice as long (each is two sorted runs: a stable sort merges them)
        level = np.sort((level // big >> 1) * big + level % big, kind="stable")
    return out


@attrs.frozen(slots=True, eq=False)
class StackDistances:
    """The LRU stack distance of every block read of a trace (the input of every capacity curve).

    ``distances``: per block read, its distance in blocks (1 = the most recently used block; 0 = never
    used before, a miss at any capacity); ``tokens``: the input tokens of that block (a request's last
    block may be partial); ``total_tokens``: input tokens of every request; ``sample_rate``: the SHARDS
    rate (1.0 = every block; distances are then among sampled blocks and :meth:`hit_tokens` scales
    them); ``distinct_blocks``: distinct blocks read (sampled ones when sampling).
    """

    distances: np.ndarray
    tokens: np.ndarray
    total_tokens: int
    sample_rate: float
    distinct_blocks: int
    block_size: int

    def hit_tokens(self, capacity_blocks: Sequence[int | None]) -> np.ndarray:
        """Cached input tokens at each capacity in blocks (None = unbounded), estimated when sampled.

        >>> from promptkit.analysis.trace import TraceRecord
        >>> d = stack_distances([TraceRecord(0, 512, 0, [1]), TraceRecord(1, 512, 0, [1])])
        >>> d.hit_tokens([1, None]).tolist()
        [512.0, 512.0]
        """
        warm = self.distances > 0
        order = np.argsort(self.distances[warm], kind="stable")
        dist = self.distances[warm][order]
        cum = np.concatenate(([0.0], np.cumsum(self.tokens[warm][order], dtype=np.float64)))
        limits = np.array(
            [np.inf if c is None else float(c) * self.sample_rate for c in capacity_blocks], np.float64
        )
        hits = cum[np.searchsorted(dist, limits, side="right")]
        if self.sample_rate < 1.0:
            # SHARDS_adj (the paper's adjustment): the sample reads fewer (more) tokens than the rate
            # expects when it missed (caught) a hot block; the difference counts as hits at the
            # shortest distance, where the hot blocks' reads fall. Then scale to every input token.
            expected = self.sample_rate * self.total_tokens
            if expected <= 0:
                return hits * 0.0
            adjusted = np.clip((hits + (expected - float(self.tokens.sum()))) / expected, 0.0, 1.0)
            return adjusted * self.total_tokens
        return hits


def _check_rate(sample_rate: float) -> None:
    if not 0.0 < sample_rate <= 1.0:
        raise UsageError(f"sample_rate must be in (0, 1], got {sample_rate!r}")


def _reads(
    trace: Iterable[TraceRecord], block_size: int, sample_rate: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Every block read of ``trace`` (SHARDS-sampled when ``sample_rate < 1``), in input order: block
    id, its tokens, its request's input position, its depth; then each request's time and the input
    tokens of all. Read in chunks, so a sampled trace is never held whole."""
    parts: list[tuple[np.ndarray, ...]] = []
    flat: list[int] = []
    counts: list[int] = []
    lengths: list[int] = []
    times: list[float] = []
    first = 0  # input position of the chunk's first request
    total = 0

    def flush() -> None:
        nonlocal first
        ids = np.array(flat, np.int64)
        sizes = np.array(counts, np.int64)
        local = np.repeat(np.arange(sizes.shape[0], dtype=np.int64), sizes)
        depth = np.arange(ids.shape[0], dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        tokens = np.clip(np.array(lengths, np.int64)[local] - depth * block_size, 0, block_size)
        part = (ids, tokens, local + first, depth)
        if sample_rate < 1.0:
            keep = _sampled(ids, sample_rate, seed)
            part = tuple(x[keep] for x in part)
        parts.append(part)
        first += int(sizes.shape[0])
        flat.clear()
        counts.clear()
        lengths.clear()

    for record in trace:
        flat.extend(record.hash_ids)
        counts.append(len(record.hash_ids))
        lengths.append(record.input_length)
        times.append(record.timestamp)
        total += record.input_length
        if len(flat) >= 1 << 20:
            flush()
    flush()
    ids, tokens, request, depth = (np.concatenate([p[i] for p in parts]) for i in range(4))
    return ids, tokens, request, depth, np.array(times, np.float64), total


def stack_distances(
    trace: Iterable[TraceRecord],
    *,
    block_size: int = 512,
    sample_rate: float = 1.0,
    seed: int = 0,
) -> StackDistances:
    """The LRU stack distance of every block read of ``trace``, in time order (ties keep file order).

    ``sample_rate < 1`` keeps only the blocks SHARDS samples (see the module docstring), so a trace
    read lazily (any iterable of :class:`~promptkit.analysis.trace.TraceRecord`) needs memory for the
    sample only.

    >>> from promptkit.analysis.trace import TraceRecord
    >>> trace = [TraceRecord(0, 1024, 0, [1, 2]), TraceRecord(1, 512, 0, [3]), TraceRecord(2, 1024, 0, [1, 2])]
    >>> stack_distances(trace).distances.tolist()   # request 2 reads block 1 (distance 2) and 2 (3)
    [0, 0, 0, 3, 2]
    """
    if block_size <= 0:
        raise UsageError(f"block_size must be > 0, got {block_size!r}")
    _check_rate(sample_rate)
    ids, tokens, request, depth, times, total = _reads(trace, block_size, sample_rate, seed)
    # requests in time order (ties keep input order); within a request the deepest block first: the
    # shallower block is the more recent one
    rank = np.empty(times.shape[0], np.int64)
    rank[np.argsort(times, kind="stable")] = np.arange(times.shape[0])
    order = np.lexsort((-depth, rank[request]))
    ids, tokens = ids[order], tokens[order]
    ranked = rank[request][order]
    # the position where each read's request starts
    starts = np.searchsorted(ranked, ranked, side="left").astype(np.int64)
    # each read's previous read of the same block (-1: none)
    by_block = np.argsort(ids, kind="stable")
    same = ids[by_block][1:] == ids[by_block][:-1]
    previous = np.full(ids.shape[0], -1, np.int64)
    previous[by_block[1:][same]] = by_block[:-1][same]
    warm = np.flatnonzero((previous >= 0) & (previous < starts))
    # distance = distinct blocks read in [previous, start): the reads there minus the repeated ones
    lows, ends = previous[warm], starts[warm]
    distances = np.zeros(ids.shape[0], np.int64)
    distances[warm] = (ends - lows) - _count_before_at_least(previous, ends, lows)
    return StackDistances(
        distances=distances,
        tokens=tokens,
        total_tokens=total,
        sample_rate=sample_rate,
        distinct_blocks=int(ids.shape[0] - same.sum()),
        block_size=block_size,
    )


def _default_capacities(distinct_blocks: int, block_size: int) -> list[int | None]:
    out: list[int | None] = []
    blocks = 1
    while blocks < distinct_blocks:
        out.append(blocks * block_size)
        blocks *= 2
    out.append(None)
    return out


def capacity_curve(
    trace: Iterable[TraceRecord] | StackDistances,
    capacities: Sequence[int | None] | None = None,
    *,
    block_size: int = 512,
    sample_rate: float = 1.0,
    seed: int = 0,
    bytes_per_token: float | None = None,
) -> pl.DataFrame:
    """The LRU hit ratio of ``trace`` at each capacity in tokens (None = unbounded), in one pass.

    A cache of ``T`` tokens holds ``T // block_size`` whole blocks. Columns: ``capacity_tokens``
    (null = unbounded), ``capacity_blocks``, ``capacity_bytes`` (with ``bytes_per_token``, see
    :mod:`promptkit.analysis.kv_bytes`), ``hit_tokens``, ``hit_ratio`` (cached over all input tokens),
    ``sample_rate``. Without ``capacities``: powers of two blocks up to the distinct blocks, and
    unbounded. ``trace`` may also be the :class:`StackDistances` of an earlier call.

    >>> from promptkit.analysis.trace import read_trace
    >>> sample = read_trace("fixtures/traces/mooncake-readme-sample.jsonl")
    >>> capacity_curve(sample, [4096, None])["hit_ratio"].round(3).to_list()
    [0.305, 0.458]
    """
    import polars as pl

    d = (
        trace
        if isinstance(trace, StackDistances)
        else stack_distances(trace, block_size=block_size, sample_rate=sample_rate, seed=seed)
    )
    caps = (
        list(capacities) if capacities is not None else _default_capacities(d.distinct_blocks, d.block_size)
    )
    for c in caps:
        if c is not None and (isinstance(c, bool) or not isinstance(c, int | np.integer) or c <= 0):
            raise UsageError(f"capacity must be a positive number of tokens or None, got {c!r}")
    blocks = [None if c is None else int(c) // d.block_size for c in caps]
    hits = d.hit_tokens(blocks)
    ratio = [float(h) / d.total_tokens if d.total_tokens else None for h in hits]
    frame = pl.DataFrame(
        {
            "capacity_tokens": [None if c is None else int(c) for c in caps],
            "capacity_blocks": blocks,
            "hit_tokens": [float(h) for h in hits],
            "hit_ratio": ratio,
            "sample_rate": [d.sample_rate] * len(caps),
        },
        schema={
            "capacity_tokens": pl.Int64, "capacity_blocks": pl.Int64, "hit_tokens": pl.Float64,
            "hit_ratio": pl.Float64, "sample_rate": pl.Float64,
        },
    )  # fmt: skip
    if bytes_per_token is not None:
        frame = frame.with_columns(
            (pl.col("capacity_tokens").cast(pl.Float64) * float(bytes_per_token)).alias("capacity_bytes")
        ).select(
            "capacity_tokens", "capacity_blocks", "capacity_bytes", "hit_tokens", "hit_ratio", "sample_rate"
        )
    return frame
