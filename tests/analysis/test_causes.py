"""Tests for promptkit.analysis.causes: each cause out of a constructed log where it is the only cause,
the sum invariant (property test), the classification of changes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from promptkit.analysis.api import analyze_requests
from promptkit.analysis.causes import CAUSES, explain_causes, find_change, volatile_spans
from promptkit.layout import LayoutEntry, RequestRecord, Usage
from promptkit.providers.registry import get_provider, register_provider
from promptkit.providers.resolve import resolve_cache_model
from promptkit.tokens.cache_models import ExactCache, UnitPrefixCache
from tests.analysis.tiny import CharTokenizer, TinyRender

TINY: dict[str, Any] = {"tokenizer": CharTokenizer(), "render": TinyRender()}
LONG = "You are a careful assistant. " * 4


def sys(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def bot(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {}}}


def rec(
    body: Mapping[str, Any],
    index: int,
    *,
    session: str = "s",
    t: float | None = None,
    usage: Usage | None = None,
    layout: Sequence[tuple[str, str | None]] | None = None,
) -> RequestRecord:
    return RequestRecord(
        body,
        session=session,
        index=index,
        timestamp=t,
        usage=usage,
        layout=None if layout is None else tuple(LayoutEntry(s, k) for s, k in layout),
    )


def lost(causes: Any, row: int) -> dict[str, int]:
    """The non-zero lost_* columns of a row."""
    r = causes.row(row, named=True)
    return {c: r[f"lost_{c}"] for c in CAUSES if r[f"lost_{c}"]}


def explain(records: list[RequestRecord], **kwargs: Any) -> Any:
    kwargs.setdefault("provider", "exact")
    return explain_causes(analyze_requests(records, **TINY, **kwargs))


def only(causes: Any, row: int, cause: str) -> None:
    r = causes.row(row, named=True)
    assert lost(causes, row) == {cause: r["uncached_tokens"]}
    assert r["uncached_tokens"] > 0
    assert r["cause"] == cause


BASE = {"messages": [sys(LONG), user("hello")]}


def test_cold_start() -> None:
    causes = explain([rec(BASE, 0)])
    only(causes, 0, "cold_start")
    assert causes["uncached_tokens"][0] == len(LONG) + len("hello") + 3  # three marker tokens


def test_new_tokens_when_the_conversation_only_grows() -> None:
    longer = {"messages": [*BASE["messages"], bot("hi"), user("bye")]}
    only(explain([rec(BASE, 0), rec(longer, 1)]), 1, "new_tokens")


def test_model_switch() -> None:
    a = {**BASE, "model": "m-1"}
    b = {**BASE, "model": "m-2"}
    causes = explain([rec(a, 0), rec(b, 1)])
    only(causes, 1, "model_switch")
    assert causes["change_detail"][1] == "m-1 -> m-2"


def test_tools_changed() -> None:
    a = {**BASE, "tools": [tool("a"), tool("b")]}
    b = {**BASE, "tools": [tool("a"), tool("c")]}
    only(explain([rec(a, 0), rec(b, 1)]), 1, "tools_changed")


def test_reordered_tools() -> None:
    a = {**BASE, "tools": [tool("a"), tool("b")]}
    b = {**BASE, "tools": [tool("b"), tool("a")]}
    causes = explain([rec(a, 0), rec(b, 1)])
    only(causes, 1, "reordered")
    assert "tool order" in causes["change_detail"][1]


def test_reordered_json_keys() -> None:
    a = {"messages": [sys(LONG), user('{"a": 1, "b": 2}')]}
    b = {"messages": [sys(LONG), user('{"b": 2, "a": 1}')]}
    causes = explain([rec(a, 0), rec(b, 1)])
    only(causes, 1, "reordered")
    assert causes["change_detail"][1].startswith("json keys")


def test_system_changed() -> None:
    b = {"messages": [sys(LONG.replace("careful", "helpful")), user("hello")]}
    only(explain([rec(BASE, 0), rec(b, 1)]), 1, "system_changed")


def test_message_edited() -> None:
    a = {"messages": [sys(LONG), user("fix the bug in parser.py"), bot("done"), user("thanks")]}
    b = {"messages": [sys(LONG), user("fix the bug in lexer.py!"), bot("done"), user("thanks")]}
    only(explain([rec(a, 0), rec(b, 1)]), 1, "message_edited")


def test_message_removed_is_an_edit() -> None:
    a = {"messages": [sys(LONG), user("one"), bot("two"), user("three")]}
    b = {"messages": [sys(LONG), bot("two"), user("three")]}
    causes = explain([rec(a, 0), rec(b, 1)])
    only(causes, 1, "message_edited")
    assert "removed" in causes["change_detail"][1]


def test_compaction() -> None:
    history = [m for k in range(5) for m in (user(f"question {k} " * 5), bot(f"answer {k} " * 5))]
    a = {"messages": [sys(LONG), *history, user("next")]}
    b = {"messages": [sys(LONG), user("summary of the work so far"), user("next")]}
    only(explain([rec(a, 0), rec(b, 1)]), 1, "compaction")


def test_volatile_value() -> None:
    a = {"messages": [sys("Now: 2026-12-03T09:45:00Z. " + LONG), user("hello")]}
    b = {"messages": [sys("Now: 2026-12-03T09:47:31Z. " + LONG), user("hello")]}
    causes = explain([rec(a, 0), rec(b, 1)])
    only(causes, 1, "volatile_value")
    assert causes["change_detail"][1].startswith("timestamp: messages[0] char 5")


def test_whitespace() -> None:
    # same length: a change that lengthens the prompt charges the surplus to new_tokens (documented)
    b = {"messages": [sys(LONG.replace("careful ", "careful\t")), user("hello")]}
    only(explain([rec(BASE, 0), rec(b, 1)]), 1, "whitespace")


def test_layout_names_anchor_and_contributor() -> None:
    layout = [("identity", "clock"), ("current", None)]
    a = {"messages": [sys("Now: 2026-12-03T09:45:00Z. " + LONG), user("hello")]}
    b = {"messages": [sys("Now: 2026-12-03T09:47:31Z. " + LONG), user("hello")]}
    row = explain([rec(a, 0, layout=layout), rec(b, 1, layout=layout)]).row(1, named=True)
    assert (row["cause_slot"], row["cause_key"]) == ("identity", "clock")


def test_ttl_expiry_with_idle_gap() -> None:
    causes = explain(
        [rec(BASE, 0, t=0.0), rec(BASE, 1, t=100.0)], provider=None, cache_model=ExactCache(ttl=10)
    )
    only(causes, 1, "ttl_expiry")
    assert causes["idle_seconds"][1] == 100.0
    assert causes["gap_seconds"][1] == 100.0


def test_no_expiry_within_the_ttl() -> None:
    causes = explain(
        [rec(BASE, 0, t=0.0), rec(BASE, 1, t=5.0)], provider=None, cache_model=ExactCache(ttl=10)
    )
    assert causes["uncached_tokens"][1] == 0


def test_eviction() -> None:
    other = {"messages": [sys("Something else entirely, " * 6), user("x")]}
    size = len(LONG) + len("hello") + 3
    records = [
        rec(BASE, 0, session="a", t=0.0),
        rec(other, 0, session="b", t=1.0),
        rec(BASE, 1, session="a", t=2.0),
    ]
    causes = explain(records, provider=None, cache_model=ExactCache(capacity=size), view="simulated")
    row = causes.with_row_index("row").filter((causes["session"] == "a") & (causes["index"] == 1))["row"][0]
    only(causes, int(row), "eviction")


def test_below_minimum() -> None:
    causes = explain([rec(BASE, 0), rec(BASE, 1)], provider=None, cache_model=resolve_cache_model("openai"))
    only(causes, 1, "below_minimum")


def test_granularity() -> None:
    causes = explain([rec(BASE, 0), rec(BASE, 1)], provider=None, cache_model=UnitPrefixCache(unit=64))
    only(causes, 1, "granularity")
    assert causes["uncached_tokens"][1] == causes["prompt_tokens"][1] % 64


#: The ideal cache with the tokenizer declared the provider's own (positions are not converted), and
#: the same declared best effort: registered for this module's tests only.
EXACT_UNITS, BEST_EFFORT = "test-exact-units", "test-best-effort"


@pytest.fixture(autouse=True)
def _test_profiles() -> Any:
    from promptkit.providers import registry

    exact = register_provider(
        attrs.evolve(get_provider("exact"), name=EXACT_UNITS, exact_tokenizer=True), replace=True
    )
    register_provider(attrs.evolve(exact, name=BEST_EFFORT, best_effort=True), replace=True)
    yield
    registry._REGISTRY.pop(EXACT_UNITS, None)
    registry._REGISTRY.pop(BEST_EFFORT, None)


def test_provider_miss_only_on_a_best_effort_cache() -> None:
    prompt = explain([rec(BASE, 0)])["prompt_tokens"][0]
    records = [rec(BASE, 0, usage=Usage(prompt, 1, 0)), rec(BASE, 1, usage=Usage(prompt, 1, 0))]
    causes = explain(records, provider=BEST_EFFORT)
    only(causes, 1, "provider_miss")
    assert causes["basis"][1] == "reported"
    # the same shortfall on a deterministic cache: a change the log does not show, in the head here
    # (the reads fell back to 0, the start of the head)
    causes = explain(records, provider=EXACT_UNITS)
    only(causes, 1, "head_changed")
    assert causes["change_class"][1] == "head_changed"
    assert "fell back to 0 tokens" in causes["change_detail"][1]


def test_provider_miss_where_a_calibration_learnt_it() -> None:
    from promptkit.analysis.calibration import Calibration, apply_calibration

    prompt = explain([rec(BASE, 0)])["prompt_tokens"][0]
    records = [rec(BASE, 0, usage=Usage(prompt, 1, 0)), rec(BASE, 1, usage=Usage(prompt, 1, 0))]
    result = analyze_requests(records, provider=EXACT_UNITS, **TINY)
    assert explain_causes(result)["cause"][1] == "head_changed"
    learnt = apply_calibration(result, Calibration(EXACT_UNITS, 0.5))
    only(explain_causes(learnt), 1, "provider_miss")
    # a calibration that learnt nothing is missed (rate 0) leaves it a change the log does not show
    assert (
        explain_causes(apply_calibration(result, Calibration(EXACT_UNITS, 0.0)))["cause"][1] == "head_changed"
    )


def test_shortfall_inside_the_history_is_history_rewritten() -> None:
    longer = {"messages": [*BASE["messages"], {"role": "assistant", "content": "ok"}, user("more " * 40)]}
    first = explain([rec(BASE, 0)], provider=EXACT_UNITS)
    prompt = int(first["prompt_tokens"][0])
    head = int(analyze_requests([rec(BASE, 0)], provider=EXACT_UNITS, **TINY).requests["head_end_tokens"][0])
    assert 0 < head < prompt - 5
    both = explain(
        [rec(BASE, 0, usage=Usage(prompt, 1, 0)), rec(longer, 1, usage=Usage(prompt + 60, 1, prompt - 5))],
        provider=EXACT_UNITS,
    )
    r = both.row(1, named=True)
    assert r["lost_history_rewritten"] == 5 and r["lost_provider_miss"] == 0
    assert f"fell back to {prompt - 5:,} tokens, inside the history" in r["change_detail"]


def test_unexplained_is_the_prompt_length_difference() -> None:
    prompt = explain([rec(BASE, 0)], provider=EXACT_UNITS)["prompt_tokens"][0]
    causes = explain([rec(BASE, 0), rec(BASE, 1, usage=Usage(prompt + 7, 1, prompt))], provider=EXACT_UNITS)
    only(causes, 1, "unexplained")
    assert causes["uncached_tokens"][1] == 7


def test_ruler_mode_puts_the_prompt_in_provider_units() -> None:
    # cl100k is not the ideal cache's tokenizer: the reported count is the ruler, and a call that
    # keeps the whole previous prompt reads it all, in the provider's units
    prompt = explain([rec(BASE, 0)])["prompt_tokens"][0]
    longer = {"messages": [*BASE["messages"], {"role": "assistant", "content": "ok"}, user("more")]}
    result = analyze_requests(
        [
            rec(BASE, 0, usage=Usage(prompt + 7, 1, 0)),
            rec(longer, 1, usage=Usage(prompt + 30, 1, prompt + 7)),
        ],
        provider="exact",
        **TINY,
    )
    q = result.requests
    assert q["prompt_tokens"].to_list() == [prompt + 7, prompt + 30]
    assert q["predicted_cached_tokens"][1] == prompt + 7
    assert q["position_basis"].to_list() == ["exact", "exact"]
    assert explain_causes(result)["lost_unexplained"].to_list() == [0, 0]


def test_reported_surplus_comes_off_the_first_causes() -> None:
    prompt = explain([rec(BASE, 0)])["prompt_tokens"][0]
    causes = explain([rec(BASE, 0, usage=Usage(prompt, 1, 32))])
    assert lost(causes, 0) == {"cold_start": prompt - 32}


EDITED = {
    "messages": [sys(LONG.replace("careful", "helpful")), user("hello"), bot("hi"), user("more text here")]
}


@pytest.mark.parametrize(
    ("surplus", "expected"),
    [
        (0, {"system_changed": 113, "new_tokens": 19}),
        (20, {"system_changed": 93, "new_tokens": 19}),  # all of it off the change, which comes first
        (113, {"new_tokens": 19}),
        (120, {"new_tokens": 12}),  # past the change: off the tokens that follow it
    ],
)
def test_reported_surplus_comes_off_the_causes_in_prompt_order(
    surplus: int, expected: dict[str, int]
) -> None:
    # predicted: 11 tokens cached (the system marker and "You are a "), then the edited system prompt
    # up to what the cache held (system_changed), then the appended turn (new_tokens)
    predicted = explain([rec(BASE, 0), rec(EDITED, 1)])
    assert lost(predicted, 1) == {"system_changed": 113, "new_tokens": 19}
    prompt, cached = predicted["prompt_tokens"][1], 11
    causes = explain([rec(BASE, 0), rec(EDITED, 1, usage=Usage(prompt, 1, cached + surplus))])
    assert lost(causes, 1) == expected
    assert causes["uncached_tokens"][1] == prompt - cached - surplus


def test_reported_surplus_takes_a_provider_cause_before_the_new_tokens() -> None:
    # an expired entry (ttl_expiry, right after the cached point) and the appended turn (new_tokens)
    def run(reported_cached: int) -> dict[str, int]:
        records = [rec(BASE, 0, t=0.0), rec(EDITED, 1, t=100.0, usage=Usage(143, 1, reported_cached))]
        return lost(explain(records, provider=None, cache_model=ExactCache(ttl=10)), 1)

    assert run(0) == {"ttl_expiry": 11, "new_tokens": 132}
    assert run(5) == {"ttl_expiry": 6, "new_tokens": 132}
    assert run(20) == {"new_tokens": 123}


def test_a_later_request_that_shares_no_token_with_the_cache_is_a_cold_start() -> None:
    # the second request of the session starts with a user marker where the cache holds a system one:
    # not one token is shared, so nothing of this prefix was ever cached (cold start, not new tokens)
    other = {"messages": [user("something else")]}
    causes = explain([rec(BASE, 0), rec(other, 1)])
    only(causes, 1, "cold_start")


def test_compaction_is_a_shrink_below_nine_tenths_of_the_characters() -> None:
    # same number of messages, one rewritten: 30% fewer characters is a compaction, not an edit
    old = {"messages": [user("a" * 100)]}
    assert find_change(old, {"messages": [user("b" * 70)]}, 0).cls == "compaction"
    # the boundary: exactly nine tenths is an edit, one character less a compaction
    assert find_change(old, {"messages": [user("b" * 90)]}, 0).cls == "message_edited"
    assert find_change(old, {"messages": [user("b" * 89)]}, 0).cls == "compaction"
    # through the whole analysis too
    a = {"messages": [sys(LONG), user("question " * 20)]}
    b = {"messages": [sys(LONG), user("summary " * 12)]}
    only(explain([rec(a, 0), rec(b, 1)]), 1, "compaction")


def test_provider_diagnostics_are_ingested() -> None:
    b = {"messages": [sys(LONG.replace("careful", "helpful")), user("hello")]}
    meta = {"diagnostics": {"cache_miss_reason": {"type": "system_changed", "cache_missed_input_tokens": 90}}}
    records = [rec(BASE, 0), RequestRecord(b, session="s", index=1, meta=meta)]
    result = analyze_requests(records, provider="exact", **TINY)
    assert result.requests["provider_miss_reason"].to_list() == [None, "system_changed"]
    assert result.requests["provider_missed_tokens"].to_list() == [None, 90]
    from promptkit.report.causes import diagnostics_comparison

    assert diagnostics_comparison(result)["agrees"].to_list() == [True]


# ------------------------------------------------------------------------------ classification


@pytest.mark.parametrize(
    ("old", "new", "cls", "kind"),
    [
        (
            "id 3f2b8c1e-1111-4a4a-8b8b-0123456789ab done",
            "id 9a2b8c1e-2222-4a4a-8b8b-0123456789ab done",
            "volatile_value",
            "uuid",
        ),
        ("date 2026-12-03 ok", "date 2026-12-04 ok", "volatile_value", "date"),
        ("at 1764755100 ok", "at 1764755161 ok", "volatile_value", "epoch"),
        ("turn 7 of the task", "turn 8 of the task", "volatile_value", "counter"),
        ("a\nb", "a\r\nb", "whitespace", "whitespace"),
        ("please fix it", "please test it", "message_edited", None),
    ],
)
def test_find_change_classes(old: str, new: str, cls: str, kind: str | None) -> None:
    change = find_change({"messages": [user(old)]}, {"messages": [user(new)]}, 0)
    assert (change.cls, change.kind) == (cls, kind)


def test_volatile_spans_do_not_overlap() -> None:
    spans = volatile_spans("2026-12-03T09:45:00Z and 2026-12-03 and 42")
    assert [k for _, _, k in spans] == ["timestamp", "date", "counter"]


# ------------------------------------------------------------------------------- the invariant

_OPS = st.sampled_from(["append", "edit", "system", "tools", "same", "shrink", "stamp"])


def _evolve(messages: list[dict[str, Any]], op: str, k: int) -> tuple[list[dict[str, Any]], list[str]]:
    tools = ["a", "b"] if k % 2 else ["b", "a"]
    if op == "append":
        return [*messages, bot(f"answer {k}"), user(f"q{k}")], tools
    if op == "edit" and len(messages) > 1:
        return [*messages[:1], user(f"edited {k}"), *messages[2:]], tools
    if op == "system":
        return [sys(f"System v{k}. " + LONG), *messages[1:]], tools
    if op == "shrink" and len(messages) > 3:
        return [messages[0], messages[-1]], tools
    if op == "stamp":
        return [sys(f"Now 2026-12-0{k % 9 + 1}T10:00:00Z. " + LONG), *messages[1:]], tools
    return messages, tools


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(
    ops=st.lists(_OPS, min_size=1, max_size=7),
    reported=st.lists(
        st.one_of(st.none(), st.tuples(st.integers(-5, 5), st.integers(0, 400))), min_size=8, max_size=8
    ),
    model=st.sampled_from(["exact", "deepseek", "openai", "ttl"]),
    gaps=st.lists(st.floats(0, 50), min_size=8, max_size=8),
)
def test_causes_add_up_to_the_uncached_tokens(
    ops: list[str], reported: list[tuple[int, int] | None], model: str, gaps: list[float]
) -> None:
    messages = [sys(LONG), user("start")]
    tools = ["a", "b"]
    bodies = [(messages, tools)]
    for k, op in enumerate(ops):
        messages, tools = _evolve(messages, op, k)
        bodies.append((messages, tools))
    cache = {
        "exact": ExactCache(),
        "deepseek": UnitPrefixCache(unit=16),
        "openai": resolve_cache_model("openai", min_tokens=64, step=16),
        "ttl": ExactCache(ttl=20),
    }[model]
    t = 0.0
    records = []
    for i, (msgs, tl) in enumerate(bodies):
        t += gaps[i]
        body = {"messages": msgs, "tools": [tool(n) for n in tl]}
        records.append(rec(body, i, t=t))
    first = analyze_requests(records, cache_model=cache, **TINY).requests
    with_usage = []
    for r, p, spec in zip(records, first["prompt_tokens"], reported, strict=False):
        usage = None if spec is None else Usage(max(0, p + spec[0]), 1, min(spec[1], max(0, p + spec[0])))
        with_usage.append(
            RequestRecord(r.request, session="s", index=r.index, timestamp=r.timestamp, usage=usage)
        )
    causes = explain_causes(analyze_requests(with_usage, cache_model=cache, **TINY))
    total = causes.select(sum(causes[f"lost_{c}"] for c in CAUSES).alias("s"))["s"]
    assert total.to_list() == causes["uncached_tokens"].to_list()
    for c in CAUSES:
        if c != "unexplained":
            assert (causes[f"lost_{c}"] >= 0).all(), c
    # without usage the unexplained column stays 0: our own prediction is fully explained
    for row in causes.filter(causes["basis"] == "predicted").iter_rows(named=True):
        assert row["lost_unexplained"] == 0


# ------------------------------------------------------------------------------- Anthropic rules


def _anthropic_body(ttl: str | None = None) -> dict[str, Any]:
    cc: dict[str, Any] = {"type": "ephemeral"} if ttl is None else {"type": "ephemeral", "ttl": ttl}
    return {
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": LONG, "cache_control": cc}]},
            user("hello"),
        ]
    }


def test_anthropic_expiry_after_five_minutes() -> None:

    records = [rec(_anthropic_body(), 0, t=0.0), rec(_anthropic_body(), 1, t=400.0)]
    result = analyze_requests(records, cache_model=resolve_cache_model("anthropic", min_tokens=0), **TINY)
    causes = explain_causes(result)
    row = causes.row(1, named=True)
    assert row["lost_ttl_expiry"] == result.requests["unexpired_cached_tokens"][1] > 0
    assert row["idle_seconds"] == 400.0
    # a 1-hour entry is still there after 400 s, and its write was priced as a 1-hour write
    hour = [rec(_anthropic_body("1h"), 0, t=0.0), rec(_anthropic_body("1h"), 1, t=400.0)]
    result = analyze_requests(hour, cache_model=resolve_cache_model("anthropic", min_tokens=0), **TINY)
    assert explain_causes(result)["lost_ttl_expiry"].to_list() == [0, 0]
    writes = result.requests.select("predicted_cache_write_tokens", "predicted_cache_write_1h_tokens").row(0)
    assert writes[0] == writes[1] > 0


def test_anthropic_below_minimum() -> None:

    records = [rec(_anthropic_body(), 0, t=0.0), rec(_anthropic_body(), 1, t=1.0)]
    causes = explain_causes(
        analyze_requests(records, cache_model=resolve_cache_model("anthropic", min_tokens=4096), **TINY)
    )
    only(causes, 1, "below_minimum")


def _volatile_spans_by_scan(text: str) -> list[tuple[int, int, str]]:
    """The definition: each pattern in order, each match kept unless it overlaps one kept before."""
    from promptkit.analysis.causes import VOLATILE_PATTERNS

    taken: list[tuple[int, int, str]] = []
    for kind, pattern in VOLATILE_PATTERNS:
        for m in pattern.finditer(text):
            s, e = m.span()
            if e > s and not any(s < te and ts < e for ts, te, _ in taken):
                taken.append((s, e, kind))
    return sorted(taken)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "2026-12-03",
                "T",
                " ",
                "09:45",
                ":00",
                "Z",
                "1767225600",
                "7",
                "ab",
                "deadbeef0123",
                "/",
                "-",
                "x",
            ]
        ),
        max_size=30,
    ).map("".join)
)
def test_volatile_spans_keep_the_first_pattern_that_matches_each_span(text: str) -> None:
    assert volatile_spans(text) == _volatile_spans_by_scan(text)


def test_a_session_that_changes_model_with_nothing_shared_is_a_model_switch() -> None:
    # a head estimated per model (Claude Code's opaque head) shares nothing across models: the call
    # after the switch reads nothing, and that is the model switch, not a cold start
    a = rec({**BASE, "model": "m-one"}, 0)
    b = rec({"model": "m-two", "messages": [user("other start"), *BASE["messages"]]}, 1)
    causes = explain([a, b])
    only(causes, 1, "model_switch")
    assert causes["change_detail"][1] == "m-one -> m-two"


def test_a_prompt_exactly_at_the_minimum_is_not_below_it() -> None:
    from promptkit.tokens.cache_models import PrefixCache

    p = analyze_requests([rec(BASE, 0)], provider="exact", **TINY).requests["prompt_tokens"][0]
    assert p % 64  # a tail under one unit: cached up to the last whole unit
    at = explain([rec(BASE, 0), rec(BASE, 1)], provider=None, cache_model=PrefixCache(min_tokens=p, unit=64))
    only(at, 1, "granularity")
    assert at.row(1, named=True)["lost_granularity"] == p % 64
    under = explain([rec(BASE, 0), rec(BASE, 1)], provider=None, cache_model=PrefixCache(min_tokens=p + 1, unit=64))
    only(under, 1, "below_minimum")
    assert under.row(1, named=True)["lost_below_minimum"] == p


# ------------------------------------------------------------------------------ OpenAI routing


def _codex_shaped(reads: list[int], *, edit_at: int | None = None) -> tuple[list[RequestRecord], list[int]]:
    """Calls shaped like a real Codex rollout on OpenAI: a long system prompt, each call appending the
    previous answer and a tool result, 5-15 s apart, with usage whose prompt is the local count (so
    positions are exact) and the given reported ``reads``; ``edit_at``: the call whose first tool
    result is edited (a change the log shows). Returns the records and each call's prompt tokens."""
    system = {"role": "system", "content": "You are a coding agent. Follow the repository rules. " * 320}
    messages: list[dict[str, Any]] = [system, {"role": "user", "content": "fix the failing test"}]
    records, prompts = [], []
    for i, read in enumerate(reads):
        body = {"model": "gpt-5.3-codex", "messages": [dict(m) for m in messages]}
        if edit_at is not None and i >= edit_at:
            body["messages"][3] = {**body["messages"][3], "content": "EDITED " + body["messages"][3]["content"]}
        n = int(analyze_requests([RequestRecord(body, "x", index=0)], provider="openai").requests["prompt_tokens"][0])
        prompts.append(n)
        answer = {"role": "assistant", "content": f"step {i}: running the tests again " * 30}
        records.append(RequestRecord(body, "s", index=i, timestamp=10.0 * i, completion=answer,
                                     usage=Usage(prompt_tokens=n, cached_tokens=read)))  # fmt: skip
        messages += [answer, {"role": "user", "content": f"tool output {i}: " + "ok " * 149}]
    return records, prompts


