"""A calibrated expectation beside the upper bound: how much a best-effort cache actually serves.

The cache models predict what the provider's cache *can* serve (``predicted_cached_tokens``, an upper
bound). Some providers serve less: DeepSeek persists its cache asynchronously, and on some runs a call
often finds only an older entry of its conversation. This module fits a small model of that
behaviour on logs that report usage and turns the bound into an expectation,
``expected_cached_tokens``.

**The model (stale state).** Call *n* of a session is served either by the newest entry the cache
could hold (probability ``1 - p``: it gets the upper bound ``C[n]``) or, with probability ``p``, by
the same entry that served call *n - 1* (the newest write was not there yet): it then gets what call
*n - 1* got, capped by ``C[n]``.

**The rate is a property of the run.** On the real DeepSeek logs a pvlib run missed the newest write
on about half its calls (runs of 2-4 stale calls) and two other runs never did, while nothing
observable in a call (the gap since the previous call, the size of the newest write) separates stale
calls from fresh ones. So each session has a stale rate of its own, drawn from a population of runs:
``rate ~ Beta(a, b)`` (a hierarchical beta-binomial model; the hyperprior on ``(a, b)`` is the standard
weakly informative ``p(a, b) ∝ (a + b)^(-5/2)`` of Gelman et al., *Bayesian Data Analysis*, 3rd ed.,
§5.3). :func:`fit_calibration` keeps each training session's counts of stale and fresh calls; the
posterior over ``(a, b)`` is computed on a fixed grid from them.

**The expectation is a forecast.** For call *n* of a session, ``p`` is the posterior mean of that
session's rate given what the session showed *before* call *n*: with no usage in the log it is the
population mean (``stale_probability``); where the log reports usage, every earlier call that can be
told fresh or stale updates it, and the stale outcome uses the reported figure of call *n - 1*. It
never peeks at the reported figures of the call it predicts:

``E[S[n]] = (1 - p[n]) C[n] + p[n] min(S[n-1], C[n])``, with ``S[n-1]`` the reported cached tokens of
call *n - 1* when the log has them, else ``E[S[n-1]]``, and ``E[S[0]] = C[0]``.

A calibration built by hand, ``Calibration(provider, p)``, has no run counts: it is the fixed-rate
model (every session's rate is ``p``, nothing is learnt).

**Fitting.** Per request with usage whose two outcomes differ (``min(R[n-1], C[n]) != C[n]``): fresh
when the reported cached tokens equal ``C[n]``, stale when they equal ``min(R[n-1], C[n])``; other
requests are not counted. The fit also tries a split of the rate at the median gap and at the median
write size and keeps it only when a Cochran-Mantel-Haenszel test *within runs* supports it (chi-square,
1 degree of freedom, 5% family-wise: Bonferroni over the features tried); a kept split scales a
session's rate by the Mantel-Haenszel rate ratio of its bucket.

Example::

    >>> cal = Calibration(provider="deepseek", stale_probability=0.25)
    >>> cal.probability(gap_seconds=4.0, write_tokens=300)
    0.25
"""

from __future__ import annotations

import functools
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
    import numpy as np
    import polars as pl

    from promptkit.analysis.result import AnalysisResult

__all__ = [
    "SPLIT_FEATURES",
    "Calibration",
    "applies_to",
    "apply_calibration",
    "calibration_events",
    "default_calibration",
    "expected_cached",
    "fit_calibration",
    "leave_one_run_out",
    "load_calibration",
    "miss_rates",
    "population_rate",
    "reads_rule",
    "record_routes",
]

#: Features a split of the stale probability may use.
SPLIT_FEATURES: Final[tuple[str, ...]] = ("gap_seconds", "write_tokens")
#: Family-wise significance level of the split tests (Bonferroni over the features tried).
_ALPHA: Final[float] = 0.05


