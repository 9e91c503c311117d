"""Tests for promptkit/chat/archive.py: archive records of inputs, outbound messages and turns."""

from __future__ import annotations

import doctest
import json
from typing import Any

import attrs
import pytest
from hypothesis import given, settings, strategies as st

import promptkit.chat.archive as archive_module
from promptkit.chat.archive import (
    TURN_ENTRIES,
    TURN_OUTCOMES,
    ArchivedAttachment,
    ArchivedForward,
    TurnRecord,
    archive_address,
    archive_record,
    outbound_records,
    speaker_of,
    turn_marker,
)
from promptkit.chat.identity import get_sender_label, prefix_sender
from promptkit.chat.message import CONTROL_KINDS, WellKnownKinds, WellKnownMetadataKeys as K
from promptkit.chat.platform import (
    ForwardedChat,
    ForwardFacts,
    FromTurn,
    HostNotice,
    IncomingMessage,
    MessageAttachment,
    OutgoingMessage,
    PlatformMessageError,
    ReplyTo,
    build_incoming_content,
    forward_placeholder,
    self_initiated_actor,
)


def incoming(content: str = "hi", **kw: Any) -> IncomingMessage:
    return IncomingMessage(content, "s1", "onebot", **kw)


def test_docstring_examples() -> None:
    result = doctest.testmod(archive_module)
    assert result.attempted > 0 and result.failed == 0


def test_constants() -> None:
    assert TURN_OUTCOMES == ("replied", "silent", "aborted", "error")
    assert TURN_ENTRIES == ("opened", "joined")
    with pytest.raises(ValueError, match="outcome"):
        TurnRecord("crashed")  # type: ignore[arg-type]


def test_a_persons_question() -> None:
    q = incoming("在吗", user_id="42", nickname="小明", group_id="123", group_name="跑团", session_type="group",
                 message_id="m9", trigger_type="immediate")  # fmt: skip
    rec = archive_record(q, timestamp=1700.0)
    assert rec is not None
    assert (rec.role, rec.kind, rec.name, rec.timestamp) == ("user", None, "42", 1700.0)
    assert rec.content == build_incoming_content(q, q) == prefix_sender("在吗", "小明", "42")
    assert rec.metadata == {
        "platform": "onebot", "userId": "42", "nickname": "小明", "groupId": "123", "groupName": "跑团",
        "sessionType": "group", "messageId": "m9", "triggerType": "immediate",
        "spokenContent": "在吗", "senderLabel": get_sender_label("小明", "42"),
    }  # fmt: skip


def test_spoken_content_and_sender_label_only_when_the_rules_say_so() -> None:
    # no speaker: no prefix, archive text == content, so neither key is written
    plain = archive_record(incoming("原话"), speaker=None)
    assert plain is not None and plain.metadata == {"platform": "onebot"}
    # spoken content may be the empty string (an image-only message)
    pic = incoming("", attachments=[MessageAttachment("image", url="http://x/a.png")],
                   attachment_descriptions=["[图片: 猫 | ref:http://x/a.png]"])  # fmt: skip
    rec = archive_record(pic)
    assert rec is not None and rec.metadata is not None
    assert rec.metadata["spokenContent"] == "" and "senderLabel" not in rec.metadata
    assert rec.metadata["attachments"] == [{"kind": "image", "ref": "http://x/a.png"}]


def test_mentions_come_from_the_speakers_own_words_only() -> None:
    q = incoming('<at id="7">阿七</at> 看 ' + forward_placeholder("f"), user_id="1",
                 reply_to=ReplyTo("m", content='<at id="8">八</at>'),
                 forwards=[ForwardedChat("f", '<at id="9">九</at>')],
                 attachments=[MessageAttachment("image", url="u")],
                 attachment_descriptions=['<at id="10">十</at>'])  # fmt: skip
    rec = archive_record(q)
    assert rec is not None and rec.metadata is not None
    assert rec.metadata["mentions"] == ["7"]
    assert "mentions" not in (archive_record(incoming("no one", user_id="1")) or rec).metadata  # type: ignore[operator]


