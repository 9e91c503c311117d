"""Tests for promptkit/report/ (metrics, pricing, text): summaries, attribution of losses, prices and cost."""

from __future__ import annotations

import json
import math
import re
from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings, strategies as st

from promptkit import report
from promptkit.report import (
    ALL_SESSIONS,
    COLD_START,
    NEW_TOKENS,
    NO_LAYOUT,
    REQUEST_COLUMNS,
    PriceError,
    ReportInputError,
)
from promptkit.report.pricing import ModelPrice

_SCHEMA: dict[str, Any] = {
    "session": pl.String,
    "index": pl.Int64,
    "timestamp": pl.Float64,
    "prompt_tokens": pl.Int64,
    "prefix_tokens": pl.Int64,
    "predicted_cached_tokens": pl.Int64,
    "hit_ratio": pl.Float64,
    "reported_prompt_tokens": pl.Int64,
    "reported_cached_tokens": pl.Int64,
    "divergence_message": pl.Int64,
    "divergence_role": pl.String,
    "divergence_anchor": pl.String,
    "divergence_key": pl.String,
    "completion_tokens": pl.Int64,
    "reported_completion_tokens": pl.Int64,
}

PRICES = report.resolve_prices()


def make_requests(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """A requests frame in the engine's schema; unspecified fields are derived or null."""
    full = []
    for i, row in enumerate(rows):
        r = {c: None for c in _SCHEMA}
        r.update({"session": "s", "index": i, "timestamp": float(i)})
        r.update(row)
        if r["prefix_tokens"] is None:
            r["prefix_tokens"] = r["predicted_cached_tokens"]
        if r["hit_ratio"] is None and r["prompt_tokens"]:
            r["hit_ratio"] = r["predicted_cached_tokens"] / r["prompt_tokens"]
        full.append(r)
    return pl.DataFrame(full, schema=_SCHEMA, orient="row")


def fake_result(requests: pl.DataFrame, **config: Any) -> SimpleNamespace:
    return SimpleNamespace(
        requests=requests,
        composition=pl.DataFrame(
            schema={
                "session": pl.String,
                "index": pl.Int64,
                "slot": pl.String,
                "key": pl.String,
                "start": pl.Int64,
                "tokens": pl.Int64,
            }
        ),
        problems=pl.DataFrame(schema={"file": pl.String, "line": pl.Int64, "reason": pl.String}),
        **{"provider": "deepseek", **config},
    )


TWO_SESSIONS = [
    {
        "session": "a",
        "index": 0,
        "prompt_tokens": 100,
        "predicted_cached_tokens": 0,
        "reported_prompt_tokens": 110,
        "reported_cached_tokens": 0,
        "completion_tokens": 10,
    },
    {
        "session": "a",
        "index": 1,
        "prompt_tokens": 300,
        "predicted_cached_tokens": 64,
        "reported_prompt_tokens": 310,
        "reported_cached_tokens": 64,
        "completion_tokens": 20,
        "divergence_role": "user",
        "divergence_anchor": "current",
        "divergence_message": 3,
    },
    {
        "session": "a",
        "index": 2,
        "prompt_tokens": 500,
        "predicted_cached_tokens": 256,
        "completion_tokens": 30,
        "divergence_role": "system",
        "divergence_anchor": "turn-context",
        "divergence_key": "memory.recall",
        "divergence_message": 5,
    },
    {
        "session": "b",
        "index": 0,
        "prompt_tokens": 100,
        "predicted_cached_tokens": 64,
        "reported_prompt_tokens": 110,
        "reported_cached_tokens": 64,
        "reported_completion_tokens": 40,
    },
    {
        "session": "b",
        "index": 1,
        "prompt_tokens": 400,
        "predicted_cached_tokens": 64,
        "reported_prompt_tokens": 410,
        "reported_cached_tokens": 128,
        "reported_completion_tokens": 50,
        "divergence_role": "user",
        "divergence_message": 2,
    },
]


# ----------------------------------------------------------------------------------------- hit ratio


def test_hit_ratio_is_token_weighted_per_session_and_overall() -> None:
    frame = make_requests(TWO_SESSIONS)
    table = report.hit_ratio_summary(frame)
    assert table["session"].to_list() == ["a", "b", ALL_SESSIONS]
    for session in ("a", "b"):
        rows = [r for r in TWO_SESSIONS if r["session"] == session]
        got = table.filter(pl.col("session") == session).row(0, named=True)
        assert got["requests"] == len(rows)
        assert got["prompt_tokens"] == sum(r["prompt_tokens"] for r in rows)
        assert got["predicted_cached_tokens"] == sum(r["predicted_cached_tokens"] for r in rows)
        assert got["hit_ratio"] == pytest.approx(got["predicted_cached_tokens"] / got["prompt_tokens"])
        with_usage = [r for r in rows if r.get("reported_cached_tokens") is not None]
        assert got["reported_requests"] == len(with_usage)
        assert got["reported_hit_ratio"] == pytest.approx(
            sum(r["reported_cached_tokens"] for r in with_usage)
            / sum(r["reported_prompt_tokens"] for r in with_usage)
        )
    overall = table.row(2, named=True)
    assert overall["hit_ratio"] == pytest.approx(
        sum(r["predicted_cached_tokens"] for r in TWO_SESSIONS)
        / sum(r["prompt_tokens"] for r in TWO_SESSIONS)
    )
    # token-weighted, not the mean of the per-request ratios
    assert overall["hit_ratio"] != pytest.approx(frame["hit_ratio"].mean())


def test_hit_ratio_accepts_a_result_and_can_omit_the_overall_row() -> None:
    table = report.hit_ratio_summary(fake_result(make_requests(TWO_SESSIONS)), overall=False)
    assert ALL_SESSIONS not in table["session"].to_list()
    assert table.height == 2


def test_hit_ratio_without_usage_leaves_reported_columns_null() -> None:
    table = report.hit_ratio_summary(make_requests([{"prompt_tokens": 10, "predicted_cached_tokens": 5}]))
    row = table.row(0, named=True)
    assert row["reported_requests"] == 0
    assert row["reported_prompt_tokens"] is None and row["reported_hit_ratio"] is None


def test_hit_ratio_of_zero_tokens_is_null_not_a_division_error() -> None:
    table = report.hit_ratio_summary(make_requests([{"prompt_tokens": 0, "predicted_cached_tokens": 0}]))
    assert table["hit_ratio"].to_list() == [None, None]


def test_empty_requests_give_empty_tables() -> None:
    empty = make_requests([])
    assert report.hit_ratio_summary(empty, overall=False).height == 0
    assert report.tokens_lost_by_slot(empty).height == 0
    assert report.predicted_vs_reported_summary(empty).height == 0
    assert report.cost_summary(empty, model="deepseek-chat").height == 0


def test_missing_columns_are_named() -> None:
    with pytest.raises(ReportInputError, match="predicted_cached_tokens"):
        report.hit_ratio_summary(pl.DataFrame({"session": ["a"], "prompt_tokens": [1]}))
    with pytest.raises(ReportInputError, match="AnalysisResult"):
        report.hit_ratio_summary(object())  # type: ignore[arg-type]


_row = st.fixed_dictionaries(
    {
        "session": st.sampled_from(["a", "b", "c"]),
        "prompt_tokens": st.integers(0, 5000),
        "cached_share": st.floats(0, 1),
        "reported": st.booleans(),
        "anchor": st.sampled_from([None, "identity", "context", "turn-context", "history"]),
        "role": st.sampled_from([None, "user", "system", "assistant"]),
        "key": st.sampled_from([None, "k1", "k2"]),
    }
)


def _frame_from(draw_rows: list[dict[str, Any]]) -> pl.DataFrame:
    counters: dict[str, int] = {}
    rows = []
    for r in draw_rows:
        index = counters.get(r["session"], 0)
        counters[r["session"]] = index + 1
        cached = int(r["prompt_tokens"] * r["cached_share"])
        rows.append(
            {
                "session": r["session"],
                "index": index,
                "prompt_tokens": r["prompt_tokens"],
                "predicted_cached_tokens": cached,
                "reported_prompt_tokens": r["prompt_tokens"] + 7 if r["reported"] else None,
                "reported_cached_tokens": cached // 2 if r["reported"] else None,
                "divergence_anchor": r["anchor"],
                "divergence_role": r["role"],
                "divergence_key": r["key"],
                "completion_tokens": 5,
            }
        )
    return make_requests(rows)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.lists(_row, max_size=25))
