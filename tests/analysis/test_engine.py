"""Tests for promptkit.analysis.api (the analysis, local plan): the two views on hand-made sessions (expected numbers computed
from first principles), attribution to message / role / slot / key, the frames and their schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings, strategies as st

from promptkit.analysis.api import analyze, analyze_requests
from promptkit.analysis.columns import COMPOSITION_COLUMNS, REQUEST_COLUMNS
from promptkit.formats import records_from_requests
from promptkit.providers.resolve import resolve_cache_model
from promptkit.tokens.cache_models import ExactCache, UnitPrefixCache
from promptkit.tokens.tokenize import RequestTokenizer
from tests.analysis.tiny import CharTokenizer, TinyRender

REQUIRED = (
    "session", "index", "timestamp", "prompt_tokens", "prefix_tokens", "predicted_cached_tokens", "hit_ratio",
    "reported_prompt_tokens", "reported_cached_tokens", "divergence_message", "divergence_role",
    "divergence_anchor", "divergence_key",
)  # fmt: skip


TINY: dict[str, Any] = {"tokenizer": CharTokenizer(), "render": TinyRender()}


def sys(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def bot(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


R1 = [sys("abc"), user("hello")]  # prompt: 4 + 6 + 1 = 11 tokens
R2 = [*R1, bot("ok"), user("more")]  # prompt: 4 + 6 + 4 + 5 + 1 = 20 tokens
R3 = [sys("abd"), *R2[1:], bot("fine"), user("x")]  # the system prompt changed at its 3rd character


def session(
    bodies: list[list[dict[str, Any]]],
    answers: list[str | None],
    *,
    name: str = "s",
    times: list[float] | None = None,
    layouts: list[Any] | None = None,
) -> Any:
    items: list[Any] = [{"messages": b} for b in bodies]
    if layouts is not None:
        items = [
            (item, layout) if layout is not None else item
            for item, layout in zip(items, layouts, strict=True)
        ]
    return records_from_requests(
        items,
        session=name,
        timestamps=times,
        completions=[bot(a) if a is not None else None for a in answers],
    )


def rows(result: Any) -> list[dict[str, Any]]:
    return result.requests.to_dicts()


# ---------------------------------------------------------------------------------------------------
# the consecutive view


def test_consecutive_view_hits_through_the_previous_answer() -> None:
    recs = session([R1, R2, R3], ["ok", "fine", None])
    result = analyze_requests(recs, provider="exact", **TINY)
    r1, r2, r3 = rows(result)
    assert (
        r1["prompt_tokens"],
        r1["prefix_tokens"],
        r1["predicted_cached_tokens"],
        r1["completion_tokens"],
    ) == (11, 0, 0, 3)
    assert r1["divergence_message"] is None and r1["cached_source"] is None
    # R2 starts with R1's prompt (11) and answer "ok<e>" (3): 14 shared tokens, nothing diverged
    assert (r2["prompt_tokens"], r2["prefix_tokens"], r2["predicted_cached_tokens"]) == (20, 14, 14)
    assert r2["hit_ratio"] == pytest.approx(14 / 20)
    assert r2["divergence_token"] is None and r2["cached_source"] == "s#0"
    # R3 changed the system prompt after "<s>ab": the prefix breaks at token 3 of message 0
    assert (r3["prefix_tokens"], r3["predicted_cached_tokens"], r3["divergence_token"]) == (3, 3, 3)
    assert (r3["divergence_message"], r3["divergence_role"]) == (0, "system")


def test_consecutive_view_without_answer_inclusion() -> None:
    recs = session([R1, R2], ["ok", None])
    result = analyze_requests(
        recs, provider="exact", cache_model=ExactCache(include_completion=False), **TINY
    )
    # the entry is R1's prompt only (11 tokens); R2 continues it with "ok": no divergence
    assert rows(result)[1]["prefix_tokens"] == 11
    assert rows(result)[1]["divergence_token"] is None


def test_deepseek_units_apply_to_the_shared_prefix() -> None:
    recs = session([R1, R2], ["ok", None])
    result = analyze_requests(recs, cache_model=UnitPrefixCache(unit=4), **TINY)
    assert rows(result)[1]["prefix_tokens"] == 14
    assert rows(result)[1]["predicted_cached_tokens"] == 12


def test_divergence_is_mapped_to_layout_slot_and_key() -> None:
    changed = [sys("abc"), user("hellO"), bot("ok"), user("more")]
    layout1 = [{"slot": "identity", "key": "card"}, {"slot": "current", "key": None}]
    layout2 = [("identity", "card"), ("turn-context", "memory.recall"), ("history", None), ("current", None)]
    recs = session([R1, changed], ["ok", None], layouts=[layout1, layout2])
    r2 = rows(analyze_requests(recs, provider="exact", **TINY))[1]
    # "<s>abc" (4) + "<u>hell" (5): the 10th token differs
    assert r2["divergence_token"] == 9
    assert (r2["divergence_message"], r2["divergence_role"]) == (1, "user")
    assert (r2["divergence_anchor"], r2["divergence_key"]) == ("turn-context", "memory.recall")
    no_layout = rows(analyze_requests(session([R1, changed], ["ok", None]), provider="exact", **TINY))[1]
    assert (no_layout["divergence_anchor"], no_layout["divergence_key"]) == (None, None)


def test_divergence_in_the_tool_definitions() -> None:
    tools_a = [{"type": "function", "function": {"name": "ab"}}]
    tools_b = [{"type": "function", "function": {"name": "ac"}}]
    recs = records_from_requests([{"messages": R1, "tools": tools_a}, {"messages": R1, "tools": tools_b}])
    r2 = rows(analyze_requests(recs, provider="exact", **TINY))[1]
    assert (r2["prefix_tokens"], r2["divergence_token"], r2["divergence_message"], r2["divergence_role"]) == (
        2,
        2,
        None,
        "tools",
    )


def test_identical_request_is_fully_cached_and_never_diverges() -> None:
    recs = session([R1, R1], [None, None])
    r2 = rows(analyze_requests(recs, provider="exact", **TINY))[1]
    assert (r2["prefix_tokens"], r2["predicted_cached_tokens"], r2["hit_ratio"], r2["divergence_token"]) == (
        11,
        11,
        1.0,
        None,
    )


# ---------------------------------------------------------------------------------------------------
# the simulated view


def two_sessions(times: tuple[float, float] = (0.0, 10.0)) -> tuple[Any, ...]:
    a = session([R1], ["ok"], name="A", times=[times[0]])
    b = session([[sys("abc"), user("bye")]], [None], name="B", times=[times[1]])
    return (*a, *b)


def test_simulated_view_credits_a_head_shared_across_sessions() -> None:
    recs = two_sessions()
    consecutive = rows(analyze_requests(recs, provider="exact", view="consecutive", **TINY))[1]
    simulated = rows(analyze_requests(recs, provider="exact", view="simulated", **TINY))[1]
    assert (consecutive["prefix_tokens"], consecutive["predicted_cached_tokens"]) == (0, 0)
    # "<s>abc<u>" is shared with session A, then "b" differs from "h"
    assert (simulated["prefix_tokens"], simulated["predicted_cached_tokens"], simulated["cached_source"]) == (
        5,
        5,
        "A#0",
    )
    assert (simulated["divergence_message"], simulated["divergence_role"]) == (1, "user")


def test_simulated_view_orders_by_time_and_keeps_load_order_in_the_frame() -> None:
    a = session([R1], ["ok"], name="A", times=[20.0])
    b = session([[sys("abc"), user("bye")]], [None], name="B", times=[10.0])
    result = analyze_requests((*a, *b), provider="exact", view="simulated", **TINY)
    assert result.requests["session"].to_list() == ["A", "B"]
    # B ran first: it found nothing; A (later) shares "<s>abc<u>" with B
    assert result.requests["predicted_cached_tokens"].to_list() == [5, 0]


def test_simulated_view_ttl_expiry() -> None:
    recs = two_sessions((0.0, 10.0))
    expired = rows(analyze_requests(recs, cache_model=ExactCache(ttl=5.0), view="simulated", **TINY))[1]
    alive = rows(analyze_requests(recs, cache_model=ExactCache(ttl=20.0), view="simulated", **TINY))[1]
    assert (expired["prefix_tokens"], expired["predicted_cached_tokens"], expired["divergence_token"]) == (
        0,
        0,
        None,
    )
    assert alive["predicted_cached_tokens"] == 5


def test_simulated_view_capacity_eviction() -> None:
    a = session([R1], ["ok"], name="A", times=[0.0])  # stores 14 tokens
    c = session([[user("zzzzzzzzz")]], ["yy"], name="C", times=[5.0])  # stores 10 + 1 + 3 = 14 tokens
    b = session([[sys("abc"), user("bye")]], [None], name="B", times=[10.0])
    roomy = rows(
        analyze_requests((*a, *c, *b), cache_model=ExactCache(capacity=100), view="simulated", **TINY)
    )
    tight = rows(
        analyze_requests((*a, *c, *b), cache_model=ExactCache(capacity=14), view="simulated", **TINY)
    )
    assert roomy[2]["predicted_cached_tokens"] == 5
    assert tight[2]["predicted_cached_tokens"] == 0  # A was the least recently used: evicted for C


def test_entry_delay_in_both_views() -> None:
    late = session([R1, R2], ["ok", None], times=[0.0, 3.0])
    early = session([R1, R2], ["ok", None], times=[0.0, 2.0])
    for view in ("consecutive", "simulated"):
        model = ExactCache(delay=3.0)
        assert (
            rows(analyze_requests(late, cache_model=model, view=view, **TINY))[1]["predicted_cached_tokens"]
            == 14
        )
        assert (
            rows(analyze_requests(early, cache_model=model, view=view, **TINY))[1]["predicted_cached_tokens"]
            == 0
        )


def test_ttl_applies_in_the_consecutive_view_and_is_ignored_without_timestamps() -> None:
    timed = session([R1, R2], ["ok", None], times=[0.0, 100.0])
    untimed = session([R1, R2], ["ok", None])
    model = ExactCache(ttl=60.0)
    assert rows(analyze_requests(timed, cache_model=model, **TINY))[1]["predicted_cached_tokens"] == 0
    result = analyze_requests(untimed, cache_model=model, provider="deepseek", **TINY)
    assert rows(result)[1]["predicted_cached_tokens"] == 14
    assert result.notes == (
        "some records have no timestamp: the analysis ignores TTL expiry and entry delays",
    )


# ---------------------------------------------------------------------------------------------------
# Anthropic through the engine


def test_anthropic_automatic_breakpoints_reads_and_writes() -> None:
    layouts = [
        [("persona", None), ("current", None)],
        [("persona", None), ("history", None), ("history", None), ("current", None)],
    ]
    recs = session([R1, R2], ["ok", None], layouts=layouts, times=[0.0, 1.0])
    r1, r2 = rows(
        analyze_requests(
            recs, provider="anthropic", cache_model=resolve_cache_model("anthropic", min_tokens=1), **TINY
        )
    )
    # R1: breakpoint at the end of the head (4 tokens): nothing read, 4 written
    assert (r1["predicted_cached_tokens"], r1["predicted_cache_write_tokens"]) == (0, 4)
    # R2: breakpoints at 4 (head) and 14 (end of the history); reads the entry at 4, writes 10
    assert (r2["predicted_cached_tokens"], r2["predicted_cache_write_tokens"]) == (4, 10)
    assert r2["prefix_tokens"] == 4  # only the head was stored by R1


def test_anthropic_body_with_top_level_system() -> None:
    body = {
        "model": "claude-sonnet-4-5",
        "system": [{"type": "text", "text": "abc", "cache_control": {"type": "ephemeral"}}],
        "messages": [user("hello")],
    }
    changed = {**body, "messages": [user("help")]}
    model = resolve_cache_model("anthropic", min_tokens=1)
    r1, r2 = rows(analyze_requests(records_from_requests([body, changed]), cache_model=model, **TINY))
    assert (r1["prompt_tokens"], r1["predicted_cache_write_tokens"]) == (11, 4)
    # only the system prompt (4 tokens) was stored, and R2 continues it: a read, no divergence
    assert (r2["prefix_tokens"], r2["predicted_cached_tokens"], r2["divergence_token"]) == (4, 4, None)
    # with automatic caching (top-level cache_control) R1 also stores its whole prompt
    auto = [
        {**body, "cache_control": {"type": "ephemeral"}},
        {**changed, "cache_control": {"type": "ephemeral"}},
    ]
    r1, r2 = rows(analyze_requests(records_from_requests(auto), cache_model=model, **TINY))
    assert (r1["predicted_cache_write_tokens"], r2["prefix_tokens"], r2["predicted_cached_tokens"]) == (
        11,
        8,
        4,
    )
    assert (r2["predicted_cache_write_tokens"], r2["divergence_token"]) == (10 - 4, 8)
    assert (r2["divergence_message"], r2["divergence_role"]) == (0, "user")  # index into the body's messages
    assert r2["model"] == "claude-sonnet-4-5"


# ---------------------------------------------------------------------------------------------------
# frames, problems, configuration


def test_frames_have_the_documented_schema_and_composition_adds_up() -> None:
    tools = [{"type": "function", "function": {"name": "ab"}}]
    layouts = [[("identity", "card"), ("current", None)], None]
    items: list[Any] = [({"messages": R1, "tools": tools}, layouts[0]), {"messages": R2, "tools": tools}]
    result = analyze_requests(records_from_requests(items), provider="exact", **TINY)
    assert tuple(result.requests.columns) == REQUEST_COLUMNS
    assert tuple(result.requests.columns[: len(REQUIRED)]) == REQUIRED
    assert tuple(result.composition.columns) == COMPOSITION_COLUMNS
    assert tuple(result.problems.columns) == ("file", "line", "reason")
    totals = (
        result.composition.group_by("index").agg(pl.col("tokens").sum()).sort("index")["tokens"].to_list()
    )
    assert totals == result.requests["prompt_tokens"].to_list() == [14, 23]
    first = (
        result.composition.filter(pl.col("index") == 0)
        .select("slot", "key", "start", "tokens", "message", "role")
        .rows()
    )
    assert first == [
        ("tools", None, 0, 3, None, None),
        ("identity", "card", 3, 4, 0, "system"),
        ("current", None, 7, 6, 1, "user"),
        ("generation", None, 13, 1, None, None),
    ]
    second_slots = result.composition.filter(pl.col("index") == 1)["slot"].to_list()
    assert second_slots == ["tools", "system", "user", "assistant", "user", "generation"]
    assert result.config["cache_model"] == "exact" and result.config["view"] == "consecutive"
    assert (result.tokenizer, result.render, result.provider) == ("chars", "tiny", "exact")


def test_untokenizable_request_is_a_problem_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    bad = {"messages": [{"role": "narrator", "content": "once upon a time"}]}
    path.write_text(
        "\n".join(json.dumps(x) for x in ({"messages": R1}, bad, "oops")) + "\n", encoding="utf-8"
    )
    result = analyze(path, provider="exact", **TINY)
    assert result.requests["line"].to_list() == [1]
    problems = result.problems.rows()
    assert problems[0][:2] == (str(path), 3) and "expected a JSON object" in problems[0][2]
    assert problems[1][:2] == (str(path), 2)
    assert "log#1: cannot tokenize" in problems[1][2] and "narrator" in problems[1][2]


def test_reported_usage_columns(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    call = {
        "request": {"model": "deepseek-chat", "messages": R1},
        "response": {
            "choices": [{"message": bot("ok")}],
            "usage": {
                "prompt_tokens": 12,
                "completion_tokens": 4,
                "prompt_cache_hit_tokens": 0,
                "prompt_cache_miss_tokens": 12,
            },
        },
        "timestamp": 5,
    }
    path.write_text(json.dumps(call) + "\n" + json.dumps({"messages": R2}) + "\n", encoding="utf-8")
    result = analyze([path], provider="exact", **TINY)
    first, second = rows(result)
    assert (
        first["reported_prompt_tokens"],
        first["reported_cached_tokens"],
        first["reported_completion_tokens"],
    ) == (12, 0, 4)
    assert (first["model"], first["timestamp"], first["completion_tokens"]) == ("deepseek-chat", 5.0, 3)
    assert second["reported_prompt_tokens"] is None and second["completion_tokens"] is None


def test_bad_arguments() -> None:
    recs = session([R1], [None])
    with pytest.raises(ValueError, match="unknown view 'sideways'"):
        analyze_requests(recs, view="sideways", **TINY)
    with pytest.raises(ValueError, match="unknown provider 'acme'"):
        analyze_requests(recs, provider="acme", **TINY)
    empty = analyze_requests([], provider="exact", **TINY)
    assert empty.requests.height == 0 and tuple(empty.requests.columns) == REQUEST_COLUMNS


def test_plain_bodies_are_one_session() -> None:
    result = analyze_requests([{"messages": R1}, ({"messages": R2}, None)], provider="exact", **TINY)
    assert result.requests.select("session", "index").rows() == [("requests", 0), ("requests", 1)]


def test_an_unrecognised_provider_gets_the_generic_rules_with_a_note() -> None:
    recs = session([R1, R2], ["ok", None])
    result = analyze_requests(recs)  # nothing names or recognises a provider
    assert (result.provider, result.tokenizer, result.cache_model.name) == ("generic", "o200k_base", "prefix")
    assert result.provider_assumed
    assert any("analyzed with the 'generic' rules" in n for n in result.notes)
    # exact prefix, no unit: the shared prefix is cached token for token (DeepSeek's 64-token unit
    # would give 0 on prompts this short)
    prefix = result.requests["prefix_tokens"][1]
    assert 0 < prefix < 64 and result.requests["predicted_cached_tokens"].to_list() == [0, prefix]


def test_a_recognised_provider_is_not_assumed() -> None:
    recs = session([R1, R2], ["ok", None])
    result = analyze_requests(recs, provider="deepseek")
    assert (result.tokenizer, result.cache_model.name) == ("deepseek", "unit-prefix")
    assert not result.provider_assumed
    assert not any("analyzed with the" in n for n in result.notes)


# ---------------------------------------------------------------------------------------------------
# property: the consecutive view's shared prefix is the naive token comparison


_msg = st.builds(
    lambda role, text: {"role": role, "content": text},
    st.sampled_from(["user", "assistant", "system"]),
    st.text(alphabet="ab <|>\n語", max_size=12),
)


@pytest.mark.slow
@given(
    base=st.lists(_msg, min_size=1, max_size=4),
    grow=st.lists(st.lists(_msg, min_size=0, max_size=2), min_size=1, max_size=3),
    answers=st.lists(st.text(alphabet="ab c", max_size=6), min_size=4, max_size=4),
    edit=st.booleans(),
)
@settings(max_examples=25, deadline=None)
def test_consecutive_prefix_equals_naive_comparison(
    base: list[dict[str, Any]], grow: list[list[dict[str, Any]]], answers: list[str], edit: bool
) -> None:
    bodies = [list(base)]
    for extra in grow:
        bodies.append(bodies[-1] + extra)
    if edit:
        bodies[-1] = [
            {"role": bodies[-1][0]["role"], "content": bodies[-1][0]["content"] + "x"},
            *bodies[-1][1:],
        ]
    completions = [bot(a) for a in answers[: len(bodies)]]
    recs = records_from_requests([{"messages": b} for b in bodies], completions=completions)
    result = analyze_requests(recs, provider="exact", tokenizer="cl100k_base", render="chatml")
    naive = RequestTokenizer("chatml", "cl100k_base")
    for k in range(1, len(bodies)):
        prev = naive.tokenize_naive({"messages": bodies[k - 1]}, completion=completions[k - 1]).tokens
        cur = naive.tokenize_naive({"messages": bodies[k]}).tokens
        n = min(len(prev), len(cur))
        mismatch = np.flatnonzero(prev[:n] != cur[:n])
        lcp = int(mismatch[0]) if mismatch.size else n
        row = result.requests.row(k, named=True)
        assert row["prompt_tokens"] == len(cur)
        assert row["prefix_tokens"] == lcp
        assert row["predicted_cached_tokens"] == lcp
        assert (row["divergence_token"] is not None) == (lcp < len(prev) and lcp < len(cur))


def test_divergence_names_the_changed_message_not_the_unchanged_one_a_token_straddles() -> None:
    """System messages are joined without a special token between them, so BPE can merge the end of an
    unchanged block with the start of the next one: the first divergent token then starts inside the
    unchanged block. The divergence must name the block that changed."""
    from promptkit.analysis import analyze_requests, records_from_requests

    rules = "Answer in one short paragraph. " * 20  # ends with a space: it merges with what follows
    first = {
        "messages": [
            {"role": "system", "content": rules},
            {"role": "system", "content": "Memory: likes tea"},
            {"role": "user", "content": "hi"},
        ]
    }
    second = {
        "messages": [
            {"role": "system", "content": rules},
            {"role": "system", "content": "Mood: sleepy"},
            {"role": "user", "content": "hi"},
        ]
    }
    layout = [("identity", "rules"), ("turn-context", "memories"), ("current", None)]
    records = records_from_requests([(first, layout), (second, layout)])
    result = analyze_requests(records, provider="deepseek", cache_model="exact")
    row = result.requests.row(1, named=True)
    tok = result.composition.filter((pl.col("index") == 1) & (pl.col("key") == "rules")).row(0, named=True)
    # the divergent token starts inside the unchanged rules block (the straddle this test is about) ...
    assert tok["start"] <= row["divergence_token"] < tok["start"] + tok["tokens"]
    # ... and the divergence is attributed to the block that changed
    assert (row["divergence_message"], row["divergence_anchor"], row["divergence_key"]) == (
        1,
        "turn-context",
        "memories",
    )


def _reasoner_trajectory(tmp_path: Path) -> Path:
    """A two-call mini-swe-agent trajectory of deepseek-reasoner whose answers carry reasoning_content."""

    def call(k: int, reasoning: str) -> dict:
        return {
            "role": "assistant",
            "content": f"THOUGHT: step {k}",
            "reasoning_content": reasoning,
            "tool_calls": [
                {
                    "id": f"c{k}",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "ls"}'},
                }
            ],
            "extra": {
                "response": {
                    "created": 1_700_000_000 + k,
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1},
                }
            },
        }

    messages = [
        {"role": "system", "content": "You are a helpful assistant. " * 30},
        {"role": "user", "content": "Fix the bug. " * 30},
        call(0, "Let me look at the files first. " * 20),
        {"role": "tool", "tool_call_id": "c0", "content": "a.py b.py"},
        call(1, "Now open a.py. " * 20),
    ]
    path = tmp_path / "reasoner.traj.json"
    path.write_text(
        json.dumps(
            {
                "info": {"config": {"model": {"model_name": "deepseek/deepseek-reasoner"}}},
                "messages": messages,
            }
        ),
        encoding="utf-8",
    )
    return path


def test_deepseek_reasoner_calls_use_thinking_mode_and_hit_through_the_reasoning(tmp_path: Path) -> None:
    """A thinking call's entry covers its reasoning; DeepSeek keeps the reasoning of the current turn in the
    next request, so the next call hits through it. The engine picks the thinking encoding by itself."""
    from promptkit.analysis import analyze
    from promptkit.providers.deepseek import THINKING_RENDER, deepseek_thinking
    from promptkit.tokens.tokenizers import get_tokenizer

    path = _reasoner_trajectory(tmp_path)
    result = analyze(path, provider="deepseek", cache_model="exact")
    assert any(THINKING_RENDER in note for note in result.notes)
    first, second = result.requests.sort("index").iter_rows(named=True)
    # the second request shares the first prompt and the whole first answer, reasoning included
    assert second["prefix_tokens"] >= first["prompt_tokens"] + first["completion_tokens"] - 1
    reasoning_tokens = len(get_tokenizer("deepseek").encode("Let me look at the files first. " * 20))
    assert first["completion_tokens"] > reasoning_tokens
    # with the non-thinking encoding the reasoning is not rendered: the answer is shorter
    plain = analyze(path, provider="deepseek", render="deepseek-v3.2", cache_model="exact")
    assert (
        plain.requests.sort("index")["completion_tokens"][0]
        < first["completion_tokens"] - reasoning_tokens + 5
    )
    assert deepseek_thinking({"model": "deepseek-chat", "thinking": {"type": "enabled"}})


def test_a_note_says_when_anthropic_requests_have_no_breakpoint() -> None:
    from promptkit.analysis import analyze_requests, records_from_requests

    system = "You are a careful assistant. " * 300
    plain = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "hi"}]}
    marked = {
        "messages": [
            {
                "role": "system",
                "content": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
            },
            {"role": "user", "content": "hi"},
        ]
    }
    bare = analyze_requests(records_from_requests([plain, plain]), provider="anthropic")
    assert any("2 of 2 requests write no cache entry (breakpoint)" in n for n in bare.notes)
    assert bare.requests["predicted_cached_tokens"].sum() == 0
    with_breakpoint = analyze_requests(records_from_requests([marked, marked]), provider="anthropic")
    assert not any("write no cache entry" in n for n in with_breakpoint.notes)
    assert with_breakpoint.requests["predicted_cached_tokens"][1] > 0


def test_divergence_excerpts_show_what_the_cache_held_and_what_the_prompt_sent() -> None:
    from promptkit.analysis import analyze_requests, records_from_requests
    from promptkit.analysis.wire import EXCERPT_TOKENS

    head = "You are a careful assistant. " * 10
    first = {
        "messages": [
            {"role": "system", "content": head + "Memory: likes green tea"},
            {"role": "user", "content": "hi"},
        ]
    }
    second = {
        "messages": [
            {"role": "system", "content": head + "Mood: sleepy today"},
            {"role": "user", "content": "hi"},
        ]
    }
    result = analyze_requests(
        records_from_requests([first, second, second]),
        provider="exact",
        tokenizer="cl100k_base",
        render="chatml",
    )
    rows = result.requests.sort("index").rows(named=True)
    assert rows[0]["divergence_cached_text"] is None  # nothing cached yet
    assert "Memory" in rows[1]["divergence_cached_text"] and "Mood" in rows[1]["divergence_prompt_text"]
    assert "likes" not in rows[1]["divergence_prompt_text"]
    # the excerpt starts at the first divergent token and runs EXCERPT_TOKENS tokens (into the next message)
    assert rows[1]["divergence_cached_text"].startswith(" Memory")
    assert rows[1]["divergence_cached_text"].endswith("<|im_end|>") and EXCERPT_TOKENS == 12
    assert rows[2]["divergence_cached_text"] is None  # the same request again: no divergence


def test_the_result_reads_well_in_a_notebook() -> None:
    from promptkit.analysis import analyze_requests, records_from_requests

    body = {
        "messages": [
            {"role": "system", "content": "You are terse. " * 200},
            {"role": "user", "content": "hi"},
        ]
    }
    result = analyze_requests(
        records_from_requests([body, body]), provider="exact", tokenizer="cl100k_base", render="chatml"
    )
    prompt = result.requests["prompt_tokens"].sum()
    assert result.hit_ratio == result.requests["predicted_cached_tokens"].sum() / prompt
    text = repr(result)
    assert text.startswith("<AnalysisResult 2 requests in 1 session(s), predicted hit ratio ")
    assert f"{result.hit_ratio:.1%}" in text and "view='consecutive'" in text


@pytest.mark.parametrize("provider", ["deepseek", "openai"])
def test_lone_surrogates_are_mended_where_they_are_rendered(provider: str) -> None:
    # session "a" gets a lone surrogate in its second request and keeps it; its third answer holds one
    # too; session "b" holds one only in a field no render reads
    from promptkit.layout import RequestRecord

    def log(fix: bool) -> list[RequestRecord]:
        def text(s: str) -> str:
            return s.replace("\ud83d", "\ufffd").replace("\udc00", "\ufffd") if fix else s

        system = {"role": "system", "content": "You are careful. " * 10}
        broken = {"role": "user", "content": text("look: \ud83d here")}
        records = []
        messages: list[dict[str, Any]] = [system, {"role": "user", "content": "start"}]
        for k in range(4):
            if k == 1:
                messages = [*messages, broken]
            answer = {"role": "assistant", "content": text(f"answer {k}" + ("\udc00" if k == 2 else ""))}
            records.append(
                RequestRecord({"model": "m", "messages": messages}, "a", index=k, completion=answer)
            )
            messages = [*messages, answer, {"role": "user", "content": f"next {k}"}]
        body = {"model": "m", "messages": [system], "metadata": {"note": "\ud800"}}
        return [*records, RequestRecord(body, "b", index=0)]

    result = analyze_requests(log(fix=False), provider=provider)
    note = next(n for n in result.notes if "U+FFFD" in n)
    assert note.startswith("3 request(s)") and "a#1" in note  # a#1, a#2, a#3; not a#0, not b
    # the counts are those of the same log with U+FFFD written in
    expected = analyze_requests(log(fix=True), provider=provider)
    cols = ["prompt_tokens", "completion_tokens", "predicted_cached_tokens"]
    assert result.requests.select(cols).equals(expected.requests.select(cols))


@pytest.mark.parametrize("provider", ["deepseek", "openai"])
def test_a_lone_surrogate_in_the_completion_alone_is_mended(provider: str) -> None:
    # the request is clean and its answer holds one: the answer is mended, the request noted, and its
    # counts are those of the answer with U+FFFD written in
    from promptkit.layout import RequestRecord

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

    def log(answer: str) -> list[RequestRecord]:
        return [RequestRecord(body, "s", index=0, completion={"role": "assistant", "content": answer})]

    result = analyze_requests(log("an answer \ud800 here"), provider=provider)
    assert result.problems.height == 0
    [note] = [n for n in result.notes if "U+FFFD" in n]
    assert note.startswith("1 request(s)") and "s#0" in note
    expected = analyze_requests(log("an answer \ufffd here"), provider=provider)
    cols = ["prompt_tokens", "completion_tokens"]
    assert result.requests.select(cols).equals(expected.requests.select(cols))


def test_request_row_is_the_frame_schema() -> None:
    """The requests frame's columns and types are RequestRow's fields: names, order and polars types
    (strings, 64-bit integers, floats, booleans): the columns as they were before the frame was derived
    from the class, with the ruler's, the context text's and the inferred breakpoints added."""
    import attrs
    import polars as pl

    from promptkit.analysis.columns import RequestRow

    result = analyze("fixtures/real-logs/deepseek", view="simulated")
    assert (
        tuple(result.requests.columns) == REQUEST_COLUMNS == tuple(f.name for f in attrs.fields(RequestRow))
    )
    kinds = {pl.String: "s", pl.Int64: "i", pl.Float64: "f", pl.Boolean: "b"}
    assert "".join(kinds[t] for t in result.requests.dtypes) == "sifiiifiiissssisiiiiissssiifiissiisisibss"
    row = RequestRow(session="s", index=3, prompt_tokens=10)
    assert attrs.astuple(row)[:4] == ("s", 3, None, 10)


def test_a_profile_object_is_analyzed_as_given() -> None:
    # a profile (not hashable: its fields hold mappings) is accepted as well as a name; an evolved one
    # is used as it is: here Gemini's with ruler mode off, so the prompt stays the local count
    import attrs

    from promptkit.layout import RequestRecord, Usage
    from promptkit.providers.registry import get_provider

    body = {"model": "gemini-2.5-flash", "messages": [{"role": "user", "content": "hello there " * 40}]}
    record = RequestRecord(body, "s", index=0, usage=Usage(prompt_tokens=1000, cached_tokens=0))
    gemini = get_provider("gemini")
    by_name = analyze_requests([record], provider="gemini").requests
    by_object = analyze_requests([record], provider=gemini).requests
    local = analyze_requests([record], provider=attrs.evolve(gemini, exact_tokenizer=True)).requests
    assert by_name["prompt_tokens"][0] == by_object["prompt_tokens"][0] == 1000  # the reported prompt
    assert 0 < local["prompt_tokens"][0] < 1000


def test_the_causes_are_computed_once_and_held_by_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    import attrs

    from promptkit.analysis import causes as causes_module

    body = {"messages": [{"role": "user", "content": "hello there " * 30}]}
    result = analyze_requests([body, body], provider="exact")
    calls = []
    real = causes_module.explain_causes
    monkeypatch.setattr(causes_module, "explain_causes", lambda r, m: calls.append(r) or real(r, m))
    first = result.causes
    assert result.causes is first and len(calls) == 1  # held: the second read computes nothing
    assert calls[0] is result.requests  # the causes are explained from the frame
    assert first.equals(real(result.requests, result.cache_model))
    from promptkit.report import causes_by_cause

    causes_by_cause(result)
    assert len(calls) == 1  # the report reads what the result holds
    copy = attrs.evolve(result, notes=("changed",))
    assert copy.causes.height == first.height
    assert len(calls) == 2  # a modified copy starts without the held frame


def test_analyze_takes_analyze_requests_keywords_each_by_name() -> None:
    """``analyze`` names every keyword of ``analyze_requests`` (plus ``format`` and ``stream``) in its own
    signature, with the same defaults, instead of forwarding ``**kwargs``; a misspelt keyword is a
    TypeError at the call."""
    import inspect

    from promptkit.analysis.api import analyze, analyze_requests

    outer = inspect.signature(analyze).parameters
    inner = inspect.signature(analyze_requests).parameters
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in outer.values())
    assert set(outer) == (set(inner) - {"records"}) | {"paths", "format", "stream"}
    for name, param in inner.items():
        if name != "records":
            assert outer[name].default == param.default, name
    with pytest.raises(TypeError, match="provder"):
        analyze("fixtures/real-logs/deepseek", provder="deepseek")  # type: ignore[call-arg]
