"""Costs: what each request cost without a cache, with the predicted cache and with the reported one, at
the dated list prices the provider profiles carry (:func:`builtin_prices`) or your overrides.

The prices themselves are provider knowledge: each profile in :mod:`promptkit.providers` carries its
models' :class:`~promptkit.providers.prices.ModelPrice`, with the page it was read from and the date.
This is promptkit's one cost module: ``analyze``, ``whatif``, ``check`` and the HTML report all price
through :func:`request_costs`. A model is priced only by its own entry (a dated snapshot such as
``claude-sonnet-4-5-20250929`` or ``gpt-4o-2024-08-06`` by its version's entry): a model without one is
never priced as another model. Its cost columns stay empty and :func:`summarize` notes why; pass
``prices=`` (CLI: ``--prices FILE``) to price it.

>>> ModelPrice("anthropic", "claude-sonnet-4-5", cache_hit=0.3, cache_miss=3, output=15, cache_write=3.75,
...            cache_write_1h=6).cache_write_1h
6.0
>>> builtin_prices()["claude-opus-4-6"].cache_miss, builtin_prices()["claude-opus-4-6"].as_of
(5.0, '2026-12-04')
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

import attrs
import polars as pl

from promptkit.errors import PriceError, UsageError
from promptkit.providers.prices import BAND_FIELDS, ModelPrice, lookup_model

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.analysis.result import AnalysisResult
from promptkit.report.metrics import (
    MILLION,
    col_or_null,
    has_reported,
    need_columns,
    ratio_expr,
    requests_of,
)

__all__ = [
    "ModelPrice",
    "PriceTable",
    "builtin_prices",
    "check_cost_arguments",
    "cost_summary",
    "load_prices",
    "lookup_model",
    "prices_frame",
    "provider_name",
    "request_costs",
    "resolve_prices",
    "unpriced_models",
]


# -------------------------------------------------------------------------------------------- prices


def builtin_prices() -> dict[str, ModelPrice]:
    """Every price the provider profiles carry (built-in and plugin profiles alike), by model version."""
    from promptkit.providers.registry import available_providers

    table: dict[str, ModelPrice] = {}
    for profile in available_providers().values():
        table.update(profile.prices)
    return table


_registry_prices = builtin_prices


def _default_model(provider: str) -> str | None:
    from promptkit.providers.registry import available_providers

    for name in provider.split(", "):
        profile = available_providers().get(name.strip().lower())
        if profile is not None and profile.default_model is not None:
            return profile.default_model
    return None


_PRICE_FIELDS: Final[tuple[str, ...]] = ("cache_hit", "cache_miss", "output", "cache_write", "cache_write_1h")
_PRICE_SCHEMA: Final[dict[str, Any]] = {
    "provider": pl.String,
    "model": pl.String,
    "cache_hit": pl.Float64,
    "cache_miss": pl.Float64,
    "output": pl.Float64,
    "cache_write": pl.Float64,
    "cache_write_1h": pl.Float64,
    "source": pl.String,
    "as_of": pl.String,
    "above_tokens": pl.Int64,
    **dict.fromkeys(BAND_FIELDS, pl.Float64),
}


def _price_from_mapping(model: str, values: Mapping[str, Any], where: str) -> ModelPrice:
    if not isinstance(values, Mapping):
        raise PriceError(f"{where}: the price of {model!r} must be a mapping of {', '.join(_PRICE_FIELDS)}")
    unknown = sorted(set(values) - {*_PRICE_FIELDS, *_BAND_KEYS, "provider", "model", "source", "as_of"})
    if unknown:
        raise PriceError(f"{where}: unknown price field(s) {', '.join(unknown)} for {model!r}")
    missing = [f for f in ("cache_hit", "cache_miss", "output") if values.get(f) in (None, "")]
    if missing:
        raise PriceError(f"{where}: price of {model!r} lacks {', '.join(missing)}")
    try:
        return ModelPrice(
            str(values.get("provider") or ""),
            str(values.get("model") or model),
            cache_hit=values["cache_hit"],
            cache_miss=values["cache_miss"],
            output=values["output"],
            cache_write=values.get("cache_write") if values.get("cache_write") not in ("",) else None,
            cache_write_1h=values.get("cache_write_1h")
            if values.get("cache_write_1h") not in ("",)
            else None,
            source=str(values["source"]) if values.get("source") not in (None, "") else where,
            as_of=str(values["as_of"]) if values.get("as_of") not in (None, "") else None,
            above_tokens=_whole_tokens(values.get("above_tokens"), model),
            **{name: _band_value(values.get(name), name, model) for name in BAND_FIELDS},
        )
    except PriceError as exc:
        raise PriceError(f"{where}: {exc}") from exc
    except (TypeError, ValueError) as exc:
        raise PriceError(f"{where}: bad price for {model!r}: {exc}") from exc


_BAND_KEYS: Final[tuple[str, ...]] = ("above_tokens", *BAND_FIELDS)


def _whole_tokens(value: Any, model: str) -> int | None:
    """``above_tokens`` of a price file: empty -> None, else a whole number (``100000``, ``"100000"``)."""
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise PriceError(f"price {model}.above_tokens must be a whole number of tokens >= 1, got {value!r}")


def _band_value(value: Any, name: str, model: str) -> float | None:
    """One ``above_*`` price of a price file: empty -> None, else a number."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise PriceError(f"price {model}.{name} must be a number, got {value!r}")
    try:
        return float(value)
    except ValueError as exc:
        raise PriceError(f"price {model}.{name} must be a number, got {value!r}") from exc


