"""Placement: where each anchor's blocks go in a list of messages, and the layout of the result.

The assembler never guesses inside the conversation: it reads the list as a **frame** of regions and
inserts blocks only at the boundaries between regions. The rule, for a list ``m[0..n)``:

1. **Leading system region** (the stable head) ``m[0..h)``: the longest prefix of ``role == "system"``
   messages that are not *turn blocks*. What block a message is comes from its injector
   (``metadata["injector"]``), in three levels, the first that applies deciding:

   - (1) a registered contributor's key: that contributor's block and nothing else, whatever its kind
     (a turn block when the contributor's anchor is turn-context or turn-hint);
   - (2) :data:`VOLATILE_INJECTOR` or :data:`FOCUS_INJECTOR`: the volatile block or the focus guidance
     (turn blocks);
   - (3) an injector in ``DIRECTIVE_KINDS``: this turn's directive block
     (:func:`~promptkit.chat.message.is_directive_block`, a turn block).

   A ``kind`` alone makes no block: an archived message of a directive kind (a host notice stored as
   ``role="notice"``) is history. The **persona card** is ``m[0]`` when ``h > 0`` and ``m[0]`` is not a
   block of a registered contributor.
2. **Per-turn tail** ``m[t..n)``, found from the end and never reaching into the head (``t >= h``):

   a. **tool loop**: when the last message is a ``tool`` result, the longest run of ``assistant`` and
      ``tool`` messages at the end is this turn's tool loop (assemble is called again inside a tool loop);
   b. **current message**: the message right before the tool loop (or the last message) when it is a
      ``user`` message that is not a tail block;
   c. **tail blocks**: then, going back, every *tail block*: a turn block, or any ``system`` message with
      an injector that is not a registered identity / knowledge / context key.

   A user message is the current message only in position (b): a user message before the volatile block
   or before a directive block is history. So a delegation turn ``[persona, u1, a1, u2, delegation]`` has
   the history ``u1 a1 u2`` and no current message, and nothing is ever inserted between ``u1`` and ``u2``.
3. **History** ``m[h..t)``: everything in between, left as it is.

Inside the tail, the **directive block** is the first message (before the tool loop) whose injector is
in ``DIRECTIVE_KINDS`` and is no registered contributor's key (an archived host notice inside the history
is not one), and the **volatile block** the first with injector ``persona-volatile``.

Insertion points (indices into the input, blocks go *before* the message at that index):

- identity: ``1`` after the persona card, else ``0``;
- knowledge, context: ``h`` (end of the leading system region), knowledge first;
- turn-context: the directive block, else the volatile block, else the current message, else ``t``
  (the end of the history, which is the end of the list when nothing follows the history);
- turn-hint: the directive block, else the current message, else nowhere (dropped, logged).

Anchors that share one insertion point are placed in anchor order (identity, knowledge, context,
turn-context, turn-hint); blocks of one anchor by contributor key in UTF-16 code-unit order; blocks of
one contributor in their own order. Blocks already in the list (a tool loop calls assemble again, a
contributor registered later) keep their positions: a new block is merged into the run of existing
blocks around its insertion point by the same order, so a late contributor ends up where it would have
been had it been registered from the start.

Where this is stricter than the TypeScript reference assembler (``assemblePromptContributions``): the
reference looks for "the last user message" anywhere, which lands inside the history of a proactive turn
that has no directive block; here the current message must sit at the end. The reference ends the head at
the first non-system message, so on an empty history a volatile block would pull the stable blocks after
it; here per-turn blocks end the head. The directive block is recognised by its injector only, as in the
reference (which knows ``cross-session-delegation``; here every kind of ``DIRECTIVE_KINDS``), only in the
tail, and turn-hint goes before it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from promptkit.assembly.anchors import (
    ANCHOR_ORDER,
    FOCUS_INJECTOR,
    VOLATILE_INJECTOR,
    Anchor,
    FrameSlot,
    LayoutEntry,
    utf16_key,
)
from promptkit.chat.message import Message, is_directive, is_directive_block
from promptkit.errors import UsageError
from promptkit.layout import head_end as layout_head_end, history_end as layout_history_end

__all__ = [
    "HEAD_SLOTS",
    "AbsentContributor",
    "AssembledPrompt",
    "Frame",
    "Placement",
    "analyze_frame",
    "is_directive",
    "layout_of",
    "place_blocks",
]

#: Slots of the stable head (the leading system region with its anchored blocks).
HEAD_SLOTS: frozenset[str] = frozenset(
    {
        FrameSlot.PERSONA.value,
        FrameSlot.SYSTEM.value,
        Anchor.IDENTITY.value,
        Anchor.KNOWLEDGE.value,
        Anchor.CONTEXT.value,
    }
)

_ORDER = {anchor: i for i, anchor in enumerate(ANCHOR_ORDER)}


def _is_turn_block(message: Message, anchors: Mapping[str, Anchor]) -> bool:
    injector = message.injector
    if injector is not None:
        anchor = anchors.get(injector)
        if anchor is not None:  # a contributor's block is that and nothing else, whatever its kind
            return not anchor.before_history
        if injector in (VOLATILE_INJECTOR, FOCUS_INJECTOR):
            return True
    return is_directive_block(message)


def _is_tail_block(message: Message, anchors: Mapping[str, Anchor]) -> bool:
    if _is_turn_block(message, anchors):
        return True
    injector = message.injector
    if message.role != "system" or injector is None:
        return False
    anchor = anchors.get(injector)
    return anchor is None or not anchor.before_history


@attrs.frozen
class Frame:
    """The regions of a message list (see the module docstring for the rule).

    ``head_end`` is ``h``, ``history_end`` is ``t``; ``tool_loop_start`` is ``n`` when there is no tool
    loop; ``persona``, ``current``, ``directive`` and ``volatile`` are indices or ``None``.
    """

    head_end: int
    history_end: int
    tool_loop_start: int
    persona: int | None
    current: int | None
    directive: int | None
    volatile: int | None
    layout: tuple[LayoutEntry, ...]

    def insertion_point(self, anchor: Anchor) -> int | None:
        """Index before which ``anchor``'s new blocks go, or ``None`` (turn-hint with nowhere to go)."""
        if anchor is Anchor.IDENTITY:
            return 1 if self.persona is not None else 0
        if anchor in (Anchor.KNOWLEDGE, Anchor.CONTEXT):
            return self.head_end
        if anchor is Anchor.TURN_CONTEXT:
            for at in (self.directive, self.volatile, self.current):
                if at is not None:
                    return at
            return self.history_end
        for at in (self.directive, self.current):
            if at is not None:
                return at
        return None


