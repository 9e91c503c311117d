"""The headline figures of an analysis, as plain values: one line for a terminal, a dict for JSON.

``promptkit analyze --quiet`` prints :func:`headline_line`, ``promptkit analyze --json`` prints
:func:`summary_dict`, and the HTML report's headline cards show :func:`headline`.

>>> from promptkit.analysis import analyze_requests
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

from promptkit.report.metrics import ALL_SESSIONS, requests_of
from promptkit.report.text import summarize

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.analysis.result import AnalysisResult

__all__ = [
    "SUMMARY_VERSION",
    "analysis_head",
    "causes_lines",
    "expectation_line",
    "header_line",
    "headline",
    "headline_line",
    "provider_line",
    "quiet_text",
    "summary_dict",
]

#: Names that moved to :mod:`promptkit.commands` (they work here for one release, with a
#: DeprecationWarning naming the new home).
_MOVED: Final[Mapping[str, str]] = {"apply_expectation": "promptkit.commands.expectation"}

#: Version of the ``--json`` document's shape; raised when a key changes meaning or disappears.
#: 2: ``expectation``, ``causes`` and the cost notes added.
SUMMARY_VERSION: Final[int] = 2


def expectation_line(expectation: Mapping[str, Any]) -> str:
    """The expectation in one line.

    >>> expectation_line({"expected_hit_ratio": 0.9, "upper_bound": 0.95, "stale_probability": 0.05,
    ...                   "basis": "population rate"})
    'Expected hit ratio 90.0% (upper bound 95.0%; calibration p(stale) = 0.050, population rate)'
    """
    expected = expectation.get("expected_hit_ratio")
    shown = "n/a" if expected is None else f"{expected:.1%}"
    return (
        f"Expected hit ratio {shown} (upper bound {expectation['upper_bound']:.1%}; "
        f"calibration p(stale) = {expectation['stale_probability']:.3f}, {expectation['basis']})"
    )


def provider_line(result: Any) -> str:
    """How the provider was chosen, from the result's ``provider_assumed`` field (never its notes)."""
    if getattr(result, "provider_assumed", False):
        return "(provider: no session named one or was recognised; the default was used, see the notes)"
    return "(provider: recognised per session from the log's URLs, model names or usage)"


def causes_lines(result: Any) -> list[str]:
    """The causes headline (layout / provider / inherent / unexplained) and, when the analysis has
    cache writes, a line on them and their waste."""
    if not hasattr(result, "cache_model"):
        return []
    from promptkit.report.causes import causes_basis, causes_headline, write_accounting

    lines = [f"{causes_headline(result)}; basis: {causes_basis(result)}", *_bases_differ(result)]
    events = requests_of(result)["log_events"] if "log_events" in requests_of(result).columns else None
    if events is not None and bool(events.str.contains("trace").any()):
        lines.append(
            "A block trace (Mooncake): no text, so no layout cause; the tokens past the shared blocks are "
            "new to the cache. To replay it over replicas and routing policies: promptkit fleet"
        )
    requests = result.requests
    if any(
        c in requests.columns and bool((requests[c].fill_null(0) > 0).any())
        for c in ("reported_cache_write_tokens", "predicted_cache_write_tokens")
    ):
        writes = write_accounting(result)
        five, hour = int(writes["write_5m_tokens"].sum()), int(writes["write_1h_tokens"].sum())
        wasted = int(writes["wasted_5m_tokens"].sum()) + int(writes["wasted_1h_tokens"].sum())
        lines.append(
            f"Cache writes: {five + hour:,} tokens (5-minute {five:,}, 1-hour {hour:,}); "
            f"never read before they expired: {wasted:,}"
        )
    return lines


#: How far apart (hit ratio) the predicted and the reported figures may be before a line says why.
BASES_DIFFER: Final[float] = 0.005


