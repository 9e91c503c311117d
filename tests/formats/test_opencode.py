"""OpenCode session exports: one call per step, tool results, usage from step-finish, bad fields counted."""

from __future__ import annotations

import json
from pathlib import Path

from promptkit.formats import read_logs
from promptkit.formats.base import Source, sniff_format

FIXTURE = Path("fixtures/opencode/ses_6aade4081ffe216ygZUgcUQdR1.json")


def _export(tmp_path: Path, parts: list[dict[str, object]]) -> Path:
    doc = {
        "info": {"id": "ses_x", "title": "t"},
        "messages": [
            {
                "info": {"id": "msg_u", "role": "user", "time": {"created": 1}},
                "parts": [{"type": "text", "text": "q"}],
            },
            {
                "info": {"id": "msg_a", "role": "assistant", "modelID": "gpt-4.1", "time": {"created": 2}},
                "parts": parts,
            },
        ],
    }
    path = tmp_path / "ses_x.json"
    path.write_text(json.dumps(doc))
    return path


def test_every_step_is_a_call_with_the_session_before_it() -> None:
    r = read_logs(FIXTURE)
    assert r.problems == ()
    first, second, third = r.records
    assert [m["role"] for m in second.request["messages"]] == ["user", "assistant", "tool"]
    call = second.request["messages"][1]["tool_calls"][0]
    assert call["id"] == "toolu_01Hq8Wd1JfQ3" and call["function"]["name"] == "list"
    assert "main.py" in second.request["messages"][2]["content"]
    # the prompt is the fresh input plus the cache reads and writes
    assert (first.usage.prompt_tokens, first.usage.cache_write_tokens) == (9640, 9600)
    assert (second.usage.prompt_tokens, second.usage.cached_tokens) == (9912, 9600)
    # an ignored text part is not sent; reasoning is not replayed
    assert third.request["messages"][-1] == {"role": "user", "content": "and what does main.py do?"}
    assert "reasoning" not in json.dumps(third.completion)
    # the second step starts when its tool finished
    assert second.timestamp == 1758069901.474
    assert {r.meta["opaque_head_key"] for r in r.records} == {
        "opencode:ses_6aade4081ffe216ygZUgcUQdR1:claude-sonnet-4-5"
    }


def test_the_export_is_sniffed_and_the_provider_recognised() -> None:
    assert sniff_format(Source.open(FIXTURE)).name == "opencode"
    from promptkit.providers.registry import infer_record_provider

    assert {infer_record_provider(rec) for rec in read_logs(FIXTURE).records} == {"anthropic"}


def test_a_tool_error_is_the_result_sent_back(tmp_path: Path) -> None:
    tool = {
        "type": "tool",
        "callID": "c1",
        "tool": "bash",
        "state": {"status": "error", "input": {"command": "x"}, "error": "boom"},
    }
    finish = {
        "type": "step-finish",
        "tokens": {"input": 10, "output": 1, "reasoning": 0, "cache": {"read": 0, "write": 0}},
    }
    path = _export(
        tmp_path,
        [
            {"type": "step-start"},
            tool,
            finish,
            {"type": "step-start"},
            {"type": "text", "text": "ok"},
            finish,
        ],
    )
    r = read_logs(path)
    assert r.records[1].request["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "boom"}


def test_bad_token_fields_are_counted_problems_naming_the_field(tmp_path: Path) -> None:
    bad = {"type": "step-finish", "tokens": {"input": 10, "output": 1, "cache": {"read": -3, "write": 0}}}
    path = _export(tmp_path, [{"type": "step-start"}, {"type": "text", "text": "a"}, bad])
    r = read_logs(path)
    assert len(r.records) == 1 and r.records[0].usage is None
    assert any("messages[1].parts[2].tokens.cache.read" in p.reason for p in r.problems)


def test_a_document_that_is_not_an_export_is_one_problem(tmp_path: Path) -> None:
    path = tmp_path / "ses_y.json"
    path.write_text(json.dumps({"info": {"id": "ses_y"}, "messages": {"msg_1": {}}}))
    from promptkit.formats.opencode import FORMAT

    r = read_logs(path, format=FORMAT.name)
    assert r.records == () and "expected an OpenCode export" in r.problems[0].reason