def test_summaries_agree_with_plain_sums(rows: list[dict[str, Any]]) -> None:
    frame = _frame_from(rows)
    table = report.hit_ratio_summary(frame)
    overall = table.filter(pl.col("session") == ALL_SESSIONS).row(0, named=True)
    assert overall["requests"] == frame.height
    assert overall["prompt_tokens"] == (frame["prompt_tokens"].sum() or 0)
    per_session = table.filter(pl.col("session") != ALL_SESSIONS)
    assert per_session["prompt_tokens"].sum() == overall["prompt_tokens"]
    assert per_session["requests"].sum() == frame.height
    for ratio in table["hit_ratio"].drop_nulls():
        assert 0.0 <= ratio <= 1.0
    # every lost token is attributed exactly once, in both tables
    lost = (frame["prompt_tokens"] - frame["predicted_cached_tokens"]).sum() or 0
    assert (report.tokens_lost_by_slot(frame)["tokens_lost"].sum() or 0) == lost
    assert (report.tokens_lost_by_key(frame)["tokens_lost"].sum() or 0) == lost
    by_slot = report.tokens_lost_by_slot(frame)["tokens_lost"].to_list()
    assert by_slot == sorted(by_slot, reverse=True)
    # predicted vs reported covers exactly the requests with usage
    pairs = report.predicted_vs_reported(frame)
    assert pairs.height == sum(1 for r in rows if r["reported"])


