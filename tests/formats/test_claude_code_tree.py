"""Claude Code's conversation tree in the analysis: rewinds and compactions named from the transcript,
the shared-cache view by default, and ruler mode on the transcript's own usage (issue 23).

The figures of ``docs/concepts/ruler.md`` are recomputed here on the real fixture."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from promptkit.analysis.api import analyze
from promptkit.analysis.causes import explain_causes
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


_MCP = "<command-name>/mcp</command-name>\n            <command-message>mcp</command-message>\n            <command-args></command-args>"  # fmt: skip


def test_an_mcp_reconnect_names_a_fall_back_into_the_head_tools_changed(tmp_path: Path) -> None:
    command = _MCP
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


def _compacted(tmp_path: Path, *, fall_back: bool, mcp: bool = False) -> Path:
    """A session compacted at 01:30. Claude Code marks the end of its system prompt (tools + system:
    17,000 tokens here, the rest of the first prompt's 21,835 being the first turn and what the transcript
    does not show), so the call after the compaction reads that head. With ``fall_back``, call 3 first
    fell back to it (a change after the head the log does not show), which marks where it ends. The call
    after the compaction sends 12,000 tokens more than its summary (files Claude Code re-attaches, which
    the transcript does not show). With ``mcp``, an MCP reconnect (``/mcp``) comes before call 3: its fall
    back is then the tools' change the log shows, not the head's end."""
    text = "a line of the project's code, repeated so that the prompt is long enough to cache. " * 20
    events = [
        _event("user", "u1", None, "one " + text, "00:00"),
        _event("assistant", "a1", "u1", [{"type": "text", "text": "A1"}], "00:05", _usage(0, 21832)),
        _event("user", "u2", "a1", "two " + text, "00:30"),
        _event("assistant", "a2", "u2", [{"type": "text", "text": "A2"}], "00:35", _usage(21832, 700)),
    ]
    last = "a2"
    if fall_back:
        if mcp:
            events.append(_event("user", "m1", "a2", _MCP, "00:50"))
        events += [
            _event("user", "u3", "m1" if mcp else "a2", "three " + text, "01:00"),
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


def test_a_fall_back_after_an_mcp_reconnect_does_not_mark_the_heads_end(tmp_path: Path) -> None:
    """The same counters as above, but call 3 follows ``/mcp``: its reads fell back because the tools
    changed (inside the head), so they are not where the head's breakpoint ends, and the call after the
    compaction is placed by the earlier calls' proportions, as without a fall back."""
    result = analyze(_compacted(tmp_path, fall_back=True, mcp=True))
    q = result.requests.sort("index")
    assert q["log_events"].to_list() == [None, None, "tools_changed", "compaction"]
    assert q["reported_cached_tokens"][2] == 17000 < q["predicted_cached_tokens"][2]
    # not the exact 17,000 that call 3's reads would give: the head's end as the first call placed it
    assert q["reported_cached_tokens"][3] == 17000
    assert q["predicted_cached_tokens"][3] == q["head_end_tokens"][0] > 17000
    assert q["position_basis"][3] == "interpolated"
    causes = explain_causes(result).sort("index")
    assert causes["cause"].to_list()[2:] == ["tools_changed", "compaction"]


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


_SESSION = "4d5611e5-241a-462a-8d15-5122611a9569"
_INSTRUCTION = (
    "Your task is to create a detailed summary of the conversation so far, paying close attention to "
    "the user's explicit requests and your previous actions."
)


