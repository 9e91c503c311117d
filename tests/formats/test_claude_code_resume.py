"""Claude Code: a resumed session's copied calls counted once (promptkit.formats.claude_code_resume),
and Claude Code 1.0.x compactions (an ``isCompactSummary`` root, no ``compact_boundary``) read as
compactions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from promptkit.formats import read_logs

TEXT = "a line of the project's code, repeated so that the prompt is long enough to cache. " * 40


def _event(
    kind: str, uuid: str, parent: str | None, content: Any, ts: str, session: str = "s1", **extra: Any
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": kind, "content": content}
    event: dict[str, Any] = {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": session,
                             "isSidechain": False, "timestamp": ts, "message": message, **extra}  # fmt: skip
    if kind == "assistant":
        message |= {"id": f"msg_{uuid}", "model": "claude-sonnet-4-5",
                    "usage": {"input_tokens": 3, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 21000, "output_tokens": 9}}  # fmt: skip
        event["requestId"] = f"req_{uuid}"
    return event


def _write(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    return path


def _original() -> list[dict[str, Any]]:
    return [
        _event("user", "u1", None, "one " + TEXT, "2026-02-12T16:00:00Z"),
        _event("assistant", "a1", "u1", [{"type": "text", "text": "A1"}], "2026-02-12T16:00:05Z"),
        _event("user", "u2", "a1", "two", "2026-02-12T16:01:00Z"),
        _event("assistant", "a2", "u2", [{"type": "text", "text": "A2"}], "2026-02-12T16:01:05Z"),
    ]


def _resumed() -> list[dict[str, Any]]:
    """The resume: the original's entries copied with the new session id and the resume's timestamps,
    then a new turn."""
    copies = [{**e, "sessionId": "s2", "timestamp": "2026-02-13T09:00:00Z"} for e in _original()]
    return [
        *copies,
        _event("user", "u3", "a2", "three", "2026-02-13T09:00:30Z", session="s2"),
        _event(
            "assistant", "a3", "u3", [{"type": "text", "text": "A3"}], "2026-02-13T09:00:35Z", session="s2"
        ),
    ]


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "-home-u-proj"
    project.mkdir()
    _write(project / "s1.jsonl", _original())
    _write(project / "s2.jsonl", _resumed())
    return project


def test_a_resumed_sessions_copies_are_counted_once(tmp_path: Path) -> None:
    project = _project(tmp_path)
    result = read_logs(project)
    assert result.problems == ()
    assert sorted((r.session, r.meta["request_id"]) for r in result.records) == [
        ("s1", "req_a1"), ("s1", "req_a2"), ("s2", "req_a3"),
    ]  # fmt: skip
    # the new call still sends the copied conversation before it
    [new] = [r for r in result.records if r.session == "s2"]
    assert [m["content"] for m in new.request["messages"]][-3:] == ["two", "A2", "three"]
    assert [m["role"] for m in new.request["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    [note] = [n for n in result.notes if "resumed" in n]
    assert note.startswith("2 call(s) at the start of s2.jsonl are copies") and "in s1.jsonl" in note
    # the cost basis: every call's usage once
    assert sum(r.usage.cache_write_tokens or 0 for r in result.records if r.usage) == 3 * 21000


def test_the_resumed_file_read_alone_still_leaves_its_copies_out(tmp_path: Path) -> None:
    project = _project(tmp_path)
    assert [r.meta["request_id"] for r in read_logs(project / "s2.jsonl").records] == ["req_a3"]
    assert [r.meta["request_id"] for r in read_logs(project / "s1.jsonl").records] == ["req_a1", "req_a2"]


def test_the_earlier_timestamp_keeps_the_call_and_only_the_leading_run_is_checked(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    _write(project / "s1.jsonl", _original())
    # the same request ids, but this file's copies are the earlier ones: the other file loses them
    earlier = [{**e, "sessionId": "s0", "timestamp": "2026-02-11T08:00:00Z"} for e in _original()]
    _write(project / "s0.jsonl", earlier)
    result = read_logs(project)
    assert sorted((r.session, r.meta["request_id"]) for r in result.records) == [
        ("s0", "req_a1"),
        ("s0", "req_a2"),
    ]
    # a call that another file holds, after a call of the file's own, is not a copy
    late = [
        *_resumed()[4:],
        {**_original()[3], "sessionId": "s3", "timestamp": "2026-02-14T00:00:00Z", "parentUuid": "a3"},
    ]
    _write(project / "s3.jsonl", late)
    own = read_logs(project / "s3.jsonl").records
    assert [r.meta["request_id"] for r in own] == ["req_a3", "req_a2"]


def test_a_folder_without_siblings_is_left_as_it_is(tmp_path: Path) -> None:
    path = _write(tmp_path / "s2.jsonl", _resumed())
    assert len(read_logs(path).records) == 3
    assert not [n for n in read_logs(path).notes if "resumed" in n]


def test_a_1_0_compaction_is_a_compaction_not_a_rewind(tmp_path: Path) -> None:
    summary = "This session is being continued from a previous conversation that ran out of context. " + TEXT
    events = [
        *_original(),
        _event("user", "c1", None, summary, "2026-02-12T16:30:00Z", isCompactSummary=True),
        _event("assistant", "a3", "c1", [{"type": "text", "text": "A3"}], "2026-02-12T16:30:05Z"),
        _event("user", "u4", "a3", "four", "2026-02-12T16:31:00Z"),
        _event("assistant", "a4", "u4", [{"type": "text", "text": "A4"}], "2026-02-12T16:31:05Z"),
    ]
    records = read_logs(_write(tmp_path / "s1.jsonl", events)).records
    assert [r.meta.get("log_events") for r in records] == [None, None, ["compaction"], None]
    assert [m["role"] for m in records[2].request["messages"]] == ["user"]
    assert records[2].request["messages"][0]["content"].startswith("This session is being continued")
    # a plain new root (not a summary) is still a rewind
    plain = [*events[:4], {**events[4], "isCompactSummary": False}, *events[5:]]
    (tmp_path / "other").mkdir()
    again = read_logs(_write(tmp_path / "other" / "s9.jsonl", plain)).records
    assert again[2].meta.get("log_events") == ["rewind"]


def test_the_file_plan_counts_a_resumed_session_once_with_the_same_note(tmp_path: Path) -> None:
    from promptkit.analysis.api import analyze

    project = _project(tmp_path)
    one = analyze(project, jobs=1)
    files = analyze(project, jobs=2)  # the file plan: each transcript read by a worker
    assert files.requests.height == one.requests.height == 3
    assert sorted(files.requests["session"].to_list()) == ["s1", "s1", "s2"]
    resumed = [n for n in files.notes if "resumed" in n]
    assert resumed == [n for n in one.notes if "resumed" in n] and len(resumed) == 1
    assert files.notes == one.notes
    assert int(files.requests["reported_cache_write_tokens"].sum()) == 3 * 21000