# ------------------------------------------------------------------------------------- attribution


def test_losses_go_to_anchor_then_role_then_no_layout_and_first_requests_are_cold_starts() -> None:
    frame = make_requests(
        [
            {
                "session": "x",
                "index": 0,
                "prompt_tokens": 50,
                "predicted_cached_tokens": 0,
                "divergence_anchor": "identity",
                "divergence_role": "system",
            },
            {
                "session": "x",
                "index": 1,
                "prompt_tokens": 80,
                "predicted_cached_tokens": 30,
                "divergence_anchor": "turn-context",
                "divergence_key": "memory.recall",
                "divergence_role": "user",
            },
            {
                "session": "x",
                "index": 2,
                "prompt_tokens": 90,
                "predicted_cached_tokens": 70,
                "divergence_role": "tool",
            },
            {
                "session": "x",
                "index": 3,
                "prompt_tokens": 95,
                "predicted_cached_tokens": 64,
                "divergence_message": 4,
            },
            {"session": "x", "index": 4, "prompt_tokens": 130, "predicted_cached_tokens": 128},
        ]
    )
    losses = report.attribute_losses(frame)
    assert losses["slot"].to_list() == [COLD_START, "turn-context", "tool", NO_LAYOUT, NEW_TOKENS]
    assert losses["key"].to_list() == [COLD_START, "memory.recall", "tool", NO_LAYOUT, NEW_TOKENS]
    assert losses["tokens_lost"].to_list() == [50, 50, 20, 31, 2]


def test_cold_start_is_the_first_index_of_each_session_even_when_unsorted() -> None:
    frame = make_requests(
        [
            {
                "session": "b",
                "index": 1,
                "prompt_tokens": 20,
                "predicted_cached_tokens": 10,
                "divergence_role": "user",
            },
            {"session": "a", "index": 0, "prompt_tokens": 10, "predicted_cached_tokens": 0},
            {
                "session": "b",
                "index": 0,
                "prompt_tokens": 10,
                "predicted_cached_tokens": 0,
                "divergence_role": "user",
            },
        ]
    )
    assert report.attribute_losses(frame)["slot"].to_list() == ["user", COLD_START, COLD_START]


