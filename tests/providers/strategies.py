"""Shared hypothesis strategies and stand-ins for the assembler's AssembledPrompt / LayoutEntry."""

from __future__ import annotations

import json
from typing import Any

import attrs
from hypothesis import strategies as st

from promptkit.chat.message import DIRECTIVE_KINDS, Message, ToolCall

PNG = "data:image/png;base64,iVBORw0KGgo="
JPEG = "data:image/jpeg;base64,/9j/4AAQSkZJRg=="
HTTP_IMAGE = "https://example.com/cat.png"
WAV = "data:audio/wav;base64,UklGRiQAAABXQVZF"


@attrs.frozen
class Entry:
    """Stand-in for promptkit.assembly.LayoutEntry (duck-typed by the providers)."""

    slot: str
    key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"slot": self.slot, "key": self.key}


@attrs.frozen
class Prompt:
    """Stand-in for promptkit.assembly.AssembledPrompt: anything with .messages and .layout."""

    messages: tuple[Message, ...] = attrs.field(converter=tuple)
    layout: tuple[Entry, ...] | None = attrs.field(default=None, converter=attrs.converters.optional(tuple))


# Text without lone surrogates (prepare_llm_messages would rewrite those; tested in egress).
text = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12)
contents = st.one_of(
    st.none(), st.just(""), st.just("  \n"), text, text.map(lambda s: "[" + s), text.map("x".__add__)
)
kinds = st.sampled_from([None, *DIRECTIVE_KINDS, "event-marker", "outbound-image", "custom-kind"])
metadatas = st.one_of(
    st.none(),
    st.sampled_from(DIRECTIVE_KINDS).map(lambda k: {"injector": k}),
    st.sampled_from(["persona-volatile", "memory", "focus"]).map(lambda k: {"injector": k}),
    st.just({"userId": "u1", "nested": {"a": [1]}}),
)
roles = st.sampled_from(["system", "system", "user", "assistant", "tool", "notice", "observation"])


@st.composite
def any_message(draw: st.DrawFn) -> Message:
    """Any message, well-formed or not (for the normalization rules)."""
    return Message(
        role=draw(roles),
        content=draw(contents),
        kind=draw(kinds),
        name=draw(st.one_of(st.none(), st.sampled_from(["u_1", "bot"]))),
        metadata=draw(metadatas),
    )


@st.composite
def conversations(
    draw: st.DrawFn, *, images: tuple[str, ...] = (PNG, HTTP_IMAGE)
) -> tuple[list[Message], list[Entry]]:
    """A well-formed assembled conversation and its layout: stable head, history turns (with tool
    groups, tool-result images, old notices), the per-turn tail (turn-context, volatile, focus, turn-hint,
    a directive block) and usually a current user message."""
    msgs: list[Message] = []
    layout: list[Entry] = []

    def add(m: Message, slot: str, key: str | None = None) -> None:
        msgs.append(m)
        layout.append(Entry(slot, key))

    nonblank = text.map(lambda s: "t" + s)
    maybe_images = st.one_of(st.none(), st.lists(st.sampled_from(images), min_size=1, max_size=2).map(tuple))
    for slot in draw(st.lists(st.sampled_from(["persona", "identity", "knowledge", "context"]), max_size=3)):
        add(Message(role="system", content=draw(contents), metadata={"injector": slot}), slot, slot)
    calls = 0
    for _ in range(draw(st.integers(0, 3))):
        add(
            Message(
                role="user",
                content=draw(contents),
                images=draw(maybe_images),
                name=draw(st.sampled_from([None, "u_7"])),
            ),
            "history",
        )
        if draw(st.booleans()):
            add(Message(role="notice", content=draw(nonblank)), "history")
        if draw(st.booleans()):
            n = draw(st.integers(1, 2))
            tool_calls = []
            for _k in range(n):
                calls += 1
                args = draw(
                    st.dictionaries(
                        st.sampled_from(["q", "n", "路径"]), st.one_of(st.integers(), text), max_size=2
                    )
                )
                tool_calls.append(
                    ToolCall(
                        id=f"call_{calls}",
                        name=draw(st.sampled_from(["search", "read"])),
                        arguments=json.dumps(args, ensure_ascii=False),
                    )
                )
            add(
                Message(
                    role="assistant",
                    content=draw(st.one_of(st.none(), nonblank)),
                    tool_calls=tuple(tool_calls),
                    reasoning_content=draw(st.one_of(st.none(), nonblank)),
                ),
                "history",
            )
            for call in tool_calls:
                add(
                    Message(
                        role="tool", content=draw(contents), tool_call_id=call.id, images=draw(maybe_images)
                    ),
                    "history",
                )
        add(
            Message(
                role="assistant",
                content=draw(nonblank),
                reasoning_content=draw(st.one_of(st.none(), nonblank)),
            ),
            "history",
        )
    tail = draw(
        st.lists(st.sampled_from(["turn-context", "volatile", "focus", "turn-hint"]), max_size=3, unique=True)
    )
    for slot in tail:
        injector = "persona-volatile" if slot == "volatile" else slot
        add(Message(role="system", content=draw(contents), metadata={"injector": injector}), slot, injector)
    directive = draw(st.sampled_from([None, "cross-session-delegation", "idle-prompt", "host-notice"]))
    if directive == "cross-session-delegation":
        add(Message(role="notice", kind=directive, content=draw(nonblank)), "directive")
    elif directive == "idle-prompt":
        add(
            Message(role="system", content=draw(nonblank), metadata={"injector": directive}),
            "directive",
            directive,
        )
    elif directive == "host-notice":
        add(Message(role="user", kind=directive, content=draw(nonblank)), "directive")
    if directive is None or draw(st.booleans()):
        add(Message(role="user", content=draw(nonblank), images=draw(maybe_images)), "current")
    return msgs, layout
