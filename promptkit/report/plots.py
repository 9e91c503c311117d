"""matplotlib figures of a cache analysis: hit ratio per turn, prompt composition, predicted vs reported.

Every function returns a :class:`matplotlib.figure.Figure` built without pyplot (no global state,
safe under the Agg backend and in threads) and never calls ``show()``: display it in a notebook by
leaving it as a cell's value, or save it with ``fig.savefig("hit.png")``. Pass ``ax=`` to draw into
an axes of your own figure instead. matplotlib is imported only when a function runs.
:func:`save_plots` writes the report's PNG files without matplotlib (Pillow, :mod:`promptkit.report.plot_png`).

>>> import polars as pl
>>> requests = pl.DataFrame({"session": ["a", "a"], "index": [0, 1], "prompt_tokens": [100, 300],
...                          "predicted_cached_tokens": [0, 64], "hit_ratio": [0.0, 0.2133]})
>>> fig = plot_hit_ratio(requests)
>>> [line.get_label() for line in fig.axes[0].get_lines()]
['a']
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs
import polars as pl

from promptkit.analysis.runtime import gc_paused
from promptkit.errors import UsageError
from promptkit.report.metrics import need_columns, requests_of
from promptkit.report.plot_data import (
    SLOT_ORDER,
    composition_frames,
    composition_grid,
    nice_ticks,
    ordered_slots,
    paint_spans,
    session_colors,
    slot_code,
    slot_colors,
    tokens_label,
)
from promptkit.report.plot_png import (
    GRID_MARGINS,
    LEGEND_SESSIONS,
    MANY_SESSIONS,
    grid_png_size,
    write_composition_png,
    write_hit_ratio_png,
    write_predicted_vs_reported_png,
)

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from promptkit.analysis.result import AnalysisResult
    from promptkit.report.plot_data import CompositionGrid

__all__ = [
    "GRID_SESSIONS",
    "SLOT_ORDER",
    "SavedPlots",
    "plot_composition",
    "plot_composition_grid",
    "plot_hit_ratio",
    "plot_predicted_vs_reported",
    "save_plots",
    "slot_colors",
]

#: Sessions beyond this many are drawn but left out of the legend.
_LEGEND_SESSIONS: Final[int] = LEGEND_SESSIONS
#: Beyond this many sessions the hit-ratio plot shows per-turn quantiles instead of one line per session.
_MANY_SESSIONS: Final[int] = MANY_SESSIONS
#: Sessions :func:`plot_composition_grid` and :func:`save_plots` draw by default (one panel each).
GRID_SESSIONS: Final[int] = 20


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
            raise UsageError("the axes passed as ax= belongs to no figure")
        return figure, ax  # type: ignore[return-value]
    from matplotlib.figure import Figure

    _enable_notebook_display()
    figure = Figure(figsize=figsize, layout="constrained")
    return figure, figure.add_subplot()


def _integer_x(axes: Axes) -> None:
    from matplotlib.ticker import MaxNLocator

    axes.xaxis.set_major_locator(MaxNLocator(integer=True))


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

    With more than :data:`_MANY_SESSIONS` sessions the lines are aggregated per turn: the median over
    sessions (line ``"median"``) and the 10–90 % band (``"10–90 % of sessions"``), and the reported
    median dashed (``"median (reported)"``), so the figure's cost does not grow with sessions.
    """
    frame = requests_of(result)
    need_columns(frame, ("session", "index", "hit_ratio"), "plot_hit_ratio")
    frame = frame.with_columns(pl.col("session").cast(pl.String))
    present = frame["session"].unique(maintain_order=True).to_list()
    if sessions is not None:
        unknown = [s for s in sessions if s not in present]
        if unknown:
            raise UsageError(f"plot_hit_ratio: unknown session(s) {', '.join(map(repr, unknown))}")
        present = [s for s in present if s in set(sessions)]
    has_reported = {"reported_prompt_tokens", "reported_cached_tokens"} <= set(frame.columns) and bool(
        frame["reported_cached_tokens"].is_not_null().any()
    )
    figure, axes = _new_axes(ax, (9, 4.5))
    if len(present) > _MANY_SESSIONS:
        _hit_ratio_band(frame.filter(pl.col("session").is_in(present)), axes, len(present), has_reported)
        return figure
    colors = session_colors(present)
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


