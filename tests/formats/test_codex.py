"""promptkit.formats.codex: Codex CLI rollouts, one request per model call."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from promptkit.analysis import analyze
from promptkit.formats import get_format, read_logs, sniff_format
from promptkit.formats.base import Source
from promptkit.formats.codex import merge_answers
from promptkit.formats.http_capture import responses_request_to_chat

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "codex"
ROLLOUT = (
    FIXTURES / "sessions/2026/02/23/rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl"
)
SESSION = "019c8a4d-8f45-7010-8b5d-7fad920aa6f9"


def raw_calls(path: Path) -> list[dict[str, Any]]:
    """Independently of promptkit: the last_token_usage of each token_count that is neither empty nor a
    repeat of the one before."""
    calls: list[dict[str, Any]] = []
    previous = None
    for line in path.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        payload = event["payload"]
        if event["type"] != "event_msg" or payload.get("type") != "token_count" or payload["info"] is None:
            continue
        if payload["info"] != previous:
            calls.append(payload["info"]["last_token_usage"])
        previous = payload["info"]
    return calls


def write_rollout(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def test_one_request_per_call_with_the_rollouts_own_usage() -> None:
    raw = raw_calls(ROLLOUT)
    result = read_logs(FIXTURES)
    assert result.problems == ()
    assert result.formats == {"codex": 1}
    text = ROLLOUT.read_text(encoding="utf-8")
    assert text.count('"type":"token_count"') > len(raw)  # repeats and an empty one are in the file
    assert len(result.records) == len(raw)
    got = [
        (r.usage.prompt_tokens, r.usage.cached_tokens, r.usage.completion_tokens)
        for r in result.records
        if r.usage
    ]
    assert got == [(u["input_tokens"], u["cached_input_tokens"], u["output_tokens"]) for u in raw]
    assert {(r.session, r.provider, r.request["model"]) for r in result.records} == {
        (SESSION, "openai", "gpt-5.3-codex")
    }
    assert [r.index for r in result.records] == [0, 1, 2]


def test_request_is_instructions_and_items_before_the_calls_output() -> None:
    first, second, third = read_logs(ROLLOUT).records
    assert first.request["messages"][0] == {
        "role": "system",
        "content": "[REDACTED_TEXT len=13131 sha=036b7e47]",
    }
    assert [m["role"] for m in first.request["messages"][1:]] == [
        "developer", "developer", "user", "user", "developer", "developer", "user",
    ]  # fmt: skip
    # the call's output (reasoning, a commentary message, two tool calls) is its completion ...
    assert first.completion is not None
    assert [c["id"] for c in first.completion["tool_calls"]] == [
        "call_gL2iTwQbQ9Tg1BKGl350ZGKp",
        "call_qXFvlxrQVjVXhLKaZsBPk1ob",
    ]
    # ... and the next request's history, followed by the tool outputs
    assert second.request["messages"][: len(first.request["messages"])] == first.request["messages"]
    assert [m.get("tool_call_id") for m in second.request["messages"][-2:]] == [
        "call_gL2iTwQbQ9Tg1BKGl350ZGKp", "call_qXFvlxrQVjVXhLKaZsBPk1ob",
    ]  # fmt: skip
    assert third.line == 48 and third.timestamp is not None and second.timestamp is not None
    assert third.timestamp > second.timestamp


def test_opaque_head_and_analysis() -> None:
    records = read_logs(ROLLOUT).records
    assert {r.meta["opaque_head_key"] for r in records} == {f"codex:{SESSION}:gpt-5.3-codex"}
    result = analyze(ROLLOUT)
    rows = result.requests.to_dicts()
    assert rows[0]["prompt_tokens"] == rows[0]["reported_prompt_tokens"] == 17102
    assert all(r["predicted_cached_tokens"] > 0 for r in rows[1:])
    assert result.composition.filter(result.composition["slot"] == "opaque-head").height == 3


def test_bad_lines_are_problems_naming_file_line_and_field(tmp_path: Path) -> None:
    lines = ROLLOUT.read_text(encoding="utf-8").splitlines()
    no_payload = json.loads(lines[1])
    del no_payload["payload"]
    lines[1] = json.dumps(no_payload)
    lines[3] = "{not json"
    bad_count = json.loads(lines[31])  # line 32: the second call's token_count
    bad_count["payload"]["info"]["last_token_usage"]["cached_input_tokens"] = "lots"
    lines[31] = json.dumps(bad_count)
    path = tmp_path / ROLLOUT.name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = read_logs(path)
    reasons = {(p.line, p.reason.split(";")[0]) for p in result.problems}
    assert (2, "missing 'payload'") in reasons
    assert any(line == 4 and reason.startswith("invalid JSON") for line, reason in reasons)
    assert (
        32,
        "payload.info.last_token_usage.cached_input_tokens: expected a token count, got str",
    ) in reasons
    assert {p.file for p in result.problems} == {str(path)}
    # the call whose token_count is broken is read from Codex's repeat of that event (line 38)
    assert [r.line for r in result.records] == [19, 38, 48]
    assert result.records[1].usage is not None and result.records[1].usage.cached_tokens == 17280


def test_a_malformed_response_item_is_left_out_and_named(tmp_path: Path) -> None:
    path = write_rollout(tmp_path / "rollout-x.jsonl", [
        {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "s"}},
        {"timestamp": "2026-01-01T00:00:01Z", "type": "response_item", "payload": {"type": "message", "role": 3, "content": []}},
        {"timestamp": "2026-01-01T00:00:02Z", "type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}},
        {"timestamp": "2026-01-01T00:00:03Z", "type": "event_msg", "payload": {"type": "token_count", "info": {"last_token_usage": {"input_tokens": 2000, "cached_input_tokens": 0, "output_tokens": 3}}}},
    ])  # fmt: skip
    result = read_logs(path)
    [problem] = result.problems
    assert problem.line == 2 and problem.reason.startswith("payload: response item.role: expected a string")
    [record] = result.records
    assert [m["role"] for m in record.request["messages"]] == ["user"]
    assert record.request["model"] == "gpt-5"  # no turn_context: the documented default


def test_totals_only_and_compaction(tmp_path: Path) -> None:
    def item(role: str, text: str) -> dict[str, Any]:
        kind = "output_text" if role == "assistant" else "input_text"
        return {
            "type": "response_item",
            "payload": {"type": "message", "role": role, "content": [{"type": kind, "text": text}]},
        }

    def count(total: int, cached: int) -> dict[str, Any]:
        return {
            "type": "event_msg",
            "payload": {
                "type": "token_count",
                "info": {
                    "total_token_usage": {
                        "input_tokens": total,
                        "cached_input_tokens": cached,
                        "output_tokens": 1,
                    }
                },
            },
        }

    path = write_rollout(tmp_path / "rollout-y.jsonl", [
        {"type": "session_meta", "payload": {"id": "s", "instructions": "Be Codex."}},
        {"type": "turn_context", "payload": {"model": "gpt-5-codex"}},
        item("user", "one"), item("assistant", "a"), count(3000, 0),
        item("user", "two"), item("assistant", "b"), count(7000, 2500),
        {"type": "compacted", "payload": {"message": "summary of one and two"}},
        item("user", "three"), item("assistant", "c"), count(8000, 2500),
    ])  # fmt: skip
    records = read_logs(path).records
    assert [r.usage.prompt_tokens for r in records if r.usage] == [3000, 4000, 1000]
    assert [r.usage.cached_tokens for r in records if r.usage] == [0, 2500, 0]
    assert [m["content"] for m in records[1].request["messages"]] == [
        "Be Codex.", [{"type": "text", "text": "one"}], [{"type": "text", "text": "a"}], [{"type": "text", "text": "two"}],
    ]  # fmt: skip
    assert [m["content"] for m in records[2].request["messages"]] == [
        "Be Codex.", [{"type": "text", "text": "summary of one and two"}], [{"type": "text", "text": "three"}],
    ]  # fmt: skip


def test_gzip_copies_read_transparently(tmp_path: Path) -> None:
    path = tmp_path / (ROLLOUT.name + ".gz")
    path.write_bytes(gzip.compress(ROLLOUT.read_bytes()))
    plain, packed = read_logs(ROLLOUT), read_logs(path)
    assert packed.formats == {"codex": 1}
    assert [(r.usage, r.request) for r in packed.records] == [(r.usage, r.request) for r in plain.records]


def test_sniffing(tmp_path: Path) -> None:
    assert sniff_format(Source.open(ROLLOUT)).name == "codex"
    other = write_rollout(tmp_path / "calls.jsonl", [{"type": "message", "payload": {}}])
    assert not get_format("codex").sniff(Source.open(other))


def _without_blob(item: dict[str, Any]) -> dict[str, Any]:
    """Independently of the reader: a reasoning item's base64 blob replaced by its length and digest."""
    blob = item.get("encrypted_content")
    if item.get("type") != "reasoning" or not blob:
        return item
    digest = hashlib.sha256(blob.encode()).hexdigest()[:16]
    return {**item, "encrypted_content": f"[encrypted reasoning: {len(blob)} chars, sha256 {digest}]"}


