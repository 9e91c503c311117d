"""Tests for promptkit.formats: promptkit JSONL, mini-swe-agent trajectories, usage normalization, bad input."""

from __future__ import annotations

import enum
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from promptkit.errors import LogFileError, RecordFormatError
from promptkit.formats import read_logs, records_from_requests
from promptkit.formats.mini_swe_agent import MINI_SWE_AGENT_BASH_TOOL
from promptkit.layout import SLOTS as LAYOUT_SLOTS, LayoutEntry, Usage
from promptkit.providers.registry import normalize_usage

load_log = load_requests = load_trajectory = read_logs

REAL = Path("fixtures/real-logs/deepseek")

BODY = {"model": "m", "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "hi"}]}


def write_jsonl(path: Path, lines: list[Any]) -> Path:
    path.write_text(
        "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8"
    )
    return path


# ---------------------------------------------------------------------------------------------------
# JSONL


def test_bare_bodies_default_session_is_file_name_and_index_counts(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "calls.jsonl", [BODY, BODY, BODY])
    result = load_log(path)
    assert [(r.session, r.index, r.line) for r in result.records] == [
        ("calls", 0, 1),
        ("calls", 1, 2),
        ("calls", 2, 3),
    ]
    assert result.problems == ()
    assert all(r.usage is None and r.completion is None and r.timestamp is None for r in result.records)
    assert result.records[0].file == str(path)


def test_wrapped_call_with_deepseek_usage_completion_layout_and_timestamp(tmp_path: Path) -> None:
    call = {
        "request": BODY,
        "response": {
            "choices": [{"message": {"role": "assistant", "content": "hello", "tool_calls": None}}],
            "usage": {
                "prompt_tokens": 100,
                "completion_tokens": 7,
                "prompt_cache_hit_tokens": 64,
                "prompt_cache_miss_tokens": 36,
            },
        },
        "session": "s1",
        "timestamp": 12.5,
        "layout": [{"slot": "persona", "key": None}, {"slot": "current", "key": None}],
    }
    rec = load_log(write_jsonl(tmp_path / "x.jsonl", [call])).records[0]
    assert rec.session == "s1" and rec.timestamp == 12.5
    assert rec.usage == Usage(100, 7, 64, None)
    assert rec.completion == {"role": "assistant", "content": "hello"}
    assert rec.layout == (LayoutEntry("persona", None), LayoutEntry("current", None))


def test_interleaved_sessions_are_numbered_separately(tmp_path: Path) -> None:
    lines = [{"request": BODY, "session": s} for s in ("a", "b", "a", "b", "a")]
    recs = load_log(write_jsonl(tmp_path / "x.jsonl", lines)).records
    assert [(r.session, r.index) for r in recs] == [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2)]


def test_iso_timestamps_and_numeric_strings(tmp_path: Path) -> None:
    lines = [
        {"request": BODY, "timestamp": "2026-01-02T03:04:05Z"},
        {"request": BODY, "timestamp": "2026-01-02T03:04:05"},  # naive = UTC
        {"request": BODY, "timestamp": "2026-01-02T05:04:05+02:00"},
        {"request": BODY, "timestamp": "17.25"},
    ]
    result = load_log(write_jsonl(tmp_path / "t.jsonl", lines))
    expected = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp()
    # the session is put in time order (ties keep load order), and a note says so
    assert [(r.timestamp, r.line) for r in result.records] == [(17.25, 4), (expected, 1), (expected, 2), (expected, 3)]
    assert [r.index for r in result.records] == [0, 1, 2, 3]
    assert any("not in time order" in n for n in result.notes)


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("{not json", "invalid JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('"text"', "expected a JSON object, got str"),
        (json.dumps({"model": "m"}), "body: missing 'messages'"),
        (json.dumps({"request": {"model": "m"}}), "request: missing 'messages'"),
        (json.dumps({"messages": "hi"}), "body.messages: expected a list, got str"),
        (json.dumps({"messages": [{"content": "x"}]}), "body.messages[0].role: expected a string, got null"),
        (
            json.dumps({"messages": [{"role": 3, "content": "x"}]}),
            "body.messages[0].role: expected a string, got int",
        ),
        (json.dumps({"messages": [{"role": "user", "content": 5}]}), "body.messages[0].content"),
        (json.dumps({"messages": ["x"]}), "body.messages[0]: expected an object, got str"),
        (json.dumps({"messages": [], "tools": {}}), "body.tools: expected a list, got dict"),
        (json.dumps({"request": [1]}), "request: expected an object, got list"),
    ],
)
def test_a_malformed_line_is_a_problem_with_file_line_and_reason(
    tmp_path: Path, line: str, fragment: str
) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [BODY, line, BODY])
    result = load_log(path)
    assert len(result.records) == 2
    assert [r.line for r in result.records] == [1, 3]
    assert len(result.problems) == 1
    problem = result.problems[0]
    assert (problem.file, problem.line) == (str(path), 2)
    assert fragment in problem.reason


