"""Tests for promptkit.formats.litellm: StandardLoggingPayload JSON Lines."""

from __future__ import annotations

import copy
import doctest
import gzip
import json
from pathlib import Path
from typing import Any

from promptkit.formats import litellm, read_logs
from promptkit.formats.litellm import litellm_usage
from promptkit.layout import Usage

FIXTURE = Path("fixtures/litellm/standard_logging_payload.jsonl")


def payloads() -> list[dict[str, Any]]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


def write(path: Path, items: list[Any]) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in items) + "\n")
    return path


def test_module_doctests() -> None:
    result = doctest.testmod(litellm)
    assert result.failed == 0 and result.attempted > 0


def test_the_fixture_reads_as_provider_calls_with_the_providers_usage() -> None:
    result = read_logs(FIXTURE)
    assert result.formats == {"litellm": 1}
    first, second, other = result.records
    assert [(r.session, r.index, r.line) for r in result.records] == [
        ("agent-run-42", 0, 1),
        ("agent-run-42", 1, 2),
        ("standard_logging_payload", 0, 4),
    ]
    assert first.request == {"model": "claude-sonnet-4-5-20250929", "messages": payloads()[0]["messages"]}
    # LiteLLM's prompt_tokens already include the cache reads and writes
    assert first.usage == Usage(2059, 41, 0, 1920)
    assert second.usage == Usage(2118, 29, 1920, 53)
    assert (second.provider, second.url) == ("anthropic", "https://api.anthropic.com/v1/messages")
    assert second.timestamp == payloads()[1]["startTime"]
    assert second.completion is not None and second.completion["content"].startswith("I can't issue refunds")
    assert (other.provider, other.usage) == ("openai", Usage(19, 9, 0, None))


def test_a_response_cache_hit_is_a_problem_not_a_provider_call() -> None:
    result = read_logs(FIXTURE)
    (problem,) = result.problems
    assert (problem.file, problem.line) == (str(FIXTURE), 3)
    assert "response-cache hit" in problem.reason and "never sent to the provider" in problem.reason
    # four payloads: three provider calls and the one LiteLLM answered itself
    assert len(result.records) + len(result.problems) == len(payloads()) == 4
    assert all(r.meta["litellm_id"] != "chatcmpl-0003" for r in result.records)


def test_the_analysis_counts_only_provider_calls() -> None:
    from promptkit.analysis.api import analyze

    result = analyze(FIXTURE)
    assert result.requests.height == 3
    assert result.requests["reported_cached_tokens"].to_list() == [0, 1920, 0]
    assert any("response-cache hit" in reason for reason in result.problems["reason"].to_list())


def test_sessions_from_metadata_then_shared_trace_ids_then_the_file(tmp_path: Path) -> None:
    items = payloads()
    hinted = copy.deepcopy(items[3])
    hinted["metadata"]["requester_metadata"] = {"session_id": "ticket-7"}
    lone = copy.deepcopy(items[3])
    lone["trace_id"] = "a-trace-seen-once"
    path = write(tmp_path / "calls.jsonl", [items[0], items[1], hinted, lone])
    sessions = [r.session for r in read_logs(path).records]
    assert sessions == ["agent-run-42", "agent-run-42", "ticket-7", "calls"]


def test_failed_calls_and_missing_fields_are_problems_naming_file_line_and_field(tmp_path: Path) -> None:
    good = payloads()[0]
    failed = {**good, "status": "failure", "error_str": "RateLimitError", "response": None}
    no_messages = {**good, "messages": None}
    bad_role = {**good, "messages": [{"content": "no role"}]}
    bad_usage = copy.deepcopy(good)
    bad_usage["response"]["usage"]["completion_tokens"] = "forty"
    path = write(tmp_path / "log.jsonl", [good, failed, "{not json", no_messages, bad_role, bad_usage, ""])
    result = read_logs(path)
    assert [r.line for r in result.records] == [1, 6]
    assert result.records[1].usage is None  # kept without the malformed usage
    reasons = {p.line: p.reason for p in result.problems}
    assert all(p.file == str(path) for p in result.problems)
    assert "status: failed call (RateLimitError)" in reasons[2]
    assert reasons[3].startswith("invalid JSON")
    assert "messages: missing" in reasons[4]
    assert "messages[0].role: expected a string" in reasons[5]
    assert "response.usage.completion_tokens" in reasons[6]
    # six payload lines: two calls kept (line 6 without its usage), four lines that are no call
    assert sorted(reasons) == [2, 3, 4, 5, 6] and len(result.problems) == 5


def test_usage_falls_back_to_the_usage_object_then_to_the_top_level_counts(tmp_path: Path) -> None:
    from_metadata = copy.deepcopy(payloads()[1])
    from_metadata["response"] = None
    top_level = copy.deepcopy(from_metadata)
    top_level["metadata"]["usage_object"] = None
    path = write(tmp_path / "fallbacks.jsonl", [from_metadata, top_level])
    a, b = read_logs(path).records
    assert a.usage == Usage(2118, 29, 1920, 53) and a.completion is None
    assert b.usage == Usage(2118, 29, None, None)


def test_a_json_file_of_one_payload_and_a_gzip_copy(tmp_path: Path) -> None:
    one = tmp_path / "payload.json"
    one.write_text(json.dumps(payloads()[1], indent=2))
    (record,) = read_logs(one).records
    assert record.line is None and record.usage == Usage(2118, 29, 1920, 53)
    packed = tmp_path / "standard_logging_payload.jsonl.gz"
    packed.write_bytes(gzip.compress(FIXTURE.read_bytes()))
    compressed = read_logs(packed)
    assert compressed.formats == {"litellm": 1}
    assert [r.usage for r in compressed.records] == [r.usage for r in read_logs(FIXTURE).records]
    assert len(compressed.problems) == 1


def test_litellm_usage_shapes() -> None:
    deepseek = {
        "prompt_tokens": 100,
        "completion_tokens": 5,
        "prompt_cache_hit_tokens": 64,
        "prompt_cache_miss_tokens": 36,
    }
    assert litellm_usage(deepseek) == Usage(100, 5, 64, None)
    one_hour = {
        "prompt_tokens": 3000,
        "completion_tokens": 1,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 2900,
        "cache_creation_token_details": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 2900},
    }
    assert litellm_usage(one_hour) == Usage(3000, 1, 0, 2900, 2900)
    # an Anthropic usage object passed through unchanged (no prompt_tokens) keeps Anthropic's arithmetic
    raw = {
        "input_tokens": 10,
        "cache_read_input_tokens": 90,
        "cache_creation_input_tokens": 0,
        "output_tokens": 2,
    }
    assert litellm_usage(raw) == Usage(100, 2, 90, 0)
