"""The capture reader: raw HTTP captures of LLM API calls, read as request records.

It reads two shapes that capturing tools write:

- **JSONL request/response pairs**, one exchange per line, as ``claude-trace`` writes them
  (``{"request": {"timestamp", "method", "url", "headers", "body"}, "response": {"timestamp",
  "status_code", "headers", "body" | "body_raw"}, "logged_at"}``); ``status`` is accepted for
  ``status_code`` and a body may be a JSON value or its text.
- **HAR 1.2** (``{"log": {"entries": [{"startedDateTime", "time", "request": {"method", "url", "headers",
  "postData": {"text"}}, "response": {"status", "headers", "content": {"text", "encoding"}}}]}}``), as
  browsers, mitmproxy, Charles and Proxyman export it.

Three APIs are understood, told apart by the request path
(:func:`~promptkit.formats.wire.urls.api_from_url`): ``anthropic-messages`` (``POST .../v1/messages``),
``openai-chat`` (``POST .../chat/completions``, every OpenAI-compatible provider) and
``openai-responses`` (``POST .../responses``, converted to the chat-completions shape). Streamed answers
are reassembled. What the calls look like on the wire (SSE, stream reassembly, the Responses
conversion, redaction, URLs) lives in :mod:`promptkit.formats.wire`; its public names are importable
from here too, as before.

Example::

    >>> sse = ('data: {"id":"c1","model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}\\n\\n'
    ...        'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}\\n\\n'
    ...        'data: [DONE]\\n\\n')
    >>> reassemble_stream("openai-chat", sse).body["choices"][0]["message"]["content"]
    'Hello'
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import attrs

from promptkit.errors import HttpCaptureError, RecordFormatError
from promptkit.formats.base import LogFormat, Source
from promptkit.formats.fields import loads_json, parse_timestamp
from promptkit.formats.wire import (
    API_KINDS,
    REDACTED,
    SECRET_PATTERNS,
    SENSITIVE_HEADERS,
    SESSION_HEADER,
    ApiKind,
    SSEEvent,
    StreamResult,
    api_from_url,
    completion_of,
    decode_body,
    exchange_record,
    header_value as _header,
    is_event_stream,
    parse_sse,
    provider_from_url,
    reassemble_stream,
    redact,
    redact_url,
    responses_request_to_chat,
    responses_response_to_chat,
    session_hint,
)
from promptkit.layout import LoadProblem, RequestRecord, type_name as _type_name
from promptkit.providers.registry import normalize_usage

__all__ = [
    "API_KINDS",
    "NAME",
    "REDACTED",
    "SECRET_PATTERNS",
    "SENSITIVE_HEADERS",
    "SESSION_HEADER",
    "ApiKind",
    "HttpCaptureError",
    "SSEEvent",
    "StreamResult",
    "api_from_url",
    "completion_of",
    "decode_body",
    "exchange_record",
    "is_event_stream",
    "parse_sse",
    "provider_from_url",
    "read",
    "reassemble_stream",
    "redact",
    "redact_url",
    "responses_request_to_chat",
    "responses_response_to_chat",
    "session_hint",
    "sniff",
]

#: The format's name in the log-format registry.
NAME: Final[str] = "http-capture"


_PAIR_HINT: Final[re.Pattern[str]] = re.compile(r'^\s*\{\s*"request"\s*:\s*\{[^{}]*"(?:method|url)"\s*:')
_HAR_HINT: Final[re.Pattern[str]] = re.compile(r'^\s*\{\s*"log"\s*:\s*\{')


def sniff(path: Path, head: str) -> bool:
    """Whether ``head`` (the start of the decompressed file) is a capture this module reads: a HAR
    document, or JSONL whose first record is ``{"request": {"method", "url", ...}, "response": ...}``.

    >>> sniff(Path("x.jsonl"), '{"request": {"timestamp": 1, "method": "POST", "url": "https://a/v1/messages"}}')
    True
    >>> sniff(Path("x.jsonl"), '{"request": {"model": "m", "messages": []}}')
    False
    """
    text = head.lstrip("\ufeff")
    if _HAR_HINT.match(text):
        if '"entries"' in text or len(text) >= 60000:
            return True
        try:  # the whole file is in the head: a HAR cut off before its entries is still a HAR (truncated)
            loads_json(text)
        except json.JSONDecodeError:
            return True
        return False
    first = next((line for line in text.split("\n") if line.strip()), "")
    try:
        obj = loads_json(first)
    except json.JSONDecodeError:
        return bool(_PAIR_HINT.match(first))
    request = obj.get("request") if isinstance(obj, Mapping) else None
    return isinstance(request, Mapping) and "url" in request and "method" in request


def _headers_of(value: object) -> list[tuple[str, str]]:
    if isinstance(value, Mapping):
        return [(str(k), str(v[0] if isinstance(v, list) and v else v)) for k, v in value.items()]
    if isinstance(value, list):  # HAR: [{"name", "value"}]
        return [(str(h.get("name")), str(h.get("value"))) for h in value if isinstance(h, Mapping)]
    return []


def _timestamp(value: object, where: str) -> tuple[float | None, str | None]:
    """The time of an exchange, and why it has none when its field cannot be read (the record is kept
    without it, and the reader says so: never a time dropped in silence)."""
    if value is None:
        return None, None
    if isinstance(value, int | float) and not isinstance(value, bool) and 1e11 < value < 1e14:
        value = float(value) / 1000.0  # milliseconds (JavaScript's Date.now())
    try:
        return parse_timestamp(value, where), None
    except RecordFormatError as exc:
        return None, f"{exc}; the record is kept without its time"


@attrs.frozen(slots=True)
class _Exchange:
    method: str
    url: str
    headers: list[tuple[str, str]]
    request_body: Any
    status: int | None
    content_type: str | None
    response_body: Any
    started: float | None
    time_problem: str | None = None


def _record_of(
    ex: _Exchange, file: str, line: int | None, default_session: str
) -> RequestRecord | LoadProblem:
    def problem(reason: str) -> LoadProblem:
        return LoadProblem(file, line, reason)

    if ex.method.upper() != "POST" or api_from_url(ex.url) is None:
        return problem(f"request: {ex.method} {redact_url(ex.url)} is not an LLM API call; skipped")
    if ex.request_body is None or ex.request_body == "":
        return problem("request.body: missing")
    try:
        record = exchange_record(
            url=ex.url, method=ex.method, request_body=ex.request_body, status=ex.status,
            response_body=ex.response_body, content_type=ex.content_type, started=ex.started,
        )  # fmt: skip
    except HttpCaptureError as exc:
        return problem(str(exc))
    request = record["request"]
    messages = request.get("messages")
    if not isinstance(messages, list):
        return problem("request.body: missing 'messages'")
    for k, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            return problem(f"request.body.messages[{k}].role: expected a string")
    failure = record.get("error")
    if failure is not None:
        detail = failure.get("status") or failure.get("message") or ""
        return problem(f"response: the call failed ({failure['kind']} {detail}); skipped".replace(" )", ")"))
    response = record.get("response")
    usage = None
    if isinstance(response, Mapping) and response.get("usage") is not None:
        try:
            usage = normalize_usage(response["usage"], "response.body.usage")
        except RecordFormatError as exc:
            return problem(str(exc))
    if response is None and ex.status is None:
        return problem("response: missing (the capture has no answer for this request)")
    session = session_hint(ex.headers, request) or default_session
    return RequestRecord(
        request=request,
        session=session,
        index=0,
        timestamp=record.get("timestamp"),
        completion=completion_of(response) if isinstance(response, Mapping) else None,
        usage=usage,
        file=file,
        line=line,
    )


def _pair_exchange(obj: object) -> _Exchange:
    if not isinstance(obj, Mapping):
        raise HttpCaptureError(f"expected a JSON object, got {_type_name(obj)}")
    request = obj.get("request")
    if not isinstance(request, Mapping):
        raise HttpCaptureError(f"request: expected an object, got {_type_name(request)}")
    for key in ("method", "url"):
        if not isinstance(request.get(key), str):
            raise HttpCaptureError(f"request.{key}: expected a string, got {_type_name(request.get(key))}")
    response = obj.get("response")
    if response is not None and not isinstance(response, Mapping):
        raise HttpCaptureError(f"response: expected an object or null, got {_type_name(response)}")
    field = "request.timestamp" if "timestamp" in request else "logged_at"
    started, time_problem = _timestamp(request.get("timestamp", obj.get("logged_at")), field)
    status = content_type = body = None
    if response is not None:
        raw_status = response.get("status_code", response.get("status"))
        if raw_status is not None and (isinstance(raw_status, bool) or not isinstance(raw_status, int)):
            raise HttpCaptureError(f"response.status_code: expected an integer, got {_type_name(raw_status)}")
        status = raw_status
        content_type = _header(_headers_of(response.get("headers")), "content-type")
        body = response.get("body")
        if body is None and response.get("body_raw") is not None:
            body = response["body_raw"]
            if (
                content_type is None
                and isinstance(body, str)
                and body.lstrip().startswith(("event:", "data:"))
            ):
                content_type = "text/event-stream"
        if (
            isinstance(body, str)
            and is_event_stream(content_type) is False
            and body.lstrip().startswith("event:")
        ):
            content_type = "text/event-stream"
    return _Exchange(
        method=request["method"],
        url=request["url"],
        headers=_headers_of(request.get("headers")),
        request_body=request.get("body"),
        status=status,
        content_type=content_type,
        response_body=body,
        started=started,
        time_problem=time_problem,
    )


def _har_exchange(entry: object) -> _Exchange:
    if not isinstance(entry, Mapping):
        raise HttpCaptureError(f"expected an object, got {_type_name(entry)}")
    request, response = entry.get("request"), entry.get("response")
    if not isinstance(request, Mapping):
        raise HttpCaptureError(f"request: expected an object, got {_type_name(request)}")
    for key in ("method", "url"):
        if not isinstance(request.get(key), str):
            raise HttpCaptureError(f"request.{key}: expected a string, got {_type_name(request.get(key))}")
    post = request.get("postData")
    body = post.get("text") if isinstance(post, Mapping) else None
    started, time_problem = _timestamp(entry.get("startedDateTime"), "startedDateTime")
    status = content_type = text = None
    if isinstance(response, Mapping):
        status = response.get("status") if isinstance(response.get("status"), int) else None
        content = response.get("content")
        if isinstance(content, Mapping):
            content_type = content.get("mimeType") or _header(
                _headers_of(response.get("headers")), "content-type"
            )
            text = content.get("text")
            if isinstance(text, str) and content.get("encoding") == "base64":
                try:
                    text = base64.b64decode(text).decode("utf-8", "replace")
                except ValueError:
                    raise HttpCaptureError("response.content.text: not valid base64") from None
    if status == 0:  # HAR's "no response" (blocked, aborted)
        status = None
    return _Exchange(
        method=request["method"],
        url=request["url"],
        headers=_headers_of(request.get("headers")),
        request_body=body,
        status=status,
        content_type=content_type if isinstance(content_type, str) else None,
        response_body=text,
        started=started,
        time_problem=time_problem,
    )


def _har_entries(text: str) -> Iterator[tuple[int, Any]]:
    """(line, entry) for each entry of a HAR document, the line being where the entry starts."""
    data = loads_json(text)
    log = data.get("log") if isinstance(data, Mapping) else None
    entries = log.get("entries") if isinstance(log, Mapping) else None
    if not isinstance(entries, list):
        raise HttpCaptureError("log.entries: missing (not a HAR document)")
    starts: list[int] = []
    match = re.search(r'"entries"\s*:\s*\[', text)
    decoder = json.JSONDecoder()
    pos = match.end() if match else len(text)
    while match and len(starts) < len(entries):
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        try:
            _, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            break
        starts.append(text.count("\n", 0, pos) + 1)
        pos = end
    for k, entry in enumerate(entries):
        yield (starts[k] if k < len(starts) else 1), entry


def _session_of(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".zst", ".jsonl", ".json", ".har"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return name


def read(path: Path, lines: Iterable[tuple[int, str]]) -> Iterator[RequestRecord | LoadProblem]:
    """The calls of a capture file as records (``index`` 0: the loader numbers them per session), and a
    :class:`~promptkit.layout.LoadProblem` naming file, line and field for every exchange that is
    not a usable LLM call (another endpoint, a failed call, a malformed body, a torn last line).

    The session is the ``x-promptkit-session`` request header, else Claude Code's session id from
    ``metadata.user_id``, else the file name.

    >>> pair = {"request": {"timestamp": 1775786368.2, "method": "POST", "url": "https://api.openai.com/v1/chat/completions",
    ...                     "headers": {"authorization": "Bearer x"}, "body": {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}},
    ...         "response": {"status_code": 200, "headers": {"content-type": "application/json"},
    ...                      "body": {"choices": [{"message": {"role": "assistant", "content": "hello"}}],
    ...                               "usage": {"prompt_tokens": 8, "completion_tokens": 1}}}}
    >>> [rec] = read(Path("calls.jsonl"), [(1, json.dumps(pair))])
    >>> rec.session, rec.line, rec.completion["content"], rec.usage.prompt_tokens
    ('calls', 1, 'hello', 8)
    """
    file = str(path)
    session = _session_of(path)
    buffered = list(lines)
    head = "\n".join(t for _, t in buffered[:8]).lstrip("\ufeff")
    if _HAR_HINT.match(head):
        text = "\n".join(t for _, t in buffered).lstrip("\ufeff")
        try:
            entries = list(_har_entries(text))
        except json.JSONDecodeError as exc:
            cut = exc.msg.startswith("Unterminated string") or exc.pos >= len(text.rstrip())
            where = " (the HAR document is truncated: it ends before its JSON does)" if cut else ""
            yield LoadProblem(file, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno}){where}")
            return
        except HttpCaptureError as exc:
            yield LoadProblem(file, 1, str(exc))
            return
        for k, (line, entry) in enumerate(entries):
            try:
                exchange = _har_exchange(entry)
            except HttpCaptureError as exc:
                yield LoadProblem(file, line, f"log.entries[{k}].{exc}")
                continue
            result = _record_of(exchange, file, line, session)
            if isinstance(result, LoadProblem):
                result = attrs.evolve(result, reason=f"log.entries[{k}]: {result.reason}")
            yield result
            if exchange.time_problem is not None and isinstance(result, RequestRecord):
                yield LoadProblem(file, line, f"log.entries[{k}].{exchange.time_problem}")
        return
    last = max((n for n, t in buffered if t.strip()), default=0)
    for lineno, raw in buffered:
        if not raw.strip():
            continue
        try:
            obj = loads_json(raw)
        except json.JSONDecodeError as exc:
            torn = " (a torn last line: the writer stopped mid-record)" if lineno == last else ""
            yield LoadProblem(file, lineno, f"invalid JSON: {exc.msg} (column {exc.colno}){torn}")
            continue
        try:
            exchange = _pair_exchange(obj)
        except HttpCaptureError as exc:
            yield LoadProblem(file, lineno, str(exc))
            continue
        result = _record_of(exchange, file, lineno, session)
        yield result
        if exchange.time_problem is not None and isinstance(result, RequestRecord):
            yield LoadProblem(file, lineno, exchange.time_problem)


def _sniff_source(source: Source) -> bool:
    return sniff(source.path, source.head)


def _read_source(source: Source) -> Iterator[RequestRecord | LoadProblem]:
    return read(source.path, source.lines())


# module-level functions, not lambdas: a worker process is sent the format by reference (pickle)
FORMAT = LogFormat(
    name=NAME,
    description="HTTP captures: claude-trace JSONL request/response pairs, or HAR 1.2 (Anthropic Messages, "
    "OpenAI Chat Completions and Responses; SSE reassembled)",
    sniff=_sniff_source,
    read=_read_source,
    priority=20,
)
