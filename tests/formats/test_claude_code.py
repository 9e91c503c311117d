"""promptkit.formats.claude_code: Claude Code transcripts read as Claude Code writes them."""

from __future__ import annotations

import gzip
import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from promptkit.analysis import analyze
from promptkit.formats import get_format, read_logs, sniff_format
from promptkit.formats.base import Source
from promptkit.formats.opaque_head import visible_prompt_tokens
from promptkit.layout import RequestRecord

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "fixtures" / "claude-code" / "-home-USER-projects-spotter-worktrees-spotter-dov"
SESSION = "4d5611e5-241a-462a-8d15-5122611a9569"
MAIN = PROJECT / f"{SESSION}.jsonl"
AGENT = PROJECT / SESSION / "subagents" / "agent-a2898e3.jsonl"


def raw_calls(*paths: Path) -> dict[str, dict[str, Any]]:
    """Independently of promptkit: the last usage of each assistant message id, from the raw JSON."""
    calls: dict[str, dict[str, Any]] = {}
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            if event.get("type") != "assistant" or event["message"].get("model") == "<synthetic>":
                continue
            key = event["message"].get("id") or event.get("requestId")
            calls[key] = event["message"]["usage"]
    return calls


def by_session(records: tuple[RequestRecord, ...]) -> dict[str, list[RequestRecord]]:
    out: dict[str, list[RequestRecord]] = {}
    for r in records:
        out.setdefault(r.session, []).append(r)
    return out


# ---------------------------------------------------------------------------------------------------
# the public transcript: counts equal the transcript's own usage fields


def test_request_count_and_cache_figures_equal_the_transcripts_own_usage() -> None:
    raw = raw_calls(MAIN, AGENT)
    result = read_logs(PROJECT)
    assert result.problems == ()
    assert result.formats == {"claude-code": 2}
    lines = sum(
        1 for p in (MAIN, AGENT) for line in p.read_text().splitlines() if '"type":"assistant"' in line
    )
    assert lines > len(raw)  # the streamed duplicates are there ...
    assert len(result.records) == len(raw)  # ... and merged into one request per message id
    usages = [r.usage for r in result.records]
    assert all(u is not None for u in usages)
    assert sum(u.cached_tokens or 0 for u in usages if u) == sum(
        u["cache_read_input_tokens"] for u in raw.values()
    )
    assert sum(u.cache_write_tokens or 0 for u in usages if u) == sum(
        u["cache_creation_input_tokens"] for u in raw.values()
    )
    assert sum(u.cache_write_1h_tokens or 0 for u in usages if u) == sum(
        u["cache_creation"]["ephemeral_1h_input_tokens"] for u in raw.values()
    )
    assert sum(u.prompt_tokens or 0 for u in usages if u) == sum(
        u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
        for u in raw.values()
    )


def test_main_thread_and_subagent_are_sessions_of_their_own() -> None:
    sessions = by_session(read_logs(PROJECT).records)
    assert sorted(sessions) == [SESSION, f"{SESSION}/agent-a2898e3"]
    assert [r.index for r in sessions[SESSION]] == [0, 1]
    assert {r.provider for r in read_logs(PROJECT).records} == {"anthropic"}
    assert {r.request["model"] for r in sessions[SESSION]} == {"claude-opus-4-6"}
    assert {r.request["model"] for r in sessions[f"{SESSION}/agent-a2898e3"]} == {
        "claude-sonnet-4-5-20250929"
    }


def test_one_file_reads_alone() -> None:
    result = read_logs(MAIN)
    assert [r.session for r in result.records] == [SESSION, SESSION]
    assert [r.line for r in result.records] == [8, 26]


def test_streamed_lines_merge_in_order_with_the_usage_of_the_last() -> None:
    first = by_session(read_logs(MAIN).records)[SESSION][0]
    assert first.meta["claude_code_lines"] == [8, 9, 10, 15]
    assert first.meta["request_id"] == "req_011CY4TRHLYkp2wmETF8ujUf"
    assert first.completion is not None
    assert first.completion["content"] == "\n\n"  # text kept, thinking left out
    assert [c["function"]["arguments"] for c in first.completion["tool_calls"]] == [
        json.dumps({"command": "bd show spotter-dov", "description": "Show spotter-dov issue details"}),
        json.dumps({"command": "bd ready", "description": "Find ready subtasks"}),
    ]
    assert first.timestamp == pytest.approx(1770912147.718)


