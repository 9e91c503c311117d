"""Tests for promptkit/chat/egress.py: the mandatory exit (issue 2 §3, pipeline seed §3, §10)."""

from __future__ import annotations

import copy
import json

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from promptkit.chat.egress import (
    CUSTOM_ROLE_MAP,
    CUSTOM_ROLE_PREFIX,
    KIND_PREFIX,
    TOOL_IMAGES_NOTE,
    prepare_llm_messages,
    to_llm_role,
    tool_images_note,
    well_formed,
)
from promptkit.chat.message import (
    CONTROL_KINDS,
    WELL_KNOWN_ROLES,
    Message,
    ToolCall,
    WellKnownKinds,
    to_openai_dict,
)

DELEGATION = WellKnownKinds.CROSS_SESSION_DELEGATION.value
HOST_NOTICE = WellKnownKinds.HOST_NOTICE.value


def prep_one(message: Message) -> Message:
    (out,) = prepare_llm_messages([message])
    return out


# --- role normalization -------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["system", "user", "assistant", "tool"])
def test_well_known_roles_are_unchanged(role: str) -> None:
    assert to_llm_role(role) == role
    m = Message(role=role, content="x")
    assert prep_one(m) is m


def test_notice_maps_to_system_through_the_custom_role_map() -> None:
    assert CUSTOM_ROLE_MAP["notice"] == "system"
    assert to_llm_role("notice") == "system"
    assert prep_one(Message(role="notice", content="x")).role == "system"


@pytest.mark.parametrize("role", ["observation", "event", "", "System", "USER", "tool_result", "通知"])
def test_any_other_role_falls_back_to_system(role: str) -> None:
    assert to_llm_role(role) == "system"
    assert prep_one(Message(role=role, content="x")).role == "system"


# --- prefixes --------------------------------------------------------------------------------------


def test_seed_prefix_literals() -> None:
    assert KIND_PREFIX == {DELEGATION: "[跨会话委派]", HOST_NOTICE: "[宿主通知]"}
    assert CUSTOM_ROLE_PREFIX == {"notice": "[系统通知]"}


def test_notice_gets_the_role_prefix_joined_by_one_space() -> None:
    assert prep_one(Message(role="notice", content="服务重启")).content == "[系统通知] 服务重启"


@pytest.mark.parametrize(("kind", "prefix"), [(DELEGATION, "[跨会话委派]"), (HOST_NOTICE, "[宿主通知]")])
@pytest.mark.parametrize("role", ["notice", "system", "user", "observation"])
def test_kind_prefix_wins_over_the_role_prefix(kind: str, prefix: str, role: str) -> None:
    out = prep_one(Message(role=role, kind=kind, content="做这件事"))
    assert out.content == f"{prefix} 做这件事"
    assert "[系统通知]" not in out.content
    assert out.kind == kind  # the kind is kept


def test_unknown_roles_and_kinds_get_no_prefix() -> None:
    out = prep_one(Message(role="observation", kind="my-plugin-kind", content="x"))
    assert out.content == "x" and out.role == "system"


def test_well_known_roles_get_no_role_prefix() -> None:
    for role in WELL_KNOWN_ROLES:
        m = Message(role=role, content="x")
        assert prep_one(m).content == "x"


@pytest.mark.parametrize("content", [None, ""])
def test_prefix_only_on_non_empty_string_content(content: str | None) -> None:
    out = prep_one(Message(role="notice", kind=DELEGATION, content=content))
    assert out.content == content
    assert out.role == "system"


def test_prefix_keeps_leading_whitespace_of_the_content() -> None:
    assert prep_one(Message(role="notice", content=" x")).content == "[系统通知]  x"


def test_prefix_is_never_stacked() -> None:
    once = prep_one(Message(role="notice", content="hi"))
    assert prep_one(once).content == "[系统通知] hi"
    already = Message(role="user", kind=HOST_NOTICE, content="[宿主通知] done")
    assert prep_one(already) is already


@pytest.mark.parametrize(
    ("role", "kind", "content"),
    [
        ("notice", None, "[系统通知]abc"),
        ("system", DELEGATION, "[跨会话委派]去查"),
        ("user", HOST_NOTICE, "[宿主通知]"),
    ],
)
def test_content_that_already_starts_with_the_prefix_gets_no_second_one(
    role: str, kind: str | None, content: str
) -> None:
    # The reference's guard is startsWith(prefix): no space needed after it.
    out = prep_one(Message(role=role, kind=kind, content=content))
    assert out.content == content


# --- list and object identity -------------------------------------------------------------------------


def test_returns_a_new_list_even_when_nothing_changes() -> None:
    msgs = [Message(role="user", content="a"), Message(role="assistant", content="b")]
    out = prepare_llm_messages(msgs)
    assert out == msgs and out is not msgs
    assert all(o is m for o, m in zip(out, msgs, strict=True))


