"""Prices by prompt length: a band above ``above_tokens`` prices the whole call when its prompt is longer
(Anthropic's Haiku 5.5: up to and over 100,000 tokens), from the built-in table and from price files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from promptkit.analysis.clock_core import clock_price
from promptkit.errors import PriceError
from promptkit.providers.prices import ModelPrice
from promptkit.report import pricing
from promptkit.report.causes import write_accounting

BANDED: dict[str, Any] = {
    "cache_hit": 0.01, "cache_miss": 0.1, "output": 0.5, "cache_write": 0.125, "cache_write_1h": 0.2,
    "above_tokens": 100_000, "above_cache_hit": 0.05, "above_cache_miss": 0.5, "above_output": 2.5,
    "above_cache_write": 0.625, "above_cache_write_1h": 1.0,
}  # fmt: skip


def _frame(prompts: list[int], **extra: list[Any]) -> pl.DataFrame:
    n = len(prompts)
    return pl.DataFrame(
        {"session": ["s"] * n, "index": list(range(n)), "prompt_tokens": prompts,
         "predicted_cached_tokens": [1000] * n, "predicted_cache_write_tokens": [500] * n,
         "completion_tokens": [200] * n, **extra}
    )  # fmt: skip


def _cost(prompt: int, hit: float, miss: float, out: float, write: float) -> float:
    return (1000 * hit + 500 * write + (prompt - 1500) * miss + 200 * out) / 1e6


def test_a_call_below_at_and_above_the_threshold_is_priced_by_its_band() -> None:
    costs = pricing.request_costs(_frame([99_999, 100_000, 100_001]), model="claude-haiku-5-5")
    low, at, high = costs["cost_predicted"].to_list()
    assert low == pytest.approx(_cost(99_999, 0.01, 0.1, 0.5, 0.125))
    assert at == pytest.approx(_cost(100_000, 0.01, 0.1, 0.5, 0.125))  # "up to 100,000 tokens"
    assert high == pytest.approx(_cost(100_001, 0.05, 0.5, 2.5, 0.625))  # "over 100,000 tokens"
    no_cache = costs["cost_no_cache"].to_list()
    assert no_cache[1] == pytest.approx((100_000 * 0.1 + 200 * 0.5) / 1e6)
    assert no_cache[2] == pytest.approx((100_001 * 0.5 + 200 * 2.5) / 1e6)
    assert costs["priced_as"].to_list() == ["claude-haiku-5-5"] * 3


def test_the_reported_prompt_decides_the_band_where_the_log_has_usage() -> None:
    # counted 90,000 but reported 120,000: the provider's count says over; and the reverse
    frame = _frame(
        [90_000, 120_000, 120_000],
        reported_prompt_tokens=[120_000, 90_000, None],
        reported_cached_tokens=[0, 0, None],
    )
    costs = pricing.request_costs(frame, prices={"m": BANDED}, model="m")
    predicted, reported = costs["cost_predicted"].to_list(), costs["cost_reported"].to_list()
    assert predicted[0] == pytest.approx(_cost(90_000, 0.05, 0.5, 2.5, 0.625))
    assert reported[0] == pytest.approx((120_000 * 0.5 + 200 * 2.5) / 1e6)
    assert predicted[1] == pytest.approx(_cost(120_000, 0.01, 0.1, 0.5, 0.125))
    assert reported[1] == pytest.approx((90_000 * 0.1 + 200 * 0.5) / 1e6)
    assert predicted[2] == pytest.approx(_cost(120_000, 0.05, 0.5, 2.5, 0.625))  # no usage: the count
    assert reported[2] is None


def test_a_price_without_a_band_prices_every_length_alike() -> None:
    flat = {k: v for k, v in BANDED.items() if not k.startswith("above_")}
    costs = pricing.request_costs(_frame([50_000, 500_000]), prices={"m": flat}, model="m")
    assert costs["cost_predicted"].to_list() == pytest.approx(
        [_cost(n, 0.01, 0.1, 0.5, 0.125) for n in (50_000, 500_000)]
    )


def test_a_band_without_a_write_price_bills_writes_at_the_band_input_price() -> None:
    price = {**BANDED, "above_cache_write": None, "above_cache_write_1h": None}
    costs = pricing.request_costs(_frame([200_000]), prices={"m": price}, model="m")
    assert costs["cost_predicted"][0] == pytest.approx(_cost(200_000, 0.05, 0.5, 2.5, 0.5))


def test_haiku_5_5_carries_both_bands_of_its_page() -> None:
    price = pricing.builtin_prices()["claude-haiku-5-5"]
    assert (price.cache_miss, price.output, price.cache_write, price.cache_write_1h, price.cache_hit) == (
        0.1, 0.5, 0.125, 0.2, 0.01)  # fmt: skip
    above = price.band(100_001)
    assert (above.cache_miss, above.output, above.cache_write, above.cache_write_1h, above.cache_hit) == (
        0.5, 2.5, 0.625, 1.0, 0.05)  # fmt: skip
    assert price.band(100_000) is price and price.band(None) is price
    assert price.source == "https://platform.claude.com/docs/en/models/haiku-5-5/overview" and price.as_of


def test_csv_and_json_price_files_carry_bands(tmp_path: Path) -> None:
    csv_file = tmp_path / "prices.csv"
    header = "model,cache_hit,cache_miss,output,above_tokens,above_cache_hit,above_cache_miss,above_output"
    csv_file.write_text(f"{header}\nlong-m,0.1,1,2,200000,0.2,2,3\nflat-m,0.1,1,2,,,,\n", encoding="utf-8")
    table = pricing.load_prices(csv_file)
    assert table["long-m"].above_tokens == 200_000 and table["long-m"].band(200_001).cache_miss == 2.0
    assert table["flat-m"].above_tokens is None and table["flat-m"].band(10**9).cache_miss == 1.0
    json_file = tmp_path / "prices.json"
    json_file.write_text(json.dumps({"m": BANDED}), encoding="utf-8")
    assert pricing.load_prices(json_file)["m"] == ModelPrice("", "m", **{**BANDED, "source": str(json_file)})
    # the price frame keeps the band, and a frame of prices reads back the same
    frame = pricing.prices_frame(pricing.load_prices(json_file))
    again = pricing.resolve_prices(frame.filter(pl.col("model") == "m"), replace=True)
    assert again["m"].above_tokens == 100_000 and again["m"].above_output == 2.5


@pytest.mark.parametrize(
    ("row", "said"),
    [
        ("m,0.1,1,2,abc,0.2,2,3", "m.above_tokens must be a whole number of tokens >= 1, got 'abc'"),
        ("m,0.1,1,2,0,0.2,2,3", "m.above_tokens must be a whole number of tokens >= 1, got 0"),
        ("m,0.1,1,2,1.5,0.2,2,3", "m.above_tokens must be a whole number of tokens >= 1, got '1.5'"),
        ("m,0.1,1,2,100,x,2,3", "m.above_cache_hit must be a number, got 'x'"),
        ("m,0.1,1,2,100,-1,2,3", "m.above_cache_hit must be a finite number >= 0, got -1.0"),
        ("m,0.1,1,2,100,0.2,2,", "above_tokens=100 lacks above_output"),
        ("m,0.1,1,2,,0.2,2,3", "above_cache_hit, above_cache_miss, above_output given without above_tokens"),
    ],
)
def test_a_bad_band_in_a_price_file_names_the_file_line_and_field(
    tmp_path: Path, row: str, said: str
) -> None:
    path = tmp_path / "prices.csv"
    header = "model,cache_hit,cache_miss,output,above_tokens,above_cache_hit,above_cache_miss,above_output"
    path.write_text(f"{header}\nok,0.1,1,2,,,,\n{row}\n", encoding="utf-8")
    with pytest.raises(PriceError) as caught:
        pricing.load_prices(path)
    assert str(caught.value).startswith(f"{path}:3: ")
    assert said in str(caught.value)


@pytest.mark.parametrize("value", [True, -1, 2.0, "100000"])
def test_a_bad_above_tokens_in_json_or_in_code_is_an_error(tmp_path: Path, value: Any) -> None:
    with pytest.raises(PriceError, match=r"above_tokens must be a whole number"):
        ModelPrice(
            "x", "m", 0.1, 1, 2, above_tokens=value, above_cache_hit=1, above_cache_miss=1, above_output=1
        )
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"m": {**BANDED, "above_tokens": value}}), encoding="utf-8")
    if value == "100000":  # a string of digits is a whole number in a file (as in a CSV)
        assert pricing.load_prices(path)["m"].above_tokens == 100_000
        return
    with pytest.raises(PriceError, match=rf"^{path}: price m\.above_tokens must be a whole number"):
        pricing.load_prices(path)


def test_write_accounting_prices_each_write_at_its_band() -> None:
    frame = pl.DataFrame(
        {"session": ["s", "s"], "index": [0, 1], "timestamp": [0.0, 10_000.0],
         "prompt_tokens": [50_000, 150_000], "predicted_cached_tokens": [0, 0],
         "predicted_cache_write_tokens": [1000, 1000], "predicted_cache_write_1h_tokens": [200, 200]}
    )  # fmt: skip
    table = write_accounting(frame, price=ModelPrice("x", "m", **BANDED))
    assert table["write_cost"].to_list() == pytest.approx(
        [(800 * 0.125 + 200 * 0.2) / 1e6, (800 * 0.625 + 200 * 1.0) / 1e6]
    )


def test_the_cache_clock_prices_a_long_prompt_at_its_band() -> None:
    price = clock_price("claude-haiku-5-5")
    assert price is not None and price.above_tokens == 100_000
    short = price.cost(prompt=100_000, cached=0, written=0, written_1h=0, output=100)
    long = price.cost(prompt=100_001, cached=1, written=0, written_1h=0, output=100)
    assert short == pytest.approx((100_000 * 0.1 + 100 * 0.5) / 1e6)
    assert long == pytest.approx((1 * 0.05 + 100_000 * 0.5 + 100 * 2.5) / 1e6)


def test_promptkit_providers_lists_the_band() -> None:
    from promptkit.commands.catalog import provider_rows

    rows = {m["model"]: m for r in provider_rows() for m in r["priced_models"]}
    assert (rows["claude-haiku-5-5"]["above_tokens"], rows["claude-haiku-5-5"]["above_cache_miss"]) == (
        100_000,
        0.5,
    )
    assert rows["claude-haiku-4-5"]["above_tokens"] is None
