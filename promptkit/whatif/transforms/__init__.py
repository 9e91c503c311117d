"""Transforms over request records: small, composable edits of a logged prompt, for what-if replays.

A :class:`Transform` maps one :class:`~promptkit.layout.RequestRecord` to a new one (``attrs.evolve``;
the input is never mutated) and says what it does in :meth:`~Transform.describe`. Each keeps the
record's layout aligned with its messages: a moved message takes its layout entry along (with the
target anchor as its slot), a new message gets a new entry. Compose them with :class:`Chain` (or pass a
list to :func:`promptkit.whatif.replay`).

One module per family of transform, all re-exported here: :mod:`~promptkit.whatif.transforms.base`
(:class:`Transform`, :class:`Chain`, :func:`apply_transforms`), :mod:`~promptkit.whatif.transforms.moves`
(:class:`Selector`, :class:`Move`), :mod:`~promptkit.whatif.transforms.volatile` (:class:`Normalize` and
its patterns), :mod:`~promptkit.whatif.transforms.tools` (:class:`SortTools`),
:mod:`~promptkit.whatif.transforms.settings` (model, provider and cache settings),
:mod:`~promptkit.whatif.transforms.breakpoints` (Anthropic breakpoints) and
:mod:`~promptkit.whatif.transforms.elide` (old tool outputs). The helpers over request bodies they
share are in ``_bodies.py`` (:func:`regions`, :func:`text_of`).

**Regions of a prompt.** With a layout, the stable head is :func:`~promptkit.layout.head_end` entries
long and the history ends at :func:`~promptkit.layout.history_end`. Without a layout, the head is the
leading run of ``system`` / ``developer`` messages, the history is every message from there up to the
*last user message*, and the tail (the current message and the tool loop after it) starts at the last
user message, or at the system messages right before it (blocks injected for this turn). An Anthropic
body's top-level ``system`` belongs to the head.

>>> from promptkit.layout import RequestRecord
>>> record = RequestRecord({"model": "m", "messages": [
...     {"role": "system", "content": "Be terse.\\nCurrent time: 10:42"},
...     {"role": "user", "content": "hi"}]}, session="s")
>>> moved = Move(Selector(regex="Current time: .*")).apply(record)
>>> [m["content"] for m in moved.request["messages"]]
['Be terse.', 'Current time: 10:42', 'hi']
>>> Normalize(("times",)).apply(record).request["messages"][0]["content"]
'Be terse.\\nCurrent time: <time>'
"""

from __future__ import annotations

from promptkit.whatif.transforms._bodies import regions, text_of
from promptkit.whatif.transforms.base import Chain, Transform, apply_transforms
from promptkit.whatif.transforms.breakpoints import BreakpointPosition, Breakpoints
from promptkit.whatif.transforms.elide import ELIDED_OUTPUT, ElideToolOutputs
from promptkit.whatif.transforms.moves import Move, Selector
from promptkit.whatif.transforms.settings import (
    ChangeProvider,
    PinModel,
    SetCacheKey,
    SetRetention,
    SetTTL,
    UseCacheModel,
)
from promptkit.whatif.transforms.tools import SortTools, sorted_json, tool_name
from promptkit.whatif.transforms.volatile import BUILTIN_PATTERNS, Normalize, compile_pattern, substitute

__all__ = [
    "BUILTIN_PATTERNS",
    "ELIDED_OUTPUT",
    "BreakpointPosition",
    "Breakpoints",
    "Chain",
    "ChangeProvider",
    "ElideToolOutputs",
    "Move",
    "Normalize",
    "PinModel",
    "Selector",
    "SetCacheKey",
    "SetRetention",
    "SetTTL",
    "SortTools",
    "Transform",
    "UseCacheModel",
    "apply_transforms",
    "compile_pattern",
    "regions",
    "sorted_json",
    "substitute",
    "text_of",
    "tool_name",
]
