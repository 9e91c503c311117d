"""Reading history: tool-call grouping and the history a model may see (platform message contract, pipeline contract §2.3, §10).

Every reader of a stored conversation (the agent loading history, a session timeline, a summarizer
cutting units) groups tool calls the same way, with :func:`group_tool_calls`, and compares only the
*shape* of the units it gets back. Why a grouping is needed at all: a tool group's results are stamped
one millisecond after another, so a store that reads history by timestamp (MongoDB, SQLite) sorts the
messages archived while the group was being written (an input that arrived meanwhile, a shadow archive
of a message the trigger or flow control swallowed, the reply that followed) *between* the call and its
results. Grouping by adjacency would split the group; :func:`group_tool_calls` puts it back together.

>>> from promptkit.chat.message import Message, ToolCall
>>> history = [
...     Message(role="assistant", tool_calls=[ToolCall(id="c1", name="search")]),
...     Message(role="user", content="还在吗?"),          # archived while the tool ran
...     Message(role="tool", tool_call_id="c1", content="3 hits"),
... ]
>>> [(u.at, u.shape) for u in group_tool_calls(history)]
[((0, 2), 'complete'), ((1,), 'single')]
>>> [m.role for m in history_for_model(history)]
['assistant', 'tool', 'user']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal, Protocol

import attrs

from promptkit.chat.message import CONTROL_KINDS, Message, ToolCall, WellKnownMetadataKeys
from promptkit.errors import UsageError

__all__ = [
    "UNIT_SHAPES",
    "HistoryEntry",
    "MessageUnit",
    "UnitShape",
    "drop_control_kinds",
    "group_tool_calls",
    "history_for_model",
]

UnitShape = Literal["complete", "partial", "loose", "single"]
#: The four unit shapes: a tool group with every result found, a tool group missing results, a tool
#: result outside any group, and any other message on its own.
UNIT_SHAPES: Final[tuple[str, ...]] = ("complete", "partial", "loose", "single")


class HistoryEntry(Protocol):
    """What :func:`group_tool_calls` reads from a message (a :class:`Message` fits)."""

    @property
    def role(self) -> str: ...

    @property
    def tool_calls(self) -> Sequence[ToolCall] | None: ...

    @property
    def tool_call_id(self) -> str | None: ...


def _at_converter(value: Sequence[int]) -> tuple[int, ...]:
    return tuple(value)


def _check_at(
    instance: MessageUnit, attribute: attrs.Attribute[tuple[int, ...]], value: tuple[int, ...]
) -> None:
    if not value:
        raise UsageError("MessageUnit.at: must hold at least one index")
    for i in value:
        if not isinstance(i, int) or isinstance(i, bool) or i < 0:
            raise UsageError(f"MessageUnit.at: every index must be a non-negative int, got {i!r}")


@attrs.frozen
class MessageUnit:
    """One unit of history: indices into the original list, and the unit's shape.

    ``at`` holds a tool group's call first, then its results in the order they were found; any other
    unit holds one index. ``shape`` is ``complete`` (a tool group whose every result was found),
    ``partial`` (a tool group missing results), ``loose`` (a tool result outside any group) or
    ``single`` (any other message).

    >>> MessageUnit(at=(0, 2), shape="complete")
    MessageUnit(at=(0, 2), shape='complete')
    """

    at: tuple[int, ...] = attrs.field(converter=_at_converter, validator=_check_at)
    shape: UnitShape = attrs.field(validator=attrs.validators.in_(UNIT_SHAPES))


def _is_tool_call(m: HistoryEntry) -> bool:
    return m.role == "assistant" and bool(m.tool_calls)


def _is_tool_result(m: HistoryEntry) -> bool:
    return m.role == "tool"


def group_tool_calls(messages: Sequence[HistoryEntry]) -> list[MessageUnit]:
    """Group ``messages`` into units; every index appears in exactly one unit.

    The algorithm, scanning left to right from the first index not yet placed:

    - an ``assistant`` message with at least one tool call opens a **tool group** and looks forward
      for ``tool`` messages whose ``tool_call_id`` is one of its call ids. The look-ahead **stops**

      * when every call id has its result (the group is ``complete``), or
      * at the next tool call (the next ``assistant`` with tool calls), or
      * at a ``tool`` message whose ``tool_call_id`` is not one of the call ids (a mismatched result,
        including one with no ``tool_call_id``) or whose id was already found (a repeated result), or
      * at the end of the list;

      a group stopped before every id was found is ``partial``. The message that stopped the scan is
      not part of the group: scanning resumes there.
    - every other message met before the stop (user, system, a plain assistant reply, a notice...) is
      **moved after the group**, each as a ``single`` unit, keeping their relative order;
    - a ``tool`` message that is not taken by a group is a ``loose`` unit;
    - any other message is a ``single`` unit.

    Units come back in the order after the moves, so reading ``at`` of each unit in turn gives a
    history in which every result directly follows its call. Duplicate call ids inside one assistant
    message count once (one result satisfies them).

    Interleaving, as a timestamp-ordered store returns it (``A(c1,c2)`` is an assistant calling
    ``c1`` and ``c2``, ``T(c1)`` the result of ``c1``, ``U`` a user message)::

        0 A(c1)  1 U  2 S  3 T(c1)  4 A
        -> (0, 3) complete, (1,) single, (2,) single, (4,) single
           model order: A(c1) T(c1) U S A

        0 A(c1,c2)  1 T(c1)  2 U  3 A(c3)  4 T(c2)  5 T(c3)
        -> (0, 1) partial   (stopped at the next call, index 3)
           (2,) single      (moved after the group)
           (3,) partial     (index 4 is a mismatched result: the scan stops there)
           (4,) loose, (5,) loose   (no group is open any more)

        0 A(c1,c2)  1 U  2 T(c2)  3 U  4 T(c1)  5 U
        -> (0, 2, 4) complete   (results in the order found: c2 then c1)
           (1,) single, (3,) single, (5,) single

        0 A(c1)  1 T(c1)  2 T(c1)
        -> (0, 1) complete, (2,) loose   (a repeated result after the group is found complete)

    >>> from promptkit.chat.message import Message, ToolCall
    >>> msgs = [Message(role="assistant", tool_calls=[ToolCall(id="a", name="f")]),
    ...         Message(role="user", content="hi"),
    ...         Message(role="tool", tool_call_id="b")]
    >>> [(u.at, u.shape) for u in group_tool_calls(msgs)]
    [((0,), 'partial'), ((1,), 'single'), ((2,), 'loose')]
    """
    units: list[MessageUnit] = []
    n = len(messages)
    i = 0
    while i < n:
        head = messages[i]
        if not _is_tool_call(head):
            units.append(MessageUnit(at=(i,), shape="loose" if _is_tool_result(head) else "single"))
            i += 1
            continue
        call_ids = {c.id for c in head.tool_calls or ()}
        found: set[str] = set()
        at = [i]
        moved: list[int] = []
        j = i + 1
        while j < n and found != call_ids:
            m = messages[j]
            if _is_tool_call(m):
                break
            if _is_tool_result(m):
                if m.tool_call_id is None or m.tool_call_id not in call_ids or m.tool_call_id in found:
                    break
                found.add(m.tool_call_id)
                at.append(j)
            else:
                moved.append(j)
            j += 1
        units.append(MessageUnit(at=at, shape="complete" if found == call_ids else "partial"))
        units.extend(MessageUnit(at=(k,), shape="single") for k in moved)
        i = j
    return units


def drop_control_kinds(messages: Sequence[Message]) -> list[Message]:
    """``messages`` without those whose ``kind`` is in :data:`promptkit.CONTROL_KINDS`.

    The history builder's duty (pipeline contract §2.3, §10): :func:`promptkit.prepare_llm_messages`
    translates roles and writes prefixes but never drops an ``event-marker``. Returns a new list of
    the same objects.

    >>> from promptkit.chat.message import Message
    >>> [m.content for m in drop_control_kinds([Message(role="system", kind="event-marker"),
    ...                                         Message(role="user", content="hi")])]
    ['hi']
    """
    return [m for m in messages if m.kind is None or m.kind not in CONTROL_KINDS]


def _visible(message: Message) -> Message:
    if not message.metadata:
        return message
    visible = message.metadata.get(WellKnownMetadataKeys.VISIBLE_CONTENT.value)
    if isinstance(visible, str) and visible != message.content:
        return attrs.evolve(message, content=visible)
    return message


def history_for_model(messages: Sequence[Message]) -> list[Message]:
    """The stored history as the model must see it.

    In order: drops :data:`promptkit.CONTROL_KINDS` (:func:`drop_control_kinds`); uses the
    ``visibleContent`` metadata (:attr:`WellKnownMetadataKeys.VISIBLE_CONTENT`, the decoded visible
    text of a structured-output envelope) as ``content`` when it is a string; groups tool calls
    (:func:`group_tool_calls`), drops ``partial`` and ``loose`` units, and returns the messages in unit
    order, so messages archived between a call and its results move after the group and every tool
    result directly follows its call.

    Never mutates its input; a message that needs no change is the same object. Roles and prefixes are
    left to :func:`promptkit.prepare_llm_messages`.

    >>> from promptkit.chat.message import Message, ToolCall
    >>> msgs = [Message(role="assistant", content="{...}", metadata={"visibleContent": "好的"}),
    ...         Message(role="tool", tool_call_id="orphan", content="?")]
    >>> [m.content for m in history_for_model(msgs)]
    ['好的']
    """
    kept = drop_control_kinds(messages)
    out: list[Message] = []
    for unit in group_tool_calls(kept):
        if unit.shape in ("partial", "loose"):
            continue
        out.extend(_visible(kept[k]) for k in unit.at)
    return out
