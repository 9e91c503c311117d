"""A fleet of replicas, each with its own prefix cache, behind a routing policy: replayed offline.

Each replica keeps its own LRU cache of blocks (the policy of
:func:`promptkit.analysis.trace.simulate_trace` and :mod:`promptkit.analysis.capacity`: a request uses
all its blocks at once, the deeper block counts as less recent), ``capacity`` tokens each. Requests
arrive in timestamp order (ties keep input order); the router picks a replica; the request reads its
longest cached prefix there, then stores all its blocks there. Routing policies (:data:`POLICIES`):

- ``round_robin``: request ``i`` goes to replica ``i mod R``;
- ``random``: uniformly, from a seeded generator (``RouterSettings.seed``);
- ``least_loaded``: the replica with the fewest requests in flight (ties: fewest tokens so far);
- ``session``: a stable hash of the session id (logs have one; a Mooncake trace has none);
- ``consistent_hash``: a hash ring (``virtual_nodes`` points per replica) keyed by the request's
  first ``hash_blocks`` blocks (a block id covers its prefix, so the id of the last of them is the key);
- ``prefix_aware``: SGLang's cache-aware policy, as its router documents it
  (https://docs.sglang.ai/router/router.html; defaults from
  ``sgl-model-gateway/bindings/python/src/sglang_router/router_args.py``: ``cache_threshold=0.3``,
  ``balance_abs_threshold=64``, ``balance_rel_threshold=1.5``): when the load is imbalanced
  (``max - min > balance_abs_threshold`` and ``max > min × balance_rel_threshold``) the least loaded
  replica; otherwise the replica with the longest cached prefix if that prefix is more than
  ``cache_threshold`` of the prompt, else the replica with the smallest cache (the most room). Where
  SGLang's router keeps an approximate tree of what it routed, this simulation looks at the
  replicas' actual caches (as NVIDIA Dynamo's KV router does with the workers' cache events).

The simulation has no service times, so "in flight" means: arrived within the last
``RouterSettings.inflight_seconds``. An optional **shared tier** (a CPU-memory pool, as Mooncake's
store and LMCache keep) holds every block any replica used, LRU with its own capacity; a request
reads its prefix from its replica's cache and continues it from the shared tier.

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

import bisect
import hashlib
import json
import os
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs

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

#: The routing policies :func:`simulate_fleet` knows.
POLICIES: Final[tuple[str, ...]] = (
    "round_robin", "random", "least_loaded", "session", "consistent_hash", "prefix_aware",
)  # fmt: skip


def _at_least(low: float, *, whole: bool = False) -> Any:
    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        kind = int if whole else int | float
        if isinstance(value, bool) or not isinstance(value, kind) or value < low:
            what = "a whole number" if whole else "a number"
            raise UsageError(f"RouterSettings.{attribute.name} must be {what} >= {low}, got {value!r}")

    return check


@attrs.frozen(slots=True)
class RouterSettings:
    """The knobs of the routing policies (SGLang's defaults for ``prefix_aware``).

    ``cache_threshold``: the share of the prompt the best replica must hold; ``balance_abs_threshold`` /
    ``balance_rel_threshold``: when the load counts as imbalanced; ``inflight_seconds``: how long a
    request counts toward its replica's load; ``hash_blocks``: the leading blocks ``consistent_hash``
    keys on; ``virtual_nodes``: ring points per replica; ``seed``: for ``random``.

    >>> RouterSettings(hash_blocks=0)
    Traceback (most recent call last):
    ...
    promptkit.errors.UsageError: RouterSettings.hash_blocks must be a whole number >= 1, got 0
    """

    cache_threshold: float = attrs.field(default=0.3, validator=_at_least(0.0))
    balance_abs_threshold: int = attrs.field(default=64, validator=_at_least(0, whole=True))
    balance_rel_threshold: float = attrs.field(default=1.5, validator=_at_least(0.0))
    inflight_seconds: float = attrs.field(default=10.0, validator=_at_least(0.0))
    hash_blocks: int = attrs.field(default=4, validator=_at_least(1, whole=True))
    virtual_nodes: int = attrs.field(default=64, validator=_at_least(1, whole=True))
    seed: int = attrs.field(default=0, validator=_at_least(0, whole=True))


@attrs.frozen(slots=True, eq=False)
class FleetInput:
    """Requests as block-id streams (a trace) and, when the input knows them, their session ids."""

    trace: tuple[TraceRecord, ...]
    sessions: tuple[str, ...] | None = None
    block_size: int = 512
    notes: tuple[str, ...] = ()


@attrs.frozen(slots=True, eq=False)
class FleetResult:
    """``summary``: one row per configuration; ``replicas``: one row per replica of each."""

    summary: pl.DataFrame
    replicas: pl.DataFrame


class _LRU:
    """A replica's (or the shared tier's) block cache: least recently used block first out."""

    __slots__ = ("blocks", "capacity")

    def __init__(self, capacity: int | None) -> None:
        self.capacity = capacity
        self.blocks: OrderedDict[int, None] = OrderedDict()

    def prefix(self, ids: Sequence[int]) -> int:
        blocks = self.blocks
        k = 0
        for b in ids:
            if b not in blocks:
                break
            k += 1
        return k

    def use(self, ids: Sequence[int]) -> None:
        blocks = self.blocks
        for b in reversed(ids):  # the shallowest block ends the most recent
            if b in blocks:
                blocks.move_to_end(b)
            else:
                blocks[b] = None
        if self.capacity is not None:
            while len(blocks) > self.capacity:
                blocks.popitem(last=False)


def _stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class _Router:
    """Chooses a replica per request; keeps the in-flight counts the load-aware policies read."""

    def __init__(self, policy: str, replicas: int, settings: RouterSettings, block_size: int) -> None:
        import numpy as np

        self.policy = policy
        self.replicas = replicas
        self.settings = settings
        self.block_size = block_size
        self.turn = 0
        self.random = np.random.default_rng(settings.seed)
        self.arrivals: list[deque[float]] = [deque() for _ in range(replicas)]
        self.tokens = [0] * replicas
        ring = sorted(
            (_stable_hash(f"replica-{r}-{v}"), r)
            for r in range(replicas)
            for v in range(settings.virtual_nodes)
        )
        self.ring_keys = [k for k, _ in ring]
        self.ring_owner = [r for _, r in ring]

    def loads(self, now: float) -> list[int]:
        horizon = now - self.settings.inflight_seconds
        for q in self.arrivals:
            while q and q[0] <= horizon:
                q.popleft()
        return [len(q) for q in self.arrivals]

    def least_loaded(self, loads: list[int]) -> int:
        return min(range(self.replicas), key=lambda r: (loads[r], self.tokens[r], r))

    def choose(self, record: TraceRecord, session: str | None, caches: list[_LRU], now: float) -> int:
        policy = self.policy
        if policy == "round_robin":
            self.turn += 1
            return (self.turn - 1) % self.replicas
        if policy == "random":
            return int(self.random.integers(self.replicas))
        if policy == "session":
            return _stable_hash(session or "") % self.replicas
        if policy == "consistent_hash":
            ids = record.hash_ids
            key = ids[min(self.settings.hash_blocks, len(ids)) - 1] if ids else -1
            at = bisect.bisect(self.ring_keys, _stable_hash(f"block-{key}")) % len(self.ring_keys)
            return self.ring_owner[at]
        loads = self.loads(now)
        if policy == "least_loaded":
            return self.least_loaded(loads)
        return self.prefix_aware(record, caches, loads)

    def prefix_aware(self, record: TraceRecord, caches: list[_LRU], loads: list[int]) -> int:
        s = self.settings
        high, low = max(loads), min(loads)
        if high - low > s.balance_abs_threshold and high > low * s.balance_rel_threshold:
            return self.least_loaded(loads)
        matched = [c.prefix(record.hash_ids) for c in caches]
        best = max(range(self.replicas), key=lambda r: (matched[r], -loads[r], -r))
        rate = (
            min(matched[best] * self.block_size, record.input_length) / record.input_length
            if record.input_length
            else 0.0
        )
        if rate > s.cache_threshold:
            return best
        return min(range(self.replicas), key=lambda r: (len(caches[r].blocks), loads[r], r))

    def routed(self, replica: int, record: TraceRecord, now: float) -> None:
        self.arrivals[replica].append(now)
        self.tokens[replica] += record.input_length


def _check(replicas: int, policy: str, capacity: int | None, shared: int | None, block_size: int) -> None:
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise UsageError(f"replicas must be a whole number >= 1, got {replicas!r}")
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


def _replay(
    trace: Sequence[TraceRecord],
    sessions: Sequence[str] | None,
    router: _Router,
    capacity_blocks: int | None,
    shared_blocks: int | None,
    shared: bool,
    block_size: int,
) -> list[list[int]]:
    """Per replica: [requests, input tokens, cached tokens, of which from the shared tier]."""
    caches = [_LRU(capacity_blocks) for _ in range(router.replicas)]
    pool = _LRU(shared_blocks) if shared else None
    stats = [[0, 0, 0, 0] for _ in range(router.replicas)]
    order = sorted(range(len(trace)), key=lambda k: (trace[k].timestamp, k))
    for k in order:
        record = trace[k]
        now = record.timestamp / 1000.0
        r = router.choose(record, sessions[k] if sessions is not None else None, caches, now)
        router.routed(r, record, now)
        ids = record.hash_ids
        local = caches[r].prefix(ids)
        total = local
        if pool is not None:
            total = max(local, pool.prefix(ids))
            pool.use(ids)
        caches[r].use(ids)
        n = record.input_length
        cached = min(total * block_size, n)
        row = stats[r]
        row[0] += 1
        row[1] += n
        row[2] += cached
        row[3] += cached - min(local * block_size, n)
    return stats


def _frames(
    stats: list[list[int]],
    policy: str,
    capacity: int | None,
    shared_capacity: int | None,
    shared: bool,
    requests: int,
) -> FleetResult:
    """The summary row and the per-replica rows of one replay's counts."""
    import polars as pl

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
    summary = pl.DataFrame(
        {
            "policy": [policy],
            "replicas": [replicas],
            "capacity_tokens": [capacity],
            "shared_capacity_tokens": [shared_capacity],
            "shared_tier": [shared],
            "requests": [requests],
            "input_tokens": [total_in],
            "cached_tokens": [cached],
            "prefill_tokens": [total_in - cached],
            "hit_ratio": [cached / total_in if total_in else None],
            "shared_hit_ratio": [sum(s[3] for s in stats) / total_in if total_in else None],
            "mean_replica_hit_ratio": [float(served.mean()) if served.len() else None],  # type: ignore[arg-type]
            "load_imbalance": [max(s[1] for s in stats) / mean_in if mean_in else None],
        },
        schema={
            "policy": pl.String, "replicas": pl.Int64, "capacity_tokens": pl.Int64,
            "shared_capacity_tokens": pl.Int64, "shared_tier": pl.Boolean, "requests": pl.Int64,
            "input_tokens": pl.Int64, "cached_tokens": pl.Int64, "prefill_tokens": pl.Int64,
            "hit_ratio": pl.Float64, "shared_hit_ratio": pl.Float64, "mean_replica_hit_ratio": pl.Float64,
            "load_imbalance": pl.Float64,
        },
    )  # fmt: skip
    keys = summary.select("policy", "replicas", "capacity_tokens", "shared_capacity_tokens")
    return FleetResult(summary, keys.join(per, how="cross"))


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
    router: RouterSettings = RouterSettings(),
) -> FleetResult:
    """Replay ``trace`` over ``replicas`` caches of ``capacity`` tokens each (None = unbounded).

    ``shared_tier=True`` (or a ``shared_capacity``) adds the shared tier. ``summary`` columns:
    ``policy``, ``replicas``, ``capacity_tokens``, ``shared_capacity_tokens``, ``requests``,
    ``input_tokens``, ``cached_tokens`` (= prefill tokens saved), ``prefill_tokens``, ``hit_ratio``
    (the fleet's: cached over input tokens), ``shared_hit_ratio`` (the part read from the shared
    tier), ``mean_replica_hit_ratio`` (the plain mean of the replicas' ratios), ``load_imbalance``
    (max / mean input tokens per replica). ``replicas``: the same counts per replica.

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
    if policy == "session" and sessions is None:
        raise UsageError(
            "policy 'session' needs session ids, and this input has none (a Mooncake trace has none)"
        )
    if sessions is not None and len(sessions) != len(trace):
        raise UsageError(f"sessions: {len(sessions)} ids for {len(trace)} requests")
    shared = shared_tier or shared_capacity is not None
    stats = _replay(
        trace,
        sessions,
        _Router(policy, replicas, router, block_size),
        None if capacity is None else capacity // block_size,
        None if shared_capacity is None else shared_capacity // block_size,
        shared,
        block_size,
    )
    return _frames(stats, policy, capacity, shared_capacity, shared, len(trace))


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
    router: RouterSettings = RouterSettings(),
) -> FleetResult:
    """:func:`simulate_fleet` for every replica count × policy × capacity (× model), in one frame.

    ``capacities`` are tokens per replica (None = unbounded); ``capacity_bytes`` are bytes of KV cache
    per replica, turned into tokens by each of ``models`` (names of
    :data:`~promptkit.analysis.kv_bytes.KNOWN_MODELS` or ``config.json`` paths; every token in every
    layer counts). With ``models``, the summary also has ``model``, ``bytes_per_token`` and
    ``capacity_bytes``. Every value is checked before the first replay.

    >>> from promptkit.analysis.trace import read_trace
    >>> head = read_trace("fixtures/traces/mooncake-conversation-head.jsonl")
    >>> frame = compare_fleet(head, replicas=[1, 4], policies=["round_robin", "prefix_aware"]).summary
    >>> frame.select("policy", "replicas", "cached_tokens").rows()
    [('round_robin', 1, 8704), ('round_robin', 4, 7168), ('prefix_aware', 1, 8704), ('prefix_aware', 4, 7168)]
    """
    import polars as pl

    from promptkit.analysis.kv_bytes import model_layout

    bs = trace.block_size if isinstance(trace, FleetInput) else block_size
    layouts = [model_layout(m) for m in models]
    if capacity_bytes and not layouts:
        raise UsageError("capacities in bytes need a model (models=[...]) to turn them into tokens")
    runs: list[tuple[str | None, float | None, int | None, float | None]] = []
    for i, model in enumerate(models or [None]):
        per_token = layouts[i].bytes_per_token() if model is not None else None
        for c in capacities:
            runs.append((model, per_token, c, None if c is None or per_token is None else c * per_token))
        for b in capacity_bytes:
            if b <= 0:
                raise UsageError(f"capacity must be > 0 bytes, got {b!r}")
            assert per_token is not None
            runs.append((model, per_token, int(b // per_token), float(b)))
    for _, _, c, _ in runs:
        for r in replicas:
            for p in policies:
                _check(r, p, c, shared_capacity, bs)
    summaries: list[pl.DataFrame] = []
    per_replica: list[pl.DataFrame] = []
    for model, per_token, c, size in runs:
        for p in policies:
            for r in replicas:
                result = simulate_fleet(
                    trace, replicas=r, policy=p, capacity=c, shared_capacity=shared_capacity,
                    shared_tier=shared_tier, block_size=block_size, router=router,
                )  # fmt: skip
                extra = [
                    pl.lit(model, pl.String).alias("model"),
                    pl.lit(per_token, pl.Float64).alias("bytes_per_token"),
                    pl.lit(size, pl.Float64).alias("capacity_bytes"),
                ]
                summaries.append(result.summary.with_columns(extra) if models else result.summary)
                per_replica.append(result.replicas.with_columns(extra) if models else result.replicas)
    return FleetResult(pl.concat(summaries), pl.concat(per_replica))


def _is_mooncake_trace(path: Path) -> bool:
    if not path.is_file():
        return False
    try:
        with path.open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    obj = json.loads(line)
                    return isinstance(obj, dict) and "hash_ids" in obj and "input_length" in obj
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False
    return False


def load_fleet_input(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    provider: str | None = None,
    block_size: int = 512,
) -> FleetInput:
    """Read a Mooncake trace (one ``.jsonl`` with ``hash_ids``) or any logs promptkit reads.

    Logs are tokenized as the analysis does (the provider's tokenizer and render model; ``provider``
    defaults to the one the first record names, else ``deepseek``) and cut into chained blocks of
    ``block_size`` tokens (:func:`~promptkit.analysis.trace.trace_from_requests`); their session ids are
    kept for the ``session`` policy. Records the loader skipped are counted in ``notes``.

    >>> data = load_fleet_input("fixtures/traces/mooncake-readme-sample.jsonl")
    >>> len(data.trace), data.sessions
    (2, None)
    """
    from promptkit.analysis.trace import read_trace, trace_from_requests
    from promptkit.formats import read_logs

    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    if len(items) == 1 and _is_mooncake_trace(Path(items[0])):
        return FleetInput(tuple(read_trace(items[0])), None, block_size)
    loaded = read_logs(items)
    if not loaded.records:
        raise UsageError(f"no request records found in {', '.join(str(p) for p in items)}")
    records = loaded.records
    from promptkit.providers.registry import GENERIC_PROVIDER, infer_record_provider

    chosen = provider or infer_record_provider(records[0]) or GENERIC_PROVIDER
    trace = trace_from_requests(records, provider=chosen, block_size=block_size)
    notes = list(loaded.notes)
    if loaded.problems:
        notes.append(f"{len(loaded.problems)} records skipped by the loader (see read_logs problems)")
    notes.append(f"tokenized with provider {chosen!r}, blocks of {block_size} tokens")
    return FleetInput(tuple(trace), tuple(r.session for r in records), block_size, tuple(notes))
