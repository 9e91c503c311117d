"""Tests for promptkit/chat/message.py: the LLM protocol layer and its OpenAI dict round trip."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from promptkit.chat.message import (
    CONTROL_KINDS,
    DIRECTIVE_KINDS,
    WELL_KNOWN_ROLES,
    ContentSegment,
    Message,
    MessageFormatError,
    ToolCall,
    WellKnownKinds,
    WellKnownMetadataKeys,
    from_openai_dict,
    is_directive,
    is_directive_block,
    is_directive_kind,
    to_openai_dict,
)

# --- constants -------------------------------------------------------------------------------------


def test_well_known_roles() -> None:
    assert WELL_KNOWN_ROLES == ("system", "user", "assistant", "tool")


def test_well_known_kinds_are_the_seed_literals() -> None:
    assert {k.value for k in WellKnownKinds} == {
        "event-marker",
        "cross-session-delegation",
        "host-notice",
        "idle-prompt",
        "outbound-image",
        "outbound-audio",
        "outbound-video",
        "outbound-file",
        "outbound-delivery-failed",
    }
    assert str(WellKnownKinds.EVENT_MARKER) == "event-marker"
    assert WellKnownKinds.HOST_NOTICE == "host-notice"


def test_control_and_directive_kinds() -> None:
    assert CONTROL_KINDS == ("event-marker",)
    assert DIRECTIVE_KINDS == ("cross-session-delegation", "host-notice", "idle-prompt")


def test_metadata_keys_have_the_documented_string_values() -> None:
    expected = {
        "VISIBLE_CONTENT": "visibleContent",
        "SPOKEN_CONTENT": "spokenContent",
        "ATTACHMENTS": "attachments",
        "FORWARDS": "forwards",
        "SENDER_LABEL": "senderLabel",
        "MENTIONS": "mentions",
        "PLATFORM": "platform",
        "USER_ID": "userId",
        "NICKNAME": "nickname",
        "GROUP_ID": "groupId",
        "GROUP_NAME": "groupName",
        "SESSION_TYPE": "sessionType",
        "MESSAGE_ID": "messageId",
        "SOURCE": "source",
        "HOST_NOTICE_KIND": "hostNoticeKind",
        "HOST_NOTICE_ID": "hostNoticeId",
        "HOST_NOTICE_FACTS": "hostNoticeFacts",
        "TURN_ID": "turnId",
        "TURN_ENTRY": "turnEntry",
        "TRIGGER_TYPE": "triggerType",
        "TURN_RECORD": "turnRecord",
        "CALL_ID": "callId",
        "MODEL_INFO": "modelInfo",
        "SENT_REF": "ref",
        "SENT_NAME": "name",
        "DELIVERY_ERROR": "error",
        "SENT_PIECES": "sentPieces",
        "UNCONFIRMED": "unconfirmed",
        "TEXT": "text",
    }
    assert {k.name: k.value for k in WellKnownMetadataKeys} == expected


# --- value classes ---------------------------------------------------------------------------------


def test_message_is_frozen_and_converts_sequences_to_tuples() -> None:
    m = Message(role="user", images=["a", "b"], tool_calls=[ToolCall(id="1", name="f")])
    assert m.images == ("a", "b")
    assert isinstance(m.tool_calls, tuple)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        m.content = "x"  # type: ignore[misc]


def test_message_copies_its_metadata_dict() -> None:
    meta: dict[str, Any] = {"turnId": "t"}
    m = Message(role="user", metadata=meta)
    meta["turnId"] = "changed"
    assert m.metadata == {"turnId": "t"}


def test_message_with_metadata_is_hashable() -> None:
    assert hash(Message(role="user", metadata={"a": [1]})) == hash(Message(role="user", metadata={"b": 2}))


def test_injector_reads_metadata() -> None:
    assert Message(role="system", metadata={"injector": "turn-context"}).injector == "turn-context"
    assert Message(role="system", metadata={"injector": 3}).injector is None
    assert Message(role="system").injector is None


def test_tool_call_parsed_arguments() -> None:
    assert ToolCall(id="1", name="f", arguments='{"q": "猫"}').parsed_arguments() == {"q": "猫"}
    assert ToolCall(id="1", name="f").arguments == "{}"
    with pytest.raises(json.JSONDecodeError):
        ToolCall(id="1", name="f", arguments="{").parsed_arguments()


def test_content_segment_type_is_validated() -> None:
    seg = ContentSegment(type="tool_call", tool_call=ToolCall(id="1", name="f"), start_time=1.0, end_time=2.5)
    assert seg.end_time == 2.5
    with pytest.raises(ValueError):
        ContentSegment(type="image")  # type: ignore[arg-type]


# --- to_openai_dict ---------------------------------------------------------------------------------


def test_plain_message_dict() -> None:
    assert to_openai_dict(Message(role="user", content="hi", name="u_42")) == {
        "role": "user",
        "content": "hi",
        "name": "u_42",
    }


def test_our_side_fields_stay_out_of_the_dict() -> None:
    m = Message(
        role="assistant",
        content="c",
        kind="event-marker",
        audios=["a.mp3"],
        segments=[ContentSegment(type="text", text="c")],
        metadata={"turnId": "t"},
        timestamp=1.0,
        reasoning_content="think",
    )
    assert to_openai_dict(m) == {"role": "assistant", "content": "c"}
    assert to_openai_dict(m, include_reasoning=True) == {
        "role": "assistant",
        "content": "c",
        "reasoning_content": "think",
    }


def test_tool_calls_and_tool_results_dict() -> None:
    call = Message(role="assistant", tool_calls=[ToolCall(id="c1", name="search", arguments='{"q":"x"}')])
    assert to_openai_dict(call) == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q":"x"}'}}
        ],
    }
    assert to_openai_dict(Message(role="tool", tool_call_id="c1", content="r")) == {
        "role": "tool",
        "content": "r",
        "tool_call_id": "c1",
    }


def test_user_images_become_image_url_parts_after_the_text() -> None:
    d = to_openai_dict(
        Message(role="user", content="看", images=["http://x/a.png", "data:image/png;base64,AA"])
    )
    assert d["content"] == [
        {"type": "text", "text": "看"},
        {"type": "image_url", "image_url": {"url": "http://x/a.png"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
    ]


def test_images_on_other_roles_are_not_written() -> None:
    assert to_openai_dict(Message(role="assistant", content="x", images=["a"])) == {
        "role": "assistant",
        "content": "x",
    }


# --- from_openai_dict -------------------------------------------------------------------------------


def test_from_dict_reads_parts_and_tool_calls() -> None:
    m = from_openai_dict(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image_url", "image_url": {"url": "u1"}},
                "b",
                {"type": "image_url", "image_url": "u2"},
            ],
        }
    )
    assert m == Message(role="user", content="ab", images=("u1", "u2"))


def test_from_dict_encodes_non_string_arguments_as_json() -> None:
    m = from_openai_dict(
        {
            "role": "assistant",
            "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"q": "猫"}}}],
        }
    )
    assert m.tool_calls == (ToolCall(id="c", name="f", arguments='{"q": "猫"}'),)
    missing = from_openai_dict({"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f"}}]})
    assert missing.tool_calls == (ToolCall(id="c", name="f", arguments="{}"),)


def test_from_dict_ignores_unknown_keys() -> None:
    assert from_openai_dict({"role": "user", "content": "x", "refusal": None}) == Message(
        role="user", content="x"
    )


@pytest.mark.parametrize(
    ("d", "needle"),
    [
        ({"content": "x"}, "field 'role'"),
        ({"role": 3}, "field 'role'"),
        ({"role": "user", "content": 3}, "field 'content'"),
        ({"role": "user", "content": [3]}, "content[0]"),
        ({"role": "user", "content": [{"type": "audio"}]}, "'audio'"),
        ({"role": "user", "content": ["a", {"type": "text", "text": 1}]}, "content[1]: field 'text'"),
        ({"role": "user", "content": [{"type": "image_url", "image_url": {}}]}, "field 'image_url.url'"),
        ({"role": "user", "name": 5}, "field 'name'"),
        ({"role": "tool", "tool_call_id": 5}, "field 'tool_call_id'"),
        ({"role": "assistant", "reasoning_content": []}, "field 'reasoning_content'"),
        ({"role": "assistant", "tool_calls": {}}, "field 'tool_calls'"),
        ({"role": "assistant", "tool_calls": ["x"]}, "tool_calls[0]"),
        ({"role": "assistant", "tool_calls": [{"id": "c"}]}, "tool_calls[0]: field 'function'"),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]},
            "tool_calls[0].function: field 'name'",
        ),
        ({"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}, "tool_calls[0]: field 'id'"),
    ],
)
def test_from_dict_errors_name_the_field(d: dict[str, Any], needle: str) -> None:
    with pytest.raises(MessageFormatError) as err:
        from_openai_dict(d, where="log.jsonl:7 messages[2]")
    assert needle in str(err.value)
    assert str(err.value).startswith("log.jsonl:7 messages[2]")


def test_from_dict_rejects_a_non_mapping() -> None:
    with pytest.raises(MessageFormatError, match="message: must be an object, got list"):
        from_openai_dict([])  # type: ignore[arg-type]


def test_message_format_error_is_a_value_error() -> None:
    assert issubclass(MessageFormatError, ValueError)


# --- round trips ------------------------------------------------------------------------------------

_text = st.text(max_size=8)
_ids = st.text(alphabet="abc123_-", min_size=1, max_size=6)
_tool_calls = st.lists(
    st.builds(
        ToolCall, id=_ids, name=_ids, arguments=st.dictionaries(_ids, _text, max_size=2).map(json.dumps)
    ),
    min_size=1,
    max_size=3,
)


@st.composite
def protocol_messages(draw: st.DrawFn) -> Message:
    """Messages holding only what the chat-completions protocol carries."""
    role = draw(st.sampled_from(["system", "user", "assistant", "tool", "notice"]))
    content = draw(st.one_of(st.none(), _text))
    images = None
    if role == "user" and draw(st.booleans()):
        images = draw(st.lists(_text, min_size=1, max_size=3))
        # to_openai_dict writes no text part for "" (reported: "" + images comes back as None).
        content = draw(st.one_of(st.none(), st.text(min_size=1, max_size=8)))
    return Message(
        role=role,
        content=content,
        name=draw(st.one_of(st.none(), _ids)),
        tool_calls=draw(st.one_of(st.none(), _tool_calls)) if role == "assistant" else None,
        tool_call_id=draw(st.one_of(st.none(), _ids)) if role == "tool" else None,
        images=images,
        reasoning_content=draw(st.one_of(st.none(), _text)) if role == "assistant" else None,
    )


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(protocol_messages())
def test_message_to_dict_and_back_is_lossless(m: Message) -> None:
    d = to_openai_dict(m, include_reasoning=True)
    json.dumps(d)  # a plain JSON value
    assert from_openai_dict(d) == m


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(protocol_messages())
def test_dict_to_message_and_back_is_lossless(m: Message) -> None:
    d = to_openai_dict(m, include_reasoning=True)
    again = to_openai_dict(from_openai_dict(json.loads(json.dumps(d))), include_reasoning=True)
    assert again == d


def test_round_trip_with_tool_calls_and_images_examples() -> None:
    msgs = [
        Message(role="system", content="你是助手"),
        Message(role="user", content="这是什么?", name="u_1", images=["https://x/cat.png"]),
        Message(
            role="assistant",
            content=None,
            tool_calls=[
                ToolCall(id="call_1", name="describe", arguments='{"url": "https://x/cat.png"}'),
                ToolCall(id="call_2", name="search", arguments="{}"),
            ],
            reasoning_content="先看图",
        ),
        Message(role="tool", tool_call_id="call_1", content="一只猫"),
        Message(role="tool", tool_call_id="call_2", content=""),
        Message(role="assistant", content="是一只猫。"),
    ]
    dicts = [to_openai_dict(m, include_reasoning=True) for m in msgs]
    assert [from_openai_dict(d) for d in dicts] == msgs
    assert dicts[2]["tool_calls"][1] == {
        "id": "call_2",
        "type": "function",
        "function": {"name": "search", "arguments": "{}"},
    }


@pytest.mark.parametrize("kind", DIRECTIVE_KINDS)
def test_directive_block_is_the_request_time_injector_only(kind: str) -> None:
    block = Message(role="system", content="x", metadata={"injector": kind})
    archived = Message(role="notice", content="x", kind=kind)
    assert is_directive_block(block) and not is_directive_kind(block)
    assert is_directive_kind(archived) and not is_directive_block(archived)
    assert is_directive(block) and is_directive(archived)
    other = Message(role="system", content="x", kind="event-marker", metadata={"injector": "memory"})
    assert not (is_directive_block(other) or is_directive_kind(other) or is_directive(other))
