"""Tests for promptkit/assembly/placement.py: the frame of a message list and where each anchor goes."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings, strategies as st

from promptkit.assembly.anchors import FOCUS_INJECTOR, VOLATILE_INJECTOR, Anchor, LayoutEntry
from promptkit.assembly.placement import (
    AssembledPrompt,
    analyze_frame,
    is_directive,
    layout_of,
    place_blocks,
)
from promptkit.chat.message import Message, ToolCall, WellKnownKinds

ANCHORS = {
    "idn": Anchor.IDENTITY,
    "kn": Anchor.KNOWLEDGE,
    "cx": Anchor.CONTEXT,
    "tc": Anchor.TURN_CONTEXT,
    "th": Anchor.TURN_HINT,
}
ALL = {"idn": ["IDN"], "kn": ["KN"], "cx": ["CX"], "tc": ["TC"], "th": ["TH"]}


def system(content: str, injector: str | None = None, kind: str | None = None) -> Message:
    return Message(
        role="system", content=content, kind=kind, metadata={"injector": injector} if injector else None
    )


def user(content: str) -> Message:
    return Message(role="user", content=content)


def assistant(content: str | None, *calls: str) -> Message:
    return Message(
        role="assistant", content=content, tool_calls=[ToolCall(id=c, name="f") for c in calls] or None
    )


def tool(call_id: str, content: str = "ok") -> Message:
    return Message(role="tool", tool_call_id=call_id, content=content)


def volatile() -> Message:
    return system("VOLATILE", VOLATILE_INJECTOR)


def focus() -> Message:
    return system("FOCUS", FOCUS_INJECTOR)


def delegation() -> Message:
    return system("[跨会话委派] 任务", WellKnownKinds.CROSS_SESSION_DELEGATION.value)


def contents(messages: tuple[Message, ...] | list[Message]) -> list[str | None]:
    return [m.content for m in messages]


def place(messages: list[Message], blocks: dict[str, list[str]] | None = None):  # type: ignore[no-untyped-def]
    return place_blocks(messages, ALL if blocks is None else blocks, ANCHORS)


# --- the five anchors on an ordinary turn ------------------------------------------------------------


def test_ordinary_turn_places_every_anchor() -> None:
    p = place([system("persona"), user("u1"), assistant("a1"), user("u2")])
    assert contents(p.messages) == ["persona", "IDN", "KN", "CX", "u1", "a1", "TC", "TH", "u2"]
    assert [e.slot for e in p.layout] == [
        "persona",
        "identity",
        "knowledge",
        "context",
        "history",
        "history",
        "turn-context",
        "turn-hint",
        "current",
    ]
    assert [e.key for e in p.layout] == [None, "idn", "kn", "cx", None, None, "tc", "th", None]
    assert p.unplaced == ()


def test_blocks_are_system_messages_with_the_key_as_injector() -> None:
    p = place([system("persona"), user("u")], {"kn": ["K1", "K2"]})
    assert p.messages[1] == Message(role="system", content="K1", metadata={"injector": "kn"})
    assert p.messages[2] == Message(role="system", content="K2", metadata={"injector": "kn"})


def test_identity_goes_first_when_there_is_no_persona_card() -> None:
    p = place([user("u1"), assistant("a1"), user("u2")])
    assert contents(p.messages) == ["IDN", "KN", "CX", "u1", "a1", "TC", "TH", "u2"]


def test_knowledge_and_context_go_to_the_end_of_the_leading_system_region() -> None:
    p = place([system("persona"), system("rules"), user("u1")], {"kn": ["KN"], "cx": ["CX"], "idn": ["IDN"]})
    assert contents(p.messages) == ["persona", "IDN", "rules", "KN", "CX", "u1"]
    assert [e.slot for e in p.layout][:3] == ["persona", "identity", "system"]


# --- turn-context: the three-level rule --------------------------------------------------------------


def test_turn_context_goes_before_the_volatile_block_and_turn_hint_before_the_current_message() -> None:
    p = place([system("persona"), user("u1"), assistant("a1"), volatile(), focus(), user("u2")])
    assert contents(p.messages) == [
        "persona",
        "IDN",
        "KN",
        "CX",
        "u1",
        "a1",
        "TC",
        "VOLATILE",
        "FOCUS",
        "TH",
        "u2",
    ]
    assert [e.slot for e in p.layout][6:] == ["turn-context", "volatile", "focus", "turn-hint", "current"]


def test_without_volatile_block_turn_context_goes_before_the_current_message() -> None:
    p = place([system("persona"), user("u1"), assistant("a1"), focus(), user("u2")], {"tc": ["TC"]})
    # no volatile block: the current message is the next level, focus keeps its adjacency to it
    assert contents(p.messages) == ["persona", "u1", "a1", "FOCUS", "TC", "u2"]


def test_delegation_turn_keeps_old_user_messages_in_the_history() -> None:
    history = [user("hist-u1"), assistant("hist-a1"), user("hist-u2")]
    p = place([system("persona"), *history, delegation()], {"tc": ["TC"], "th": ["TH"]})
    assert contents(p.messages) == [
        "persona",
        "hist-u1",
        "hist-a1",
        "hist-u2",
        "TC",
        "TH",
        "[跨会话委派] 任务",
    ]
    assert [e.slot for e in p.layout] == [
        "persona",
        "history",
        "history",
        "history",
        "turn-context",
        "turn-hint",
        "directive",
    ]


def test_directive_block_wins_over_the_volatile_block() -> None:
    msgs = [system("persona"), user("hist-u1"), assistant("a"), user("hist-u2"), volatile(), delegation()]
    p = place(msgs, {"tc": ["TC"], "th": ["TH"]})
    assert contents(p.messages)[3:] == ["hist-u2", "VOLATILE", "TC", "TH", "[跨会话委派] 任务"]


@pytest.mark.parametrize(
    "directive",
    [
        Message(
            role="notice",
            content="任务",
            kind=WellKnownKinds.CROSS_SESSION_DELEGATION.value,
            metadata={"injector": WellKnownKinds.CROSS_SESSION_DELEGATION.value},
        ),
        system("[宿主通知] 任务完成", WellKnownKinds.HOST_NOTICE.value),
        system("空闲，开个话题", WellKnownKinds.IDLE_PROMPT.value),
    ],
)
def test_directive_block_is_recognised_by_its_injector(directive: Message) -> None:
    assert is_directive(directive)
    p = place([system("persona"), user("old"), assistant("a"), directive], {"tc": ["TC"], "th": ["TH"]})
    assert contents(p.messages) == ["persona", "old", "a", "TC", "TH", directive.content]
    assert p.layout[-1] == LayoutEntry(slot="directive", key=directive.injector)


def test_a_directive_kind_without_an_injector_is_history_not_the_directive_block() -> None:
    # the pipeline contract: only a request-time message carries an injector; a stored notice is history
    stored = Message(role="notice", content="任务", kind=WellKnownKinds.CROSS_SESSION_DELEGATION.value)
    p = place([system("persona"), user("old"), assistant("a"), stored], {"tc": ["TC"], "th": ["TH"]})
    assert p.layout[-1].slot != "directive"
    assert "directive" not in [e.slot for e in p.layout]


def test_turn_frame_stamps_its_directive_with_the_injector() -> None:
    from promptkit.assembly import turn_frame

    notice = Message(role="notice", content="任务", kind=WellKnownKinds.HOST_NOTICE.value)
    frame = turn_frame([user("old"), assistant("a")], persona="persona", directive=notice)
    assert frame[-1].injector == WellKnownKinds.HOST_NOTICE.value and frame[-1].content == "任务"
    assert notice.injector is None  # the input is left untouched


def test_archived_host_notice_inside_the_history_is_not_the_directive_block() -> None:
    archived = Message(role="notice", content="后台任务完成", kind=WellKnownKinds.HOST_NOTICE.value)
    msgs = [system("persona"), user("u1"), archived, assistant("a1"), user("u2")]
    p = place(msgs, {"tc": ["TC"], "th": ["TH"]})
    assert contents(p.messages) == ["persona", "u1", "后台任务完成", "a1", "TC", "TH", "u2"]
    assert p.layout[2].slot == "history"


def test_history_ending_with_a_user_message_and_a_volatile_block_has_no_current_message() -> None:
    # a proactive turn without a directive block: the last user message is history, not the current one
    msgs = [system("persona"), user("hist-u1"), assistant("a"), user("hist-u2"), volatile()]
    p = place(msgs, {"tc": ["TC"], "th": ["TH"]})
    assert contents(p.messages) == ["persona", "hist-u1", "a", "hist-u2", "TC", "VOLATILE"]
    assert p.unplaced == ("th",)


def test_no_user_message_at_all() -> None:
    p = place([system("persona")])
    assert contents(p.messages) == ["persona", "IDN", "KN", "CX", "TC"]
    assert p.unplaced == ("th",)
    p = place([])
    assert contents(p.messages) == ["IDN", "KN", "CX", "TC"]
    assert [e.slot for e in p.layout] == ["identity", "knowledge", "context", "turn-context"]


def test_history_without_current_message_gets_turn_context_at_its_end() -> None:
    p = place([system("persona"), assistant("greeting"), user("old"), assistant("reply")], {"tc": ["TC"]})
    assert contents(p.messages) == ["persona", "greeting", "old", "reply", "TC"]


def test_turn_context_lands_before_a_focus_block_when_there_is_nothing_else() -> None:
    p = place([system("persona"), user("old"), assistant("reply"), focus()], {"tc": ["TC"]})
    assert contents(p.messages) == ["persona", "old", "reply", "TC", "FOCUS"]


def test_tool_loop_after_the_current_message() -> None:
    msgs = [
        system("persona"),
        user("u1"),
        assistant("a1"),
        volatile(),
        user("u2"),
        assistant(None, "c1"),
        tool("c1"),
    ]
    p = place(msgs, {"tc": ["TC"], "th": ["TH"]})
    assert contents(p.messages) == ["persona", "u1", "a1", "TC", "VOLATILE", "TH", "u2", None, "ok"]
    assert [e.slot for e in p.layout][-3:] == ["current", "tool-loop", "tool-loop"]


def test_tool_groups_inside_the_history_stay_history() -> None:
    msgs = [system("persona"), user("u1"), assistant(None, "c1"), tool("c1"), assistant("a1"), user("u2")]
    frame = analyze_frame(msgs)
    assert (frame.head_end, frame.history_end, frame.current, frame.tool_loop_start) == (1, 5, 5, 6)


# --- determinism and late contributors ----------------------------------------------------------------


def test_blocks_in_one_slot_follow_utf16_key_order_and_keep_their_own_order() -> None:
    anchors = {"ｚ": Anchor.CONTEXT, "𝒜": Anchor.CONTEXT, "a": Anchor.CONTEXT}
    blocks = {"ｚ": ["z1"], "𝒜": ["A1", "A2"], "a": ["a1"]}
    p = place_blocks([system("persona"), user("u")], blocks, anchors)
    assert contents(p.messages) == ["persona", "a1", "A1", "A2", "z1", "u"]
    reversed_blocks = dict(reversed(list(blocks.items())))
    assert place_blocks([system("persona"), user("u")], reversed_blocks, anchors) == p


def test_existing_blocks_keep_their_positions_and_late_ones_merge_in_key_order() -> None:
    first = place([system("persona"), user("u1"), assistant("a1"), user("u2")], {"cx": ["CX"], "th": ["TH"]})
    later = place(list(first.messages), {"kn": ["KN"], "idn": ["IDN"], "tc": ["TC"]})
    at_once = place([system("persona"), user("u1"), assistant("a1"), user("u2")])
    assert later.messages == at_once.messages
    assert later.layout == at_once.layout
    # the input's messages are the same objects, in the same relative order
    kept = [m for m in later.messages if any(m is f for f in first.messages)]
    assert all(a is b for a, b in zip(kept, first.messages, strict=True))


def test_layout_of_without_registry_reads_injected_blocks_by_position() -> None:
    p = place([system("persona"), user("u1"), assistant("a1"), volatile(), user("u2")])
    assert [e.slot for e in layout_of(p.messages)] == [
        "persona",
        "system",
        "system",
        "system",
        "history",
        "history",
        "system",
        "volatile",
        "system",
        "current",
    ]
    assert layout_of(p.messages, ANCHORS) == p.layout


def test_assembled_prompt_boundaries() -> None:
    p = place([system("persona"), user("u1"), assistant("a1"), volatile(), user("u2")])
    prompt = AssembledPrompt(messages=p.messages, layout=p.layout)
    assert prompt.head_end == 4  # persona IDN KN CX
    assert prompt.history_end == 6  # after a1
    assert prompt.layout_dicts()[0] == {"slot": "persona", "key": None}
    with pytest.raises(ValueError, match="2 messages but 1 layout"):
        AssembledPrompt(messages=[user("a"), user("b")], layout=[LayoutEntry(slot="current")])


# --- properties ----------------------------------------------------------------------------------------

INJECTORS = [
    None,
    None,
    None,
    VOLATILE_INJECTOR,
    FOCUS_INJECTOR,
    "cross-session-delegation",
    "host-notice",
    "idle-prompt",
    "persona",
    "other",
    *ANCHORS,
]


@st.composite
def message_lists(draw: st.DrawFn) -> list[Message]:
    specs = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["system", "system", "user", "user", "assistant", "tool", "notice"]),
                st.sampled_from(INJECTORS),
                st.sampled_from(
                    [None, None, None, "host-notice", "cross-session-delegation", "event-marker"]
                ),
                st.booleans(),
            ),
            max_size=12,
        )
    )
    out = []
    for i, (role, injector, kind, flag) in enumerate(specs):
        if injector in ANCHORS and role != "system":
            injector = None  # contributor blocks are system messages
        out.append(
            Message(
                role=role,
                content=f"m{i}",
                kind=kind,
                metadata={"injector": injector} if injector else None,
                tool_calls=[ToolCall(id=f"c{i}", name="f")] if role == "assistant" and flag else None,
                tool_call_id=f"c{i - 1}" if role == "tool" else None,
            )
        )
    return out


@st.composite
def block_maps(draw: st.DrawFn, messages: list[Message]) -> dict[str, list[str]]:
    present = {m.injector for m in messages}
    keys = [k for k in ANCHORS if k not in present]
    chosen = draw(st.lists(st.sampled_from(keys), unique=True)) if keys else []
    return {k: [f"{k}-{j}" for j in range(draw(st.integers(1, 2)))] for k in chosen}


@pytest.mark.slow
@given(data=st.data())
@settings(max_examples=300, deadline=None)
def test_placement_properties(data: st.DataObject) -> None:
    messages = data.draw(message_lists())
    blocks = data.draw(block_maps(messages))
    snapshot = copy.deepcopy(messages)
    ids = [id(m) for m in messages]
    p = place_blocks(messages, blocks, ANCHORS)

    # never mutates its input
    assert messages == snapshot and [id(m) for m in messages] == ids
    # every input message exactly once, in order; the rest are exactly the placed blocks
    assert len(p.layout) == len(p.messages)
    old = [m for m in p.messages if id(m) in set(ids)]
    assert [id(m) for m in old] == ids
    new = [m for m in p.messages if id(m) not in set(ids)]
    placed = {k: v for k, v in blocks.items() if k not in p.unplaced}
    assert sorted((m.injector, m.content) for m in new) == sorted(
        (k, b) for k, v in placed.items() for b in v
    )
    assert set(p.unplaced) <= {k for k in blocks if ANCHORS[k] is Anchor.TURN_HINT}
    # nothing lands inside the history: between two history messages of the input only history follows
    frame = analyze_frame(messages, ANCHORS)
    history_ids = {id(messages[i]) for i in range(frame.head_end, frame.history_end)}
    positions = [i for i, m in enumerate(p.messages) if id(m) in history_ids]
    if positions:
        inside = p.messages[positions[0] : positions[-1] + 1]
        assert all(id(m) in history_ids or id(m) in set(ids) for m in inside)
        assert not any(id(m) not in set(ids) for m in inside)
        # head blocks before the history, turn blocks after it
        for i, (m, e) in enumerate(zip(p.messages, p.layout, strict=True)):
            if id(m) not in set(ids):
                assert (i < positions[0]) == Anchor(e.slot).before_history
    # the layout is what a fresh reading of the result gives
    assert layout_of(p.messages, ANCHORS) == p.layout
    # registration order is irrelevant
    assert place_blocks(messages, dict(reversed(list(blocks.items()))), ANCHORS) == p


@pytest.mark.slow
@given(data=st.data())
@settings(max_examples=300, deadline=None)
def test_placing_in_two_calls_equals_placing_at_once(data: st.DataObject) -> None:
    messages = data.draw(message_lists())
    blocks = data.draw(block_maps(messages))
    first_keys = data.draw(st.sets(st.sampled_from(sorted(blocks)))) if blocks else set()
    first = place_blocks(messages, {k: v for k, v in blocks.items() if k in first_keys}, ANCHORS)
    second = place_blocks(first.messages, {k: v for k, v in blocks.items() if k not in first_keys}, ANCHORS)
    at_once = place_blocks(messages, blocks, ANCHORS)
    assert second.messages == at_once.messages
    assert second.layout == at_once.layout
