"""Tests for promptkit/report/plots.py: figure content (artists, data, labels), never pixels."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import polars as pl
import pytest
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from promptkit.report import ReportInputError, plots


def _requests(rows: list[dict[str, Any]]) -> pl.DataFrame:
    schema = {
        "session": pl.String,
        "index": pl.Int64,
        "prompt_tokens": pl.Int64,
        "prefix_tokens": pl.Int64,
        "predicted_cached_tokens": pl.Int64,
        "hit_ratio": pl.Float64,
        "reported_prompt_tokens": pl.Int64,
        "reported_cached_tokens": pl.Int64,
    }
    full = []
    for r in rows:
        row = {c: r.get(c) for c in schema}
        row["prefix_tokens"] = r.get("prefix_tokens", r["predicted_cached_tokens"])
        row["hit_ratio"] = r["predicted_cached_tokens"] / r["prompt_tokens"]
        full.append(row)
    return pl.DataFrame(full, schema=schema, orient="row")


ROWS = [
    {
        "session": "a",
        "index": 0,
        "prompt_tokens": 100,
        "predicted_cached_tokens": 0,
        "prefix_tokens": 0,
        "reported_prompt_tokens": 100,
        "reported_cached_tokens": 0,
    },
    {
        "session": "a",
        "index": 1,
        "prompt_tokens": 300,
        "predicted_cached_tokens": 64,
        "prefix_tokens": 100,
        "reported_prompt_tokens": 300,
        "reported_cached_tokens": 128,
    },
    {"session": "a", "index": 2, "prompt_tokens": 500, "predicted_cached_tokens": 256, "prefix_tokens": 300},
    {"session": "b", "index": 0, "prompt_tokens": 200, "predicted_cached_tokens": 64, "prefix_tokens": 80},
    {"session": "b", "index": 1, "prompt_tokens": 400, "predicted_cached_tokens": 400, "prefix_tokens": 400},
]

# session a: identity then history then current; request 2 has two history spans (one per message)
COMPOSITION = pl.DataFrame(
    {
        "session": ["a"] * 7 + ["b"] * 2,
        "index": [0, 0, 1, 1, 2, 2, 2, 0, 1],
        "slot": [
            "identity",
            "current",
            "identity",
            "current",
            "identity",
            "history",
            "current",
            "identity",
            "identity",
        ],
        "key": [None] * 9,
        "start": [0, 60, 0, 100, 0, 60, 300, 0, 0],
        "tokens": [60, 40, 100, 200, 60, 240, 200, 200, 400],
    },
    schema_overrides={"key": pl.String},
)


def _result(rows: list[dict[str, Any]] = ROWS, composition: pl.DataFrame = COMPOSITION) -> SimpleNamespace:
    return SimpleNamespace(requests=_requests(rows), composition=composition, problems=pl.DataFrame())


def test_hit_ratio_draws_one_line_per_session_and_reported_on_top() -> None:
    fig = plots.plot_hit_ratio(_result())
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"a", "a (reported)", "b"}
    assert list(lines["a"].get_xdata()) == [0, 1, 2]
    assert list(lines["a"].get_ydata()) == pytest.approx([0 / 100, 64 / 300, 256 / 500])
    assert list(lines["a (reported)"].get_xdata()) == [0, 1]
    assert list(lines["a (reported)"].get_ydata()) == pytest.approx([0.0, 128 / 300])
    assert lines["a (reported)"].get_linestyle() == "--"
    assert lines["a"].get_color() == lines["a (reported)"].get_color()
    assert ax.get_ylabel().startswith("hit ratio")
    assert ax.get_title() == "Cache hit ratio per turn"
    legend = ax.get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == ["a", "b", "predicted", "reported"]


def test_hit_ratio_can_limit_sessions_and_rejects_unknown_ones() -> None:
    fig = plots.plot_hit_ratio(_result(), sessions=["b"])
    assert [line.get_label() for line in fig.axes[0].get_lines()] == ["b"]
    with pytest.raises(ValueError, match="'zz'"):
        plots.plot_hit_ratio(_result(), sessions=["zz"])


def test_hit_ratio_sorts_turns_and_draws_into_a_given_axes() -> None:
    rows = [ROWS[2], ROWS[0], ROWS[1]]
    host = Figure()
    ax = host.add_subplot()
    fig = plots.plot_hit_ratio(_requests(rows), ax=ax)
    assert fig is host
    assert list(ax.get_lines()[0].get_xdata()) == [0, 1, 2]


def test_hit_ratio_hides_the_legend_for_many_sessions() -> None:
    rows = [
        {"session": f"s{i}", "index": 0, "prompt_tokens": 10, "predicted_cached_tokens": i} for i in range(11)
    ]
    ax = plots.plot_hit_ratio(_requests(rows)).axes[0]
    assert len(ax.get_lines()) == 11
    assert ax.get_legend() is None


def _slot_image(ax: Any) -> tuple[Any, dict[tuple[float, ...], str]]:
    """The composition image and the legend's colour -> slot label map."""
    (image,) = ax.images
    legend = ax.get_legend()
    labels = {
        tuple(h.get_facecolor()): t.get_text()
        for h, t in zip(legend.legend_handles, legend.get_texts(), strict=True)
        if isinstance(h, Rectangle)
    }
    return image, labels


