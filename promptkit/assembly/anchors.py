"""The vocabulary of prompt assembly: the five anchors, the frame slots and the layout (pipeline seed §9).

A prompt sent to a model has one layout, from its first message to its last::

    [tools][persona][identity][knowledge][context] [history …] [turn-context][volatile][focus][turn-hint][current]
    └──────────── before the history: stable per session ──────────┘ └────── after the history: per turn ──────┘

Contributors declare one of five **anchors** (:class:`Anchor`); the assembler places their blocks. Every
other message of the request has a **frame slot** (:class:`FrameSlot`): the persona card, the history, the
volatile block, the focus guidance, the directive block, the current message. A :class:`LayoutEntry` says,
for one message, which slot it sits in and which contributor key (or injector) put it there; request logs
carry the layout as ``[{"slot": ..., "key": ...}, ...]`` and the cache analyzer reads it back.

>>> Anchor("turn-context") is Anchor.TURN_CONTEXT
True
>>> LayoutEntry(slot="knowledge", key="skills").to_dict()
{'slot': 'knowledge', 'key': 'skills'}
>>> sorted(["ｚ", "𝒜"], key=utf16_key)  # JavaScript's default sort, not Python's
['𝒜', 'ｚ']
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Final

import attrs

from promptkit.schema.message import DIRECTIVE_KINDS

__all__ = [
    "ANCHOR_ORDER",
    "BEFORE_HISTORY",
    "FOCUS_INJECTOR",
    "RESERVED_KEYS",
    "SUMMARY_INJECTOR",
    "VOLATILE_INJECTOR",
    "Anchor",
    "FrameSlot",
    "LayoutEntry",
    "LayoutFormatError",
    "utf16_key",
]


class Anchor(enum.StrEnum):
    """Where a contributor's blocks go. The criterion is *does the text change every turn*, not its topic.

    - ``IDENTITY``: right after the persona card (the first system message), or first when there is none.
    - ``KNOWLEDGE``, ``CONTEXT``: at the end of the leading system region, knowledge first. Session-stable
      material (rules, skill lists, the session summary): a change breaks the cache once.
    - ``TURN_CONTEXT``: after the history, before the turn's blocks (retrieved memories, speaker profiles,
      file lists: anything whose bytes differ between adjacent turns).
    - ``TURN_HINT``: immediately before the directive block, else before the current user message.
    """

    IDENTITY = "identity"
    KNOWLEDGE = "knowledge"
    CONTEXT = "context"
    TURN_CONTEXT = "turn-context"
    TURN_HINT = "turn-hint"

    @property
    def before_history(self) -> bool:
        """True for the three anchors placed before the history (their changes break the cache)."""
        return self in BEFORE_HISTORY


#: The order anchors are placed in when two of them share one insertion point.
ANCHOR_ORDER: Final[tuple[Anchor, ...]] = (
    Anchor.IDENTITY,
    Anchor.KNOWLEDGE,
    Anchor.CONTEXT,
    Anchor.TURN_CONTEXT,
    Anchor.TURN_HINT,
)
#: Anchors that sit before the history: a contributor there must be byte-identical between turns.
BEFORE_HISTORY: Final[frozenset[Anchor]] = frozenset({Anchor.IDENTITY, Anchor.KNOWLEDGE, Anchor.CONTEXT})

#: ``metadata["injector"]`` of the volatile block (time, session environment, last turn's state): the
#: boundary between the history and the per-turn blocks.
VOLATILE_INJECTOR: Final[str] = "persona-volatile"
#: ``metadata["injector"]`` of the focus guidance block (it sits between the volatile block and the
#: turn-hint blocks and keeps its adjacency to the current message).
FOCUS_INJECTOR: Final[str] = "focus-guidance"
#: ``metadata["injector"]`` (and layout key, slot ``context``) of the compaction summary that
#: :func:`promptkit.assembly.trim.trim_to_budget` puts at the end of the stable head in place of the
#: history chunks it dropped.
SUMMARY_INJECTOR: Final[str] = "history-summary"
#: Injector names the frame uses; no contributor may take one of them as its key.
RESERVED_KEYS: Final[frozenset[str]] = frozenset(
    {VOLATILE_INJECTOR, FOCUS_INJECTOR, SUMMARY_INJECTOR, *DIRECTIVE_KINDS}
)


class FrameSlot(enum.StrEnum):
    """The slot of a message that no contributor placed (its role in the frame of the request).

    - ``PERSONA``: the persona card, the first message when it is a system message of the leading region;
    - ``SYSTEM``: any other system message nobody registered (in the leading region, or an injected block
      among the per-turn blocks);
    - ``HISTORY``: the conversation so far;
    - ``VOLATILE``: the volatile block (injector :data:`VOLATILE_INJECTOR`);
    - ``FOCUS``: the focus guidance (injector :data:`FOCUS_INJECTOR`);
    - ``DIRECTIVE``: the directive block (kind or injector in ``DIRECTIVE_KINDS``) of this turn;
    - ``CURRENT``: the current user message;
    - ``TOOL_LOOP``: this turn's tool loop after the current message (assistant tool calls and results).
    """

    PERSONA = "persona"
    SYSTEM = "system"
    HISTORY = "history"
    VOLATILE = "volatile"
    FOCUS = "focus"
    DIRECTIVE = "directive"
    CURRENT = "current"
    TOOL_LOOP = "tool-loop"


class LayoutFormatError(ValueError):
    """A layout entry read from JSON that is not ``{"slot": str, "key": str | null}``; names the field."""


def _slot_converter(value: str) -> str:
    return value.value if isinstance(value, enum.Enum) else value


@attrs.frozen
class LayoutEntry:
    """What placed one message: its ``slot`` (an :class:`Anchor` or :class:`FrameSlot` value) and ``key``.

    ``key`` is the contributor key for an anchored block, otherwise the message's ``metadata["injector"]``
    (``None`` when it has none). The JSON shape ``{"slot": ..., "key": ...}`` is what request logs carry.

    >>> LayoutEntry.from_dict({"slot": "history", "key": None})
    LayoutEntry(slot='history', key=None)
    """

    slot: str = attrs.field(converter=_slot_converter)
    key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"slot": slot, "key": key}`` (``key`` is always present, ``None`` when absent)."""
        return {"slot": self.slot, "key": self.key}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, where: str = "layout entry") -> LayoutEntry:
        """Parse :meth:`to_dict`'s output; raises :class:`LayoutFormatError` naming ``where`` and the field."""
        if not isinstance(d, Mapping):
            raise LayoutFormatError(f"{where}: must be an object, got {type(d).__name__}")
        slot = d.get("slot")
        if not isinstance(slot, str) or not slot:
            raise LayoutFormatError(f"{where}: field 'slot' must be a non-empty string, got {slot!r}")
        key = d.get("key")
        if key is not None and not isinstance(key, str):
            raise LayoutFormatError(
                f"{where}: field 'key' must be a string or null, got {type(key).__name__}"
            )
        return cls(slot=slot, key=key)


def utf16_key(key: str) -> bytes:
    """Sort key giving UTF-16 code-unit order, JavaScript's default ``Array.prototype.sort`` order.

    Python compares strings by code point; characters above U+FFFF (surrogate pairs D800–DFFF in UTF-16)
    then sort after U+E000–U+FFFF, while JavaScript sorts them before. Big-endian UTF-16 bytes compare
    exactly like code units.

    >>> "ｚ" < "𝒜", utf16_key("𝒜") < utf16_key("ｚ")
    (True, True)
    """
    return key.encode("utf-16-be", "surrogatepass")
