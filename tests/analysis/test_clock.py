"""Tests for promptkit/analysis/clock.py: the cache clock's rules (time left, expiry, lifetimes, miss
causes, cost) and :func:`cache_clock` on Claude Code transcripts and request records."""

from __future__ import annotations

from pathlib import Path

import attrs
import polars as pl
import pytest
from hypothesis import given, strategies as st

from promptkit.analysis.causes import CAUSES
from promptkit.analysis.clock import (
    CLOCK_CAUSES,
    CacheClock,
    ClockCall,
    ClockPrice,
    ClockTally,
    Lifetimes,
    cache_clock,
    clock_of,
    clock_price,
    format_left,
    lifetimes_of,
)
from promptkit.errors import RecordFormatError, UsageError
from promptkit.layout import RequestRecord, Usage
from promptkit.providers.anthropic import CACHE_TTLS
from promptkit.report.pricing import request_costs
from tests.analysis.clock_transcripts import MODEL, SESSION, T0, Call, a_session, write_transcript

LIFE = Lifetimes(300.0, 3600.0)


def _clock(tmp_path: Path, calls: list[Call], now: float) -> CacheClock:
    path = write_transcript(tmp_path / "p" / f"{SESSION}.jsonl", calls)
    return cache_clock(path, now=T0 + now)[SESSION]


# ------------------------------------------------------------------------------------- time left


def test_five_minute_writes_count_down_to_the_second_then_expire(tmp_path: Path) -> None:
    calls = a_session()  # the last call is sent at T0 + 515
    at = _clock(tmp_path, calls, 600)
    assert (at.last_use_at, at.ttl_seconds, at.expires_at) == (T0 + 515, 300.0, T0 + 815)
    assert (at.seconds_left, at.expired, at.status) == (215.0, False, "3:35 left")
    last_second = _clock(tmp_path, calls, 814)
    assert (last_second.seconds_left, last_second.status) == (1.0, "0:01 left")
    expired = _clock(tmp_path, calls, 815)
    assert (expired.seconds_left, expired.expired, expired.status) == (0.0, True, "expired")
    assert _clock(tmp_path, calls, 5000).status == "expired"


def test_one_hour_writes_keep_the_cache_an_hour(tmp_path: Path) -> None:
    calls = [Call(0, read=0, write_1h=12000), Call(60, read=12000, write_1h=500)]
    at = _clock(tmp_path, calls, 160)
    assert (at.ttl_seconds, at.seconds_left, at.status) == (3600.0, 3500.0, "58:20 left")
    assert _clock(tmp_path, calls, 3659).status == "0:01 left"
    assert _clock(tmp_path, calls, 3660).status == "expired"


def test_a_call_writing_both_lifetimes_expires_with_its_five_minute_entries(tmp_path: Path) -> None:
    calls = [Call(0, read=0, write_1h=12000), Call(60, read=12000, write_5m=100, write_1h=400)]
    at = _clock(tmp_path, calls, 100)
    assert (at.ttl_seconds, at.expires_at) == (300.0, T0 + 360)


def test_a_read_only_call_refreshes_the_cache_for_the_lifetime_of_the_writes_before_it(
    tmp_path: Path,
) -> None:
    calls = [Call(0, read=0, write_1h=12000), Call(600, read=12000)]
    at = _clock(tmp_path, calls, 700)
    assert (at.last_use_at, at.ttl_seconds, at.expires_at) == (T0 + 600, 3600.0, T0 + 4200)


def test_a_call_that_neither_reads_nor_writes_leaves_the_clock_as_it_was() -> None:
    used = LIFE.call(sent_at=0.0, model="m", prompt_tokens=5000, cached_tokens=0, written_tokens=4990)
    idle = LIFE.call(sent_at=100.0, model="m", prompt_tokens=300, cached_tokens=0)
    clock = clock_of([used, idle], session="s", now=150.0)
    assert (clock.last_call_at, clock.last_use_at, clock.expires_at) == (100.0, 0.0, 300.0)


def test_usage_without_a_write_split_is_a_five_minute_write(tmp_path: Path) -> None:
    calls = [Call(0, read=0, write_1h=12000, split=False)]
    assert _clock(tmp_path, calls, 10).ttl_seconds == 300.0


def test_a_provider_without_a_documented_lifetime_has_no_clock() -> None:
    life = lifetimes_of("deepseek")
    call = life.call(sent_at=0.0, model="deepseek-chat", prompt_tokens=900, cached_tokens=640)
    clock = clock_of([call], session="s", now=10.0)
    assert (clock.expires_at, clock.seconds_left, clock.expired, clock.status) == (
        None,
        None,
        False,
        "no TTL known",
    )
    assert clock_of([], session="s", now=0.0).status == "no cache yet"