def test_tokens_lost_tables_sort_by_loss_and_share_sums_to_one() -> None:
    frame = make_requests(TWO_SESSIONS)
    by_slot = report.tokens_lost_by_slot(frame)
    expected: dict[str, int] = {}
    for r in TWO_SESSIONS:
        first = r["index"] == 0
        slot = COLD_START if first else (r.get("divergence_anchor") or r.get("divergence_role") or NEW_TOKENS)
        expected[slot] = expected.get(slot, 0) + r["prompt_tokens"] - r["predicted_cached_tokens"]
    assert dict(zip(by_slot["slot"], by_slot["tokens_lost"], strict=True)) == expected
    assert by_slot["tokens_lost"].to_list() == sorted(expected.values(), reverse=True)
    assert by_slot["share"].sum() == pytest.approx(1.0)
    by_key = report.tokens_lost_by_key(frame)
    row = by_key.filter(pl.col("key") == "memory.recall").row(0, named=True)
    assert row["slot"] == "turn-context"
    assert row["tokens_lost"] == 500 - 256


def test_requests_that_lost_nothing_are_not_counted_as_losing() -> None:
    frame = make_requests(
        [
            {"index": 0, "prompt_tokens": 64, "predicted_cached_tokens": 0},
            {"index": 1, "prompt_tokens": 64, "predicted_cached_tokens": 64, "divergence_role": "user"},
        ]
    )
    row = report.tokens_lost_by_slot(frame).filter(pl.col("slot") == "user").row(0, named=True)
    assert row["requests"] == 0 and row["tokens_lost"] == 0


# ------------------------------------------------------------------------------ predicted/reported


def test_predicted_vs_reported_per_request_and_aggregate() -> None:
    frame = make_requests(TWO_SESSIONS)
    pairs = report.predicted_vs_reported(frame)
    with_usage = [r for r in TWO_SESSIONS if r.get("reported_cached_tokens") is not None]
    assert pairs.height == len(with_usage)
    assert pairs["cached_difference"].to_list() == [
        r["predicted_cached_tokens"] - r["reported_cached_tokens"] for r in with_usage
    ]
    assert pairs["prompt_difference"].to_list() == [
        r["prompt_tokens"] - r["reported_prompt_tokens"] for r in with_usage
    ]
    summary = report.predicted_vs_reported_summary(frame)
    overall = summary.filter(pl.col("session") == ALL_SESSIONS).row(0, named=True)
    diffs = [r["predicted_cached_tokens"] - r["reported_cached_tokens"] for r in with_usage]
    assert overall["requests"] == len(with_usage)
    assert overall["mean_abs_error"] == pytest.approx(sum(abs(d) for d in diffs) / len(diffs))
    assert overall["mean_difference"] == pytest.approx(sum(diffs) / len(diffs))
    assert overall["exact"] == sum(1 for d in diffs if d == 0)
    predicted_ratio = sum(r["predicted_cached_tokens"] for r in with_usage) / sum(
        r["prompt_tokens"] for r in with_usage
    )
    reported_ratio = sum(r["reported_cached_tokens"] for r in with_usage) / sum(
        r["reported_prompt_tokens"] for r in with_usage
    )
    assert overall["hit_ratio"] == pytest.approx(predicted_ratio)
    assert overall["reported_hit_ratio"] == pytest.approx(reported_ratio)
    assert overall["hit_ratio_difference"] == pytest.approx(predicted_ratio - reported_ratio)


def test_predicted_vs_reported_without_usage_is_empty() -> None:
    frame = make_requests([{"prompt_tokens": 10, "predicted_cached_tokens": 0}])
    assert report.predicted_vs_reported(frame).height == 0
    assert report.predicted_vs_reported_summary(frame).height == 0
    # a frame that lacks the reported columns altogether behaves the same
    bare = frame.select("session", "index", "prompt_tokens", "predicted_cached_tokens")
    assert report.predicted_vs_reported(bare).height == 0


# -------------------------------------------------------------------------------------------- prices


