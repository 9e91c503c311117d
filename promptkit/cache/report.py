"""Summaries of a cache analysis as polars DataFrames, and what the calls cost at a provider's prices.

Every function takes an :class:`~promptkit.cache.engine.AnalysisResult` (or its ``requests`` frame)
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

import csv
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import attrs
import polars as pl

from promptkit.cache.engine import REQUEST_COLUMNS as REQUEST_COLUMNS_ALL
from promptkit.errors import PriceError, ReportInputError, UsageError
from promptkit.providers.pricing import ModelPrice

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.cache.engine import AnalysisResult

__all__ = [
    "ALL_SESSIONS",
    "COLD_START",
    "COLUMN_LEGEND",
    "NEW_TOKENS",
    "NO_LAYOUT",
    "REQUEST_COLUMNS",
    "PriceError",
    "ReportInputError",
    "attribute_losses",
    "cost_summary",
    "format_legend",
    "format_summary",
    "hit_ratio_summary",
    "largest_breaks",
    "load_prices",
    "predicted_vs_reported",
    "predicted_vs_reported_summary",
    "prices_frame",
    "request_costs",
    "resolve_prices",
    "summarize",
    "table_config",
    "tokens_lost_by_key",
    "tokens_lost_by_slot",
]

#: The columns every per-request frame starts with (the engine's fixed schema).
REQUEST_COLUMNS: Final[tuple[str, ...]] = REQUEST_COLUMNS_ALL[:13]
#: Label of the row that aggregates every session.
ALL_SESSIONS: Final[str] = "(all)"
#: Slot charged with the loss of a session's first request (nothing of the session was cached yet).
COLD_START: Final[str] = "cold start"
#: Slot charged with a loss whose divergence has neither an anchor nor a message role.
NO_LAYOUT: Final[str] = "(no layout)"
#: Slot charged with the loss of a request that did not diverge: everything the cache held was reused,
#: what was lost is the tokens appended since (and the provider's rounding to its cache unit).
NEW_TOKENS: Final[str] = "(new tokens)"

_MILLION: Final[float] = 1_000_000.0


# --------------------------------------------------------------------------------------------- input


def _requests_of(result: AnalysisResult | pl.DataFrame) -> pl.DataFrame:
    if isinstance(result, pl.DataFrame):
        return result
    requests = getattr(result, "requests", None)
    if not isinstance(requests, pl.DataFrame):
        raise ReportInputError(
            f"expected an AnalysisResult or its requests DataFrame, got {type(result).__name__}"
        )
    return requests


def _need(frame: pl.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ReportInputError(
            f"{what} needs the request column(s) {', '.join(missing)}; the frame has {', '.join(frame.columns)}"
        )


def _col_or_null(frame: pl.DataFrame, name: str, dtype: Any = pl.Int64) -> pl.Expr:
    """The column ``name`` if the frame has it, else a null column of ``dtype``."""
    if name in frame.columns:
        return pl.col(name)
    return pl.lit(None, dtype=dtype).alias(name)


def _ratio(numerator: pl.Expr, denominator: pl.Expr) -> pl.Expr:
    """``numerator / denominator`` as Float64, null where the denominator is 0 or null."""
    return pl.when(denominator > 0).then(numerator.cast(pl.Float64) / denominator).otherwise(None)


def _has_reported(frame: pl.DataFrame) -> pl.Expr:
    return (
        _col_or_null(frame, "reported_cached_tokens").is_not_null()
        & _col_or_null(frame, "reported_prompt_tokens").is_not_null()
    )


# ---------------------------------------------------------------------------------------- hit ratio


def hit_ratio_summary(result: AnalysisResult | pl.DataFrame, *, overall: bool = True) -> pl.DataFrame:
    """Token-weighted hit ratio per session (sum of predicted cached tokens / sum of prompt tokens).

    Columns: ``session, requests, prompt_tokens, predicted_cached_tokens, hit_ratio``, then the same
    figures from the provider's usage where the log has it (``reported_requests,
    reported_prompt_tokens, reported_cached_tokens, reported_hit_ratio``; the reported ratio is over
    the requests with usage only). With ``overall`` a last row, session ``"(all)"``, sums every session.

    >>> import polars as pl
    >>> df = pl.DataFrame({"session": ["a", "b"], "index": [0, 0], "prompt_tokens": [100, 100],
    ...                    "predicted_cached_tokens": [50, 0]})
    >>> hit_ratio_summary(df)["hit_ratio"].to_list()
    [0.5, 0.0, 0.25]
    """
    frame = _requests_of(result)
    _need(frame, ("session", "prompt_tokens", "predicted_cached_tokens"), "hit_ratio_summary")
    has_reported = _has_reported(frame)
    base = frame.select(
        pl.col("session").cast(pl.String),
        pl.col("prompt_tokens").cast(pl.Int64),
        pl.col("predicted_cached_tokens").cast(pl.Int64),
        has_reported.alias("_reported"),
        pl.when(has_reported).then(_col_or_null(frame, "reported_prompt_tokens")).cast(pl.Int64).alias("_rp"),
        pl.when(has_reported).then(_col_or_null(frame, "reported_cached_tokens")).cast(pl.Int64).alias("_rc"),
    )
    aggs = [
        pl.len().cast(pl.Int64).alias("requests"),
        pl.col("prompt_tokens").sum(),
        pl.col("predicted_cached_tokens").sum(),
        pl.col("_reported").sum().cast(pl.Int64).alias("reported_requests"),
        pl.col("_rp").sum().alias("reported_prompt_tokens"),
        pl.col("_rc").sum().alias("reported_cached_tokens"),
    ]
    per_session = base.group_by("session", maintain_order=True).agg(aggs)
    if overall:
        total = base.select(pl.lit(ALL_SESSIONS).alias("session"), *aggs)
        per_session = pl.concat([per_session, total], how="vertical_relaxed")
    return per_session.select(
        "session",
        "requests",
        "prompt_tokens",
        "predicted_cached_tokens",
        _ratio(pl.col("predicted_cached_tokens"), pl.col("prompt_tokens")).alias("hit_ratio"),
        "reported_requests",
        pl.when(pl.col("reported_requests") > 0)
        .then(pl.col("reported_prompt_tokens"))
        .alias("reported_prompt_tokens"),
        pl.when(pl.col("reported_requests") > 0)
        .then(pl.col("reported_cached_tokens"))
        .alias("reported_cached_tokens"),
        _ratio(pl.col("reported_cached_tokens"), pl.col("reported_prompt_tokens")).alias(
            "reported_hit_ratio"
        ),
    )


# ------------------------------------------------------------------------------------- attribution


def attribute_losses(result: AnalysisResult | pl.DataFrame) -> pl.DataFrame:
    """Per request: the tokens lost to the cache and the slot and contributor key charged with them.

    ``tokens_lost = prompt_tokens - predicted_cached_tokens``. ``slot`` is ``"cold start"`` for the
    first request of a session, else the divergence anchor, else the divergence role (logs without a
    layout; ``tools``/``header``/``generation`` outside the messages), else ``"(no layout)"`` when a
    divergence is recorded without either, else ``"(new tokens)"``: the request did not diverge from
    what was cached, its loss is what was appended since. ``key`` is the divergence contributor key,
    else the slot.

    >>> import polars as pl
    >>> df = pl.DataFrame({"session": ["s", "s"], "index": [0, 1], "prompt_tokens": [10, 30],
    ...     "predicted_cached_tokens": [0, 10], "divergence_role": [None, "user"],
    ...     "divergence_anchor": [None, "turn-context"], "divergence_key": [None, "memory.recall"]})
    >>> attribute_losses(df).select("slot", "key", "tokens_lost").rows()
    [('cold start', 'cold start', 10), ('turn-context', 'memory.recall', 20)]
    """
    frame = _requests_of(result)
    _need(frame, ("session", "index", "prompt_tokens", "predicted_cached_tokens"), "attribute_losses")
    first = pl.col("index") == pl.col("index").min().over("session")
    anchor = _col_or_null(frame, "divergence_anchor", pl.String).cast(pl.String)
    role = _col_or_null(frame, "divergence_role", pl.String).cast(pl.String)
    key = _col_or_null(frame, "divergence_key", pl.String).cast(pl.String)
    diverged = pl.any_horizontal(
        _col_or_null(frame, c).is_not_null() for c in ("divergence_message", "divergence_token")
    )
    slot = (
        pl.when(first)
        .then(pl.lit(COLD_START))
        .when(anchor.is_not_null())
        .then(anchor)
        .when(role.is_not_null())
        .then(role)
        .when(diverged)
        .then(pl.lit(NO_LAYOUT))
        .otherwise(pl.lit(NEW_TOKENS))
    )
    return frame.select(
        pl.col("session").cast(pl.String),
        pl.col("index"),
        pl.col("prompt_tokens").cast(pl.Int64),
        pl.col("predicted_cached_tokens").cast(pl.Int64),
        (pl.col("prompt_tokens") - pl.col("predicted_cached_tokens")).cast(pl.Int64).alias("tokens_lost"),
        slot.alias("slot"),
        pl.when(first).then(pl.lit(COLD_START)).otherwise(pl.coalesce(key, slot)).alias("key"),
    )


def _lost_by(result: AnalysisResult | pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    losses = attribute_losses(result)
    total = losses["tokens_lost"].sum()
    table = losses.group_by(keys, maintain_order=True).agg(
        (pl.col("tokens_lost") > 0).sum().cast(pl.Int64).alias("requests"),
        pl.col("tokens_lost").sum().cast(pl.Int64),
        pl.col("tokens_lost").mean().alias("mean_lost"),
    )
    share = pl.lit(None, dtype=pl.Float64) if not total else pl.col("tokens_lost") / float(total)
    return table.with_columns(share.alias("share")).sort(
        ["tokens_lost", *keys], descending=[True] + [False] * len(keys)
    )


def tokens_lost_by_slot(result: AnalysisResult | pl.DataFrame) -> pl.DataFrame:
    """Tokens lost per slot (anchor or frame role), largest loss first.

    Columns: ``slot, requests`` (requests that lost any token there), ``tokens_lost, mean_lost``
    (per request charged to the slot) and ``share`` (of every token lost). See :func:`attribute_losses`.
    """
    return _lost_by(result, ["slot"])


def tokens_lost_by_key(result: AnalysisResult | pl.DataFrame) -> pl.DataFrame:
    """Tokens lost per contributor key (with its slot), largest loss first; see :func:`tokens_lost_by_slot`."""
    return _lost_by(result, ["slot", "key"])


def _visible(text: pl.Expr, limit: int) -> pl.Expr:
    """``text`` on one line (newlines and tabs shown as ⏎ and →), cut to ``limit`` characters."""
    one_line = text.str.replace_all("\n", "⏎", literal=True).str.replace_all("\t", "→", literal=True)
    return (
        pl.when(one_line.str.len_chars() > limit)
        .then(one_line.str.slice(0, limit - 1) + "…")
        .otherwise(one_line)
    )


def largest_breaks(result: AnalysisResult | pl.DataFrame, *, n: int = 10, width: int = 32) -> pl.DataFrame:
    """The ``n`` requests that lost the most tokens at a divergence, with what broke the prefix.

    Columns: ``session, index, tokens_lost, slot, key`` (as in :func:`attribute_losses`) and
    ``cached_text`` / ``prompt_text``: the tokens the cache held at the first divergent token and the
    tokens the prompt sent instead (the engine's ``divergence_cached_text`` / ``divergence_prompt_text``,
    on one line, cut to ``width`` characters). Requests that did not diverge (a cold start, or a prompt
    that only appended to what was cached) are not listed.
    """
    frame = _requests_of(result)
    losses = attribute_losses(frame)
    texts = frame.select(
        pl.col("session").cast(pl.String),
        pl.col("index"),
        _col_or_null(frame, "divergence_cached_text", pl.String).cast(pl.String).alias("cached_text"),
        _col_or_null(frame, "divergence_prompt_text", pl.String).cast(pl.String).alias("prompt_text"),
        _col_or_null(frame, "divergence_token").alias("divergence_token"),
    )
    return (
        losses.join(texts, on=["session", "index"], how="left")
        .filter(pl.col("divergence_token").is_not_null() & (pl.col("tokens_lost") > 0))
        .sort(["tokens_lost", "session", "index"], descending=[True, False, False])
        .head(n)
        .select(
            "session",
            "index",
            "tokens_lost",
            "slot",
            "key",
            _visible(pl.col("cached_text"), width).alias("cached_text"),
            _visible(pl.col("prompt_text"), width).alias("prompt_text"),
        )
    )


# ------------------------------------------------------------------------------ predicted/reported


def predicted_vs_reported(result: AnalysisResult | pl.DataFrame) -> pl.DataFrame:
    """Per request with provider usage: predicted against reported prompt and cached tokens.

    Columns: ``session, index, prompt_tokens, reported_prompt_tokens, predicted_cached_tokens,
    reported_cached_tokens, cached_difference`` (predicted - reported), ``prompt_difference``
    (ours - reported; providers count tool definitions and template tokens we may not see),
    ``hit_ratio`` and ``reported_hit_ratio``. Requests without usage are left out (their count is
    ``requests - reported_requests`` in :func:`hit_ratio_summary`).
    """
    frame = _requests_of(result)
    _need(frame, ("session", "index", "prompt_tokens", "predicted_cached_tokens"), "predicted_vs_reported")
    return (
        frame.filter(_has_reported(frame))
        .select(
            pl.col("session").cast(pl.String),
            pl.col("index"),
            pl.col("prompt_tokens").cast(pl.Int64),
            _col_or_null(frame, "reported_prompt_tokens").cast(pl.Int64),
            pl.col("predicted_cached_tokens").cast(pl.Int64),
            _col_or_null(frame, "reported_cached_tokens").cast(pl.Int64),
        )
        .with_columns(
            (pl.col("predicted_cached_tokens") - pl.col("reported_cached_tokens")).alias("cached_difference"),
            (pl.col("prompt_tokens") - pl.col("reported_prompt_tokens")).alias("prompt_difference"),
            _ratio(pl.col("predicted_cached_tokens"), pl.col("prompt_tokens")).alias("hit_ratio"),
            _ratio(pl.col("reported_cached_tokens"), pl.col("reported_prompt_tokens")).alias(
                "reported_hit_ratio"
            ),
        )
    )


def predicted_vs_reported_summary(
    result: AnalysisResult | pl.DataFrame, *, overall: bool = True
) -> pl.DataFrame:
    """Predicted against reported, aggregated per session (and ``"(all)"``) over requests with usage.

    Columns: ``session, requests, prompt_tokens, reported_prompt_tokens, predicted_cached_tokens,
    reported_cached_tokens, hit_ratio, reported_hit_ratio`` (both token-weighted),
    ``hit_ratio_difference``, ``mean_difference`` and ``mean_abs_error`` (cached tokens per request)
    and ``exact`` (requests where the predicted cached tokens equal the reported ones), and
    ``prompt_exact`` (requests where our prompt token count equals the provider's: the render model and
    tokenizer reproduce what the provider saw).
    """
    pairs = predicted_vs_reported(result)
    aggs = [
        pl.len().cast(pl.Int64).alias("requests"),
        pl.col("prompt_tokens").sum(),
        pl.col("reported_prompt_tokens").sum(),
        pl.col("predicted_cached_tokens").sum(),
        pl.col("reported_cached_tokens").sum(),
        pl.col("cached_difference").mean().alias("mean_difference"),
        pl.col("cached_difference").abs().mean().alias("mean_abs_error"),
        (pl.col("cached_difference") == 0).sum().cast(pl.Int64).alias("exact"),
        (pl.col("prompt_tokens") == pl.col("reported_prompt_tokens"))
        .sum()
        .cast(pl.Int64)
        .alias("prompt_exact"),
    ]
    table = pairs.group_by("session", maintain_order=True).agg(aggs)
    if overall and pairs.height:
        table = pl.concat(
            [table, pairs.select(pl.lit(ALL_SESSIONS).alias("session"), *aggs)], how="vertical_relaxed"
        )
    hit = _ratio(pl.col("predicted_cached_tokens"), pl.col("prompt_tokens"))
    reported = _ratio(pl.col("reported_cached_tokens"), pl.col("reported_prompt_tokens"))
    return table.select(
        "session",
        "requests",
        "prompt_tokens",
        "reported_prompt_tokens",
        "predicted_cached_tokens",
        "reported_cached_tokens",
        hit.alias("hit_ratio"),
        reported.alias("reported_hit_ratio"),
        (hit - reported).alias("hit_ratio_difference"),
        "mean_difference",
        "mean_abs_error",
        "exact",
        "prompt_exact",
    )


# -------------------------------------------------------------------------------------------- prices


def _registry_prices() -> dict[str, ModelPrice]:
    from promptkit.providers.registry import available_providers

    return {m: p for profile in available_providers().values() for m, p in profile.prices.items()}


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
}


def _price_from_mapping(model: str, values: Mapping[str, Any], where: str) -> ModelPrice:
    if not isinstance(values, Mapping):
        raise PriceError(f"{where}: the price of {model!r} must be a mapping of {', '.join(_PRICE_FIELDS)}")
    unknown = sorted(set(values) - {*_PRICE_FIELDS, "provider", "model"})
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
            cache_write_1h=values.get("cache_write_1h") if values.get("cache_write_1h") not in ("",) else None,
        )
    except (TypeError, ValueError) as exc:
        raise PriceError(f"{where}: bad price for {model!r}: {exc}") from exc


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


def _check_cost_arguments(where: str, *, prices: object, model: object, provider: object) -> None:
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
    """The price table as a DataFrame (``provider, model, cache_hit, cache_miss, output, cache_write, cache_write_1h``)."""
    table = resolve_prices(prices)
    return pl.DataFrame([attrs.asdict(p) for p in table.values()], schema=_PRICE_SCHEMA, orient="row")


def load_prices(path: str | Path) -> dict[str, ModelPrice]:
    """Read prices from a JSON or CSV file (USD per million tokens), for ``resolve_prices``.

    JSON: ``{"model-name": {"cache_hit": 0.1, "cache_miss": 1.0, "output": 4.0, "cache_write": 1.25}}``.
    CSV: a header ``model,cache_hit,cache_miss,output`` (optional ``cache_write``, ``provider``).
    Errors name the file (and row).
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


