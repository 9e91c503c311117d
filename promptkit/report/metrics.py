"""The metrics of an analysis as polars frames: hit ratios, losses by slot and contributor, the largest
breaks, predicted against reported. Nothing here prints."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

import polars as pl

from promptkit.analysis.columns import REQUEST_COLUMNS as REQUEST_COLUMNS_ALL
from promptkit.errors import ReportInputError

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.analysis.result import AnalysisResult

__all__ = [
    "ALL_SESSIONS",
    "COLD_START",
    "MILLION",
    "NEW_TOKENS",
    "NO_LAYOUT",
    "REQUEST_COLUMNS",
    "attribute_losses",
    "col_or_null",
    "has_reported",
    "hit_ratio_summary",
    "largest_breaks",
    "lost_by",
    "need_columns",
    "predicted_vs_reported",
    "predicted_vs_reported_summary",
    "ratio_expr",
    "requests_of",
    "tokens_lost_by_key",
    "tokens_lost_by_slot",
    "visible_text",
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

MILLION: Final[float] = 1_000_000.0


# --------------------------------------------------------------------------------------------- input


def requests_of(result: AnalysisResult | pl.DataFrame) -> pl.DataFrame:
    if isinstance(result, pl.DataFrame):
        return result
    requests = getattr(result, "requests", None)
    if not isinstance(requests, pl.DataFrame):
        raise ReportInputError(
            f"expected an AnalysisResult or its requests DataFrame, got {type(result).__name__}"
        )
    return requests


def need_columns(frame: pl.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ReportInputError(
            f"{what} needs the request column(s) {', '.join(missing)}; the frame has {', '.join(frame.columns)}"
        )


def col_or_null(frame: pl.DataFrame, name: str, dtype: Any = pl.Int64) -> pl.Expr:
    """The column ``name`` if the frame has it, else a null column of ``dtype``."""
    if name in frame.columns:
        return pl.col(name)
    return pl.lit(None, dtype=dtype).alias(name)


def ratio_expr(numerator: pl.Expr, denominator: pl.Expr) -> pl.Expr:
    """``numerator / denominator`` as Float64, null where the denominator is 0 or null."""
    return pl.when(denominator > 0).then(numerator.cast(pl.Float64) / denominator).otherwise(None)


def has_reported(frame: pl.DataFrame) -> pl.Expr:
    return (
        col_or_null(frame, "reported_cached_tokens").is_not_null()
        & col_or_null(frame, "reported_prompt_tokens").is_not_null()
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
    frame = requests_of(result)
    need_columns(frame, ("session", "prompt_tokens", "predicted_cached_tokens"), "hit_ratio_summary")
    reported = has_reported(frame)
    base = frame.select(
        pl.col("session").cast(pl.String),
        pl.col("prompt_tokens").cast(pl.Int64),
        pl.col("predicted_cached_tokens").cast(pl.Int64),
        reported.alias("_reported"),
        pl.when(reported).then(col_or_null(frame, "reported_prompt_tokens")).cast(pl.Int64).alias("_rp"),
        pl.when(reported).then(col_or_null(frame, "reported_cached_tokens")).cast(pl.Int64).alias("_rc"),
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
        ratio_expr(pl.col("predicted_cached_tokens"), pl.col("prompt_tokens")).alias("hit_ratio"),
        "reported_requests",
        pl.when(pl.col("reported_requests") > 0)
        .then(pl.col("reported_prompt_tokens"))
        .alias("reported_prompt_tokens"),
        pl.when(pl.col("reported_requests") > 0)
        .then(pl.col("reported_cached_tokens"))
        .alias("reported_cached_tokens"),
        ratio_expr(pl.col("reported_cached_tokens"), pl.col("reported_prompt_tokens")).alias(
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
    frame = requests_of(result)
    need_columns(frame, ("session", "index", "prompt_tokens", "predicted_cached_tokens"), "attribute_losses")
    first = pl.col("index") == pl.col("index").min().over("session")
    anchor = col_or_null(frame, "divergence_anchor", pl.String).cast(pl.String)
    role = col_or_null(frame, "divergence_role", pl.String).cast(pl.String)
    key = col_or_null(frame, "divergence_key", pl.String).cast(pl.String)
    diverged = pl.any_horizontal(
        col_or_null(frame, c).is_not_null() for c in ("divergence_message", "divergence_token")
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


def lost_by(result: AnalysisResult | pl.DataFrame, keys: list[str]) -> pl.DataFrame:
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
    return lost_by(result, ["slot"])


def tokens_lost_by_key(result: AnalysisResult | pl.DataFrame) -> pl.DataFrame:
    """Tokens lost per contributor key (with its slot), largest loss first; see :func:`tokens_lost_by_slot`."""
    return lost_by(result, ["slot", "key"])


def visible_text(text: pl.Expr, limit: int) -> pl.Expr:
    """``text`` on one line (newlines and tabs shown as ⏎ and →), cut to ``limit`` characters."""
    one_line = text.str.replace_all("\n", "⏎", literal=True).str.replace_all("\t", "→", literal=True)
    return (
        pl.when(one_line.str.len_chars() > limit)
        .then(one_line.str.slice(0, limit - 1) + "…")
        .otherwise(one_line)
    )


#: What a break inside a head the log does not record says, in words (see :mod:`promptkit.formats.opaque_head`).
OPAQUE_CHANGE: Final[str] = (
    "inside the opaque head: the log does not record that text, so what changed cannot be shown"
)


#: What a break says when the cache held no entry whose text could be shown at the divergence.
NO_CACHED_TEXT: Final[str] = (
    "the prompt differs from the previous request here, but the cache held no entry at that point to show"
)


def changed_values(frame: pl.DataFrame) -> pl.Expr:
    """What changed at a break, for a reader: the changed values side by side (``09:02 → 09:04``, from
    ``change_detail``), the change in words for a head the log cannot show (an opaque head) or a
    compaction (``40 -> 12 messages``), else the change detail as the analysis gives it."""
    detail = col_or_null(frame, "change_detail", pl.String).cast(pl.String)
    change = col_or_null(frame, "change_class", pl.String).cast(pl.String)
    cached = col_or_null(frame, "divergence_cached_text", pl.String).cast(pl.String)
    prompt = col_or_null(frame, "divergence_prompt_text", pl.String).cast(pl.String)
    pair = detail.str.extract_groups(r"'(?P<old>[^']*)' -> '(?P<new>[^']*)'$")
    opaque = cached.str.starts_with("<opaque-head>").fill_null(False) | prompt.str.starts_with(
        "<opaque-head>"
    ).fill_null(False)
    return (
        pl.when(opaque)
        .then(pl.lit(OPAQUE_CHANGE))
        .when(pair.struct.field("old").is_not_null())
        .then(pair.struct.field("old") + " → " + pair.struct.field("new"))
        .when(change.is_not_null() & detail.is_not_null())
        .then(change.str.replace_all("_", " ") + ": " + detail.str.replace(r"^[a-z_]+: ", ""))
        .when(change.is_not_null())
        .then(change.str.replace_all("_", " "))
        .when(cached.is_null() & col_or_null(frame, "divergence_token").is_not_null())
        .then(pl.lit(NO_CACHED_TEXT))
    )


def _word_start(text: pl.Expr, width: int) -> pl.Expr:
    """The last ``width`` characters of ``text``, starting at a word: when the cut falls inside a word
    (the character before it and the first one kept are both not spaces) the partial word is dropped,
    unless nothing but it would be left (a text without spaces, such as Chinese, is cut as it is)."""
    cut = text.str.slice(-width)
    before = text.str.slice(-(width + 1), 1)
    inside = ~before.str.contains(r"^\s$") & cut.str.contains(r"^\S") & cut.str.contains(r"\S\s+\S")
    return pl.when(inside).then(cut.str.replace(r"^\S+\s+", "")).otherwise(cut)


def largest_breaks(result: AnalysisResult | pl.DataFrame, *, n: int = 10, width: int = 32) -> pl.DataFrame:
    """The ``n`` requests that lost the most tokens at a divergence, with what broke the prefix.

    Columns: ``session, index, tokens_lost, slot, key`` (as in :func:`attribute_losses`),
    ``before_text`` (the text just before the divergence, the same in both: the engine's
    ``divergence_context_text``, its last ``width`` characters), ``cached_text`` / ``prompt_text``: the
    tokens the cache held at the first divergent token and the tokens the prompt sent instead (the
    engine's ``divergence_cached_text`` / ``divergence_prompt_text``, on one line, cut to ``width``
    characters), and ``changed``: :func:`changed_values` (``09:02 → 09:04``; a change the log cannot
    show said in words). Requests that did not diverge (a cold start, or a prompt that only appended to
    what was cached) are not listed.
    """
    frame = requests_of(result)
    losses = attribute_losses(frame)
    texts = frame.select(
        pl.col("session").cast(pl.String),
        pl.col("index"),
        col_or_null(frame, "divergence_context_text", pl.String).cast(pl.String).alias("before_text"),
        col_or_null(frame, "divergence_cached_text", pl.String).cast(pl.String).alias("cached_text"),
        col_or_null(frame, "divergence_prompt_text", pl.String).cast(pl.String).alias("prompt_text"),
        col_or_null(frame, "divergence_token").alias("divergence_token"),
        changed_values(frame).alias("changed"),
    )
    one_line = (
        pl.col("before_text")
        .str.replace_all("\n", "⏎", literal=True)
        .str.replace_all("\t", "→", literal=True)
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
            pl.when(one_line.str.len_chars() > width)
            .then("…" + _word_start(one_line, width - 1))
            .otherwise(one_line)
            .alias("before_text"),
            visible_text(pl.col("cached_text"), width).alias("cached_text"),
            visible_text(pl.col("prompt_text"), width).alias("prompt_text"),
            "changed",
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
    frame = requests_of(result)
    need_columns(
        frame, ("session", "index", "prompt_tokens", "predicted_cached_tokens"), "predicted_vs_reported"
    )
    return (
        frame.filter(has_reported(frame))
        .select(
            pl.col("session").cast(pl.String),
            pl.col("index"),
            pl.col("prompt_tokens").cast(pl.Int64),
            col_or_null(frame, "reported_prompt_tokens").cast(pl.Int64),
            pl.col("predicted_cached_tokens").cast(pl.Int64),
            col_or_null(frame, "reported_cached_tokens").cast(pl.Int64),
        )
        .with_columns(
            (pl.col("predicted_cached_tokens") - pl.col("reported_cached_tokens")).alias("cached_difference"),
            (pl.col("prompt_tokens") - pl.col("reported_prompt_tokens")).alias("prompt_difference"),
            ratio_expr(pl.col("predicted_cached_tokens"), pl.col("prompt_tokens")).alias("hit_ratio"),
            ratio_expr(pl.col("reported_cached_tokens"), pl.col("reported_prompt_tokens")).alias(
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
    hit = ratio_expr(pl.col("predicted_cached_tokens"), pl.col("prompt_tokens"))
    reported = ratio_expr(pl.col("reported_cached_tokens"), pl.col("reported_prompt_tokens"))
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