def test_builtin_prices_are_complete_and_cheaper_when_cached() -> None:
    for name in (
        "deepseek-chat",
        "deepseek-reasoner",
        "gpt-4o",
        "gpt-4.1",
        "gpt-5",
        "claude-sonnet-4-5",
        "claude-haiku-4-5",
        "claude-opus-4-5",
    ):
        assert name in PRICES
    # the legacy GPT-4 models predate prompt caching: a cached token costs the input price, on them only
    legacy = {"gpt-4", "gpt-4-32k", "gpt-4-turbo"}
    assert {m for m, p in PRICES.items() if p.cache_hit == p.cache_miss} == legacy
    for price in PRICES.values():
        assert price.cache_hit < price.cache_miss or price.model in legacy
        assert price.output > 0
        if price.provider == "anthropic":
            assert price.cache_write is not None and price.cache_write > price.cache_miss
            assert price.cache_write_1h == 2 * price.cache_miss  # the 1-hour write is 2 x input
    frame = report.prices_frame()
    assert set(frame.columns) == {
        "provider", "model", "cache_hit", "cache_miss", "output", "cache_write", "cache_write_1h",
        "source", "as_of", "above_tokens", "above_cache_hit", "above_cache_miss", "above_output",
        "above_cache_write", "above_cache_write_1h",
    }  # fmt: skip
    # every built-in price is dated and names the page it was read from
    for price in report.pricing.builtin_prices().values():
        assert price.source is not None and price.source.startswith("https://")
        # an ISO 8601 date, to the day or (where the page was read in a month without a noted day) the month
        assert price.as_of is not None and re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", price.as_of), price
    assert frame.height == len(PRICES)


def test_model_price_rejects_negative_or_nan() -> None:
    with pytest.raises(PriceError, match="cache_hit"):
        ModelPrice("x", "m", cache_hit=-1, cache_miss=1, output=1)
    with pytest.raises(PriceError, match="cache_write"):
        ModelPrice("x", "m", cache_hit=0, cache_miss=1, output=1, cache_write=math.nan)


def test_resolve_prices_merges_overrides_from_mapping_and_frame() -> None:
    table = report.resolve_prices({"deepseek-chat": {"cache_hit": 1, "cache_miss": 2, "output": 3}})
    assert table["deepseek-chat"].cache_hit == 1.0
    assert "gpt-4o" in table  # the rest of the built-in table stays
    frame = pl.DataFrame({"model": ["mine"], "cache_hit": [0.5], "cache_miss": [1.0], "output": [2.0]})
    assert report.resolve_prices(frame)["mine"].output == 2.0
    assert set(report.resolve_prices(frame, replace=True)) == {"mine"}
    own = ModelPrice("p", "other-name", cache_hit=0, cache_miss=1, output=1)
    assert report.resolve_prices({"alias": own})["alias"].model == "alias"
    with pytest.raises(PriceError, match="lacks output"):
        report.resolve_prices({"m": {"cache_hit": 1, "cache_miss": 2}})
    with pytest.raises(PriceError, match="unknown price field"):
        report.resolve_prices({"m": {"cache_hit": 1, "cache_miss": 2, "output": 3, "input": 4}})
    with pytest.raises(PriceError, match="'model' column"):
        report.resolve_prices(pl.DataFrame({"cache_hit": [1.0]}))