def _lookup_model(name: str, table: Mapping[str, ModelPrice]) -> str | None:
    """The key of ``table`` that prices ``name``: exact, then without a ``provider/`` prefix and
    case, then the longest key that ``name`` starts with (``gpt-4o-2024-08-06`` -> ``gpt-4o``)."""
    if name in table:
        return name
    bare = name.rsplit("/", 1)[-1].lower()
    lowered = {k.lower(): k for k in table}
    if bare in lowered:
        return lowered[bare]
    candidates = [
        k for k in lowered if bare.startswith(k) and bare[len(k) : len(k) + 1] in ("", "-", "@", ":")
    ]
    return lowered[max(candidates, key=len)] if candidates else None


def _provider_name(result: object) -> str | None:
    provider = getattr(result, "provider", None)
    if provider is None or isinstance(provider, str):
        return provider
    name = getattr(provider, "name", None)
    return name if isinstance(name, str) else None


def request_costs(
    result: AnalysisResult | pl.DataFrame,
    *,
    prices: PriceTable | None = None,
    model: str | None = None,
    provider: str | None = None,
) -> pl.DataFrame:
    """Per request: its cost in USD without any cache, with the predicted cache and with the reported one.

    The priced model is ``model`` if given, else the request's ``model`` column (when the log recorded
    it), else the provider profile's ``default_model`` (``provider`` or ``result.provider``).
    Prompt tokens are billed: cached at ``cache_hit``, written to the cache (optional columns
    ``predicted_cache_write_tokens`` / ``reported_cache_write_tokens``) at ``cache_write`` — of which the
    1-hour writes (``*_cache_write_1h_tokens``) at ``cache_write_1h`` — the rest at ``cache_miss``.
    Output tokens (``reported_completion_tokens``, else ``completion_tokens``; 0 and counted in
    ``output_unknown`` when neither is known) at ``output``. The reported figures use the provider's
    own token counts and are null where the log has no usage.

    Raises :class:`PriceError` naming any model without a price.
    """
    frame = _requests_of(result)
    _check_cost_arguments("request_costs", prices=prices, model=model, provider=provider)
    _need(frame, ("session", "index", "prompt_tokens", "predicted_cached_tokens"), "request_costs")
    table = resolve_prices(prices)
    provider = provider or _provider_name(result)
    default = model or (_default_model(provider) if provider else None)
    if model is not None:
        names = pl.lit(model, dtype=pl.String)
    elif "model" in frame.columns:
        names = pl.coalesce(pl.col("model").cast(pl.String), pl.lit(default, dtype=pl.String))
    else:
        names = pl.lit(default, dtype=pl.String)
    work = frame.with_columns(names.alias("_model"))
    requested = work["_model"].unique(maintain_order=True).to_list()
    mapping = {name: _lookup_model(name, table) if name is not None else None for name in requested}
    unpriced = [name for name, key in mapping.items() if key is None]
    if unpriced:
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
    work = work.join(price_rows.drop("provider"), on="_model", how="left", maintain_order="left")
    output = pl.coalesce(
        _col_or_null(frame, "reported_completion_tokens"), _col_or_null(frame, "completion_tokens")
    ).cast(pl.Int64)
    write_price = pl.coalesce(pl.col("cache_write"), pl.col("cache_miss"))
    # Anthropic's 1-hour writes at their own price (cache_write_1h), the rest at cache_write
    write_1h_price = pl.coalesce(pl.col("cache_write_1h"), write_price)

    def prompt_cost(prompt: pl.Expr, cached: pl.Expr, written: pl.Expr, hour: pl.Expr) -> pl.Expr:
        miss = (prompt - cached - written).clip(lower_bound=0)
        hour = pl.min_horizontal(hour, written)
        writes = (written - hour) * write_price + hour * write_1h_price
        return (cached * pl.col("cache_hit") + writes + miss * pl.col("cache_miss")) / _MILLION

    has_reported = _has_reported(frame)
    output_cost = output.fill_null(0) * pl.col("output") / _MILLION
    rp = pl.when(has_reported).then(_col_or_null(frame, "reported_prompt_tokens")).cast(pl.Int64)
    rc = pl.when(has_reported).then(_col_or_null(frame, "reported_cached_tokens")).cast(pl.Int64)
    pw = _col_or_null(frame, "predicted_cache_write_tokens").fill_null(0)
    rw = _col_or_null(frame, "reported_cache_write_tokens").fill_null(0)
    pw1 = _col_or_null(frame, "predicted_cache_write_1h_tokens").fill_null(0)
    rw1 = _col_or_null(frame, "reported_cache_write_1h_tokens").fill_null(0)
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
        pl.when(has_reported).then(rw).cast(pl.Int64).alias("reported_cache_write_tokens"),
        (pl.col("prompt_tokens") * pl.col("cache_miss") / _MILLION + output_cost).alias("cost_no_cache"),
        (prompt_cost(pl.col("prompt_tokens"), pl.col("predicted_cached_tokens"), pw, pw1) + output_cost).alias(
            "cost_predicted"
        ),
        (rp * pl.col("cache_miss") / _MILLION + output_cost).alias("cost_reported_no_cache"),
        (prompt_cost(rp, rc, rw, rw1) + output_cost).alias("cost_reported"),
    )