@pytest.mark.parametrize(
    ("extra", "field", "fragment"),
    [
        ({"timestamp": "yesterday"}, "timestamp", "neither seconds nor an ISO 8601 time"),
        ({"timestamp": True}, "timestamp", "got bool"),
        ({"timestamp": [1]}, "timestamp", "got list"),
        ({"layout": [{"slot": "persona"}]}, "layout", "1 entries for 2 request messages"),
        (
            {"layout": [{"slot": "persona"}, {"slot": ""}]},
            "layout",
            "layout[1].slot: expected a non-empty string",
        ),
        (
            {"layout": [{"slot": "persona"}, {"slot": 7}]},
            "layout",
            "layout[1].slot: expected a non-empty string",
        ),
        ({"layout": [{"slot": "persona"}, {"key": "k"}]}, "layout", "layout[1]: missing 'slot'"),
        ({"layout": [{"slot": "persona"}, {"slot": "identity", "key": 3}]}, "layout", "layout[1].key"),
        ({"layout": "persona"}, "layout", "expected a list"),
        ({"response": {"usage": {"prompt_tokens": "ten"}}}, "usage", "response.usage.prompt_tokens"),
        ({"response": {"usage": {"prompt_tokens": -1}}}, "usage", "negative token count"),
        ({"response": {"usage": {"prompt_tokens": 1.5}}}, "usage", "whole token count"),
        ({"response": "ok"}, "usage", "response: expected an object"),
        ({"response": {"choices": {}}}, "completion", "response.choices: expected a list"),
        ({"session": ["x"]}, "session", "session: expected a non-empty string"),
    ],
)
def test_a_bad_optional_field_is_reported_and_the_record_kept_without_it(
    tmp_path: Path, extra: dict[str, Any], field: str, fragment: str
) -> None:
    path = write_jsonl(tmp_path / "f.jsonl", [{"request": BODY, **extra}])
    result = load_log(path)
    assert len(result.records) == 1 and len(result.problems) == 1
    assert fragment in result.problems[0].reason
    assert result.problems[0].line == 1
    rec = result.records[0]
    if field == "session":
        assert rec.session == "f"
    elif field == "completion":
        assert rec.completion is None
    else:
        assert getattr(rec, field) is None


def test_blank_lines_are_not_records_nor_problems(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text("\n" + json.dumps(BODY) + "\n   \n\n" + json.dumps(BODY) + "\n", encoding="utf-8")
    result = load_log(path)
    assert [r.line for r in result.records] == [2, 5]
    assert result.problems == ()


def test_unicode_line_separators_inside_strings_and_crlf(tmp_path: Path) -> None:
    body = {"messages": [{"role": "user", "content": "a\u2028b\u0085c\x0cd"}]}
    path = tmp_path / "u.jsonl"
    path.write_text(
        json.dumps(body, ensure_ascii=False) + "\r\n" + json.dumps(BODY) + "\r\n", encoding="utf-8"
    )
    result = load_log(path)
    assert result.problems == ()
    assert [r.line for r in result.records] == [1, 2]
    assert result.records[0].request["messages"][0]["content"] == "a\u2028b\u0085c\x0cd"
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(BODY).encode())
    assert len(load_log(bom).records) == 1