def _with_compaction(
    tmp_path: Path, *, at: str, usage: dict[str, int], after: str | None = None, switch: str | None = None
) -> Path:
    """The real fixture's project with a compaction: Claude Code's compaction sub-agent
    (``subagents/agent-acompact-*.jsonl``) forks the main thread after its last event (the summary
    instruction is the file's one user event, its parent the main thread's last line) at ``at`` and
    reports ``usage``. With ``after``, the main thread goes on past a compact boundary: one call at
    ``after`` that reads the head (21,478 tokens, as 4d5611e5 #61 did) and writes its summary and
    the files Claude Code re-attaches. With ``switch``, the main thread's second call is made with that
    model (reading nothing: the cache is per model), and so are 12 more, as ae4a77f8 went from opus to
    haiku."""
    project = tmp_path / PROJECT.name
    (project / _SESSION / "subagents").mkdir(parents=True)
    main = (PROJECT / f"{_SESSION}.jsonl").read_text(encoding="utf-8").splitlines()
    (project / _SESSION / "subagents" / "agent-a2898e3.jsonl").write_text(
        (PROJECT / _SESSION / "subagents" / "agent-a2898e3.jsonl").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    model = next(json.loads(x)["message"]["model"] for x in main if json.loads(x).get("type") == "assistant")
    last = json.loads(main[-1])["uuid"]

    def ours(event: dict[str, Any], *, on: str | None = None, **fields: Any) -> dict[str, Any]:
        event |= {"sessionId": _SESSION, **fields}
        if event["type"] == "assistant":
            event["message"]["model"] = on or model  # the main thread's model (the cache is per model)
        return event

    if switch is not None:
        # the main thread's second call and 12 more go to ``switch``: the compaction forks 27 messages
        # after the main thread's last call on its model, further than a breakpoint looks back (20 blocks)
        second = [json.loads(x) for x in main if json.loads(x).get("type") == "assistant"][-1]
        for k, line in enumerate(main):
            event = json.loads(line)
            if event.get("type") == "assistant" and event["message"]["id"] == second["message"]["id"]:
                event["message"] |= {"model": switch, "usage": {"output_tokens": 1, **_usage(0, 28045, 1)}}
                main[k] = json.dumps(event)
        for n in range(12):
            main += [
                json.dumps(ours(_event("user", f"sw-user{n}", last, f"step {n}", f"03:{10 + n}"))),
                json.dumps(ours(_event("assistant", f"sw-answer{n}", f"sw-user{n}", [{"type": "text", "text": "ok"}],
                                       f"03:{11 + n}", _usage(28045 + 20 * n, 20)), on=switch)),
            ]  # fmt: skip
            last = f"sw-answer{n}"

    compaction = [
        ours(_event("user", "cmp-user", last, _INSTRUCTION, at), isSidechain=True, agentId="acompact-5e1f"),
        ours(_event("assistant", "cmp-answer", "cmp-user", [{"type": "text", "text": "<summary>"}], at, usage),
             isSidechain=True, agentId="acompact-5e1f"),
    ]  # fmt: skip
    (project / _SESSION / "subagents" / "agent-acompact-5e1f.jsonl").write_text(
        "\n".join(json.dumps(e) for e in compaction) + "\n", encoding="utf-8"
    )
    if after is not None:
        boundary = {"type": "system", "subtype": "compact_boundary", "uuid": "cb", "parentUuid": None,
                    "sessionId": _SESSION, "logicalParentUuid": last, "timestamp": f"2026-02-12T16:{after}Z"}  # fmt: skip
        summary = (
            "This session is being continued from a previous conversation. Summary: " + "the work. " * 300
        )
        main += [
            json.dumps(boundary),
            json.dumps(ours(_event("user", "post-user", "cb", summary, after))),
            json.dumps(ours(_event("assistant", "post-answer", "post-user", [{"type": "text", "text": "ok"}],
                                   after, _usage(21478, 16000)))),
        ]  # fmt: skip
    (project / f"{_SESSION}.jsonl").write_text("\n".join(main) + "\n", encoding="utf-8")
    return project


def test_a_compaction_sub_agent_continues_its_main_thread_with_its_head(tmp_path: Path) -> None:
    project = _with_compaction(tmp_path, at="03:00", usage=_usage(26447 + 1598, 900))
    loaded = read_logs(project)
    assert not loaded.problems  # the summary instruction's parent is found in the main thread's file
    [main_last] = [r for r in loaded.records if r.session == _SESSION and r.index == 1]
    [compaction] = [r for r in loaded.records if r.session.endswith("/agent-acompact-5e1f")]
    # the request is the main thread's conversation (its last call's prompt and answer), then the
    # instruction, sent with the main thread's system prompt and tools: the same head
    messages = compaction.request["messages"]
    assert [{k: v for k, v in m.items() if k != "cache_control"} for m in messages[: len(main_last.request["messages"])]] == [
        {k: v for k, v in m.items() if k != "cache_control"} for m in main_last.request["messages"]
    ]  # fmt: skip
    assert messages[-1]["content"] == _INSTRUCTION and messages[-2]["role"] == "assistant"
    for field in ("opaque_head_key", "opaque_head_tokens", "opaque_head_basis"):
        assert compaction.meta[field] == main_last.meta[field]
    assert "log_events" not in compaction.meta
    # within the TTL it reads the main thread's last breakpoint: reads(1) + writes(1), exactly
    q = analyze(project).requests.filter(pl.col("session").str.contains("acompact"))
    assert q["predicted_cached_tokens"].to_list() == q["reported_cached_tokens"].to_list() == [26447 + 1598]
    assert q["position_basis"].to_list() == ["exact"]


def test_without_its_main_threads_file_a_compaction_sub_agent_keeps_what_its_file_holds(
    tmp_path: Path,
) -> None:
    project = _with_compaction(tmp_path, at="03:00", usage=_usage(26447 + 1598, 900))
    (project / f"{_SESSION}.jsonl").unlink()
    loaded = read_logs(project)
    [compaction] = [r for r in loaded.records if "acompact" in r.session]
    assert [m["content"] for m in compaction.request["messages"]] == [_INSTRUCTION]
    assert compaction.meta["opaque_head_key"].startswith(f"claude-code:{compaction.session}:")
    assert any("parentUuid" in p.reason and "acompact" in str(p.file) for p in loaded.problems)


def test_the_call_after_a_compaction_reads_the_head_the_compaction_sub_agent_wrote(tmp_path: Path) -> None:
    """ae4a77f8 #138's shape: the main thread switches to another model, the compaction sub-agent, with
    the main thread's first model, system prompt and tools, rewrites that model's head after its
    entries expired, and the main thread's next call, back on that model, reads it. The compaction's
    prompt holds 9,000 tokens the transcript does not show (hook output Claude Code sent in the
    conversation), so its own proportions would place the head far past its end."""
    project = _with_compaction(
        tmp_path, at="10:00", usage=_usage(0, 26447 + 1598 + 9000), after="12:00", switch="claude-haiku-4-5"
    )
    result = analyze(project)
    q = result.requests.sort("session", "index")
    main = q.filter(pl.col("session") == _SESSION)
    assert set(main["model"][1:-1]) == {"claude-haiku-4-5"} and main["model"][-1] == main["model"][0]
    post = main.row(-1, named=True)
    assert post["log_events"] == "compaction" and post["cached_source"].endswith("acompact-5e1f#0")
    # the compaction read nothing (the first model's entries expired) and wrote the head; placed by
    # its own proportions the head would end far past where the main thread's first call counted it
    [compaction] = q.filter(pl.col("session").str.contains("acompact")).iter_rows(named=True)
    assert compaction["predicted_cached_tokens"] == 0 and compaction["idle_seconds"] > 300
    assert compaction["head_end_tokens"] > 1.2 * main["head_end_tokens"][0]
    # the head is read, its end placed by the count it was estimated from (the main thread's first
    # call): over the provider's 21,478, which excludes that call's hidden first turn, never past it
    assert post["reported_cached_tokens"] == 21478 < post["predicted_cached_tokens"]
    assert post["predicted_cached_tokens"] == main["head_end_tokens"][0] < main["prompt_tokens"][0]
    assert post["position_basis"] == "interpolated"
    causes = explain_causes(result).filter(pl.col("session") == _SESSION).sort("index")
    assert causes["cause"][-1] == "compaction" and "in the head" in causes["change_detail"][-1]
    assert causes["lost_unexplained"].sum() == 0
