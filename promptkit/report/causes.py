"""Tables over :func:`promptkit.analysis.causes.explain_causes`: by cause, by slot / contributor, by class
of change; cache-write accounting (5-minute and 1-hour writes, waste, the reads invariant); the
provider's own diagnostics beside ours; the one-line headline; the CI gate; the volatile-value lint.

Every function returns a polars DataFrame (or a string for the headline); nothing prints.

Example::

    >>> from promptkit.analysis.api import analyze_requests
    >>> a = {"messages": [{"role": "system", "content": "Date: 2026-12-03. Be terse."},
    ...                   {"role": "user", "content": "hi"}]}
    >>> b = {"messages": [{"role": "system", "content": "Date: 2026-12-04. Be terse."},
    ...                   {"role": "user", "content": "hi"}]}
    >>> r = analyze_requests([a, b], provider="exact")
    >>> causes_by_cause(r).row(0, named=True)["cause"]
    'cold_start'
    >>> lint(r)["kind"].to_list()
    ['date']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs
import polars as pl

from promptkit.analysis.causes import (
    CAUSES,
    CHANGE_CLASSES,
    HEAD_CHANGES,
    INHERENT_CAUSES,
    LAYOUT_CAUSES,
    PROVIDER_CAUSES,
)
from promptkit.report._later_reads import reads_within
from promptkit.report.metrics import requests_of
from promptkit.report.pricing import ModelPrice

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.analysis.result import AnalysisResult

__all__ = [
    "LINT_COLUMNS",
    "GateResult",
    "cause_columns",
    "causes_basis",
    "causes_by_cause",
    "causes_by_change",
    "causes_by_slot",
    "causes_headline",
    "causes_table",
    "check_gate",
    "diagnostics_comparison",
    "lint",
    "lost_by_cause",
    "reads_invariant",
    "write_accounting",
]

#: Seconds an Anthropic 5-minute / 1-hour write lives unread.
TTL_5M: Final[float] = 300.0
TTL_1H: Final[float] = 3600.0

#: The prefix of a requests frame's per-cause loss columns (``lost_ttl``, ``lost_edit``, ...).
_CAUSE_PREFIX: Final[str] = "lost_"

_GROUP: Final[Mapping[str, str]] = {
    **{c: "layout" for c in LAYOUT_CAUSES},
    **{c: "provider" for c in PROVIDER_CAUSES},
    **{c: "inherent" for c in INHERENT_CAUSES},
    "unexplained": "unexplained",
}


def _causes(result: AnalysisResult | pl.DataFrame) -> pl.DataFrame:
    if isinstance(result, pl.DataFrame):
        return result
    return result.causes


def causes_by_cause(result: AnalysisResult | pl.DataFrame) -> pl.DataFrame:
    """Uncached tokens per cause over every request, largest first, causes with no token left out.

    Columns: ``cause, group`` (``layout``, ``provider``, ``inherent``, ``unexplained``), ``requests``
    (requests that lost tokens to it), ``tokens_lost``, ``share`` (of every uncached token).
    ``result`` is an analysis or the frame of :func:`~promptkit.analysis.causes.explain_causes`.
    """
    causes = _causes(result)
    total = int(causes["uncached_tokens"].sum()) if causes.height else 0
    rows = []
    for cause in CAUSES:
        col = causes[f"lost_{cause}"]
        lost = int(col.sum())
        if lost == 0:
            continue
        rows.append(
            {
                "cause": cause,
                "group": _GROUP[cause],
                "requests": int((col != 0).sum()),
                "tokens_lost": lost,
                "share": lost / total if total else None,
            }
        )
    schema = {
        "cause": pl.String,
        "group": pl.String,
        "requests": pl.Int64,
        "tokens_lost": pl.Int64,
        "share": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row").sort(
        ["tokens_lost", "cause"], descending=[True, False]
    )


def _layout_lost(causes: pl.DataFrame) -> pl.Expr:
    return pl.sum_horizontal(pl.col(f"lost_{c}") for c in LAYOUT_CAUSES)


def causes_by_slot(result: AnalysisResult | pl.DataFrame) -> pl.DataFrame:
    """Tokens lost to prefix changes per slot (anchor, or message role without a layout) and
    contributor key, largest first. Columns: ``slot, key, requests, tokens_lost, classes`` (the
    classes of change seen there, comma-separated)."""
    causes = _causes(result)
    lost = causes.with_columns(_layout_lost(causes).alias("_lost")).filter(pl.col("_lost") > 0)
    return (
        lost.group_by(
            pl.col("cause_slot").fill_null("(model / tools)").alias("slot"), pl.col("cause_key").alias("key")
        )
        .agg(
            pl.len().cast(pl.Int64).alias("requests"),
            pl.col("_lost").sum().cast(pl.Int64).alias("tokens_lost"),
            pl.col("change_class").drop_nulls().unique().sort().str.join(", ").alias("classes"),
        )
        .sort(["tokens_lost", "slot"], descending=[True, False])
    )


def causes_by_change(result: AnalysisResult | pl.DataFrame) -> pl.DataFrame:
    """Tokens lost per class of change (:data:`~promptkit.analysis.causes.CHANGE_CLASSES`), with the
    first example's detail. Columns: ``change_class, requests, tokens_lost, example``."""
    causes = _causes(result)
    rows = []
    for cls in CHANGE_CLASSES:
        hit = causes.filter(pl.col(f"lost_{cls}") > 0)
        if hit.height == 0:
            continue
        rows.append(
            {
                "change_class": cls,
                "requests": hit.height,
                "tokens_lost": int(hit[f"lost_{cls}"].sum()),
                "example": hit["change_detail"][0],
            }
        )
    schema = {"change_class": pl.String, "requests": pl.Int64, "tokens_lost": pl.Int64, "example": pl.String}
    return pl.DataFrame(rows, schema=schema, orient="row").sort("tokens_lost", descending=True)


