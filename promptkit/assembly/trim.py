"""Trimming a prompt to a token budget: the oldest history units go first, nothing else is touched.

Only history messages are ever dropped. The history is grouped with
:func:`promptkit.schema.history.group_tool_calls`, so an assistant tool call and its results are one unit
and go together; units are dropped oldest first until the prompt fits. The stable head (persona,
identity, knowledge, context), the per-turn blocks (turn-context, volatile, focus, turn-hint), the
directive block, the current message and this turn's tool loop are never dropped or shortened, and
neither is a history unit holding a request-time directive block (``metadata["injector"]`` in
``DIRECTIVE_KINDS``: "agent 裁剪时不缩不删"); an archived message that merely has a directive *kind* (a
host notice stored as ``role="notice"``) is ordinary history. When what may not be dropped alone exceeds
the budget, :attr:`TrimResult.fits` is false and the caller decides.

>>> from promptkit.schema.message import DIRECTIVE_KINDS, Message
>>> msgs = [Message(role="system", content="persona"),
...         Message(role="user", content="old question " * 20), Message(role="assistant", content="old answer"),
...         Message(role="user", content="now?")]
>>> r = trim_to_budget(msgs, 20)
>>> [m.content for m in r.messages], [u.at for u in r.dropped], r.fits
(['persona', 'old answer', 'now?'], [(1,)], True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from promptkit.assembly.anchors import FrameSlot, LayoutEntry
from promptkit.assembly.placement import AssembledPrompt, layout_of
from promptkit.assembly.registry import message_tuple
from promptkit.assembly.tokens import Counter, message_tokens, resolve_counter
from promptkit.schema.history import group_tool_calls
from promptkit.schema.message import DIRECTIVE_KINDS, Message

__all__ = ["DroppedUnit", "TrimResult", "trim_to_budget"]


def _tuple(value: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(value)


@attrs.frozen
class DroppedUnit:
    """One history unit that was dropped: indices into the input (``at``), its shape (``complete``,
    ``partial``, ``loose``, ``single``, as :func:`group_tool_calls` says), its messages and their tokens."""

    at: tuple[int, ...] = attrs.field(converter=_tuple)
    shape: str
    messages: tuple[Message, ...] = attrs.field(converter=_tuple)
    tokens: int


@attrs.frozen
class TrimResult:
    """The trimmed messages and their layout, what was dropped (oldest first), and the token counts."""

    messages: tuple[Message, ...] = attrs.field(converter=_tuple)
    layout: tuple[LayoutEntry, ...] = attrs.field(converter=_tuple)
    dropped: tuple[DroppedUnit, ...] = attrs.field(converter=_tuple)
    tokens_before: int
    tokens_after: int
    budget: int

    @property
    def fits(self) -> bool:
        """True when ``tokens_after <= budget``."""
        return self.tokens_after <= self.budget

    @property
    def dropped_tokens(self) -> int:
        """Tokens the dropped units cost (``tokens_before - tokens_after``)."""
        return sum(u.tokens for u in self.dropped)

    def to_prompt(self) -> AssembledPrompt:
        """The trimmed messages and layout as an :class:`AssembledPrompt`."""
        return AssembledPrompt(messages=self.messages, layout=self.layout)


def trim_to_budget(
    prompt: AssembledPrompt | Sequence[Message],
    budget: int,
    *,
    count: Counter | None = None,
    tokenizer: Any = None,
) -> TrimResult:
    """Drop the oldest history units of ``prompt`` until its tokens fit ``budget``.

    ``prompt`` is an :class:`AssembledPrompt` (its layout says which messages are history) or a list of
    messages (read with :func:`promptkit.assembly.placement.layout_of`; a block of a contributor it cannot
    know is then recognised only by its position). Tokens per message are
    :func:`promptkit.assembly.tokens.message_tokens` with ``count`` (a ``str -> int`` callable) or
    ``tokenizer`` (anything with ``encode``), by default the cheap :func:`estimate_tokens`.

    Returns a :class:`TrimResult`; never mutates its input. A ``budget`` below zero is a ``ValueError``.
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise ValueError(f"budget must be a non-negative int, got {budget!r}")
    counter = resolve_counter(count, tokenizer)
    if isinstance(prompt, AssembledPrompt):
        messages, layout = prompt.messages, prompt.layout
    else:
        messages = message_tuple(prompt, "trim_to_budget")
        layout = layout_of(messages)
    costs = [message_tokens(m, counter) for m in messages]
    total = sum(costs)
    tokens_before = total

    history = [i for i, entry in enumerate(layout) if entry.slot == FrameSlot.HISTORY.value]
    units = group_tool_calls([messages[i] for i in history])
    dropped: list[DroppedUnit] = []
    removed: set[int] = set()
    for unit in units:
        if total <= budget:
            break
        at = tuple(history[k] for k in unit.at)
        if any(messages[i].injector in DIRECTIVE_KINDS for i in at):
            continue  # a request-time directive block is never trimmed, wherever it sits
        tokens = sum(costs[i] for i in at)
        dropped.append(
            DroppedUnit(at=at, shape=unit.shape, messages=[messages[i] for i in at], tokens=tokens)
        )
        removed.update(at)
        total -= tokens
    keep = [i for i in range(len(messages)) if i not in removed]
    return TrimResult(
        messages=[messages[i] for i in keep],
        layout=[layout[i] for i in keep],
        dropped=dropped,
        tokens_before=tokens_before,
        tokens_after=total,
        budget=budget,
    )
