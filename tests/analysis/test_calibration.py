"""Tests for promptkit.analysis.calibration: a synthetic provider with a known stale rate is recovered,
the fit keeps a split only when the data supports it, files round-trip, the bundled default loads."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from promptkit.analysis.api import analyze_requests
from promptkit.analysis.calibration import (
    Calibration,
    apply_calibration,
    calibration_events,
    default_calibration,
    expected_cached,
    fit_calibration,
    leave_one_run_out,
    load_calibration,
)
from promptkit.errors import CalibrationError
from promptkit.layout import RequestRecord, Usage
from tests.analysis.test_causes import LONG, TINY, bot, sys, user


def _sessions(n_sessions: int, calls: int, gap: Any, seed: int) -> list[RequestRecord]:
    rng = random.Random(seed)
    records = []
    for s in range(n_sessions):
        messages = [sys(LONG), user(f"task {s}")]
        t = 0.0
        for i in range(calls):
            t += gap(rng)
            records.append(
                RequestRecord({"messages": list(messages)}, session=f"run{s}", index=i, timestamp=t)
            )
            messages += [bot(f"step {i} " * rng.randint(1, 6)), user(f"output {i} " * rng.randint(2, 12))]
    return records


def _synthetic(records: list[RequestRecord], p_of_gap: Any, seed: int) -> list[RequestRecord]:
    """The provider: each call gets the upper bound, or with probability p(gap) what the previous call got."""
    upper = analyze_requests(records, provider="exact", **TINY).requests
    rng = random.Random(seed)
    out, served, last_t = [], {}, {}
    for r, row in zip(records, upper.iter_rows(named=True), strict=True):
        c = row["predicted_cached_tokens"]
        before = served.get(r.session)
        gap = None if before is None else r.timestamp - last_t[r.session]  # type: ignore[operator]
        value = c if before is None or rng.random() >= p_of_gap(gap) else min(before, c)
        served[r.session], last_t[r.session] = value, r.timestamp
        usage = Usage(row["prompt_tokens"], 5, value)
        out.append(
            RequestRecord(r.request, session=r.session, index=r.index, timestamp=r.timestamp, usage=usage)
        )
    return out


def test_fit_recovers_a_known_stale_rate() -> None:
    records = _synthetic(_sessions(20, 16, lambda rng: rng.uniform(2, 6), seed=1), lambda gap: 0.3, seed=2)
    result = analyze_requests(records, provider="exact", **TINY)
    cal = fit_calibration(result)
    assert cal.fitted_on["events"] > 250
    assert cal.stale_probability == pytest.approx(0.3, abs=0.06)
    assert cal.split_on is None  # the rate does not depend on anything: no split kept


def test_fit_keeps_a_split_the_data_supports() -> None:
    gap = lambda rng: 3.0 if rng.random() < 0.4 else 20.0  # noqa: E731
    records = _synthetic(
        _sessions(20, 16, gap, seed=3), lambda g: 0.6 if g is not None and g >= 10 else 0.1, seed=4
    )
    cal = fit_calibration(analyze_requests(records, provider="exact", **TINY))
    assert cal.split_on == "gap_seconds"
    assert cal.stale_probability == pytest.approx(0.1, abs=0.07)
    assert cal.stale_probability_above == pytest.approx(0.6, abs=0.08)


def test_expectation_tracks_the_reported_aggregate_on_held_out_runs() -> None:
    records = _synthetic(_sessions(6, 20, lambda rng: rng.uniform(2, 6), seed=5), lambda gap: 0.3, seed=6)
    result = analyze_requests(records, provider="exact", **TINY)
    runs = {
        s: result.requests.filter(pl.col("session") == s) for s in result.requests["session"].unique().sort()
    }
    table = leave_one_run_out(runs)
    assert table["run"].to_list()[-1] == "(all)"
    everything = table.row(-1, named=True)
    upper_error = 100 * (everything["upper_hit_ratio"] - everything["reported_hit_ratio"])
    assert abs(everything["error_pp"]) < abs(upper_error) / 2  # far closer than the upper bound


def test_expected_cached_is_between_the_stale_value_and_the_bound() -> None:
    df = pl.DataFrame(
        {
            "session": ["s"] * 3,
            "index": [0, 1, 2],
            "timestamp": [0.0, 1.0, 2.0],
            "predicted_cached_tokens": [0, 100, 300],
        }
    )
    assert expected_cached(df, Calibration("x", 0.5))["expected_cached_tokens"].to_list() == [
        0.0,
        50.0,
        175.0,
    ]
    assert expected_cached(df, Calibration("x", 0.0))["expected_cached_tokens"].to_list() == [
        0.0,
        100.0,
        300.0,
    ]


def test_events_classify_fresh_stale_same_other() -> None:
    df = pl.DataFrame(
        {
            "session": ["s"] * 5, "index": list(range(5)), "timestamp": [0.0, 1, 2, 3, 4],
            "predicted_cached_tokens": [0, 100, 200, 100, 300], "reported_cached_tokens": [0, 100, 100, 100, 250],
        }
    )  # fmt: skip
    assert calibration_events(df)["outcome"].to_list() == ["fresh", "stale", "same", "other"]


def test_no_usage_is_an_error() -> None:
    df = pl.DataFrame(
        {
            "session": ["s", "s"],
            "index": [0, 1],
            "predicted_cached_tokens": [0, 10],
            "reported_cached_tokens": [None, None],
        },
        schema_overrides={"reported_cached_tokens": pl.Int64},
    )
    with pytest.raises(CalibrationError, match="no request can be told"):
        fit_calibration(df, provider="x")


def test_save_load_round_trip_and_errors(tmp_path: Path) -> None:
    cal = Calibration("deepseek", 0.2, "gap_seconds", 10.0, 0.5, {"runs": 3}, run_counts=[(3, 4), (0, 9)])
    path = cal.save(tmp_path / "cal.json")
    assert load_calibration(path) == cal
    assert load_calibration(path).run_counts == ((3, 4), (0, 9))
    (tmp_path / "bad.json").write_text(json.dumps({"provider": "x", "stale_probability": 1.5}))
    with pytest.raises(CalibrationError, match=r"bad\.json: calibration stale_probability"):
        load_calibration(tmp_path / "bad.json")
    (tmp_path / "missing.json").write_text(json.dumps({"provider": "x"}))
    with pytest.raises(CalibrationError, match="missing field 'stale_probability'"):
        load_calibration(tmp_path / "missing.json")


def test_bundled_deepseek_default_matches_a_fit_on_the_real_logs() -> None:
    from promptkit.analysis.api import analyze

    bundled = default_calibration("deepseek")
    assert bundled is not None
    fitted = fit_calibration(analyze("fixtures/real-logs/deepseek", provider="deepseek"))
    assert bundled.stale_probability == pytest.approx(fitted.stale_probability)
    assert default_calibration("exact") is None


def test_apply_adds_the_column_and_a_note() -> None:
    result = analyze_requests([{"messages": [sys(LONG), user("hi")]}], provider="exact", **TINY)
    applied = apply_calibration(result, Calibration("exact", 0.1))
    assert applied.requests["expected_cached_tokens"].to_list() == [0.0]
    assert any("p(stale) = 0.100" in n for n in applied.notes)


def _two_kinds_of_run(seed: int) -> pl.DataFrame:
    """Eight runs: half whose calls miss the newest write 60% of the time, half that never do."""
    records = _sessions(8, 24, lambda rng: rng.uniform(2, 6), seed=seed)
    stale_runs = {f"run{s}" for s in range(0, 8, 2)}
    rng = random.Random(seed + 1)
    by_run: list[RequestRecord] = []
    for s in sorted({r.session for r in records}):
        p = 0.6 if s in stale_runs else 0.0
        by_run += _synthetic([r for r in records if r.session == s], lambda gap, p=p: p, rng.randrange(10**6))
    return analyze_requests(by_run, provider="exact", **TINY).requests


def test_each_run_s_rate_is_learnt_from_its_own_earlier_usage() -> None:
    frame = _two_kinds_of_run(seed=21)
    runs = {s: frame.filter(pl.col("session") == s) for s in frame["session"].unique().sort()}
    table = leave_one_run_out(runs).filter(pl.col("run") != "(all)")
    learnt = table["error_pp"].abs().mean()
    prior = table["prior_error_pp"].abs().mean()
    assert learnt < prior / 2  # the forecast follows each run; the population rate cannot
    fit = fit_calibration(frame)
    assert fit.learns and len(fit.run_counts) == 8
    assert {s > 0 for s, _ in fit.run_counts} == {True, False}


def test_the_forecast_never_uses_the_reported_figure_of_the_call_it_predicts() -> None:
    frame = _two_kinds_of_run(seed=23).filter(pl.col("session") == "run0")
    cal = fit_calibration(_two_kinds_of_run(seed=24))
    base = expected_cached(frame, cal)["expected_cached_tokens"].to_list()
    for n in (3, 10, 17):
        changed = frame.with_columns(
            pl.when(pl.col("index") == n)
            .then(pl.col("predicted_cached_tokens"))
            .otherwise(pl.col("reported_cached_tokens"))
            .alias("reported_cached_tokens")
        )
        after = expected_cached(changed, cal)["expected_cached_tokens"].to_list()
        assert after[: n + 1] == base[: n + 1]  # call n and before: unchanged


def test_learn_false_ignores_every_reported_figure() -> None:
    frame = _two_kinds_of_run(seed=25)
    cal = fit_calibration(frame)
    blind = expected_cached(frame, cal, learn=False)
    no_usage = frame.with_columns(pl.lit(None, dtype=pl.Int64).alias("reported_cached_tokens"))
    assert blind.equals(expected_cached(no_usage, cal))
    assert not blind.equals(expected_cached(frame, cal))


def test_a_version_1_file_is_the_fixed_rate_model(tmp_path: Path) -> None:
    path = tmp_path / "v1.json"
    path.write_text(json.dumps({"format": 1, "provider": "deepseek", "stale_probability": 0.3}))
    cal = load_calibration(path)
    assert not cal.learns and cal.run_counts == ()
    frame = pl.DataFrame(
        {"session": ["s"] * 3, "index": [0, 1, 2], "predicted_cached_tokens": [0, 100, 200],
         "reported_cached_tokens": [0, 0, 0]}
    )  # fmt: skip
    # fixed rate: the reported stale outcome teaches it nothing, p stays 0.3
    assert expected_cached(frame, cal)["expected_cached_tokens"].to_list() == pytest.approx(
        [0.0, 70.0, 140.0]
    )
    (tmp_path / "bad.json").write_text(
        json.dumps({"provider": "x", "stale_probability": 0.3, "run_counts": [[1, -2]]})
    )
    with pytest.raises(CalibrationError, match=r"bad\.json: calibration run_counts"):
        load_calibration(tmp_path / "bad.json")


def test_a_call_exactly_at_the_threshold_uses_the_rate_above() -> None:
    cal = Calibration("x", 0.1, "gap_seconds", 10.0, 0.6)
    assert cal.probability(gap_seconds=10.0) == 0.6
    assert cal.probability(gap_seconds=9.999) == 0.1
    assert cal.probability(gap_seconds=None) == 0.1
    by_write = Calibration("x", 0.2, "write_tokens", 500.0, 0.7)
    assert by_write.probability(gap_seconds=99.0, write_tokens=500) == 0.7
    assert by_write.probability(gap_seconds=99.0, write_tokens=499) == 0.2


def _one_run(stale_above: int, stale_below: int, calls: int = 40) -> pl.DataFrame:
    """One run of ``calls`` scored calls: the even ones 20 s after the previous, the odd ones 3 s; every
    write adds 100 tokens (so only the gap can split), ``stale_above`` / ``stale_below`` of the long- /
    short-gap calls got the older entry."""
    rows = [{"session": "r", "index": 0, "timestamp": 0.0, "predicted_cached_tokens": 100, "reported_cached_tokens": 100}]
    t, reported, left = 0.0, 100, {True: stale_above, False: stale_below}
    for i in range(1, calls + 1):
        long_gap = i % 2 == 0
        t += 20.0 if long_gap else 3.0
        upper = reported + 100
        stale = left[long_gap] > 0
        left[long_gap] -= stale
        reported = reported if stale else upper
        rows.append({"session": "r", "index": i, "timestamp": t, "predicted_cached_tokens": upper,
                     "reported_cached_tokens": reported})  # fmt: skip
    return pl.DataFrame(rows)


def test_a_split_must_pass_the_test_corrected_for_every_feature_tried() -> None:
    # 8 of 20 long-gap calls stale against 2 of 20 short: chi-square 4.68, past the 5% value of one
    # test (3.84) but not the Bonferroni value of two features at 5% family-wise (5.02)
    frame = _one_run(8, 2)
    cal = fit_calibration(frame, provider="x")
    assert cal.fitted_on["split_gap_seconds_chi2"] == pytest.approx(4.68, abs=0.01)
    assert "split_write_tokens_chi2" not in cal.fitted_on  # every write the same: no test possible
    assert cal.split_on is None
    # the same data with the gap the only feature tried: 4.68 > 3.84, the split is kept
    alone = fit_calibration(frame, provider="x", splits=("gap_seconds",))
    assert (alone.split_on, alone.threshold) == ("gap_seconds", 11.5)
    assert alone.probability(gap_seconds=20.0) > alone.probability(gap_seconds=3.0)


def test_a_split_is_tried_only_on_eight_calls_or_more() -> None:
    # 6 scored calls (3 long gaps, all stale; 3 short, none): too few to test a split, whatever they
    # show; 8: tested (and its statistic noted)
    few = fit_calibration(_one_run(3, 0, calls=6), provider="x")
    assert "split_gap_seconds_chi2" not in few.fitted_on and few.split_on is None
    enough = fit_calibration(_one_run(4, 0, calls=8), provider="x")
    assert "split_gap_seconds_chi2" in enough.fitted_on


# ---------------------------------------------------------------- reads without a documented unit


def _frame(rows: list[tuple[str, int, int, int]]) -> pl.DataFrame:
    """``(session, index, predicted, reported)`` rows as a frame of calls with usage."""
    return pl.DataFrame(
        rows,
        schema={"session": pl.String, "index": pl.Int64, "predicted_cached_tokens": pl.Int64,
                "reported_cached_tokens": pl.Int64},
        orient="row",
    ).with_columns(pl.col("index").cast(pl.Float64).alias("timestamp"))  # fmt: skip


def test_the_reads_rule_follows_the_provider_s_documented_unit() -> None:
    from promptkit.analysis.calibration import reads_rule

    # Gemini and the open models document no unit and are best effort; DeepSeek (64) and OpenAI (128)
    # document one; Anthropic is not best effort
    assert [reads_rule(p) for p in ("gemini", "kimi", "deepseek", "openai", "anthropic", None)] == [
        "nearest", "nearest", "exact", "exact", "exact", "exact",
    ]  # fmt: skip


def test_nearest_reads_tell_fresh_from_stale_by_distance_and_a_zero_read_is_a_miss() -> None:
    frame = _frame([("s", 0, 900, 880), ("s", 1, 2000, 1950), ("s", 2, 3000, 2000), ("s", 3, 4000, 0)])
    exact = calibration_events(frame)["outcome"].to_list()
    nearest = calibration_events(frame, "nearest")["outcome"].to_list()
    assert exact == ["other", "other", "other"]
    # 1950 is nearer 2000 (fresh) than 880 (stale); 2000 is nearer the stale 1950 than 3000
    assert nearest == ["fresh", "stale", "miss"]


def test_a_miss_leaves_the_session_s_entry_as_it_was() -> None:
    # call 2 reads nothing: the stale value of call 3 is call 1's read (5000), not 0
    frame = _frame([("s", 0, 900, 900), ("s", 1, 5000, 5000), ("s", 2, 6000, 0), ("s", 3, 7000, 5200)])
    assert calibration_events(frame, "nearest")["stale_value"].to_list() == [900, 5000, 5000]
    assert calibration_events(frame)["stale_value"].to_list() == [900, 5000, 0]
    cal = Calibration("gemini", 0.5, reads="nearest")
    got = expected_cached(frame, cal)["expected_cached_tokens"].to_list()
    assert got[3] == pytest.approx(0.5 * 7000 + 0.5 * 5000)
    # the exact rule keeps the stale state's fallback at what call 2 read
    assert expected_cached(frame, Calibration("gemini", 0.5))["expected_cached_tokens"][3] == 3500


def test_the_miss_rate_of_the_call_s_state_scales_its_expectation() -> None:
    frame = _frame([("s", 0, 1000, 0), ("s", 1, 2000, 1900), ("s", 2, 3000, 2900), ("s", 3, 0, 0)])
    rates = {"first": 0.8, "after_miss": 0.3, "after_read": 0.1}
    cal = Calibration("gemini", 0.0, reads="nearest", miss_rates=rates)
    got = expected_cached(frame, cal)["expected_cached_tokens"].to_list()
    # first call: its bound x (1 - 0.8); after a miss: x 0.7; after a read: x 0.9 (a 0 bound stays 0)
    assert got == pytest.approx([200.0, 1400.0, 2700.0, 0.0])


def test_miss_rates_count_each_state_with_a_jeffreys_prior() -> None:
    from promptkit.analysis.calibration import miss_rates

    frame = _frame(
        [("a", 0, 900, 0), ("a", 1, 1000, 0), ("a", 2, 1200, 1100), ("a", 3, 1300, 1250), ("b", 0, 0, 0),
         ("b", 1, 1000, 950)]
    )  # fmt: skip
    # first: 1 miss of 1 (b's first call has a 0 bound: not counted); after a miss: 1 of 2 (a1, a2);
    # after a read: 0 of 2 (a3, and b1 after b0's 0-bound read)
    assert miss_rates(frame) == {"first": 1.5 / 2, "after_miss": 1.5 / 3, "after_read": 0.5 / 3}


def test_a_gemini_fit_uses_nearest_reads_misses_and_no_write_size_split() -> None:
    rows = []
    for s in range(6):
        for i in range(12):  # the bound grows by 1,000 a call; reads alternate fresh-ish and stale
            upper = 1000 * (i + 1)
            rows.append((f"r{s}", i, upper, 0 if i == 0 else upper - 30 if i % 2 else upper - 1000))
    frame = _frame(rows)
    cal = fit_calibration(frame, provider="gemini")
    assert cal.reads == "nearest" and set(cal.miss_rates) == {"first", "after_miss", "after_read"}
    assert cal.fitted_on["stale"] > 0 and cal.fitted_on["fresh"] > 0
    assert "split_write_tokens_chi2" not in cal.fitted_on
    with pytest.raises(CalibrationError):  # no read equals either outcome exactly
        fit_calibration(frame, provider="deepseek")


def test_reads_and_miss_rates_round_trip_and_are_checked(tmp_path: Path) -> None:
    cal = Calibration("gemini", 0.6, reads="nearest", miss_rates={"first": 0.9, "after_read": 0.05})
    assert load_calibration(cal.save(tmp_path / "c.json")) == cal
    with pytest.raises(CalibrationError, match="reads"):
        Calibration.from_json({"provider": "x", "stale_probability": 0.1, "reads": "fuzzy"})
    with pytest.raises(CalibrationError, match="miss_rates"):
        Calibration("x", 0.1, miss_rates={"second": 0.5})
    with pytest.raises(CalibrationError, match="miss_rates"):
        Calibration("x", 0.1, miss_rates={"first": 1.5})


def test_the_bundled_gemini_calibration_reads_by_the_nearer_outcome() -> None:
    cal = default_calibration("gemini")
    assert cal is not None and cal.reads == "nearest" and cal.split_on != "write_tokens"
    assert cal.miss_rates["first"] > cal.miss_rates["after_miss"] > cal.miss_rates["after_read"]


def _idle_frame(gaps_and_misses: list[tuple[float, bool]]) -> pl.DataFrame:
    """One session per pair: a first read, then a call ``gap`` seconds later that misses or reads."""
    rows = []
    for i, (gap, miss) in enumerate(gaps_and_misses):
        rows.append((f"s{i}", 0, 0.0, 1000, 900))
        rows.append((f"s{i}", 1, gap, 2000, 0 if miss else 1900))
    return pl.DataFrame(
        rows,
        schema={"session": pl.String, "index": pl.Int64, "timestamp": pl.Float64,
                "predicted_cached_tokens": pl.Int64, "reported_cached_tokens": pl.Int64},
        orient="row",
    )  # fmt: skip


def test_the_idle_gap_is_fitted_where_misses_after_a_read_jump() -> None:
    from promptkit.analysis.calibration import miss_rates

    # after a read: 1 miss in 40 calls within 20 s, 12 in 20 calls 400 s or more later
    calls = [(5.0, i == 0) for i in range(40)] + [(400.0 + i, i < 12) for i in range(20)]
    cal = fit_calibration(_idle_frame(calls), provider="gemini")
    # 30 s to 300 s split these calls alike: the smallest of the tied candidates is kept
    assert cal.idle_seconds == 30.0
    assert cal.miss_rates["after_idle"] == pytest.approx(12.5 / 21)
    assert cal.miss_rates["after_read"] == pytest.approx(1.5 / 41)
    assert miss_rates(_idle_frame(calls)).keys() == {"first", "after_miss", "after_read"}
    # the same misses spread evenly over the gaps: no split is kept
    even = [(5.0, i % 5 == 0) for i in range(40)] + [(400.0, i % 5 == 0) for i in range(20)]
    flat = fit_calibration(_idle_frame(even), provider="gemini")
    assert flat.idle_seconds is None and "after_idle" not in flat.miss_rates


def test_a_call_after_an_idle_gap_takes_the_idle_rate(tmp_path: Path) -> None:
    frame = _idle_frame([(5.0, False), (700.0, False)])
    rates = {"first": 0.0, "after_miss": 0.0, "after_read": 0.1, "after_idle": 0.5}
    cal = Calibration("gemini", 0.0, reads="nearest", miss_rates=rates, idle_seconds=600.0)
    got = expected_cached(frame, cal)["expected_cached_tokens"].to_list()
    assert got == pytest.approx([1000.0, 1800.0, 1000.0, 1000.0])
    at = Calibration("gemini", 0.0, reads="nearest", miss_rates=rates, idle_seconds=700.0)
    assert expected_cached(frame, at)["expected_cached_tokens"][3] == pytest.approx(1000.0)
    assert load_calibration(cal.save(tmp_path / "c.json")) == cal
    with pytest.raises(CalibrationError, match="idle_seconds"):
        Calibration("x", 0.1, idle_seconds=-1.0)


def test_a_first_call_s_miss_leaves_the_head_it_wrote() -> None:
    # the first call reads nothing of its 1,000-token head but writes it: the stale value of the next
    # call is that head, not 0
    frame = _frame([("s", 0, 1000, 0), ("s", 1, 5000, 1000), ("s", 2, 6000, 5900)])
    assert calibration_events(frame, "nearest")["stale_value"].to_list() == [1000, 1000]


def test_fewer_misses_after_long_gaps_are_no_idle_split() -> None:
    # misses after a read are rarer after 400 s than within 5 s: the cache did not age out, no split
    calls = [(5.0, i < 12) for i in range(40)] + [(400.0 + i, False) for i in range(20)]
    cal = fit_calibration(_idle_frame(calls), provider="gemini")
    assert cal.idle_seconds is None and "after_idle" not in cal.miss_rates