def _chi2_1_critical(alpha: float) -> float:
    """The chi-square (1 degree of freedom) value exceeded with probability ``alpha``."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(1.0 - alpha / 2.0) ** 2


FORMAT_VERSION: Final[int] = 2

#: How a call's reported read is told fresh or stale: ``exact`` (it equals one of the two outcomes) or
#: ``nearest`` (the outcome it is nearer to, misses apart; for caches with no documented unit).
READS: Final[tuple[str, ...]] = ("exact", "nearest")
#: The states a miss rate is kept for: a session's first call, the call after a miss, after a read,
#: after a read and a gap of at least ``idle_seconds``.
MISS_STATES: Final[tuple[str, ...]] = ("first", "after_miss", "after_read", "after_idle")


def _counts(value: Any) -> tuple[tuple[int, int], ...]:
    """``run_counts`` as a tuple of ``(stale, fresh)`` pairs of non-negative integers."""
    try:
        pairs = tuple((int(a), int(b)) for a, b in value)
        ok = all(
            isinstance(x, int | float) and not isinstance(x, bool) and x == int(x) and x >= 0
            for pair in value
            for x in pair
        )
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise CalibrationError(
            f"calibration run_counts: expected a list of [stale, fresh] pairs of counts, got {value!r}"
        )
    return pairs


def _probability(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None and attribute.name != "stale_probability":
        return
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0.0 <= value <= 1.0:
        raise CalibrationError(
            f"calibration {attribute.name}: expected a probability in [0, 1], got {value!r}"
        )


def _routes(value: Iterable[object]) -> tuple[str, ...]:
    """The ``routes`` field as a tuple of strings."""
    return tuple(str(r) for r in value)


def _miss_rates(value: Any) -> dict[str, float]:
    """The ``miss_rates`` field: a probability for some of :data:`MISS_STATES`."""
    if not isinstance(value, Mapping) or any(
        k not in MISS_STATES or not isinstance(v, int | float) or isinstance(v, bool) or not 0.0 <= v <= 1.0
        for k, v in value.items()
    ):
        raise CalibrationError(
            f"calibration miss_rates: expected probabilities for {', '.join(MISS_STATES)}, got {value!r}"
        )
    return {str(k): float(v) for k, v in value.items()}


@attrs.frozen(slots=True)
class Calibration:
    """A fitted stale-state model (see the module docstring).

    ``stale_probability`` is ``p`` for a session with nothing learnt yet; with a split, ``split_on``
    (one of :data:`SPLIT_FEATURES`) at or above ``threshold`` uses ``stale_probability_above`` instead.
    ``run_counts`` holds ``(stale, fresh)`` per training session: with them, each session's rate is
    learnt from its own usage (the hierarchical model); without them the rate is fixed. ``fitted_on``
    records what the fit saw (requests, events, stale, fresh, runs, view); ``provider`` and ``routes``
    (:func:`record_routes`: the endpoints or model routes the calls went through) say where: applied to
    another provider's logs, the rate may not hold (``promptkit analyze --calibration`` warns).
    ``reads`` is how a read is told fresh or stale (:data:`READS`, :func:`reads_rule`); with
    ``nearest``, ``miss_rates`` holds the rate of misses (a read of nothing where the bound is positive)
    in each of :data:`MISS_STATES`, ``after_idle`` from a gap of ``idle_seconds`` on: each call's
    expectation is scaled by ``1 -`` its state's rate, and a miss leaves the session's entry as it was.
    """

    provider: str
    stale_probability: float = attrs.field(validator=_probability)
    split_on: str | None = attrs.field(default=None)
    threshold: float | None = None
    stale_probability_above: float | None = attrs.field(default=None, validator=_probability)
    fitted_on: Mapping[str, Any] = attrs.field(factory=dict)
    run_counts: tuple[tuple[int, int], ...] = attrs.field(default=(), converter=_counts, kw_only=True)
    routes: tuple[str, ...] = attrs.field(default=(), converter=_routes, kw_only=True)
    reads: str = attrs.field(default="exact", kw_only=True)
    miss_rates: Mapping[str, float] = attrs.field(factory=dict, converter=_miss_rates, kw_only=True)
    idle_seconds: float | None = attrs.field(default=None, kw_only=True)

    @idle_seconds.validator
    def _check_idle(self, attribute: attrs.Attribute[Any], value: float | None) -> None:
        if value is not None and (
            not isinstance(value, int | float) or isinstance(value, bool) or not 0.0 <= value < math.inf
        ):
            raise CalibrationError(f"calibration idle_seconds: expected seconds >= 0 or null, got {value!r}")

    @reads.validator
    def _check_reads(self, attribute: attrs.Attribute[Any], value: str) -> None:
        if value not in READS:
            raise CalibrationError(f"calibration reads: expected one of {', '.join(READS)}, got {value!r}")

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

    @property
    def learns(self) -> bool:
        """True when each session's rate is learnt from its usage (the calibration has run counts)."""
        return bool(self.run_counts)

    def to_json(self) -> dict[str, Any]:
        """The calibration as JSON-ready values (what :meth:`save` writes)."""
        data = attrs.asdict(self)
        data["run_counts"] = [list(c) for c in self.run_counts]
        data["routes"] = list(self.routes)
        return {"format": FORMAT_VERSION, **data}

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
        if data.get("format", FORMAT_VERSION) not in (1, FORMAT_VERSION):
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
                run_counts=data.get("run_counts") or (),
                routes=data.get("routes") or (),
                reads=data.get("reads", "exact"),
                miss_rates=data.get("miss_rates") or {},
                idle_seconds=data.get("idle_seconds"),
            )
        except CalibrationError as exc:
            raise CalibrationError(f"{where}: {exc}") from None


