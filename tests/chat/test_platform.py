"""Tests for promptkit/chat/platform.py: the platform layer (schema-message seed)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import assume, given, settings, strategies as st

from promptkit.chat.attachments import (
    ATTACHMENT_REF_KINDS,
    AttachmentRef,
    format_attachment_ref,
    parse_attachment_refs,
)
from promptkit.chat.identity import get_sender_label, prefix_sender
from promptkit.chat.message import CONTROL_KINDS, Message, WellKnownKinds
from promptkit.chat.platform import (
    ATTACHMENT_KINDS,
    PRIVATE_SESSION,
    TRIGGER_TYPES,
    Actor,
    ForwardedChat,
    ForwardFacts,
    FromTurn,
    HostNotice,
    IncomingMessage,
    MessageAttachment,
    ModelInfo,
    OutgoingMessage,
    PlatformMessageError,
    ReplyTo,
    SessionTypeDecl,
    arrival_tag,
    build_incoming_content,
    forward_placeholder,
    host_notice_message,
    one_speaker,
    outbound_marker_message,
    outbound_media_message,
    reply_quote_line,
    self_initiated_actor,
    session_type_of,
    was_addressed,
    with_forwards,
)


def incoming(content: str = "hi", **kw: Any) -> IncomingMessage:
    return IncomingMessage(content, "s1", "onebot", **kw)


# --- IncomingMessage ----------------------------------------------------------------------------------


def test_incoming_required_fields_then_keyword_only_optionals_defaulting_to_none() -> None:
    fields = attrs.fields(IncomingMessage)
    assert [f.name for f in fields[:3]] == ["content", "session_id", "platform"]
    assert all(f.default is attrs.NOTHING for f in fields[:3])
    for f in fields[3:]:
        assert f.default is None and f.kw_only, f.name
    assert {f.name for f in fields} == {
        "content", "session_id", "platform", "user_id", "nickname", "message_id", "attachments",
        "attachment_descriptions", "session_type", "self_id", "source", "arrival", "owner_approved",
        "group_name", "group_id", "sender_role", "sender_title", "self_role", "self_title", "reply_to",
        "forwards", "notice_type", "notice_target_is_self", "text", "trigger_type", "actor", "from_turn",
        "host_notice",
    }  # fmt: skip


def test_incoming_is_frozen_hashable_and_stores_sequences_as_tuples() -> None:
    m = incoming(
        attachments=[MessageAttachment("image", url="http://x/a.png")],
        attachment_descriptions=["猫"],
        forwards=[ForwardedChat("f1", "c")],
    )
    assert isinstance(m.attachments, tuple) and isinstance(m.forwards, tuple)
    assert m.attachment_descriptions == ("猫",)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        m.content = "x"  # type: ignore[misc]
    notice = incoming(
        source="tools",
        actor=self_initiated_actor("onebot"),
        host_notice=HostNotice("background-task", facts={"exit": 0}),
        text={"k": 1},
    )
    assert isinstance(hash(notice), int)


@pytest.mark.parametrize("trigger", TRIGGER_TYPES)
def test_every_trigger_type_is_accepted(trigger: str) -> None:
    assert incoming(trigger_type=trigger).trigger_type == trigger


def test_a_bad_trigger_type_is_rejected_naming_field_and_value() -> None:
    with pytest.raises(PlatformMessageError, match=r"IncomingMessage\.trigger_type.*'mention'"):
        incoming(trigger_type="mention")
    assert issubclass(PlatformMessageError, ValueError)


@pytest.mark.parametrize("field", ["sender_role", "self_role"])
def test_group_roles_are_validated(field: str) -> None:
    for role in ("owner", "admin", "member"):
        assert getattr(incoming(**{field: role}), field) == role
    with pytest.raises(PlatformMessageError, match=field):
        incoming(**{field: "moderator"})


@pytest.mark.parametrize("bad", [-1, True, 1.5])
def test_arrival_is_a_non_negative_int(bad: object) -> None:
    with pytest.raises(PlatformMessageError, match="arrival"):
        incoming(arrival=bad)
    assert incoming(arrival=0).arrival == 0


def test_owner_approved_requires_source() -> None:
    with pytest.raises(PlatformMessageError, match="owner_approved"):
        incoming(owner_approved=True)
    assert incoming(owner_approved=True, source="scheduler").owner_approved is True
    assert incoming(owner_approved=False).owner_approved is False


def test_host_notice_requires_source() -> None:
    with pytest.raises(PlatformMessageError, match=r"host_notice.*source"):
        incoming(host_notice=HostNotice("background-task"))


@pytest.mark.parametrize(
    ("field", "value"),
    [("user_id", "1"), ("nickname", "n"), ("session_type", "group"), ("trigger_type", "direct")],
)
def test_host_notice_sets_no_speaker_fields(field: str, value: str) -> None:
    with pytest.raises(PlatformMessageError, match=f"does not set {field}"):
        incoming(source="tools", host_notice=HostNotice("background-task"), **{field: value})


def test_from_turn_excludes_actor() -> None:
    turn = FromTurn("onebot", [Actor("onebot", "1")], user_id="1")
    assert incoming(source="subtask", from_turn=turn).from_turn == turn
    with pytest.raises(PlatformMessageError, match="actor"):
        incoming(source="subtask", from_turn=turn, actor=Actor("onebot", "1"))


def test_descriptions_are_aligned_with_attachments() -> None:
    one = [MessageAttachment("image", url="u")]
    assert incoming(attachments=one, attachment_descriptions=[None]).attachment_descriptions == (None,)
    with pytest.raises(PlatformMessageError, match="2 descriptions for 1 attachments"):
        incoming(attachments=one, attachment_descriptions=["a", "b"])
    with pytest.raises(PlatformMessageError, match="attachment_descriptions"):
        incoming(attachment_descriptions=["a"])


# --- small value classes ------------------------------------------------------------------------------


def test_reply_to_and_host_notice_defaults() -> None:
    assert ReplyTo("55") == ReplyTo(message_id="55", content=None, user_id=None, nickname=None)
    notice = HostNotice("background-task")
    assert (notice.id, notice.untrusted, notice.report_only, notice.reply_to, notice.facts, notice.text) == (
        None,
        None,
        None,
        None,
        None,
        None,
    )


def test_host_notice_for_outbound_keeps_kind_and_id_only() -> None:
    full = HostNotice(
        "background-task", id="t1", untrusted="<x>", report_only=True, reply_to="9", facts={"a": 1}
    )
    assert full.for_outbound() == HostNotice("background-task", id="t1")


def test_from_turn_nests_and_stores_participants_as_tuple() -> None:
    inner = FromTurn("webui", [Actor("webui", "owner")])
    outer = FromTurn(
        "onebot", [Actor("onebot", "1"), Actor("onebot", "2")], user_id="1", source="tasks", from_turn=inner
    )
    assert outer.participants == (Actor("onebot", "1"), Actor("onebot", "2"))
    assert outer.from_turn is inner and inner.user_id is None and inner.source is None


def test_forward_facts_defaults_and_rules() -> None:
    facts = ForwardFacts(3, ["A(1)", "B(2)"], "摘要")
    assert facts.participants == ("A(1)", "B(2)") and facts.unlisted is None and facts.cut_off is None
    assert ForwardFacts(30, [f"p{i}" for i in range(8)], "t", unlisted=4, cut_off=True).cut_off is True
    with pytest.raises(PlatformMessageError, match="at most 8"):
        ForwardFacts(9, [f"p{i}" for i in range(9)], "t")
    with pytest.raises(PlatformMessageError, match="cut_off"):
        ForwardFacts(1, [], "t", cut_off=False)  # type: ignore[arg-type]
    with pytest.raises(PlatformMessageError, match="count"):
        ForwardFacts(-1, [], "t")
    with pytest.raises(PlatformMessageError, match="unlisted"):
        ForwardFacts(1, [], "t", unlisted=-2)


def test_forwarded_chat_id_must_not_contain_a_double_quote() -> None:
    assert ForwardedChat("a b", "c").facts is None
    with pytest.raises(PlatformMessageError, match=r"ForwardedChat\.id.*'a\"b'"):
        ForwardedChat('a"b', "c")


def test_message_attachment_kind_and_address() -> None:
    for kind in ATTACHMENT_KINDS:
        assert MessageAttachment(kind).address is None  # type: ignore[arg-type]
    with pytest.raises(PlatformMessageError, match=r"MessageAttachment\.kind.*'sticker'"):
        MessageAttachment("sticker")  # type: ignore[arg-type]
    assert (
        MessageAttachment("image", data="/tmp/a.png", url="http://x/a.png", ref="data:/a.png").address
        == "data:/a.png"
    )
    assert MessageAttachment("image", data="/tmp/a.png", url="http://x/a.png").address == "http://x/a.png"
    assert MessageAttachment("file", data="/tmp/a.pdf").address == "/tmp/a.pdf"
    assert MessageAttachment("image", data="data:image/png;base64,AA").address is None
    assert MessageAttachment("image", data="base64://AAAA").address is None


def test_model_info_total() -> None:
    assert ModelInfo(prompt_tokens=100, completion_tokens=20).total_tokens == 120
    assert ModelInfo(provider="deepseek", model="deepseek-chat", prompt_tokens=100).total_tokens is None
    with pytest.raises(PlatformMessageError, match="prompt_tokens"):
        ModelInfo(prompt_tokens=-1)


# --- OutgoingMessage ------------------------------------------------------------------------------------


def test_outgoing_required_fields_then_keyword_only_optionals() -> None:
    fields = attrs.fields(OutgoingMessage)
    assert [f.name for f in fields[:2]] == ["content", "session_id"]
    assert [f.name for f in fields[2:]] == [
        "text", "platform", "host_notice", "reply_to", "markup", "source", "call_id", "turn_id", "model_info",
        "attachments",
    ]  # fmt: skip
    assert all(f.default is None and f.kw_only for f in fields[2:])


def test_outgoing_source_is_validated() -> None:
    for source in ("agent", "system", "command"):
        assert OutgoingMessage("x", "s", source=source).source == source
    with pytest.raises(PlatformMessageError, match=r"OutgoingMessage\.source.*'plugin'"):
        OutgoingMessage("x", "s", source="plugin")  # type: ignore[arg-type]


def test_outgoing_host_notice_carries_kind_and_id_only() -> None:
    ok = OutgoingMessage("done", "s", host_notice=HostNotice("background-task", id="t1"))
    assert ok.host_notice == HostNotice("background-task", id="t1")
    with pytest.raises(PlatformMessageError, match="host_notice"):
        OutgoingMessage("done", "s", host_notice=HostNotice("background-task", untrusted="x"))


# --- forwards ----------------------------------------------------------------------------------------------


def test_forward_placeholder_format() -> None:
    assert forward_placeholder("7231") == '<forward id="7231">[合并转发消息]</forward>'
    assert forward_placeholder("") == '<forward id="">[合并转发消息]</forward>'


def test_forward_placeholder_rejects_a_double_quote_naming_the_id() -> None:
    with pytest.raises(ValueError, match=r"forward_placeholder.*'x\"y'"):
        forward_placeholder('x"y')


def test_with_forwards_replaces_in_place_and_leaves_unknown_placeholders() -> None:
    text = f"前 {forward_placeholder('1')} 中 {forward_placeholder('2')} 后 {forward_placeholder('1')}"
    out = with_forwards(text, [ForwardedChat("1", "[A]: 你好")])
    assert out == f"前 [A]: 你好 中 {forward_placeholder('2')} 后 [A]: 你好"


def test_with_forwards_without_forwards_returns_content() -> None:
    text = f"x {forward_placeholder('1')}"
    assert with_forwards(text, None) is text
    assert with_forwards(text, []) is text


def test_with_forwards_does_not_rescan_expansions() -> None:
    # Expansion off: the adapter's expansion is the placeholder itself.
    text = forward_placeholder("1") + forward_placeholder("2")
    fwd = [ForwardedChat("1", forward_placeholder("2")), ForwardedChat("2", "二")]
    assert with_forwards(text, fwd) == forward_placeholder("2") + "二"


def test_with_forwards_ignores_look_alikes() -> None:
    look_alikes = [
        '<forward id="1">合并转发消息</forward>',
        "<forward id='1'>[合并转发消息]</forward>",
        '<forward  id="1">[合并转发消息]</forward>',
        '<forward id="1">[合并转发消息]</Forward>',
        '<forward id="10">[合并转发消息]</forward>',
    ]
    for text in look_alikes:
        assert with_forwards(text, [ForwardedChat("1", "X")]) == text


def test_with_forwards_ids_are_literals() -> None:
    fwd = [ForwardedChat("a.b", "DOT"), ForwardedChat("a|b", "BAR")]
    assert with_forwards(forward_placeholder("axb") + forward_placeholder("a|b"), fwd) == (
        forward_placeholder("axb") + "BAR"
    )


def test_with_forwards_duplicate_ids() -> None:
    same = [ForwardedChat("1", "c"), ForwardedChat("1", "c")]
    assert with_forwards(forward_placeholder("1"), same) == "c"
    with pytest.raises(PlatformMessageError, match=r"forwards\[1\].*'1'"):
        with_forwards(forward_placeholder("1"), [ForwardedChat("1", "c"), ForwardedChat("1", "d")])


_ids = st.text(alphabet=st.characters(exclude_characters='"'), max_size=6)
_tricky = st.one_of(
    st.text(max_size=6),
    st.sampled_from(['<forward id="', '">', "[合并转发消息]", "</forward>", "1", '"', "<"]),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(_tricky, max_size=8).map("".join), st.lists(st.tuples(_ids, st.text(max_size=5)), max_size=3))
def test_with_forwards_leaves_text_without_placeholders_unchanged(
    text: str, pairs: list[tuple[str, str]]
) -> None:
    forwards = [ForwardedChat(i, c) for i, c in dict(pairs).items()]
    assume(all(forward_placeholder(f.id) not in text for f in forwards))
    assert with_forwards(text, forwards) == text


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_ids, st.text(max_size=8)), max_size=4, unique_by=lambda p: p[0]),
    st.lists(st.text(alphabet=st.characters(exclude_characters="<"), max_size=6), min_size=5, max_size=5),
)
def test_placeholder_round_trip(pairs: list[tuple[str, str]], fillers: list[str]) -> None:
    forwards = [ForwardedChat(i, c) for i, c in pairs]
    text = fillers[-1] + "".join(fillers[k] + forward_placeholder(f.id) for k, f in enumerate(forwards))
    expected = fillers[-1] + "".join(fillers[k] + f.content for k, f in enumerate(forwards))
    assert with_forwards(text, forwards) == expected


# --- build_incoming_content ---------------------------------------------------------------------------


def test_archive_text_without_speaker_is_the_content() -> None:
    m = incoming("你好", user_id="1", nickname="A")
    assert build_incoming_content(m) == "你好"


def test_archive_text_with_speaker_gets_the_sender_prefix() -> None:
    m = incoming("你好", user_id="1", nickname="A")
    assert build_incoming_content(m, speaker=m) == prefix_sender("你好", "A", "1")
    assert build_incoming_content(m, speaker=m).startswith(f"[{get_sender_label('A', '1')}]: ")


def test_the_speaker_is_the_callers_choice() -> None:
    @attrs.frozen
    class Who:
        nickname: str | None
        user_id: str | None

    m = incoming("你好", user_id="1", nickname="A")
    assert build_incoming_content(m, speaker=Who("B", "2")) == prefix_sender("你好", "B", "2")
    assert build_incoming_content(m, speaker=Who(None, None)) == "你好"


def test_archive_text_expands_forwards_before_the_prefix_and_keeps_the_spoken_content() -> None:
    content = f"看看 {forward_placeholder('f1')} 怎么说"
    m = incoming(content, user_id="1", nickname="A", forwards=[ForwardedChat("f1", "[B]: 明天见")])
    assert build_incoming_content(m, speaker=m) == prefix_sender("看看 [B]: 明天见 怎么说", "A", "1")
    assert m.content == content


def test_reply_quote_is_written_as_the_reference_writes_it() -> None:
    full = incoming("同意", reply_to=ReplyTo("55", content="周五\n聚餐?", user_id="2", nickname="B"))
    assert build_incoming_content(full) == f"同意\n[引用 {get_sender_label('B', '2')} 的消息: 周五\n聚餐?]"
    unknown = incoming("同意", reply_to=ReplyTo("55", content="原文"))
    assert build_incoming_content(unknown) == "同意\n[引用 ? 的消息: 原文]"
    assert reply_quote_line(ReplyTo("55", content="原文", user_id="2")) == "[引用 2 的消息: 原文]"


@pytest.mark.parametrize("quoted", [None, ""])
def test_no_quote_line_for_a_reply_without_text(quoted: str | None) -> None:
    m = incoming("同意", reply_to=ReplyTo("55", content=quoted, user_id="2", nickname="B"))
    assert build_incoming_content(m) == "同意"
    assert reply_quote_line(ReplyTo("55", content=quoted)) is None


def test_attachment_descriptions_are_appended_as_written_never_wrapped_again() -> None:
    # The media plugin writes finished placeholders; the archive text takes them as they are.
    atts = [
        MessageAttachment("image", data="base64://AA", ref="data:/img/cat.png"),
        MessageAttachment("audio", url="http://x/v.mp3"),
        MessageAttachment("file", data="/tmp/表.xlsx", name="表.xlsx"),
        MessageAttachment("video", data="base64://BB"),
    ]
    cat = format_attachment_ref(AttachmentRef("image", "data:/img/cat.png", desc="一只猫 | 橘色"))
    dance = "[视频: 跳舞 | ref:inline]"
    m = incoming("", attachments=atts, attachment_descriptions=[cat, None, "  ", dance])
    text = build_incoming_content(m)
    assert text == f"{cat}\n{dance}"
    assert "[图片: [图片:" not in text
    assert [(r.kind, r.ref) for r in parse_attachment_refs(text)] == [
        (ATTACHMENT_REF_KINDS["image"], "data:/img/cat.png"),
        (ATTACHMENT_REF_KINDS["video"], "inline"),
    ]


def test_archive_text_order_is_prefixed_body_then_quote_then_descriptions() -> None:
    m = incoming(
        "看图",
        user_id="1",
        nickname="A",
        reply_to=ReplyTo("9", content="q", nickname="B"),
        attachments=[MessageAttachment("image", url="u")],
        attachment_descriptions=["[图片: 猫 | ref:u]"],
    )
    assert build_incoming_content(m, speaker=m) == "\n".join(
        [prefix_sender("看图", "A", "1"), "[引用 B 的消息: q]", "[图片: 猫 | ref:u]"]
    )


def test_image_only_message_keeps_the_prefix_line_of_the_empty_body() -> None:
    # The reference prefixes the (empty) body, then joins the descriptions with a newline.
    m = incoming("", user_id="1", attachments=[MessageAttachment("image", url="u")],
                 attachment_descriptions=["[图片: 猫 | ref:u]"])  # fmt: skip
    assert build_incoming_content(m, speaker=m) == "[1]: \n[图片: 猫 | ref:u]"
    assert build_incoming_content(m) == "[图片: 猫 | ref:u]"


_desc = st.one_of(st.none(), st.text(max_size=12), st.sampled_from(["[图片: 猫 | ref:a]", " ", "\n"]))


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.text(max_size=12), st.lists(_desc, max_size=4))
def test_every_non_blank_description_appears_once_verbatim_and_in_order(
    body: str, descs: list[str | None]
) -> None:
    m = incoming(body, attachments=[MessageAttachment("image", url="u")] * len(descs),
                 attachment_descriptions=descs)  # fmt: skip
    text = build_incoming_content(m)
    kept = [d for d in descs if d is not None and d.strip()]
    tail = "\n".join(kept)
    if kept:
        assert text == (f"{body}\n{tail}" if body else tail)
    else:
        assert text == body


def test_empty_message_is_empty_text() -> None:
    assert build_incoming_content(incoming("")) == ""


# --- outbound archiving -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["image", "audio", "video", "file"])
@pytest.mark.parametrize(
    ("source", "role"),
    [("agent", "assistant"), (None, "notice"), ("system", "notice"), ("command", "notice")],
)
def test_outbound_media_message(kind: str, source: str | None, role: str) -> None:
    m = outbound_media_message(kind, "data:/out/x", desc="说明", source=source)
    assert m.kind == f"outbound-{kind}" and m.kind in {k.value for k in WellKnownKinds}
    assert m.role == role
    assert m.content == format_attachment_ref(
        AttachmentRef(kind=ATTACHMENT_REF_KINDS[kind], ref="data:/out/x", desc="说明")
    )
    assert (m.timestamp, m.metadata) == (None, None)


def test_outbound_media_message_file_name_in_desc_and_no_desc() -> None:
    m = outbound_media_message("file", "workspace:/site/主页.html", desc="主页.html", source="agent")
    (ref,) = parse_attachment_refs(m.content or "")
    assert (ref.kind, ref.ref, ref.desc) == (
        ATTACHMENT_REF_KINDS["file"],
        "workspace:/site/主页.html",
        "主页.html",
    )
    assert outbound_media_message("image", "a.png").content == format_attachment_ref(
        AttachmentRef("image", "a.png")
    )


def test_outbound_media_message_rejects_a_bad_kind_or_source() -> None:
    with pytest.raises(ValueError, match="'sticker'"):
        outbound_media_message("sticker", "x")
    with pytest.raises(ValueError, match="'plugin-x'"):
        outbound_media_message("image", "x", source="plugin-x")


def test_outbound_marker_message() -> None:
    assert outbound_marker_message(OutgoingMessage("hi", "s", source="agent")) is None
    assert outbound_marker_message(OutgoingMessage("", "s", source="command")) is None
    m = outbound_marker_message(OutgoingMessage("已重启", "s", source="command"))
    assert m == Message(role="system", content="已重启", kind="event-marker")
    assert m is not None and m.kind in CONTROL_KINDS
    text = {"key": "restart.done", "params": {}}
    with_text = outbound_marker_message(OutgoingMessage("已重启", "s", text=text))
    assert with_text is not None and with_text.metadata == {"text": text}
    assert outbound_marker_message(OutgoingMessage("提示", "s", source="system")) is not None


# --- small judgements --------------------------------------------------------------------------------------


def test_one_speaker() -> None:
    a1 = incoming(user_id="1")
    assert one_speaker([a1]) and one_speaker([a1, incoming("again", user_id="1")])
    assert not one_speaker([a1, incoming(user_id="2")])
    assert not one_speaker([a1, IncomingMessage("x", "s1", "webui", user_id="1")])
    assert not one_speaker([])
    assert not one_speaker([incoming(), incoming()])  # no account, no physical speaker
    assert not one_speaker([incoming(user_id=""), incoming(user_id="")])
    assert not one_speaker([a1, incoming()])
    assert one_speaker([Actor("onebot", "1"), a1])  # anything with platform and user_id


@pytest.mark.parametrize(
    ("trigger", "expected"),
    [
        (None, True),
        ("direct", True),
        ("immediate", True),
        ("interval", False),
        ("idle", False),
        ("proactive", False),
    ],
)
def test_was_addressed_for_a_person(trigger: str | None, expected: bool) -> None:
    assert was_addressed(incoming(trigger_type=trigger)) is expected


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=5), st.sampled_from([None, *TRIGGER_TYPES]))
def test_was_addressed_is_false_for_any_injection(source: str, trigger: str | None) -> None:
    assert was_addressed(incoming(source=source, trigger_type=trigger)) is False


def test_arrival_tag() -> None:
    assert arrival_tag(incoming(arrival=12)) == " #12"
    assert arrival_tag(incoming(arrival=0)) == " #0"
    assert arrival_tag(incoming()) == ""


# --- completed contracts: attachments out, host notices, identities, session types ---------------------------


def test_outgoing_attachments_and_skip_archive() -> None:
    att = MessageAttachment("image", ref="data:/img/a.png", skip_archive=True)
    out = OutgoingMessage("看图", "s", attachments=[att])
    assert out.attachments == (att,) and out.markup is None  # sent whatever markup says
    assert MessageAttachment("image").skip_archive is None


def test_self_initiated_actor_has_no_subject() -> None:
    actor = self_initiated_actor("onebot")
    assert actor == Actor("onebot", "") and actor.user_id == ""
    with pytest.raises(PlatformMessageError, match="platform"):
        self_initiated_actor("")


@pytest.mark.parametrize("bad", [True, None, [1], {"a": 1}])
def test_host_notice_facts_are_flat_strings_or_numbers(bad: object) -> None:
    with pytest.raises(PlatformMessageError, match=r"HostNotice\.facts\['k'\]"):
        HostNotice("background-task", facts={"k": bad})  # type: ignore[dict-item]
    assert HostNotice("x", facts={"a": "s", "b": 1, "c": 2.5}).facts == {"a": "s", "b": 1, "c": 2.5}


def test_host_notice_from_turn_is_on_the_same_platform() -> None:
    turn = FromTurn("onebot", [Actor("onebot", "42")], user_id="42")
    ok = incoming("done", source="bg", host_notice=HostNotice("background-task"), from_turn=turn)
    assert ok.from_turn == turn
    with pytest.raises(PlatformMessageError, match=r"from_turn.*'webui'.*'onebot'"):
        IncomingMessage("done", "s", "onebot", source="bg", host_notice=HostNotice("t"),
                        from_turn=FromTurn("webui", []))  # fmt: skip


def test_a_host_notice_that_continues_no_call_acts_for_no_one() -> None:
    """宿主通知的身份:「不延续某次调用的通知(如插件自己发起的通知),actor用selfInitiatedActor(platform)。
    延续某次工具调用的通知(如 plugin-tools 执行器的后台任务结束通知)不设actor,改带fromTurn」;
    and「actor 是授权身份，不可被 LLM 自由指定」: a real user's identity, or none, is rejected."""
    alone = self_initiated_actor("onebot")
    ok = incoming("done", source="plugin", actor=alone, host_notice=HostNotice("k"))
    assert ok.actor == Actor("onebot", "")
    with pytest.raises(
        PlatformMessageError, match=r"IncomingMessage\.actor: .*self_initiated_actor\('onebot'\); got none"
    ):
        incoming("done", source="plugin", host_notice=HostNotice("k"))
    with pytest.raises(
        PlatformMessageError, match=r"IncomingMessage\.actor: .*got Actor\(platform='onebot', user_id='42'\)"
    ):
        incoming("done", source="plugin", actor=Actor("onebot", "42"), host_notice=HostNotice("k"))
    with pytest.raises(PlatformMessageError, match=r"IncomingMessage\.actor"):  # another platform's
        incoming("done", source="plugin", actor=self_initiated_actor("webui"), host_notice=HostNotice("k"))
    # one that continues a call carries from_turn and no actor (the turn's identity)
    turn = FromTurn("onebot", [Actor("onebot", "42")], user_id="42")
    assert incoming("done", source="bg", from_turn=turn, host_notice=HostNotice("k")).actor is None
    # a message that is no host notice may act for a real user (a scheduler's snapshot)
    assert incoming("remind", source="scheduler", actor=Actor("onebot", "42")).actor == Actor("onebot", "42")


