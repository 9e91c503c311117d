"""Truth check: the DeepSeek model against what DeepSeek reported on four real mini-swe-agent runs.

Run as a script to print the per-file and aggregate table of both views::

    python tests/analysis/test_real_logs.py

Definitions (token-weighted over calls with usage):

- ``reported``  = Σ reported cached / Σ reported prompt (DeepSeek's own ratio);
- ``predicted`` = Σ predicted cached / Σ our prompt tokens (our ratio, in our token counts);
- ``scaled``    = Σ (our per-call hit ratio × reported prompt) / Σ reported prompt (our ratios
  weighted by DeepSeek's prompt sizes);
- ``raw``       = Σ predicted cached / Σ reported prompt (mixes our counts with DeepSeek's: biased
  low while our rendering counts fewer tokens than DeepSeek's server, see the README);
- ``mae_tokens`` = mean |our hit ratio × reported prompt − reported cached| per call, and
  ``mae_raw_tokens`` = mean |predicted cached − reported cached|.

The model predicts what the cache *can* serve (every entry persisted); DeepSeek's cache is best
effort, so the prediction may exceed the report where entries were not persisted (pvlib-1072).
"""

from __future__ import annotations

import functools
from pathlib import Path

import polars as pl
import pytest

from promptkit.analysis.api import analyze
from promptkit.analysis.result import AnalysisResult

REAL = Path("fixtures/real-logs/deepseek")

#: Aggregate |predicted − reported| hit ratio allowed, tightened to what is achieved plus a small margin
#: (achieved with the V3.2 render: 0.0155 consecutive,
#: 0.0158 simulated; all of it from pvlib-1072, where DeepSeek's best-effort cache missed 38 of 73 entries).
AGGREGATE_TOLERANCE = 0.0165
#: Per-file |predicted − reported| hit ratio allowed (achieved: 0.0249 pvlib, ≤ 0.0011 the others).
PER_FILE_TOLERANCE = 0.026
#: Mean absolute per-call error, in reported tokens (achieved: 225 consecutive, 221 simulated).
MAE_TOKENS = 235.0


@functools.cache
def result(view: str) -> AnalysisResult:
    return analyze(REAL, provider="deepseek", view=view)


def truth_table(view: str) -> pl.DataFrame:
    """Per file and ``(all)``: reported, predicted, scaled and raw hit ratios and the errors."""
    frame = result(view).requests.filter(pl.col("reported_cached_tokens").is_not_null())
    aggs = [
        pl.len().alias("calls"),
        pl.col("prompt_tokens").sum().alias("our_prompt"),
        pl.col("reported_prompt_tokens").sum().alias("reported_prompt"),
        (pl.col("reported_cached_tokens").sum() / pl.col("reported_prompt_tokens").sum()).alias("reported"),
        (pl.col("predicted_cached_tokens").sum() / pl.col("prompt_tokens").sum()).alias("predicted"),
        (
            (pl.col("hit_ratio") * pl.col("reported_prompt_tokens")).sum()
            / pl.col("reported_prompt_tokens").sum()
        ).alias("scaled"),
        (pl.col("predicted_cached_tokens").sum() / pl.col("reported_prompt_tokens").sum()).alias("raw"),
        (pl.col("hit_ratio") * pl.col("reported_prompt_tokens") - pl.col("reported_cached_tokens"))
        .abs()
        .mean()
        .alias("mae_tokens"),
        (pl.col("predicted_cached_tokens") - pl.col("reported_cached_tokens"))
        .abs()
        .mean()
        .alias("mae_raw_tokens"),
    ]
    per_file = frame.group_by("session").agg(aggs).sort("session")
    overall = frame.select(pl.lit("(all)").alias("session"), *aggs)
    return pl.concat([per_file, overall], how="vertical_relaxed")


def test_the_logs_load_with_their_problems_reported() -> None:
    r = result("consecutive")
    assert r.requests.height == 74 + 42 + 38
    reasons = r.problems["reason"].to_list()
    assert len(reasons) == 5
    assert sum("skipped non-chat message (role 'exit')" in x for x in reasons) == 4
    assert sum("trajectory has no model calls" in x for x in reasons) == 1


@pytest.mark.parametrize("view", ["consecutive", "simulated"])
def test_hits_come_in_64_token_units(view: str) -> None:
    frame = result(view).requests
    assert (frame["reported_cached_tokens"] % 64 == 0).all()
    assert (frame["predicted_cached_tokens"] % 64 == 0).all()
    assert (frame["predicted_cached_tokens"] <= frame["prompt_tokens"]).all()


