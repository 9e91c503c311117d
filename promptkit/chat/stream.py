"""Streaming: model stream chunks, the platform's stream pieces, and folding a stream into a message.

Pipeline document §8: an assistant message's ``segments`` (text, reasoning text, tool calls, in arrival
order) are the truth of its timeline; ``content`` and ``reasoning_content`` are derived mirrors for plain
text readers, and a producer keeps them in sync while it accumulates. :class:`StreamAccumulator` is such a
producer; :func:`with_segment_mirrors` rebuilds the mirrors of any message from its segments.

- :class:`ChatStreamChunk`: one increment from a model (``contentDelta``, ``reasoningDelta``, the final
  ``toolCalls``, ``toolCallProgress`` (exclusive with ``toolCalls``), ``done``, ``usage``);
- :class:`StreamChunkMessage`: the platform-layer piece sent on ``outbound:stream``, stamped with the turn
  id; its tool-call progress carries the agent's call id.

>>> acc = StreamAccumulator()
>>> for chunk in [ChatStreamChunk(reasoning_delta="想一想"), ChatStreamChunk(content_delta="你"),
...               ChatStreamChunk(content_delta="好"), ChatStreamChunk(done=True)]:
...     acc.add(chunk)
>>> m = acc.message()
>>> m.content, m.reasoning_content, [s.type for s in m.segments]
('你好', '想一想', ['reasoning_text', 'text'])
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from promptkit.chat.message import ContentSegment, Message, ToolCall
from promptkit.errors import StreamError

__all__ = [
    "ChatStreamChunk",
    "ChatUsage",
    "StreamAccumulator",
    "StreamChunkMessage",
    "StreamError",
    "ToolCallProgress",
    "accumulate_stream",
    "segment_mirrors_hold",
    "with_segment_mirrors",
]


def _non_negative(cls: str) -> Any:
    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is None:
            return
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise StreamError(f"{cls}.{attribute.name}: a non-negative int; got {value!r}")

    return check


@attrs.frozen
class ChatUsage:
    """Token usage a stream reports at its end. ``cached_prompt_tokens`` is the part of ``prompt_tokens``
    the provider's prefix cache served; None means unknown (not zero)."""

    prompt_tokens: int = attrs.field(validator=_non_negative("ChatUsage"))
    completion_tokens: int = attrs.field(validator=_non_negative("ChatUsage"))
    total_tokens: int = attrs.field(validator=_non_negative("ChatUsage"))
    cached_prompt_tokens: int | None = attrs.field(default=None, validator=_non_negative("ChatUsage"))

    def __attrs_post_init__(self) -> None:
        if self.cached_prompt_tokens is not None and self.cached_prompt_tokens > self.prompt_tokens:
            raise StreamError(
                f"ChatUsage.cached_prompt_tokens: {self.cached_prompt_tokens} exceeds prompt_tokens {self.prompt_tokens}"
            )


@attrs.frozen
class ToolCallProgress:
    """Progress of a tool call the model is still generating, for a "generating a tool call" hint.

    ``index`` is the call's position in this model reply, ``name`` the function name known so far,
    ``chars_accumulated`` the length of the arguments generated so far. ``call_id`` is the id the agent
    gave the call (the same as the later ``tool:execute``): set on a :class:`StreamChunkMessage`, absent
    on a model's :class:`ChatStreamChunk`.
    """

    index: int = attrs.field(validator=_non_negative("ToolCallProgress"))
    name: str
    chars_accumulated: int = attrs.field(validator=_non_negative("ToolCallProgress"))
    call_id: str | None = None


def _tool_calls(value: Sequence[ToolCall] | None) -> tuple[ToolCall, ...] | None:
    if value is None:
        return None
    calls = tuple(value)
    for i, c in enumerate(calls):
        if not isinstance(c, ToolCall):
            raise StreamError(f"ChatStreamChunk.tool_calls[{i}]: a ToolCall; got {type(c).__name__}")
    return calls or None


@attrs.frozen
class ChatStreamChunk:
    """One increment of a model's streamed answer (``LLMModel.chatStream``).

    ``content_delta`` / ``reasoning_delta`` are text increments; ``tool_calls`` are final tool calls;
    ``tool_call_progress`` is an increment hint and never comes with ``tool_calls`` in one chunk;
    ``done`` marks the last chunk; ``usage`` the usage, usually on the last chunk.

    >>> ChatStreamChunk(tool_calls=[ToolCall("c1", "f")], tool_call_progress=ToolCallProgress(0, "f", 3))
    Traceback (most recent call last):
    ...
    promptkit.errors.StreamError: ChatStreamChunk: tool_calls and tool_call_progress are exclusive (final result vs progress hint)
    """

    content_delta: str | None = None
    reasoning_delta: str | None = None
    tool_calls: tuple[ToolCall, ...] | None = attrs.field(default=None, converter=_tool_calls)
    tool_call_progress: ToolCallProgress | None = None
    done: bool | None = None
    usage: ChatUsage | None = None

    def __attrs_post_init__(self) -> None:
        if self.tool_calls is not None and self.tool_call_progress is not None:
            raise StreamError(
                "ChatStreamChunk: tool_calls and tool_call_progress are exclusive (final result vs progress hint)"
            )
        if self.tool_call_progress is not None and self.tool_call_progress.call_id is not None:
            raise StreamError(
                "ChatStreamChunk.tool_call_progress.call_id: a model chunk has no call id "
                "(the agent assigns it on StreamChunkMessage)"
            )