def cost_summary(
    result: AnalysisResult | pl.DataFrame,
    *,
    prices: PriceTable | None = None,
    model: str | None = None,
    provider: str | None = None,
    by_session: bool = False,
) -> pl.DataFrame:
    """What the calls cost (USD) with the predicted cache, without any cache, and with the reported cache.

    One row per ``basis``: ``"predicted"`` (our token counts, every request) and, when the log has
    usage, ``"reported"`` (the provider's counts, requests with usage only); per model priced (and per
    session with ``by_session``). Columns: ``basis, model, requests, prompt_tokens, cached_tokens,
    cache_write_tokens, output_tokens, output_unknown, cost_without_cache, cost_with_cache, saving``
    (without - with) and ``saving_ratio`` (saving / without). See :func:`request_costs` for pricing.
    """
    costs = request_costs(result, prices=prices, model=model, provider=provider)
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
        )
    )
    table = pl.concat(
        [
            predicted.with_columns(pl.lit("predicted").alias("basis")),
            reported.with_columns(pl.lit("reported").alias("basis")),
        ],
        how="vertical_relaxed",
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
        _ratio(pl.col("cost_without_cache") - pl.col("cost_with_cache"), pl.col("cost_without_cache")).alias(
            "saving_ratio"
        ),
    )