def test_missing_file_unreadable_bytes_and_directory_are_errors_naming_the_path(tmp_path: Path) -> None:
    with pytest.raises(LogFileError, match=r"nope\.jsonl: no such file"):
        load_log(tmp_path / "nope.jsonl")
    bad = tmp_path / "latin.jsonl"
    bad.write_bytes(b'{"messages": []}\n\xff\xfe\n')
    with pytest.raises(LogFileError, match=r"latin\.jsonl: line 2: not UTF-8") as info:
        load_log(bad)
    assert info.value.path == str(bad)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(LogFileError, match="holds no log files"):
        load_requests(empty)
    with pytest.raises(LogFileError, match="no such file or directory"):
        load_requests([tmp_path / "missing"])


def test_anthropic_and_openai_responses_give_completions(tmp_path: Path) -> None:
    anthropic = {
        "request": BODY,
        "response": {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "tu_1", "name": "bash", "input": {"command": "ls"}},
            ],
            "usage": {
                "input_tokens": 10,
                "cache_read_input_tokens": 2000,
                "cache_creation_input_tokens": 5,
                "output_tokens": 9,
            },
        },
    }
    openai = {
        "request": BODY,
        "response": {
            "choices": [{"message": {"content": "hi there"}}],
            "usage": {
                "prompt_tokens": 1300,
                "completion_tokens": 3,
                "prompt_tokens_details": {"cached_tokens": 1280},
            },
        },
    }
    recs = load_log(write_jsonl(tmp_path / "p.jsonl", [anthropic, openai])).records
    assert recs[0].completion == {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [
            {"id": "tu_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
        ],
    }
    assert recs[0].usage == Usage(2015, 9, 2000, 5)
    assert recs[1].completion == {"role": "assistant", "content": "hi there"}
    assert recs[1].usage == Usage(1300, 3, 1280, None)


# ---------------------------------------------------------------------------------------------------
# usage


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (
            {
                "prompt_tokens": 2942,
                "completion_tokens": 71,
                "prompt_cache_hit_tokens": 320,
                "prompt_cache_miss_tokens": 2622,
            },
            Usage(2942, 71, 320, None),
        ),
        ({"prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 36}, Usage(100, None, 64, None)),
        (
            {
                "prompt_tokens": 5000,
                "completion_tokens": 10,
                "prompt_tokens_details": {"cached_tokens": 4096},
            },
            Usage(5000, 10, 4096, None),
        ),
        (
            {
                "prompt_tokens": 5000,
                "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 4096},
            },
            Usage(5000, None, 0, 4096),
        ),
        (
            {"input_tokens": 3000, "output_tokens": 5, "input_tokens_details": {"cached_tokens": 2048}},
            Usage(3000, 5, 2048, None),
        ),
        (
            {
                "input_tokens": 21,
                "cache_read_input_tokens": 188086,
                "cache_creation_input_tokens": 0,
                "output_tokens": 393,
            },
            Usage(188107, 393, 188086, 0),
        ),
        ({"input_tokens": 50, "cache_creation_input_tokens": 4000}, Usage(4050, None, 0, 4000)),
        ({"cache_read_input_tokens": 10}, Usage(None, None, 10, 0)),
        ({"prompt_tokens": 12, "completion_tokens": 3}, Usage(12, 3, None, None)),
        ({}, Usage()),
    ],
)
def test_normalize_usage(usage: dict[str, Any], expected: Usage) -> None:
    assert normalize_usage(usage) == expected


@pytest.mark.parametrize(
    ("usage", "fragment"),
    [
        ({"prompt_tokens": "12"}, "usage.prompt_tokens: expected a token count, got str"),
        (
            {"prompt_cache_hit_tokens": True},
            "usage.prompt_cache_hit_tokens: expected a token count, got bool",
        ),
        ({"prompt_tokens_details": 5}, "usage.prompt_tokens_details: expected an object"),
        ({"prompt_tokens_details": {"cached_tokens": "x"}}, "usage.prompt_tokens_details.cached_tokens"),
        ({"cache_read_input_tokens": -3}, "negative"),
    ],
)
def test_normalize_usage_names_the_bad_field(usage: dict[str, Any], fragment: str) -> None:
    with pytest.raises(RecordFormatError, match=fragment.replace("[", r"\[").replace(".", r"\.")):
        normalize_usage(usage)
    with pytest.raises(RecordFormatError, match="usage: expected an object"):
        normalize_usage([1])  # type: ignore[arg-type]


@given(
    hit=st.integers(0, 10**7),
    miss=st.integers(0, 10**7),
    read=st.integers(0, 10**7),
    create=st.integers(0, 10**7),
    uncached=st.integers(0, 10**7),
)
@settings(max_examples=60, deadline=None)
def test_normalized_prompt_is_the_sum_of_its_parts(
    hit: int, miss: int, read: int, create: int, uncached: int
) -> None:
    ds = normalize_usage({"prompt_cache_hit_tokens": hit, "prompt_cache_miss_tokens": miss})
    assert ds.prompt_tokens == hit + miss and ds.cached_tokens == hit
    an = normalize_usage(
        {"input_tokens": uncached, "cache_read_input_tokens": read, "cache_creation_input_tokens": create}
    )
    assert an.prompt_tokens == uncached + read + create
    assert (an.cached_tokens, an.cache_write_tokens) == (read, create)


# ---------------------------------------------------------------------------------------------------
# trajectories


def _assistant(
    content: str, tool_calls: Any, *, created: int | None = 100, usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "tool_calls": tool_calls,
        "function_call": None,
    }
    response: dict[str, Any] = {}
    if created is not None:
        response["created"] = created
    response["usage"] = usage or {
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "prompt_cache_hit_tokens": 0,
        "prompt_cache_miss_tokens": 10,
    }
    message["extra"] = {"response": response, "timestamp": 7.5}
    return message


def _call(cid: str, command: str) -> dict[str, Any]:
    return {
        "index": 0,
        "id": cid,
        "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"command": command})},
    }


def _trajectory(messages: list[Any], **info: Any) -> dict[str, Any]:
    return {
        "trajectory_format": "mini-swe-agent-1.1",
        "info": {"config": {"model": {"model_name": "deepseek/deepseek-chat"}}, **info},
        "messages": messages,
    }


def write_traj(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_trajectory_calls_are_the_messages_before_each_assistant_message(tmp_path: Path) -> None:
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
        _assistant("look", [_call("c1", "ls")], created=100),
        {"role": "tool", "content": "out1", "tool_call_id": "c1", "extra": {"raw_output": "out1"}},
        _assistant("edit", [_call("c2", "cat x")], created=105),
        {"role": "tool", "content": "out2", "tool_call_id": "c2"},
        {"role": "exit", "content": "diff", "extra": {"exit_status": "Submitted"}},
    ]
    result = load_trajectory(write_traj(tmp_path / "run.traj.json", _trajectory(messages)))
    assert [r.index for r in result.records] == [0, 1]
    first, second = result.records
    assert first.session == "run" and first.timestamp == 100.0 and second.timestamp == 105.0
    assert first.request["model"] == "deepseek-chat"
    assert first.request["tools"] == [MINI_SWE_AGENT_BASH_TOOL]
    assert first.request["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
    ]
    expected_call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "bash", "arguments": '{"command": "ls"}'},
    }
    assert first.completion == {"role": "assistant", "content": "look", "tool_calls": [expected_call]}
    assert second.request["messages"][2:] == [
        {"role": "assistant", "content": "look", "tool_calls": [expected_call]},
        {"role": "tool", "content": "out1", "tool_call_id": "c1"},
    ]
    assert first.usage == Usage(10, 2, 0, None)
    assert [p.reason for p in result.problems] == ["messages[6]: skipped non-chat message (role 'exit')"]
    assert result.problems[0].line is None


