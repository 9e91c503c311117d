"""What every provider module shares: input coercion, provenance through ``prepare_llm_messages``,
tool definitions, data URLs, tool-call arguments, the exceptions and the warning.

Nothing here is provider specific; each ``promptkit.providers.<provider>`` module turns the prepared
messages into its own API's JSON body.
"""

from __future__ import annotations

import copy
import json
import re
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

from promptkit.chat.egress import prepare_llm_messages, to_llm_role
from promptkit.chat.message import Message, ToolCall, is_directive
from promptkit.chat.request import ChatModelRequest
from promptkit.errors import (
    ContentNotSentWarning,
    InternalError,
    MediaFormatError,
    RequestBuildError,
    ToolArgumentsError,
    ToolDefinitionError,
    UsageError,
)
from promptkit.layout import role_head_end

__all__ = [
    "SYSTEM_HINT_PREFIX",
    "ContentNotSentWarning",
    "MediaFormatError",
    "PreparedInput",
    "RequestArguments",
    "RequestBuildError",
    "ToolArgumentsError",
    "ToolDefinitionError",
    "check_model",
    "is_directive",
    "merge_extra",
    "parse_data_url",
    "prepare_input",
    "put_given",
    "request_arguments",
    "stop_list",
    "system_hint_content",
    "think_field",
]

#: Marker that a system message moved into a user message carries (pipeline contract §9).
SYSTEM_HINT_PREFIX: Final[str] = "[系统提示]"


def warn_not_sent(message: str) -> None:
    """Emit a :class:`ContentNotSentWarning` attributed to the first caller outside ``promptkit.providers``."""
    level = 2  # stacklevel 2 is warn_not_sent's caller, frame 1
    frame = sys._getframe(1)
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith("promptkit.providers"):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    warnings.warn(message, ContentNotSentWarning, stacklevel=level)


# --------------------------------------------------------------------------------------------------
# input: messages or an AssembledPrompt, and where every prepared message came from


@attrs.frozen
class PreparedInput:
    """The input after :func:`promptkit.prepare_llm_messages`, with provenance.

    ``sources[j]`` is the index in the caller's input of the message ``messages[j]`` came from;
    ``inserted[j]`` is True for the user message that carries the images of a run of tool results
    (prepare inserts it after the run); its source is the first tool message of the run that had images.
    ``layout[j]`` is the caller's layout entry for ``messages[j]`` (an inserted message gets the entry of
    its source), or ``layout`` is None.
    """

    messages: tuple[Message, ...]
    sources: tuple[int, ...]
    inserted: tuple[bool, ...]
    layout: tuple[Any, ...] | None
    inputs: tuple[Message, ...] = ()

    def frame_layout(self) -> tuple[Any, ...]:
        """The layout aligned with ``messages``: the caller's, or else the assembler's reading of the
        input (:func:`promptkit.assembly.layout_of`: head, history, per-turn tail, tool loop)."""
        if self.layout is not None:
            return self.layout
        from promptkit.assembly import layout_of  # the one definition of the frame; imported when needed

        read = layout_of(self.inputs)
        return tuple(read[i] for i in self.sources)

    def head_length(self) -> int:
        """How many messages the leading run of system messages (the stable head) holds."""
        return role_head_end([m.role for m in self.messages], head_roles=("system",))