def analyze_frame(messages: Sequence[Message], anchors: Mapping[str, Anchor] | None = None) -> Frame:
    """Read ``messages`` as a frame: head, history, per-turn tail; and the layout entry of each message.

    ``anchors`` maps registered contributor keys to their anchors, so blocks they already placed are
    recognised (slot = their anchor). Without it, an injected system block in the tail is a ``system``
    slot and a registered head block a ``persona`` / ``system`` slot.

    >>> from promptkit.chat.message import Message
    >>> f = analyze_frame([Message(role="system", content="persona"), Message(role="user", content="u1"),
    ...                    Message(role="assistant", content="a1"), Message(role="user", content="u2")])
    >>> (f.head_end, f.history_end, f.current), [e.slot for e in f.layout]
    ((1, 3, 3), ['persona', 'history', 'history', 'current'])
    """
    anchors = anchors or {}
    n = len(messages)
    h = 0
    while h < n and messages[h].role == "system" and not _is_turn_block(messages[h], anchors):
        h += 1
    persona = 0 if h > 0 and messages[0].injector not in anchors else None

    t = n
    if t > h and messages[t - 1].role == "tool":
        while t > h and messages[t - 1].role in ("assistant", "tool"):
            t -= 1
    tool_loop_start = t
    current = None
    if t > h and messages[t - 1].role == "user" and not _is_tail_block(messages[t - 1], anchors):
        t -= 1
        current = t
    while t > h and _is_tail_block(messages[t - 1], anchors):
        t -= 1

    directive = next(
        (
            i
            for i in range(t, tool_loop_start)
            if is_directive_block(messages[i]) and messages[i].injector not in anchors
        ),
        None,
    )
    volatile = next((i for i in range(t, tool_loop_start) if messages[i].injector == VOLATILE_INJECTOR), None)

    layout: list[LayoutEntry] = []
    for i, m in enumerate(messages):
        injector = m.injector
        anchor = anchors.get(injector) if injector is not None else None
        slot: str
        if anchor is not None:
            slot = anchor.value
        elif i < h:
            slot = FrameSlot.PERSONA if i == persona else FrameSlot.SYSTEM
        elif i < t:
            slot = FrameSlot.HISTORY
        elif i >= tool_loop_start:
            slot = FrameSlot.TOOL_LOOP
        elif i == current:
            slot = FrameSlot.CURRENT
        elif injector == VOLATILE_INJECTOR:
            slot = FrameSlot.VOLATILE
        elif injector == FOCUS_INJECTOR:
            slot = FrameSlot.FOCUS
        elif is_directive_block(m):
            slot = FrameSlot.DIRECTIVE
        else:
            slot = FrameSlot.SYSTEM
        layout.append(LayoutEntry(slot=slot, key=injector))
    return Frame(
        head_end=h,
        history_end=t,
        tool_loop_start=tool_loop_start,
        persona=persona,
        current=current,
        directive=directive,
        volatile=volatile,
        layout=tuple(layout),
    )