def test_tool_calls_stored_as_json_or_python_repr_parse_like_a_list(tmp_path: Path) -> None:
    as_list = [_call("c1", "ls -la")]
    as_json = json.dumps(as_list)
    as_literal = repr(as_list)
    as_objects = (
        '[ChatCompletionMessageToolCall(index=0, function=Function(arguments=\'{"command": "ls -la"}\', '
        "name='bash'), id='c1', type='function')]"
    )
    parsed: list[Any] = []
    for k, stored in enumerate((as_list, as_json, as_literal, as_objects)):
        messages = [{"role": "user", "content": "t"}, _assistant("x", stored)]
        result = load_trajectory(write_traj(tmp_path / f"t{k}.traj.json", _trajectory(messages)))
        assert result.problems == ()
        parsed.append(result.records[0].completion)
    assert all(p == parsed[0] for p in parsed)
    assert parsed[0]["tool_calls"][0]["function"]["arguments"] == '{"command": "ls -la"}'


def test_unparseable_tool_calls_are_reported_and_the_message_kept(tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "t"},
        _assistant("x", "[Call(function=f(), ]"),
        _assistant("y", [{"function": 3}]),
    ]
    result = load_trajectory(write_traj(tmp_path / "bad.traj.json", _trajectory(messages)))
    assert len(result.records) == 2
    assert result.records[0].completion == {"role": "assistant", "content": "x"}
    assert result.records[1].request["messages"][1] == {"role": "assistant", "content": "x"}
    reasons = [p.reason for p in result.problems]
    assert reasons[0].startswith("messages[1].tool_calls: cannot parse tool calls")
    assert reasons[1].startswith("messages[2].tool_calls[0].function: expected an object")