@pytest.mark.parametrize("view", ["consecutive", "simulated"])
def test_aggregate_predicted_hit_ratio_is_close_to_reported(view: str) -> None:
    table = truth_table(view)
    overall = table.filter(pl.col("session") == "(all)").row(0, named=True)
    assert overall["calls"] == 154
    assert abs(overall["predicted"] - overall["reported"]) <= AGGREGATE_TOLERANCE
    assert abs(overall["scaled"] - overall["reported"]) <= AGGREGATE_TOLERANCE
    assert overall["mae_tokens"] <= MAE_TOKENS
    for row in table.filter(pl.col("session") != "(all)").iter_rows(named=True):
        assert abs(row["predicted"] - row["reported"]) <= PER_FILE_TOLERANCE, row["session"]


def test_prompt_tokens_are_exactly_what_deepseek_counted() -> None:
    frame = result("consecutive").requests
    assert frame.height == 154
    assert (frame["prompt_tokens"] == frame["reported_prompt_tokens"]).all()
    from promptkit.report import predicted_vs_reported_summary

    table = predicted_vs_reported_summary(result("consecutive"))
    assert table.filter(pl.col("session") == "(all)")["prompt_exact"].item() == 154


def test_per_call_prediction_is_exact_where_the_cache_kept_every_entry() -> None:
    """django-12453 and pydicom-901: DeepSeek served the previous call's entry every time but once; the
    simulated view predicts the reported figure on (almost) every call, to the token."""
    frame = result("simulated").requests.filter(~pl.col("session").str.contains("pvlib"))
    exact = int((frame["predicted_cached_tokens"] == frame["reported_cached_tokens"]).sum())
    assert frame.height == 80
    assert exact >= 78  # achieved: 78 of 80 (the README states it; tests/test_figures.py checks the text)


def test_simulated_view_credits_the_head_shared_across_sessions() -> None:
    consecutive = result("consecutive").requests
    simulated = result("simulated").requests
    firsts = simulated.filter(pl.col("index") == 0).sort("timestamp")
    # DeepSeek reported a hit on every first call: the head every task shares (cached per account)
    assert (firsts["reported_cached_tokens"] > 0).all()
    # the earliest run has no earlier request to share with; every later run's first call gets a hit
    assert firsts["predicted_cached_tokens"][0] == 0
    assert (firsts["predicted_cached_tokens"][1:] > 0).all()
    assert firsts["cached_source"][1:].is_not_null().all()
    assert (consecutive.filter(pl.col("index") == 0)["predicted_cached_tokens"] == 0).all()
    # with no TTL and no capacity the simulated cache holds everything the consecutive view sees
    joined = consecutive.join(simulated, on=["session", "index"], suffix="_sim")
    assert (joined["predicted_cached_tokens_sim"] >= joined["predicted_cached_tokens"]).all()


def test_later_calls_hit_through_the_previous_answer() -> None:
    frame = result("consecutive").requests.filter(pl.col("index") > 0)
    # the shared prefix reaches past the previous call's prompt: into its answer
    previous_prompt = result("consecutive").requests.select(
        "session", (pl.col("index") + 1).alias("index"), pl.col("prompt_tokens").alias("previous_prompt")
    )
    joined = frame.join(previous_prompt, on=["session", "index"])
    assert (joined["prefix_tokens"] >= joined["previous_prompt"]).all()  # the whole previous prompt is shared
    # and, on every call, the previous answer too (DeepSeek-V3.2 renders the answer's tool calls as DSML,
    # exactly as the server did: each prompt extends the previous prompt and answer)
    assert (joined["prefix_tokens"] > joined["previous_prompt"]).all()
    assert (joined["cached_source"] == joined["session"] + "#" + (joined["index"] - 1).cast(pl.String)).all()


def test_the_consecutive_view_says_what_only_the_simulated_view_can_credit() -> None:
    consecutive = " ".join(result("consecutive").notes)
    assert "3 session(s) hit the provider's cache on their first request" in consecutive
    assert "simulated view" in consecutive
    assert "first request" not in " ".join(result("simulated").notes)


if __name__ == "__main__":  # the truth-check table
    with pl.Config(tbl_cols=20, tbl_width_chars=200, float_precision=4, fmt_str_lengths=48):
        for v in ("consecutive", "simulated"):
            print(f"== view: {v}")
            print(truth_table(v))
