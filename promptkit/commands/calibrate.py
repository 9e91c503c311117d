"""``promptkit calibrate`` as one function: :func:`run_calibrate` fits the stale-state model of a
best-effort provider cache on logs that report usage
(:func:`~promptkit.analysis.calibration.fit_calibration`), saves it, and returns the text to print: the
fit, and its held-out error leaving one session out when the logs hold two sessions or more.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from promptkit.commands.analyze import analyze_logs
from promptkit.errors import CalibrationError, OutputFileError

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.layout import RequestRecord

__all__ = ["run_calibrate"]


def _check_usage(paths: Sequence[str | os.PathLike[str]], records: Sequence[RequestRecord]) -> None:
    """A :class:`~promptkit.errors.CalibrationError` at once (before any tokenizing) when no record
    reports the provider's usage with cached tokens: a calibration compares what the cache rules allow
    with what the provider served."""
    if any(r.usage is not None and r.usage.cached_tokens is not None for r in records):
        return
    raise CalibrationError(
        f"{', '.join(map(str, paths))}: no request reports usage with cached tokens ({len(records)} "
        "request(s) read); calibrate needs logs that record the provider's usage (prompt and cached "
        "tokens), such as a promptkit proxy log or an API log with its usage field"
    )


def run_calibrate(
    paths: Sequence[str | os.PathLike[str]],
    *,
    out: str | os.PathLike[str],
    provider: str | None = None,
    format: str | None = None,
    view: str | None = None,
) -> str:
    """Fit a calibration on ``paths``, write it to ``out`` and return what ``promptkit calibrate`` prints.

    Raises :class:`~promptkit.errors.CalibrationError` when the logs cannot calibrate (no usage, no
    decidable request) and :class:`~promptkit.errors.OutputFileError` when ``out`` cannot be written.
    """
    import polars as pl

    from promptkit.analysis.calibration import fit_calibration, leave_one_run_out, record_routes
    from promptkit.formats import read_logs
    from promptkit.report import table_config

    records = read_logs(list(paths), format=format)
    _check_usage(paths, records.records)
    result = analyze_logs(paths, view=view, provider=provider, format=format)
    cal = fit_calibration(result, routes=record_routes(records.records))
    try:
        cal.save(out)
    except OSError as exc:
        raise OutputFileError(f"{out}: cannot write the calibration: {exc.strerror or exc}") from exc
    split = (
        ""
        if cal.split_on is None
        else f"; {cal.split_on} >= {cal.threshold:g}: {cal.stale_probability_above:.4f}"
    )
    routes = f" (routes: {', '.join(cal.routes)})" if cal.routes else ""
    lines = [
        f"calibration for {cal.provider}{routes}: p(stale) = {cal.stale_probability:.4f} "
        f"({cal.fitted_on.get('stale')} stale / {cal.fitted_on.get('events')} decidable requests, "
        f"{cal.fitted_on.get('runs')} sessions){split}"
    ]
    sessions = result.requests["session"].unique(maintain_order=True).to_list()
    if len(sessions) >= 2:
        runs = {s: result.requests.filter(pl.col("session") == s) for s in sessions}
        with table_config(200):
            lines.append(
                "held-out error, leave one session out:\n" + str(leave_one_run_out(runs, cal.provider))
            )
    lines.append(f"wrote {Path(out)}")
    return "\n".join(lines) + "\n"
