"""promptkit.providers.record: request_record and write_jsonl (the cache analyzer's log format)."""

from __future__ import annotations

import enum
import json
import pathlib

import pytest
from hypothesis import given, settings

from promptkit.chat.message import Message, ToolCall
from promptkit.providers import (
    RequestBuildError,
    deepseek_request,
    openai_request,
    request_record,
    write_jsonl,
)

from .strategies import PNG, Entry, Prompt, conversations


def _prompt_with_tool_images() -> Prompt:
    msgs = (
        Message(role="system", content="persona"),
        Message(role="user", content="截图"),
        Message(
            role="assistant",
            tool_calls=(
                ToolCall(id="a", name="shot", arguments="{}"),
                ToolCall(id="b", name="shot", arguments="{}"),
            ),
        ),
        Message(role="tool", content="1", tool_call_id="a", images=(PNG,)),
        Message(role="tool", content="2", tool_call_id="b", images=(PNG,)),
        Message(role="system", content="记忆", metadata={"injector": "memory"}),
        Message(role="user", content="看看"),
    )
    layout = (
        Entry("persona", "persona"),
        Entry("history"),
        Entry("history"),
        Entry("history", "tool-a"),
        Entry("history", "tool-b"),
        Entry("turn-context", "memory"),
        Entry("current"),
    )
    return Prompt(msgs, layout)


def test_layout_is_aligned_with_the_body_messages_including_inserted_image_messages() -> None:
    rec = request_record(
        _prompt_with_tool_images(),
        provider="deepseek",
        model="deepseek-chat",
        session="s1",
        timestamp=1700000000,
    )
    body = rec["request"]
    assert body == deepseek_request(_prompt_with_tool_images(), model="deepseek-chat")
    assert len(rec["layout"]) == len(body["messages"]) == 8
    assert [m["role"] for m in body["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "user",
        "user",
    ]
    assert rec["layout"] == [
        {"slot": "persona", "key": "persona"},
        {"slot": "history", "key": None},
        {"slot": "history", "key": None},
        {"slot": "history", "key": "tool-a"},
        {"slot": "history", "key": "tool-b"},
        {"slot": "history", "key": "tool-a"},  # the one user message carrying the images of a and b
        {"slot": "turn-context", "key": "memory"},
        {"slot": "current", "key": None},
    ]
    assert (rec["session"], rec["timestamp"]) == ("s1", 1700000000)
    assert "response" not in rec


def test_no_layout_when_the_input_has_none_and_params_are_forwarded() -> None:
    msgs = [Message(role="user", content="hi")]
    response = {"usage": {"prompt_tokens": 5, "prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": 5}}
    rec = request_record(msgs, provider="openai", model="gpt-4o", temperature=0.1, seed=3, response=response)
    assert rec == {
        "request": openai_request(msgs, model="gpt-4o", temperature=0.1, seed=3),
        "response": response,
    }
    assert "layout" not in request_record(Prompt(msgs, None), model="m")


def test_layout_entries_as_mappings_and_enum_slots_become_plain_json() -> None:
    class Slot(str, enum.Enum):  # noqa: UP042 - a (str, Enum) whose str() is not its value
        CURRENT = "current"

    rec = request_record(
        Prompt([Message(role="user", content="q")], [{"slot": Slot.CURRENT, "key": None}]), model="m"
    )  # type: ignore[list-item]
    assert rec["layout"] == [{"slot": "current", "key": None}]
    assert json.loads(json.dumps(rec)) == rec


def test_unknown_provider_is_an_error() -> None:
    with pytest.raises(RequestBuildError, match="provider must be one of"):
        request_record([Message(role="user", content="q")], provider="anthropic", model="m")  # type: ignore[arg-type]


def test_write_jsonl_round_trip_and_append(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "calls.jsonl"
    records = [
        request_record(_prompt_with_tool_images(), model="deepseek-chat", session="s", timestamp=i)
        for i in range(3)
    ]
    assert write_jsonl(records, path) == 3
    assert write_jsonl(records[:1], path, append=True) == 1
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [*records, records[0]]
    assert "记忆" in lines[0]  # non-ASCII kept as is
    assert write_jsonl([], path) == 0 and path.read_text(encoding="utf-8") == ""


def test_write_jsonl_names_the_bad_record(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "bad.jsonl"
    with pytest.raises(TypeError, match=r"record 1 .*bad\.jsonl"):
        write_jsonl([{"ok": 1}, {"bad": object()}], path)
    with pytest.raises(TypeError, match="record 0"):
        write_jsonl([{"nan": float("nan")}], path)


@settings(max_examples=60, deadline=None)
@given(conversations())
def test_layout_always_aligns_with_the_body(conv: tuple[list[Message], list[Entry]]) -> None:
    msgs, layout = conv
    for provider in ("deepseek", "openai"):
        rec = request_record(Prompt(msgs, layout), provider=provider, model="m")  # type: ignore[arg-type]
        assert len(rec["layout"]) == len(rec["request"]["messages"])
        slots = [e["slot"] for e in rec["layout"]]
        # the slots of the caller's messages appear in the same order; inserted messages repeat a tool's slot
        assert [s for s in slots] == [e.slot for e in _expand(msgs, layout)]


def _expand(msgs: list[Message], layout: list[Entry]) -> list[Entry]:
    """Independent expectation: after each run of tool messages that has images, one entry: that of the
    run's first tool message with images."""
    out: list[Entry] = []
    pending: list[Entry] = []
    for m, e in zip(msgs, layout, strict=True):
        if m.role != "tool":
            out += pending[:1]
            pending = []
        out.append(e)
        if m.role == "tool" and m.images:
            pending.append(e)
    return out + pending[:1]


def test_with_the_real_assembler_the_layout_is_the_prompts_layout() -> None:
    from promptkit.assembly import PromptRegistry

    registry = PromptRegistry()
    registry.register("memories", "turn-context", lambda view: "记忆")
    registry.register("skills", "knowledge", lambda view: "技能")
    history = [Message(role="user", content="q0"), Message(role="assistant", content="a0")]
    prompt = registry.assemble(
        [Message(role="system", content="persona"), *history, Message(role="user", content="q")]
    )
    rec = request_record(prompt, model="deepseek-chat")
    assert rec["layout"] == prompt.layout_dicts()
    slots = [e["slot"] for e in rec["layout"]]
    assert slots == ["persona", "knowledge", "history", "history", "turn-context", "current"]
    roles = [m["role"] for m in rec["request"]["messages"]]
    assert roles == ["system", "system", "user", "assistant", "user", "user"]
    # DeepSeek: the turn-context block after the history is a user message
    assert rec["request"]["messages"][4]["content"] == "[系统提示]\n记忆"
    # with no history yet, the turn-context block is part of the leading system run and stays system
    first_prompt = registry.assemble(
        [Message(role="system", content="persona"), Message(role="user", content="q")]
    )
    first = request_record(first_prompt, model="m")
    assert [m["role"] for m in first["request"]["messages"]] == ["system", "system", "system", "user"]
