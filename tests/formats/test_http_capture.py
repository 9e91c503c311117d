"""promptkit.formats.http_capture: SSE reassembly, the Responses conversion, and the capture reader."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from promptkit.analysis import LoadProblem, RequestRecord, analyze_requests
from promptkit.formats import http_capture as hc
from tests.proxy import fake_upstream as fake

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "http-capture"


def lines_of(path: Path) -> list[tuple[int, str]]:
    return list(enumerate(path.read_text(encoding="utf-8").split("\n"), start=1))


def read_all(path: Path) -> tuple[list[RequestRecord], list[LoadProblem]]:
    out = list(hc.read(path, lines_of(path)))
    return [r for r in out if isinstance(r, RequestRecord)], [p for p in out if isinstance(p, LoadProblem)]


# ---------------------------------------------------------------------------------------------------
# SSE


@pytest.mark.slow
@given(st.lists(st.tuples(st.sampled_from(["", "ping", "message_start"]), st.text(alphabet=st.characters(blacklist_characters="\r\n"), max_size=30)), max_size=8),
       st.sampled_from(["\n", "\r\n", "\r"]))  # fmt: skip
def test_parse_sse_round_trips_events_with_any_line_ending(events: list[tuple[str, str]], nl: str) -> None:
    text = "".join((f"event: {name}{nl}" if name else "") + f"data: {data}{nl}{nl}" for name, data in events)
    assert hc.parse_sse(text) == [hc.SSEEvent(name or None, data) for name, data in events]


@pytest.mark.parametrize("api", ["anthropic-messages", "openai-chat", "openai-responses"])
def test_streams_reassemble_to_the_whole_response(api: str) -> None:
    payload = {"model": "m", "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
               "stream_options": {"include_usage": True}}  # fmt: skip
    events, whole = {
        "anthropic-messages": (fake.anthropic_events, fake.anthropic_message),
        "openai-chat": (fake.chat_events, fake.chat_completion),
        "openai-responses": (fake.responses_events, fake.responses_body),
    }[api]
    text = b"".join(events(payload, 3000, 2048)).decode()
    result = hc.reassemble_stream(api, text)  # type: ignore[arg-type]
    assert result.complete and result.error is None
    expected = whole(payload, 3000, 2048)
    if api == "openai-chat":
        expected["choices"][0]["message"]["content"] = expected["choices"][0]["message"]["content"]
        assert result.body["choices"] == expected["choices"]
        assert result.body["usage"] == expected["usage"]
    else:
        assert dict(result.body) == expected
    # cut off half way: what arrived, not complete
    cut = hc.reassemble_stream(api, text[: len(text) // 2])  # type: ignore[arg-type]
    assert not cut.complete


def test_chat_stream_with_tool_calls_and_reasoning() -> None:
    chunks = [
        {"id": "c", "model": "deepseek-reasoner", "choices": [{"index": 0, "delta": {"role": "assistant", "reasoning_content": "Think"}}]},
        {"id": "c", "choices": [{"index": 0, "delta": {"reasoning_content": "ing."}}]},
        {"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "get", "arguments": '{"a"'}}]}}]},
        {"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}, "finish_reason": "tool_calls"}]},
        {"id": "c", "choices": [], "usage": {"prompt_tokens": 10, "prompt_cache_hit_tokens": 8, "prompt_cache_miss_tokens": 2}},
    ]  # fmt: skip
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    body = hc.reassemble_stream("openai-chat", text).body
    message = body["choices"][0]["message"]
    assert message == {"role": "assistant", "content": None, "reasoning_content": "Thinking.",
                       "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get", "arguments": '{"a": 1}'}}]}  # fmt: skip
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert body["usage"]["prompt_cache_hit_tokens"] == 8


def test_anthropic_error_event_and_bad_event_data() -> None:
    text = ('data: {"type":"message_start","message":{"id":"m","content":[],"usage":{"input_tokens":3}}}\n\n'
            'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n')  # fmt: skip
    result = hc.reassemble_stream("anthropic-messages", text)
    assert result.error == {"type": "overloaded_error", "message": "Overloaded"} and not result.complete
    with pytest.raises(hc.HttpCaptureError, match="event 1: data is not JSON"):
        hc.reassemble_stream("openai-chat", "data: {}\n\ndata: {oops\n\n")


def test_decode_body() -> None:
    assert hc.decode_body(gzip.compress(b"abc"), "gzip") == b"abc"
    assert hc.decode_body(b"abc", None) == b"abc"
    with pytest.raises(hc.HttpCaptureError, match="content-encoding: unknown coding 'weird'"):
        hc.decode_body(b"abc", "weird")
    with pytest.raises(hc.HttpCaptureError, match="broken gzip"):
        hc.decode_body(b"not gzip", "gzip")


# ---------------------------------------------------------------------------------------------------
# Responses API


def test_responses_request_conversion_keeps_every_item() -> None:
    body = {
        "model": "gpt-5", "instructions": "Be terse.", "previous_response_id": None, "reasoning": {"effort": "low"},
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Rules."}]},
            {"role": "user", "content": [{"type": "input_text", "text": "Look"}, {"type": "input_image", "image_url": "data:image/png;base64,AA", "detail": "low"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Calling."}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{\"x\":1}"},
            {"type": "function_call_output", "call_id": "c1", "output": "one"},
            {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "two"}]},
        ],
        "tools": [{"type": "function", "name": "f", "parameters": {}, "strict": True}, {"type": "web_search"}],
    }  # fmt: skip
    chat = hc.responses_request_to_chat(body)
    roles = [m["role"] for m in chat["messages"]]
    assert roles == ["system", "developer", "user", "assistant", "assistant", "tool", "tool"]
    assert chat["messages"][2]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,AA", "detail": "low"},
    }
    assert json.loads(chat["messages"][3]["content"])["encrypted_content"] == "gAAA"
    assistant = chat["messages"][4]
    assert assistant["content"] == [{"type": "text", "text": "Calling."}]
    assert [c["id"] for c in assistant["tool_calls"]] == ["c1", "c2"]
    assert chat["messages"][6] == {
        "role": "tool",
        "tool_call_id": "c2",
        "content": [{"type": "text", "text": "two"}],
    }
    assert chat["tools"] == [
        {"type": "function", "function": {"name": "f", "parameters": {}, "strict": True}},
        {"type": "web_search"},
    ]
    assert chat["reasoning"] == {"effort": "low"} and "input" not in chat
    analyze_requests([chat], provider="openai")  # the analyzer reads it


def test_responses_conversion_errors_name_the_field() -> None:
    with pytest.raises(hc.HttpCaptureError, match=r"request.body.input\[1\].role: expected a string"):
        hc.responses_request_to_chat(
            {"input": [{"role": "user", "content": "a"}, {"type": "message", "role": 3}]}
        )
    with pytest.raises(hc.HttpCaptureError, match=r"request.body.input\[0\].name"):
        hc.responses_request_to_chat({"input": [{"type": "function_call", "call_id": "c"}]})
    with pytest.raises(hc.HttpCaptureError, match=r"response.body.output: expected a list"):
        hc.responses_response_to_chat({"output": "x"})


def test_responses_response_with_tool_calls_and_reasoning() -> None:
    chat = hc.responses_response_to_chat({"status": "completed", "output": [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Plan."}]},
        {"type": "function_call", "call_id": "c9", "name": "f", "arguments": "{}"}]})  # fmt: skip
    message = chat["choices"][0]["message"]
    assert message["reasoning_content"] == "Plan." and message["tool_calls"][0]["id"] == "c9"
    assert message["content"] is None


# ---------------------------------------------------------------------------------------------------
# records and URLs


def test_provider_and_api_from_urls() -> None:
    assert hc.provider_from_url("https://api.anthropic.com/v1/messages") == "anthropic"
    assert (
        hc.provider_from_url("https://myres.openai.azure.com/openai/deployments/x/chat/completions")
        == "openai"
    )
    assert hc.provider_from_url("http://localhost:11434/v1/chat/completions") == "ollama"
    assert hc.provider_from_url("https://evil-anthropic.com.example.org/v1") is None
    assert hc.api_from_url("https://api.anthropic.com/v1/messages/count_tokens") is None
    assert hc.api_from_url("https://openrouter.ai/api/v1/chat/completions") == "openai-chat"


def test_exchange_record_of_failures() -> None:
    rec = hc.exchange_record(url="https://api.openai.com/v1/chat/completions", request_body={"messages": []},
                             status=500, response_body=b"<html>bad gateway</html>", content_type="text/html")  # fmt: skip
    assert rec["error"]["kind"] == "undecodable" and "response" not in rec
    with pytest.raises(hc.HttpCaptureError, match=r"request\.body: not JSON"):
        hc.exchange_record(
            url="https://api.openai.com/v1/chat/completions",
            request_body=b"{",
            status=200,
            response_body=None,
        )
    with pytest.raises(hc.HttpCaptureError, match="not an LLM API endpoint"):
        hc.exchange_record(
            url="https://api.openai.com/v1/models?key=s3cret",
            request_body=b"{}",
            status=200,
            response_body=None,
        )


# ---------------------------------------------------------------------------------------------------
# the reader


def test_sniff_tells_captures_from_other_logs() -> None:
    for name in ("claude-trace.jsonl", "openai.har"):
        path = FIXTURES / name
        assert hc.sniff(path, path.read_text(encoding="utf-8")[:65536]), name
    assert not hc.sniff(Path("x.jsonl"), '{"request": {"model": "m", "messages": []}, "response": {}}\n')
    assert not hc.sniff(Path("x.jsonl"), '{"type": "user", "message": {"role": "user"}}\n')
    # a whole file that starts as a HAR and stops before its entries: a truncated HAR (the reader says so)
    assert hc.sniff(Path("x.json"), '{"log": {"version": "1.2"')
    assert not hc.sniff(Path("x.json"), '{"log": {"version": "1.2"}}')  # whole JSON, no entries: not a HAR
    long_line = (
        '{"request": {"timestamp": 1, "method": "POST", "url": "https://a/v1/messages", "body": {"x": "'
        + "y" * 70000
    )
    assert hc.sniff(Path("x.jsonl"), long_line[:65536])  # a first record longer than the head


def test_read_claude_trace_pairs() -> None:
    path = FIXTURES / "claude-trace.jsonl"
    records, problems = read_all(path)
    assert [r.line for r in records] == [1, 3]
    assert {r.session for r in records} == {"7d3a9c1e-2b4f-4e8a-9f61-0c2d8e4b1a77"}
    assert all(r.file == str(path) and r.index == 0 for r in records)
    raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for record, line in zip(records, (0, 2), strict=True):
        assert record.request == raw[line]["request"]["body"]
        sse = hc.reassemble_stream("anthropic-messages", raw[line]["response"]["body_raw"]).body
        u = sse["usage"]
        assert record.usage is not None
        assert (
            record.usage.prompt_tokens
            == u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
        )
        assert record.usage.cached_tokens == u["cache_read_input_tokens"]
        assert (
            record.completion is not None
            and record.completion["tool_calls"][0]["function"]["name"] == "lookup"
        )
        assert record.timestamp == raw[line]["request"]["timestamp"]
    assert [(p.line, p.reason.split(";")[0]) for p in problems] == [
        (
            2,
            "request: POST https://api.anthropic.com/v1/messages/count_tokens?beta=true is not an LLM API call",
        ),
        (4, "response: the call failed (http-status 529)"),
    ]
    result = analyze_requests(records, provider="anthropic")
    assert result.requests.height == 2


def test_read_har() -> None:
    path = FIXTURES / "openai.har"
    records, problems = read_all(path)
    text = path.read_text(encoding="utf-8").split("\n")
    assert [r.line for r in records] == [10, 67, 125]
    assert all(text[r.line - 1].strip() == "{" for r in records if r.line is not None)
    assert {r.session for r in records} == {"support-42"}
    har = json.loads(path.read_text(encoding="utf-8"))["log"]["entries"]
    second = json.loads(base64.b64decode(har[1]["response"]["content"]["text"]))
    assert (
        records[1].usage is not None
        and records[1].usage.cached_tokens == second["usage"]["prompt_tokens_details"]["cached_tokens"]
    )
    assert records[2].request["messages"][0]["role"] == "system"  # the Responses call, converted
    assert records[2].usage is not None and records[2].usage.cached_tokens == 1280
    assert (
        records[0].timestamp is not None
        and records[2].timestamp is not None
        and records[2].timestamp - records[0].timestamp == 9.0
    )
    [problem] = problems
    assert problem.reason.startswith(
        "log.entries[3]: request: GET https://api.openai.com/v1/models is not an LLM API call"
    )
    assert analyze_requests(records, provider="openai").requests.height == 3


def test_read_reports_bad_lines_and_a_torn_last_line(tmp_path: Path) -> None:
    good = (FIXTURES / "claude-trace.jsonl").read_text(encoding="utf-8").splitlines()[0]
    bad_status = json.dumps({"request": {"method": "POST", "url": "https://api.openai.com/v1/chat/completions", "body": {"messages": []}},
                             "response": {"status_code": "200", "body": {}}})  # fmt: skip
    no_url = json.dumps({"request": {"method": "POST"}, "response": None})
    path = tmp_path / "capture.jsonl"
    path.write_text("\n".join([good, bad_status, no_url, good[:100]]), encoding="utf-8")
    records, problems = read_all(path)
    assert len(records) == 1
    assert [(p.line, p.reason) for p in problems] == [
        (2, "response.status_code: expected an integer, got str"),
        (3, "request.url: expected a string, got null"),
        (4, problems[2].reason),
    ]
    assert "torn last line" in problems[2].reason and problems[2].reason.startswith("invalid JSON")


def test_read_a_broken_har(tmp_path: Path) -> None:
    path = tmp_path / "x.har"
    path.write_text('{"log": {"entries": [\n  {"request": {"method": "POST"}}\n]}}', encoding="utf-8")
    _, problems = read_all(path)
    assert [(p.line, p.reason) for p in problems] == [
        (2, "log.entries[0].request.url: expected a string, got null")
    ]
    path.write_text('{"log": {"entries": [', encoding="utf-8")
    _, problems = read_all(path)
    assert problems[0].reason.startswith("invalid JSON")
