"""Tests for promptkit.formats.otel_genai: OTLP JSON documents and JSON Lines of GenAI spans."""

from __future__ import annotations

import doctest
import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from promptkit.formats import otel_genai, read_logs
from promptkit.formats.otel_genai import otlp_attributes
from promptkit.layout import Usage

FIXTURES = Path("fixtures/otel_genai")
DOC = FIXTURES / "semconv-examples.otlp.json"
LINES = FIXTURES / "collector-file-exporter.jsonl"


def attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, int) and not isinstance(value, bool):
        return {"key": key, "value": {"intValue": str(value)}}
    if not isinstance(value, str):
        value = json.dumps(value)
    return {"key": key, "value": {"stringValue": value}}


def export(*spans: dict[str, Any]) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "t"}, "spans": list(spans)}]}
        ]
    }


def chat_span(name: str = "chat gpt-4", **attrs: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4",
        "gen_ai.conversation.id": "c1",
        "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}],
        "gen_ai.usage.input_tokens": 9,
    }
    base.update({k.replace("__", "."): v for k, v in attrs.items()})
    return {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "name": name,
        "startTimeUnixNano": "1760178600000000000",
        "attributes": [attr(k, v) for k, v in base.items() if v is not None],
    }


def test_module_doctests() -> None:
    result = doctest.testmod(otel_genai)
    assert result.failed == 0 and result.attempted > 0


def test_a_tool_call_round_trip_from_the_semconv_examples() -> None:
    result = read_logs(DOC)
    assert result.formats == {"otel-genai": 1} and result.problems == ()
    # invoke_agent and execute_tool spans are not model calls: neither records nor problems
    first, second = result.records
    assert (first.session, first.index, second.index) == ("conv-weather", 0, 1)
    assert first.request["messages"] == [{"role": "user", "content": "Weather in Paris?"}]
    assert second.request["messages"][1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_VSPygqKTWdrhaFErNvMV18Yl",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
            }
        ],
    }
    assert second.request["messages"][2] == {
        "role": "tool",
        "tool_call_id": "call_VSPygqKTWdrhaFErNvMV18Yl",
        "content": "rainy, 57°F",
    }
    tool = second.request["tools"][0]
    assert tool["type"] == "function" and tool["function"]["name"] == "get_current_weather"
    assert tool["function"]["parameters"]["required"] == ["location", "unit"]
    assert (
        first.completion is not None
        and first.completion["tool_calls"][0]["function"]["name"] == "get_weather"
    )
    # input_tokens holds the cached and the written tokens (47 + 50 = 97)
    assert first.usage == Usage(47, 17, None, 47)
    assert second.usage == Usage(97, 52, 47, 50)
    assert (first.provider, first.request["model"], first.line) == ("openai", "gpt-4", None)
    assert first.timestamp is not None and second.timestamp is not None
    assert second.timestamp - first.timestamp == pytest.approx(1.209)


def test_collector_json_lines_system_instructions_and_older_event_conventions() -> None:
    result = read_logs(LINES)
    assert result.problems == () and [r.line for r in result.records] == [1, 2, 3]
    simple, instructed, events = result.records
    assert simple.usage == Usage(52, 47, 20, None)
    assert simple.session == "trace-5b8efff798038103d269b633813fc60c"
    # gen_ai.system_instructions come first, before the input messages' own system message
    assert [m["content"] for m in instructed.request["messages"]] == [
        "You must never tell jokes",
        "You are a helpful bot",
        "Tell me a joke about OpenTelemetry",
    ]
    # semconv <= 1.36: span events carry the messages, gen_ai.system the provider
    assert events.request["messages"] == [
        {"role": "system", "content": "You are a helpful bot"},
        {"role": "user", "content": "Tell me a joke about OpenTelemetry"},
    ]
    assert events.completion == {"role": "assistant", "content": "Why did the span cross the road?"}
    assert events.provider == "openai" and events.request["model"] == "gpt-4o-mini"


def test_gzip_compressed_copies_read_the_same(tmp_path: Path) -> None:
    for original in (DOC, LINES):
        packed = tmp_path / (original.name + ".gz")
        packed.write_bytes(gzip.compress(original.read_bytes()))
        plain, compressed = read_logs(original), read_logs(packed)
        assert [r.request for r in compressed.records] == [r.request for r in plain.records]
        assert [r.usage for r in compressed.records] == [r.usage for r in plain.records]
        assert compressed.formats == {"otel-genai": 1}