_ITEMS = st.sampled_from(
    [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "u"}]},
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "d"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
        {"type": "function_call", "name": "f", "arguments": "{}", "call_id": "c"},
        {"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "p"},
        {"type": "function_call_output", "call_id": "c", "output": "ok"},
        {"type": "reasoning", "summary": [], "encrypted_content": "x"},
    ]
)


@settings(deadline=None, max_examples=80)
@given(st.lists(st.one_of(_ITEMS, st.just("count")), max_size=40))
def test_each_request_equals_the_whole_conversion_of_its_items(
    tmp_path_factory: Any, steps: list[Any]
) -> None:
    lines: list[dict[str, Any]] = [{"type": "session_meta", "payload": {"id": "s", "instructions": "I"}}]
    total = 0
    for step in steps:
        if step == "count":
            total += 1500
            usage = {"input_tokens": total, "cached_input_tokens": 0, "output_tokens": 1}
            lines.append(
                {
                    "type": "event_msg",
                    "payload": {"type": "token_count", "info": {"total_token_usage": usage}},
                }
            )
        else:
            lines.append({"type": "response_item", "payload": step})
    path = write_rollout(tmp_path_factory.mktemp("r") / "rollout-p.jsonl", lines)
    items = [_without_blob(line["payload"]) for line in lines if line["type"] == "response_item"]
    records = read_logs(path).records
    assert len(records) == steps.count("count")
    for r in records:
        whole = responses_request_to_chat({"instructions": "I", "input": items[: r.meta["codex_items"]]})
        # an answer (consecutive assistant messages: reasoning, text, tool calls) is one message
        assert r.request["messages"] == merge_answers(whole["messages"])


