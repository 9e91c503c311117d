"""What the plots draw, computed without any drawing library: slot order and colours, the composition raster.

Both renderers read it: :mod:`promptkit.report.plots` (matplotlib figures, for notebooks and your own
figures) and :mod:`promptkit.report.plot_png` (the PNG files :func:`~promptkit.report.plots.save_plots`
writes, drawn with Pillow). Nothing here imports matplotlib, so the colours are the tables of
matplotlib's ``tab10``, ``tab20`` and ``Set3`` colour maps, written out.

>>> grid = composition_grid(
...     pl.DataFrame({"session": ["a", "a"], "index": [0, 1], "prompt_tokens": [4, 6], "prefix_tokens": [0, 4]}),
...     pl.DataFrame({"session": ["a"] * 3, "index": [0, 1, 1], "slot": ["system", "system", "user"],
...                   "start": [0, 0, 4], "tokens": [4, 4, 2]}),
... )
>>> grid.slots, grid.step, grid.codes[: grid.panel_rows].tolist()[::-1]  # top row first
(('system', 'user'), 1, [[-1, 1], [-1, 1], [0, 0], [0, 0], [0, 0], [0, 0]])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

import attrs
import polars as pl

from promptkit.errors import ReportInputError, UsageError
from promptkit.report.metrics import need_columns, requests_of

__all__ = [
    "RGBA",
    "SET3",
    "SLOT_ORDER",
    "TAB10",
    "TAB20",
    "CompositionGrid",
    "composition_frames",
    "composition_grid",
    "grid_shape",
    "hex_rgba",
    "nice_ticks",
    "ordered_slots",
    "paint_spans",
    "session_colors",
    "slot_code",
    "slot_colors",
    "tokens_label",
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

#: matplotlib's ``tab10`` colour map.
TAB10: Final[tuple[str, ...]] = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
#: matplotlib's ``tab20`` colour map.
TAB20: Final[tuple[str, ...]] = (
    "#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896", "#9467bd", "#c5b0d5",
    "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#7f7f7f", "#c7c7c7", "#bcbd22", "#dbdb8d", "#17becf", "#9edae5",
)  # fmt: skip
#: matplotlib's ``Set3`` colour map.
SET3: Final[tuple[str, ...]] = (
    "#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd",
    "#ccebc5", "#ffed6f",
)  # fmt: skip

RGBA = tuple[float, float, float, float]


def hex_rgba(color: str) -> RGBA:
    """``"#rrggbb"`` as an RGBA tuple of floats in 0..1 (what matplotlib's colour maps return).

    >>> hex_rgba("#ff8000")
    (1.0, 0.5019607843137255, 0.0, 1.0)
    """
    value = color.lstrip("#")
    red, green, blue = (int(value[k : k + 2], 16) / 255 for k in (0, 2, 4))
    return (red, green, blue, 1.0)


def slot_colors(slots: Sequence[str]) -> dict[str, RGBA]:
    """A stable colour per slot: known slots keep their colour across figures, others follow.

    >>> colors = slot_colors(["history", "current"])
    >>> colors["history"] == slot_colors(["current", "history", "extra"])["history"]
    True
    """
    colors: dict[str, RGBA] = {}
    unknown = 0
    for slot in slots:
        if slot in SLOT_ORDER:
            colors[slot] = hex_rgba(TAB20[SLOT_ORDER.index(slot) % len(TAB20)])
        else:
            colors[slot] = hex_rgba(SET3[unknown % len(SET3)])
            unknown += 1
    return colors


def session_colors(sessions: Sequence[str]) -> dict[str, RGBA]:
    """One colour per session: ``tab10`` for up to 10 sessions, ``tab20`` (cycled) beyond.

    >>> list(session_colors(["a", "b"]).values()) == [hex_rgba(TAB10[0]), hex_rgba(TAB10[1])]
    True
    """
    table = TAB10 if len(sessions) <= len(TAB10) else TAB20
    return {s: hex_rgba(table[i % len(table)]) for i, s in enumerate(sessions)}


def ordered_slots(slots: Sequence[str]) -> list[str]:
    """The distinct ``slots`` in prompt order: known slots as in :data:`SLOT_ORDER`, then the others.

    >>> ordered_slots(["user", "mystery", "system", "user"])
    ['system', 'user', 'mystery']
    """
    known = [s for s in SLOT_ORDER if s in slots]
    return known + [s for s in dict.fromkeys(slots) if s not in SLOT_ORDER]


def nice_ticks(low: float, high: float, count: int = 4) -> list[float]:
    """At most about ``count`` round tick values (steps of 1, 2, 2.5 or 5 × 10^k) within ``low..high``.

    >>> nice_ticks(0, 142), nice_ticks(0, 1, 5)
    ([0.0, 50.0, 100.0], [0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    """
    if not high > low:
        return [float(low)]
    raw = (high - low) / max(1, count)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step - 1e-9)
    last = math.floor(high / step + 1e-9)
    return [float(round(k * step, 10)) for k in range(first, last + 1)]


def tokens_label(value: float) -> str:
    """A short token-count label: ``"25k"`` for 25,000, ``"800"`` for 800.

    >>> tokens_label(25000), tokens_label(2500), tokens_label(800)
    ('25k', '2.5k', '800')
    """
    return f"{value / 1000:g}k" if abs(value) >= 1000 else f"{value:g}"


def paint_spans(image: Any, column: Any, row0: Any, start: Any, tokens: Any, code: Any, step: int) -> None:
    """Paint token spans into ``image`` (pixel rows × columns of slot codes), in place.

    Pixel row ``r`` of a column shows the slot of token ``r * step``: span ``k`` (tokens ``start[k]`` to
    ``start[k] + tokens[k]``) paints rows ``ceil(start / step)`` to ``ceil(end / step) - 1``, shifted up
    by ``row0[k]``, of column ``column[k]`` with ``code[k]``. Spans of one column never overlap, so the
    order does not matter and nothing needs sorting: the cost grows with the pixels painted.

    >>> import numpy as np
    >>> image = np.full((3, 1), -1)
    >>> paint_spans(image, np.array([0, 0]), np.array([0, 0]), np.array([0, 2]), np.array([2, 3]),
    ...             np.array([7, 8]), 2)
    >>> image[:, 0].tolist()
    [7, 8, 8]
    """
    import numpy as np

    low = -(-start // step)
    count = -(-(start + tokens) // step) - low
    keep = np.flatnonzero(count > 0)
    count = count[keep]
    # perf: each span's first pixel as one flat index, repeated once per pixel it paints
    width = image.shape[1]
    first = np.repeat(((row0 + low) * width + column)[keep], count)
    values = np.repeat(code[keep], count)
    offset = np.arange(first.shape[0]) - np.repeat(np.cumsum(count) - count, count)
    at = first + offset * width
    if image.flags.c_contiguous:
        image.reshape(-1)[at] = values
    else:
        image[at // width, at % width] = values


def _codes(values: pl.Series, names: Sequence[str], *, by_runs: bool = False) -> Any:
    """The position of each of ``values`` (strings, each one of ``names``) in ``names``, as an int64
    numpy array. perf: cast to an Enum of ``names``, whose physical codes are those positions; with
    ``by_runs``, for a column of long runs (a session's rows come together), read run by run."""
    import numpy as np

    values = values.cast(pl.String)
    if by_runs:
        runs = values.rle()
        if runs.len() * 8 <= values.len():
            position = {name: k for k, name in enumerate(names)}
            run_values = runs.struct.field("value").to_list()
            missing = next((v for v in run_values if v not in position), None)
            if missing is not None:
                raise UsageError(f"{missing!r} is not one of {list(names)!r}")
            codes = np.array([position[v] for v in run_values], dtype=np.int64)
            return np.repeat(codes, runs.struct.field("len").to_numpy())
    enum = pl.Enum(list(dict.fromkeys(names)))
    return values.cast(enum).to_physical().to_numpy().astype(np.int64)


def _slot_codes(values: pl.Series) -> tuple[Any, list[str]]:
    """The slots of ``values`` in :func:`ordered_slots` order, and each value's position in them.
    perf: one cast to an Enum of :data:`SLOT_ORDER` when every slot is a known one."""
    import numpy as np

    values = values.cast(pl.String)
    known = values.cast(pl.Enum(SLOT_ORDER), strict=False)
    if known.null_count() == values.null_count() == 0:
        present = np.flatnonzero(np.bincount(known.to_physical().to_numpy(), minlength=len(SLOT_ORDER)))
        position = np.full(len(SLOT_ORDER), -1, dtype=np.int64)
        position[present] = np.arange(present.shape[0])
        return position[known.to_physical().to_numpy()], [SLOT_ORDER[k] for k in present]
    slots = ordered_slots(values.unique(maintain_order=True).to_list())
    return _codes(values, slots), slots


def _distinct_sessions(values: pl.Series) -> list[Any]:
    """The distinct values of a session column (perf: of its runs, when they are long)."""
    runs = values.rle()
    if runs.len() * 8 <= values.len():
        return runs.struct.field("value").unique().to_list()
    return values.unique().to_list()


def slot_code(slots: Sequence[str]) -> pl.Expr:
    """The position of each span's slot in ``slots`` (the colour order), as an Int64 expression."""
    return (
        pl.col("slot")
        .cast(pl.String)
        .replace_strict(list(slots), list(range(len(slots))), return_dtype=pl.Int64)
    )


def composition_frames(
    result: Any, composition: pl.DataFrame | None, what: str
) -> tuple[pl.DataFrame, pl.DataFrame, list[str]]:
    """The requests and composition frames (session as text) and the sessions in order of appearance.

    ``result`` is an AnalysisResult or a requests frame (then ``composition`` must be given); a missing
    frame or column raises :class:`~promptkit.errors.ReportInputError` naming ``what``.
    """
    requests = requests_of(result)
    comp = composition if composition is not None else getattr(result, "composition", None)
    if not isinstance(comp, pl.DataFrame):
        raise ReportInputError(f"{what} needs a composition frame (result.composition or composition=)")
    need_columns(comp, ("session", "index", "slot", "start", "tokens"), what)
    need_columns(requests, ("session", "index", "prompt_tokens", "prefix_tokens"), what)
    if comp.schema["session"] != pl.String:
        comp = comp.with_columns(pl.col("session").cast(pl.String))
    if requests.schema["session"] != pl.String:
        requests = requests.with_columns(pl.col("session").cast(pl.String))
    sessions = requests["session"].unique(maintain_order=True).to_list()
    if not sessions:
        sessions = comp["session"].unique(maintain_order=True).to_list()
    return requests, comp, sessions


@attrs.frozen(slots=True)
class CompositionGrid:
    """The composition of several sessions as one raster of slot codes, one panel per session.

    ``codes`` (numpy int16, ``rows_total × columns_total``, row 0 at the bottom) holds the position in
    ``slots`` of the slot at each pixel, ``-1`` outside the prompts and between panels. Panel ``k``
    (session ``sessions[k]``) is ``panel_rows`` rows by ``turns`` columns with its bottom-left pixel at
    ``origins[k]`` (column, row); its column ``j`` is the request with ``index == first + j`` and its
    row ``r`` the token at position ``r * step``. Panels sit in ``shape`` (rows, columns) reading
    order, top left first, ``gaps`` (columns, rows) apart. ``marks`` are the first divergent tokens as (image column, token position
    from the bottom of the whole raster) arrays.
    """

    sessions: tuple[str, ...]
    slots: tuple[str, ...]
    codes: Any
    step: int
    panel_rows: int
    turns: int
    first: int
    shape: tuple[int, int]
    gaps: tuple[int, int]
    origins: tuple[tuple[int, int], ...]
    marks: tuple[Any, Any]
    ceiling: int


def grid_shape(count: int) -> tuple[int, int]:
    """(rows, columns) of panels for ``count`` sessions: a little wider than square.

    >>> grid_shape(20), grid_shape(2), grid_shape(1)
    ((4, 5), (1, 2), (1, 1))
    """
    columns = min(count, max(1, math.ceil(math.sqrt(count * 1.25))))
    return -(-count // columns), columns


def composition_grid(
    requests: pl.DataFrame,
    composition: pl.DataFrame,
    sessions: Sequence[str] | None = None,
    *,
    rows: int = 160,
) -> CompositionGrid:
    """Paint the composition of ``sessions`` (default: all, in order of appearance) as one raster.

    All panels share one scale: ``rows`` pixel rows reach the longest prompt, and every panel is as
    wide as the widest session's turn range. See :class:`CompositionGrid`.
    """
    import numpy as np

    requests, comp, present = composition_frames(requests, composition, "composition_grid")
    shown = list(dict.fromkeys(sessions)) if sessions is not None else present
    # perf: only the columns drawn, and the session test only when some sessions are left out
    every = set(shown) >= set(present) | set(_distinct_sessions(comp["session"]))
    spans = comp.select("session", "index", "slot", "start", "tokens").filter(
        (pl.col("tokens") > 0) if every else (pl.col("tokens") > 0) & pl.col("session").is_in(shown)
    )
    marks = requests.select("session", "index", "prefix_tokens", "prompt_tokens").filter(
        (pl.col("prefix_tokens") < pl.col("prompt_tokens"))
        if every
        else pl.col("session").is_in(shown) & (pl.col("prefix_tokens") < pl.col("prompt_tokens"))
    )
    slot_codes, slots = _slot_codes(spans["slot"])
    ceiling = int(spans.select((pl.col("start") + pl.col("tokens")).max()).item() or 1) if spans.height else 1
    step = max(1, -(-ceiling // rows))  # tokens per pixel row, the same in every panel
    panel_rows = -(-ceiling // step)
    turns_seen = pl.concat([spans.select("index"), marks.select("index")])["index"]
    first = min(0, int(turns_seen.min())) if turns_seen.len() else 0  # type: ignore[arg-type]
    turns = (int(turns_seen.max()) if turns_seen.len() else 0) - first + 1  # type: ignore[arg-type]
    nrows, ncols = grid_shape(max(1, len(shown)))
    gap_x = max(1, round(turns * 0.06))  # blank columns between panels
    gap_y = max(1, round(panel_rows * 0.22))  # blank rows between panels (room for the session's name)
    codes = np.full((nrows * (panel_rows + gap_y), ncols * (turns + gap_x) - gap_x), -1, dtype=np.int16)
    origins = tuple(
        ((k % ncols) * (turns + gap_x), (nrows - 1 - k // ncols) * (panel_rows + gap_y))
        for k in range(len(shown))
    )
    x0 = np.array([x for x, _ in origins] or [0], dtype=np.int64)
    y0 = np.array([y for _, y in origins] or [0], dtype=np.int64)
    if spans.height:
        k = _codes(spans["session"], shown, by_runs=True)
        paint_spans(codes, x0[k] + spans["index"].to_numpy() - first, y0[k], spans["start"].to_numpy(),
                    spans["tokens"].to_numpy(), slot_codes, step)  # fmt: skip
    k = _codes(marks["session"], shown)
    mark_x = x0[k] + marks["index"].to_numpy() - first
    mark_y = y0[k] * step + marks["prefix_tokens"].to_numpy()
    return CompositionGrid(
        sessions=tuple(shown),
        slots=tuple(slots),
        codes=codes,
        step=step,
        panel_rows=panel_rows,
        turns=turns,
        first=first,
        shape=(nrows, ncols),
        gaps=(gap_x, gap_y),
        origins=origins,
        marks=(mark_x, mark_y),
        ceiling=ceiling,
    )
