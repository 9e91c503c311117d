"""The LLM call contract: :class:`ChatModelRequest` (pipeline document §7).

A request carries no model and no provider: in the framework each model is its own service entry that
already knows both. Here the same holds: every request body builder in :mod:`promptkit.providers` takes a
``ChatModelRequest`` in place of the message list and is told the model by its ``model=`` argument.

>>> from promptkit.providers import openai_request
>>> req = ChatModelRequest([Message(role="user", content="hi")], temperature=0.2, max_tokens=64)
>>> body = openai_request(req, model="gpt-4o-mini")
>>> body["temperature"], body["max_completion_tokens"]
(0.2, 64)
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from promptkit.chat.message import Message
from promptkit.errors import ChatModelRequestError

__all__ = ["ChatModelRequest", "ChatModelRequestError"]


def _messages(value: Iterable[Message]) -> tuple[Message, ...]:
    if isinstance(value, (str, bytes, Mapping, Message)) or not isinstance(value, Iterable):
        raise ChatModelRequestError(
            f"ChatModelRequest.messages: a sequence of Message; got {type(value).__name__}"
        )
    items = tuple(value)
    for i, m in enumerate(items):
        if not isinstance(m, Message):
            raise ChatModelRequestError(f"ChatModelRequest.messages[{i}]: a Message; got {type(m).__name__}")
    return items


def _tools(value: Sequence[Mapping[str, Any]] | None) -> tuple[dict[str, Any], ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ChatModelRequestError(
            f"ChatModelRequest.tools: a sequence of tool definitions; got {type(value).__name__}"
        )
    tools = []
    for i, tool in enumerate(value):
        if not isinstance(tool, Mapping):
            raise ChatModelRequestError(f"ChatModelRequest.tools[{i}]: a dict; got {type(tool).__name__}")
        tools.append(copy.deepcopy(dict(tool)))
    return tuple(tools) or None


def _check_temperature(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ChatModelRequestError(f"ChatModelRequest.temperature: a non-negative number; got {value!r}")


def _check_max_tokens(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ChatModelRequestError(f"ChatModelRequest.max_tokens: a positive int; got {value!r}")


def _check_think(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, bool):
        raise ChatModelRequestError(f"ChatModelRequest.think: True, False or None; got {value!r}")


@attrs.frozen
class ChatModelRequest:
    """One chat call: ``messages`` and optionally ``tools``, ``temperature``, ``max_tokens``, ``think``.

    - ``messages``: the messages to send (the builders run :func:`promptkit.prepare_llm_messages` on them);
    - ``tools``: OpenAI-style function tool dicts (copied; the builders validate them);
    - ``temperature`` (>= 0), ``max_tokens`` (>= 1): None leaves the provider's default;
    - ``think``: turn the model's thinking on or off; None leaves the provider's default. Each builder
      maps it to its API (DeepSeek ``thinking``, Ollama ``think``); one without an on/off switch warns.

    There is no ``model`` or ``provider`` field (the builder's ``model=`` argument says which), and the
    framework's abort ``signal`` is a runtime object with no place in a request value.

    >>> ChatModelRequest([Message(role="user", content="hi")], think=False).think
    False
    """

    messages: tuple[Message, ...] = attrs.field(converter=_messages)
    tools: tuple[dict[str, Any], ...] | None = attrs.field(
        default=None, kw_only=True, converter=_tools, hash=False
    )
    temperature: float | None = attrs.field(default=None, kw_only=True, validator=_check_temperature)
    max_tokens: int | None = attrs.field(default=None, kw_only=True, validator=_check_max_tokens)
    think: bool | None = attrs.field(default=None, kw_only=True, validator=_check_think)
