"""The advice engine: every lint finding with one concrete fix, measured by replay.

:func:`lint_advice` lints a log (:func:`promptkit.report.causes.lint`: the head regions that change
between requests), replays the candidate transforms (:func:`promptkit.whatif.suggest`) and gives each
finding the suggestion that fixes it with the largest measured saving: a ``promptkit whatif`` command the
user can run, the hit ratio and cost before and after, and the *complete* set of changes that gives that
saving (moving one contributor saves nothing while another one, further up the head, still changes: the
fix then moves both). A finding whose best fix saves nothing says so.

>>> from promptkit.formats import read_logs
>>> advice = lint_advice(read_logs("promptkit/data/default-session.jsonl"))
>>> first = advice.items[0]
>>> first.fix is not None and first.fix.after_hit_ratio > first.fix.before_hit_ratio + 0.4
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from promptkit.layout import LoadResult, RequestRecord
from promptkit.whatif.suggestions import Suggestion, rank, suggest
from promptkit.whatif.transforms import Chain, Move, Normalize, SortTools, Transform

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from promptkit.analysis.result import AnalysisResult

__all__ = [
    "BREAK_FIX_COLUMNS",
    "Advice",
    "LintAdvice",
    "break_fixes",
    "fix_for",
    "format_lint_advice",
    "lint_advice",
    "with_break_fixes",
]

#: Columns of :func:`break_fixes`.
BREAK_FIX_COLUMNS = (
    "session",
    "index",
    "fix",
    "command",
    "before_hit_ratio",
    "after_hit_ratio",
    "before_cost_usd",
    "after_cost_usd",
    "saving_usd",
)


@attrs.frozen(slots=True)
class Advice:
    """One lint finding (a row of :func:`~promptkit.report.causes.lint`, as a dict) and its
    ``fix``: the replayed suggestion that addresses it with the largest measured saving (None when no
    candidate addresses it). ``saves``: whether that fix saves anything measurable."""

    finding: Mapping[str, Any]
    fix: Suggestion | None

    @property
    def saves(self) -> bool:
        """Whether the fix raises the hit ratio or lowers the cost (by replay)."""
        if self.fix is None:
            return False
        return (self.fix.priced and self.fix.saving_usd > 1e-9) or self.fix.hit_gain > 1e-6

    def to_json(self) -> dict[str, Any]:
        """The finding and its fix as plain JSON values. When a replayed fix saves something, the
        finding's ``fix`` is that measured fix, every change of it (``advice``: the lint's own words);
        else the lint's advice."""
        finding = dict(self.finding)
        if self.fix is not None and self.saves:
            finding["advice"] = finding.get("fix")
            finding["fix"] = self.fix.transform.describe()
            finding["fix_specs"] = self.fix.specs()
        return {
            "finding": finding,
            "fix": self.fix.to_json() if self.fix is not None else None,
            "saves": self.saves,
        }


@attrs.frozen(slots=True, eq=False)
class LintAdvice:
    """:func:`lint_advice`'s answer: the lint ``table``, one :class:`Advice` per row (``items``, in the
    table's order: most tokens lost first) and every replayed ``suggestions`` (ranked)."""

    table: pl.DataFrame
    items: tuple[Advice, ...]
    suggestions: tuple[Suggestion, ...]
    result: AnalysisResult


def _parts(t: Transform) -> list[Transform]:
    return [p for q in t.transforms for p in _parts(q)] if isinstance(t, Chain) else [t]


def _addresses(t: Transform, finding: Mapping[str, Any]) -> bool:
    """Whether transform ``t`` (or a part of a chain) acts on the region of ``finding``."""
    key = finding.get("key")
    change = finding.get("change_class")
    for p in _parts(t):
        if isinstance(p, Move) and key is not None and p.selector.key == key:
            return True
        if change in ("volatile_value", "system_changed") and key is None and isinstance(p, Move | Normalize):
            return True
        if change == "reordered" and isinstance(p, SortTools):
            return True
        if change == "whitespace" and isinstance(p, Normalize):
            return True
    return False


def fix_for(finding: Mapping[str, Any], suggestions: Iterable[Suggestion]) -> Suggestion | None:
    """The suggestion that addresses ``finding`` with the largest measured saving (then hit-ratio gain),
    or None. A chain that includes the finding's own change counts: it is the complete set of changes
    that gives its saving.

    >>> fix_for({"key": "k", "change_class": "volatile_value"}, []) is None
    True
    """
    matching = [s for s in suggestions if _addresses(s.transform, finding)]
    return rank(matching)[0] if matching else None


def lint_advice(
    records: LoadResult | Iterable[RequestRecord],
    *,
    prices: Any = None,
    model: str | None = None,
    **analysis_options: Any,
) -> LintAdvice:
    """Lint ``records`` and give each finding its fix, measured by replay (see the module docstring).

    ``prices`` / ``model`` price the calls; ``analysis_options`` (``provider``, ``view`` ...) go to
    :func:`promptkit.analysis.analyze_requests`.
    """
    from promptkit.analysis.api import analyze_requests
    from promptkit.report.causes import lint

    source: LoadResult | list[RequestRecord] = records if isinstance(records, LoadResult) else list(records)
    found = suggest(source, prices=prices, model=model, **analysis_options)
    result = found[0].whatif.before if found else analyze_requests(source, **analysis_options)
    table = lint(result)
    items = tuple(Advice(row, fix_for(row, found)) for row in table.iter_rows(named=True))
    return LintAdvice(table=table, items=items, suggestions=tuple(found), result=result)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _where(finding: Mapping[str, Any]) -> str:
    parts = [f"session {finding.get('session')}"]
    if finding.get("key") is not None:
        parts.append(f"contributor {finding['key']!r}")
    elif finding.get("message") is not None:
        parts.append(f"message {finding['message']}")
    else:
        parts.append("the tool definitions")
    return ", ".join(parts)