def test_changed_messages_are_copies_and_the_input_is_untouched() -> None:
    notice = Message(role="notice", content="x", metadata={"turnId": "t"})
    user = Message(role="user", content="y")
    msgs = [notice, user]
    before = copy.deepcopy(msgs)
    out = prepare_llm_messages(msgs)
    assert msgs == before and msgs[0] is notice
    assert out[0] is not notice and out[1] is user
    assert out[0].metadata == {"turnId": "t"}
    assert attrs.evolve(out[0], role="notice", content="x") == notice  # only role and content changed


def test_accepts_a_tuple() -> None:
    msgs = (Message(role="notice", content="x"),)
    assert [m.role for m in prepare_llm_messages(msgs)] == ["system"]


# --- control kinds ------------------------------------------------------------------------------------


def test_control_kinds_are_not_dropped() -> None:
    msgs = [Message(role="system", kind=k, content="") for k in CONTROL_KINDS]
    msgs.append(Message(role="notice", kind=WellKnownKinds.EVENT_MARKER.value, content="分隔"))
    out = prepare_llm_messages(msgs)
    assert len(out) == len(msgs)
    assert [m.kind for m in out] == [m.kind for m in msgs]
    assert out[0] is msgs[0]


# --- well-formed unicode ------------------------------------------------------------------------------


def test_lone_surrogates_become_replacement_characters() -> None:
    out = prep_one(Message(role="user", content="a\ud800b\udfffc"))
    assert out.content == "a\ufffdb\ufffdc"
    json.dumps(to_openai_dict(out), ensure_ascii=False).encode("utf-8")


def test_a_surrogate_pair_is_joined_into_one_character() -> None:
    assert well_formed("\ud83d\ude00") == "\U0001f600"
    assert well_formed("ok") == "ok"


def test_surrogates_are_fixed_before_the_prefix_check() -> None:
    out = prep_one(Message(role="notice", content="\ud800"))
    assert out.content == "[系统通知] \ufffd"


# --- tool results carrying images ---------------------------------------------------------------------


def _call(*ids: str) -> Message:
    return Message(role="assistant", tool_calls=[ToolCall(id=i, name="look") for i in ids])


def test_tool_images_move_to_a_user_message_naming_the_tool_call() -> None:
    tool = Message(role="tool", tool_call_id="c1", content="截图完成", images=["data:image/png;base64,AA"])
    out = prepare_llm_messages([_call("c1"), tool])
    assert [m.role for m in out] == ["assistant", "tool", "user"]
    assert out[1].content == "截图完成" and out[1].images is None and out[1].tool_call_id == "c1"
    assert out[2].images == ("data:image/png;base64,AA",)
    assert out[2].content == "[以下图片是工具调用 c1 的返回内容]"
    assert out[2].content == tool_images_note(["c1"]) == TOOL_IMAGES_NOTE.format(ids="c1")
    assert tool.images == ("data:image/png;base64,AA",)  # input untouched


def test_parallel_tool_results_share_one_image_message_naming_every_source_call() -> None:
    t1 = Message(role="tool", tool_call_id="a", content="1", images=["i1"])
    t2 = Message(role="tool", tool_call_id="b", content="2")
    t3 = Message(role="tool", tool_call_id="c", content="3", images=["i3", "i4"])
    after = Message(role="assistant", content="done")
    out = prepare_llm_messages([_call("a", "b", "c"), t1, t2, t3, after])
    assert [m.role for m in out] == ["assistant", "tool", "tool", "tool", "user", "assistant"]
    assert [m.tool_call_id for m in out[1:4]] == ["a", "b", "c"]
    assert all(m.images is None for m in out[1:4])
    assert out[2] is t2
    assert out[4].images == ("i1", "i3", "i4")
    assert out[4].content == "[以下图片是工具调用 a、c 的返回内容]"
    assert out[5] is after


def test_each_run_of_tool_results_gets_its_own_image_message() -> None:
    out = prepare_llm_messages([
        _call("a"), Message(role="tool", tool_call_id="a", images=["x"]),
        Message(role="user", content="再看"),
        _call("b"), Message(role="tool", tool_call_id="b", images=["y"]),
    ])  # fmt: skip
    carriers = [m for m in out if m.role == "user" and m.images]
    assert [(m.content, m.images) for m in carriers] == [
        (tool_images_note(["a"]), ("x",)),
        (tool_images_note(["b"]), ("y",)),
    ]
    assert [m.role for m in out] == ["assistant", "tool", "user", "user", "assistant", "tool", "user"]


def test_a_tool_result_without_call_id_is_named_by_a_question_mark() -> None:
    out = prepare_llm_messages([Message(role="tool", images=["x"])])
    assert out[1].content == "[以下图片是工具调用 ? 的返回内容]"


