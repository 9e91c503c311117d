"""Load request logs into :class:`RequestRecord` values, reporting every malformed line.

Two input formats, one call per record:

- **JSONL** (``*.jsonl``): one JSON object per line, either a bare chat-completions request body
  (``{"model": ..., "messages": [...], "tools": [...]}``) or a wrapped call::

      {"request": {...}, "response": {...}, "session": "s1", "timestamp": 1775786368.2,
       "layout": [{"slot": "identity", "key": "persona.card"}, {"slot": "history", "key": null}, ...]}

  ``response`` is the provider's response body (its ``usage`` and its first choice's message, the
  *completion*); ``session`` defaults to the file name (without ``.jsonl``), ``timestamp`` is seconds
  since the epoch or an ISO 8601 string (naive = UTC), ``layout`` is the assembler's per-message layout
  aligned with ``request["messages"]``.
- **mini-swe-agent trajectories** (``*.traj.json``): one session per file; every assistant message is a
  call whose request is every chat message before it (see :func:`load_trajectory`).

Nothing is dropped silently: a line or record that cannot be used becomes a :class:`LoadProblem`
(file, line, reason) in the :class:`LoadResult`; an optional field that cannot be used (a bad
timestamp, layout or usage) is reported the same way while the record is kept without it. A file that
cannot be read raises :class:`LogFileError` naming it.

Example::

    >>> result = load_requests(["fixtures/real-logs/deepseek"])          # doctest: +SKIP
    >>> len(result.records), len(result.problems)                      # doctest: +SKIP
    (154, 4)
"""

from __future__ import annotations

import ast
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import attrs

__all__ = [
    "CHAT_ROLES",
    "LAYOUT_ANCHORS",
    "LAYOUT_FRAME_ROLES",
    "LAYOUT_SLOTS",
    "MINI_SWE_AGENT_BASH_TOOL",
    "LayoutSlot",
    "LoadProblem",
    "LoadResult",
    "LogFileError",
    "RecordFormatError",
    "RequestRecord",
    "Usage",
    "load_log",
    "load_requests",
    "load_trajectory",
    "normalize_usage",
    "records_from_requests",
]

#: Roles of a chat-completions message. A trajectory message with another role (``exit``) is skipped
#: and reported.
CHAT_ROLES: Final[tuple[str, ...]] = ("system", "user", "assistant", "tool")

#: The five anchor values a layout slot can name (the assembler's ``Anchor``).
LAYOUT_ANCHORS: Final[tuple[str, ...]] = ("identity", "knowledge", "context", "turn-context", "turn-hint")
#: The frame roles a layout slot can name (messages the assembler did not place from a contributor; the
#: assembler's ``FrameSlot``).
LAYOUT_FRAME_ROLES: Final[tuple[str, ...]] = (
    "persona", "system", "history", "volatile", "focus", "directive", "current", "tool-loop",
)  # fmt: skip
#: The layout slot values promptkit's assembler writes. Other non-empty strings are accepted as they are
#: (a newer assembler may add slots); they show up under their own name in the composition.
LAYOUT_SLOTS: Final[tuple[str, ...]] = LAYOUT_ANCHORS + LAYOUT_FRAME_ROLES

#: The one tool mini-swe-agent's tool-calling models declare (``BASH_TOOL`` in
#: ``minisweagent/models/utils/actions_toolcall.py``, SWE-agent/mini-swe-agent, MIT). Trajectories do
#: not store the request's ``tools``; the importer adds this definition to every request of a
#: trajectory whose assistant messages carry ``tool_calls``.
MINI_SWE_AGENT_BASH_TOOL: Final[Mapping[str, Any]] = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Execute a bash command",
        "parameters": {
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "description": "The bash command to execute",
                }
            },
            "required": ["command"],
        },
    },
}


class LogFileError(OSError):
    """A log file or directory cannot be read (missing, unreadable, not UTF-8, or holds no logs).

    ``path`` names it.
    """

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class RecordFormatError(ValueError):
    """A request body, layout, usage or timestamp does not have the expected shape; the message names
    the field (``request.messages[2].role: expected a string, got int``)."""


