"""Helpers over request bodies that every family of transforms shares: the regions of a prompt
(:func:`regions`), a message's text (:func:`text_of`), and private helpers (a copy of the body safe to
edit, a message's role and kinds, text mapped over string or list content).

>>> text_of("plain")
'plain'
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from promptkit.layout import (
    HEAD_ROLES,
    LayoutEntry,
    RequestRecord,
    head_end,
    history_end,
    role_head_end,
    role_history_end,
)

__all__ = ["regions", "text_of"]


#: Roles of the leading head region of a prompt without a layout.
_HEAD_ROLES: Final[frozenset[str]] = HEAD_ROLES


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _aligned_layout(record: RequestRecord) -> list[LayoutEntry] | None:
    messages = record.request.get("messages") or []
    if record.layout is None or len(record.layout) != len(messages):
        return None
    return list(record.layout)


def regions(record: RequestRecord) -> tuple[int, int]:
    """``(head, history_end)`` message indices of ``record``: messages ``[0, head)`` are the stable
    head, ``[head, history_end)`` the history, the rest the per-turn tail (see the module docstring).

    >>> body = {"messages": [{"role": "system", "content": "a"}, {"role": "user", "content": "q1"},
    ...                      {"role": "assistant", "content": "r1"}, {"role": "user", "content": "q2"}]}
    >>> regions(RequestRecord(body, session="s"))
    (1, 3)
    """
    messages = list(record.request.get("messages") or [])
    layout = _aligned_layout(record)
    if layout is not None:
        return head_end(layout), history_end(layout)
    roles = [_role(m) for m in messages]
    return role_head_end(roles, _HEAD_ROLES), role_history_end(roles, _HEAD_ROLES)


def _role(message: Any) -> str | None:
    role = message.get("role") if isinstance(message, Mapping) else None
    return role if isinstance(role, str) else None


def text_of(content: Any) -> str:
    """The text of a message ``content``: the string, or the text parts joined by newlines.

    >>> text_of([{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}])
    'a\\nb'
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        )
    return ""


def _kinds(message: Mapping[str, Any]) -> set[str]:
    """The kinds a message counts as: ``tool-call`` (assistant with tool calls), ``tool-result`` (role
    tool), ``text``, plus the ``type`` of each content part (``text``, ``image_url``, ``tool_result``...)."""
    kinds = set()
    if message.get("tool_calls"):
        kinds.add("tool-call")
    if message.get("role") == "tool":
        kinds.add("tool-result")
    content = message.get("content")
    if isinstance(content, str) and content:
        kinds.add("text")
    if isinstance(content, list):
        kinds.update(str(p.get("type")) for p in content if isinstance(p, Mapping) and p.get("type"))
    return kinds


def _map_text(content: Any, fn: Callable[[str], str]) -> Any:
    """``content`` with ``fn`` applied to its text (a string, or each text part of a list)."""
    if isinstance(content, str):
        return fn(content)
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                part = {**part, "text": fn(part["text"])}
            out.append(part)
        return out
    return content


def _body(record: RequestRecord) -> dict[str, Any]:
    """A deep copy of the request body, safe to edit."""
    return copy.deepcopy(dict(record.request))
