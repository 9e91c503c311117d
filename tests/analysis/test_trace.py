"""Tests for promptkit/analysis/trace.py: reading Mooncake traces, the block-level simulation, writing traces."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from promptkit.analysis.trace import (
    MOONCAKE_BLOCK_SIZE,
    TraceFormatError,
    TraceRecord,
    read_trace,
    simulate_trace,
    trace_from_requests,
    trace_hit_ratio,
    write_trace,
)
from promptkit.formats import read_logs as load_requests
from promptkit.tokens.tokenize import RequestTokenizer

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "fixtures" / "traces"
FIXTURES = sorted(TRACES.glob("*.jsonl"))


def _oracle_cached_blocks(records: list[TraceRecord]) -> list[int]:
    """Independent count: how many leading blocks of each request some earlier request had (infinite cache)."""
    seen: set[tuple[int, ...]] = set()
    out = [0] * len(records)
    for k in sorted(range(len(records)), key=lambda k: (records[k].timestamp, k)):
        ids = records[k].hash_ids
        n = 0
        while n < len(ids) and ids[: n + 1] in seen:
            n += 1
        out[k] = n
        seen.update(ids[: i + 1] for i in range(len(ids)))
    return out


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_published_traces_read_with_one_id_per_block(path: Path) -> None:
    records = read_trace(path)
    raw = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert [r.to_json() for r in records] == raw
    for r in records:
        assert len(r.hash_ids) == math.ceil(r.input_length / MOONCAKE_BLOCK_SIZE)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_simulation_credits_exactly_the_blocks_seen_before(path: Path) -> None:
    records = read_trace(path)
    frame = simulate_trace(records)
    expected = _oracle_cached_blocks(records)
    assert frame["cached_blocks"].to_list() == expected
    tokens = [min(b * MOONCAKE_BLOCK_SIZE, r.input_length) for b, r in zip(expected, records, strict=True)]
    assert frame["cached_tokens"].to_list() == tokens
    assert trace_hit_ratio(frame) == pytest.approx(sum(tokens) / sum(r.input_length for r in records))


def test_the_readme_sample_shares_its_first_twelve_blocks() -> None:
    first, second = read_trace(TRACES / "mooncake-readme-sample.jsonl")
    shared = next(i for i, (a, b) in enumerate(zip(first.hash_ids, second.hash_ids, strict=False)) if a != b)
    frame = simulate_trace([first, second])
    assert frame["cached_blocks"].to_list() == [0, shared]


def test_capacity_and_ttl_evict_blocks() -> None:
    a = TraceRecord(0, 2048, 0, [1, 2, 3, 4])
    b = TraceRecord(1000, 2048, 0, [5, 6, 7, 8])
    again = TraceRecord(2000, 2048, 0, [1, 2, 3, 4])
    assert simulate_trace([a, b, again])["cached_blocks"].to_list() == [0, 0, 4]
    # room for 4 blocks: b pushes a out
    assert simulate_trace([a, b, again], capacity_blocks=4)["cached_blocks"].to_list() == [0, 0, 0]
    # a 1.5 s TTL: a expired by t = 2 s
    assert simulate_trace([a, b, again], ttl=1.5)["cached_blocks"].to_list() == [0, 0, 0]


def test_bad_lines_name_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [0]}\n{"timestamp": 1}\n'
    )
    with pytest.raises(TraceFormatError, match=r"t\.jsonl:2: field"):
        read_trace(path)
    path.write_text("not json\n")
    with pytest.raises(TraceFormatError, match=r"t\.jsonl:1: not JSON"):
        read_trace(path)
    path.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": ["x"]}\n')
    with pytest.raises(TraceFormatError, match="hash_ids"):
        read_trace(path)


@pytest.mark.slow
def test_a_trace_of_real_logs_shares_blocks_as_long_as_the_prompts_share_tokens(tmp_path: Path) -> None:
    loaded = load_requests([ROOT / "fixtures" / "real-logs" / "deepseek"])
    records = [r for r in loaded.records if r.session == loaded.records[0].session][:20]
    block = 64
    trace = trace_from_requests(records, provider="deepseek", block_size=block)
    naive = RequestTokenizer("deepseek", "deepseek")
    prompts = [naive.tokenize_naive(r.request).tokens for r in records]
    assert [t.input_length for t in trace] == [len(p) for p in prompts]
    assert [len(t.hash_ids) for t in trace] == [math.ceil(len(p) / block) for p in prompts]
    for k in range(1, len(trace)):
        a, b = prompts[k - 1], prompts[k]
        m = min(len(a), len(b))
        diff = np.flatnonzero(a[:m] != b[:m])
        lcp = int(diff[0]) if diff.size else m
        same = 0
        while same < min(len(trace[k - 1].hash_ids), len(trace[k].hash_ids)) and (
            trace[k - 1].hash_ids[same] == trace[k].hash_ids[same]
        ):
            same += 1
        full = lcp == len(a) == len(b)
        assert same == (len(trace[k].hash_ids) if full else lcp // block)
    # timestamps in ms from the first record; ids numbered in order of first use
    assert trace[0].timestamp == 0 and all(t.timestamp >= 0 for t in trace)
    first_use = [i for t in trace for i in t.hash_ids]
    assert sorted(set(first_use)) == list(range(len(set(first_use))))
    # written and read back unchanged
    assert read_trace(write_trace(trace, tmp_path / "out.jsonl")) == trace
