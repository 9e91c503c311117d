"""Routing policies of a simulated fleet, the router's view of the caches, and its settings.

A :class:`Router` picks a replica for each request (:data:`POLICIES`):

- ``round_robin``: the router's ``i``-th request goes to replica ``i mod R``;
- ``random``: uniformly, from a seeded generator (``RouterSettings.seed``);
- ``least_loaded``: the replica with the fewest requests in flight (ties: fewest tokens so far);
- ``session``: a stable hash of the session id (logs have one; a Mooncake trace has none);
- ``consistent_hash``: a hash ring (``virtual_nodes`` points per replica) keyed by the request's
  first ``hash_blocks`` blocks (a block id covers its prefix, so the id of the last of them is the key);
- ``prefix_aware``: SGLang's cache-aware policy (https://docs.sglang.ai/router/router.html; defaults
  from ``sgl-model-gateway/bindings/python/src/sglang_router/router_args.py``: ``cache_threshold=0.3``,
  ``balance_abs_threshold=64``, ``balance_rel_threshold=1.5``): when the load is imbalanced
  (``max - min > balance_abs_threshold`` and ``max > min × balance_rel_threshold``) the least loaded
  replica; otherwise the replica with the longest cached prefix if it covers more than
  ``cache_threshold`` of the prompt, else the replica with the smallest cache (the most room);
- ``kv_cost``: NVIDIA Dynamo's KV router (https://docs.nvidia.com/dynamo/latest/components/router/routing-concepts
  "cost = overlap_score_weight * prefill_blocks + decode_blocks", the lowest cost wins; the terms as
  https://docs.nvidia.com/dynamo/design-docs/router-design defines them): ``prefill_blocks`` = the
  replica's blocks still to prefill + this request's uncached blocks there, ``decode_blocks`` = the
  blocks its in-flight requests hold + this request's blocks; ``overlap_weight`` defaults to 1.0 (the
  frontend's ``--router-kv-overlap-score-weight``);
- ``weighted_scorers``: llm-d's inference scheduler (filter → score → pick,
  https://llm-d.ai/docs/architecture/core/router/epp/scheduling): a weighted sum of a prefix-cache
  scorer (the share of the request's blocks the replica holds), a queue scorer (``(max − q) / (max − min)``
  of the requests waiting for prefill, 1 when all are equal) and a KV-cache-utilisation scorer
  (1 − used share of the replica's blocks); the highest sum wins. Weights 3 / 2 / 2, as llm-d's
  inference-scheduling guide configures them (the default profile of Red Hat's llm-d distribution weighs
  prefix 3 and queue 2: https://docs.redhat.com/en/documentation/red_hat_openshift_ai_self-managed/3.4/html/deploy_models_using_distributed_inference_with_llm-d/configuring-llm-scheduler);
- ``load_aware``: vLLM production-stack's load-aware routing
  (https://docs.vllm.ai/projects/production-stack/en/latest/use_cases/loadaware-routing.html):
  ``score = matched_tokens / prompt_tokens − beta × (load − mean_load) / max(1, mean_load)``, load the
  requests in flight, the highest score wins (``load_beta``; promptkit's default 0.5).

**The router's view.** ``view="exact"`` reads what each replica really holds (Dynamo with KV events);
``view="routed"`` keeps, per replica, what this router sent there, in an LRU of ``view_capacity``
tokens (None: unbounded) that knows nothing of the replica's evictions: SGLang's approximate tree and
Dynamo without KV events (``--router-max-tree-size``) work this way. ``instances`` routers share the
load, request ``k`` going to router ``k mod instances``; each sees only its own requests (its own
view, its own in-flight counts, its own round-robin turn).

**In flight.** A request counts toward its replica's load from its arrival until it leaves: with a
latency model (:mod:`promptkit.analysis.fleet_latency`) when its decode ends, without one
``inflight_seconds`` after it arrived.

>>> RouterSettings(hash_blocks=0)
Traceback (most recent call last):
...
promptkit.errors.UsageError: RouterSettings.hash_blocks must be a whole number >= 1, got 0
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

from promptkit.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.analysis.trace import TraceRecord

__all__ = ["POLICIES", "VIEWS", "BlockLRU", "Router", "RouterSettings"]

#: The routing policies a :class:`Router` knows.
POLICIES: Final[tuple[str, ...]] = (
    "round_robin", "random", "least_loaded", "session", "consistent_hash", "prefix_aware", "kv_cost",
    "weighted_scorers", "load_aware",
)  # fmt: skip

#: The policies that read the caches (the others route on load, position or a hash only).
CACHE_READING: Final[frozenset[str]] = frozenset({"prefix_aware", "kv_cost", "weighted_scorers", "load_aware"})

#: How the router sees the caches.
VIEWS: Final[tuple[str, ...]] = ("exact", "routed")


def _at_least(low: float, *, whole: bool = False, optional: bool = False) -> Any:
    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if optional and value is None:
            return
        kind = int if whole else int | float
        if isinstance(value, bool) or not isinstance(value, kind) or value < low:
            what = "a whole number" if whole else "a number"
            raise UsageError(f"RouterSettings.{attribute.name} must be {what} >= {low}, got {value!r}")

    return check


def _view(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in VIEWS:
        raise UsageError(f"RouterSettings.view must be one of {', '.join(VIEWS)}, got {value!r}")


@attrs.frozen(slots=True)
class RouterSettings:
    """The knobs of the routing policies (each policy's documented defaults).

    ``cache_threshold``, ``balance_abs_threshold``, ``balance_rel_threshold``: SGLang's ``prefix_aware``;
    ``overlap_weight``: Dynamo's ``kv_cost``; ``prefix_weight``, ``queue_weight``, ``kv_weight``: llm-d's
    ``weighted_scorers``; ``load_beta``: production-stack's ``load_aware``; ``inflight_seconds``: how long
    a request counts toward its replica's load without a latency model; ``hash_blocks``,
    ``virtual_nodes``: ``consistent_hash``; ``seed``: ``random``; ``view``, ``view_capacity`` (tokens),
    ``instances``: the router's view (module docstring).
    """

    cache_threshold: float = attrs.field(default=0.3, validator=_at_least(0.0))
    balance_abs_threshold: int = attrs.field(default=64, validator=_at_least(0, whole=True))
    balance_rel_threshold: float = attrs.field(default=1.5, validator=_at_least(0.0))
    overlap_weight: float = attrs.field(default=1.0, validator=_at_least(0.0))
    prefix_weight: float = attrs.field(default=3.0, validator=_at_least(0.0))
    queue_weight: float = attrs.field(default=2.0, validator=_at_least(0.0))
    kv_weight: float = attrs.field(default=2.0, validator=_at_least(0.0))
    load_beta: float = attrs.field(default=0.5, validator=_at_least(0.0))
    inflight_seconds: float = attrs.field(default=10.0, validator=_at_least(0.0))
    hash_blocks: int = attrs.field(default=4, validator=_at_least(1, whole=True))
    virtual_nodes: int = attrs.field(default=64, validator=_at_least(1, whole=True))
    seed: int = attrs.field(default=0, validator=_at_least(0, whole=True))
    view: str = attrs.field(default="exact", validator=_view)
    view_capacity: int | None = attrs.field(default=None, validator=_at_least(1, whole=True, optional=True))
    instances: int = attrs.field(default=1, validator=_at_least(1, whole=True))


class BlockLRU:
    """A block cache: least recently used block first out; a request's deeper block is less recent."""

    __slots__ = ("blocks", "capacity")

    def __init__(self, capacity: int | None) -> None:
        self.capacity = capacity
        self.blocks: OrderedDict[int, None] = OrderedDict()

    def prefix(self, ids: Sequence[int]) -> int:
        """How many leading blocks of ``ids`` the cache holds."""
        blocks = self.blocks
        k = 0
        for b in ids:
            if b not in blocks:
                break
            k += 1
        return k

    def use(self, ids: Sequence[int]) -> None:
        """Store ``ids`` (all of them, the shallowest the most recent), evicting past the capacity."""
        blocks = self.blocks
        for b in reversed(ids):
            if b in blocks:
                blocks.move_to_end(b)
            else:
                blocks[b] = None
        if self.capacity is not None:
            while len(blocks) > self.capacity:
                blocks.popitem(last=False)


def stable_hash(text: str) -> int:
    """A hash of ``text`` that is the same in every process (unlike :func:`hash`)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class _Load:
    """What one router knows of one replica's work: requests and blocks in flight, blocks to prefill."""

    __slots__ = ("active_blocks", "leaving", "prefilling", "tokens", "waiting_blocks")

    def __init__(self) -> None:
        self.leaving: list[tuple[float, int]] = []  # (leaves at, blocks held)
        self.prefilling: list[tuple[float, int]] = []  # (first token at, blocks to prefill)
        self.active_blocks = 0
        self.waiting_blocks = 0
        self.tokens = 0

    def expire(self, now: float) -> None:
        while self.leaving and self.leaving[0][0] <= now:
            self.active_blocks -= heapq.heappop(self.leaving)[1]
        while self.prefilling and self.prefilling[0][0] <= now:
            self.waiting_blocks -= heapq.heappop(self.prefilling)[1]

    def add(self, leaves: float, first_token: float, blocks: int, uncached: int, tokens: int) -> None:
        heapq.heappush(self.leaving, (leaves, blocks))
        heapq.heappush(self.prefilling, (first_token, uncached))
        self.active_blocks += blocks
        self.waiting_blocks += uncached
        self.tokens += tokens


class _Instance:
    """One router: its turn, its random generator, its view of the caches and of the load."""

    def __init__(self, replicas: int, settings: RouterSettings, block_size: int) -> None:
        import numpy as np

        self.turn = 0
        self.random = np.random.default_rng(settings.seed)
        self.loads = [_Load() for _ in range(replicas)]
        view_blocks = None if settings.view_capacity is None else max(1, settings.view_capacity // block_size)
        self.views = [BlockLRU(view_blocks) for _ in range(replicas)] if settings.view == "routed" else None


class Router:
    """Chooses a replica per request (:meth:`choose`), then learns where it went (:meth:`routed`).

    ``capacity_blocks``: each replica's cache size, for the KV-utilisation scorer (None: unbounded, then
    utilisation is relative to the busiest replica).
    """

    def __init__(
        self,
        policy: str,
        replicas: int,
        settings: RouterSettings,
        block_size: int,
        capacity_blocks: int | None = None,
    ) -> None:
        self.policy = policy
        self.replicas = replicas
        self.settings = settings
        self.block_size = block_size
        self.capacity_blocks = capacity_blocks
        self.instances = [_Instance(replicas, settings, block_size) for _ in range(settings.instances)]
        self.count = 0
        self.current = self.instances[0]
        ring = sorted(
            (stable_hash(f"replica-{r}-{v}"), r) for r in range(replicas) for v in range(settings.virtual_nodes)
        )
        self.ring_keys = [k for k, _ in ring]
        self.ring_owner = [r for _, r in ring]

    def choose(self, record: TraceRecord, session: str | None, caches: Sequence[BlockLRU], now: float) -> int:
        """The replica for ``record`` arriving at ``now`` (seconds); ``caches``: the replicas' real caches."""
        inst = self.instances[self.count % len(self.instances)]
        self.count += 1
        self.current = inst
        for load in inst.loads:
            load.expire(now)
        policy = self.policy
        if policy == "round_robin":
            inst.turn += 1
            return (inst.turn - 1) % self.replicas
        if policy == "random":
            return int(inst.random.integers(self.replicas))
        if policy == "session":
            return stable_hash(session or "") % self.replicas
        if policy == "consistent_hash":
            ids = record.hash_ids
            key = ids[min(self.settings.hash_blocks, len(ids)) - 1] if ids else -1
            at = bisect.bisect(self.ring_keys, stable_hash(f"block-{key}")) % len(self.ring_keys)
            return self.ring_owner[at]
        counts = [len(load.leaving) for load in inst.loads]
        if policy == "least_loaded":
            return self._least_loaded(inst, counts)
        views = inst.views if inst.views is not None else caches
        matched = [v.prefix(record.hash_ids) for v in views]
        if policy == "prefix_aware":
            return self._prefix_aware(inst, record, matched, counts, views)
        if policy == "kv_cost":
            return self._kv_cost(inst, record, matched)
        if policy == "weighted_scorers":
            return self._weighted_scorers(inst, record, matched)
        return self._load_aware(record, matched, counts)

    def routed(self, replica: int, record: TraceRecord, *, first_token: float, leaves: float, uncached: int) -> None:
        """Tell the router that chose last where the request went, when its first token comes out and
        when it leaves (seconds), and how many of its blocks it prefills there."""
        inst = self.current
        inst.loads[replica].add(leaves, first_token, len(record.hash_ids), uncached, record.input_length)
        if inst.views is not None:
            inst.views[replica].use(record.hash_ids)

    def _least_loaded(self, inst: _Instance, counts: list[int]) -> int:
        return min(range(self.replicas), key=lambda r: (counts[r], inst.loads[r].tokens, r))

    def _prefix_aware(
        self,
        inst: _Instance,
        record: TraceRecord,
        matched: list[int],
        counts: list[int],
        views: Sequence[BlockLRU],
    ) -> int:
        s = self.settings
        high, low = max(counts), min(counts)
        if high - low > s.balance_abs_threshold and high > low * s.balance_rel_threshold:
            return self._least_loaded(inst, counts)
        best = max(range(self.replicas), key=lambda r: (matched[r], -counts[r], -r))
        n = record.input_length
        rate = min(matched[best] * self.block_size, n) / n if n else 0.0
        if rate > s.cache_threshold:
            return best
        return min(range(self.replicas), key=lambda r: (len(views[r].blocks), counts[r], r))

    def _kv_cost(self, inst: _Instance, record: TraceRecord, matched: list[int]) -> int:
        blocks = len(record.hash_ids)
        weight = self.settings.overlap_weight

        def cost(r: int) -> tuple[float, int]:
            load = inst.loads[r]
            prefill = load.waiting_blocks + blocks - matched[r]
            return weight * prefill + load.active_blocks + blocks, r

        return min(range(self.replicas), key=cost)

    def _weighted_scorers(self, inst: _Instance, record: TraceRecord, matched: list[int]) -> int:
        s = self.settings
        blocks = len(record.hash_ids)
        waiting = [len(load.prefilling) for load in inst.loads]
        high, low = max(waiting), min(waiting)
        used = [load.active_blocks for load in inst.loads]
        room = self.capacity_blocks if self.capacity_blocks is not None else max(max(used), 1)

        def score(r: int) -> tuple[float, int]:
            prefix = matched[r] / blocks if blocks else 0.0
            queue = (high - waiting[r]) / (high - low) if high > low else 1.0
            kv = 1.0 - min(used[r] / room, 1.0)
            return s.prefix_weight * prefix + s.queue_weight * queue + s.kv_weight * kv, -r

        return max(range(self.replicas), key=score)

    def _load_aware(self, record: TraceRecord, matched: list[int], counts: list[int]) -> int:
        n = record.input_length
        mean = sum(counts) / self.replicas
        beta = self.settings.load_beta

        def score(r: int) -> tuple[float, int]:
            hit = min(matched[r] * self.block_size, n) / n if n else 0.0
            return hit - beta * (counts[r] - mean) / max(1.0, mean), -r

        return max(range(self.replicas), key=score)