@attrs.frozen
class StreamChunkMessage:
    """A streamed piece on ``outbound:stream`` (platform layer), sent to the WebUI and other front ends.

    ``turn_id`` is required: the id the agent made when the turn began, shared by that turn's tool calls,
    usage and end. The last piece of a turn has ``done=True`` (also when ``agent:turn:before`` stopped the
    turn). A ``tool_call_progress`` must carry ``call_id``, constant across the progress of one call.
    ``tool_limit_reached`` tells the front end the tool-call limit was hit.
    """

    session_id: str
    turn_id: str
    platform: str | None = attrs.field(default=None, kw_only=True)
    content_delta: str | None = attrs.field(default=None, kw_only=True)
    reasoning_delta: str | None = attrs.field(default=None, kw_only=True)
    tool_call_progress: ToolCallProgress | None = attrs.field(default=None, kw_only=True)
    done: bool | None = attrs.field(default=None, kw_only=True)
    tool_limit_reached: bool | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if not self.turn_id:
            raise StreamError("StreamChunkMessage.turn_id: a non-empty turn id is required")
        if self.tool_call_progress is not None and not self.tool_call_progress.call_id:
            raise StreamError(
                "StreamChunkMessage.tool_call_progress.call_id: the agent's call id is required"
            )

    @classmethod
    def from_chunk(
        cls,
        chunk: ChatStreamChunk,
        *,
        session_id: str,
        turn_id: str,
        platform: str | None = None,
        call_id: str | None = None,
    ) -> StreamChunkMessage:
        """The platform piece for one model chunk: its deltas and ``done`` carried over, its progress
        stamped with ``call_id`` (required when the chunk has progress). Final tool calls and usage are
        not stream pieces (the agent reports them through its own events).

        >>> piece = StreamChunkMessage.from_chunk(ChatStreamChunk(content_delta="嗨"), session_id="s", turn_id="t1")
        >>> piece.content_delta, piece.turn_id
        ('嗨', 't1')
        """
        progress = chunk.tool_call_progress
        if progress is not None:
            if not call_id:
                raise StreamError("StreamChunkMessage.from_chunk: call_id is required for a progress chunk")
            progress = attrs.evolve(progress, call_id=call_id)
        return cls(
            session_id,
            turn_id,
            platform=platform,
            content_delta=chunk.content_delta,
            reasoning_delta=chunk.reasoning_delta,
            tool_call_progress=progress,
            done=chunk.done,
        )


def _joined(segments: Sequence[ContentSegment], kind: str) -> str | None:
    parts = [s.text or "" for s in segments if s.type == kind]
    return "".join(parts) if parts else None


def with_segment_mirrors(message: Message) -> Message:
    """``message`` with ``content`` and ``reasoning_content`` rebuilt from its ``segments``.

    ``content`` is the concatenation of the ``text`` segments, ``reasoning_content`` of the
    ``reasoning_text`` segments (None when there is none of that type), and ``tool_calls`` the calls of
    the ``tool_call`` segments (left as they are when there is none). A message without segments comes
    back unchanged (the same object), as does one whose mirrors already hold.

    >>> m = Message(role="assistant", content="stale", segments=[ContentSegment("text", text="a"),
    ...             ContentSegment("text", text="b")])
    >>> with_segment_mirrors(m).content
    'ab'
    """
    if not message.segments:
        return message
    content = _joined(message.segments, "text")
    reasoning = _joined(message.segments, "reasoning_text")
    calls = tuple(s.tool_call for s in message.segments if s.type == "tool_call" and s.tool_call is not None)
    changes: dict[str, Any] = {}
    if content != message.content:
        changes["content"] = content
    if reasoning != message.reasoning_content:
        changes["reasoning_content"] = reasoning
    if calls and calls != message.tool_calls:
        changes["tool_calls"] = calls
    return attrs.evolve(message, **changes) if changes else message


def segment_mirrors_hold(message: Message) -> bool:
    """Whether ``content`` and ``reasoning_content`` mirror ``segments`` (True without segments).

    >>> segment_mirrors_hold(Message(role="assistant", content="x", segments=[ContentSegment("text", text="y")]))
    False
    """
    return with_segment_mirrors(message) is message


