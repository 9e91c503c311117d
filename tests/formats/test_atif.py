"""Tests for promptkit.formats.atif: Harbor ATIF trajectories."""

from __future__ import annotations

import copy
import doctest
import gzip
import json
from pathlib import Path
from typing import Any

from promptkit.formats import atif, read_logs
from promptkit.layout import Usage

RFC = Path("fixtures/atif/rfc-example.trajectory.json")
HELLO = Path("fixtures/atif/hello-world.trajectory.json")


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_module_doctests() -> None:
    result = doctest.testmod(atif)
    assert result.failed == 0 and result.attempted > 0


def test_the_rfc_example_replays_tool_calls_and_observations() -> None:
    result = read_logs(RFC)
    assert result.formats == {"atif": 1} and result.problems == ()
    first, second = result.records
    assert first.session == second.session == "025B810F-B3A2-4C67-93C0-FE7A142A947A"
    assert first.request == {
        "model": "gemini-2.5-flash",
        "messages": [{"role": "user", "content": "What is the current trading price of Alphabet (GOOGL)?"}],
    }
    user, assistant, price, volume = second.request["messages"]
    assert user == first.request["messages"][0]
    assert assistant["content"] == "I will search for the current trading price and volume for GOOGL."
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_price_1", "call_volume_2"]
    assert json.loads(assistant["tool_calls"][1]["function"]["arguments"]) == {
        "ticker": "GOOGL",
        "metric": "volume",
    }
    assert "reasoning_content" not in assistant  # earlier reasoning is not replayed
    assert (price["role"], price["tool_call_id"]) == ("tool", "call_price_1")
    assert volume["content"] == "GOOGL volume: 1.5M shares traded."
    assert first.completion is not None and first.completion["reasoning_content"].startswith(
        "The request requires"
    )
    assert first.usage == Usage(520, 80, 200, None)
    assert second.usage == Usage(600, 44, None, None)
    assert second.timestamp is not None and first.timestamp is not None
    assert second.timestamp - first.timestamp == 3.0
    assert first.meta == {"step_id": 2}


def test_system_steps_tool_definitions_and_cache_writes_match_the_final_metrics() -> None:
    data = load(HELLO)
    result = read_logs(HELLO)
    assert result.problems == () and len(result.records) == 3
    first = result.records[0]
    assert [m["role"] for m in first.request["messages"]] == ["system", "user"]
    assert first.request["tools"] == data["agent"]["tool_definitions"]
    assert first.provider == "anthropic"  # recognised from the model name
    usages = [r.usage for r in result.records]
    assert all(u is not None for u in usages)
    final = data["final_metrics"]
    assert sum(u.prompt_tokens or 0 for u in usages if u) == final["total_prompt_tokens"]
    assert sum(u.cached_tokens or 0 for u in usages if u) == final["total_cached_tokens"]
    assert [u.cache_write_tokens for u in usages if u] == [1869, 79, 70]
    # an empty observation still answers its tool call
    assert result.records[1].request["messages"][3] == {
        "role": "tool",
        "tool_call_id": "toolu_01",
        "content": "",
    }


def test_malformed_steps_are_problems_naming_the_step_and_field(tmp_path: Path) -> None:
    data = load(HELLO)
    data["steps"][3]["source"] = "robot"
    data["steps"][4]["metrics"]["cached_tokens"] = -1
    data["steps"][2]["timestamp"] = "yesterday"
    path = tmp_path / "broken.trajectory.json"
    path.write_text(json.dumps(data))
    result = read_logs(path)
    reasons = [p.reason for p in result.problems]
    assert all(p.file == str(path) and p.line is None for p in result.problems)
    assert any(r.startswith("steps[3].source: expected 'system', 'user' or 'agent'") for r in reasons)
    assert any("steps[4].metrics.cached_tokens: negative token count" in r for r in reasons)
    assert any("steps[2].timestamp" in r for r in reasons)
    # step 3 is skipped, steps 2 and 4 are kept (4 without usage, 2 without a timestamp)
    assert len(result.records) == 2
    assert result.records[0].timestamp is None and result.records[1].usage is None


def test_missing_steps_and_invalid_json(tmp_path: Path) -> None:
    data = load(RFC)
    del data["steps"]
    no_steps = tmp_path / "a.json"
    no_steps.write_text(json.dumps(data))
    broken = tmp_path / "b.json"
    broken.write_text(RFC.read_text()[:500])
    result = read_logs([no_steps, broken], format="atif")
    assert result.records == ()
    by_file = {p.file: p for p in result.problems}
    assert "steps: expected a list, got null" in by_file[str(no_steps)].reason
    assert by_file[str(broken)].line is not None and by_file[str(broken)].reason.startswith("invalid JSON")


def test_gzip_copy_and_content_part_messages(tmp_path: Path) -> None:
    packed = tmp_path / "trajectory.json.gz"
    packed.write_bytes(gzip.compress(RFC.read_bytes()))
    assert [r.request for r in read_logs(packed).records] == [r.request for r in read_logs(RFC).records]
    data = copy.deepcopy(load(RFC))
    data["schema_version"] = "ATIF-v1.6"
    data["steps"][0]["message"] = [
        {"type": "text", "text": "What is the current trading price "},
        {"type": "text", "text": "of GOOGL?"},
    ]
    parts = tmp_path / "parts.json"
    parts.write_text(json.dumps(data))
    first = read_logs(parts).records[0]
    assert first.request["messages"] == [
        {"role": "user", "content": "What is the current trading price of GOOGL?"}
    ]
