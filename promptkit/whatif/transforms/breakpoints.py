"""Anthropic breakpoints: :class:`Breakpoints` places ``cache_control`` marks at the end of the tool
definitions, the stable head, the history or the whole prompt (:data:`BreakpointPosition`).

>>> Breakpoints(("head",)).at
('head',)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from promptkit.errors import UsageError
from promptkit.layout import (
    RequestRecord,
)
from promptkit.whatif.transforms._bodies import (
    _body,
    _strings,
    regions,
)
from promptkit.whatif.transforms.base import Transform

__all__ = ["BreakpointPosition", "Breakpoints"]


#: Where :class:`Breakpoints` can place a breakpoint: the end of the tool definitions, of the stable
#: head, of the history, or of the whole prompt (the last message).
BreakpointPosition = str
_POSITIONS: Final[tuple[str, ...]] = ("tools", "head", "history", "last")


def _check_positions(instance: Any, attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    bad = [p for p in value if p not in _POSITIONS]
    if bad or not value:
        raise UsageError(
            f"Breakpoints.at: expected some of {', '.join(_POSITIONS)}, got {', '.join(value) or 'none'}"
        )


def _mark(message: Any, cc: dict[str, Any]) -> Any:
    """``message`` with ``cache_control`` on its last content part (a string content becomes one text part)."""
    if not isinstance(message, Mapping):
        return message
    content = message.get("content")
    if isinstance(content, str) and content:
        return {**message, "content": [{"type": "text", "text": content, "cache_control": cc}]}
    if isinstance(content, list) and content and isinstance(content[-1], Mapping):
        return {**message, "content": [*content[:-1], {**content[-1], "cache_control": cc}]}
    return {**message, "cache_control": cc}


def _unmark(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _unmark(v) for k, v in obj.items() if k != "cache_control"}
    if isinstance(obj, list):
        return [_unmark(v) for v in obj]
    return obj


@attrs.frozen(slots=True)
class Breakpoints(Transform):
    """Replace the Anthropic cache breakpoints: remove every ``cache_control`` and put one at each of
    ``at``: ``tools`` (the last tool), ``head`` (the last block of the stable head, the top-level
    ``system`` included), ``history`` (the last history message), ``last`` (the last message: the next
    call of a conversation reads the whole prompt back). The default, ``auto``, is tools + head + last
    (at most 4 are allowed; these are at most 4). ``ttl`` adds a TTL to each.

    >>> r = RequestRecord({"system": "Be terse.", "messages": [{"role": "user", "content": "hi"}]}, session="s")
    >>> body = Breakpoints().apply(r).request
    >>> body["system"][0]["cache_control"], body["messages"][-1]["content"][0]["cache_control"]
    ({'type': 'ephemeral'}, {'type': 'ephemeral'})
    """

    at: tuple[str, ...] = attrs.field(
        default=("tools", "head", "last"), converter=_strings, validator=_check_positions
    )
    ttl: str | None = None

    def describe(self) -> str:
        where = "auto (tools, head, last)" if self.at == ("tools", "head", "last") else ", ".join(self.at)
        return f"Anthropic cache breakpoints at {where}" + (f" with a {self.ttl} TTL" if self.ttl else "")

    def apply(self, record: RequestRecord) -> RequestRecord:
        cc: dict[str, Any] = {"type": "ephemeral"}
        if self.ttl is not None:
            cc["ttl"] = self.ttl
        head, hist = regions(record)
        body = _body(record)
        body.pop("cache_control", None)
        for name in ("tools", "system", "messages"):
            if name in body:
                body[name] = _unmark(body[name])
        messages = list(body.get("messages") or [])
        tools = body.get("tools")
        if "tools" in self.at and isinstance(tools, list) and tools and isinstance(tools[-1], Mapping):
            body["tools"] = [*tools[:-1], {**tools[-1], "cache_control": dict(cc)}]
        if "head" in self.at:
            if head > 0:
                messages[head - 1] = _mark(messages[head - 1], dict(cc))
            elif body.get("system") not in (None, "", []):
                system = body["system"]
                if isinstance(system, str):
                    body["system"] = [{"type": "text", "text": system, "cache_control": dict(cc)}]
                elif isinstance(system, list) and system and isinstance(system[-1], Mapping):
                    body["system"] = [*system[:-1], {**system[-1], "cache_control": dict(cc)}]
        if "history" in self.at and hist > head:
            messages[hist - 1] = _mark(messages[hist - 1], dict(cc))
        if "last" in self.at and messages:
            messages[-1] = _mark(messages[-1], dict(cc))
        if "messages" in body:
            body["messages"] = messages
        return attrs.evolve(record, request=body)
