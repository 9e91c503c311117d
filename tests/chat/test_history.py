"""Tests for promptkit/chat/history.py: tool-call grouping and the history a model sees."""

from __future__ import annotations

import copy

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from promptkit.chat.history import (
    MessageUnit,
    drop_control_kinds,
    group_tool_calls,
    history_for_model,
)
from promptkit.chat.message import CONTROL_KINDS, Message, ToolCall, WellKnownKinds, WellKnownMetadataKeys


def call(*ids: str, content: str | None = None) -> Message:
    return Message(role="assistant", content=content, tool_calls=[ToolCall(id=i, name="f") for i in ids])


def result(call_id: str | None, content: str = "ok") -> Message:
    return Message(role="tool", tool_call_id=call_id, content=content)


def user(text: str = "u") -> Message:
    return Message(role="user", content=text)


def shapes(messages: list[Message]) -> list[tuple[tuple[int, ...], str]]:
    return [(u.at, u.shape) for u in group_tool_calls(messages)]


# --- MessageUnit -----------------------------------------------------------------------------------


def test_message_unit_is_frozen_and_converts_at_to_tuple() -> None:
    unit = MessageUnit(at=[0, 2], shape="complete")
    assert unit.at == (0, 2)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        unit.shape = "single"  # type: ignore[misc]


def test_message_unit_rejects_bad_shape_and_empty_or_negative_at() -> None:
    with pytest.raises(ValueError):
        MessageUnit(at=(0,), shape="grouped")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one"):
        MessageUnit(at=(), shape="single")
    with pytest.raises(ValueError, match="-1"):
        MessageUnit(at=(-1,), shape="single")


# --- group_tool_calls: the rules one by one ---------------------------------------------------------


def test_empty_history_has_no_units() -> None:
    assert group_tool_calls([]) == []


def test_plain_messages_are_single_units_in_order() -> None:
    msgs = [Message(role="system", content="s"), user(), Message(role="assistant", content="a")]
    assert shapes(msgs) == [((0,), "single"), ((1,), "single"), ((2,), "single")]


def test_adjacent_call_and_results_form_a_complete_group() -> None:
    assert shapes([call("a", "b"), result("a"), result("b"), user()]) == [
        ((0, 1, 2), "complete"),
        ((3,), "single"),
    ]


def test_results_are_listed_in_the_order_found_not_call_order() -> None:
    assert shapes([call("a", "b"), result("b"), result("a")]) == [((0, 1, 2), "complete")]
    assert [m.tool_call_id for m in history_for_model([call("a", "b"), result("b"), result("a")])[1:]] == [
        "b",
        "a",
    ]


def test_messages_between_call_and_results_move_after_the_group_keeping_order() -> None:
    msgs = [call("c1", "c2"), user("x"), result("c2"), user("y"), result("c1"), user("z")]
    assert shapes(msgs) == [((0, 2, 4), "complete"), ((1,), "single"), ((3,), "single"), ((5,), "single")]


def test_timestamp_ordered_store_interleaving_is_regrouped() -> None:
    # A tool group's results are stamped ms after the call; a store sorted by timestamp puts a
    # shadow-archived input and the reply that followed between them.
    msgs = [
        user("q"),
        call("c1"),
        Message(role="user", content="插进来的输入"),
        Message(role="notice", content="影子归档"),
        result("c1"),
        Message(role="assistant", content="答复"),
    ]
    assert shapes(msgs) == [
        ((0,), "single"),
        ((1, 4), "complete"),
        ((2,), "single"),
        ((3,), "single"),
        ((5,), "single"),
    ]


def test_group_stops_at_the_next_tool_call_and_is_partial() -> None:
    msgs = [call("a", "b"), result("a"), user(), call("c"), result("c")]
    assert shapes(msgs) == [((0, 1), "partial"), ((2,), "single"), ((3, 4), "complete")]


def test_group_stops_at_a_mismatched_result() -> None:
    msgs = [call("a", "b"), result("a"), result("zzz"), result("b")]
    assert shapes(msgs) == [((0, 1), "partial"), ((2,), "loose"), ((3,), "loose")]


def test_a_result_without_tool_call_id_is_mismatched() -> None:
    assert shapes([call("a"), result(None), result("a")]) == [
        ((0,), "partial"),
        ((1,), "loose"),
        ((2,), "loose"),
    ]


def test_group_stops_at_a_repeated_result() -> None:
    msgs = [call("a", "b"), result("a"), result("a"), result("b")]
    assert shapes(msgs) == [((0, 1), "partial"), ((2,), "loose"), ((3,), "loose")]


def test_a_result_repeated_after_the_group_is_complete_is_loose() -> None:
    assert shapes([call("a"), result("a"), result("a")]) == [((0, 1), "complete"), ((2,), "loose")]


def test_group_stops_when_all_results_are_found_and_later_messages_stay_put() -> None:
    msgs = [call("a"), result("a"), user("after")]
    assert shapes(msgs) == [((0, 1), "complete"), ((2,), "single")]


