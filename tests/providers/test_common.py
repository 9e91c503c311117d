"""promptkit.providers._common: input coercion, provenance through prepare_llm_messages, data URLs."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings, strategies as st

from promptkit.egress import prepare_llm_messages
from promptkit.providers._common import (
    parse_data_url,
    prepare_input,
    system_hint_content,
)
from promptkit.schema.message import Message

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


@settings(max_examples=150, deadline=None)
@given(st.lists(any_message(), max_size=10))
def test_prepare_input_matches_prepare_llm_messages(msgs: list[Message]) -> None:
    prepared = prepare_input(msgs, where="t")
    assert list(prepared.messages) == prepare_llm_messages(msgs)
    assert prepared.layout is None


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
        if ins:  # the user message that carries a tool result's images, after that tool's run
            origin = next(k for k in range(j) if prepared.sources[k] == src and not prepared.inserted[k])
            assert all(prepared.messages[k].role == "tool" or prepared.inserted[k] for k in range(origin, j))
            assert m.role == "user" and m.images == msgs[src].images and msgs[src].role == "tool"
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
