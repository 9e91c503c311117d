"""Tests for promptkit.tokens.cache_models: every cache-model rule."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from promptkit.layout import LayoutEntry
from promptkit.providers.anthropic import (
    ANTHROPIC_MIN_CACHEABLE_TOKENS,
    CACHE_MODEL as CLAUDE,
    anthropic_min_cacheable_tokens,
)
from promptkit.providers.openai import CACHE_MODEL as OPENAI
from promptkit.tokens.cache_models import (
    BreakpointCache,
    CacheEntry,
    CacheModel,
    CachePlan,
    ExactCache,
    PagedBlockCache,
    SteppedPrefixCache,
    UnitPrefixCache,
    get_cache_model,
    register_cache_model,
)
from promptkit.tokens.tokenize import TokenizedRequest


def plan(prompt: int) -> CachePlan:
    return CachePlan(prompt_len=prompt)


def tokenized(
    total: int, prompt: int, starts: list[int], ends: list[int], header: int = 0
) -> TokenizedRequest:
    return TokenizedRequest(
        tokens=np.arange(total, dtype=np.int64),
        message_starts=tuple(starts),
        header_len=header,
        prompt_len=prompt,
        message_ends=tuple(ends),
    )


# ---------------------------------------------------------------------------------------------------
# any-prefix models


def test_exact_is_the_shared_prefix_capped_by_the_prompt() -> None:
    m = ExactCache()
    assert m.cached_tokens(plan(100), 37) == 37
    assert m.cached_tokens(plan(100), 250) == 100
    assert m.cached_tokens(plan(100), 0) == 0
    assert m.includes_completion and not ExactCache(include_completion=False).includes_completion


@pytest.mark.parametrize(
    ("prefix", "prompt", "cached"),
    [
        (65_535, 200_000, 65_472),  # 1023 units: 65535 = 1023 * 64 + 63
        (65_536, 200_000, 65_536),  # 1024 units exactly
        (65_537, 200_000, 65_536),
        (65_599, 200_000, 65_536),
        (65_600, 200_000, 65_600),
        (65_537, 65_535, 65_472),  # never more than the prompt, still whole units
        (63, 200_000, 0),
        (64, 200_000, 64),
    ],
)
def test_deepseek_units_at_64k(prefix: int, prompt: int, cached: int) -> None:
    assert UnitPrefixCache().cached_tokens(plan(prompt), prefix) == cached
    assert cached == (min(prefix, prompt) // 64) * 64


def test_deepseek_counts_whole_64_token_units() -> None:
    m = UnitPrefixCache()
    # pvlib-1072: call 2 had prompt 2942 + answer 71 = 3013 tokens; call 3 (prompt 3049) hit 3008 = 47 x 64
    assert m.cached_tokens(plan(3049), 2942 + 71) == 3008 == 47 * 64
    assert m.cached_tokens(plan(3049), 63) == 0
    assert m.cached_tokens(plan(3049), 64) == 64
    assert m.cached_tokens(plan(3049), 127) == 64
    assert m.cached_tokens(plan(100), 5000) == 64  # never more than the prompt
    assert m.cached_tokens(plan(128), 128) == 128
    assert UnitPrefixCache(unit=10).cached_tokens(plan(100), 57) == 50


def test_deepseek_entry_covers_the_answer() -> None:
    tok = tokenized(total=130, prompt=100, starts=[0], ends=[99])
    assert UnitPrefixCache().plan(tok, {"messages": []}).entries == (CacheEntry(130, None, False),)
    assert UnitPrefixCache(include_completion=False).plan(tok, {"messages": []}).entries == (
        CacheEntry(100, None, False),
    )
    assert SteppedPrefixCache().plan(tok, {"messages": []}).entries == (CacheEntry(100, 600.0, False),)


def test_openai_nothing_under_1024_then_128_steps() -> None:
    m = SteppedPrefixCache()
    assert m.cached_tokens(plan(5000), 1023) == 0
    assert m.cached_tokens(plan(5000), 1024) == 1024
    assert m.cached_tokens(plan(5000), 1151) == 1024
    assert m.cached_tokens(plan(5000), 1152) == 1152
    assert m.cached_tokens(plan(5000), 1300) == 1280
    assert m.cached_tokens(plan(1100), 3000) == 1024  # capped by the prompt, then stepped
    assert m.cached_tokens(plan(900), 900) == 0  # a prompt under 1024 is never cached
    assert not m.includes_completion


def test_openai_entry_covers_the_answer_with_include_completion() -> None:
    # OpenAI keeps the generated answer's KV: the profile's model stores prompt + answer, the bare
    # mechanism (include_completion False) only the prompt; reads keep the minimum and the 128 steps
    tok = tokenized(total=2000, prompt=1500, starts=[0], ends=[1499])
    assert OPENAI.includes_completion
    assert OPENAI.plan(tok, {"messages": []}).entries == (CacheEntry(2000, 600.0, False),)
    assert SteppedPrefixCache(include_completion=True).plan(tok, {"messages": []}).entries[0].length == 2000
    assert SteppedPrefixCache().plan(tok, {"messages": []}).entries[0].length == 1500
    assert OPENAI.cached_tokens(plan(3000), 1700) == 1664  # into the answer, stepped


def test_openai_ttl_and_24h_retention() -> None:
    m = OPENAI  # the profile's model: the provider's retention values
    assert m.entry_ttl({"messages": []}) == 600.0
    assert m.entry_ttl({"messages": [], "prompt_cache_retention": "24h"}) == 86400.0
    assert m.entry_ttl({"messages": [], "prompt_cache_retention": "in_memory"}) == 600.0
    assert SteppedPrefixCache(ttl=None).entry_ttl({}) is None
    # the mechanism alone knows no retention value: a request's field changes nothing
    assert SteppedPrefixCache().entry_ttl({"prompt_cache_retention": "24h"}) == 600.0


def test_vllm_full_blocks_and_last_prompt_token_recomputed() -> None:
    m = PagedBlockCache()
    assert m.cached_tokens(plan(100), 40) == 32
    assert m.cached_tokens(plan(32), 32) == 16  # identical prompt of 2 blocks: the last token is recomputed
    assert m.cached_tokens(plan(33), 33) == 32
    assert m.cached_tokens(plan(33), 15) == 0
    assert PagedBlockCache(block_size=4).cached_tokens(plan(10), 10) == 8
    tok = tokenized(total=45, prompt=40, starts=[0], ends=[39])
    assert m.plan(tok, {"messages": []}).entries == (CacheEntry(32, None, False),)  # full blocks only


@given(
    prompt=st.integers(0, 200_000),
    prefix=st.integers(0, 300_000),
    name=st.sampled_from(["exact", "unit-prefix", "stepped-prefix", "paged-block"]),
)
@example(prompt=200_000, prefix=65_535, name="unit-prefix")  # 64k - 1: one token short of a unit boundary
@example(prompt=200_000, prefix=65_536, name="unit-prefix")  # 64k: exactly 1024 units
@example(prompt=200_000, prefix=65_537, name="unit-prefix")
@example(prompt=65_536, prefix=65_537, name="unit-prefix")  # capped by a prompt of whole units
@example(prompt=200_000, prefix=1024, name="stepped-prefix")
@example(prompt=200_000, prefix=1151, name="stepped-prefix")
@settings(max_examples=300, deadline=None)
def test_any_prefix_models_never_exceed_prompt_or_prefix_and_respect_units(
    prompt: int, prefix: int, name: str
) -> None:
    m = get_cache_model(name)
    c = m.cached_tokens(plan(prompt), prefix)
    assert 0 <= c <= min(prompt, prefix)
    more = m.cached_tokens(plan(prompt), prefix + 1)
    assert more >= c  # monotone in the shared prefix
    if name == "unit-prefix":
        assert c % 64 == 0 and min(prompt, prefix) - c < 64
    elif name == "stepped-prefix":
        assert c == 0 or (c >= 1024 and (c - 1024) % 128 == 0)
        assert min(prompt, prefix) < 1024 or min(prompt, prefix) - c < 128
    elif name == "paged-block":
        assert c % 16 == 0 and c <= max(prompt - 1, 0)
    else:
        assert c == min(prompt, prefix)


# ---------------------------------------------------------------------------------------------------
# Anthropic

# 5 messages, header (tools) of 100 tokens, each message 500 tokens: ends at 600, 1100, 1600, 2100, 2600
STARTS = [100, 600, 1100, 1600, 2100]
ENDS = [600, 1100, 1600, 2100, 2600]
TOK = tokenized(total=2650, prompt=2601, starts=STARTS, ends=ENDS, header=100)


def messages(cc_at: dict[int, Any] | None = None, *, part: bool = False) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(5):
        role = "system" if i == 0 else ("user" if i % 2 else "assistant")
        msg: dict[str, Any] = {"role": role, "content": f"m{i}"}
        if cc_at and i in cc_at:
            if part:
                msg["content"] = [
                    {"type": "text", "text": f"m{i}"},
                    {"type": "text", "text": "x", "cache_control": cc_at[i]},
                ]
            else:
                msg["cache_control"] = cc_at[i]
        out.append(msg)
    return out


def test_anthropic_without_breakpoints_caches_nothing() -> None:
    m = CLAUDE
    p = m.plan(TOK, {"messages": messages()})
    assert p.entries == () and p.breakpoints == ()
    assert m.cached_tokens(p, 2601, [600, 1100]) == 0
    assert m.write_tokens(p, 0) == 0


def test_anthropic_breakpoints_from_messages_parts_tools_and_top_level() -> None:
    m = CLAUDE
    eph = {"type": "ephemeral"}
    assert m.plan(TOK, {"messages": messages({1: eph})}).breakpoints == (1100,)
    assert m.plan(TOK, {"messages": messages({3: eph}, part=True)}).breakpoints == (2100,)
    tools = [{"name": "a"}, {"name": "b", "cache_control": eph}]
    assert m.plan(TOK, {"messages": messages(), "tools": tools}).breakpoints == (100,)
    assert m.plan(TOK, {"messages": messages(), "cache_control": eph}).breakpoints == (2601,)


def test_anthropic_breakpoints_of_messages_that_are_mappings_but_not_dicts() -> None:
    from types import MappingProxyType

    m, eph = CLAUDE, {"type": "ephemeral"}
    for marks, part in (({1: eph}, False), ({3: eph}, True)):
        body = {"messages": messages(marks, part=part)}
        frozen = {"messages": [MappingProxyType(message) for message in body["messages"]]}
        assert m.plan(TOK, frozen).breakpoints == m.plan(TOK, body).breakpoints != ()


def test_anthropic_breakpoints_of_a_conversations_calls_read_call_after_call() -> None:
    # each call repeats the previous call's messages (the same objects): its marks are the marks of
    # its own messages, wherever the previous call had them
    m, eph = CLAUDE, {"type": "ephemeral"}
    marked = messages({2: eph, 4: eph})
    plain = messages()
    calls = [
        marked[:3],  # a mark on its last message
        [*marked[:2], plain[2], plain[3]],  # that last message unmarked: the same prefix but it
        [*marked[:2], plain[2], marked[3], marked[4]],
        plain[:5],  # another conversation
        [*plain[:4], marked[4]],
    ]
    want = [(1600,), (), (2600,), (), (2600,)]
    got = [m.plan(TOK, {"messages": call}).breakpoints for call in calls]
    fresh = [BreakpointCache().plan(TOK, {"messages": [dict(x) for x in call]}).breakpoints for call in calls]
    assert got == fresh == want


def test_anthropic_ttl_5m_default_and_1h() -> None:
    m = CLAUDE
    p = m.plan(TOK, {"messages": messages({1: {"type": "ephemeral"}, 3: {"type": "ephemeral", "ttl": "1h"}})})
    assert p.entries == (CacheEntry(1100, 300.0, True), CacheEntry(2100, 3600.0, True))
    # the mechanism alone knows no TTL name: "1h" keeps the default
    bare = BreakpointCache().plan(TOK, {"messages": messages({3: {"type": "ephemeral", "ttl": "1h"}})})
    assert bare.entries == (CacheEntry(2100, 300.0, True),)


def test_anthropic_minimum_cacheable_length_per_model() -> None:
    m = CLAUDE
    body = {"messages": messages({1: {"type": "ephemeral"}, 3: {"type": "ephemeral"}})}
    # the breakpoint at 1100 tokens is cacheable for Sonnet 4.5 (1024) but not for Haiku 3.5 (2048)
    assert [e.length for e in m.plan(TOK, {**body, "model": "claude-sonnet-4-5"}).entries] == [1100, 2100]
    assert [e.length for e in m.plan(TOK, {**body, "model": "claude-3-5-haiku-20241022"}).entries] == [2100]
    assert [e.length for e in m.plan(TOK, {**body, "model": "claude-opus-4-6"}).entries] == []
    assert [e.length for e in BreakpointCache(min_tokens=2200).plan(TOK, body).entries] == []
    assert anthropic_min_cacheable_tokens(None) == 1024
    assert anthropic_min_cacheable_tokens("anthropic/claude-haiku-4-5") == 4096
    assert anthropic_min_cacheable_tokens("claude-opus-4-1-20250805") == 1024  # longest prefix wins
    assert anthropic_min_cacheable_tokens("claude-opus-4-20250514") == 1024
    assert anthropic_min_cacheable_tokens("some-other-model") == 1024
    assert ANTHROPIC_MIN_CACHEABLE_TOKENS["claude-sonnet-4-6"] == 2048


def test_anthropic_reads_only_whole_entries_at_lookup_points_and_reports_writes() -> None:
    m = CLAUDE
    p = m.plan(TOK, {"messages": messages({3: {"type": "ephemeral"}})})
    assert p.lookup_points == (100, 600, 1100, 1600, 2100)
    assert m.cached_tokens(p, 2601, [1100]) == 1100  # an earlier entry within the lookback
    assert m.cached_tokens(p, 2601, [1100, 2100]) == 2100  # the longest live entry wins
    assert m.cached_tokens(p, 2000, [1100, 2100]) == 1100  # the prompt differs before 2100
    assert m.cached_tokens(p, 2601, [1234]) == 0  # not a block boundary: no entry can end there
    assert m.write_tokens(p, 1100) == 1000
    assert m.write_tokens(p, 2100) == 0


def test_anthropic_lookback_is_20_blocks() -> None:
    n = 30
    starts = [10 * i for i in range(n)]
    ends = [10 * (i + 1) for i in range(n)]
    tok = tokenized(total=n * 10 + 1, prompt=n * 10 + 1, starts=starts, ends=ends)
    body = {
        "messages": [{"role": "user", "content": str(i)} for i in range(n - 1)]
        + [{"role": "user", "content": "last", "cache_control": {"type": "ephemeral"}}]
    }
    p = BreakpointCache(min_tokens=1).plan(tok, body)
    # breakpoint on block 30 (ends at 300): blocks 30 down to 11 are checked
    assert p.lookup_points == tuple(range(110, 301, 10))
    m = BreakpointCache(min_tokens=1)
    assert m.cached_tokens(p, 301, [110]) == 110
    assert m.cached_tokens(p, 301, [100]) == 0  # 21 blocks back: out of the window
    assert BreakpointCache(min_tokens=1, lookback=5).plan(tok, body).lookup_points == (
        260,
        270,
        280,
        290,
        300,
    )


def test_anthropic_automatic_breakpoints_from_a_layout() -> None:
    layout = [
        LayoutEntry("persona"),
        LayoutEntry("identity", "card"),
        LayoutEntry("history"),
        LayoutEntry("history"),
        LayoutEntry("current"),
    ]
    m = BreakpointCache(min_tokens=1)
    p = m.plan(TOK, {"messages": messages()}, layout)
    assert p.breakpoints == (1100, 2100)  # end of the stable head, end of the history
    # a system block after the history is not part of the head: the head is the leading run only
    late = [
        LayoutEntry("persona"),
        LayoutEntry("identity", "card"),
        LayoutEntry("history"),
        LayoutEntry("system"),
        LayoutEntry("current"),
    ]
    assert m.plan(TOK, {"messages": messages()}, late).breakpoints == (1100, 1600)
    assert (
        BreakpointCache(auto_from_layout=False).plan(TOK, {"messages": messages()}, layout).breakpoints == ()
    )
    # explicit breakpoints win over the layout
    explicit = m.plan(TOK, {"messages": messages({0: {"type": "ephemeral"}})}, layout)
    assert explicit.breakpoints == (600,)


# ---------------------------------------------------------------------------------------------------
# registry


def test_get_cache_model_names_overrides_and_errors() -> None:
    assert isinstance(get_cache_model("exact"), ExactCache)
    assert get_cache_model("unit-prefix", ttl=3600.0) == UnitPrefixCache(ttl=3600.0)
    assert get_cache_model("paged-block", block_size=32).block_size == 32  # type: ignore[attr-defined]
    m = UnitPrefixCache()
    assert get_cache_model(m) is m
    assert get_cache_model(m, unit=32) == UnitPrefixCache(unit=32)
    # a provider's name is not a mechanism: the providers resolve it (promptkit.providers.resolve)
    with pytest.raises(ValueError, match=r"unknown cache model 'deepseek'.*resolve_cache_model"):
        get_cache_model("deepseek")
    with pytest.raises(TypeError, match="cache model 'stepped-prefix'"):
        get_cache_model("stepped-prefix", unit=64)
    with pytest.raises(TypeError, match="cache model 'stepped-prefix'"):
        get_cache_model(SteppedPrefixCache(), unit=64)
    with pytest.raises(ValueError, match=r"UnitPrefixCache\.unit"):
        UnitPrefixCache(unit=0)
    with pytest.raises(ValueError, match=r"SteppedPrefixCache\.ttl"):
        SteppedPrefixCache(ttl=-1)
    with pytest.raises(ValueError, match=r"ExactCache\.delay"):
        ExactCache(delay=float("inf"))


def test_register_cache_model() -> None:
    class Half(CacheModel):
        __slots__ = ("capacity", "delay", "ttl")
        name = "half"

        def __init__(self, ttl: float | None = None) -> None:
            self.ttl, self.capacity, self.delay = ttl, None, 0.0

        def cached_tokens(self, plan: CachePlan, prefix_tokens: int, exact_entries: Any = ()) -> int:
            return min(prefix_tokens, plan.prompt_len) // 2

    register_cache_model("test-half", Half)
    try:
        assert get_cache_model("test-half").cached_tokens(plan(100), 50) == 25
        with pytest.raises(ValueError, match="already registered"):
            register_cache_model("test-half", Half)
    finally:
        from promptkit.tokens.cache_models import CACHE_MODELS

        del CACHE_MODELS["test-half"]


def test_the_old_provider_named_classes_are_deprecated_aliases_of_the_mechanisms() -> None:
    import promptkit.tokens.cache_models as cm

    for old, new in [
        ("DeepSeekCache", UnitPrefixCache),
        ("OpenAICache", SteppedPrefixCache),
        ("AnthropicCache", BreakpointCache),
        ("VLLMCache", PagedBlockCache),
    ]:
        with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: it is {new.__name__}"):
            assert getattr(cm, old) is new
    with pytest.raises(AttributeError):
        cm.NoSuchCache  # noqa: B018


def test_the_mechanisms_take_a_providers_parameters_from_its_profile() -> None:
    from promptkit.providers.registry import get_provider
    from promptkit.providers.resolve import resolve_cache_model

    assert resolve_cache_model("deepseek") == get_provider("deepseek").new_cache_model()
    assert resolve_cache_model("deepseek", ttl=60.0).ttl == 60.0
    assert isinstance(resolve_cache_model("vllm"), PagedBlockCache)
    assert resolve_cache_model("anthropic").min_cacheable_tokens("claude-haiku-4-5") == 4096
    assert BreakpointCache().min_cacheable_tokens("claude-haiku-4-5") == 0  # the mechanism knows no model
    assert resolve_cache_model("stepped-prefix") == SteppedPrefixCache()


_ENTRIES = st.builds(
    CacheEntry, st.integers(1, 10_000), st.none() | st.floats(0, 7200, allow_nan=False), st.booleans()
)
_PLANS = st.builds(
    CachePlan,
    st.integers(0, 10_000),
    st.lists(_ENTRIES, max_size=4).map(tuple),
    st.none() | st.lists(st.integers(0, 10_000), max_size=5).map(tuple),
    st.lists(st.integers(0, 10_000), max_size=4).map(tuple),
)


@given(st.lists(_PLANS, max_size=6))
def test_plans_travel_as_columns_and_come_back_whole(plans: list[CachePlan]) -> None:
    """A worker ships a chunk's plans as flat columns (pickled) and phase 2 rebuilds each one equal to
    what was shipped: entries with and without TTLs, exact or not, lookup points None or not."""
    import pickle

    import attrs

    from promptkit.tokens.cache_models import PlanColumns

    columns = pickle.loads(pickle.dumps(PlanColumns.of(plans)))
    assert [columns.plan(i) for i in range(len(plans))] == plans
    # a field added to a plan or an entry needs its column (else it would be lost on the way)
    assert [f.name for f in attrs.fields(CachePlan)] == [
        "prompt_len",
        "entries",
        "lookup_points",
        "breakpoints",
    ]
    assert [f.name for f in attrs.fields(CacheEntry)] == ["length", "ttl", "exact"]


# ---------------------------------------------------------------------------------------------------
# exactly at the minimum (issue 44: each provider's minimum is "at least", never "more than")


def test_a_prompt_exactly_at_the_minimum_is_cached_and_one_token_under_is_not() -> None:
    from promptkit.providers.gemini import PROFILE as GEMINI

    # OpenAI: "1024 tokens or longer"
    m = SteppedPrefixCache()
    assert m.cached_tokens(plan(1024), 1024) == 1024
    assert m.cached_tokens(plan(1023), 1023) == 0
    # Gemini: the request's input must hold at least the model's minimum (2,048 for Pro, 1,024 Flash)
    gem = GEMINI.cache_model
    for model, minimum in (("gemini-2.5-pro", 2048), ("gemini-2.5-flash", 1024), ("gemini-exp", 1024)):
        at = tokenized(total=minimum, prompt=minimum, starts=[0], ends=[minimum])
        under = tokenized(total=minimum - 1, prompt=minimum - 1, starts=[0], ends=[minimum - 1])
        body = {"model": model, "messages": [{"role": "user", "content": "x"}]}
        assert gem.min_cacheable_tokens(model) == minimum
        assert gem.plan(at, body).entries != (), model
        assert gem.plan(under, body).entries == (), model
        assert gem.cached_tokens(gem.plan(at, body), minimum) > 0, model
        assert gem.cached_tokens(gem.plan(under, body), minimum - 1) == 0, model
    # Anthropic: a breakpoint whose prefix is exactly the minimum is written; one token shorter is not
    for model, minimum in (("claude-sonnet-4-5", 1024), ("claude-3-5-haiku-20241022", 2048)):
        body = {"model": model, "messages": [{"role": "user", "content": "x", "cache_control": {"type": "ephemeral"}}]}
        for length, stored in ((minimum, [minimum]), (minimum - 1, [])):
            tok = tokenized(total=length + 1, prompt=length + 1, starts=[0], ends=[length])
            assert [e.length for e in CLAUDE.plan(tok, body).entries] == stored, (model, length)


def test_the_longest_matching_model_prefix_gives_the_minimum() -> None:
    from promptkit.tokens.cache_models import PrefixCache

    m = PrefixCache(min_tokens=7, min_tokens_by_model={"gem": 100, "gem-pro": 300, "gem-pro-x": 50})
    assert m.min_cacheable_tokens("vendor/GEM-PRO-2") == 300
    assert m.min_cacheable_tokens("gem-pro-x1") == 50
    assert m.min_cacheable_tokens("gem-flash") == 100
    assert m.min_cacheable_tokens("other") == m.min_cacheable_tokens(None) == 7
