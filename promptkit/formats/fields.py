"""Field parsers shared by the log formats: each raises :class:`~promptkit.errors.RecordFormatError`
naming the field (``request.messages[2].role: expected a string, got int``), so a format can turn it into
a :class:`~promptkit.layout.LoadProblem` with its file and line.

>>> parse_timestamp("2026-01-02T03:04:05Z")
1767323045.0
>>> clean_message({"role": "assistant", "content": "ok", "extra": {"cost": 1}}, "m")
{'role': 'assistant', 'content': 'ok'}
"""

from __future__ import annotations

import ast
import functools
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, ParamSpec, TypeVar

from promptkit.errors import LONE_SURROGATE, LayoutFormatError, RecordFormatError, UsageError
from promptkit.layout import LayoutEntry, RequestRecord, token_count as count, type_name

__all__ = [
    "CHAT_ROLES",
    "anthropic_completion",
    "assistant_message",
    "chat_body",
    "check_message",
    "check_request",
    "clean_message",
    "completion_of",
    "count",
    "loads_json",
    "optional_field",
    "parse_layout",
    "parse_timestamp",
    "parse_tool_calls",
    "type_name",
]

_P = ParamSpec("_P")
_T = TypeVar("_T")

#: Roles of a chat-completions message.
CHAT_ROLES: Final[tuple[str, ...]] = ("system", "user", "assistant", "tool")


def _plain_message(message: object) -> bool:
    """perf: whether ``message`` is a plain dict with a string role and string, list or no content (what
    :func:`check_message` accepts, told on type tests alone)."""
    if type(message) is not dict or type(message.get("role")) is not str:
        return False
    content = message.get("content")
    return content is None or type(content) is str or type(content) is list


def check_message(message: object, where: str) -> Mapping[str, Any]:
    if _plain_message(message):
        return message  # type: ignore[return-value]
    if not isinstance(message, Mapping):
        raise RecordFormatError(f"{where}: expected an object, got {type_name(message)}")
    role = message.get("role")
    if not isinstance(role, str):
        raise RecordFormatError(f"{where}.role: expected a string, got {type_name(role)}")
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise RecordFormatError(
            f"{where}.content: expected a string, a list of parts or null, got {type_name(content)}"
        )
    return message


def check_request(body: object, where: str = "request") -> Mapping[str, Any]:
    """Validate the shape of a chat-completions body; return it."""
    if not isinstance(body, Mapping):
        raise RecordFormatError(f"{where}: expected an object, got {type_name(body)}")
    if "messages" not in body:
        raise RecordFormatError(f"{where}: missing 'messages'")
    messages = body["messages"]
    if not isinstance(messages, list):
        raise RecordFormatError(f"{where}.messages: expected a list, got {type_name(messages)}")
    for i, message in enumerate(messages):
        if not _plain_message(message):  # perf: the usual message needs no location for an error
            check_message(message, f"{where}.messages[{i}]")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise RecordFormatError(f"{where}.tools: expected a list, got {type_name(tools)}")
    return body


#: The times a log may carry, in seconds since the epoch: from 1970-01-01 to 2200-01-01 (UTC). A time
#: outside (``-5``, ``1e20``, a year 10000, milliseconds read as seconds) is a problem, not a time.
EARLIEST_TIME: Final[float] = 0.0
LATEST_TIME: Final[float] = 7_258_118_400.0


