"""Prompt assembly: the contributor registry, the five anchors, placement, trimming, the anchor audit.

Contributors register a build under a key and one of five anchors (:class:`Anchor`); the registry builds
them every turn and places their blocks so that everything before the history stays byte-identical from
one turn to the next (pipeline contract §9). The result carries a layout (one :class:`LayoutEntry` per
message) that the cache analyzer reads to say which block broke the cache.

Importing this package is cheap: polars is imported only inside :func:`audit`.
"""

from __future__ import annotations

from promptkit.assembly.anchors import (
    ANCHOR_ORDER,
    BEFORE_HISTORY,
    FOCUS_INJECTOR,
    RESERVED_KEYS,
    SUMMARY_INJECTOR,
    VOLATILE_INJECTOR,
    Anchor,
    FrameSlot,
    LayoutEntry,
    LayoutFormatError,
    utf16_key,
)
from promptkit.assembly.audit import AUDIT_COLUMNS, audit
from promptkit.assembly.frame import turn_frame
from promptkit.assembly.placement import (
    AbsentContributor,
    AssembledPrompt,
    Frame,
    analyze_frame,
    layout_of,
)
from promptkit.assembly.registry import (
    Contributor,
    ContributorOutputError,
    PromptRegistry,
    PromptView,
)
from promptkit.assembly.token_counts import MESSAGE_OVERHEAD, estimate_tokens, message_tokens
from promptkit.assembly.trim import (
    DEFAULT_LOW_WATER,
    Compaction,
    DroppedUnit,
    TrimPolicy,
    TrimResult,
    trim_to_budget,
)

__all__ = [
    "ANCHOR_ORDER",
    "AUDIT_COLUMNS",
    "BEFORE_HISTORY",
    "DEFAULT_LOW_WATER",
    "FOCUS_INJECTOR",
    "MESSAGE_OVERHEAD",
    "RESERVED_KEYS",
    "SUMMARY_INJECTOR",
    "VOLATILE_INJECTOR",
    "AbsentContributor",
    "Anchor",
    "AssembledPrompt",
    "Compaction",
    "Contributor",
    "ContributorOutputError",
    "DroppedUnit",
    "Frame",
    "FrameSlot",
    "LayoutEntry",
    "LayoutFormatError",
    "PromptRegistry",
    "PromptView",
    "TrimPolicy",
    "TrimResult",
    "analyze_frame",
    "audit",
    "estimate_tokens",
    "layout_of",
    "message_tokens",
    "trim_to_budget",
    "turn_frame",
    "utf16_key",
]
