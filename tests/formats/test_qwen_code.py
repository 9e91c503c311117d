"""promptkit.formats.qwen_code: Qwen Code recordings (a Gemini CLI fork whose model turns are typed
``qwen``), one request per model call, analyzed with the Qwen profile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptkit.analysis import analyze
from promptkit.formats import read_logs, sniff_format
from promptkit.formats.base import Source

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "qwen-code" / "session-2026-03-02T10-15-7a1c3e55.json"
GEMINI = ROOT / "fixtures" / "gemini-cli" / "session-2026-04-01T11-11-5cdd2021.jsonl"


@pytest.mark.slow
def test_qwen_turns_are_calls_with_the_qwen_provider() -> None:
    result = read_logs(FIXTURE)
    assert result.formats == {"qwen-code": 1} and result.problems == ()
    first, second = result.records
    assert [(r.provider, r.request["model"]) for r in result.records] == [("qwen", "qwen3-coder-plus")] * 2
    assert [(r.usage.prompt_tokens, r.usage.cached_tokens) for r in (first, second) if r.usage] == [
        (5210, 0),
        (5291, 5120),
    ]
    # the second call's history: the user's question, the first turn with its tool call, the tool result
    assert [m["role"] for m in second.request["messages"]] == ["user", "assistant", "tool"]
    assert second.request["messages"][1]["tool_calls"][0]["function"]["name"] == "glob"
    assert "src/app/cli.py" in second.request["messages"][2]["content"]
    assert {r.meta["opaque_head_key"] for r in result.records} == {
        "qwen-code:7a1c3e55-2b0d-4c61-9f0e-3d5b1a9c8e21:qwen3-coder-plus"
    }


def test_sniffing_tells_qwen_code_from_gemini_cli(tmp_path: Path) -> None:
    assert sniff_format(Source.open(FIXTURE)).name == "qwen-code"
    assert sniff_format(Source.open(GEMINI)).name == "gemini-cli"
    # a JSONL recording whose head shows no qwen turn yet is still Qwen Code's under ~/.qwen
    folder = tmp_path / ".qwen" / "tmp" / "abc" / "chats"
    folder.mkdir(parents=True)
    path = folder / "session-x.jsonl"
    meta = {"sessionId": "s", "projectHash": "h", "startTime": "2026-03-02T10:15:00Z"}
    path.write_text(json.dumps(meta) + "\n", encoding="utf-8")
    assert sniff_format(Source.open(path)).name == "qwen-code"


def test_read_as_gemini_cli_the_problem_names_the_turn_types(tmp_path: Path) -> None:
    result = read_logs(FIXTURE, format="gemini-cli")
    assert result.records == ()
    [problem] = result.problems
    assert "no message typed 'gemini'" in problem.reason
    assert "2 'qwen'" in problem.reason and "1 'user'" in problem.reason


def test_jsonl_layout_with_rewrites(tmp_path: Path) -> None:
    lines: list[dict[str, Any]] = [
        {"sessionId": "s2", "projectHash": "h", "startTime": "2026-03-02T10:15:00Z"},
        {"id": "u1", "timestamp": "2026-03-02T10:15:01Z", "type": "user", "content": "hi"},
        {"id": "q1", "timestamp": "2026-03-02T10:15:02Z", "type": "qwen", "content": "", "model": "qwen3-coder-plus"},
        {"id": "q1", "timestamp": "2026-03-02T10:15:02Z", "type": "qwen", "content": "hello", "model": "qwen3-coder-plus",
         "tokens": {"input": 3000, "output": 2, "cached": 0, "total": 3002}},
    ]  # fmt: skip
    path = tmp_path / "session-y.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    result = read_logs(path)
    assert result.formats == {"qwen-code": 1}
    [record] = result.records
    assert record.usage is not None and record.usage.prompt_tokens == 3000  # the re-appended copy's tokens
    assert record.completion is not None and record.completion["content"] == "hello"


def test_analysis_uses_the_qwen_profile() -> None:
    result = analyze(FIXTURE)
    rows = result.requests.to_dicts()
    assert rows[0]["prompt_tokens"] == rows[0]["reported_prompt_tokens"] == 5210
    # Qwen's tokenizer counts the second prompt within 1% of the report; its cache is best effort
    assert abs(rows[1]["prompt_tokens"] - rows[1]["reported_prompt_tokens"]) <= 0.01 * 5291
    assert rows[1]["predicted_cached_tokens"] >= rows[1]["reported_cached_tokens"] == 5120
    assert [r["best_effort_cache"] for r in rows] == [True, True]
