"""The PNG files of a cache analysis, drawn straight to pixels with Pillow (no matplotlib).

:func:`~promptkit.report.plots.save_plots` writes these: ``hit_ratio.png``, ``predicted_vs_reported.png``
and ``composition.png``. They show what :func:`~promptkit.report.plots.plot_hit_ratio`,
:func:`~promptkit.report.plots.plot_predicted_vs_reported` and
:func:`~promptkit.report.plots.plot_composition_grid` draw, in the same colours, but cost a few
hundredths of a second each instead of matplotlib's import and layout (about a second): the data is
reduced with polars and numpy first (:mod:`promptkit.report.plot_data`), so the drawing grows with
sessions, turns and pixel rows, never with spans. Lines and text are drawn at twice the size and
scaled down, so they come out smooth.

>>> import tempfile, polars as pl
>>> frame = pl.DataFrame({"session": ["a", "a"], "index": [0, 1], "hit_ratio": [0.0, 0.5]})
>>> path = write_hit_ratio_png(frame, tempfile.mkdtemp() + "/hit_ratio.png")
>>> from PIL import Image
>>> Image.open(path).size
(900, 450)
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import polars as pl

from promptkit.errors import UsageError
from promptkit.report.plot_data import (
    RGBA,
    CompositionGrid,
    nice_ticks,
    session_colors,
    slot_colors,
    tokens_label,
)

if TYPE_CHECKING:  # pragma: no cover
    from PIL import ImageFont

__all__ = [
    "HIT_RATIO_SIZE",
    "PREDICTED_VS_REPORTED_SIZE",
    "grid_png_size",
    "write_composition_png",
    "write_hit_ratio_png",
    "write_predicted_vs_reported_png",
]

#: Size in inches (width, height) of ``hit_ratio.png`` and ``predicted_vs_reported.png``; in pixels
#: that is inches × dpi (100 by default), as for a matplotlib figure of that size.
HIT_RATIO_SIZE: Final[tuple[float, float]] = (9.0, 4.5)
PREDICTED_VS_REPORTED_SIZE: Final[tuple[float, float]] = (7.5, 6.0)
#: composition.png: width, height of one row of panels, and the margins (left, right, bottom, top),
#: in inches.
GRID_WIDTH: Final[float] = 13.0
GRID_ROW_HEIGHT: Final[float] = 1.7
GRID_MARGINS: Final[tuple[float, float, float, float]] = (0.75, 1.75, 0.55, 0.5)
#: Sessions beyond this many get no legend entry (as in the matplotlib figures).
LEGEND_SESSIONS: Final[int] = 10
#: Beyond this many sessions the hit ratio is drawn as a per-turn median and a 10–90 % band.
MANY_SESSIONS: Final[int] = 40

_INK: Final = (38, 38, 38)
_GRID_LINE: Final = (226, 226, 226)
_FRAME: Final = (154, 154, 154)
_PANEL: Final = (246, 246, 246)
_GREY: Final = (128, 128, 128)


def _rgb(color: RGBA, alpha: float = 1.0) -> tuple[int, int, int]:
    """A colour as 0..255 RGB, blended with white by ``alpha`` (what a translucent fill shows on white)."""
    return tuple(round(255 * (alpha * c + (1 - alpha))) for c in color[:3])  # type: ignore[return-value]


@functools.cache
def _font_path() -> str | None:
    """matplotlib's DejaVu Sans (the notebook figures' font), found without importing matplotlib."""
    import importlib.util

    spec = importlib.util.find_spec("matplotlib")
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(root) / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"
        if path.is_file():
            return str(path)
    return None


@functools.cache
def _font(pixels: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    from PIL import ImageFont

    path = _font_path()
    return ImageFont.truetype(path, pixels) if path else ImageFont.load_default(pixels)


@functools.lru_cache(maxsize=16)
def _disc(radius: float) -> tuple[Any, Any]:
    """Offsets (columns, rows; each a 1 × n array) of the pixels of a disc of ``radius`` pixels around
    a pixel: those whose centre lies within the radius of its centre."""
    import numpy as np

    reach = math.ceil(radius)
    dx, dy = np.meshgrid(np.arange(-reach, reach + 1), np.arange(-reach, reach + 1))
    inside = dx * dx + dy * dy <= radius * radius
    return dx[inside][None, :], dy[inside][None, :]


class _Canvas:
    """A white image measured in points (1/72 inch) at ``dpi``, drawn ``scale`` times larger and
    scaled down when saved (smooth lines and text)."""

    def __init__(
        self,
        width_in: float,
        height_in: float,
        dpi: int,
        scale: int = 2,
        mode: str = "RGB",
        white: Any = "white",
    ) -> None:
        from PIL import Image, ImageDraw

        self.size = (round(width_in * dpi), round(height_in * dpi))
        self.k = dpi / 72 * scale  # canvas pixels per point
        self.image = Image.new(mode, (self.size[0] * scale, self.size[1] * scale), white)
        self.draw = ImageDraw.Draw(self.image)
        self.width_pt = width_in * 72
        self.height_pt = height_in * 72
        self._dots: list[tuple[Any, Any, Any]] = []  # (xs, ys, fill) of the discs to stamp when saved

    def px(self, value: float) -> float:
        return value * self.k

    def font(self, size_pt: float) -> Any:
        return _font(max(1, round(size_pt * self.k)))

    def text_width(self, text: str, size_pt: float) -> float:
        return float(self.font(size_pt).getlength(text)) / self.k

    def text(
        self, x: float, y: float, text: str, size_pt: float = 10, anchor: str = "la", fill: Any = _INK
    ) -> None:
        self.draw.text((self.px(x), self.px(y)), text, font=self.font(size_pt), anchor=anchor, fill=fill)

    def vertical_label(
        self, x: float, y: float, text: str, size_pt: float = 10
    ) -> tuple[Any, tuple[int, int]]:
        """The coverage mask ("L") of ``text`` rotated a quarter turn (read bottom to top) and the
        top-left pixel that centres it on (x, y)."""
        from PIL import Image, ImageDraw

        font = self.font(size_pt)
        left, top, right, bottom = font.getbbox(text)
        label = Image.new("L", (int(right - left) + 2, int(bottom - top) + 2), 0)
        ImageDraw.Draw(label).text((1 - left, 1 - top), text, font=font, fill=255)
        label = label.rotate(90, expand=True)
        return label, (round(self.px(x) - label.width / 2), round(self.px(y) - label.height / 2))

    def vertical_text(self, x: float, y: float, text: str, size_pt: float = 10) -> None:
        """``text`` rotated a quarter turn (read bottom to top), centred on (x, y)."""
        from PIL import Image

        label, at = self.vertical_label(x, y, text, size_pt)
        self.image.paste(Image.new("RGB", label.size, _INK), at, label)

    def line(self, points: Sequence[tuple[float, float]], fill: Any, width: float = 1.0) -> None:
        if len(points) >= 2:
            scaled = [(self.px(x), self.px(y)) for x, y in points]
            self.draw.line(scaled, fill=fill, width=max(1, round(self.px(width))), joint="curve")

    def dashed(self, points: Sequence[tuple[float, float]], fill: Any, width: float = 1.0,
               dash: float = 4.0, gap: float = 2.5) -> None:  # fmt: skip
        """A dashed polyline: dashes of ``dash`` points every ``dash + gap``, continuing across vertices."""
        pattern, phase = dash + gap, 0.0
        for (x0, y0), (x1, y1) in itertools.pairwise(points):
            length = ((x1 - x0) ** 2 + (y1 - y0) ** 2) ** 0.5
            at = 0.0
            while at < length:
                within = phase % pattern
                run = (dash - within) if within < dash else (pattern - within)
                end = min(length, at + run)
                if within < dash and length > 0:
                    a, b = at / length, end / length
                    self.line([(x0 + (x1 - x0) * a, y0 + (y1 - y0) * a), (x0 + (x1 - x0) * b, y0 + (y1 - y0) * b)],
                              fill, width)  # fmt: skip
                phase += end - at
                at = end

    def dots(self, points: Iterable[tuple[float, float]], fill: Any, radius: float) -> None:
        """A filled disc of ``radius`` points at each point, drawn over everything else when the
        canvas is saved. perf: every disc of every call is stamped into the pixels at once with numpy
        (a disc of the pixels whose centre lies within the radius of the pixel nearest the point),
        not drawn one shape at a time."""
        import numpy as np

        centres = np.rint(np.asarray(list(points), dtype=np.float64).reshape(-1, 2) * self.k).astype(np.int64)
        if centres.shape[0]:
            dx, dy = _disc(self.px(radius))
            self._dots.append(((centres[:, :1] + dx).ravel(), (centres[:, 1:] + dy).ravel(), fill))

    def _stamp_dots(self) -> None:
        """Stamp the pending :meth:`dots` into the image, in the order they were asked for."""
        if not self._dots:
            return
        import numpy as np
        from PIL import Image, ImageDraw

        pixels = np.array(self.image)
        height, width = pixels.shape[:2]
        flat = pixels.reshape(height * width, -1)  # a view: one row per pixel, one index per disc pixel
        for xs, ys, fill in self._dots:
            at = ys * width + xs
            if xs.min() < 0 or ys.min() < 0 or xs.max() >= width or ys.max() >= height:
                at = at[(xs >= 0) & (xs < width) & (ys >= 0) & (ys < height)]
            flat[at] = fill
        self._dots.clear()
        self.image = Image.fromarray(pixels, self.image.mode)
        self.draw = ImageDraw.Draw(self.image)

    def crosses(
        self, points: Iterable[tuple[float, float]], fill: Any, radius: float, width: float = 1.0
    ) -> None:
        for x, y in points:
            self.line([(x - radius, y - radius), (x + radius, y + radius)], fill, width)
            self.line([(x - radius, y + radius), (x + radius, y - radius)], fill, width)

    def rectangle(self, box: tuple[float, float, float, float], fill: Any = None, outline: Any = None,
                  width: float = 1.0) -> None:  # fmt: skip
        x0, y0, x1, y1 = (self.px(v) for v in box)
        self.draw.rectangle((x0, y0, x1, y1), fill=fill, outline=outline, width=max(1, round(self.px(width))))

    def polygon(self, points: Sequence[tuple[float, float]], fill: Any) -> None:
        if len(points) >= 3:
            self.draw.polygon([(self.px(x), self.px(y)) for x, y in points], fill=fill)

    def save(self, path: Path) -> Path:
        from PIL import Image

        self._stamp_dots()
        image = self.image
        if image.size != self.size:
            factor = image.size[0] // self.size[0]
            if image.size == (self.size[0] * factor, self.size[1] * factor):
                image = image.reduce(factor)  # perf: the box filter of an integer factor, in one pass
            else:
                image = image.resize(self.size, Image.Resampling.BOX)
        image.save(path, format="PNG", compress_level=1)
        return path


class _PaletteCanvas(_Canvas):
    """perf: a :class:`_Canvas` of palette indices, one byte per pixel, drawn without smoothing: shapes
    in their exact colours, text as ink coverage on a layer of its own, put onto a ramp of
    :attr:`RAMP` shades between white and the ink when saved. Pillow encodes such a PNG several times
    faster than an RGB one (no per-row filter choice over three bytes a pixel). Text is ink on white
    (the composition grid writes none over a panel)."""

    RAMP = 32

    def __init__(
        self, width_in: float, height_in: float, dpi: int, colors: Sequence[tuple[int, ...]]
    ) -> None:
        from PIL import Image, ImageDraw

        super().__init__(width_in, height_in, dpi, scale=1, mode="P", white=0)
        self._colors: list[tuple[int, ...]] = [(255, 255, 255)]  # index 0: the background
        for color in colors:
            self.color(color)
        self._ink = Image.new("L", self.size, 0)  # text coverage
        self._ink_draw = ImageDraw.Draw(self._ink)

    def color(self, rgb: Any) -> int:
        """The palette index of ``rgb`` (added on first use)."""
        rgb = tuple(int(c) for c in rgb[:3])
        try:
            return self._colors.index(rgb)
        except ValueError:
            if len(self._colors) >= 256 - self.RAMP:
                raise UsageError("palette canvas: more colours than the palette holds") from None
            self._colors.append(rgb)
            return len(self._colors) - 1

    def paste_indices(self, indices: Any, at: tuple[int, int]) -> None:
        """Put a block of palette indices (uint8 array) with its top-left pixel at ``at``."""
        import numpy as np
        from PIL import Image, ImageDraw

        pixels = np.array(self.image)
        x, y = at
        pixels[y : y + indices.shape[0], x : x + indices.shape[1]] = indices
        self.image = Image.fromarray(pixels, "P")
        self.draw = ImageDraw.Draw(self.image)

    def text(
        self, x: float, y: float, text: str, size_pt: float = 10, anchor: str = "la", fill: Any = _INK
    ) -> None:
        if tuple(fill[:3]) != _INK:
            raise UsageError("palette canvas: text is drawn in ink only")
        self._ink_draw.text((self.px(x), self.px(y)), text, font=self.font(size_pt), anchor=anchor, fill=255)

    def vertical_text(self, x: float, y: float, text: str, size_pt: float = 10) -> None:
        label, at = self.vertical_label(x, y, text, size_pt)
        self._ink.paste(255, at, label)

    def line(self, points: Sequence[tuple[float, float]], fill: Any, width: float = 1.0) -> None:
        super().line(points, self.color(fill), width)

    def dots(self, points: Iterable[tuple[float, float]], fill: Any, radius: float) -> None:
        super().dots(points, self.color(fill), radius)

    def rectangle(self, box: tuple[float, float, float, float], fill: Any = None, outline: Any = None,
                  width: float = 1.0) -> None:  # fmt: skip
        super().rectangle(
            box,
            None if fill is None else self.color(fill),
            None if outline is None else self.color(outline),
            width,
        )

    def polygon(self, points: Sequence[tuple[float, float]], fill: Any) -> None:
        super().polygon(points, self.color(fill))

    def save(self, path: Path) -> Path:
        import numpy as np
        from PIL import Image

        self._stamp_dots()
        pixels = np.array(self.image)
        coverage = np.asarray(self._ink)
        level = (coverage.astype(np.uint16) * self.RAMP + 127) // 255  # 0: no ink, RAMP: all ink
        inked = level > 0
        pixels[inked] = (len(self._colors) - 1 + level[inked]).astype(np.uint8)
        ink, white = np.array(_INK, dtype=np.float64), np.full(3, 255.0)
        shares = np.arange(1, self.RAMP + 1)[:, None] / self.RAMP
        ramp = np.round(white + (ink - white) * shares).astype(np.uint8)
        palette = np.concatenate([np.array(self._colors, dtype=np.uint8).reshape(-1, 3), ramp])
        image = Image.fromarray(pixels, "P")
        image.putpalette(palette.tobytes())
        image.save(path, format="PNG", compress_level=1)
        return path


class _Axes:
    """A rectangle of the canvas (points) mapping data ``xlim`` × ``ylim`` onto it."""

    def __init__(self, canvas: _Canvas, box: tuple[float, float, float, float],
                 xlim: tuple[float, float], ylim: tuple[float, float]) -> None:  # fmt: skip
        self.canvas, self.box, self.xlim, self.ylim = canvas, box, xlim, ylim

    def xy(self, x: float, y: float) -> tuple[float, float]:
        left, top, right, bottom = self.box
        (x0, x1), (y0, y1) = self.xlim, self.ylim
        return (left + (x - x0) / (x1 - x0) * (right - left), bottom - (y - y0) / (y1 - y0) * (bottom - top))

    def points(self, xs: Any, ys: Any) -> list[tuple[float, float]]:
        """:meth:`xy` of each pair (perf: in numpy, for Series or arrays of equal length)."""
        import numpy as np

        x = np.asarray(xs, dtype=np.float64)
        y = np.asarray(ys, dtype=np.float64)
        if x.shape != y.shape:
            raise UsageError(f"points: {x.shape[0]} x values for {y.shape[0]} y values")
        left, top, right, bottom = self.box
        (x0, x1), (y0, y1) = self.xlim, self.ylim
        px = left + (x - x0) / (x1 - x0) * (right - left)
        py = bottom - (y - y0) / (y1 - y0) * (bottom - top)
        return list(zip(px.tolist(), py.tolist(), strict=True))

    def frame(self, xticks: Sequence[float], yticks: Sequence[float], xlabel: Any = str, ylabel: Any = str,
              size: float = 9) -> None:  # fmt: skip
        """Grid lines and labels at the ticks, then the axes' outline."""
        c, (left, top, right, bottom) = self.canvas, self.box
        for t in xticks:
            x, _ = self.xy(t, self.ylim[0])
            c.line([(x, top), (x, bottom)], _GRID_LINE, 0.7)
            c.line([(x, bottom), (x, bottom + 3)], _INK, 0.7)
            c.text(x, bottom + 4.5, xlabel(t), size, anchor="mt")
        for t in yticks:
            _, y = self.xy(self.xlim[0], t)
            c.line([(left, y), (right, y)], _GRID_LINE, 0.7)
            c.line([(left - 3, y), (left, y)], _INK, 0.7)
            c.text(left - 4.5, y, ylabel(t), size, anchor="rm")
        c.rectangle(self.box, outline=_INK, width=0.8)


