"""The summary tables gathered, and turned into text for a terminal with a legend of their columns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import polars as pl

from promptkit.errors import PriceError

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.analysis.result import AnalysisResult

from promptkit.report.metrics import (
    hit_ratio_summary,
    largest_breaks,
    predicted_vs_reported_summary,
    requests_of,
    tokens_lost_by_key,
    tokens_lost_by_slot,
)
from promptkit.report.pricing import PriceTable, check_cost_arguments, cost_summary

__all__ = [
    "COLUMN_LEGEND",
    "SHORT_NAMES",
    "format_legend",
    "format_summary",
    "summarize",
    "table_config",
]


# ------------------------------------------------------------------------------------------- summary

_TITLES: Final[dict[str, str]] = {
    "hit_ratio": "Hit ratio per session (token-weighted)",
    "lost_by_cause": "Tokens lost by cause (the headline's basis; groups: layout, provider, inherent, unexplained)",
    "lost_by_slot": "Tokens lost per slot (anchor / frame role; predicted: promptkit's cache rules)",
    "lost_by_key": "Tokens lost per contributor key (predicted)",
    "largest_breaks": "Largest breaks (predicted): what the cache held at the first divergent token, and what was sent",
    "break_fixes": "Fixes for the largest breaks (promptkit whatif, measured by replay)",
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

    Keys: ``hit_ratio``, ``lost_by_cause`` (for an analysis with causes: the by-cause table, same
    groups as the causes headline, ``unexplained`` included whenever it is not zero), ``lost_by_slot``, ``lost_by_key``, ``largest_breaks``, ``predicted_vs_reported`` (empty when the
    log has no usage), ``cost``, ``problems`` (the load problems, ``file, line, reason``) and
    ``notes`` (``table, note``: what a table could not show and why, e.g. a model without a price;
    in that case ``cost`` is empty).
    """
    check_cost_arguments("summarize", prices=prices, model=model, provider=provider)
    notes: list[dict[str, str]] = []
    tables: dict[str, pl.DataFrame] = {"hit_ratio": hit_ratio_summary(result)}
    if hasattr(result, "cache_model") and requests_of(result).height:
        from promptkit.report.causes import causes_by_cause

        tables["lost_by_cause"] = causes_by_cause(result)
    tables |= {
        "lost_by_slot": tokens_lost_by_slot(result),
        "lost_by_key": tokens_lost_by_key(result),
        "largest_breaks": largest_breaks(result),
        "predicted_vs_reported": predicted_vs_reported_summary(result),
    }
    if tables["predicted_vs_reported"].height == 0:
        notes.append({"table": "predicted_vs_reported", "note": "the input has no provider usage figures"})
    try:
        tables["cost"] = cost_summary(result, prices=prices, model=model, provider=provider, missing="empty")
    except PriceError as exc:
        tables["cost"] = pl.DataFrame()
        notes.append({"table": "cost", "note": str(exc)})
    else:
        cost = tables["cost"]
        unpriced = cost.filter((pl.col("basis") == "predicted") & pl.col("cost_with_cache").is_null())
        for row in unpriced.iter_rows(named=True):
            name = row["model"]
            what = f"model {name!r}" if name is not None else "the requests that name no model"
            notes.append(
                {
                    "table": "cost",
                    "note": f"no price for {what} ({row['requests']} request(s)): its cost columns are empty "
                    "(promptkit never prices a model as another one); pass --prices FILE (or prices=) "
                    "with its prices, or --model NAME to price the calls as a model you name",
                }
            )
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
#: The short column names the text tables print (each explained by :data:`COLUMN_LEGEND`).
SHORT_NAMES: Final[dict[str, str]] = {
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
    "before_text": "the text just before the first differing token, the same on both sides",
    "changed": "what changed there: the values side by side (09:02 → 09:04), or the change in words",
    "basis": "predicted: our token counts, every request; reported: the provider's, requests with usage",
    "model": "the model the calls are priced as",
    "written": "prompt tokens written to the cache (billed at the cache-write price)",
    "output": "output (completion) tokens",
    "out unknown": "requests whose output tokens are unknown (priced as 0)",
    "$ no cache": "cost in USD if nothing were cached",
    "$ with cache": "cost in USD with the cached tokens at the cache-hit price",
    "$ saved": "$ no cache - $ with cache",
    "saved": "$ saved / $ no cache",
    "cause": "why the tokens were not cached (see docs/how-to/why-did-my-cache-miss.md#the-causes); unexplained: what no cause accounts for",
    "group": "layout (yours to fix), provider (its cache rules), inherent (cold start, new tokens), unexplained",
    "fix": "the replayed change that acts where the request broke (the complete set that gives the saving)",
    "command": "the promptkit whatif command that replays the fix",
    "before_hit_ratio": "the log's hit ratio, as replayed",
    "after_hit_ratio": "the hit ratio the replay measures with the fix",
    "before_cost_usd": "the log's cost in USD",
    "after_cost_usd": "the cost in USD the replay measures with the fix",
    "saving_usd": "before_cost_usd - after_cost_usd",
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


#: Excerpt columns, already cut by :func:`largest_breaks` (``before_text`` at its start, at a word; the
#: others at their end): not shortened in the middle.
_TEXT_COLUMNS: Final[frozenset[str]] = frozenset({"before_text", "cached_text", "prompt_text"})


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
    return frame.with_columns(rounded).rename({c: SHORT_NAMES[c] for c in frame.columns if c in SHORT_NAMES})


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
            if name == "break_fixes":
                blocks.append(f"{title}\n{_break_fixes_text(frame, width)}")
                continue
            blocks.append(f"{title}\n{_fit(_for_display(frame), width)}")
    return "\n\n".join(blocks) + "\n"


_UNBOUNDED: Final[int] = 10_000


def _breaks_label(breaks: Sequence[Mapping[str, Any]]) -> str:
    """``s: #3, #2`` for the breaks of one session (the first 4, then a count), ``s#3, t#1`` across
    sessions."""
    sessions = {b["session"] for b in breaks}
    one = len(sessions) == 1
    names = [f"#{b['index']}" if one else f"{b['session']}#{b['index']}" for b in breaks[:4]]
    more = f" (+{len(breaks) - 4} more)" if len(breaks) > 4 else ""
    return (f"{next(iter(sessions))}: " if one else "") + ", ".join(names) + more


def _break_fixes_text(frame: pl.DataFrame, width: int) -> str:
    """The ``break_fixes`` table for a terminal: one row per distinct fix with the breaks it acts on
    (never one row per break repeating the same fix), then each fix and its command whole.

    >>> frame = pl.DataFrame({"session": ["s", "s"], "index": [3, 2], "fix": ["move key=a to turn-context"] * 2,
    ...     "command": ["promptkit whatif log.jsonl --transform move:key=a"] * 2, "before_hit_ratio": [0.2, 0.2],
    ...     "after_hit_ratio": [0.9, 0.9], "before_cost_usd": [None, None], "after_cost_usd": [None, None],
    ...     "saving_usd": [None, None]})
    >>> print(_break_fixes_text(frame, 120).splitlines()[-2])
    fix 1: move key=a to turn-context
    """
    grouped = frame.group_by("fix", "command", maintain_order=True).agg(
        pl.struct("session", "index").alias("break"),
        pl.col("before_hit_ratio").first(),
        pl.col("after_hit_ratio").first(),
        pl.col("saving_usd").first(),
    )
    table = grouped.select(
        pl.int_range(1, pl.len() + 1).cast(pl.Int64).alias("fix"),
        pl.col("break").map_elements(_breaks_label, pl.String).alias("breaks"),
        pl.col("before_hit_ratio").cast(pl.Float64).round(4),
        pl.col("after_hit_ratio").cast(pl.Float64).round(4),
        pl.col("saving_usd").cast(pl.Float64).round(6),
    )
    lines = [_fit(table.rename({c: SHORT_NAMES.get(c, c) for c in table.columns}), width)]
    for k, (fix, command) in enumerate(grouped.select("fix", "command").iter_rows(), 1):
        lines.append(f"fix {k}: {fix}")
        if command:
            lines.append(f"  {command}")
    return "\n".join(lines)


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
