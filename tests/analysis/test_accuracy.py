"""Per-provider accuracy on the real logs that report usage: the table of docs/reference/accuracy.md.

Run as a script to print it (Claude Code project folders given on the command line add a Claude Code
row, measured on transcripts this repository does not hold)::

    python tests/analysis/test_accuracy.py
    python tests/analysis/test_accuracy.py p-258c7280 p-4d5611e5 p-8463c716 p-ae4a77f8 p-fa812bfe

Per provider, over the calls whose log reports usage (token-weighted ratios use the reported prompts).
Ruler mode (:mod:`promptkit.analysis.ruler`) gives every position in the provider's units: the prompt of a
call with usage *is* its reported prompt, so comparing the analysed prompt with the reported one says
nothing. What the local tokenizer gets right is measured with ruler mode off instead:

- ``exact_share``: the share of calls whose **local** count (the profile's tokenizer and render, ruler
  mode off: the profile with ``exact_tokenizer=True``) equals the reported prompt tokens;
- ``placed_exact``: the share of calls whose predicted cached point is placed exactly in the provider's
  units (``position_basis == "exact"``: on an anchor, or the tokenizer is the provider's);
- ``upper_below``: the share of calls where the upper bound (``predicted_cached_tokens``, in the
  provider's units) is below the reported cached tokens (it must stay under 5%);
- ``upper_error_pp``: 100 × (Σ upper − Σ reported cached) / Σ reported prompt;
- ``expected_error_pp``: the same for the calibrated expectation, fitted with each run held out
  (:func:`~promptkit.analysis.calibration.leave_one_run_out`: the honest figure for runs not seen);
  ``bundled_error_pp`` with the calibration bundled for the provider (fitted on all its runs here).
  Only a best-effort provider (the profile's ``best_effort``) has a calibration;
- ``mae_tokens``: the mean |upper − reported cached| per call, and ``expected_mae_tokens`` for the
  expectation.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import attrs
import polars as pl
import pytest

from promptkit.analysis.api import analyze
from promptkit.analysis.calibration import (
    default_calibration,
    expected_cached,
    fit_calibration,
    leave_one_run_out,
)
from promptkit.analysis.causes import explain_causes
from promptkit.providers.registry import get_provider

REAL = Path("fixtures/real-logs")
#: provider -> the runs of fixtures/real-logs that hold its calls
RUNS: dict[str, Path] = {"deepseek": REAL / "deepseek", "gemini": REAL / "gemini"}
#: two real Gemini CLI recordings (2.5 Pro and 3 Flash)
CLI = Path("fixtures/gemini-cli-real")


@functools.cache
def calls_with_usage(path: str, provider: str) -> pl.DataFrame:
    """The calls with usage of the logs at ``path``, analyzed with the defaults and the provider
    recognised from the log (no ``provider=``; asserted to be ``provider``), positions in the
    provider's units; ``local_prompt_tokens`` is each call's local count (ruler mode off)."""
    result = analyze(path)
    assert result.provider == provider and not result.provider_assumed, (result.provider, result.notes)
    local = analyze(
        path, provider=attrs.evolve(get_provider(provider), exact_tokenizer=True), view=result.view
    )
    counts = local.requests.select("session", "index", pl.col("prompt_tokens").alias("local_prompt_tokens"))
    frame = result.requests.join(counts, on=["session", "index"], how="left")
    return frame.filter(pl.col("reported_cached_tokens").is_not_null())


def provider_frame(provider: str) -> pl.DataFrame:
    """The calls with usage of ``provider``'s runs in ``fixtures/real-logs``."""
    return calls_with_usage(str(RUNS[provider]), provider)


