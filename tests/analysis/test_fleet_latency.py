"""Tests for promptkit/analysis/fleet_latency.py: TTFT against closed forms (an idle replica, M/D/1)."""

from __future__ import annotations

import numpy as np
import pytest

from promptkit.analysis.fleet import simulate_fleet
from promptkit.analysis.fleet_latency import (
    LatencyModel,
    ReplicaQueue,
    gpu_profile,
    latency_for,
    percentiles,
)
from promptkit.analysis.trace import TraceRecord
from promptkit.errors import UsageError

BS = 512


def test_idle_replica_ttft_is_uncached_tokens_over_rate() -> None:
    rate = 8_000.0
    # two requests 100 s apart share 4 blocks: the second is idle on arrival and prefills its 6th block only
    first = TraceRecord(0, 6 * BS, 0, [1, 2, 3, 4, 5, 6])
    second = TraceRecord(100_000, 5 * BS + 100, 0, [1, 2, 3, 4, 5, 99])
    result = simulate_fleet(
        [first, second], replicas=1, policy="round_robin", capacity=None, latency=LatencyModel(rate)
    ).summary
    want = [6 * BS / rate, 100 / rate]
    assert result["ttft_p50_s"].item() == pytest.approx(sum(want) / 2)
    assert result["ttft_mean_s"].item() == pytest.approx(sum(want) / 2)
    assert result["queue_wait_mean_s"].item() == 0.0


def test_a_busy_replica_queues_first_come_first_served() -> None:
    model = LatencyModel(1_000.0, decode_tokens_per_s=10.0)
    q = ReplicaQueue()
    a = q.admit(arrival=0.0, uncached_tokens=2_000, model=model, output_tokens=5)
    b = q.admit(arrival=1.0, uncached_tokens=500, model=model)
    c = q.admit(arrival=10.0, uncached_tokens=1_000, model=model)
    assert (a.start, a.first_token, a.ttft, a.end) == (0.0, 2.0, 2.0, 2.5)
    assert (b.start, b.first_token, b.ttft) == (2.0, 2.5, 1.5)  # waited 1 s behind a
    assert (c.start, c.ttft) == (10.0, 1.0)  # idle again


@pytest.mark.slow
@pytest.mark.parametrize("rho", [0.3, 0.6])
def test_md1_queue_mean_wait_matches_the_closed_form(rho: float) -> None:
    """Poisson arrivals at rate lambda, fixed service D (no request shares a block): the mean wait of an
    M/D/1 queue is rho / (2 mu (1 - rho)) with mu = 1 / D."""
    rng = np.random.default_rng(7)
    n, tokens, rate = 40_000, 1_024, 10_240.0  # D = 0.1 s
    service = tokens / rate
    lam = rho / service
    arrivals = np.cumsum(rng.exponential(1 / lam, n)) * 1000.0
    trace = [TraceRecord(float(t), tokens, 0, [2 * k, 2 * k + 1]) for k, t in enumerate(arrivals)]
    summary = simulate_fleet(
        trace, replicas=1, policy="round_robin", capacity=None, latency=LatencyModel(rate)
    ).summary
    mu = 1 / service
    want = rho / (2 * mu * (1 - rho))
    assert summary["queue_wait_mean_s"].item() == pytest.approx(want, rel=0.06)
    assert summary["ttft_mean_s"].item() == pytest.approx(want + service, rel=0.06)
    assert summary["hit_ratio"].item() == 0.0


def test_decode_keeps_a_request_in_flight_for_the_load_aware_policies() -> None:
    # two requests 1 s apart share 4 of 5 blocks; prefill takes 0.1 s. Dynamo's cost on the warm replica
    # is 1 uncached block + its decode blocks: without decoding, the first request has left and the second
    # follows the cache (cost 1 + 5 < 5 + 5); decoding for 10 s, the first still holds its 5 blocks there
    # (1 + 5 + 5 > 5 + 5) and the second goes to the idle replica
    trace = [TraceRecord(0, 5 * BS, 100, [1, 2, 3, 4, 10]), TraceRecord(1000, 5 * BS, 100, [1, 2, 3, 4, 11])]
    rate = 5 * BS * 10.0

    def spread(model: LatencyModel) -> list[int]:
        result = simulate_fleet(trace, replicas=2, policy="kv_cost", capacity=None, latency=model)
        return result.replicas["requests"].to_list()

    assert spread(LatencyModel(rate)) == [2, 0]
    assert spread(LatencyModel(rate, decode_tokens_per_s=10.0)) == [1, 1]


def test_gpu_profiles_and_model_rates() -> None:
    h100 = gpu_profile("h100")
    eight = gpu_profile("8xH100")
    assert eight.count == 8 and eight.bf16_flops == h100.bf16_flops
    one = latency_for("llama-3.1-8b", h100)
    assert one.prefill_tokens_per_s == pytest.approx(989e12 * 0.4 / (2 * 8.03e9))
    assert latency_for("llama-3.1-8b", eight).prefill_tokens_per_s == pytest.approx(8 * one.prefill_tokens_per_s)
    # a MoE model prefills at the rate of its active parameters
    assert latency_for("deepseek-v3", h100).prefill_tokens_per_s == pytest.approx(989e12 * 0.4 / (2 * 37e9))
    assert one.decode_tokens_per_s == pytest.approx(3.35e12 * 0.6 / (2 * 8.03e9))
    with pytest.raises(UsageError, match="--prefill-rate"):
        latency_for("my-model", h100)
    with pytest.raises(UsageError, match="unknown GPU profile"):
        gpu_profile("0xh100")


def test_percentiles() -> None:
    assert percentiles([]) == [None, None, None]
    assert percentiles([float(v) for v in range(1, 101)], [50, 99]) == [50.5, 99.01]
    with pytest.raises(UsageError, match="prefill_tokens_per_s"):
        LatencyModel(-1.0)
    with pytest.raises(UsageError, match="decode_tokens_per_s"):
        LatencyModel(1.0, 0.0)