class StreamAccumulator:
    """Folds a model's :class:`ChatStreamChunk` stream into an assistant :class:`Message`.

    Consecutive content deltas extend one ``text`` segment and consecutive reasoning deltas one
    ``reasoning_text`` segment; a switch between them (or a tool call) starts a new segment, so the
    segments keep the arrival order. Final tool calls become ``tool_call`` segments and ``tool_calls``.
    Progress chunks change nothing in the message (:attr:`progress` keeps the latest per call index).
    ``content`` and ``reasoning_content`` are written together with the segments, so every
    :meth:`message` snapshot satisfies :func:`segment_mirrors_hold`. A chunk after ``done`` raises
    :class:`StreamError`. The accumulator is the one mutable object here; its snapshots are values.

    A ``tool_call`` segment carries ``start_time`` / ``end_time`` for the duration display (pipeline
    contract §8: "tool_call（带 startTime / endTime 供时长展示）"), in milliseconds since the epoch like
    message timestamps: ``start_time`` when the model began the call (the first progress chunk of its
    index, else the chunk that brought the call), ``end_time`` when the final call arrived. ``clock``
    (milliseconds, default: the wall clock) is read once per chunk.

    >>> ticks = iter([1000.0, 1250.0, 1900.0])
    >>> acc = StreamAccumulator(clock=lambda: next(ticks))
    >>> acc.add(ChatStreamChunk(tool_call_progress=ToolCallProgress(0, "search", 4)))
    >>> acc.add(ChatStreamChunk(tool_call_progress=ToolCallProgress(0, "search", 9)))
    >>> acc.add(ChatStreamChunk(tool_calls=[ToolCall("c1", "search", '{"q": 1}')]))
    >>> [(s.start_time, s.end_time) for s in acc.message().segments]
    [(1000.0, 1900.0)]
    """

    def __init__(self, *, clock: Callable[[], float] | None = None) -> None:
        self._segments: list[tuple[str, list[str] | ToolCall]] = []
        self._tool_calls: list[ToolCall] = []
        self._times: list[tuple[float, float]] = []  # (start, end) of each tool call, in order
        self._started: dict[int, float] = {}  # tool-call index -> when its first progress came
        self._clock: Callable[[], float] = clock or (lambda: time.time() * 1000)
        self._done = False
        self._usage: ChatUsage | None = None
        self._progress: dict[int, ToolCallProgress] = {}

    @property
    def done(self) -> bool:
        """Whether the ``done`` chunk arrived."""
        return self._done

    @property
    def usage(self) -> ChatUsage | None:
        """The last usage reported, if any."""
        return self._usage

    @property
    def progress(self) -> dict[int, ToolCallProgress]:
        """The latest progress per tool-call index (a copy)."""
        return dict(self._progress)

    def _append_text(self, kind: str, delta: str) -> None:
        if self._segments and self._segments[-1][0] == kind:
            parts = self._segments[-1][1]
            assert isinstance(parts, list)
            parts.append(delta)
        else:
            self._segments.append((kind, [delta]))

    def add(self, chunk: ChatStreamChunk) -> None:
        """Fold one chunk in.

        >>> acc = StreamAccumulator()
        >>> acc.add(ChatStreamChunk(tool_calls=[ToolCall("c1", "search", '{"q": "x"}')]))
        >>> acc.message().tool_calls
        (ToolCall(id='c1', name='search', arguments='{"q": "x"}'),)
        """
        if not isinstance(chunk, ChatStreamChunk):
            raise StreamError(f"StreamAccumulator.add: a ChatStreamChunk; got {type(chunk).__name__}")
        if self._done:
            raise StreamError("StreamAccumulator.add: a chunk after the done chunk")
        now = self._clock() if chunk.tool_calls or chunk.tool_call_progress is not None else 0.0
        if chunk.reasoning_delta:
            self._append_text("reasoning_text", chunk.reasoning_delta)
        if chunk.content_delta:
            self._append_text("text", chunk.content_delta)
        for call in chunk.tool_calls or ():
            self._times.append((self._started.get(len(self._tool_calls), now), now))
            self._segments.append(("tool_call", call))
            self._tool_calls.append(call)
        if chunk.tool_call_progress is not None:
            self._progress[chunk.tool_call_progress.index] = chunk.tool_call_progress
            self._started.setdefault(chunk.tool_call_progress.index, now)
        if chunk.usage is not None:
            self._usage = chunk.usage
        if chunk.done:
            self._done = True

    def message(self) -> Message:
        """The assistant message so far: segments in arrival order, mirrors in sync."""
        segments: list[ContentSegment] = []
        times = iter(self._times)
        for kind, body in self._segments:
            if isinstance(body, ToolCall):
                start, end = next(times)
                segments.append(ContentSegment("tool_call", tool_call=body, start_time=start, end_time=end))
            else:
                segments.append(
                    ContentSegment("text" if kind == "text" else "reasoning_text", text="".join(body))
                )
        return Message(
            role="assistant",
            content=_joined(segments, "text"),
            reasoning_content=_joined(segments, "reasoning_text"),
            tool_calls=tuple(self._tool_calls) or None,
            segments=tuple(segments) or None,
        )


def accumulate_stream(chunks: Iterable[ChatStreamChunk]) -> Message:
    """The assistant message a whole stream folds into (:class:`StreamAccumulator`).

    >>> accumulate_stream([ChatStreamChunk(content_delta="o"), ChatStreamChunk(content_delta="k")]).content
    'ok'
    """
    acc = StreamAccumulator()
    for chunk in chunks:
        acc.add(chunk)
    return acc.message()