@attrs.frozen(slots=True)
class LayoutSlot:
    """What placed one message of a request: a layout ``slot`` (an anchor value such as ``identity`` or
    a frame role such as ``history``, see :data:`LAYOUT_SLOTS`) and the contributor ``key`` (None for
    frame roles without an injector)."""

    slot: str
    key: str | None = None


@attrs.frozen(slots=True)
class Usage:
    """A provider's token usage, normalized.

    ``prompt_tokens`` counts every input token (cached or not; for Anthropic ``input_tokens`` +
    ``cache_read_input_tokens`` + ``cache_creation_input_tokens``), ``cached_tokens`` the ones read
    from the cache, ``cache_write_tokens`` the ones written to it (Anthropic, OpenAI when reported).
    None means the provider did not say.
    """

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None


@attrs.frozen(slots=True)
class RequestRecord:
    """One call: the chat-completions ``request`` body, where it belongs and what the provider said.

    ``index`` is the call's position within its ``session`` (0-based). ``completion`` is the assistant
    message the model generated (None when unknown), ``usage`` the normalized usage (None when the log
    has none), ``layout`` one :class:`LayoutSlot` per request message (None without a layout),
    ``file``/``line`` where the record came from (None for records built in code; ``line`` is None for
    trajectories, which are one JSON document).
    """

    request: Mapping[str, Any]
    session: str
    index: int
    timestamp: float | None = None
    completion: Mapping[str, Any] | None = None
    usage: Usage | None = None
    layout: tuple[LayoutSlot, ...] | None = None
    file: str | None = None
    line: int | None = None


@attrs.frozen(slots=True)
class LoadProblem:
    """A line, record or field that could not be used: ``file`` and ``line`` (1-based; None when the
    problem is not tied to a line) and the ``reason``."""

    file: str | None
    line: int | None
    reason: str


@attrs.frozen(slots=True)
class LoadResult:
    """The records loaded (in load order) and every problem met on the way."""

    records: tuple[RequestRecord, ...] = ()
    problems: tuple[LoadProblem, ...] = ()

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[RequestRecord]:
        return iter(self.records)


# ---------------------------------------------------------------------------------------------------
# field parsers (raise RecordFormatError naming the field)


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _check_message(message: object, where: str) -> Mapping[str, Any]:
    if not isinstance(message, Mapping):
        raise RecordFormatError(f"{where}: expected an object, got {_type_name(message)}")
    role = message.get("role")
    if not isinstance(role, str):
        raise RecordFormatError(f"{where}.role: expected a string, got {_type_name(role)}")
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise RecordFormatError(
            f"{where}.content: expected a string, a list of parts or null, got {_type_name(content)}"
        )
    return message


def _check_request(body: object, where: str = "request") -> Mapping[str, Any]:
    """Validate the shape of a chat-completions body; return it."""
    if not isinstance(body, Mapping):
        raise RecordFormatError(f"{where}: expected an object, got {_type_name(body)}")
    if "messages" not in body:
        raise RecordFormatError(f"{where}: missing 'messages'")
    messages = body["messages"]
    if not isinstance(messages, list):
        raise RecordFormatError(f"{where}.messages: expected a list, got {_type_name(messages)}")
    for i, message in enumerate(messages):
        _check_message(message, f"{where}.messages[{i}]")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise RecordFormatError(f"{where}.tools: expected a list, got {_type_name(tools)}")
    return body


def _parse_timestamp(value: object, where: str = "timestamp") -> float | None:
    """Seconds since the epoch from a number or an ISO 8601 string (naive = UTC); None stays None."""
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
        raise RecordFormatError(f"{where}: expected seconds or an ISO 8601 string, got {_type_name(value)}")
    if not math.isfinite(ts):
        raise RecordFormatError(f"{where}: {value!r} is not a finite time")
    return ts


