"""A fleet of replicas, each with its own prefix cache, behind a routing policy: replayed offline.

Each replica keeps its own LRU cache of blocks (the policy of
:func:`promptkit.analysis.trace.simulate_trace` and :mod:`promptkit.analysis.capacity`: a request uses
all its blocks at once, the deeper block counts as less recent), ``capacity`` tokens each. Requests
arrive in timestamp order (ties keep input order); the router picks a replica
(:mod:`promptkit.analysis.fleet_policies`: the policies, the router's view, its settings); the request
reads its longest cached prefix there, then stores all its blocks there. With a latency model
(:mod:`promptkit.analysis.fleet_latency`) each replica also prefills its requests one at a time, first
come first served, and the result carries the time to first token.

An optional **shared tier** (a CPU-memory pool, as Mooncake's store and LMCache keep) holds every block
any replica used, LRU with its own capacity; a request reads its prefix from its replica's cache and
continues it from the shared tier. The inputs (traces, logs) are read by
:mod:`promptkit.analysis.fleet_input`.

Example::

    >>> from promptkit.analysis.trace import TraceRecord
    >>> doc = list(range(8))                              # a shared 4k-token document, 8 blocks
    >>> trace = [TraceRecord(t, 4608, 1, doc + [100 + t]) for t in range(8)]
    >>> fleet = simulate_fleet(trace, replicas=4, policy="round_robin", capacity=None)
    >>> round(fleet.summary["hit_ratio"].item(), 3)       # 4 of 8 requests read the document cold
    0.444
    >>> fleet = simulate_fleet(trace, replicas=4, policy="prefix_aware", capacity=None)
    >>> round(fleet.summary["hit_ratio"].item(), 3)       # all but the first read it warm
    0.778
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import attrs

from promptkit.analysis.fleet_input import FleetInput, load_fleet_input
from promptkit.analysis.fleet_latency import GpuProfile, LatencyModel, ReplicaQueue, latency_for, percentiles
from promptkit.analysis.fleet_policies import POLICIES, BlockLRU, Router, RouterSettings
from promptkit.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from promptkit.analysis.trace import TraceRecord

__all__ = [
    "POLICIES",
    "FleetInput",
    "FleetResult",
    "RouterSettings",
    "compare_fleet",
    "load_fleet_input",
    "simulate_fleet",
]


#: The router settings when none are given (each policy's documented defaults).
DEFAULT_ROUTER: Final[RouterSettings] = RouterSettings()


@attrs.frozen(slots=True, eq=False)
class FleetResult:
    """``summary``: one row per configuration; ``replicas``: one row per replica of each."""

    summary: pl.DataFrame
    replicas: pl.DataFrame


@attrs.define(slots=True)
class _Counts:
    """One replay's tallies: per replica [requests, input, cached, of which shared]; TTFTs and waits."""

    replicas: list[list[int]]
    ttft: list[float] = attrs.field(factory=list)
    wait: list[float] = attrs.field(factory=list)


def _replay(
    trace: Sequence[TraceRecord],
    sessions: Sequence[str] | None,
    router: Router,
    capacity_blocks: int | None,
    shared_blocks: int | None,
    shared: bool,
    latency: LatencyModel | None,
) -> _Counts:
    """Route and serve every request in arrival order."""
    block_size = router.block_size
    window = router.settings.inflight_seconds
    caches = [BlockLRU(capacity_blocks) for _ in range(router.replicas)]
    queues = [ReplicaQueue() for _ in range(router.replicas)]
    pool = BlockLRU(shared_blocks) if shared else None
    counts = _Counts([[0, 0, 0, 0] for _ in range(router.replicas)])
    order = sorted(range(len(trace)), key=lambda k: (trace[k].timestamp, k))
    for k in order:
        record = trace[k]
        now = record.timestamp / 1000.0
        r = router.choose(record, sessions[k] if sessions is not None else None, caches, now)
        ids = record.hash_ids
        local = caches[r].prefix(ids)
        total = local
        if pool is not None:
            total = max(local, pool.prefix(ids))
            pool.use(ids)
        caches[r].use(ids)
        n = record.input_length
        cached = min(total * block_size, n)
        if latency is not None:
            seen = queues[r].admit(
                arrival=now, uncached_tokens=n - cached, model=latency, output_tokens=record.output_length
            )
            first, leaves = seen.first_token, seen.end
            counts.ttft.append(seen.ttft)
            counts.wait.append(seen.start - now)
        else:
            first = leaves = now + window
        router.routed(r, record, first_token=first, leaves=leaves, uncached=len(ids) - total)
        row = counts.replicas[r]
        row[0] += 1
        row[1] += n
        row[2] += cached
        row[3] += cached - min(local * block_size, n)
    return counts


