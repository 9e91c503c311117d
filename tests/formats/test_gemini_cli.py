"""Gemini CLI chat recordings: both layouts, re-appended messages, rewinds, bad fields counted."""

from __future__ import annotations

import json
from pathlib import Path

from promptkit.formats import read_logs
from promptkit.formats.base import Source, sniff_format

FIXTURE = Path("fixtures/gemini-cli/session-2026-04-01T11-11-5cdd2021.jsonl")
META = {"sessionId": "s-1", "projectHash": "abc", "startTime": "2026-04-01T10:00:00Z"}


def _user(mid: str, text: str) -> dict[str, object]:
    return {"id": mid, "timestamp": "2026-04-01T10:00:00Z", "type": "user", "content": text}


def _model(mid: str, text: str, tokens: dict[str, int] | None = None, **extra: object) -> dict[str, object]:
    msg: dict[str, object] = {
        "id": mid,
        "timestamp": "2026-04-01T10:00:05Z",
        "type": "gemini",
        "content": text,
        "model": "gemini-2.5-pro",
    }
    if tokens is not None:
        msg["tokens"] = tokens
    msg.update(extra)
    return msg


def _jsonl(tmp_path: Path, *lines: object) -> Path:
    path = tmp_path / "session-x.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_the_fixture_gives_one_call_per_model_message() -> None:
    r = read_logs(FIXTURE)
    assert r.problems == ()
    assert [rec.request["model"] for rec in r.records] == ["gemini-3-flash-preview"] * 3
    first, second, third = r.records
    # the first model message was written twice (tokens and tool results came later): one call
    assert first.request["messages"] == [{"role": "user", "content": "create 2 hello world files"}]
    assert (first.usage.prompt_tokens, first.usage.cached_tokens, first.usage.completion_tokens) == (
        6907,
        4062,
        329,
    )
    roles = [m["role"] for m in second.request["messages"]]
    assert roles == ["user", "assistant", "tool", "tool"]
    call = second.request["messages"][1]["tool_calls"][0]
    assert (
        call["function"]["name"] == "write_file"
        and json.loads(call["function"]["arguments"])["file_path"] == "hello.txt"
    )
    assert "not found" in second.request["messages"][2]["content"]
    # the info message between the second and third calls is shown to the user, never sent
    assert [m["role"] for m in third.request["messages"]] == [*roles, "assistant", "tool"]
    assert all(rec.meta["opaque_head_key"].startswith("gemini-cli:5cdd2021") for rec in r.records)
    assert r.records[0].meta["opaque_head_tokens"] > 0  # the system instruction and tools are not recorded


def test_the_format_is_sniffed_and_the_provider_recognised(tmp_path: Path) -> None:
    assert sniff_format(Source.open(FIXTURE)).name == "gemini-cli"
    from promptkit.providers.registry import infer_record_provider

    assert {infer_record_provider(rec) for rec in read_logs(FIXTURE).records} == {"gemini"}


def test_the_json_layout_of_older_versions(tmp_path: Path) -> None:
    doc = {
        **META,
        "messages": [
            _user("u1", "hi"),
            _model("g1", "hello", {"input": 3000, "cached": 0, "output": 5}),
            _user("u2", "more"),
            _model("g2", "ok", {"input": 3100, "cached": 2048, "output": 2}),
        ],
    }
    path = tmp_path / "session-2025.json"
    path.write_text(json.dumps(doc, indent=2))
    r = read_logs(path)
    assert [len(rec.request["messages"]) for rec in r.records] == [1, 3]
    assert r.records[1].usage.cached_tokens == 2048 and r.records[1].session == "s-1"


def test_a_rewind_starts_later_calls_from_the_shorter_history(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path,
        META,
        _user("u1", "first question"),
        _model("g1", "first answer", {"input": 100, "cached": 0, "output": 3}),
        _user("u2", "a question taken back"),
        _model("g2", "an answer taken back", {"input": 120, "cached": 0, "output": 3}),
        {"$rewindTo": "u2"},
        _user("u3", "another question"),
        _model("g3", "another answer", {"input": 110, "cached": 90, "output": 3}),
    )
    r = read_logs(path)
    assert len(r.records) == 3  # the rewound call was made (and billed): it stays
    contents = [m["content"] for m in r.records[2].request["messages"]]
    assert contents == ["first question", "first answer", "another question"]


def test_bad_fields_are_counted_problems_naming_line_and_field(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path,
        META,
        _user("u1", "q"),
        _model("g1", "a", {"input": 100, "cached": 150, "output": 3}),
        "not an object",
    )
    path.write_text(path.read_text() + "{broken\n")
    r = read_logs(path)
    assert len(r.records) == 1 and r.records[0].usage is None
    reasons = {(p.line, p.reason) for p in r.problems}
    assert any(line == 3 and "tokens.cached" in why and "exceed" in why for line, why in reasons)
    assert any(line == 4 and "expected an object" in why for line, why in reasons)
    assert any(line == 5 and "invalid JSON" in why for line, why in reasons)


