"""replay(): before / after analyses and the comparison; transforms never change how many requests or
sessions there are."""

from __future__ import annotations

import copy
from pathlib import Path

import attrs
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from promptkit.analysis import analyze_requests
from promptkit.layout import RequestRecord
from promptkit.report import request_costs, resolve_prices
from promptkit.whatif import (
    COMPARISON_COLUMNS,
    REPLAY_NOTE,
    Breakpoints,
    ChangeProvider,
    ElideToolOutputs,
    Move,
    Normalize,
    PinModel,
    Selector,
    SetRetention,
    SetTTL,
    SortTools,
    Transform,
    UseCacheModel,
    apply_transforms,
    replay,
)
from promptkit.whatif.transforms import SetCacheKey
from tests.whatif.logs import RULES, layout_log, plain_log

ROOT = Path(__file__).resolve().parents[2]


def test_normalize_reaches_the_clean_log_exactly() -> None:
    volatile = plain_log(5, timestamp=True)
    w = replay(volatile, [Normalize(("timestamps",))])
    clean = [
        attrs.evolve(r, request=Normalize(("timestamps",)).apply(r).request)
        for r in plain_log(5, timestamp=False)
    ]
    expected = analyze_requests(clean)
    assert w.before.hit_ratio == 0.0
    assert w.after.hit_ratio == expected.hit_ratio
    assert (
        w.after.requests["predicted_cached_tokens"].to_list()
        == expected.requests["predicted_cached_tokens"].to_list()
    )
    assert list(w.comparison.columns) == list(COMPARISON_COLUMNS)
    assert w.comparison["session"].to_list() == ["p", "(all)"]
    assert REPLAY_NOTE in w.notes


def test_moving_the_changing_contributor_matches_a_log_built_that_way() -> None:
    w = replay(layout_log(4), [Move(Selector(key="files"))])
    built = apply_transforms(layout_log(4), [Move(Selector(key="files"))])
    assert w.after.requests.equals(analyze_requests(built).requests)
    o = w.overall
    assert o["after_hit_ratio"] > o["before_hit_ratio"]
    # the same text, moved: only the template tokens around a message may render differently in its new place
    assert abs(o["before_prompt_tokens"] - o["after_prompt_tokens"]) <= 4
    assert o["saving_usd"] > 0


def test_comparison_costs_are_request_costs_summed() -> None:
    w = replay(layout_log(3), [Move(Selector(key="files"))])
    before = request_costs(w.before)["cost_predicted"].sum()
    after = request_costs(w.after)["cost_predicted"].sum()
    o = w.overall
    assert abs(o["before_cost_usd"] - before) < 1e-12
    assert abs(o["after_cost_usd"] - after) < 1e-12
    assert abs(o["saving_usd"] - (before - after)) < 1e-12


def _anthropic_log(gap: float) -> list[RequestRecord]:
    out = []
    history: list[dict[str, str]] = []
    for i in range(3):
        messages = [*history, {"role": "user", "content": f"question {i}"}]
        out.append(
            RequestRecord(
                {"model": "claude-sonnet-4-5", "system": RULES * 4, "messages": messages},
                session="a",
                index=i,
                provider="anthropic",
                timestamp=1_767_225_600.0 + gap * i,
                completion={"role": "assistant", "content": f"answer {i}"},
            )
        )
        history += [messages[-1], {"role": "assistant", "content": f"answer {i}"}]
    return out


def test_one_hour_ttl_hits_across_ten_minute_gaps_and_pays_the_one_hour_write_price() -> None:
    records = apply_transforms(_anthropic_log(600.0), [Breakpoints(("head",))])
    w = replay(records, [SetTTL("1h")], tokenizer="cl100k_base")
    assert w.before.requests["predicted_cached_tokens"].to_list()[1:] == [0, 0]  # 5 minutes: expired
    assert all(n > 0 for n in w.after.requests["predicted_cached_tokens"].to_list()[1:])
    price = resolve_prices()["claude-sonnet-4-5"]
    assert price.cache_write is not None and price.cache_write_1h is not None
    writes = int(w.after.requests["predicted_cache_write_tokens"].sum())
    hour = int(w.after.requests["predicted_cache_write_1h_tokens"].sum())
    assert writes > 0 and hour == writes  # every write is a 1-hour one
    # one pricing path: whatif's cost is request_costs', which prices the 1-hour writes as such
    assert abs(w.overall["after_cost_usd"] - float(request_costs(w.after)["cost_predicted"].sum())) < 1e-12
    as_5m = w.after.requests.with_columns(pl.lit(0).alias("predicted_cache_write_1h_tokens"))
    premium = writes * (price.cache_write_1h - price.cache_write) / 1e6
    plain = float(request_costs(as_5m)["cost_predicted"].sum())
    assert abs(w.overall["after_cost_usd"] - (plain + premium)) < 1e-12


