"""matplotlib figures of a cache analysis: hit ratio per turn, prompt composition, predicted vs reported.

Every function returns a :class:`matplotlib.figure.Figure` built without pyplot (no global state,
safe under the Agg backend and in threads) and never calls ``show()``: display it in a notebook by
leaving it as a cell's value, or save it with ``fig.savefig("hit.png")``. Pass ``ax=`` to draw into
an axes of your own figure instead. matplotlib is imported only when a function runs.

>>> import polars as pl
>>> requests = pl.DataFrame({"session": ["a", "a"], "index": [0, 1], "prompt_tokens": [100, 300],
...                          "predicted_cached_tokens": [0, 64], "hit_ratio": [0.0, 0.2133]})
>>> fig = plot_hit_ratio(requests)
>>> [line.get_label() for line in fig.axes[0].get_lines()]
['a']
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

import polars as pl

from promptkit.cache.report import ReportInputError, _need, _requests_of

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from promptkit.cache.engine import AnalysisResult

__all__ = [
    "SLOT_ORDER",
    "plot_composition",
    "plot_hit_ratio",
    "plot_predicted_vs_reported",
    "save_plots",
    "slot_colors",
]

#: Slots in prompt order (tool definitions, header, frame roles and anchors, then message roles of
#: logs without a layout); the composition plot stacks and colours slots in this order.
SLOT_ORDER: Final[tuple[str, ...]] = (
    "tools",
    "header",
    "persona",
    "identity",
    "knowledge",
    "context",
    "history",
    "turn-context",
    "volatile",
    "focus",
    "turn-hint",
    "directive",
    "current",
    "system",
    "user",
    "assistant",
    "tool",
    "template",
    "generation",
)
#: Sessions beyond this many are drawn but left out of the legend.
_LEGEND_SESSIONS: Final[int] = 10


def _enable_notebook_display() -> None:
    """In a Jupyter kernel, let a pyplot-free Figure display as PNG (what ``%matplotlib inline`` does
    for pyplot figures); outside IPython, or when a formatter is already registered, do nothing."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or not hasattr(shell, "kernel"):
        return
    from matplotlib.figure import Figure

    png = shell.display_formatter.formatters["image/png"]
    if Figure in png.type_printers:
        return
    from IPython.core.pylabtools import print_figure

    png.for_type(Figure, lambda figure: print_figure(figure, "png", bbox_inches="tight"))  # type: ignore[no-untyped-call,unused-ignore]


def _new_axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    if ax is not None:
        figure = ax.get_figure()
        if figure is None:  # pragma: no cover - an Axes always belongs to a figure in practice
            raise ValueError("the axes passed as ax= belongs to no figure")
        return figure, ax  # type: ignore[return-value]
    from matplotlib.figure import Figure

    _enable_notebook_display()
    figure = Figure(figsize=figsize, layout="constrained")
    return figure, figure.add_subplot()


def _integer_x(axes: Axes) -> None:
    from matplotlib.ticker import MaxNLocator

    axes.xaxis.set_major_locator(MaxNLocator(integer=True))


def _session_colors(sessions: Sequence[str]) -> dict[str, tuple[float, float, float, float]]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if len(sessions) <= 10 else "tab20"]
    return {s: cmap(i % cmap.N) for i, s in enumerate(sessions)}


def slot_colors(slots: Sequence[str]) -> dict[str, tuple[float, float, float, float]]:
    """A stable colour per slot: known slots keep their colour across figures, others follow.

    >>> colors = slot_colors(["history", "current"])
    >>> colors["history"] == slot_colors(["current", "history", "extra"])["history"]
    True
    """
    from matplotlib import colormaps

    known = colormaps["tab20"]
    extra = colormaps["Set3"]
    colors: dict[str, tuple[float, float, float, float]] = {}
    unknown = 0
    for slot in slots:
        if slot in SLOT_ORDER:
            colors[slot] = known(SLOT_ORDER.index(slot) % known.N)
        else:
            colors[slot] = extra(unknown % extra.N)
            unknown += 1
    return colors


def _ordered_slots(slots: Sequence[str]) -> list[str]:
    known = [s for s in SLOT_ORDER if s in slots]
    return known + [s for s in dict.fromkeys(slots) if s not in SLOT_ORDER]