#: What changed, in words, for a finding without a volatile-value kind.
_WHAT: dict[str, str] = {
    "system_changed": "the system prompt changed",
    "tools_changed": "the tool definitions changed",
    "reordered": "the same items in another order",
    "whitespace": "whitespace only",
}


def format_lint_advice(advice: LintAdvice, *, paths: str = "") -> str:
    """The findings and their measured fixes as text (what ``promptkit lint`` prints). ``paths``: the
    log paths as the user gave them, for the printed ``promptkit whatif`` commands."""
    if not advice.items:
        return "promptkit lint: no head region changes between requests\n"
    lines = [f"promptkit lint: {len(advice.items)} changing head region(s), most tokens lost first", ""]
    shown: dict[str, int] = {}  # a measured fix already printed in full: its finding's number
    for k, item in enumerate(advice.items, 1):
        f = item.finding
        every = (
            "every request"
            if f.get("every_time")
            else f"{f.get('changes')} of {f.get('transitions')} requests"
        )
        lines.append(
            f"{k}. {_where(f)}: {f.get('change_class')} ({f.get('kind') or _WHAT.get(str(f.get('change_class')), 'change')}) "
            "breaks the cache at "
            f"{every}; {int(f.get('tokens_lost') or 0):,} tokens lost"
        )
        if f.get("snippet"):
            lines.append(f"   changed: {f['snippet']}")
        fix = item.fix
        if fix is None:
            lines.append(f"   fix: {f.get('fix')} (no what-if transform replays it; nothing measured)")
        elif not item.saves:
            lines.append(f"   fix: {fix.transform.describe()}: it saves nothing on this log (replayed)")
            lines.append(f"        {fix.command(paths)}")
        else:
            cost = (
                f"; cost {fix.before_cost_usd:.4f} → {fix.after_cost_usd:.4f} USD (saving {fix.saving_usd:+.4f})"
                if fix.priced
                else "; cost n/a (no price)"
            )
            count = len(fix.specs())
            if fix.spec in shown:
                lines.append(
                    f"   fix: the same {'set of ' + str(count) + ' changes' if count > 1 else 'change'} as "
                    f"finding {shown[fix.spec]} (hit ratio {_pct(fix.before_hit_ratio)} → {_pct(fix.after_hit_ratio)})"
                )
                lines.append("")
                continue
            shown[fix.spec] = k
            lines.append(
                f"   fix ({'the complete set of ' + str(count) + ' changes' if count > 1 else 'one change'}): "
                f"{fix.transform.describe()}"
            )
            lines.append(f"        {fix.command(paths)}")
            lines.append(
                f"        measured by replay: hit ratio {_pct(fix.before_hit_ratio)} → {_pct(fix.after_hit_ratio)}{cost}"
            )
        lines.append("")
    return "\n".join(lines)


def break_fixes(advice: LintAdvice, breaks: pl.DataFrame, *, paths: str = "") -> pl.DataFrame:
    """One fix per break of ``breaks`` (:func:`~promptkit.report.largest_breaks`' frame): the
    replayed suggestion that acts where the request broke (its contributor key, or its change), with
    its measured hit ratio and cost before and after (columns :data:`BREAK_FIX_COLUMNS`); ``fix`` says
    so when nothing replayed saves anything there. ``paths``: the ``promptkit whatif`` arguments.
    """
    import polars as pl

    frame = advice.result.requests.select("session", "index", "change_class")
    joined = breaks.select("session", "index", "key").join(frame, on=["session", "index"], how="left")
    rows = []
    for row in joined.iter_rows(named=True):
        fix = fix_for({"key": row["key"], "change_class": row["change_class"]}, advice.suggestions)
        saves = fix is not None and Advice({}, fix).saves
        rows.append(
            {
                "session": row["session"],
                "index": row["index"],
                "fix": (fix.transform.describe() if saves else "no replayed change saves anything here")
                if fix is not None
                else "no what-if transform acts here",
                "command": fix.command(paths) if fix is not None and saves else None,
                "before_hit_ratio": fix.before_hit_ratio if fix is not None else None,
                "after_hit_ratio": fix.after_hit_ratio if fix is not None else None,
                "before_cost_usd": fix.before_cost_usd if fix is not None and fix.priced else None,
                "after_cost_usd": fix.after_cost_usd if fix is not None and fix.priced else None,
                "saving_usd": fix.saving_usd if fix is not None and fix.priced else None,
            }
        )
    schema = {
        "session": pl.String,
        "index": pl.Int64,
        "fix": pl.String,
        "command": pl.String,
        **{c: pl.Float64 for c in BREAK_FIX_COLUMNS[4:]},
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def with_break_fixes(
    tables: Mapping[str, pl.DataFrame], advice: LintAdvice, *, paths: str = ""
) -> dict[str, pl.DataFrame]:
    """``tables`` (:func:`~promptkit.report.summarize`'s) with a ``break_fixes`` table right after
    ``largest_breaks``: each break's fix, measured by replay (:func:`break_fixes`). ``paths``: the
    ``promptkit whatif`` arguments of the printed commands."""
    fixes = break_fixes(advice, tables["largest_breaks"], paths=paths)
    ordered: dict[str, pl.DataFrame] = {}
    for name, table in tables.items():
        ordered[name] = table
        if name == "largest_breaks":
            ordered["break_fixes"] = fixes
    return ordered