def test_load_prices_from_json_and_csv(tmp_path: Any) -> None:
    json_file = tmp_path / "prices.json"
    json_file.write_text(
        json.dumps({"m1": {"cache_hit": 0.1, "cache_miss": 1, "output": 2, "cache_write": 1.5}})
    )
    assert report.load_prices(json_file)["m1"].cache_write == 1.5
    csv_file = tmp_path / "prices.csv"
    csv_file.write_text("model,cache_hit,cache_miss,output,cache_write\nm2,0.1,1,2,\n")
    loaded = report.load_prices(csv_file)["m2"]
    assert (loaded.cache_hit, loaded.cache_miss, loaded.output, loaded.cache_write) == (0.1, 1.0, 2.0, None)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("bad.json", "{not json", r"bad\.json:1: not valid JSON"),
        ("list.json", "[1, 2]", r"list\.json: expected a JSON object"),
        ("nomodel.csv", "name,cache_hit\nx,1\n", r"nomodel\.csv: a CSV price file needs"),
        (
            "short.csv",
            "model,cache_hit,cache_miss,output\nm,1,2\n",
            r"short\.csv:2: price of 'm' lacks output",
        ),
        ("text.csv", "model,cache_hit,cache_miss,output\nm,cheap,2,3\n", r"text\.csv:2: bad price"),
        ("long.csv", "model,cache_hit,cache_miss,output\nm,1,2,3,4\n", r"long\.csv:2: more fields"),
    ],
)
def test_bad_price_files_name_the_file_and_line(tmp_path: Any, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(PriceError, match=message):
        report.load_prices(path)


def test_unreadable_price_file_is_named(tmp_path: Any) -> None:
    with pytest.raises(PriceError, match=r"missing\.json"):
        report.load_prices(tmp_path / "missing.json")


# ---------------------------------------------------------------------------------------------- cost


def _expected_cost(prompt: int, cached: int, output: int, price: ModelPrice) -> float:
    return (cached * price.cache_hit + (prompt - cached) * price.cache_miss + output * price.output) / 1e6


def test_request_costs_price_each_request_three_ways() -> None:
    frame = make_requests(TWO_SESSIONS)
    costs = report.request_costs(fake_result(frame))  # provider deepseek -> deepseek-chat
    price = PRICES["deepseek-chat"]
    assert set(costs["priced_as"].to_list()) == {"deepseek-chat"}
    for row, src in zip(costs.iter_rows(named=True), TWO_SESSIONS, strict=True):
        output = src.get("reported_completion_tokens") or src.get("completion_tokens") or 0
        assert row["output_tokens"] == output
        assert row["cost_no_cache"] == pytest.approx(_expected_cost(src["prompt_tokens"], 0, output, price))
        assert row["cost_predicted"] == pytest.approx(
            _expected_cost(src["prompt_tokens"], src["predicted_cached_tokens"], output, price)
        )
        if src.get("reported_cached_tokens") is None:
            assert row["cost_reported"] is None and row["cost_reported_no_cache"] is None
        else:
            assert row["cost_reported"] == pytest.approx(
                _expected_cost(src["reported_prompt_tokens"], src["reported_cached_tokens"], output, price)
            )


def test_cost_summary_rows_and_saving() -> None:
    frame = make_requests(TWO_SESSIONS)
    table = report.cost_summary(frame, model="gpt-4o")
    assert table["basis"].to_list() == ["predicted", "reported"]
    costs = report.request_costs(frame, model="gpt-4o")
    predicted = table.row(0, named=True)
    assert predicted["requests"] == frame.height
    assert predicted["cost_without_cache"] == pytest.approx(costs["cost_no_cache"].sum())
    assert predicted["cost_with_cache"] == pytest.approx(costs["cost_predicted"].sum())
    assert predicted["saving"] == pytest.approx(
        predicted["cost_without_cache"] - predicted["cost_with_cache"]
    )
    assert predicted["saving_ratio"] == pytest.approx(predicted["saving"] / predicted["cost_without_cache"])
    reported = table.row(1, named=True)
    assert reported["requests"] == sum(1 for r in TWO_SESSIONS if r.get("reported_cached_tokens") is not None)
    assert reported["cost_with_cache"] == pytest.approx(costs["cost_reported"].sum())
    by_session = report.cost_summary(frame, model="gpt-4o", by_session=True)
    assert by_session.filter(pl.col("basis") == "predicted")["cost_with_cache"].sum() == pytest.approx(
        predicted["cost_with_cache"]
    )


def test_cost_without_usage_has_only_the_predicted_row() -> None:
    frame = make_requests([{"prompt_tokens": 1000, "predicted_cached_tokens": 512}])
    table = report.cost_summary(frame, model="deepseek-chat")
    assert table["basis"].to_list() == ["predicted"]
    assert table["output_unknown"].to_list() == [1]


def test_anthropic_cache_writes_are_billed_at_the_write_price() -> None:
    frame = make_requests([{"prompt_tokens": 2000, "predicted_cached_tokens": 0}]).with_columns(
        pl.lit(1500).alias("predicted_cache_write_tokens")
    )
    price = PRICES["claude-sonnet-4-5"]
    assert price.cache_write is not None
    row = report.request_costs(frame, model="claude-sonnet-4-5").row(0, named=True)
    assert row["cost_predicted"] == pytest.approx((1500 * price.cache_write + 500 * price.cache_miss) / 1e6)
    assert row["cost_predicted"] > row["cost_no_cache"]  # writing costs more than not caching


def test_model_names_resolve_by_prefix_provider_prefix_and_column() -> None:
    frame = make_requests([{"prompt_tokens": 100, "predicted_cached_tokens": 0}] * 3).with_columns(
        pl.Series("model", ["gpt-4o-mini-2024-07-18", "openai/gpt-4o", "DeepSeek-Chat"])
    )
    costs = report.request_costs(frame)
    assert costs["priced_as"].to_list() == ["gpt-4o-mini", "gpt-4o", "deepseek-chat"]
    # model= overrides the column
    assert set(report.request_costs(frame, model="gpt-5")["priced_as"].to_list()) == {"gpt-5"}


def test_unknown_model_or_provider_raises_a_price_error_that_says_what_to_do() -> None:
    frame = make_requests([{"prompt_tokens": 100, "predicted_cached_tokens": 0}])
    with pytest.raises(PriceError, match=r"no price for 'llama-3'.*--prices"):
        report.request_costs(frame, model="llama-3")
    with pytest.raises(PriceError, match="provider 'vllm'"):
        report.request_costs(fake_result(frame, provider="vllm"))
    # a user price makes it work
    costs = report.request_costs(
        frame, model="llama-3", prices={"llama-3": {"cache_hit": 0, "cache_miss": 1, "output": 1}}
    )
    assert costs["cost_no_cache"].to_list() == [pytest.approx(100 / 1e6)]


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.lists(_row, max_size=20), st.sampled_from(sorted(PRICES)))
def test_cached_cost_never_exceeds_uncached_cost(rows: list[dict[str, Any]], model: str) -> None:
    frame = _frame_from(rows)
    costs = report.request_costs(frame, model=model)
    assert (costs["cost_predicted"] <= costs["cost_no_cache"] + 1e-12).all()
    table = report.cost_summary(frame, model=model)
    assert (table["saving"] >= -1e-12).all()


