"""Tool definitions and JSON keys: :class:`SortTools` puts the tool definitions in name order and every
JSON object's keys in order (:func:`sorted_json`), in the definitions and the tool-call arguments.

>>> tool_name({"type": "function", "function": {"name": "grep"}})
'grep'
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from promptkit.layout import (
    RequestRecord,
)
from promptkit.whatif.transforms._bodies import (
    _body,
)
from promptkit.whatif.transforms.base import Transform

__all__ = ["SortTools", "sorted_json", "tool_name"]


def sorted_json(value: Any) -> Any:
    """``value`` with every JSON object's keys sorted (recursively).

    >>> sorted_json({"b": [{"d": 1, "c": 2}], "a": 0})
    {'a': 0, 'b': [{'c': 2, 'd': 1}]}
    """
    if isinstance(value, Mapping):
        return {k: sorted_json(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list):
        return [sorted_json(v) for v in value]
    return value


def tool_name(tool: Any) -> str:
    """The name of a tool definition (OpenAI ``function.name`` or Anthropic ``name``; ``""`` when none)."""
    if isinstance(tool, Mapping):
        fn = tool.get("function")
        if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
            return str(fn["name"])
        if isinstance(tool.get("name"), str):
            return str(tool["name"])
    return ""


@attrs.frozen(slots=True)
class SortTools(Transform):
    """Sort the tool definitions by name and every JSON object's keys, in the tool definitions and in
    the tool-call arguments of assistant messages (a JSON string of arguments is re-serialized with
    ``json.dumps(..., sort_keys=True, ensure_ascii=False)``; a string that is not JSON stays as it is).
    A ``cache_control`` on a tool moves to the last tool, so the cached span still covers every tool.

    >>> r = RequestRecord({"tools": [{"name": "b", "input_schema": {"y": 1, "x": 2}}, {"name": "a"}],
    ...                    "messages": [{"role": "user", "content": "hi"}]}, session="s")
    >>> SortTools().apply(r).request["tools"]
    [{'name': 'a'}, {'input_schema': {'x': 2, 'y': 1}, 'name': 'b'}]
    """

    def describe(self) -> str:
        return "sort tool definitions by name and JSON keys"

    def apply(self, record: RequestRecord) -> RequestRecord:
        body = _body(record)
        tools = body.get("tools")
        if isinstance(tools, list) and tools:
            cache_control = None
            plain = []
            for tool in tools:
                if isinstance(tool, Mapping) and "cache_control" in tool:
                    cache_control = tool["cache_control"]
                    tool = {k: v for k, v in tool.items() if k != "cache_control"}
                plain.append(sorted_json(tool))
            plain.sort(key=tool_name)
            if cache_control is not None and isinstance(plain[-1], dict):
                plain[-1]["cache_control"] = cache_control
            body["tools"] = plain
        messages = body.get("messages")
        if isinstance(messages, list):
            body["messages"] = [_sort_message(m) for m in messages]
        if json.dumps(body, default=str) == json.dumps(record.request, default=str):  # key order counts
            return record
        return attrs.evolve(record, request=body)


def _sort_arguments(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return arguments
        return json.dumps(sorted_json(parsed), sort_keys=True, ensure_ascii=False)
    return sorted_json(arguments)


def _sort_message(message: Any) -> Any:
    if not isinstance(message, Mapping):
        return message
    out = dict(message)
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        new_calls = []
        for call in calls:
            if isinstance(call, Mapping) and isinstance(call.get("function"), Mapping):
                fn = dict(call["function"])
                if "arguments" in fn:
                    fn["arguments"] = _sort_arguments(fn["arguments"])
                call = {**call, "function": fn}
            new_calls.append(call)
        out["tool_calls"] = new_calls
    content = message.get("content")
    if isinstance(content, list):  # Anthropic tool_use blocks
        out["content"] = [
            {**p, "input": sorted_json(p["input"])}
            if isinstance(p, Mapping) and p.get("type") == "tool_use" and isinstance(p.get("input"), Mapping)
            else p
            for p in content
        ]
    return out
