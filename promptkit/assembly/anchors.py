"""The vocabulary of prompt assembly: the five anchors, the frame slots and the layout (pipeline contract §9).

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

from typing import Final

from promptkit.chat.message import DIRECTIVE_KINDS
from promptkit.errors import LayoutFormatError
from promptkit.layout import (
    ANCHOR_ORDER,
    BEFORE_HISTORY,
    FOCUS_INJECTOR,
    SUMMARY_INJECTOR,
    VOLATILE_INJECTOR,
    Anchor,
    FrameSlot,
    LayoutEntry,
)

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


#: Injector names the frame uses; no contributor may take one of them as its key.
RESERVED_KEYS: Final[frozenset[str]] = frozenset(
    {VOLATILE_INJECTOR, FOCUS_INJECTOR, SUMMARY_INJECTOR, *DIRECTIVE_KINDS}
)


def utf16_key(key: str) -> bytes:
    """Sort key giving UTF-16 code-unit order, JavaScript's default ``Array.prototype.sort`` order.

    Python compares strings by code point; characters above U+FFFF (surrogate pairs D800–DFFF in UTF-16)
    then sort after U+E000–U+FFFF, while JavaScript sorts them before. Big-endian UTF-16 bytes compare
    exactly like code units.

    >>> "ｚ" < "𝒜", utf16_key("𝒜") < utf16_key("ｚ")
    (True, True)
    """
    return key.encode("utf-16-be", "surrogatepass")