def accuracy_row(
    provider: str, frame: pl.DataFrame | None = None, label: str | None = None
) -> dict[str, object]:
    """One row of the table (see the module docstring), over ``frame`` (by default the provider's runs)."""
    frame = provider_frame(provider) if frame is None else frame
    reported_prompt = frame["reported_prompt_tokens"].sum()
    reported_cached = frame["reported_cached_tokens"].sum()
    upper = frame["predicted_cached_tokens"]
    expected_error = bundled_error = expected_mae = None
    if get_provider(provider).best_effort:
        runs = {s: frame.filter(pl.col("session") == s) for s in frame["session"].unique().sort()}
        pooled = leave_one_run_out(runs, provider).filter(pl.col("run") == "(all)").row(0, named=True)
        expected_error = float(pooled["error_pp"])
        expected = pl.concat(
            [
                expected_cached(
                    run, fit_calibration([r for n, r in runs.items() if n != name], provider=provider)
                )
                for name, run in runs.items()
            ]
        )
        joined = frame.join(expected, on=["session", "index"])
        expected_mae = float(
            (joined["expected_cached_tokens"] - joined["reported_cached_tokens"]).abs().mean() or 0.0
        )
        bundled = default_calibration(provider)
        if bundled is not None:
            mine = frame.join(expected_cached(frame, bundled), on=["session", "index"])
            bundled_error = 100 * (mine["expected_cached_tokens"].sum() - reported_cached) / reported_prompt
    return {
        "provider": label or provider,
        "calls": frame.height,
        "exact_share": float((frame["local_prompt_tokens"] == frame["reported_prompt_tokens"]).mean() or 0.0),
        "placed_exact": float((frame["position_basis"] == "exact").mean() or 0.0),
        "reported_hit_ratio": reported_cached / reported_prompt,
        "upper_below": float((upper < frame["reported_cached_tokens"]).mean() or 0.0),
        "upper_error_pp": 100 * (upper.sum() - reported_cached) / reported_prompt,
        "expected_error_pp": expected_error,
        "bundled_error_pp": bundled_error,
        "mae_tokens": float((upper - frame["reported_cached_tokens"]).abs().mean() or 0.0),
        "expected_mae_tokens": expected_mae,
    }


def accuracy_table(claude_code: list[str] | None = None) -> pl.DataFrame:
    """The table; ``claude_code``: Claude Code project folders (one analysis each) pooled into a row."""
    rows = [accuracy_row(p) for p in RUNS]
    if claude_code:
        frame = pl.concat([calls_with_usage(p, "anthropic") for p in claude_code], how="vertical_relaxed")
        rows.append(accuracy_row("anthropic", frame, f"anthropic (Claude Code, {len(claude_code)} projects)"))
    return pl.DataFrame(rows)


def _pp(value: object) -> str:
    return f"{float(value):+.2f} pp".replace("-", "\u2212")  # type: ignore[arg-type]


def doc_cells(row: dict[str, object]) -> str:
    """The row's figures as docs/reference/accuracy.md shows them (after the provider's label)."""
    cells = [
        f"{row['calls']}",
        f"{float(row['exact_share']):.0%}",  # type: ignore[arg-type]
        f"{float(row['placed_exact']):.0%}",  # type: ignore[arg-type]
        f"{float(row['reported_hit_ratio']):.3f}",  # type: ignore[arg-type]
        f"{float(row['upper_below']):.1%} of calls",  # type: ignore[arg-type]
        _pp(row["upper_error_pp"]),
        _pp(row["expected_error_pp"]),
        _pp(row["bundled_error_pp"]),
        f"{float(row['mae_tokens']):,.0f} tokens",  # type: ignore[arg-type]
        f"{float(row['expected_mae_tokens']):,.0f} tokens",  # type: ignore[arg-type]
    ]
    return " | ".join(cells) + " |"


@pytest.mark.slow
def test_the_docs_table_shows_these_figures() -> None:
    page = Path("docs/reference/accuracy.md").read_text(encoding="utf-8")
    for provider, label in (
        ("deepseek", "| DeepSeek (`deepseek`, 3 runs) | "),
        ("gemini", "| Gemini 3 Pro via OpenRouter (`gemini`, 2 runs) | "),
    ):
        assert label + doc_cells(accuracy_row(provider)) in page, (
            provider,
            doc_cells(accuracy_row(provider)),
        )
    readme = " ".join(Path("README.md").read_text(encoding="utf-8").split())
    gemini, frame = accuracy_row("gemini"), provider_frame("gemini")
    above = frame.height - round(float(gemini["upper_below"]) * frame.height)  # type: ignore[arg-type]
    assert f"at or above the reported reads on {above} of {frame.height} calls" in readme
    assert f"lands {abs(float(gemini['expected_error_pp'])):.1f} pp from the reported" in readme  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ Gemini


def test_gemini_shortfalls_are_provider_misses_and_nothing_is_unexplained() -> None:
    # Gemini's implicit cache is best effort ("no cost saving guarantee"): a read short of what the
    # content allows is a provider_miss, never a head_changed / history_rewritten, and every lost
    # token has a cause
    result = analyze(RUNS["gemini"])
    assert result.requests["best_effort_cache"].all()
    causes = explain_causes(result)
    assert causes["lost_provider_miss"].sum() > 0
    assert causes["lost_head_changed"].sum() == causes["lost_history_rewritten"].sum() == 0
    assert causes["lost_unexplained"].sum() == 0


def test_gemini_calls_are_recognised_from_the_routed_model_name() -> None:
    frame = provider_frame("gemini")  # asserts the provider is recognised, not assumed
    assert frame.height == 95
    assert set(frame["model"].unique()) == {"gemini-3-pro-preview"}  # the priced name, router prefix off


