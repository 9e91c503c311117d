"""promptkit.providers.openai: chat-completions bodies, checked against the openai SDK's request types."""

from __future__ import annotations

import copy
import json
import warnings

import pytest
from hypothesis import given, settings
from pydantic import ValidationError

from promptkit.chat.egress import prepare_llm_messages
from promptkit.chat.message import Message, ToolCall, from_openai_dict
from promptkit.providers import (
    ContentNotSentWarning,
    MediaFormatError,
    RequestBuildError,
    ToolDefinitionError,
    openai_request,
)

from .sdk import validate_openai
from .strategies import HTTP_IMAGE, PNG, WAV, Entry, Prompt, conversations

WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "天气",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def test_basic_body_and_parameters() -> None:
    msgs = [Message(role="system", content="你是小助手"), Message(role="user", content="hi", name="u_1")]
    body = openai_request(
        msgs,
        model="gpt-4o",
        tools=[WEATHER],
        tool_choice="auto",
        temperature=0.5,
        max_tokens=64,
        top_p=0.9,
        stop=["\n\n"],
    )
    assert body == {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "你是小助手"},
            {"role": "user", "content": "hi", "name": "u_1"},
        ],
        "tools": [WEATHER],
        "tool_choice": "auto",
        "temperature": 0.5,
        "top_p": 0.9,
        "max_completion_tokens": 64,
        "stop": ["\n\n"],
    }
    validate_openai(body)


def test_max_tokens_field_can_be_the_legacy_one() -> None:
    body = openai_request(
        [Message(role="user", content="x")], model="m", max_tokens=10, max_tokens_field="max_tokens"
    )
    assert body["max_tokens"] == 10 and "max_completion_tokens" not in body
    with pytest.raises(RequestBuildError, match="max_tokens_field"):
        openai_request([Message(role="user", content="x")], model="m", max_tokens_field="tokens")  # type: ignore[arg-type]


def test_prepare_runs_first_custom_roles_and_prefixes() -> None:
    msgs = [
        Message(role="notice", content="服务重启"),
        Message(role="notice", kind="cross-session-delegation", content="委派"),
        Message(role="observation", content="x"),
    ]
    roles = [(m["role"], m["content"]) for m in openai_request(msgs, model="m")["messages"]]
    assert roles == [("system", "[系统通知] 服务重启"), ("system", "[跨会话委派] 委派"), ("system", "x")]


def test_tool_round_trip_and_none_content() -> None:
    msgs = [
        Message(role="user", content="天气?"),
        Message(
            role="assistant", tool_calls=(ToolCall(id="c1", name="weather", arguments='{"city":"北京"}'),)
        ),
        Message(role="tool", content=None, tool_call_id="c1", name="weather"),
        Message(role="assistant", content=None),
    ]
    body = openai_request(msgs, model="gpt-4o", tools=[WEATHER])
    validate_openai(body)
    assistant, tool, empty = body["messages"][1:]
    assert assistant == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"北京"}'}}
        ],
    }
    assert tool == {"role": "tool", "content": "", "tool_call_id": "c1"}  # the tool message type has no name
    assert empty == {"role": "assistant", "content": ""}
    # what a provider answers can be read back into the same messages
    assert from_openai_dict(assistant) == msgs[1]


def test_tool_result_without_call_id_is_an_error() -> None:
    with pytest.raises(RequestBuildError, match=r"messages\[1\].*tool_call_id"):
        openai_request([Message(role="user", content="q"), Message(role="tool", content="r")], model="m")


def test_images_on_user_messages_and_from_tool_results() -> None:
    msgs = [
        Message(role="user", content="看图", images=(PNG, HTTP_IMAGE)),
        Message(role="assistant", tool_calls=(ToolCall(id="c1", name="shot", arguments="{}"),)),
        Message(role="tool", content="截图完成", tool_call_id="c1", images=(PNG,)),
        Message(role="user", content="然后呢"),
    ]
    body = openai_request(msgs, model="gpt-4o")
    validate_openai(body)
    first, _, tool, inserted, last = body["messages"]
    assert first["content"] == [
        {"type": "text", "text": "看图"},
        {"type": "image_url", "image_url": {"url": PNG}},
        {"type": "image_url", "image_url": {"url": HTTP_IMAGE}},
    ]
    assert tool == {"role": "tool", "content": "截图完成", "tool_call_id": "c1"}
    assert inserted["role"] == "user" and inserted["content"][1] == {
        "type": "image_url",
        "image_url": {"url": PNG},
    }
    assert "c1" in inserted["content"][0]["text"]
    assert last == {"role": "user", "content": "然后呢"}


def test_images_on_other_roles_warn_and_are_not_sent() -> None:
    msgs = [
        Message(role="system", content="s", images=(PNG,)),
        Message(role="assistant", content="a", images=(PNG,)),
    ]
    with pytest.warns(ContentNotSentWarning, match="image") as record:
        body = openai_request(msgs, model="m")
    assert [r.filename for r in record] == [__file__, __file__]  # attributed to the caller's line
    assert "messages[0]" in str(record[0].message) and "messages[1]" in str(record[1].message)
    assert body["messages"] == [{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}]
    assert PNG not in json.dumps(body)


