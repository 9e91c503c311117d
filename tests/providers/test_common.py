"""promptkit.providers._common: input coercion, provenance through prepare_llm_messages, data URLs."""

from __future__ import annotations

import base64
import warnings

import pytest
from hypothesis import given, settings, strategies as st

from promptkit.chat.egress import prepare_llm_messages
from promptkit.chat.message import Message
from promptkit.chat.request import ChatModelRequest
from promptkit.providers._common import (
    RequestBuildError,
    parse_data_url,
    prepare_input,
    system_hint_content,
)

from .strategies import Entry, Prompt, any_message, conversations


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["image/png", "image/jpeg", "audio/wav", "text/plain", ""]), st.binary(max_size=40))
def test_data_url_round_trip(mime: str, payload: bytes) -> None:
    data = base64.b64encode(payload).decode()
    assert parse_data_url(f"data:{mime};base64,{data}") == (mime, True, data)
    assert parse_data_url(f"DATA:{mime};charset=utf-8;BASE64,{data}") == (mime, True, data)
    assert parse_data_url(f"data:{mime},{data}") == (mime, False, data)


@pytest.mark.parametrize(
    "url",
    ["https://x/a.png", "file:///a.png", "/tmp/a.png", "iVBORw0KGgo=", "data:", "data:image/png;base64"],
)
def test_not_data_urls(url: str) -> None:
    assert parse_data_url(url) is None


def test_system_hint_content() -> None:
    assert system_hint_content("x") == "[系统提示]\nx"
    assert system_hint_content("[系统通知] x") == "[系统通知] x"


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.lists(any_message(), max_size=10))
def test_prepare_input_matches_prepare_llm_messages(msgs: list[Message]) -> None:
    prepared = prepare_input(msgs, where="t")
    assert list(prepared.messages) == prepare_llm_messages(msgs)
    assert prepared.layout is None


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(conversations())
def test_provenance_of_every_prepared_message(conv: tuple[list[Message], list[Entry]]) -> None:
    msgs, layout = conv
    prepared = prepare_input(Prompt(msgs, layout), where="t")
    assert [s for s, ins in zip(prepared.sources, prepared.inserted, strict=True) if not ins] == list(
        range(len(msgs))
    )
    assert prepared.layout is not None
    for j, (m, src, ins) in enumerate(
        zip(prepared.messages, prepared.sources, prepared.inserted, strict=True)
    ):
        assert prepared.layout[j] is layout[src]
        if ins:  # the user message carrying the images of a tool run; its source is the run's first with images
            origin = next(k for k in range(j) if prepared.sources[k] == src and not prepared.inserted[k])
            assert all(prepared.messages[k].role == "tool" for k in range(origin, j))
            assert msgs[src].role == "tool" and msgs[src].images
            assert not any(msgs[k].images for k in range(src) if all(msgs[i].role == "tool" for i in range(k, src)))
            assert m.role == "user" and m.images is not None and m.images[: len(msgs[src].images)] == msgs[src].images
        else:
            assert m.content == prepare_llm_messages([msgs[src]])[0].content


def test_head_length() -> None:
    msgs = [
        Message(role="notice", content="n"),
        Message(role="system", content="s"),
        Message(role="user", content="u"),
    ]
    assert prepare_input(msgs, where="t").head_length() == 2
    assert prepare_input([], where="t").head_length() == 0



# ---------------------------------------------------------------- ChatModelRequest accepted everywhere

_REQ_MSGS = [Message(role="system", content="p"), Message(role="user", content="hi")]
_TOOL = {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}


@pytest.mark.parametrize("builder", ["openai_request", "deepseek_request", "ollama_request", "anthropic_request"])
def test_every_builder_takes_a_chat_model_request_like_its_own_arguments(builder: str) -> None:
    import promptkit.providers as providers

    build = getattr(providers, builder)
    req = ChatModelRequest(_REQ_MSGS, tools=[_TOOL], temperature=0.5, max_tokens=99)
    assert build(req, model="m") == build(_REQ_MSGS, model="m", tools=[_TOOL], temperature=0.5, max_tokens=99)


@pytest.mark.parametrize("builder", ["openai_request", "deepseek_request", "ollama_request", "anthropic_request"])
@pytest.mark.parametrize("field", ["tools", "temperature", "max_tokens"])
def test_a_parameter_given_twice_is_an_error_naming_it(builder: str, field: str) -> None:
    import promptkit.providers as providers

    values = {"tools": [_TOOL], "temperature": 0.5, "max_tokens": 9}
    req = ChatModelRequest(_REQ_MSGS, **{field: values[field]})  # type: ignore[arg-type]
    with pytest.raises(RequestBuildError, match=f"{field} is given twice"):
        getattr(providers, builder)(req, model="m", **{field: values[field]})


@pytest.mark.parametrize("think", [True, False])
def test_think_is_deepseeks_thinking_switch_and_ollamas_think(think: bool) -> None:
    from promptkit.providers import deepseek_request, ollama_request

    req = ChatModelRequest(_REQ_MSGS, think=think)
    assert deepseek_request(req, model="m")["thinking"] == {"type": "enabled" if think else "disabled"}
    assert ollama_request(req, model="m")["think"] is think
    assert "thinking" not in deepseek_request(ChatModelRequest(_REQ_MSGS), model="m")
    assert "think" not in ollama_request(ChatModelRequest(_REQ_MSGS), model="m")
    with pytest.raises(RequestBuildError, match="thinking is given twice"):
        deepseek_request(req, model="m", thinking={"type": "enabled"})


@pytest.mark.parametrize("builder", ["openai_request", "anthropic_request"])
def test_think_without_an_on_off_switch_warns_and_sends_nothing(builder: str) -> None:
    import promptkit.providers as providers
    from promptkit.providers import ContentNotSentWarning

    build = getattr(providers, builder)
    with pytest.warns(ContentNotSentWarning, match="think=True not sent"):
        body = build(ChatModelRequest(_REQ_MSGS, think=True), model="m")
    assert body == build(_REQ_MSGS, model="m")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert build(ChatModelRequest(_REQ_MSGS, think=False), model="m") == body


def test_request_record_takes_a_chat_model_request() -> None:
    from promptkit.providers import request_record

    rec = request_record(ChatModelRequest(_REQ_MSGS, max_tokens=5), model="deepseek-chat")
    assert rec["request"]["max_tokens"] == 5 and len(rec["request"]["messages"]) == 2
