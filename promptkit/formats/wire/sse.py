"""Server-sent events (the WHATWG event-stream format), as LLM APIs stream their answers.

>>> parse_sse("data: a\\n\\ndata: b\\n\\n")
[SSEEvent(event=None, data='a'), SSEEvent(event=None, data='b')]
"""

from __future__ import annotations

import re

import attrs

__all__ = ["SSEEvent", "is_event_stream", "parse_sse"]


def is_event_stream(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` announces server-sent events.

    >>> is_event_stream("text/event-stream; charset=utf-8"), is_event_stream("application/json")
    (True, False)
    """
    return bool(content_type) and content_type.split(";", 1)[0].strip().lower() == "text/event-stream"  # type: ignore[union-attr]


@attrs.frozen(slots=True)
class SSEEvent:
    """One server-sent event: its ``event`` name (None when the stream names none) and its ``data``
    (the ``data:`` lines joined by newlines)."""

    event: str | None
    data: str


def parse_sse(text: str) -> list[SSEEvent]:
    """Split an event stream into events (the WHATWG rules: ``\\n``, ``\\r\\n`` or ``\\r`` line ends, a
    blank line ends an event, ``:`` starts a comment, one space after the colon is dropped). A final
    event without its blank line (a stream cut off) is kept.

    >>> parse_sse("event: ping\\ndata: {}\\n\\n: comment\\ndata: a\\ndata: b\\n\\n")
    [SSEEvent(event='ping', data='{}'), SSEEvent(event=None, data='a\\nb')]
    """
    events: list[SSEEvent] = []
    name: str | None = None
    data: list[str] = []
    for line in re.split(r"\r\n|\r|\n", text):
        if not line:
            if data:
                events.append(SSEEvent(name, "\n".join(data)))
            name, data = None, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    if data:
        events.append(SSEEvent(name, "\n".join(data)))
    return events