def causes_headline(result: AnalysisResult | pl.DataFrame) -> str:
    """One line: how much of the prompt was lost to the user's own layout, to the provider, to what
    no layout avoids, and (whenever it is not zero) how much no cause explains.

    Example::

        >>> import polars as pl
        >>> from promptkit.analysis.causes import CAUSES
        >>> row = {"prompt_tokens": 1000, "uncached_tokens": 300, **{f"lost_{c}": 0 for c in CAUSES}}
        >>> row.update(lost_volatile_value=200, lost_provider_miss=100)
        >>> causes_headline(pl.DataFrame([row]))
        'Lost to your layout: 200 tokens (20.0% of the prompt); to the provider: 100 (10.0%); inherent (cold start, new tokens): 0 (0.0%)'
    """
    causes = _causes(result)
    prompt = int(causes["prompt_tokens"].sum()) if causes.height else 0

    def part(group: Sequence[str]) -> tuple[int, str]:
        n = int(sum(int(causes[f"lost_{c}"].sum()) for c in group)) if causes.height else 0
        return n, f"{100 * n / prompt:.1f}%" if prompt else "n/a"

    (lay, lay_p), (prov, prov_p), (inh, inh_p), (unx, unx_p) = (
        part(LAYOUT_CAUSES),
        part(PROVIDER_CAUSES),
        part(INHERENT_CAUSES),
        part(("unexplained",)),
    )
    line = (
        f"Lost to your layout: {lay:,} tokens ({lay_p} of the prompt); to the provider: {prov:,} ({prov_p}); "
        f"inherent (cold start, new tokens): {inh:,} ({inh_p})"
    )
    # shown whenever it is not zero: what the log cannot attribute (our rendering against the provider's)
    return line + (f"; unexplained: {unx:,} ({unx_p})" if unx else "")


