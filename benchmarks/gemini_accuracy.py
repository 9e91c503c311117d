"""The Gemini rows of docs/reference/accuracy.md, measured on real Gemini CLI recordings this repository
does not hold (give their folders), beside the shared OpenRouter runs: the accuracy row of
``tests/analysis/test_accuracy.py`` over every call, the calibrated expectation fitted on some runs and
checked on others (``--held-out``: the runs of those folders are predicted with a calibration fitted on
the rest), the pooled leave-one-run-out error, and the share of lost tokens named ``model_switch``.
Without a folder, or when none is present, it says so and exits 0.

    PYTHONPATH=$PWD python benchmarks/gemini_accuracy.py /tmp/aim fixtures/real-logs/gemini \\
        --held-out /tmp/vct fixtures/gemini-cli-real

The figures of the docs were made on: BrianV1981/aim (MIT), ``[AUTO_REPAIR]/archive/raw/session-*.json``
over its history (the longest copy of each of 10 sessions, Gemini 3 Flash and 3.1 Pro, 999 calls);
Mai0313/VibeCodingTracker (MIT), ``examples/test_conversation_gemini.json`` over its history (4 sessions,
2.5 Pro and 3.1 Pro) and ``tests/fixtures/sessions/gemini.jsonl`` (3 Flash then 3.1 Pro); the two
recordings of ``fixtures/gemini-cli-real``; the OpenRouter runs of ``fixtures/real-logs/gemini``.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import sys
from pathlib import Path
from types import ModuleType

import polars as pl

from promptkit.analysis.calibration import expected_cached, fit_calibration, leave_one_run_out
from promptkit.analysis.causes import explain_causes

ROOT = Path(__file__).resolve().parents[1]


def _accuracy_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "accuracy", ROOT / "tests" / "analysis" / "test_accuracy.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _frames(accuracy: ModuleType, paths: list[str]) -> pl.DataFrame | None:
    frames = [accuracy.calls_with_usage(p, "gemini") for p in paths if Path(p).exists()]
    return pl.concat(frames, how="vertical_relaxed") if frames else None


def held_out(train: pl.DataFrame, test: pl.DataFrame) -> dict[str, float]:
    """The expectation fitted on ``train``'s runs, over ``test``'s calls (learning from each test run's
    earlier usage, as ``analyze --calibration`` does): its error in points of the reported hit ratio,
    and the share of test calls whose upper bound is under the report."""
    cal = fit_calibration(train, provider="gemini")
    mine = test.join(expected_cached(test, cal), on=["session", "index"])
    prompt = float(test["reported_prompt_tokens"].sum())
    reported = float(test["reported_cached_tokens"].sum())
    return {
        "calls": float(test.height),
        "stale_probability": cal.stale_probability,
        "reported_hit_ratio": reported / prompt,
        "expected_error_pp": 100 * (float(mine["expected_cached_tokens"].sum()) - reported) / prompt,
        "upper_below": float(
            (test["predicted_cached_tokens"] < test["reported_cached_tokens"]).mean() or 0.0
        ),
    }


def mechanisms(accuracy: ModuleType, every: pl.DataFrame) -> None:
    """The candidate mechanisms, tested call by call over every run: is the answer cached with its
    prompt (reads past the previous prompt), do reads sit on blocks (per route, beside units unrelated
    to 2,048), how do misses after a read follow the gap since it."""
    print("reads past the previous prompt:", accuracy.reads_past_the_previous_prompt(every))
    routed = pl.col("session").str.contains("__")  # the OpenRouter runs are named by their task
    for name, part in (("OpenRouter", every.filter(routed)), ("Gemini CLI", every.filter(~routed))):
        if part.is_empty():
            continue
        shares = {u: round(accuracy.block_share(part, u), 2) for u in (1024, 1536, 2048, 2600, 4096)}
        print(f"reads just under whole blocks, {name}: {shares}")
    calls = accuracy.consecutive(every).filter(pl.col("predicted_cached_tokens") > 0)
    cuts = [0.0, 5.0, 10.0, 60.0, 300.0, 600.0, float("inf")]
    for lo, hi in itertools.pairwise(cuts):
        part = calls.filter((pl.col("gap") >= lo) & (pl.col("gap") < hi))
        missed = int((part["reported_cached_tokens"] == 0).sum())
        print(f"misses after a read, gap {lo:g}-{hi:g} s: {missed}/{part.height}")


def residuals(train: pl.DataFrame, test: pl.DataFrame) -> pl.DataFrame:
    """The held-out error (points of the reported hit ratio) by the call's state and by session."""
    cal = fit_calibration(train, provider="gemini")
    mine = test.join(expected_cached(test, cal), on=["session", "index"]).sort("session", "index")
    previous = pl.col("reported_cached_tokens").shift(1).over("session")
    gap = pl.col("timestamp") - pl.col("timestamp").shift(1).over("session")
    state = (
        pl.when(previous.is_null())
        .then(pl.lit("first"))
        .when(previous == 0)
        .then(pl.lit("after a miss"))
        .when(gap >= (cal.idle_seconds or float("inf")))
        .then(pl.lit("after an idle read"))
        .otherwise(pl.lit("after a read"))
    )
    prompt = float(test["reported_prompt_tokens"].sum())
    error = 100 * (pl.col("expected_cached_tokens").sum() - pl.col("reported_cached_tokens").sum()) / prompt
    by = [
        mine.with_columns(group=pl.concat_str(pl.lit(f"{key}: "), column))
        .group_by("group")
        .agg(calls=pl.len(), error_pp=error, misses=(pl.col("reported_cached_tokens") == 0).sum())
        for key, column in (("state", state), ("session", pl.col("session").str.slice(0, 8)))
    ]
    return pl.concat(by).sort("group")


def model_switch_share(paths: list[str]) -> float:
    """The share of the predicted lost tokens named ``model_switch`` over the logs at ``paths``."""
    from promptkit.analysis.api import analyze

    lost = switched = 0
    for p in paths:
        if Path(p).exists():
            causes = explain_causes(analyze(p))
            lost += int(causes["uncached_tokens"].sum())
            switched += int(causes["lost_model_switch"].sum())
    return switched / lost if lost else 0.0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help="folders of Gemini logs the calibration is fitted on")
    parser.add_argument("--held-out", nargs="*", default=[], help="folders whose runs are predicted")
    args = parser.parse_args(argv)
    accuracy = _accuracy_module()
    train, test = _frames(accuracy, args.paths), _frames(accuracy, args.held_out)
    if train is None and test is None:
        print("no Gemini log folder given (or none is present): nothing measured")
        return 0
    every = pl.concat([f for f in (train, test) if f is not None], how="vertical_relaxed")
    row = accuracy.accuracy_row("gemini", every, "Gemini (every run)")
    print(row)
    print("| Gemini CLI and OpenRouter (`gemini`, measured) | " + accuracy.doc_cells(row))
    runs = {s: every.filter(pl.col("session") == s) for s in every["session"].unique().sort()}
    pooled = leave_one_run_out(runs, "gemini").filter(pl.col("run") == "(all)").row(0, named=True)
    print(f"leave-one-run-out over {len(runs)} runs: error {pooled['error_pp']:+.2f} pp")
    if train is not None and test is not None:
        print("held out:", held_out(train, test))
        with pl.Config(tbl_rows=40):
            print(residuals(train, test))
    mechanisms(accuracy, every)
    print(f"lost tokens named model_switch: {model_switch_share(args.paths + args.held_out):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