def _coerce(prompt_or_messages: Any, where: str) -> tuple[list[Message], list[Any] | None]:
    layout: list[Any] | None = None
    if isinstance(prompt_or_messages, ChatModelRequest):
        prompt_or_messages = prompt_or_messages.messages
    if hasattr(prompt_or_messages, "messages") and hasattr(prompt_or_messages, "layout"):
        raw_messages = prompt_or_messages.messages
        raw_layout = prompt_or_messages.layout
        layout = None if raw_layout is None else list(raw_layout)
    else:
        raw_messages = prompt_or_messages
    if isinstance(raw_messages, Message):
        raise UsageError(
            f"{where}: prompt_or_messages: expected a sequence of Message or an AssembledPrompt, got one Message"
        )
    if isinstance(raw_messages, (str, bytes, Mapping)) or not isinstance(raw_messages, Iterable):
        raise UsageError(
            f"{where}: prompt_or_messages: expected a sequence of Message or an AssembledPrompt, "
            f"got {type(raw_messages).__name__}"
        )
    messages = list(raw_messages)
    for i, m in enumerate(messages):
        if not isinstance(m, Message):
            raise UsageError(f"{where}: messages[{i}] is {type(m).__name__}, expected promptkit.Message")
    if layout is not None and len(layout) != len(messages):
        raise RequestBuildError(
            f"{where}: the layout has {len(layout)} entries for {len(messages)} messages; they must align"
        )
    return messages, layout


def prepare_input(prompt_or_messages: Any, *, where: str) -> PreparedInput:
    """Coerce the input, run :func:`promptkit.prepare_llm_messages`, and record where each message came from."""
    messages, layout = _coerce(prompt_or_messages, where)
    prepared = prepare_llm_messages(messages)
    # The provenance mirrors prepare_llm_messages' one insertion rule: after a run of consecutive tool
    # results, one user message carries the images of every tool message of the run that had some; it is
    # attributed to the first of them.
    sources: list[int] = []
    inserted: list[bool] = []
    pending: int | None = None
    for i, m in enumerate(messages):
        is_tool = to_llm_role(m.role) == "tool"
        if pending is not None and not is_tool:
            sources.append(pending)
            inserted.append(True)
            pending = None
        sources.append(i)
        inserted.append(False)
        if is_tool and m.images and pending is None:
            pending = i
    if pending is not None:
        sources.append(pending)
        inserted.append(True)
    if len(sources) != len(prepared) or any(
        not ins and prepared[j].role != to_llm_role(messages[sources[j]].role)
        for j, ins in enumerate(inserted)
    ):  # pragma: no cover - only if prepare_llm_messages changes its insertion rule
        raise InternalError(f"{where}: cannot map prepare_llm_messages output back to the input messages")
    return PreparedInput(
        messages=tuple(prepared),
        sources=tuple(sources),
        inserted=tuple(inserted),
        layout=None if layout is None else tuple(layout[i] for i in sources),
        inputs=tuple(messages),
    )


@attrs.frozen
class RequestArguments:
    """A builder's input after :func:`request_arguments`: the messages (or prompt) and the call parameters."""

    prompt_or_messages: Any
    tools: Sequence[Mapping[str, Any]] | None
    temperature: float | None
    max_tokens: int | None
    think: bool | None


def request_arguments(
    prompt_or_messages: Any,
    *,
    tools: Sequence[Mapping[str, Any]] | None,
    temperature: float | None,
    max_tokens: int | None,
    where: str,
    top_p: float | None = None,
    stop: str | Sequence[str] | None = None,
    stream: bool | None = None,
) -> RequestArguments:
    """Accept a :class:`promptkit.chat.ChatModelRequest` wherever messages are accepted.

    For a request, its ``messages`` are the input and its ``tools``, ``temperature`` and ``max_tokens``
    fill the builder's keyword arguments; a parameter set both in the request and as a keyword raises
    :class:`RequestBuildError` naming it. ``think`` comes from the request only. Any other input passes
    through with ``think=None``.

    The call parameters are type-checked: a wrong type raises :class:`~promptkit.errors.UsageError`
    naming the builder and the argument (``openai_request: temperature: expected a number or None,
    got str``).
    """
    check_call_options(
        where, temperature=temperature, max_tokens=max_tokens, top_p=top_p, stop=stop, stream=stream
    )
    if not isinstance(prompt_or_messages, ChatModelRequest):
        return RequestArguments(prompt_or_messages, tools, temperature, max_tokens, None)
    req = prompt_or_messages
    merged: dict[str, Any] = {}
    for name, from_request, from_keyword in (
        ("tools", req.tools, tools),
        ("temperature", req.temperature, temperature),
        ("max_tokens", req.max_tokens, max_tokens),
    ):
        if from_request is not None and from_keyword is not None:
            raise RequestBuildError(
                f"{where}: {name} is given twice (in the ChatModelRequest and as a keyword argument)"
            )
        merged[name] = from_request if from_request is not None else from_keyword
    return RequestArguments(
        list(req.messages), merged["tools"], merged["temperature"], merged["max_tokens"], req.think
    )