def test_trajectory_with_no_calls_loads_zero_requests_and_a_problem(tmp_path: Path) -> None:
    data = _trajectory(
        [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "exit", "content": "Timeout"},
        ],
        exit_status="Timeout",
        exception_str="Connection timed out",
    )
    result = load_trajectory(write_traj(tmp_path / "r.traj.json", data))
    assert result.records == ()
    assert [p.reason for p in result.problems] == [
        "messages[2]: skipped non-chat message (role 'exit')",
        "trajectory has no model calls (exit status 'Timeout': Connection timed out): zero requests loaded",
    ]


@pytest.mark.parametrize(
    ("content", "fragment", "line"),
    [
        ("{broken", "invalid JSON", 1),
        (json.dumps({"info": {}}), "not a mini-swe-agent trajectory: no 'messages' list", None),
        (json.dumps([1, 2]), "not a mini-swe-agent trajectory", None),
    ],
)
def test_a_malformed_trajectory_is_a_problem(
    tmp_path: Path, content: str, fragment: str, line: int | None
) -> None:
    path = tmp_path / "m.traj.json"
    path.write_text(content, encoding="utf-8")
    result = load_trajectory(path)
    assert result.records == ()
    assert len(result.problems) == 1
    assert fragment in result.problems[0].reason and result.problems[0].line == line


def test_trajectory_message_problems(tmp_path: Path) -> None:
    messages = [
        "not a message",
        {"role": "user", "content": 7},
        {"role": "user", "content": "t"},
        {"role": "assistant", "content": "no extra", "tool_calls": None},
        _assistant("late", None, created=None, usage={"prompt_tokens": "x"}),
    ]
    result = load_trajectory(write_traj(tmp_path / "p.traj.json", _trajectory(messages)))
    reasons = [p.reason for p in result.problems]
    assert reasons[0] == "messages[0]: expected an object, got str; skipped"
    assert reasons[1].startswith("messages[1].content: expected a string")
    assert reasons[2] == "messages[3]: assistant message without extra.response (no usage, no timestamp)"
    assert reasons[3].startswith("messages[4].extra.response.usage.prompt_tokens")
    assert len(result.records) == 2
    assert result.records[0].request["messages"] == [{"role": "user", "content": "t"}]
    assert "tools" not in result.records[0].request  # no tool calls anywhere: no bash tool
    assert result.records[1].timestamp == 7.5  # falls back to extra.timestamp
    assert result.records[1].usage is None


def test_real_deepseek_trajectories() -> None:
    result = load_requests(REAL)
    assert len(result.records) == 74 + 42 + 38
    assert len(result.problems) == 5
    assert sum("no model calls" in p.reason for p in result.problems) == 1
    pvlib = [r for r in result.records if r.session == "deepseek_chat_dev__pvlib__pvlib-python-1072"]
    assert pvlib[1].usage == Usage(2942, 71, 320, None)
    assert pvlib[2].usage is not None and pvlib[2].usage.cached_tokens == 3008
    assert all(r.request["tools"] == [MINI_SWE_AGENT_BASH_TOOL] for r in result.records)
    assert all(len(r.request["messages"]) == 2 * r.index + 2 for r in pvlib)