def _legend(
    canvas: _Canvas, x: float, y: float, entries: Sequence[tuple[str, str, Any]], size: float = 8.5
) -> None:
    """Legend rows from (x, y) down: (kind, label, colour), kind one of ``line``, ``dashed``, ``patch``,
    ``tick`` (a short black bar)."""
    for kind, label, color in entries:
        middle = y + size * 0.65
        if kind == "patch":
            canvas.rectangle((x, middle - size * 0.4, x + 16, middle + size * 0.4), fill=color)
        elif kind == "dashed":
            canvas.dashed([(x, middle), (x + 16, middle)], color, 1.2, 3.5, 2.0)
        elif kind == "tick":
            canvas.line([(x + 4, middle), (x + 12, middle)], color, 1.5)
        else:
            canvas.line([(x, middle), (x + 16, middle)], color, 2.2)
        canvas.text(x + 21, middle, label, size, anchor="lm")
        y += size * 1.45


def _shorten(canvas: _Canvas, text: str, size: float, width: float) -> str:
    """``text``, or its start and end around an ellipsis, within ``width`` points (names of one log often
    share a long prefix, so the end is kept too)."""
    if canvas.text_width(text, size) <= width:
        return text
    head, tail = len(text) // 2, len(text) - len(text) // 2
    while head + tail > 1:
        if tail >= head:
            tail -= 1
        else:
            head -= 1
        short = text[:head] + "…" + text[len(text) - tail :]
        if canvas.text_width(short, size) <= width:
            return short
    return text[:1] + "…"


