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
