"""One HTTP exchange with an LLM API as promptkit's JSONL log record (:func:`exchange_record`), written
by the live capture wrapper (:mod:`promptkit.capture`) and the recording proxy (:mod:`promptkit.proxy`).

>>> completion_of({"choices": [{"message": {"role": "assistant", "content": "ok"}}]})
{'role': 'assistant', 'content': 'ok'}
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from promptkit.errors import HttpCaptureError
from promptkit.formats.fields import loads_json
from promptkit.formats.wire.redact import redact_url
from promptkit.formats.wire.responses import responses_request_to_chat, responses_response_to_chat
from promptkit.formats.wire.sse import is_event_stream
from promptkit.formats.wire.streams import reassemble_stream
from promptkit.formats.wire.urls import ApiKind, api_from_url, provider_from_url
from promptkit.layout import type_name as _type_name

__all__ = ["completion_of", "exchange_record"]


def _json_body(raw: bytes | str | Mapping[str, Any] | list[Any], where: str) -> Any:
    if isinstance(raw, Mapping | list):
        return raw
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    if not isinstance(text, str):  # a JSON scalar where a body belongs
        raise HttpCaptureError(f"{where}: expected a JSON object or its text, got {_type_name(text)}")
    try:
        return loads_json(text)
    except json.JSONDecodeError as exc:
        raise HttpCaptureError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None


def exchange_record(
    *,
    url: str,
    request_body: bytes | str | Mapping[str, Any],
    status: int | None,
    response_body: bytes | str | Mapping[str, Any] | None,
    content_type: str | None = None,
    method: str = "POST",
    started: float | None = None,
    duration: float | None = None,
    session: str | None = None,
    error: Mapping[str, Any] | None = None,
    layout: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """promptkit's JSONL log record of one HTTP call to an LLM API (decoded bodies, any content encoding
    already undone by :func:`decode_body`).

    The record is ``{"request", "response", "session", "timestamp", "duration", "http", "error",
    "original", "layout"}`` (keys without a value are left out):

    - ``request``: the request body (a Responses API body converted by :func:`responses_request_to_chat`);
    - ``response``: the whole response body of a successful call (a stream reassembled by
      :func:`reassemble_stream`, a Responses body converted by :func:`responses_response_to_chat`);
    - ``http``: ``method``, ``url`` (credential query values redacted), ``status``, ``api``,
      ``provider`` (from the host, when known) and ``stream``;
    - ``error``: why the call failed: ``{"kind": "http-status", "status", "body"}`` for a 4xx/5xx
      answer, ``stream-dropped`` (with the ``partial_response``) for a stream cut off before its final
      event, ``stream-error`` for an ``error`` event, ``undecodable`` for a body that is not JSON, or the
      ``error`` given (``timeout``, ``connection``); a failed call has no ``response``;
    - ``original``: the Responses API's own ``request`` and ``response`` bodies.

    Raises :class:`HttpCaptureError` when the URL is not one of the APIs or the request is not JSON.

    >>> rec = exchange_record(url="https://api.deepseek.com/chat/completions",
    ...     request_body=b'{"model": "deepseek-chat", "messages": [{"role": "user", "content": "hi"}]}',
    ...     status=200, content_type="application/json",
    ...     response_body=b'{"choices": [{"message": {"role": "assistant", "content": "hello"}}]}',
    ...     started=1775786368.25, duration=0.8, session="s1")
    >>> rec["http"], rec["response"]["choices"][0]["message"]["content"]
    ({'method': 'POST', 'url': 'https://api.deepseek.com/chat/completions', 'status': 200, 'api': 'openai-chat', 'provider': 'deepseek', 'stream': False}, 'hello')
    """
    api = api_from_url(url)
    if api is None:
        raise HttpCaptureError(
            f"request.url: {redact_url(url)!r} is not an LLM API endpoint promptkit records"
        )
    body = _json_body(request_body, "request.body")
    if not isinstance(body, Mapping):
        raise HttpCaptureError(f"request.body: expected a JSON object, got {_type_name(body)}")
    record: dict[str, Any] = {}
    original: dict[str, Any] = {}
    if api == "openai-responses":
        original["request"] = body
        record["request"] = responses_request_to_chat(body)
    else:
        record["request"] = body
    stream = is_event_stream(content_type)
    response, failure = _response(api, response_body, stream, status, error)
    if failure is None and isinstance(response, Mapping):
        if api == "openai-responses":
            original["response"] = response
            record["response"] = responses_response_to_chat(response)
        else:
            record["response"] = response
    if session is not None:
        record["session"] = session
    if started is not None:
        record["timestamp"] = round(started, 6)
    if duration is not None:
        record["duration"] = round(duration, 6)
    record["http"] = _http(method, url, status, api, stream)
    if failure is not None:
        record["error"] = failure
    if original:
        record["original"] = original
    if layout is not None:
        record["layout"] = [dict(entry) for entry in layout]
    return record


def _response(
    api: ApiKind,
    response_body: bytes | str | Mapping[str, Any] | None,
    stream: bool,
    status: int | None,
    error: Mapping[str, Any] | None,
) -> tuple[Any, dict[str, Any] | None]:
    """The decoded response body of a call (None when there is none or it cannot be decoded) and why the
    call failed (``error``, a stream's failure, a body that is not JSON, a 4xx/5xx status; None when it
    did not), with what came of the response as its ``partial_response``."""
    failure: dict[str, Any] | None = dict(error) if error is not None else None
    response: Any = None
    if response_body is not None:
        try:
            if stream:
                response, failure = _stream_response(api, response_body, status, failure)
            else:
                response = _json_body(response_body, "response.body")
        except HttpCaptureError as exc:
            raw = (
                response_body.decode("utf-8", "replace")
                if isinstance(response_body, bytes | bytearray)
                else response_body
            )
            response = None
            if failure is None:
                failure = {"kind": "undecodable", "message": str(exc), "body": raw}
    if failure is None and status is not None and status >= 400:
        failure = {"kind": "http-status", "status": status, "body": response}
    elif failure is not None and response is not None and failure.get("kind") != "http-status":
        failure["partial_response"] = response
    return response, failure


def _stream_response(
    api: ApiKind,
    response_body: bytes | str | Mapping[str, Any],
    status: int | None,
    failure: dict[str, Any] | None,
) -> tuple[Any, dict[str, Any] | None]:
    """A streamed response reassembled, and the failure (``failure`` when given, else an ``error`` event
    or a stream cut off before its final event); raises :class:`HttpCaptureError` for a stream that
    cannot be read."""
    text = response_body.decode("utf-8", "replace") if isinstance(response_body, bytes) else response_body
    if not isinstance(text, str):
        raise HttpCaptureError("response.body: a stream must be text")
    result = reassemble_stream(api, text)
    if failure is None and result.error is not None:
        failure = {"kind": "stream-error", "body": result.error}
    elif failure is None and not result.complete and (status is None or status < 400):
        failure = {"kind": "stream-dropped", "message": "the stream ended before its final event"}
    return result.body, failure


def _http(method: str, url: str, status: int | None, api: ApiKind, stream: bool) -> dict[str, Any]:
    """The record's ``http``: method, redacted URL, status, API, provider (when known) and ``stream``."""
    http: dict[str, Any] = {"method": method, "url": redact_url(url), "status": status, "api": api}
    provider = provider_from_url(url)
    if provider is not None:
        http["provider"] = provider
    http["stream"] = stream
    return http


def completion_of(response: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The assistant message of a whole response body (chat-completions: the first choice's message;
    Anthropic: text blocks joined, ``tool_use`` blocks as ``tool_calls``); None when it has none.

    >>> completion_of({"content": [{"type": "text", "text": "Hi"}], "role": "assistant"})
    {'role': 'assistant', 'content': 'Hi'}
    """
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        message = choices[0].get("message")
        return dict(message) if isinstance(message, Mapping) else None
    content = response.get("content")
    if isinstance(content, list):  # Anthropic
        text = "".join(
            str(b.get("text", "")) for b in content if isinstance(b, Mapping) and b.get("type") == "text"
        )
        calls = [
            {"id": str(b.get("id", "")), "type": "function",
             "function": {"name": str(b.get("name", "")), "arguments": json.dumps(b.get("input", {}), ensure_ascii=False)}}
            for b in content
            if isinstance(b, Mapping) and b.get("type") == "tool_use"
        ]  # fmt: skip
        out: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            out["tool_calls"] = calls
        return out
    return None
