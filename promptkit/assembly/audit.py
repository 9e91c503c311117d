"""The anchor audit: "are adjacent turns byte-identical?" (pipeline contract §9), asked of every contributor.

A provider's prefix cache compares a request with the previous one from the first token and stops at the
first difference; everything after it is billed as a miss. A contributor anchored before the history
(identity, knowledge, context) whose output changes between two turns therefore re-bills the history
every time it changes. :func:`audit` builds every contributor over a sequence of turns, counts how often
each one's output changed, and computes how many tokens of cached prefix that cost, from the assembled
prompts themselves.

>>> registry = PromptRegistry()
>>> registry.register("rules", "context", lambda view: "Be brief.")
>>> registry.register("clock", "identity", lambda view: f"Turn {len(view.messages)}")
>>> turns = [PromptView(messages=[Message(role="system", content="persona"),
...                               *[Message(role="user", content=f"message {i}") for i in range(n)]])
...          for n in (1, 2, 3)]
>>> df = audit(registry, turns)
>>> df.select("key", "anchor", "changes", "suggested_anchor").rows()
[('clock', 'identity', 2, 'turn-context'), ('rules', 'context', 0, 'context')]
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from promptkit.assembly.anchors import Anchor, utf16_key
from promptkit.assembly.placement import place_blocks
from promptkit.assembly.registry import Contributor, PromptRegistry, PromptView, build_contributors, run_sync
from promptkit.assembly.token_counts import Counter, message_tokens, resolve_counter
from promptkit.chat.message import Message, to_openai_dict
from promptkit.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

__all__ = ["AUDIT_COLUMNS", "audit"]

#: Columns of the DataFrame :func:`audit` returns, with their meaning.
AUDIT_COLUMNS: dict[str, str] = {
    "key": "contributor key",
    "anchor": "its declared anchor",
    "before_history": "true for identity, knowledge, context",
    "turns": "number of turns audited",
    "built": "turns in which it placed at least one block",
    "absent": "turns in which its build raised, timed out or returned something invalid",
    "changes": "adjacent turn pairs whose outputs (the tuple of its blocks) are not byte-identical",
    "change_rate": "changes / (turns - 1); null with a single turn",
    "mean_tokens": "mean tokens of its blocks per turn",
    "cached_prefix_lost_tokens": "total tokens of cached prefix its changes cost over all turns",
    "cached_prefix_lost_tokens_per_turn": "cached_prefix_lost_tokens / (turns - 1); null with a single turn",
    "move_saves_tokens_per_turn": (
        "cached_prefix_lost_tokens_per_turn - mean_tokens: what moving it after the history saves per turn "
        "(its changes stop re-billing the history; its own tokens are then never cached); null when not before the history"
    ),
    "suggested_anchor": "'turn-context' when moving it saves tokens (move_saves_tokens_per_turn > 0), else its anchor",
}

Turn = PromptView | tuple[Sequence[Message], PromptView | None] | Sequence[Message]


def _turn(i: int, turn: Any) -> tuple[tuple[Message, ...], PromptView]:
    if isinstance(turn, PromptView):
        return turn.messages, turn
    if (
        isinstance(turn, tuple)
        and len(turn) == 2
        and not isinstance(turn[0], Message)
        and (turn[1] is None or isinstance(turn[1], PromptView))
    ):
        messages = tuple(turn[0])
        view = turn[1] if turn[1] is not None else PromptView()
    elif isinstance(turn, Sequence) and not isinstance(turn, str):
        messages, view = tuple(turn), PromptView()
    else:
        raise UsageError(
            f"turn {i}: expected a PromptView, (messages, view) or a list of Message, got {turn!r}"
        )
    for j, m in enumerate(messages):
        if not isinstance(m, Message):
            raise UsageError(f"turn {i}: message {j} is {type(m).__name__}, expected Message")
    return messages, attrs.evolve(view, messages=messages)


@attrs.frozen
class _TurnOutputs:
    frame: tuple[Message, ...]  # the turn's messages without blocks of registered contributors
    outputs: dict[str, tuple[str, ...]]  # key -> blocks (empty: nothing this turn)
    absent: frozenset[str]


async def _build_turns(
    contributors: Sequence[Contributor],
    turns: Sequence[tuple[tuple[Message, ...], PromptView]],
    build_timeout: float | None,
) -> list[_TurnOutputs]:
    keys = {c.key for c in contributors}
    built: list[_TurnOutputs] = []
    for messages, view in turns:
        materialized: dict[str, list[str]] = {}
        frame = []
        for m in messages:
            if m.injector in keys:
                materialized.setdefault(m.injector, []).append(m.content or "")
            else:
                frame.append(m)
        pending = [c for c in contributors if c.key not in materialized]
        results = await build_contributors(pending, view, build_timeout=build_timeout) if pending else []
        outputs = {key: tuple(b for b in blocks if b) for key, blocks in materialized.items()}
        outputs.update({r.contributor.key: r.blocks for r in results})
        absent = frozenset(r.contributor.key for r in results if r.absent is not None)
        built.append(_TurnOutputs(tuple(frame), outputs, absent))
    return built


class _Meter:
    """Serialized bytes and token cost of messages, each computed once."""

    def __init__(self, count: Counter) -> None:
        self._count = count
        self._tokens: dict[str, int] = {}

    def wire(self, message: Message) -> str:
        return json.dumps(to_openai_dict(message), ensure_ascii=False)

    def tokens(self, message: Message, wire: str | None = None) -> int:
        wire = wire if wire is not None else self.wire(message)
        cost = self._tokens.get(wire)
        if cost is None:
            cost = self._tokens[wire] = message_tokens(message, self._count)
        return cost

    def common_prefix_tokens(self, cached: Sequence[Message], request: Sequence[Message]) -> int:
        total = 0
        for a, b in zip(cached, request, strict=False):
            wire = self.wire(a)
            if wire != self.wire(b):
                break
            total += self.tokens(a, wire)
        return total


def audit(
    registry: PromptRegistry,
    turns: Sequence[Turn],
    *,
    count: Counter | None = None,
    tokenizer: Any = None,
    build_timeout: float | None = None,
    only_breaking: bool = False,
) -> pl.DataFrame:
    """Build every contributor of ``registry`` over ``turns`` and report which ones break the cache.

    ``turns`` is a sequence of :class:`PromptView` (its ``messages`` are the turn's messages), of
    ``(messages, view)`` pairs, or of message lists, in conversation order. Each turn's messages are the
    frame without contributor blocks; a block of a registered contributor already in them is taken as
    that contributor's output for the turn (not built again).

    One row per contributor (see :data:`AUDIT_COLUMNS`), sorted by ``cached_prefix_lost_tokens_per_turn``
    (highest first), then ``changes``, then key. Stable contributors are listed too, with ``changes`` 0;
    ``only_breaking=True`` keeps only the contributors anchored before the history whose output changed.

    **Cost of a change.** For turn *k* the previous request *k-1* is what the provider has cached.
    The *ideal* request is turn *k* assembled with every before-history contributor's output as in turn
    *k-1*; the cost of contributor X changing is the tokens of the prefix shared with request *k-1*
    (whole messages, compared as serialized chat-completions JSON, counted with
    :func:`promptkit.assembly.token_counts.message_tokens`) by the ideal request minus those shared by the ideal
    request with only X's output changed. That is X's block, the rest of the head after it and the whole
    history, re-billed; a per-turn contributor costs nothing here, whatever it does.

    **The suggestion.** Moving X after the history (``turn-context``) stops its changes re-billing the
    history, but its own tokens are then never cached. So ``turn-context`` is suggested when X changes and
    ``cached_prefix_lost_tokens_per_turn`` exceeds its ``mean_tokens`` (``move_saves_tokens_per_turn`` > 0):
    per-turn material always qualifies; a session summary recomputed once in a long session does not
    (the pipeline contract: session-level material that changes now and then stays before the history, an amortized
    cost like compression).

    Token counts use ``count`` (``str -> int``), or ``tokenizer`` (anything with ``encode``), or the
    cheap estimate. polars is imported when this function runs. Raises ``ValueError`` for no turns.
    """
    import polars as pl

    resolved = [_turn(i, turn) for i, turn in enumerate(turns)]
    if not resolved:
        raise UsageError("audit needs at least one turn")
    meter = _Meter(resolve_counter(count, tokenizer))
    contributors = registry.contributors()
    anchors: Mapping[str, Anchor] = {c.key: c.anchor for c in contributors}
    built = run_sync(lambda: _build_turns(contributors, resolved, build_timeout))
    changes, lost = _count_changes(built, contributors, anchors, meter)
    rows = [
        _row(c, built, changes[c.key], lost[c.key], meter)
        for c in contributors
        if not only_breaking or (c.anchor.before_history and changes[c.key])
    ]
    rows.sort(key=_row_order)
    return pl.DataFrame(rows, schema=_schema())


def _count_changes(
    built: Sequence[_TurnOutputs],
    contributors: Sequence[Contributor],
    anchors: Mapping[str, Anchor],
    meter: _Meter,
) -> tuple[dict[str, int], dict[str, int]]:
    """Per contributor key: how many adjacent turn pairs changed its output, and the cached-prefix tokens lost."""

    def assemble(frame: tuple[Message, ...], outputs: Mapping[str, tuple[str, ...]]) -> tuple[Message, ...]:
        return place_blocks(frame, {k: v for k, v in outputs.items() if v}, anchors).messages

    changes = dict.fromkeys(anchors, 0)
    lost = dict.fromkeys(anchors, 0)
    previous_request: tuple[Message, ...] | None = None
    for k, turn in enumerate(built):
        request = assemble(turn.frame, turn.outputs)
        if previous_request is not None:
            before = built[k - 1].outputs
            changed = [c.key for c in contributors if turn.outputs.get(c.key, ()) != before.get(c.key, ())]
            stable = {
                key: (before.get(key, ()) if anchor.before_history else turn.outputs.get(key, ()))
                for key, anchor in anchors.items()
            }
            ideal = meter.common_prefix_tokens(previous_request, assemble(turn.frame, stable))
            for key in changed:
                changes[key] += 1
                if anchors[key].before_history:
                    only = {**stable, key: turn.outputs.get(key, ())}
                    kept = meter.common_prefix_tokens(previous_request, assemble(turn.frame, only))
                    lost[key] += max(0, ideal - kept)
        previous_request = request
    return changes, lost


def _row(
    c: Contributor, built: Sequence[_TurnOutputs], changes: int, lost: int, meter: _Meter
) -> dict[str, Any]:
    """One contributor's row of the audit frame (see :data:`AUDIT_COLUMNS`)."""
    n = len(built)
    block_tokens = [
        sum(meter.tokens(Message(role="system", content=b)) for b in turn.outputs.get(c.key, ()))
        for turn in built
    ]
    per_turn = lost / (n - 1) if n > 1 else None
    mean_tokens = sum(block_tokens) / n
    saves = (per_turn or 0.0) - mean_tokens if c.anchor.before_history and n > 1 else None
    return {
        "key": c.key,
        "anchor": c.anchor.value,
        "before_history": c.anchor.before_history,
        "turns": n,
        "built": sum(1 for turn in built if turn.outputs.get(c.key)),
        "absent": sum(1 for turn in built if c.key in turn.absent),
        "changes": changes,
        "change_rate": changes / (n - 1) if n > 1 else None,
        "mean_tokens": mean_tokens,
        "cached_prefix_lost_tokens": lost,
        "cached_prefix_lost_tokens_per_turn": per_turn,
        "move_saves_tokens_per_turn": saves,
        "suggested_anchor": (
            Anchor.TURN_CONTEXT.value if changes and saves is not None and saves > 0 else c.anchor.value
        ),
    }


def _row_order(row: Mapping[str, Any]) -> tuple[float, int, bytes]:
    """Highest cached_prefix_lost_tokens_per_turn first, then most changes, then key."""
    return (-(row["cached_prefix_lost_tokens_per_turn"] or 0.0), -row["changes"], utf16_key(row["key"]))


def _schema() -> dict[str, Any]:
    """The polars schema of the audit frame (see :data:`AUDIT_COLUMNS`)."""
    import polars as pl

    return {
        "key": pl.String,
        "anchor": pl.String,
        "before_history": pl.Boolean,
        "turns": pl.Int64,
        "built": pl.Int64,
        "absent": pl.Int64,
        "changes": pl.Int64,
        "change_rate": pl.Float64,
        "mean_tokens": pl.Float64,
        "cached_prefix_lost_tokens": pl.Int64,
        "cached_prefix_lost_tokens_per_turn": pl.Float64,
        "move_saves_tokens_per_turn": pl.Float64,
        "suggested_anchor": pl.String,
    }
