"""The render-model contract: pieces of rendered text, the protocols, and the request readers every
render model shares (messages, content parts, tool calls, tool definitions)."""

from __future__ import annotations

import abc
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from promptkit.errors import RenderError

__all__ = [
    "IncrementalRenderModel",
    "RenderModel",
    "RenderedPiece",
    "SplitRender",
    "content_text",
    "message_text",
    "message_tool_calls",
    "rendered_text",
    "request_messages",
    "request_tools",
]


@attrs.frozen(slots=True)
class RenderedPiece:
    """One piece of a rendered request.

    ``text`` is ordinary text when ``special`` is False, else exactly one special token of the template.
    ``message_index`` is the index into ``request["messages"]`` whose rendering produced the piece, or
    None for the header (BOS, tool definitions) and the trailing generation prompt / completion.
    A piece with empty text marks where a message that renders to nothing sits.
    """

    text: str
    special: bool
    message_index: int | None


@runtime_checkable
class RenderModel(Protocol):
    """Turns a chat-completions request body into :class:`RenderedPiece` s.

    ``render(request)`` ends with the generation prompt. ``render(request, completion=answer)`` renders
    the prompt followed by ``answer`` (an assistant message dict) as the model generated it, i.e. what a
    provider's cache entry for that call covers. The prompt's pieces are a prefix of it.
    """

    @property
    def name(self) -> str:
        """The model's name (``deepseek-v3``, ``chatml``, ``hf:PATH``)."""
        ...

    def render(
        self, request: Mapping[str, Any], *, completion: Mapping[str, Any] | None = None
    ) -> list[RenderedPiece]:
        """The pieces of ``request`` (and ``completion``)."""
        ...


@runtime_checkable
class IncrementalRenderModel(RenderModel, Protocol):
    """A render model that can render a request from message ``start`` on (what lets
    :class:`~promptkit.tokens.tokenize.RequestTokenizer` reuse the rendering and tokens of a request that
    shares the first ``start`` messages).

    Contract: ``render_from(request, 0, completion=c)`` is ``render(request, completion=c)``; for every
    ``1 <= start <= len(messages)``, ``render(request, completion=c)`` equals the
    pieces before the first piece of message ``start`` followed by ``render_from(request, start,
    completion=c)``; and the pieces before message ``start`` are the same for two requests whose
    ``messages[:start]`` are equal and whose ``prefix_context(request, start)`` are equal (``==``). The
    message pieces come in message order, after the header. A property test checks both on generated
    conversations.

    A model may also have ``render_split(request, start, completion)``, returning
    ``render_from(request, start, completion=completion)`` and how many of its pieces are
    ``render_from(request, start)``: the request tokenizer then renders a request with its completion once
    instead of twice (ChatML and DeepSeek-V3.2 have it; a property test checks it).
    """

    def render_from(
        self, request: Mapping[str, Any], start: int, *, completion: Mapping[str, Any] | None = None
    ) -> list[RenderedPiece]:
        """The pieces of message ``start`` and after, then the generation prompt / ``completion``."""
        ...

    def prefix_context(self, request: Mapping[str, Any], start: int) -> Any:
        """Everything besides ``messages[:start]`` that the pieces before message ``start`` depend on."""
        ...


class SplitRender(abc.ABC):
    """The ``render`` and ``render_from`` of a model that implements ``render_split(request, start,
    completion)`` (see :class:`IncrementalRenderModel`): both are its first element, so a model writes
    its pieces once. A subclass that does not implement ``render_split`` cannot be instantiated."""

    __slots__ = ()

    @abc.abstractmethod
    def render_split(
        self, request: Mapping[str, Any], start: int, completion: Mapping[str, Any] | None = None
    ) -> tuple[list[RenderedPiece], int]:
        """``render_from(request, start, completion=completion)`` and how many of its pieces are the
        prompt's (``render_from(request, start)``)."""

    def render(
        self, request: Mapping[str, Any], *, completion: Mapping[str, Any] | None = None
    ) -> list[RenderedPiece]:
        """Pieces of ``request`` ending with its generation prompt, or with ``completion``."""
        return self.render_split(request, 0, completion)[0]

    def render_from(
        self, request: Mapping[str, Any], start: int, *, completion: Mapping[str, Any] | None = None
    ) -> list[RenderedPiece]:
        """The pieces of message ``start`` and after (the header too when ``start`` is 0), then the
        generation prompt or ``completion``."""
        return self.render_split(request, start, completion)[0]