def test_group_open_at_end_of_list_is_partial_and_its_moved_messages_follow() -> None:
    msgs = [call("a", "b"), user("x"), result("b"), user("y")]
    assert shapes(msgs) == [((0, 2), "partial"), ((1,), "single"), ((3,), "single")]


def test_call_without_any_result_is_partial() -> None:
    assert shapes([call("a")]) == [((0,), "partial")]


def test_result_before_any_call_is_loose() -> None:
    assert shapes([result("a"), call("a"), result("a")]) == [((0,), "loose"), ((1, 2), "complete")]


def test_assistant_with_empty_tool_calls_is_single() -> None:
    msgs = [Message(role="assistant", content="hi", tool_calls=()), result("a")]
    assert shapes(msgs) == [((0,), "single"), ((1,), "loose")]


def test_tool_calls_on_a_non_assistant_role_do_not_open_a_group() -> None:
    odd = Message(role="user", tool_calls=[ToolCall(id="a", name="f")])
    assert shapes([odd, result("a")]) == [((0,), "single"), ((1,), "loose")]


def test_duplicate_call_ids_in_one_message_need_one_result() -> None:
    assert shapes([call("a", "a"), result("a"), result("a")]) == [((0, 1), "complete"), ((2,), "loose")]


def test_accepts_any_object_with_role_tool_calls_and_tool_call_id() -> None:
    @attrs.frozen
    class Row:
        role: str
        tool_calls: tuple[ToolCall, ...] | None = None
        tool_call_id: str | None = None

    rows = [Row("assistant", (ToolCall(id="a", name="f"),)), Row("user"), Row("tool", None, "a")]
    assert [(u.at, u.shape) for u in group_tool_calls(rows)] == [((0, 2), "complete"), ((1,), "single")]


# --- group_tool_calls: properties ---------------------------------------------------------------------

IDS = "abcd"

_message = st.one_of(
    st.lists(st.sampled_from(IDS), min_size=1, max_size=3, unique=True).map(lambda ids: call(*ids)),
    st.one_of(st.none(), st.sampled_from(IDS + "e")).map(result),
    st.sampled_from(
        [
            user(),
            Message(role="system", content="s"),
            Message(role="assistant", content="plain"),
            Message(role="notice", content="n"),
            Message(role="system", kind=WellKnownKinds.EVENT_MARKER.value, content=""),
        ]
    ),
)
histories = st.lists(_message, max_size=14)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(histories)
def test_every_index_appears_in_exactly_one_unit(msgs: list[Message]) -> None:
    units = group_tool_calls(msgs)
    flat = [k for u in units for k in u.at]
    assert sorted(flat) == list(range(len(msgs)))


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(histories)
def test_unit_shapes_match_their_messages(msgs: list[Message]) -> None:
    for u in group_tool_calls(msgs):
        first = msgs[u.at[0]]
        if u.shape in ("complete", "partial"):
            assert first.role == "assistant" and first.tool_calls
            ids = {c.id for c in first.tool_calls}
            got = [msgs[k].tool_call_id for k in u.at[1:]]
            assert all(msgs[k].role == "tool" for k in u.at[1:])
            assert len(got) == len(set(got)) and set(got) <= ids
            if u.shape == "complete":
                assert set(got) == ids
            else:
                assert set(got) < ids
        else:
            assert len(u.at) == 1
            is_tool = first.role == "tool"
            assert (u.shape == "loose") == is_tool
            assert not (first.role == "assistant" and first.tool_calls)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(histories)
def test_results_never_precede_their_call_in_output_order(msgs: list[Message]) -> None:
    units = group_tool_calls(msgs)
    # Unit order is the order after the moves: units are sorted by their first index.
    heads = [u.at[0] for u in units]
    assert heads == sorted(heads)
    for u in units:
        # Grouped results come after their call and in the order they were found (increasing index).
        assert list(u.at) == sorted(u.at)
    order = [k for u in units for k in u.at]
    for pos, k in enumerate(order):
        m = msgs[k]
        if m.role != "tool":
            continue
        unit = next(u for u in units if k in u.at)
        if unit.shape == "loose":
            continue
        # A grouped result directly follows its call or a sibling result.
        prev = msgs[order[pos - 1]]
        assert pos > 0 and (prev.role == "tool" or prev is msgs[unit.at[0]])
        assert m.tool_call_id in {c.id for c in msgs[unit.at[0]].tool_calls or ()}


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(histories)
def test_a_scan_stops_only_where_the_seed_says(msgs: list[Message]) -> None:
    def is_call(m: Message) -> bool:
        return m.role == "assistant" and bool(m.tool_calls)

    for u in group_tool_calls(msgs):
        if u.shape not in ("complete", "partial"):
            continue
        head = u.at[0]
        ids = {c.id for c in msgs[head].tool_calls or ()}
        # The scan stopped at the first later tool message or call it did not take (or at the end).
        stop = next(
            (
                k
                for k in range(head + 1, len(msgs))
                if k not in u.at and (msgs[k].role == "tool" or is_call(msgs[k]))
            ),
            len(msgs),
        )
        found = {msgs[k].tool_call_id for k in u.at[1:]}
        assert all(k < stop for k in u.at)
        if u.shape == "complete" or stop == len(msgs):
            continue
        stopper = msgs[stop]
        bad_result = stopper.role == "tool" and (
            stopper.tool_call_id not in ids or stopper.tool_call_id in found
        )
        assert is_call(stopper) or bad_result