def test_request_is_the_thread_before_the_call_with_parallel_tool_results() -> None:
    second = by_session(read_logs(MAIN).records)[SESSION][1]
    messages = second.request["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
    assert messages[0]["content"].startswith("Work on bead spotter-dov.")
    # the first result hangs off its own tool_use line, not the parentUuid chain of the call: it is found
    assert [m["tool_call_id"] for m in messages[2:]] == [
        "toolu_01UwLnYYWGBvukzh1QE6JpfM",
        "toolu_01EqSqHoE2fyTCuK5BJ3azkA",
    ]
    assert messages[2]["content"].startswith("○ spotter-dov [EPIC]")
    assert [c["id"] for c in messages[1]["tool_calls"]] == [m["tool_call_id"] for m in messages[2:]]
    assert messages[-1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in m for m in messages[:-1])


# ---------------------------------------------------------------------------------------------------
# the opaque head


def test_opaque_head_is_reported_prompt_minus_the_visible_count_of_the_first_call() -> None:
    for session, records in by_session(read_logs(PROJECT).records).items():
        first = records[0]
        assert first.usage is not None and first.usage.prompt_tokens is not None
        n = first.meta["opaque_head_tokens"]
        assert n == first.usage.prompt_tokens - visible_prompt_tokens(first)
        assert n > 10_000  # Claude Code's system prompt and tools
        assert {r.meta["opaque_head_key"] for r in records} == {
            f"claude-code:{session}:{first.request['model']}"
        }
        assert {r.meta["opaque_head_tokens"] for r in records} == {n}


def test_analysis_puts_the_opaque_head_in_front() -> None:
    result = analyze(PROJECT)
    rows = {(r["session"], r["index"]): r for r in result.requests.iter_rows(named=True)}
    main0, main1 = rows[(SESSION, 0)], rows[(SESSION, 1)]
    assert main0["prompt_tokens"] == main0["reported_prompt_tokens"] == 26450
    # the second call reads the first call's prompt from the cache, placeholder head included
    assert main1["predicted_cached_tokens"] == main1["reported_cached_tokens"] == 26447
    head = result.composition.filter(result.composition["slot"] == "opaque-head")
    assert head.height == 3
    assert set(head["start"].to_list()) == {0}
    assert result.problems.height == 0


# ---------------------------------------------------------------------------------------------------
# bad input, compression, sniffing


def test_bad_lines_are_problems_naming_file_line_and_field(tmp_path: Path) -> None:
    lines = MAIN.read_text(encoding="utf-8").splitlines()
    broken = json.loads(lines[25])  # line 26: the second call
    del broken["message"]
    no_type = json.loads(lines[2])
    del no_type["type"]
    lines[2] = json.dumps(no_type)
    lines[25] = json.dumps(broken)
    lines[16] = lines[16][:40]  # line 17 cut short
    path = tmp_path / f"{SESSION}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = read_logs(path)
    reasons = {(p.line, p.reason.split(";")[0]) for p in result.problems}
    assert (3, "missing 'type'") in reasons
    assert (26, "assistant event: missing 'message'") in reasons
    assert any(line == 17 and reason.startswith("invalid JSON") for line, reason in reasons)
    assert {p.file for p in result.problems} == {str(path)}
    assert [r.line for r in result.records] == [8]  # the other call is still read


def test_bad_usage_keeps_the_call_and_names_the_field(tmp_path: Path) -> None:
    text = AGENT.read_text(encoding="utf-8").replace(
        '"cache_creation_input_tokens":13522', '"cache_creation_input_tokens":"many"'
    )
    path = tmp_path / "agent-a2898e3.jsonl"
    path.write_text(text, encoding="utf-8")
    result = read_logs(path)
    assert len(result.records) == 1 and result.records[0].usage is None
    [problem] = result.problems
    assert problem.line == 3
    assert "message.usage.cache_creation_input_tokens" in problem.reason


def test_gzip_copies_read_transparently(tmp_path: Path) -> None:
    target = tmp_path / "project"
    shutil.copytree(PROJECT, target)
    for path in list(target.rglob("*.jsonl")):
        path.with_name(path.name + ".gz").write_bytes(gzip.compress(path.read_bytes()))
        path.unlink()
    plain, packed = read_logs(PROJECT), read_logs(target)
    assert packed.formats == {"claude-code": 2}
    assert [(r.session, r.usage, r.request["messages"]) for r in packed.records] == [
        (r.session, r.usage, r.request["messages"]) for r in plain.records
    ]


def test_sniffing_tells_transcripts_from_other_jsonl(tmp_path: Path) -> None:
    assert sniff_format(Source.open(MAIN)).name == "claude-code"
    assert sniff_format(Source.open(AGENT)).name == "claude-code"
    other = tmp_path / "calls.jsonl"
    other.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}], "sessionId": "x"}) + "\n")
    assert not get_format("claude-code").sniff(Source.open(other))


