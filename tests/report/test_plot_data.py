"""Tests for promptkit/report/plot_data.py: colours, ticks and the composition raster, checked pixel by pixel."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, strategies as st

from promptkit.errors import ReportInputError
from promptkit.report import plot_data


@pytest.mark.parametrize("name", ["tab10", "tab20", "Set3"])
def test_palettes_are_matplotlibs(name: str) -> None:
    from matplotlib import colormaps

    table = {"tab10": plot_data.TAB10, "tab20": plot_data.TAB20, "Set3": plot_data.SET3}[name]
    cmap = colormaps[name]
    assert len(table) == cmap.N
    for k, color in enumerate(table):
        assert plot_data.hex_rgba(color) == pytest.approx(cmap(k))


def test_slot_and_session_colors() -> None:
    colors = plot_data.slot_colors(["mystery", "history", "other"])
    assert colors["history"] == plot_data.hex_rgba(plot_data.TAB20[plot_data.SLOT_ORDER.index("history")])
    assert colors["mystery"] == plot_data.hex_rgba(plot_data.SET3[0])
    assert colors["other"] == plot_data.hex_rgba(plot_data.SET3[1])
    few = plot_data.session_colors([f"s{k}" for k in range(10)])
    many = plot_data.session_colors([f"s{k}" for k in range(25)])
    assert len(set(few.values())) == 10 and len(set(many.values())) == 20
    assert many["s20"] == many["s0"]


@given(st.floats(-1e6, 1e6), st.floats(1e-3, 1e6), st.integers(2, 8))
def test_nice_ticks_are_round_evenly_spaced_and_inside(low: float, span: float, count: int) -> None:
    high = low + span
    ticks = plot_data.nice_ticks(low, high, count)
    assert ticks and all(low - 1e-6 * span <= t <= high + 1e-6 * span for t in ticks)
    assert len(ticks) <= 2 * count + 1
    if len(ticks) > 1:
        steps = np.diff(ticks)
        assert np.allclose(steps, steps[0], rtol=1e-6)
        mantissa = steps[0] / 10 ** np.floor(np.log10(steps[0]))
        assert any(np.isclose(mantissa, m, rtol=1e-6) for m in (1, 2, 2.5, 5, 10))


def _reference(
    image_rows: int, spans: list[tuple[int, int, int, int]], step: int, columns: int
) -> np.ndarray:
    """Pixel by pixel: row r of column c shows the code of the span of c holding token r * step."""
    out = np.full((image_rows, columns), -1)
    for r in range(image_rows):
        for column, start, tokens, code in spans:
            if start <= r * step < start + tokens:
                out[r, column] = code
    return out


@st.composite
def _columns_of_spans(draw: st.DrawFn) -> tuple[list[tuple[int, int, int, int]], int, int]:
    columns = draw(st.integers(1, 5))
    spans = []
    for column in range(columns):
        start = draw(st.integers(0, 5))
        for _ in range(draw(st.integers(0, 4))):
            tokens = draw(st.integers(0, 9))
            spans.append((column, start, tokens, draw(st.integers(0, 3))))
            start += tokens + draw(st.integers(0, 3))
    return spans, columns, draw(st.integers(1, 4))


@given(_columns_of_spans())
def test_paint_spans_matches_the_pixel_by_pixel_definition(
    case: tuple[list[tuple[int, ...]], int, int],
) -> None:
    spans, columns, step = case
    rows = 12
    image = np.full((rows, columns), -1)
    arrays = [np.array([s[k] for s in spans], dtype=np.int64) for k in range(4)]
    column, start, tokens, code = arrays
    keep = -(-(start + tokens) // step) <= rows  # stay inside the image
    plot_data.paint_spans(
        image,
        column[keep],
        np.zeros(int(keep.sum()), dtype=np.int64),
        start[keep],
        tokens[keep],
        code[keep],
        step,
    )
    expected = _reference(rows, [s for s, k in zip(spans, keep, strict=True) if k], step, columns)
    assert image.tolist() == expected.tolist()


def _frames(sessions: dict[str, list[list[tuple[str, int]]]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """sessions -> turns -> [(slot, tokens), ...] as requests and composition frames (prefix: first span)."""
    req, comp = [], []
    for session, turns in sessions.items():
        for index, spans in enumerate(turns):
            start = 0
            for slot, tokens in spans:
                comp.append(
                    {"session": session, "index": index, "slot": slot, "start": start, "tokens": tokens}
                )
                start += tokens
            req.append(
                {"session": session, "index": index, "prompt_tokens": start, "prefix_tokens": spans[0][1]}
            )
    return pl.DataFrame(req), pl.DataFrame(comp)


def test_composition_grid_places_each_session_in_its_panel() -> None:
    sessions = {
        "a": [[("system", 30), ("user", 10)], [("system", 30), ("user", 10), ("assistant", 20)]],
        "b": [[("system", 30), ("tool", 50)]],
        "c": [[("user", 5)], [("user", 5), ("tool", 5)], [("user", 5), ("tool", 5), ("user", 5)]],
    }
    requests, comp = _frames(sessions)
    grid = plot_data.composition_grid(requests, comp, rows=16)
    assert grid.sessions == ("a", "b", "c")
    assert grid.slots == ("system", "user", "assistant", "tool")  # prompt order
    assert grid.shape == plot_data.grid_shape(3) == (2, 2)
    assert grid.ceiling == 80 and grid.step == 5 and grid.panel_rows == 16 and grid.turns == 3
    for session, (x0, y0) in zip(grid.sessions, grid.origins, strict=True):
        panel = grid.codes[y0 : y0 + grid.panel_rows, x0 : x0 + grid.turns]
        for index in range(grid.turns):
            spans = [(0, start, tokens, grid.slots.index(slot)) for (s, i, slot, start, tokens) in
                     comp.select("session", "index", "slot", "start", "tokens").iter_rows() if s == session and i == index]  # fmt: skip
            expected = _reference(grid.panel_rows, spans, grid.step, 1)[:, 0]
            assert panel[:, index].tolist() == expected.tolist(), (session, index)
    # panels read left to right, top to bottom; nothing is painted between them
    (ax, ay), (bx, by), (cx, cy) = grid.origins
    assert ay == by > cy == 0 and ax == cx == 0 < bx
    painted = np.zeros(grid.codes.shape, dtype=bool)
    for x0, y0 in grid.origins:
        painted[y0 : y0 + grid.panel_rows, x0 : x0 + grid.turns] = True
    assert (grid.codes[~painted] == -1).all()
    # one mark per request whose prompt was not wholly shared, at its panel's position
    mark_x, mark_y = grid.marks
    assert len(mark_x) == requests.filter(pl.col("prefix_tokens") < pl.col("prompt_tokens")).height == 5
    assert (mark_x[:2].tolist(), mark_y[:2].tolist()) == ([0, 1], [ay * grid.step + 30, ay * grid.step + 30])


def test_composition_grid_takes_a_subset_and_validates_its_input() -> None:
    requests, comp = _frames({"a": [[("system", 4)]], "b": [[("user", 6)]]})
    grid = plot_data.composition_grid(requests, comp, ["b"])
    assert grid.sessions == ("b",) and grid.slots == ("user",) and grid.shape == (1, 1)
    with pytest.raises(ReportInputError, match="start"):
        plot_data.composition_grid(requests, comp.drop("start"))
    empty = plot_data.composition_grid(requests.clear(), comp.clear())
    assert empty.sessions == () and (empty.codes == -1).all()


@pytest.mark.parametrize("extra_slot", [None, "mystery"])
def test_composition_grid_reads_sessions_by_runs_or_by_value_alike(extra_slot: str | None) -> None:
    """A composition frame whose sessions come in long runs (as the engine writes it) and the same rows
    shuffled paint the same raster; a slot outside SLOT_ORDER comes after the known ones."""
    turn = [("system", 20), ("user", 7), ("assistant", 9)] + ([(extra_slot, 4)] if extra_slot else [])
    sessions = {name: [turn[: 1 + k % len(turn)] for k in range(12)] for name in ("a", "b", "c")}
    requests, comp = _frames(sessions)
    by_runs = plot_data.composition_grid(requests, comp, rows=20)
    shuffled = plot_data.composition_grid(requests, comp.sample(fraction=1.0, shuffle=True, seed=3), rows=20)
    assert (
        by_runs.slots
        == shuffled.slots
        == ("system", "user", "assistant") + ((extra_slot,) if extra_slot else ())
    )
    assert by_runs.codes.tolist() == shuffled.codes.tolist()
    assert sorted(np.unique(by_runs.codes).tolist()) == list(range(-1, len(by_runs.slots)))
