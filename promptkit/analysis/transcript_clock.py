"""The cache clock of a Claude Code transcript, read incrementally: a reader that remembers where it
stopped (:class:`TranscriptClockState`), so a status line that runs on every prompt reads only the
lines written since its last run.

It reads the main thread of one ``<session>.jsonl`` (the rules of
:mod:`promptkit.formats.claude_code`, restricted to what the clock needs): the assistant events of each
model call, merged by message id (else request id; usage from the call's last line, as Claude Code
repeats a streamed answer once per content block), skipping synthetic messages (``<synthetic>``),
sidechains and events without usage; the ``compact_boundary`` events; and the times of the user events.
A call is timed by the event it answers (its first line's ``parentUuid``, the user's prompt or tool
result: the moment Claude Code sent the request), else by its first line. Only lines that can be one of
these events are parsed (a byte test first), so progress and snapshot lines cost no JSON parsing.

The last call stays *open* (its lines may go on in the next read); :meth:`TranscriptClockState.clock`
counts it. A line that is not JSON, or an event with a field of the wrong type, is counted in
``skipped_lines`` (the first one's line number and why in ``first_skip``), never fatal; a line not yet
ended by a newline is left for the next read.

>>> from pathlib import Path
>>> path = next(Path("fixtures/claude-code").glob("*/*.jsonl"))
>>> from promptkit.analysis.clock import lifetimes_of
>>> state = read_transcript(TranscriptClockState.start(str(path)), price_of=lambda model: None,
...                         lifetimes=lifetimes_of("anthropic"))
>>> c = state.clock(now=1770912180.0)
>>> c.calls, c.hit_ratio, c.status
(2, 0.6953, '4:31 left')
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

import attrs

from promptkit.analysis.clock_core import CacheClock, ClockCall, ClockPrice, ClockTally, Lifetimes
from promptkit.errors import RecordFormatError

__all__ = ["MAX_USER_TIMES", "TranscriptClockState", "read_transcript"]

#: How many recent user-event times the state keeps to time the calls that answer them.
MAX_USER_TIMES: Final[int] = 64
_WANTED: Final[tuple[bytes, ...]] = (b'"assistant"', b'"user"', b'"compact_boundary"')

PriceOf = Callable[[str | None], ClockPrice | None]


def _call_to_json(call: ClockCall | None) -> dict[str, Any] | None:
    return None if call is None else attrs.asdict(call)


def _call_from_json(data: Any) -> ClockCall | None:
    if data is None:
        return None
    fields = dict(data)
    price = fields.pop("price")
    return ClockCall(**fields, price=None if price is None else ClockPrice(**price))


@attrs.frozen(slots=True)
class TranscriptClockState:
    """Where the reader of one transcript stopped and what it learnt (a value; JSON through
    :meth:`to_json` / :meth:`from_json`). ``offset`` is the byte after the last line read (``lines``
    lines), ``inode`` and ``size`` the file's when read: a file that shrank or was replaced is read again from the start.
    """

    path: str
    offset: int = 0
    inode: int | None = None
    size: int = 0
    mtime_ns: int = 0
    session_id: str | None = None
    tally: ClockTally = attrs.field(factory=ClockTally)
    open_call: ClockCall | None = None
    open_key: str | None = None
    compaction_pending: bool = False
    user_times: tuple[tuple[str, float], ...] = ()
    lines: int = 0
    skipped_lines: int = 0
    first_skip: str | None = None

    @classmethod
    def start(cls, path: str) -> TranscriptClockState:
        """A state that has read nothing of ``path``."""
        return cls(path=path)

    def clock(self, *, now: float, provider: str | None = None) -> CacheClock:
        """The session's clock at ``now``, the open call counted."""
        tally = self.tally if self.open_call is None else self.tally.add(self.open_call)
        return CacheClock.of(tally, session=self.session_id or self.path, now=now, provider=provider)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready data (:meth:`from_json` reads it back)."""
        out = attrs.asdict(self, recurse=False)
        out["tally"] = self.tally.to_json()
        out["open_call"] = _call_to_json(self.open_call)
        out["user_times"] = [list(t) for t in self.user_times]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TranscriptClockState:
        """The state :meth:`to_json` wrote; raises ``TypeError``, ``ValueError`` or ``KeyError`` on
        anything else (a caller that keeps states starts afresh then)."""
        fields = dict(data)
        fields["tally"] = ClockTally.from_json(fields["tally"])
        fields["open_call"] = _call_from_json(fields["open_call"])
        fields["user_times"] = tuple((str(u), float(t)) for u, t in fields["user_times"])
        state = cls(**fields)
        if not isinstance(state.offset, int) or state.offset < 0:
            raise RecordFormatError(f"offset: expected a byte offset, got {state.offset!r}")
        return state


def _time(value: object) -> float:
    if not isinstance(value, str):
        raise RecordFormatError(f"timestamp: expected an ISO 8601 string, got {type(value).__name__}")
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _count(usage: Mapping[str, Any], key: str) -> int:
    value = usage.get(key, 0)
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise RecordFormatError(f"message.usage.{key}: expected a count, got {value!r}")
    return value


def _usage_fields(usage: Mapping[str, Any]) -> dict[str, Any]:
    """The counts of an Anthropic usage object (prompt = input + cache reads + cache writes)."""
    read, written = _count(usage, "cache_read_input_tokens"), _count(usage, "cache_creation_input_tokens")
    split = usage.get("cache_creation")
    hour = _count(split, "ephemeral_1h_input_tokens") if isinstance(split, Mapping) else None
    return {
        "prompt_tokens": _count(usage, "input_tokens") + read + written,
        "cached_tokens": read,
        "written_tokens": written,
        "written_1h_tokens": hour,
        "output_tokens": _count(usage, "output_tokens"),
    }


class _Reader:
    """One read: applies events to the fields of a state (mutable while reading, frozen after)."""

    def __init__(self, state: TranscriptClockState, price_of: PriceOf, lifetimes: Lifetimes) -> None:
        self.price_of, self.lifetimes = price_of, lifetimes
        self.fields = attrs.asdict(state, recurse=False)
        self.user_times = dict(state.user_times)

    def skip(self, line_no: int, why: str) -> None:
        self.fields["skipped_lines"] += 1
        if self.fields["first_skip"] is None:
            self.fields["first_skip"] = f"{self.fields['path']}:{line_no}: {why}"

    def event(self, obj: Mapping[str, Any]) -> None:
        kind = obj.get("type")
        if obj.get("isSidechain") is True:
            return
        if kind == "system" and obj.get("subtype") == "compact_boundary":
            self.fields["compaction_pending"] = True
        elif kind == "user" and isinstance(obj.get("uuid"), str):
            self.user_times[obj["uuid"]] = _time(obj.get("timestamp"))
            while len(self.user_times) > MAX_USER_TIMES:
                del self.user_times[next(iter(self.user_times))]
        elif kind == "assistant":
            self.assistant(obj)
        if self.fields["session_id"] is None and isinstance(obj.get("sessionId"), str):
            self.fields["session_id"] = obj["sessionId"]

    def assistant(self, obj: Mapping[str, Any]) -> None:
        message = obj.get("message")
        if not isinstance(message, Mapping) or message.get("model") == "<synthetic>":
            return
        usage = message.get("usage")
        if not isinstance(usage, Mapping):
            return
        key = message.get("id") or obj.get("requestId") or obj.get("uuid")
        model = message.get("model") if isinstance(message.get("model"), str) else None
        counts = _usage_fields(usage)
        open_call: ClockCall | None = self.fields["open_call"]
        if open_call is not None and key == self.fields["open_key"]:
            self.fields["open_call"] = self.lifetimes.call(**{**_bare(open_call), **counts})
            return
        if open_call is not None:
            self.fields["tally"] = self.fields["tally"].add(open_call)
        parent = obj.get("parentUuid")
        sent_at = self.user_times.get(parent) if isinstance(parent, str) else None
        self.fields["open_call"] = self.lifetimes.call(
            sent_at=sent_at if sent_at is not None else _time(obj.get("timestamp")),
            model=model,
            price=self.price_of(model),
            compaction=self.fields["compaction_pending"],
            **counts,
        )
        self.fields["open_key"] = key
        self.fields["compaction_pending"] = False

    def state(self) -> TranscriptClockState:
        self.fields["user_times"] = tuple(self.user_times.items())
        return TranscriptClockState(**self.fields)


def _bare(call: ClockCall) -> dict[str, Any]:
    """A call's fields without the lifetimes :meth:`Lifetimes.call` derives."""
    fields = attrs.asdict(call, recurse=False)
    del fields["write_ttl"], fields["default_ttl"]
    return fields