def test_gemini_upper_bound_is_below_the_report_on_at_most_5_percent_of_calls() -> None:
    row = accuracy_row("gemini")
    assert row["upper_below"] <= 0.05, row  # achieved: 1 of 95 calls (1.1%)


def test_gemini_calibrated_expectation_is_near_the_reported_aggregate() -> None:
    # each of the two runs predicted by a fit on the other alone (30 or 65 calls: three miss rates and a
    # stale rate from one run); achieved -2.18 pp. The 1.5 pp goal is measured on 19 runs and on other
    # users' sessions by benchmarks/gemini_accuracy.py (-0.82 pp each run held out, -1.43 pp held out)
    row = accuracy_row("gemini")
    assert abs(float(row["expected_error_pp"])) <= 2.5, row  # type: ignore[arg-type]


def test_the_bundled_gemini_calibration_holds_the_fit_on_these_runs_and_the_cli_recordings() -> None:
    # fitted by `promptkit calibrate` (ruler mode on) on these runs, the two recordings of
    # fixtures/gemini-cli-real and 15 Gemini CLI sessions this repository does not hold
    # (benchmarks/gemini_accuracy.py): each run here is one of its runs
    bundled = default_calibration("gemini")
    assert bundled is not None and bundled.fitted_on["runs"] == 19
    remaining = list(bundled.run_counts)
    for counts in fit_calibration(provider_frame("gemini"), provider="gemini").run_counts:
        remaining.remove(counts)  # the CLI recordings here show no call that tells fresh from stale
    row = accuracy_row("gemini")
    # in-sample on these two runs before the CLI recordings joined the fit (-1.69 pp); now fitted on 19
    assert abs(float(row["bundled_error_pp"])) <= 3.0, row  # type: ignore[arg-type]  # achieved: +2.06 pp


def cli_frame() -> pl.DataFrame:
    """The calls with usage of the two real Gemini CLI recordings in ``fixtures/gemini-cli-real``."""
    return calls_with_usage(str(CLI), "gemini")


def test_gemini_cli_recordings_hold_the_targets_under_the_bundled_calibration() -> None:
    frame = cli_frame()
    below = float((frame["predicted_cached_tokens"] < frame["reported_cached_tokens"]).mean() or 0.0)
    assert below <= 0.05, below  # the first calls read their head from outside the log
    bundled = default_calibration("gemini")
    assert bundled is not None
    mine = frame.join(expected_cached(frame, bundled), on=["session", "index"])
    error = 100 * (mine["expected_cached_tokens"].sum() - frame["reported_cached_tokens"].sum())
    error /= frame["reported_prompt_tokens"].sum()
    # achieved -3.70 pp (-1.99 before misses had their own rates): the 45-call recording never misses
    # after a read, while the bundled rate of such misses is 3.9% (-3.1 pp of it); the 1.5 pp goal holds
    # over the 19 runs (benchmarks/gemini_accuracy.py: -0.08 pp bundled, -0.82 pp each run held out)
    assert abs(error) <= 4.0, error


def consecutive(frame: pl.DataFrame) -> pl.DataFrame:
    """The calls of ``frame`` after a read of their session (the previous call with usage read more than
    0), with ``previous_prompt`` and ``previous_output`` (that call's reported prompt and completion,
    thoughts included) and ``gap`` (seconds since it)."""
    before = pl.col("session")
    return (
        frame.sort("session", "index")
        .with_columns(
            previous_prompt=pl.col("reported_prompt_tokens").shift(1).over(before),
            previous_output=pl.col("reported_completion_tokens").shift(1).over(before),
            previous_read=pl.col("reported_cached_tokens").shift(1).over(before),
            gap=pl.col("timestamp") - pl.col("timestamp").shift(1).over(before),
        )
        .filter(pl.col("previous_read") > 0)
    )


def reads_past_the_previous_prompt(frame: pl.DataFrame) -> dict[str, float]:
    """Does the cache keep the answer with its prompt (as OpenAI's does)? Over the calls after a read:
    the share whose read passes the previous call's prompt (``past``), the share of those that stay
    within that prompt plus its output (``within_answer``), and the median shortfall of the reads
    under the previous prompt (``median_short``)."""
    calls = consecutive(frame)
    past = calls.filter(pl.col("reported_cached_tokens") > pl.col("previous_prompt"))
    within = past.filter(
        pl.col("reported_cached_tokens") <= pl.col("previous_prompt") + pl.col("previous_output")
    )
    short = calls["previous_prompt"] - calls["reported_cached_tokens"]
    return {
        "calls": float(calls.height),
        "past": past.height / calls.height if calls.height else 0.0,
        "within_answer": within.height / past.height if past.height else 0.0,
        "median_short": float(short.median() or 0.0),  # type: ignore[arg-type]
    }


