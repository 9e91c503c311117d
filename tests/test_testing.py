"""Tests for promptkit/testing.py: assert_cache_stable passes stable prompts and fails broken ones
with the cause named."""

from __future__ import annotations

import pytest

from promptkit.errors import CacheGateError
from promptkit.testing import assert_cache_stable

LONG = "You are a careful assistant. " * 4


def _turns(system_of: object) -> list[dict]:
    turns, history = [], [{"role": "user", "content": "start"}]
    for k in range(3):
        turns.append({"messages": [{"role": "system", "content": system_of(k)}, *history]})  # type: ignore[operator]
        history += [{"role": "assistant", "content": f"reply {k}"}, {"role": "user", "content": f"more {k}"}]
    return turns


def test_stable_prompts_pass() -> None:
    gate = assert_cache_stable(_turns(lambda k: LONG))
    assert gate.passed and gate.sessions.height == 1


def test_a_timestamp_in_the_system_prompt_fails_with_its_cause() -> None:
    with pytest.raises(CacheGateError, match=r"volatile_value: timestamp: messages\[0\] char 6") as info:
        assert_cache_stable(_turns(lambda k: f"Time: 2026-12-03T10:0{k}:00Z. {LONG}"))
    assert isinstance(info.value, AssertionError)


def test_layout_loss_budget_and_min_hit() -> None:
    broken = _turns(lambda k: f"Time: 2026-12-03T10:0{k}:00Z. {LONG}")
    assert assert_cache_stable(broken, max_layout_loss=None).passed
    with pytest.raises(CacheGateError, match="hit ratio"):
        assert_cache_stable(_turns(lambda k: LONG), min_hit=0.99)