def _segments(ax: Any) -> list[tuple[float, float, float, str]]:
    """(request index, bottom, height, slot label) of every run of one slot in a column of the image."""
    image, labels = _slot_image(ax)
    data = image.get_array()
    x0, _x1, y0, y1 = image.get_extent()
    rows, cols = data.shape
    step = (y1 - y0) / rows
    out = []
    for c in range(cols):
        column = data[:, c]
        r = 0
        while r < rows:
            if column.mask[r] if np.ma.is_masked(column) else False:
                r += 1
                continue
            code = column[r]
            e = r
            while e < rows and not np.ma.is_masked(column[e]) and column[e] == code:
                e += 1
            color = tuple(image.cmap(image.norm(code)))
            out.append((x0 + 0.5 + c, y0 + r * step, (e - r) * step, labels[color]))
            r = e
    return out


def test_composition_stacks_each_span_at_its_token_position() -> None:
    fig = plots.plot_composition(_result(), session="a")
    ax = fig.axes[0]
    segments = sorted(_segments(ax))
    expected = sorted(
        (float(i), float(s), float(t), slot)
        for sess, i, slot, s, t in COMPOSITION.select(
            "session", "index", "slot", "start", "tokens"
        ).iter_rows()
        if sess == "a"
    )
    assert segments == expected
    # the stack of each column reaches the prompt length, and nothing is drawn above it
    tops: dict[float, float] = {}
    for x, bottom, height, _ in segments:
        tops[x] = max(tops.get(x, 0.0), bottom + height)
    assert tops == {0.0: 100.0, 1.0: 300.0, 2.0: 500.0}
    # slots in prompt order in the legend (top of the legend = top of the stack), one colour each
    _, labels = _slot_image(ax)
    assert list(labels.values())[::-1] == ["identity", "history", "current"]
    assert len(labels) == 3