#: Most rows of token positions the composition image has; longer prompts are drawn in bins of several
#: tokens (each pixel shows the slot at its bin's first token).
_COMPOSITION_ROWS: Final[int] = 1200


def _hit_ratio_band(frame: pl.DataFrame, axes: Axes, sessions: int, has_reported: bool) -> None:
    """Median and 10–90 % band of the hit ratio per turn over many sessions."""
    ratio = pl.col("hit_ratio").cast(pl.Float64)
    per_turn = (
        frame.group_by("index")
        .agg(
            ratio.median().alias("median"),
            ratio.quantile(0.1, "linear").alias("low"),
            ratio.quantile(0.9, "linear").alias("high"),
        )
        .sort("index")
    )
    x = per_turn["index"].to_numpy()
    axes.fill_between(
        x, per_turn["low"].to_numpy(), per_turn["high"].to_numpy(), alpha=0.25, label="10–90 % of sessions"
    )
    axes.plot(x, per_turn["median"].to_numpy(), linewidth=1.8, label="median")
    if has_reported:
        reported = (
            frame.filter(
                pl.col("reported_cached_tokens").is_not_null() & (pl.col("reported_prompt_tokens") > 0)
            )
            .group_by("index")
            .agg((pl.col("reported_cached_tokens") / pl.col("reported_prompt_tokens")).median().alias("r"))
            .sort("index")
        )
        if reported.height:
            axes.plot(
                reported["index"].to_numpy(), reported["r"].to_numpy(), linestyle="--", color="black",
                linewidth=1, label="median (reported)",
            )  # fmt: skip
    axes.set_ylim(-0.02, 1.02)
    _integer_x(axes)
    axes.set_xlabel("turn (request index in its session)")
    axes.set_ylabel("hit ratio (cached / prompt tokens)")
    axes.set_title(f"Cache hit ratio per turn — {sessions} sessions (median and 10–90 % band)")
    axes.grid(True, alpha=0.3)
    axes.legend(loc="best", fontsize="small")


