"""Summaries of a cache analysis as polars DataFrames, and what the calls cost at a provider's prices.

One module per concern: :mod:`~promptkit.report.metrics` (hit ratios, losses, breaks, predicted
against reported), :mod:`~promptkit.report.pricing` (prices and costs) and
:mod:`~promptkit.report.text` (the gathered tables as text, with a legend).

Every function takes an :class:`~promptkit.analysis.result.AnalysisResult` (or its ``requests`` frame)
and returns a DataFrame; nothing here prints. :func:`summarize` gathers the tables and
:func:`format_summary` turns them into text for a terminal.

>>> import polars as pl
>>> requests = pl.DataFrame({
...     "session": ["a", "a"], "index": [0, 1], "prompt_tokens": [100, 300],
...     "predicted_cached_tokens": [0, 256],
... })
>>> hit_ratio_summary(requests, overall=False)["hit_ratio"].to_list()
[0.64]

Vocabulary: a request's *loss* is ``prompt_tokens - predicted_cached_tokens``, the tokens billed at
the cache-miss price; it is attributed to the *slot* where the prompt first diverged from what the
cache held (an anchor such as ``identity`` or ``turn-context``, a frame role such as ``history`` or
``current``, or, for logs without a layout, the role of the first divergent message).
"""

from __future__ import annotations

from promptkit.errors import PriceError, ReportInputError
from promptkit.report.causes import (
    causes_by_cause,
    causes_by_change,
    causes_by_slot,
    causes_headline,
    check_gate,
    diagnostics_comparison,
    lint,
    reads_invariant,
    write_accounting,
)
from promptkit.report.files import REPORT_FORMATS, write_report
from promptkit.report.metrics import (
    ALL_SESSIONS,
    COLD_START,
    NEW_TOKENS,
    NO_LAYOUT,
    REQUEST_COLUMNS,
    attribute_losses,
    hit_ratio_summary,
    largest_breaks,
    predicted_vs_reported,
    predicted_vs_reported_summary,
    tokens_lost_by_key,
    tokens_lost_by_slot,
)
from promptkit.report.pricing import (
    PriceTable,
    cost_summary,
    load_prices,
    prices_frame,
    request_costs,
    resolve_prices,
)
from promptkit.report.text import (
    COLUMN_LEGEND,
    SHORT_NAMES,
    format_legend,
    format_summary,
    summarize,
    table_config,
)

__all__ = [
    "ALL_SESSIONS",
    "COLD_START",
    "COLUMN_LEGEND",
    "NEW_TOKENS",
    "NO_LAYOUT",
    "REPORT_FORMATS",
    "REQUEST_COLUMNS",
    "SHORT_NAMES",
    "PriceError",
    "PriceTable",
    "ReportInputError",
    "attribute_losses",
    "causes_by_cause",
    "causes_by_change",
    "causes_by_slot",
    "causes_headline",
    "check_gate",
    "cost_summary",
    "diagnostics_comparison",
    "format_legend",
    "format_summary",
    "hit_ratio_summary",
    "largest_breaks",
    "lint",
    "load_prices",
    "predicted_vs_reported",
    "predicted_vs_reported_summary",
    "prices_frame",
    "reads_invariant",
    "request_costs",
    "resolve_prices",
    "summarize",
    "table_config",
    "tokens_lost_by_key",
    "tokens_lost_by_slot",
    "write_accounting",
    "write_report",
]
