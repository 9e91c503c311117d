"""Claude Code: a change of the thinking settings named ``thinking_changed``
(promptkit.formats.claude_code_thinking, the cause in promptkit.analysis.causes), and a request's
``thinking`` budget change (promptkit.analysis.prepare.thinking_events)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from promptkit.analysis.api import analyze, analyze_requests
from promptkit.analysis.causes import CAUSES, LAYOUT_CAUSES, explain_causes
from promptkit.formats import read_logs
from promptkit.formats.claude_code_thinking import thinking_setting
from promptkit.layout import RequestRecord, Usage

TEXT = "a line of the project's code, repeated so that the prompt is long enough to cache. " * 40


def _event(kind: str, uuid: str, parent: str | None, content: Any, ts: str, **extra: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s1",
                             "isSidechain": False, "timestamp": ts, "version": "2.1.39",
                             "message": {"role": kind, "content": content}, **extra}  # fmt: skip
    return event


def _call(uuid: str, parent: str, ts: str, reads: int, writes: int) -> dict[str, Any]:
    event = _event("assistant", uuid, parent, [{"type": "text", "text": f"answer {uuid}"}], ts)
    event["message"] |= {"id": f"msg_{uuid}", "model": "claude-opus-4-6",
                         "usage": {"input_tokens": 3, "cache_read_input_tokens": reads,
                                   "cache_creation_input_tokens": writes, "output_tokens": 9}}  # fmt: skip
    event["requestId"] = f"req_{uuid}"
    return event


def _transcript(third: dict[str, Any]) -> list[dict[str, Any]]:
    """Three prompts and calls, as Claude Code 2.x writes them (a typed prompt carries its
    ``thinkingMetadata``); the third prompt's settings are ``third``, and its call read only the head
    (system prompt and tools, 21,000 tokens) while the second call had written 26,200."""
    budget = {"thinkingMetadata": {"maxThinkingTokens": 31999}}
    return [
        _event("user", "u1", None, "one " + TEXT, "2026-02-12T16:00:00Z", **budget),
        _call("a1", "u1", "2026-02-12T16:00:05Z", 0, 25000),
        _event("user", "u2", "a1", "two", "2026-02-12T16:00:30Z", **budget),
        _call("a2", "u2", "2026-02-12T16:00:35Z", 25003, 1197),
        _event("user", "u3", "a2", "three", "2026-02-12T16:01:00Z", **third),
        _call("a3", "u3", "2026-02-12T16:01:05Z", 21000, 5210),
    ]


def _write(tmp_path: Path, events: list[dict[str, Any]]) -> Path:
    path = tmp_path / "s1.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    return path


def _third_cause(path: Path) -> dict[str, Any]:
    causes = explain_causes(analyze(path))
    return causes.filter(pl.col("index") == 2).row(0, named=True)


def test_a_thinking_budget_change_is_named_thinking_changed(tmp_path: Path) -> None:
    path = _write(tmp_path, _transcript({"thinkingMetadata": {"maxThinkingTokens": 0}}))
    records = read_logs(path).records
    assert [r.meta.get("log_events") for r in records] == [None, None, ["thinking_changed"]]
    row = _third_cause(path)
    assert row["cause"] == row["change_class"] == "thinking_changed"
    assert row["lost_thinking_changed"] > 0 and row["lost_head_changed"] == 0
    assert "thinking settings changed" in row["change_detail"]


def test_the_same_settings_leave_the_fall_back_a_head_change(tmp_path: Path) -> None:
    path = _write(tmp_path, _transcript({"thinkingMetadata": {"maxThinkingTokens": 31999}}))
    assert [r.meta.get("log_events") for r in read_logs(path).records] == [None, None, None]
    row = _third_cause(path)
    assert row["cause"] == "head_changed" and row["lost_thinking_changed"] == 0


def test_an_ultrathink_prompt_without_metadata_changes_the_settings(tmp_path: Path) -> None:
    events = _transcript({})
    for e in events:  # Claude Code before thinkingMetadata: the words set the budget
        e.pop("thinkingMetadata", None)
    events[4]["message"]["content"] = "ultrathink about the failing test"
    path = _write(tmp_path, events)
    assert [r.meta.get("log_events") for r in read_logs(path).records] == [None, None, ["thinking_changed"]]
    assert _third_cause(path)["cause"] == "thinking_changed"


def test_a_prompt_without_metadata_in_a_transcript_with_it_keeps_the_settings(tmp_path: Path) -> None:
    # Claude Code 2.x writes thinkingMetadata on typed prompts: a prompt without it (a line promptkit
    # cannot tell from one) says nothing about the settings, even with a thinking word in it
    path = _write(tmp_path, _transcript({}))
    assert [r.meta.get("log_events") for r in read_logs(path).records] == [None, None, None]
    events = _transcript({})
    events[4]["message"]["content"] = "ultrathink about it"
    assert [r.meta.get("log_events") for r in read_logs(_write(tmp_path, events)).records] == [
        None,
        None,
        None,
    ]


def test_tool_results_keep_the_prompts_settings(tmp_path: Path) -> None:
    events = _transcript({"thinkingMetadata": {"maxThinkingTokens": 31999}})
    # the second call's answer is a tool call; the third call follows its result, not a typed prompt
    events[3]["message"]["content"] = [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}]
    events[4] = _event("user", "u3", "a2", [{"type": "tool_result", "tool_use_id": "toolu_1",
                                             "content": "ultrathink"}], "2026-02-12T16:01:00Z")  # fmt: skip
    assert [r.meta.get("log_events") for r in read_logs(_write(tmp_path, events)).records] == [
        None,
        None,
        None,
    ]


def test_a_call_after_tool_results_keeps_its_prompts_setting_for_the_next_change(tmp_path: Path) -> None:
    events = _transcript({"thinkingMetadata": {"maxThinkingTokens": 0}})
    # the second call follows a tool result of the first (no typed prompt between): it was sent with the
    # first prompt's settings, so the third prompt's change is a change from those
    events[1]["message"]["content"] = [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}]
    events[2] = _event("user", "u2", "a1", [{"type": "tool_result", "tool_use_id": "toolu_1",
                                             "content": "two"}], "2026-02-12T16:00:30Z")  # fmt: skip
    records = read_logs(_write(tmp_path, events)).records
    assert [r.meta.get("log_events") for r in records] == [None, None, ["thinking_changed"]]


@pytest.mark.parametrize(
    ("line", "setting"),
    [
        ({"thinkingMetadata": {"maxThinkingTokens": 31999}, "message": {"content": "x"}}, "31999 tokens"),
        ({"thinkingMetadata": {"maxThinkingTokens": 0}, "message": {"content": "x"}}, "off"),
        (
            {"thinkingMetadata": {"level": "high", "disabled": False}, "message": {"content": "x"}},
            "level high",
        ),
        ({"thinkingMetadata": {"level": "high", "disabled": True}, "message": {"content": "x"}}, "off"),
        ({"thinkingMetadata": {"level": "none"}, "message": {"content": "x"}}, "off"),
        ({"message": {"content": "please think hard about it"}}, "10000 tokens (think hard)"),
        ({"message": {"content": "Think harder."}}, "31999 tokens (ultrathink)"),
        ({"message": {"content": "megathink"}}, "10000 tokens (think hard)"),
        ({"message": {"content": "I think so"}}, "4000 tokens (think)"),
        ({"message": {"content": [{"type": "text", "text": "rethinking"}]}}, "off (no thinking word)"),
        ({"message": {"content": "<command-name>/model</command-name>"}}, None),
        ({"isCompactSummary": True, "message": {"content": "summary"}}, None),
        ({"isMeta": True, "message": {"content": "Caveat: ..."}}, None),
        ({"message": {"content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}}, None),
        ({"message": {"content": []}}, None),
        ({"message": "not an object"}, None),
    ],
)
def test_the_setting_a_line_carries(line: dict[str, Any], setting: str | None) -> None:
    assert thinking_setting({"type": "user", **line}) == setting
    assert thinking_setting({"type": "assistant", **line}) is None


def test_a_request_thinking_budget_change_is_named_too() -> None:
    def record(k: int, budget: int, reads: int, writes: int) -> RequestRecord:
        messages = [{"role": "user", "content": "q0 " + TEXT}]
        for j in range(1, k + 1):
            messages += [{"role": "assistant", "content": f"a{j}"}, {"role": "user", "content": f"q{j}"}]
        messages[-1] = {"role": "user", "content": [{"type": "text", "text": messages[-1]["content"],
                                                     "cache_control": {"type": "ephemeral"}}]}  # fmt: skip
        body = {"model": "claude-sonnet-4-5", "system": [{"type": "text", "text": "Be terse. " * 300,
                "cache_control": {"type": "ephemeral"}}], "messages": messages,
                "thinking": {"type": "enabled", "budget_tokens": budget}}  # fmt: skip
        usage = Usage(prompt_tokens=reads + writes + 3, cached_tokens=reads, cache_write_tokens=writes)
        return RequestRecord(body, "s", index=k, timestamp=1000.0 + 10 * k, usage=usage)

    first = analyze_requests([record(0, 4000, 0, 2000)], provider="anthropic").requests
    head, prompt = int(first["head_end_tokens"][0]), int(first["reported_prompt_tokens"][0])
    records = [
        record(0, 4000, 0, prompt - 3),
        record(1, 4000, prompt - 3, 12),
        record(2, 16000, head, prompt + 12 - head),  # the budget changed: only the system prompt read
    ]
    result = analyze_requests(records, provider="anthropic")
    assert result.requests["log_events"].to_list() == [None, None, "thinking_changed"]
    assert explain_causes(result)["cause"].to_list()[2] == "thinking_changed"


def test_thinking_changed_is_a_layout_cause_after_the_existing_ones() -> None:
    assert (
        LAYOUT_CAUSES[-1] == "thinking_changed"
        and LAYOUT_CAUSES.index("history_rewritten") == len(LAYOUT_CAUSES) - 2
    )
    assert CAUSES.index("thinking_changed") < CAUSES.index("granularity")
