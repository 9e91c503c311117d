"""The OpenAI Responses API as the chat-completions shape promptkit analyzes: request bodies
(:func:`responses_request_to_chat`) and response bodies (:func:`responses_response_to_chat`).

>>> responses_request_to_chat({"model": "gpt-5", "input": "hi"})["messages"]
[{'role': 'user', 'content': 'hi'}]
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from promptkit.errors import HttpCaptureError
from promptkit.layout import type_name as _type_name

__all__ = ["responses_request_to_chat", "responses_response_to_chat"]


def _responses_part(part: object, where: str) -> Any:
    if not isinstance(part, Mapping):
        if isinstance(part, str):
            return {"type": "text", "text": part}
        raise HttpCaptureError(f"{where}: expected an object, got {_type_name(part)}")
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
        return {"type": "text", "text": str(part.get("text", ""))}
    if kind == "refusal":
        return {"type": "text", "text": str(part.get("refusal", ""))}
    if kind == "input_image":
        url = part.get("image_url") or (f"file:{part['file_id']}" if part.get("file_id") else "")
        image: dict[str, Any] = {"url": url}
        if part.get("detail"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    return dict(part)  # input_file, input_audio...: kept as they are


def _responses_content(content: object, where: str) -> Any:
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise HttpCaptureError(f"{where}: expected a string or a list of parts, got {_type_name(content)}")
    return [_responses_part(part, f"{where}[{k}]") for k, part in enumerate(content)]


def _tool_call(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    name = item.get("name")
    if not isinstance(name, str):
        raise HttpCaptureError(f"{where}.name: expected a string, got {_type_name(name)}")
    arguments = item.get("arguments", item.get("input", ""))
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {"id": str(item.get("call_id") or item.get("id") or ""), "type": "function",
            "function": {"name": name, "arguments": arguments}}  # fmt: skip


def _responses_items(items: Sequence[Any], where: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    open_assistant = False  # the last message is an assistant turn that further tool calls join
    for k, item in enumerate(items):
        w = f"{where}[{k}]"
        if isinstance(item, str):
            messages.append({"role": "user", "content": item})
            open_assistant = False
            continue
        if not isinstance(item, Mapping):
            raise HttpCaptureError(f"{w}: expected an object, got {_type_name(item)}")
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            if not isinstance(role, str):
                raise HttpCaptureError(f"{w}.role: expected a string, got {_type_name(role)}")
            messages.append(
                {"role": role, "content": _responses_content(item.get("content"), f"{w}.content")}
            )
            open_assistant = role == "assistant"
        elif kind in ("function_call", "custom_tool_call"):
            call = _tool_call(item, w)
            if open_assistant:
                messages[-1].setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
                open_assistant = True
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            content = output if isinstance(output, str) else _responses_content(output, f"{w}.output")
            messages.append(
                {"role": "tool", "tool_call_id": str(item.get("call_id", "")), "content": content}
            )
            open_assistant = False
        else:
            # reasoning, item_reference, web_search_call...: the model sees them; keep their bytes so a
            # change still shows up in the diff
            text = json.dumps(item, ensure_ascii=False, sort_keys=True)
            role = item.get("role") if isinstance(item.get("role"), str) else "assistant"
            messages.append({"role": role, "content": text})
            open_assistant = role == "assistant"
    return messages


def _responses_tool(tool: object, where: str) -> Any:
    if not isinstance(tool, Mapping):
        raise HttpCaptureError(f"{where}: expected an object, got {_type_name(tool)}")
    if tool.get("type") == "function" and "function" not in tool:
        function = {k: v for k, v in tool.items() if k != "type"}
        return {"type": "function", "function": function}
    return dict(tool)  # built-in tools (web_search, file_search...) as they are


def responses_request_to_chat(body: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI Responses API request body as the chat-completions body promptkit analyzes.

    ``instructions`` becomes a leading system message; ``input`` (a string, or a list of items) becomes
    ``messages``: message items keep their role (``input_text`` / ``output_text`` parts become ``text``
    parts, ``input_image`` an ``image_url`` part); ``function_call`` items become the assistant's
    ``tool_calls`` (consecutive calls join one assistant message), ``function_call_output`` items ``tool``
    messages; other items (reasoning, item references, built-in tool calls) become assistant messages
    holding the item's JSON, so that a change in them still shows in the diff. Function tools ``{"type":
    "function", "name", ...}`` are nested as ``{"type": "function", "function": {...}}``. Every other
    field (``model``, ``previous_response_id``...) is kept. Raises :class:`HttpCaptureError` naming the
    field.

    >>> chat = responses_request_to_chat({"model": "gpt-5", "instructions": "Be terse.", "input": [
    ...     {"role": "user", "content": "time?"},
    ...     {"type": "function_call", "call_id": "c1", "name": "now", "arguments": "{}"},
    ...     {"type": "function_call_output", "call_id": "c1", "output": "12:00"}],
    ...     "tools": [{"type": "function", "name": "now", "parameters": {"type": "object"}}]})
    >>> [m["role"] for m in chat["messages"]], chat["messages"][2]["tool_calls"][0]["function"]["name"]
    (['system', 'user', 'assistant', 'tool'], 'now')
    >>> chat["tools"][0]["function"]["name"]
    'now'
    """
    if not isinstance(body, Mapping):
        raise HttpCaptureError(f"request.body: expected an object, got {_type_name(body)}")
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str):
        if instructions:
            messages.append({"role": "system", "content": instructions})
    elif isinstance(instructions, list):
        messages.extend(
            {**m, "role": "system"} if m["role"] == "user" else m
            for m in _responses_items(instructions, "request.body.instructions")
        )
    elif instructions is not None:
        raise HttpCaptureError(
            f"request.body.instructions: expected a string, got {_type_name(instructions)}"
        )
    inp = body.get("input")
    if isinstance(inp, str):
        messages.append({"role": "user", "content": inp})
    elif isinstance(inp, list):
        messages.extend(_responses_items(inp, "request.body.input"))
    elif inp is not None:
        raise HttpCaptureError(f"request.body.input: expected a string or a list, got {_type_name(inp)}")
    out = {k: v for k, v in body.items() if k not in ("input", "instructions", "tools")}
    out["messages"] = messages
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise HttpCaptureError(f"request.body.tools: expected a list, got {_type_name(tools)}")
        out["tools"] = [_responses_tool(t, f"request.body.tools[{k}]") for k, t in enumerate(tools)]
    return out


