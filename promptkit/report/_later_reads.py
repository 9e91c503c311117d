"""How far the later calls of a session read within a TTL of each call: what the cache-write accounting
(:func:`promptkit.report.causes.write_accounting`) counts as a write read before it expired.

For call *k* of a session (its calls in order, each with a timestamp or None and the point its prompt was
read to), the answer is the furthest point read by calls *k+1, k+2, …* up to the first one more than
``ttl`` seconds after call *k* (a call without a timestamp, or call *k* without one, never ends the
window), and 0 when no call reads in it. A walk to each window's end is quadratic over a long session,
whose windows hold every later call (it is the reference of tests/report/test_later_reads.py);
:func:`reads_within` gives the same answer for every call at once in O(n log n): a window's end from the
running maxima of the later timestamps, its maximum from the running maxima of the earlier reads.

>>> reads_within([0.0, 10.0, 400.0, None], [5, 7, 3, 9], 300.0)
[7, 0, 9, 0]
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

__all__ = ["reads_within"]


def reads_within(times: Sequence[float | None], reads: Sequence[int], ttl: float) -> list[int]:
    """The furthest point read within ``ttl`` seconds after each call ``k`` of the session, in O(n log n)."""
    return _window_maxima(reads, _window_ends(times, ttl))


def _window_ends(times: Sequence[float | None], ttl: float) -> list[int]:
    """For every call ``k``: the first later call more than ``ttl`` seconds after it (``len(times)``:
    none). The calls after ``k`` that are later than every call before them, from ``k + 1`` on, are held
    in a stack (the nearest on top, their times rising toward the bottom); whether ``t - times[k] > ttl``
    rises with ``t``, so the first of them past the TTL is found by bisection, and it is the first call
    past the TTL at all (the test on the latest time so far is the test on every time so far). A call
    without a timestamp (or NaN, which no comparison passes) is held as -inf: it never ends a window."""
    n = len(times)
    ends = [n] * n
    stack: list[int] = []  # indices, the nearest (k + 1) last
    values: list[float] = []  # their times, falling toward the end of the list
    for k in range(n - 1, -1, -1):
        ts = times[k]
        if ts is not None and ts == ts and values:  # None and NaN: no later call ends the window

            def within(value: float, ts: float = ts) -> bool:
                return not value - ts > ttl

            p = bisect.bisect_left(values, True, key=within)  # values[:p] are past the TTL
            if p:
                ends[k] = stack[p - 1]
        value = -math.inf if ts is None or ts != ts else ts
        while values and values[-1] <= value:
            values.pop()
            stack.pop()
        stack.append(k)
        values.append(value)
    return ends


def _window_maxima(reads: Sequence[int], ends: Sequence[int]) -> list[int]:
    """For every call ``k``: the largest of ``reads[k + 1 : ends[k]]``, at least 0. The windows are
    answered in the order of their ends; the calls before the end whose read exceeds every later one's
    are held in a stack (indices rising, reads falling), and a window's maximum is the read of the first
    of them inside it."""
    out = [0] * len(reads)
    stack: list[int] = []
    r = 0
    for k in sorted(range(len(ends)), key=ends.__getitem__):
        end = ends[k]
        while r < end:
            value = reads[r]
            while stack and reads[stack[-1]] <= value:
                stack.pop()
            stack.append(r)
            r += 1
        if k + 1 < end:
            out[k] = max(0, reads[stack[bisect.bisect_left(stack, k + 1)]])
    return out