def check_call_options(
    where: str,
    *,
    temperature: object = None,
    max_tokens: object = None,
    top_p: object = None,
    stop: object = None,
    stream: object = None,
) -> None:
    """Raise :class:`~promptkit.errors.UsageError` naming ``where`` and the argument for a call
    parameter of the wrong type (values are the provider's to judge)."""
    for name, value in (("temperature", temperature), ("top_p", top_p)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise UsageError(f"{where}: {name}: expected a number or None, got {type(value).__name__}")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)):
        raise UsageError(f"{where}: max_tokens: expected an int or None, got {type(max_tokens).__name__}")
    if stream is not None and not isinstance(stream, bool):
        raise UsageError(f"{where}: stream: expected a bool or None, got {type(stream).__name__}")
    if stop is not None and not isinstance(stop, str):
        if isinstance(stop, bytes | bytearray | Mapping) or not isinstance(stop, Sequence):
            raise UsageError(
                f"{where}: stop: expected a string, a sequence of strings or None, got {type(stop).__name__}"
            )
        for i, s in enumerate(stop):
            if not isinstance(s, str):
                raise UsageError(f"{where}: stop[{i}] is {type(s).__name__}, expected str")


# --------------------------------------------------------------------------------------------------
# small shared rules


def system_hint_content(content: str) -> str:
    """``content`` of a system message moved to the user role: ``[系统提示]`` and a newline in front,
    unless it already starts with ``[`` (it already says what it is: ``[系统通知]``, ``[跨会话委派]``...).

    >>> system_hint_content("今天是周五")
    '[系统提示]\\n今天是周五'
    >>> system_hint_content("[系统通知] 服务重启")
    '[系统通知] 服务重启'
    """
    return content if content.startswith("[") else f"{SYSTEM_HINT_PREFIX}\n{content}"


def stop_list(stop: str | Sequence[str] | None) -> list[str] | None:
    """``stop`` as a list of strings (None stays None)."""
    if stop is None:
        return None
    if isinstance(stop, str):
        return [stop]
    out = list(stop)
    for i, s in enumerate(out):
        if not isinstance(s, str):
            raise UsageError(f"stop[{i}] is {type(s).__name__}, expected str")
    return out


def merge_extra(body: dict[str, Any], extra: Mapping[str, Any], *, where: str) -> dict[str, Any]:
    """Add the caller's extra top-level fields to ``body``; a field the builder already set is an error."""
    for key, value in extra.items():
        if key in body:
            raise RequestBuildError(
                f"{where}: extra field {key!r} collides with a field the builder sets; use its keyword argument"
            )
        body[key] = copy.deepcopy(value)
    return body


def check_model(model: object, *, where: str) -> None:
    """A :class:`RequestBuildError` naming ``where`` unless ``model`` is a non-empty string."""
    if not isinstance(model, str) or not model:
        raise RequestBuildError(f"{where}: model must be a non-empty string")


