"""Where a request's content lands, and which places are before the content that repeats.

The requests recognised (by the call's shape, so any client variable works):

- Chat Completions ``<client>.chat.completions.create`` (and ``parse``, ``stream``) and
  ``litellm.completion`` / ``litellm.acompletion``: ``tools`` and ``messages``;
- Responses ``<client>.responses.create``: ``instructions``, ``tools`` and ``input`` when it is a list;
- Messages ``<client>.messages.create`` (and ``stream``): ``system``, ``tools`` and ``messages``;
- promptkit's assembler: a contributor registered at an anchor before the history (``identity``,
  ``knowledge``, ``context``) and the persona card of ``turn_frame``.

In a list of messages an entry spread from another list (``*history``) is the stored history and the
entries after it are the current turn; without one, the last entry is the current turn and entries
appended to the list are history stored as it grows. A changing value in the current turn is fine;
every other entry (see :func:`message_slots`) is part of the prefix that repeats.

>>> request_api("self.client.chat.completions.create", None)
'chat.completions.create'
>>> request_api("acompletion", "litellm.acompletion")
'litellm.acompletion'
>>> anchor_before_history("knowledge"), anchor_before_history("turn-context")
(True, False)
"""

from __future__ import annotations

from typing import Final

import attrs

from promptkit.codelint.model import Val
from promptkit.layout import BEFORE_HISTORY, Anchor

__all__ = ["SlotValue", "anchor_before_history", "anchor_of", "message_slots", "request_api", "request_slots"]

_SHAPES: Final[tuple[tuple[str, str], ...]] = (
    ("chat.completions.create", "chat"), ("chat.completions.parse", "chat"),
    ("chat.completions.stream", "chat"), ("responses.create", "responses"), ("responses.parse", "responses"),
    ("responses.stream", "responses"), ("messages.create", "messages"), ("messages.stream", "messages"),
)  # fmt: skip
_LITELLM: Final[frozenset[str]] = frozenset({"litellm.completion", "litellm.acompletion"})
#: per API kind: keyword -> (slot, positional: a list of messages whose last entry is the current turn)
_SLOTS: Final[dict[str, dict[str, tuple[str, bool]]]] = {
    "chat": {"messages": ("messages", True), "tools": ("tools", False), "functions": ("functions", False)},
    "responses": {
        "instructions": ("instructions", False),
        "tools": ("tools", False),
        "input": ("input", True),
    },
    "messages": {"system": ("system", False), "tools": ("tools", False), "messages": ("messages", True)},
}


@attrs.frozen
class SlotValue:
    """One part of a request: the ``slot`` it fills, the value, and whether it is a list of messages."""

    slot: str
    value: Val
    positional: bool


def request_api(chain: str, qualified: str | None) -> str | None:
    """The request a call makes, from its dotted callee (``client.chat.completions.create``) or the
    qualified name its imports give it (``litellm.completion``); ``None`` for any other call."""
    if qualified in _LITELLM:
        return qualified
    for shape, _ in _SHAPES:
        if chain == shape or chain.endswith("." + shape):
            return shape
    return None


def _kind(api: str) -> str:
    if api in _LITELLM:
        return "chat"
    return next(kind for shape, kind in _SHAPES if shape == api)


def request_slots(api: str, keywords: dict[str, Val]) -> list[SlotValue]:
    """The parts of a request to ``api`` (keyword arguments, ``**request`` dicts already expanded)."""
    slots = _SLOTS[_kind(api)]
    found = []
    for keyword, value in keywords.items():
        if keyword in slots:
            slot, positional = slots[keyword]
            if keyword == "input" and value.items is None and value.param is None:
                continue  # a string input is the current turn's text
            found.append(SlotValue(slot, value, positional))
    return found


def _flatten(items: tuple[Val, ...]) -> list[Val]:
    out: list[Val] = []
    for item in items:
        if item.spread and item.items is not None:
            out.extend(_flatten(item.items))
        else:
            out.append(item)
    return out


def message_slots(value: Val, keyword: str) -> list[tuple[str, Val]]:
    """The entries of a list of messages that repeat before the current turn, each with its slot name.

    An entry spread from an unknown list (``*history``) is the stored history and left out; every entry
    after the last such spread is this turn's (the user's message, then what a tool loop appends) and
    left out; without a spread, so are the last entry and the entries appended to the list (``append``,
    ``extend``, ``+=``): history stored as it grows.
    """
    assert value.items is not None
    items = _flatten(value.items)
    last_spread = max((i for i, item in enumerate(items) if item.spread), default=-1)
    slots = []
    for index, item in enumerate(items):
        after_history = last_spread >= 0 and index > last_spread
        if item.spread or after_history or index == len(items) - 1 or (item.appended and last_spread < 0):
            continue
        role_value = item.key("role")
        role = role_value.const if role_value is not None else None
        if role in ("system", "developer"):
            slots.append((f"{keyword}[{index}] ({role} message)", item))
        else:
            label = f"{role} message, " if role else ""
            slots.append((f"{keyword}[{index}] ({label}before the current turn)", item))
    return slots


def anchor_of(name: str | None) -> str | None:
    """The anchor a registration names: an anchor's value (``"knowledge"``) or an ``Anchor`` member's
    name (``KNOWLEDGE``); ``None`` when it is neither."""
    if name is None:
        return None
    for anchor in Anchor:
        if name in (anchor.value, anchor.name):
            return anchor.value
    return None


def anchor_before_history(anchor: str) -> bool:
    """Whether blocks at ``anchor`` are placed before the history (where a change breaks the cache)."""
    return Anchor(anchor) in BEFORE_HISTORY
