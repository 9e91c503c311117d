"""A tokenizer and a render model small enough to reason about by hand, shared by the engine and cause
tests: one token per character, one special marker token per message."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from promptkit.tokens.render import RenderedPiece, RenderError

__all__ = ["CharTokenizer", "TinyRender"]


class CharTokenizer:
    """One token per character: token counts are the lengths of the texts."""

    name = "chars"
    n_vocab = 0x110000

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(chr(i) for i in ids)

    def special_token_id(self, token: str) -> int | None:
        return None


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content)
    return content or ""


class TinyRender:
    """``T<tool names>`` header; each message is one special marker token and its text; an assistant
    message renders exactly as the generation prompt ``<a>`` followed by its completion ``text<e>``,
    so a call's prompt + answer is a prefix of the next call's prompt."""

    name = "tiny"
    special_tokens = ("<s>", "<u>", "<a>", "<e>", "<t>")
    markers: Mapping[str, str] = {"system": "<s>", "user": "<u>", "assistant": "<a>", "tool": "<t>"}

    def render(
        self, request: Mapping[str, Any], *, completion: Mapping[str, Any] | None = None
    ) -> list[RenderedPiece]:
        out = []
        tools = request.get("tools")
        if tools:
            out.append(RenderedPiece("T" + "".join(t["function"]["name"] for t in tools), False, None))
        for i, m in enumerate(request["messages"]):
            if m["role"] not in self.markers:
                raise RenderError(f"messages[{i}]: role {m['role']!r} is not rendered")
            out.append(RenderedPiece(self.markers[m["role"]], True, i))
            out.append(RenderedPiece(_text(m.get("content")), False, i))
            if m["role"] == "assistant":
                out.append(RenderedPiece("<e>", True, i))
        out.append(RenderedPiece("<a>", True, None))
        if completion is not None:
            out.append(RenderedPiece(_text(completion.get("content")), False, None))
            out.append(RenderedPiece("<e>", True, None))
        return out