#: What ``prices=`` accepts: model -> ModelPrice or a mapping of its fields, or a DataFrame.
PriceTable: TypeAlias = "Mapping[str, ModelPrice | Mapping[str, Any]] | pl.DataFrame"


def resolve_prices(prices: PriceTable | None = None, *, replace: bool = False) -> dict[str, ModelPrice]:
    """The price table to use: the provider profiles' list prices updated with ``prices`` (or only ``prices`` if ``replace``).

    ``prices`` is a mapping of model name to :class:`ModelPrice` or to a mapping with the fields
    ``cache_hit, cache_miss, output`` (and optionally ``cache_write, provider``), or a DataFrame with
    a ``model`` column and those columns.

    >>> resolve_prices({"my-model": {"cache_hit": 0.1, "cache_miss": 1, "output": 2}})["my-model"].cache_miss
    1.0
    """
    table: dict[str, ModelPrice] = {} if replace else _registry_prices()
    if prices is None:
        return table
    if isinstance(prices, pl.DataFrame):
        if "model" not in prices.columns:
            raise PriceError(f"price frame needs a 'model' column; it has {', '.join(prices.columns)}")
        for i, row in enumerate(prices.iter_rows(named=True)):
            values = {k: v for k, v in row.items() if k != "model"}
            table[str(row["model"])] = _price_from_mapping(str(row["model"]), values, f"price frame row {i}")
        return table
    for model, value in prices.items():
        if isinstance(value, ModelPrice):
            table[model] = value if value.model == model else attrs.evolve(value, model=model)
        else:
            table[model] = _price_from_mapping(model, {**value, "model": model}, "prices")
    return table


def check_cost_arguments(where: str, *, prices: object, model: object, provider: object) -> None:
    """:class:`~promptkit.errors.UsageError` naming ``where`` and the argument whose type is wrong."""
    for name, value in (("model", model), ("provider", provider)):
        if value is not None and not isinstance(value, str):
            raise UsageError(f"{where}: {name}: expected a string or None, got {type(value).__name__}")
    if prices is None or isinstance(prices, pl.DataFrame):
        return
    if not isinstance(prices, Mapping):
        raise UsageError(
            f"{where}: prices: expected a mapping of model to prices, a DataFrame or None, got {type(prices).__name__}"
        )
    for key, value in prices.items():
        if not isinstance(key, str) or not isinstance(value, ModelPrice | Mapping):
            raise UsageError(
                f"{where}: prices[{key!r}]: expected a ModelPrice or a mapping of its fields, got {type(value).__name__}"
            )


def prices_frame(prices: PriceTable | None = None) -> pl.DataFrame:
    """The price table as a DataFrame (``provider, model, cache_hit, cache_miss, output, cache_write,
    cache_write_1h, source, as_of``)."""
    table = resolve_prices(prices)
    return pl.DataFrame([attrs.asdict(p) for p in table.values()], schema=_PRICE_SCHEMA, orient="row")


