"""promptkit.analysis.composition: the engine's batched rows equal the per-request rows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from promptkit.analysis.composition import CompositionRows
from promptkit.layout import LayoutEntry
from promptkit.tokens.tokenize import RequestTokenizer, TokenizedRequest
from tests.analysis.composition_reference import composition_frame, composition_part

ROLES = ("system", "user", "assistant", "tool")
MESSAGES = [{"role": role, "content": f"{role} {k}"} for k in range(3) for role in ROLES]


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    """One request's composition arguments: a tokenized request with arbitrary (unsorted, overlapping,
    empty) message spans, a body whose messages come from a small shared pool (so that the same objects
    and equal copies recur across a session's requests), maybe a layout (sometimes too short), an opaque
    head, a shift."""
    n = draw(st.integers(0, 7))
    length = draw(st.integers(0, 40))
    prompt_len = draw(st.integers(0, length))
    starts = draw(st.lists(st.integers(0, length), min_size=n, max_size=n))
    ends = draw(st.one_of(st.none(), st.lists(st.integers(0, length), min_size=n, max_size=n)))
    tok = TokenizedRequest(
        tokens=np.arange(length),
        message_starts=tuple(starts),
        header_len=draw(st.integers(0, length)),
        prompt_len=prompt_len,
        message_ends=None if ends is None else tuple(ends),
    )
    picks = draw(st.lists(st.integers(0, len(MESSAGES) - 1), min_size=n, max_size=n))
    messages = [MESSAGES[k] if draw(st.booleans()) else dict(MESSAGES[k]) for k in picks]
    body: dict[str, Any] = {"messages": messages}
    if draw(st.booleans()):
        body["tools"] = [{"type": "function", "function": {"name": "f"}}]
    layout = None
    if draw(st.booleans()):
        size = max(0, n - draw(st.sampled_from((0, 0, 0, 1, 5, 6))))
        slots = st.sampled_from(("persona", "history", "current", "knowledge"))
        keys = st.one_of(st.none(), st.sampled_from(("a", "b")))
        layout = tuple(LayoutEntry(draw(slots), draw(keys)) for _ in range(size))
    opaque = draw(st.one_of(st.none(), st.tuples(st.integers(0, 12), st.sampled_from(("k1", "k2")))))
    return {
        "session": draw(st.sampled_from(("s1", "s2"))),
        "index": draw(st.integers(0, 5)),
        "body": body,
        "tok": tok,
        "layout": layout,
        "shifted": draw(st.booleans()),
        "opaque": opaque,
    }


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(requests(), max_size=6))
def test_rows_equal_the_per_request_parts(items: list[dict[str, Any]]) -> None:
    rows = CompositionRows()
    parts = []
    for position, item in enumerate(items):
        try:
            part = composition_part(**item)
        except IndexError:  # a layout too short for a span with tokens: the rows fail too
            with pytest.raises(IndexError):
                rows.add(**item, position=10 * position)
                rows.frame(position=True)
            return
        parts.append(part)
        rows.add(**item, position=10 * position)
    frame = rows.frame(position=True)
    expected = composition_frame(parts)
    assert frame.drop("_position").equals(expected)
    counts = [len(p["index"]) for p in parts]
    assert frame["_position"].to_list() == [10 * k for k, c in enumerate(counts) for _ in range(c)]


def test_rows_of_a_growing_session_equal_the_parts() -> None:
    """A session whose requests repeat the previous request's messages (the same objects, as the
    loaders intern them), tokenized for real."""
    rt = RequestTokenizer("chatml", "cl100k_base")
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be terse."}]
    rows = CompositionRows()
    parts = []
    for k in range(6):
        messages = [*messages, {"role": "user" if k % 2 else "assistant", "content": f"turn {k}"}]
        body = {"messages": messages, "tools": [{"type": "function", "function": {"name": "f"}}]}
        tok = rt.tokenize(body)
        rows.add("s", k, body, tok)
        parts.append(composition_part("s", k, body, tok))
    frame = rows.frame()
    assert frame.equals(composition_frame(parts))
    assert frame.filter(frame["index"] == 5)["role"].to_list() == [
        None,
        "system",
        *(["assistant", "user"] * 3),
        None,
    ]


def test_a_session_whose_last_message_is_replaced_reads_its_new_role() -> None:
    """Each request repeats the previous one's messages but its last, a new object: marked with a
    breakpoint (Claude Code's way, the roles unchanged), or replaced by a message of another role."""
    rt = RequestTokenizer("chatml", "cl100k_base")
    rows = CompositionRows()
    parts = []
    kept: list[dict[str, Any]] = [{"role": "system", "content": "Be terse."}]
    bodies = []
    for k, role in enumerate(["user", "assistant", "user"]):
        last = {"role": role, "content": f"turn {k}", "cache_control": {"type": "ephemeral"}}
        bodies.append({"messages": [*kept, last]})
        kept = [*kept, {"role": role, "content": f"turn {k}"}]
    bodies.append({"messages": [*bodies[-1]["messages"][:-1], {"role": "assistant", "content": "again"}]})
    for k, body in enumerate(bodies):
        tok = rt.tokenize(body)
        rows.add("s", k, body, tok)
        parts.append(composition_part("s", k, body, tok))
    frame = rows.frame()
    assert frame.equals(composition_frame(parts))
    assert frame.filter(frame["index"] == 3)["role"].to_list() == [
        "system",
        "user",
        "assistant",
        "assistant",
        None,
    ]


def test_many_short_sessions_hold_their_rows_not_a_token_buffer_of_room_each() -> None:
    """Every session keeps its per-message chains until the frame is made: a chain grows by a few
    messages per request, so its buffers hold about what was written (half again), not the token
    buffers' 1,024 values of room per session and field."""
    import tracemalloc

    rt = RequestTokenizer("chatml", "cl100k_base")
    system = {"role": "system", "content": "Be terse."}
    items = []
    for s in range(200):
        messages: list[dict[str, Any]] = [system]
        for k in range(3):
            messages = [*messages, {"role": "user", "content": f"question {k}"}]
            body = {"messages": messages}
            items.append((f"s{s}", k, body, rt.tokenize(body)))
    tracemalloc.start()
    try:
        rows = CompositionRows()
        for item in items:
            rows.add(*item)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # 600 requests of 2-4 messages: a few hundred bytes each; 1,024 int64 of room per session and
    # field would be 200 x 3 x 8 kB = 4.9 MB
    assert held < 1_500_000, held