_SUMMARY_SCHEMA = {
    "policy": "String", "replicas": "Int64", "capacity_tokens": "Int64", "shared_capacity_tokens": "Int64",
    "shared_tier": "Boolean", "requests": "Int64", "input_tokens": "Int64", "cached_tokens": "Int64",
    "prefill_tokens": "Int64", "hit_ratio": "Float64", "shared_hit_ratio": "Float64",
    "mean_replica_hit_ratio": "Float64", "load_imbalance": "Float64", "prefill_tokens_per_s": "Float64",
    "ttft_p50_s": "Float64", "ttft_p90_s": "Float64", "ttft_p99_s": "Float64", "ttft_mean_s": "Float64",
    "queue_wait_mean_s": "Float64",
}  # fmt: skip


def _frames(
    counts: _Counts,
    policy: str,
    capacity: int | None,
    shared_capacity: int | None,
    shared: bool,
    requests: int,
    latency: LatencyModel | None,
) -> FleetResult:
    """The summary row and the per-replica rows of one replay's counts."""
    import polars as pl

    stats = counts.replicas
    replicas = len(stats)
    per = pl.DataFrame(
        {
            "replica": list(range(replicas)),
            "requests": [s[0] for s in stats],
            "input_tokens": [s[1] for s in stats],
            "cached_tokens": [s[2] for s in stats],
            "shared_cached_tokens": [s[3] for s in stats],
        },
        schema={
            "replica": pl.Int64, "requests": pl.Int64, "input_tokens": pl.Int64, "cached_tokens": pl.Int64,
            "shared_cached_tokens": pl.Int64,
        },
    ).with_columns(
        (pl.col("cached_tokens") / pl.col("input_tokens")).alias("hit_ratio")
    )  # fmt: skip
    total_in = sum(s[1] for s in stats)
    cached = sum(s[2] for s in stats)
    mean_in = total_in / replicas
    served = per.filter(pl.col("input_tokens") > 0)["hit_ratio"]
    p50, p90, p99 = percentiles(counts.ttft)
    values = {
        "policy": policy,
        "replicas": replicas,
        "capacity_tokens": capacity,
        "shared_capacity_tokens": shared_capacity,
        "shared_tier": shared,
        "requests": requests,
        "input_tokens": total_in,
        "cached_tokens": cached,
        "prefill_tokens": total_in - cached,
        "hit_ratio": cached / total_in if total_in else None,
        "shared_hit_ratio": sum(s[3] for s in stats) / total_in if total_in else None,
        "mean_replica_hit_ratio": float(served.mean()) if served.len() else None,  # type: ignore[arg-type]
        "load_imbalance": max(s[1] for s in stats) / mean_in if mean_in else None,
        "prefill_tokens_per_s": latency.prefill_tokens_per_s if latency is not None else None,
        "ttft_p50_s": p50,
        "ttft_p90_s": p90,
        "ttft_p99_s": p99,
        "ttft_mean_s": sum(counts.ttft) / len(counts.ttft) if counts.ttft else None,
        "queue_wait_mean_s": sum(counts.wait) / len(counts.wait) if counts.wait else None,
    }
    summary = pl.DataFrame(
        {k: [v] for k, v in values.items()},
        schema={k: getattr(pl, t) for k, t in _SUMMARY_SCHEMA.items()},
    )
    keys = summary.select("policy", "replicas", "capacity_tokens", "shared_capacity_tokens")
    return FleetResult(summary, keys.join(per, how="cross"))


#: The most replicas one configuration simulates: each holds a cache and a queue in memory (100,000,000 of
#: them once took 7.5 GB and ran on for minutes before a MemoryError).
MAX_REPLICAS: Final[int] = 65_536