def test_audio_on_user_messages_becomes_input_audio() -> None:
    body = openai_request([Message(role="user", content="听", audios=(WAV,))], model="gpt-4o-audio-preview")
    validate_openai(body)
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "听"},
        {"type": "input_audio", "input_audio": {"data": "UklGRiQAAABXQVZF", "format": "wav"}},
    ]
    with pytest.raises(MediaFormatError, match=r"messages\[0\]\.audios\[0\]"):
        openai_request([Message(role="user", content="听", audios=("https://x/a.ogg",))], model="m")
    with pytest.warns(ContentNotSentWarning, match="audio"):
        openai_request([Message(role="assistant", content="说", audios=(WAV,))], model="m")


def test_plain_user_and_assistant_bodies_raise_no_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        openai_request([Message(role="user", content="q"), Message(role="assistant", content="a")], model="m")


@pytest.mark.parametrize(
    ("tools", "match"),
    [
        ({"type": "function"}, "sequence"),
        (["weather"], r"tools\[0\] must be a dict"),
        ([{"type": "custom", "function": {"name": "x"}}], r"tools\[0\]: field 'type'"),
        ([WEATHER, {"type": "function"}], r"tools\[1\]: field 'function'"),
        ([{"type": "function", "function": {"name": ""}}], "function.name"),
        ([{"type": "function", "function": {"name": "x", "parameters": "{}"}}], "function.parameters"),
        ([{"type": "function", "function": {"name": "x", "description": 3}}], "function.description"),
    ],
)
def test_bad_tool_definitions_name_index_and_field(tools: object, match: str) -> None:
    with pytest.raises(ToolDefinitionError, match=match):
        openai_request([Message(role="user", content="q")], model="m", tools=tools)  # type: ignore[arg-type]


def test_extra_fields_are_added_and_collisions_refused() -> None:
    body = openai_request([Message(role="user", content="q")], model="m", seed=7, prompt_cache_key="s1")
    assert (body["seed"], body["prompt_cache_key"]) == (7, "s1")
    validate_openai(body)
    with pytest.raises(RequestBuildError, match="messages"):
        openai_request([Message(role="user", content="q")], model="m", messages=[])
    with pytest.raises(RequestBuildError, match="model"):
        openai_request([Message(role="user", content="q")], model="")


def test_streaming_body_validates_as_streaming_params() -> None:
    body = openai_request([Message(role="user", content="q")], model="m", stream=True)
    assert body["stream"] is True
    validate_openai(body)


def test_the_sdk_check_itself_rejects_a_wrong_body() -> None:
    # guards the guard: a tool message with a name, or a null user content, is not a valid chat body
    with pytest.raises(ValidationError):
        validate_openai(
            {"model": "m", "messages": [{"role": "tool", "content": "x", "tool_call_id": "a", "name": "n"}]}
        )
    with pytest.raises(ValidationError):
        validate_openai({"model": "m", "messages": [{"role": "user", "content": None}]})


@pytest.mark.parametrize("bad", [Message(role="user", content="q"), "hello", {"role": "user"}, 3])
def test_bad_input_types_are_type_errors(bad: object) -> None:
    with pytest.raises(TypeError, match="openai_request"):
        openai_request(bad, model="m")


def test_non_message_element_is_named() -> None:
    with pytest.raises(TypeError, match=r"messages\[1\] is dict"):
        openai_request([Message(role="user", content="q"), {"role": "user", "content": "x"}], model="m")


def test_assembled_prompt_is_accepted_and_layout_must_align() -> None:
    msgs = (Message(role="system", content="p"), Message(role="user", content="q"))
    body = openai_request(Prompt(msgs, (Entry("persona"), Entry("current"))), model="m")
    assert body == openai_request(list(msgs), model="m")
    with pytest.raises(RequestBuildError, match="layout has 1 entries for 2 messages"):
        openai_request(Prompt(msgs, (Entry("persona"),)), model="m")


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(conversations())
def test_every_assembled_conversation_gives_a_valid_body_and_never_mutates(
    conv: tuple[list[Message], list],
) -> None:
    msgs, layout = conv
    before = copy.deepcopy(msgs)
    tools = [copy.deepcopy(WEATHER)]
    body = openai_request(Prompt(msgs, layout), model="gpt-4o", tools=tools, max_tokens=32)
    assert msgs == before and tools == [WEATHER]
    validate_openai(body)
    prepared = prepare_llm_messages(msgs)
    assert [m["role"] for m in body["messages"]] == [m.role for m in prepared]
    body["tools"][0]["function"]["name"] = "changed"  # the body never shares the caller's dicts
    assert tools == [WEATHER]
