"""promptkit.providers.ollama: /api/chat bodies, checked against what the ollama client itself posts."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings

from promptkit.chat.egress import prepare_llm_messages
from promptkit.chat.message import Message, ToolCall
from promptkit.providers import (
    ContentNotSentWarning,
    MediaFormatError,
    RequestBuildError,
    ToolArgumentsError,
    ollama_request,
)

from .sdk import ollama_client_json, validate_ollama
from .strategies import JPEG, PNG, WAV, Prompt, conversations

TOOL = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "天气",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "城市"}},
            "required": ["city"],
        },
        "strict": True,
    },
}


def test_body_shape_options_and_stream() -> None:
    body = ollama_request(
        [Message(role="system", content="p"), Message(role="user", content="hi")],
        model="qwen3",
        temperature=0.1,
        top_p=0.8,
        max_tokens=100,
        stop="###",
        stream=False,
        options={"num_ctx": 8192},
        keep_alive="5m",
        think=False,
    )
    assert body == {
        "model": "qwen3",
        "messages": [{"role": "system", "content": "p"}, {"role": "user", "content": "hi"}],
        "options": {"temperature": 0.1, "top_p": 0.8, "num_predict": 100, "stop": ["###"], "num_ctx": 8192},
        "stream": False,
        "keep_alive": "5m",
        "think": False,
    }
    validate_ollama(body)


def test_option_given_twice_is_an_error() -> None:
    with pytest.raises(RequestBuildError, match="'temperature' given twice"):
        ollama_request(
            [Message(role="user", content="q")], model="m", temperature=0.1, options={"temperature": 0.2}
        )


def test_images_become_bare_base64_and_other_strings_pass_through() -> None:
    msgs = [Message(role="user", content="看", images=(PNG, JPEG, "iVBORw0KGgo="))]
    body = ollama_request(msgs, model="llava")
    assert body["messages"][0]["images"] == ["iVBORw0KGgo=", "/9j/4AAQSkZJRg==", "iVBORw0KGgo="]
    validate_ollama(body)
    passthrough = ollama_request(
        [Message(role="user", content="看", images=("https://x/a.png",))], model="llava"
    )
    assert passthrough["messages"][0]["images"] == ["https://x/a.png"]
    with pytest.raises(MediaFormatError, match=r"messages\[0\]\.images\[0\].*not base64"):
        ollama_request([Message(role="user", content="看", images=("data:image/png,%89PNG",))], model="llava")


def test_tool_result_images_move_to_a_user_message_as_a_list() -> None:
    msgs = [
        Message(role="assistant", tool_calls=(ToolCall(id="c1", name="shot", arguments=""),)),
        Message(role="tool", content="ok", tool_call_id="c1", images=(PNG,)),
    ]
    body = ollama_request(msgs, model="llava")
    assert body["messages"][1] == {"role": "tool", "content": "ok", "tool_name": "shot"}
    assert body["messages"][2]["role"] == "user" and body["messages"][2]["images"] == ["iVBORw0KGgo="]
    assert body["messages"][0]["tool_calls"] == [{"function": {"name": "shot", "arguments": {}}}]
    validate_ollama(body)


def test_tool_round_trip_arguments_as_objects_and_tool_names() -> None:
    msgs = [
        Message(role="user", content="北京天气"),
        Message(
            role="assistant",
            content="",
            reasoning_content="想一想",
            tool_calls=(
                ToolCall(id="a", name="weather", arguments='{"city": "北京", "days": [1, 2]}'),
                ToolCall(id="b", name="clock", arguments="{}"),
            ),
        ),
        Message(role="tool", content="晴", tool_call_id="a"),
        Message(role="tool", content="10:00", tool_call_id="b"),
        Message(role="tool", content="?", tool_call_id="unknown"),
    ]
    body = ollama_request(msgs, model="qwen3", tools=[TOOL], include_reasoning=True)
    assistant = body["messages"][1]
    assert assistant["tool_calls"] == [
        {"function": {"name": "weather", "arguments": {"city": "北京", "days": [1, 2]}}},
        {"function": {"name": "clock", "arguments": {}}},
    ]
    assert assistant["thinking"] == "想一想"
    assert [m.get("tool_name") for m in body["messages"][2:]] == ["weather", "clock", None]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {k: TOOL["function"][k] for k in ("name", "description", "parameters")},
        }
    ]
    validate_ollama(body)
    assert "thinking" not in ollama_request(msgs, model="qwen3")["messages"][1]


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [("{oops", "not valid JSON"), ("[1, 2]", "must be a JSON object"), ("3", "got int")],
)
def test_malformed_tool_arguments_name_message_and_call(arguments: str, reason: str) -> None:
    msgs = [
        Message(role="user", content="q"),
        Message(role="notice", content="n"),
        Message(role="assistant", tool_calls=(ToolCall(id="call_9", name="f", arguments=arguments),)),
    ]
    with pytest.raises(ToolArgumentsError, match=rf"messages\[2\] tool call 'call_9' \(f\).*{reason}"):
        ollama_request(msgs, model="m")


def test_audio_is_not_sent_with_a_warning() -> None:
    with pytest.warns(ContentNotSentWarning, match=r"messages\[0\].*audio"):
        body = ollama_request([Message(role="user", content="听", audios=(WAV,))], model="m")
    assert body["messages"] == [{"role": "user", "content": "听"}]


def test_the_client_check_itself_notices_a_dropped_field() -> None:
    # guards the guard: a key ollama's Message does not know would be silently dropped by the client
    with pytest.raises(AssertionError, match="unknown"):
        ollama_client_json({"model": "m", "messages": [{"role": "user", "content": "x", "name": "u"}]})


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(conversations(images=(PNG, JPEG)))
def test_every_assembled_conversation_is_posted_unchanged_by_the_client(
    conv: tuple[list[Message], list],
) -> None:
    msgs, layout = conv
    before = copy.deepcopy(msgs)
    body = ollama_request(Prompt(msgs, layout), model="llava", tools=[TOOL], stream=False)
    assert msgs == before
    validate_ollama(body)
    assert [m["role"] for m in body["messages"]] == [m.role for m in prepare_llm_messages(msgs)]
    assert all(not img.startswith("data:") for m in body["messages"] for img in m.get("images", []))
