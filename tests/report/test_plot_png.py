"""Tests for promptkit/report/plot_png.py: the PNG files' size and the colours drawn in them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from PIL import Image

from promptkit.report import plot_data, plot_png


def _rgb(color: tuple[float, ...], alpha: float = 1.0) -> np.ndarray:
    return np.array([round(255 * (alpha * c + 1 - alpha)) for c in color[:3]])


def _has_color(image: Any, rgb: np.ndarray, tolerance: int = 12) -> bool:
    """Some pixel within ``tolerance`` of ``rgb`` on every channel (lines are smoothed at their edges)."""
    pixels = np.asarray(image.convert("RGB")).reshape(-1, 3).astype(int)
    return bool((np.abs(pixels - rgb).max(axis=1) <= tolerance).any())


def _requests(sessions: int, turns: int = 6, reported: bool = False) -> pl.DataFrame:
    rows = []
    for s in range(sessions):
        for t in range(turns):
            row: dict[str, Any] = {
                "session": f"s{s:02d}",
                "index": t,
                "hit_ratio": (t / turns + s / 97) % 1.0,
            }
            row["predicted_cached_tokens"] = 100 * t + s
            if reported:
                row |= {"reported_prompt_tokens": 1000, "reported_cached_tokens": 90 * t + s}
            rows.append(row)
    return pl.DataFrame(rows)


def test_hit_ratio_png_has_one_colour_per_session_and_a_legend(tmp_path: Path) -> None:
    path = plot_png.write_hit_ratio_png(_requests(3, reported=True), tmp_path / "h.png")
    image = Image.open(path)
    assert image.size == (900, 450)
    colors = plot_data.session_colors(["s00", "s01", "s02"])
    legend = image.crop((700, 0, 900, 450))  # right of the axes: the legend
    for color in colors.values():
        assert _has_color(image, _rgb(color)) and _has_color(legend, _rgb(color))
    assert not _has_color(image, _rgb(plot_data.hex_rgba(plot_data.TAB10[3])))  # a 4th session's colour


def test_hit_ratio_png_draws_a_band_beyond_many_sessions(tmp_path: Path) -> None:
    image = Image.open(
        plot_png.write_hit_ratio_png(_requests(plot_png.MANY_SESSIONS + 1), tmp_path / "h.png")
    )
    blue = plot_data.hex_rgba(plot_data.TAB10[0])
    assert _has_color(image, _rgb(blue, 0.25), tolerance=3)  # the 10–90 % band
    assert _has_color(image, _rgb(blue))  # the median
    # no line per session: the second session colour of tab20 appears nowhere
    assert not _has_color(image, _rgb(plot_data.hex_rgba(plot_data.TAB20[1])), tolerance=3)


def test_hit_ratio_png_scales_with_dpi(tmp_path: Path) -> None:
    path = plot_png.write_hit_ratio_png(_requests(2), tmp_path / "h.png", dpi=150)
    assert Image.open(path).size == (1350, 675)


def test_predicted_vs_reported_png_needs_usage(tmp_path: Path) -> None:
    path = plot_png.write_predicted_vs_reported_png(_requests(2, reported=True), tmp_path / "p.png")
    image = Image.open(path)
    assert image.size == (750, 600)
    for color in plot_data.session_colors(["s00", "s01"]).values():
        assert _has_color(image, _rgb(color, 0.8))
    with pytest.raises(ValueError, match="reported usage"):
        plot_png.write_predicted_vs_reported_png(
            _requests(2).with_columns(reported_cached_tokens=pl.lit(None, dtype=pl.Int64)), tmp_path / "q.png"
        )


def test_composition_png_is_the_grid_with_its_panels(tmp_path: Path) -> None:
    requests = pl.DataFrame(
        {
            "session": ["a", "a", "b"],
            "index": [0, 1, 0],
            "prompt_tokens": [40, 60, 30],
            "prefix_tokens": [0, 40, 0],
        }
    )
    comp = pl.DataFrame(
        {
            "session": ["a", "a", "a", "b"],
            "index": [0, 1, 1, 0],
            "slot": ["system", "system", "user", "tool"],
            "start": [0, 0, 40, 0],
            "tokens": [40, 40, 20, 30],
        }
    )
    grid = plot_data.composition_grid(requests, comp)
    path = plot_png.write_composition_png(grid, tmp_path / "c.png", title="t")
    image = Image.open(path)
    assert image.size == plot_png.grid_png_size(grid) == (1300, 420)  # two panels, 5.25 x 3.15 in
    pixels = np.asarray(image.convert("RGB"))
    left, right, bottom, top = plot_png.GRID_MARGINS
    # the two panels, side by side: session a's left half, session b's right half
    panels = pixels[round(top * 100) : -round(bottom * 100), round(left * 100) : -round(right * 100)]
    middle = panels.shape[1] // 2
    colors = plot_data.slot_colors(list(grid.slots))
    for name, half in (("a", panels[:, :middle]), ("b", panels[:, middle:])):
        found = {slot for slot, c in colors.items() if (half.reshape(-1, 3) == _rgb(c)).all(axis=1).any()}
        assert found == ({"system", "user"} if name == "a" else {"tool"}), name
    assert (panels.reshape(-1, 3) == [0, 0, 0]).all(axis=1).any()  # the divergence ticks
    # one palette index per pixel; the text is ink on white, smoothed by shades between the two
    assert image.mode == "P"
    ink = np.array(plot_png._INK)
    margin = pixels[: round(top * 100)].reshape(-1, 3).astype(int)  # the title's band
    shades = margin[(margin != 255).any(axis=1)]
    assert (shades == ink).all(axis=1).any()
    share = (255 - shades[:, 0]) / (255 - ink[0])  # how much ink each shade holds
    blend = np.round(255 + (ink - 255) * share[:, None])
    assert np.abs(shades - blend).max() <= 1  # grey shades of the ink, not other colours


def test_hit_ratio_png_leaves_out_turns_without_a_ratio(tmp_path: Path) -> None:
    frame = _requests(2).with_columns(
        hit_ratio=pl.when(pl.col("index") == 3).then(None).otherwise(pl.col("hit_ratio"))
    )
    image = Image.open(plot_png.write_hit_ratio_png(frame, tmp_path / "h.png"))
    for color in plot_data.session_colors(["s00", "s01"]).values():
        assert _has_color(image, _rgb(color))


@pytest.mark.parametrize("palette", [False, True])
def test_dots_are_discs_stamped_over_what_was_drawn(tmp_path: Path, palette: bool) -> None:
    """A dot covers the pixels within its radius of its centre, over a line drawn after it; a dot past
    the canvas' edge is cut, not an error."""
    red, blue = (200, 30, 30), (30, 30, 200)
    canvas: Any = (
        plot_png._PaletteCanvas(1.0, 1.0, 72, [red, blue])
        if palette
        else plot_png._Canvas(1.0, 1.0, 72, scale=1)
    )
    canvas.dots([(20.0, 20.0), (71.5, 0.0)], red, 3.0)
    canvas.line([(0.0, 20.0), (72.0, 20.0)], blue, 1.0)
    image = np.asarray(Image.open(canvas.save(tmp_path / "dots.png")).convert("RGB")).astype(int)
    assert image[20, 20].tolist() == list(red)  # the dot's centre, over the line
    assert image[20, 23].tolist() == list(red) and image[20, 24].tolist() == list(blue)  # radius 3
    assert image[16, 20].tolist() == [255, 255, 255]
    assert image[0, 71].tolist() == list(red)  # the corner dot, cut at the edges