def _bases_differ(result: Any) -> list[str]:
    """One line when the reported hit ratio differs from the predicted one on the requests with usage:
    which tables use which figures, and why they differ (the analysis notes that say so, else the
    provider serving more or fewer cached tokens than its documented rules)."""
    requests = result.requests
    if "reported_cached_tokens" not in requests.columns:
        return []
    rows = requests.filter(
        pl.col("reported_cached_tokens").is_not_null() & pl.col("reported_prompt_tokens").is_not_null()
    )
    reported_prompt = int(rows["reported_prompt_tokens"].sum()) if rows.height else 0
    prompt = int(rows["prompt_tokens"].sum()) if rows.height else 0
    if not (reported_prompt and prompt):
        return []
    predicted = int(rows["predicted_cached_tokens"].sum()) / prompt
    reported = int(rows["reported_cached_tokens"].sum()) / reported_prompt
    if abs(predicted - reported) <= BASES_DIFFER:
        return []
    if reported > predicted:
        # the analysis' notes say why it predicts less (no breakpoint, a head shared across sessions)
        notes = [
            n
            for n in getattr(result, "notes", ())
            if "cache" in n and "breakpoints were inferred" not in n  # inferred: no reason for a difference
        ]
        why = notes[0] if notes else "the provider served more cached tokens than its cache rules predict"
    elif any("may not report cache reads" in n for n in getattr(result, "notes", ())):
        # a route that reports no cache read at all (the analysis' note names it)
        why = next(n for n in result.notes if "may not report cache reads" in n)
    elif "best_effort_cache" in rows.columns and bool(rows["best_effort_cache"].fill_null(False).any()):
        why = "the provider served fewer cached tokens than its rules allow: its cache is best effort (provider_miss)"
    else:
        why = (
            "the provider served fewer cached tokens than its rules allow: a change the log does not show "
            "(head_changed / history_rewritten)"
        )
    return [
        f"Predicted hit ratio {predicted:.2%} vs reported {reported:.2%} on the requests with usage: the "
        f"causes use the reported figures, the slot, key and largest-break tables the predicted ones; "
        f"they differ because {why}"
    ]


def header_line(result: Any, paths: Sequence[object] = ()) -> str:
    """The first line of the terminal summary: how many requests, sessions and files (the files the
    requests and the problems name; ``len(paths)`` when they name none), and the provider, tokenizer,
    render, cache model and view the analysis used.

    >>> from promptkit.analysis import analyze_requests
    >>> header_line(analyze_requests([{"messages": [{"role": "user", "content": "hi"}]}], provider="exact"), ["a.jsonl"])
    '1 requests in 1 sessions from 1 file(s); provider: exact; tokenizer: cl100k_base; render: chatml; cache model: exact; view: consecutive'
    """
    requests = result.requests
    files = set(requests["file"].drop_nulls()) if "file" in requests.columns else set()
    problems = getattr(result, "problems", None)
    if problems is not None and "file" in problems.columns:
        files |= set(problems["file"].drop_nulls())
    parts = [
        f"{requests.height} requests in {requests['session'].n_unique()} sessions "
        f"from {len(files) or len(paths)} file(s)"
    ]
    for name in ("provider", "tokenizer", "render", "cache_model", "view"):
        value = getattr(result, name, None)
        if value is not None:
            parts.append(f"{name.replace('_', ' ')}: {getattr(value, 'name', value)}")
    return "; ".join(parts)


def analysis_head(
    result: Any,
    paths: Sequence[object] = (),
    expectation: Mapping[str, Any] | None = None,
    *,
    provider_given: bool = False,
) -> str:
    """The lines above the summary tables: :func:`header_line`, how the provider was chosen (left out
    when the caller named it: ``provider_given``), the causes and, with a calibration, the expectation.

    >>> from promptkit.analysis import analyze_requests
    >>> result = analyze_requests([{"messages": [{"role": "user", "content": "hi"}]}], provider="exact")
    >>> analysis_head(result, provider_given=True).splitlines()[1]
    "Lost to your layout: 0 tokens (0.0% of the prompt); to the provider: 0 (0.0%); inherent (cold start, new tokens): 9 (100.0%); basis: predicted, promptkit's cache rules (the log reports no usage)"
    """
    lines = [header_line(result, paths)]
    if not provider_given:
        lines.append(provider_line(result))
    lines += causes_lines(result)
    if expectation is not None:
        lines.append(expectation_line(expectation))
    return "\n".join(lines)


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
        part = cost.filter(pl.col("basis") == basis)[column].drop_nulls()
        # a model without a price has null costs: they are left out (a note says so), never counted as 0
        return float(part.sum()) if part.len() else None

    model = getattr(result, "cache_model", None)
    cost_notes = (
        tables["notes"].filter(pl.col("table") == "cost")["note"].to_list() if "notes" in tables else []
    )
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
        "provider_assumed": bool(getattr(result, "provider_assumed", False)),
        "cost_note": "; ".join(cost_notes) if cost_notes else None,
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
    elif figures.get("cost_note"):
        # the note's first clause (what has no price); the notes hold the rest
        parts.append(f"cost: n/a ({str(figures['cost_note']).split(': ')[0]}; see the notes)")
    parts.append(f"{figures.get('problems', 0):,} problem(s)")
    return "; ".join(parts)