def test_composition_is_one_image_whatever_the_number_of_turns() -> None:
    n = 400
    comp = pl.DataFrame(
        {
            "session": ["s"] * (2 * n),
            "index": [i for i in range(n) for _ in range(2)],
            "slot": ["system", "history"] * n,
            "key": [None] * (2 * n),
            "start": [x for i in range(n) for x in (0, 50)],
            "tokens": [x for i in range(n) for x in (50, 10 * i + 1)],
        },
        schema_overrides={"key": pl.String},
    )
    rows = [
        {"session": "s", "index": i, "prompt_tokens": 51 + 10 * i, "predicted_cached_tokens": 50}
        for i in range(n)
    ]
    ax = plots.plot_composition(_result(rows, comp)).axes[0]
    assert len(ax.images) == 1 and not ax.patches and not ax.containers
    image = ax.images[0]
    data = image.get_array()
    assert data.shape[1] == n and data.shape[0] <= plots._COMPOSITION_ROWS
    # the last column is filled up to its prompt length (binned) and empty above
    _x0, _x1, y0, y1 = image.get_extent()
    step = (y1 - y0) / data.shape[0]
    filled = int((~np.ma.getmaskarray(data[:, -1])).sum())
    assert filled == -(-(51 + 10 * (n - 1)) // int(step))


def test_composition_marks_the_first_divergent_token() -> None:
    ax = plots.plot_composition(_result(), session="a").axes[0]
    markers = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(markers) == 1
    assert markers[0].get_label() == "first divergent token"
    assert markers[0].get_offsets().tolist() == [[0, 0], [1, 100], [2, 300]]
    # a request whose whole prompt was shared has no divergence point
    ax_b = plots.plot_composition(_result(), session="b").axes[0]
    offsets = next(c for c in ax_b.collections if isinstance(c, PathCollection)).get_offsets().tolist()
    assert offsets == [[0, 80]]
    assert "session b" in ax_b.get_title()


def test_composition_defaults_to_the_first_session_and_validates_input() -> None:
    ax = plots.plot_composition(_result()).axes[0]
    assert "session a" in ax.get_title()
    with pytest.raises(ValueError, match="'nope'"):
        plots.plot_composition(_result(), session="nope")
    with pytest.raises(ReportInputError, match="composition"):
        plots.plot_composition(SimpleNamespace(requests=_requests(ROWS)))  # type: ignore[arg-type]
    with pytest.raises(ReportInputError, match="start"):
        plots.plot_composition(_result(composition=COMPOSITION.drop("start")))
    # a requests frame works when the composition is passed alongside
    fig = plots.plot_composition(_requests(ROWS), composition=COMPOSITION, session="b")  # type: ignore[arg-type]
    assert {slot for _, _, _, slot in _segments(fig.axes[0])} == {"identity"}


def test_slot_colors_are_stable_across_figures() -> None:
    first = plots.slot_colors(["history", "current"])
    second = plots.slot_colors(["mystery", "current", "history", "other"])
    assert first["history"] == second["history"] and first["current"] == second["current"]
    assert second["mystery"] != second["other"]
    assert len({first["history"], first["current"]}) == 2


def test_predicted_vs_reported_scatter_with_identity_line() -> None:
    ax = plots.plot_predicted_vs_reported(_result()).axes[0]
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert [c.get_label() for c in scatters] == ["a"]
    assert scatters[0].get_offsets().tolist() == [[0, 0], [128, 64]]
    (diagonal,) = [line for line in ax.get_lines() if line.get_label() == "y = x"]
    assert list(diagonal.get_xdata()) == list(diagonal.get_ydata())
    assert diagonal.get_xdata()[-1] >= 128
    assert ax.get_xlabel() == "reported cached tokens" and ax.get_ylabel() == "predicted cached tokens"


def test_predicted_vs_reported_per_turn() -> None:
    ax = plots.plot_predicted_vs_reported(_result(), kind="turn").axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines["a predicted"].get_ydata()) == [0, 64]
    assert list(lines["a reported"].get_ydata()) == [0, 128]
    with pytest.raises(ValueError, match="kind"):
        plots.plot_predicted_vs_reported(_result(), kind="pie")  # type: ignore[arg-type]


def test_predicted_vs_reported_without_usage_says_so() -> None:
    rows = [{k: v for k, v in r.items() if not k.startswith("reported")} for r in ROWS]
    fig = plots.plot_predicted_vs_reported(_requests(rows))
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["no reported usage in the input"]


def _png(path: Path) -> Any:
    from PIL import Image

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return Image.open(path).convert("RGB")


def test_save_plots_writes_one_png_per_kind_of_plot(tmp_path: Path) -> None:
    written = plots.save_plots(_result(), tmp_path / "out")
    assert set(written) == {"hit_ratio", "predicted_vs_reported", "composition"}
    assert written.skipped == {}
    assert {p.name for p in (tmp_path / "out").iterdir()} == {f"{name}.png" for name in written}
    # inches × dpi, as a matplotlib figure of that size would be
    assert _png(written["hit_ratio"]).size == (900, 450)
    assert _png(written["predicted_vs_reported"]).size == (750, 600)
    # two sessions: one row of two panels, each 0.6 as tall as it is wide (not squashed into a strip)
    assert _png(written["composition"]).size == (1300, round((0.55 + 0.5 + 0.6 * (13 - 2.5) / 2) * 100))
    half = plots.save_plots(_result(), tmp_path / "half", dpi=50)
    assert _png(half["hit_ratio"]).size == (450, 225)


