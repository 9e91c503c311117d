"""Transforms over request records: small, composable edits of a logged prompt, for what-if replays.

A :class:`Transform` maps one :class:`~promptkit.layout.RequestRecord` to a new one (``attrs.evolve``;
the input is never mutated) and says what it does in :meth:`~Transform.describe`. Each keeps the
record's layout aligned with its messages: a moved message takes its layout entry along (with the
target anchor as its slot), a new message gets a new entry. Compose them with :class:`Chain` (or pass a
list to :func:`promptkit.whatif.replay`).

**Regions of a prompt.** With a layout, the stable head is :func:`~promptkit.layout.head_end` entries
long and the history ends at :func:`~promptkit.layout.history_end`. Without a layout, the head is the
leading run of ``system`` / ``developer`` messages, the history is every message from there up to the
*last user message*, and the tail (the current message and the tool loop after it) starts at the last
user message, or at the system messages right before it (blocks injected for this turn). An Anthropic
body's top-level ``system`` belongs to the head.

>>> from promptkit.layout import RequestRecord
>>> record = RequestRecord({"model": "m", "messages": [
...     {"role": "system", "content": "Be terse.\\nCurrent time: 10:42"},
...     {"role": "user", "content": "hi"}]}, session="s")
>>> moved = Move(Selector(regex="Current time: .*")).apply(record)
>>> [m["content"] for m in moved.request["messages"]]
['Be terse.', 'Current time: 10:42', 'hi']
>>> Normalize(("times",)).apply(record).request["messages"][0]["content"]
'Be terse.\\nCurrent time: <time>'
"""

from __future__ import annotations

import abc
import copy
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

from promptkit.errors import UsageError
from promptkit.layout import (
    ANCHORS,
    HEAD_ROLES,
    LayoutEntry,
    RequestRecord,
    head_end,
    history_end,
    role_head_end,
    role_history_end,
)

__all__ = [
    "BUILTIN_PATTERNS",
    "ELIDED_OUTPUT",
    "BreakpointPosition",
    "Breakpoints",
    "Chain",
    "ChangeProvider",
    "ElideToolOutputs",
    "Move",
    "Normalize",
    "PinModel",
    "Selector",
    "SetCacheKey",
    "SetRetention",
    "SetTTL",
    "SortTools",
    "Transform",
    "UseCacheModel",
    "apply_transforms",
    "compile_pattern",
    "regions",
    "sorted_json",
    "substitute",
    "text_of",
    "tool_name",
]

#: Roles of the leading head region of a prompt without a layout.
_HEAD_ROLES: Final[frozenset[str]] = HEAD_ROLES


def _transforms(value: Iterable[Transform]) -> tuple[Transform, ...]:
    return tuple(value)


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


class Transform(abc.ABC):
    """One edit of a request record. Subclasses are frozen attrs classes.

    ``apply(record)`` returns the edited copy (the record itself when nothing applies);
    ``describe()`` says in one line what the transform does; ``after_options()`` are analysis options
    the *after* analysis of a replay must use (e.g. another cache model), empty for most transforms.
    """

    __slots__ = ()

    @abc.abstractmethod
    def apply(self, record: RequestRecord) -> RequestRecord:
        """The edited record."""

    @abc.abstractmethod
    def describe(self) -> str:
        """One readable line: what the transform does."""

    def after_options(self) -> dict[str, Any]:
        """Analysis options the replay's *after* analysis needs (none by default)."""
        return {}

    def __call__(self, record: RequestRecord) -> RequestRecord:
        return self.apply(record)


def apply_transforms(
    records: Iterable[RequestRecord], transforms: Sequence[Transform]
) -> list[RequestRecord]:
    """Every record through every transform, in order (one output record per input record).

    >>> r = RequestRecord({"model": "a", "messages": [{"role": "user", "content": "hi"}]}, session="s")
    >>> [x.request["model"] for x in apply_transforms([r, r], [PinModel("b")])]
    ['b', 'b']
    """
    out = []
    for record in records:
        for t in transforms:
            record = t.apply(record)
        out.append(record)
    return out