def record_routes(records: Iterable[Any]) -> tuple[str, ...]:
    """The routes the calls of ``records`` (:class:`~promptkit.layout.RequestRecord` s) went through,
    sorted: the URL's host where the log names it, else the request's model name (a router's model
    slug, ``google/gemini-3-pro-preview``, tells a routed call from a direct one).

    Example::

        >>> from promptkit.layout import RequestRecord
        >>> record_routes([RequestRecord({"model": "deepseek-chat", "messages": []}, session="s"),
        ...                RequestRecord({"messages": []}, session="s", url="https://api.deepseek.com/chat")])
        ('api.deepseek.com', 'model deepseek-chat')
    """
    from urllib.parse import urlparse

    found: set[str] = set()
    for record in records:
        url = getattr(record, "url", None)
        host = urlparse(url).hostname if url else None
        model = (getattr(record, "request", None) or {}).get("model")
        if host:
            found.add(host)
        elif isinstance(model, str) and model:
            found.add(f"model {model}")
    return tuple(sorted(found))


def applies_to(calibration: Calibration, provider: str | None) -> str | None:
    """None when ``calibration`` was fitted on ``provider``'s logs, else the warning to print.

    Example::

        >>> print(applies_to(Calibration("deepseek", 0.25, routes=("api.deepseek.com",)), "anthropic"))
        the calibration was fitted on deepseek logs (routes: api.deepseek.com) and is applied to anthropic logs: its stale rate may not hold there
        >>> applies_to(Calibration("deepseek", 0.25), "deepseek") is None
        True
    """
    fitted = {p.strip() for p in calibration.provider.split(",")}
    applied = {p.strip() for p in str(provider).split(",")} if provider else set()
    if not applied or applied <= fitted:
        return None
    routes = f" (routes: {', '.join(calibration.routes)})" if calibration.routes else ""
    return (
        f"the calibration was fitted on {calibration.provider} logs{routes} and is applied to "
        f"{', '.join(sorted(applied))} logs: its stale rate may not hold there"
    )


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


def default_calibration(provider: str) -> Calibration | None:
    """The calibration bundled for ``provider`` (the file its profile names in ``calibration``, fitted on
    the shared real logs), or None.

    Example::

        >>> default_calibration("deepseek").fitted_on["runs"]
        3
    """
    from promptkit.providers.registry import available_providers

    profile = available_providers().get(provider)
    name = None if profile is None else profile.calibration
    if name is None:
        return None
    resource = importlib.resources.files("promptkit").joinpath("data", name)
    with importlib.resources.as_file(resource) as path:
        return load_calibration(path)


# ------------------------------------------------------------------ the population of runs

#: The grid over the population's ``(a, b)``: mean ``m = a / (a + b)`` on a logit scale and
#: concentration ``k = a + b`` on a log scale.
_GRID_MEAN: Final[tuple[float, float, int]] = (-8.0, 4.0, 61)
_GRID_CONCENTRATION: Final[tuple[float, float, int]] = (0.1, 1000.0, 61)


@functools.cache
def _grid() -> tuple[np.ndarray, np.ndarray]:
    """The ``a`` and ``b`` of every grid point, flattened."""
    import numpy as np

    lo, hi, n = _GRID_MEAN
    mean = 1.0 / (1.0 + np.exp(-np.linspace(lo, hi, n)))
    klo, khi, kn = _GRID_CONCENTRATION
    conc = np.exp(np.linspace(math.log(klo), math.log(khi), kn))
    m, k = np.meshgrid(mean, conc, indexing="ij")
    return (m * k).ravel(), ((1.0 - m) * k).ravel()


def _log_rising(x: np.ndarray, n: int) -> np.ndarray:
    """``log(x (x + 1) ... (x + n - 1))`` for every element of ``x``."""
    import numpy as np

    if n == 0:
        return np.zeros_like(x)
    result: np.ndarray = np.log(x[:, None] + np.arange(n, dtype=np.float64)[None, :]).sum(axis=1)
    return result