def plot_hit_ratio(
    result: AnalysisResult | pl.DataFrame,
    *,
    sessions: Sequence[str] | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Hit ratio per turn, one line per session; the provider's reported ratio dashed on top.

    x is the request ``index`` in its session, y the predicted ``hit_ratio`` (0..1). Where the log has
    usage, ``reported_cached_tokens / reported_prompt_tokens`` is drawn dashed in the session's colour
    with the label ``"<session> (reported)"``. ``sessions`` limits the plot to those sessions.
    """
    frame = _requests_of(result)
    _need(frame, ("session", "index", "hit_ratio"), "plot_hit_ratio")
    frame = frame.with_columns(pl.col("session").cast(pl.String))
    present = frame["session"].unique(maintain_order=True).to_list()
    if sessions is not None:
        unknown = [s for s in sessions if s not in present]
        if unknown:
            raise ValueError(f"plot_hit_ratio: unknown session(s) {', '.join(map(repr, unknown))}")
        present = [s for s in present if s in set(sessions)]
    has_reported = {"reported_prompt_tokens", "reported_cached_tokens"} <= set(frame.columns) and bool(
        frame["reported_cached_tokens"].is_not_null().any()
    )
    figure, axes = _new_axes(ax, (9, 4.5))
    colors = _session_colors(present)
    show_legend = len(present) <= _LEGEND_SESSIONS
    for session in present:
        rows = frame.filter(pl.col("session") == session).sort("index")
        color = colors[session]
        axes.plot(
            rows["index"].to_numpy(),
            rows["hit_ratio"].cast(pl.Float64).to_numpy(),
            color=color,
            marker="o",
            markersize=3,
            linewidth=1.5,
            label=session if show_legend else f"_{session}",
        )
        if has_reported:
            reported = rows.filter(
                pl.col("reported_cached_tokens").is_not_null() & (pl.col("reported_prompt_tokens") > 0)
            ).select(
                "index", (pl.col("reported_cached_tokens") / pl.col("reported_prompt_tokens")).alias("r")
            )
            if reported.height:
                axes.plot(
                    reported["index"].to_numpy(),
                    reported["r"].to_numpy(),
                    color=color,
                    linestyle="--",
                    marker="x",
                    markersize=4,
                    linewidth=1,
                    label=f"{session} (reported)" if show_legend else f"_{session} (reported)",
                )
    axes.set_ylim(-0.02, 1.02)
    _integer_x(axes)
    axes.set_xlabel("turn (request index in its session)")
    axes.set_ylabel("hit ratio (cached / prompt tokens)")
    axes.set_title("Cache hit ratio per turn")
    axes.grid(True, alpha=0.3)
    if show_legend and present:
        from matplotlib.lines import Line2D

        handles = [Line2D([], [], color=colors[s], linewidth=3, label=s) for s in present]
        if has_reported:
            handles += [
                Line2D([], [], color="black", marker="o", markersize=3, label="predicted"),
                Line2D([], [], color="black", linestyle="--", marker="x", markersize=4, label="reported"),
            ]
        axes.legend(handles=handles, loc="best", fontsize="small")
    return figure


def plot_composition(
    result: AnalysisResult,
    *,
    session: str | None = None,
    composition: pl.DataFrame | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Prompt composition per turn of one session, stacked by slot, with the divergence point marked.

    Each request is a bar; each slot span (``composition`` rows ``slot, start, tokens``) is a segment
    from ``start`` to ``start + tokens``, so the stack follows the prompt's token order and the y
    axis is a token position. A black tick marks the first divergent token (``prefix_tokens``) of
    every request whose prompt was not wholly shared. ``session`` defaults to the first session.
    ``result`` may be an AnalysisResult or a requests frame with ``composition=`` given.
    """
    requests = _requests_of(result)
    comp = composition if composition is not None else getattr(result, "composition", None)
    if not isinstance(comp, pl.DataFrame):
        raise ReportInputError(
            "plot_composition needs a composition frame (result.composition or composition=)"
        )
    _need(comp, ("session", "index", "slot", "start", "tokens"), "plot_composition")
    _need(requests, ("session", "index", "prompt_tokens", "prefix_tokens"), "plot_composition")
    comp = comp.with_columns(pl.col("session").cast(pl.String))
    requests = requests.with_columns(pl.col("session").cast(pl.String))
    sessions = requests["session"].unique(maintain_order=True).to_list()
    if session is None:
        if not sessions:
            sessions = comp["session"].unique(maintain_order=True).to_list()
        session = sessions[0] if sessions else None
    elif session not in sessions and session not in set(comp["session"].to_list()):
        raise ValueError(f"plot_composition: unknown session {session!r}")
    figure, axes = _new_axes(ax, (10, 5))
    spans = comp.filter(pl.col("session") == session) if session is not None else comp.clear()
    slots = _ordered_slots(spans["slot"].cast(pl.String).to_list())
    colors = slot_colors(slots)
    for slot in slots:
        rows = spans.filter(pl.col("slot") == slot)
        axes.bar(
            rows["index"].to_numpy(),
            rows["tokens"].to_numpy(),
            bottom=rows["start"].to_numpy(),
            width=0.8,
            color=colors[slot],
            label=slot,
            linewidth=0,
        )
    reqs = requests.filter(pl.col("session") == session) if session is not None else requests.clear()
    diverged = reqs.filter(pl.col("prefix_tokens") < pl.col("prompt_tokens")).sort("index")
    if diverged.height:
        axes.scatter(
            diverged["index"].to_numpy(),
            diverged["prefix_tokens"].to_numpy(),
            marker="_",
            s=220,
            linewidths=2.5,
            color="black",
            zorder=3,
            label="first divergent token",
        )
    _integer_x(axes)
    axes.set_xlabel("turn (request index)")
    axes.set_ylabel("token position")
    axes.set_title(f"Prompt composition per turn — session {session}" if session else "Prompt composition")
    axes.grid(True, axis="y", alpha=0.3)
    if slots or diverged.height:
        handles, labels = axes.get_legend_handles_labels()
        # top of the legend = top of the stack
        axes.legend(
            handles[::-1], labels[::-1], loc="upper left", fontsize="small", ncols=2 if len(slots) > 8 else 1
        )
    return figure


def plot_predicted_vs_reported(
    result: AnalysisResult | pl.DataFrame,
    *,
    kind: Literal["scatter", "turn"] = "scatter",
    ax: Axes | None = None,
) -> Figure:
    """Predicted against reported cached tokens for the requests whose log has usage.

    ``kind="scatter"``: one point per request (x reported, y predicted, coloured by session) and the
    dashed ``y = x`` line; points above it are over-predictions. ``kind="turn"``: per session, predicted
    (solid) and reported (dashed) cached tokens against the request index. Without any usage in the
    log the axes say so in a text note.
    """
    frame = _requests_of(result)
    _need(frame, ("session", "index", "predicted_cached_tokens"), "plot_predicted_vs_reported")
    if kind not in ("scatter", "turn"):
        raise ValueError(f"plot_predicted_vs_reported: kind must be 'scatter' or 'turn', got {kind!r}")
    figure, axes = _new_axes(ax, (6.5, 6) if kind == "scatter" else (9, 4.5))
    pairs = (
        frame.filter(pl.col("reported_cached_tokens").is_not_null())
        if "reported_cached_tokens" in frame.columns
        else frame.clear()
    ).with_columns(pl.col("session").cast(pl.String))
    axes.set_title("Predicted vs reported cached tokens")
    if pairs.height == 0:
        axes.text(
            0.5, 0.5, "no reported usage in the input", ha="center", va="center", transform=axes.transAxes
        )
        axes.set_axis_off()
        return figure
    sessions = pairs["session"].unique(maintain_order=True).to_list()
    colors = _session_colors(sessions)
    show_legend = len(sessions) <= _LEGEND_SESSIONS
    for session in sessions:
        rows = pairs.filter(pl.col("session") == session).sort("index")
        label = session if show_legend else f"_{session}"
        if kind == "scatter":
            axes.scatter(
                rows["reported_cached_tokens"].to_numpy(),
                rows["predicted_cached_tokens"].to_numpy(),
                s=14,
                color=colors[session],
                label=label,
                alpha=0.8,
            )
        else:
            axes.plot(
                rows["index"].to_numpy(),
                rows["predicted_cached_tokens"].to_numpy(),
                color=colors[session],
                label=f"{label} predicted",
            )
            axes.plot(
                rows["index"].to_numpy(),
                rows["reported_cached_tokens"].to_numpy(),
                color=colors[session],
                linestyle="--",
                label=f"{label} reported",
            )
    if kind == "scatter":
        top_value = pairs.select(
            pl.max_horizontal(pl.col("reported_cached_tokens").max(), pl.col("predicted_cached_tokens").max())
        ).item()
        top = float(top_value or 1)
        axes.plot([0, top], [0, top], linestyle="--", color="grey", linewidth=1, label="y = x")
        axes.set_xlabel("reported cached tokens")
        axes.set_ylabel("predicted cached tokens")
        axes.set_aspect("equal", adjustable="datalim")
    else:
        _integer_x(axes)
        axes.set_xlabel("turn (request index)")
        axes.set_ylabel("cached tokens")
    axes.grid(True, alpha=0.3)
    axes.legend(loc="best", fontsize="small")
    return figure


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "session"


def save_plots(
    result: AnalysisResult,
    out_dir: str | Path,
    *,
    max_sessions: int = 12,
    dpi: int = 110,
    skipped: dict[str, str] | None = None,
) -> dict[str, Path]:
    """Write every plot that has something to show as PNG into ``out_dir`` (created if needed);
    returns name -> path.

    Files: ``hit_ratio.png``, ``predicted_vs_reported.png`` (only when the log has usage) and
    ``composition-<session>.png`` for the first ``max_sessions`` sessions (when the result has a
    composition frame). The caller learns how many sessions were left out from the returned names; a
    plot left out because it would be empty is added to ``skipped`` (name -> why) when given.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}

    def save(name: str, figure: Figure) -> None:
        path = out / f"{name}.png"
        figure.savefig(path, dpi=dpi)
        written[name] = path

    save("hit_ratio", plot_hit_ratio(result))
    frame = _requests_of(result)
    if "reported_cached_tokens" in frame.columns and frame["reported_cached_tokens"].is_not_null().any():
        save("predicted_vs_reported", plot_predicted_vs_reported(result))
    elif skipped is not None:
        skipped["predicted_vs_reported"] = "the log has no provider usage to compare the prediction with"
    composition = getattr(result, "composition", None)
    if isinstance(composition, pl.DataFrame) and composition.height:
        sessions = _requests_of(result)["session"].cast(pl.String).unique(maintain_order=True).to_list()
        used: set[str] = set()
        for session in sessions[:max_sessions]:
            name = f"composition-{_safe_name(session)}"
            while name in used:
                name += "_"
            used.add(name)
            save(name, plot_composition(result, session=session))
    return written