# ------------------------------------------------------------------------------------------- summary

_TITLES: Final[dict[str, str]] = {
    "hit_ratio": "Hit ratio per session (token-weighted)",
    "lost_by_slot": "Tokens lost per slot (anchor / frame role)",
    "lost_by_key": "Tokens lost per contributor key",
    "largest_breaks": "Largest breaks: what the cache held at the first divergent token, and what the prompt sent",
    "predicted_vs_reported": "Predicted vs reported cached tokens (requests with usage)",
    "cost": "Cost in USD (per million-token prices)",
    "problems": "Load problems",
    "notes": "Notes",
}


def summarize(
    result: AnalysisResult | pl.DataFrame,
    *,
    prices: PriceTable | None = None,
    model: str | None = None,
    provider: str | None = None,
) -> dict[str, pl.DataFrame]:
    """Every summary table of an analysis, by name, in reading order.

    Keys: ``hit_ratio``, ``lost_by_slot``, ``lost_by_key``, ``largest_breaks``, ``predicted_vs_reported`` (empty when the
    log has no usage), ``cost``, ``problems`` (the load problems, ``file, line, reason``) and
    ``notes`` (``table, note``: what a table could not show and why, e.g. a model without a price;
    in that case ``cost`` is empty).
    """
    _check_cost_arguments("summarize", prices=prices, model=model, provider=provider)
    notes: list[dict[str, str]] = []
    tables: dict[str, pl.DataFrame] = {
        "hit_ratio": hit_ratio_summary(result),
        "lost_by_slot": tokens_lost_by_slot(result),
        "lost_by_key": tokens_lost_by_key(result),
        "largest_breaks": largest_breaks(result),
        "predicted_vs_reported": predicted_vs_reported_summary(result),
    }
    if tables["predicted_vs_reported"].height == 0:
        notes.append({"table": "predicted_vs_reported", "note": "the input has no provider usage figures"})
    try:
        tables["cost"] = cost_summary(result, prices=prices, model=model, provider=provider)
    except PriceError as exc:
        tables["cost"] = pl.DataFrame()
        notes.append({"table": "cost", "note": str(exc)})
    problems = getattr(result, "problems", None)
    tables["problems"] = (
        problems
        if isinstance(problems, pl.DataFrame)
        else pl.DataFrame(schema={"file": pl.String, "line": pl.Int64, "reason": pl.String})
    )
    notes += [{"table": "analysis", "note": str(note)} for note in getattr(result, "notes", None) or ()]
    tables["notes"] = pl.DataFrame(notes, schema={"table": pl.String, "note": pl.String})
    return tables