def test_the_lifetimes_are_the_provider_profiles() -> None:
    assert lifetimes_of("anthropic") == Lifetimes(dict(CACHE_TTLS)["5m"], dict(CACHE_TTLS)["1h"])
    assert lifetimes_of("openai").default == 600.0
    assert lifetimes_of("openai", {"prompt_cache_retention": "24h"}).default == 86400.0
    assert lifetimes_of("openai").long is None and lifetimes_of("gemini") == Lifetimes(None)
    assert (
        LIFE.write_ttl(0, None) is None
        and LIFE.write_ttl(10, 10) == 3600.0
        and LIFE.write_ttl(10, 9) == 300.0
    )


def test_format_left() -> None:
    assert [format_left(s) for s in (0, 0.99, 59.99, 60, 215, 3599.5, 3600, 3661, -5)] == [
        "0:00", "0:00", "0:59", "1:00", "3:35", "59:59", "1:00:00", "1:01:01", "0:00",
    ]  # fmt: skip


@given(
    st.lists(
        st.tuples(st.floats(0, 2000), st.integers(0, 5000), st.integers(0, 5000), st.booleans()), min_size=1
    ),
    st.floats(0, 10_000),
    st.floats(0, 10_000),
)
def test_time_left_never_grows_as_the_clock_runs(
    raw: list[tuple[float, int, int, bool]], a: float, b: float
) -> None:
    sent, calls = 0.0, []
    for gap, read, written, hour in raw:
        sent += gap
        calls.append(LIFE.call(sent_at=sent, model="m", prompt_tokens=read + written + 1, cached_tokens=read,
                               written_tokens=written, written_1h_tokens=written if hour else 0))  # fmt: skip
    early, late = (clock_of(calls, session="s", now=sent + t) for t in sorted((a, b)))
    if early.expires_at is None:
        assert late.expires_at is None and not late.expired
        return
    assert late.seconds_left is not None and early.seconds_left is not None
    assert late.seconds_left <= early.seconds_left
    assert early.expired == (early.seconds_left == 0.0) and (not early.expired or late.expired)
    assert early.ttl_seconds in (300.0, 3600.0)
    assert early.expires_at == early.last_use_at + early.ttl_seconds  # type: ignore[operator]


# ------------------------------------------------------------------------------------- misses


def _call(at: float, read: int, written: int, model: str = "m", compaction: bool = False) -> ClockCall:
    return LIFE.call(sent_at=at, model=model, prompt_tokens=read + written + 5, cached_tokens=read,
                     written_tokens=written, compaction=compaction)  # fmt: skip


FIRST, SECOND = _call(0, 0, 10000), _call(30, 10000, 500)  # the second left 10,500 cached


@pytest.mark.parametrize(
    ("last", "cause", "missed"),
    [
        (_call(60, 10500, 300), None, 0),  # reads all the previous call left: a hit
        (_call(60, 12000, 300), None, 0),  # more than that (another thread wrote it): a hit
        (_call(60, 10499, 300), "history_rewritten", 1),
        (_call(60, 0, 10800), "head_changed", 10500),
        (_call(60, 2000, 8800, model="other"), "model_switch", 8500),
        (_call(330, 2000, 8800), "ttl_expiry", 8500),  # 300 s after the last use
        (_call(329, 2000, 8800), "history_rewritten", 8500),
        (_call(60, 2000, 3000, compaction=True), "compaction", 8500),
        (_call(400, 2000, 3000, compaction=True), "ttl_expiry", 8500),
    ],
)
def test_the_last_miss_and_its_cause(last: ClockCall, cause: str | None, missed: int) -> None:
    clock = clock_of([FIRST, SECOND, last], session="s", now=500.0)
    assert (clock.last_miss_cause, clock.missed_tokens) == (cause, missed)


def test_a_first_call_that_reads_nothing_is_a_cold_start_and_one_that_reads_is_a_hit() -> None:
    assert clock_of([FIRST], session="s", now=1.0).last_miss_cause == "cold_start"
    assert clock_of([_call(0, 9000, 100)], session="s", now=1.0).last_miss_cause is None
    assert clock_of([FIRST, SECOND], session="s", now=40.0).last_miss_cause is None


def test_the_causes_are_those_the_analysis_names() -> None:
    assert set(CLOCK_CAUSES) <= set(CAUSES)


def test_the_transcript_session_ends_with_a_ttl_expiry(tmp_path: Path) -> None:
    clock = _clock(tmp_path, a_session(), 600)
    assert (clock.calls, clock.last_miss_cause, clock.missed_tokens) == (4, "ttl_expiry", 13400 - 5000)
    assert clock.hit_ratio == round(29800 / 51712, 4)


# ------------------------------------------------------------------------------------- cost