def parse_timestamp(value: object, where: str = "timestamp") -> float | None:
    """Seconds since the epoch from a number or an ISO 8601 string (naive = UTC); None stays None. A time
    before 1970 or from 2200 on raises :class:`~promptkit.errors.RecordFormatError` naming ``where``.

    >>> parse_timestamp("2026-04-10T01:59:35Z")
    1775786375.0
    >>> parse_timestamp(1e20)
    Traceback (most recent call last):
    ...
    promptkit.errors.RecordFormatError: timestamp: 1e+20 is not a time between 1970 and 2200
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise RecordFormatError(f"{where}: expected seconds or an ISO 8601 string, got bool")
    if isinstance(value, int | float):
        ts = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            ts = float(text)
        except ValueError:
            try:
                parsed = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
            except ValueError:
                raise RecordFormatError(
                    f"{where}: {value!r} is neither seconds nor an ISO 8601 time"
                ) from None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            ts = parsed.timestamp()
    else:
        raise RecordFormatError(f"{where}: expected seconds or an ISO 8601 string, got {type_name(value)}")
    if not math.isfinite(ts):
        raise RecordFormatError(f"{where}: {value!r} is not a finite time")
    if not EARLIEST_TIME <= ts < LATEST_TIME:
        hint = (
            " (milliseconds? a time in seconds is expected)" if LATEST_TIME <= ts < LATEST_TIME * 1000 else ""
        )
        raise RecordFormatError(f"{where}: {value!r} is not a time between 1970 and 2200{hint}")
    return ts


def parse_layout(value: object, n_messages: int, where: str = "layout") -> tuple[LayoutEntry, ...] | None:
    """A layout aligned with the request's messages; None stays None."""
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise RecordFormatError(f"{where}: expected a list, got {type_name(value)}")
    if len(value) != n_messages:
        raise RecordFormatError(f"{where}: {len(value)} entries for {n_messages} request messages")
    try:
        return tuple(LayoutEntry.coerce(item, where=f"{where}[{i}]") for i, item in enumerate(value))
    except LayoutFormatError as exc:
        raise RecordFormatError(str(exc)) from None