def test_tool_images_at_the_end_of_the_list_are_appended() -> None:
    out = prepare_llm_messages([_call("a"), Message(role="tool", tool_call_id="a", images=["x"])])
    assert [m.role for m in out] == ["assistant", "tool", "user"]


def test_images_on_other_roles_are_left_alone() -> None:
    m = Message(role="user", content="看图", images=["x"])
    assert prep_one(m) is m


# --- properties --------------------------------------------------------------------------------------

_chars = st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr), st.sampled_from("[] "))
_pieces = st.one_of(
    st.text(alphabet=_chars, max_size=6), st.sampled_from(["[系统通知]", "[跨会话委派]", "[宿主通知]", " "])
)
_texts = st.lists(_pieces, max_size=4).map("".join)
_roles = st.one_of(
    st.sampled_from(["system", "user", "assistant", "tool", "notice", "observation"]), st.text(max_size=4)
)
_kinds = st.one_of(st.none(), st.sampled_from([DELEGATION, HOST_NOTICE, "event-marker", "x-kind"]))


@st.composite
def _messages(draw: st.DrawFn) -> Message:
    role = draw(_roles)
    images = draw(st.one_of(st.none(), st.lists(st.sampled_from(["a.png", "b.png"]), min_size=1, max_size=2)))
    return Message(
        role=role,
        kind=draw(_kinds),
        content=draw(st.one_of(st.none(), _texts)),
        tool_call_id=draw(st.one_of(st.none(), st.sampled_from(["c1", "c2"]))),
        images=images,
        metadata=draw(st.one_of(st.none(), st.just({"k": [1]}))),
    )


message_lists = st.lists(_messages(), max_size=8)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(message_lists)
def test_idempotent(msgs: list[Message]) -> None:
    once = prepare_llm_messages(msgs)
    twice = prepare_llm_messages(once)
    assert twice == once
    assert all(a is b for a, b in zip(twice, once, strict=True))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(message_lists)
def test_never_emits_a_role_outside_the_four(msgs: list[Message]) -> None:
    assert {m.role for m in prepare_llm_messages(msgs)} <= set(WELL_KNOWN_ROLES)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(message_lists)
def test_content_always_serializes_as_utf8_json(msgs: list[Message]) -> None:
    for m in prepare_llm_messages(msgs):
        if isinstance(m.content, str):  # no lone surrogate left: UTF-8 can encode every character
            assert not any(0xD800 <= ord(c) <= 0xDFFF for c in m.content), repr(m.content)
        data = json.dumps({"role": m.role, "content": m.content}, ensure_ascii=False).encode("utf-8")
        assert json.loads(data.decode("utf-8")) == {"role": m.role, "content": m.content}


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(message_lists)
def test_input_untouched_and_unchanged_messages_are_the_same_object(msgs: list[Message]) -> None:
    before = copy.deepcopy(msgs)
    out = prepare_llm_messages(msgs)
    assert msgs == before
    for m in msgs:
        needs_change = (
            m.role not in WELL_KNOWN_ROLES
            or (m.role == "tool" and m.images)
            or (isinstance(m.content, str) and well_formed(m.content) != m.content)
            or (bool(m.content) and (m.kind in KIND_PREFIX or m.role in CUSTOM_ROLE_PREFIX))
        )
        if not needs_change:
            assert any(o is m for o in out)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(message_lists)
def test_nothing_is_dropped_and_prefixed_content_ends_with_the_original(msgs: list[Message]) -> None:
    out = prepare_llm_messages(msgs)
    generated = [
        o
        for o in out
        if o.role == "user" and o.content is not None and o.content.startswith("[以下图片是工具调用 ")
    ]
    # one carrier per run of consecutive tool results that has images, holding all of them in order
    runs: list[list[Message]] = []
    in_run = False
    for m in msgs:
        if to_llm_role(m.role) == "tool":
            if not in_run:
                runs.append([])
            runs[-1].append(m)
            in_run = True
        else:
            in_run = False
    expected = [
        (
            tool_images_note([m.tool_call_id for m in run if m.images]),
            tuple(i for m in run for i in m.images or ()),
        )
        for run in runs
        if any(m.images for m in run)
    ]
    assert [(g.content, g.images) for g in generated] == expected
    originals = [o for o in out if not any(o is g for g in generated)]
    assert len(originals) == len(msgs)
    for m, o in zip(msgs, originals, strict=True):
        assert (o.kind, o.tool_call_id, o.role) == (m.kind, m.tool_call_id, to_llm_role(m.role))
        if isinstance(m.content, str) and m.content:
            assert o.content is not None and o.content.endswith(well_formed(m.content))
        else:
            assert o.content == m.content