def block_share(frame: pl.DataFrame, unit: int, slack: float = 0.04) -> float:
    """The share of positive reads that sit just under a whole number of ``unit`` tokens: ``k * unit``
    minus at most ``slack * k * unit`` (and at most a quarter of a unit), for the smallest ``k`` whose
    blocks hold the read. Where reads ignore the unit, about ``slack * k`` (at most 1/4) land there."""
    reads = frame.filter(pl.col("reported_cached_tokens") > 0)["reported_cached_tokens"]
    k = (reads / unit).ceil()
    short = k * unit - reads
    return float((short <= (slack * k).clip(upper_bound=0.25) * unit).mean() or 0.0)


def test_gemini_reads_stop_at_the_previous_prompt_the_answer_is_not_cached() -> None:
    # OpenAI's cache keeps the answer (reads pass the previous prompt on 40-55% of Codex calls); on the
    # Gemini runs and CLI recordings here a read passes the previous prompt on 1 of 132 calls after a
    # read (django #26, within that prompt + its answer) and falls a median 1,444 tokens short of it
    # (over the 19 runs of benchmarks/gemini_accuracy.py: 6 of 1,084), so the Gemini profile bounds a
    # call by the prompt before it, not by that prompt and its answer
    frame = pl.concat([provider_frame("gemini"), cli_frame()], how="vertical_relaxed")
    facts = reads_past_the_previous_prompt(frame)
    assert facts["calls"] > 90 and facts["past"] <= 0.02 and facts["median_short"] > 0, facts
    calls = consecutive(frame).filter(pl.col("reported_cached_tokens") > 0)
    # the bound of a call that extends the previous one is that call's prompt, with no answer added
    extends = calls.filter(pl.col("predicted_cached_tokens") >= pl.col("previous_prompt"))
    assert extends.height > 0.8 * calls.height
    assert (extends["predicted_cached_tokens"] == extends["previous_prompt"]).all()


def test_gemini_3_pro_reads_through_openrouter_sit_under_whole_2048_token_blocks() -> None:
    # the reads of the two OpenRouter runs are k blocks of 2,048 tokens of Google's own count, reported
    # at 0.97-0.98 of it (2,006, 3,979, 5,968, 8,035, ...); units unrelated to 2,048 find reads where
    # chance puts them, and so does 2,048 on the Gemini CLI recordings (no block there): undocumented,
    # so the profile has no unit and the calibration absorbs it (docs/concepts/cache-models.md)
    frame = provider_frame("gemini")
    assert block_share(frame, 2048) > 0.9
    assert max(block_share(frame, u) for u in (1300, 1536, 1700, 2300, 2600)) < 0.3
    assert block_share(cli_frame(), 2048) < 0.3


def test_gemini_local_counts_are_estimates_and_the_reported_prompt_is_the_prompt() -> None:
    # Gemini's tokenizer is not public: the local count (ruler mode off) is almost never the reported
    # one, while the analysed prompt of every call with usage is its reported prompt (ruler mode)
    frame = provider_frame("gemini")
    assert float(accuracy_row("gemini")["exact_share"]) < 0.05  # type: ignore[arg-type]
    assert (frame["prompt_tokens"] == frame["reported_prompt_tokens"]).all()
    assert (frame["local_prompt_tokens"] != frame["reported_prompt_tokens"]).mean() > 0.95  # type: ignore[operator]


@pytest.mark.slow
def test_deepseek_local_counts_are_the_reported_ones() -> None:
    row = accuracy_row("deepseek")
    assert row["exact_share"] == 1.0 and row["placed_exact"] == 1.0, row


def test_deepseek_rules_are_not_what_gemini_gets() -> None:
    # the upper bound is not rounded to DeepSeek's 64-token units (any prefix length is possible)
    frame = provider_frame("gemini")
    assert (frame["predicted_cached_tokens"] % 64 != 0).any()


def test_a_claude_code_project_gives_a_row_without_a_calibration() -> None:
    # Anthropic's cache is not best effort: no calibrated expectation; the fixture's three calls
    # are placed exactly (each read lands on an anchor)
    frame = calls_with_usage("fixtures/claude-code", "anthropic")
    row = accuracy_row("anthropic", frame)
    assert row["calls"] == frame.height > 0
    assert row["expected_error_pp"] is None and row["bundled_error_pp"] is None
    assert row["placed_exact"] == 1.0


if __name__ == "__main__":  # pragma: no cover
    with pl.Config(tbl_cols=-1, tbl_width_chars=250, float_precision=3):
        print(accuracy_table(sys.argv[1:]))
