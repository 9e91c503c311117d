"""OpenTelemetry GenAI spans exported as OTLP JSON: one model call per GenAI client span.

Reads what an OTLP exporter writes: one JSON document ``{"resourceSpans": [...]}`` per file (the OTLP/HTTP
JSON body), or OTLP JSON Lines, one export per line (the collector's ``file`` exporter). Every span of
``resourceSpans[].scopeSpans[].spans[]`` whose ``gen_ai.operation.name`` is an inference operation
(``chat``, ``text_completion``, ``generate_content``) or that carries input messages is one call; other
spans (``execute_tool``, ``invoke_agent``, HTTP, ...) are not calls and are passed over.

Attributes follow the GenAI semantic conventions (semantic-conventions-genai, schema 1.42.0-dev; the
layout is the one of semantic-conventions v1.37+):

- ``gen_ai.system_instructions`` (parts) → a leading system message; ``gen_ai.input.messages`` (messages
  of ``parts``: ``text``, ``tool_call``, ``tool_call_response``, ``reasoning``, ``uri`` / ``blob`` images)
  → the chat-completions ``messages``; ``gen_ai.tool.definitions`` → ``tools``;
  ``gen_ai.output.messages`` → the completion.
- ``gen_ai.request.model`` (else ``gen_ai.response.model``) → ``model``; ``gen_ai.provider.name`` (older:
  ``gen_ai.system``) → the provider when promptkit knows it.
- ``gen_ai.usage.input_tokens`` (all input tokens, cached ones included, as the conventions say),
  ``gen_ai.usage.output_tokens``, ``gen_ai.usage.cache_read.input_tokens`` and
  ``gen_ai.usage.cache_creation.input_tokens`` (also spelled ``cache_write``; the older
  ``gen_ai.usage.cache_read_input_tokens`` / ``cache_creation_input_tokens`` and
  ``gen_ai.usage.prompt_tokens`` / ``completion_tokens`` are read too).
- ``gen_ai.conversation.id`` → the session; without it the trace (``trace-<traceId>``), and without a
  trace id the file name.
- The span's ``startTimeUnixNano`` → the timestamp.

The older event-based conventions (semconv ≤ 1.36: span events ``gen_ai.system.message``,
``gen_ai.user.message``, ``gen_ai.assistant.message``, ``gen_ai.tool.message`` and ``gen_ai.choice``
with a ``content`` attribute), the ``gen_ai.client.inference.operation.details`` event, and the flattened
attributes OpenLLMetry writes (``gen_ai.prompt.0.role``, ``gen_ai.prompt.0.content``,
``gen_ai.completion.0.content``...) are read when the span has no ``gen_ai.input.messages`` attribute.

>>> from promptkit.formats import read_logs
>>> r = read_logs("fixtures/otel_genai/semconv-examples.otlp.json")
>>> [(rec.session, rec.index, rec.usage.cached_tokens) for rec in r.records]
[('conv-weather', 0, None), ('conv-weather', 1, 47)]
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from promptkit.errors import RecordFormatError
from promptkit.formats.base import Item, LogFormat, Source, json_lines
from promptkit.formats.fields import chat_body, count, loads_json, optional_field, parse_timestamp
from promptkit.layout import LoadProblem, RequestRecord, Usage, type_name
from promptkit.providers.registry import provider_named

__all__ = [
    "FORMAT",
    "INFERENCE_OPERATIONS",
    "flattened_messages",
    "otlp_attributes",
    "parts_to_messages",
    "span_record",
]

#: ``gen_ai.operation.name`` values that are one model call.
INFERENCE_OPERATIONS: Final[frozenset[str]] = frozenset({"chat", "text_completion", "generate_content"})

_EVENT_ROLES: Final[Mapping[str, str]] = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


# ---------------------------------------------------------------------------------------------------
# OTLP JSON values


def _any_value(value: object, where: str) -> Any:
    """The Python value of an OTLP JSON ``AnyValue`` (``{"stringValue": ...}``, ``{"intValue": "12"}``...)."""
    if not isinstance(value, Mapping):
        raise RecordFormatError(f"{where}: expected an OTLP AnyValue object, got {type_name(value)}")
    if not value:
        return None
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        raw = value["intValue"]
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise RecordFormatError(f"{where}.intValue: expected an integer, got {raw!r}") from None
    if "doubleValue" in value:
        return value["doubleValue"]
    if "boolValue" in value:
        return value["boolValue"]
    if "arrayValue" in value:
        array = value["arrayValue"]
        values = array.get("values", []) if isinstance(array, Mapping) else None
        if not isinstance(values, list):
            raise RecordFormatError(f"{where}.arrayValue.values: expected a list")
        return [_any_value(v, f"{where}.arrayValue.values[{i}]") for i, v in enumerate(values)]
    if "kvlistValue" in value:
        kv = value["kvlistValue"]
        values = kv.get("values", []) if isinstance(kv, Mapping) else None
        if not isinstance(values, list):
            raise RecordFormatError(f"{where}.kvlistValue.values: expected a list")
        return otlp_attributes(values, f"{where}.kvlistValue.values")
    if "bytesValue" in value:
        return value["bytesValue"]
    raise RecordFormatError(f"{where}: unknown OTLP value type {sorted(value)!r}")


def otlp_attributes(attributes: object, where: str = "attributes") -> dict[str, Any]:
    """An OTLP JSON key/value list as a dict; raises :class:`~promptkit.errors.RecordFormatError` naming the
    attribute.

    >>> otlp_attributes([{"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4"}},
    ...                  {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "52"}}])
    {'gen_ai.request.model': 'gpt-4', 'gen_ai.usage.input_tokens': 52}
    """
    if attributes is None:
        return {}
    if not isinstance(attributes, list):
        raise RecordFormatError(f"{where}: expected a list of key/value pairs, got {type_name(attributes)}")
    out: dict[str, Any] = {}
    for i, kv in enumerate(attributes):
        if not isinstance(kv, Mapping) or not isinstance(kv.get("key"), str):
            raise RecordFormatError(f"{where}[{i}]: expected {{'key': string, 'value': AnyValue}}")
        out[kv["key"]] = _any_value(kv.get("value", {}), f"{where}[{i}] ({kv['key']})")
    return out


def _json_attr(attrs: Mapping[str, Any], key: str) -> Any:
    """A structured attribute: a JSON string (what the conventions ask for) or an OTLP array/kvlist."""
    value = attrs.get(key)
    if isinstance(value, str):
        try:
            return loads_json(value)
        except json.JSONDecodeError as exc:
            raise RecordFormatError(f"{key}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    return value


# ---------------------------------------------------------------------------------------------------
# messages


def _text_of(parts: list[Any], where: str, problems: list[str]) -> str:
    text: list[str] = []
    for i, part in enumerate(parts):
        if isinstance(part, Mapping) and part.get("type") == "text":
            text.append(str(part.get("content", "")))
        else:
            kind = part.get("type") if isinstance(part, Mapping) else type_name(part)
            problems.append(f"{where}[{i}]: {kind!r} part is not text; left out of the system instructions")
    return "".join(text)


def _arguments(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value if value is not None else {}, ensure_ascii=False)


def parts_to_messages(messages: object, where: str, problems: list[str]) -> list[dict[str, Any]]:
    """GenAI-convention messages (``{"role", "parts": [...]}``) as chat-completions messages.

    Text parts join into ``content`` (a list of content parts when an image is present), ``tool_call``
    parts become ``tool_calls``, each ``tool_call_response`` part a ``tool`` message, a ``reasoning`` part
    of an assistant message its ``reasoning_content``. Parts that cannot be sent as chat-completions
    content are appended to ``problems`` (the message is kept without them); a malformed message raises
    :class:`~promptkit.errors.RecordFormatError` naming it.

    >>> parts_to_messages([{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}], "m", [])
    [{'role': 'user', 'content': 'Weather in Paris?'}]
    """
    if not isinstance(messages, list):
        raise RecordFormatError(f"{where}: expected a list of messages, got {type_name(messages)}")
    out: list[dict[str, Any]] = []
    for k, message in enumerate(messages):
        w = f"{where}[{k}]"
        if not isinstance(message, Mapping):
            raise RecordFormatError(f"{w}: expected an object, got {type_name(message)}")
        role = message.get("role")
        if not isinstance(role, str):
            raise RecordFormatError(f"{w}.role: expected a string, got {type_name(role)}")
        parts = message.get("parts")
        if not isinstance(parts, list):
            raise RecordFormatError(f"{w}.parts: expected a list, got {type_name(parts)}")
        content: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        responses: list[dict[str, Any]] = []
        reasoning: list[str] = []
        for i, part in enumerate(parts):
            pw = f"{w}.parts[{i}]"
            if not isinstance(part, Mapping):
                raise RecordFormatError(f"{pw}: expected an object, got {type_name(part)}")
            kind = part.get("type")
            if kind == "text":
                content.append({"type": "text", "text": str(part.get("content", ""))})
            elif kind == "tool_call":
                name = part.get("name")
                if not isinstance(name, str):
                    raise RecordFormatError(f"{pw}.name: expected a string, got {type_name(name)}")
                call: dict[str, Any] = {"id": str(part.get("id") or ""), "type": "function"}
                call["function"] = {"name": name, "arguments": _arguments(part.get("arguments"))}
                calls.append(call)
            elif kind == "tool_call_response":
                response = part.get("response", part.get("result"))
                text = response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)
                responses.append({"role": "tool", "tool_call_id": str(part.get("id") or ""), "content": text})
            elif kind == "reasoning":
                reasoning.append(str(part.get("content", "")))
            elif kind in ("uri", "blob") and part.get("modality") == "image":
                mime = part.get("mime_type") or "image/png"
                url = part.get("uri") if kind == "uri" else f"data:{mime};base64,{part.get('content', '')}"
                content.append({"type": "image_url", "image_url": {"url": str(url)}})
            else:
                problems.append(f"{pw}: {kind!r} part cannot be sent as chat-completions content; left out")
        if responses and not content and not calls:
            out.extend(responses)
            continue
        msg: dict[str, Any] = {"role": role}
        if all(p["type"] == "text" for p in content):
            msg["content"] = "".join(p["text"] for p in content) if content or not calls else None
        else:
            msg["content"] = content
        if calls:
            msg["tool_calls"] = calls
        if reasoning and role == "assistant":
            msg["reasoning_content"] = "".join(reasoning)
        out.append(msg)
        out.extend(responses)
    return out


_FLAT: Final[re.Pattern[str]] = re.compile(r"^gen_ai\.(prompt|completion)\.(\d+)\.(.+)$")


def flattened_messages(attrs: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
    """Messages of the flattened attributes OpenLLMetry (Traceloop) writes: ``gen_ai.prompt.0.role``,
    ``gen_ai.prompt.0.content``, ``gen_ai.prompt.1.tool_calls.0.name`` ... (``kind`` is ``"prompt"`` or
    ``"completion"``), in index order.

    >>> flattened_messages({"gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "hi",
    ...                     "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "Be terse."}, "prompt")
    [{'role': 'system', 'content': 'Be terse.'}, {'role': 'user', 'content': 'hi'}]
    """
    fields: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        m = _FLAT.match(key)
        if m and m.group(1) == kind:
            fields.setdefault(int(m.group(2)), {})[m.group(3)] = value
    out: list[dict[str, Any]] = []
    for index in sorted(fields):
        f = fields[index]
        msg: dict[str, Any] = {"role": str(f.get("role", "assistant" if kind == "completion" else "user"))}
        msg["content"] = f.get("content")
        calls: dict[int, dict[str, Any]] = {}
        for key, value in f.items():
            parts = key.split(".")
            if len(parts) == 3 and parts[0] == "tool_calls" and parts[1].isdigit():
                calls.setdefault(int(parts[1]), {})[parts[2]] = value
        if calls:
            msg["tool_calls"] = [
                {
                    "id": str(c.get("id", "")),
                    "type": "function",
                    "function": {"name": str(c.get("name", "")), "arguments": _arguments(c.get("arguments"))},
                }
                for _, c in sorted(calls.items())
            ]
        if f.get("tool_call_id") is not None:
            msg["tool_call_id"] = str(f["tool_call_id"])
        out.append(msg)
    return out


def _tools(definitions: object, where: str) -> list[dict[str, Any]] | None:
    if definitions is None:
        return None
    if not isinstance(definitions, list):
        raise RecordFormatError(f"{where}: expected a list of tool definitions, got {type_name(definitions)}")
    tools: list[dict[str, Any]] = []
    for i, tool in enumerate(definitions):
        if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
            raise RecordFormatError(f"{where}[{i}]: expected an object with a string 'name'")
        if isinstance(tool.get("function"), Mapping):  # already chat-completions shaped
            tools.append(dict(tool))
            continue
        function: dict[str, Any] = {"name": tool["name"]}
        if tool.get("description") is not None:
            function["description"] = tool["description"]
        if tool.get("parameters") is not None:
            function["parameters"] = tool["parameters"]
        tools.append({"type": tool.get("type") or "function", "function": function})
    return tools or None


def _event_messages(
    events: object, where: str
) -> tuple[list[dict[str, Any]], dict[str, Any] | None, dict[str, Any]]:
    """Messages, completion and extra attributes from span events (the older event-based conventions)."""
    messages: list[dict[str, Any]] = []
    completion: dict[str, Any] | None = None
    extra: dict[str, Any] = {}
    if not isinstance(events, list):
        return messages, completion, extra
    for i, event in enumerate(events):
        if not isinstance(event, Mapping):
            continue
        name = event.get("name")
        attrs = otlp_attributes(event.get("attributes"), f"{where}[{i}].attributes")
        if name == "gen_ai.client.inference.operation.details":
            extra.update(attrs)
            continue
        if isinstance(name, str) and name in _EVENT_ROLES:
            content = attrs.get("content")
            if content is not None and not isinstance(content, str):
                content = json.dumps(content, ensure_ascii=False)
            msg: dict[str, Any] = {"role": _EVENT_ROLES[name], "content": content}
            calls = _json_attr(attrs, "tool_calls")
            if isinstance(calls, list) and calls:
                msg["tool_calls"] = [
                    {
                        "id": str(c.get("id", "")),
                        "type": "function",
                        "function": {
                            "name": str((c.get("function") or {}).get("name", "")),
                            "arguments": _arguments((c.get("function") or {}).get("arguments")),
                        },
                    }
                    for c in calls
                    if isinstance(c, Mapping)
                ]
            if attrs.get("id") is not None and msg["role"] == "tool":
                msg["tool_call_id"] = str(attrs["id"])
            messages.append(msg)
        elif name == "gen_ai.choice":
            message = _json_attr(attrs, "message")
            if isinstance(message, Mapping):
                completion = {"role": "assistant", "content": message.get("content")}
    return messages, completion, extra


# ---------------------------------------------------------------------------------------------------
# spans


def _usage(attrs: Mapping[str, Any]) -> Usage | None:
    def first(*keys: str) -> int | None:
        for key in keys:
            if attrs.get(key) is not None:
                return count(attrs[key], key)
        return None

    prompt = first("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
    completion = first("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
    cached = first("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens")
    written = first(
        "gen_ai.usage.cache_creation.input_tokens",
        "gen_ai.usage.cache_write.input_tokens",
        "gen_ai.usage.cache_creation_input_tokens",
    )
    if prompt is None and completion is None and cached is None and written is None:
        return None
    return Usage(prompt, completion, cached, written)


def _is_call(attrs: Mapping[str, Any], span: Mapping[str, Any]) -> bool:
    operation = attrs.get("gen_ai.operation.name")
    if isinstance(operation, str) and operation in INFERENCE_OPERATIONS:
        return True
    if operation is not None:
        return False
    if "gen_ai.input.messages" in attrs or any(_FLAT.match(k) for k in attrs):
        return True
    events = span.get("events")
    return isinstance(events, list) and any(
        isinstance(e, Mapping) and e.get("name") in _EVENT_ROLES for e in events
    )


def _system_messages(attrs: Mapping[str, Any], notes: list[str]) -> list[dict[str, Any]]:
    """The system message of ``gen_ai.system_instructions`` (none without it); raises
    :class:`RecordFormatError` for instructions that are not parts."""
    instructions = _json_attr(attrs, "gen_ai.system_instructions")
    if instructions is None:
        return []
    if isinstance(instructions, str):
        return [{"role": "system", "content": instructions}]
    if isinstance(instructions, list):
        return [{"role": "system", "content": _text_of(instructions, "gen_ai.system_instructions", notes)}]
    raise RecordFormatError(
        f"gen_ai.system_instructions: expected a list of parts, got {type_name(instructions)}"
    )


def _request(
    attrs: Mapping[str, Any], events: list[dict[str, Any]], notes: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None] | None:
    """The messages (system instructions, then the input messages, else the older events or flattened
    attributes) and tools of a call span; None when it holds no input messages at all. Raises
    :class:`RecordFormatError` naming the attribute."""
    messages = _system_messages(attrs, notes)
    raw_input = _json_attr(attrs, "gen_ai.input.messages")
    if raw_input is not None:
        messages.extend(parts_to_messages(raw_input, "gen_ai.input.messages", notes))
    elif events:
        messages.extend(events)
    elif any(_FLAT.match(k) for k in attrs):
        messages.extend(flattened_messages(attrs, "prompt"))
    else:
        return None
    if not messages:
        raise RecordFormatError("gen_ai.input.messages: no messages")
    return messages, _tools(_json_attr(attrs, "gen_ai.tool.definitions"), "gen_ai.tool.definitions")


def _completion(
    attrs: Mapping[str, Any],
    event_completion: dict[str, Any] | None,
    notes: list[str],
    report: Callable[[str], None],
) -> dict[str, Any] | None:
    """The call's answer: ``gen_ai.output.messages``, else the older ``gen_ai.choice`` event or flattened
    attributes (kept when the output messages cannot be read, with a problem)."""
    completion = event_completion
    if completion is None:
        flat = flattened_messages(attrs, "completion")
        completion = flat[0] if flat else None
    try:
        raw_output = _json_attr(attrs, "gen_ai.output.messages")
        if raw_output is not None:
            out = parts_to_messages(raw_output, "gen_ai.output.messages", notes)
            completion = out[0] if out else None
    except RecordFormatError as exc:
        report(f"{exc}; the call is kept without a completion")
    return completion


def _start(span: Mapping[str, Any], where: str, report: Callable[[str], None]) -> float | None:
    """The span's ``startTimeUnixNano`` in seconds (None when unset, or with a problem when not a time)."""
    try:
        raw_start = span.get("startTimeUnixNano")
        if raw_start not in (None, "", "0", 0):
            return parse_timestamp(int(str(raw_start)) / 1e9, f"{where}.startTimeUnixNano")
    except (RecordFormatError, ValueError):
        report(
            f"{where}.startTimeUnixNano: not a time in nanoseconds ({span.get('startTimeUnixNano')!r}); kept without a timestamp"
        )
    return None


def _session(attrs: Mapping[str, Any], span: Mapping[str, Any], default_session: str) -> str:
    """``gen_ai.conversation.id``, else the trace (``trace-<traceId>``), else ``default_session``."""
    conversation = attrs.get("gen_ai.conversation.id")
    trace = span.get("traceId")
    if isinstance(conversation, str) and conversation:
        return conversation
    if isinstance(trace, str) and trace:
        return f"trace-{trace}"
    return default_session


def _provider_and_meta(
    attrs: Mapping[str, Any], span: Mapping[str, Any]
) -> tuple[str | None, dict[str, Any]]:
    system = attrs.get("gen_ai.provider.name") or attrs.get("gen_ai.system")
    provider = provider_named(system) if isinstance(system, str) else None  # the profiles' aliases
    meta: dict[str, Any] = {}
    if isinstance(system, str):
        meta["gen_ai_provider"] = system
    if isinstance(span.get("spanId"), str):
        meta["span_id"] = span["spanId"]
    return provider, meta


def span_record(
    span: Mapping[str, Any],
    resource: Mapping[str, Any],
    *,
    file: str,
    line: int | None,
    default_session: str,
    where: str,
    problems: list[LoadProblem],
) -> RequestRecord | None:
    """One GenAI client span as a record (None for a span that is not a model call, or one that cannot
    be used: then a :class:`~promptkit.layout.LoadProblem` naming ``where`` and the attribute is added)."""
    attrs = {**resource, **otlp_attributes(span.get("attributes"), f"{where}.attributes")}
    if not _is_call(attrs, span):
        return None
    label = f"{where} (span {span.get('name')!r})"
    notes: list[str] = []

    def report(reason: str) -> None:
        problems.append(LoadProblem(file, line, f"{label}: {reason}"))

    events, event_completion, detail_attrs = _event_messages(span.get("events"), f"{where}.events")
    attrs = {**detail_attrs, **attrs} if detail_attrs else attrs
    try:
        request = _request(attrs, events, notes)
    except RecordFormatError as exc:
        report(str(exc))
        return None
    if request is None:
        report(
            "no gen_ai.input.messages (message content capture is off in the instrumentation?); "
            "the call cannot be analyzed"
        )
        return None
    messages, tools = request
    body = chat_body(attrs.get("gen_ai.request.model") or attrs.get("gen_ai.response.model"), messages, tools)
    completion = _completion(attrs, event_completion, notes, report)
    usage = optional_field(report, "the call is kept without usage", _usage, attrs)
    timestamp = _start(span, where, report)
    for note in notes:
        report(note)
    provider, meta = _provider_and_meta(attrs, span)
    return RequestRecord(
        body,
        _session(attrs, span, default_session),
        timestamp=timestamp,
        completion=completion,
        usage=usage,
        file=file,
        line=line,
        provider=provider,
        meta=meta,
    )


def _export_items(
    export: object, *, file: str, line: int | None, default_session: str, prefix: str
) -> Iterator[Item]:
    if not isinstance(export, Mapping):
        yield LoadProblem(
            file, line, f"{prefix or 'export'}: expected an OTLP export object, got {type_name(export)}"
        )
        return
    resource_spans = export.get("resourceSpans")
    if not isinstance(resource_spans, list):
        yield LoadProblem(
            file, line, f"{prefix}resourceSpans: expected a list, got {type_name(resource_spans)}"
        )
        return
    for r, rs in enumerate(resource_spans):
        rw = f"{prefix}resourceSpans[{r}]"
        if not isinstance(rs, Mapping):
            yield LoadProblem(file, line, f"{rw}: expected an object, got {type_name(rs)}")
            continue
        resource_obj = rs.get("resource")
        try:
            resource = otlp_attributes(
                resource_obj.get("attributes") if isinstance(resource_obj, Mapping) else None,
                f"{rw}.resource.attributes",
            )
        except RecordFormatError as exc:
            yield LoadProblem(file, line, str(exc))
            resource = {}
        # only the GenAI attributes of a resource apply to its spans
        resource = {k: v for k, v in resource.items() if k.startswith("gen_ai.")}
        scope_spans = rs.get("scopeSpans", rs.get("instrumentationLibrarySpans", []))
        if not isinstance(scope_spans, list):
            yield LoadProblem(file, line, f"{rw}.scopeSpans: expected a list, got {type_name(scope_spans)}")
            continue
        for s, ss in enumerate(scope_spans):
            sw = f"{rw}.scopeSpans[{s}]"
            spans = ss.get("spans") if isinstance(ss, Mapping) else None
            if not isinstance(spans, list):
                yield LoadProblem(file, line, f"{sw}.spans: expected a list, got {type_name(spans)}")
                continue
            for k, span in enumerate(spans):
                w = f"{sw}.spans[{k}]"
                if not isinstance(span, Mapping):
                    yield LoadProblem(file, line, f"{w}: expected an object, got {type_name(span)}")
                    continue
                problems: list[LoadProblem] = []
                try:
                    record = span_record(
                        span,
                        resource,
                        file=file,
                        line=line,
                        default_session=default_session,
                        where=w,
                        problems=problems,
                    )
                except RecordFormatError as exc:
                    problems.append(LoadProblem(file, line, f"{w}: {exc}"))
                    record = None
                yield from problems
                if record is not None:
                    yield record


def sniff(source: Source) -> bool:
    """A JSON document or JSON Lines whose first object holds ``resourceSpans``."""
    head = source.head.lstrip()
    return head.startswith("{") and '"resourceSpans"' in head[:4096]


def read(source: Source) -> Iterator[Item]:
    """The GenAI calls of an OTLP JSON file (one document) or OTLP JSON Lines file (one export a line)."""
    first = next((ln for ln in source.head.split("\n") if ln.strip()), "")
    try:
        loads_json(first)
        lines_mode = True
    except json.JSONDecodeError:
        lines_mode = False
    if not lines_mode:
        try:
            data = loads_json(source.text())
        except json.JSONDecodeError as exc:
            yield LoadProblem(source.file, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})")
            return
        yield from _export_items(data, file=source.file, line=None, default_session=source.stem, prefix="")
        return
    for item in json_lines(source):
        if isinstance(item, LoadProblem):
            yield item
            continue
        lineno, export = item
        yield from _export_items(
            export, file=source.file, line=lineno, default_session=source.stem, prefix=""
        )


FORMAT = LogFormat(
    name="otel-genai",
    description="OpenTelemetry GenAI spans as OTLP JSON (one document, or JSON Lines as the collector's file exporter writes)",
    sniff=sniff,
    read=read,
    priority=20,
)
