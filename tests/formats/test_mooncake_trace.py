"""A Mooncake block trace is a log format: ``promptkit analyze trace.jsonl`` reads it like any log."""

from __future__ import annotations

import io
import json
from pathlib import Path

from promptkit.analysis import analyze
from promptkit.analysis.trace import read_trace, simulate_trace
from promptkit.cli import main
from promptkit.formats import read_logs

ROOT = Path(__file__).resolve().parents[2]
TRACES = [
    ROOT / "fixtures" / "traces" / n
    for n in ("mooncake-readme-sample.jsonl", "mooncake-conversation-head.jsonl")
]


def test_a_trace_is_detected_and_read_as_requests_of_chained_blocks() -> None:
    for path in TRACES:
        loaded = read_logs(path)
        trace = read_trace(path)
        assert not loaded.problems and len(loaded.records) == len(trace)
        for record, line in zip(loaded.records, trace, strict=True):
            blocks = record.meta["opaque_head_blocks"]
            assert [k for k, _ in blocks] == [str(h) for h in line.hash_ids]
            assert sum(n for _, n in blocks) == line.input_length
            assert record.provider == "exact"


def test_the_analysis_of_a_trace_caches_what_the_block_simulation_caches() -> None:
    for path in TRACES:
        result = analyze(path, view="simulated")
        expected = simulate_trace(read_trace(path), block_size=512)["cached_tokens"].to_list()
        got = result.requests.sort("index")["predicted_cached_tokens"].to_list()
        # an exact prefix cache over the same blocks: the same tokens, but not rounded down to whole blocks
        assert all(g >= e for g, e in zip(got, expected, strict=True))
        assert all(g - e < 512 for g, e in zip(got, expected, strict=True))
        assert sum(got) > 0


def test_a_bad_trace_line_is_reported_with_its_line_and_field(tmp_path: Path) -> None:
    good = {"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}
    path = tmp_path / "trace.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(x)
            for x in (
                good,
                {**good, "hash_ids": "x"},
                {**good, "input_length": 2000},
                {**good, "timestamp": "t"},
            )
        )
        + "\n",
        encoding="utf-8",
    )
    loaded = read_logs(path)
    assert len(loaded.records) == 1
    reasons = {p.line: p.reason for p in loaded.problems}
    assert reasons[2].startswith("hash_ids:") and reasons[3].startswith("input_length:")
    assert reasons[4].startswith("timestamp:")


def test_promptkit_analyze_reads_a_trace(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    argv = ["analyze", str(TRACES[0]), "--view", "simulated", "--json", "--no-plots", "--out", str(tmp_path)]
    code = main(argv, stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    head = json.loads(out.getvalue())["headline"]
    assert head["requests"] == 2 and head["predicted_cached_tokens"] >= 6144