def test_the_cost_of_a_call_at_each_price() -> None:
    price = ClockPrice(hit=1.0, miss=10.0, output=100.0, write=20.0, write_1h=40.0)
    cost = price.cost(prompt=1_000_000, cached=100_000, written=300_000, written_1h=100_000, output=10_000)
    # 0.1 M read at 1, 0.2 M 5-minute writes at 20, 0.1 M 1-hour writes at 40, 0.6 M fresh at 10, output
    assert cost == pytest.approx(0.1 + 4 + 4 + 6 + 1)
    unbilled = ClockPrice(hit=1.0, miss=10.0, output=0.0)  # writes at the input price
    assert unbilled.cost(prompt=1_000_000, cached=0, written=500_000, written_1h=0, output=0) == 10.0


def test_the_cost_so_far_is_what_the_report_prices(tmp_path: Path) -> None:
    """The clock's pure-Python cost equals :func:`request_costs` (the report's) on the same calls."""
    calls = [*a_session(), Call(600, read=13500, write_1h=700, output=321)]
    clock = _clock(tmp_path, calls, 700)
    frame = pl.DataFrame(
        {
            "session": ["s"] * len(calls),
            "index": list(range(len(calls))),
            "model": [MODEL] * len(calls),
            "prompt_tokens": [c.uncached + c.read + c.write_5m + c.write_1h for c in calls],
            "predicted_cached_tokens": [c.read for c in calls],
            "reported_prompt_tokens": [c.uncached + c.read + c.write_5m + c.write_1h for c in calls],
            "reported_cached_tokens": [c.read for c in calls],
            "reported_cache_write_tokens": [c.write_5m + c.write_1h for c in calls],
            "reported_cache_write_1h_tokens": [c.write_1h for c in calls],
            "reported_completion_tokens": [c.output for c in calls],
        }
    )
    expected = request_costs(frame, provider="anthropic")["cost_reported"].sum()
    assert clock.cost_usd == pytest.approx(expected, abs=1e-6) and clock.unpriced_calls == 0
    assert clock_price("claude-opus-4-6") == ClockPrice(0.5, 5.0, 25.0, 6.25, 10.0)


def test_an_unpriced_model_is_counted_not_priced(tmp_path: Path) -> None:
    clock = _clock(tmp_path, [Call(0, read=0, write_5m=5000, model="claude-unknown-9")], 10)
    assert (clock.cost_usd, clock.unpriced_calls) == (None, 1)


# ------------------------------------------------------------------------------------- sources


def test_records_and_the_transcript_reader_agree(tmp_path: Path) -> None:
    """A folder is read as records (each call timed by its first line); the transcript file by the
    transcript reader (timed by the event it answers): the same counts, cost and cause, the clock
    later by the model's latency."""
    write_transcript(tmp_path / "p" / f"{SESSION}.jsonl", a_session())
    by_records = cache_clock(tmp_path / "p", now=T0 + 600)[SESSION]
    by_reader = cache_clock(tmp_path / "p" / f"{SESSION}.jsonl", now=T0 + 600)[SESSION]
    for field in ("calls", "prompt_tokens", "cached_tokens", "cost_usd", "last_miss_cause", "missed_tokens"):
        assert getattr(by_records, field) == getattr(by_reader, field), field
    assert by_records.expires_at == by_reader.expires_at + 4.0  # type: ignore[operator]
    assert by_records.provider == by_reader.provider == "anthropic"


def test_cache_clock_takes_records_of_any_provider() -> None:
    body = {"model": "gpt-4o", "messages": []}
    usages = [Usage(2000, 10, 0, None), Usage(2000, 10, 1536, None)]
    records = [
        RequestRecord(body, session="a", index=i, timestamp=1000.0 + 60 * i, usage=u)
        for i, u in enumerate(usages)
    ]
    clock = cache_clock(records, now=1100.0)["a"]
    assert (clock.provider, clock.ttl_seconds, clock.seconds_left) == ("openai", 600.0, 560.0)
    # OpenAI reports no writes: a call that read nothing still wrote its prompt (automatic caching)
    assert cache_clock(records[:1], now=1100.0)["a"].status == "8:20 left"
    written = [attrs.evolve(r, usage=attrs.evolve(r.usage, cache_write_tokens=0)) for r in records[:1]]
    assert cache_clock(written, now=1100.0)["a"].status == "no cache yet"  # reported: nothing written
    with pytest.raises(UsageError, match="item 0 is a dict"):
        cache_clock([{"request": {}}])  # type: ignore[list-item]


def test_a_tally_round_trips_through_json_and_refuses_others() -> None:
    tally = ClockTally().add(FIRST).add(SECOND)
    assert ClockTally.from_json(tally.to_json()) == tally
    with pytest.raises(RecordFormatError, match="a clock tally has the fields"):
        ClockTally.from_json({"calls": 1})
    assert Lifetimes.from_json(LIFE.to_json()) == LIFE
    with pytest.raises(RecordFormatError, match="lifetimes"):
        Lifetimes.from_json([300, -1])