# ---------------------------------------------------------------------------------------------------
# load_requests


def test_load_requests_walks_directories_and_sniffs_json_files(tmp_path: Path) -> None:
    sub = tmp_path / "deep" / "er"
    sub.mkdir(parents=True)
    write_jsonl(tmp_path / "a.jsonl", [BODY, {"request": BODY, "session": "shared"}])
    (sub / "b.json").write_text(
        json.dumps([{"request": BODY, "session": "shared"}, {"nope": 1}]), encoding="utf-8"
    )
    (sub / "one.json").write_text(json.dumps(BODY), encoding="utf-8")
    write_traj(sub / "t.traj.json", _trajectory([{"role": "user", "content": "u"}, _assistant("x", None)]))
    (tmp_path / "notes.txt").write_text("ignored", encoding="utf-8")
    result = load_requests([tmp_path])
    assert [(r.session, r.index) for r in result.records] == [
        ("a", 0),
        ("shared", 0),
        ("shared", 1),
        ("one", 0),
        ("t", 0),
    ]
    assert [p.reason for p in result.problems] == ["item 1: body: missing 'messages'"]
    assert result.problems[0].file == str(sub / "b.json")
    explicit = load_requests(str(sub / "one.json"))
    assert len(explicit.records) == 1


class _Anchor(enum.Enum):
    IDENTITY = "identity"


class _Entry:
    def __init__(self, slot: Any, key: str | None) -> None:
        self.slot = slot
        self.key = key


def test_records_from_requests_accepts_bodies_and_layout_forms() -> None:
    recs = records_from_requests(
        [
            BODY,
            (BODY, [{"slot": "persona", "key": None}, ("current", None)]),
            (BODY, [LayoutEntry("identity", "card"), _Entry(_Anchor.IDENTITY, "k2")]),
        ],
        session="built",
        timestamps=[1, "2", None],
        completions=[None, {"role": "assistant", "content": "ok"}, None],
    )
    assert [(r.session, r.index, r.timestamp) for r in recs] == [
        ("built", 0, 1.0),
        ("built", 1, 2.0),
        ("built", 2, None),
    ]
    assert recs[0].layout is None
    assert recs[1].layout == (LayoutEntry("persona"), LayoutEntry("current"))
    assert recs[2].layout == (LayoutEntry("identity", "card"), LayoutEntry("identity", "k2"))
    assert recs[1].completion == {"role": "assistant", "content": "ok"}


@pytest.mark.parametrize(
    ("items", "kwargs", "fragment"),
    [
        ([{"model": "m"}], {}, "requests[0]: missing 'messages'"),
        ([(BODY, ["persona"])], {}, "requests[0].layout: 1 entries for 2 request messages"),
        ([(BODY, [3, 4])], {}, "requests[0].layout[0]: expected"),
        ([(BODY, ["persona", None])], {}, "requests[0].layout[1]: expected"),
        ([(BODY, None, None)], {}, "got a 3-tuple"),
        ([BODY], {"timestamps": [1, 2]}, "timestamps: 2 values for 1 requests"),
        ([BODY], {"timestamps": ["soon"]}, "timestamps[0]"),
        ([BODY], {"completions": [{"content": "x"}]}, "completions[0].role"),
    ],
)
def test_records_from_requests_rejects_bad_input(
    items: list[Any], kwargs: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(RecordFormatError) as info:
        records_from_requests(items, **kwargs)
    assert fragment in str(info.value)


# ---------------------------------------------------------------------------------------------------
# properties

_good = st.builds(
    lambda role, text, session: json.dumps(
        {"request": {"messages": [{"role": role, "content": text}]}, "session": session}
    ),
    st.sampled_from(["system", "user", "assistant", "tool"]),
    st.text(max_size=20),
    st.sampled_from(["a", "b"]),
)
_bad = st.one_of(
    st.text(alphabet='{}[]:,"ab1 ', min_size=1, max_size=12).filter(lambda s: s.strip() != ""),
    st.builds(
        lambda v: json.dumps({"messages": v}), st.one_of(st.integers(), st.text(max_size=5), st.none())
    ),
    st.builds(
        lambda v: json.dumps({"request": {"messages": [{"role": v}]}}), st.one_of(st.integers(), st.none())
    ),
)


@given(lines=st.lists(st.one_of(_good, _bad), max_size=25))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_non_blank_line_is_a_record_or_a_problem(tmp_path: Path, lines: list[str]) -> None:
    path = tmp_path / "prop.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = load_log(path)
    non_blank = {i for i, line in enumerate(lines, start=1) if line.strip()}
    record_lines = [r.line for r in result.records]
    problem_lines = [p.line for p in result.problems if p.line is not None]
    assert set(record_lines) | set(problem_lines) == non_blank
    # a file that yields nothing at all is one file-level problem, so it is never silently empty
    file_level = [p for p in result.problems if p.line is None]
    assert len(file_level) == (1 if not non_blank else 0)
    assert not set(record_lines) & set(problem_lines)  # these lines only carry fatal problems
    counts: dict[str, int] = {}
    for r in result.records:
        assert r.index == counts.get(r.session, 0)
        counts[r.session] = r.index + 1


_tool_call = st.fixed_dictionaries(
    {
        "id": st.text(alphabet="abc_123", min_size=1, max_size=8),
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {"name": st.text(alphabet="abcxyz_", min_size=1, max_size=8), "arguments": st.text(max_size=30)}
        ),
    }
)