def _literal(node: ast.AST) -> Any:
    """A safe evaluator for Python literals and reprs of simple objects (``Function(name='bash', ...)``
    becomes ``{'name': 'bash', ...}``)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise UsageError("dict unpacking is not a literal")
        return {
            _literal(k): _literal(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None
        }
    if isinstance(node, ast.Call) and not node.args:
        return {kw.arg: _literal(kw.value) for kw in node.keywords if kw.arg is not None}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _literal(node.operand)
        if isinstance(value, int | float):
            return -value
    raise UsageError(f"not a literal: {type(node).__name__}")


def loads_json(text: str) -> Any:
    """:func:`json.loads`, failing only with :class:`json.JSONDecodeError`.

    ``json.loads`` also fails with a bare ``ValueError`` for an integer of more than 4,300 digits
    (Python's limit on int-from-string conversion) and with ``RecursionError`` for arrays or objects
    nested deeper than the interpreter's recursion limit; both become a ``JSONDecodeError`` at the
    start of the text, so a reader's one handler turns any unreadable JSON into a problem.

    >>> loads_json('{"n": 1}')
    {'n': 1}
    >>> try:
    ...     loads_json("[" * 100_000 + "]" * 100_000)
    ... except json.JSONDecodeError as exc:
    ...     print(exc.msg)
    arrays or objects nested too deeply
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError("arrays or objects nested too deeply", text, 0) from None
    except ValueError:  # "Exceeds the limit (4300 digits) for integer string conversion"
        raise json.JSONDecodeError("an integer of more than 4300 digits", text, 0) from None


def parse_tool_calls(value: object, where: str) -> list[dict[str, Any]] | None:
    """Tool calls stored as a list, a JSON string or a Python repr string, as chat-completions dicts."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text or text in ("None", "null", "[]"):
            return None
        try:
            value = loads_json(text)
        except json.JSONDecodeError:
            try:
                value = _literal(ast.parse(text, mode="eval").body)
            except (SyntaxError, ValueError, RecursionError) as exc:
                raise RecordFormatError(f"{where}: cannot parse tool calls ({exc})") from None
    if not isinstance(value, list):
        raise RecordFormatError(f"{where}: expected a list of tool calls, got {type_name(value)}")
    calls: list[dict[str, Any]] = []
    for i, call in enumerate(value):
        w = f"{where}[{i}]"
        if not isinstance(call, Mapping):
            raise RecordFormatError(f"{w}: expected an object, got {type_name(call)}")
        function = call.get("function")
        if not isinstance(function, Mapping):
            raise RecordFormatError(f"{w}.function: expected an object, got {type_name(function)}")
        name = function.get("name")
        if not isinstance(name, str):
            raise RecordFormatError(f"{w}.function.name: expected a string, got {type_name(name)}")
        arguments = function.get("arguments", "")
        if isinstance(arguments, Mapping):
            arguments = json.dumps(arguments, ensure_ascii=False)
        if not isinstance(arguments, str):
            raise RecordFormatError(f"{w}.function.arguments: expected a string, got {type_name(arguments)}")
        out: dict[str, Any] = {}
        if call.get("id") is not None:
            out["id"] = str(call["id"])
        out["type"] = call.get("type") or "function"
        out["function"] = {"name": name, "arguments": arguments}
        calls.append(out)
    return calls or None


def clean_message(message: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The chat-completions fields of a stored message (``role``, ``content``, ``name``, ``tool_calls``,
    ``tool_call_id``, and an assistant's non-empty ``reasoning_content``, which a thinking model's client
    sends back); log-only fields (``extra``, ``provider_specific_fields`` ...) are not sent."""
    check_message(message, where)
    out: dict[str, Any] = {"role": message["role"], "content": message.get("content")}
    if message.get("name") is not None:
        out["name"] = message["name"]
    reasoning = message.get("reasoning_content")
    if message["role"] == "assistant" and isinstance(reasoning, str) and reasoning:
        out["reasoning_content"] = reasoning
    calls = parse_tool_calls(message.get("tool_calls"), f"{where}.tool_calls")
    if calls:
        out["tool_calls"] = calls
    if message.get("tool_call_id") is not None:
        out["tool_call_id"] = str(message["tool_call_id"])
    return out


def anthropic_completion(response: Mapping[str, Any], where: str) -> dict[str, Any]:
    """An Anthropic Messages response as a chat-completions assistant message."""
    text: list[str] = []
    calls: list[dict[str, Any]] = []
    for i, block in enumerate(response["content"]):
        if not isinstance(block, Mapping):
            raise RecordFormatError(f"{where}.content[{i}]: expected an object, got {type_name(block)}")
        if block.get("type") == "text":
            text.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            calls.append(
                {
                    "id": str(block.get("id", "")),
                    "type": "function",
                    "function": {
                        "name": str(block.get("name", "")),
                        "arguments": json.dumps(block.get("input", {}), ensure_ascii=False),
                    },
                }
            )
    out: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
    if calls:
        out["tool_calls"] = calls
    return out


def completion_of(response: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    choices = response.get("choices")
    if choices is not None:
        if not isinstance(choices, list):
            raise RecordFormatError(f"{where}.choices: expected a list, got {type_name(choices)}")
        if not choices:
            return None
        first = choices[0]
        if not isinstance(first, Mapping):
            raise RecordFormatError(f"{where}.choices[0]: expected an object, got {type_name(first)}")
        message = first.get("message")
        if message is None:
            return None
        if isinstance(message, Mapping) and "role" not in message:
            message = {"role": "assistant", **message}
        return clean_message(message, f"{where}.choices[0].message")
    if isinstance(response.get("content"), list) and response.get("role", "assistant") == "assistant":
        return anthropic_completion(response, where)
    return None


def optional_field(
    report: Callable[[str], object],
    kept: str,
    parse: Callable[_P, _T],
    *args: _P.args,
    **kwargs: _P.kwargs,
) -> _T | None:
    """``parse(*args, **kwargs)``; None when it raises :class:`~promptkit.errors.RecordFormatError`, after
    ``report("<the error>; <kept>")``: how a reader keeps a record without an optional field it cannot
    read (``kept`` says so: ``"the call is kept without usage"``).

    >>> problems = []
    >>> optional_field(problems.append, "the call is kept without a timestamp", parse_timestamp, "soon", "ts")
    >>> problems
    ["ts: 'soon' is neither seconds nor an ISO 8601 time; the call is kept without a timestamp"]
    """
    try:
        return parse(*args, **kwargs)
    except RecordFormatError as exc:
        report(f"{exc}; {kept}")
        return None


def chat_body(model: object, messages: list[Any], tools: list[Any] | None = None) -> dict[str, Any]:
    """A chat-completions request body as the agent-log readers build one: ``model`` when it is a non-empty
    string, the ``messages``, and ``tools`` when there are any.

    >>> chat_body("gpt-4o", [{"role": "user", "content": "hi"}], [])
    {'model': 'gpt-4o', 'messages': [{'role': 'user', 'content': 'hi'}]}
    >>> chat_body(None, [])
    {'messages': []}
    """
    body: dict[str, Any] = {}
    if isinstance(model, str) and model:
        body["model"] = model
    body["messages"] = messages
    if tools:
        body["tools"] = tools
    return body


def assistant_message(content: str | list[Any], calls: list[dict[str, Any]]) -> dict[str, Any]:
    """An assistant message as the agent-log readers replay one: its ``content`` (when empty: None beside
    tool calls, else ``""``) and its tool ``calls`` (left out when there are none).

    >>> assistant_message("", [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}])["content"]
    >>> assistant_message("", [])
    {'role': 'assistant', 'content': ''}
    """
    message: dict[str, Any] = {"role": "assistant", "content": content or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    return message


def _mended(text: str) -> str:
    return LONE_SURROGATE.sub("\ufffd", text)


def _has_lone_surrogate(text: str) -> bool:
    return LONE_SURROGATE.search(text) is not None


def mend_identifiers(record: RequestRecord) -> tuple[RequestRecord, str | None]:
    """``record`` with every lone UTF-16 surrogate in its identifiers (session id, model, provider, URL,
    layout slots and keys) replaced by U+FFFD, and what was mended (None when nothing was). JSON logs can
    hold ``\\ud800``; no text can be written with one (a CSV, a report, the terminal), so such an id
    once aborted the whole run. The request's text is mended where it is tokenized, with a note.

    >>> from promptkit.layout import RequestRecord
    >>> record, said = mend_identifiers(RequestRecord({"messages": []}, "s\\ud800"))
    >>> record.session, said
    ('s\ufffd', 'session: a lone UTF-16 surrogate replaced by U+FFFD (no text can be written with one)')
    """
    import attrs

    fields: list[str] = []
    changes: dict[str, Any] = {}
    if _has_lone_surrogate(record.session):
        fields.append("session")
        changes["session"] = _mended(record.session)
    model = record.request.get("model")
    if isinstance(model, str) and _has_lone_surrogate(model):
        fields.append("request.model")
        changes["request"] = {**record.request, "model": _mended(model)}
    for name in ("provider", "url"):
        value = getattr(record, name)
        if isinstance(value, str) and _has_lone_surrogate(value):
            fields.append(name)
            changes[name] = _mended(value)
    if record.layout is not None and any(
        _has_lone_surrogate(e.slot) or (e.key is not None and _has_lone_surrogate(e.key))
        for e in record.layout
    ):
        fields.append("layout")
        changes["layout"] = tuple(
            attrs.evolve(e, slot=_mended(e.slot), key=None if e.key is None else _mended(e.key))
            for e in record.layout
        )
    if not fields:
        return record, None
    said = (
        f"{', '.join(fields)}: a lone UTF-16 surrogate replaced by U+FFFD (no text can be written with one)"
    )
    return attrs.evolve(record, **changes), said


#: how many JSON lines :func:`first_json_lines` gives a sniffer (the most any built-in sniffer reads)
SNIFF_LINES: Final[int] = 8
#: what a JSON text may start with, and what it never ends with (its last character closes a value)
_JSON_FIRST: Final[frozenset[str]] = frozenset('{["-0123456789tfn')
_NEVER_LAST: Final[frozenset[str]] = frozenset(",:{[")
#: a JSON text that starts with a quote is one string literal (looser than JSON's: what it rejects, JSON does)
_ONE_STRING: Final = re.compile(r'"(?:[^"\\\x00-\x1f]|\\.)*"')


def _may_be_json(raw: str) -> bool:
    """False when ``raw`` cannot be a JSON text, by its ends alone: it starts with what no JSON value
    starts with, ends with ``,``, ``:``, ``{`` or ``[``, or starts with a quote and is not one string
    literal (the lines of a pretty-printed document: ``"key": value,``, ``}``)."""
    line = raw.strip()
    if not line or line[0] not in _JSON_FIRST or line[-1] in _NEVER_LAST:
        return False
    return line[0] != '"' or _ONE_STRING.fullmatch(line) is not None


@functools.lru_cache(maxsize=4)
def first_json_lines(head: str) -> tuple[Any, ...]:
    """The first :data:`SNIFF_LINES` lines of ``head`` that parse as JSON (:func:`loads_json`), parsed,
    for a format's ``sniff``; blank lines and lines that do not parse are passed over (a corrupt line
    is the reader's problem to count). A line that cannot be a JSON text by its ends alone (most lines
    of a pretty-printed document) is passed over unparsed. The last few heads' are kept, since every
    sniffer reads the same head: read the values, never change them.

    >>> first_json_lines('{"a": 1}\\n\\nnot json\\n{"b": [\\n2')
    ({'a': 1}, 2)
    """
    out: list[Any] = []
    for raw in head.split("\n"):
        if len(out) >= SNIFF_LINES:
            break
        if not _may_be_json(raw):
            continue
        try:
            out.append(loads_json(raw))
        except json.JSONDecodeError:
            continue
    return tuple(out)