def put_given(target: dict[str, Any], fields: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """Add each ``(key, value)`` of ``fields`` whose value is not None to ``target``, in their order
    (a body's keys are part of its bytes); returns ``target``.

    >>> put_given({"model": "m"}, [("temperature", 0.2), ("top_p", None), ("stream", False)])
    {'model': 'm', 'temperature': 0.2, 'stream': False}
    """
    for key, value in fields:
        if value is not None:
            target[key] = value
    return target


def think_field(extra: Mapping[str, Any], key: str, value: Any, *, where: str) -> dict[str, Any]:
    """``extra`` with the field ``key`` that carries a ChatModelRequest's ``think`` set to ``value``
    (None adds nothing); ``key`` given in ``extra`` too is a :class:`RequestBuildError`.

    >>> think_field({"format": "json"}, "think", True, where="ollama_request")
    {'format': 'json', 'think': True}
    """
    if value is None:
        return dict(extra)
    if key in extra:
        raise RequestBuildError(f"{where}: {key} is given twice (ChatModelRequest.think and {key}=)")
    return {**extra, key: value}


_DATA_URL = re.compile(
    r"^data:(?P<mime>[^;,]*)(?P<params>(?:;[^;,]*)*),(?P<data>.*)$", re.DOTALL | re.IGNORECASE
)


def parse_data_url(url: str) -> tuple[str, bool, str] | None:
    """``(media_type, is_base64, data)`` for a ``data:`` URL, None for anything else.

    >>> parse_data_url("data:image/png;base64,iVBORw0KGgo=")
    ('image/png', True, 'iVBORw0KGgo=')
    >>> parse_data_url("https://example.com/a.png") is None
    True
    """
    match = _DATA_URL.match(url)
    if match is None:
        return None
    params = [p.strip().lower() for p in match["params"].split(";") if p.strip()]
    return match["mime"].strip().lower(), "base64" in params, match["data"]


# --------------------------------------------------------------------------------------------------
# tools


def check_function_tool(tool: Any, *, index: int, where: str) -> dict[str, Any]:
    """Validate one OpenAI-style function tool dict and return a deep copy (never the caller's dict)."""
    at = f"{where}: tools[{index}]"
    if not isinstance(tool, Mapping):
        raise ToolDefinitionError(f"{at} must be a dict, got {type(tool).__name__}")
    if tool.get("type") != "function":
        raise ToolDefinitionError(f"{at}: field 'type' must be 'function', got {tool.get('type')!r}")
    fn = tool.get("function")
    if not isinstance(fn, Mapping):
        raise ToolDefinitionError(f"{at}: field 'function' must be an object")
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise ToolDefinitionError(f"{at}: field 'function.name' must be a non-empty string")
    if "description" in fn and not isinstance(fn["description"], str):
        raise ToolDefinitionError(f"{at}: field 'function.description' must be a string")
    if "parameters" in fn and not isinstance(fn["parameters"], Mapping):
        raise ToolDefinitionError(f"{at}: field 'function.parameters' must be an object (a JSON schema)")
    return copy.deepcopy(dict(tool))


def tool_sequence(tools: Any, *, where: str) -> list[Any]:
    """``tools`` as a list (None is empty); a single dict or a string is a :class:`ToolDefinitionError`."""
    if tools is None:
        return []
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Iterable):
        raise ToolDefinitionError(
            f"{where}: tools must be a sequence of tool dicts, got {type(tools).__name__}"
        )
    return list(tools)


def check_function_tools(tools: Sequence[Mapping[str, Any]] | None, *, where: str) -> list[dict[str, Any]]:
    """Validate OpenAI-style function tools and return deep copies (the caller's dicts are never shared)."""
    return [
        check_function_tool(t, index=i, where=where) for i, t in enumerate(tool_sequence(tools, where=where))
    ]


def parse_tool_arguments(call: ToolCall, *, index: int, where: str) -> dict[str, Any]:
    """A tool call's arguments as a JSON object. Blank arguments are ``{}``; anything else that is not a
    JSON object raises :class:`ToolArgumentsError` naming the message index and the call id."""
    if not call.arguments.strip():
        return {}
    try:
        value = json.loads(call.arguments)
    except json.JSONDecodeError as exc:
        raise ToolArgumentsError(
            f"{where}: messages[{index}] tool call {call.id!r} ({call.name}): arguments are not valid JSON: {exc}"
        ) from exc
    if not isinstance(value, dict):
        raise ToolArgumentsError(
            f"{where}: messages[{index}] tool call {call.id!r} ({call.name}): arguments must be a JSON object, "
            f"got {type(value).__name__}"
        )
    return value
