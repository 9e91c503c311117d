"""Composing one turn's frame: persona card, the history as the model must see it, the per-turn blocks.

:func:`turn_frame` is the list :meth:`promptkit.assembly.PromptRegistry.assemble` expects, in the layout of
pipeline contract §9 (contributors' blocks are added by the registry)::

    [persona] [history …] [volatile] [focus] [directive] [current]

The history goes through :func:`promptkit.chat.history.history_for_model`: control kinds dropped,
``visibleContent`` used, tool calls regrouped with their results, partial and loose tool groups dropped.

>>> from promptkit.chat.message import Message
>>> frame = turn_frame(
...     [Message(role="user", content="hi"), Message(role="system", kind="event-marker", content="---"),
...      Message(role="assistant", content='{"reply": "hello"}', metadata={"visibleContent": "hello"})],
...     persona="You are Aalis.", volatile="Now: 10:00", current="what time is it?")
>>> [(m.role, m.content, m.injector) for m in frame]  # doctest: +NORMALIZE_WHITESPACE
[('system', 'You are Aalis.', None), ('user', 'hi', None), ('assistant', 'hello', None),
 ('system', 'Now: 10:00', 'persona-volatile'), ('user', 'what time is it?', None)]
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from promptkit.assembly.anchors import FOCUS_INJECTOR, VOLATILE_INJECTOR
from promptkit.assembly.placement import is_directive
from promptkit.chat.history import history_for_model
from promptkit.chat.message import Message, is_directive_block
from promptkit.errors import UsageError

__all__ = ["turn_frame"]


def _block(value: str | Message | None, injector: str, what: str) -> Message | None:
    if value is None:
        return None
    if isinstance(value, Message):
        if value.injector != injector:
            raise UsageError(f"turn_frame: the {what} message must carry metadata injector {injector!r}")
        return value
    return Message(role="system", content=value, metadata={"injector": injector})


def turn_frame(
    history: Sequence[Message] = (),
    *,
    persona: str | Message | None = None,
    volatile: str | Message | None = None,
    focus: str | Message | None = None,
    directive: Message | None = None,
    current: str | Message | None = None,
) -> list[Message]:
    """The messages of one turn before assembly, each part in its place; a new list.

    ``persona`` (the persona card) becomes a system message; ``history`` is stored history, passed through
    :func:`history_for_model`; ``volatile`` and ``focus`` (strings, or messages carrying the right injector)
    become system blocks with injector :data:`VOLATILE_INJECTOR` / :data:`FOCUS_INJECTOR`; ``directive``
    (for a delegation, host-notice or idle turn) is a message whose kind or injector is in
    ``DIRECTIVE_KINDS``: it becomes this turn's directive block, carrying its kind as the injector when it
    has none (placement recognises the block by its injector only); ``current`` (a string becomes a user
    message) is the current message. ``ValueError`` names a part that does not fit its place.
    """
    out: list[Message] = []
    if persona is not None:
        card = persona if isinstance(persona, Message) else Message(role="system", content=persona)
        if card.role != "system":
            raise UsageError(f"turn_frame: the persona card must be a system message, got role {card.role!r}")
        out.append(card)
    out.extend(history_for_model(history))
    for block in (_block(volatile, VOLATILE_INJECTOR, "volatile"), _block(focus, FOCUS_INJECTOR, "focus")):
        if block is not None:
            out.append(block)
    if directive is not None:
        if not is_directive(directive):
            raise UsageError("turn_frame: the directive must have a kind or injector in DIRECTIVE_KINDS")
        if not is_directive_block(directive):
            # this turn's directive block is a request-time message: it carries its kind as the injector
            # (the pipeline contract recognises the block by its injector; an archived notice of the same
            # kind in the history is history)
            directive = attrs.evolve(
                directive, metadata={**(directive.metadata or {}), "injector": directive.kind}
            )
        out.append(directive)
    if current is not None:
        message = current if isinstance(current, Message) else Message(role="user", content=current)
        if message.role != "user":
            raise UsageError(
                f"turn_frame: the current message must be a user message, got role {message.role!r}"
            )
        out.append(message)
    return out
