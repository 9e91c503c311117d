"""LiteLLM ``StandardLoggingPayload`` logs: one payload per JSON line (or a ``.json`` file holding one
payload or a list of them, as the bucket loggers write).

LiteLLM hands every logging callback ``kwargs["standard_logging_object"]``; a custom callback or a bucket
logger writes it as JSON. Each payload with ``status: "success"`` is one provider call:

- the request is ``{"model": model, "messages": messages}`` plus the ``tools`` of ``model_parameters``;
- the completion is ``response.choices[0].message``;
- the usage is the provider's, as LiteLLM passes it on: ``response.usage``, else
  ``metadata.usage_object`` / ``hidden_params.usage_object``, else the top-level ``prompt_tokens`` /
  ``completion_tokens`` (no cache counts then). LiteLLM's ``prompt_tokens`` already holds the cached
  tokens; ``prompt_tokens_details.cached_tokens`` (or ``cache_read_input_tokens``) are the cache reads,
  ``cache_creation_input_tokens`` the writes;
- the provider is ``custom_llm_provider`` when promptkit knows it (else recognised from the model and
  ``api_base``, the URL), the timestamp is ``startTime``.

**Sessions.** A payload's ``trace_id`` (set from ``litellm_trace_id`` / ``litellm_session_id``) groups the
calls of one conversation; a session id in ``metadata.requester_metadata``, ``metadata.spend_logs_metadata``
or ``metadata`` itself (``session_id``) wins over it. LiteLLM fills ``trace_id`` with a fresh UUID per
call when the caller set none: a trace id seen only once in a file is such a default, and those calls go
to one session named after the file (in time order) instead of one session each.

**LiteLLM's own cache is not the provider's prefix cache.** ``cache_hit: true`` means LiteLLM answered
from its *response* cache: the request never reached the provider. Such a payload is reported as a
problem ("LiteLLM response-cache hit ... not a provider call") and not analyzed. Failed calls
(``status: "failure"``) are reported the same way.

>>> from promptkit.formats import read_logs
>>> r = read_logs("fixtures/litellm/standard_logging_payload.jsonl")
>>> len(r.records), r.records[1].usage.cached_tokens, sum("response-cache hit" in p.reason for p in r.problems)
(3, 1920, 1)
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any, Final

from promptkit.errors import RecordFormatError
from promptkit.formats.base import Item, LogFormat, Source, json_lines, reporter
from promptkit.formats.fields import (
    check_request,
    clean_message,
    completion_of,
    count,
    loads_json,
    optional_field,
    parse_timestamp,
)
from promptkit.layout import LoadProblem, RequestRecord, Usage, type_name
from promptkit.providers.registry import normalize_usage, provider_named
from promptkit.providers.usage import check_usage

__all__ = ["FORMAT", "litellm_usage", "payload_record"]

_SESSION_KEYS: Final[tuple[str, ...]] = ("session_id", "litellm_session_id")


def litellm_usage(usage: Mapping[str, Any], where: str = "usage") -> Usage:
    """LiteLLM's ``Usage`` object, normalized. LiteLLM reshapes every provider's usage to the OpenAI
    shape (``prompt_tokens`` counts every input token) and keeps Anthropic's ``cache_read_input_tokens`` /
    ``cache_creation_input_tokens`` beside it; DeepSeek's ``prompt_cache_hit_tokens`` pass through.

    >>> litellm_usage({"prompt_tokens": 2059, "completion_tokens": 12, "cache_read_input_tokens": 1920,
    ...                "cache_creation_input_tokens": 0, "prompt_tokens_details": {"cached_tokens": 1920}})
    Usage(prompt_tokens=2059, completion_tokens=12, cached_tokens=1920, cache_write_tokens=0, cache_write_1h_tokens=None)
    """
    if not isinstance(usage, Mapping):
        raise RecordFormatError(f"{where}: expected an object, got {type_name(usage)}")
    anthropic_keys = ("cache_read_input_tokens", "cache_creation_input_tokens")
    if "prompt_tokens" not in usage or not any(k in usage for k in anthropic_keys):
        return normalize_usage(usage, where)
    openai_shape = {k: v for k, v in usage.items() if k not in anthropic_keys}
    base = normalize_usage(openai_shape, where)
    read = count(usage.get("cache_read_input_tokens"), f"{where}.cache_read_input_tokens")
    written = count(usage.get("cache_creation_input_tokens"), f"{where}.cache_creation_input_tokens")
    hour = None
    details = usage.get("cache_creation_token_details")
    if isinstance(details, Mapping):
        hour = count(
            details.get("ephemeral_1h_input_tokens"),
            f"{where}.cache_creation_token_details.ephemeral_1h_input_tokens",
        )
    cached = base.cached_tokens if base.cached_tokens is not None else read
    return check_usage(
        Usage(base.prompt_tokens, base.completion_tokens, cached, written, hour),
        where,
        cached_field="cache_read_input_tokens",
    )


def _session_hint(payload: Mapping[str, Any]) -> str | None:
    metadata = payload.get("metadata")
    if not isinstance(metadata, Mapping):
        return None
    for holder in (metadata.get("requester_metadata"), metadata.get("spend_logs_metadata"), metadata):
        if isinstance(holder, Mapping):
            for key in _SESSION_KEYS:
                value = holder.get(key)
                if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
                    return str(value)
    return None


def _trace(payload: object) -> str | None:
    if not isinstance(payload, Mapping):
        return None
    trace = payload.get("trace_id")
    return trace if isinstance(trace, str) and trace else None


def _raw_usage(payload: Mapping[str, Any], response: object) -> tuple[Any, str]:
    if isinstance(response, Mapping) and response.get("usage") is not None:
        return response["usage"], "response.usage"
    for holder_name in ("metadata", "hidden_params"):
        holder = payload.get(holder_name)
        if isinstance(holder, Mapping) and holder.get("usage_object") is not None:
            return holder["usage_object"], f"{holder_name}.usage_object"
    if payload.get("prompt_tokens") is not None or payload.get("completion_tokens") is not None:
        return {
            "prompt_tokens": payload.get("prompt_tokens"),
            "completion_tokens": payload.get("completion_tokens"),
        }, "prompt_tokens"
    return None, ""


def _not_a_call(payload: Mapping[str, Any]) -> str | None:
    """Why a payload is no provider call to analyze (a LiteLLM response-cache hit, a failed call); None
    for one that is."""
    if payload.get("cache_hit") is True:
        return (
            "cache_hit: LiteLLM response-cache hit (served from LiteLLM's own cache, never sent to "
            "the provider); not a provider call, not analyzed"
        )
    if payload.get("status") == "failure":
        error = payload.get("error_str")
        return f"status: failed call ({error or 'no error_str'}); no response, not analyzed"
    return None


def _request(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The request body of a payload: its model, messages and the tools of its ``model_parameters``;
    raises :class:`RecordFormatError` naming the field that is missing or malformed."""
    model = payload.get("model")
    if not isinstance(model, str) or not model:
        raise RecordFormatError(f"model: expected a non-empty string, got {type_name(model)}")
    messages = payload.get("messages")
    if isinstance(messages, str):
        try:
            messages = loads_json(messages)
        except json.JSONDecodeError:
            messages = [{"role": "user", "content": messages}]  # a text completion's prompt
    if messages is None:
        raise RecordFormatError(
            "messages: missing (message logging turned off?); the call cannot be analyzed"
        )
    if not isinstance(messages, list):
        raise RecordFormatError(f"messages: expected a list, got {type_name(messages)}")
    cleaned = [clean_message(m, f"messages[{i}]") for i, m in enumerate(messages)]
    body: dict[str, Any] = {"model": model, "messages": cleaned}
    params = payload.get("model_parameters")
    if isinstance(params, Mapping) and params.get("tools") is not None:
        body["tools"] = params["tools"]
    check_request(body, "request")
    return body


