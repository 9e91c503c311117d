"""Tests for promptkit/analysis/capacity.py: the one-pass LRU capacity curve and its SHARDS sampling."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from promptkit.analysis.capacity import capacity_curve, stack_distances
from promptkit.analysis.trace import TraceRecord, iter_trace, read_trace, simulate_trace
from promptkit.errors import PromptkitError

ROOT = Path(__file__).resolve().parents[2]
HEAD = ROOT / "fixtures" / "traces" / "mooncake-conversation-head.jsonl"
BS = 4  # a small block size keeps the random traces small


@st.composite
def traces(draw: st.DrawFn) -> list[TraceRecord]:
    """Random prefix-consistent traces: each request continues some earlier request's prefix (or
    starts afresh) with new blocks, so a block id always stands for the same prefix."""
    n = draw(st.integers(1, 25))
    records: list[TraceRecord] = []
    next_id = 0
    for _ in range(n):
        base: tuple[int, ...] = ()
        if records and draw(st.booleans()):
            parent = records[draw(st.integers(0, len(records) - 1))].hash_ids
            base = parent[: draw(st.integers(0, len(parent)))]
        fresh = draw(st.integers(0 if base else 1, 4))
        ids = base + tuple(range(next_id, next_id + fresh))
        next_id += fresh
        length = draw(st.integers((len(ids) - 1) * BS + 1, len(ids) * BS)) if ids else 0
        records.append(TraceRecord(float(draw(st.integers(0, 6))), length, 0, ids))
    return records


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(trace=traces(), capacities=st.lists(st.integers(1, 40), min_size=8, max_size=8))
def test_curve_equals_the_simulator_at_eight_capacities(
    trace: list[TraceRecord], capacities: list[int]
) -> None:
    curve = capacity_curve(trace, [c * BS for c in capacities], block_size=BS)
    for c, hit in zip(capacities, curve["hit_tokens"], strict=True):
        simulated = int(simulate_trace(trace, block_size=BS, capacity_blocks=c)["cached_tokens"].sum())
        assert hit == simulated, c


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(trace=traces())
def test_curve_is_monotone_and_reaches_the_unbounded_simulation(trace: list[TraceRecord]) -> None:
    curve = capacity_curve(trace, [*(c * BS for c in range(1, 45)), None], block_size=BS)
    hits = curve["hit_tokens"].to_list()
    assert all(a <= b for a, b in itertools.pairwise(hits))
    assert hits[-1] == int(simulate_trace(trace, block_size=BS)["cached_tokens"].sum())


def _independent_lru(records: list[TraceRecord], capacity: int | None, block_size: int) -> int:
    """Cached tokens under block LRU, replayed by brute force: a block's recency is (request, -depth);
    a full cache drops its least recent block; a request reads its leading cached blocks."""
    recency: dict[int, tuple[int, int]] = {}
    cached = 0
    order = sorted(range(len(records)), key=lambda k: (records[k].timestamp, k))
    for step, k in enumerate(order):
        r = records[k]
        hit = 0
        while hit < len(r.hash_ids) and r.hash_ids[hit] in recency:
            hit += 1
        cached += min(hit * block_size, r.input_length)
        for depth, block in enumerate(r.hash_ids):
            recency[block] = (step, -depth)
        while capacity is not None and len(recency) > capacity:
            del recency[min(recency, key=recency.__getitem__)]
    return cached


@pytest.mark.parametrize("capacity", [1, 2, 5, 20, 60, None])
def test_mooncake_slice_against_an_independent_replay(capacity: int | None) -> None:
    head = read_trace(HEAD)
    total = sum(r.input_length for r in head)
    curve = capacity_curve(head, [None if capacity is None else capacity * 512])
    assert curve["hit_tokens"].item() == _independent_lru(head, capacity, 512)
    assert curve["hit_ratio"].item() == pytest.approx(_independent_lru(head, capacity, 512) / total)


def test_unbounded_slice_hits_block_zero_only() -> None:
    head = read_trace(HEAD)
    # every request but the first reads only the shared first block (fixtures/traces/README.md)
    assert capacity_curve(head, [None])["hit_tokens"].item() == (len(head) - 1) * 512


def _synthetic(n: int, seed: int) -> list[TraceRecord]:
    """Conversations over a few shared system prompts: each turn extends its previous turn."""
    rng = np.random.default_rng(seed)
    records: list[TraceRecord] = []
    last: dict[int, tuple[int, ...]] = {}
    next_id = 1000
    for t in range(n):
        conv = int(rng.integers(0, n // 4))
        ids = last.get(conv) or (int(rng.integers(0, 5)),)
        fresh = int(rng.integers(1, 6))
        ids = ids + tuple(range(next_id, next_id + fresh))
        next_id += fresh
        last[conv] = ids
        records.append(TraceRecord(float(t), len(ids) * 512, 0, ids))
    return records


def test_shards_sample_is_close_and_smaller() -> None:
    trace = _synthetic(3000, seed=1)
    exact = stack_distances(trace)
    caps = [c * 512 for c in (100, 400, 1600, 6400)] + [None]
    want = capacity_curve(exact, caps)["hit_ratio"].to_numpy()
    for seed in range(3):
        sampled = stack_distances(trace, sample_rate=0.25, seed=seed)
        assert sampled.distances.shape[0] < 0.4 * exact.distances.shape[0]
        got = capacity_curve(sampled, caps)["hit_ratio"].to_numpy()
        assert np.abs(got - want).max() < 0.03, (seed, got, want)
    assert (capacity_curve(trace, caps, sample_rate=1.0)["hit_ratio"].to_numpy() == want).all()


def test_bytes_column_follows_tokens() -> None:
    frame = capacity_curve(read_trace(HEAD), [1024, None], bytes_per_token=70272.0)
    assert frame["capacity_bytes"].to_list() == [1024 * 70272.0, None]


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"capacities": [0]}, "0"),
        ({"capacities": [-512]}, "-512"),
        ({"capacities": [1.5]}, "1.5"),
        ({"sample_rate": 0.0}, "sample_rate"),
        ({"sample_rate": 1.5}, "sample_rate"),
        ({"block_size": 0}, "block_size"),
    ],
)
def test_bad_input_is_one_clear_error(kwargs: dict[str, object], named: str) -> None:
    with pytest.raises(PromptkitError, match=named):
        capacity_curve(read_trace(HEAD), **kwargs)  # type: ignore[arg-type]


def test_a_lazy_trace_gives_the_same_curve(tmp_path: Path) -> None:
    from promptkit.analysis.trace import write_trace

    path = write_trace(_synthetic(400, seed=2), tmp_path / "trace.jsonl")
    caps = [512 * 64, None]
    for rate in (1.0, 0.5):
        lazy = capacity_curve(iter_trace(path), caps, sample_rate=rate)
        assert lazy.equals(capacity_curve(read_trace(path), caps, sample_rate=rate))


def test_a_partial_last_block_counts_only_its_tokens() -> None:
    # 700 input tokens in two 512-token blocks: the second holds 188; a repeat reads 512 + 188
    trace = [TraceRecord(0, 700, 0, [1, 2]), TraceRecord(1, 700, 0, [1, 2]), TraceRecord(2, 100, 0, [1])]
    d = stack_distances(trace)
    assert d.tokens.tolist() == [188, 512, 188, 512, 100]  # in time order, the deeper block first
    curve = capacity_curve(trace, [512, 1024, None])
    # one block: the second request reads block 1 (512), the third block 1 (its 100); two: 700 + 100
    assert curve["hit_tokens"].to_list() == [612, 800, 800]
    assert curve["hit_ratio"].to_list() == pytest.approx([612 / 1500, 800 / 1500, 800 / 1500])
    for blocks, hit in ((1, 612), (2, 800), (None, 800)):
        assert int(simulate_trace(trace, capacity_blocks=blocks, block_size=512)["cached_tokens"].sum()) == hit
