"""Tests for promptkit/assembly/frame.py: composing a turn's frame."""

from __future__ import annotations

import pytest

from promptkit.assembly import FOCUS_INJECTOR, VOLATILE_INJECTOR, PromptRegistry, layout_of, turn_frame
from promptkit.chat.message import Message, ToolCall, WellKnownKinds


def test_parts_in_their_places_and_history_for_the_model() -> None:
    history = [
        Message(role="user", content="hi"),
        Message(role="system", kind="event-marker", content="--- 压缩分隔 ---"),
        Message(role="assistant", tool_calls=[ToolCall(id="c1", name="f")]),
        Message(role="user", content="还在吗"),  # archived while the tool ran
        Message(role="tool", tool_call_id="c1", content="result"),
        Message(role="assistant", content="{...}", metadata={"visibleContent": "好的"}),
        Message(role="tool", tool_call_id="orphan", content="?"),
    ]
    frame = turn_frame(history, persona="P", volatile="V", focus="F", current="now")
    assert [(m.role, m.content) for m in frame] == [
        ("system", "P"),
        ("user", "hi"),
        ("assistant", None),
        ("tool", "result"),
        ("user", "还在吗"),
        ("assistant", "好的"),
        ("system", "V"),
        ("system", "F"),
        ("user", "now"),
    ]
    assert frame[6].injector == VOLATILE_INJECTOR and frame[7].injector == FOCUS_INJECTOR
    assert [e.slot for e in layout_of(frame)] == [
        "persona",
        *["history"] * 5,
        "volatile",
        "focus",
        "current",
    ]


def test_delegation_turn_frame_and_assembly() -> None:
    delegation = Message(
        role="notice", content="整理日程", kind=WellKnownKinds.CROSS_SESSION_DELEGATION.value
    )
    frame = turn_frame([Message(role="user", content="old")], persona="P", directive=delegation)
    registry = PromptRegistry()
    registry.register("memories", "turn-context", lambda view: "M")
    prompt = registry.assemble(frame)
    assert [m.content for m in prompt.messages] == ["P", "old", "M", "整理日程"]
    assert [e.slot for e in prompt.layout] == ["persona", "history", "turn-context", "directive"]


def test_parts_that_do_not_fit_their_place() -> None:
    with pytest.raises(ValueError, match="directive"):
        turn_frame(directive=Message(role="user", content="x"))
    with pytest.raises(ValueError, match="current"):
        turn_frame(current=Message(role="assistant", content="x"))
    with pytest.raises(ValueError, match="persona"):
        turn_frame(persona=Message(role="user", content="x"))
    with pytest.raises(ValueError, match="volatile"):
        turn_frame(volatile=Message(role="system", content="x"))
    assert turn_frame() == []