def test_host_notice_for_the_model_is_prefix_content_then_untrusted() -> None:
    n = incoming("后台任务 t1 已完成", source="bg:t1", actor=self_initiated_actor("onebot"),
                 host_notice=HostNotice("background-task", id="t1", untrusted="<untrusted>远端说明</untrusted>",
                                        facts={"code": 0}, reply_to="m1"))  # fmt: skip
    m = host_notice_message(n)
    assert m.role == "system" and m.kind == "host-notice" and m.injector == "host-notice"
    assert m.content == "[宿主通知] 后台任务 t1 已完成\n<untrusted>远端说明</untrusted>"
    assert "code" not in (m.content or "") and "m1" not in (m.content or "")
    alone = self_initiated_actor("onebot")
    bare = host_notice_message(incoming("只有宿主行", source="x", actor=alone, host_notice=HostNotice("k")))
    assert bare.content == "[宿主通知] 只有宿主行"
    with pytest.raises(PlatformMessageError, match="host_notice"):
        host_notice_message(incoming("x"))


def test_host_notice_message_survives_prepare_and_deepseek_unchanged() -> None:
    from promptkit.chat.egress import prepare_llm_messages
    from promptkit.providers import normalize_system_placement

    n = incoming(
        "done", source="bg", actor=self_initiated_actor("onebot"), host_notice=HostNotice("k", untrusted="u")
    )
    block = host_notice_message(n)
    msgs = [Message(role="user", content="q"), block]
    out = normalize_system_placement(prepare_llm_messages(msgs))
    assert out[1] is block  # prefix not stacked, kept system: it is this turn's directive block


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        ([SessionTypeDecl("private", False), SessionTypeDecl("group", True), SessionTypeDecl("channel", True)],
         SessionTypeDecl("group", True)),
        ([SessionTypeDecl("dm", False), SessionTypeDecl("private", False)], SessionTypeDecl("dm", False)),
        ([], PRIVATE_SESSION),
        (None, PRIVATE_SESSION),
    ],
)  # fmt: skip
def test_default_session_type_rule(declared: list[SessionTypeDecl] | None, expected: SessionTypeDecl) -> None:
    assert session_type_of(incoming("x"), declared) == expected
    assert PRIVATE_SESSION == SessionTypeDecl("private", multi_party=False)


def test_a_given_session_type_must_be_declared() -> None:
    declared = [SessionTypeDecl("private", False), SessionTypeDecl("group", True)]
    assert session_type_of(incoming("x", session_type="private"), declared) == declared[0]
    with pytest.raises(PlatformMessageError, match=r"session_type.*'guild'"):
        session_type_of(incoming("x", session_type="guild"), declared)
    assert session_type_of(incoming("x", session_type="guild")) == SessionTypeDecl("guild", False)
