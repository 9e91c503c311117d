"""Tests for promptkit/analysis/fleet_input.py: traces after decompression, folders, several files, a mix
refused, the block size checked, timestamps absent."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
import zstandard

from promptkit.analysis.fleet import compare_fleet, load_fleet_input
from promptkit.analysis.trace import TraceRecord, read_trace, write_trace
from promptkit.errors import PromptkitError, UsageError

ROOT = Path(__file__).resolve().parents[2]
HEAD = ROOT / "fixtures" / "traces" / "mooncake-conversation-head.jsonl"
SAMPLE = ROOT / "fixtures" / "traces" / "mooncake-readme-sample.jsonl"
DEEPSEEK = ROOT / "fixtures" / "real-logs" / "deepseek"


def _figures(paths: object) -> list[tuple[object, ...]]:
    data = load_fleet_input(paths)  # type: ignore[arg-type]
    summary = compare_fleet(data, replicas=[1, 4], policies=["round_robin", "prefix_aware"]).summary
    return summary.select("policy", "replicas", "cached_tokens", "hit_ratio", "load_imbalance").rows()


def test_gzip_zstd_and_a_folder_give_the_figures_of_the_plain_file(tmp_path: Path) -> None:
    plain = _figures(HEAD)
    gz = tmp_path / "head.jsonl.gz"
    gz.write_bytes(gzip.compress(HEAD.read_bytes()))
    zst = tmp_path / "zst" / "trace.jsonl.zst"
    zst.parent.mkdir()
    zst.write_bytes(zstandard.ZstdCompressor().compress(HEAD.read_bytes()))
    folder = tmp_path / "folder"
    folder.mkdir()
    shutil.copy(HEAD, folder / "trace.jsonl")
    hidden = tmp_path / "named-oddly.log"  # a gzipped trace whose name says nothing
    hidden.write_bytes(gzip.compress(HEAD.read_bytes()))
    assert plain[1][2] > 0
    for source in (gz, zst, zst.parent, folder, [hidden]):
        assert _figures(source) == plain, source
    assert len(load_fleet_input(gz).trace) == 18


def test_several_traces_replay_side_by_side_with_their_ids_apart(tmp_path: Path) -> None:
    a = write_trace([TraceRecord(0, 1024, 1, [0, 1]), TraceRecord(2000, 1024, 1, [0, 1])], tmp_path / "a.jsonl")
    b = write_trace([TraceRecord(1000, 1024, 1, [0, 1])], tmp_path / "b.jsonl")
    data = load_fleet_input([a, b])
    assert [r.hash_ids for r in data.trace] == [(0, 1), (0, 1), (2, 3)]
    assert any("kept apart" in n for n in data.notes)
    # b's request shares no block with a's: one cache hits only a's second request
    summary = compare_fleet(data, replicas=[1], policies=["round_robin"]).summary
    assert summary["cached_tokens"].item() == 1024


def test_a_mix_of_traces_and_logs_is_refused(tmp_path: Path) -> None:
    log = sorted(DEEPSEEK.glob("*.traj.json"))[0]
    with pytest.raises(UsageError, match=r"mix Mooncake traces \(.*head.*\) with request logs"):
        load_fleet_input([HEAD, log])


def test_block_size_is_checked_against_every_line(tmp_path: Path) -> None:
    assert load_fleet_input(HEAD, block_size=512).block_size == 512
    with pytest.raises(UsageError, match=r"block size 256 \(--block-size\) contradicts.*head.jsonl:1 has") as e:
        load_fleet_input(HEAD, block_size=256)
    assert "18 of 18 lines" in str(e.value)
    # a trace of 256-token blocks under the default 512
    small = write_trace([TraceRecord(0, 1000, 1, [0, 1, 2, 3]), TraceRecord(1, 600, 1, [0, 1, 2])], tmp_path / "s.jsonl")
    with pytest.raises(UsageError, match=r"block size 512 .* from 250 to 299"):
        load_fleet_input(small)
    assert load_fleet_input(small, block_size=256).block_size == 256
    bad = write_trace([TraceRecord(0, 1000, 1, [0, 1]), TraceRecord(1, 1000, 1, [0, 1, 2, 3, 4])], tmp_path / "b.jsonl")
    with pytest.raises(UsageError, match="no one block size fits every line"):
        load_fleet_input(bad)


def test_a_broken_trace_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(SAMPLE.read_text() + json.dumps({"timestamp": 3, "input_length": 5}) + "\n")
    with pytest.raises(PromptkitError, match=r"t.jsonl:3: field 'hash_ids'"):
        load_fleet_input(path)


def test_timestamps_absent_arrive_in_order_one_interval_apart(tmp_path: Path) -> None:
    flat = write_trace([TraceRecord(0, 512, 1, [k]) for k in range(4)], tmp_path / "flat.jsonl")
    data = load_fleet_input(flat, arrival_interval=2.5)
    assert [r.timestamp for r in data.trace] == [0.0, 2500.0, 5000.0, 7500.0]
    assert any("timestamps absent" in n and "2.5 s" in n for n in data.notes)
    timed = load_fleet_input(HEAD)
    assert [r.timestamp for r in timed.trace] == [r.timestamp for r in read_trace(HEAD)]
    assert not any("timestamps absent" in n for n in timed.notes)
    with pytest.raises(UsageError, match="arrival_interval"):
        load_fleet_input(flat, arrival_interval=0)


def test_logs_without_timestamps_get_the_same_rule(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    body = {"messages": [{"role": "user", "content": "hello " * 50}]}
    path.write_text("".join(json.dumps({"request": body}) + "\n" for _ in range(3)))
    data = load_fleet_input(path)
    assert [r.timestamp for r in data.trace] == [0.0, 1000.0, 2000.0]
    assert any("3 of 3 records have none" in n for n in data.notes)
