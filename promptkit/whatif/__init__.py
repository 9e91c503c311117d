"""What if: replay a request log under a changed layout, and measure the saving before editing a prompt.

- :mod:`promptkit.whatif.transforms`: small composable edits of a logged request (move blocks after the
  history, normalize volatile values, sort tools, pin the model, change provider / TTL / retention,
  place Anthropic breakpoints, elide old tool outputs);
- :mod:`promptkit.whatif.spec`: the ``--transform SPEC`` grammar (:func:`parse_transform`);
- :mod:`promptkit.whatif.replays`: :func:`replay` -> :class:`WhatIf` (before / after analyses, comparison);
- :mod:`promptkit.whatif.suggestions`: :func:`suggest` derives candidate transforms from where the cache breaks
  and ranks them by measured cost saving (those that lose money apart, as costs with their trade-off);
- :mod:`promptkit.whatif.advice`: :func:`lint_advice` gives every lint finding its fix, measured by replay.

Names are imported lazily (polars loads only when a replay runs).

>>> from promptkit.whatif import parse_transform
>>> parse_transform("sort-tools").describe()
'sort tool definitions by name and JSON keys'
"""

from __future__ import annotations

from typing import Any

from promptkit.lazy import LazyExports

_MODULES: dict[str, str] = {}


def _export(module: str, *names: str) -> None:
    for name in names:
        _MODULES[name] = f"promptkit.whatif.{module}"


_export(
    "transforms",
    "Transform", "Chain", "Selector", "Move", "Normalize", "SortTools", "PinModel", "ChangeProvider",
    "SetTTL", "SetRetention", "SetCacheKey", "UseCacheModel", "Breakpoints", "ElideToolOutputs",
    "BUILTIN_PATTERNS", "apply_transforms", "regions",
)  # fmt: skip
_export("spec", "parse_transform", "format_transform", "SPEC_NAMES")
_export("replays", "replay", "compare", "format_whatif", "WhatIf", "REPLAY_NOTE", "COMPARISON_COLUMNS")
_export("suggestions", "suggest", "Suggestion", "VolatileFinding", "find_volatile", "candidates", "rank")
_export("advice", "lint_advice", "LintAdvice", "Advice", "fix_for", "format_lint_advice")

__all__ = sorted(_MODULES)
_EXPORTS = LazyExports(__name__, _MODULES)


def __getattr__(name: str) -> Any:
    return _EXPORTS.load(name, globals())


def __dir__() -> list[str]:
    return _EXPORTS.dir(globals())
