"""The fleet comparison presented: its table and its plot (hit ratio against capacity, one line per
policy); :func:`~promptkit.report.html.render_fleet_html` draws its section of the HTML report.

The simulation itself is :mod:`promptkit.analysis.fleet`; this module only reads its frames.
:func:`~promptkit.commands.fleet.fleet_report` (what ``promptkit fleet`` calls) runs the comparison
and writes its files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl
    from matplotlib.figure import Figure


__all__ = ["fleet_table", "plot_fleet"]

#: Names that moved to :mod:`promptkit.commands.fleet` (they work here for one release, with a
#: DeprecationWarning naming the new home).
_MOVED = ("FleetReport", "fleet_report")

_SHOWN = (
    "model", "capacity_bytes", "policy", "replicas", "capacity_tokens", "shared_capacity_tokens", "hit_ratio",
    "shared_hit_ratio", "mean_replica_hit_ratio", "load_imbalance", "cached_tokens", "prefill_tokens",
)  # fmt: skip


def fleet_table(summary: pl.DataFrame) -> pl.DataFrame:
    """The summary's columns worth reading, ``capacity_tokens`` null shown as unbounded, sorted by
    capacity and replicas (the shared tier's columns only when there is one). ``cached_tokens`` are
    the prefill tokens saved.

    >>> import polars as pl
    >>> s = pl.DataFrame({"policy": ["round_robin"], "replicas": [4], "capacity_tokens": [None],
    ...                   "hit_ratio": [0.19], "cached_tokens": [10]})
    >>> fleet_table(s)["capacity"].to_list()
    ['unbounded']
    """
    import polars as pl

    columns = [c for c in _SHOWN if c in summary.columns]
    if "shared_tier" in summary.columns and not summary["shared_tier"].any():
        columns = [c for c in columns if c not in ("shared_capacity_tokens", "shared_hit_ratio")]
    frame = summary.select(columns).sort(
        [c for c in ("model", "capacity_tokens", "replicas") if c in columns],
        nulls_last=True,
        maintain_order=True,
    )
    label = (
        pl.when(pl.col("capacity_tokens").is_null())
        .then(pl.lit("unbounded"))
        .otherwise(pl.col("capacity_tokens").cast(pl.String))
    )
    return frame.with_columns(label.alias("capacity")).select(
        ["capacity" if c == "capacity_tokens" else c for c in columns]
    )


def plot_fleet(summary: pl.DataFrame) -> Figure:
    """Hit ratio against capacity per replica, one line per policy, one panel per replica count (and
    model). An unbounded cache is the last point, marked ``∞``.

    >>> import polars as pl
    >>> s = pl.DataFrame({"policy": ["a", "a"], "replicas": [2, 2], "capacity_tokens": [1000, None],
    ...                   "hit_ratio": [0.1, 0.3]})
    >>> [line.get_label() for line in plot_fleet(s).axes[0].get_lines()]
    ['a']
    """
    import polars as pl
    from matplotlib.figure import Figure

    keys = (
        ["model", "replicas"]
        if "model" in summary.columns and summary["model"].null_count() == 0
        else ["replicas"]
    )
    panels = summary.select(keys).unique(maintain_order=True)
    finite = summary["capacity_tokens"].drop_nulls()
    top = float(finite.max()) * 4 if finite.len() else 1.0  # type: ignore[arg-type]
    figure = Figure(figsize=(4.2 * panels.height, 3.4), layout="constrained")
    axes = figure.subplots(1, panels.height, squeeze=False, sharey=True)[0]
    for ax, key in zip(axes, panels.iter_rows(named=True), strict=True):
        part = summary.filter(pl.all_horizontal(pl.col(k) == v for k, v in key.items()))
        for policy in part["policy"].unique(maintain_order=True):
            line = part.filter(pl.col("policy") == policy).sort("capacity_tokens", nulls_last=True)
            xs = [top if c is None else float(c) for c in line["capacity_tokens"]]
            ax.plot(xs, line["hit_ratio"].to_list(), marker="o", label=str(policy))
        if finite.len():
            ax.set_xscale("log")
        ax.set_title(", ".join(f"{k} {v}" for k, v in key.items()), fontsize=10)
        ax.set_xlabel("capacity per replica (tokens; ∞ = unbounded)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("fleet hit ratio")
    axes[0].legend(fontsize=8)
    if finite.len():
        for ax in axes:
            ticks = [t for t in ax.get_xticks() if 0 < t < top / 2] + [top]
            ax.set_xticks(ticks, [f"{t:,.0f}" if t != top else "∞" for t in ticks], fontsize=7, rotation=30)
    return figure


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        import importlib
        import warnings

        warnings.warn(
            f"{__name__}.{name} moved to promptkit.commands.fleet.{name}; import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module("promptkit.commands.fleet"), name)
    from promptkit.errors import UnknownAttributeError

    raise UnknownAttributeError(f"module {__name__!r} has no attribute {name!r}")