def _legend_width(canvas: _Canvas, labels: Sequence[str], size: float = 8.5, most: float = 190) -> float:
    """Points a legend of ``labels`` takes to the right of the axes (0 when empty), at most ``most``."""
    if not labels:
        return 0.0
    return min(most, max(canvas.text_width(label, size) for label in labels) + 36)


def _title(canvas: _Canvas, text: str, size: float = 11.5) -> None:
    canvas.text(canvas.width_pt / 2, 8, text, size, anchor="mt")


def _hit_ratio_frame(requests: pl.DataFrame) -> pl.DataFrame:
    """``session``, ``index``, ``hit_ratio`` and the ``reported`` ratio (null where the log has no
    usage) of each request with a ratio, by session and index."""
    frame = requests.select(
        pl.col("session").cast(pl.String),
        "index",
        pl.col("hit_ratio").cast(pl.Float64),
        reported=(
            pl.when(pl.col("reported_prompt_tokens") > 0).then(
                pl.col("reported_cached_tokens") / pl.col("reported_prompt_tokens")
            )
            if {"reported_prompt_tokens", "reported_cached_tokens"} <= set(requests.columns)
            else pl.lit(None, dtype=pl.Float64)
        ),
    ).sort("session", "index", maintain_order=True)
    # a request with an empty prompt has no ratio: its turn is left out (a gap in matplotlib's line)
    return frame.filter(pl.col("hit_ratio").is_not_null() & pl.col("hit_ratio").is_not_nan())


