"""Tests for promptkit/chat/stream.py: stream chunks, stream pieces and the accumulator."""

from __future__ import annotations

import doctest
import itertools

import pytest
from hypothesis import given, settings, strategies as st

import promptkit.chat.stream as stream_module
from promptkit.chat.message import ContentSegment, Message, ToolCall
from promptkit.chat.stream import (
    ChatStreamChunk,
    ChatUsage,
    StreamAccumulator,
    StreamChunkMessage,
    StreamError,
    ToolCallProgress,
    accumulate_stream,
    segment_mirrors_hold,
    with_segment_mirrors,
)


def test_docstring_examples() -> None:
    result = doctest.testmod(stream_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_tool_calls_and_progress_are_exclusive() -> None:
    with pytest.raises(StreamError, match="exclusive"):
        ChatStreamChunk(tool_calls=[ToolCall("c", "f")], tool_call_progress=ToolCallProgress(0, "f", 1))


def test_model_progress_has_no_call_id_and_platform_progress_must() -> None:
    with pytest.raises(StreamError, match=r"ChatStreamChunk\.tool_call_progress\.call_id"):
        ChatStreamChunk(tool_call_progress=ToolCallProgress(0, "f", 1, call_id="x"))
    with pytest.raises(StreamError, match=r"StreamChunkMessage\.tool_call_progress\.call_id"):
        StreamChunkMessage("s", "t1", tool_call_progress=ToolCallProgress(0, "f", 1))
    assert (
        StreamChunkMessage("s", "t1", tool_call_progress=ToolCallProgress(0, "f", 1, "call_7")).turn_id
        == "t1"
    )


def test_stream_piece_needs_a_turn_id() -> None:
    with pytest.raises(StreamError, match="turn_id"):
        StreamChunkMessage("s", "")


def test_piece_from_chunk_stamps_the_call_id_and_keeps_it_across_progress() -> None:
    chunks = [ChatStreamChunk(tool_call_progress=ToolCallProgress(0, "search", n)) for n in (3, 9, 20)]
    pieces = [StreamChunkMessage.from_chunk(c, session_id="s", turn_id="t", call_id="call_1") for c in chunks]
    assert {p.tool_call_progress.call_id for p in pieces if p.tool_call_progress} == {"call_1"}
    assert [p.tool_call_progress.chars_accumulated for p in pieces if p.tool_call_progress] == [3, 9, 20]
    with pytest.raises(StreamError, match="call_id is required"):
        StreamChunkMessage.from_chunk(chunks[0], session_id="s", turn_id="t")
    done = StreamChunkMessage.from_chunk(ChatStreamChunk(done=True), session_id="s", turn_id="t")
    assert done.done is True


@pytest.mark.parametrize(
    ("cls", "kwargs"),
    [
        (ToolCallProgress, {"index": -1, "name": "f", "chars_accumulated": 0}),
        (ToolCallProgress, {"index": 0, "name": "f", "chars_accumulated": True}),
        (ChatUsage, {"prompt_tokens": -1, "completion_tokens": 0, "total_tokens": 0}),
    ],
)
def test_counts_are_non_negative_ints(cls: type, kwargs: dict[str, object]) -> None:
    with pytest.raises(StreamError, match=cls.__name__):
        cls(**kwargs)


def test_cached_tokens_cannot_exceed_prompt_tokens() -> None:
    with pytest.raises(StreamError, match="cached_prompt_tokens"):
        ChatUsage(10, 1, 11, cached_prompt_tokens=11)
    assert ChatUsage(10, 1, 11).cached_prompt_tokens is None  # unknown, not zero


def test_accumulator_keeps_arrival_order_and_merges_runs() -> None:
    call = ToolCall("c1", "search", '{"q": "天气"}')
    usage = ChatUsage(100, 20, 120, cached_prompt_tokens=64)
    acc = StreamAccumulator()
    for chunk in [
        ChatStreamChunk(reasoning_delta="先"),
        ChatStreamChunk(reasoning_delta="查"),
        ChatStreamChunk(tool_call_progress=ToolCallProgress(0, "search", 5)),
        ChatStreamChunk(tool_calls=[call]),
        ChatStreamChunk(content_delta="晴"),
        ChatStreamChunk(content_delta="天", usage=usage),
        ChatStreamChunk(done=True),
    ]:
        acc.add(chunk)
    m = acc.message()
    assert [(s.type, s.text, s.tool_call) for s in m.segments or ()] == [
        ("reasoning_text", "先查", None),
        ("tool_call", None, call),
        ("text", "晴天", None),
    ]
    assert (m.role, m.content, m.reasoning_content, m.tool_calls) == ("assistant", "晴天", "先查", (call,))
    assert acc.done and acc.usage == usage and acc.progress == {0: ToolCallProgress(0, "search", 5)}


def test_tool_call_segments_carry_start_and_end_time_for_the_duration_display() -> None:
    """「ContentSegment 是 assistant 输出的有序时间线，有三种：text、reasoning_text…、tool_call（带 startTime /
    endTime 供时长展示）」: the accumulator stamps each tool_call segment with when the model began the call
    (its first progress chunk, else the chunk that brought it) and when the final call arrived."""
    ticks = iter([100.0, 200.0, 300.0, 450.0, 900.0])
    acc = StreamAccumulator(clock=lambda: next(ticks))
    first, second, third = ToolCall("c1", "search"), ToolCall("c2", "read"), ToolCall("c3", "ls")
    acc.add(ChatStreamChunk(content_delta="先查"))  # text: the clock is not read
    acc.add(ChatStreamChunk(tool_call_progress=ToolCallProgress(0, "search", 2)))  # 100
    acc.add(ChatStreamChunk(tool_call_progress=ToolCallProgress(1, "read", 1)))  # 200
    acc.add(ChatStreamChunk(tool_call_progress=ToolCallProgress(0, "search", 8)))  # 300: not a new start
    acc.add(ChatStreamChunk(tool_calls=[first, second]))  # 450
    acc.add(ChatStreamChunk(tool_calls=[third], done=True))  # 900, no progress: starts when it arrives
    segments = [s for s in acc.message().segments or () if s.type == "tool_call"]
    assert [(s.tool_call, s.start_time, s.end_time) for s in segments] == [
        (first, 100.0, 450.0),
        (second, 200.0, 450.0),
        (third, 900.0, 900.0),
    ]
    # the wall clock by default: milliseconds, start never after end
    [segment] = accumulate_stream([ChatStreamChunk(tool_calls=[first])]).segments or ()
    assert segment.start_time is not None and segment.end_time is not None
    assert 1e12 < segment.start_time <= segment.end_time


def test_no_chunk_after_done() -> None:
    acc = StreamAccumulator()
    acc.add(ChatStreamChunk(done=True))
    with pytest.raises(StreamError, match="after the done chunk"):
        acc.add(ChatStreamChunk(content_delta="x"))


def test_empty_stream_is_an_empty_assistant_message() -> None:
    m = accumulate_stream([])
    assert (m.role, m.content, m.reasoning_content, m.segments, m.tool_calls) == (
        "assistant",
        None,
        None,
        None,
        None,
    )


def test_with_segment_mirrors_repairs_stale_mirrors_and_leaves_good_ones() -> None:
    segs = [
        ContentSegment("reasoning_text", text="r"),
        ContentSegment("text", text="a"),
        ContentSegment("text", text="b"),
    ]
    stale = Message(role="assistant", content="old", reasoning_content=None, segments=segs)
    fixed = with_segment_mirrors(stale)
    assert (fixed.content, fixed.reasoning_content) == ("ab", "r")
    assert not segment_mirrors_hold(stale) and segment_mirrors_hold(fixed)
    assert with_segment_mirrors(fixed) is fixed
    plain = Message(role="assistant", content="x")
    assert with_segment_mirrors(plain) is plain and segment_mirrors_hold(plain)


_chunks = st.lists(
    st.one_of(
        st.builds(ChatStreamChunk, content_delta=st.text(max_size=4)),
        st.builds(ChatStreamChunk, reasoning_delta=st.text(max_size=4)),
        st.builds(
            ChatStreamChunk,
            tool_calls=st.lists(
                st.builds(ToolCall, st.sampled_from(["a", "b"]), st.just("f")), min_size=1, max_size=2
            ),
        ),
        st.builds(
            ChatStreamChunk,
            tool_call_progress=st.builds(
                ToolCallProgress, st.integers(0, 3), st.just("f"), st.integers(0, 9)
            ),
        ),
    ),
    max_size=12,
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(_chunks)
def test_every_snapshot_keeps_the_mirrors_in_sync(chunks: list[ChatStreamChunk]) -> None:
    # "生产方累积时需要同步写": never emit a message whose content / reasoning_content disagree with segments.
    acc = StreamAccumulator()
    for chunk in chunks:
        acc.add(chunk)
        m = acc.message()
        assert segment_mirrors_hold(m)
    m = acc.message()
    assert (m.content or "") == "".join(c.content_delta or "" for c in chunks)
    assert (m.reasoning_content or "") == "".join(c.reasoning_delta or "" for c in chunks)
    assert list(m.tool_calls or ()) == [t for c in chunks for t in c.tool_calls or ()]
    segs = m.segments or ()
    assert all(a.type != b.type or a.type == "tool_call" for a, b in itertools.pairwise(segs))


@settings(max_examples=100, deadline=None)
@given(_chunks)
def test_with_segment_mirrors_is_idempotent(chunks: list[ChatStreamChunk]) -> None:
    m = accumulate_stream(chunks)
    stale = Message(role="assistant", content="?", reasoning_content="?", segments=m.segments)
    once = with_segment_mirrors(stale)
    assert with_segment_mirrors(once) is once
