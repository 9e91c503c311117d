"""The reads within a TTL of each call (promptkit/report/_later_reads.py): every call's answer at once
equals the reference walk, one call at a time, on any timestamps (sorted or not, missing, NaN, infinite,
equal) and reads (negative ones included); the cache-write accounting reads it per session."""

from __future__ import annotations

import math

import polars as pl
from hypothesis import given, settings, strategies as st

from promptkit.report._later_reads import reads_within
from promptkit.report.causes import write_accounting


def read_within(times: list[float | None], reads: list[int], k: int, ttl: float) -> int:
    """The reference: the furthest point any call after ``k`` read within ``ttl`` seconds of call ``k``,
    one call at a time, read up to its window's end."""
    ts = times[k]
    best = 0
    for j in range(k + 1, len(reads)):
        tj = times[j]
        if ts is not None and tj is not None and tj - ts > ttl:
            break
        best = max(best, reads[j])
    return best


TIME = st.one_of(
    st.none(),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, 300.0, 300.30000000000004, 3600.0]),
    st.floats(-10.0, 5000.0, allow_nan=False),
    st.integers(0, 40).map(lambda k: k * 100.0),  # equal and evenly spaced times
)


@given(
    st.lists(st.tuples(TIME, st.integers(-5, 100)), max_size=40),
    st.sampled_from([0.0, 1.0, 300.0, 3600.0]),
    st.booleans(),
)
@settings(max_examples=400, deadline=None)
def test_every_call_at_once_equals_the_walk_one_call_at_a_time(
    calls: list[tuple[float | None, int]], ttl: float, in_order: bool
) -> None:
    if in_order:  # a session in time order, the usual case
        calls = sorted((c for c in calls if c[0] is not None and c[0] == c[0]), key=lambda c: c[0] or 0.0)
    times = [t for t, _ in calls]
    reads = [r for _, r in calls]
    assert reads_within(times, reads, ttl) == [read_within(times, reads, k, ttl) for k in range(len(calls))]


def test_a_window_ends_at_the_first_later_call_past_the_ttl_and_a_missing_time_never_ends_it() -> None:
    times = [0.0, 100.0, 250.0, 301.0, 5.0, None, 900.0]
    reads = [1, 40, 30, 99, 50, 70, 60]
    # call 0: calls 1, 2 (250 s) are within, call 3 (301 s) is past: its later calls are not read
    # call 3: call 4 went back in time (within), call 5 has no time (within), call 6 is past
    assert reads_within(times, reads, 300.0) == [40, 99, 99, 70, 70, 60, 0]
    assert reads_within([None, 0.0, 10_000.0], [0, 5, 7], 300.0) == [7, 0, 0]  # no time: to the end
    assert reads_within([0.0, 1.0], [0, -4], 300.0) == [0, 0]  # nothing read is 0


def test_write_accounting_reads_each_session_on_its_own() -> None:
    """Two sessions whose rows interleave in the frame: a write of one is read only by the later
    calls of the same session, within the TTL."""
    frame = pl.DataFrame(
        {
            "session": ["b", "a", "b", "a", "a"],
            "index": [0, 0, 1, 1, 2],
            "timestamp": [0.0, 0.0, 10.0, 10.0, 1000.0],
            "predicted_cached_tokens": [0, 0, 900, 100, 500],
            "reported_cached_tokens": [None, None, None, None, None],
            "predicted_cache_write_tokens": [1000, 200, 0, 400, 300],
            "predicted_cache_write_1h_tokens": [0, 0, 0, 0, 0],
        },
        schema_overrides={"reported_cached_tokens": pl.Int64},
    )
    table = write_accounting(frame)
    assert table.select("session", "index", "read_later_tokens", "wasted_5m_tokens").rows() == [
        ("a", 0, 100, 100),  # read to 100 by call 1 (10 s later); call 2 came after 5 minutes
        ("a", 1, 0, 400),
        ("a", 2, 0, 300),  # session b's calls, later in the frame, do not read it
        ("b", 0, 900, 100),
        ("b", 1, 0, 0),
    ]