def _user(text: str) -> dict[str, Any]:
    return {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}}  # fmt: skip


def _count(last: dict[str, int]) -> dict[str, Any]:
    return {"type": "event_msg", "payload": {"type": "token_count", "info": {"last_token_usage": last}}}


def test_encrypted_reasoning_is_not_text_and_its_size_is_recorded(tmp_path: Path) -> None:
    blob = "gAAAAABp" + "Zm9vYmFy" * 5000  # 40,008 base64 characters
    path = write_rollout(tmp_path / "rollout-r.jsonl", [
        {"type": "session_meta", "payload": {"id": "s"}},
        _user("go"),
        {"type": "response_item", "payload": {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}], "encrypted_content": blob}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "f", "arguments": "{}", "call_id": "c"}},
        _count({"input_tokens": 1500, "cached_input_tokens": 0, "output_tokens": 900}),
        {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c", "output": "ok"}},
        _count({"input_tokens": 2600, "cached_input_tokens": 1280, "output_tokens": 9}),
    ])  # fmt: skip
    result = read_logs(path)
    assert result.problems == ()
    first, second = result.records
    text = json.dumps(second.request)
    assert "Zm9vYmFy" not in text and "plan" in text  # the summary stays, the blob does not
    assert "[encrypted reasoning: 40008 chars, sha256 " in text
    assert "codex_encrypted_reasoning" not in first.meta
    assert second.meta["codex_encrypted_reasoning"] == {"items": 1, "chars": 40008}
    rows = analyze(path).requests.to_dicts()
    assert rows[1]["prompt_tokens"] < 2 * 2600  # the blob alone would be over 10,000 local tokens