#: Short column headers for the terminal (the DataFrames keep their full, descriptive names).
_SHORT: Final[dict[str, str]] = {
    "prompt_exact": "=prompt",
    "requests": "reqs",
    "prompt_tokens": "prompt",
    "predicted_cached_tokens": "cached",
    "cached_tokens": "cached",
    "hit_ratio": "hit",
    "reported_requests": "rep reqs",
    "reported_prompt_tokens": "rep prompt",
    "reported_cached_tokens": "rep cached",
    "reported_hit_ratio": "rep hit",
    "hit_ratio_difference": "Δhit",
    "mean_difference": "mean Δ",
    "mean_abs_error": "MAE",
    "tokens_lost": "lost",
    "mean_lost": "mean lost",
    "cache_write_tokens": "written",
    "output_tokens": "output",
    "output_unknown": "out unknown",
    "cost_without_cache": "$ no cache",
    "cost_with_cache": "$ with cache",
    "saving": "$ saved",
    "saving_ratio": "saved",
}
#: What each column header of the text tables means (the short header, or the full name where it is
#: shown unshortened). ``promptkit analyze`` prints the entries for the headers it showed.
COLUMN_LEGEND: Final[dict[str, str]] = {
    "session": "the conversation or agent run the requests belong to; (all) sums every session",
    "index": "the request's position in its session (0 = first call)",
    "reqs": "requests (calls) counted in the row",
    "prompt": "prompt tokens as promptkit counts them (rendered and tokenized like the provider)",
    "cached": "prompt tokens the provider's cache rules predict are read from the cache",
    "hit": "hit ratio: cached / prompt tokens, summed over the row's requests (token-weighted)",
    "rep reqs": "requests whose log holds the provider's usage (rep = reported by the provider)",
    "rep prompt": "prompt tokens the provider reported",
    "rep cached": "cached tokens the provider reported",
    "rep hit": "hit ratio the provider reported: rep cached / rep prompt",
    "Δhit": "hit - rep hit: predicted minus reported hit ratio (positive = we predict more hits)",
    "mean Δ": "mean of predicted - reported cached tokens per request",
    "MAE": "mean absolute error: mean |predicted - reported| cached tokens per request",
    "exact": "requests whose predicted cached tokens equal the reported ones",
    "=prompt": "requests whose prompt token count equals the provider's (the rendering is exact)",
    "slot": "where the prompt first differed from what the cache held: a layout anchor or frame role, else "
    "the message role; 'cold start' = a session's first request, '(new tokens)' = nothing changed, "
    "only tokens appended since were not cached",
    "key": "the contributor key that produced the message at the first difference (else the slot)",
    "lost": "tokens lost: prompt - cached, billed at the cache-miss price",
    "mean lost": "tokens lost per request charged to the row",
    "share": "share of every token lost",
    "cached_text": "what the cache held from the first differing token on (⏎ = newline, → = tab)",
    "prompt_text": "what the prompt sent there instead",
    "basis": "predicted: our token counts, every request; reported: the provider's, requests with usage",
    "model": "the model the calls are priced as",
    "written": "prompt tokens written to the cache (billed at the cache-write price)",
    "output": "output (completion) tokens",
    "out unknown": "requests whose output tokens are unknown (priced as 0)",
    "$ no cache": "cost in USD if nothing were cached",
    "$ with cache": "cost in USD with the cached tokens at the cache-hit price",
    "$ saved": "$ no cache - $ with cache",
    "saved": "$ saved / $ no cache",
}


