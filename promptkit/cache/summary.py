"""The headline figures of an analysis, as plain values: one line for a terminal, a dict for JSON.

``promptkit analyze --quiet`` prints :func:`headline_line`, ``promptkit analyze --json`` prints
:func:`summary_dict`, and the HTML report's headline cards show :func:`headline`.

>>> from promptkit.cache import analyze_requests
>>> body = {"messages": [{"role": "system", "content": "Be terse. " * 50}, {"role": "user", "content": "hi"}]}
>>> result = analyze_requests([body, body], provider="exact")
>>> figures = headline(result)
>>> figures["requests"], figures["sessions"], figures["reported_hit_ratio"]
(2, 1, None)
>>> headline_line(figures).startswith(f"predicted hit ratio {result.hit_ratio:.2%} (reported: no usage)")
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import polars as pl

from promptkit.cache.report import ALL_SESSIONS, summarize
from promptkit.cache.report.metrics import requests_of

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.cache.engine import AnalysisResult

__all__ = ["SUMMARY_VERSION", "headline", "headline_line", "summary_dict"]

#: Version of the ``--json`` document's shape; raised when a key changes meaning or disappears.
SUMMARY_VERSION: Final[int] = 1


def _plain(value: Any) -> Any:
    """A JSON-ready scalar: NaN becomes None."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def headline(result: AnalysisResult, tables: Mapping[str, pl.DataFrame] | None = None) -> dict[str, Any]:
    """The headline figures: requests, sessions, tokens, predicted and reported hit ratio, cost, configuration.

    Keys: ``requests, sessions, prompt_tokens, predicted_cached_tokens, hit_ratio, reported_requests,
    reported_prompt_tokens, reported_cached_tokens, reported_hit_ratio`` (None without usage),
    ``cost_with_cache, cost_without_cache`` (USD, predicted token counts; None without a price),
    ``reported_cost_with_cache``, ``problems`` (load and analysis problems), ``notes`` (count) and
    ``provider, tokenizer, render, cache_model, view``. ``tables`` are :func:`summarize`'s when you
    have them (else computed).
    """
    frame = requests_of(result)
    if tables is None:
        tables = summarize(result)
    total = tables["hit_ratio"].filter(pl.col("session") == ALL_SESSIONS).row(0, named=True)
    cost = tables.get("cost", pl.DataFrame())

    def cost_of(basis: str, column: str) -> float | None:
        if not cost.height:
            return None
        part = cost.filter(pl.col("basis") == basis)
        return float(part[column].sum()) if part.height else None

    model = getattr(result, "cache_model", None)
    return {
        "requests": frame.height,
        "sessions": frame["session"].n_unique(),
        "prompt_tokens": total["prompt_tokens"],
        "predicted_cached_tokens": total["predicted_cached_tokens"],
        "hit_ratio": _plain(total["hit_ratio"]),
        "reported_requests": total["reported_requests"],
        "reported_prompt_tokens": total["reported_prompt_tokens"],
        "reported_cached_tokens": total["reported_cached_tokens"],
        "reported_hit_ratio": _plain(total["reported_hit_ratio"]),
        "cost_with_cache": cost_of("predicted", "cost_with_cache"),
        "cost_without_cache": cost_of("predicted", "cost_without_cache"),
        "reported_cost_with_cache": cost_of("reported", "cost_with_cache"),
        "problems": tables["problems"].height if "problems" in tables else 0,
        "notes": tables["notes"].height if "notes" in tables else 0,
        "provider": getattr(result, "provider", None),
        "tokenizer": getattr(result, "tokenizer", None),
        "render": getattr(result, "render", None),
        "cache_model": getattr(model, "name", model),
        "view": getattr(result, "view", None),
    }


def headline_line(figures: Mapping[str, Any]) -> str:
    """The headline in one line (what ``promptkit analyze --quiet`` prints).

    >>> headline_line({"hit_ratio": 0.2074, "reported_hit_ratio": None, "requests": 71, "sessions": 1,
    ...                "prompt_tokens": 580316, "cost_with_cache": 0.1351, "cost_without_cache": 0.1654,
    ...                "problems": 0})
    'predicted hit ratio 20.74% (reported: no usage) over 71 requests in 1 session(s), 580,316 prompt tokens; $0.1351 with cache, $0.1654 without; 0 problem(s)'
    """

    def pct(value: Any) -> str:
        return "n/a" if value is None else f"{value:.2%}"

    reported = figures.get("reported_hit_ratio")
    parts = [
        f"predicted hit ratio {pct(figures.get('hit_ratio'))} "
        f"(reported: {pct(reported) if reported is not None else 'no usage'}) over "
        f"{figures['requests']:,} requests in {figures['sessions']:,} session(s), "
        f"{figures['prompt_tokens']:,} prompt tokens"
    ]
    if figures.get("cost_with_cache") is not None:
        parts.append(
            f"${figures['cost_with_cache']:,.4f} with cache, ${figures['cost_without_cache']:,.4f} without"
        )
    parts.append(f"{figures.get('problems', 0):,} problem(s)")
    return "; ".join(parts)


def _rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    return [{k: _plain(v) for k, v in row.items()} for row in frame.iter_rows(named=True)]


def summary_dict(
    result: AnalysisResult,
    tables: Mapping[str, pl.DataFrame] | None = None,
    *,
    paths: Sequence[str] = (),
    files: Sequence[str] = (),
) -> dict[str, Any]:
    """The machine-readable summary ``promptkit analyze --json`` prints (JSON-ready values only).

    Keys: ``version`` (:data:`SUMMARY_VERSION`), ``paths`` (analyzed), ``headline``
    (:func:`headline`), ``sessions`` (one object per session: the columns of
    :func:`~promptkit.cache.report.hit_ratio_summary`), ``lost_by_slot``, ``lost_by_cause``
    (:func:`~promptkit.cache.html.causes_table`), ``predicted_vs_reported``
    (per session, empty without usage), ``notes`` (``table, note``), ``problems`` (the count),
    ``files`` (written into ``--out``).

    >>> from promptkit.cache import analyze_requests
    >>> summary = summary_dict(analyze_requests([{"messages": [{"role": "user", "content": "hi"}]}], provider="exact"))
    >>> sorted(summary)
    ['files', 'headline', 'lost_by_cause', 'lost_by_slot', 'notes', 'paths', 'predicted_vs_reported', 'problems', 'sessions', 'version']
    """
    if tables is None:
        tables = summarize(result)
    sessions = tables["hit_ratio"].filter(pl.col("session") != ALL_SESSIONS)
    pvr = tables["predicted_vs_reported"]
    figures = headline(result, tables)
    from promptkit.cache.html import causes_table

    causes = causes_table(result)
    return {
        "version": SUMMARY_VERSION,
        "paths": [str(p) for p in paths],
        "headline": figures,
        "sessions": _rows(sessions),
        "lost_by_slot": _rows(tables["lost_by_slot"]),
        "lost_by_cause": _rows(causes) if causes is not None else [],
        "predicted_vs_reported": _rows(pvr.filter(pl.col("session") != ALL_SESSIONS)) if pvr.height else [],
        "notes": _rows(tables["notes"]) if "notes" in tables else [],
        "problems": figures["problems"],
        "files": list(files),
    }