def test_an_all_zero_token_count_at_a_compaction_is_not_a_call(tmp_path: Path) -> None:
    # as a real rollout writes it at a compaction: every count 0 but a running total_tokens
    zero = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0, "reasoning_output_tokens": 0,
            "total_tokens": 940499}  # fmt: skip
    path = write_rollout(tmp_path / "rollout-z.jsonl", [
        {"type": "session_meta", "payload": {"id": "s"}},
        _user("one"),
        _count({"input_tokens": 3000, "cached_input_tokens": 0, "output_tokens": 5}),
        {"type": "compacted", "payload": {"message": "summary"}},
        _count(zero),
        _user("two"),
        _count({"input_tokens": 1200, "cached_input_tokens": 0, "output_tokens": 5}),
    ])  # fmt: skip
    result = read_logs(path)
    assert result.problems == ()
    assert [(r.line, r.usage.prompt_tokens if r.usage else None) for r in result.records] == [
        (3, 3000),
        (7, 1200),
    ]


def test_one_impossible_token_count_is_a_problem_and_the_run_goes_on(tmp_path: Path) -> None:
    path = write_rollout(tmp_path / "rollout-i.jsonl", [
        {"type": "session_meta", "payload": {"id": "s"}},
        _user("one"),
        _count({"input_tokens": 10, "cached_input_tokens": 5000, "output_tokens": 5}),
        _user("two"),
        _count({"input_tokens": 3000, "cached_input_tokens": 0, "output_tokens": 5}),
    ])  # fmt: skip
    result = read_logs(path)
    [problem] = result.problems
    assert (problem.file, problem.line) == (str(path), 3)
    assert "5000 cached tokens of a 10-token prompt" in problem.reason
    assert problem.reason.endswith("the call is kept without usage")
    assert [r.usage is None for r in result.records] == [True, False]
    assert analyze(path).requests.height == 2


def _routed(tmp_path: Path, route: str | None, model: str) -> Any:
    meta: dict[str, Any] = {"id": "s"} if route is None else {"id": "s", "model_provider": route}
    path = write_rollout(tmp_path / f"rollout-{route}-{model.replace(':', '_').replace('/', '_')}.jsonl", [
        {"type": "session_meta", "payload": meta},
        {"type": "turn_context", "payload": {"model": model}},
        _user("one"),
        _count({"input_tokens": 3000, "cached_input_tokens": 0, "output_tokens": 5}),
    ])  # fmt: skip
    [record] = read_logs(path).records
    return record


@pytest.mark.slow
def test_the_provider_follows_model_provider_and_the_model(tmp_path: Path) -> None:
    cases = [
        (None, "gpt-5-codex", "openai"),
        ("openai", "gpt-5.4", "openai"),
        ("azure", "gpt-5.1-codex", "openai"),
        ("ollama", "kimi-k2:1t-cloud", "kimi"),
        ("ollama", "qwen3-coder:30b", "qwen"),
        ("ollama", "gpt-oss:20b", "ollama"),  # an open-weights model served by the route itself
        ("oss", "gpt-oss:120b", "ollama"),
        ("openrouter", "moonshotai/kimi-k2.5", "kimi"),
        ("my-proxy", "llama3.1", None),  # nothing known: left to the analysis (generic, with a note)
    ]
    got = [(route, model, _routed(tmp_path, route, model).provider) for route, model, _ in cases]
    assert got == cases
    assert _routed(tmp_path, "ollama", "kimi-k2:1t-cloud").meta["codex_model_provider"] == "ollama"


def test_a_compactions_replacement_history_loses_its_blobs_too(tmp_path: Path) -> None:
    blob = "gAAAAABq" + "YmF6" * 3000
    reasoning = {"type": "reasoning", "summary": [], "encrypted_content": blob}
    path = write_rollout(tmp_path / "rollout-c.jsonl", [
        {"type": "session_meta", "payload": {"id": "s"}},
        _user("one"),
        _count({"input_tokens": 3000, "cached_input_tokens": 0, "output_tokens": 5}),
        {"type": "compacted", "payload": {"message": "", "replacement_history": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "one"}]}, reasoning]}},
        _user("two"),
        _count({"input_tokens": 1500, "cached_input_tokens": 0, "output_tokens": 5}),
    ])  # fmt: skip
    _, after = read_logs(path).records
    assert "YmF6" not in json.dumps(after.request)
    assert after.meta["codex_encrypted_reasoning"] == {"items": 1, "chars": len(blob)}