def rendered_text(pieces: Sequence[RenderedPiece]) -> str:
    """The concatenated text of ``pieces``."""
    return "".join(p.text for p in pieces)


# ---------------------------------------------------------------------------------------------------
# request access helpers


def request_messages(request: Mapping[str, Any], start: int = 0) -> Sequence[Mapping[str, Any]]:
    """``request["messages"]``, checked from index ``start`` on (the ones before were checked when the
    request that shares them was rendered)."""
    if type(request) is not dict and not isinstance(request, Mapping):
        raise RenderError(
            f"request must be a mapping (a chat-completions body), got {type(request).__name__}"
        )
    messages = request.get("messages")
    if type(messages) is not list and (not isinstance(messages, Sequence) or isinstance(messages, str)):
        raise RenderError(f"request['messages'] must be a list, got {type(messages).__name__}")
    for i in range(start, len(messages)):
        m = messages[i]
        if type(m) is not dict and not isinstance(m, Mapping):
            raise RenderError(f"messages[{i}] must be an object, got {type(m).__name__}")
        if not isinstance(m.get("role"), str):
            raise RenderError(f"messages[{i}]: field 'role' must be a string, got {m.get('role')!r}")
    return messages


def _image_placeholder(part: Mapping[str, Any]) -> str:
    digest = hashlib.sha1(json.dumps(part, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]
    return f"<image sha1={digest}>"


def content_text(value: Any, where: str) -> str | None:
    """The text of a message ``content`` field: str, None, or a list of content parts."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Sequence):
        out: list[str] = []
        for k, part in enumerate(value):
            if isinstance(part, str):
                out.append(part)
            elif (
                isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)
            ):
                out.append(part["text"])
            elif isinstance(part, Mapping):
                out.append(_image_placeholder(part))
            else:
                raise RenderError(f"{where}[{k}]: content part must be an object, got {type(part).__name__}")
        return "".join(out)
    raise RenderError(
        f"{where}: content must be a string, a list of parts or null, got {type(value).__name__}"
    )


def message_text(message: Mapping[str, Any], i: int) -> str:
    value = message.get("content")
    if type(value) is str:  # perf: the usual content, without building the error's location
        return value
    text = content_text(value, f"messages[{i}].content")
    return "" if text is None else text


def message_tool_calls(message: Mapping[str, Any], where: str) -> list[tuple[str, str, str]]:
    """(type, name, arguments) of each tool call of ``message``."""
    raw = message.get("tool_calls")
    if raw is None:
        return []
    if type(raw) is not list and (not isinstance(raw, Sequence) or isinstance(raw, str)):
        raise RenderError(f"{where}: field 'tool_calls' must be a list, got {type(raw).__name__}")
    calls = []
    for k, call in enumerate(raw):
        # perf: plain dicts (what JSON gives) pass on a type test, without the ABC check
        fn = call.get("function") if type(call) is dict else None
        if type(fn) is not dict:
            if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
                raise RenderError(f"{where}.tool_calls[{k}]: must be an object with a 'function' object")
            fn = call["function"]
        name = fn.get("name")
        if not isinstance(name, str):
            raise RenderError(
                f"{where}.tool_calls[{k}].function: field 'name' must be a string, got {name!r}"
            )
        args = fn.get("arguments", "")
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        kind = call.get("type", "function")
        calls.append((kind if isinstance(kind, str) else "function", name, args))
    return calls


def request_tools(request: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    tools = request.get("tools")
    if tools is None:
        return []
    if type(tools) is not list and (not isinstance(tools, Sequence) or isinstance(tools, str)):
        raise RenderError(f"request['tools'] must be a list, got {type(tools).__name__}")
    for k, tool in enumerate(tools):
        if type(tool) is not dict and not isinstance(tool, Mapping):
            raise RenderError(f"request['tools'][{k}] must be an object, got {type(tool).__name__}")
    return list(tools)