def _draw_hit_ratio_band(canvas: _Canvas, axes: _Axes, frame: pl.DataFrame) -> list[tuple[str, str, Any]]:
    """The per-turn median hit ratio and 10–90 % band of many sessions (and the median reported ratio,
    dashed, where the log has usage); returns their legend entries."""
    per_turn = (
        frame.group_by("index")
        .agg(
            pl.col("hit_ratio").median().alias("median"),
            pl.col("hit_ratio").quantile(0.1, "linear").alias("low"),
            pl.col("hit_ratio").quantile(0.9, "linear").alias("high"),
            pl.col("reported").median().alias("reported"),
        )
        .sort("index")
    )
    blue = session_colors(["x"])["x"]
    band = (
        axes.points(per_turn["index"], per_turn["high"])
        + axes.points(per_turn["index"], per_turn["low"])[::-1]
    )
    canvas.polygon(band, _rgb(blue, 0.25))
    canvas.line(axes.points(per_turn["index"], per_turn["median"]), _rgb(blue), 1.8)
    entries: list[tuple[str, str, Any]] = [
        ("line", "median", _rgb(blue)),
        ("patch", "10–90 % of sessions", _rgb(blue, 0.25)),
    ]
    reported = per_turn.filter(pl.col("reported").is_not_null())
    if reported.height:
        canvas.dashed(axes.points(reported["index"], reported["reported"]), _INK, 1.0)
        entries.append(("dashed", "median (reported)", _INK))
    return entries


