"""Tests for promptkit/analysis/fleet_policies.py: the score-based policies, the router's view, instances,
and compare_fleet replaying each distinct configuration once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import promptkit.analysis.fleet as fleet_module
from promptkit.analysis.fleet import compare_fleet, simulate_fleet
from promptkit.analysis.fleet_latency import LatencyModel
from promptkit.analysis.fleet_policies import BlockLRU, Router, RouterSettings
from promptkit.analysis.trace import TraceRecord, read_trace
from promptkit.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
HEAD = ROOT / "fixtures" / "traces" / "mooncake-conversation-head.jsonl"
BS = 512


def _caches(*contents: list[int]) -> list[BlockLRU]:
    out = []
    for ids in contents:
        c = BlockLRU(None)
        c.use(ids)
        out.append(c)
    return out


def _record(ids: list[int], tokens: int | None = None) -> TraceRecord:
    return TraceRecord(0, tokens if tokens is not None else len(ids) * BS, 0, ids)


def test_kv_cost_is_overlap_weight_times_prefill_blocks_plus_decode_blocks() -> None:
    # replica 0 holds 3 of the request's 4 blocks but already decodes 6 blocks; replica 1 is empty and idle
    caches = _caches([1, 2, 3], [])
    request = _record([1, 2, 3, 4])
    for weight, want in ((1.0, 1), (2.0, 0)):
        router = Router("kv_cost", 2, RouterSettings(overlap_weight=weight), BS)
        router.choose(_record([50, 51, 52, 53, 54, 55]), None, caches, 0.0)
        router.routed(0, _record([50, 51, 52, 53, 54, 55]), first_token=0.0, leaves=100.0, uncached=0)
        # cost 0 = w*(4-3) + 6 + 4 = w + 10, cost 1 = w*4 + 0 + 4: w=1 gives 11 > 8 (replica 1);
        # w=2 gives 12 == 12, and a tie goes to the lower index (replica 0)
        assert router.choose(request, None, caches, 1.0) == want


def test_weighted_scorers_add_prefix_queue_and_kv_scores() -> None:
    caches = _caches([1, 2], [])
    request = _record([1, 2, 3, 4])
    # prefix scorer alone: replica 0 (2 of 4 blocks) wins
    only_prefix = Router("weighted_scorers", 2, RouterSettings(queue_weight=0, kv_weight=0), BS, 100)
    assert only_prefix.choose(request, None, caches, 0.0) == 0
    # a waiting request on replica 0: queue scores 0 vs 1; with weights 1/2/0 replica 1 wins (0.5 < 2)
    router = Router("weighted_scorers", 2, RouterSettings(prefix_weight=1, queue_weight=2, kv_weight=0), BS, 100)
    router.choose(request, None, caches, 0.0)
    router.routed(0, _record([7, 8]), first_token=50.0, leaves=60.0, uncached=2)
    assert router.choose(request, None, caches, 1.0) == 1
    # once its prefill is done (t > 50) the queues are equal again, and the prefix wins
    assert router.choose(request, None, caches, 55.0) == 0


def test_load_aware_is_hit_share_minus_beta_times_relative_load() -> None:
    caches = _caches([1, 2, 3, 4], [])
    request = _record([1, 2, 3, 4, 5])  # replica 0 holds 4 of 5 blocks: hit 0.8
    # two requests in flight on replica 0: loads 2 and 0, mean 1, relative loads +1 and -1;
    # score 0 = 0.8 - beta, score 1 = 0 + beta: replica 0 while beta < 0.4
    for beta, want in ((0.3, 0), (0.5, 1)):
        router = Router("load_aware", 2, RouterSettings(load_beta=beta), BS)
        for _ in range(2):
            router.choose(request, None, caches, 0.0)
            router.routed(0, _record([9]), first_token=100.0, leaves=100.0, uncached=1)
        assert router.choose(request, None, caches, 1.0) == want


def test_routed_view_does_not_see_evictions() -> None:
    # each replica's cache holds 1 block; a prompt is 4 blocks, 3 of them a shared document
    doc = [1, 2, 3]
    trace = [TraceRecord(1000.0 * t, 4 * BS, 0, [*doc, 100 + t]) for t in range(6)]
    exact = simulate_fleet(trace, replicas=2, policy="prefix_aware", capacity=BS)
    routed = simulate_fleet(
        trace, replicas=2, policy="prefix_aware", capacity=BS, router=RouterSettings(view="routed")
    )
    # the exact router sees 1 block of 4 cached (0.25, under the 0.3 threshold) and spreads by cache
    # size and load; the routed view remembers all 4 blocks on replica 0 and keeps sending there
    assert routed.replicas["requests"].to_list() == [6, 0]
    assert exact.replicas["requests"].to_list() == [3, 3]
    assert routed.summary["cached_tokens"].item() == 5 * BS  # only block 1 survives, read 5 times


def test_routed_view_capacity_bounds_what_the_router_remembers() -> None:
    router = Router("prefix_aware", 2, RouterSettings(view="routed", view_capacity=2 * BS), BS)
    router.choose(_record([1, 2, 3]), None, [], 0.0)
    router.routed(0, _record([1, 2, 3]), first_token=0.0, leaves=0.0, uncached=3)
    views = router.instances[0].views
    assert views is not None and list(views[0].blocks) == [2, 1]  # block 3, the deepest, went first


def test_router_instances_each_see_their_own_requests() -> None:
    # a document read 4 times over 3 replicas. One round-robin router: replicas 0, 1, 2, 0 (one warm
    # read). Two routers, each with its own turn: requests 0 and 2 go to router A (replicas 0, 1), 1 and
    # 3 to router B (replicas 0, 1): two warm reads
    trace = [TraceRecord(1000.0 * t, 9 * BS, 0, [*range(8), 100 + t]) for t in range(4)]
    one = simulate_fleet(trace, replicas=3, policy="round_robin", capacity=None)
    two = simulate_fleet(trace, replicas=3, policy="round_robin", capacity=None, router=RouterSettings(instances=2))
    assert one.replicas["requests"].to_list() == [2, 1, 1]
    assert two.replicas["requests"].to_list() == [2, 2, 0]
    assert one.summary["cached_tokens"].item() == 8 * BS
    assert two.summary["cached_tokens"].item() == 2 * 8 * BS


def test_compare_fleet_replays_each_distinct_configuration_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, int]] = []
    real = fleet_module._replay

    def counting(trace, sessions, router, *rest):  # type: ignore[no-untyped-def]
        calls.append((router.policy, router.replicas))
        return real(trace, sessions, router, *rest)

    monkeypatch.setattr(fleet_module, "_replay", counting)
    head = read_trace(HEAD)
    policies = ["round_robin", "random", "prefix_aware", "kv_cost"]
    # 10**9 tokens holds every block of the slice: the same replay as unbounded
    result = compare_fleet(head, replicas=[1, 4], policies=policies, capacities=[None, 10**9])
    assert result.summary.height == 16
    assert len(calls) == 1 + 4  # one replica once, then each policy at 4 replicas once
    one = result.summary.filter(result.summary["replicas"] == 1)
    assert one["policy"].to_list() == policies * 2
    assert one["capacity_tokens"].to_list() == [None] * 4 + [10**9] * 4
    assert one["cached_tokens"].n_unique() == 1


def test_prefix_aware_median_ttft_no_worse_than_round_robin_at_16_replicas() -> None:
    # 64 conversations of 6 turns, each growing its own 8k-token history, arriving as Poisson traffic
    rng = np.random.default_rng(3)
    records, t = [], 0.0
    sessions = {s: [1000 * s + j for j in range(16)] for s in range(64)}
    for turn in range(6):
        for s in rng.permutation(64):
            t += float(rng.exponential(150.0))
            ids = sessions[int(s)][: 4 + 2 * turn]
            records.append(TraceRecord(t, len(ids) * BS, 50, ids))
    latency = LatencyModel(40_000.0, 40.0)
    ttft = {
        p: simulate_fleet(records, replicas=16, policy=p, capacity=None, latency=latency).summary
        for p in ("round_robin", "prefix_aware")
    }
    assert ttft["prefix_aware"]["ttft_p50_s"].item() <= ttft["round_robin"]["ttft_p50_s"].item()
    assert ttft["prefix_aware"]["hit_ratio"].item() > ttft["round_robin"]["hit_ratio"].item()


@pytest.mark.parametrize(
    ("field", "value"),
    [("view", "fuzzy"), ("view_capacity", 0), ("instances", 0), ("overlap_weight", -1), ("load_beta", "x")],
)
def test_bad_router_settings_name_the_field(field: str, value: object) -> None:
    with pytest.raises(UsageError, match=field):
        RouterSettings(**{field: value})  # type: ignore[arg-type]


def test_the_ceiling_is_one_cache_holding_the_fleets_memory() -> None:
    from promptkit.analysis.capacity import capacity_curve

    # three 4-block documents read in turn: a cache of 4 blocks never hits (LRU on a cycle), one of 16 does
    trace = [TraceRecord(1000.0 * k, 4 * BS, 0, [10 * (k % 3) + j for j in range(4)]) for k in range(12)]
    summary = compare_fleet(trace, replicas=[1, 4], policies=["round_robin"], capacities=[4 * BS, None]).summary
    pooled = capacity_curve(trace, [4 * BS, 16 * BS, None])["hit_ratio"].to_list()
    assert pooled[0] == 0.0 and pooled[1] == pooled[2] == 0.75
    assert summary["ceiling_hit_ratio"].to_list() == [pooled[0], pooled[1], pooled[2], pooled[2]]


@pytest.mark.parametrize("policy", ["prefix_aware", "kv_cost", "weighted_scorers", "load_aware"])
def test_a_routed_view_as_large_as_the_cache_mirrors_it(policy: str) -> None:
    # one router that sees every request stores exactly what each replica stores, in the same order: a
    # routed view of the replica's capacity is the replica's cache, so the routing cannot differ
    rng = np.random.default_rng(5)
    trace = []
    for k in range(300):
        doc = int(rng.integers(8))
        ids = [100 * doc + j for j in range(int(rng.integers(1, 6)))] + [10_000 + k]
        trace.append(TraceRecord(500.0 * k, len(ids) * BS, 20, ids))
    base = dict(replicas=4, policy=policy, capacity=6 * BS, latency=LatencyModel(4 * BS, 100.0))
    exact = simulate_fleet(trace, **base)  # type: ignore[arg-type]
    mirror = simulate_fleet(trace, **base, router=RouterSettings(view="routed", view_capacity=6 * BS))  # type: ignore[arg-type]
    smaller = simulate_fleet(trace, **base, router=RouterSettings(view="routed", view_capacity=2 * BS))  # type: ignore[arg-type]
    assert mirror.replicas.equals(exact.replicas)
    assert exact.summary["cached_tokens"].item() > 0
    assert not smaller.replicas.equals(exact.replicas)
