"""--suggest: the planted volatile value is found, and replaying the suggestion reaches the clean log."""

from __future__ import annotations

import attrs

from promptkit.analysis import analyze_requests
from promptkit.layout import RequestRecord
from promptkit.whatif import Move, Normalize, SortTools, VolatileFinding, candidates, find_volatile, suggest
from promptkit.whatif.spec import format_transform
from promptkit.whatif.transforms import Chain, PinModel
from tests.whatif.logs import layout_log, plain_log


def test_find_volatile_names_the_planted_timestamp() -> None:
    findings = find_volatile(plain_log(4, timestamp=True))
    assert [(f.pattern, f.line_regex, f.where, f.changes) for f in findings] == [
        ("timestamps", "Current time:.*", "message 0", 3)
    ]
    assert findings[0].before == "Current time: 2026-01-01 10:00"
    assert findings[0].after == "Current time: 2026-01-01 10:01"
    assert find_volatile(plain_log(4, timestamp=False)) == []


def test_suggest_finds_the_planted_value_and_reaches_the_clean_hit_ratio() -> None:
    planted = plain_log(6, timestamp=True)
    clean = analyze_requests(plain_log(6, timestamp=False))
    found = suggest(planted)
    specs = [s.spec for s in found]
    assert "normalize:timestamps" in specs
    assert "move:regex=Current time:.*" in specs
    best = found[0]
    assert best.before_hit_ratio == 0.0
    assert clean.hit_ratio is not None and best.after_hit_ratio is not None
    assert best.after_hit_ratio >= clean.hit_ratio - 0.005
    assert best.after_cost_usd < best.before_cost_usd
    savings = [s.saving_usd for s in found]
    assert savings == sorted(savings, reverse=True)


def test_suggest_moves_changing_contributors_of_built_prompts() -> None:
    records = layout_log(4)
    found = suggest(records)
    by_spec = {s.spec: s for s in found}
    assert "move:key=files" in by_spec
    move = by_spec["move:key=files"]
    assert move.after_hit_ratio is not None and move.before_hit_ratio is not None
    assert move.after_hit_ratio > move.before_hit_ratio
    assert found[0].saving_usd >= move.saving_usd


