"""Replay a log under transforms: analyze it as logged and as transformed, and compare.

:func:`replay` runs :func:`promptkit.analysis.analyze_requests` on the records as they are (``before``) and
on the records through the transforms (``after``), with the same analysis options, and compares hit
ratio, prompt tokens, cached tokens and cost per session and overall. Costs are priced with
:func:`promptkit.report.request_costs`, the one pricing path ``analyze`` and the report use too
(the 1-hour writes are the analysis' own ``predicted_cache_write_1h_tokens``), so the *before* cost is
the cost ``analyze`` prints for the same log.

The replay changes only the prompts. The model's answers would change too (and with them the next
prompts); the replay keeps the logged answers (:data:`REPLAY_NOTE`).

>>> from promptkit.layout import RequestRecord
>>> from promptkit.whatif.transforms import Normalize
>>> system = "You are a helpful assistant. " * 40
>>> records = [RequestRecord({"model": "deepseek-chat", "messages": [
...     {"role": "system", "content": f"Now: 2025-01-0{i + 1} 10:00. {system}"},
...     {"role": "user", "content": "hi"}]}, session="s", index=i, provider="deepseek") for i in range(3)]
>>> w = replay(records, [Normalize(("timestamps",))])
>>> round(w.before.hit_ratio, 2), round(w.after.hit_ratio, 2)
(0.0, 0.51)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

from promptkit.errors import UsageError
from promptkit.layout import LoadResult, RequestRecord
from promptkit.whatif.transforms import Chain, Transform, apply_transforms

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from promptkit.analysis.result import AnalysisResult

__all__ = ["COMPARISON_COLUMNS", "REPLAY_NOTE", "WhatIf", "compare", "format_whatif", "replay"]

#: What every replay output says.
REPLAY_NOTE: Final[str] = (
    "The replay changes only the prompts: the model's answers would change too, and the replay keeps the "
    "logged ones."
)

#: Columns of :attr:`WhatIf.comparison`.
COMPARISON_COLUMNS: Final[tuple[str, ...]] = (
    "session",
    "requests",
    "before_hit_ratio",
    "after_hit_ratio",
    "before_prompt_tokens",
    "after_prompt_tokens",
    "before_cached_tokens",
    "after_cached_tokens",
    "before_cost_usd",
    "after_cost_usd",
    "saving_usd",
)


@attrs.frozen(slots=True, eq=False)
class WhatIf:
    """A replay: the analysis ``before`` and ``after`` the ``transforms``, the transformed records and
    the ``comparison`` frame (columns :data:`COMPARISON_COLUMNS`: one row per session, then ``"(all)"``).

    ``notes``: :data:`REPLAY_NOTE` and what the analyses had to assume.
    """

    before: AnalysisResult
    after: AnalysisResult
    transforms: tuple[Transform, ...]
    records: tuple[RequestRecord, ...]
    comparison: pl.DataFrame
    notes: tuple[str, ...] = ()

    @property
    def overall(self) -> dict[str, Any]:
        """The ``"(all)"`` row of :attr:`comparison` as a dict."""
        row: dict[str, Any] = self.comparison.row(self.comparison.height - 1, named=True)
        return row

    def describe(self) -> str:
        """What was replayed, in one line."""
        return Chain(self.transforms).describe()

    def __repr__(self) -> str:
        o = self.overall
        return (
            f"<WhatIf {self.describe()!r}: hit ratio {_pct(o['before_hit_ratio'])} -> {_pct(o['after_hit_ratio'])}, "
            f"cost {_usd(o['before_cost_usd'])} -> {_usd(o['after_cost_usd'])}>"
        )


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _usd(value: float | None) -> str:
    return "n/a (no price)" if value is None else f"${value:.4f}"


def _costs(result: AnalysisResult, prices: Any, model: str | None) -> pl.DataFrame:
    """Per request: ``session, index, prompt_tokens, cached_tokens, cost_usd``, priced by the one pricing
    path :func:`promptkit.report.request_costs` (its 1-hour writes are the analysis'
    ``predicted_cache_write_1h_tokens``, priced as such), so ``whatif``'s *before* cost is ``analyze``'s.
    A model without a price leaves ``cost_usd`` null."""
    import polars as pl

    from promptkit.report import request_costs

    costs = request_costs(result, prices=prices, model=model, missing="empty")
    return costs.select(
        "session",
        "index",
        "prompt_tokens",
        pl.col("predicted_cached_tokens").alias("cached_tokens"),
        pl.col("cost_predicted").alias("cost_usd"),
    )


def compare(
    before: AnalysisResult,
    after: AnalysisResult,
    *,
    records_before: Sequence[RequestRecord] = (),
    records_after: Sequence[RequestRecord] = (),
    prices: Any = None,
    model: str | None = None,
) -> pl.DataFrame:
    """The comparison frame of two analyses of the same requests (columns :data:`COMPARISON_COLUMNS`):
    per session, then ``"(all)"``; hit ratios are token-weighted; costs in USD (``prices`` and ``model``
    as for :func:`promptkit.report.request_costs`; a side with a model without a price has a null
    cost). ``records_before`` / ``records_after`` are accepted for compatibility and not needed: each
    analysis carries its 1-hour writes.

    >>> from promptkit.analysis import analyze_requests
    >>> r = analyze_requests([{"messages": [{"role": "user", "content": "hi"}]}], provider="deepseek")
    >>> compare(r, r)["before_cost_usd"].to_list() == compare(r, r)["after_cost_usd"].to_list()
    True
    """
    import polars as pl

    sides = []
    for name, result in (("before", before), ("after", after)):
        c = _costs(result, prices, model)
        sides.append(
            c.group_by("session", maintain_order=True).agg(
                pl.len().cast(pl.Int64).alias(f"{name}_requests"),
                pl.col("prompt_tokens").sum().alias(f"{name}_prompt_tokens"),
                pl.col("cached_tokens").sum().alias(f"{name}_cached_tokens"),
                pl.when(pl.col("cost_usd").is_null().any())
                .then(None)
                .otherwise(pl.col("cost_usd").sum())
                .alias(f"{name}_cost_usd"),
            )
        )
    joined = sides[0].join(sides[1], on="session", how="full", coalesce=True, maintain_order="left")
    sums = [c for c in joined.columns if c != "session"]
    # a cost stays null when a session's is (a model without a price), never summed as 0
    total = joined.select(
        pl.lit("(all)").alias("session"),
        *[
            pl.when(pl.col(c).is_null().any()).then(None).otherwise(pl.col(c).sum()).alias(c)
            if c.endswith("_cost_usd")
            else pl.col(c).sum()
            for c in sums
        ],
    )
    joined = pl.concat([joined, total], how="vertical_relaxed")

    def ratio(side: str) -> pl.Expr:
        p = pl.col(f"{side}_prompt_tokens")
        return (
            pl.when(p > 0)
            .then(pl.col(f"{side}_cached_tokens") / p)
            .otherwise(None)
            .alias(f"{side}_hit_ratio")
        )

    return joined.select(
        "session",
        pl.col("before_requests").fill_null(0).alias("requests"),
        ratio("before"),
        ratio("after"),
        "before_prompt_tokens",
        "after_prompt_tokens",
        "before_cached_tokens",
        "after_cached_tokens",
        "before_cost_usd",
        "after_cost_usd",
        (pl.col("before_cost_usd") - pl.col("after_cost_usd")).alias("saving_usd"),
    )


def _records(records: LoadResult | Iterable[RequestRecord]) -> tuple[list[RequestRecord], LoadResult | None]:
    if isinstance(records, LoadResult):
        return list(records.records), records
    items = list(records)
    for i, r in enumerate(items):
        if not isinstance(r, RequestRecord):
            raise UsageError(f"replay: records[{i}] is a {type(r).__name__}, expected a RequestRecord")
    return items, None


def _transforms(transforms: Transform | Sequence[Transform]) -> tuple[Transform, ...]:
    items = (transforms,) if isinstance(transforms, Transform) else tuple(transforms)
    for i, t in enumerate(items):
        if not isinstance(t, Transform):
            raise UsageError(f"replay: transforms[{i}] is a {type(t).__name__}, expected a Transform")
    return items


def replay(
    records: LoadResult | Iterable[RequestRecord],
    transforms: Transform | Sequence[Transform],
    *,
    prices: Any = None,
    model: str | None = None,
    before: AnalysisResult | None = None,
    **analysis_options: Any,
) -> WhatIf:
    """Analyze ``records`` as logged and through ``transforms``, and compare (see :class:`WhatIf`).

    ``analysis_options`` go to :func:`promptkit.analysis.analyze_requests` for both sides (``provider``,
    ``view``, ``cache_model``...); a transform's :meth:`~promptkit.whatif.transforms.Transform.after_options`
    override them on the *after* side. ``prices`` / ``model`` price the calls (see
    :func:`promptkit.report.request_costs`). ``before`` reuses an analysis of the same records
    with the same options (what :func:`promptkit.whatif.suggest` does for each candidate).

    Example::

        >>> from promptkit.formats import read_logs
        >>> from promptkit.whatif import parse_transform
        >>> w = replay(read_logs("fixtures/logs/session-before.jsonl"), [parse_transform("move:slot=context")])
        >>> w.overall["after_hit_ratio"] > w.overall["before_hit_ratio"]
        True
    """
    from promptkit.analysis.api import analyze_requests

    items, loaded = _records(records)
    chain = _transforms(transforms)
    after_options = dict(analysis_options)
    for t in chain:
        after_options.update(t.after_options())
    transformed = list(items)
    unchanged: list[Transform] = []
    for t in chain:
        step = apply_transforms(transformed, [t])
        same = all(
            a is b or (a.request == b.request and a.layout == b.layout and a.provider == b.provider)
            for a, b in zip(transformed, step, strict=True)
        )
        if same and items and not t.after_options():
            unchanged.append(t)
        transformed = step
    if before is None:
        before = analyze_requests(loaded if loaded is not None else items, **analysis_options)
    after_input: LoadResult | list[RequestRecord] = transformed
    if loaded is not None:
        after_input = attrs.evolve(loaded, records=tuple(transformed))
    after = analyze_requests(after_input, **after_options)
    comparison = compare(
        before, after, records_before=items, records_after=transformed, prices=prices, model=model
    )
    notes = [REPLAY_NOTE]
    notes += [f"{t.describe()!r} changed no request (nothing matched)" for t in unchanged]
    extra = after.requests.height - before.requests.height
    if extra:
        notes.append(
            f"{abs(extra)} request(s) {'more' if extra > 0 else 'fewer'} could be analyzed after the transforms "
            f"(see after.problems)"
        )
    return WhatIf(
        before=before,
        after=after,
        transforms=chain,
        records=tuple(transformed),
        comparison=comparison,
        notes=tuple(notes),
    )


def format_whatif(whatif: WhatIf) -> str:
    """The comparison as text for a terminal: the transforms, then per session and overall
    ``before → after`` for hit ratio, prompt tokens, cached tokens and cost, then the notes.

    >>> from promptkit.layout import RequestRecord
    >>> r = RequestRecord({"model": "deepseek-chat", "messages": [{"role": "user", "content": "hi"}]}, session="s")
    >>> print(format_whatif(replay([r], [])).splitlines()[0])
    What if: no change
    """
    rows = [("session", "requests", "hit ratio", "prompt tokens", "cached tokens", "cost USD")]
    for row in whatif.comparison.iter_rows(named=True):
        rows.append(
            (
                str(row["session"]),
                str(row["requests"]),
                f"{_pct(row['before_hit_ratio'])} → {_pct(row['after_hit_ratio'])}",
                f"{row['before_prompt_tokens'] or 0:,} → {row['after_prompt_tokens'] or 0:,}",
                f"{row['before_cached_tokens'] or 0:,} → {row['after_cached_tokens'] or 0:,}",
                f"{_num(row['before_cost_usd'])} → {_num(row['after_cost_usd'])}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"What if: {whatif.describe()}", ""]
    for k, r in enumerate(rows):
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
        )
        if k == 0 or k == len(rows) - 2:
            lines.append("  ".join("-" * w for w in widths))
    o = whatif.overall
    if o["saving_usd"] is None:
        lines += ["", "saving: n/a (a model without a price; pass --prices FILE or --model NAME)", ""]
    else:
        saving = o["saving_usd"]
        before_cost = o["before_cost_usd"] or 0.0
        share = f" ({saving / before_cost:.1%} of the cost)" if before_cost else ""
        lines += ["", f"saving: {saving:.4f} USD{share}", ""]
    lines += [f"note: {n}" for n in (*whatif.notes, *whatif.after.notes)]
    return "\n".join(lines)