def test_save_plots_limits_the_composition_panels_and_says_so(tmp_path: Path) -> None:
    rows = [dict(r, session=f"s{k}") for k in range(5) for r in ROWS if r["session"] == "a"]
    comp = pl.concat(
        [COMPOSITION.filter(pl.col("session") == "a").with_columns(session=pl.lit(f"s{k}")) for k in range(5)]
    )
    written = plots.save_plots(_result(rows, comp), tmp_path / "all")
    assert written.skipped == {}
    # five sessions: 3 panels a row, 2 rows
    assert _png(written["composition"]).size[1] == round((0.55 + 0.5 + 2 * 0.6 * (13 - 2.5) / 3) * 100)
    limited = plots.save_plots(_result(rows, comp), tmp_path / "two", max_sessions=2)
    assert "first 2 of 5 sessions" in limited.skipped["composition"]
    assert _png(limited["composition"]).size[1] == round((0.55 + 0.5 + 0.6 * (13 - 2.5) / 2) * 100)


@pytest.mark.slow
def test_composition_png_shows_exactly_the_slots_present(tmp_path: Path) -> None:
    image = np.asarray(_png(plots.save_plots(_result(), tmp_path)["composition"]))
    panels = image[50 : image.shape[0] - 55, 75 : image.shape[1] - 175]  # inside the margins: no text
    colors = {tuple(c) for c in panels.reshape(-1, 3).tolist()}
    for slot, rgba in plots.slot_colors(list(plots.SLOT_ORDER)).items():
        rgb = tuple(round(255 * c) for c in rgba[:3])
        assert (rgb in colors) == (slot in {"identity", "history", "current"}), slot


@pytest.mark.slow
def test_save_plots_draws_without_matplotlib(tmp_path: Path) -> None:
    code = (
        "import sys, polars as pl\n"
        "from types import SimpleNamespace\n"
        "from promptkit.report.plots import save_plots\n"
        "r = SimpleNamespace(requests=pl.DataFrame({'session': ['a', 'a'], 'index': [0, 1], 'hit_ratio': [0.0, 0.5],\n"
        "    'prompt_tokens': [4, 6], 'prefix_tokens': [0, 4], 'predicted_cached_tokens': [0, 3],\n"
        "    'reported_cached_tokens': [0, 4]}),\n"
        "    composition=pl.DataFrame({'session': ['a'], 'index': [0], 'slot': ['system'], 'start': [0], 'tokens': [4]}))\n"
        f"saved = save_plots(r, {str(tmp_path)!r})\n"
        "assert sorted(saved) == ['composition', 'hit_ratio', 'predicted_vs_reported'], sorted(saved)\n"
        "assert not [m for m in sys.modules if m.startswith('matplotlib')], 'matplotlib imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_save_plots_skips_plots_with_nothing_to_show(tmp_path: Path) -> None:
    rows = [{k: v for k, v in r.items() if not k.startswith("reported")} for r in ROWS]
    written = plots.save_plots(_result(rows), tmp_path)
    assert "predicted_vs_reported" not in written
    assert not (tmp_path / "predicted_vs_reported.png").exists()
    assert written.notes == ("predicted_vs_reported: no reported usage in the input",)
    empty = plots.save_plots(_result([], COMPOSITION.clear()), tmp_path / "empty")
    assert len(empty) == 0 and set(empty.skipped) == {"hit_ratio", "predicted_vs_reported"}
    assert not (tmp_path / "empty").exists()


def test_hit_ratio_aggregates_many_sessions_into_quantiles() -> None:
    rows = [
        {"session": f"s{i}", "index": t, "prompt_tokens": 100, "predicted_cached_tokens": (i * 7 + t) % 101}
        for i in range(60)
        for t in range(3)
    ]
    ax = plots.plot_hit_ratio(_requests(rows)).axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"median"}
    frame = _requests(rows)
    for t in range(3):
        ratios = np.sort(frame.filter(pl.col("index") == t)["hit_ratio"].to_numpy())
        assert lines["median"].get_ydata()[t] == pytest.approx(np.median(ratios))
    assert "60 sessions" in ax.get_title()
    assert {t.get_text() for t in ax.get_legend().get_texts()} == {"median", "10–90 % of sessions"}
    (band,) = [c for c in ax.collections if c.get_label() == "10–90 % of sessions"]
    low, high = band.get_paths()[0].vertices[:, 1].min(), band.get_paths()[0].vertices[:, 1].max()
    assert 0.0 <= low < high <= 1.0