@functools.lru_cache(maxsize=32)
def _population(run_counts: tuple[tuple[int, int], ...]) -> np.ndarray:
    """Log posterior weights of the grid points given each training run's ``(stale, fresh)``.

    The hyperprior is ``p(a, b) ∝ (a + b)^(-5/2)``; on the grid's ``(logit m, log k)`` coordinates its
    density carries the Jacobian ``a b``. Each run adds its beta-binomial likelihood
    ``B(a + s, b + f) / B(a, b)``.
    """
    import numpy as np

    a, b = _grid()
    logw = -2.5 * np.log(a + b) + np.log(a) + np.log(b)
    for stale, fresh in run_counts:
        logw = logw + _log_rising(a, stale) + _log_rising(b, fresh) - _log_rising(a + b, stale + fresh)
    result: np.ndarray = logw - logw.max()
    return result


class _Session:
    """What one session has shown so far: its stale and fresh counts and the grid's weights."""

    __slots__ = ("fresh", "logw", "stale")

    def __init__(self, calibration: Calibration) -> None:
        self.stale = 0
        self.fresh = 0
        self.logw = _population(calibration.run_counts) if calibration.run_counts else None

    def rate(self) -> float | None:
        """The posterior mean of this session's stale rate (None for a fixed-rate calibration)."""
        if self.logw is None:
            return None
        import numpy as np

        a, b = _grid()
        w = np.exp(self.logw - self.logw.max())
        return float((w * (a + self.stale) / (a + b + self.stale + self.fresh)).sum() / w.sum())

    def observe(self, stale: bool) -> None:
        """Learn one call that could be told stale (True) or fresh (False)."""
        if self.logw is None:
            return
        import numpy as np

        a, b = _grid()
        n = self.stale + self.fresh
        if stale:
            self.logw = self.logw + np.log((a + self.stale) / (a + b + n))
            self.stale += 1
        else:
            self.logw = self.logw + np.log((b + self.fresh) / (a + b + n))
            self.fresh += 1


def population_rate(calibration: Calibration) -> float:
    """The mean stale rate of a new session under ``calibration``, before any of its usage is seen.

    For a fixed-rate calibration this is ``stale_probability``.

    Example::

        >>> population_rate(Calibration("x", 0.2))
        0.2
        >>> round(population_rate(Calibration("x", 0.2, run_counts=[(50, 50), (0, 100), (0, 100)])), 2)
        0.24
    """
    rate = _Session(calibration).rate()
    return calibration.stale_probability if rate is None else rate


def _outcome(reported: int, upper: int, stale_value: int, reads: str = "exact") -> str:
    """``same`` when both outcomes are equal, else ``fresh``, ``stale`` or ``other``; with ``reads``
    ``nearest``, ``miss`` for a call that read nothing, else the outcome the read is nearer to.

    >>> _outcome(5811, 5825, 4000, "nearest"), _outcome(0, 5825, 4000, "nearest"), _outcome(5811, 5825, 4000)
    ('fresh', 'miss', 'other')
    """
    if stale_value == upper:
        return "same"
    if reads == "nearest":
        if reported == 0:
            return "miss"
        return "fresh" if abs(reported - upper) < abs(reported - stale_value) else "stale"
    if reported == upper:
        return "fresh"
    if reported == stale_value:
        return "stale"
    return "other"


def _served(reported: int, upper: int, before: float | None, reads: str) -> float:
    """The entry a session was last served after a call that reported ``reported`` (its bound ``upper``,
    the entry before it ``before``): the read itself, except that with ``reads`` ``nearest`` a miss (0
    read where the bound is positive) leaves the entry as it was (a first call's miss: its own prompt's
    head, which the call wrote)."""
    if reads == "nearest" and reported == 0 and upper > 0:
        return float(upper) if before is None else before
    return float(reported)


def reads_rule(provider: str | None) -> str:
    """``nearest`` for a best-effort cache with no documented unit (its reads land between the positions
    the model names: Gemini's implicit cache reports 5,811 where the prefix is 5,825), else ``exact``.

    >>> reads_rule("gemini"), reads_rule("deepseek"), reads_rule(None)
    ('nearest', 'exact', 'exact')
    """
    from promptkit.providers.registry import available_providers

    profile = available_providers().get(provider or "")
    if profile is None or not profile.best_effort or profile.cache_unit is not None:
        return "exact"
    return "nearest"


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
    reads: str = "exact",
) -> pl.DataFrame:
    """The requests a fit can learn from: one row per request with usage after the first of its session.

    Columns: ``session, index, gap_seconds, write_tokens`` (``C[n] - R[n-1]``: what the newest write
    would add), ``upper`` (``C[n]``), ``stale_value`` (``min(R[n-1], C[n])``), ``reported``,
    ``outcome`` (``fresh``, ``stale``, ``same`` when both outcomes are equal, ``other``; with ``reads``
    ``nearest`` (:func:`reads_rule`), ``miss`` and the nearer outcome, and the stale value after a miss
    is the entry before it).
    """
    import polars as pl

    items = _items(results)
    rows: list[dict[str, Any]] = []
    for item in items:
        prev: dict[str, tuple[float | None, float | None]] = {}
        for r in _frame(item).iter_rows(named=True):
            session = r["session"]
            rc = r.get("reported_cached_tokens")
            upper = int(r["predicted_cached_tokens"])
            before = prev.get(session)
            kept = None if before is None else before[0]
            prev[session] = (None if rc is None else _served(int(rc), upper, kept, reads), r.get("timestamp"))
            if before is None or rc is None or before[0] is None:
                continue
            stale = min(int(before[0]), upper)
            gap = None if r.get("timestamp") is None or before[1] is None else r["timestamp"] - before[1]
            outcome = _outcome(int(rc), upper, stale, reads)
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


