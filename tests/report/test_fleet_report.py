"""Tests for promptkit/report/fleet.py: the verdict, the pivot, the table's sizes."""

from __future__ import annotations

import polars as pl

from promptkit.report.fleet import fleet_pivot, fleet_table, fleet_verdict, verdict_lines


def _summary() -> pl.DataFrame:
    rows = [
        # policy, replicas, hit, imbalance, ttft p50
        ("round_robin", 4, 0.196, 1.02, 0.51),
        ("consistent_hash", 4, 0.371, 1.15, 0.41),
        ("prefix_aware", 4, 0.371, 1.05, 0.37),
        ("weighted_scorers", 4, 0.341, 1.04, 0.30),
        ("round_robin", 1, 0.374, 1.0, 0.9),
        ("prefix_aware", 1, 0.374, 1.0, 0.9),
    ]
    return pl.DataFrame(
        {
            "policy": [r[0] for r in rows],
            "replicas": [r[1] for r in rows],
            "capacity_tokens": [2**20] * len(rows),
            "capacity_bytes": [2.0**37] * len(rows),
            "hit_ratio": [r[2] for r in rows],
            "ceiling_hit_ratio": [0.374] * len(rows),
            "load_imbalance": [r[3] for r in rows],
            "ttft_p50_s": [r[4] for r in rows],
        }
    )


def test_verdict_ranks_by_hit_ratio_then_balance() -> None:
    verdict = {row["replicas"]: row for row in fleet_verdict(_summary()).to_dicts()}
    four = verdict[4]
    # consistent_hash and prefix_aware tie on hit ratio: the lower imbalance wins
    assert (four["best"], four["runner_up"]) == ("prefix_aware", "consistent_hash")
    assert four["share_of_ceiling"] == round(0.371 / 0.374, 4)
    assert four["runner_up_imbalance"] == 1.15
    assert (four["fastest"], four["fastest_ttft_p50_s"]) == ("weighted_scorers", 0.30)
    assert four["capacity"] == "1M tokens (128 GiB)" and four["capacity_tokens"] == 2**20
    assert verdict[1]["best"] == "any" and verdict[1]["runner_up"] is None


def test_verdict_in_words() -> None:
    lines = verdict_lines(fleet_verdict(_summary()))
    assert lines[0].startswith("1M tokens (128 GiB), 4 replicas: prefix_aware keeps 99.2% of the one-cache ceiling")
    assert "runner-up consistent_hash 99.2% at 1.150" in lines[0]
    assert "fastest first token: weighted_scorers (0.300 s median)" in lines[0]
    assert lines[1].startswith("1M tokens (128 GiB), 1 replica: every policy keeps 100.0%")


def test_pivot_and_table() -> None:
    pivot = fleet_pivot(_summary())
    assert pivot.columns == ["capacity", "replicas", "round_robin", "consistent_hash", "prefix_aware", "weighted_scorers"]
    assert pivot.filter(pl.col("replicas") == 4).row(0)[2:] == (0.196, 0.371, 0.371, 0.341)
    table = fleet_table(_summary())
    assert table["capacity"].unique().to_list() == ["1M tokens (128 GiB)"]
    assert "ttft_p50_s" in table.columns and "capacity_tokens" not in table.columns