@pytest.mark.slow
def test_plots_never_touch_pyplot_and_import_matplotlib_lazily() -> None:
    code = (
        "import sys, promptkit.report.plots as p\n"
        "assert 'matplotlib' not in sys.modules, 'imported eagerly'\n"
        "import polars as pl\n"
        "df = pl.DataFrame({'session': ['a'], 'index': [0], 'hit_ratio': [0.5]})\n"
        "p.plot_hit_ratio(df)\n"
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_figures_display_as_png_in_a_jupyter_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    import IPython

    class Formatter:
        def __init__(self) -> None:
            self.type_printers: dict[type, Any] = {}

        def for_type(self, typ: type, func: Any) -> None:
            self.type_printers[typ] = func

    png = Formatter()
    shell = SimpleNamespace(kernel=object(), display_formatter=SimpleNamespace(formatters={"image/png": png}))
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    fig = plots.plot_hit_ratio(_result())
    assert png.type_printers[Figure](fig)[:8] == b"\x89PNG\r\n\x1a\n"
    # outside a kernel (a plain IPython shell has no .kernel) nothing is registered
    plain = Formatter()
    monkeypatch.setattr(
        IPython,
        "get_ipython",
        lambda: SimpleNamespace(display_formatter=SimpleNamespace(formatters={"image/png": plain})),
    )
    plots.plot_hit_ratio(_result())
    assert plain.type_printers == {}


def test_hit_ratio_legend_names_reported_only_when_the_log_has_usage() -> None:
    import polars as pl

    from promptkit.report.plots import plot_hit_ratio

    frame = pl.DataFrame(
        {
            "session": ["s", "s"],
            "index": [0, 1],
            "hit_ratio": [0.0, 0.5],
            "reported_prompt_tokens": [None, None],
            "reported_cached_tokens": [None, None],
        },
        schema_overrides={"reported_prompt_tokens": pl.Int64, "reported_cached_tokens": pl.Int64},
    )
    labels = [t.get_text() for t in plot_hit_ratio(frame).axes[0].get_legend().get_texts()]
    assert labels == ["s"]
    with_usage = frame.with_columns(reported_prompt_tokens=pl.lit(100), reported_cached_tokens=pl.lit(50))
    labels = [t.get_text() for t in plot_hit_ratio(with_usage).axes[0].get_legend().get_texts()]
    assert labels == ["s", "predicted", "reported"]


def test_composition_grid_figure_is_one_image_with_a_panel_per_session() -> None:
    fig = plots.plot_composition_grid(_result())
    (ax,) = fig.axes
    assert len(ax.images) == 1 and not ax.patches
    assert [t.get_text() for t in ax.texts] == ["a", "b"]
    assert "2 sessions" in fig.get_suptitle()
    # the image is the grid's raster: slot codes, masked outside the prompts
    from promptkit.report.plot_data import composition_grid

    grid = composition_grid(_requests(ROWS), COMPOSITION)
    data = ax.images[0].get_array()
    assert np.ma.getdata(data).tolist() == grid.codes.tolist()
    assert (np.ma.getmaskarray(data) == (grid.codes < 0)).all()
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == ["current", "history", "identity", "first divergent token"]  # top of the stack first
    marks = next(c for c in ax.collections if isinstance(c, PathCollection))
    assert marks.get_offsets().tolist() == np.column_stack(grid.marks).tolist()


def test_composition_grid_figure_limits_and_checks_sessions() -> None:
    fig = plots.plot_composition_grid(_result(), max_sessions=1)
    assert [t.get_text() for t in fig.axes[0].texts] == ["a"]
    assert "the first 1 of 2 sessions" in fig.get_suptitle()
    only_b = plots.plot_composition_grid(_result(), sessions=["b"])
    assert [t.get_text() for t in only_b.axes[0].texts] == ["b"]
    with pytest.raises(ValueError, match="'zz'"):
        plots.plot_composition_grid(_result(), sessions=["zz"])
    with pytest.raises(ValueError, match="max_sessions"):
        plots.plot_composition_grid(_result(), max_sessions=0)
