"""A calibrated expectation beside the upper bound: how much a best-effort cache actually serves.

The cache models predict what the provider's cache *can* serve (``predicted_cached_tokens``, an upper
bound). Some providers serve less: DeepSeek persists its cache asynchronously, and on some runs a call
often finds only an older entry of its conversation. This module fits a small model of that
behaviour on logs that report usage and turns the bound into an expectation,
``expected_cached_tokens``.

**The model (stale state).** Call *n* of a session is served either by the newest entry the cache
could hold (probability ``1 - p``: it gets the upper bound ``C[n]``) or, with probability ``p``, by
the same entry that served call *n - 1* (the newest write was not there yet): it then gets what call
*n - 1* got, capped by ``C[n]``. What the real DeepSeek logs show: on the pvlib run a call missed the
newest write about half the time and then got exactly what the previous call got (runs of 2-4 stale
calls); on the two other runs, never. Nothing observable in a call (the gap since the previous call,
the size of the newest write) separates the stale calls from the fresh ones on these logs, so the
default model is one pooled ``p``. :func:`fit_calibration` tries a split on the gap and on the write
size and keeps it only when a likelihood-ratio test supports it (chi-square, 1 degree of freedom, 5%).

Expectation: ``E[S[n]] = (1 - p) C[n] + p min(E[S[n-1]], C[n])`` with ``E[S[0]] = C[0]``; it never
peeks at the reported figures of the request it predicts.

**Fitting.** Per request with usage whose two outcomes differ (``min(R[n-1], C[n]) != C[n]``): fresh
when the reported cached tokens equal ``C[n]``, stale when they equal ``min(R[n-1], C[n])``; other
requests are not counted. ``p = stale / (stale + fresh)``.

Example::

    >>> cal = Calibration(provider="deepseek", stale_probability=0.25)
    >>> cal.probability(gap_seconds=4.0, write_tokens=300)
    0.25
"""

from __future__ import annotations

import importlib.resources
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

import attrs

from promptkit.errors import CalibrationError

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from promptkit.cache.engine import AnalysisResult

__all__ = [
    "SPLIT_FEATURES",
    "Calibration",
    "apply_calibration",
    "calibration_events",
    "default_calibration",
    "expected_cached",
    "fit_calibration",
    "leave_one_run_out",
    "load_calibration",
]

#: Features a split of the stale probability may use.
SPLIT_FEATURES: Final[tuple[str, ...]] = ("gap_seconds", "write_tokens")
#: Chi-square critical value, 1 degree of freedom, 5%: a split must beat it to be kept.
_CHI2_1_5PCT: Final[float] = 3.841
FORMAT_VERSION: Final[int] = 1


