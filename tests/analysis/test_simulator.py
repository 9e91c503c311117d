"""Tests for promptkit.analysis.simulator: the radix cache (runs on edges, TTL, LRU capacity, exact
entries) and the cache simulator (model rules, delays, refresh on read)."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import event, example, given, settings, strategies as st

from promptkit.analysis.simulator import CacheSimulator, RadixCache
from promptkit.providers.resolve import resolve_cache_model
from promptkit.tokens.cache_models import BreakpointCache, CacheEntry, CachePlan, ExactCache, UnitPrefixCache


def arr(*xs: int) -> np.ndarray:
    return np.array(xs, dtype=np.int64)


# ---------------------------------------------------------------------------------------------------
# matching


def test_match_longest_prefix_source_and_divergence() -> None:
    c = RadixCache()
    c.insert(arr(1, 2, 3, 4, 5), now=0.0, source="a#0")
    c.insert(arr(1, 2, 7, 8), now=1.0, source="b#0")
    m = c.match(arr(1, 2, 3, 9))
    assert (m.prefix_tokens, m.source, m.diverged) == (3, "a#0", True)
    m = c.match(arr(1, 2, 7, 8, 9, 10))  # extends what was cached: no divergence
    assert (m.prefix_tokens, m.source, m.diverged) == (4, "b#0", False)
    m = c.match(arr(1, 2))  # a prefix of cached content
    assert (m.prefix_tokens, m.diverged) == (2, False)
    m = c.match(arr(1, 2, 5))  # differs where two runs branch
    assert (m.prefix_tokens, m.diverged) == (2, True)
    m = c.match(arr(6))
    assert (m.prefix_tokens, m.source, m.diverged) == (0, None, True)
    assert RadixCache().match(arr(1, 2)).diverged is False  # nothing cached: nothing to diverge from


def test_edges_hold_runs_not_one_node_per_token() -> None:
    c = RadixCache()
    c.insert(np.arange(10_000), source="x")
    assert len(c) == 1 and c.stored_tokens == 10_000
    c.insert(np.concatenate([np.arange(5_000), np.arange(7)]), source="y")  # branch in the middle
    assert len(c) == 3 and c.stored_tokens == 10_007


def test_long_session_stays_small_and_matches_everything() -> None:
    rng = np.random.default_rng(7)
    c = RadixCache()
    convo = rng.integers(0, 50_000, 500)
    expected = 0
    for turn in range(300):
        prompt = convo
        m = c.match(prompt)
        assert m.prefix_tokens == expected and m.diverged == (turn > 0)
        answer = rng.integers(0, 50_000, 40)
        c.insert(np.concatenate([prompt, answer]), source=f"s#{turn}")
        # the next prompt re-renders the answer with its last token changed, then adds more
        rerendered = answer.copy()
        rerendered[-1] = -1
        expected = len(prompt) + 39
        convo = np.concatenate([prompt, rerendered, rng.integers(0, 50_000, 300)])
    assert len(convo) > 100_000
    assert len(c) <= 2 * 300 + 1  # a few nodes per call, not per token
    m = c.match(convo)
    assert m.prefix_tokens == len(convo) - 300 - 1 and m.diverged


# ---------------------------------------------------------------------------------------------------
# TTL


def test_ttl_expiry_and_refresh_on_use() -> None:
    c = RadixCache()
    c.insert(arr(1, 2, 3), now=0.0, ttl=10.0, source="a")
    assert c.match(arr(1, 2, 3), now=10.0).prefix_tokens == 3  # alive at exactly last use + ttl
    assert c.match(arr(1, 2, 3), now=10.5).prefix_tokens == 0
    c.insert(arr(1, 2, 3), now=8.0, ttl=10.0, source="b")  # stored again: refreshed
    assert c.match(arr(1, 2, 3), now=17.0).prefix_tokens == 3
    assert c.match(arr(1, 2, 3), now=None).prefix_tokens == 3  # unknown time: nothing expires
    c.insert(arr(1, 2, 9), now=0.0, ttl=None, source="c")  # no ttl: lives forever
    m = c.match(arr(1, 2, 3), now=1e9)
    assert (m.prefix_tokens, m.diverged) == (2, True)


def test_expire_at_exactly_the_ttl_keeps_the_run() -> None:
    """Alive while ``now <= last use + ttl``: at exactly the TTL a run still hits, so expire() keeps it.

    Providers state lifetimes as "N minutes after last use" (Anthropic: "the cache has a 5-minute
    lifetime, refreshed each time the cached content is used"; OpenAI: "5 to 10 minutes of
    inactivity") without saying which side of the boundary wins; promptkit takes the inclusive
    reading, and ``match`` and ``expire`` must agree on it.
    """
    c = RadixCache()
    c.insert(arr(1, 2, 3), now=0.0, ttl=300.0)
    assert c.match(arr(1, 2, 3), now=300.0, touch=False).prefix_tokens == 3
    assert c.expire(now=300.0) == 0  # exactly at the TTL: still alive
    assert c.stored_tokens == 3
    assert c.match(arr(1, 2, 3), now=300.0, touch=False).prefix_tokens == 3
    assert c.expire(now=np.nextafter(300.0, np.inf)) == 3  # the next instant: gone
    assert c.stored_tokens == 0


@given(
    runs=st.lists(
        st.tuples(
            st.lists(st.integers(0, 3), min_size=1, max_size=5), st.integers(0, 20), st.integers(0, 10)
        ),
        min_size=1,
        max_size=6,
    ),
    now=st.integers(0, 40),
)
@example(runs=[([1, 2, 3], 0, 10)], now=10)  # exactly at the TTL
@example(runs=[([1, 2], 5, 5), ([1, 2, 3], 0, 10)], now=10)
@settings(max_examples=200, deadline=None)
def test_expire_removes_exactly_what_match_no_longer_sees(
    runs: list[tuple[list[int], int, int]], now: int
) -> None:
    c = RadixCache()
    for tokens, at, ttl in sorted(runs, key=lambda r: r[1]):
        c.insert(arr(*tokens), now=float(at), ttl=float(ttl))
    before = [c.match(arr(*tokens), now=float(now), touch=False).prefix_tokens for tokens, _, _ in runs]
    c.expire(now=float(now))
    after = [c.match(arr(*tokens), now=float(now), touch=False).prefix_tokens for tokens, _, _ in runs]
    assert after == before  # expire() removes nothing a lookup at `now` would still hit
    alive = [c.match(arr(*tokens), now=None, touch=False).prefix_tokens for tokens, _, _ in runs]
    assert alive == before  # and everything left is alive at `now`


def test_expire_frees_expired_runs() -> None:
    c = RadixCache()
    c.insert(arr(1, 2, 3, 4), now=0.0, ttl=5.0)
    c.insert(arr(1, 2, 8), now=4.0, ttl=5.0)
    assert c.expire(now=6.0) == 2  # the run "3 4" expired; "1 2" and "8" were used at 4.0
    assert c.stored_tokens == 3
    assert c.match(arr(1, 2, 3, 4), now=6.0).prefix_tokens == 2


# ---------------------------------------------------------------------------------------------------
# capacity


def test_capacity_evicts_least_recently_used_tokens_exactly() -> None:
    c = RadixCache(capacity=10)
    c.insert(arr(1, 2, 3, 4), source="a")
    c.insert(arr(5, 6, 7, 8), source="b")
    c.match(arr(1, 2, 3, 4))  # "a" is used again: "b" is now the least recently used
    c.insert(arr(9, 10, 11, 12), source="c")  # 12 tokens > 10: 2 tokens of "b" go
    assert c.stored_tokens == 10
    assert c.match(arr(1, 2, 3, 4)).prefix_tokens == 4
    assert c.match(arr(5, 6, 7, 8)).prefix_tokens == 2  # trimmed from its tail
    assert c.match(arr(9, 10, 11, 12)).prefix_tokens == 4


def test_capacity_evicts_expired_runs_first() -> None:
    c = RadixCache(capacity=8)
    c.insert(arr(1, 2, 3, 4), now=0.0, ttl=100.0)
    c.insert(arr(5, 6, 7, 8), now=1.0, ttl=1.0)  # newer but expires at 2.0
    c.insert(arr(9, 10, 11, 12), now=50.0, ttl=100.0)
    assert c.stored_tokens == 8
    assert c.match(arr(1, 2, 3, 4), now=50.0).prefix_tokens == 4
    assert c.match(arr(5, 6, 7, 8), now=None).prefix_tokens == 0


def test_capacity_removes_emptied_inner_nodes() -> None:
    c = RadixCache(capacity=6)
    c.insert(arr(1, 2, 3, 4))
    c.insert(arr(1, 2, 3, 5))
    c.insert(arr(7, 8, 9, 10, 11, 12))
    assert c.stored_tokens == 6
    assert c.match(arr(1, 2, 3)).prefix_tokens == 0


# ---------------------------------------------------------------------------------------------------
# exact entries


def test_exact_entries_are_marks_with_their_own_expiry() -> None:
    c = RadixCache()
    c.insert(arr(1, 2, 3, 4, 5, 6), now=0.0, ttl=300.0, source="x", exact=True)
    c.insert(arr(1, 2, 3), now=0.0, ttl=3600.0, source="x", exact=True)
    m = c.match(arr(1, 2, 3, 4, 5, 6, 7), now=100.0)
    assert m.exact_entries == ((3, "x", 3600.0), (6, "x", 300.0))
    m = c.match(arr(1, 2, 3, 4, 5, 6, 7), now=1000.0)
    assert m.exact_entries == ((3, "x", 3600.0),)
    assert c.match(arr(1, 2, 3, 4, 9), now=100.0).exact_entries == ((3, "x", 3600.0),)


# ---------------------------------------------------------------------------------------------------
# property: the tree answers like brute force


@st.composite
def sequences(draw: st.DrawFn) -> list[list[int]]:
    base = draw(st.lists(st.integers(0, 3), max_size=12))
    out = []
    for _ in range(draw(st.integers(1, 8))):
        cut = draw(st.integers(0, len(base)))
        out.append(base[:cut] + draw(st.lists(st.integers(0, 3), max_size=8)))
    return out


def _lcp(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@pytest.mark.slow
@given(
    stored=sequences(),
    query=st.lists(st.integers(0, 3), max_size=20),
    exact=st.lists(st.booleans(), min_size=8, max_size=8),
)
@settings(max_examples=300, deadline=None)
def test_match_equals_brute_force(stored: list[list[int]], query: list[int], exact: list[bool]) -> None:
    c = RadixCache()
    for i, s in enumerate(stored):
        c.insert(np.array(s, dtype=np.int64), source=f"r{i}", exact=exact[i])
    m = c.match(np.array(query, dtype=np.int64))
    best = max((_lcp(s, query) for s in stored), default=0)
    assert m.prefix_tokens == best
    marks = sorted({len(s) for i, s in enumerate(stored) if exact[i] and s and _lcp(s, query) == len(s)})
    assert [length for length, _, _ in m.exact_entries] == marks
    continues = any(_lcp(s, query) == best and len(s) > best for s in stored)
    assert m.diverged == (continues and best < len(query))
    assert c.stored_tokens == len({tuple(s[: k + 1]) for s in stored for k in range(len(s))})


@pytest.mark.slow
@given(stored=sequences(), capacity=st.integers(0, 30))
@settings(max_examples=200, deadline=None)
def test_capacity_is_never_exceeded_and_the_newest_survives(stored: list[list[int]], capacity: int) -> None:
    c = RadixCache(capacity=capacity)
    for i, s in enumerate(stored):
        c.insert(np.array(s, dtype=np.int64), source=f"r{i}")
        assert c.stored_tokens <= capacity
    last = stored[-1]
    assert c.match(np.array(last, dtype=np.int64)).prefix_tokens == min(len(last), capacity)


# ---------------------------------------------------------------------------------------------------
# the simulator


def test_simulator_applies_the_model_and_records_the_source() -> None:
    sim = CacheSimulator(UnitPrefixCache())
    first = np.arange(200)
    out = sim.step(first, CachePlan(150, (CacheEntry(200),)), now=0.0, source="s#0")
    assert (out.prefix_tokens, out.cached_tokens, out.source) == (0, 0, None)
    second = np.concatenate([np.arange(200), np.arange(1000, 1100)])
    out = sim.step(second, CachePlan(300, (CacheEntry(300),)), now=3.0, source="s#1")
    assert (out.prefix_tokens, out.cached_tokens, out.source, out.diverged) == (200, 192, "s#0", False)
    assert out.write_tokens is None


def test_simulator_delay_makes_entries_readable_later() -> None:
    sim = CacheSimulator(ExactCache(delay=5.0))
    sim.store(np.arange(50), CachePlan(50, (CacheEntry(50),)), now=0.0, source="a")
    assert sim.lookup(np.arange(60), CachePlan(60), now=4.9).cached_tokens == 0
    assert sim.lookup(np.arange(60), CachePlan(60), now=5.0).cached_tokens == 50
    untimed = CacheSimulator(ExactCache(delay=5.0))
    untimed.store(np.arange(50), CachePlan(50, (CacheEntry(50),)), now=None, source="a")
    assert untimed.lookup(np.arange(60), CachePlan(60), now=None).cached_tokens == 50


def test_simulator_exact_entries_read_refreshes_ttl_and_reports_writes() -> None:
    model = resolve_cache_model("anthropic", min_tokens=1)
    sim = CacheSimulator(model)
    tokens = np.arange(100)
    plan = CachePlan(
        100, (CacheEntry(40, 300.0, True), CacheEntry(80, 300.0, True)), (20, 40, 60, 80), (40, 80)
    )
    out = sim.step(tokens, plan, now=0.0, source="a#0")
    assert (out.cached_tokens, out.write_tokens) == (0, 80)
    out = sim.lookup(tokens, plan, now=250.0)
    assert (out.cached_tokens, out.write_tokens, out.source) == (80, 0, "a#0")
    # the read at 250 refreshed the entry (to 550), the read at 500 again (to 800)
    assert sim.lookup(tokens, plan, now=500.0).cached_tokens == 80
    assert sim.lookup(tokens, plan, now=801.0).cached_tokens == 0
    # a different prompt after token 50 can only read the entry at 40
    other = tokens.copy()
    other[50:] += 1000
    sim.store(tokens, plan, now=900.0, source="a#1")
    out = sim.lookup(other, plan, now=901.0)
    assert (out.prefix_tokens, out.cached_tokens, out.write_tokens, out.diverged) == (50, 40, 40, True)


@pytest.mark.slow
@given(
    prev=st.lists(st.integers(0, 3), max_size=30),
    tail=st.lists(st.integers(0, 3), max_size=10),
    cut=st.integers(0, 30),
    ttl=st.one_of(st.none(), st.floats(0.0, 20.0)),
    now=st.floats(0.0, 40.0),
)
@settings(max_examples=300, deadline=None)
def test_a_known_shared_prefix_changes_no_outcome(
    prev: list[int], tail: list[int], cut: int, ttl: float | None, now: float
) -> None:
    """``known=(array, k)`` (the prompt's first k tokens are a copy of the array's) skips comparing them
    in a stored run that is that array's memory, and changes no outcome; a hint about another array is
    ignored."""
    stored = np.array(prev, dtype=np.int64)
    stored.flags.writeable = False
    k = min(cut, len(prev))
    prompt = np.concatenate((stored[:k], np.array(tail, dtype=np.int64)))
    model = UnitPrefixCache(unit=1, ttl=ttl)
    plan = CachePlan(len(prompt), (CacheEntry(len(prompt), ttl),))
    outcomes = []
    for known in (None, (stored, k), (stored.copy(), k)):
        sim = CacheSimulator(model, share_tokens=True)
        sim.store(stored, CachePlan(len(prev), (CacheEntry(len(prev), ttl),)), now=0.0, source="a")
        outcomes.append(sim.lookup(prompt, plan, now=now, known=known))
    assert outcomes[1] == outcomes[0] == outcomes[2]
    if ttl is None or now <= ttl:  # the stored run is alive: the prompt reads what it shares with it
        assert outcomes[0].prefix_tokens == _lcp(prev, prompt.tolist())


@pytest.mark.slow
@given(
    calls=st.lists(
        st.tuples(st.lists(st.integers(0, 3), max_size=12), st.floats(0.0, 5.0), st.booleans()),
        max_size=12,
    ),
    capacity=st.one_of(st.none(), st.integers(0, 20)),
)
@settings(max_examples=300, deadline=None)
def test_what_nothing_expired_would_have_read_equals_the_keep_everything_cache(
    calls: list[tuple[list[int], float, bool]], capacity: int | None
) -> None:
    """``unexpired_cached_tokens`` is what a cache that keeps everything reads (the simulator skips
    reading that cache when the lookup met nothing expired and nothing was ever removed)."""
    model = resolve_cache_model("anthropic", min_tokens=1, ttl=3.0, capacity=capacity)
    sim = CacheSimulator(model)
    keep_all = RadixCache()
    now = 0.0
    for k, (tokens, gap, exact) in enumerate(calls):
        now += gap
        prompt = np.array(tokens, dtype=np.int64)
        n = len(tokens)
        entries = (CacheEntry(n, 3.0, exact),) if n else ()
        plan = CachePlan(n, entries, (n,) if exact and n else None, (n,) if exact and n else None)
        found = keep_all.match(prompt, now, touch=False)
        expected = model.cached_tokens(plan, found.prefix_tokens, [m for m, _, _ in found.exact_entries])
        out = sim.step(prompt, plan, now, f"c{k}")
        assert out.unexpired_cached_tokens == expected
        for entry in entries:
            keep_all.insert(prompt[: entry.length], now, ttl=None, source=f"c{k}", exact=entry.exact)


@pytest.mark.slow
@given(
    prev=st.lists(st.integers(0, 3), max_size=24),
    tail=st.one_of(st.just([]), st.lists(st.integers(0, 3), max_size=10)),
    cut=st.floats(0.0, 1.0),
    entries=st.lists(
        st.tuples(st.integers(0, 30), st.one_of(st.none(), st.floats(0.0, 20.0)), st.booleans()), max_size=4
    ),
    name=st.sampled_from(["exact", "deepseek", "openai", "anthropic", "vllm"]),
    ttl=st.one_of(st.none(), st.floats(0.0, 20.0)),
    stored_at=st.one_of(st.none(), st.floats(0.0, 5.0)),
    now=st.one_of(st.none(), st.floats(0.0, 40.0)),
    hinted=st.booleans(),
    stored=st.booleans(),
)
@settings(max_examples=600, deadline=None)
@example(  # an expired exact entry met before the prompt runs past the stored tokens
    prev=[1, 2, 3], tail=[4], cut=1.0, entries=[(3, None, False), (2, 1.0, True)], name="anthropic",
    ttl=1.0, stored_at=0.0, now=5.0, hinted=False, stored=True,
)  # fmt: skip
@example(  # the prompt leaves the stored tokens where an expired run begins: no divergence from it
    prev=[1, 2, 3, 0], tail=[2], cut=0.5, entries=[(2, None, False), (4, 1.0, False)], name="deepseek",
    ttl=None, stored_at=0.0, now=5.0, hinted=True, stored=True,
)  # fmt: skip
def test_consecutive_outcome_equals_a_simulator_holding_one_call(
    prev: list[int],
    tail: list[int],
    cut: float,
    entries: list[tuple[int, float | None, bool]],
    name: str,
    ttl: float | None,
    stored_at: float | None,
    now: float | None,
    hinted: bool,
    stored: bool,
) -> None:
    """The consecutive view's shortcut (no tree: the stored runs are prefixes of one array) gives the
    simulator's outcome for every model, entry mix, expiry and ``known`` hint."""
    from promptkit.analysis.simulator import consecutive_outcome

    array = np.array(prev, dtype=np.int64)
    array.flags.writeable = False
    k = round(cut * len(prev))  # the prompt shares its first k tokens with the stored call's
    prompt = np.concatenate((array[:k], np.array(tail, dtype=np.int64)))
    overrides: dict[str, object] = {"ttl": ttl} if name != "vllm" else {}
    if name in ("openai", "anthropic"):
        overrides["min_tokens"] = 1
    model = resolve_cache_model(name, **overrides)  # a provider's name: its profile's model
    stored_plan = CachePlan(len(prev), tuple(CacheEntry(n, t, x) for n, t, x in entries))
    plan = CachePlan(len(prompt), (CacheEntry(len(prompt), ttl),))
    call = (array, stored_plan, stored_at, "a#0") if stored else None
    known = (array, k) if hinted else None
    sim = CacheSimulator(model, share_tokens=True)
    if call is not None:
        sim.store(*call)
    assert consecutive_outcome(model, call, prompt, plan, now, known=known) == sim.lookup(
        prompt, plan, now, known=known
    )


def test_an_expired_exact_entry_counts_as_expired_when_the_prompt_runs_past_the_stored_tokens() -> None:
    """The exact entry at 2 expired while the run it lies on lives on: what nothing expired would have
    read is that entry, also when the prompt continues past everything stored."""
    model = resolve_cache_model("anthropic", min_tokens=1, ttl=300.0)
    sim = CacheSimulator(model)
    sim.store(arr(1, 2, 3, 4), CachePlan(4, (CacheEntry(4, 100.0), CacheEntry(2, 1.0, True))), 0.0, "a#0")
    out = sim.lookup(arr(1, 2, 3, 4, 9), CachePlan(5, (CacheEntry(5, 300.0, True),), (2,)), now=5.0)
    assert (out.prefix_tokens, out.cached_tokens) == (4, 0)
    assert (out.unexpired_cached_tokens, out.lost_source) == (2, "a#0")


# ---------------------------------------------------------------------------------------------------
# property: a session that resumes from its previous call answers like the reference simulator
#
# tests/analysis/simulator_reference.py is the simulator before runs were extended in place and
# prompts resumed from their session's previous call: every outcome and every cache's size must be
# the same, with TTL expiry, capacity eviction, entry delays, exact entries and sessions sharing heads.


@st.composite
def workloads(draw: st.DrawFn) -> tuple[Any, list[tuple[int, list[int], list[int], float | None, Any]]]:
    """A cache model and calls ``(session, prompt, answer, time, ttl)`` of interleaved growing sessions
    (``ttl`` -1: the call stores nothing)."""
    exact = draw(st.booleans())
    ttl = draw(st.sampled_from([None, 30.0, 300.0]))
    capacity = draw(st.sampled_from([None, None, 12, 40, 120]))
    delay = draw(st.sampled_from([0.0, 0.0, 2.0]))
    model = (
        BreakpointCache(min_tokens=0, ttl=ttl or 300.0, capacity=capacity, delay=delay)
        if exact
        else ExactCache(ttl=ttl, capacity=capacity, delay=delay)
    )
    heads = [draw(st.lists(st.integers(0, 3), max_size=6)) for _ in range(2)]
    sessions = draw(st.integers(1, 4))
    order = draw(st.lists(st.integers(0, sessions - 1), min_size=1, max_size=24))
    timed = draw(st.booleans())
    now = 0.0
    prompts: dict[int, list[int]] = {}
    calls = []
    for s in order:
        prev = prompts.get(s)
        new = draw(st.lists(st.integers(0, 3), max_size=7))
        if prev is None:
            prompt = heads[draw(st.integers(0, 1))] + new
        elif draw(st.integers(0, 4)) == 0:  # the session's prompt changed: cut somewhere, then new content
            prompt = prev[: draw(st.integers(0, len(prev)))] + new
        else:
            prompt = prev + new
        answer = draw(st.lists(st.integers(0, 3), max_size=3))
        prompts[s] = prompt + answer if draw(st.booleans()) else prompt
        now += draw(st.sampled_from([0.0, 1.0, 5.0, 40.0, 400.0]))
        # the entry's TTL (a longer one now and then, as a request may ask) or no entry at all
        ttl_call = draw(st.sampled_from([model.ttl, model.ttl, (model.ttl or 30.0) * 20, -1.0]))
        calls.append((s, prompt, answer, now if timed else None, ttl_call))
    return model, calls


def _plan(model: Any, prompt: list[int], tokens: list[int], cuts: list[int], ttl: Any) -> CachePlan:
    """An any-prefix model's plan: the whole call (and a shorter entry at a cut); an exact model's:
    exact entries at the cuts and the prompt's end, read at any of them (``ttl`` -1: no entries)."""
    if isinstance(model, BreakpointCache):
        points = sorted({c for c in cuts if 0 < c <= len(prompt)} | ({len(prompt)} if prompt else set()))
        entries = tuple(CacheEntry(p, ttl, True) for p in points if ttl != -1.0)
        return CachePlan(len(prompt), entries, tuple(points), tuple(points))
    entries = [CacheEntry(len(tokens), ttl)] if tokens and ttl != -1.0 else []
    entries += [CacheEntry(c, model.ttl) for c in cuts if 0 < c < len(tokens)]
    return CachePlan(len(prompt), tuple(entries))


@pytest.mark.slow
@given(workload=workloads(), cuts=st.lists(st.integers(0, 40), max_size=2), lower=st.booleans())
@settings(max_examples=600, deadline=None)
@example(
    workload=(
        ExactCache(),
        [(0, [1, 2], [3], 0.0, None), (0, [1, 2, 3, 4], [], 1.0, None), (1, [1, 2, 3, 5], [], 2.0, None)],
    ),
    cuts=[],
    lower=False,
)
@example(  # a read's refresh of an exact entry must not relabel it: the expired read names its writer
    workload=(
        BreakpointCache(min_tokens=0, lookback=20, ttl=300.0),
        [(1, [2], [0], 0.0, 300.0), (1, [2, 0], [], 0.0, 300.0), (1, [2], [], 0.0, -1.0), (0, [2], [], 400.0, 300.0)],
    ),
    cuts=[],
    lower=False,
)
def test_resumed_sessions_equal_the_reference_simulator(
    workload: tuple[Any, list[tuple[int, list[int], list[int], float | None, Any]]],
    cuts: list[int],
    lower: bool,
) -> None:
    from tests.analysis import simulator_reference as ref

    model, calls = workload
    old, new = ref.CacheSimulator(model), CacheSimulator(model)
    last: dict[int, list[int]] = {}
    for k, (s, prompt, answer, now, ttl) in enumerate(calls):
        tokens = prompt + answer
        plan = _plan(model, prompt, tokens, cuts if k % 2 else [], ttl)
        array = np.array(tokens, dtype=np.int64)
        shared = _lcp(last.get(s, []), tokens)
        if lower:  # a caller may know less than all that is shared
            shared //= 2
        expected = attrs.astuple(old.step(array, plan, now, f"r{k}"))
        assert attrs.astuple(new.step(array, plan, now, f"r{k}", session=s, shared=shared)) == expected, k
        last[s] = tokens
        # a cache without capacity is its own shadow of everything stored (the same content)
        keep_all = new.cache if new._all_in_cache else new._keep_all
        for mine, theirs in (
            (new.cache, old.cache),
            (keep_all, old._keep_all),
            (new._keep_ttl, old._keep_ttl),
        ):
            assert (mine is None) == (theirs is None)
            assert mine is None or theirs is None or mine.stored_tokens == theirs.stored_tokens


@st.composite
def continuations(draw: st.DrawFn) -> tuple[Any, list[tuple[int, list[int], float | None, float | None]]]:
    """A cache model without capacity and calls ``(session, tokens, time, ttl)`` of interleaved
    sessions that mostly continue their previous call whole (the shortcut of
    :meth:`CacheSimulator.step`), now and then after their path expired, now and then cut short, some
    from a head another session shares."""
    from promptkit.tokens.cache_models import PrefixCache, SteppedPrefixCache

    ttl = draw(st.sampled_from([None, 30.0]))
    model = draw(
        st.sampled_from(
            [
                ExactCache(ttl=ttl),
                ExactCache(ttl=ttl, delay=2.0),  # a delay: no shortcut (the write waits)
                UnitPrefixCache(unit=4, ttl=ttl),
                SteppedPrefixCache(min_tokens=6, step=4, ttl=ttl or 600.0),
                PrefixCache(min_tokens=3, unit=2, ttl=ttl),
            ]
        )
    )
    head = draw(st.lists(st.integers(0, 3), max_size=5))
    sessions = draw(st.integers(1, 3))
    timed = draw(st.booleans())
    now, calls, last = 0.0, [], {}
    for s in draw(st.lists(st.integers(0, sessions - 1), min_size=1, max_size=30)):
        new = draw(st.lists(st.integers(0, 3), min_size=1, max_size=6))
        prev = last.get(s)
        if prev is None or draw(st.integers(0, 5)) == 0:
            tokens = (head if draw(st.booleans()) else []) + new
        else:
            tokens = (
                prev[: draw(st.integers(0, len(prev)))] + new if draw(st.integers(0, 6)) == 0 else prev + new
            )
        now += draw(st.sampled_from([0.0, 1.0, 10.0, 31.0, 400.0]))
        calls.append((s, tokens, now if timed else None, draw(st.sampled_from([ttl, ttl, 900.0]))))
        last[s] = tokens
    return model, calls


@pytest.mark.slow
@given(workload=continuations())
@settings(max_examples=400, deadline=None)
def test_a_continuing_session_takes_the_shortcut_and_answers_like_the_reference(
    workload: tuple[Any, list[tuple[int, list[int], float | None, float | None]]],
) -> None:
    """The continuation shortcut of :meth:`CacheSimulator.step` (a session's prompt past the live end of
    its previous call's run) answers as the reference simulator does, also when that path expired, was
    refreshed by another session, or the model rounds what it reads down to nothing; the shortcut is
    taken (counted) wherever a session continues."""
    from tests.analysis import simulator_reference as ref

    model, calls = workload
    old, new = ref.CacheSimulator(model), CacheSimulator(model)
    looked_up = []
    lookup = new.lookup
    new.lookup = lambda *a, **kw: looked_up.append(1) or lookup(*a, **kw)  # type: ignore[method-assign]
    last: dict[int, list[int]] = {}
    for k, (s, tokens, now, ttl) in enumerate(calls):
        prompt_len = max(1, len(tokens) - 1)  # the last token is the answer
        # the whole call; now and then a shorter entry too, or only one, or an exact one
        entries = {
            0: (CacheEntry(len(tokens), ttl),),
            1: (CacheEntry(len(tokens), ttl), CacheEntry(2, 900.0)),
        }
        entries |= {2: (CacheEntry(max(1, len(tokens) // 2), ttl),), 3: (CacheEntry(len(tokens), ttl, True),)}
        plan = CachePlan(prompt_len, entries[k % 11 if k % 11 < 4 else 0])
        array = np.array(tokens, dtype=np.int64)
        given = tokens if k % 3 == 0 else array  # a list is taken as an array would be
        got = new.step(given, plan, now, f"r{k}", session=s, shared=_lcp(last.get(s, []), tokens))  # type: ignore[arg-type]
        assert attrs.astuple(got) == attrs.astuple(old.step(array, plan, now, f"r{k}")), k
        assert new.cache.stored_tokens == old.cache.stored_tokens
        last[s] = tokens
    event(f"shortcut taken: {len(calls) > len(looked_up)}")


def test_a_session_whose_entry_outlives_its_next_one_takes_the_shortcut_from_the_new_leaf() -> None:
    """A call whose entry lives shorter than the run it continues stores its new tokens as a child (an
    in-place run would take the longer lifetime); the session's next call continues from that child
    through the shortcut (no full lookup), and reads what the reference reads."""
    from tests.analysis import simulator_reference as ref

    model = ExactCache(ttl=30.0)
    sim, old = CacheSimulator(model), ref.CacheSimulator(model)
    looked_up = []
    lookup = sim.lookup
    sim.lookup = lambda *a, **kw: looked_up.append(1) or lookup(*a, **kw)  # type: ignore[method-assign]
    calls = [([1, 2, 3], 300.0, 0.0), ([1, 2, 3, 4, 5], 30.0, 1.0), ([1, 2, 3, 4, 5, 6], 30.0, 2.0)]
    for k, (tokens, ttl, now) in enumerate(calls):
        plan = CachePlan(len(tokens), (CacheEntry(len(tokens), ttl),))
        array = np.array(tokens, dtype=np.int64)
        shared = len(calls[k - 1][0]) if k else 0
        got = sim.step(array, plan, now, f"r{k}", session="s", shared=shared)
        assert attrs.astuple(got) == attrs.astuple(old.step(array, plan, now, f"r{k}"))
    assert looked_up == [1]  # the first call only: both continuations took the shortcut
    assert sim.cache._cursors["s"].depth == 6 and sim.cache._cursors["s"].parent.depth == 3


def test_a_session_resumes_from_its_previous_call_comparing_only_its_new_tokens(monkeypatch: Any) -> None:
    """A growing conversation of 300 calls is one run, not 300 nodes; with ``session`` and ``shared``
    a call compares its new tokens only (the tokens compared are counted, not timed)."""
    from promptkit.analysis import simulator

    compared = []
    real = simulator._shared
    monkeypatch.setattr(simulator, "_shared", lambda a, b: compared.append(len(a)) or real(a, b))
    rng = np.random.default_rng(3)
    sim = CacheSimulator(UnitPrefixCache(unit=1, ttl=3600.0))
    convo = rng.integers(0, 50_000, 2_000)
    new_tokens = 0
    for turn in range(300):
        plan = CachePlan(len(convo), (CacheEntry(len(convo), 3600.0),))
        shared = len(convo) - (2_000 if turn == 0 else 300)
        outcome = sim.step(convo, plan, float(turn), f"s#{turn}", session="s", shared=max(shared, 0))
        assert outcome.prefix_tokens == (0 if turn == 0 else len(convo) - 300)
        new_tokens += 2_000 if turn == 0 else 300
        convo = np.concatenate([convo, rng.integers(0, 50_000, 300)])
    assert len(sim.cache) == 1  # one run, extended in place
    assert sum(compared) <= 2 * new_tokens  # a lookup and an insert per call, each over the new tokens


def test_a_continuing_prompt_compares_no_token_and_its_run_is_a_view_of_the_prompt(monkeypatch: Any) -> None:
    """A call that continues its session's previous one past the leaf that call's run ended in reads
    that path without comparing a token (the path is what the call shares with its predecessor); a
    call that leaves the path inside it is compared as before. With ``share_tokens``, the run a
    continuation extends is a view of the caller's read-only tokens, not a copy."""
    from promptkit.analysis import simulator

    compared = []
    real = simulator._shared
    monkeypatch.setattr(simulator, "_shared", lambda a, b: compared.append(len(a)) or real(a, b))
    buffer = np.arange(10, 1_010)
    buffer.flags.writeable = False  # a session's token buffer: calls are views of its start
    sim = CacheSimulator(UnitPrefixCache(unit=1, ttl=60.0), share_tokens=True)
    plan = lambda n: CachePlan(n, (CacheEntry(n, 60.0),))  # noqa: E731
    sim.step(buffer[:400], plan(400), 0.0, "s#0", session="s", shared=0)
    compared.clear()
    for turn, n in enumerate((600, 800), start=1):
        outcome = sim.step(buffer[:n], plan(n), float(turn), f"s#{turn}", session="s", shared=n - 200)
        assert (outcome.prefix_tokens, outcome.cached_tokens, outcome.source) == (
            n - 200,
            n - 200,
            f"s#{turn - 1}",
        )
        assert not outcome.diverged
    assert compared == []  # nothing compared: the path is the shared prefix
    (run,) = sim.cache._root.children.values()
    assert run.depth == 800 and np.shares_memory(run.edge, buffer)  # one run, a view of the tokens
    late = sim.lookup(buffer[:800], plan(800), now=900.0, session="s", shared=800)  # expired: not this way
    assert late.cached_tokens == 0 and late.unexpired_cached_tokens == 800
    fork = np.concatenate([buffer[:500], np.arange(5_000, 5_100)])  # leaves the path inside it
    outcome = sim.step(fork, plan(600), 3.0, "s#3", session="s", shared=500)
    assert (outcome.prefix_tokens, outcome.diverged) == (500, True) and compared


def test_a_cache_without_capacity_is_its_own_shadow_and_keeps_no_second_tree() -> None:
    """Memory: without a capacity nothing removes what the cache stored (it only expires), so the cache
    read with nothing expired answers for the shadow of everything stored: no second tree is kept, and
    an expired read still tells "expired" (``unexpired_cached_tokens``) from "never stored". With a
    capacity (which evicts) the shadows are trees of their own."""
    prompt = np.arange(400)
    any_prefix = (UnitPrefixCache(unit=1, ttl=60.0), CachePlan(400, (CacheEntry(400, 60.0),)))
    exact = (
        BreakpointCache(min_tokens=0, ttl=60.0),
        CachePlan(400, (CacheEntry(400, 60.0, True),), lookup_points=(400,)),
    )
    for model, plan in (any_prefix, exact):
        sim = CacheSimulator(model)
        assert sim._keep_all is None and sim._keep_ttl is None
        sim.store(prompt, plan, now=0.0, source="a")
        assert sim.lookup(prompt, plan, now=30.0).cached_tokens == 400  # alive: read (and refreshed)
        late = sim.lookup(prompt, plan, now=1000.0)  # expired long ago
        assert late.cached_tokens == 0 and late.unexpired_cached_tokens == 400 and late.lost_source == "a"
        assert sim.cache.stored_tokens == 400  # one tree holds the run
    capped = CacheSimulator(UnitPrefixCache(unit=1, ttl=60.0, capacity=1000))
    assert isinstance(capped._keep_all, RadixCache) and isinstance(capped._keep_ttl, RadixCache)


def test_with_a_capacity_runs_are_not_extended_in_place() -> None:
    """Under a capacity a run partly used is not a run used whole (LRU order): a call's run stays a
    node of its own, as in the reference simulator."""
    from tests.analysis import simulator_reference as ref

    caches = [ref.RadixCache(capacity=6), RadixCache(capacity=6)]
    for c in caches:
        c.insert(arr(1, 2), source="a")
        c.insert(arr(1, 2, 3, 4), source="a")  # the same expiry and source: extended in place uncapped
        c.insert(arr(7, 8), source="b")
        c.match(arr(1, 2, 9))  # uses [1, 2] only, not [3, 4]
        c.insert(arr(5), source="c")  # one token over: the least recently used is [3, 4]'s tail
    old, new = caches
    for probe in (arr(1, 2, 3, 4), arr(7, 8)):
        assert new.match(probe, touch=False).prefix_tokens == old.match(probe, touch=False).prefix_tokens
    assert new.match(arr(7, 8), touch=False).prefix_tokens == 2


def test_a_resumed_match_over_exact_entries_finds_what_the_walk_finds() -> None:
    # a session's prompt continuing its last write (the shortcut, no token compared) over an exact
    # entry that expired under a live run and one that is live: the walk from the root finds the same
    tokens = np.arange(100, dtype=np.int64)
    found = []
    for resume in (("s", 80), None):
        cache = RadixCache()
        cache.insert(tokens[:30], 0.0, ttl=10.0, exact=True, source="a", cursor="s")
        cache.insert(tokens[:50], 0.0, ttl=300.0, exact=True, source="b", resume=("s", 30), cursor="s")
        cache.insert(tokens[:80], 5.0, ttl=100.0, source="c", resume=("s", 50), cursor="s")
        lookup = cache.match(tokens, 20.0, resume=resume)
        found.append((lookup, cache._blocked))  # whether the match passed expired content
    assert found[0] == found[1]
    assert found[0][0].exact_entries == ((50, "b", 300.0),) and found[0][0].prefix_tokens == 80
    assert found[0][1]  # the entry at 30 expired at 10


@pytest.mark.parametrize("remove", ["evict", "expire", "forget"])
def test_a_kept_path_whose_run_was_removed_is_not_read(remove: str) -> None:
    """The continuation's path kept per session (``RadixCache._continued``) is dropped when a run is
    removed: a prompt that resumes from a removed run matches what the walk from the root finds."""
    c = RadixCache(capacity=10 if remove == "evict" else None)
    c.insert(np.arange(4), 0.0, ttl=1.0, cursor="s")
    assert c.match(np.arange(6), 0.5, resume=("s", 4)).prefix_tokens == 4  # the path is kept here
    if remove == "evict":
        c.insert(np.arange(100, 110), 0.6, ttl=1.0)  # 14 tokens over a capacity of 10: the run "s" goes
    elif remove == "expire":
        assert c.expire(5.0) == 4
    else:
        assert c.forget_expired(5.0) == 4
    assert c.match(np.arange(6), None, resume=("s", 4)).prefix_tokens == 0
    assert c.match(np.arange(6), None).prefix_tokens == 0


def test_a_kept_path_whose_run_was_split_reads_the_new_node() -> None:
    """A run split under a session's kept path (an exact entry marked inside it) puts a node on that
    path: the continuation reads its exact entry, as the walk from the root does."""
    c = RadixCache()
    c.insert(np.arange(4), cursor="s")
    assert c.match(np.arange(6), resume=("s", 4)).exact_entries == ()  # the path is kept here
    c.insert(np.arange(2), exact=True, source="x")  # splits the run after 2 tokens
    found = c.match(np.arange(6), resume=("s", 4))
    assert found.prefix_tokens == 4 and found.exact_entries == ((2, "x", None),)
    assert found == c.match(np.arange(6))


# ---------------------------------------------------------------------------------------------------
# property: a long conversation, its refresh held by its leaf, answers like the reference simulator
#
# RadixCache keeps a write's or a read's refresh at the node its path ends in and lets the nodes above
# take it when they are read (promptkit/analysis/_radix_node.py): a conversation's next call costs its
# new nodes, not its path. Long chains with other sessions interleaved (sub-agents from the shared
# head, forks, ended sessions), capacity eviction (LRU order: the ticks), TTL expiry, exact entries
# read at lookup points and the calls named as sources must all be what the reference finds.


def _ref_sources(sim: Any) -> set[str]:
    """The sources a reference simulator's trees name (its runs' and its exact entries')."""
    found: set[str] = set()
    for cache in (sim.cache, sim._keep_all, sim._keep_ttl):
        for node in [] if cache is None else cache._nodes():
            found |= {s for s in (node.source, node.mark_source) if s is not None}
    return found


@st.composite
def long_conversations(draw: st.DrawFn) -> tuple[Any, list[tuple[Any, list[int], int, list[int], float | None, float]]]:
    """A cache model and the calls ``(session, tokens, prompt length, message ends, time, ttl)`` of one
    conversation of 30 to 120 calls, mostly continuing its previous call whole, now and then cut back
    to its head (a compaction), with sub-agents interleaved (they start from the shared head, continue,
    and end: a session ``None`` is the end of the one before). The contents come from a drawn seed."""
    import random

    exact = draw(st.booleans())
    ttl = draw(st.sampled_from([None, 30.0, 300.0]))
    capacity = draw(st.sampled_from([None, None, 40, 150, 400]))
    if exact:
        model: Any = BreakpointCache(min_tokens=0, ttl=ttl or 30.0, capacity=capacity, lookback=draw(st.integers(1, 4)))
    else:
        model = UnitPrefixCache(unit=draw(st.sampled_from([1, 4])), ttl=ttl, capacity=capacity)
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    others, timed = draw(st.integers(0, 3)), draw(st.booleans())
    gaps = draw(st.sampled_from([(0.0, 1.0, 5.0), (1.0, 5.0, 40.0), (0.0, 1.0, 40.0, 400.0)]))
    head = [rng.randrange(4) for _ in range(rng.randrange(1, 7))]
    sessions: dict[Any, tuple[list[int], list[int]]] = {}
    now, calls, count = 0.0, [], 0
    for _ in range(draw(st.integers(30, 120))):
        s: Any = "main" if not others or rng.random() < 0.6 else f"agent{rng.randrange(others)}.{count}"
        if s != "main" and rng.random() < 0.15:  # an agent ends; its next call starts a new one
            calls.append((None, [], 0, [], None, 0.0))
            count += 1
            continue
        tokens, ends = sessions.get(s, ([], []))
        if not tokens or rng.random() < 0.04:  # a first call, or a compaction: back to the head
            tokens, ends = list(head), [len(head)]
        for _ in range(rng.randrange(1, 4)):  # the answer and the next messages
            tokens = tokens + [rng.randrange(8) for _ in range(rng.randrange(1, 5))]
            ends = [*ends, len(tokens)]
        now += rng.choice(gaps)
        ttl_call = model.ttl if rng.random() < 0.85 else (model.ttl or 30.0) * 20
        calls.append((s, tokens, ends[-2] if len(ends) > 1 and not exact else len(tokens), ends, now if timed else None, ttl_call))
        sessions[s] = (tokens, ends)
    return model, calls


def _chain_plan(model: Any, tokens: list[int], prompt_len: int, ends: list[int], ttl: float | None) -> CachePlan:
    """A breakpoint model's plan: exact entries at the head's end and the prompt's, read at the
    ``lookback`` message ends up to each; an any-prefix model's: the whole call."""
    if isinstance(model, BreakpointCache):
        points: set[int] = set()
        breakpoints = sorted({ends[0], prompt_len})
        for bp in breakpoints:
            upto = [e for e in ends if e <= bp]
            points.update(upto[-model.lookback :])
        entries = tuple(CacheEntry(bp, ttl, True) for bp in breakpoints)
        return CachePlan(prompt_len, entries, tuple(sorted(points)), tuple(breakpoints))
    return CachePlan(prompt_len, (CacheEntry(len(tokens), ttl),))


@pytest.mark.slow
@given(workload=long_conversations())
@settings(max_examples=150, deadline=None)
def test_a_long_conversation_with_agents_between_answers_like_the_reference(
    workload: tuple[Any, list[tuple[Any, list[int], int, list[int], float | None, float]]],
) -> None:
    from tests.analysis import simulator_reference as ref

    model, calls = workload
    old, new = ref.CacheSimulator(model), CacheSimulator(model)
    last: dict[Any, list[int]] = {}
    previous: Any = None
    for k, (s, tokens, prompt_len, ends, now, ttl) in enumerate(calls):
        if s is None:  # the session before ended
            if previous is not None:
                new.end_session(previous)
            continue
        plan = _chain_plan(model, tokens, prompt_len, ends, ttl)
        array = np.array(tokens, dtype=np.int64)
        expected = attrs.astuple(old.step(array, plan, now, f"r{k}"))
        got = attrs.astuple(new.step(array, plan, now, f"r{k}", session=s, shared=_lcp(last.get(s, []), tokens)))
        assert got == expected, k
        last[s], previous = tokens, s
        keep_all = new.cache if new._all_in_cache else new._keep_all
        for mine, theirs in ((new.cache, old.cache), (keep_all, old._keep_all), (new._keep_ttl, old._keep_ttl)):
            assert mine is None or theirs is None or mine.stored_tokens == theirs.stored_tokens, k
        if k % 20 == 19 or k == len(calls) - 1:  # the calls the trees name as sources
            assert new.sources() == _ref_sources(old), k
    event(f"{type(model).__name__}, capacity {model.capacity}")


@st.composite
def cache_operations(draw: st.DrawFn) -> tuple[int | None, list[tuple[str, list[int], float, float, bool]]]:
    """A capacity and a sequence of ``(operation, tokens, time step, ttl, exact or touch)`` over
    prompts that share prefixes: inserts, matches, expiries and forgets."""
    pool = draw(sequences())
    ops = []
    for _ in range(draw(st.integers(1, 40))):
        op = draw(st.sampled_from(["insert", "insert", "match", "match", "expire", "forget"]))
        ops.append((op, draw(st.sampled_from(pool)), draw(st.sampled_from([0.0, 1.0, 4.0, 20.0])),
                    draw(st.sampled_from([3.0, 10.0, 100.0])), draw(st.booleans())))  # fmt: skip
    return draw(st.sampled_from([None, 4, 8, 15, 30])), ops


@pytest.mark.slow
@given(workload=cache_operations())
@settings(max_examples=400, deadline=None)
@example(  # an expired run removed below a stale node: the node keeps the newer write that passed it
    workload=(None, [("insert", [1, 2], 0.0, 100.0, False), ("insert", [1, 2, 3], 1.0, 3.0, False),
                     ("insert", [1, 2, 3], 1.0, 3.0, False), ("expire", [1, 2], 18.0, 0.0, False),
                     ("match", [1, 2], 0.0, 0.0, True)]),
)  # fmt: skip
@example(  # the same, forgotten
    workload=(None, [("insert", [1, 2], 0.0, 100.0, False), ("insert", [1, 2, 3], 1.0, 3.0, False),
                     ("insert", [1, 2, 3], 1.0, 3.0, False), ("forget", [1, 2], 18.0, 0.0, False),
                     ("match", [1, 2], 0.0, 0.0, True)]),
)  # fmt: skip
@example(  # a run split under a stale node: its upper part takes what is held below (a later walk reads it)
    workload=(None, [("insert", [1, 2, 3, 4], 0.0, 100.0, False), ("insert", [1, 2, 3, 4, 5], 1.0, 3.0, False),
                     ("insert", [1, 2, 3, 4, 5, 6], 1.0, 1000.0, False), ("insert", [1, 2], 1.0, 3.0, False),
                     ("match", [1, 2, 3, 4, 5, 6], 197.0, 0.0, True)]),
)  # fmt: skip
@example(  # a run held by a stale parent outlived its expired child: the parent is then evicted by its tick
    workload=(5, [("insert", [1, 2], 0.0, 100.0, True), ("insert", [5], 1.0, 100.0, False),
                  ("insert", [1, 2, 3], 1.0, 3.0, False), ("insert", [5], 1.0, 100.0, False),
                  ("match", [1, 2, 3], 1.0, 0.0, True), ("insert", [7, 7, 7], 20.0, 100.0, False),
                  ("match", [5], 0.0, 0.0, False)]),
)  # fmt: skip
def test_refreshes_held_below_answer_like_the_reference_radix_cache(
    workload: tuple[int | None, list[tuple[str, list[int], float, float, bool]]],
) -> None:
    """Every match (its prefix, source, divergence, exact entries: all of them, or those at some
    points), every size and every source named equal the reference tree's, where each refresh was
    written along its whole path; a prompt resumes from the last insert that began with its first token
    (a continuation, when it extends what that insert stored)."""
    from tests.analysis import simulator_reference as ref

    capacity, ops = workload
    old, new = ref.RadixCache(capacity=capacity), RadixCache(capacity=capacity)
    now, last = 0.0, {}
    for op, tokens, step, ttl, flag in ops:
        now += step
        key = tokens[0] if tokens else None
        resume = (key, _lcp(last[key], tokens)) if key in last else None
        array = np.array(tokens, dtype=np.int64)
        if op == "insert":
            old.insert(array, now, ttl=ttl, source=f"w{now}", exact=flag)
            new.insert(array, now, ttl=ttl, source=f"w{now}", exact=flag, resume=resume, cursor=key)
            last[key] = tokens
        elif op == "match":
            theirs = old.match(array, now, touch=flag)
            points = {len(tokens) // 2, len(tokens)}
            at_points = new.match(array, now, touch=False, resume=resume, points=points)
            assert at_points.exact_entries == tuple(e for e in theirs.exact_entries if e[0] in points)
            assert (at_points.prefix_tokens, at_points.source) == (theirs.prefix_tokens, theirs.source)
            assert attrs.astuple(new.match(array, now, touch=flag, resume=resume)) == attrs.astuple(theirs)
        elif op == "expire":
            assert new.expire(now) == old.expire(now)
        else:  # forgetting removes what expiring removes (the reference has no forget)
            assert new.forget_expired(now) == old.expire(now)
        assert new.stored_tokens == old.stored_tokens
    # at the end only: naming the sources settles every node, and what is stale must be met by the walks
    named = {s for n in new._settled_nodes() for s in (n.source, n.mark_source) if s is not None}
    assert named == {s for n in old._nodes() for s in (n.source, n.mark_source) if s is not None}


def test_a_continued_read_at_lookup_points_tells_an_expired_entry_from_one_never_stored() -> None:
    """A continuing prompt whose lookup points pass an expired exact entry (below its live leaf, which
    is not a lookup point) reads the live one above it, and says what it would have read had nothing
    expired, and who wrote it, as the reference does."""
    from tests.analysis import simulator_reference as ref

    model = BreakpointCache(min_tokens=0, ttl=10.0)
    new, old = CacheSimulator(model), ref.CacheSimulator(model)
    calls = [  # (tokens, time, entries (length, ttl), lookup points)
        (20, 0.0, ((5, 1000.0), (20, 10.0)), (5, 20)),
        (30, 1.0, ((5, 1000.0), (30, 100.0)), (5, 20, 30)),
        (40, 50.0, ((5, 1000.0), (40, 100.0)), (5, 20)),  # the entry at 20 expired at 11; the leaf (30) lives
    ]
    outcomes = []
    for k, (n, now, entries, points) in enumerate(calls):
        plan = CachePlan(n, tuple(CacheEntry(e, ttl, True) for e, ttl in entries), points, tuple(e for e, _ in entries))
        tokens = np.arange(n, dtype=np.int64)
        got = new.step(tokens, plan, now, f"r{k}", session="s", shared=calls[k - 1][0] if k else 0)
        assert attrs.astuple(got) == attrs.astuple(old.step(tokens, plan, now, f"r{k}"))
        outcomes.append(got)
    last = outcomes[-1]
    assert (last.cached_tokens, last.unexpired_cached_tokens, last.lost_source) == (5, 20, "r1")