def quiet_text(
    result: AnalysisResult,
    tables: Mapping[str, pl.DataFrame] | None = None,
    expectation: Mapping[str, Any] | None = None,
) -> str:
    """What ``promptkit analyze --quiet`` prints: exactly one line, the headline (:func:`headline_line`),
    with the expected hit ratio when a calibration applies and the count of notes (the tables, ``--json``
    and ``summary.txt`` hold the rest)."""
    if tables is None:
        tables = summarize(result)
    line = headline_line(headline(result, tables))
    if expectation is not None and expectation.get("expected_hit_ratio") is not None:
        line += f"; expected hit ratio {expectation['expected_hit_ratio']:.2%} (calibrated)"
    notes = tables["notes"].height if "notes" in tables else 0
    if notes:
        line += f"; {notes} note(s)"
    return line + "\n"


def _rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    return [{k: _plain(v) for k, v in row.items()} for row in frame.iter_rows(named=True)]


def summary_dict(
    result: AnalysisResult,
    tables: Mapping[str, pl.DataFrame] | None = None,
    *,
    paths: Sequence[str] = (),
    files: Sequence[str] = (),
    expectation: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The machine-readable summary ``promptkit analyze --json`` prints (JSON-ready values only).

    Keys: ``version`` (:data:`SUMMARY_VERSION`), ``paths`` (analyzed), ``headline``
    (:func:`headline`), ``sessions`` (one object per session: the columns of
    :func:`~promptkit.report.hit_ratio_summary`), ``lost_by_slot``, ``lost_by_cause``
    (:func:`~promptkit.report.causes.causes_table`), ``predicted_vs_reported``
    (per session, empty without usage), ``notes`` (``table, note``), ``problems`` (the count),
    ``files`` (written into ``--out``), ``expectation`` (:func:`~promptkit.commands.expectation.apply_expectation`'s, None without a
    calibration), ``causes`` (the lines of :func:`causes_lines`) and ``break_fixes`` (with
    ``promptkit analyze --advice``: each largest break's fix, measured by replay; else None).

    >>> from promptkit.analysis import analyze_requests
    >>> summary = summary_dict(analyze_requests([{"messages": [{"role": "user", "content": "hi"}]}], provider="exact"))
    >>> sorted(summary)
    ['break_fixes', 'causes', 'expectation', 'files', 'headline', 'lost_by_cause', 'lost_by_slot', 'notes', 'paths', 'predicted_vs_reported', 'problems', 'sessions', 'version']
    """
    if tables is None:
        tables = summarize(result)
    sessions = tables["hit_ratio"].filter(pl.col("session") != ALL_SESSIONS)
    pvr = tables["predicted_vs_reported"]
    figures = headline(result, tables)
    from promptkit.report.causes import causes_table

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
        "expectation": dict(expectation) if expectation is not None else None,
        "causes": causes_lines(result),
        "break_fixes": _rows(tables["break_fixes"]) if "break_fixes" in tables else None,
    }


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        import importlib
        import warnings

        warnings.warn(
            f"{__name__}.{name} moved to {_MOVED[name]}.{name}; import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(_MOVED[name]), name)
    from promptkit.errors import UnknownAttributeError

    raise UnknownAttributeError(f"module {__name__!r} has no attribute {name!r}")
