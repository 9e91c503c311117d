"""The replay's cache keyed by model and shared across sessions (``promptkit/analysis/replay.py``), on
Gemini's implicit cache: one cache per model, a session's first call may read its head written outside
the log (https://ai.google.dev/gemini-api/docs/caching, "Implicit caching")."""

from __future__ import annotations

import attrs
import polars as pl
import pytest

from promptkit.analysis.api import analyze_requests
from promptkit.analysis.causes import explain_causes
from promptkit.analysis.replay import OUTSIDE_SOURCE
from promptkit.layout import RequestRecord
from promptkit.providers.registry import get_provider

WORDS = " ".join(f"word{i}" for i in range(3000))  # well over every Gemini minimum


def _record(session: str, model: str, turns: int, index: int = 0) -> RequestRecord:
    messages = [{"role": "system", "content": "You are terse. " + WORDS}]
    for t in range(turns):
        messages += [{"role": "user", "content": f"question {t} " * 50}]
        if t < turns - 1:
            messages += [{"role": "assistant", "content": f"answer {t} " * 50}]
    return RequestRecord({"model": model, "messages": messages}, session, index, provider="gemini")


def _frame(records: list[RequestRecord], view: str = "consecutive", **model: bool) -> pl.DataFrame:
    profile = get_provider("gemini")
    cache = attrs.evolve(profile.cache_model, **model)  # type: ignore[misc]
    return analyze_requests(records, provider=profile, cache_model=cache, view=view).requests


@pytest.mark.parametrize("view", ["consecutive", "simulated"])
def test_a_session_back_on_its_model_reads_what_that_model_wrote(view: str) -> None:
    pro, flash = "gemini-2.5-pro", "gemini-2.5-flash"
    records = [_record("s", pro, 1, 0), _record("s", flash, 2, 1), _record("s", pro, 3, 2)]
    frame = _frame(records, view, shared_heads=False)
    cached = frame["predicted_cached_tokens"].to_list()
    prompts = frame["prompt_tokens"].to_list()
    assert cached[1] == 0  # flash reads nothing pro wrote
    assert cached[2] == prompts[0]  # back on pro: what pro's first call wrote, not flash's longer prompt
    # one cache for every model (the former rule): the switch back reads nothing of flash's entry either
    single = _frame(records, view, shared_heads=False, per_model=False)["predicted_cached_tokens"].to_list()
    assert single[2] == 0
    causes = explain_causes(frame).row(1, named=True)
    assert causes["cause"] == "model_switch" and causes["lost_model_switch"] == prompts[1]


def test_a_first_call_may_read_its_head_from_outside_the_log() -> None:
    records = [_record("a", "gemini-2.5-flash", 1), _record("b", "gemini-2.5-flash", 1)]
    frame = _frame(records)
    head = frame["head_end_tokens"].to_list()
    assert head[0] > 1024
    assert frame["predicted_cached_tokens"].to_list() == head  # each session's system prompt
    assert frame["cached_source"].to_list() == [OUTSIDE_SOURCE] * 2
    tied = _frame(records, shared_heads=False)  # a cache tied to the session: a first call reads nothing
    assert tied["predicted_cached_tokens"].to_list() == [0, 0]


def test_a_head_under_the_minimum_is_not_read_from_outside_the_log() -> None:
    short = RequestRecord(
        {"model": "gemini-2.5-pro", "messages": [{"role": "system", "content": "terse " * 300},
                                                 {"role": "user", "content": "hi"}]},
        "s", provider="gemini",
    )  # fmt: skip
    assert _frame([short])["predicted_cached_tokens"].to_list() == [0]
