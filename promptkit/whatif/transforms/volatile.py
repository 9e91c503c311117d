"""Volatile values: the built-in patterns (:data:`BUILTIN_PATTERNS`: dates, times, UUIDs, ...) and
:class:`Normalize`, which replaces them with a fixed placeholder.

>>> compile_pattern("uuids")[1]
'<uuid>'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from promptkit.errors import UsageError
from promptkit.layout import (
    RequestRecord,
)
from promptkit.whatif.transforms._bodies import (
    _body,
    _map_text,
    _strings,
    regions,
)
from promptkit.whatif.transforms.base import Transform

__all__ = ["BUILTIN_PATTERNS", "Normalize", "compile_pattern", "substitute"]


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