def _layout_item(item: object, where: str) -> LayoutSlot:
    if isinstance(item, LayoutSlot):
        slot, key = item.slot, item.key
    elif isinstance(item, Mapping):
        if "slot" not in item:
            raise RecordFormatError(f"{where}: missing 'slot'")
        slot, key = item["slot"], item.get("key")
    elif isinstance(item, str):
        slot, key = item, None
    elif isinstance(item, tuple) and len(item) == 2:
        slot, key = item
    elif hasattr(item, "slot"):
        slot, key = item.slot, getattr(item, "key", None)
    else:
        raise RecordFormatError(f"{where}: expected {{'slot': ..., 'key': ...}}, got {_type_name(item)}")
    slot = getattr(slot, "value", slot)  # an Enum member (the assembler's Anchor)
    if not isinstance(slot, str) or not slot:
        raise RecordFormatError(f"{where}.slot: expected a non-empty string, got {slot!r}")
    if key is not None and not isinstance(key, str):
        raise RecordFormatError(f"{where}.key: expected a string or null, got {_type_name(key)}")
    return LayoutSlot(slot, key)


def _parse_layout(value: object, n_messages: int, where: str = "layout") -> tuple[LayoutSlot, ...] | None:
    """A layout aligned with the request's messages; None stays None."""
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise RecordFormatError(f"{where}: expected a list, got {_type_name(value)}")
    if len(value) != n_messages:
        raise RecordFormatError(f"{where}: {len(value)} entries for {n_messages} request messages")
    return tuple(_layout_item(item, f"{where}[{i}]") for i, item in enumerate(value))