def format_legend(tables: Mapping[str, pl.DataFrame]) -> str:
    """The legend of every column header :func:`format_summary` shows for ``tables`` (one line each).

    >>> import polars as pl
    >>> print(format_legend({"hit_ratio": pl.DataFrame({"session": ["a"], "hit_ratio": [0.5]})}))
    Columns:
      session  the conversation or agent run the requests belong to; (all) sums every session
      hit      hit ratio: cached / prompt tokens, summed over the row's requests (token-weighted)
    """
    shown: list[str] = []
    for name, frame in tables.items():
        if name in ("problems", "notes") or frame.height == 0:
            continue
        shown += [c for c in _for_display(frame).columns if c not in shown]
    meaning = {c: COLUMN_LEGEND[c] for c in shown if c in COLUMN_LEGEND}
    meaning |= {c: f"tokens lost to the miss cause '{c[5:]}'" for c in shown if c.startswith("lost_")}
    if not meaning:
        return ""
    width = max(len(c) for c in meaning)
    return "\n".join(["Columns:"] + [f"  {c:<{width}}  {text}" for c, text in meaning.items()])


_DECIMALS: Final[dict[str, int]] = {
    "mean_lost": 1,
    "mean_difference": 1,
    "mean_abs_error": 1,
    "cost_without_cache": 6,
    "cost_with_cache": 6,
    "saving": 6,
}


