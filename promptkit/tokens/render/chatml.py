"""ChatML, ``<|im_start|>role\\ncontent<|im_end|>``, for OpenAI-compatible APIs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from promptkit.errors import RenderError
from promptkit.tokens.render.base import (
    RenderedPiece,
    SplitRender,
    content_text,
    message_text,
    message_tool_calls,
    request_messages,
    request_tools,
)

__all__ = [
    "CHATML_SPECIAL_TOKENS",
    "IM_END",
    "IM_START",
    "ChatMLRender",
    "chatml_tools_text",
]


# ---------------------------------------------------------------------------------------------------
# ChatML

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
CHATML_SPECIAL_TOKENS: tuple[str, ...] = (IM_START, IM_END)


def chatml_tools_text(tools: Sequence[Mapping[str, Any]]) -> str:
    """The system-block body promptkit renders for tool definitions in ChatML: one JSON line per tool."""
    lines = ["# Tools", "", "You may call one or more functions. Function signatures:"]
    lines += [json.dumps(tool, ensure_ascii=False, sort_keys=True) for tool in tools]
    return "\n".join(lines)


# perf: what ``json.dumps({"name": name, "arguments": args}, ensure_ascii=False)`` writes for two
# strings, without building an encoder per call: the strings quoted as that encoder quotes them
_QUOTE = json.encoder.encode_basestring


def _chatml_tool_calls_text(calls: list[tuple[str, str, str]], after_content: bool = True) -> str:
    """The tool calls, a line each. After no content (``after_content`` false) the first starts the body
    without a newline: the role header ends with one, and two newlines would merge into one token in
    the next request (``assistant\n\n``) but not after the generation prompt (the completion is
    tokenized on its own), so an answer of tool calls only would never match its own next rendering."""
    text = "".join(
        f'\n<tool_call>\n{{"name": {_QUOTE(name)}, "arguments": {_QUOTE(args)}}}\n</tool_call>'
        for _, name, args in calls
    )
    return text if after_content else text[1:]


@attrs.frozen(slots=True)
class ChatMLRender(SplitRender):
    """ChatML, the message framing of OpenAI-compatible chat APIs.

    Each message is ``<|im_start|>{role}\\n{content}<|im_end|>\\n`` (``{role} name={name}`` when the
    message has a ``name``); an assistant's tool calls follow its content as
    ``\\n<tool_call>\\n{"name": …, "arguments": …}\\n</tool_call>`` lines (the first without its newline
    when there is no content); tool definitions come first as
    a system block (:func:`chatml_tools_text`); the generation prompt is ``<|im_start|>assistant\\n``
    and a completion is its content and tool calls followed by ``<|im_end|>``.

    ``<|im_start|>`` and ``<|im_end|>`` are special pieces. With a vocabulary that lacks them
    (tiktoken's cl100k_base) the request tokenizer gives them reserved ids just above the vocabulary,
    so message boundaries stay exact cut points; the token count is then a model of, not a copy of, the
    provider's (OpenAI does not publish its framing).
    """

    name: str = "chatml"
    special_tokens: tuple[str, ...] = CHATML_SPECIAL_TOKENS

    def render_split(
        self, request: Mapping[str, Any], start: int, completion: Mapping[str, Any] | None = None
    ) -> tuple[list[RenderedPiece], int]:
        """``render_from(request, start, completion=completion)`` and how many of its pieces are
        ``render_from(request, start)`` (the prompt's), rendered once.

        >>> r = ChatMLRender()
        >>> request = {"messages": [{"role": "user", "content": "hi"}]}
        >>> pieces, n = r.render_split(request, 0, {"role": "assistant", "content": "yo"})
        >>> pieces[:n] == r.render(request), [p.text for p in pieces[n:]]
        (True, ['yo', '<|im_end|>'])
        >>> request = {"messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": "yo"}]}
        >>> r.render(request)[5:] == r.render_from(request, 1)  # the first message is five pieces
        True
        """
        messages = request_messages(request, start)
        P = RenderedPiece
        out: list[RenderedPiece] = []
        tools = request_tools(request) if start == 0 else None  # perf: only the header renders them
        if tools:
            out += [P(IM_START, True, None), P("system\n" + chatml_tools_text(tools), False, None)]
            out += [P(IM_END, True, None), P("\n", False, None)]
        for i in range(start, len(messages)):
            m = messages[i]
            role = m["role"]
            name = m.get("name")
            head = f"{role} name={name}\n" if isinstance(name, str) and name else f"{role}\n"
            body = message_text(m, i)
            if role == "assistant" and m.get("tool_calls") is not None:
                body += _chatml_tool_calls_text(message_tool_calls(m, f"messages[{i}]"), bool(body))
            # the role header and the body are two pieces: the body is then a text of its own, the
            # same as the completion it was (see RequestTokenizer's cut pieces)
            out += [
                P(IM_START, True, i),
                P(head, False, i),
                P(body, False, i),
                P(IM_END, True, i),
                P("\n", False, i),
            ]
        out += [P(IM_START, True, None), P("assistant\n", False, None)]
        n_prompt = len(out)
        if completion is not None:
            if not isinstance(completion, Mapping):
                raise RenderError(
                    f"completion must be an assistant message object, got {type(completion).__name__}"
                )
            text = content_text(completion.get("content"), "completion.content") or ""
            if completion.get("tool_calls") is not None:
                text += _chatml_tool_calls_text(message_tool_calls(completion, "completion"), bool(text))
            if text:
                out.append(P(text, False, None))
            out.append(P(IM_END, True, None))
        return out, n_prompt

    def prefix_context(self, request: Mapping[str, Any], start: int) -> Any:
        """The tool definitions: the only thing besides the messages that the pieces depend on.

        perf: as the request holds them, unchecked and uncopied (the loaders hold a session's equal
        tool lists once, so two requests' compare by identity): a request whose pieces are rendered
        from message 0 has its tools checked then, and a request resumed from another has the same
        tools as that one, whose rendering checked them. No tools and an empty list are one context."""
        return request.get("tools") or None
