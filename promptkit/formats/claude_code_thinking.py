"""Claude Code's thinking settings, prompt by prompt: where they change, the cached messages are lost.

Anthropic: "Changes to thinking parameters (enabled/disabled or budget allocation) invalidate message
cache breakpoints", while "system prompts and tools remain cached" ("Extended thinking", section
"Extended thinking with prompt caching",
https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#extended-thinking-with-prompt-caching).
So a call whose thinking settings differ from its thread's previous call's reads the head (tools +
system prompt) and rebuilds the conversation, which the causes name ``thinking_changed``.

A typed prompt of a Claude Code transcript says which settings it was sent with:

- ``thinkingMetadata`` on the user line: ``{"maxThinkingTokens": N}`` (Claude Code 2.x; 0: off) or
  ``{"level": "high", "disabled": false, "triggers": [...]}`` (1.0.x; ``none`` or ``disabled``: off);
- without it, the words that set the budget in the prompt (Claude Code's thinking triggers, "think" <
  "think hard" < "think harder" < "ultrathink", each a larger budget: "Claude Code: Best practices for
  agentic coding", https://www.anthropic.com/engineering/claude-code-best-practices), and no such word:
  thinking off. Only in a transcript none of whose prompts carries ``thinkingMetadata``
  (:func:`set_by_words`): where they do, a prompt without it keeps the settings before it.

Tool results, compaction summaries, slash commands and Claude Code's own meta lines are not prompts:
they keep the settings of the prompt before them.

>>> thinking_setting({"type": "user", "thinkingMetadata": {"maxThinkingTokens": 31999},
...                   "message": {"role": "user", "content": "go on"}})
'31999 tokens'
>>> thinking_setting({"type": "user", "message": {"role": "user", "content": "ultrathink: why?"}})
'31999 tokens (ultrathink)'
>>> thinking_setting({"type": "user", "message": {"role": "user", "content": [
...     {"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}}) is None
True
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["THINKING_TRIGGERS", "set_by_words", "thinking_setting"]

#: The prompt words that set Claude Code's thinking budget, largest first: (pattern, tokens, name).
THINKING_TRIGGERS: Final[tuple[tuple[re.Pattern[str], int, str], ...]] = (
    (
        re.compile(
            r"\bultrathink\b|\bthink (?:harder|intensely|longer|really hard|super hard|very hard)\b", re.I
        ),
        31999,
        "ultrathink",
    ),
    (
        re.compile(r"\bmegathink\b|\bthink (?:hard|deeply|more|a lot|about it)\b", re.I),
        10000,
        "think hard",
    ),
    (re.compile(r"\bthink\b", re.I), 4000, "think"),
)

#: Text a user line starts with when it is not a typed prompt (slash commands and their output, the
#: notes Claude Code adds).
_NOT_PROMPTS: Final[tuple[str, ...]] = ("<command-", "<local-command-", "Caveat: ")


def _prompt_text(obj: Mapping[str, Any]) -> str | None:
    """The text of a typed prompt on a user line; None when the line is no typed prompt."""
    if obj.get("type") != "user" or obj.get("isCompactSummary") is True or obj.get("isMeta") is True:
        return None
    message = obj.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        blocks = [b for b in content if isinstance(b, Mapping)]
        if not blocks or any(b.get("type") == "tool_result" for b in blocks):
            return None
        text = "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    else:
        return None
    return None if text.lstrip().startswith(_NOT_PROMPTS) else text


def _from_metadata(meta: Mapping[str, Any]) -> str | None:
    """The setting ``thinkingMetadata`` gives (None: it gives none)."""
    if meta.get("disabled") is True:
        return "off"
    budget = meta.get("maxThinkingTokens")
    if isinstance(budget, int) and not isinstance(budget, bool):
        return "off" if budget <= 0 else f"{budget} tokens"
    level = meta.get("level")
    if isinstance(level, str) and level:
        return "off" if level == "none" else f"level {level}"
    return None


def thinking_setting(obj: Mapping[str, Any]) -> str | None:
    """The thinking setting a transcript line's typed prompt was sent with (``off``, ``N tokens``,
    ``level L``, ``N tokens (trigger)``); None when the line is no typed prompt (see the module
    docstring)."""
    text = _prompt_text(obj)
    if text is None:
        return None
    meta = obj.get("thinkingMetadata")
    if isinstance(meta, Mapping):
        setting = _from_metadata(meta)
        if setting is not None:
            return setting
    for pattern, tokens, name in THINKING_TRIGGERS:
        if pattern.search(text):
            return f"{tokens} tokens ({name})"
    return "off (no thinking word)"


def set_by_words(setting: str) -> bool:
    """Whether a :func:`thinking_setting` was read from the prompt's words, not from ``thinkingMetadata``.
    A transcript whose prompts carry ``thinkingMetadata`` sets the budget there: a prompt of it without
    one (a line promptkit cannot tell apart from a typed prompt) says nothing about the settings.

    >>> set_by_words("31999 tokens"), set_by_words("4000 tokens (think)"), set_by_words("off (no thinking word)")
    (False, True, True)
    """
    return setting.endswith(")")