def test_a_calls_completion_is_its_answer_as_the_next_request_renders_it(tmp_path: Path) -> None:
    # OpenAI keeps the answer's KV: the answer (reasoning, text, tool calls: one assistant message)
    # must render as the next request renders it, so the next call's read into it is seen
    path = write_rollout(tmp_path / "rollout-a.jsonl", [
        {"type": "session_meta", "payload": {"id": "s", "instructions": "Be brief. " * 300}},
        _user("go"),
        {"type": "response_item", "payload": {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}], "encrypted_content": "gAAAAB" * 40}},
        {"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "ls", "arguments": "{}", "call_id": "c1"}},
        _count({"input_tokens": 1500, "cached_input_tokens": 0, "output_tokens": 300}),
        {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1", "output": "a.txt"}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "cat", "arguments": "{}", "call_id": "c2"}},
        _count({"input_tokens": 1850, "cached_input_tokens": 1792, "output_tokens": 20}),
        {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c2", "output": "x"}},
        _count({"input_tokens": 1900, "cached_input_tokens": 1792, "output_tokens": 5}),
    ])  # fmt: skip
    first, second, third = read_logs(path).records
    n = len(first.request["messages"])
    assert second.request["messages"][n] == first.completion  # one message: reasoning, text, the call
    assert "plan" in first.completion["content"] and "Looking." in first.completion["content"]
    assert [c["id"] for c in first.completion["tool_calls"]] == ["c1"]
    m = len(second.request["messages"])  # a call of tool calls only, with no text
    assert third.request["messages"][m] == second.completion and not second.completion.get("content")
    q = analyze(path).requests
    # the read goes past the previous prompt into its answer (1500 + 300 reported), in 128-token steps
    assert q["prefix_tokens"][1] == 1800 and q["predicted_cached_tokens"][1] == 1792
    assert q["prefix_tokens"][2] == 1870 and q["predicted_cached_tokens"][2] == 1792


def test_an_answer_after_tool_calls_is_not_merged_into_them() -> None:
    # the tool calls render after a message's text: text after them is a message of its own, and the
    # earlier message's calls are kept
    calls = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]}
    text = {"role": "assistant", "content": "done"}
    assert merge_answers([calls, text]) == [calls, text]
    reasoning = {"role": "assistant", "content": "r"}
    assert merge_answers([reasoning, calls]) == [{"role": "assistant", "content": "r", "tool_calls": [{"id": "c1"}]}]
    assert merge_answers([{"role": "user", "content": "a"}, text]) == [{"role": "user", "content": "a"}, text]


def test_an_answer_logged_after_its_usage_is_the_calls_completion(tmp_path: Path) -> None:
    # Codex 0.58 writes a call's token_count before its output items (then repeats it): the answer
    # logged after the usage, up to the next input item, is still that call's completion
    path = write_rollout(tmp_path / "rollout-o.jsonl", [
        {"type": "session_meta", "payload": {"id": "s", "instructions": "Be brief. " * 300}},
        _user("go"),
        _count({"input_tokens": 1500, "cached_input_tokens": 0, "output_tokens": 300}),
        {"type": "response_item", "payload": {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}], "encrypted_content": "gAAAAB" * 40}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "ls", "arguments": "{}", "call_id": "c1"}},
        {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1", "output": "a.txt"}},
        _count({"input_tokens": 1500, "cached_input_tokens": 0, "output_tokens": 300}),  # the repeat
        _count({"input_tokens": 1850, "cached_input_tokens": 1792, "output_tokens": 20}),
        {"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}},
    ])  # fmt: skip
    first, second = read_logs(path).records
    n = len(first.request["messages"])
    assert second.request["messages"][n] == first.completion
    assert [c["id"] for c in first.completion["tool_calls"]] == ["c1"] and "plan" in first.completion["content"]
    # settled at the end of the file
    assert second.completion == {"role": "assistant", "content": [{"type": "text", "text": "Done."}]}
    assert analyze(path).requests["prefix_tokens"][1] == 1800  # the read reaches into the answer