def causes_basis(result: AnalysisResult | pl.DataFrame) -> str:
    """The basis of :func:`causes_headline` and :func:`causes_by_cause` in words: ``reported`` (the
    provider's usage, every request has it), ``predicted`` (promptkit's cache rules, no request has it),
    or both and on how many requests each.

    Example::

        >>> import polars as pl
        >>> causes_basis(pl.DataFrame({"basis": ["reported", "predicted", "reported"]}))
        'reported where the log has usage (2 of 3 requests), else predicted'
        >>> causes_basis(pl.DataFrame({"basis": ["predicted"]}))
        "predicted, promptkit's cache rules (the log reports no usage)"
    """
    causes = _causes(result)
    n = causes.height
    reported = int((causes["basis"] == "reported").sum()) if n else 0
    if n and reported == n:
        return f"reported, the provider's usage on {n:,} of {n:,} requests"
    if reported == 0:
        return "predicted, promptkit's cache rules (the log reports no usage)"
    return f"reported where the log has usage ({reported:,} of {n:,} requests), else predicted"


# ---------------------------------------------------------------------------------- cache writes

_WRITE_COLUMNS: Final = (
    "write_5m_tokens", "write_1h_tokens", "read_later_tokens", "wasted_5m_tokens", "wasted_1h_tokens",
)  # fmt: skip


def write_accounting(
    result: AnalysisResult | pl.DataFrame, *, price: ModelPrice | None = None
) -> pl.DataFrame:
    """Cache writes per request: 5-minute and 1-hour, their cost, and the writes never read before expiry.

    Writes are the reported ones (``reported_cache_write_tokens`` / ``reported_cache_write_1h_tokens``)
    where the log has them, else the predicted ones. A write of call *n* covers the prompt from its
    cached point on; it is *read* when a later call of the session reads past that point within the
    write's TTL (5 minutes; 1 hour for the 1-hour part, which comes first in the prompt). What no call
    read in time is ``wasted_*``. With ``price``, ``write_cost`` prices the 5-minute part at
    ``cache_write`` and the 1-hour part at ``cache_write_1h`` (USD) and ``wasted_cost`` the waste, each
    at the band of the request's prompt length where the price has bands (:meth:`ModelPrice.band`: the
    reported prompt tokens, else the counted ones).

    Columns: ``session, index, basis, write_5m_tokens, write_1h_tokens, read_later_tokens,
    wasted_5m_tokens, wasted_1h_tokens`` (and ``write_cost, wasted_cost`` with a price).
    """
    frame = result if isinstance(result, pl.DataFrame) else result.requests
    frame = frame.sort("session", "index", maintain_order=True)

    def column(name: str) -> list[Any]:  # a column the frame may lack: None on every row
        return frame[name].to_list() if name in frame.columns else [None] * frame.height

    sessions, times = column("session"), column("timestamp")
    reported_reads, predicted_reads = column("reported_cached_tokens"), column("predicted_cached_tokens")
    reads = [
        int(rc) if rc is not None else int(pc) for rc, pc in zip(reported_reads, predicted_reads, strict=True)
    ]
    reported, reported_1h = column("reported_cache_write_tokens"), column("reported_cache_write_1h_tokens")
    predicted, predicted_1h = (
        column("predicted_cache_write_tokens"),
        column("predicted_cache_write_1h_tokens"),
    )
    within = {ttl: _within_by_session(sessions, times, reads, ttl) for ttl in (TTL_1H, TTL_5M)}
    reported_prompts, prompts = column("reported_prompt_tokens"), column("prompt_tokens")
    costs = ("write_cost", "wasted_cost") if price is not None else ()
    out: dict[str, list[Any]] = {"session": sessions, "index": column("index")}
    out |= {name: [] for name in ("basis", *_WRITE_COLUMNS, *costs)}
    for k, start in enumerate(reads):
        rw = reported[k]
        if rw is not None:
            out["basis"].append("reported")
            total = int(rw)
            hour = int(reported_1h[k] or 0)
        else:
            out["basis"].append("predicted")
            total = int(predicted[k] or 0)
            hour = int(predicted_1h[k] or 0)
        hour = min(hour, total)
        five = total - hour
        read_1h = min(max(0, within[TTL_1H][k] - start), hour)
        read_5m = min(max(0, within[TTL_5M][k] - start - hour), five)
        out["write_5m_tokens"].append(five)
        out["write_1h_tokens"].append(hour)
        out["read_later_tokens"].append(read_1h + read_5m)
        out["wasted_5m_tokens"].append(five - read_5m)
        out["wasted_1h_tokens"].append(hour - read_1h)
        if price is not None:
            length = reported_prompts[k] if reported_prompts[k] is not None else prompts[k]
            band = price.band(None if length is None else int(length))
            p5 = band.cache_write if band.cache_write is not None else band.cache_miss
            p1 = band.cache_write_1h if band.cache_write_1h is not None else p5
            out["write_cost"].append((five * p5 + hour * p1) / 1e6)
            out["wasted_cost"].append(((five - read_5m) * p5 + (hour - read_1h) * p1) / 1e6)
    schema: dict[str, Any] = {
        "session": pl.String, "index": pl.Int64, "basis": pl.String, "write_5m_tokens": pl.Int64,
        "write_1h_tokens": pl.Int64, "read_later_tokens": pl.Int64, "wasted_5m_tokens": pl.Int64,
        "wasted_1h_tokens": pl.Int64,
    }  # fmt: skip
    if price is not None:
        schema |= {"write_cost": pl.Float64, "wasted_cost": pl.Float64}
    return pl.DataFrame(out, schema=schema)


