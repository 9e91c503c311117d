"""Five platform-contract rules a fresh sample found unkept (docs/reference/spec-map.md, P-21, M-9,
M-81 to M-83), each driven through the public API: what a caller builds, what a provider or the history
then receives."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from promptkit.chat import (
    ForwardFacts,
    HostNotice,
    IncomingMessage,
    MessageAttachment,
    OutgoingMessage,
    drop_control_kinds,
    outbound_records,
)
from promptkit.chat.message import Message, WellKnownKinds, to_openai_dict
from promptkit.chat.request import ChatModelRequest
from promptkit.errors import PlatformMessageError
from promptkit.providers import deepseek_request, openai_request

# --- P-21: `name` is sent only when set -----------------------------------------------------------------


def test_an_empty_name_is_not_sent_to_the_provider() -> None:
    """``if (msg.name) apiMsg.name = msg.name``: OpenAI refuses ``"name": ""``."""
    assert "name" not in to_openai_dict(Message(role="user", content="hi", name=""))
    assert to_openai_dict(Message(role="user", content="hi", name="u_42"))["name"] == "u_42"
    request = ChatModelRequest(
        [Message(role="system", content="s"), Message(role="user", content="hi", name="")]
    )
    for build in (openai_request, deepseek_request):
        body = build(request, model="m")
        assert all("name" not in m for m in body["messages"]), body["messages"]


# --- M-9: `unlisted` is absent when everyone is listed ----------------------------------------------------


def test_unlisted_zero_is_refused_and_absent_is_not_written() -> None:
    with pytest.raises(PlatformMessageError, match=r"ForwardFacts\.unlisted: must be a positive int"):
        ForwardFacts(count=2, participants=("a", "b"), text="t", unlisted=0)
    with pytest.raises(PlatformMessageError, match="unlisted"):
        ForwardFacts(count=2, participants=("a", "b"), text="t", unlisted=-1)
    assert ForwardFacts(count=12, participants=("a",) * 8, text="t", unlisted=3).unlisted == 3
    assert ForwardFacts(count=2, participants=("a", "b"), text="t").unlisted is None


# --- M-81: an idle trigger has no user id --------------------------------------------------------------


def test_an_idle_trigger_with_a_user_id_is_refused() -> None:
    with pytest.raises(
        PlatformMessageError, match=r"IncomingMessage\.user_id: an idle trigger has no user id"
    ):
        IncomingMessage("", "s1", "onebot", user_id="42", trigger_type="idle")
    assert IncomingMessage("", "s1", "onebot", trigger_type="idle").user_id is None
    # the other triggers keep their speaker
    assert IncomingMessage("hi", "s1", "onebot", user_id="42", trigger_type="interval").user_id == "42"


# --- M-82: only the final notice carries an outbound hostNotice -----------------------------------------


def test_a_mid_tool_message_does_not_carry_a_host_notice() -> None:
    notice = HostNotice("background-task", id="t1")
    with pytest.raises(PlatformMessageError, match=r"only the final notice carries it.*call_id='c1'"):
        OutgoingMessage("part", "s1", source="agent", call_id="c1", host_notice=notice)
    assert OutgoingMessage("done", "s1", source="agent", host_notice=notice).host_notice == notice
    assert OutgoingMessage("part", "s1", source="agent", call_id="c1").call_id == "c1"


# --- M-83: an attachment without an address is an event marker, its payload out of the history ----------


@pytest.mark.parametrize(
    "attachment",
    [
        MessageAttachment("image", data="base64://iVBORw0KGgoAAAANSUhEUg==", description="猫"),
        MessageAttachment("image", data="data:image/png;base64,iVBORw0KGgo=", description="猫"),
        MessageAttachment("image", data="/tmp/cat.png", description="猫"),
        MessageAttachment("image", description="猫"),
    ],
    ids=["base64", "data-uri", "local-path", "nothing"],
)
def test_an_outbound_attachment_without_an_address_is_an_event_marker(attachment: MessageAttachment) -> None:
    out = OutgoingMessage("", "s1", source="agent", turn_id="t1", call_id="c1", attachments=[attachment])
    (record,) = outbound_records(out)
    assert (record.role, record.kind, record.content) == (
        "system",
        WellKnownKinds.EVENT_MARKER.value,
        "[图片: 猫]",
    )
    assert record.metadata == {"source": "agent", "turnId": "t1", "callId": "c1"}
    kept = json.dumps([record.content, record.metadata], ensure_ascii=False)
    assert "base64" not in kept and "iVBOR" not in kept and "/tmp" not in kept
    # an event marker is a control kind: the model never reads it
    assert drop_control_kinds([record]) == []


def test_a_file_without_an_address_keeps_its_name_and_an_addressed_one_stays_a_reference() -> None:
    out = OutgoingMessage(
        "",
        "s1",
        source="command",
        attachments=[
            MessageAttachment("file", data="base64://AA", name="表|1].xlsx"),
            MessageAttachment("audio"),
            MessageAttachment("image", data="data:/img/1.png", description="猫"),
            MessageAttachment("image", data="https://example.com/a.png"),
        ],
    )
    records = outbound_records(out)
    assert [(r.role, r.kind, r.content) for r in records] == [
        ("system", "event-marker", "[文件: 表丨1］.xlsx]"),
        ("system", "event-marker", "[音频]"),
        ("notice", "outbound-image", "[图片: 猫 | ref:data:/img/1.png]"),
        ("notice", "outbound-image", "[图片 | ref:https://example.com/a.png]"),
    ]


@settings(max_examples=200, deadline=None)
@given(
    payload=st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=", min_size=8)
)
def test_no_inline_payload_reaches_the_history(payload: str) -> None:
    out = OutgoingMessage(
        "",
        "s1",
        source="agent",
        attachments=[
            MessageAttachment("image", data=f"base64://{payload}"),
            MessageAttachment("video", data=f"data:video/mp4;base64,{payload}"),
        ],
    )
    for record in outbound_records(out):
        assert payload not in (record.content or "")
        assert payload not in json.dumps(record.metadata or {})