def test_forwards_are_kept_without_their_expansion() -> None:
    facts = ForwardFacts(2, ["A(1)", "B(2)"], "聊天记录", unlisted=3, cut_off=True)
    q = incoming("看 " + forward_placeholder("f1"), user_id="1",
                 forwards=[ForwardedChat("f1", "[A]: 在吗", facts), ForwardedChat("f2", "拉取失败")])  # fmt: skip
    rec = archive_record(q)
    assert rec is not None and rec.metadata is not None
    assert rec.content == "[1]: 看 [A]: 在吗"
    assert rec.metadata["forwards"] == [
        {"id": "f1", "facts": {"count": 2, "participants": ["A(1)", "B(2)"], "unlisted": 3, "text": "聊天记录", "cutOff": True}},
        {"id": "f2"},
    ]
    assert ArchivedForward.of(q.forwards[0]) == ArchivedForward("f1", facts)  # type: ignore[index]


def test_archived_attachment_address_never_comes_from_inline_data_or_a_local_path() -> None:
    assert archive_address(MessageAttachment("image", data="data:image/png;base64,AA")) is None
    assert archive_address(MessageAttachment("image", data="base64://AA")) is None
    assert archive_address(MessageAttachment("image", data="file:///tmp/a.png")) is None
    assert archive_address(MessageAttachment("image", data="/tmp/a.png")) is None
    assert archive_address(MessageAttachment("image", data="https://x/a.png")) == "https://x/a.png"
    assert archive_address(MessageAttachment("image", data="/tmp/a.png", ref="data:/img/a.png")) == "data:/img/a.png"
    assert ArchivedAttachment.of(MessageAttachment("file", data="/tmp/x", name="x.txt")).to_dict() == {
        "kind": "file", "name": "x.txt",
    }  # fmt: skip


def test_notice_type_becomes_the_kind() -> None:
    rec = archive_record(incoming("[戳了戳你]", user_id="5", notice_type="poke"))
    assert rec is not None and (rec.role, rec.kind) == ("user", "poke")


def test_host_notice_archive_record() -> None:
    n = IncomingMessage(
        "任务 t1 完成", "s", "webui", source="bg:t1", actor=None,
        from_turn=FromTurn("webui", [self_initiated_actor("webui")]),
        host_notice=HostNotice("background-task", id="t1", untrusted="<u>SECRET</u>", reply_to="m1",
                               facts={"exit": 0, "name": "build"}, text={"key": "bg.done"}),
    )  # fmt: skip
    rec = archive_record(n)
    assert rec is not None
    assert (rec.role, rec.kind, rec.name, rec.content) == ("notice", "host-notice", None, "任务 t1 完成")
    assert rec.metadata == {
        "platform": "webui", "source": "bg:t1", "hostNoticeKind": "background-task", "hostNoticeId": "t1",
        "hostNoticeFacts": {"exit": 0, "name": "build"}, "text": {"key": "bg.done"},
    }  # fmt: skip
    assert "SECRET" not in json.dumps(attrs.asdict(rec), ensure_ascii=False)


def test_delegation_is_a_notice_and_idle_is_not_archived() -> None:
    task = archive_record(IncomingMessage("去查天气", "s", "onebot", source="wf", trigger_type="proactive"))
    assert task is not None and (task.role, task.kind, task.name) == ("notice", "cross-session-delegation", None)
    assert archive_record(IncomingMessage("", "s", "onebot", source="idle", trigger_type="idle")) is None


def test_turn_keys() -> None:
    rec = archive_record(incoming("x", user_id="1"), turn_id="t3", turn_entry="joined")
    assert rec is not None and rec.metadata is not None
    assert (rec.metadata["turnId"], rec.metadata["turnEntry"]) == ("t3", "joined")
    with pytest.raises(PlatformMessageError, match="turn_id is missing"):
        archive_record(incoming("x"), turn_entry="opened")
    with pytest.raises(PlatformMessageError, match="turn_entry"):
        archive_record(incoming("x"), turn_id="t", turn_entry="left")  # type: ignore[arg-type]