def _check(replicas: int, policy: str, capacity: int | None, shared: int | None, block_size: int) -> None:
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise UsageError(f"replicas must be a whole number >= 1, got {replicas!r}")
    if replicas > MAX_REPLICAS:
        raise UsageError(
            f"replicas: {replicas:,} is more than the {MAX_REPLICAS:,} a fleet is simulated with here "
            "(each replica holds a cache and a queue in memory)"
        )
    if policy not in POLICIES:
        raise UsageError(f"unknown routing policy {policy!r}; known: {', '.join(POLICIES)}")
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size <= 0:
        raise UsageError(f"block_size must be a positive whole number of tokens, got {block_size!r}")
    for name, value in (("capacity", capacity), ("shared capacity", shared)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise UsageError(f"{name} must be a positive number of tokens or None (unbounded), got {value!r}")
        if value < block_size:
            raise UsageError(f"{name} {value} tokens holds no block of {block_size} tokens")


def simulate_fleet(
    trace: Sequence[TraceRecord] | FleetInput,
    *,
    replicas: int,
    policy: str,
    capacity: int | None,
    shared_capacity: int | None = None,
    shared_tier: bool = False,
    sessions: Sequence[str] | None = None,
    block_size: int = 512,
    router: RouterSettings = DEFAULT_ROUTER,
    latency: LatencyModel | None = None,
) -> FleetResult:
    """Replay ``trace`` over ``replicas`` caches of ``capacity`` tokens each (None = unbounded).

    ``shared_tier=True`` (or a ``shared_capacity``) adds the shared tier; ``latency`` adds the FCFS
    prefill queues (:mod:`promptkit.analysis.fleet_latency`). ``summary`` columns: ``policy``,
    ``replicas``, ``capacity_tokens``, ``shared_capacity_tokens``, ``requests``, ``input_tokens``,
    ``cached_tokens`` (= prefill tokens saved), ``prefill_tokens``, ``hit_ratio`` (the fleet's: cached
    over input tokens), ``shared_hit_ratio`` (the part read from the shared tier),
    ``mean_replica_hit_ratio`` (the plain mean of the replicas' ratios), ``load_imbalance`` (max / mean
    input tokens per replica), ``prefill_tokens_per_s``, ``ttft_p50_s`` / ``ttft_p90_s`` /
    ``ttft_p99_s`` / ``ttft_mean_s`` (time to first token, seconds) and ``queue_wait_mean_s`` (null
    without a latency model). ``replicas``: the same counts per replica.

    >>> from promptkit.analysis.trace import read_trace
    >>> head = read_trace("fixtures/traces/mooncake-conversation-head.jsonl")
    >>> simulate_fleet(head, replicas=0, policy="round_robin", capacity=None)
    Traceback (most recent call last):
    ...
    promptkit.errors.UsageError: replicas must be a whole number >= 1, got 0
    """
    if isinstance(trace, FleetInput):
        sessions = trace.sessions if sessions is None else sessions
        block_size = trace.block_size
        trace = trace.trace
    _check(replicas, policy, capacity, shared_capacity, block_size)
    _check_sessions(policy, sessions, len(trace))
    shared = shared_tier or shared_capacity is not None
    capacity_blocks = None if capacity is None else capacity // block_size
    counts = _replay(
        trace,
        sessions,
        Router(policy, replicas, router, block_size, capacity_blocks),
        capacity_blocks,
        None if shared_capacity is None else shared_capacity // block_size,
        shared,
        latency,
    )
    return _frames(counts, policy, capacity, shared_capacity, shared, len(trace), latency)


def _check_sessions(policy: str, sessions: Sequence[str] | None, requests: int) -> None:
    if policy == "session" and sessions is None:
        raise UsageError(
            "policy 'session' needs session ids, and this input has none (a Mooncake trace has none)"
        )
    if sessions is not None and len(sessions) != requests:
        raise UsageError(f"sessions: {len(sessions)} ids for {requests} requests")


@attrs.frozen(slots=True)
class _Run:
    """One configuration of :func:`compare_fleet`: a model (or none), a capacity, its latency model."""

    model: str | None
    bytes_per_token: float | None
    capacity: int | None
    capacity_bytes: float | None
    latency: LatencyModel | None


def _runs(
    models: Sequence[str],
    capacities: Sequence[int | None],
    capacity_bytes: Sequence[float],
    latency: LatencyModel | GpuProfile | None,
) -> list[_Run]:
    from promptkit.analysis.kv_bytes import model_layout

    layouts = [model_layout(m) for m in models]
    if capacity_bytes and not layouts:
        raise UsageError(
            "capacities in bytes need a model to turn them into tokens (--model NAME on the command line, "
            "models=[...] in the API)"
        )
    if isinstance(latency, GpuProfile) and not layouts:
        raise UsageError(
            f"a GPU profile ({latency.name}) needs a model to give a prefill rate (--model NAME), or give "
            "the rate itself (--prefill-rate)"
        )
    runs: list[_Run] = []
    for i, model in enumerate(models or [None]):
        per_token = layouts[i].bytes_per_token() if model is not None else None
        speed = latency_for(model, latency) if isinstance(latency, GpuProfile) and model else latency
        assert not isinstance(speed, GpuProfile)
        for c in capacities:
            size = None if c is None or per_token is None else c * per_token
            runs.append(_Run(model, per_token, c, size, speed))
        for b in capacity_bytes:
            if b <= 0:
                raise UsageError(f"capacity must be > 0 bytes, got {b!r}")
            assert per_token is not None
            runs.append(_Run(model, per_token, int(b // per_token), float(b), speed))
    return runs


def compare_fleet(
    trace: Sequence[TraceRecord] | FleetInput,
    *,
    replicas: Sequence[int],
    policies: Sequence[str],
    capacities: Sequence[int | None] = (None,),
    capacity_bytes: Sequence[float] = (),
    models: Sequence[str] = (),
    shared_capacity: int | None = None,
    shared_tier: bool = False,
    block_size: int = 512,
    router: RouterSettings = DEFAULT_ROUTER,
    latency: LatencyModel | GpuProfile | None = None,
) -> FleetResult:
    """:func:`simulate_fleet` for every replica count × policy × capacity (× model), in one frame.

    ``capacities`` are tokens per replica (None = unbounded); ``capacity_bytes`` are bytes of KV cache
    per replica, turned into tokens by each of ``models`` (names of
    :data:`~promptkit.analysis.kv_bytes.KNOWN_MODELS` or ``config.json`` paths; every token in every
    layer counts). With ``models``, the summary also has ``model``, ``bytes_per_token`` and
    ``capacity_bytes``. ``latency``: one :class:`~promptkit.analysis.fleet_latency.LatencyModel` for all,
    or a :class:`~promptkit.analysis.fleet_latency.GpuProfile` that gives each model its own rates.
    Every value is checked before the first replay, and each distinct configuration is replayed once:
    one replica is the same fleet under every policy, and a capacity that holds every block of the
    input is the unbounded one. ``ceiling_hit_ratio``: what one cache holding the fleet's memory
    (replicas × capacity) would hit, the ceiling the verdict measures each policy against.

    >>> from promptkit.analysis.trace import read_trace
    >>> head = read_trace("fixtures/traces/mooncake-conversation-head.jsonl")
    >>> frame = compare_fleet(head, replicas=[1, 4], policies=["round_robin", "prefix_aware"]).summary
    >>> frame.select("policy", "replicas", "cached_tokens").rows()
    [('round_robin', 1, 8704), ('round_robin', 4, 7168), ('prefix_aware', 1, 8704), ('prefix_aware', 4, 7168)]
    """
    import polars as pl

    bs = trace.block_size if isinstance(trace, FleetInput) else block_size
    records = trace.trace if isinstance(trace, FleetInput) else trace
    runs = _runs(models, capacities, capacity_bytes, latency)
    for run in runs:
        for r in replicas:
            for p in policies:
                _check(r, p, run.capacity, shared_capacity, bs)
    distinct = len({b for rec in records for b in rec.hash_ids})
    done: dict[tuple[object, ...], FleetResult] = {}
    summaries: list[pl.DataFrame] = []
    per_replica: list[pl.DataFrame] = []
    for run in runs:
        blocks = None if run.capacity is None or run.capacity // bs >= distinct else run.capacity // bs
        for p in policies:
            for r in replicas:
                key = (run.latency, blocks, r, "any" if r == 1 else p)
                result = done.get(key)
                if result is None:
                    result = done[key] = simulate_fleet(
                        trace, replicas=r, policy=p, capacity=run.capacity, shared_capacity=shared_capacity,
                        shared_tier=shared_tier, block_size=block_size, router=router, latency=run.latency,
                    )  # fmt: skip
                labels = [
                    pl.lit(p, pl.String).alias("policy"),
                    pl.lit(run.capacity, pl.Int64).alias("capacity_tokens"),
                ]
                if models:
                    labels += [
                        pl.lit(run.model, pl.String).alias("model"),
                        pl.lit(run.bytes_per_token, pl.Float64).alias("bytes_per_token"),
                        pl.lit(run.capacity_bytes, pl.Float64).alias("capacity_bytes"),
                    ]
                summaries.append(result.summary.with_columns(labels))
                per_replica.append(result.replicas.with_columns(labels))
    summary = pl.concat(summaries)
    return FleetResult(_with_ceiling(summary, records, bs), pl.concat(per_replica))


def _with_ceiling(summary: pl.DataFrame, records: Sequence[TraceRecord], block_size: int) -> pl.DataFrame:
    """Add ``ceiling_hit_ratio``: one LRU cache holding the whole fleet's memory (replicas × capacity
    tokens; unbounded stays unbounded), from one pass of stack distances
    (:func:`~promptkit.analysis.capacity.capacity_curve`)."""
    import polars as pl

    from promptkit.analysis.capacity import capacity_curve, stack_distances

    pooled = [
        None if c is None else int(c) * int(r)
        for c, r in zip(summary["capacity_tokens"], summary["replicas"], strict=True)
    ]
    wanted = list(dict.fromkeys(pooled))
    curve = capacity_curve(stack_distances(records, block_size=block_size), wanted)
    ratio = dict(zip(wanted, curve["hit_ratio"].to_list(), strict=True))
    return summary.with_columns(pl.Series("ceiling_hit_ratio", [ratio[c] for c in pooled], pl.Float64))
