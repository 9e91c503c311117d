"""Tests for promptkit/chat/request.py: ChatModelRequest."""

from __future__ import annotations

import doctest

import attrs
import pytest

import promptkit.chat.request as request_module
from promptkit.chat.message import Message
from promptkit.chat.request import ChatModelRequest, ChatModelRequestError

HI = Message(role="user", content="hi")


def test_docstring_examples() -> None:
    result = doctest.testmod(request_module)
    assert result.attempted > 0 and result.failed == 0


def test_fields_are_the_contracts_and_there_is_no_model() -> None:
    names = [f.name for f in attrs.fields(ChatModelRequest)]
    assert names == ["messages", "tools", "temperature", "max_tokens", "think"]
    assert "model" not in names and "provider" not in names


def test_values_are_stored_as_immutable_copies() -> None:
    tool = {"type": "function", "function": {"name": "now"}}
    msgs = [HI]
    req = ChatModelRequest(msgs, tools=[tool], temperature=0, max_tokens=1, think=True)
    msgs.append(HI)
    tool["function"]["name"] = "changed"  # type: ignore[index]
    assert req.messages == (HI,)
    assert req.tools == ({"type": "function", "function": {"name": "now"}},)
    assert ChatModelRequest([HI]).tools is None and ChatModelRequest([HI], tools=[]).tools is None


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"messages": "hi"}, "messages"),
        ({"messages": HI}, "messages"),
        ({"messages": [{"role": "user"}]}, r"messages\[0\]"),
        ({"messages": [HI], "tools": {"type": "function"}}, "tools"),
        ({"messages": [HI], "tools": ["now"]}, r"tools\[0\]"),
        ({"messages": [HI], "temperature": -0.1}, "temperature"),
        ({"messages": [HI], "temperature": True}, "temperature"),
        ({"messages": [HI], "max_tokens": 0}, "max_tokens"),
        ({"messages": [HI], "max_tokens": 1.5}, "max_tokens"),
        ({"messages": [HI], "think": "yes"}, "think"),
    ],
)
def test_bad_fields_are_named(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ChatModelRequestError, match=f"ChatModelRequest.{field}"):
        ChatModelRequest(**kwargs)  # type: ignore[arg-type]
