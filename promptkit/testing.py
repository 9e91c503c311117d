"""Helpers for users' test suites: assert that the prompts an application builds keep the cache.

Example (a pytest test)::

    >>> from promptkit.testing import assert_cache_stable
    >>> system = {"role": "system", "content": "You are terse."}
    >>> turn1 = {"messages": [system, {"role": "user", "content": "hi"}]}
    >>> turn2 = {"messages": [system, {"role": "user", "content": "hi"},
    ...                       {"role": "assistant", "content": "hello"}, {"role": "user", "content": "bye"}]}
    >>> assert_cache_stable([turn1, turn2], provider="exact").passed
    True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from promptkit.errors import CacheGateError

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.layout import LoadResult, RequestRecord
    from promptkit.report.causes import GateResult

__all__ = ["CacheGateError", "assert_cache_stable"]


def assert_cache_stable(
    records: LoadResult | Iterable[RequestRecord | Mapping[str, Any] | tuple[Mapping[str, Any], Any]],
    *,
    provider: str | None = "exact",
    min_hit: float | None = None,
    max_layout_loss: float | None = 0.0,
    view: str = "consecutive",
) -> GateResult:
    """Assert that consecutive requests keep the provider's prefix cache; return the gate's result.

    ``records`` are request bodies (one session, in order; ``(body, layout)`` pairs for prompts built
    with promptkit), :class:`~promptkit.layout.RequestRecord` s or a LoadResult. By default (the
    ``exact`` provider: token by token, no unit, no minimum) *any* token lost to the prompt layout
    fails: a changed system prompt, tools, an edited message, a volatile value in the head.
    ``min_hit`` also requires a hit ratio per session; ``max_layout_loss`` is the share of the prompt
    the layout may lose (None: no limit).

    Raises :class:`~promptkit.errors.CacheGateError` (an ``AssertionError``, so pytest shows it as a
    failure) listing each failing session with its top causes and the first change's detail.
    """
    import polars as pl

    from promptkit.analysis.api import analyze_requests
    from promptkit.report.causes import check_gate

    result = analyze_requests(records, provider=provider, view=view)
    gate = check_gate(result, min_hit=min_hit, max_layout_loss=max_layout_loss)
    if not gate.passed:
        causes = result.causes
        changes = causes.filter(pl.col("change_detail").is_not_null())
        lines = list(gate.failures)
        for row in changes.head(5).iter_rows(named=True):
            lines.append(
                f"  {row['session']}#{row['index']}: {row['change_class']}: {row['change_detail']}"
                + (f" (slot {row['cause_slot']}, key {row['cause_key']})" if row["cause_slot"] else "")
            )
        raise CacheGateError("prompts do not keep the cache:\n" + "\n".join(lines))
    return gate