def _within_by_session(
    sessions: Sequence[str], times: Sequence[float | None], reads: Sequence[int], ttl: float
) -> list[int]:
    """:func:`~promptkit.report._later_reads.reads_within` of every row, each session's rows (consecutive:
    the frame is sorted by session) read as one session."""
    out: list[int] = []
    start = 0
    for end in range(1, len(sessions) + 1):
        if end == len(sessions) or sessions[end] != sessions[start]:
            out += reads_within(times[start:end], reads[start:end], ttl)
            start = end
    return out


def reads_invariant(result: AnalysisResult, *, tolerance: int = 0) -> pl.DataFrame:
    """The per-session check ``reads(n) ≈ reads(n-1) + writes(n-1)`` on reported usage, each break named.

    A provider that reports writes (Anthropic) should read at call *n* what call *n-1* read plus what
    it wrote, when the prompt only grew. One row per call where the reads fall short by more than
    ``tolerance`` tokens (a full-prefix rewrite, an expiry, a change) or exceed it (a head shared with
    another session). Columns: ``session, index, expected_reads, reads, shortfall`` (expected - reads),
    ``cause`` (the largest cause of the call, from :func:`~promptkit.analysis.causes.explain_causes`),
    ``change_detail``, ``gap_seconds``.
    """
    causes = result.causes.select("session", "index", "cause", "change_detail", "gap_seconds")
    frame = result.requests.sort("session", "index", maintain_order=True)
    has = frame.filter(
        pl.col("reported_cache_write_tokens").is_not_null() & pl.col("reported_cached_tokens").is_not_null()
    )
    checked = has.with_columns(
        (
            pl.col("reported_cached_tokens").shift(1).over("session")
            + pl.col("reported_cache_write_tokens").shift(1).over("session")
        ).alias("expected_reads"),
    ).filter(pl.col("expected_reads").is_not_null())
    breaks = checked.with_columns(
        (pl.col("expected_reads") - pl.col("reported_cached_tokens")).alias("shortfall")
    ).filter(pl.col("shortfall").abs() > tolerance)
    return (
        breaks.select(
            "session", "index", "expected_reads", pl.col("reported_cached_tokens").alias("reads"), "shortfall"
        )
        .join(causes, on=["session", "index"], how="left", maintain_order="left")
        .with_columns(pl.col("expected_reads").cast(pl.Int64), pl.col("shortfall").cast(pl.Int64))
    )