def test_a_fall_back_to_the_head_with_the_prompt_unchanged_is_a_routing_miss_on_openai() -> None:
    # as on real Codex rollouts: 10 s after a warm call, the reads fall back to a 2,560-token head while
    # nothing in the prompt changed: OpenAI routes by a hash of the prompt's start and the request met a
    # machine without the longer prefix (best effort), not a head_changed / history_rewritten
    records, prompts = _codex_shaped([0, 0, 0, 2560])
    records[1] = attrs.evolve(records[1], usage=attrs.evolve(records[1].usage, cached_tokens=1024 + (prompts[0] - 1024) // 128 * 128))
    records[2] = attrs.evolve(records[2], usage=attrs.evolve(records[2].usage, cached_tokens=1024 + (prompts[1] - 1024) // 128 * 128))  # fmt: skip
    result = analyze_requests(records, provider="openai")
    causes = explain_causes(result.requests, result.cache_model)
    row = causes.row(3, named=True)
    predicted = int(result.requests["predicted_cached_tokens"][3])
    assert predicted > 1024 + (prompts[2] - 1024) // 128 * 128  # the content allows the previous answer
    assert row["cause"] == "routing_miss" and row["lost_routing_miss"] == predicted - 2560
    assert row["lost_head_changed"] == row["lost_history_rewritten"] == row["lost_provider_miss"] == 0
    assert row["change_class"] is None and "fell back to 2,560 tokens" in row["change_detail"]
    assert causes["lost_unexplained"].sum() == 0


def test_a_routing_miss_needs_a_prefix_routed_cache_and_a_fall_back_before_the_previous_prompt() -> None:
    records, prompts = _codex_shaped([0, 0, 0, 2560])
    # the same cache without routing modelled: the best-effort shortfall stays a provider_miss
    bare = attrs.evolve(resolve_cache_model("openai"), routed_by=None)
    result = analyze_requests(records, provider="openai", cache_model=bare)
    assert explain_causes(result.requests, result.cache_model)["lost_routing_miss"].sum() == 0
    assert explain_causes(result.requests, result.cache_model)["lost_provider_miss"][3] > 0
    # reads that reach the previous prompt but not all of its answer: the answer's KV was not all
    # kept, a provider_miss, not a routing miss
    whole = 1024 + (prompts[2] - 1024) // 128 * 128
    assert whole < prompts[2]  # the previous prompt as the cache serves it, in its 128-token steps
    records, prompts = _codex_shaped([0, 0, 0, whole])
    result = analyze_requests(records, provider="openai")
    row = explain_causes(result.requests, result.cache_model).row(3, named=True)
    assert int(result.requests["predicted_cached_tokens"][3]) > whole
    assert row["lost_routing_miss"] == 0 and row["lost_provider_miss"] > 0


def test_a_shortfall_where_the_log_shows_a_change_is_that_change_not_a_routing_miss() -> None:
    records, _ = _codex_shaped([0, 0, 0, 2560], edit_at=3)
    result = analyze_requests(records, provider="openai")
    row = explain_causes(result.requests, result.cache_model).row(3, named=True)
    assert row["change_class"] == "message_edited" and row["lost_routing_miss"] == 0


# ------------------------------------------------------------------ a route that reports no reads


def _no_reads(cached: list[int]) -> Any:
    """A conversation of Kimi through a local Ollama as Codex logs it: every call's usage reports the
    prompt and ``cached`` (0 on every call where the route reports no cache read at all)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be Codex. " * 400}]
    records = []
    for i, read in enumerate(cached):
        messages = [*messages, {"role": "user", "content": f"step {i} " * 300}]
        body = {"model": "kimi-k2:1t-cloud", "messages": messages}
        n = int(analyze_requests([RequestRecord(body, "x", index=0)], provider="kimi").requests["prompt_tokens"][0])
        answer = {"role": "assistant", "content": f"done {i}"}
        records.append(RequestRecord(body, "k", index=i, timestamp=5.0 * i, completion=answer,
                                     usage=Usage(prompt_tokens=n, cached_tokens=read)))  # fmt: skip
        messages = [*messages, answer]
    return analyze_requests(records, provider="kimi")


def test_a_route_that_never_reports_a_read_says_so_and_the_difference_is_not_the_prompts_loss() -> None:
    from promptkit.analysis.causes import LAYOUT_CAUSES, unreported_sessions

    result = _no_reads([0, 0, 0])
    assert unreported_sessions(result.requests) == ["k"]
    (note,) = [n for n in result.notes if "may not report cache reads" in n]
    assert "'k', kimi-k2:1t-cloud" in note
    causes = explain_causes(result.requests, result.cache_model)
    allowed = int(result.requests["predicted_cached_tokens"].sum())
    assert allowed > 0 and causes["lost_reads_unreported"].sum() == allowed
    assert causes["lost_provider_miss"].sum() == 0
    assert sum(causes[f"lost_{c}"].sum() for c in LAYOUT_CAUSES) == 0
    assert causes["cause"][2] == "reads_unreported"


def test_one_reported_read_or_a_single_allowed_read_is_no_silent_route() -> None:
    from promptkit.analysis.causes import unreported_sessions

    some = _no_reads([0, 0, 1024])  # the route does report reads: its misses are misses
    assert unreported_sessions(some.requests) == []
    assert not [n for n in some.notes if "may not report cache reads" in n]
    assert explain_causes(some.requests, some.cache_model)["lost_reads_unreported"].sum() == 0
    one = _no_reads([0, 0])  # a single call the rules allow a read for may be a plain miss
    assert unreported_sessions(one.requests) == []


@pytest.mark.parametrize("rows", [1, 2, 7])
def test_the_causes_are_the_same_made_a_chunk_at_a_time(rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import polars as pl
    from polars.testing import assert_frame_equal

    from promptkit.analysis import analyze, causes

    result = analyze("fixtures/real-logs/deepseek", view="consecutive")
    # the rows shuffled, so that session order is not the frame's order
    requests = result.requests.sample(fraction=1.0, shuffle=True, seed=3)
    reference = requests.sort("session", "index", maintain_order=True)
    assert requests.select("session", "index").rows() != reference.select("session", "index").rows()
    want = explain_causes(requests, result.cache_model)
    assert want.height == requests.height and want["session"].n_unique() > 1
    assert want.select("session", "index").rows() == reference.select("session", "index").rows()
    monkeypatch.setattr(causes, "_CAUSE_ROWS", rows)
    got = explain_causes(requests, result.cache_model)
    assert_frame_equal(got, want)
    assert_frame_equal(explain_causes(requests.head(0), result.cache_model), want.head(0))
    assert isinstance(got, pl.DataFrame)