@given(calls=st.lists(_tool_call, min_size=1, max_size=4), form=st.sampled_from(["list", "json", "repr"]))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_tool_call_storage_forms_round_trip(tmp_path: Path, calls: list[dict[str, Any]], form: str) -> None:
    stored: Any = {"list": calls, "json": json.dumps(calls), "repr": repr(calls)}[form]
    messages = [{"role": "user", "content": "t"}, _assistant("x", stored)]
    result = load_trajectory(write_traj(tmp_path / "p.traj.json", _trajectory(messages)))
    assert result.problems == ()
    assert result.records[0].completion is not None
    assert result.records[0].completion["tool_calls"] == calls


def test_layout_slots_cover_anchors_and_frame_roles() -> None:
    assert set(LAYOUT_SLOTS) == {
        "identity", "knowledge", "context", "turn-context", "turn-hint",
        "persona", "system", "history", "volatile", "focus", "directive", "current", "tool-loop",
    }  # fmt: skip


def test_layout_entries_of_the_assembler_and_unknown_slots_are_accepted(tmp_path: Path) -> None:
    from promptkit.assembly import Anchor, LayoutEntry

    recs = records_from_requests(
        [(BODY, [LayoutEntry("persona", None), LayoutEntry(Anchor.IDENTITY, "rules")])]
    )
    assert recs[0].layout == (LayoutEntry("persona"), LayoutEntry("identity", "rules"))
    line = {
        "request": BODY,
        "layout": [{"slot": "tool-loop", "key": None}, {"slot": "future-slot", "key": "k"}],
    }
    result = load_log(write_jsonl(tmp_path / "l.jsonl", [line]))
    assert result.problems == ()
    assert result.records[0].layout == (LayoutEntry("tool-loop"), LayoutEntry("future-slot", "k"))


def test_every_call_of_a_trajectory_carries_the_provider_of_its_model() -> None:
    """The trajectory reader recognises the provider once per trajectory (one model for all its calls)
    and every record carries it: DeepSeek's runs are deepseek, Gemini's (routed by OpenRouter,
    ``google/...``) gemini; the loader keeps it."""
    from promptkit.formats.mini_swe_agent import trajectory_records

    for path, provider in [
        (REAL / "deepseek_chat_dev__pvlib__pvlib-python-1072.traj.json", "deepseek"),
        (Path("fixtures/real-logs/gemini/django__django-14376.traj.json"), "gemini"),
    ]:
        records = trajectory_records(json.loads(path.read_text(encoding="utf-8")), str(path), path.stem, [])
        assert records and {r.provider for r in records} == {provider}
    loaded = load_requests(Path("fixtures/real-logs")).records
    assert {r.provider for r in loaded} == {"deepseek", "gemini"}