def _draw_hit_ratio_sessions(
    canvas: _Canvas, axes: _Axes, frame: pl.DataFrame, sessions: list[str], has_reported: bool, legend: bool
) -> list[tuple[str, str, Any]]:
    """One line per session (dots at each request while there are few), the reported ratio dashed with
    crosses where the log has usage; returns the legend entries (none without ``legend``)."""
    colors = session_colors(sessions)
    marker = 1.6 if frame.height <= 3000 else 0.0
    for (session,), rows in frame.partition_by("session", as_dict=True, maintain_order=True).items():
        color = _rgb(colors[str(session)])
        points = axes.points(rows["index"], rows["hit_ratio"])
        canvas.line(points, color, 1.3)
        if marker:
            canvas.dots(points, color, marker)
        reported = rows.filter(pl.col("reported").is_not_null()) if has_reported else rows.clear()
        if reported.height:
            points = axes.points(reported["index"], reported["reported"])
            canvas.dashed(points, color, 0.9)
            canvas.crosses(points, color, 2.0, 0.8)
    entries: list[tuple[str, str, Any]] = []
    if legend:
        entries += [("line", str(s), _rgb(colors[s])) for s in sessions]
        if has_reported:
            entries += [("line", "predicted", _INK), ("dashed", "reported", _INK)]
    return entries