def _probability(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None and attribute.name != "stale_probability":
        return
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0.0 <= value <= 1.0:
        raise CalibrationError(
            f"calibration {attribute.name}: expected a probability in [0, 1], got {value!r}"
        )


@attrs.frozen(slots=True)
class Calibration:
    """A fitted stale-state model (see the module docstring).

    ``stale_probability`` is ``p``; with a split, ``split_on`` (one of :data:`SPLIT_FEATURES`) at or
    above ``threshold`` uses ``stale_probability_above`` instead. ``fitted_on`` records what the fit
    saw (requests, events, stale, fresh, runs, view).
    """

    provider: str
    stale_probability: float = attrs.field(validator=_probability)
    split_on: str | None = attrs.field(default=None)
    threshold: float | None = None
    stale_probability_above: float | None = attrs.field(default=None, validator=_probability)
    fitted_on: Mapping[str, Any] = attrs.field(factory=dict)

    @split_on.validator
    def _check_split(self, attribute: attrs.Attribute[Any], value: str | None) -> None:
        if value is not None and value not in SPLIT_FEATURES:
            raise CalibrationError(
                f"calibration split_on: expected one of {', '.join(SPLIT_FEATURES)}, got {value!r}"
            )

    def probability(self, *, gap_seconds: float | None = None, write_tokens: float | None = None) -> float:
        """The stale probability of a call with this gap since the previous call and newest write."""
        if self.split_on is None or self.threshold is None or self.stale_probability_above is None:
            return self.stale_probability
        value = gap_seconds if self.split_on == "gap_seconds" else write_tokens
        if value is not None and value >= self.threshold:
            return self.stale_probability_above
        return self.stale_probability

    def to_json(self) -> dict[str, Any]:
        """The calibration as JSON-ready values (what :meth:`save` writes)."""
        return {"format": FORMAT_VERSION, **attrs.asdict(self)}

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the calibration as JSON to ``path``; returns the path."""
        out = Path(path)
        out.write_text(json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "calibration") -> Calibration:
        """Build a calibration from :meth:`to_json` output; raises :class:`CalibrationError` naming the field."""
        if not isinstance(data, Mapping):
            raise CalibrationError(f"{where}: expected a JSON object")
        if data.get("format", FORMAT_VERSION) != FORMAT_VERSION:
            raise CalibrationError(f"{where}: format {data.get('format')!r} is not {FORMAT_VERSION}")
        for name in ("provider", "stale_probability"):
            if name not in data:
                raise CalibrationError(f"{where}: missing field {name!r}")
        try:
            return cls(
                provider=str(data["provider"]),
                stale_probability=data["stale_probability"],
                split_on=data.get("split_on"),
                threshold=data.get("threshold"),
                stale_probability_above=data.get("stale_probability_above"),
                fitted_on=dict(data.get("fitted_on") or {}),
            )
        except CalibrationError as exc:
            raise CalibrationError(f"{where}: {exc}") from None


def load_calibration(path: str | os.PathLike[str]) -> Calibration:
    """Read a calibration written by :meth:`Calibration.save`.

    Example::

        >>> load_calibration("promptkit/data/calibration-deepseek.json").provider
        'deepseek'
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CalibrationError(f"{path}: cannot read the calibration: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CalibrationError(f"{path}: not JSON: {exc}") from exc
    return Calibration.from_json(data, str(path))


#: Bundled calibrations, per provider (files in promptkit/data/).
_BUNDLED: Final[Mapping[str, str]] = {"deepseek": "calibration-deepseek.json"}


def default_calibration(provider: str) -> Calibration | None:
    """The calibration bundled for ``provider`` (fitted on the shared real logs), or None.

    Example::

        >>> default_calibration("deepseek").fitted_on["runs"]
        3
    """
    name = _BUNDLED.get(provider)
    if name is None:
        return None
    resource = importlib.resources.files("promptkit").joinpath("data", name)
    with importlib.resources.as_file(resource) as path:
        return load_calibration(path)


# -------------------------------------------------------------------------------------- fitting


def _items(
    results: AnalysisResult | pl.DataFrame | Iterable[AnalysisResult | pl.DataFrame],
) -> list[AnalysisResult | pl.DataFrame]:
    import polars as pl

    if isinstance(results, pl.DataFrame) or hasattr(results, "requests"):
        return [cast("AnalysisResult | pl.DataFrame", results)]
    return list(results)


def _frame(result: AnalysisResult | pl.DataFrame) -> pl.DataFrame:
    import polars as pl

    frame = result if isinstance(result, pl.DataFrame) else result.requests
    return frame.sort("session", "index", maintain_order=True)


def calibration_events(
    results: AnalysisResult | pl.DataFrame | Iterable[AnalysisResult | pl.DataFrame],
) -> pl.DataFrame:
    """The requests a fit can learn from: one row per request with usage after the first of its session.

    Columns: ``session, index, gap_seconds, write_tokens`` (``C[n] - R[n-1]``: what the newest write
    would add), ``upper`` (``C[n]``), ``stale_value`` (``min(R[n-1], C[n])``), ``reported``,
    ``outcome`` (``fresh``, ``stale``, ``same`` when both outcomes are equal, ``other``).
    """
    import polars as pl

    items = _items(results)
    rows: list[dict[str, Any]] = []
    for item in items:
        prev: dict[str, tuple[int | None, float | None]] = {}
        for r in _frame(item).iter_rows(named=True):
            session = r["session"]
            rc = r.get("reported_cached_tokens")
            before = prev.get(session)
            prev[session] = (rc, r.get("timestamp"))
            if before is None or rc is None or before[0] is None:
                continue
            upper = int(r["predicted_cached_tokens"])
            stale = min(int(before[0]), upper)
            gap = None if r.get("timestamp") is None or before[1] is None else r["timestamp"] - before[1]
            if stale == upper:
                outcome = "same"
            elif rc == upper:
                outcome = "fresh"
            elif rc == stale:
                outcome = "stale"
            else:
                outcome = "other"
            rows.append(
                {
                    "session": session,
                    "index": r["index"],
                    "gap_seconds": gap,
                    "write_tokens": upper - int(before[0]),
                    "upper": upper,
                    "stale_value": stale,
                    "reported": int(rc),
                    "outcome": outcome,
                }
            )
    schema = {
        "session": pl.String, "index": pl.Int64, "gap_seconds": pl.Float64, "write_tokens": pl.Int64,
        "upper": pl.Int64, "stale_value": pl.Int64, "reported": pl.Int64, "outcome": pl.String,
    }  # fmt: skip
    return pl.DataFrame(rows, schema=schema, orient="row")


def _loglik(stale: int, fresh: int) -> float:
    n = stale + fresh
    if n == 0:
        return 0.0
    p = stale / n
    return sum(k * math.log(q) for k, q in ((stale, p), (fresh, 1 - p)) if k > 0)


def fit_calibration(
    results: AnalysisResult | pl.DataFrame | Iterable[AnalysisResult | pl.DataFrame],
    *,
    provider: str | None = None,
    splits: Sequence[str] = SPLIT_FEATURES,
) -> Calibration:
    """Fit the stale-state model on analyses of logs that report usage (see the module docstring).

    Raises :class:`CalibrationError` when no request can be told fresh or stale (no usage, or no
    request whose two outcomes differ).

    Example::

        >>> import polars as pl
        >>> df = pl.DataFrame({"session": ["s"] * 4, "index": [0, 1, 2, 3], "timestamp": [0.0, 5, 10, 15],
        ...     "predicted_cached_tokens": [0, 100, 200, 300], "reported_cached_tokens": [0, 100, 100, 300]})
        >>> fit_calibration(df, provider="exact").stale_probability
        0.3333333333333333
    """
    import polars as pl

    items = _items(results)
    if provider is None:
        names = {getattr(i, "provider", None) for i in items} - {None}
        provider = ", ".join(sorted(str(n) for n in names)) or "unknown"
    events = calibration_events(items)
    counted = events.filter(pl.col("outcome").is_in(["fresh", "stale"]))
    stale = int((counted["outcome"] == "stale").sum())
    fresh = int((counted["outcome"] == "fresh").sum())
    if stale + fresh == 0:
        raise CalibrationError(
            "calibration: no request can be told fresh or stale (the logs need usage with cached tokens, "
            "and requests where an older entry would serve less than the newest)"
        )
    runs = sum((i if isinstance(i, pl.DataFrame) else i.requests)["session"].n_unique() for i in items)
    fitted: dict[str, Any] = {
        "requests": int(sum((i if isinstance(i, pl.DataFrame) else i.requests).height for i in items)),
        "events": stale + fresh,
        "stale": stale,
        "fresh": fresh,
        "runs": int(runs),
        "views": sorted({str(getattr(i, "view", "frame")) for i in items}),
    }
    best: tuple[float, str, float, float, float] | None = None
    base = _loglik(stale, fresh)
    for feature in splits:
        data = counted.filter(pl.col(feature).is_not_null())
        if data.height < 8:
            continue
        threshold = float(data[feature].median())  # type: ignore[arg-type]
        hi = data.filter(pl.col(feature) >= threshold)
        lo = data.filter(pl.col(feature) < threshold)
        if hi.height == 0 or lo.height == 0:
            continue
        s_hi, s_lo = int((hi["outcome"] == "stale").sum()), int((lo["outcome"] == "stale").sum())
        split_ll = _loglik(s_hi, hi.height - s_hi) + _loglik(s_lo, lo.height - s_lo)
        # the base likelihood over the same events (some may lack the feature)
        s_all = s_hi + s_lo
        stat = 2.0 * (split_ll - _loglik(s_all, data.height - s_all))
        fitted[f"split_{feature}_lr"] = round(stat, 3)
        if stat > _CHI2_1_5PCT and (best is None or stat > best[0]):
            best = (stat, feature, threshold, s_lo / lo.height, s_hi / hi.height)
    del base
    if best is None:
        return Calibration(provider, stale / (stale + fresh), fitted_on=fitted)
    _, feature, threshold, p_lo, p_hi = best
    return Calibration(provider, p_lo, feature, threshold, p_hi, fitted_on=fitted)


# ------------------------------------------------------------------------------------ applying


def expected_cached(result: AnalysisResult | pl.DataFrame, calibration: Calibration) -> pl.DataFrame:
    """Per request: ``session, index, expected_cached_tokens`` (a float: an expectation) under
    ``calibration``; computed from the predicted upper bound only, never from reported figures.

    Example::

        >>> import polars as pl
        >>> df = pl.DataFrame({"session": ["s", "s"], "index": [0, 1], "timestamp": [0.0, 3.0],
        ...                    "predicted_cached_tokens": [0, 1000]})
        >>> expected_cached(df, Calibration("x", 0.25))["expected_cached_tokens"].to_list()
        [0.0, 750.0]
    """
    import polars as pl

    rows: list[tuple[str, int, float]] = []
    state: dict[str, tuple[float, float | None]] = {}
    for r in _frame(result).iter_rows(named=True):
        session, upper = r["session"], float(r["predicted_cached_tokens"])
        before = state.get(session)
        ts = r.get("timestamp")
        if before is None:
            value = upper
        else:
            gap = None if ts is None or before[1] is None else ts - before[1]
            p = calibration.probability(gap_seconds=gap, write_tokens=upper - before[0])
            value = (1.0 - p) * upper + p * min(before[0], upper)
        state[session] = (value, ts)
        rows.append((session, r["index"], value))
    return pl.DataFrame(
        rows,
        schema={"session": pl.String, "index": pl.Int64, "expected_cached_tokens": pl.Float64},
        orient="row",
    )


def apply_calibration(result: AnalysisResult, calibration: Calibration) -> AnalysisResult:
    """``result`` with an ``expected_cached_tokens`` column added to its requests frame (and a note).

    Example::

        >>> from promptkit.cache.engine import analyze_requests
        >>> r = analyze_requests([{"messages": [{"role": "user", "content": "hi"}]}], provider="exact")
        >>> "expected_cached_tokens" in apply_calibration(r, Calibration("exact", 0.1)).requests.columns
        True
    """
    expected = expected_cached(result, calibration)
    requests = result.requests
    if "expected_cached_tokens" in requests.columns:
        requests = requests.drop("expected_cached_tokens")
    requests = requests.join(expected, on=["session", "index"], how="left", maintain_order="left")
    split = (
        ""
        if calibration.split_on is None
        else f" ({calibration.split_on} >= {calibration.threshold:g}: {calibration.stale_probability_above:.3f})"
    )
    note = (
        f"expected_cached_tokens: stale-state calibration for {calibration.provider}, "
        f"p(stale) = {calibration.stale_probability:.3f}{split}"
    )
    return attrs.evolve(result, requests=requests, notes=(*result.notes, note))


def leave_one_run_out(results: Mapping[str, AnalysisResult | pl.DataFrame]) -> pl.DataFrame:
    """Honest error of the calibration: fit on every run but one, predict the held-out run.

    ``results``: run name → its analysis (runs with usage). One row per held-out run (``run,
    requests, stale_probability, reported_hit_ratio, upper_hit_ratio, expected_hit_ratio, error_pp``
    with ``error_pp = 100 (expected - reported)``) and a last row ``(all)`` pooling every held-out
    prediction.
    """
    import polars as pl

    rows: list[dict[str, Any]] = []
    totals: list[float] = [0, 0, 0.0, 0.0, 0]
    for run, held in results.items():
        train = [r for name, r in results.items() if name != run]
        try:
            cal = fit_calibration(train)
        except CalibrationError:
            cal = Calibration("none", 0.0)
        frame = _frame(held)
        exp = expected_cached(frame, cal)
        with_usage = frame.filter(pl.col("reported_cached_tokens").is_not_null())
        prompt = int(with_usage["reported_prompt_tokens"].sum())
        reported = int(with_usage["reported_cached_tokens"].sum())
        upper = float(with_usage["predicted_cached_tokens"].sum())
        expected = float(
            exp.join(with_usage.select("session", "index"), on=["session", "index"])[
                "expected_cached_tokens"
            ].sum()
        )
        totals[0] += prompt
        totals[1] += reported
        totals[2] += upper
        totals[3] += expected
        totals[4] += with_usage.height
        rows.append(
            {
                "run": run,
                "requests": with_usage.height,
                "stale_probability": cal.stale_probability,
                "reported_hit_ratio": reported / prompt if prompt else None,
                "upper_hit_ratio": upper / prompt if prompt else None,
                "expected_hit_ratio": expected / prompt if prompt else None,
                "error_pp": 100 * (expected - reported) / prompt if prompt else None,
            }
        )
    t_prompt, t_reported, t_upper, t_expected, n = totals
    rows.append(
        {
            "run": "(all)",
            "requests": int(n),
            "stale_probability": None,
            "reported_hit_ratio": t_reported / t_prompt if t_prompt else None,
            "upper_hit_ratio": t_upper / t_prompt if t_prompt else None,
            "expected_hit_ratio": t_expected / t_prompt if t_prompt else None,
            "error_pp": 100 * (t_expected - t_reported) / t_prompt if t_prompt else None,
        }
    )
    return pl.DataFrame(rows, schema={
        "run": pl.String, "requests": pl.Int64, "stale_probability": pl.Float64, "reported_hit_ratio": pl.Float64,
        "upper_hit_ratio": pl.Float64, "expected_hit_ratio": pl.Float64, "error_pp": pl.Float64,
    }, orient="row")  # fmt: skip