def layout_of(
    messages: Sequence[Message], anchors: Mapping[str, Anchor] | None = None
) -> tuple[LayoutEntry, ...]:
    """The layout of ``messages`` as the assembler reads it (see :func:`analyze_frame`).

    >>> from promptkit.chat.message import Message
    >>> [e.to_dict() for e in layout_of([Message(role="user", content="hi")])]
    [{'slot': 'current', 'key': None}]
    """
    return analyze_frame(messages, anchors).layout


@attrs.frozen
class Placement:
    """The result of :func:`place_blocks`: the new list, its layout, and the turn-hint keys with no place."""

    messages: tuple[Message, ...]
    layout: tuple[LayoutEntry, ...]
    unplaced: tuple[str, ...]
    frame: Frame


#: A new block to place: (sort key (anchor order, key in UTF-16 order, index in its contributor), key, text).
_NewBlock = tuple[tuple[int, bytes, int], str, str]
#: An item of a merged region: an input index or a new (key, anchor, text).
_Item = int | tuple[str, Anchor, str]
#: (start, end, order) -> merged items
_Region = tuple[int, int, int, list[_Item]]


def place_blocks(
    messages: Sequence[Message],
    blocks: Mapping[str, Sequence[str]],
    anchors: Mapping[str, Anchor],
    *,
    frame: Frame | None = None,
) -> Placement:
    """Insert each key's ``blocks`` at its anchor's insertion point; never mutates ``messages``.

    ``blocks`` maps contributor keys to their (non-empty) block texts; ``anchors`` maps every registered
    key (at least those of ``blocks``) to its anchor. Each block becomes
    ``Message(role="system", content=block, metadata={"injector": key})``. Keys of anchors with no
    insertion point (turn-hint without a directive block or current message) come back in ``unplaced``.

    >>> from promptkit.chat.message import Message
    >>> p = place_blocks([Message(role="system", content="persona"), Message(role="user", content="hi")],
    ...                  {"memories": ["m1"], "skills": ["s1"]},
    ...                  {"memories": Anchor.TURN_CONTEXT, "skills": Anchor.KNOWLEDGE})
    >>> [(m.content, e.slot) for m, e in zip(p.messages, p.layout)]
    [('persona', 'persona'), ('s1', 'knowledge'), ('m1', 'turn-context'), ('hi', 'current')]
    """
    frame = frame if frame is not None else analyze_frame(messages, anchors)
    groups, points = _insertion_groups(frame)
    new_by_anchor, unplaced = _new_blocks(blocks, anchors, points)
    regions: list[_Region] = []
    for at, group in groups.items():
        new = sorted((item for anchor in group for item in new_by_anchor[anchor]), key=lambda item: item[0])
        if new:
            regions.append(_merge_region(messages, anchors, at, group, new))
    regions.sort(key=lambda r: (r[0], r[2]))
    out, layout = _emit_regions(messages, frame, regions)
    return Placement(messages=tuple(out), layout=tuple(layout), unplaced=tuple(unplaced), frame=frame)


def _insertion_groups(frame: Frame) -> tuple[dict[int, list[Anchor]], dict[Anchor, int | None]]:
    """Each anchor's insertion point, and the anchors grouped by the point they share (in anchor order)."""
    # anchor -> insertion point; points shared by several anchors form one group
    groups: dict[int, list[Anchor]] = {}
    points: dict[Anchor, int | None] = {}
    for anchor in ANCHOR_ORDER:
        at = frame.insertion_point(anchor)
        points[anchor] = at
        if at is not None:
            groups.setdefault(at, []).append(anchor)
    return groups, points


def _new_blocks(
    blocks: Mapping[str, Sequence[str]], anchors: Mapping[str, Anchor], points: Mapping[Anchor, int | None]
) -> tuple[dict[Anchor, list[_NewBlock]], list[str]]:
    """The new blocks of each anchor with their sort keys, and the keys with no insertion point (sorted)."""
    new_by_anchor: dict[Anchor, list[_NewBlock]] = {a: [] for a in ANCHOR_ORDER}
    unplaced: list[str] = []
    for key, texts in blocks.items():
        anchor = anchors[key]
        if points[anchor] is None:
            if texts:
                unplaced.append(key)
            continue
        for j, text in enumerate(texts):
            new_by_anchor[anchor].append(((_ORDER[anchor], utf16_key(key), j), key, text))
    unplaced.sort(key=utf16_key)
    return new_by_anchor, unplaced


def _anchor_at(messages: Sequence[Message], anchors: Mapping[str, Anchor], i: int) -> Anchor | None:
    injector = messages[i].injector
    return anchors.get(injector) if injector is not None else None


