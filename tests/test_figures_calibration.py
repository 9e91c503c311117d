"""The calibration page's figures (docs/how-to/calibration.md), recomputed from the real DeepSeek logs
and compared as the page shows them: the held-out table row by row, and every figure of its prose."""

from __future__ import annotations

import pathlib
import re
from collections.abc import Callable
from typing import Any

import polars as pl
import pytest

from promptkit.analysis.calibration import (
    apply_calibration,
    calibration_events,
    default_calibration,
    fit_calibration,
    leave_one_run_out,
)

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "how-to" / "calibration.md").read_text(encoding="utf-8")


def _signed(value: float) -> str:
    text = f"{value:+.2f}"
    return text.replace("-", "\N{MINUS SIGN}")


@pytest.fixture(scope="module")
def requests(real_deepseek: Callable[..., Any]) -> pl.DataFrame:
    return real_deepseek(provider="deepseek").requests


def test_the_held_out_table_is_what_the_data_gives(requests: pl.DataFrame) -> None:
    runs = {
        s: requests.filter(pl.col("session") == s) for s in requests["session"].unique(maintain_order=True)
    }
    table = leave_one_run_out(runs)
    shown = [line for line in PAGE.splitlines() if line.startswith("| ") and "---" not in line][1:]
    # the table's rows, in the page's order: one per held-out run, then the aggregate
    rows = {r["run"]: r for r in table.iter_rows(named=True)}
    assert len(shown) == len(rows)
    for line in shown:
        cells = [c.strip() for c in line.strip("|").split("|")]
        name = cells[0]
        key = "(all)" if name == "all held-out predictions" else next(k for k in rows if k.endswith(name))
        r = rows[key]
        expected = [
            str(r["requests"]),
            "" if r["stale_probability"] is None else f"{r['stale_probability']:.3f}",
            f"{r['reported_hit_ratio']:.4f}",
            f"{r['upper_hit_ratio']:.4f}",
            f"{r['expected_hit_ratio']:.4f}",
            _signed(r["error_pp"]),
            f"{r['prior_hit_ratio']:.4f}",
            _signed(r["prior_error_pp"]),
        ]
        assert cells[1:] == expected, name
    everything = rows["(all)"]
    assert abs(everything["error_pp"]) < 0.5  # the goal
    worst = max(abs(r["error_pp"]) for k, r in rows.items() if k != "(all)")
    bound = re.search(r"within (\S+) pp on every run", PAGE)
    assert bound is not None and worst <= float(bound.group(1)) < worst + 0.1
    assert f"and {abs(everything['error_pp']):.2f} pp on the aggregate" in PAGE
    upper_off = 100 * (everything["upper_hit_ratio"] - everything["reported_hit_ratio"])
    assert f"The upper bound is {upper_off:.2f} pp off" in PAGE
    prior = [abs(r["prior_error_pp"]) for k, r in rows.items() if k != "(all)"]
    assert f"Per run it is {min(prior):.0f}–{max(prior):.1f} pp off" in PAGE
    assert f"Its aggregate of {_signed(everything['prior_error_pp'])} pp" in PAGE


def test_the_prose_figures_are_what_the_data_gives(requests: pl.DataFrame, real_deepseek: Callable[..., Any]) -> None:
    events = calibration_events(requests)
    counted = events.filter(pl.col("outcome").is_in(["fresh", "stale"]))
    stale = counted.filter(pl.col("outcome") == "stale")
    assert f"{counted.height} calls can be told" in PAGE
    assert f"{stale.height} are stale, all\non the pvlib run" in PAGE
    pvlib = counted.filter(pl.col("session").str.contains("pvlib"))
    assert stale["session"].str.contains("pvlib").all()
    assert f"({stale.height} of {pvlib.height} there)" in PAGE
    fitted = fit_calibration(real_deepseek(provider="deepseek"))
    bundled = default_calibration("deepseek")
    assert bundled is not None and bundled.run_counts == fitted.run_counts
    assert f"`p = {bundled.stale_probability:.3f}` for the bundled DeepSeek fit" in PAGE
    assert f"(statistics {fitted.fitted_on['split_gap_seconds_chi2']:.3f} for the gap, " in PAGE
    assert f"{fitted.fitted_on['split_write_tokens_chi2']:.3f} for the write size)" in PAGE
    applied = apply_calibration(
        real_deepseek(provider="deepseek"), bundled
    )
    prompt = applied.requests["prompt_tokens"].sum()
    expected = applied.requests["expected_cached_tokens"].sum() / prompt
    reported = (
        applied.requests["reported_cached_tokens"].sum() / applied.requests["reported_prompt_tokens"].sum()
    )
    assert f"`Expected hit ratio {expected:.1%} (upper bound {applied.hit_ratio:.1%};" in PAGE
    assert f"DeepSeek reported {reported:.1%}." in PAGE
    assert f"the forecast's aggregate is {expected:.1%} against {reported:.1%} reported" in PAGE
    shown_p = re.search(r"calibration p\(stale\) = (\S+),", PAGE)
    assert shown_p is not None and shown_p.group(1) == f"{bundled.stale_probability:.3f}"