def write_hit_ratio_png(requests: pl.DataFrame, path: str | Path, *, dpi: int = 100) -> Path:
    """``hit_ratio.png``: the predicted hit ratio per turn, one line per session (dots at each request),
    the reported ratio dashed with crosses in the session's colour where the log has usage; more than
    :data:`MANY_SESSIONS` sessions are drawn as the per-turn median and 10–90 % band instead. A legend
    names up to :data:`LEGEND_SESSIONS` sessions. ``requests`` needs ``session``, ``index`` and
    ``hit_ratio`` (see :func:`~promptkit.report.plots.plot_hit_ratio`).
    """
    frame = _hit_ratio_frame(requests)
    sessions = requests["session"].cast(pl.String).unique(maintain_order=True).to_list()
    has_reported = bool(frame["reported"].is_not_null().any())
    many = len(sessions) > MANY_SESSIONS
    show_legend = (not many and len(sessions) <= LEGEND_SESSIONS) or many
    width_in, height_in = HIT_RATIO_SIZE
    canvas = _Canvas(width_in, height_in, dpi)
    if many:
        labels = ["median", "10–90 % of sessions"] + (["median (reported)"] if has_reported else [])
    else:
        labels = (sessions + (["predicted", "reported"] if has_reported else [])) if show_legend else []
    legend_width = _legend_width(canvas, labels)
    box = (54.0, 30.0, canvas.width_pt - 14 - legend_width, canvas.height_pt - 40)
    low, high = (int(frame["index"].min() or 0), int(frame["index"].max() or 0)) if frame.height else (0, 1)  # type: ignore[arg-type]
    pad = max(0.5, (high - low) * 0.03)
    axes = _Axes(canvas, box, (low - pad, high + pad), (-0.02, 1.02))
    axes.frame([t for t in nice_ticks(low, high, 6) if t == int(t)], nice_ticks(0, 1, 5),
               lambda t: f"{t:g}", lambda t: f"{t:.1f}")  # fmt: skip
    if many:
        entries = _draw_hit_ratio_band(canvas, axes, frame)
        title = f"Cache hit ratio per turn — {len(sessions)} sessions (median and 10–90 % band)"
    else:
        entries = _draw_hit_ratio_sessions(canvas, axes, frame, sessions, has_reported, show_legend)
        title = "Cache hit ratio per turn"
    if entries:
        entries = [
            (kind, _shorten(canvas, label, 8.5, legend_width - 36), color) for kind, label, color in entries
        ]
        _legend(canvas, box[2] + 12, box[1], entries)
    _title(canvas, title)
    canvas.text(
        (box[0] + box[2]) / 2, canvas.height_pt - 6, "turn (request index in its session)", 9.5, anchor="md"
    )
    canvas.vertical_text(12, (box[1] + box[3]) / 2, "hit ratio (cached / prompt tokens)", 9.5)
    return canvas.save(Path(path))