def test_speaker_rule() -> None:
    assert speaker_of(incoming("x", user_id="1")) is not None
    assert speaker_of(incoming("x", nickname="A")) is not None
    assert speaker_of(incoming("x")) is None


def test_turn_marker_is_an_empty_event_marker() -> None:
    m = turn_marker("t1", TurnRecord("error", source="cron"), timestamp=5.0)
    assert (m.role, m.kind, m.content, m.timestamp) == ("system", "event-marker", "", 5.0)
    assert m.kind in CONTROL_KINDS
    assert m.metadata == {"turnId": "t1", "turnRecord": {"outcome": "error", "source": "cron"}}
    with pytest.raises(PlatformMessageError, match="turn_id"):
        turn_marker("", TurnRecord("silent"))


def test_outbound_records_follow_markup_free_attachments_and_skip_archive() -> None:
    msg = OutgoingMessage(
        "已重启", "s", source="command", markup=None, turn_id="t1", call_id="c1", text={"key": "restart"},
        attachments=[
            MessageAttachment("file", ref="workspace:/主页.html", name="主页.html", description="首页"),
            MessageAttachment("image", ref="data:/img/old.png", skip_archive=True),
            MessageAttachment("audio", data="data:/audio/a.mp3", description="语音"),
            MessageAttachment("video"),
        ],
    )  # fmt: skip
    recs = outbound_records(msg, timestamp=9.0)
    assert [(r.role, r.kind, r.content) for r in recs] == [
        ("system", "event-marker", "已重启"),
        ("notice", "outbound-file", "[文件: 主页.html | ref:workspace:/主页.html]"),
        ("notice", "outbound-audio", "[音频: 语音 | ref:data:/audio/a.mp3]"),
        ("system", "event-marker", "[视频]"),  # no address: an event marker (M-83)
    ]
    common = {"source": "command", "turnId": "t1", "callId": "c1"}
    assert recs[0].metadata == {"text": {"key": "restart"}, **common}
    assert recs[1].metadata == {"ref": "workspace:/主页.html", "name": "主页.html", **common}
    assert recs[3].metadata == common
    assert all(r.timestamp == 9.0 for r in recs)


def test_her_reply_text_is_not_recorded_but_her_attachments_are() -> None:
    msg = OutgoingMessage("好的", "s", source="agent", attachments=[MessageAttachment("image", url="http://x/p.png")])
    recs = outbound_records(msg)
    assert [(r.role, r.kind) for r in recs] == [("assistant", WellKnownKinds.OUTBOUND_IMAGE.value)]


_opt = st.one_of(st.none(), st.text(max_size=5))


@settings(max_examples=150, deadline=None)
@given(
    content=st.text(max_size=10),
    user_id=_opt,
    nickname=_opt,
    descs=st.lists(_opt, max_size=3),
    quoted=_opt,
)
def test_record_rules_hold_for_any_question(
    content: str, user_id: str | None, nickname: str | None, descs: list[str | None], quoted: str | None
) -> None:
    q = incoming(content, user_id=user_id, nickname=nickname,
                 attachments=[MessageAttachment("image", url="u")] * len(descs) or None,
                 attachment_descriptions=descs or None,
                 reply_to=None if quoted is None else ReplyTo("m", content=quoted))  # fmt: skip
    rec = archive_record(q)
    assert rec is not None
    meta = rec.metadata or {}
    assert json.loads(json.dumps(meta)) == meta  # plain JSON
    # SpokenContent: written exactly when the archive text differs from the spoken words
    assert (K.SPOKEN_CONTENT.value in meta) == (rec.content != content)
    # SenderLabel: written exactly when a sender prefix was added
    label = get_sender_label(nickname, user_id)
    assert meta.get(K.SENDER_LABEL.value) == label
    if label is not None:
        assert rec.content is not None and rec.content.startswith(f"[{label}]: ")
    # never an empty optional key
    assert all(v not in (None, [], {}) for k, v in meta.items() if k != K.SPOKEN_CONTENT.value)
