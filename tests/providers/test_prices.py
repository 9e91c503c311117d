"""promptkit.providers.prices and each provider's price list: every current model the real logs name is
priced from its provider's page, each entry dated and sourced; dated snapshots find their version's
price and never another version's."""

from __future__ import annotations

import re

import pytest

from promptkit.providers.prices import ModelPrice, lookup_model
from promptkit.providers.registry import available_providers


def _priced(model: str) -> list[tuple[str, ModelPrice]]:
    out = []
    for profile in available_providers().values():
        key = lookup_model(model, profile.prices)
        if key is not None:
            out.append((profile.name, profile.prices[key]))
    return out


#: (logged model, provider, cache hit, cache miss, output) as the providers' pages list them.
CURRENT = [
    ("claude-opus-4-7", "anthropic", 0.50, 5.00, 25.00),
    ("claude-opus-4-8", "anthropic", 0.50, 5.00, 25.00),
    ("claude-fable-5-1", "anthropic", 0.25, 10.00, 50.00),
    ("claude-fable-5", "anthropic", 1.00, 10.00, 50.00),
    ("gpt-5-codex", "openai", 0.125, 1.25, 10.00),
    ("gpt-5.1-codex", "openai", 0.125, 1.25, 10.00),
    ("gpt-5.3-codex", "openai", 0.175, 1.75, 14.00),
    ("gpt-5.4", "openai", 0.25, 2.50, 15.00),
    ("gpt-5.4-mini", "openai", 0.075, 0.75, 4.50),
    ("gemini-3-flash-preview", "gemini", 0.05, 0.50, 3.00),
    ("gemini-3.1-pro-preview", "gemini", 0.20, 2.00, 12.00),
    ("deepseek-v4-flash", "deepseek", 0.0028, 0.14, 0.28),
]


@pytest.mark.parametrize(("model", "provider", "hit", "miss", "out"), CURRENT, ids=[c[0] for c in CURRENT])
def test_current_models_are_priced_once_by_their_provider(
    model: str, provider: str, hit: float, miss: float, out: float
) -> None:
    [(name, price)] = _priced(model)
    assert name == provider
    assert (price.cache_hit, price.cache_miss, price.output) == (hit, miss, out)


def test_anthropic_write_prices_follow_the_pages_multipliers() -> None:
    [(_, opus)] = _priced("claude-opus-4-7")
    assert (opus.cache_write, opus.cache_write_1h) == (6.25, 10.0)


def test_fable_prices_are_the_pricing_page_s_not_the_multipliers() -> None:
    # the "Model pricing" table: writes follow 1.25x / 2x of $10, cache hits do not ($0.25 on 5.1 is
    # 0.025x, $1 on Fable 5 0.1x); a Fable 5.1 snapshot is priced as 5.1, never as Fable 5
    [(_, fable51)] = _priced("claude-fable-5-1")
    [(_, fable5)] = _priced("claude-fable-5-20260609")
    assert (fable51.cache_write, fable51.cache_write_1h, fable51.cache_hit) == (12.5, 20.0, 0.25)
    assert (fable5.model, fable5.cache_hit) == ("claude-fable-5", 1.0)
    assert fable51.source == "https://platform.claude.com/docs/en/about-claude/pricing"


def test_every_price_names_its_page_and_date() -> None:
    for profile in available_providers().values():
        for key, price in profile.prices.items():
            assert key == price.model and price.provider == profile.name
            assert price.source is not None and price.source.startswith("https://"), key
            assert price.as_of is not None and re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", price.as_of), key
            assert price.cache_hit <= price.cache_miss, key


