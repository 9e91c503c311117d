"""The fleet comparison presented: the verdict, the pivot, the table and the plot of
:func:`~promptkit.analysis.fleet.compare_fleet`'s summary, and the fleet section of the HTML report.

The simulation itself is :mod:`promptkit.analysis.fleet`; this module only reads its frames. Sizes are
shown as :mod:`promptkit.analysis.sizes` writes them (binary: ``1M`` tokens = 1,048,576) and in GiB.
``fleet_report`` (which runs the comparison and writes its files) moved to
:mod:`promptkit.commands.fleet`; importing it from here still works for one release, with a
:class:`DeprecationWarning`.

>>> import polars as pl
>>> s = pl.DataFrame({"policy": ["round_robin", "prefix_aware"], "replicas": [4, 4],
...                   "capacity_tokens": [None, None], "hit_ratio": [0.196, 0.370],
...                   "ceiling_hit_ratio": [0.374, 0.374], "load_imbalance": [1.02, 1.04]})
>>> fleet_verdict(s).select("replicas", "best", "share_of_ceiling", "runner_up").rows()
[(4, 'prefix_aware', 0.9893, 'round_robin')]
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from promptkit.errors import UnknownAttributeError

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl
    from matplotlib.figure import Figure

__all__ = ["fleet_pivot", "fleet_table", "fleet_verdict", "plot_fleet", "verdict_lines"]

_SHOWN = (
    "model", "capacity", "policy", "replicas", "shared_capacity_tokens", "hit_ratio", "ceiling_hit_ratio",
    "shared_hit_ratio", "mean_replica_hit_ratio", "load_imbalance", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s",
    "cached_tokens", "prefill_tokens",
)  # fmt: skip


def _group_keys(summary: pl.DataFrame) -> list[str]:
    keys = ["model"] if "model" in summary.columns and summary["model"].null_count() == 0 else []
    keys += ["capacity_tokens", "replicas"]
    if "shared_capacity_tokens" in summary.columns and summary["shared_capacity_tokens"].null_count() == 0:
        keys.append("shared_capacity_tokens")
    return keys


def _capacity_labels(summary: pl.DataFrame) -> list[str]:
    """``4M tokens``, or ``4M tokens (0.50 GiB)`` when the summary knows the bytes."""
    from promptkit.analysis.sizes import format_bytes, format_tokens

    tokens = summary["capacity_tokens"].to_list()
    sizes = (
        summary["capacity_bytes"].to_list()
        if "capacity_bytes" in summary.columns
        else [None] * summary.height
    )
    return [
        f"{format_tokens(t)} tokens" + (f" ({format_bytes(b)})" if b is not None else "")
        if t is not None
        else "unbounded"
        for t, b in zip(tokens, sizes, strict=True)
    ]


def _with_labels(summary: pl.DataFrame) -> pl.DataFrame:
    import polars as pl

    return summary.with_columns(pl.Series("capacity", _capacity_labels(summary), pl.String))


def fleet_table(summary: pl.DataFrame) -> pl.DataFrame:
    """The summary's columns worth reading, capacities as tokens (and GiB with a model), sorted by
    capacity and replicas (the shared tier's and the latency model's columns only when there is one).
    ``cached_tokens`` are the prefill tokens saved.

    >>> import polars as pl
    >>> s = pl.DataFrame({"policy": ["round_robin"], "replicas": [4], "capacity_tokens": [None],
    ...                   "hit_ratio": [0.19], "cached_tokens": [10]})
    >>> fleet_table(s)["capacity"].to_list()
    ['unbounded']
    """
    frame = _with_labels(summary).sort(
        [c for c in ("model", "capacity_tokens", "replicas") if c in summary.columns],
        nulls_last=True,
        maintain_order=True,
    )
    columns = [c for c in _SHOWN if c in frame.columns and frame[c].null_count() < frame.height]
    if "shared_tier" in summary.columns and not summary["shared_tier"].any():
        columns = [c for c in columns if c not in ("shared_capacity_tokens", "shared_hit_ratio")]
    return frame.select(columns)


def fleet_pivot(summary: pl.DataFrame, value: str = "hit_ratio") -> pl.DataFrame:
    """One row per (model,) capacity and replica count, one column per policy, holding ``value``
    (``hit_ratio``, ``load_imbalance``, ``ttft_p50_s``, ...).

    >>> import polars as pl
    >>> s = pl.DataFrame({"policy": ["a", "b"], "replicas": [2, 2], "capacity_tokens": [2**20, 2**20],
    ...                   "hit_ratio": [0.1, 0.3]})
    >>> fleet_pivot(s).rows()
    [('1M tokens', 2, 0.1, 0.3)]
    """
    keys = _group_keys(summary)
    frame = _with_labels(summary).sort(
        [k for k in keys if k != "replicas"] + ["replicas"], nulls_last=True, maintain_order=True
    )
    index = ["capacity" if k == "capacity_tokens" else k for k in keys]
    wide = frame.pivot(on="policy", index=index, values=value, aggregate_function="first", maintain_order=True)
    return wide.select(*index, *summary["policy"].unique(maintain_order=True).to_list())


def _ranked(part: pl.DataFrame) -> list[dict[str, Any]]:
    rows = part.to_dicts()
    return sorted(rows, key=lambda r: (-(r["hit_ratio"] or 0.0), r.get("load_imbalance") or 0.0, r["policy"]))


def _share(row: dict[str, Any]) -> float | None:
    ceiling = row.get("ceiling_hit_ratio")
    if not ceiling or row["hit_ratio"] is None:
        return None
    return round(float(row["hit_ratio"]) / float(ceiling), 4)


def fleet_verdict(summary: pl.DataFrame) -> pl.DataFrame:
    """Per (model,) capacity and replica count: the ``best`` policy (highest hit ratio; ties: the lower
    imbalance), its ``hit_ratio``, ``share_of_ceiling`` (its hit ratio over ``ceiling_hit_ratio``, one
    cache holding the fleet's memory), ``load_imbalance`` and median TTFT, the ``runner_up`` with its
    own, and with a latency model the ``fastest`` policy (lowest median TTFT)."""
    import polars as pl

    keys = _group_keys(summary)
    labelled = _with_labels(summary)
    timed = "ttft_p50_s" in summary.columns and summary["ttft_p50_s"].null_count() < summary.height
    rows: list[dict[str, Any]] = []
    for _, part in labelled.group_by(keys, maintain_order=True):
        ranked = _ranked(part)
        best = ranked[0]
        second = ranked[1] if len(ranked) > 1 else None
        if best["replicas"] == 1:  # one replica: every policy is the same fleet
            best, second = {**best, "policy": "any"}, None
        row: dict[str, Any] = {"capacity": best["capacity"], **{k: best[k] for k in keys}}
        row.update(
            best=best["policy"], hit_ratio=best["hit_ratio"], ceiling_hit_ratio=best.get("ceiling_hit_ratio"),
            share_of_ceiling=_share(best), load_imbalance=best.get("load_imbalance"),
            runner_up=second["policy"] if second else None,
            runner_up_hit_ratio=second["hit_ratio"] if second else None,
            runner_up_share=_share(second) if second else None,
            runner_up_imbalance=second.get("load_imbalance") if second else None,
        )  # fmt: skip
        if timed:
            fastest = min(ranked, key=lambda r: (r["ttft_p50_s"] is None, r["ttft_p50_s"] or 0.0))
            row.update(
                best_ttft_p50_s=best["ttft_p50_s"], runner_up_ttft_p50_s=second["ttft_p50_s"] if second else None,
                fastest=fastest["policy"], fastest_ttft_p50_s=fastest["ttft_p50_s"],
            )  # fmt: skip
        rows.append(row)
    return pl.DataFrame(rows)


def verdict_lines(verdict: pl.DataFrame) -> list[str]:
    """The verdict in words, one line per (model,) capacity and replica count.

    >>> import polars as pl
    >>> v = pl.DataFrame({"capacity": ["unbounded"], "replicas": [4], "best": ["prefix_aware"],
    ...     "hit_ratio": [0.37], "share_of_ceiling": [0.99], "load_imbalance": [1.044],
    ...     "runner_up": ["round_robin"], "runner_up_share": [0.52], "runner_up_imbalance": [1.02]})
    >>> verdict_lines(v)[0]
    'unbounded, 4 replicas: prefix_aware keeps 99.0% of the one-cache ceiling (hit ratio 0.370) at imbalance 1.044; runner-up round_robin 52.0% at 1.020'
    """

    def pct(v: float | None) -> str:
        return "–" if v is None else f"{v:.1%}"

    def num(v: float | None, digits: int = 3) -> str:
        return "–" if v is None else f"{v:.{digits}f}"

    out = []
    for row in verdict.iter_rows(named=True):
        where = ", ".join(
            [*([str(row["model"])] if row.get("model") else []), str(row["capacity"]), f"{row['replicas']} replica" + ("s" if row["replicas"] != 1 else "")]
        )
        text = (
            f"{where}: {'every policy' if row['best'] == 'any' else row['best']} keeps {pct(row['share_of_ceiling'])} of the one-cache ceiling "
            f"(hit ratio {num(row['hit_ratio'])}) at imbalance {num(row['load_imbalance'])}"
        )
        if row.get("best_ttft_p50_s") is not None:
            text += f", median TTFT {num(row['best_ttft_p50_s'])} s"
        if row.get("runner_up"):
            text += (
                f"; runner-up {row['runner_up']} {pct(row['runner_up_share'])} at "
                f"{num(row['runner_up_imbalance'])}"
            )
        if row.get("fastest") and row["fastest"] != row["best"]:
            text += f"; fastest first token: {row['fastest']} ({num(row['fastest_ttft_p50_s'])} s median)"
        out.append(text)
    return out


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

    from promptkit.analysis.sizes import format_tokens

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
            ax.set_xticks(ticks, [format_tokens(int(t)) if t != top else "∞" for t in ticks], fontsize=7, rotation=30)
    return figure


_MOVED = {"fleet_report": "promptkit.commands.fleet", "FleetReport": "promptkit.commands.fleet"}


def __getattr__(name: str) -> Any:
    """``fleet_report`` and ``FleetReport`` moved to :mod:`promptkit.commands.fleet` (deprecated alias,
    one release)."""
    home = _MOVED.get(name)
    if home is None:
        raise UnknownAttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"promptkit.report.fleet.{name} moved to {home}.{name}; import it from there",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(home), name)