def _draw_composition_image(
    axes: Axes, spans: pl.DataFrame, slots: Sequence[str], colors: Mapping[str, Any], step: int
) -> None:
    """Draw one session's composition as one image (``spans``: its non-empty spans)."""
    import numpy as np
    from matplotlib.colors import ListedColormap

    index = spans["index"].to_numpy()
    first, last = int(index.min()), int(index.max())
    rows = -(-int((spans["start"] + spans["tokens"]).max()) // step)  # type: ignore[arg-type]
    image = np.full((rows, last - first + 1), -1, dtype=np.int64)
    code = spans.select(slot_code(slots))
    paint_spans(image, index - first, np.zeros_like(index), spans["start"].to_numpy(), spans["tokens"].to_numpy(),
                 code.to_series().to_numpy(), step)  # fmt: skip
    axes.imshow(
        np.ma.masked_less(image, 0),
        cmap=ListedColormap([colors[slot] for slot in slots]),
        vmin=-0.5,
        vmax=len(slots) - 0.5,
        origin="lower",
        aspect="auto",
        interpolation="nearest",
        extent=(first - 0.5, last + 0.5, 0, rows * step),
    )


def _diverged(requests: pl.DataFrame, session: str | None) -> pl.DataFrame:
    reqs = requests.filter(pl.col("session") == session) if session is not None else requests.clear()
    return reqs.filter(pl.col("prefix_tokens") < pl.col("prompt_tokens")).sort("index")


def plot_composition(
    result: AnalysisResult | pl.DataFrame,
    *,
    session: str | None = None,
    composition: pl.DataFrame | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Prompt composition per turn of one session, stacked by slot, with the divergence point marked.

    Drawn as one image (its cost grows with turns × token rows, not with spans): column ``x`` is the
    request with ``index == x``, and the pixel at height ``y`` has the colour of the slot whose span
    (``composition`` rows ``slot, start, tokens``) holds token position ``y`` — so each column is the
    request's prompt in token order, stacked from ``start`` to ``start + tokens``; above the prompt the
    column is empty. Prompts longer than :data:`_COMPOSITION_ROWS` tokens are drawn in bins of several
    tokens. A black tick marks the first divergent token (``prefix_tokens``) of every request whose
    prompt was not wholly shared. ``session`` defaults to the first session. ``result`` may be an
    AnalysisResult or a requests frame with ``composition=`` given. :func:`plot_composition_grid`
    draws every session side by side.
    """
    requests, comp, sessions = composition_frames(result, composition, "plot_composition")
    if session is None:
        session = sessions[0] if sessions else None
    elif session not in sessions and session not in set(comp["session"].to_list()):
        raise UsageError(f"plot_composition: unknown session {session!r}")
    figure, axes = _new_axes(ax, (10, 5))
    spans = comp.filter(pl.col("session") == session) if session is not None else comp.clear()
    spans = spans.filter(pl.col("tokens") > 0).sort("index", "start")
    slots = ordered_slots(spans["slot"].cast(pl.String).to_list())
    colors = slot_colors(slots)
    if spans.height:
        top = int((spans["start"] + spans["tokens"]).max())  # type: ignore[arg-type]
        step = max(1, -(-top // _COMPOSITION_ROWS))  # tokens per pixel row
        _draw_composition_image(axes, spans, slots, colors, step)
    diverged = _diverged(requests, session)
    if diverged.height:
        axes.scatter(
            diverged["index"].to_numpy(),
            diverged["prefix_tokens"].to_numpy(),
            marker="_",
            s=220 if diverged.height <= 60 else 60,
            linewidths=2.5 if diverged.height <= 60 else 1.5,
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
        from matplotlib.patches import Patch

        handles: list[Any] = [Patch(facecolor=colors[slot], label=slot) for slot in slots]
        handles += [h for h in axes.get_legend_handles_labels()[0]]
        # top of the legend = top of the stack
        axes.legend(
            handles=handles[::-1], loc="upper left", fontsize="small", ncols=2 if len(slots) > 8 else 1
        )
    return figure


def plot_composition_grid(
    result: AnalysisResult | pl.DataFrame,
    *,
    sessions: Sequence[str] | None = None,
    composition: pl.DataFrame | None = None,
    max_sessions: int = GRID_SESSIONS,
) -> Figure:
    """The prompt composition of many sessions in one figure: one small panel per session.

    Each panel is what :func:`plot_composition` draws for its session — turns left to right, token
    positions bottom to top, each pixel coloured by the slot that holds that token, and a black tick at
    the first divergent token of every request whose prompt was not wholly shared — titled with the
    session name. All panels share one scale (turn and token position), labelled along the bottom and
    the left edge, and one legend names the slots. The panels are one image in one axes
    (:func:`~promptkit.report.plot_data.composition_grid`), so the cost grows with sessions × turns ×
    pixel rows, not with spans; ``axes.images[0]`` holds the slot code of every pixel (masked outside
    the prompts). ``sessions`` picks the panels (default: every session, in order of appearance); at
    most ``max_sessions`` are drawn, and the title then says how many of how many. ``composition.png``
    of :func:`save_plots` is this figure, drawn with Pillow.

    >>> import polars as pl
    >>> requests = pl.DataFrame({"session": ["a", "a", "b"], "index": [0, 1, 0], "prompt_tokens": [10, 30, 20],
    ...                          "prefix_tokens": [0, 10, 0]})
    >>> comp = pl.DataFrame({"session": ["a", "a", "a", "b"], "index": [0, 1, 1, 0],
    ...                      "slot": ["system", "system", "user", "system"], "start": [0, 0, 10, 0],
    ...                      "tokens": [10, 10, 20, 20]})
    >>> fig = plot_composition_grid(requests, composition=comp)
    >>> [t.get_text() for t in fig.axes[0].texts], len(fig.axes[0].images)
    (['a', 'b'], 1)
    """
    requests, comp, present = composition_frames(result, composition, "plot_composition_grid")
    shown = _grid_sessions(present, set(comp["session"].to_list()), sessions, max_sessions)
    grid = composition_grid(requests, comp, shown)
    from matplotlib.figure import Figure

    _enable_notebook_display()
    width, height = (size / 100 for size in grid_png_size(grid))
    left, right, bottom, top = GRID_MARGINS
    figure = Figure(figsize=(width, height))
    axes = figure.add_axes(
        (left / width, bottom / height, 1 - (left + right) / width, 1 - (bottom + top) / height)
    )
    colors = slot_colors(grid.slots)
    _draw_grid_panels(axes, grid, colors)
    _grid_scales(axes, grid)
    figure.suptitle(_grid_title(len(shown), len(present)), y=1 - 0.08 / height, va="top")
    if grid.slots or len(grid.marks[0]):
        _grid_legend(figure, grid, colors, width, height)
    return figure


def _draw_grid_panels(axes: Axes, grid: CompositionGrid, colors: Mapping[str, Any]) -> None:
    """The panels of ``grid`` on ``axes``: each one's background and frame, the slot of every pixel,
    the first divergent token's tick of each request, the session's name above it."""
    import numpy as np
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import ListedColormap

    rows_total, columns_total = grid.codes.shape
    step, panel_rows, turns = grid.step, grid.panel_rows, grid.turns
    boxes = [
        [(x0 - 0.5, y0 * step), (x0 + turns - 0.5, y0 * step), (x0 + turns - 0.5, (y0 + panel_rows) * step),
         (x0 - 0.5, (y0 + panel_rows) * step)]
        for x0, y0 in grid.origins
    ]  # fmt: skip
    axes.add_collection(
        PolyCollection(boxes, facecolors="#f6f6f6", edgecolors="#9a9a9a", linewidths=0.6, zorder=0)
    )
    if grid.slots:
        axes.imshow(
            np.ma.masked_less(grid.codes, 0),
            cmap=ListedColormap([colors[slot] for slot in grid.slots]),
            vmin=-0.5,
            vmax=len(grid.slots) - 0.5,
            origin="lower",
            aspect="auto",
            interpolation="nearest",
            extent=(-0.5, columns_total - 0.5, 0, rows_total * step),
            zorder=1,
        )
    mark_x, mark_y = grid.marks
    if len(mark_x):
        axes.scatter(mark_x, mark_y, marker="_", s=9, linewidths=0.8, color="black", zorder=3,
                     label="first divergent token")  # fmt: skip
    for session, (x0, y0) in zip(grid.sessions, grid.origins, strict=True):
        axes.text(x0 - 0.5, (y0 + panel_rows) * step, session, fontsize="small", va="bottom", ha="left",
                  clip_on=True)  # fmt: skip


def _grid_scales(axes: Axes, grid: CompositionGrid) -> None:
    """The shared turn and token scales of ``grid``'s panels, labelled under each column and left of
    each row of panels; no spines."""
    rows_total, columns_total = grid.codes.shape
    step, panel_rows, turns = grid.step, grid.panel_rows, grid.turns
    gap_x, gap_y = grid.gaps
    nrows, ncols = grid.shape
    turn_ticks = [t for t in nice_ticks(grid.first, grid.first + turns - 1, 3) if t == int(t)]
    token_ticks = nice_ticks(0, grid.ceiling, 3)
    axes.set_xticks(
        [c * (turns + gap_x) + t - grid.first for c in range(ncols) for t in turn_ticks],
        [f"{t:g}" for _ in range(ncols) for t in turn_ticks],
    )
    axes.set_yticks(
        [r * (panel_rows + gap_y) * step + v for r in range(nrows) for v in token_ticks],
        [tokens_label(v) for _ in range(nrows) for v in token_ticks],
    )
    axes.tick_params(labelsize="x-small", length=2, pad=1.5)
    axes.spines[:].set_visible(False)
    axes.set_xlim(-0.5, columns_total - 0.5)
    axes.set_ylim(0, rows_total * step)
    axes.set_xlabel("turn (request index)")
    axes.set_ylabel("token position")


def _grid_legend(
    figure: Figure, grid: CompositionGrid, colors: Mapping[str, Any], width: float, height: float
) -> None:
    """One legend for the slots of ``grid`` (and the divergence tick), right of the panels of a figure
    ``width`` × ``height`` inches."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    _left, right, _bottom, top = GRID_MARGINS
    handles: list[Any] = [Patch(facecolor=colors[slot], label=slot) for slot in grid.slots][::-1]
    if len(grid.marks[0]):
        handles.append(Line2D([], [], color="black", marker="_", linestyle="", markersize=8,
                              label="first divergent token"))  # fmt: skip
    figure.legend(handles=handles, loc="upper left", bbox_to_anchor=(1 - (right - 0.1) / width, 1 - top / height),
                  fontsize="small", frameon=False)  # fmt: skip


def _grid_sessions(
    present: list[str], known: set[str], sessions: Sequence[str] | None, max_sessions: int
) -> list[str]:
    """The sessions a composition grid shows: ``sessions`` (checked) or all, at most ``max_sessions``."""
    if max_sessions < 1:
        raise UsageError(f"plot_composition_grid: max_sessions must be at least 1, got {max_sessions}")
    if sessions is not None:
        unknown = [s for s in sessions if s not in known and s not in present]
        if unknown:
            raise UsageError(f"plot_composition_grid: unknown session(s) {', '.join(map(repr, unknown))}")
        present = list(dict.fromkeys(sessions))
    return present[:max_sessions]


def _grid_title(shown: int, present: int) -> str:
    if present > shown:
        return f"Prompt composition per turn — the first {shown} of {present} sessions"
    return (
        f"Prompt composition per turn — {shown} session{'s' if shown != 1 else ''}"
        if shown
        else "Prompt composition"
    )


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
    frame = requests_of(result)
    need_columns(frame, ("session", "index", "predicted_cached_tokens"), "plot_predicted_vs_reported")
    if kind not in ("scatter", "turn"):
        raise UsageError(f"plot_predicted_vs_reported: kind must be 'scatter' or 'turn', got {kind!r}")
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
    colors = session_colors(sessions)
    show_legend = len(sessions) <= _LEGEND_SESSIONS
    if kind == "scatter" and not show_legend:  # one collection, coloured per point
        axes.scatter(
            pairs["reported_cached_tokens"].to_numpy(),
            pairs["predicted_cached_tokens"].to_numpy(),
            s=10,
            c=[colors[x] for x in pairs["session"].to_list()],
            alpha=0.8,
            label=f"_{len(sessions)} sessions",
        )
        sessions = []
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


@attrs.frozen(slots=True)
class SavedPlots(Mapping[str, Path]):
    """The files :func:`save_plots` wrote (a mapping name -> path) and the plots it skipped.

    ``skipped`` maps a plot's name to why it was not written (nothing to show, or beyond
    ``max_sessions``): no figure file is ever empty.
    """

    files: Mapping[str, Path]
    skipped: Mapping[str, str] = attrs.field(factory=dict)

    def __getitem__(self, name: str) -> Path:
        return self.files[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    @property
    def notes(self) -> tuple[str, ...]:
        """One line per skipped plot: ``"<name>: <reason>"``."""
        return tuple(f"{name}: {reason}" for name, reason in self.skipped.items())


def save_plots(
    result: AnalysisResult,
    out_dir: str | Path,
    *,
    max_sessions: int = GRID_SESSIONS,
    dpi: int = 100,
    progress: bool = False,
) -> SavedPlots:
    """Write every plot that has something to show as PNG into ``out_dir`` (created if needed).

    Files: ``hit_ratio.png`` (what :func:`plot_hit_ratio` shows), ``predicted_vs_reported.png`` (the
    scatter of :func:`plot_predicted_vs_reported`; only when the log has reported usage) and
    ``composition.png`` (:func:`plot_composition_grid`: one panel per session, the first
    ``max_sessions``; only when the result has a composition frame). They are drawn straight to pixels
    with Pillow (:mod:`promptkit.report.plot_png`; matplotlib is not imported), one file per kind of
    plot, so the time grows with sessions, turns and pixels, not with spans or files. Returns a
    :class:`SavedPlots`: name -> path, plus ``skipped`` (name -> reason) for every plot, or part of one,
    left out. ``progress`` shows a progress bar (tqdm) while drawing.

    >>> import tempfile, polars as pl
    >>> from types import SimpleNamespace
    >>> frame = pl.DataFrame({"session": ["a"], "index": [0], "hit_ratio": [0.5], "predicted_cached_tokens": [5]})
    >>> saved = save_plots(SimpleNamespace(requests=frame), tempfile.mkdtemp())
    >>> list(saved)
    ['hit_ratio']
    >>> for note in saved.notes:
    ...     print(note)
    predicted_vs_reported: no reported usage in the input
    composition: the result has no composition frame
    """
    out = Path(out_dir)
    requests = requests_of(result)
    written: dict[str, Path] = {}
    skipped: dict[str, str] = {}
    jobs: list[tuple[str, Callable[[Path], Path]]] = []
    if requests.height:
        need_columns(requests, ("session", "index", "hit_ratio"), "save_plots")
        jobs.append(("hit_ratio", lambda path: write_hit_ratio_png(requests, path, dpi=dpi)))
    else:
        skipped["hit_ratio"] = "no analyzed request"
    has_usage = "reported_cached_tokens" in requests.columns and bool(
        requests["reported_cached_tokens"].is_not_null().any()
    )
    if has_usage:
        jobs.append(
            ("predicted_vs_reported", lambda path: write_predicted_vs_reported_png(requests, path, dpi=dpi))
        )
    else:
        skipped["predicted_vs_reported"] = "no reported usage in the input"
    composition = getattr(result, "composition", None)
    if isinstance(composition, pl.DataFrame) and composition.height:
        reqs, comp, present = composition_frames(result, composition, "save_plots")
        shown = _grid_sessions(present, set(), None, max_sessions)
        title = _grid_title(len(shown), len(present))
        jobs.append(("composition", lambda path: write_composition_png(
            composition_grid(reqs, comp, shown), path, title=title, dpi=dpi)))  # fmt: skip
        if len(present) > len(shown):
            skipped["composition"] = (
                f"drawn for the first {len(shown)} of {len(present)} sessions (max_sessions={max_sessions})"
            )
    elif requests.height:
        skipped["composition"] = "the result has no composition frame"
    if jobs:
        out.mkdir(parents=True, exist_ok=True)
    bar: Any = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs), desc="plots", unit="file")
    # perf: with an analysis' records alive, the cyclic collector would re-scan that whole heap while
    # the drawing allocates; nothing drawn here holds a reference cycle
    with gc_paused():
        for name, draw in jobs:
            if bar is not None:
                bar.set_postfix_str(f"{name}.png", refresh=False)
            written[name] = draw(out / f"{name}.png")
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    return SavedPlots(written, skipped)
