"""Stream reassembly: the whole response body of a streamed call, from its server-sent events, for the
three stream kinds (OpenAI chat-completions chunks, Anthropic Messages events, OpenAI Responses events).

Example::

    >>> sse = ('data: {"id":"c1","model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}\\n\\n'
    ...        'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}\\n\\n'
    ...        'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2}}\\n\\n'
    ...        'data: [DONE]\\n\\n')
    >>> result = reassemble_stream("openai-chat", sse)
    >>> result.complete, result.body["choices"][0]["message"]["content"], result.body["usage"]["prompt_tokens"]
    (True, 'Hello', 9)
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from promptkit.errors import HttpCaptureError
from promptkit.formats.fields import loads_json
from promptkit.formats.wire.sse import SSEEvent, parse_sse
from promptkit.formats.wire.urls import API_KINDS, ApiKind
from promptkit.layout import type_name as _type_name

__all__ = ["StreamResult", "reassemble_stream"]


@attrs.frozen(slots=True)
class StreamResult:
    """A reassembled stream: the whole response ``body``, whether the stream ``complete`` d (its final
    event arrived: ``[DONE]``, ``message_stop``, ``response.completed``), and the ``error`` object an
    ``error`` event carried (None without one)."""

    body: Mapping[str, Any]
    complete: bool
    error: Mapping[str, Any] | None = None


def _events_json(text: str, where: str) -> Iterator[tuple[int, SSEEvent, Any]]:
    events = parse_sse(text)
    terminated = text.endswith(("\n\n", "\r\n\r\n", "\r\r"))
    for i, event in enumerate(events):
        if event.data.strip() == "[DONE]":
            yield i, event, None
            continue
        try:
            data = loads_json(event.data)
        except json.JSONDecodeError as exc:
            if i == len(events) - 1 and not terminated:
                return  # the stream was cut inside its last event: what came before stands
            raise HttpCaptureError(f"{where}: event {i}: data is not JSON ({exc.msg})") from None
        yield i, event, data


def _add_chat_delta(choices: dict[int, dict[str, Any]], choice: Mapping[str, Any]) -> None:
    """Add one chunk's ``choice`` (its delta: role, text pieces, tool-call pieces; its finish reason) to
    the state of that choice in ``choices``."""
    state = choices.setdefault(
        int(choice.get("index", 0)),
        {
            "role": "assistant",
            "content": [],
            "reasoning_content": [],
            "refusal": [],
            "calls": {},
            "finish": None,
        },
    )
    delta = choice.get("delta") or {}
    if isinstance(delta.get("role"), str):
        state["role"] = delta["role"]
    for key in ("content", "reasoning_content", "refusal"):
        if isinstance(delta.get(key), str):
            state[key].append(delta[key])
    for call in delta.get("tool_calls") or ():
        _add_tool_call_delta(state["calls"], call)
    if choice.get("finish_reason") is not None:
        state["finish"] = choice["finish_reason"]


def _add_tool_call_delta(calls: dict[int, dict[str, Any]], call: Any) -> None:
    """Add one piece of a streamed tool call (id, type, pieces of name and arguments) to ``calls``."""
    slot = calls.setdefault(
        int(call.get("index", 0)), {"id": None, "type": "function", "name": [], "arguments": []}
    )
    if call.get("id"):
        slot["id"] = call["id"]
    if call.get("type"):
        slot["type"] = call["type"]
    function = call.get("function") or {}
    if isinstance(function.get("name"), str):
        slot["name"].append(function["name"])
    if isinstance(function.get("arguments"), str):
        slot["arguments"].append(function["arguments"])


def _chat_message(state: Mapping[str, Any]) -> dict[str, Any]:
    """The whole message of one reassembled choice."""
    message: dict[str, Any] = {"role": state["role"], "content": "".join(state["content"]) or None}
    if state["reasoning_content"]:
        message["reasoning_content"] = "".join(state["reasoning_content"])
    if state["refusal"]:
        message["refusal"] = "".join(state["refusal"])
    if state["calls"]:
        message["tool_calls"] = [
            {
                "id": slot["id"],
                "type": slot["type"],
                "function": {"name": "".join(slot["name"]), "arguments": "".join(slot["arguments"])},
            }
            for _, slot in sorted(state["calls"].items())
        ]
    return message


def _reassemble_openai_chat(text: str, where: str) -> StreamResult:
    out: dict[str, Any] = {}
    choices: dict[int, dict[str, Any]] = {}
    usage: Any = None
    done = False
    error: Mapping[str, Any] | None = None
    for i, _event, chunk in _events_json(text, where):
        if chunk is None:
            done = True
            continue
        if not isinstance(chunk, Mapping):
            raise HttpCaptureError(f"{where}: event {i}: expected an object, got {_type_name(chunk)}")
        if isinstance(chunk.get("error"), Mapping):
            error = chunk["error"]
            continue
        for key in ("id", "created", "model", "system_fingerprint", "service_tier"):
            if chunk.get(key) is not None:
                out[key] = chunk[key]
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, Mapping):
                raise HttpCaptureError(
                    f"{where}: event {i}.choices: expected objects, got {_type_name(choice)}"
                )
            _add_chat_delta(choices, choice)
    body: dict[str, Any] = {"id": out.get("id"), "object": "chat.completion"}
    body.update({k: v for k, v in out.items() if k != "id"})
    body["choices"] = [
        {"index": index, "message": _chat_message(choices[index]), "finish_reason": choices[index]["finish"]}
        for index in sorted(choices)
    ]
    if usage is not None:
        body["usage"] = usage
    return StreamResult(body, done, error)


def _reassemble_anthropic(text: str, where: str) -> StreamResult:
    message: dict[str, Any] = {}
    usage: dict[str, Any] = {}
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, list[str]] = {}
    complete = False
    error: Mapping[str, Any] | None = None

    def finish_block(index: int) -> None:
        pieces = partial.pop(index, None)
        if pieces is None:
            return
        joined = "".join(pieces)
        try:
            blocks[index]["input"] = loads_json(joined) if joined.strip() else {}
        except json.JSONDecodeError:
            blocks[index]["input"] = joined  # cut off mid-arguments: keep what arrived

    for i, _event, data in _events_json(text, where):
        if not isinstance(data, Mapping):
            raise HttpCaptureError(f"{where}: event {i}: expected an object, got {_type_name(data)}")
        kind = data.get("type")
        if kind == "message_start":
            start = data.get("message")
            if not isinstance(start, Mapping):
                raise HttpCaptureError(
                    f"{where}: event {i}.message: expected an object, got {_type_name(start)}"
                )
            message = {k: copy.deepcopy(v) for k, v in start.items() if k not in ("content", "usage")}
            usage.update(start.get("usage") or {})
        elif kind == "content_block_start":
            block = data.get("content_block")
            if not isinstance(block, Mapping):
                raise HttpCaptureError(
                    f"{where}: event {i}.content_block: expected an object, got {_type_name(block)}"
                )
            index = int(data.get("index", len(blocks)))
            blocks[index] = copy.deepcopy(dict(block))
            if block.get("type") in ("tool_use", "server_tool_use", "mcp_tool_use"):
                partial[index] = []
        elif kind == "content_block_delta":
            index = int(data.get("index", 0))
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            delta = data.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + str(delta.get("text", ""))
            elif dtype == "input_json_delta":
                partial.setdefault(index, []).append(str(delta.get("partial_json", "")))
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
            elif dtype == "signature_delta":
                block["signature"] = block.get("signature", "") + str(delta.get("signature", ""))
            elif dtype == "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))
        elif kind == "content_block_stop":
            finish_block(int(data.get("index", 0)))
        elif kind == "message_delta":
            delta = data.get("delta") or {}
            message.update({k: v for k, v in delta.items()})
            usage.update({k: v for k, v in (data.get("usage") or {}).items() if v is not None})
        elif kind == "message_stop":
            complete = True
        elif kind == "error":
            error = data.get("error") if isinstance(data.get("error"), Mapping) else data
    for index in list(partial):
        finish_block(index)
    body = dict(message)
    body["content"] = [blocks[i] for i in sorted(blocks)]
    if usage:
        body["usage"] = usage
    return StreamResult(body, complete and error is None, error)


def _reassemble_responses(text: str, where: str) -> StreamResult:
    created: Mapping[str, Any] | None = None
    final: Mapping[str, Any] | None = None
    items: dict[int, Any] = {}
    error: Mapping[str, Any] | None = None
    for i, _event, data in _events_json(text, where):
        if not isinstance(data, Mapping):
            raise HttpCaptureError(f"{where}: event {i}: expected an object, got {_type_name(data)}")
        kind = data.get("type")
        if kind in ("response.created", "response.in_progress") and isinstance(data.get("response"), Mapping):
            created = data["response"]
        elif kind == "response.output_item.done":
            items[int(data.get("output_index", len(items)))] = data.get("item")
        elif kind in ("response.completed", "response.failed", "response.incomplete"):
            if not isinstance(data.get("response"), Mapping):
                raise HttpCaptureError(f"{where}: event {i}.response: expected an object")
            final = data["response"]
            if kind == "response.failed" and isinstance(final.get("error"), Mapping):
                error = final["error"]
        elif kind == "error":
            error = data
    if final is not None:
        return StreamResult(dict(final), error is None, error)
    body = dict(created or {})
    body["output"] = [items[i] for i in sorted(items)]
    body["status"] = "incomplete"
    return StreamResult(body, False, error)


def reassemble_stream(api: ApiKind, text: str, *, where: str = "response.body") -> StreamResult:
    """The whole response body of a streamed call, from its event stream ``text``.

    - ``openai-chat``: the chunks' deltas joined per choice (content, ``reasoning_content``, refusal,
      tool calls by index), ``usage`` from the chunk that carries it;
    - ``anthropic-messages``: ``message_start`` + content blocks with their deltas (text, tool input JSON,
      thinking, signatures, citations) + ``message_delta`` (stop reason; its usage updates the start's);
    - ``openai-responses``: the ``response`` of ``response.completed`` (or ``failed`` / ``incomplete``);
      a stream cut off before it gives the created response with the finished output items.

    A stream cut off early gives what arrived, with ``complete`` False. Raises :class:`HttpCaptureError`
    when an event's data is not JSON.

    >>> sse = ('event: message_start\\ndata: {"type":"message_start","message":{"id":"m1","role":"assistant",'
    ...        '"model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":12,"cache_read_input_tokens":2048,'
    ...        '"output_tokens":1}}}\\n\\n'
    ...        'data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\\n\\n'
    ...        'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\\n\\n'
    ...        'data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}\\n\\n'
    ...        'data: {"type":"message_stop"}\\n\\n')
    >>> r = reassemble_stream("anthropic-messages", sse)
    >>> r.body["content"], r.body["usage"]["output_tokens"], r.body["stop_reason"], r.complete
    ([{'type': 'text', 'text': 'Hi'}], 5, 'end_turn', True)
    """
    if api == "openai-chat":
        return _reassemble_openai_chat(text, where)
    if api == "anthropic-messages":
        return _reassemble_anthropic(text, where)
    if api == "openai-responses":
        return _reassemble_responses(text, where)
    raise HttpCaptureError(f"unknown API {api!r}; expected one of {', '.join(API_KINDS)}")