#: Columns left out of the terminal rendering when they are 0 on every row.
_HIDE_WHEN_ZERO: Final[tuple[str, ...]] = ("cache_write_tokens", "output_unknown")


#: Longest string shown whole in a terminal cell; longer ones keep their head and tail around "…".
_MAX_CELL: Final[int] = 24


#: Excerpt columns, already cut at their end by :func:`largest_breaks` (not shortened in the middle).
_TEXT_COLUMNS: Final[frozenset[str]] = frozenset({"cached_text", "prompt_text"})


def _shorten(column: str) -> pl.Expr:
    head, tail = _MAX_CELL // 2 - 1, _MAX_CELL // 2
    value = pl.col(column)
    return (
        pl.when(value.str.len_chars() > _MAX_CELL)
        .then(value.str.head(head) + "…" + value.str.tail(tail))
        .otherwise(value)
        .alias(column)
    )


def _for_display(frame: pl.DataFrame) -> pl.DataFrame:
    frame = frame.drop(
        [c for c in _HIDE_WHEN_ZERO if c in frame.columns and not (frame[c].fill_null(0) != 0).any()]
    )
    frame = frame.with_columns(
        _shorten(c) for c, dtype in frame.schema.items() if dtype == pl.String and c not in _TEXT_COLUMNS
    )
    rounded = [
        pl.col(c).round(_DECIMALS.get(c, 4))
        for c, dtype in frame.schema.items()
        if dtype in (pl.Float32, pl.Float64)
    ]
    return frame.with_columns(rounded).rename({c: _SHORT[c] for c in frame.columns if c in _SHORT})


