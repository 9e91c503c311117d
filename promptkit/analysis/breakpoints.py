"""Anthropic breakpoints the log does not show, placed from the reported cache counts.

Many logs of Anthropic calls do not hold the ``cache_control`` markers the request carried: an OpenCode
export, a LiteLLM payload, OpenTelemetry spans and ATIF trajectories keep the messages, while the client
or the SDK added the breakpoints on the way out. Under Anthropic's rules a prompt without a breakpoint
caches nothing, so such a log would be predicted 0% cached against the 45–65% its usage reports.

The usage proves where the breakpoints were. ``cache_read_input_tokens + cache_creation_input_tokens``
is the offset, in the provider's units, of the call's last cache breakpoint (the tokens after it are
``input_tokens``; "Tracking cache performance",
https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching#tracking-cache-performance; the
ruler, :mod:`promptkit.analysis.ruler`, takes it as an exact position). So for a call whose body shows
no ``cache_control`` and whose usage reports cache reads or writes, :func:`infer_breakpoints` marks:

- the message whose end lies nearest to that offset (placed on the local tokens by the call's own
  proportions, reported prompt to local prompt: a breakpoint sits on a block boundary), and
- the end of the leading system messages,

the pattern of Claude Code and of Anthropic's SDK examples (the system prompt and the conversation's
last message; a client has at most 4 breakpoints, and each is looked up at its own and the 19 block
boundaries before it, so the previous call's last breakpoint is read from here: "Prompt caching",
https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching). The TTL is one hour where most of
the call's writes were reported with it (``cache_creation.ephemeral_1h_input_tokens``), else 5 minutes;
the model's minimum cacheable length applies as to a visible breakpoint (the cache model's plan).

The analysis names what it inferred in the ``inferred_breakpoints`` column (``system``,
``messages[i]``: indices of the log's own request) and in a note.

>>> from promptkit.layout import Usage
>>> from promptkit.tokens.tokenize import RequestTokenizer
>>> body = {"messages": [{"role": "system", "content": "Be terse. " * 200},
...                      {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
...                      {"role": "user", "content": "bye"}]}
>>> tok = RequestTokenizer("chatml", "cl100k_base").tokenize(body)
>>> found = infer_breakpoints(tok, body, Usage(prompt_tokens=tok.prompt_len, cached_tokens=0,
...                                            cache_write_tokens=tok.prompt_len - 1))
>>> found.messages, found.label(shifted=False)
((0, 3), 'messages[0],messages[3]')
>>> [m.get("cache_control") for m in found.body["messages"]][::3]
[{'type': 'ephemeral'}, {'type': 'ephemeral'}]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs

from promptkit.tokens.cache_models import message_ends

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.tokens.tokenize import TokenizedRequest

__all__ = ["InferredBreakpoints", "infer_breakpoints", "inferred_note", "shows_cache_control"]

_SYSTEM_ROLES: Final = ("system", "developer")


def shows_cache_control(body: Mapping[str, Any]) -> bool:
    """Whether the body marks any cache breakpoint itself: ``cache_control`` at the top level, on a tool,
    on a message or on one of its content parts (an Anthropic ``system`` included, as a message).

    >>> shows_cache_control({"messages": [{"role": "user", "content": [{"type": "text", "text": "x",
    ...                      "cache_control": {"type": "ephemeral"}}]}]})
    True
    >>> shows_cache_control({"messages": [{"role": "user", "content": "x"}]})
    False
    """

    def marked(obj: object) -> bool:
        return isinstance(obj, Mapping) and isinstance(obj.get("cache_control"), Mapping)

    if marked(body):
        return True
    tools = body.get("tools")
    if isinstance(tools, list) and any(marked(t) for t in tools):
        return True
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if marked(message):
            return True
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list) and any(marked(part) for part in content):
            return True
    return False


@attrs.frozen(slots=True)
class InferredBreakpoints:
    """The breakpoints placed for a call whose log shows none: ``body`` (the chat body with
    ``cache_control`` on the marked messages, for the cache model's plan) and ``messages`` (their
    indices in the body's messages, ascending)."""

    body: Mapping[str, Any]
    messages: tuple[int, ...]
    control: Mapping[str, Any] = attrs.field(factory=lambda: {"type": "ephemeral"})  # their cache_control

    def label(self, *, shifted: bool) -> str:
        """The marked messages as the log's request names them (``shifted``: the body's first message is
        the request's top-level ``system``): ``system``, ``messages[i]``, comma-separated."""
        names = [
            "system" if shifted and i == 0 else f"messages[{i - 1 if shifted else i}]" for i in self.messages
        ]
        return ",".join(names)


def _nearest(ends: list[int], marks: list[int], position: int) -> int | None:
    """The index (of ``marks``, message indices) whose message end lies nearest to ``position``; a tie
    goes to the later message."""
    best: int | None = None
    for i in marks:
        if best is None or abs(ends[i] - position) <= abs(ends[best] - position):
            best = i
    return best


def infer_breakpoints(
    tok: TokenizedRequest, body: Mapping[str, Any], usage: object, *, exact_units: bool = False
) -> InferredBreakpoints | None:
    """The breakpoints of a call whose ``body`` (tokenized as ``tok``) shows no ``cache_control`` while
    its ``usage`` reports cache reads or writes (see the module docstring); None where the body shows a
    breakpoint, the usage reports no cache write count (not Anthropic's shape) or nothing was read or
    written. ``exact_units``: the local tokenizer is the provider's (positions need no proportions)."""
    reported = getattr(usage, "prompt_tokens", None)
    reads, writes = getattr(usage, "cached_tokens", None) or 0, getattr(usage, "cache_write_tokens", None)
    if not isinstance(reported, int) or reported <= 0 or writes is None or reads + writes <= 0:
        return None
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or tok.prompt_len <= 0 or shows_cache_control(body):
        return None
    ends = message_ends(tok)
    mark = min(reads + writes, reported)
    position = mark if exact_units else round(mark * tok.prompt_len / reported)
    usable = [i for i, m in enumerate(messages) if isinstance(m, Mapping) and i < len(ends) and ends[i] > 0]
    head = 0
    while (
        head < len(messages)
        and isinstance(messages[head], Mapping)
        and messages[head].get("role") in _SYSTEM_ROLES
    ):
        head += 1
    marked = {i for i in (_nearest(ends, usable, position),) if i is not None}
    if 0 < head < len(messages) and head - 1 in usable:
        marked.add(head - 1)  # the end of the system prompt
    if not marked:
        return None
    written_1h = getattr(usage, "cache_write_1h_tokens", None) or 0
    control: dict[str, Any] = {"type": "ephemeral"}
    if writes and 2 * written_1h >= writes:
        control["ttl"] = "1h"
    new = [{**m, "cache_control": dict(control)} if i in marked else m for i, m in enumerate(messages)]
    return InferredBreakpoints({**body, "messages": new}, tuple(sorted(marked)), control)


def inferred_note(calls: int, total: int, example: str | None) -> str:
    """The analysis note on ``calls`` of ``total`` requests whose breakpoints were inferred (``example``:
    one of them, ``session#index: where``)."""
    shown = f" (e.g. {example})" if example else ""
    return (
        f"{calls} of {total} requests show no cache_control but report cache reads or writes: their "
        f"breakpoints were inferred from the reported counts{shown}, at the end of the system prompt and "
        "of the message nearest to reads + writes (the inferred_breakpoints column names them)"
    )