#: Anthropic's cache-diagnostics reason → the cause classes it corresponds to.
_DIAGNOSTIC_CLASSES: Final[Mapping[str, frozenset[str]]] = {
    "model_changed": frozenset({"model_switch"}),
    "system_changed": frozenset({"system_changed", "volatile_value", "whitespace", "reordered"}),
    "tools_changed": frozenset({"tools_changed", "reordered", "volatile_value", "whitespace"}),
    "messages_changed": frozenset(
        {"message_edited", "compaction", "volatile_value", "whitespace", "reordered"}
    ),
}


def diagnostics_comparison(result: AnalysisResult | pl.DataFrame) -> pl.DataFrame:
    """Anthropic's own ``cache_miss_reason`` beside our cause, for requests whose log carries it.

    Columns: ``session, index, provider_miss_reason, change_class, cause, agrees`` (None when the
    provider's reason has no counterpart, e.g. ``previous_message_not_found``).
    """
    causes = _causes(result)
    have = causes.filter(pl.col("provider_miss_reason").is_not_null())
    agrees: list[bool | None] = []
    for reason, cls in zip(have["provider_miss_reason"], have["change_class"], strict=True):
        if reason == "none":
            agrees.append(cls is None)
        elif reason in _DIAGNOSTIC_CLASSES:
            agrees.append(cls in _DIAGNOSTIC_CLASSES[reason])
        else:
            agrees.append(None)
    return have.select("session", "index", "provider_miss_reason", "change_class", "cause").with_columns(
        pl.Series("agrees", agrees, dtype=pl.Boolean)
    )


# ------------------------------------------------------------------------------------------ gate


@attrs.frozen(slots=True)
class GateResult:
    """The outcome of :func:`check_gate`: ``passed``, the per-session table (``sessions``) and one
    line per failing session (``failures``)."""

    passed: bool
    sessions: pl.DataFrame
    failures: tuple[str, ...]


def check_gate(
    result: AnalysisResult,
    *,
    min_hit: float | None = None,
    max_layout_loss: float | None = None,
    top: int = 3,
) -> GateResult:
    """Check every session against thresholds: hit ratio at least ``min_hit`` (reported where the log
    has usage, else predicted) and tokens lost to the layout at most ``max_layout_loss`` (a share of
    the prompt). ``sessions`` columns: ``session, prompt_tokens, cached_tokens, hit_ratio,
    layout_lost_tokens, layout_loss, top_causes, passed``.

    Example::

        >>> from promptkit.analysis.api import analyze_requests
        >>> body = {"messages": [{"role": "user", "content": "hello there"}]}
        >>> check_gate(analyze_requests([body, body], provider="exact"), min_hit=0.9).passed
        False
    """
    causes = result.causes
    layout = pl.sum_horizontal(pl.col(f"lost_{c}") for c in LAYOUT_CAUSES)
    per = causes.group_by("session", maintain_order=True).agg(
        pl.col("prompt_tokens").sum().alias("prompt_tokens"),
        (pl.col("prompt_tokens") - pl.col("uncached_tokens")).sum().alias("cached_tokens"),
        layout.sum().alias("layout_lost_tokens"),
        *[pl.col(f"lost_{c}").sum().alias(c) for c in CAUSES],
    )
    failures: list[str] = []
    rows = []
    for r in per.iter_rows(named=True):
        prompt = r["prompt_tokens"]
        hit = r["cached_tokens"] / prompt if prompt else 0.0
        loss = r["layout_lost_tokens"] / prompt if prompt else 0.0
        ranked = sorted(((r[c], c) for c in CAUSES if r[c] > 0), reverse=True)[:top]
        top_causes = ", ".join(f"{c} {n:,}" for n, c in ranked)
        why = []
        if min_hit is not None and hit < min_hit:
            why.append(f"hit ratio {hit:.3f} < {min_hit:g}")
        if max_layout_loss is not None and loss > max_layout_loss:
            why.append(f"layout loss {loss:.3f} > {max_layout_loss:g}")
        if why:
            failures.append(f"{r['session']}: {'; '.join(why)} (top causes: {top_causes or 'none'})")
        rows.append(
            {
                "session": r["session"],
                "prompt_tokens": prompt,
                "cached_tokens": r["cached_tokens"],
                "hit_ratio": hit,
                "layout_lost_tokens": r["layout_lost_tokens"],
                "layout_loss": loss,
                "top_causes": top_causes,
                "passed": not why,
            }
        )
    schema = {
        "session": pl.String, "prompt_tokens": pl.Int64, "cached_tokens": pl.Int64, "hit_ratio": pl.Float64,
        "layout_lost_tokens": pl.Int64, "layout_loss": pl.Float64, "top_causes": pl.String, "passed": pl.Boolean,
    }  # fmt: skip
    return GateResult(not failures, pl.DataFrame(rows, schema=schema, orient="row"), tuple(failures))