def load_prices(path: str | Path) -> dict[str, ModelPrice]:
    """Read prices from a JSON or CSV file (USD per million tokens), for ``resolve_prices``.

    JSON: ``{"model-name": {"cache_hit": 0.1, "cache_miss": 1.0, "output": 4.0, "cache_write": 1.25}}``.
    CSV: a header ``model,cache_hit,cache_miss,output`` (optional ``cache_write``, ``provider``).
    Either may carry a band above a prompt length (``above_tokens`` and ``above_*``, as
    :class:`ModelPrice` has them). Errors name the file (and row) and the field.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PriceError(f"cannot read price file {path}: {exc.strerror or exc}") from exc
    table: dict[str, ModelPrice] = {}
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PriceError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from exc
        if not isinstance(data, dict):
            raise PriceError(f"{path}: expected a JSON object of model -> prices")
        for model, values in data.items():
            table[model] = _price_from_mapping(model, values, str(path))
        return table
    reader = csv.DictReader(text.splitlines())
    if reader.fieldnames is None or "model" not in reader.fieldnames:
        raise PriceError(f"{path}: a CSV price file needs a header with a 'model' column")
    for line, row in enumerate(reader, start=2):
        if None in row:
            raise PriceError(f"{path}:{line}: more fields than the header has")
        model = (row.pop("model") or "").strip()
        if not model:
            raise PriceError(f"{path}:{line}: empty model name")
        values = {k: (v.strip() if v is not None else None) for k, v in row.items()}
        table[model] = _price_from_mapping(model, values, f"{path}:{line}")
    return table


def provider_name(result: object) -> str | None:
    provider = getattr(result, "provider", None)
    if provider is None or isinstance(provider, str):
        return provider
    name = getattr(provider, "name", None)
    return name if isinstance(name, str) else None


def _with_prices(
    frame: pl.DataFrame,
    table: Mapping[str, ModelPrice],
    model: str | None,
    provider: str | None,
    missing: Literal["raise", "empty"],
) -> pl.DataFrame:
    """``frame`` with the model each request is priced by (``_model``: ``model``, else its ``model``
    column, else ``provider``'s default model), ``priced_as`` and that model's prices (null without a
    price when ``missing="empty"``; else :class:`PriceError`)."""
    default = model or (_default_model(provider) if provider else None)
    if model is not None:
        names = pl.lit(model, dtype=pl.String)
    elif "model" in frame.columns:
        names = pl.coalesce(pl.col("model").cast(pl.String), pl.lit(default, dtype=pl.String))
    else:
        names = pl.lit(default, dtype=pl.String)
    work = frame.with_columns(names.alias("_model"))
    requested = work["_model"].unique(maintain_order=True).to_list()
    mapping = {name: lookup_model(name, table) if name is not None else None for name in requested}
    unpriced = [name for name, key in mapping.items() if key is None]
    if unpriced and missing == "raise":
        what = ", ".join(repr(n) for n in unpriced if n is not None)
        if None in unpriced:
            what = (
                what + " and " if what else ""
            ) + f"the requests of provider {provider!r} (no default model)"
        raise PriceError(
            f"no price for {what}; known models: "
            f"{', '.join(sorted(table))}; pass model= or prices= (CLI: --model, --prices FILE)"
        )
    price_rows = pl.DataFrame(
        [{"_model": name, **attrs.asdict(table[key])} for name, key in mapping.items() if key is not None],
        schema={"_model": pl.String, **_PRICE_SCHEMA},
        orient="row",
    ).rename({"model": "priced_as"})
    return work.join(price_rows.drop("provider"), on="_model", how="left", maintain_order="left")


def _pick_bands(work: pl.DataFrame, length: pl.Expr) -> pl.DataFrame:
    """``work`` with each request's price columns set to its band: the ``above_*`` prices where its
    prompt ``length`` (the whole prompt, reported where known, else counted) is over ``above_tokens``.
    A price without a band (``above_tokens`` null) keeps its prices on every request."""
    over = (length > pl.col("above_tokens")).fill_null(value=False)
    return work.with_columns(
        pl.when(over).then(pl.col(f"above_{name}")).otherwise(pl.col(name)).alias(name)
        for name in _PRICE_FIELDS
    )


def _prompt_cost(prompt: pl.Expr, cached: pl.Expr, written: pl.Expr, hour: pl.Expr) -> pl.Expr:
    """The USD cost of ``prompt`` tokens of which ``cached`` were read from the cache and ``written``
    written to it (``hour`` of them for an hour), at the priced model's columns."""
    write_price = pl.coalesce(pl.col("cache_write"), pl.col("cache_miss"))
    # Anthropic's 1-hour writes at their own price (cache_write_1h), the rest at cache_write
    write_1h_price = pl.coalesce(pl.col("cache_write_1h"), write_price)
    miss = (prompt - cached - written).clip(lower_bound=0)
    hour = pl.min_horizontal(hour, written)
    writes = (written - hour) * write_price + hour * write_1h_price
    return (cached * pl.col("cache_hit") + writes + miss * pl.col("cache_miss")) / MILLION


def request_costs(
    result: AnalysisResult | pl.DataFrame,
    *,
    prices: PriceTable | None = None,
    model: str | None = None,
    provider: str | None = None,
    missing: Literal["raise", "empty"] = "raise",
) -> pl.DataFrame:
    """Per request: its cost in USD without any cache, with the predicted cache and with the reported one.

    The priced model is ``model`` if given, else the request's ``model`` column (when the log recorded
    it), else the provider profile's ``default_model`` (``provider`` or ``result.provider``).
    A price with a band above a prompt length (``above_tokens``, see
    :class:`~promptkit.providers.prices.ModelPrice`) prices each request by the band its whole prompt
    falls in: the reported prompt tokens where the log has usage, else promptkit's count; the same band
    for every cost column of that request.
    Prompt tokens are billed: cached at ``cache_hit``, written to the cache (optional columns
    ``predicted_cache_write_tokens`` / ``reported_cache_write_tokens``) at ``cache_write`` — of which the
    1-hour writes (``*_cache_write_1h_tokens``) at ``cache_write_1h`` — the rest at ``cache_miss``.
    Output tokens (``reported_completion_tokens``, else ``completion_tokens``; 0 and counted in
    ``output_unknown`` when neither is known) at ``output``. The reported figures use the provider's
    own token counts and are null where the log has no usage.

    A model without a price of its own (see :func:`lookup_model`) raises :class:`PriceError` naming it,
    or, with ``missing="empty"``, leaves its requests' ``priced_as`` and cost columns null.
    """
    frame = requests_of(result)
    check_cost_arguments("request_costs", prices=prices, model=model, provider=provider)
    need_columns(frame, ("session", "index", "prompt_tokens", "predicted_cached_tokens"), "request_costs")
    table = resolve_prices(prices)
    provider = provider or provider_name(result)
    work = _with_prices(frame, table, model, provider, missing)
    reported = has_reported(frame)
    rp = pl.when(reported).then(col_or_null(frame, "reported_prompt_tokens")).cast(pl.Int64)
    work = _pick_bands(work, pl.coalesce(rp, pl.col("prompt_tokens").cast(pl.Int64)))
    output = pl.coalesce(
        col_or_null(frame, "reported_completion_tokens"), col_or_null(frame, "completion_tokens")
    ).cast(pl.Int64)
    output_cost = output.fill_null(0) * pl.col("output") / MILLION
    rc = pl.when(reported).then(col_or_null(frame, "reported_cached_tokens")).cast(pl.Int64)
    pw = col_or_null(frame, "predicted_cache_write_tokens").fill_null(0)
    rw = col_or_null(frame, "reported_cache_write_tokens").fill_null(0)
    pw1 = col_or_null(frame, "predicted_cache_write_1h_tokens").fill_null(0)
    rw1 = col_or_null(frame, "reported_cache_write_1h_tokens").fill_null(0)
    return work.select(
        pl.col("session").cast(pl.String),
        pl.col("index"),
        pl.col("_model").alias("model"),
        pl.col("priced_as"),
        pl.col("prompt_tokens").cast(pl.Int64),
        pl.col("predicted_cached_tokens").cast(pl.Int64),
        pw.cast(pl.Int64).alias("predicted_cache_write_tokens"),
        output.fill_null(0).alias("output_tokens"),
        output.is_null().alias("output_unknown"),
        rp.cast(pl.Int64).alias("reported_prompt_tokens"),
        rc.cast(pl.Int64).alias("reported_cached_tokens"),
        pl.when(reported).then(rw).cast(pl.Int64).alias("reported_cache_write_tokens"),
        (pl.col("prompt_tokens") * pl.col("cache_miss") / MILLION + output_cost).alias("cost_no_cache"),
        (
            _prompt_cost(pl.col("prompt_tokens"), pl.col("predicted_cached_tokens"), pw, pw1) + output_cost
        ).alias("cost_predicted"),
        (rp * pl.col("cache_miss") / MILLION + output_cost).alias("cost_reported_no_cache"),
        (_prompt_cost(rp, rc, rw, rw1) + output_cost).alias("cost_reported"),
    )


def cost_summary(
    result: AnalysisResult | pl.DataFrame,
    *,
    prices: PriceTable | None = None,
    model: str | None = None,
    provider: str | None = None,
    by_session: bool = False,
    missing: Literal["raise", "empty"] = "raise",
) -> pl.DataFrame:
    """What the calls cost (USD) with the predicted cache, without any cache, and with the reported cache.

    One row per ``basis``: ``"predicted"`` (our token counts, every request) and, when the log has
    usage, ``"reported"`` (the provider's counts, requests with usage only); per model priced (and per
    session with ``by_session``). Columns: ``basis, model, requests, prompt_tokens, cached_tokens,
    cache_write_tokens, output_tokens, output_unknown, cost_without_cache, cost_with_cache, saving``
    (without - with) and ``saving_ratio`` (saving / without). See :func:`request_costs` for pricing;
    with ``missing="empty"`` a model without a price keeps its row with the cost columns null.
    """
    costs = request_costs(result, prices=prices, model=model, provider=provider, missing=missing)
    priced = pl.col("priced_as").is_not_null().all().alias("_priced")
    groups = ["session", "model"] if by_session else ["model"]
    shared = [pl.len().cast(pl.Int64).alias("requests")]
    predicted = costs.group_by(groups, maintain_order=True).agg(
        *shared,
        pl.col("prompt_tokens").sum(),
        pl.col("predicted_cached_tokens").sum().alias("cached_tokens"),
        pl.col("predicted_cache_write_tokens").sum().alias("cache_write_tokens"),
        pl.col("output_tokens").sum(),
        pl.col("output_unknown").sum().cast(pl.Int64),
        pl.col("cost_no_cache").sum().alias("cost_without_cache"),
        pl.col("cost_predicted").sum().alias("cost_with_cache"),
        priced,
    )
    reported = (
        costs.filter(pl.col("reported_cached_tokens").is_not_null())
        .group_by(groups, maintain_order=True)
        .agg(
            *shared,
            pl.col("reported_prompt_tokens").sum().alias("prompt_tokens"),
            pl.col("reported_cached_tokens").sum().alias("cached_tokens"),
            pl.col("reported_cache_write_tokens").sum().alias("cache_write_tokens"),
            pl.col("output_tokens").sum(),
            pl.col("output_unknown").sum().cast(pl.Int64),
            pl.col("cost_reported_no_cache").sum().alias("cost_without_cache"),
            pl.col("cost_reported").sum().alias("cost_with_cache"),
            priced,
        )
    )
    table = pl.concat(
        [
            predicted.with_columns(pl.lit("predicted").alias("basis")),
            reported.with_columns(pl.lit("reported").alias("basis")),
        ],
        how="vertical_relaxed",
    ).with_columns(
        pl.when(pl.col("_priced")).then(pl.col(c)).otherwise(None).alias(c)
        for c in ("cost_without_cache", "cost_with_cache")
    )
    return table.select(
        "basis",
        *groups,
        "requests",
        "prompt_tokens",
        "cached_tokens",
        "cache_write_tokens",
        "output_tokens",
        "output_unknown",
        "cost_without_cache",
        "cost_with_cache",
        (pl.col("cost_without_cache") - pl.col("cost_with_cache")).alias("saving"),
        ratio_expr(
            pl.col("cost_without_cache") - pl.col("cost_with_cache"), pl.col("cost_without_cache")
        ).alias("saving_ratio"),
    )


def unpriced_models(costs: pl.DataFrame) -> dict[str, int]:
    """The models of :func:`request_costs` ``(missing="empty")`` rows left without a price, with their
    request counts (a request that names no model, on a provider without a default, as ``"(none)"``).

    >>> unpriced_models(pl.DataFrame({"model": ["gpt-9", "gpt-4o", "gpt-9"], "priced_as": [None, "gpt-4o", None]}))
    {'gpt-9': 2}
    """
    rows = costs.filter(pl.col("priced_as").is_null())
    counts: dict[str, int] = {}
    for name in rows["model"].to_list():
        key = "(none)" if name is None else str(name)
        counts[key] = counts.get(key, 0) + 1
    return counts
