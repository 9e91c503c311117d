"""One self-contained HTML page of a cache analysis: headline, timelines, loss tables, breaks.

:func:`render_html` returns the page as a string and :func:`write_html` writes it (``promptkit analyze``
writes ``report.html`` into ``--out``). The page holds its styles, script and data inline and fetches
nothing: open it from disk, mail it, attach it to a CI run. It shows

- the headline: predicted and reported hit ratio, tokens, cost, the provider, tokenizer and cache model,
  and the analysis' notes;
- a hit-ratio timeline per session (an inline SVG drawn by a few lines of inline script; sessions with
  more requests than :data:`TIMELINE_POINTS` are bucketed into that many points, each the bucket's mean);
- the per-session table, paged in the browser (:data:`PAGE_ROWS` rows a page), with a filter box;
- tokens lost by cause (:func:`~promptkit.report.causes.causes_by_cause`, or the requests
  frame's own ``lost_<cause>`` columns when it has them), by slot and by contributor key;
- the largest breaks, with the text the cache held and the text the prompt sent side by side from the
  first divergent token on, token by token (the first token highlighted) when the tokenizer is available;
- predicted against reported cached tokens (a table and a scatter plot), and the cost table.

All text from the logs is escaped (Jinja2 autoescaping; the embedded JSON escapes ``<``, ``>`` and
``&``), so a message holding ``<script>`` shows as text and never runs.

>>> from promptkit.analysis import analyze_requests
>>> body = {"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "<b>hi</b>"}]}
>>> page = render_html(analyze_requests([body, body], provider="exact"))
>>> page.startswith("<!DOCTYPE html>"), "<b>hi</b>" in page
(True, False)
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import polars as pl

# cause_columns, lost_by_cause and causes_table moved to promptkit.report.causes; still importable here
from promptkit.report.causes import (
    cause_columns as cause_columns,
    causes_table,
    lost_by_cause as lost_by_cause,
)
from promptkit.report.metrics import ALL_SESSIONS, largest_breaks, requests_of
from promptkit.report.pricing import PriceTable
from promptkit.report.summary import headline
from promptkit.report.text import COLUMN_LEGEND, summarize

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.analysis.result import AnalysisResult

__all__ = [
    "CONTEXT_COLUMN",
    "MAX_BREAKS",
    "PAGE_ROWS",
    "TIMELINE_POINTS",
    "render_html",
    "write_html",
]

#: Optional requests column with the text just before the divergence (shown in front of both sides).
CONTEXT_COLUMN: Final[str] = "divergence_context_text"
#: Rows per page of the paged tables (sessions, predicted vs reported).
PAGE_ROWS: Final[int] = 25
#: Points drawn per session in the timeline; longer sessions are bucketed (bucket means).
TIMELINE_POINTS: Final[int] = 400
#: Breaks shown in the "largest breaks" section.
MAX_BREAKS: Final[int] = 20
#: Points drawn in the predicted-vs-reported scatter plot (an even sample beyond that).
_SCATTER_POINTS: Final[int] = 2000
#: Rows of the loss-by-key table (the rest is summed into one "(others)" row).
_KEY_ROWS: Final[int] = 50
#: Problems listed (the count is always whole).
_PROBLEM_ROWS: Final[int] = 50
_TEMPLATE: Final[str] = "data/report.html.j2"


# ------------------------------------------------------------------------------------------ figures


def _number(value: Any) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)


def _bucketed(
    index: list[int], values: list[float | None], limit: int
) -> tuple[list[int], list[float | None]]:
    """At most ``limit`` points: consecutive buckets of equal size, each its first index and mean value."""
    if len(index) <= limit:
        return index, values
    size = math.ceil(len(index) / limit)
    xs: list[int] = []
    ys: list[float | None] = []
    for start in range(0, len(index), size):
        chunk = [v for v in values[start : start + size] if v is not None]
        xs.append(index[start])
        ys.append(sum(chunk) / len(chunk) if chunk else None)
    return xs, ys


def _timelines(frame: pl.DataFrame, limit: int) -> dict[str, dict[str, Any]]:
    """Per session: request index, predicted and reported hit ratio per request (bucketed to ``limit``)."""
    reported = (
        pl.when(pl.col("reported_prompt_tokens") > 0)
        .then(pl.col("reported_cached_tokens").cast(pl.Float64) / pl.col("reported_prompt_tokens"))
        .otherwise(None)
        if {"reported_prompt_tokens", "reported_cached_tokens"} <= set(frame.columns)
        else pl.lit(None, dtype=pl.Float64)
    )
    hit = (
        pl.col("hit_ratio").cast(pl.Float64)
        if "hit_ratio" in frame.columns
        else pl.when(pl.col("prompt_tokens") > 0)
        .then(pl.col("predicted_cached_tokens").cast(pl.Float64) / pl.col("prompt_tokens"))
        .otherwise(None)
    )
    parts = (
        frame.select(pl.col("session").cast(pl.String), pl.col("index"), hit.alias("p"), reported.alias("r"))
        .sort(["session", "index"], maintain_order=True)
        .group_by("session", maintain_order=True)
        .agg(pl.col("index"), pl.col("p"), pl.col("r"))
    )
    out: dict[str, dict[str, Any]] = {}
    for session, index, predicted, rep in parts.iter_rows():
        xs, ps = _bucketed(list(index), [_number(v) for v in predicted], limit)
        _, rs = _bucketed(list(index), [_number(v) for v in rep], limit)
        out[session] = {
            "x": xs,
            "p": [None if v is None else round(v, 4) for v in ps],
            "r": [None if v is None else round(v, 4) for v in rs] if any(v is not None for v in rs) else None,
            "n": len(index),
        }
    return out


def _scatter_svg(pairs: pl.DataFrame, size: int = 320) -> str:
    """Predicted (y) against reported (x) cached tokens as an inline SVG string (numbers only)."""
    if pairs.height == 0:
        return ""
    if pairs.height > _SCATTER_POINTS:
        pairs = pairs.gather_every(math.ceil(pairs.height / _SCATTER_POINTS))
    xs = pairs["reported_cached_tokens"].cast(pl.Float64).to_list()
    ys = pairs["predicted_cached_tokens"].cast(pl.Float64).to_list()
    top = max([*xs, *ys, 1.0])
    pad = 36
    span = size - pad - 10

    def sx(v: float) -> float:
        return float(round(pad + v / top * span, 1))

    def sy(v: float) -> float:
        return float(round(size - pad - v / top * span, 1))

    dots = "".join(f'<circle cx="{sx(x)}" cy="{sy(y)}" r="2.5"/>' for x, y in zip(xs, ys, strict=True))
    return (
        f'<svg class="scatter" viewBox="0 0 {size} {size}" width="{size}" height="{size}" role="img" '
        f'aria-label="predicted against reported cached tokens">'
        f'<rect x="{pad}" y="10" width="{span}" height="{span}" class="frame"/>'
        f'<line x1="{sx(0)}" y1="{sy(0)}" x2="{sx(top)}" y2="{sy(top)}" class="diag"/>'
        f'<g class="dots">{dots}</g>'
        f'<text x="{pad + span / 2}" y="{size - 8}" text-anchor="middle">reported cached tokens</text>'
        f'<text x="12" y="{10 + span / 2}" text-anchor="middle" transform="rotate(-90 12 {10 + span / 2})">'
        f"predicted</text>"
        f'<text x="{pad - 4}" y="{sy(0) + 4}" text-anchor="end">0</text>'
        f'<text x="{pad - 4}" y="{sy(top) + 8}" text-anchor="end">{_short_number(top)}</text>'
        f'<text x="{sx(top)}" y="{sy(0) + 14}" text-anchor="end">{_short_number(top)}</text>'
        "</svg>"
    )


def _short_number(value: float) -> str:
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if value >= size:
            return f"{value / size:.3g}{unit}"
    return f"{value:.0f}"


# ------------------------------------------------------------------------------------- break texts


@functools.lru_cache(maxsize=8)
def _tokenizer(name: str) -> Any:
    from promptkit.providers.resolve import resolve_tokenizer

    try:
        return resolve_tokenizer(name)
    except Exception:  # any failure means: show the text without token boundaries
        return None


def _tokens(text: str, tokenizer_name: str | None) -> list[str]:
    """``text`` cut into the tokenizer's tokens (re-encoded), or into one piece when that is not possible.

    The excerpt starts at the first divergent token, so its first piece is that token. When the
    re-encoded pieces do not join back into the text (a token split inside a character), the text is
    one piece and the first differing character is highlighted instead.
    """
    if not text:
        return []
    tokenizer = _tokenizer(tokenizer_name) if tokenizer_name and "," not in tokenizer_name else None
    if tokenizer is not None:
        try:
            pieces = [tokenizer.decode([i]) for i in tokenizer.encode(text)]
        except Exception:  # a tokenizer that cannot round-trip: one piece
            pieces = []
        if pieces and "".join(pieces) == text:
            return pieces
    return [text]


def _break_rows(result: Any, frame: pl.DataFrame, n: int) -> list[dict[str, Any]]:
    breaks = largest_breaks(frame, n=n, width=10_000)
    if breaks.height == 0:
        return []
    changed = dict(zip(zip(breaks["session"], breaks["index"], strict=True), breaks["changed"], strict=True))
    # the raw excerpts (largest_breaks shows newlines as ⏎; here they are kept and shown by CSS)
    raw = frame.select(
        pl.col("session").cast(pl.String),
        "index",
        pl.col("divergence_cached_text").cast(pl.String).alias("_cached"),
        pl.col("divergence_prompt_text").cast(pl.String).alias("_prompt"),
        (
            pl.col(CONTEXT_COLUMN).cast(pl.String)
            if CONTEXT_COLUMN in frame.columns
            else pl.lit(None, dtype=pl.String)
        ).alias("_context"),
        (
            pl.col("change_class").cast(pl.String)
            if "change_class" in frame.columns
            else pl.lit(None, dtype=pl.String)
        ).alias("_change"),
    )
    joined = breaks.join(raw, on=["session", "index"], how="left", maintain_order="left")
    name = getattr(result, "tokenizer", None)
    rows = []
    for row in joined.iter_rows(named=True):
        cached, prompt = row["_cached"] or "", row["_prompt"] or ""
        common = _common_prefix(cached, prompt)
        rows.append(
            {
                **{k: row[k] for k in ("session", "index", "tokens_lost", "slot", "key")},
                "context": row["_context"] or "",
                "change": row["_change"],
                "changed": changed.get((row["session"], row["index"])),
                "fix": None,  # with promptkit analyze --advice: the break's measured fix (_with_fixes)
                "cached": _pieces(cached, name if isinstance(name, str) else None, common),
                "prompt": _pieces(prompt, name if isinstance(name, str) else None, common),
            }
        )
    return rows


def _with_fixes(rows: list[dict[str, Any]], fixes: pl.DataFrame | None) -> list[dict[str, Any]]:
    """The break rows with their ``fix`` (a row of the ``break_fixes`` table, when the caller measured
    them: ``promptkit analyze --advice``)."""
    if fixes is None or fixes.height == 0:
        return rows
    by_request = {(f["session"], f["index"]): f for f in fixes.iter_rows(named=True)}
    return [{**row, "fix": by_request.get((row["session"], row["index"]))} for row in rows]


def _common_prefix(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _pieces(text: str, tokenizer_name: str | None, common: int) -> list[dict[str, Any]]:
    """The excerpt as pieces ``{text, first, token}`` for the template: tokens when known, else the
    common head and the rest (the rest starting at the first differing character)."""
    tokens = _tokens(text, tokenizer_name)
    if len(tokens) > 1 or (tokens and tokens[0] != text):
        return [{"text": t, "first": i == 0, "token": True} for i, t in enumerate(tokens)]
    if not text:
        return []
    out = []
    if common:
        out.append({"text": text[:common], "first": False, "token": False})
    if common < len(text):
        out.append({"text": text[common : common + 1], "first": True, "token": False})
        out.append({"text": text[common + 1 :], "first": False, "token": False})
    return [p for p in out if p["text"]]


# ------------------------------------------------------------------------------------------ tables


def _cell(value: Any, column: str) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if column.startswith("cost") or column == "saving":
            return f"{value:,.4f}"
        if "imbalance" in column or "ttft" in column:
            return f"{value:.3f}"
        if "ratio" in column or column in ("share", "share_of_ceiling", "runner_up_share"):
            return f"{value:.1%}" if column != "hit_ratio_difference" else f"{value:+.1%}"
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _table(frame: pl.DataFrame, *, exclude: Sequence[str] = ()) -> dict[str, Any]:
    """A frame as ``{columns: [{name, short, numeric}], rows: [[text, ...]]}`` for the template."""
    columns = [c for c in frame.columns if c not in exclude]
    from promptkit.report.text import SHORT_NAMES

    return {
        "columns": [
            {
                "name": c,
                "short": SHORT_NAMES.get(c, c),
                "numeric": frame.schema[c].is_numeric(),
                "title": COLUMN_LEGEND.get(SHORT_NAMES.get(c, c), ""),
            }
            for c in columns
        ],
        "rows": [
            [_cell(v, c) for v, c in zip(row, columns, strict=True)]
            for row in frame.select(columns).iter_rows()
        ],
    }


def _json_for_script(data: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``<``, ``>`` or ``&`` left literal."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@functools.lru_cache(maxsize=1)
def _template() -> Any:
    import jinja2

    source = importlib.resources.files("promptkit").joinpath(_TEMPLATE).read_text(encoding="utf-8")
    env = jinja2.Environment(
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True
    )
    env.filters["num"] = lambda v: "–" if v is None else f"{v:,}"
    env.filters["pct"] = lambda v: "–" if v is None else f"{v:.1%}"
    env.filters["pct2"] = lambda v: "–" if v is None else f"{v:.2%}"
    env.filters["usd"] = lambda v: "–" if v is None else f"${v:,.4f}"
    return env.from_string(source)


def render_html(
    result: AnalysisResult,
    *,
    tables: Mapping[str, pl.DataFrame] | None = None,
    prices: PriceTable | None = None,
    model: str | None = None,
    title: str = "promptkit cache report",
    sources: Sequence[str] = (),
    max_breaks: int = MAX_BREAKS,
    fleet: pl.DataFrame | None = None,
) -> str:
    """The analysis as one self-contained HTML page (a string); see the module docstring for what it shows.

    ``tables`` are :func:`~promptkit.report.summarize`'s tables when you have them already (else
    they are computed with ``prices`` and ``model``); ``sources`` names the analyzed files in the header;
    ``fleet`` (the summary of :func:`~promptkit.analysis.fleet.compare_fleet`) adds a fleet section.

    >>> from promptkit.analysis import analyze_requests
    >>> body = {"messages": [{"role": "user", "content": "hi"}]}
    >>> "Where the tokens were lost" in render_html(analyze_requests([body], provider="exact"))
    True
    """
    frame = requests_of(result)
    if tables is None:
        tables = summarize(result, prices=prices, model=model)
    sessions = tables["hit_ratio"].filter(pl.col("session") != ALL_SESSIONS)
    pvr = tables["predicted_vs_reported"]
    by_key = tables["lost_by_key"]
    others = None
    if by_key.height > _KEY_ROWS:
        rest = by_key.slice(_KEY_ROWS)
        others = {"keys": rest.height, "tokens_lost": int(rest["tokens_lost"].sum())}
        by_key = by_key.head(_KEY_ROWS)
    pairs = (
        frame.filter(pl.col("reported_cached_tokens").is_not_null())
        if "reported_cached_tokens" in frame.columns
        else frame.clear()
    )
    causes = causes_table(result)
    problems = tables.get(
        "problems", pl.DataFrame(schema={"file": pl.String, "line": pl.Int64, "reason": pl.String})
    )
    notes = tables.get("notes", pl.DataFrame(schema={"table": pl.String, "note": pl.String}))
    legend = {
        short: text for short, text in COLUMN_LEGEND.items() if short not in ("cached_text", "prompt_text")
    }
    context = {
        "title": title,
        "sources": list(sources),
        "headline": headline(result, tables),
        "notes": [{"table": t, "note": n} for t, n in notes.iter_rows()],
        "sessions": _table(sessions),
        "lost_by_slot": _table(tables["lost_by_slot"]),
        "lost_by_key": _table(by_key),
        "key_others": others,
        "lost_by_cause": _table(causes) if causes is not None and causes.height else None,
        "breaks": _with_fixes(
            _break_rows(result, frame, max_breaks) if "divergence_cached_text" in frame.columns else [],
            tables.get("break_fixes"),
        ),
        "pvr": _table(pvr) if pvr.height else None,
        "scatter": _scatter_svg(pairs) if "predicted_cached_tokens" in pairs.columns else "",
        "scatter_points": pairs.height,
        "cost": _table(tables["cost"]) if tables.get("cost") is not None and tables["cost"].height else None,
        "problems": {
            "count": problems.height,
            "rows": [
                {"file": r.get("file"), "line": r.get("line"), "reason": r.get("reason")}
                for r in problems.head(_PROBLEM_ROWS).iter_rows(named=True)
            ],
        },
        "legend": legend,
        "page_rows": PAGE_ROWS,
        "timeline_points": TIMELINE_POINTS,
        "data": _json_for_script({"timelines": _timelines(frame, TIMELINE_POINTS), "pageRows": PAGE_ROWS}),
        "fleet": fleet_section(fleet) if fleet is not None else None,
        "fleet_only": False,
    }
    return str(_template().render(**context))


def fleet_section(summary: pl.DataFrame) -> dict[str, Any]:
    """The fleet section of the report: the verdict of :func:`~promptkit.report.fleet.fleet_verdict`
    (for a :func:`~promptkit.analysis.fleet.compare_fleet` summary), the table of
    :func:`~promptkit.report.fleet.fleet_table` and the plot of :func:`~promptkit.report.fleet.plot_fleet`, embedded as a PNG."""
    import base64
    import io

    from promptkit.report.fleet import fleet_table, fleet_verdict, plot_fleet

    buffer = io.BytesIO()
    plot_fleet(summary).savefig(buffer, format="png", dpi=90)
    return {
        "verdict": _table(fleet_verdict(summary)) if "ceiling_hit_ratio" in summary.columns else None,
        "table": _table(fleet_table(summary)),
        "plot": "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii"),
    }


def render_fleet_html(
    summary: pl.DataFrame, *, title: str = "promptkit fleet report", sources: Sequence[str] = ()
) -> str:
    """A self-contained page with the fleet section only (for an input without an analysis, such as
    a Mooncake trace); :func:`render_html` takes ``fleet=`` to add the same section to its report.

    >>> import polars as pl
    >>> s = pl.DataFrame({"policy": ["round_robin"], "replicas": [4], "capacity_tokens": [None], "hit_ratio": [0.2]})
    >>> 'id="fleet"' in render_fleet_html(s)
    True
    """
    return str(
        _template().render(
            title=title,
            sources=list(sources),
            fleet=fleet_section(summary),
            fleet_only=True,
            data=_json_for_script({"timelines": {}, "pageRows": PAGE_ROWS}),
        )
    )


def write_html(result: AnalysisResult, path: str | os.PathLike[str], **options: Any) -> Path:
    """Write :func:`render_html` (same keyword arguments) to ``path`` (UTF-8); returns the path.

    >>> import tempfile
    >>> from promptkit.analysis import analyze_requests
    >>> out = Path(tempfile.mkdtemp()) / "report.html"
    >>> write_html(analyze_requests([{"messages": [{"role": "user", "content": "hi"}]}], provider="exact"), out).name
    'report.html'
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_html(result, **options), encoding="utf-8")
    return target