def responses_response_to_chat(body: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI Responses API response as a chat-completions response: the ``output`` items become the
    first choice's assistant message (text joined, ``function_call`` items as ``tool_calls``, reasoning
    summaries as ``reasoning_content``); ``usage`` (``input_tokens``, ``input_tokens_details.cached_tokens``)
    is kept as it is, ``status`` becomes the ``finish_reason``.

    >>> chat = responses_response_to_chat({"id": "resp_1", "model": "gpt-5", "status": "completed",
    ...     "output": [{"type": "message", "role": "assistant",
    ...                 "content": [{"type": "output_text", "text": "12:00"}]}],
    ...     "usage": {"input_tokens": 2006, "input_tokens_details": {"cached_tokens": 1920}, "output_tokens": 3}})
    >>> chat["choices"][0]["message"], chat["usage"]["input_tokens_details"]["cached_tokens"]
    ({'role': 'assistant', 'content': '12:00'}, 1920)
    """
    if not isinstance(body, Mapping):
        raise HttpCaptureError(f"response.body: expected an object, got {_type_name(body)}")
    output = body.get("output") or []
    if not isinstance(output, list):
        raise HttpCaptureError(f"response.body.output: expected a list, got {_type_name(output)}")
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for k, item in enumerate(output):
        w = f"response.body.output[{k}]"
        if not isinstance(item, Mapping):
            raise HttpCaptureError(f"{w}: expected an object, got {_type_name(item)}")
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if isinstance(part, Mapping) and part.get("type") == "output_text":
                    text.append(str(part.get("text", "")))
                elif isinstance(part, Mapping) and part.get("type") == "refusal":
                    text.append(str(part.get("refusal", "")))
        elif kind in ("function_call", "custom_tool_call"):
            calls.append(_tool_call(item, w))
        elif kind == "reasoning":
            for part in item.get("summary") or ():
                if isinstance(part, Mapping):
                    reasoning.append(str(part.get("text", "")))
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if reasoning:
        message["reasoning_content"] = "\n".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    chat: dict[str, Any] = {"id": body.get("id"), "object": "response", "model": body.get("model"),
                            "created": body.get("created_at")}  # fmt: skip
    chat = {k: v for k, v in chat.items() if v is not None}
    chat["choices"] = [{"index": 0, "message": message, "finish_reason": body.get("status")}]
    if body.get("usage") is not None:
        chat["usage"] = body["usage"]
    return chat
