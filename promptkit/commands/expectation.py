"""``--calibration``: the expected hit ratio of an analysis, from a calibration of its provider
(what ``promptkit analyze --calibration`` prints beside the predicted upper bound).

It runs the calibration over the result (:func:`~promptkit.analysis.calibration.apply_calibration`),
so it is a step of a command, not a table of the report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from promptkit.errors import CalibrationError

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.analysis.result import AnalysisResult

__all__ = ["apply_expectation"]


def apply_expectation(
    result: AnalysisResult, calibration: Any = None
) -> tuple[AnalysisResult, dict[str, Any] | None]:
    """``result`` with ``expected_cached_tokens`` when a calibration applies, and the expectation with
    its basis (None without a calibration).

    ``calibration``: a :class:`~promptkit.analysis.calibration.Calibration`, a path to one, or
    ``"default"`` (the one bundled for the result's provider). The expectation's keys:
    ``expected_hit_ratio``, ``upper_bound`` (the predicted hit ratio), ``stale_probability``,
    ``provider`` and ``routes`` it was fitted on, ``warning`` (None, or why it may not apply: it was
    fitted on another provider's logs), ``source`` (the file, or ``"bundled"``) and ``basis``: how each session's rate was
    set (``"learnt per session from its usage"`` only when the calibration learns and the log has usage;
    else ``"population rate"``). Raises :class:`~promptkit.errors.CalibrationError`.
    """
    if calibration is None:
        return result, None
    from promptkit.analysis.calibration import (
        Calibration,
        applies_to,
        apply_calibration,
        default_calibration,
        load_calibration,
    )

    if isinstance(calibration, Calibration):
        cal, source = calibration, "given"
    elif str(calibration) == "default":
        found = default_calibration(str(result.provider))
        if found is None:
            raise CalibrationError(
                f"--calibration default: no calibration is bundled for provider {result.provider!r}"
            )
        cal, source = found, "bundled"
    else:
        cal, source = load_calibration(calibration), str(calibration)
    warning = applies_to(cal, getattr(result, "provider", None))
    result = apply_calibration(result, cal)
    if warning is not None:
        result = attrs.evolve(result, notes=(*result.notes, f"warning: {warning}"))
    requests = result.requests
    prompt = int(requests["prompt_tokens"].sum())
    has_usage = "reported_cached_tokens" in requests.columns and bool(
        requests["reported_cached_tokens"].is_not_null().any()
    )
    learnt = cal.learns and has_usage
    return result, {
        "expected_hit_ratio": float(requests["expected_cached_tokens"].sum()) / prompt if prompt else None,
        "upper_bound": result.hit_ratio,
        "stale_probability": cal.stale_probability,
        "provider": cal.provider,
        "source": source,
        "basis": "learnt per session from its usage" if learnt else "population rate",
        "routes": list(cal.routes),
        "warning": warning,
    }