def test_a_function_response_that_is_not_an_object_is_a_problem_naming_the_part(tmp_path: Path) -> None:
    # found by the loader fuzz: {"functionResponse": null} used to raise AttributeError
    bad = {**_user("u1", "q"), "content": [{"functionResponse": None}]}
    path = _jsonl(tmp_path, META, bad, _model("g1", "a"))
    r = read_logs(path)
    assert any("content[0].functionResponse: expected an object, got null" in p.reason for p in r.problems), [
        p.reason for p in r.problems
    ]


def test_line_numbers_count_newlines_only(tmp_path: Path) -> None:
    # a JSON string may hold U+2028 raw; the broken line after it is still line 4 (found by the fuzz)
    user = json.dumps({**_user("u1", "a\u2028b")}, ensure_ascii=False)
    path = tmp_path / "session-y.jsonl"
    path.write_text(
        json.dumps(META) + "\n" + user + "\n" + json.dumps(_model("g1", "a")) + "\n{broken\n",
        encoding="utf-8",
    )
    r = read_logs(path)
    assert len(r.records) == 1
    assert [p.line for p in r.problems] == [4]


# Real recordings (fixtures/README.md): the figures below were read from the files by hand.
POMODORO = Path("fixtures/gemini-cli-real/gemini-cli-pomodoro-timer.json")  # CLI 0.10, gemini-2.5-pro
CONTROL_FLASH = Path("fixtures/gemini-cli-real/control_flash.json")  # CLI 0.3x, gemini-3-flash-preview


def test_a_real_recording_gives_one_call_per_model_message_with_its_tokens() -> None:
    r = read_logs(POMODORO)
    assert len(r.records) == 14  # 14 messages of type "gemini"
    second, last = r.records[1], r.records[-1]
    # message 210f3488: input 7269, cached 5811, output 46, thoughts 58 (total 7373)
    assert (second.usage.prompt_tokens, second.usage.cached_tokens, second.usage.completion_tokens) == (
        7269,
        5811,
        104,
    )
    # the last model message: input 12707, cached 8840, output 35, thoughts 63
    assert (last.usage.prompt_tokens, last.usage.cached_tokens, last.usage.completion_tokens) == (
        12707,
        8840,
        98,
    )
    with_usage = [rec.usage for rec in r.records if rec.usage is not None]
    assert sum(u.prompt_tokens or 0 for u in with_usage) == 120730  # the 14 inputs, the first being 0
    assert sum(u.cached_tokens or 0 for u in with_usage) == 86702
    assert second.line == 114 and second.file.endswith("gemini-cli-pomodoro-timer.json")
    # the first call wrote three files: its three write_file results are sent with the second call
    assert [m["role"] for m in second.request["messages"]] == ["user", "assistant", "tool", "tool", "tool"]


def test_all_zero_tokens_are_a_counted_problem_not_a_zero_prompt() -> None:
    r = read_logs(POMODORO)
    # message e5679916 (line 13) records input, output, cached, thoughts, tool and total all 0
    (problem,) = r.problems
    assert problem.line == 13 and "tokens.input" in problem.reason and "not recorded" in problem.reason
    assert r.records[0].usage is None
    # so the opaque head is estimated from the first call that has usage, not from a 0-token prompt
    assert all(rec.meta["opaque_head_tokens"] > 0 for rec in r.records)


def test_a_real_recording_with_failed_requests_and_info_messages() -> None:
    r = read_logs(CONTROL_FLASH)
    assert r.problems == ()
    assert len(r.records) == 45 and {rec.request["model"] for rec in r.records} == {"gemini-3-flash-preview"}
    first, last = r.records[0], r.records[-1]
    assert (first.usage.prompt_tokens, first.usage.cached_tokens, first.usage.completion_tokens) == (
        8759,
        0,
        92,
    )
    assert (last.usage.prompt_tokens, last.usage.cached_tokens) == (57418, 54370)
    # three "hello"s failed (an error message each, "Requested entity was not found") before a model
    # was found: the CLI keeps a prompt in the history before the request is made (geminiChat.ts
    # sendMessageStream), so all four are in the first call; info and error messages are never sent
    assert first.request["messages"] == [{"role": "user", "content": "hello"}] * 4
    assert sum(rec.usage.prompt_tokens or 0 for rec in r.records) == 1735904


def test_a_total_that_is_not_the_sum_of_its_parts_is_counted(tmp_path: Path) -> None:
    tokens = {"input": 3000, "cached": 0, "output": 5, "thoughts": 10, "tool": 0, "total": 3015}
    doc = {**META, "messages": [_user("u1", "hi"), _model("g1", "a", tokens)]}
    path = tmp_path / "session-ok.json"
    path.write_text(json.dumps(doc, indent=2))
    assert read_logs(path).problems == ()
    doc["messages"][1]["tokens"] = {**tokens, "total": 3016}  # type: ignore[index]
    path.write_text(json.dumps(doc, indent=2))
    r = read_logs(path)
    (problem,) = r.problems
    assert problem.line == 12 and "tokens.total: 3016" in problem.reason  # where message g1 starts
    assert r.records[0].usage is None