def test_candidates_from_divergence_columns() -> None:
    base = plain_log(3, timestamp=False)
    a = {"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {}}}}
    b = {"type": "function", "function": {"parameters": {"properties": {}, "type": "object"}, "name": "b"}}
    tools = [[a, b], [b, a], [a, b]]
    models = ["deepseek-chat", "deepseek-reasoner", "deepseek-chat"]
    records = [
        attrs.evolve(r, request={**r.request, "tools": t, "model": m})
        for r, t, m in zip(base, tools, models, strict=True)
    ]
    found = [t for t, _ in candidates(records, analyze_requests(records))]
    assert SortTools() in found
    assert PinModel("deepseek-chat") in found


def test_a_detector_is_swappable() -> None:
    def detector(records: list[RequestRecord]) -> list[VolatileFinding]:
        r = records[1]
        return [VolatileFinding("uuids", "Build:.*", "system", r.session, r.index, "Build: 1", "Build: 2")]

    found = [
        t
        for t, _ in candidates(
            plain_log(2, timestamp=False), analyze_requests(plain_log(2, timestamp=False)), detector=detector
        )
    ]
    assert Normalize(("uuids",)) in found
    assert any(isinstance(t, Move) and t.selector.regex == "Build:.*" for t in found)
    assert not any(isinstance(t, Chain) for t in found)


def test_candidates_name_the_contributor_where_the_cache_breaks() -> None:
    records = layout_log(4)
    before = analyze_requests(records)
    lost = before.requests.filter(before.requests["divergence_key"] == "files")
    reasons = {format_transform(t): why for t, why in candidates(records, before)}
    assert lost.height == 3
    expected_lost = int((lost["prompt_tokens"] - lost["predicted_cached_tokens"]).sum())
    assert reasons["move:key=files"] == (
        f"3 request(s) break the cache at contributor 'files' before the history ({expected_lost:,} tokens not cached)"
    )


def test_anthropic_log_without_breakpoints_gets_them_and_a_longer_ttl_for_long_gaps() -> None:
    from tests.whatif.test_replay import _anthropic_log

    found = {s.spec: s for s in suggest(_anthropic_log(600.0), tokenizer="cl100k_base")}
    assert {"breakpoints:auto", "breakpoints:auto ; ttl:1h"} <= set(found)
    plain, longer = found["breakpoints:auto"], found["breakpoints:auto ; ttl:1h"]
    assert plain.before_hit_ratio == 0.0
    assert plain.after_hit_ratio == 0.0  # ten minutes between calls: every 5-minute entry has expired
    assert longer.after_hit_ratio is not None and longer.after_hit_ratio > 0.5
    assert longer.saving_usd > 0 > plain.saving_usd  # writes without reads only cost


def test_cache_settings_are_asked_of_the_profile_not_of_its_name() -> None:
    """A profile that answers the capability questions gets the suggestions, whatever its name; each
    longer lifetime is proposed only for the idle gaps it bridges (longer than the model's TTL, at most
    the option's lifetime)."""
    from promptkit.providers.registry import _REGISTRY, ProviderProfile, register_provider
    from promptkit.tokens.cache_models import SteppedPrefixCache
    from promptkit.whatif.transforms import Breakpoints, SetRetention, SetTTL

    profile = ProviderProfile(
        name="test-keeper",
        description="a provider that offers a 2-hour retention and a 30-minute breakpoint TTL",
        tokenizer="cl100k_base",
        render="chatml",
        cache_model=SteppedPrefixCache(min_tokens=1, step=1, ttl=600.0, retention={"2h": 7200}),
        needs_explicit_breakpoints=True,
        extended_ttl_options=(("1h", 1800.0),),
        retention_options=(("2h", 7200.0),),
    )
    register_provider(profile)
    try:

        def log(gap: float) -> list[RequestRecord]:
            records = plain_log(3, timestamp=False, provider="test-keeper")
            return [attrs.evolve(r, timestamp=1_767_225_600.0 + gap * r.index) for r in records]

        def proposed(gap: float) -> dict[str, str]:
            records = log(gap)
            return {format_transform(t): why for t, why in candidates(records, analyze_requests(records))}

        hour = proposed(3600.0)  # bridged by the 2-hour retention, not by the 30-minute TTL
        assert format_transform(SetRetention("2h")) in hour
        assert "2 gap(s) between calls last longer than 10 minutes and at most 2 hours" in hour.values()
        assert format_transform(Breakpoints()) in hour  # no cache_control in the log
        assert format_transform(Chain((Breakpoints(), SetTTL("1h")))) not in hour
        quarter = proposed(900.0)  # bridged by both
        assert format_transform(Chain((Breakpoints(), SetTTL("1h")))) in quarter
        assert format_transform(SetRetention("2h")) in quarter
        days = proposed(2 * 86400.0)  # bridged by neither
        assert format_transform(SetRetention("2h")) not in days
        # the same log under a profile that answers no: no cache setting at all
        plain = [attrs.evolve(r, provider="deepseek") for r in log(900.0)]
        found = {format_transform(t) for t, _ in candidates(plain, analyze_requests(plain))}
        assert not {format_transform(Breakpoints()), format_transform(SetRetention("2h"))} & found
    finally:
        del _REGISTRY["test-keeper"]


def _two_runs(model: str | None) -> list[RequestRecord]:
    """A run with a timestamp in its system prompt and a run whose two tools swap places every call."""
    a = {"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {}}}}
    b = {"type": "function", "function": {"name": "b", "parameters": {"type": "object", "properties": {}}}}
    stamped = plain_log(6, timestamp=True)
    swapped = [
        attrs.evolve(r, session="tools-run", request={**r.request, "tools": [a, b] if i % 2 else [b, a]})
        for i, r in enumerate(plain_log(6, timestamp=False))
    ]
    extra = {} if model is None else {"model": model}
    return [attrs.evolve(r, request={**r.request, **extra}) for r in [*stamped, *swapped]]


def test_fixes_of_separate_breaks_are_chained_priced_or_not() -> None:
    for model, priced in ((None, True), ("house-model-1", False)):  # a model without a price: by hit ratio
        found = suggest(_two_runs(model))
        by_spec = {s.spec: s for s in found}
        both = by_spec["normalize:timestamps ; sort-tools"]
        assert found[0] is both and both.reason == "the 2 best suggestions together"
        assert {s.priced for s in found} == {priced}
        assert both.hit_gain > by_spec["normalize:timestamps"].hit_gain > by_spec["sort-tools"].hit_gain > 0


def test_a_fix_that_adds_nothing_to_the_best_is_not_chained() -> None:
    # the timestamp's normalize and its move fix the same break: together they gain nothing more
    found = suggest(plain_log(6, timestamp=True))
    assert [s.spec for s in found] == ["normalize:timestamps", "move:regex=Current time:.*"]


def test_a_measured_cost_ranks_below_every_suggestion_that_costs_nothing_measured() -> None:
    from promptkit.whatif import rank
    from promptkit.whatif.suggestions import Suggestion

    def s(spec: str, before: float, after: float, priced: bool) -> Suggestion:
        return Suggestion(SortTools(), spec, "", 0.5, 0.5, 10, 10, before, after, None, priced=priced)  # type: ignore[arg-type]

    cost, unpriced, saving = s("cost", 1.0, 2.0, True), s("unpriced", 0.0, 5.0, False), s("saving", 2.0, 1.0, True)
    cheaper_cost = s("cheaper cost", 1.0, 1.5, True)
    assert not unpriced.is_cost and cost.is_cost
    assert [x.spec for x in rank([cost, unpriced, cheaper_cost, saving])] == ["saving", "unpriced", "cheaper cost", "cost"]