def _response(payload: Mapping[str, Any]) -> Any:
    """The payload's ``response`` (a JSON string parsed; other text as the answer's content)."""
    response: Any = payload.get("response")
    if isinstance(response, str):
        try:
            response = loads_json(response)
        except json.JSONDecodeError:
            response = {"choices": [{"message": {"role": "assistant", "content": response}}]}
    return response


def _provider_and_meta(payload: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    custom = payload.get("custom_llm_provider")
    provider = provider_named(custom) if isinstance(custom, str) else None  # the profiles' aliases
    meta: dict[str, Any] = {}
    if isinstance(custom, str):
        meta["custom_llm_provider"] = custom
    call_id = payload.get("id")
    if isinstance(call_id, str):
        meta["litellm_id"] = call_id
    return provider, meta


def payload_record(
    payload: object,
    *,
    file: str,
    line: int | None,
    session: str,
    problems: list[LoadProblem],
) -> RequestRecord | None:
    """One ``StandardLoggingPayload`` as a record in ``session``; None (with a problem saying why) for a
    response-cache hit, a failed call, or a payload missing its messages."""
    report = reporter(problems, file, line)
    if not isinstance(payload, Mapping):
        report(f"expected a StandardLoggingPayload object, got {type_name(payload)}")
        return None
    call_id = payload.get("id")
    label = f"call {call_id!r}: " if isinstance(call_id, str) else ""

    def labelled(reason: str) -> None:
        report(f"{label}{reason}")

    why_not = _not_a_call(payload)
    if why_not is not None:
        labelled(why_not)
        return None
    try:
        body = _request(payload)
    except RecordFormatError as exc:
        labelled(str(exc))
        return None
    response = _response(payload)
    completion = None
    if isinstance(response, Mapping):
        completion = optional_field(
            labelled, "the call is kept without a completion", completion_of, response, "response"
        )
    usage = None
    raw, where = _raw_usage(payload, response)
    if raw is not None:
        usage = optional_field(labelled, "the call is kept without usage", litellm_usage, raw, where)
    timestamp = optional_field(
        labelled,
        "the call is kept without a timestamp",
        parse_timestamp,
        payload.get("startTime"),
        "startTime",
    )
    provider, meta = _provider_and_meta(payload)
    api_base = payload.get("api_base")
    return RequestRecord(
        body,
        session,
        timestamp=timestamp,
        completion=completion,
        usage=usage,
        file=file,
        line=line,
        provider=provider,
        url=api_base if isinstance(api_base, str) and api_base else None,
        meta=meta,
    )


def _payloads(source: Source) -> Iterator[tuple[int | None, object] | LoadProblem]:
    if source.name.endswith(".json"):
        try:
            data = loads_json(source.text())
        except json.JSONDecodeError as exc:
            yield LoadProblem(source.file, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})")
            return
        for item in data if isinstance(data, list) else [data]:
            yield None, item
        return
    yield from json_lines(source)