@attrs.frozen(slots=True)
class Chain(Transform):
    """Several transforms applied in order.

    >>> Chain((PinModel("gpt-4.1"), SortTools())).describe()
    'pin the model to gpt-4.1; then sort tool definitions by name and JSON keys'
    """

    transforms: tuple[Transform, ...] = attrs.field(converter=_transforms)

    def apply(self, record: RequestRecord) -> RequestRecord:
        for t in self.transforms:
            record = t.apply(record)
        return record

    def describe(self) -> str:
        return "; then ".join(t.describe() for t in self.transforms) or "no change"

    def after_options(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for t in self.transforms:
            out.update(t.after_options())
        return out


# ---------------------------------------------------------------------------------------------------
# helpers over request bodies


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


# ---------------------------------------------------------------------------------------------------
# selectors and moves


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


# ---------------------------------------------------------------------------------------------------
# volatile values

#: Built-in volatile-value patterns: name -> (regular expression, placeholder). Applied in this order.
BUILTIN_PATTERNS: Final[Mapping[str, tuple[str, str]]] = {
    "timestamps": (
        r"\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:\s?(?:Z|UTC|[+-]\d{2}:?\d{2}))?",
        "<timestamp>",
    ),
    "uuids": (r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b", "<uuid>"),
    "dates": (
        r"\b\d{4}-\d{2}-\d{2}\b|\b\d{4}/\d{2}/\d{2}\b|\b\d{4}年\d{1,2}月\d{1,2}日"
        r"|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.? \d{1,2}(?:st|nd|rd|th)?,? \d{4}\b"
        r"|\b\d{1,2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]* \d{4}\b",
        "<date>",
    ),
    "times": (r"\b\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:\s?[AaPp][Mm])?\b", "<time>"),
    "hex-ids": (r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{16,}\b", "<id>"),
    "counters": (
        r"(?i)\b(?:turn|step|request|call|message|iteration|attempt|round|run)\s?#?(?P<value>\d+)\b",
        "<n>",
    ),
}

#: What ``normalize`` with no pattern names means: every built-in pattern.
_DEFAULT_PATTERNS: Final[tuple[str, ...]] = tuple(BUILTIN_PATTERNS)


def compile_pattern(pattern: str) -> tuple[re.Pattern[str], str]:
    """A built-in pattern name or a regular expression, compiled, with its placeholder.

    >>> compile_pattern("uuids")[1], compile_pattern("id=[0-9]+")[1]
    ('<uuid>', '<volatile>')
    """
    if pattern in BUILTIN_PATTERNS:
        regex, placeholder = BUILTIN_PATTERNS[pattern]
        return re.compile(regex), placeholder
    try:
        return re.compile(pattern), "<volatile>"
    except re.error as exc:
        raise UsageError(f"Normalize.patterns: bad regular expression {pattern!r}: {exc}") from None


def _check_patterns(instance: Any, attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    if not value:
        raise UsageError("Normalize.patterns: give at least one pattern name or regular expression")
    for p in value:
        compile_pattern(p)


def substitute(regex: re.Pattern[str], placeholder: str, text: str) -> str:
    """``text`` with each match of ``regex`` replaced by ``placeholder`` (only its ``value`` group, if it has one)."""
    if "value" not in regex.groupindex:
        return regex.sub(placeholder, text)

    def one(m: re.Match[str]) -> str:
        start, end = m.span("value")
        if start < 0:
            return m.group(0)
        return text[m.start() : start] + placeholder + text[end : m.end()]

    return regex.sub(one, text)


@attrs.frozen(slots=True)
class Normalize(Transform):
    """Replace volatile values (timestamps, dates, times, uuids, hex ids, counters, or your own regular
    expressions) with a stable placeholder (``<timestamp>``, ``<date>``, ``<time>``, ``<uuid>``,
    ``<id>``, ``<n>``; ``<volatile>`` for a user pattern; ``placeholder`` overrides them all).

    ``patterns``: names from :data:`BUILTIN_PATTERNS` or regular expressions (the whole match is
    replaced, or only its group named ``value`` when it has one: ``Turn (?P<value>\\d+)``). ``scope``: ``"head"`` (default: the stable head, where a changing value breaks the cache;
    an Anthropic top-level ``system`` included) or ``"all"`` (every message).

    >>> r = RequestRecord({"messages": [{"role": "system", "content": "id 0b7f1f1e-4b8e-4c1a-9d0e-1f2a3b4c5d6e"},
    ...                                 {"role": "user", "content": "hi"}]}, session="s")
    >>> Normalize(("uuids",)).apply(r).request["messages"][0]["content"]
    'id <uuid>'
    """

    patterns: tuple[str, ...] = attrs.field(
        default=_DEFAULT_PATTERNS, converter=_strings, validator=_check_patterns
    )
    scope: str = attrs.field(default="head")
    placeholder: str | None = None

    @scope.validator
    def _check_scope(self, attribute: attrs.Attribute[str], value: str) -> None:
        if value not in ("head", "all"):
            raise UsageError(f"Normalize.scope: expected 'head' or 'all', got {value!r}")

    def describe(self) -> str:
        names = ", ".join(self.patterns)
        where = "in the stable head" if self.scope == "head" else "in every message"
        return f"replace volatile values ({names}) {where} with a placeholder"

    def _fn(self) -> Callable[[str], str]:
        compiled = [compile_pattern(p) for p in self.patterns]

        def fn(text: str) -> str:
            for regex, placeholder in compiled:
                text = substitute(
                    regex, self.placeholder if self.placeholder is not None else placeholder, text
                )
            return text

        return fn

    def apply(self, record: RequestRecord) -> RequestRecord:
        fn = self._fn()
        body = _body(record)
        messages = list(body.get("messages") or [])
        end = regions(record)[0] if self.scope == "head" else len(messages)
        for i in range(min(end, len(messages))):
            if isinstance(messages[i], Mapping):
                messages[i] = {**messages[i], "content": _map_text(messages[i].get("content"), fn)}
        if "messages" in body:
            body["messages"] = messages
        if body.get("system") not in (None, "", []):
            body["system"] = _map_text(body["system"], fn)
        if body == record.request:
            return record
        return attrs.evolve(record, request=body)


# ---------------------------------------------------------------------------------------------------
# tools and JSON keys


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


# ---------------------------------------------------------------------------------------------------
# model, provider, cache settings


@attrs.frozen(slots=True)
class PinModel(Transform):
    """Send every request to one ``model`` (a session that switches models starts a new cache).

    >>> PinModel("gpt-4.1").describe()
    'pin the model to gpt-4.1'
    """

    model: str

    def describe(self) -> str:
        return f"pin the model to {self.model}"

    def apply(self, record: RequestRecord) -> RequestRecord:
        if record.request.get("model") == self.model:
            return record
        return attrs.evolve(record, request={**record.request, "model": self.model})


@attrs.frozen(slots=True)
class ChangeProvider(Transform):
    """Send the requests to another ``provider`` (its tokenizer, rendering, cache rules and prices
    apply). The request's model becomes ``model`` if given, else stays when the provider recognises it,
    else becomes the provider's default model.

    >>> ChangeProvider("anthropic").apply(RequestRecord({"model": "gpt-4.1", "messages": []}, session="s")).request["model"]
    'claude-sonnet-4-5'
    """

    provider: str
    model: str | None = None

    def describe(self) -> str:
        return f"send to {self.provider}" + (f" ({self.model})" if self.model else "")

    def apply(self, record: RequestRecord) -> RequestRecord:
        from promptkit.providers.registry import get_provider

        profile = get_provider(self.provider)
        current = record.request.get("model")
        model = self.model
        if model is None:
            model = (
                current
                if isinstance(current, str) and profile.recognises_model(current)
                else profile.default_model
            )
        request = dict(record.request)
        if model is not None:
            request["model"] = model
        return attrs.evolve(record, request=request, provider=profile.name)

    def after_options(self) -> dict[str, Any]:
        """The *after* analysis uses this provider, even when the replay was given another one."""
        return {"provider": self.provider}


def _each_cache_control(body: dict[str, Any], fn: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Apply ``fn`` to every ``cache_control`` object of ``body`` in place (body is a private copy)."""

    def visit(obj: Any) -> None:
        if isinstance(obj, dict):
            if isinstance(obj.get("cache_control"), Mapping):
                obj["cache_control"] = fn(dict(obj["cache_control"]))
            for v in obj.values():
                if isinstance(v, list | dict):
                    visit(v)
        elif isinstance(obj, list):
            for v in obj:
                visit(v)

    if isinstance(body.get("cache_control"), Mapping):
        body["cache_control"] = fn(dict(body["cache_control"]))
    for name in ("tools", "system", "messages"):
        visit(body.get(name))


@attrs.frozen(slots=True)
class SetTTL(Transform):
    """Give every Anthropic cache breakpoint the time-to-live ``ttl`` (``"5m"`` or ``"1h"``): adds
    ``"ttl"`` to each ``cache_control``. A 1-hour write costs twice the input price (the replay prices
    it so). Requests without breakpoints are unchanged (add some with :class:`Breakpoints`).

    >>> r = RequestRecord({"system": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}],
    ...                    "messages": []}, session="s")
    >>> SetTTL("1h").apply(r).request["system"][0]["cache_control"]
    {'type': 'ephemeral', 'ttl': '1h'}
    """

    ttl: str = attrs.field(default="1h")

    @ttl.validator
    def _check(self, attribute: attrs.Attribute[str], value: str) -> None:
        if value not in ("5m", "1h"):
            raise UsageError(f"SetTTL.ttl: expected '5m' or '1h', got {value!r}")

    def describe(self) -> str:
        return f"cache breakpoints with a {self.ttl} TTL"

    def apply(self, record: RequestRecord) -> RequestRecord:
        body = _body(record)
        _each_cache_control(body, lambda cc: {**cc, "ttl": self.ttl})
        return record if body == record.request else attrs.evolve(record, request=body)


@attrs.frozen(slots=True)
class SetRetention(Transform):
    """OpenAI's ``prompt_cache_retention`` (``"24h"`` keeps a cached prefix 24 hours; ``"in_memory"``
    the default 5 to 10 minutes).

    >>> SetRetention("24h").describe()
    'OpenAI prompt_cache_retention=24h'
    """

    retention: str = "24h"

    def describe(self) -> str:
        return f"OpenAI prompt_cache_retention={self.retention}"

    def apply(self, record: RequestRecord) -> RequestRecord:
        return attrs.evolve(record, request={**record.request, "prompt_cache_retention": self.retention})


@attrs.frozen(slots=True)
class SetCacheKey(Transform):
    """OpenAI's ``prompt_cache_key`` (``{session}`` is replaced by the record's session).

    The cache models already assume ideal routing (every request reaches the cache that holds its
    prefix), so a key changes no predicted figure; it is here so that a replayed log carries it.

    >>> SetCacheKey().apply(RequestRecord({"messages": []}, session="s1")).request["prompt_cache_key"]
    's1'
    """

    key: str = "{session}"

    def describe(self) -> str:
        return f"OpenAI prompt_cache_key={self.key}"

    def apply(self, record: RequestRecord) -> RequestRecord:
        key = self.key.replace("{session}", record.session)
        return attrs.evolve(record, request={**record.request, "prompt_cache_key": key})


@attrs.frozen(slots=True)
class UseCacheModel(Transform):
    """Analyze the *after* side with another cache model (``exact``, ``deepseek``, ``openai``,
    ``anthropic``, ``vllm``); records are unchanged.

    >>> UseCacheModel("vllm").after_options()
    {'cache_model': 'vllm'}
    """

    name: str

    def describe(self) -> str:
        return f"use the {self.name} cache model"

    def apply(self, record: RequestRecord) -> RequestRecord:
        return record

    def after_options(self) -> dict[str, Any]:
        return {"cache_model": self.name}


# ---------------------------------------------------------------------------------------------------
# Anthropic breakpoints

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


# ---------------------------------------------------------------------------------------------------
# eliding old tool outputs

#: SWE-agent's text for an elided observation (``last_n_observations`` history processor).
ELIDED_OUTPUT: Final[str] = "Old environment output: ({n} lines omitted)"


@attrs.frozen(slots=True)
class ElideToolOutputs(Transform):
    """Replace every tool output but the last ``keep`` with ``template`` (``{n}``: its line count), as
    SWE-agent does: fewer tokens per call, but the history changes at every step.

    Tool outputs are the messages of role ``role`` (``tool`` by default; ``user`` for agents whose
    observations are user messages, in which case the first user message, the task, is never elided).
    ``polling`` is SWE-agent's parameter of the same name (``LastNObservations`` in
    ``sweagent/agent/history_processors.py``): the elision window moves only once every ``polling``
    outputs, so the prompt's prefix changes once every ``polling`` steps and between ``keep`` and
    ``keep + polling - 1`` outputs are kept.

    >>> msgs = [{"role": "user", "content": "task"}] + [{"role": "tool", "content": f"l1\\nl2 {i}"} for i in range(3)]
    >>> [m["content"] for m in ElideToolOutputs(keep=1).apply(RequestRecord({"messages": msgs}, session="s")).request["messages"]]
    ['task', 'Old environment output: (2 lines omitted)', 'Old environment output: (2 lines omitted)', 'l1\\nl2 2']
    """

    keep: int = attrs.field(default=5)
    role: str = "tool"
    template: str = ELIDED_OUTPUT
    polling: int = attrs.field(default=1)

    @polling.validator
    def _check_polling(self, attribute: attrs.Attribute[int], value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise UsageError(f"ElideToolOutputs.polling: expected an integer >= 1, got {value!r}")

    @keep.validator
    def _check_keep(self, attribute: attrs.Attribute[int], value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise UsageError(f"ElideToolOutputs.keep: expected an integer >= 0, got {value!r}")

    def describe(self) -> str:
        batch = f", updated every {self.polling} outputs" if self.polling > 1 else ""
        return f"elide all but the last {self.keep} {self.role} outputs{batch}"

    def apply(self, record: RequestRecord) -> RequestRecord:
        messages = list(record.request.get("messages") or [])
        outputs = [i for i, m in enumerate(messages) if _role(m) == self.role]
        first = 1 if self.role == "user" else 0  # the task is never elided
        last = max(0, (len(outputs) // self.polling) * self.polling - self.keep)
        old = outputs[first:last]
        if not old:
            return record
        for i in old:
            text = text_of(messages[i].get("content"))
            n = text.count("\n") + 1 if text else 0
            messages[i] = {**messages[i], "content": self.template.format(n=n)}
        return attrs.evolve(record, request={**record.request, "messages": messages})