# ------------------------------------------------------------------------------------------ lint

#: Columns of :func:`lint`.
LINT_COLUMNS: Final[tuple[str, ...]] = (
    "session", "message", "slot", "key", "change_class", "kind", "offset", "snippet", "changes",
    "transitions", "every_time", "tokens_lost", "fix",
)  # fmt: skip

_FIX: Final[Mapping[str, str]] = {
    "system_changed": "keep the system prompt the same on every request: move what changes in it after the "
    "history (in the last user message)",
    "tools_changed": "send the same tool definitions on every request (change the tools at a session's start "
    "only)",
    "volatile_value": "move the changing value out of the head: put it after the history (in the last user message)",
    "reordered": "serialize deterministically: sort the tools by name and JSON keys (sort_keys=True)",
    "whitespace": "normalize whitespace before sending (strip, one newline style)",
}


def _suggested_anchor() -> str:
    from promptkit.layout import Anchor

    return str(Anchor.TURN_CONTEXT.value)


def lint(result: AnalysisResult) -> pl.DataFrame:
    """Head regions that change from request to request, every class of
    :data:`~promptkit.analysis.causes.HEAD_CHANGES` (the detector ``analyze``'s causes use): the system
    prompt, the tool definitions, volatile values (timestamps, dates, uuids, counters ...), reordered
    tools or JSON keys, whitespace churn; where they sit, what they cost and how to fix them.

    ``result``: an analysis (the report reads it; :func:`promptkit.analysis.analyze` makes one from
    log paths). One row per session and changing region (``message`` index or None for the tool definitions,
    ``slot`` / ``key`` for promptkit-built prompts, ``kind``, character ``offset`` in the message
    text and a ``snippet`` of the latest change); ``changes`` counts the requests it broke,
    ``transitions`` the session's consecutive pairs, ``every_time`` whether it broke every one;
    ``tokens_lost`` what it cost (:func:`~promptkit.analysis.causes.explain_causes`); ``fix``: for a
    promptkit-built prompt the suggested anchor as :func:`promptkit.assembly.audit` gives it
    (``turn-context``), otherwise the layout change that avoids it. Sorted by tokens lost.
    """
    causes = result.causes
    req = result.requests.select(
        "session", "index", "divergence_message", "divergence_anchor", "divergence_key"
    )
    joined = causes.join(req, on=["session", "index"], how="left", maintain_order="left")
    transitions = causes.group_by("session").agg((pl.len() - 1).cast(pl.Int64).alias("transitions"))
    lintable = joined.filter(pl.col("change_class").is_in(list(HEAD_CHANGES)))
    parsed = lintable.with_columns(
        pl.col("change_detail").str.extract(r"^([^:\[]+):", 1).alias("kind"),
        pl.col("change_detail").str.extract(r"char (\d+)", 1).cast(pl.Int64).alias("offset"),
        pl.col("change_detail").str.extract(r"char \d+: (.*)$", 1).alias("snippet"),
        pl.sum_horizontal(pl.col(f"lost_{c}") for c in LAYOUT_CAUSES).alias("_lost"),
    )
    anchor = _suggested_anchor()
    table = (
        parsed.group_by(
            "session",
            pl.col("divergence_message").alias("message"),
            pl.col("divergence_key").alias("key"),
            "change_class",
            "kind",
            maintain_order=True,
        )
        .agg(
            pl.col("divergence_anchor").drop_nulls().first().alias("slot"),
            pl.col("offset").last(),
            pl.col("snippet").last(),
            pl.len().cast(pl.Int64).alias("changes"),
            pl.col("_lost").sum().cast(pl.Int64).alias("tokens_lost"),
        )
        .join(transitions, on="session", how="left")
        .with_columns(
            (pl.col("changes") >= pl.col("transitions")).alias("every_time"),
            pl.when(
                pl.col("slot").is_not_null()
                & pl.col("change_class").is_in(["volatile_value", "system_changed"])
            )
            .then(pl.format("move contributor {} to anchor '" + anchor + "'", pl.coalesce("key", "slot")))
            .otherwise(pl.col("change_class").replace_strict(_FIX, default=None))
            .alias("fix"),
        )
    )
    return table.select(LINT_COLUMNS).sort(["tokens_lost", "session"], descending=[True, False])