def fit_calibration(
    results: AnalysisResult | pl.DataFrame | Iterable[AnalysisResult | pl.DataFrame],
    *,
    provider: str | None = None,
    splits: Sequence[str] = SPLIT_FEATURES,
    routes: Sequence[str] = (),
) -> Calibration:
    """Fit the stale-state model on analyses of logs that report usage (see the module docstring);
    ``routes`` (:func:`record_routes`) are recorded with the provider. For a provider whose reads
    :func:`reads_rule` tells by the nearer outcome, the rates of misses are fitted too.

    Raises :class:`CalibrationError` when no request can be told fresh or stale (no usage, or no
    request whose two outcomes differ).

    Example::

        >>> import polars as pl
        >>> df = pl.DataFrame({"session": ["s"] * 4, "index": [0, 1, 2, 3], "timestamp": [0.0, 5, 10, 15],
        ...     "predicted_cached_tokens": [0, 100, 200, 300], "reported_cached_tokens": [0, 100, 100, 300]})
        >>> cal = fit_calibration(df, provider="exact")
        >>> cal.run_counts  # (stale, fresh) per session
        ((1, 2),)
        >>> round(cal.stale_probability, 2)  # one short session: the population prior still weighs in
        0.45
    """
    import polars as pl

    items = _items(results)
    if provider is None:
        names = {getattr(i, "provider", None) for i in items} - {None}
        provider = ", ".join(sorted(str(n) for n in names)) or "unknown"
    reads = reads_rule(provider)
    counted = calibration_events(items, reads).filter(pl.col("outcome").is_in(["fresh", "stale"]))
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
        "pooled_stale_probability": stale / (stale + fresh),
    }
    per_run: dict[str, list[int]] = {}
    for session, outcome in counted.select("session", "outcome").iter_rows():
        per_run.setdefault(session, [0, 0])[0 if outcome == "stale" else 1] += 1
    run_counts = tuple((s, f) for s, f in per_run.values())
    extra: dict[str, Any] = {"run_counts": run_counts, "routes": routes, "reads": reads}
    if reads == "nearest":
        calls = _miss_calls(items)
        extra["idle_seconds"] = _fit_idle(calls)
        extra["miss_rates"] = miss_rates(items, extra["idle_seconds"])
    mean = population_rate(Calibration(provider, 0.0, run_counts=run_counts))
    if reads == "nearest":  # a read d tokens short of the bound is nearer the stale value whenever the
        # write is under 2 d: the write size would decide the outcome it is tested against
        splits = tuple(f for f in splits if f != "write_tokens")
    best = _best_split(counted, splits, fitted)
    if best is None:
        return Calibration(provider, mean, fitted_on=fitted, **extra)
    _, feature, threshold, ratio = best
    above = counted.filter(pl.col(feature).is_not_null())[feature] >= threshold
    share_hi = int(above.sum()) / max(1, above.len())
    lo = mean / (share_hi * ratio + (1.0 - share_hi))
    return Calibration(
        provider, min(1.0, lo), feature, threshold, min(1.0, lo * ratio), fitted_on=fitted, **extra
    )


def _best_split(
    counted: pl.DataFrame, splits: Sequence[str], fitted: dict[str, Any]
) -> tuple[float, str, float, float] | None:
    """The split of the rate the tests support best: ``(statistic, feature, threshold, ratio)``, or None;
    each test's statistic is recorded in ``fitted``."""
    import polars as pl

    best: tuple[float, str, float, float] | None = None
    critical = _chi2_1_critical(_ALPHA / max(1, len(splits)))
    for feature in splits:
        data = counted.filter(pl.col(feature).is_not_null())
        if data.height < 8:
            continue
        threshold = float(data[feature].median())  # type: ignore[arg-type]
        test = _split_test(data, feature, threshold)
        if test is None:
            continue
        stat, ratio = test
        fitted[f"split_{feature}_chi2"] = round(stat, 3)
        if stat > critical and (best is None or stat > best[0]):
            best = (stat, feature, threshold, ratio)
    return best


