"""The runs one call's cache plan leaves in an empty cache (a private helper of
:func:`promptkit.analysis.simulator.consecutive_outcome`, kept apart to keep that module's size)."""

from __future__ import annotations

import math

from promptkit.tokens.cache_models import CacheEntry, CachePlan

_INF = math.inf


def _stored_path(
    plan: CachePlan, size: int, stored_at: float | None, source: str | None
) -> tuple[list[int], list[float], list[tuple[float, str | None, float | None] | None]]:
    """The runs one call's ``plan`` leaves in an empty cache (its tokens: ``size``): one per distinct
    entry length (ascending), each alive as long as the longest entry that covers it, marked by the
    exact entries that end there (as :meth:`RadixCache.insert` leaves them, longest entry first)."""
    by_length: dict[int, list[CacheEntry]] = {}
    for entry in sorted(plan.entries, key=lambda e: -e.length):
        depth = min(entry.length, size)  # RadixCache.insert stores tokens[:length]
        if depth > 0:
            by_length.setdefault(depth, []).append(entry)
    depths = sorted(by_length)
    expires: list[float] = []
    marks: list[tuple[float, str | None, float | None] | None] = []
    alive_until = -_INF
    for depth in reversed(depths):
        mark: tuple[float, str | None, float | None] | None = None
        for entry in by_length[depth]:
            until = _INF if entry.ttl is None or stored_at is None else stored_at + entry.ttl
            alive_until = max(alive_until, until)
            if entry.exact:
                mark = (max(mark[0], until) if mark is not None else until, source, entry.ttl)
        expires.append(alive_until)
        marks.append(mark)
    expires.reverse()
    marks.reverse()
    return depths, expires, marks