@pytest.mark.parametrize(
    ("logged", "version"),
    [
        ("claude-opus-4-7-20260416", "claude-opus-4-7"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("gpt-5.4-2026-03-05", "gpt-5.4"),
        ("openai/gpt-5.3-codex", "gpt-5.3-codex"),
        ("deepseek-v4-flash@latest", "deepseek-v4-flash"),
    ],
)
def test_dated_snapshots_resolve_to_their_version(logged: str, version: str) -> None:
    [(_, price)] = _priced(logged)
    assert price.model == version


#: (logged model, version, cache miss, output): the legacy GPT-4 models, which bill a cached prompt token
#: as input (no cached-input price), and their dated snapshots.
LEGACY = [
    ("gpt-4", "gpt-4", 30.0, 60.0),
    ("gpt-4-0613", "gpt-4", 30.0, 60.0),
    ("gpt-4-0314", "gpt-4", 30.0, 60.0),
    ("gpt-4-32k", "gpt-4-32k", 60.0, 120.0),
    ("gpt-4-32k-0613", "gpt-4-32k", 60.0, 120.0),
    ("gpt-4-turbo", "gpt-4-turbo", 10.0, 30.0),
    ("gpt-4-turbo-2024-04-09", "gpt-4-turbo", 10.0, 30.0),
    ("openai/gpt-4-0613", "gpt-4", 30.0, 60.0),
]


@pytest.mark.parametrize(("logged", "version", "miss", "out"), LEGACY, ids=[c[0] for c in LEGACY])
def test_legacy_gpt4_models_and_their_snapshots_are_priced(
    logged: str, version: str, miss: float, out: float
) -> None:
    [(name, price)] = _priced(logged)
    assert (name, price.model) == ("openai", version)
    assert (price.cache_hit, price.cache_miss, price.output, price.cache_write) == (miss, miss, out, None)
    assert price.as_of == "2026-12-07" and price.source is not None
    assert price.source.endswith("/gpt-4-32k-0314" if version == "gpt-4-32k" else f"/models/{version}")


def test_legacy_gpt4_costs_in_the_cost_table() -> None:
    """A gpt-4-0613 call of 2,000 prompt tokens (1,000 of them predicted read from a cache) and 100 answer
    tokens costs 2,000 x $30 + 100 x $60 per million whether cached or not: the cached half is billed at
    the input price."""
    import polars as pl

    from promptkit.report.pricing import request_costs

    frame = pl.DataFrame(
        {
            "session": ["s"],
            "index": [0],
            "model": ["gpt-4-0613"],
            "prompt_tokens": [2000],
            "predicted_cached_tokens": [1000],
            "completion_tokens": [100],
        }
    )
    (row,) = request_costs(frame).to_dicts()
    assert row["priced_as"] == "gpt-4"
    assert row["cost_no_cache"] == row["cost_predicted"] == pytest.approx((2000 * 30 + 100 * 60) / 1e6)


def test_the_four_digit_snapshot_of_an_older_model() -> None:
    table = {"gpt-4": ModelPrice("openai", "gpt-4", 30, 30, 60)}
    assert lookup_model("gpt-4-0613", table) == "gpt-4"
    assert lookup_model("gpt-4-turbo", table) is None  # another model, not a snapshot


@pytest.mark.parametrize(
    "other", ["gpt-5.4-pro", "gpt-5.5", "claude-opus-4-9", "gemini-3-flash-lite-preview"]
)
def test_another_version_is_never_priced_as_a_neighbour(other: str) -> None:
    assert _priced(other) == []


@pytest.mark.parametrize("unpriced", ["kimi-k2.5", "kimi-k2.6"])
def test_models_whose_page_was_not_read_stay_unpriced(unpriced: str) -> None:
    # no price was found on the provider's own page for these: cost stays empty rather than guessed
    assert _priced(unpriced) == []


@pytest.mark.parametrize(
    ("model", "base", "output"),
    [
        ("claude-sonnet-4-6", 3.0, 15.0),
        ("claude-sonnet-5", 2.0, 10.0),
        ("claude-sonnet-5-5-20260928", 2.0, 10.0),
        ("claude-opus-5", 5.0, 25.0),
        ("claude-opus-5-5", 4.0, 20.0),
    ],
)
def test_the_current_claude_models_are_priced_from_their_own_pages(
    model: str, base: float, output: float
) -> None:
    from promptkit.providers.anthropic import PRICES

    table = {p.model: p for p in PRICES}
    key = lookup_model(model, table)
    assert key is not None and model.startswith(key)
    price = table[key]
    assert (price.cache_miss, price.output) == (base, output)
    # Anthropic's caching multipliers: 5-minute writes 1.25x, 1-hour writes 2x, hits 0.1x the base
    assert (price.cache_write, price.cache_write_1h, price.cache_hit) == pytest.approx(
        (1.25 * base, 2 * base, 0.1 * base)
    )
    assert price.as_of == "2026-12-07" and price.source.endswith(
        f"/models/{key.removeprefix('claude-')}/overview"
    )