def _merge_region(
    messages: Sequence[Message],
    anchors: Mapping[str, Anchor],
    at: int,
    group: Sequence[Anchor],
    new: Sequence[_NewBlock],
) -> _Region:
    """Merge ``new`` (sorted) into the run of existing blocks of ``group``'s anchors around ``at``."""
    members = set(group)
    start = at
    while start > 0 and _anchor_at(messages, anchors, start - 1) in members:
        start -= 1
    end = at
    while end < len(messages) and _anchor_at(messages, anchors, end) in members:
        end += 1
    existing = []
    for i in range(start, end):
        present = _anchor_at(messages, anchors, i)
        assert present is not None
        existing.append(((_ORDER[present], utf16_key(messages[i].injector or ""), -1), i))
    merged: list[_Item] = []
    ei = ni = 0
    while ei < len(existing) and ni < len(new):
        if new[ni][0] < existing[ei][0]:
            sort_key, key, text = new[ni]
            merged.append((key, ANCHOR_ORDER[sort_key[0]], text))
            ni += 1
        else:
            merged.append(existing[ei][1])
            ei += 1
    merged.extend(i for _, i in existing[ei:])
    merged.extend((key, ANCHOR_ORDER[sort_key[0]], text) for sort_key, key, text in new[ni:])
    return (start, end, min(_ORDER[a] for a in group), merged)


def _emit_regions(
    messages: Sequence[Message], frame: Frame, regions: Sequence[_Region]
) -> tuple[list[Message], list[LayoutEntry]]:
    """The input messages with each region (sorted by start) replaced by its merged items, and their layout."""
    out: list[Message] = []
    layout: list[LayoutEntry] = []

    def emit(item: _Item) -> None:
        if isinstance(item, int):
            out.append(messages[item])
            layout.append(frame.layout[item])
        else:
            key, anchor, text = item
            out.append(Message(role="system", content=text, metadata={"injector": key}))
            layout.append(LayoutEntry(slot=anchor.value, key=key))

    n = len(messages)
    i = 0
    for start, end, _, merged in regions:
        while i < start:
            emit(i)
            i += 1
        for item in merged:
            emit(item)
        i = max(i, end)
    while i < n:
        emit(i)
        i += 1
    return out, layout


@attrs.frozen
class AbsentContributor:
    """A contributor that placed nothing this turn although it should have.

    ``reason`` is ``"raised"`` (its build raised), ``"timeout"`` (it exceeded ``build_timeout``),
    ``"invalid"`` (it returned something other than str, a sequence of str or None) or ``"no-place"``
    (a turn-hint with neither a directive block nor a current message). ``detail`` is human-readable.
    A contributor that returned None or empty strings is not absent: it contributed nothing on purpose.
    """

    key: str
    anchor: Anchor
    reason: str
    detail: str = ""


def _tuple_of_entries(value: Sequence[LayoutEntry]) -> tuple[LayoutEntry, ...]:
    return tuple(value)


def _tuple_of_messages(value: Sequence[Message]) -> tuple[Message, ...]:
    return tuple(value)


def _tuple_of_absent(value: Sequence[AbsentContributor]) -> tuple[AbsentContributor, ...]:
    return tuple(value)


def _tuple_of_keys(value: Sequence[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen
class AssembledPrompt:
    """The messages of one request and their layout: one :class:`LayoutEntry` per message.

    ``built`` lists the contributor keys whose blocks were placed by this call; ``absent`` the
    contributors that placed nothing because they failed (see :class:`AbsentContributor`).

    >>> from promptkit.chat.message import Message
    >>> p = AssembledPrompt(messages=[Message(role="user", content="hi")],
    ...                     layout=[LayoutEntry(slot="current")])
    >>> p.layout_dicts()
    [{'slot': 'current', 'key': None}]
    """

    messages: tuple[Message, ...] = attrs.field(converter=_tuple_of_messages)
    layout: tuple[LayoutEntry, ...] = attrs.field(converter=_tuple_of_entries)
    built: tuple[str, ...] = attrs.field(default=(), converter=_tuple_of_keys)
    absent: tuple[AbsentContributor, ...] = attrs.field(default=(), converter=_tuple_of_absent)

    def __attrs_post_init__(self) -> None:
        if len(self.messages) != len(self.layout):
            raise UsageError(
                f"AssembledPrompt: {len(self.messages)} messages but {len(self.layout)} layout entries"
            )

    @property
    def head_end(self) -> int:
        """Index after the stable head (persona, leading system messages, identity, knowledge, context)."""
        return layout_head_end(self.layout)

    @property
    def history_end(self) -> int:
        """Index after the last history message (``head_end`` when there is no history): the end of the
        part of the request that is the same from one turn to the next."""
        return layout_history_end(self.layout)

    def layout_dicts(self) -> list[dict[str, str | None]]:
        """The layout in its JSON form, as request logs carry it: ``[{"slot": ..., "key": ...}, ...]``."""
        return [entry.to_dict() for entry in self.layout]