def _count(value: object, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordFormatError(f"{where}: expected a token count, got {_type_name(value)}")
    if isinstance(value, float) and not value.is_integer():
        raise RecordFormatError(f"{where}: expected a whole token count, got {value!r}")
    if value < 0:
        raise RecordFormatError(f"{where}: negative token count {value!r}")
    return int(value)


def normalize_usage(usage: Mapping[str, Any], where: str = "usage") -> Usage:
    """Normalize a provider's ``usage`` object to :class:`Usage`.

    - DeepSeek: ``prompt_cache_hit_tokens`` (cached) + ``prompt_cache_miss_tokens`` = ``prompt_tokens``.
    - Anthropic: ``cache_read_input_tokens`` (cached), ``cache_creation_input_tokens`` (written) and
      ``input_tokens`` (after the last breakpoint) add up to the prompt; ``output_tokens``.
    - OpenAI: ``prompt_tokens`` with ``prompt_tokens_details.cached_tokens`` (and ``cache_write_tokens``
      when reported); the Responses API's ``input_tokens`` / ``input_tokens_details`` too.

    Raises :class:`RecordFormatError` naming the field when a count is not a non-negative integer.

    Example::

        >>> normalize_usage({"prompt_tokens": 2942, "completion_tokens": 71,
        ...                  "prompt_cache_hit_tokens": 320, "prompt_cache_miss_tokens": 2622})
        Usage(prompt_tokens=2942, completion_tokens=71, cached_tokens=320, cache_write_tokens=None)
        >>> normalize_usage({"input_tokens": 21, "cache_read_input_tokens": 188086,
        ...                  "cache_creation_input_tokens": 0, "output_tokens": 393})
        Usage(prompt_tokens=188107, completion_tokens=393, cached_tokens=188086, cache_write_tokens=0)
    """
    if not isinstance(usage, Mapping):
        raise RecordFormatError(f"{where}: expected an object, got {_type_name(usage)}")

    def get(key: str) -> int | None:
        return _count(usage.get(key), f"{where}.{key}")

    read, created = get("cache_read_input_tokens"), get("cache_creation_input_tokens")
    hit, miss = get("prompt_cache_hit_tokens"), get("prompt_cache_miss_tokens")
    if read is not None or created is not None:  # Anthropic
        uncached = get("input_tokens")
        prompt = None if uncached is None else uncached + (read or 0) + (created or 0)
        return Usage(prompt, get("output_tokens"), read or 0, created or 0)
    prompt = get("prompt_tokens")
    if prompt is None:
        prompt = get("input_tokens")
    completion = get("completion_tokens")
    if completion is None:
        completion = get("output_tokens")
    if hit is not None or miss is not None:  # DeepSeek
        if prompt is None and hit is not None and miss is not None:
            prompt = hit + miss
        return Usage(prompt, completion, hit, None)
    details: object = usage.get("prompt_tokens_details")
    details_name = "prompt_tokens_details"
    if details is None:
        details, details_name = usage.get("input_tokens_details"), "input_tokens_details"
    cached = write = None
    if details is not None:
        if not isinstance(details, Mapping):
            raise RecordFormatError(f"{where}.{details_name}: expected an object, got {_type_name(details)}")
        cached = _count(details.get("cached_tokens"), f"{where}.{details_name}.cached_tokens")
        write = _count(details.get("cache_write_tokens"), f"{where}.{details_name}.cache_write_tokens")
    return Usage(prompt, completion, cached, write)


# ---------------------------------------------------------------------------------------------------
# messages, tool calls, completions


def _literal(node: ast.AST) -> Any:
    """A safe evaluator for Python literals and reprs of simple objects (``Function(name='bash', ...)``
    becomes ``{'name': 'bash', ...}``)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise ValueError("dict unpacking is not a literal")
        return {
            _literal(k): _literal(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None
        }
    if isinstance(node, ast.Call) and not node.args:
        return {kw.arg: _literal(kw.value) for kw in node.keywords if kw.arg is not None}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _literal(node.operand)
        if isinstance(value, int | float):
            return -value
    raise ValueError(f"not a literal: {type(node).__name__}")


def _parse_tool_calls(value: object, where: str) -> list[dict[str, Any]] | None:
    """Tool calls stored as a list, a JSON string or a Python repr string, as chat-completions dicts."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text or text in ("None", "null", "[]"):
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            try:
                value = _literal(ast.parse(text, mode="eval").body)
            except (SyntaxError, ValueError, RecursionError) as exc:
                raise RecordFormatError(f"{where}: cannot parse tool calls ({exc})") from None
    if not isinstance(value, list):
        raise RecordFormatError(f"{where}: expected a list of tool calls, got {_type_name(value)}")
    calls: list[dict[str, Any]] = []
    for i, call in enumerate(value):
        w = f"{where}[{i}]"
        if not isinstance(call, Mapping):
            raise RecordFormatError(f"{w}: expected an object, got {_type_name(call)}")
        function = call.get("function")
        if not isinstance(function, Mapping):
            raise RecordFormatError(f"{w}.function: expected an object, got {_type_name(function)}")
        name = function.get("name")
        if not isinstance(name, str):
            raise RecordFormatError(f"{w}.function.name: expected a string, got {_type_name(name)}")
        arguments = function.get("arguments", "")
        if isinstance(arguments, Mapping):
            arguments = json.dumps(arguments, ensure_ascii=False)
        if not isinstance(arguments, str):
            raise RecordFormatError(f"{w}.function.arguments: expected a string, got {_type_name(arguments)}")
        out: dict[str, Any] = {}
        if call.get("id") is not None:
            out["id"] = str(call["id"])
        out["type"] = call.get("type") or "function"
        out["function"] = {"name": name, "arguments": arguments}
        calls.append(out)
    return calls or None


def _clean_message(message: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The chat-completions fields of a stored message (``role``, ``content``, ``name``, ``tool_calls``,
    ``tool_call_id``, and an assistant's non-empty ``reasoning_content``, which a thinking model's client
    sends back); log-only fields (``extra``, ``provider_specific_fields`` ...) are not sent."""
    _check_message(message, where)
    out: dict[str, Any] = {"role": message["role"], "content": message.get("content")}
    if message.get("name") is not None:
        out["name"] = message["name"]
    reasoning = message.get("reasoning_content")
    if message["role"] == "assistant" and isinstance(reasoning, str) and reasoning:
        out["reasoning_content"] = reasoning
    calls = _parse_tool_calls(message.get("tool_calls"), f"{where}.tool_calls")
    if calls:
        out["tool_calls"] = calls
    if message.get("tool_call_id") is not None:
        out["tool_call_id"] = str(message["tool_call_id"])
    return out


def _anthropic_completion(response: Mapping[str, Any], where: str) -> dict[str, Any]:
    """An Anthropic Messages response as a chat-completions assistant message."""
    text: list[str] = []
    calls: list[dict[str, Any]] = []
    for i, block in enumerate(response["content"]):
        if not isinstance(block, Mapping):
            raise RecordFormatError(f"{where}.content[{i}]: expected an object, got {_type_name(block)}")
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


def _completion_of(response: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    choices = response.get("choices")
    if choices is not None:
        if not isinstance(choices, list):
            raise RecordFormatError(f"{where}.choices: expected a list, got {_type_name(choices)}")
        if not choices:
            return None
        first = choices[0]
        if not isinstance(first, Mapping):
            raise RecordFormatError(f"{where}.choices[0]: expected an object, got {_type_name(first)}")
        message = first.get("message")
        if message is None:
            return None
        if isinstance(message, Mapping) and "role" not in message:
            message = {"role": "assistant", **message}
        return _clean_message(message, f"{where}.choices[0].message")
    if isinstance(response.get("content"), list) and response.get("role", "assistant") == "assistant":
        return _anthropic_completion(response, where)
    return None


# ---------------------------------------------------------------------------------------------------
# records


@attrs.frozen(slots=True)
class _Draft:
    """A record before its index within the session is known."""

    request: Mapping[str, Any]
    session: str
    timestamp: float | None
    completion: Mapping[str, Any] | None
    usage: Usage | None
    layout: tuple[LayoutSlot, ...] | None
    file: str | None
    line: int | None


def _finish(drafts: Iterable[_Draft]) -> tuple[RequestRecord, ...]:
    """Number each session's records in order."""
    counters: dict[str, int] = {}
    records = []
    for d in drafts:
        index = counters.get(d.session, 0)
        counters[d.session] = index + 1
        records.append(
            RequestRecord(
                request=d.request,
                session=d.session,
                index=index,
                timestamp=d.timestamp,
                completion=d.completion,
                usage=d.usage,
                layout=d.layout,
                file=d.file,
                line=d.line,
            )
        )
    return tuple(records)


def _draft_from_object(
    obj: object, *, file: str | None, line: int | None, default_session: str, problems: list[LoadProblem]
) -> _Draft | None:
    """One JSONL object (bare body or wrapped call) as a draft; problems are appended, never raised."""

    def report(reason: str) -> None:
        problems.append(LoadProblem(file, line, reason))

    if not isinstance(obj, Mapping):
        report(f"expected a JSON object, got {_type_name(obj)}")
        return None
    wrapped = "request" in obj
    try:
        request = _check_request(obj["request"] if wrapped else obj, "request" if wrapped else "body")
    except RecordFormatError as exc:
        report(str(exc))
        return None
    if not wrapped:
        return _Draft(request, default_session, None, None, None, None, file, line)

    session = obj.get("session", default_session)
    if isinstance(session, int) and not isinstance(session, bool):
        session = str(session)
    if not isinstance(session, str) or not session:
        report(
            f"session: expected a non-empty string, got {_type_name(session)}; the record is kept in session {default_session!r}"
        )
        session = default_session

    timestamp = None
    try:
        timestamp = _parse_timestamp(obj.get("timestamp"))
    except RecordFormatError as exc:
        report(f"{exc}; the record is kept without a timestamp")

    layout = None
    try:
        layout = _parse_layout(obj.get("layout"), len(request["messages"]))
    except RecordFormatError as exc:
        report(f"{exc}; the record is kept without a layout")

    completion = usage = None
    response = obj.get("response")
    if response is not None:
        if not isinstance(response, Mapping):
            report(f"response: expected an object, got {_type_name(response)}; the record is kept without it")
        else:
            try:
                completion = _completion_of(response, "response")
            except RecordFormatError as exc:
                report(f"{exc}; the record is kept without a completion")
            raw_usage = response.get("usage", obj.get("usage"))
            if raw_usage is not None:
                try:
                    usage = normalize_usage(raw_usage, "response.usage")
                except RecordFormatError as exc:
                    report(f"{exc}; the record is kept without usage")
    elif obj.get("usage") is not None:
        try:
            usage = normalize_usage(obj["usage"], "usage")
        except RecordFormatError as exc:
            report(f"{exc}; the record is kept without usage")
    return _Draft(request, session, timestamp, completion, usage, layout, file, line)


def _session_name(path: Path) -> str:
    name = path.name
    for suffix in (".traj.json", ".jsonl", ".json"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")  # a leading BOM is not part of the first record
    except FileNotFoundError:
        raise LogFileError(path, "no such file") from None
    except IsADirectoryError:
        raise LogFileError(path, "is a directory, not a log file") from None
    except UnicodeDecodeError as exc:
        raise LogFileError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise LogFileError(path, f"cannot be read: {exc.strerror or exc}") from None


def _jsonl_drafts(path: Path, session: str | None, problems: list[LoadProblem]) -> list[_Draft]:
    text = _read_text(path)
    file = str(path)
    default_session = session or _session_name(path)
    drafts = []
    # split at "\n" only: str.splitlines would also cut at U+2028 and friends, which JSON strings may hold
    for lineno, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            problems.append(LoadProblem(file, lineno, f"invalid JSON: {exc.msg} (column {exc.colno})"))
            continue
        draft = _draft_from_object(
            obj, file=file, line=lineno, default_session=default_session, problems=problems
        )
        if draft is not None:
            drafts.append(draft)
    return drafts


def load_log(path: str | os.PathLike[str], *, session: str | None = None) -> LoadResult:
    """Load one JSONL request log (one bare body or wrapped call per line).

    ``session`` overrides the default session name (the file name without ``.jsonl``) for lines that
    do not name one. Blank lines are ignored; every other line that cannot be used is a problem.

    Example::

        >>> result = load_log("calls.jsonl")                                 # doctest: +SKIP
        >>> [(r.session, r.index) for r in result.records]                  # doctest: +SKIP
        [('calls', 0), ('calls', 1)]
    """
    problems: list[LoadProblem] = []
    drafts = _jsonl_drafts(Path(path), session, problems)
    return LoadResult(_finish(drafts), tuple(problems))


def _model_name(data: Mapping[str, Any]) -> str | None:
    info = data.get("info")
    config = info.get("config") if isinstance(info, Mapping) else None
    model = config.get("model") if isinstance(config, Mapping) else None
    name = model.get("model_name") if isinstance(model, Mapping) else None
    return name.rsplit("/", 1)[-1] if isinstance(name, str) and name else None


def _trajectory_drafts(data: object, file: str, session: str, problems: list[LoadProblem]) -> list[_Draft]:
    def report(reason: str) -> None:
        problems.append(LoadProblem(file, None, reason))

    if not isinstance(data, Mapping) or not isinstance(data.get("messages"), list):
        report("not a mini-swe-agent trajectory: no 'messages' list")
        return []
    messages: list[Any] = data["messages"]
    uses_tools = any(
        isinstance(m, Mapping)
        and (m.get("role") == "tool" or m.get("tool_calls") not in (None, "", [], "[]"))
        for m in messages
    )
    model = _model_name(data)
    chat: list[dict[str, Any]] = []
    drafts: list[_Draft] = []
    for k, message in enumerate(messages):
        where = f"messages[{k}]"
        if not isinstance(message, Mapping):
            report(f"{where}: expected an object, got {_type_name(message)}; skipped")
            continue
        role = message.get("role")
        if role not in CHAT_ROLES:
            report(f"{where}: skipped non-chat message (role {role!r})")
            continue
        try:
            cleaned = _clean_message(message, where)
        except RecordFormatError as exc:
            if "tool_calls" not in str(exc):
                report(f"{exc}; message skipped")
                continue
            report(f"{exc}; the message is kept without its tool calls")
            cleaned = {
                key: value
                for key, value in message.items()
                if key in ("role", "content", "name", "tool_call_id")
            }
        if role == "assistant":
            body: dict[str, Any] = {}
            if model is not None:
                body["model"] = model
            body["messages"] = list(chat)
            if uses_tools:
                body["tools"] = [MINI_SWE_AGENT_BASH_TOOL]
            extra = message.get("extra")
            response = extra.get("response") if isinstance(extra, Mapping) else None
            usage = timestamp = None
            if isinstance(response, Mapping):
                if response.get("usage") is not None:
                    try:
                        usage = normalize_usage(response["usage"], f"{where}.extra.response.usage")
                    except RecordFormatError as exc:
                        report(f"{exc}; the call is kept without usage")
                raw_ts = response.get("created")
                if raw_ts is None and isinstance(extra, Mapping):
                    raw_ts = extra.get("timestamp")
                try:
                    timestamp = _parse_timestamp(raw_ts, f"{where}.extra.response.created")
                except RecordFormatError as exc:
                    report(f"{exc}; the call is kept without a timestamp")
            else:
                report(f"{where}: assistant message without extra.response (no usage, no timestamp)")
            drafts.append(_Draft(body, session, timestamp, cleaned, usage, None, file, None))
        chat.append(cleaned)
    if not drafts:
        info = data.get("info")
        status = info.get("exit_status") if isinstance(info, Mapping) else None
        detail = info.get("exception_str") if isinstance(info, Mapping) else None
        why = f" (exit status {status!r}{': ' + str(detail) if detail else ''})" if status else ""
        report(f"trajectory has no model calls{why}: zero requests loaded")
    return drafts


def load_trajectory(path: str | os.PathLike[str], *, session: str | None = None) -> LoadResult:
    """Load a mini-swe-agent / SWE-agent ``.traj.json`` trajectory as one session.

    Every assistant message is one call: its request is every chat message before it (messages with
    a non-chat role such as ``exit`` are skipped and reported), its completion is the assistant message
    itself, ``extra.response.usage`` gives the usage and ``extra.response.created`` the timestamp. Only
    the chat-completions fields of each message are kept (``extra`` and litellm's bookkeeping fields
    are not sent to the provider). ``tool_calls`` stored as a list, a JSON string or a Python repr are
    parsed; unparseable ones are reported. Requests of a trajectory that uses tools get
    :data:`MINI_SWE_AGENT_BASH_TOOL` as ``tools`` and the model name of ``info.config.model``. A
    trajectory with no calls loads as zero records and one problem.

    Example::

        >>> r = load_trajectory("fixtures/real-logs/deepseek/deepseek_chat_dev__pvlib__pvlib-python-1072.traj.json")
        >>> len(r.records), r.records[2].usage.cached_tokens
        (74, 3008)
    """
    p = Path(path)
    problems: list[LoadProblem] = []
    drafts = _trajectory_file(p, session, problems)
    return LoadResult(_finish(drafts), tuple(problems))


def _trajectory_file(path: Path, session: str | None, problems: list[LoadProblem]) -> list[_Draft]:
    text = _read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        problems.append(LoadProblem(str(path), exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})"))
        return []
    return _trajectory_drafts(data, str(path), session or _session_name(path), problems)


def _json_file(path: Path, problems: list[LoadProblem]) -> list[_Draft]:
    """A ``.json`` file: a trajectory, one record, or a list of records."""
    text = _read_text(path)
    file = str(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        problems.append(LoadProblem(file, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})"))
        return []
    session = _session_name(path)
    if isinstance(data, Mapping) and ("trajectory_format" in data or "info" in data):
        return _trajectory_drafts(data, file, session, problems)
    items = data if isinstance(data, list) else [data]
    drafts = []
    for i, item in enumerate(items):
        sub: list[LoadProblem] = []
        draft = _draft_from_object(item, file=file, line=None, default_session=session, problems=sub)
        if isinstance(data, list):
            sub = [attrs.evolve(p, reason=f"item {i}: {p.reason}") for p in sub]
        problems.extend(sub)
        if draft is not None:
            drafts.append(draft)
    return drafts


_LOG_PATTERNS: Final[tuple[str, ...]] = ("*.jsonl", "*.json")


def _expand(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    files: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = sorted({f for pattern in _LOG_PATTERNS for f in p.rglob(pattern) if f.is_file()})
            if not found:
                raise LogFileError(p, "directory holds no log files (*.jsonl, *.traj.json, *.json)")
            files.extend(found)
        elif p.exists():
            files.append(p)
        else:
            raise LogFileError(p, "no such file or directory")
    return files


def load_requests(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> LoadResult:
    """Load every request log under ``paths`` (files and directories, searched recursively for
    ``*.jsonl``, ``*.traj.json`` and ``*.json``).

    ``*.traj.json`` files are trajectories (:func:`load_trajectory`), other ``*.json`` files a
    trajectory, one record or a list of records, anything else JSONL (:func:`load_log`). Records keep
    load order; ``index`` counts each session's calls across all files. Raises :class:`LogFileError`
    for a missing or unreadable path.

    Example::

        >>> result = load_requests("fixtures/real-logs/deepseek")
        >>> len(result.records)
        154
        >>> sorted({p.reason.split(':')[0] for p in result.problems})[:1]
        ['messages[149]']
    """
    problems: list[LoadProblem] = []
    drafts: list[_Draft] = []
    for path in _expand(paths):
        if path.name.endswith(".traj.json"):
            drafts.extend(_trajectory_file(path, None, problems))
        elif path.suffix == ".json":
            drafts.extend(_json_file(path, problems))
        else:
            drafts.extend(_jsonl_drafts(path, None, problems))
    return LoadResult(_finish(drafts), tuple(problems))


def records_from_requests(
    items: Iterable[Mapping[str, Any] | tuple[Mapping[str, Any], Any]],
    *,
    session: str = "requests",
    timestamps: Sequence[float | str | None] | None = None,
    completions: Sequence[Mapping[str, Any] | None] | None = None,
) -> tuple[RequestRecord, ...]:
    """Records for requests built in code, one session in the given order.

    Each item is a chat-completions body or a ``(body, layout)`` pair; a layout is a sequence aligned
    with the body's messages of ``{"slot": ..., "key": ...}`` mappings, ``(slot, key)`` pairs,
    :class:`LayoutSlot` or objects with ``slot``/``key`` attributes (the assembler's layout entries).
    ``timestamps`` and ``completions`` (the assistant message each call generated) are optional and
    aligned with ``items``. Raises :class:`RecordFormatError` naming the item and field.

    Example::

        >>> body = {"messages": [{"role": "system", "content": "You are terse."},
        ...                      {"role": "user", "content": "hi"}]}
        >>> recs = records_from_requests([(body, [("identity", "card"), ("current", None)])])
        >>> recs[0].layout
        (LayoutSlot(slot='identity', key='card'), LayoutSlot(slot='current', key=None))
    """
    items = list(items)
    for name, aligned in (("timestamps", timestamps), ("completions", completions)):
        if aligned is not None and len(aligned) != len(items):
            raise RecordFormatError(f"{name}: {len(aligned)} values for {len(items)} requests")
    drafts = []
    for i, item in enumerate(items):
        where = f"requests[{i}]"
        if isinstance(item, tuple):
            if len(item) != 2:
                raise RecordFormatError(
                    f"{where}: expected a body or a (body, layout) pair, got a {len(item)}-tuple"
                )
            body, raw_layout = item
        else:
            body, raw_layout = item, None
        request = _check_request(body, where)
        layout = _parse_layout(raw_layout, len(request["messages"]), f"{where}.layout")
        ts = _parse_timestamp(timestamps[i], f"timestamps[{i}]") if timestamps is not None else None
        completion = None
        if completions is not None and completions[i] is not None:
            completion = _clean_message(completions[i], f"completions[{i}]")  # type: ignore[arg-type]
        drafts.append(_Draft(request, session, ts, completion, None, layout, None, None))
    return _finish(drafts)
