"""Check request bodies against the official SDKs' request types (openai, anthropic, ollama).

The openai and anthropic request types are TypedDicts; pydantic validates them strictly here (no extra
keys, no coercion). Their ``Iterable[...]`` fields validate lazily, so the result is walked and every
iterator consumed: that is when nested items are checked. Ollama's request type is a pydantic model: the
body goes through the exact steps the ``ollama`` client takes before it posts, and must come out unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import ollama
from anthropic.types.message_create_params import (
    MessageCreateParamsNonStreaming,
    MessageCreateParamsStreaming,
)
from ollama._client import _copy_messages, _copy_tools
from ollama._types import ChatRequest
from openai.types.chat.completion_create_params import (
    CompletionCreateParamsNonStreaming,
    CompletionCreateParamsStreaming,
)
from pydantic import ConfigDict, TypeAdapter

_STRICT = ConfigDict(extra="forbid", strict=True)
_OPENAI = TypeAdapter(list[CompletionCreateParamsNonStreaming], config=_STRICT)
_OPENAI_STREAM = TypeAdapter(list[CompletionCreateParamsStreaming], config=_STRICT)
_ANTHROPIC = TypeAdapter(list[MessageCreateParamsNonStreaming], config=_STRICT)
_ANTHROPIC_STREAM = TypeAdapter(list[MessageCreateParamsStreaming], config=_STRICT)


def _materialize(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _materialize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_materialize(v) for v in value]
    if isinstance(value, Iterator):
        return [_materialize(v) for v in value]
    return value


def _json_roundtrip(body: dict[str, Any]) -> None:
    assert json.loads(json.dumps(body, ensure_ascii=False, allow_nan=False)) == body


def validate_openai(body: dict[str, Any]) -> Any:
    """Validate a chat-completions body against openai's CompletionCreateParams (strict, no extra keys)."""
    _json_roundtrip(body)
    adapter = _OPENAI_STREAM if body.get("stream") else _OPENAI
    return _materialize(adapter.validate_python([body]))[0]


def validate_anthropic(body: dict[str, Any]) -> Any:
    """Validate a Messages body against anthropic's MessageCreateParams (strict, no extra keys)."""
    _json_roundtrip(body)
    adapter = _ANTHROPIC_STREAM if body.get("stream") else _ANTHROPIC
    return _materialize(adapter.validate_python([body]))[0]


def ollama_client_json(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON the ollama client itself would post for ``body``'s fields (``Client.chat``'s own steps)."""
    _json_roundtrip(body)
    known = set(ChatRequest.model_fields)
    assert set(body) <= known, f"keys unknown to ollama's ChatRequest: {set(body) - known}"
    for m in body["messages"]:
        assert set(m) <= set(ollama.Message.model_fields), f"keys unknown to ollama.Message: {set(m)}"
    return ChatRequest(
        model=body["model"],
        messages=list(_copy_messages(body["messages"])),
        tools=list(_copy_tools(body.get("tools"))),
        stream=body.get("stream", False),
        think=body.get("think"),
        format=body.get("format"),
        options=body.get("options"),
        keep_alive=body.get("keep_alive"),
    ).model_dump(exclude_none=True)


def validate_ollama(body: dict[str, Any]) -> None:
    """The ollama client posts exactly ``body`` (its own step drops falsy message fields such as ``""``)."""
    posted = ollama_client_json(body)
    assert posted["model"] == body["model"]
    assert posted["messages"] == [{k: v for k, v in m.items() if v} for m in body["messages"]]
    assert posted.get("tools", []) == body.get("tools", [])
    assert posted.get("options") == body.get("options")