# ------------------------------------------------------------------------------------------- summary


def test_summarize_gathers_every_table_and_notes_what_is_missing() -> None:
    tables = report.summarize(fake_result(make_requests(TWO_SESSIONS)))
    assert list(tables) == [
        "hit_ratio",
        "lost_by_slot",
        "lost_by_key",
        "largest_breaks",
        "predicted_vs_reported",
        "cost",
        "problems",
        "notes",
    ]
    assert tables["cost"].height == 2
    assert tables["notes"].height == 0
    no_price = report.summarize(fake_result(make_requests(TWO_SESSIONS), provider="vllm"))
    # the model's rows stay, with empty cost columns (never priced as another model), and a note says why
    assert no_price["cost"]["cost_with_cache"].is_null().all()
    assert no_price["notes"]["table"].to_list() == ["cost"]
    assert "no price for the requests that name no model" in no_price["notes"]["note"][0]


def test_format_summary_prints_titles_short_headers_and_problems() -> None:
    result = fake_result(make_requests(TWO_SESSIONS))
    result.problems = pl.DataFrame(
        {"file": [f"log{i}.jsonl" for i in range(7)], "line": list(range(7)), "reason": ["not JSON"] * 7}
    )
    text = report.format_summary(report.summarize(result), width=120, max_problems=3)
    assert "Hit ratio per session" in text and "Tokens lost per slot" in text
    assert "Load problems: 7 (first 3 shown)" in text
    assert "log2.jsonl:2: not JSON" in text and "log3.jsonl" not in text
    assert "turn-context" in text and "memory.recall" in text
    assert "rep hit" in text  # short headers
    assert all(len(line) <= 120 for line in text.splitlines())
    no_usage = fake_result(make_requests([{"prompt_tokens": 10, "predicted_cached_tokens": 0}]), provider="x")
    text = report.format_summary(report.summarize(no_usage))
    assert "no provider usage" in text and "no price" in text and "Load problems: none" in text


def test_request_columns_constant_matches_the_engine_schema() -> None:
    assert REQUEST_COLUMNS == tuple(list(_SCHEMA)[: len(REQUEST_COLUMNS)])