def test_malformed_lines_and_attributes_are_problems_naming_file_line_and_field(tmp_path: Path) -> None:
    good = chat_span()
    bad_json = chat_span(gen_ai__input__messages="[{not json")
    bad_count = chat_span()
    bad_count["attributes"].append({"key": "gen_ai.usage.output_tokens", "value": {"intValue": "many"}})
    no_content = chat_span(gen_ai__input__messages=None)
    no_role = chat_span(gen_ai__input__messages=[{"parts": [{"type": "text", "content": "x"}]}])
    tool_span = chat_span(name="execute_tool x", gen_ai__operation__name="execute_tool")
    path = tmp_path / "spans.jsonl"
    lines = [
        export(good, tool_span),
        export(bad_json),
        "{truncated",
        export(bad_count),
        export(no_content),
        export(no_role),
    ]
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    result = read_logs(path)
    assert [r.line for r in result.records] == [1]
    by_line = {p.line: p.reason for p in result.problems}
    assert all(p.file == str(path) for p in result.problems)
    assert sorted(by_line) == [2, 3, 4, 5, 6]
    assert "gen_ai.input.messages: not valid JSON" in by_line[2]
    assert "resourceSpans[0].scopeSpans[0].spans[0]" in by_line[2] and "'chat gpt-4'" in by_line[2]
    assert by_line[3].startswith("invalid JSON")
    assert "gen_ai.usage.output_tokens" in by_line[4] and "intValue" in by_line[4]
    assert "no gen_ai.input.messages" in by_line[5]
    assert "gen_ai.input.messages[0].role" in by_line[6]
    # every chat span is accounted for: one record, five problems; the tool span is neither
    assert len(result.records) + len(result.problems) == 6


def test_content_parts_that_chat_completions_cannot_carry_are_reported_and_the_call_kept(
    tmp_path: Path,
) -> None:
    parts = [
        {"type": "text", "content": "What is in this file?"},
        {"type": "file", "file_id": "provider_fileid_123"},
        {"type": "uri", "modality": "image", "mime_type": "image/png", "uri": "https://example.org/a.png"},
    ]
    span = chat_span(gen_ai__input__messages=[{"role": "user", "parts": parts}])
    path = tmp_path / "one.otlp.json"
    path.write_text(json.dumps(export(span), indent=2))
    result = read_logs(path)
    (record,) = result.records
    assert record.request["messages"][0]["content"] == [
        {"type": "text", "text": "What is in this file?"},
        {"type": "image_url", "image_url": {"url": "https://example.org/a.png"}},
    ]
    (problem,) = result.problems
    assert (
        problem.line is None
        and "gen_ai.input.messages[0].parts[1]" in problem.reason
        and "'file'" in problem.reason
    )


def test_session_falls_back_from_conversation_to_trace_to_file_name(tmp_path: Path) -> None:
    with_conversation = chat_span()
    with_trace = chat_span(gen_ai__conversation__id=None)
    bare = chat_span(gen_ai__conversation__id=None)
    del bare["traceId"]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(json.dumps(export(s)) for s in (with_conversation, with_trace, bare)) + "\n")
    sessions = [r.session for r in read_logs(path).records]
    assert sessions == ["c1", "trace-0af7651916cd43dd8448eb211c80319c", "mixed"]


def test_otlp_values_of_every_type() -> None:
    attrs = otlp_attributes(
        [
            {"key": "s", "value": {"stringValue": "x"}},
            {"key": "i", "value": {"intValue": 3}},
            {"key": "d", "value": {"doubleValue": 0.5}},
            {"key": "b", "value": {"boolValue": True}},
            {"key": "a", "value": {"arrayValue": {"values": [{"stringValue": "stop"}]}}},
            {"key": "k", "value": {"kvlistValue": {"values": [{"key": "n", "value": {"intValue": "1"}}]}}},
        ]
    )
    assert attrs == {"s": "x", "i": 3, "d": 0.5, "b": True, "a": ["stop"], "k": {"n": 1}}


def test_a_folder_of_mixed_formats_sniffs_each_file(tmp_path: Path) -> None:
    shutil.copy(DOC, tmp_path / DOC.name)
    shutil.copy(LINES, tmp_path / LINES.name)
    shutil.copy("fixtures/logs/session-before.jsonl", tmp_path / "session-before.jsonl")
    result = read_logs(tmp_path)
    assert result.formats == {"otel-genai": 2, "promptkit": 1}


def test_openllmetry_flattened_prompt_attributes_and_older_usage_spellings(tmp_path: Path) -> None:
    attrs = {
        "gen_ai.system": "Anthropic",
        "gen_ai.request.model": "claude-3-5-sonnet-20241022",
        "llm.request.type": "chat",
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "You are terse.",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": "List the files.",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "",
        "gen_ai.completion.0.tool_calls.0.id": "toolu_01",
        "gen_ai.completion.0.tool_calls.0.name": "bash",
        "gen_ai.completion.0.tool_calls.0.arguments": '{"command": "ls"}',
        "gen_ai.usage.prompt_tokens": 2100,
        "gen_ai.usage.completion_tokens": 30,
        "gen_ai.usage.cache_read_input_tokens": 2048,
        "gen_ai.usage.cache_creation_input_tokens": 0,
    }
    span = {"traceId": "ab", "name": "anthropic.chat", "attributes": [attr(k, v) for k, v in attrs.items()]}
    path = tmp_path / "openllmetry.jsonl"
    path.write_text(json.dumps(export(span)) + "\n")
    result = read_logs(path)
    assert result.problems == ()
    (record,) = result.records
    assert record.request["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "List the files."},
    ]
    assert record.completion is not None and record.completion["tool_calls"][0]["function"]["name"] == "bash"
    assert record.usage == Usage(2100, 30, 2048, 0)
    assert record.provider == "anthropic"
