"""Every figure the README states is recomputed here from the data and compared as it is shown.

A figure that drifts (a changed fixture, a changed cache model) fails here instead of going stale.
"""

from __future__ import annotations

import pathlib
import re

import polars as pl
import pytest

from promptkit.cache import analyze

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
ANALYSIS_GUIDE = (ROOT / "docs" / "guide" / "analysis.md").read_text(encoding="utf-8")


def _bold(text: str) -> list[str]:
    return re.findall(r"\*\*([^*]+)\*\*", text)


@pytest.fixture(scope="module")
def real() -> pl.DataFrame:
    return analyze(ROOT / "fixtures" / "real-logs" / "deepseek", view="simulated").requests


def test_real_log_figures(real: pl.DataFrame) -> None:
    exact = int((real["prompt_tokens"] == real["reported_prompt_tokens"]).sum())
    assert f"**{exact} of {real.height}**" in README
    predicted = real["predicted_cached_tokens"].sum() / real["prompt_tokens"].sum()
    reported = real["reported_cached_tokens"].sum() / real["reported_prompt_tokens"].sum()
    assert f"**{predicted:.4f}**" in README and f"**{reported:.4f}**" in README
    kept = real.filter(
        ~pl.col("session").str.contains("pvlib")
    )  # the two runs where DeepSeek kept every entry
    to_the_token = int((kept["predicted_cached_tokens"] == kept["reported_cached_tokens"]).sum())
    assert f"**{to_the_token} of {kept.height}**" in README
    assert f"to the token on {to_the_token} of {kept.height} calls" in ANALYSIS_GUIDE
    # the upper-bound claim, call by call: never less than DeepSeek served, except on the earliest call
    # of the log, which hit a head cached by calls the log does not hold
    under = real.filter(pl.col("predicted_cached_tokens") < pl.col("reported_cached_tokens"))
    assert under.height == 1
    assert under["timestamp"][0] == real["timestamp"].min() and under["index"][0] == 0


def test_bundled_default_figures() -> None:
    before = analyze(ROOT / "promptkit" / "data" / "default-session.jsonl")
    after = analyze(ROOT / "fixtures" / "logs" / "support-after.jsonl")
    assert before.hit_ratio is not None and after.hit_ratio is not None
    shown = _bold(README)
    assert f"{before.hit_ratio:.1%}" in shown
    assert f"{after.hit_ratio:.1%}" in shown
    turns = before.requests.filter(pl.col("index") == 0).height  # one session
    assert turns == 1
    assert f"{before.requests.height} calls" in README


def test_the_suggested_fix_predicts_what_the_fixed_log_measures() -> None:
    from promptkit.formats import read_logs
    from promptkit.whatif import suggest

    records = read_logs(ROOT / "promptkit" / "data" / "default-session.jsonl")
    best = suggest(records)[0]
    keys = {"account-snapshot", "help-center"}
    assert all(k in best.transform.describe() for k in keys)
    assert f"**{best.after_hit_ratio:.1%}**" in README
    after = analyze(ROOT / "fixtures" / "logs" / "support-after.jsonl")
    assert after.hit_ratio is not None and f"measures {after.hit_ratio:.1%}" in README


def test_the_real_log_table_of_the_analysis_guide_is_what_the_data_gives() -> None:
    """docs/guide/analysis.md's table, row by row: calls, reported and predicted hit ratios, mean
    absolute error in tokens, per run and overall, in both views."""
    for view in ("consecutive", "simulated"):
        frame = analyze(ROOT / "fixtures" / "real-logs" / "deepseek", provider="deepseek", view=view).requests
        runs = frame.with_columns(
            pl.col("session").str.split("__").list.last().str.replace("-python", "").alias("run")
        )
        rows = [(name, part) for (name,), part in runs.group_by(["run"], maintain_order=True)] + [
            ("**all**", runs)
        ]
        for name, part in rows:
            reported = part["reported_cached_tokens"].sum() / part["reported_prompt_tokens"].sum()
            predicted = part["predicted_cached_tokens"].sum() / part["prompt_tokens"].sum()
            mae = (part["predicted_cached_tokens"] - part["reported_cached_tokens"]).abs().mean()
            assert isinstance(mae, float)
            bold = name.startswith("**")
            shown = (
                f"| {view} | {name} | {part.height} | "
                + (
                    f"**{reported:.4f}** | **{predicted:.4f}** | "
                    if bold
                    else f"{reported:.4f} | {predicted:.4f} | "
                )
                + f"{round(mae)} |"
            )
            assert shown in ANALYSIS_GUIDE, shown