def table_config(width: int = 120, rows: int = 30) -> pl.Config:
    """A ``polars.Config`` context that prints summary tables readably in a terminal ``width`` wide.

    >>> import polars as pl
    >>> with table_config(100):
    ...     text = str(pl.DataFrame({"a": [1]}))
    """
    return pl.Config(
        tbl_width_chars=width,
        tbl_cols=-1,
        tbl_rows=rows,
        tbl_hide_column_data_types=True,
        tbl_hide_dataframe_shape=True,
        tbl_cell_numeric_alignment="RIGHT",
        fmt_str_lengths=60,
        thousands_separator=",",
        tbl_formatting="UTF8_FULL_CONDENSED",
    )


def _where(file: object, line: object) -> str:
    where = str(file) if file is not None else "(input)"
    return f"{where}:{line}" if line is not None else where


def format_summary(
    tables: Mapping[str, pl.DataFrame], *, width: int = 120, rows: int = 30, max_problems: int = 5
) -> str:
    """The tables of :func:`summarize` as titled text blocks for a terminal ``width`` characters wide.

    Load problems print as a count and the first ``max_problems``; notes say what a table lacks.
    """
    blocks: list[str] = []
    with table_config(_UNBOUNDED, rows):
        for name, frame in tables.items():
            title = _TITLES.get(name, name)
            if name == "problems":
                if frame.height == 0:
                    blocks.append(f"{title}: none")
                    continue
                shown = min(frame.height, max_problems)
                lines = [f"{title}: {frame.height} (first {shown} shown)"]
                lines += [
                    f"  {_where(row.get('file'), row.get('line'))}: {row.get('reason')}"
                    for row in frame.head(max_problems).iter_rows(named=True)
                ]
                blocks.append("\n".join(lines))
                continue
            if name == "notes":
                if frame.height:
                    blocks.append("\n".join([f"{title}:"] + [f"  {t}: {n}" for t, n in frame.iter_rows()]))
                continue
            if frame.height == 0:
                blocks.append(f"{title}: (nothing to show)")
                continue
            blocks.append(f"{title}\n{_fit(_for_display(frame), width)}")
    return "\n\n".join(blocks) + "\n"


_UNBOUNDED: Final[int] = 10_000


def _width(frame: pl.DataFrame) -> int:
    return max(len(line) for line in str(frame).splitlines())


def _fit(frame: pl.DataFrame, width: int) -> str:
    """The table as text no wider than ``width`` where possible: a table too wide is split into
    column groups that each repeat the leading label columns, rather than wrapping cells mid-number."""
    if _width(frame) <= width:
        return str(frame)
    labels: list[str] = []
    for column, dtype in frame.schema.items():
        if dtype != pl.String:
            break
        labels.append(column)
    rest = [c for c in frame.columns if c not in labels]
    groups: list[list[str]] = [[]]
    for column in rest:
        trial = [*groups[-1], column]
        if groups[-1] and _width(frame.select(*labels, *trial)) > width:
            groups.append([column])
        else:
            groups[-1] = trial
    return "\n".join(str(frame.select(*labels, *group)) for group in groups)