def _miss_state(missed_before: bool | None, gap: float | None, idle_seconds: float | None) -> str:
    """The :data:`MISS_STATES` entry of a call: ``first`` (no call before it in its session, then
    ``missed_before`` is None), ``after_miss``, ``after_idle`` (after a read, ``gap`` seconds later, at
    least ``idle_seconds``) or ``after_read``."""
    if missed_before is None:
        return "first"
    if missed_before:
        return "after_miss"
    if idle_seconds is not None and gap is not None and gap >= idle_seconds:
        return "after_idle"
    return "after_read"


#: The gaps (seconds) tried as the start of ``after_idle`` (the implicit cache has no documented
#: lifetime: "send requests with similar prefix in a short amount of time").
IDLE_CANDIDATES: Final[tuple[float, ...]] = (30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)


def _miss_calls(
    results: AnalysisResult | pl.DataFrame | Iterable[AnalysisResult | pl.DataFrame],
) -> list[tuple[str, bool | None, float | None, bool]]:
    """Per call with usage and a positive bound: (its session; whether the session's previous call
    missed, None for a first call; the gap since it; whether this call missed)."""
    calls: list[tuple[str, bool | None, float | None, bool]] = []
    for item in _items(results):
        seen: dict[str, tuple[bool, float | None]] = {}
        for r in _frame(item).iter_rows(named=True):
            rc, upper, ts = (
                r.get("reported_cached_tokens"),
                int(r["predicted_cached_tokens"]),
                r.get("timestamp"),
            )
            if rc is None:
                continue
            missed = int(rc) == 0 and upper > 0
            before = seen.get(r["session"])
            if upper > 0:
                gap = None if before is None or ts is None or before[1] is None else ts - before[1]
                calls.append((r["session"], None if before is None else before[0], gap, missed))
            seen[r["session"]] = (missed, ts)
    return calls


def _fit_idle(calls: Sequence[tuple[str, bool | None, float | None, bool]]) -> float | None:
    """The gap of :data:`IDLE_CANDIDATES` that best splits the misses after a read (the largest binomial
    log-likelihood of the two rates, each side at least 8 calls and the rate above the larger), or None
    when no split beats one rate by the chi-square critical value (1 degree of freedom, 5%, Bonferroni
    over the candidates)."""
    after = [(gap, missed) for _, before, gap, missed in calls if before is False and gap is not None]

    def loglik(m: int, n: int) -> float:
        return sum(k * math.log(k / n) for k in (m, n - m) if k > 0) if n else 0.0

    base = loglik(sum(m for _, m in after), len(after))
    best: tuple[float, float] | None = None
    for cut in IDLE_CANDIDATES:
        hi = [m for g, m in after if g >= cut]
        lo = [m for g, m in after if g < cut]
        if len(hi) < 8 or len(lo) < 8 or sum(hi) * len(lo) <= sum(lo) * len(hi):
            continue
        gain = 2.0 * (loglik(sum(hi), len(hi)) + loglik(sum(lo), len(lo)) - base)
        if gain > _chi2_1_critical(_ALPHA / len(IDLE_CANDIDATES)) and (best is None or gain > best[0]):
            best = (gain, cut)
    return None if best is None else best[1]


def miss_rates(
    results: AnalysisResult | pl.DataFrame | Iterable[AnalysisResult | pl.DataFrame],
    idle_seconds: float | None = None,
) -> dict[str, float]:
    """The rate of misses (a call that reads nothing where its bound is positive) in each of
    :data:`MISS_STATES` (``after_idle`` only with ``idle_seconds``), over the calls with usage of
    ``results``: the posterior mean under the Jeffreys prior, ``(misses + 1/2) / (calls + 1)``.

    >>> import polars as pl
    >>> df = pl.DataFrame({"session": ["a", "a", "a", "a", "b", "b", "b"], "index": [0, 1, 2, 3, 0, 1, 2],
    ...     "timestamp": [0.0, 5, 10, 20, 0, 900, 1900],
    ...     "predicted_cached_tokens": [900, 1000, 1200, 1300, 900, 1000, 1100],
    ...     "reported_cached_tokens": [0, 0, 1100, 1250, 0, 950, 0]})
    >>> miss_rates(df, idle_seconds=300)  # after a miss: a1 missed, a2 and b1 read; b2 missed 1,000 s after a read
    {'first': 0.8333333333333334, 'after_miss': 0.375, 'after_read': 0.25, 'after_idle': 0.75}
    """
    counts = {state: [0, 0] for state in MISS_STATES if state != "after_idle" or idle_seconds is not None}
    for _, before, gap, missed in _miss_calls(results):
        c = counts[_miss_state(before, gap, idle_seconds)]
        c[0] += int(missed)
        c[1] += 1
    return {state: (m + 0.5) / (n + 1.0) for state, (m, n) in counts.items()}