@settings(max_examples=200, deadline=None)
@given(histories)
def test_grouping_is_deterministic_and_does_not_touch_input(msgs: list[Message]) -> None:
    before = copy.deepcopy(msgs)
    assert group_tool_calls(msgs) == group_tool_calls(msgs)
    assert msgs == before


# --- drop_control_kinds ---------------------------------------------------------------------------


def test_drop_control_kinds_drops_event_markers_only_and_keeps_objects() -> None:
    marker = Message(role="system", kind="event-marker", content="")
    delegation = Message(role="notice", kind=WellKnownKinds.CROSS_SESSION_DELEGATION.value, content="d")
    plain = user()
    msgs = [marker, delegation, plain]
    out = drop_control_kinds(msgs)
    assert out == [delegation, plain]
    assert out[0] is delegation and out[1] is plain
    assert msgs == [marker, delegation, plain] and out is not msgs


def test_drop_control_kinds_covers_every_control_kind_and_enum_values() -> None:
    msgs = [Message(role="system", kind=k) for k in CONTROL_KINDS]
    msgs.append(Message(role="system", kind=WellKnownKinds.EVENT_MARKER))
    assert drop_control_kinds(msgs) == []


# --- history_for_model ------------------------------------------------------------------------------


def test_history_for_model_uses_visible_content() -> None:
    envelope = Message(
        role="assistant",
        content='{"reply": "好的"}',
        metadata={WellKnownMetadataKeys.VISIBLE_CONTENT.value: "好的", "turnId": "t1"},
    )
    (out,) = history_for_model([envelope])
    assert out.content == "好的"
    assert out.metadata == envelope.metadata and out.role == "assistant"
    assert envelope.content == '{"reply": "好的"}'


def test_history_for_model_ignores_non_string_visible_content() -> None:
    m = Message(role="assistant", content="c", metadata={"visibleContent": 3})
    assert history_for_model([m])[0] is m


def test_history_for_model_keeps_the_object_when_visible_content_equals_content() -> None:
    m = Message(role="assistant", content="c", metadata={"visibleContent": "c"})
    assert history_for_model([m])[0] is m
    empty = Message(role="assistant", content=None, metadata={"visibleContent": ""})
    assert history_for_model([empty])[0].content == ""


def test_history_for_model_drops_control_kinds_partial_and_loose_units() -> None:
    msgs = [
        user("q"),
        Message(role="system", kind="event-marker", content=""),
        call("a", "b"),
        result("a"),
        user("mid"),
        call("c"),
        result("c"),
        result("orphan"),
    ]
    out = history_for_model(msgs)
    assert out == [user("q"), user("mid"), call("c"), result("c")]


def test_history_for_model_moves_interleaved_messages_after_their_group() -> None:
    a, u1, r, u2 = call("a"), user("x"), result("a"), user("y")
    out = history_for_model([a, u1, r, u2])
    assert [id(m) for m in out] == [id(a), id(r), id(u1), id(u2)]


def test_history_for_model_control_kind_between_call_and_result_does_not_break_the_group() -> None:
    marker = Message(role="system", kind="event-marker")
    a, r = call("a"), result("a")
    assert history_for_model([a, marker, r]) == [a, r]


def test_history_for_model_returns_same_objects_and_new_list() -> None:
    msgs = [user(), call("a"), result("a"), Message(role="assistant", content="done")]
    out = history_for_model(msgs)
    assert out is not msgs
    assert all(o is m for o, m in zip(out, msgs, strict=True))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            _message,
            st.text(max_size=5).map(
                lambda t: Message(role="assistant", content="raw", metadata={"visibleContent": t})
            ),
        ),
        max_size=14,
    )
)
def test_history_for_model_gives_valid_tool_adjacency(msgs: list[Message]) -> None:
    before = copy.deepcopy(msgs)
    out = history_for_model(msgs)
    assert msgs == before  # input untouched, metadata dicts included
    assert all(m.kind not in CONTROL_KINDS for m in out)
    i = 0
    while i < len(out):
        m = out[i]
        assert m.role != "tool", "a tool result outside a complete group reached the model"
        if m.role == "assistant" and m.tool_calls:
            ids = {c.id for c in m.tool_calls}
            j = i + 1
            seen: list[str | None] = []
            while j < len(out) and out[j].role == "tool":
                seen.append(out[j].tool_call_id)
                j += 1
            assert sorted(seen, key=str) == sorted(ids)  # every call answered exactly once, adjacent
            i = j
        else:
            i += 1
    # Nothing but control kinds, partial and loose units is dropped.
    kept = drop_control_kinds(msgs)
    dropped = {k for u in group_tool_calls(kept) if u.shape in ("partial", "loose") for k in u.at}
    assert len(out) == len(kept) - len(dropped)