# ------------------------------------------------------------------ the loss by cause, as reports show it


def cause_columns(frame: pl.DataFrame) -> list[str]:
    """The numeric ``lost_<cause>`` columns of a requests frame (tokens lost to each miss cause).

    >>> cause_columns(pl.DataFrame({"lost_ttl": [1], "lost_edit": [2], "lost_note": ["x"], "hit": [0.5]}))
    ['lost_ttl', 'lost_edit']
    """
    return [c for c, t in frame.schema.items() if c.startswith(_CAUSE_PREFIX) and t.is_numeric()]


def lost_by_cause(result: AnalysisResult | pl.DataFrame) -> pl.DataFrame:
    """Tokens lost per cause, from the ``lost_<cause>`` columns, largest first (empty without them).

    Columns: ``cause, requests`` (requests that lost any token to it), ``tokens_lost, share`` (of the
    tokens lost to any cause).

    >>> lost_by_cause(pl.DataFrame({"lost_ttl": [0, 30], "lost_edit": [10, 0]})).rows()
    [('ttl', 1, 30, 0.75), ('edit', 1, 10, 0.25)]
    """
    frame = requests_of(result)
    columns = cause_columns(frame)
    schema = {"cause": pl.String, "requests": pl.Int64, "tokens_lost": pl.Int64, "share": pl.Float64}
    if not columns:
        return pl.DataFrame(schema=schema)
    rows = [
        (
            c[len(_CAUSE_PREFIX) :],
            int((frame[c].fill_null(0) > 0).sum()),
            int(frame[c].fill_null(0).sum()),
        )
        for c in columns
    ]
    total = sum(r[2] for r in rows)
    table = pl.DataFrame([(*r, r[2] / total if total else None) for r in rows], schema=schema, orient="row")
    return table.sort(["tokens_lost", "cause"], descending=[True, False])


def causes_table(result: AnalysisResult | pl.DataFrame) -> pl.DataFrame | None:
    """Tokens lost per cause, as the report shows them: from the requests frame's ``lost_<cause>``
    columns when it has them (:func:`lost_by_cause`), else
    :func:`causes_by_cause` of the analysis; None when neither applies.

    >>> causes_table(pl.DataFrame({"session": ["s"], "lost_ttl": [3]}))["cause"].to_list()
    ['ttl']
    """
    frame = requests_of(result)
    if cause_columns(frame):
        return lost_by_cause(frame)
    if isinstance(result, pl.DataFrame) or not hasattr(result, "cache_model") or frame.height == 0:
        return None
    table: pl.DataFrame = causes_by_cause(result)
    return table