def _split_test(data: pl.DataFrame, feature: str, threshold: float) -> tuple[float, float] | None:
    """Does the stale rate differ at ``feature >= threshold``, *within* runs? Returns the
    Cochran-Mantel-Haenszel statistic (chi-square, 1 degree of freedom) and the Mantel-Haenszel rate
    ratio (above / below), or None when no run has calls on both sides.

    Stratifying by run matters: runs differ in rate, and a feature that differs between runs (or that
    a run's own stale calls inflate, as the write size does) would otherwise pass for a cause.
    """
    import polars as pl

    tables = (
        data.group_by("session")
        .agg(
            hi=(pl.col(feature) >= threshold).sum(),
            lo=(pl.col(feature) < threshold).sum(),
            stale_hi=((pl.col(feature) >= threshold) & (pl.col("outcome") == "stale")).sum(),
            stale_lo=((pl.col(feature) < threshold) & (pl.col("outcome") == "stale")).sum(),
        )
        .iter_rows(named=True)
    )
    deviation = variance = num = den = 0.0
    for t in tables:
        hi, lo, a, c = t["hi"], t["lo"], t["stale_hi"], t["stale_lo"]
        n, stale = hi + lo, a + c
        if hi == 0 or lo == 0 or n < 2:
            continue
        deviation += a - hi * stale / n
        variance += hi * lo * stale * (n - stale) / (n * n * (n - 1))
        num += a * lo / n
        den += c * hi / n
    if variance == 0.0:
        return None
    ratio = num / den if den > 0 else math.inf
    return deviation * deviation / variance, ratio if math.isfinite(ratio) else 1e6


# ------------------------------------------------------------------------------------ applying


def expected_cached(
    result: AnalysisResult | pl.DataFrame, calibration: Calibration, *, learn: bool = True
) -> pl.DataFrame:
    """Per request: ``session, index, expected_cached_tokens`` (a float: an expectation) under
    ``calibration``.

    Each request's expectation is computed from the predicted upper bound and, with ``learn`` (the
    default), from the reported figures of the session's *earlier* requests (see the module
    docstring), never from the reported figures of the request itself. ``learn=False`` ignores every
    reported figure: what a log without usage gets.

    Example::

        >>> import polars as pl
        >>> df = pl.DataFrame({"session": ["s", "s"], "index": [0, 1], "timestamp": [0.0, 3.0],
        ...                    "predicted_cached_tokens": [0, 1000]})
        >>> expected_cached(df, Calibration("x", 0.25))["expected_cached_tokens"].to_list()
        [0.0, 750.0]
    """
    import polars as pl

    frame = _frame(result)
    reported_column = (
        "reported_cached_tokens" if learn and "reported_cached_tokens" in frame.columns else None
    )
    base = population_rate(calibration) if calibration.learns else None
    reads, misses = calibration.reads, calibration.miss_rates
    rows: list[tuple[str, int, float]] = []
    # per session: (what call n-1 was served, as a figure or an expectation; its reported figure;
    # its timestamp; what the session has shown; whether it missed)
    state: dict[str, tuple[float, int | None, float | None, _Session, bool]] = {}
    for r in frame.iter_rows(named=True):
        session, upper = r["session"], float(r["predicted_cached_tokens"])
        reported = None if reported_column is None else r[reported_column]
        before = state.get(session)
        ts = r.get("timestamp")
        gap = None
        if before is None:
            value, seen = upper, _Session(calibration)
        else:
            served, prev_reported, prev_ts, seen, _ = before
            gap = None if ts is None or prev_ts is None else ts - prev_ts
            p = calibration.probability(gap_seconds=gap, write_tokens=upper - served)
            rate = seen.rate()
            if rate is not None and base is not None:
                p = min(1.0, p * rate / base) if base > 0 else rate
            value = (1.0 - p) * upper + p * min(served, upper)
            if reported is not None and prev_reported is not None:
                outcome = _outcome(int(reported), int(upper), int(min(served, upper)), reads)
                if outcome in ("stale", "fresh"):
                    seen.observe(outcome == "stale")
        where = _miss_state(None if before is None else before[4], gap, calibration.idle_seconds)
        if upper > 0 and misses:
            rate = misses.get(where, 0.0)
            value *= 1.0 - rate
        kept = None if before is None else before[0]
        served_now = value if reported is None else _served(int(reported), int(upper), kept, reads)
        missed = reported is not None and int(reported) == 0 and upper > 0
        state[session] = (served_now, None if reported is None else int(reported), ts, seen, missed)
        rows.append((session, r["index"], value))
    return pl.DataFrame(
        rows,
        schema={"session": pl.String, "index": pl.Int64, "expected_cached_tokens": pl.Float64},
        orient="row",
    )