def write_predicted_vs_reported_png(requests: pl.DataFrame, path: str | Path, *, dpi: int = 100) -> Path:
    """``predicted_vs_reported.png``: one dot per request with reported usage (x reported, y predicted
    cached tokens, coloured by session) and the dashed ``y = x`` line; dots above it are
    over-predictions. Both axes share one scale. ``requests`` needs ``session``,
    ``predicted_cached_tokens`` and ``reported_cached_tokens`` with at least one reported value.
    """
    pairs = requests.filter(
        pl.col("reported_cached_tokens").is_not_null() & pl.col("predicted_cached_tokens").is_not_null()
    ).select(
        pl.col("session").cast(pl.String),
        pl.col("reported_cached_tokens").cast(pl.Float64).alias("x"),
        pl.col("predicted_cached_tokens").cast(pl.Float64).alias("y"),
    )
    if pairs.height == 0:
        raise UsageError("predicted_vs_reported.png needs at least one request with reported usage")
    sessions = pairs["session"].unique(maintain_order=True).to_list()
    colors = session_colors(sessions)
    show_legend = len(sessions) <= LEGEND_SESSIONS
    width_in, height_in = PREDICTED_VS_REPORTED_SIZE
    canvas = _Canvas(width_in, height_in, dpi)
    legend_width = _legend_width(canvas, [*sessions, "y = x"] if show_legend else [])
    side = min(canvas.width_pt - 70 - max(16, legend_width), canvas.height_pt - 72)
    box = (56.0, 30.0, 56.0 + side, 30.0 + side)
    top = float(pairs.select(pl.max_horizontal(pl.col("x").max(), pl.col("y").max())).item() or 1)
    limit = (-top * 0.03, top * 1.03)
    axes = _Axes(canvas, box, limit, limit)
    ticks = nice_ticks(0, top, 5)
    axes.frame(ticks, ticks, tokens_label, tokens_label)
    canvas.dashed([axes.xy(0, 0), axes.xy(top, top)], _GREY, 1.0)
    for (session,), rows in pairs.partition_by("session", as_dict=True, maintain_order=True).items():
        canvas.dots(axes.points(rows["x"], rows["y"]), _rgb(colors[str(session)], 0.8), 2.2)
    if show_legend:
        entries: list[tuple[str, str, Any]] = [("patch", str(s), _rgb(colors[s], 0.8)) for s in sessions]
        entries.append(("dashed", "y = x", _GREY))
        _legend(
            canvas,
            box[2] + 12,
            box[1],
            [(k, _shorten(canvas, t, 8.5, legend_width - 36), c) for k, t, c in entries],
        )
    _title(canvas, "Predicted vs reported cached tokens")
    canvas.text((box[0] + box[2]) / 2, box[3] + 34, "reported cached tokens", 9.5, anchor="md")
    canvas.vertical_text(12, (box[1] + box[3]) / 2, "predicted cached tokens", 9.5)
    return canvas.save(Path(path))


#: The tallest a row of composition panels gets (inches), and a panel's height per inch of its width.
GRID_MAX_ROW_HEIGHT: Final[float] = 5.0
GRID_PANEL_ASPECT: Final[float] = 0.6


def grid_row_height(grid: CompositionGrid) -> float:
    """The height of a row of panels (inches): :data:`GRID_ROW_HEIGHT` for a grid of many columns, taller
    for few (a panel keeps about :data:`GRID_PANEL_ASPECT` height per width, up to
    :data:`GRID_MAX_ROW_HEIGHT`), so one session's panel is not squashed into a strip."""
    left, right, _bottom, _top = GRID_MARGINS
    panel_width = (GRID_WIDTH - left - right) / max(1, grid.shape[1])
    return min(GRID_MAX_ROW_HEIGHT, max(GRID_ROW_HEIGHT, GRID_PANEL_ASPECT * panel_width))


def grid_png_size(grid: CompositionGrid, dpi: int = 100) -> tuple[int, int]:
    """The pixel size (width, height) of ``composition.png`` for ``grid``."""
    _left, _right, bottom, top = GRID_MARGINS
    return round(GRID_WIDTH * dpi), round((bottom + top + grid.shape[0] * grid_row_height(grid)) * dpi)