def test_openai_24h_retention_keeps_entries_across_long_gaps() -> None:
    records = [
        attrs.evolve(r, provider="openai", request={**r.request, "model": "gpt-4.1"})
        for r in plain_log(3, timestamp=False, repeat=3)
    ]
    records = [attrs.evolve(r, timestamp=1_767_225_600.0 + 3600 * r.index) for r in records]
    w = replay(records, [SetRetention("24h")])
    assert w.before.hit_ratio == 0.0
    assert w.after.hit_ratio is not None and w.after.hit_ratio > 0.5


def test_cache_model_and_provider_overrides_apply_to_the_after_side() -> None:
    w = replay(layout_log(2), [UseCacheModel("exact")])
    assert (w.before.cache_model.name, w.after.cache_model.name) == ("unit-prefix", "exact")
    # a provider's name is that profile's model, with the provider's parameters (resolved by the providers)
    w = replay(layout_log(2), [UseCacheModel("openai")])
    assert w.after.cache_model.name == "stepped-prefix" and w.after.cache_model.retention == (
        ("24h", 86400.0),
    )
    w = replay(layout_log(2), [ChangeProvider("openai")], tokenizer="o200k_base", provider="deepseek")
    assert (w.before.provider, w.after.provider) == ("deepseek", "openai")
    assert w.after.requests["model"].unique().to_list() == ["gpt-4.1"]


# --- the property: transforms never change the number of requests or sessions -------------------------

_TRANSFORMS: list[Transform] = [
    Move(Selector(key="files")),
    Move(Selector(slot="context"), to="turn-hint"),
    Move(Selector(role="system", regex="Open files: .*"), to="identity"),
    Move(Selector(regex="rules"), to="knowledge"),
    Normalize(),
    Normalize((r"file_\d+",), scope="all"),
    SortTools(),
    PinModel("deepseek-reasoner"),
    ChangeProvider("openai"),
    SetTTL("1h"),
    SetRetention("24h"),
    SetCacheKey(),
    UseCacheModel("exact"),
    Breakpoints(),
    Breakpoints(("history", "last")),
    ElideToolOutputs(1, role="user"),
]


def _mixed_log() -> list[RequestRecord]:
    other = [attrs.evolve(r, session="t") for r in plain_log(3, timestamp=True)]
    return [*layout_log(3), *other]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_TRANSFORMS), max_size=6))
def test_transform_chains_keep_requests_sessions_and_layout_alignment(chain: list[Transform]) -> None:
    records = _mixed_log()
    frozen = copy.deepcopy([r.request for r in records])
    out = apply_transforms(records, chain)
    assert len(out) == len(records)
    assert [(r.session, r.index) for r in out] == [(r.session, r.index) for r in records]
    assert [r.request for r in records] == frozen  # inputs untouched
    for before, after in zip(records, out, strict=True):
        if before.layout is not None:
            assert after.layout is not None
            assert len(after.layout) == len(after.request["messages"])


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_TRANSFORMS), min_size=1, max_size=4))
def test_replayed_chains_analyze_every_request(chain: list[Transform]) -> None:
    w = replay(_mixed_log(), chain, tokenizer="cl100k_base", render="chatml")
    assert w.after.requests.height == w.before.requests.height == 6
    assert w.after.requests["session"].n_unique() == w.before.requests["session"].n_unique() == 2
    assert w.comparison.filter(pl.col("session") != "(all)")["requests"].sum() == 6


@pytest.mark.slow
def test_replay_predicts_the_log_assembled_with_the_moved_contributors() -> None:
    from promptkit.analysis import analyze
    from promptkit.formats import read_logs
    from promptkit.whatif import parse_transform

    keys = ("file-list", "memory-vector", "speaker-profile", "cross-session")
    w = replay(
        read_logs(ROOT / "fixtures/logs/session-before.jsonl"),
        [parse_transform(f"move:key={k},as=user") for k in keys],
    )
    built = analyze(ROOT / "fixtures/logs/session-after.jsonl")
    assert built.hit_ratio is not None and w.after.hit_ratio is not None and w.before.hit_ratio is not None
    assert w.before.hit_ratio < 0.25
    assert abs(w.after.hit_ratio - built.hit_ratio) < 0.01


def test_a_transform_that_matches_nothing_is_named_in_the_notes() -> None:
    w = replay(layout_log(2), [Move(Selector(slot="turn-context")), PinModel("deepseek-chat")])
    assert w.notes == (
        REPLAY_NOTE,
        "'move slot=turn-context to turn-context' changed no request (nothing matched)",
        "'pin the model to deepseek-chat' changed no request (nothing matched)",
    )
    assert w.overall["after_cost_usd"] == w.overall["before_cost_usd"]