def apply_calibration(result: AnalysisResult, calibration: Calibration) -> AnalysisResult:
    """``result`` with an ``expected_cached_tokens`` column added to its requests frame (and a note).

    Example::

        >>> from promptkit.analysis.api import analyze_requests
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
    has_usage = "reported_cached_tokens" in requests.columns and bool(
        requests["reported_cached_tokens"].is_not_null().any()
    )
    if calibration.learns and has_usage:
        learnt = ", each session's rate learnt from its earlier usage"
    elif calibration.learns:
        learnt = ", the population rate (the log has no usage to learn each session's rate from)"
    else:
        learnt = ""
    note = (
        f"expected_cached_tokens: stale-state calibration for {calibration.provider}, "
        f"p(stale) = {calibration.stale_probability:.3f}{split}{learnt}"
    )
    return attrs.evolve(result, requests=requests, notes=(*result.notes, note))


def leave_one_run_out(
    results: Mapping[str, AnalysisResult | pl.DataFrame], provider: str | None = None
) -> pl.DataFrame:
    """Honest error of the calibration: fit on every run but one (as ``provider``'s logs, see
    :func:`fit_calibration`), predict the held-out run.

    ``results``: run name → its analysis (runs with usage). One row per held-out run and a last row
    ``(all)`` pooling every held-out prediction, with columns ``run, requests, stale_probability``
    (the population rate fitted on the other runs), ``reported_hit_ratio, upper_hit_ratio``,
    ``expected_hit_ratio`` and ``error_pp`` (the forecast, learning from the held-out run's earlier
    usage as ``analyze --calibration`` does; ``error_pp = 100 (expected - reported)``), and
    ``prior_hit_ratio`` and ``prior_error_pp`` (the same model using none of the held-out run's
    reported figures: what a log without usage gets).
    """
    import polars as pl

    names = ("prompt", "reported", "upper", "expected", "prior")
    rows: list[dict[str, Any]] = []
    totals = dict.fromkeys(names, 0.0)
    count = 0

    def row(run: str, n: int, p: float | None, sums: Mapping[str, float]) -> dict[str, Any]:
        prompt = sums["prompt"]

        def ratio(key: str) -> float | None:
            return sums[key] / prompt if prompt else None

        def error(key: str) -> float | None:
            return 100 * (sums[key] - sums["reported"]) / prompt if prompt else None

        return {
            "run": run, "requests": n, "stale_probability": p, "reported_hit_ratio": ratio("reported"),
            "upper_hit_ratio": ratio("upper"), "expected_hit_ratio": ratio("expected"),
            "error_pp": error("expected"), "prior_hit_ratio": ratio("prior"), "prior_error_pp": error("prior"),
        }  # fmt: skip

    for run, held in results.items():
        train = [r for name, r in results.items() if name != run]
        try:
            cal = fit_calibration(train, provider=provider)
        except CalibrationError:
            cal = Calibration("none", 0.0)
        frame = _frame(held)
        keys = frame.filter(pl.col("reported_cached_tokens").is_not_null()).select("session", "index")
        with_usage = frame.join(keys, on=["session", "index"])
        sums = {
            "prompt": float(with_usage["reported_prompt_tokens"].sum()),
            "reported": float(with_usage["reported_cached_tokens"].sum()),
            "upper": float(with_usage["predicted_cached_tokens"].sum()),
            "expected": float(expected_cached(frame, cal).join(keys, on=["session", "index"])["expected_cached_tokens"].sum()),
            "prior": float(
                expected_cached(frame, cal, learn=False).join(keys, on=["session", "index"])["expected_cached_tokens"].sum()
            ),
        }  # fmt: skip
        for key in names:
            totals[key] += sums[key]
        count += with_usage.height
        rows.append(row(run, with_usage.height, population_rate(cal), sums))
    rows.append(row("(all)", count, None, totals))
    return pl.DataFrame(rows, schema={
        "run": pl.String, "requests": pl.Int64, "stale_probability": pl.Float64, "reported_hit_ratio": pl.Float64,
        "upper_hit_ratio": pl.Float64, "expected_hit_ratio": pl.Float64, "error_pp": pl.Float64,
        "prior_hit_ratio": pl.Float64, "prior_error_pp": pl.Float64,
    }, orient="row")  # fmt: skip
