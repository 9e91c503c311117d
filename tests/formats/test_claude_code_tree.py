"""Claude Code's conversation tree in the analysis: rewinds and compactions named from the transcript,
the shared-cache view by default, and ruler mode on the transcript's own usage (issue 23).

The figures of ``docs/concepts/ruler.md`` are recomputed here on the real fixture."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from promptkit.analysis.causes import explain_causes
from promptkit.analysis.engine import analyze
from promptkit.formats import read_logs

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "fixtures" / "claude-code" / "-home-USER-projects-spotter-worktrees-spotter-dov"


def _event(
    kind: str, uuid: str, parent: str | None, content: Any, t: str, usage: dict[str, int] | None = None
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message |= {
            "id": f"msg_{uuid}",
            "model": "claude-sonnet-4-5",
            "usage": {"output_tokens": 1, **(usage or {})},
        }
    return {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s1", "isSidechain": False,
            "timestamp": f"2026-02-12T16:{t}Z", "message": message}  # fmt: skip


def _usage(read: int, write: int, fresh: int = 3) -> dict[str, int]:
    return {"input_tokens": fresh, "cache_read_input_tokens": read, "cache_creation_input_tokens": write}


def _rewind(tmp_path: Path) -> Path:
    """A user's rewind: call 3 goes back to the first answer. Anthropic reads call 1's breakpoint there
    (reads(3) = reads(1) + writes(1)); the consecutive view, comparing with call 2 only, reads nothing."""
    text = "a line of the project's code, repeated so that the prompt is long enough to cache. " * 40
    events = [
        _event("user", "u1", None, "one " + text, "00:00"),
        _event("assistant", "a1", "u1", [{"type": "text", "text": "A1"}], "00:05", _usage(0, 21832)),
        _event("user", "u2", "a1", "two " + text, "00:30"),
        _event("assistant", "a2", "u2", [{"type": "text", "text": "A2"}], "00:35", _usage(21832, 700)),
        _event("user", "u2b", "a1", "two, edited " + text, "01:00"),  # the user rewound to a1
        _event("assistant", "a3", "u2b", [{"type": "text", "text": "A3"}], "01:05", _usage(21832, 710)),
    ]
    path = tmp_path / "s1.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    return path


def test_a_rewind_is_an_event_of_the_call_after_it(tmp_path: Path) -> None:
    records = read_logs(_rewind(tmp_path)).records
    assert [r.meta.get("log_events") for r in records] == [None, None, ["rewind"]]
    assert all(r.meta["conversation_tree"] for r in records)


def test_a_rewind_is_predicted_within_one_percent_of_what_the_provider_read(tmp_path: Path) -> None:
    path = _rewind(tmp_path)
    shared = analyze(path)  # the default view of a conversation tree: one cache over its branches
    assert shared.view == "simulated"
    assert any("view: simulated" in n for n in shared.notes)
    q = shared.requests.sort("index")
    predicted, reported = q["predicted_cached_tokens"][2], q["reported_cached_tokens"][2]
    assert reported == 21832 and abs(predicted - reported) <= 0.01 * reported
    assert q["position_basis"][2] == "exact"
    # each call against the previous one only: the rewind reads no more than the head (system prompt
    # and tools, its breakpoint shared by every call), short of what the provider read
    alone = analyze(path, view="consecutive").requests.sort("index")
    assert alone["predicted_cached_tokens"][2] == alone["head_end_tokens"][2] < 0.99 * reported


def test_compaction_is_an_event_and_names_the_rebuild(tmp_path: Path) -> None:
    text = "context " * 400
    events = [
        _event("user", "u1", None, "first " + text, "00:00"),
        _event("assistant", "a1", "u1", [{"type": "text", "text": "first answer"}], "00:05", _usage(0, 9000)),
        {
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": "c1",
            "parentUuid": None,
            "sessionId": "s1",
            "logicalParentUuid": "a1",
            "timestamp": "2026-02-12T16:01:00Z",
        },
        _event("user", "u2", "c1", "This session is being continued. Summary: " + text[:800], "01:01"),
        _event("assistant", "a2", "u2", [{"type": "text", "text": "ok"}], "01:05", _usage(4000, 300)),
    ]
    path = tmp_path / "s1.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    assert [r.meta.get("log_events") for r in read_logs(path).records] == [None, ["compaction"]]
    causes = explain_causes(analyze(path)).sort("index")
    assert causes["cause"][1] == "compaction"
    assert causes["lost_unexplained"].to_list() == [0, 0]


def test_the_real_fixture_measured_in_provider_units() -> None:
    """The table of docs/concepts/ruler.md for fixtures/claude-code: warm calls exact, nothing unexplained."""
    result = analyze(PROJECT)
    assert result.view == "simulated"
    q = result.requests
    assert (q["prompt_tokens"] == q["reported_prompt_tokens"]).all()  # the reported prompt is the prompt
    warm = q.filter(pl.col("index") > 0)
    assert warm.height == 1
    assert warm["predicted_cached_tokens"].to_list() == warm["reported_cached_tokens"].to_list() == [26447]
    assert set(q["position_basis"]) == {"exact"}
    causes = explain_causes(result)
    assert causes["lost_unexplained"].sum() == 0


def test_an_mcp_reconnect_names_a_fall_back_into_the_head_tools_changed(tmp_path: Path) -> None:
    command = "<command-name>/mcp</command-name>\n            <command-message>mcp</command-message>\n            <command-args></command-args>"
    events = [
        _event("user", "u1", None, "one", "00:00"),
        _event("assistant", "a1", "u1", [{"type": "text", "text": "A1"}], "00:05", _usage(0, 21832)),
        _event("user", "m1", "a1", command, "00:20"),  # as Claude Code records a slash command
        _event("user", "u2", "m1", "go on", "00:30"),
        _event("assistant", "a2", "u2", [{"type": "text", "text": "A2"}], "00:35", _usage(1000, 20900)),
    ]
    path = tmp_path / "s1.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    assert [r.meta.get("log_events") for r in read_logs(path).records] == [None, ["tools_changed"]]
    causes = explain_causes(analyze(path)).sort("index")
    assert causes["cause"][1] == "tools_changed" and causes["change_class"][1] == "tools_changed"
    assert "fell back to 1,000 tokens" in causes["change_detail"][1]
    # without the command the same counters are a change of the head the log does not show
    del events[2]
    events[2]["parentUuid"] = "a1"
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    assert explain_causes(analyze(path)).sort("index")["cause"][1] == "head_changed"


def test_the_benchmark_that_made_the_docs_table_measures_the_fixture() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "claude_code_accuracy", ROOT / "benchmarks" / "claude_code_accuracy.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    row, rebuilds = module.measure(str(PROJECT))
    assert row["calls"] == 3 and row["warm exact"] == "1 / 1" and row["unexplained"] == "0.0%"
    assert rebuilds.height == 0


def _compacted(tmp_path: Path, *, fall_back: bool) -> Path:
    """A session compacted at 01:30. Claude Code marks the end of its system prompt (tools + system:
    17,000 tokens here, the rest of the first prompt's 21,835 being the first turn and what the transcript
    does not show), so the call after the compaction reads that head. With ``fall_back``, call 3 first
    fell back to it (a change after the head the log does not show), which marks where it ends. The call
    after the compaction sends 12,000 tokens more than its summary (files Claude Code re-attaches, which
    the transcript does not show)."""
    text = "a line of the project's code, repeated so that the prompt is long enough to cache. " * 20
    events = [
        _event("user", "u1", None, "one " + text, "00:00"),
        _event("assistant", "a1", "u1", [{"type": "text", "text": "A1"}], "00:05", _usage(0, 21832)),
        _event("user", "u2", "a1", "two " + text, "00:30"),
        _event("assistant", "a2", "u2", [{"type": "text", "text": "A2"}], "00:35", _usage(21832, 700)),
    ]
    last = "a2"
    if fall_back:
        events += [
            _event("user", "u3", "a2", "three " + text, "01:00"),
            _event("assistant", "a3", "u3", [{"type": "text", "text": "A3"}], "01:05", _usage(17000, 6000)),
        ]
        last = "a3"
    events += [
        {
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": "c1",
            "parentUuid": None,
            "sessionId": "s1",
            "logicalParentUuid": last,
            "timestamp": "2026-02-12T16:01:30Z",
        },
        _event("user", "u4", "c1", "This session is being continued. Summary: " + text, "01:31"),
        _event("assistant", "a4", "u4", [{"type": "text", "text": "A4"}], "01:35", _usage(17000, 12000)),
    ]
    path = tmp_path / "s1.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    return path


def test_the_call_after_a_compaction_reads_the_head_where_an_earlier_read_placed_it(tmp_path: Path) -> None:
    result = analyze(_compacted(tmp_path, fall_back=True))
    q = result.requests.sort("index")
    assert q["log_events"].to_list() == [None, None, None, "compaction"]
    # call 3 fell back to the head: its reads are the head's end in Claude's units
    assert q["reported_cached_tokens"][2] == 17000 < q["predicted_cached_tokens"][2]
    # the call after the compaction reads the head (tools + system), exactly where call 3's reads put it
    assert q["predicted_cached_tokens"][3] == q["reported_cached_tokens"][3] == 17000
    assert q["position_basis"][3] == "exact" and q["head_end_tokens"][3] == 17000
    causes = explain_causes(result).sort("index")
    assert causes["cause"].to_list()[2:] == ["head_changed", "compaction"]
    assert causes["lost_unexplained"].to_list() == [0, 0, 0, 0]


def test_without_an_earlier_read_the_head_is_placed_by_the_earlier_calls_proportions(tmp_path: Path) -> None:
    result = analyze(_compacted(tmp_path, fall_back=False))
    q = result.requests.sort("index")
    predicted, reported = q["predicted_cached_tokens"][2], q["reported_cached_tokens"][2]
    # the head is read (not 0), its end placed by the first call's counts: the transcript's hidden part of
    # that call (its first turn's reminders) is counted in, so the estimate is over the read
    assert reported == 17000 < predicted == q["head_end_tokens"][0] < q["prompt_tokens"][0]
    assert q["position_basis"][2] == "interpolated"
    causes = explain_causes(result).sort("index")
    assert causes["cause"][2] == "compaction" and "in the head" in causes["change_detail"][2]
    assert causes["lost_unexplained"].to_list() == [0, 0, 0]


def test_a_rewind_in_a_real_transcript_is_predicted_within_one_percent(tmp_path: Path) -> None:
    """The real fixture's main thread, branched: after call 2 the user goes back to the tool results call
    2 answered and asks something else (no public transcript with a rewind and usage was found). The
    branch keeps call 2's prompt, so Anthropic reads call 2's breakpoint: reads(2) + writes(2)."""
    source = PROJECT / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
    lines = source.read_text(encoding="utf-8").splitlines()
    parent = next(
        json.loads(x)["uuid"] for x in lines if json.loads(x).get("uuid", "").startswith("51b2e9ce")
    )
    # the tool results of call 1: call 2's answer is left out
    branch = _event("user", "rw-user", parent, "Before that: which files does the issue touch?", "03:00")
    answer = _event(
        "assistant", "rw-answer", "rw-user", [{"type": "text", "text": "A"}], "03:05", _usage(28045, 40)
    )
    answer["sessionId"] = branch["sessionId"] = json.loads(lines[-1])["sessionId"]
    answer["message"]["model"] = next(  # the same model as the thread (the cache is per model)
        json.loads(x)["message"]["model"] for x in lines if json.loads(x).get("type") == "assistant"
    )
    path = tmp_path / source.name
    path.write_text("\n".join([*lines, json.dumps(branch), json.dumps(answer)]) + "\n", encoding="utf-8")
    main = [r for r in read_logs(path).records if "/" not in r.session]
    assert [r.meta.get("log_events") for r in main] == [None, None, ["rewind"]]
    q = analyze(path).requests.filter(~pl.col("session").str.contains("/")).sort("index")
    predicted, reported = q["predicted_cached_tokens"][2], q["reported_cached_tokens"][2]
    assert reported == 26447 + 1598 and abs(predicted - reported) <= 0.01 * reported
    assert q["position_basis"][2] == "exact"