# ---------------------------------------------------------------------------------------------------
# shapes the public slice does not hold: compaction, in-file sidechains, synthetic messages


def _event(kind: str, uuid: str, parent: str | None, content: Any, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message |= {"id": f"msg_{uuid}", "model": extra.pop("model", "claude-sonnet-4-5"),
                    "usage": {"input_tokens": 5, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
                              "output_tokens": 1}}  # fmt: skip
    return {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s1", "isSidechain": False,
            "timestamp": "2026-02-12T16:00:00Z", "message": message, **extra}  # fmt: skip


def write_events(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    return path


def test_compaction_starts_a_new_context_and_synthetic_messages_are_no_calls(tmp_path: Path) -> None:
    events = [
        _event("user", "u1", None, "first question"),
        _event("assistant", "a1", "u1", [{"type": "text", "text": "first answer"}]),
        {
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": "c1",
            "parentUuid": None,
            "sessionId": "s1",
            "logicalParentUuid": "a1",
            "timestamp": "2026-02-12T16:01:00Z",
        },
        _event("user", "u2", "c1", "This session is being continued. Summary: ...", isCompactSummary=True),
        _event("assistant", "x1", "u2", [{"type": "text", "text": "API Error"}], model="<synthetic>"),
        _event("user", "u3", "x1", "go on"),
        _event("assistant", "a2", "u3", [{"type": "text", "text": "ok"}]),
    ]
    path = tmp_path / "s1.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    result = read_logs(path)
    assert result.problems == ()
    assert [r.line for r in result.records] == [2, 7]
    after = result.records[1].request["messages"]
    assert [m["content"] for m in after] == ["This session is being continued. Summary: ...go on"]


def test_in_file_sidechains_are_sessions_of_their_own(tmp_path: Path) -> None:
    side = {"isSidechain": True}
    events = [
        _event("user", "u1", None, "main question"),
        _event("user", "s1u", None, "sub task", **side),
        _event("assistant", "s1a", "s1u", [{"type": "text", "text": "sub answer"}], **side),
        _event("assistant", "a1", "u1", [{"type": "text", "text": "main answer"}]),
    ]
    path = tmp_path / "s1.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    records = read_logs(path).records
    assert sorted(r.session for r in records) == ["s1", "s1/sidechain-s1u"]
    assert {r.session: r.request["messages"][0]["content"] for r in records} == {
        "s1": "main question",
        "s1/sidechain-s1u": "sub task",
    }


def test_a_missing_parent_is_one_problem_and_the_calls_are_kept(tmp_path: Path) -> None:
    events = [
        _event("user", "u2", "gone", "resumed"),
        _event("assistant", "a2", "u2", [{"type": "text", "text": "ok"}]),
    ]
    path = tmp_path / "s1.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    result = read_logs(path)
    assert len(result.records) == 1
    [problem] = result.problems
    assert problem.line == 2 and "parentUuid 'gone' is not in this file" in problem.reason


def test_a_rewound_branch_leaves_the_abandoned_turns_out(tmp_path: Path) -> None:
    events = [
        _event("user", "u1", None, "one"),
        _event("assistant", "a1", "u1", [{"type": "text", "text": "A1"}]),
        _event("user", "u2", "a1", "two"),
        _event("assistant", "a2", "u2", [{"type": "text", "text": "A2"}]),
        _event("user", "u2b", "a1", "two, edited"),  # the user rewound to a1 and wrote again
        _event("assistant", "a3", "u2b", [{"type": "text", "text": "A3"}]),
    ]
    path = write_events(tmp_path / "s1.jsonl", events)
    contents = [[m["content"] for m in r.request["messages"]] for r in read_logs(path).records]
    assert contents == [["one"], ["one", "A1", "two"], ["one", "A1", "two, edited"]]


def test_every_call_extends_the_one_before_in_a_long_tool_loop(tmp_path: Path) -> None:
    events = [_event("user", "u0", None, "start")]
    for i in range(300):
        parent = events[-1]["uuid"]
        call = _event("assistant", f"a{i}", parent, [{"type": "text", "text": f"step {i}"}])
        use = _event(
            "assistant", f"b{i}", f"a{i}", [{"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {}}]
        )
        use["message"]["id"] = call["message"]["id"]  # the same call, streamed as two lines
        result = _event(
            "user", f"r{i}", f"b{i}", [{"type": "tool_result", "tool_use_id": f"t{i}", "content": str(i)}]
        )
        events += [call, use, result]
    records = read_logs(write_events(tmp_path / "s1.jsonl", events)).records
    assert len(records) == 300
    for before, after in itertools.pairwise(records):
        grown = after.request["messages"]
        assert [{k: v for k, v in m.items() if k != "cache_control"} for m in grown[:-2]] == [
            {k: v for k, v in m.items() if k != "cache_control"} for m in before.request["messages"]
        ]
        assert [m["role"] for m in grown[-2:]] == ["assistant", "tool"]
        assert grown[-2]["tool_calls"][0]["id"] == grown[-1]["tool_call_id"]


def _with_writes(event: dict[str, Any], five_minutes: int, one_hour: int) -> dict[str, Any]:
    usage = event["message"]["usage"]
    usage["cache_creation_input_tokens"] = five_minutes + one_hour
    usage["cache_creation"] = {
        "ephemeral_5m_input_tokens": five_minutes,
        "ephemeral_1h_input_tokens": one_hour,
    }
    return event


@pytest.mark.parametrize(
    ("writes", "ttl"),
    [
        ([(0, 100), (10, 0)], "1h"),  # most written tokens were 1-hour writes
        ([(50, 50)], None),  # exactly half: not most
        ([(30, 20), (0, 10)], None),  # exactly half over the session
        ([(30, 20), (0, 11)], "1h"),  # one token past half
        ([(100, 0)], None),
    ],
)
def test_the_breakpoint_is_1_hour_when_most_of_the_sessions_writes_were(
    tmp_path: Path, writes: list[tuple[int, int]], ttl: str | None
) -> None:
    events = [_event("user", "u0", None, "start")]
    for i, (five, hour) in enumerate(writes):
        events.append(_with_writes(_event("assistant", f"a{i}", events[-1]["uuid"], "ok"), five, hour))
        events.append(_event("user", f"u{i + 1}", f"a{i}", f"next {i}"))
    records = read_logs(write_events(tmp_path / "s1.jsonl", events)).records
    assert len(records) == len(writes)
    expected = {"type": "ephemeral"} if ttl is None else {"type": "ephemeral", "ttl": ttl}
    assert [r.request["messages"][-1]["cache_control"] for r in records] == [expected] * len(writes)


def test_a_parallel_tool_result_written_after_the_next_call_is_not_in_its_request(tmp_path: Path) -> None:
    # one call with two parallel tool_use lines; each result hangs off its own tool_use line. The next
    # call follows the second result, and the first result is written only after that call's line:
    # Claude Code had not sent it, so the call's request holds the second result only
    use = [
        _event("assistant", "a1", "u0", [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]),
        _event("assistant", "a2", "a1", [{"type": "tool_use", "id": "t2", "name": "Read", "input": {}}]),
    ]
    use[1]["message"]["id"] = use[0]["message"]["id"]
    result = [
        _event("user", "r1", "a1", [{"type": "tool_result", "tool_use_id": "t1", "content": "one"}]),
        _event("user", "r2", "a2", [{"type": "tool_result", "tool_use_id": "t2", "content": "two"}]),
    ]
    later = _event("assistant", "b1", "r2", [{"type": "text", "text": "next"}])
    events = [_event("user", "u0", None, "start"), *use, result[1], later, result[0]]
    records = read_logs(write_events(tmp_path / "s1.jsonl", events)).records
    assert [r.line for r in records] == [2, 5]
    messages = records[1].request["messages"]
    assert [(m["role"], m.get("tool_call_id")) for m in messages] == [
        ("user", None),
        ("assistant", None),
        ("tool", "t2"),
    ]
    # written before the call's line, the same result is part of its request
    events = [_event("user", "u0", None, "start"), *use, result[0], result[1], later]
    records = read_logs(write_events(tmp_path / "s2.jsonl", events)).records
    assert [m.get("tool_call_id") for m in records[1].request["messages"]] == [None, None, "t1", "t2"]


def test_a_compact_boundary_with_a_parent_still_starts_a_new_context(tmp_path: Path) -> None:
    # some Claude Code versions chain the boundary to the last event before it (parentUuid not null):
    # the conversation before it is still not part of the requests after it
    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "uuid": "c1",
        "parentUuid": "a1",
        "sessionId": "s1",
        "logicalParentUuid": "a1",
        "timestamp": "2026-02-12T16:01:00Z",
    }
    events = [
        _event("user", "u1", None, "first question"),
        _event("assistant", "a1", "u1", [{"type": "text", "text": "first answer"}]),
        boundary,
        _event("user", "u2", "c1", "Summary: ...", isCompactSummary=True),
        _event("assistant", "a2", "u2", [{"type": "text", "text": "ok"}]),
    ]
    result = read_logs(write_events(tmp_path / "s1.jsonl", events))
    assert result.problems == ()
    assert [[m["content"] for m in r.request["messages"]] for r in result.records] == [
        ["first question"],
        ["Summary: ..."],
    ]


@pytest.mark.parametrize("shape", ["two events", "self"])
def test_a_parent_uuid_cycle_is_a_problem_and_the_calls_are_kept(tmp_path: Path, shape: str) -> None:
    """A chain that loops (u1 -> a0 -> u1) has no root: accepted in silence before, now named."""
    if shape == "two events":
        events = [
            _event("user", "u1", "a0", "question"),
            _event("assistant", "a0", "u1", [{"type": "text", "text": "loop"}]),
            _event("assistant", "a1", "u1", [{"type": "text", "text": "answer"}]),
        ]
    else:
        events = [
            _event("user", "u1", "u1", "question"),
            _event("assistant", "a1", "u1", [{"type": "text", "text": "answer"}]),
        ]
    result = read_logs(write_events(tmp_path / "s1.jsonl", events))
    assert len(result.records) >= 1
    [problem] = [p for p in result.problems if "loops back" in p.reason]
    assert (
        "the parentUuid chain loops back to" in problem.reason
        and "a cycle, not a conversation" in problem.reason
    )
def test_thinking_of_both_kinds_is_left_out_and_the_logs_cache_marks_are_not_the_requests(tmp_path: Path) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
             "cache_control": {"type": "ephemeral"}}  # fmt: skip
    events = [
        _event("user", "u1", None, [{"type": "text", "text": "what is this?", "cache_control": {"type": "ephemeral"}}, image]),
        _event("assistant", "a1", "u1", [
            {"type": "redacted_thinking", "data": "EqQBCgIYAhIM"},
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "text", "text": "a chart"},
        ]),
        _event("user", "u2", "a1", "and then?"),
        _event("assistant", "a2", "u2", [{"type": "text", "text": "nothing"}]),
    ]
    result = read_logs(write_events(tmp_path / "s1.jsonl", events))
    assert result.problems == ()
    messages = result.records[1].request["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    # the parts as sent, without the log's own cache marks (the reader places the breakpoint itself)
    assert messages[0]["content"] == [{"type": "text", "text": "what is this?"},
                                      {k: v for k, v in image.items() if k != "cache_control"}]  # fmt: skip
    assert messages[1]["content"] == "a chart"  # neither thinking block is part of the history sent