def test_summarize_carries_the_analysis_notes() -> None:
    result = fake_result(make_requests(TWO_SESSIONS))
    result.notes = ("some records have no timestamp: the analysis ignores TTL expiry",)
    notes = report.summarize(result)["notes"]
    assert notes.rows() == [("analysis", result.notes[0])]
    assert result.notes[0] in report.format_summary(report.summarize(result))


def test_format_summary_shortens_long_names_but_keeps_head_and_tail() -> None:
    long_a = "deepseek_chat_dev__pvlib__pvlib-python-1072"
    long_b = "deepseek_chat_dev__pvlib__pvlib-python-1154"
    frame = make_requests(
        [
            {"session": long_a, "index": 0, "prompt_tokens": 10, "predicted_cached_tokens": 0},
            {"session": long_b, "index": 0, "prompt_tokens": 10, "predicted_cached_tokens": 0},
        ]
    )
    text = report.format_summary({"hit_ratio": report.hit_ratio_summary(frame)}, width=100)
    assert long_a not in text
    assert f"{long_a[:8]}" in text and "…" in text and long_a[-8:] in text and long_b[-8:] in text
    assert all(len(line) <= 100 for line in text.splitlines())
    # a table too wide for the terminal is split into column groups, not wrapped mid-number
    narrow = report.format_summary({"hit_ratio": report.hit_ratio_summary(frame)}, width=60)
    assert all(len(line) <= 60 for line in narrow.splitlines())
    assert narrow.count("┌") > 1 and "rep hit" in narrow and "prompt" in narrow
    # the DataFrame itself keeps the full names
    assert long_a in report.hit_ratio_summary(frame)["session"].to_list()


def test_request_columns_match_the_engine_and_summaries_accept_a_real_result() -> None:
    from promptkit.analysis.api import analyze_requests
    from promptkit.analysis.columns import REQUEST_COLUMNS as ENGINE_COLUMNS

    assert ENGINE_COLUMNS[: len(REQUEST_COLUMNS)] == REQUEST_COLUMNS
    system = {"role": "system", "content": "Be terse. " * 50}
    first = {"model": "gpt-4o", "messages": [system, {"role": "user", "content": "hi"}]}
    second = {
        "model": "gpt-4o",
        "messages": [
            *first["messages"],
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "bye"},
        ],
    }
    result = analyze_requests([first, second], provider="exact")
    tables = report.summarize(result)
    overall = tables["hit_ratio"].filter(pl.col("session") == ALL_SESSIONS).row(0, named=True)
    assert overall["requests"] == 2
    assert overall["predicted_cached_tokens"] == result.requests["predicted_cached_tokens"].sum()
    assert tables["lost_by_slot"]["tokens_lost"].sum() == (
        result.requests["prompt_tokens"].sum() - result.requests["predicted_cached_tokens"].sum()
    )
    assert tables["cost"]["model"].to_list() == ["gpt-4o"]  # priced at the model the requests name


def test_largest_breaks_lists_diverged_requests_by_loss_with_one_line_excerpts() -> None:
    from promptkit.report import largest_breaks

    frame = pl.DataFrame(
        {
            "session": ["s"] * 4,
            "index": [0, 1, 2, 3],
            "prompt_tokens": [100, 200, 300, 400],
            "predicted_cached_tokens": [0, 150, 100, 400],
            "divergence_role": [None, "system", "system", None],
            "divergence_anchor": [None, "context", "identity", None],
            "divergence_key": [None, "memories", "rules", None],
            "divergence_token": [None, 150, 100, None],
            "divergence_cached_text": [None, "old\nline", "x" * 100, None],
            "divergence_prompt_text": [None, "new\tline", "y", None],
        }
    )
    table = largest_breaks(frame, n=5, width=10)
    assert table["index"].to_list() == [2, 1]  # the cold start and the clean request are not breaks
    assert table["tokens_lost"].to_list() == [200, 50]
    assert table["key"].to_list() == ["rules", "memories"]
    assert table["cached_text"].to_list() == ["x" * 9 + "…", "old⏎line"]
    assert table["prompt_text"].to_list() == ["y", "new→line"]
    assert largest_breaks(frame, n=1).height == 1