def read_transcript(
    state: TranscriptClockState, *, price_of: PriceOf, lifetimes: Lifetimes
) -> TranscriptClockState:
    """``state`` with the lines written to its transcript since it was taken read (from the start
    when the file shrank or was replaced). ``price_of`` prices a model (None: unpriced);
    ``lifetimes`` are Anthropic's (:func:`~promptkit.analysis.clock.lifetimes_of`). Raises
    ``OSError`` when the file cannot be read."""
    with open(state.path, "rb") as f:
        info = os.fstat(f.fileno())
        if state.inode not in (None, info.st_ino) or info.st_size < state.offset:
            state = TranscriptClockState.start(state.path)
        if info.st_size == state.offset and info.st_mtime_ns == state.mtime_ns:
            return state
        f.seek(state.offset)
        data = f.read()
    end = data.rfind(b"\n") + 1
    reader = _Reader(state, price_of, lifetimes)
    line_no = state.lines
    for raw in data[:end].split(b"\n")[:-1]:
        line_no += 1
        if not any(w in raw for w in _WANTED):
            continue
        try:
            obj = json.loads(raw)
            if isinstance(obj, Mapping):
                reader.event(obj)
        except (ValueError, TypeError) as exc:
            reader.skip(line_no, str(exc) or type(exc).__name__)
    reader.fields.update(
        offset=state.offset + end,
        inode=info.st_ino,
        size=info.st_size,
        mtime_ns=info.st_mtime_ns,
        lines=line_no,
    )
    return reader.state()