def _looks_like_payload(obj: object) -> bool:
    return (
        isinstance(obj, Mapping)
        and "call_type" in obj
        and (
            "standard_built_in_tools_params" in obj
            or "model_parameters" in obj
            or "hidden_params" in obj
            or "startTime" in obj
        )
    )


def sniff(source: Source) -> bool:
    """JSON whose first object is a ``StandardLoggingPayload`` (``call_type`` with ``model_parameters``,
    ``hidden_params`` or ``startTime``)."""
    head = source.head.lstrip()
    if not head.startswith(("{", "[")) or '"call_type"' not in head:
        return False
    first = head.split("\n", 1)[0]
    try:
        obj = loads_json(first)
    except json.JSONDecodeError:
        return '"startTime"' in head or '"model_parameters"' in head
    if isinstance(obj, list):
        obj = obj[0] if obj else None
    return _looks_like_payload(obj)


def read(source: Source) -> Iterator[Item]:
    """The provider calls of a LiteLLM ``StandardLoggingPayload`` log (two passes: the first counts each
    ``trace_id``, see the module notes on sessions)."""
    traces: Counter[str] = Counter()
    for item in _payloads(source):
        if not isinstance(item, LoadProblem):
            trace = _trace(item[1])
            if trace is not None:
                traces[trace] += 1
    for item in _payloads(source):
        if isinstance(item, LoadProblem):
            yield item
            continue
        line, payload = item
        session = _session_hint(payload) if isinstance(payload, Mapping) else None
        if session is None:
            trace = _trace(payload)
            session = trace if trace is not None and traces[trace] > 1 else source.stem
        problems: list[LoadProblem] = []
        record = payload_record(payload, file=source.file, line=line, session=session, problems=problems)
        yield from problems
        if record is not None:
            yield record


FORMAT = LogFormat(
    name="litellm",
    description="LiteLLM StandardLoggingPayload JSON Lines (the standard_logging_object of each call)",
    sniff=sniff,
    read=read,
    priority=15,
)