def write_composition_png(grid: CompositionGrid, path: str | Path, *, title: str, dpi: int = 100) -> Path:
    """``composition.png``: one panel per session of ``grid`` (see
    :func:`~promptkit.report.plot_data.composition_grid`), turns left to right and token positions bottom
    to top, each pixel the colour of its slot, a black tick at each request's first divergent token;
    shared scales labelled along the bottom and left edges, the session's name above its panel, one
    legend for the slots.
    """
    import numpy as np

    left, right, bottom, top = GRID_MARGINS
    nrows, ncols = grid.shape
    height_in = bottom + top + nrows * grid_row_height(grid)
    colors = slot_colors(grid.slots)
    # axis-aligned drawing, no need to smooth: one palette index per pixel (slots first, then the panel)
    canvas = _PaletteCanvas(GRID_WIDTH, height_in, dpi, [_rgb(colors[s]) for s in grid.slots] + [_PANEL])
    box = (left * 72, top * 72, (GRID_WIDTH - right) * 72, (height_in - bottom) * 72)
    rows_total, columns_total = grid.codes.shape
    axes = _Axes(canvas, box, (-0.5, columns_total - 0.5), (0, rows_total * grid.step))
    # the canvas' palette index of each raster value: slot k is colour k + 1, the panel S + 1, white 0
    to_canvas = np.array([*range(1, len(grid.slots) + 2), 0], dtype=np.uint8)
    code = grid.codes[::-1]  # image rows run top to bottom
    index = np.where(code >= 0, code, len(grid.slots) + 1)  # white between panels
    for x0, y0 in grid.origins:  # the panels' background where no prompt reaches
        rows = slice(rows_total - y0 - grid.panel_rows, rows_total - y0)
        panel = index[rows, x0 : x0 + grid.turns]
        panel[code[rows, x0 : x0 + grid.turns] < 0] = len(grid.slots)
    # nearest-pixel scaling of the raster onto the axes box, and the divergence ticks, in numpy
    x0p, y0p, x1p, y1p = (round(canvas.px(v)) for v in box)
    width_px, height_px = x1p - x0p, y1p - y0p
    rows_at = ((np.arange(height_px) + 0.5) * rows_total / height_px).astype(np.int64)
    columns_at = ((np.arange(width_px) + 0.5) * columns_total / width_px).astype(np.int64)
    pixels = to_canvas[index.astype(np.uint8)[rows_at][:, columns_at]]
    mark_x, mark_y = grid.marks
    if len(mark_x):
        black = canvas.color((0, 0, 0))
        half = max(1, round(canvas.px(max(1.2, (box[2] - box[0]) / columns_total * 0.6))))
        thick = max(1, round(canvas.px(0.8)))
        cx = np.round((mark_x + 0.5) / columns_total * width_px).astype(np.int64)
        cy = np.round(height_px - mark_y / (rows_total * grid.step) * height_px).astype(np.int64)
        for dy in range(-(thick // 2), thick - thick // 2):
            for dx in range(-half, half + 1):
                pixels[np.clip(cy + dy, 0, height_px - 1), np.clip(cx + dx, 0, width_px - 1)] = black
    canvas.paste_indices(pixels, (x0p, y0p))
    turn_ticks = [t for t in nice_ticks(grid.first, grid.first + grid.turns - 1, 3) if t == int(t)]
    token_ticks = nice_ticks(0, grid.ceiling, 3)
    gap_x, gap_y = grid.gaps
    name_width = (box[2] - box[0]) / ncols * grid.turns / (grid.turns + gap_x) - 2
    for session, (x0, y0) in zip(grid.sessions, grid.origins, strict=True):
        x_left, y_top = axes.xy(x0 - 0.5, (y0 + grid.panel_rows) * grid.step)
        x_right, y_bottom = axes.xy(x0 + grid.turns - 0.5, y0 * grid.step)
        canvas.rectangle((x_left, y_top, x_right, y_bottom), outline=_FRAME, width=0.6)
        canvas.text(x_left, y_top - 2, _shorten(canvas, session, 8, name_width), 8, anchor="ld")
    for col in range(min(ncols, len(grid.sessions))):  # turn labels under the lowest panel of each column
        x0, y0 = grid.origins[col + (len(grid.sessions) - 1 - col) // ncols * ncols]
        _, y_bottom = axes.xy(0, y0 * grid.step)
        for t in turn_ticks:
            x, _ = axes.xy(x0 + t - grid.first, 0)
            canvas.line([(x, y_bottom), (x, y_bottom + 2.5)], _INK, 0.6)
            canvas.text(x, y_bottom + 3.5, f"{t:g}", 7, anchor="mt")
    for row in range(nrows):
        y0 = row * (grid.panel_rows + gap_y) * grid.step
        for v in token_ticks:
            _, y = axes.xy(0, y0 + v)
            canvas.line([(box[0] - 2.5, y), (box[0], y)], _INK, 0.6)
            canvas.text(box[0] - 3.5, y, tokens_label(v), 7, anchor="rm")
    entries: list[tuple[str, str, Any]] = [("patch", s, _rgb(colors[s])) for s in reversed(grid.slots)]
    if len(mark_x):
        entries.append(("tick", "first divergent token", (0, 0, 0)))
    _legend(canvas, box[2] + 12, box[1], entries, 8.5)
    _title(canvas, title)
    canvas.text((box[0] + box[2]) / 2, canvas.height_pt - 5, "turn (request index)", 9.5, anchor="md")
    canvas.vertical_text(10, (box[1] + box[3]) / 2, "token position", 9.5)
    return canvas.save(Path(path))
