"""Moving blocks: :class:`Selector` (which messages, or parts of them) and :class:`Move` (take what a
selector matches out of its place and put it after an anchor, layout entries along).

>>> from promptkit.layout import RequestRecord
>>> record = RequestRecord({"model": "m", "messages": [
...     {"role": "system", "content": "Be terse.\\nCurrent time: 10:42"},
...     {"role": "user", "content": "hi"}]}, session="s")
>>> [m["content"] for m in Move(Selector(regex="Current time: .*")).apply(record).request["messages"]]
['Be terse.', 'Current time: 10:42', 'hi']
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from promptkit.errors import UsageError
from promptkit.layout import (
    ANCHORS,
    LayoutEntry,
    RequestRecord,
    head_end,
    history_end,
)
from promptkit.whatif.transforms._bodies import (
    _aligned_layout,
    _body,
    _kinds,
    _role,
    regions,
    text_of,
)
from promptkit.whatif.transforms.base import Transform

__all__ = ["Move", "Selector"]


def _check_regex(instance: Any, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is None:
        return
    try:
        re.compile(value)
    except re.error as exc:
        raise UsageError(
            f"{type(instance).__name__}.{attribute.name}: bad regular expression {value!r}: {exc}"
        ) from None


@attrs.frozen(slots=True)
class Selector:
    """Which messages (or parts of messages) a transform works on; every given criterion must match.

    ``role``: the message role (an Anthropic top-level ``system`` counts as ``system``); ``kind``:
    ``tool-call``, ``tool-result``, ``text`` or a content part's ``type``; ``slot`` / ``key``: the layout
    entry's slot and contributor key (records without a layout match neither); ``regex``: a regular
    expression searched in the message text (for :class:`Move`, only the matched text moves when it is
    part of a message).

    >>> Selector(slot="context", key="file-list").describe()
    'slot=context key=file-list'
    """

    role: str | None = None
    kind: str | None = None
    slot: str | None = None
    key: str | None = None
    regex: str | None = attrs.field(default=None, validator=_check_regex)

    def __attrs_post_init__(self) -> None:
        if all(v is None for v in (self.role, self.kind, self.slot, self.key, self.regex)):
            raise UsageError("Selector: give at least one of role, kind, slot, key, regex")

    def describe(self) -> str:
        """The criteria as ``name=value`` words."""
        return " ".join(
            f"{name}={value}"
            for name, value in (
                ("role", self.role),
                ("kind", self.kind),
                ("slot", self.slot),
                ("key", self.key),
                ("regex", self.regex),
            )
            if value is not None
        )

    def matches(self, message: Mapping[str, Any], entry: LayoutEntry | None = None) -> bool:
        """Whether ``message`` (with its layout ``entry``) matches every criterion."""
        if self.role is not None and message.get("role") != self.role:
            return False
        if self.kind is not None and self.kind not in _kinds(message):
            return False
        if self.slot is not None and (entry is None or entry.slot != self.slot):
            return False
        if self.key is not None and (entry is None or entry.key != self.key):
            return False
        return not (self.regex is not None and re.search(self.regex, text_of(message.get("content"))) is None)


def _cut(text: str, regex: str) -> tuple[str, list[str]]:
    """``text`` without the matches of ``regex`` (a line left empty by a cut is dropped), and the matches."""
    found: list[str] = []
    kept_lines = []
    pattern = re.compile(regex)
    for line in text.split("\n"):
        matches = [m.group(0) for m in pattern.finditer(line) if m.group(0)]
        if not matches:
            kept_lines.append(line)
            continue
        found.extend(matches)
        rest = pattern.sub("", line)
        if rest.strip():
            kept_lines.append(rest.rstrip())
    if not found:  # a match across lines
        whole = [m.group(0) for m in pattern.finditer(text) if m.group(0)]
        if whole:
            return pattern.sub("", text).strip("\n"), whole
    return "\n".join(kept_lines), found


def _anchor_index(anchor: str, messages: Sequence[Any], layout: Sequence[LayoutEntry] | None) -> int:
    """Where a block of ``anchor`` is inserted in ``messages`` (a list already without the moved ones)."""
    if layout is not None:
        head, hist = head_end(layout), history_end(layout)
        slots = [e.slot for e in layout]
    else:
        record = RequestRecord({"messages": list(messages)}, session="")
        head, hist = regions(record)
        slots = []
    if anchor == "identity":
        if slots:
            i = 1 if slots and slots[0] == "persona" else 0
            while i < head and slots[i] == "identity":
                i += 1
            return i
        return min(1, head)
    if anchor in ("knowledge", "context"):
        if slots and anchor == "knowledge":
            i = head
            while i > 0 and slots[i - 1] == "context":
                i -= 1
            return i
        return head
    if anchor == "turn-context":
        i = hist
        while slots and i < len(slots) and slots[i] == "turn-context":
            i += 1
        return i
    # turn-hint: before the directive block, else before the current message, else at the end
    if slots:
        for i in range(hist, len(slots)):
            if slots[i] in ("directive", "current"):
                return i
        return len(slots)
    return hist


@attrs.frozen(slots=True)
class Move(Transform):
    """Move the head messages (or the text) that match ``selector`` to the anchor ``to`` (default
    ``turn-context``: right after the history, where a change no longer breaks the cached prefix).

    Only the stable head moves (what sits before the history; an Anthropic top-level ``system`` too).
    A whole message moves with its layout entry, whose slot becomes ``to``. With a ``regex``
    selector that matches only part of a message, only the matched text moves (the line it leaves empty
    is dropped) into a new message of the same role (``role`` overrides it; text cut from an Anthropic
    top-level ``system`` becomes a ``user`` message, since Anthropic has no system role among messages),
    whose layout entry is ``(to, the source key)``.

    >>> Move(Selector(key="file-list")).describe()
    'move key=file-list to turn-context'
    """

    selector: Selector
    to: str = attrs.field(default="turn-context")
    role: str | None = None

    @to.validator
    def _check_to(self, attribute: attrs.Attribute[str], value: str) -> None:
        if value not in ANCHORS:
            raise UsageError(f"Move.to: expected one of {', '.join(ANCHORS)}, got {value!r}")

    def describe(self) -> str:
        return f"move {self.selector.describe()} to {self.to}" + (
            f" as {self.role} messages" if self.role else ""
        )

    def _piece(self, role: str | None, text: str) -> dict[str, Any]:
        return {"role": self.role or role or "user", "content": text}

    def apply(self, record: RequestRecord) -> RequestRecord:
        body = _body(record)
        messages: list[Any] = list(body.get("messages") or [])
        layout = _aligned_layout(record)
        head, _ = regions(record)
        moved: list[tuple[dict[str, Any], LayoutEntry]] = []
        kept: list[Any] = []
        kept_layout: list[LayoutEntry] = []
        sel = self.selector
        # an Anthropic top-level system: part of the head, no layout entry of its own
        system = body.get("system")
        if system not in (None, "", []) and sel.slot is None and sel.key is None:
            as_message = {"role": "system", "content": system}
            if sel.matches(as_message):
                new_system, pieces = self._take(as_message)
                moved.extend(({**p, "role": self.role or "user"}, LayoutEntry(self.to)) for p in pieces)
                if new_system is None:
                    body.pop("system")
                else:
                    body["system"] = new_system["content"]
        for i, message in enumerate(messages):
            entry = layout[i] if layout is not None else None
            if i < head and isinstance(message, Mapping) and sel.matches(message, entry):
                rest, pieces = self._take(message)
                key = entry.key if entry is not None else None
                moved.extend((p, LayoutEntry(self.to, key)) for p in pieces)
                if rest is None:
                    continue
                message = rest
            kept.append(message)
            if entry is not None:
                kept_layout.append(entry)
        if not moved:
            return record
        at = _anchor_index(self.to, kept, kept_layout if layout is not None else None)
        body["messages"] = kept[:at] + [m for m, _ in moved] + kept[at:]
        new_layout = None
        if layout is not None:
            new_layout = tuple(kept_layout[:at] + [e for _, e in moved] + kept_layout[at:])
        return attrs.evolve(record, request=body, layout=new_layout if layout is not None else record.layout)

    def _take(self, message: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """(what stays of ``message`` or None when it moves whole, the moved messages)."""
        role = _role(message)
        regex = self.selector.regex
        content = message.get("content")
        whole = dict(message)
        if self.role is not None:
            whole["role"] = self.role
        if regex is None:
            return None, [whole]
        if isinstance(content, str):
            rest, found = _cut(content, regex)
            if not found:
                return dict(message), []
            if not rest.strip():
                return None, [whole]
            return {**message, "content": rest}, [self._piece(role, "\n".join(found))]
        if isinstance(content, list):
            parts: list[Any] = []
            found_all: list[str] = []
            for part in content:
                if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                    rest, found = _cut(part["text"], regex)
                    found_all.extend(found)
                    if rest.strip():
                        parts.append({**part, "text": rest})
                    elif not found:
                        parts.append(part)
                else:
                    parts.append(part)
            if not found_all:
                return dict(message), []
            if not parts:
                return None, [whole]
            return {**message, "content": parts}, [self._piece(role, "\n".join(found_all))]
        return None, [whole]
