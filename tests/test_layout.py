"""promptkit.layout: the one slot vocabulary, layout entry and request record."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from promptkit.errors import LayoutFormatError, PromptkitError
from promptkit.formats import read_logs
from promptkit.layout import (
    ANCHORS,
    FRAME_SLOTS,
    HEAD_SLOTS,
    SLOTS,
    Anchor,
    FrameSlot,
    LayoutEntry,
    RequestRecord,
    Usage,
    head_end,
    history_end,
)


class _Entry:
    def __init__(self, slot: object, key: str | None) -> None:
        self.slot, self.key = slot, key


def test_one_vocabulary() -> None:
    assert ANCHORS == tuple(a.value for a in Anchor)
    assert FRAME_SLOTS == tuple(s.value for s in FrameSlot)
    assert SLOTS == ANCHORS + FRAME_SLOTS
    assert HEAD_SLOTS < set(SLOTS)
    # the assembly package and the analysis read the same objects, not copies
    from promptkit.analysis import LayoutEntry as CacheEntry
    from promptkit.assembly import LayoutEntry as AssemblyEntry

    assert AssemblyEntry is LayoutEntry is CacheEntry


def test_coerce_every_form() -> None:
    want = LayoutEntry("history", "k")
    assert LayoutEntry.coerce(want) is want
    assert LayoutEntry.coerce({"slot": "history", "key": "k"}) == want
    assert LayoutEntry.coerce(("history", "k")) == want
    assert LayoutEntry.coerce(_Entry(FrameSlot.HISTORY, "k")) == want
    assert LayoutEntry.coerce(_Entry(Anchor.TURN_CONTEXT, None)) == LayoutEntry("turn-context")


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"key": "k"}, "x: missing 'slot'"),
        ({"slot": ""}, "x.slot"),
        ({"slot": "a", "key": 3}, "x.key"),
        (("a",), "x"),
        (7, "x"),
    ],
)
def test_coerce_errors_name_the_field(item: object, field: str) -> None:
    with pytest.raises(LayoutFormatError, match="^" + re.escape(field)) as info:
        LayoutEntry.coerce(item, where="x")
    assert isinstance(info.value, PromptkitError)


def test_boundaries() -> None:
    layout = [
        LayoutEntry(s) for s in ("persona", "identity", "history", "turn-context", "history", "current")
    ]
    assert head_end(layout) == 2
    assert history_end(layout) == 5  # the last history entry ends the history, whatever sits between
    assert history_end([LayoutEntry("persona"), LayoutEntry("current")]) == 1
    assert head_end([]) == 0 == history_end([])
    assert head_end([{"slot": "system"}, {"slot": "user"}]) == 1


_counts = st.none() | st.integers(min_value=0, max_value=10**9)


@given(_counts, _counts, _counts, _counts, _counts)
def test_record_json_round_trip(
    prompt: int | None, completion: int | None, cached: int | None, write: int | None, hour: int | None
) -> None:
    import tempfile

    usage = Usage(prompt, completion, cached, write, hour)
    record = RequestRecord(
        {"model": "deepseek-chat", "messages": [{"role": "user", "content": "hi"}]},
        session="s",
        timestamp=1.5,
        completion={"role": "assistant", "content": "yo"},
        usage=usage,
        layout=(LayoutEntry("current"),),
        provider="deepseek",
        url="https://api.deepseek.com/chat/completions",
        meta={"note": 1},
    )
    path = Path(tempfile.mkdtemp()) / "r.jsonl"
    path.write_text(json.dumps(record.to_json()) + "\n", encoding="utf-8")
    back = read_logs(path)
    # usage that cannot be true (cached or written tokens beyond the prompt, 1-hour writes beyond the
    # writes) is one problem naming the field, and the record is kept without it; any other round-trips
    possible = (prompt is None or (cached or 0) + (write or 0) <= prompt) and (
        hour is None or write is None or hour <= write
    )
    if possible:
        assert back.problems == ()
    else:
        [problem] = back.problems
        assert (
            problem.line == 1
            and problem.reason.startswith("usage.")
            and "kept without usage" in problem.reason
        )
    (got,) = back.records
    expected_usage = usage if any(v is not None for v in (prompt, completion, cached, write, hour)) else None
    assert got.usage == (expected_usage if possible else None)
    assert (
        got.request,
        got.session,
        got.timestamp,
        got.completion,
        got.layout,
        got.provider,
        got.url,
        got.meta,
    ) == (
        record.request,
        "s",
        1.5,
        record.completion,
        record.layout,
        "deepseek",
        record.url,
        {"note": 1},
    )


def test_role_boundaries_of_a_request_without_layout() -> None:
    from promptkit.layout import role_head_end, role_history_end

    roles = ["system", "developer", "user", "assistant", "system", "user"]
    assert role_head_end(roles) == 2
    assert role_head_end(roles, head_roles=("system",)) == 1
    assert role_history_end(roles) == 4  # the system block injected before the current user message
    assert role_history_end(["system", "assistant", "tool"]) == 3  # no user: all of it
    assert role_history_end(["system", "system"]) == 2 and role_head_end([]) == 0


def test_last_history_index_and_history_end_from_a_start() -> None:
    from promptkit.layout import LayoutEntry, history_end, last_history_index

    layout = [LayoutEntry("persona"), LayoutEntry("history"), LayoutEntry("history"), LayoutEntry("current")]
    assert last_history_index(layout) == 2 and history_end(layout) == 3
    assert last_history_index(layout, 3) is None and history_end(layout, 3) == 3
    assert last_history_index([{"slot": "persona"}, {"slot": "current"}], 1) is None
