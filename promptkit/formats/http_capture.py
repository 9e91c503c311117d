"""Raw HTTP captures of LLM API calls: SSE reassembly, the Responses API conversion, and a capture reader.

Three APIs are understood, told apart by the request path (:func:`api_from_url`):

- ``anthropic-messages``: ``POST .../v1/messages`` (Anthropic; bodies read by the analyzer as they are);
- ``openai-chat``: ``POST .../chat/completions`` (OpenAI and every OpenAI-compatible provider: DeepSeek,
  vLLM, Ollama, OpenRouter...);
- ``openai-responses``: ``POST .../responses`` (OpenAI Responses; converted to the chat-completions shape
  by :func:`responses_request_to_chat` and :func:`responses_response_to_chat`).

A streamed (``text/event-stream``) response is reassembled into the body the same call would have
returned without streaming (:func:`reassemble_stream`), usage included: OpenAI chat streams carry it in
their last chunk (``stream_options.include_usage``), Anthropic splits it between ``message_start`` and
``message_delta``, the Responses API sends the whole response in ``response.completed``.

:func:`exchange_record` turns one HTTP exchange into promptkit's JSONL log record; the live capture
wrapper (:mod:`promptkit.capture`) and the recording proxy (:mod:`promptkit.proxy`) both write it.

The capture reader (``NAME``, :func:`sniff`, :func:`read`) reads two shapes that capturing tools write:

- **JSONL request/response pairs**, one exchange per line, as ``claude-trace`` writes them
  (``{"request": {"timestamp", "method", "url", "headers", "body"}, "response": {"timestamp",
  "status_code", "headers", "body" | "body_raw"}, "logged_at"}``); ``status`` is accepted for
  ``status_code`` and a body may be a JSON value or its text.
- **HAR 1.2** (``{"log": {"entries": [{"startedDateTime", "time", "request": {"method", "url", "headers",
  "postData": {"text"}}, "response": {"status", "headers", "content": {"text", "encoding"}}}]}}``), as
  browsers, mitmproxy, Charles and Proxyman export it.

Example::

    >>> sse = ('data: {"id":"c1","model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}\\n\\n'
    ...        'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}\\n\\n'
    ...        'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2}}\\n\\n'
    ...        'data: [DONE]\\n\\n')
    >>> result = reassemble_stream("openai-chat", sse)
    >>> result.complete, result.body["choices"][0]["message"]["content"], result.body["usage"]["prompt_tokens"]
    (True, 'Hello', 9)
"""

from __future__ import annotations

import base64
import copy
import json
import re
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import attrs

from promptkit.errors import HttpCaptureError, RecordFormatError
from promptkit.formats.base import LogFormat
from promptkit.layout import LoadProblem, RequestRecord
from promptkit.providers.usage import normalize_usage

__all__ = [
    "API_KINDS",
    "NAME",
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

ApiKind = Literal["anthropic-messages", "openai-chat", "openai-responses"]
#: The APIs whose calls are recorded, in the order :func:`api_from_url` tries them.
API_KINDS: Final[tuple[ApiKind, ...]] = ("anthropic-messages", "openai-chat", "openai-responses")

#: A request header a client may set to name its session (read by the proxy and the capture reader).
SESSION_HEADER: Final[str] = "x-promptkit-session"

#: Headers never written to a log (compared case-insensitively): credentials and cookies.
SENSITIVE_HEADERS: Final[frozenset[str]] = frozenset(
    {
        "authorization", "proxy-authorization", "x-api-key", "api-key", "openai-api-key", "cookie",
        "set-cookie", "x-goog-api-key", "anthropic-api-key",
    }
)  # fmt: skip
#: Query parameters whose value is replaced in recorded URLs.
_SECRET_QUERY: Final[frozenset[str]] = frozenset(
    {"key", "api_key", "apikey", "api-key", "token", "access_token"}
)

#: Patterns of API keys replaced by ``[REDACTED]`` in every recorded string (keys pasted into prompts
#: included): OpenAI / DeepSeek ``sk-...``, Anthropic ``sk-ant-...``, Google ``AIza...``, bearer tokens.
SECRET_PATTERNS: Final[tuple[str, ...]] = (
    r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}",
    r"AIza[0-9A-Za-z_\-]{35}",
    r"(?i)bearer\s+[A-Za-z0-9._\-]{20,}",
)
REDACTED: Final[str] = "[REDACTED]"

_HOSTS: Final[tuple[tuple[str, str], ...]] = (
    ("anthropic.com", "anthropic"),
    ("deepseek.com", "deepseek"),
    ("openai.com", "openai"),
    ("openai.azure.com", "openai"),
    ("ollama", "ollama"),
)


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


# ---------------------------------------------------------------------------------------------------
# URLs


def api_from_url(url: str) -> ApiKind | None:
    """Which API a request URL (or path) calls, from its path; None for anything else.

    >>> api_from_url("https://api.anthropic.com/v1/messages?beta=true")
    'anthropic-messages'
    >>> api_from_url("/v1/chat/completions"), api_from_url("/v1/responses"), api_from_url("/v1/models")
    ('openai-chat', 'openai-responses', None)
    """
    path = urlsplit(url).path.rstrip("/")
    if path.endswith("/messages") or path == "messages":
        return "anthropic-messages"
    if path.endswith("/chat/completions"):
        return "openai-chat"
    if path.endswith("/responses") or path == "responses":
        return "openai-responses"
    return None


def provider_from_url(url: str) -> str | None:
    """The provider a URL's host belongs to (``anthropic``, ``openai``, ``deepseek``, ``ollama``); None
    for a host promptkit does not know (a local server, a gateway).

    >>> provider_from_url("https://api.deepseek.com/chat/completions")
    'deepseek'
    >>> provider_from_url("https://api.anthropic.com/v1/messages"), provider_from_url("http://127.0.0.1:8000/v1")
    ('anthropic', None)
    """
    host = (urlsplit(url).hostname or "").lower()
    for suffix, provider in _HOSTS:
        if host == suffix or host.endswith("." + suffix) or (suffix == "ollama" and "ollama" in host):
            return provider
    if urlsplit(url).port == 11434:  # Ollama's default port
        return "ollama"
    return None


def redact_url(url: str) -> str:
    """``url`` with the values of credential query parameters (``key``, ``api_key``, ``token``...)
    replaced by ``[REDACTED]``.

    >>> redact_url("https://x.example/v1/models?key=abc&alt=json")
    'https://x.example/v1/models?key=%5BREDACTED%5D&alt=json'
    """
    parts = urlsplit(url)
    if not parts.query:
        return url
    query = [
        (k, REDACTED if k.lower() in _SECRET_QUERY else v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
    ]
    return urlunsplit(parts._replace(query=urlencode(query)))


def redact(value: Any, patterns: Sequence[re.Pattern[str]]) -> Any:
    """A copy of a JSON value with every match of ``patterns`` in its strings (keys included) replaced by
    ``[REDACTED]``.

    >>> redact({"content": "my key is sk-abcdefghijklmnopqrstuvwx"}, [re.compile(SECRET_PATTERNS[0])])
    {'content': 'my key is [REDACTED]'}
    """
    if isinstance(value, str):
        for pattern in patterns:
            value = pattern.sub(REDACTED, value)
        return value
    if isinstance(value, Mapping):
        return {redact(k, patterns): redact(v, patterns) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v, patterns) for v in value]
    return value


def _header(headers: Mapping[str, str] | Iterable[tuple[str, str]] | None, name: str) -> str | None:
    if headers is None:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    for key, value in items:
        if str(key).lower() == name:
            return str(value)
    return None


def session_hint(headers: Mapping[str, str] | Iterable[tuple[str, str]] | None, body: object) -> str | None:
    """The session a request names itself: the ``x-promptkit-session`` header, else the session id Claude
    Code puts into ``metadata.user_id`` (``..._session_<uuid>``); None when it names none.

    >>> session_hint({"X-Promptkit-Session": "run-7"}, {})
    'run-7'
    >>> session_hint({}, {"metadata": {"user_id": "user_ab12_account__session_0f9e-77"}})
    '0f9e-77'
    """
    value = _header(headers, SESSION_HEADER)
    if value:
        return value.strip()
    if isinstance(body, Mapping):
        metadata = body.get("metadata")
        user = metadata.get("user_id") if isinstance(metadata, Mapping) else None
        if isinstance(user, str) and "_session_" in user:
            return user.rsplit("_session_", 1)[1] or None
    return None


# ---------------------------------------------------------------------------------------------------
# bodies


def is_event_stream(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` announces server-sent events.

    >>> is_event_stream("text/event-stream; charset=utf-8"), is_event_stream("application/json")
    (True, False)
    """
    return bool(content_type) and content_type.split(";", 1)[0].strip().lower() == "text/event-stream"  # type: ignore[union-attr]


def decode_body(raw: bytes, content_encoding: str | None) -> bytes:
    """Undo a ``Content-Encoding`` (``gzip``, ``deflate``, ``identity``; ``br`` and ``zstd`` when their
    packages are installed). Raises :class:`HttpCaptureError` for an unknown or broken encoding.

    >>> import gzip
    >>> decode_body(gzip.compress(b'{"a": 1}'), "gzip")
    b'{"a": 1}'
    """
    body = raw
    for coding in reversed([c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]):
        try:
            if coding == "identity":
                continue
            if coding in ("gzip", "x-gzip"):
                body = zlib.decompress(body, 16 + zlib.MAX_WBITS)
            elif coding == "deflate":
                try:
                    body = zlib.decompress(body)
                except zlib.error:
                    body = zlib.decompress(body, -zlib.MAX_WBITS)
            elif coding == "br":
                import brotli

                body = brotli.decompress(body)
            elif coding == "zstd":
                import zstandard

                body = zstandard.ZstdDecompressor().decompressobj().decompress(body)
            else:
                raise HttpCaptureError(f"content-encoding: unknown coding {coding!r}")
        except ImportError:
            raise HttpCaptureError(
                f"content-encoding: {coding!r} needs a package that is not installed"
            ) from None
        except zlib.error as exc:
            raise HttpCaptureError(f"content-encoding: broken {coding} data ({exc})") from None
    return body


# ---------------------------------------------------------------------------------------------------
# server-sent events


@attrs.frozen(slots=True)
class SSEEvent:
    """One server-sent event: its ``event`` name (None when the stream names none) and its ``data``
    (the ``data:`` lines joined by newlines)."""

    event: str | None
    data: str


def parse_sse(text: str) -> list[SSEEvent]:
    """Split an event stream into events (the WHATWG rules: ``\\n``, ``\\r\\n`` or ``\\r`` line ends, a
    blank line ends an event, ``:`` starts a comment, one space after the colon is dropped). A final
    event without its blank line (a stream cut off) is kept.

    >>> parse_sse("event: ping\\ndata: {}\\n\\n: comment\\ndata: a\\ndata: b\\n\\n")
    [SSEEvent(event='ping', data='{}'), SSEEvent(event=None, data='a\\nb')]
    """
    events: list[SSEEvent] = []
    name: str | None = None
    data: list[str] = []
    for line in re.split(r"\r\n|\r|\n", text):
        if not line:
            if data:
                events.append(SSEEvent(name, "\n".join(data)))
            name, data = None, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    if data:
        events.append(SSEEvent(name, "\n".join(data)))
    return events


@attrs.frozen(slots=True)
class StreamResult:
    """A reassembled stream: the whole response ``body``, whether the stream ``complete`` d (its final
    event arrived: ``[DONE]``, ``message_stop``, ``response.completed``), and the ``error`` object an
    ``error`` event carried (None without one)."""

    body: Mapping[str, Any]
    complete: bool
    error: Mapping[str, Any] | None = None


def _events_json(text: str, where: str) -> Iterator[tuple[int, SSEEvent, Any]]:
    events = parse_sse(text)
    terminated = text.endswith(("\n\n", "\r\n\r\n", "\r\r"))
    for i, event in enumerate(events):
        if event.data.strip() == "[DONE]":
            yield i, event, None
            continue
        try:
            data = json.loads(event.data)
        except json.JSONDecodeError as exc:
            if i == len(events) - 1 and not terminated:
                return  # the stream was cut inside its last event: what came before stands
            raise HttpCaptureError(f"{where}: event {i}: data is not JSON ({exc.msg})") from None
        yield i, event, data


def _reassemble_openai_chat(text: str, where: str) -> StreamResult:
    out: dict[str, Any] = {}
    choices: dict[int, dict[str, Any]] = {}
    usage: Any = None
    done = False
    error: Mapping[str, Any] | None = None
    for i, _event, chunk in _events_json(text, where):
        if chunk is None:
            done = True
            continue
        if not isinstance(chunk, Mapping):
            raise HttpCaptureError(f"{where}: event {i}: expected an object, got {_type_name(chunk)}")
        if isinstance(chunk.get("error"), Mapping):
            error = chunk["error"]
            continue
        for key in ("id", "created", "model", "system_fingerprint", "service_tier"):
            if chunk.get(key) is not None:
                out[key] = chunk[key]
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, Mapping):
                raise HttpCaptureError(
                    f"{where}: event {i}.choices: expected objects, got {_type_name(choice)}"
                )
            state = choices.setdefault(
                int(choice.get("index", 0)),
                {
                    "role": "assistant",
                    "content": [],
                    "reasoning_content": [],
                    "refusal": [],
                    "calls": {},
                    "finish": None,
                },
            )
            delta = choice.get("delta") or {}
            if isinstance(delta.get("role"), str):
                state["role"] = delta["role"]
            for key in ("content", "reasoning_content", "refusal"):
                if isinstance(delta.get(key), str):
                    state[key].append(delta[key])
            for call in delta.get("tool_calls") or ():
                slot = state["calls"].setdefault(
                    int(call.get("index", 0)), {"id": None, "type": "function", "name": [], "arguments": []}
                )
                if call.get("id"):
                    slot["id"] = call["id"]
                if call.get("type"):
                    slot["type"] = call["type"]
                function = call.get("function") or {}
                if isinstance(function.get("name"), str):
                    slot["name"].append(function["name"])
                if isinstance(function.get("arguments"), str):
                    slot["arguments"].append(function["arguments"])
            if choice.get("finish_reason") is not None:
                state["finish"] = choice["finish_reason"]
    body: dict[str, Any] = {"id": out.get("id"), "object": "chat.completion"}
    body.update({k: v for k, v in out.items() if k != "id"})
    built = []
    for index in sorted(choices):
        state = choices[index]
        message: dict[str, Any] = {"role": state["role"], "content": "".join(state["content"]) or None}
        if state["reasoning_content"]:
            message["reasoning_content"] = "".join(state["reasoning_content"])
        if state["refusal"]:
            message["refusal"] = "".join(state["refusal"])
        if state["calls"]:
            message["tool_calls"] = [
                {
                    "id": slot["id"],
                    "type": slot["type"],
                    "function": {"name": "".join(slot["name"]), "arguments": "".join(slot["arguments"])},
                }
                for _, slot in sorted(state["calls"].items())
            ]
        built.append({"index": index, "message": message, "finish_reason": state["finish"]})
    body["choices"] = built
    if usage is not None:
        body["usage"] = usage
    return StreamResult(body, done, error)


def _reassemble_anthropic(text: str, where: str) -> StreamResult:
    message: dict[str, Any] = {}
    usage: dict[str, Any] = {}
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, list[str]] = {}
    complete = False
    error: Mapping[str, Any] | None = None

    def finish_block(index: int) -> None:
        pieces = partial.pop(index, None)
        if pieces is None:
            return
        joined = "".join(pieces)
        try:
            blocks[index]["input"] = json.loads(joined) if joined.strip() else {}
        except json.JSONDecodeError:
            blocks[index]["input"] = joined  # cut off mid-arguments: keep what arrived

    for i, _event, data in _events_json(text, where):
        if not isinstance(data, Mapping):
            raise HttpCaptureError(f"{where}: event {i}: expected an object, got {_type_name(data)}")
        kind = data.get("type")
        if kind == "message_start":
            start = data.get("message")
            if not isinstance(start, Mapping):
                raise HttpCaptureError(
                    f"{where}: event {i}.message: expected an object, got {_type_name(start)}"
                )
            message = {k: copy.deepcopy(v) for k, v in start.items() if k not in ("content", "usage")}
            usage.update(start.get("usage") or {})
        elif kind == "content_block_start":
            block = data.get("content_block")
            if not isinstance(block, Mapping):
                raise HttpCaptureError(
                    f"{where}: event {i}.content_block: expected an object, got {_type_name(block)}"
                )
            index = int(data.get("index", len(blocks)))
            blocks[index] = copy.deepcopy(dict(block))
            if block.get("type") in ("tool_use", "server_tool_use", "mcp_tool_use"):
                partial[index] = []
        elif kind == "content_block_delta":
            index = int(data.get("index", 0))
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            delta = data.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + str(delta.get("text", ""))
            elif dtype == "input_json_delta":
                partial.setdefault(index, []).append(str(delta.get("partial_json", "")))
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
            elif dtype == "signature_delta":
                block["signature"] = block.get("signature", "") + str(delta.get("signature", ""))
            elif dtype == "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))
        elif kind == "content_block_stop":
            finish_block(int(data.get("index", 0)))
        elif kind == "message_delta":
            delta = data.get("delta") or {}
            message.update({k: v for k, v in delta.items()})
            usage.update({k: v for k, v in (data.get("usage") or {}).items() if v is not None})
        elif kind == "message_stop":
            complete = True
        elif kind == "error":
            error = data.get("error") if isinstance(data.get("error"), Mapping) else data
    for index in list(partial):
        finish_block(index)
    body = dict(message)
    body["content"] = [blocks[i] for i in sorted(blocks)]
    if usage:
        body["usage"] = usage
    return StreamResult(body, complete and error is None, error)


def _reassemble_responses(text: str, where: str) -> StreamResult:
    created: Mapping[str, Any] | None = None
    final: Mapping[str, Any] | None = None
    items: dict[int, Any] = {}
    error: Mapping[str, Any] | None = None
    for i, _event, data in _events_json(text, where):
        if not isinstance(data, Mapping):
            raise HttpCaptureError(f"{where}: event {i}: expected an object, got {_type_name(data)}")
        kind = data.get("type")
        if kind in ("response.created", "response.in_progress") and isinstance(data.get("response"), Mapping):
            created = data["response"]
        elif kind == "response.output_item.done":
            items[int(data.get("output_index", len(items)))] = data.get("item")
        elif kind in ("response.completed", "response.failed", "response.incomplete"):
            if not isinstance(data.get("response"), Mapping):
                raise HttpCaptureError(f"{where}: event {i}.response: expected an object")
            final = data["response"]
            if kind == "response.failed" and isinstance(final.get("error"), Mapping):
                error = final["error"]
        elif kind == "error":
            error = data
    if final is not None:
        return StreamResult(dict(final), error is None, error)
    body = dict(created or {})
    body["output"] = [items[i] for i in sorted(items)]
    body["status"] = "incomplete"
    return StreamResult(body, False, error)


def reassemble_stream(api: ApiKind, text: str, *, where: str = "response.body") -> StreamResult:
    """The whole response body of a streamed call, from its event stream ``text``.

    - ``openai-chat``: the chunks' deltas joined per choice (content, ``reasoning_content``, refusal,
      tool calls by index), ``usage`` from the chunk that carries it;
    - ``anthropic-messages``: ``message_start`` + content blocks with their deltas (text, tool input JSON,
      thinking, signatures, citations) + ``message_delta`` (stop reason; its usage updates the start's);
    - ``openai-responses``: the ``response`` of ``response.completed`` (or ``failed`` / ``incomplete``);
      a stream cut off before it gives the created response with the finished output items.

    A stream cut off early gives what arrived, with ``complete`` False. Raises :class:`HttpCaptureError`
    when an event's data is not JSON.

    >>> sse = ('event: message_start\\ndata: {"type":"message_start","message":{"id":"m1","role":"assistant",'
    ...        '"model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":12,"cache_read_input_tokens":2048,'
    ...        '"output_tokens":1}}}\\n\\n'
    ...        'data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\\n\\n'
    ...        'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\\n\\n'
    ...        'data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}\\n\\n'
    ...        'data: {"type":"message_stop"}\\n\\n')
    >>> r = reassemble_stream("anthropic-messages", sse)
    >>> r.body["content"], r.body["usage"]["output_tokens"], r.body["stop_reason"], r.complete
    ([{'type': 'text', 'text': 'Hi'}], 5, 'end_turn', True)
    """
    if api == "openai-chat":
        return _reassemble_openai_chat(text, where)
    if api == "anthropic-messages":
        return _reassemble_anthropic(text, where)
    if api == "openai-responses":
        return _reassemble_responses(text, where)
    raise ValueError(f"unknown API {api!r}; expected one of {', '.join(API_KINDS)}")


# ---------------------------------------------------------------------------------------------------
# the OpenAI Responses API


def _responses_part(part: object, where: str) -> Any:
    if not isinstance(part, Mapping):
        if isinstance(part, str):
            return {"type": "text", "text": part}
        raise HttpCaptureError(f"{where}: expected an object, got {_type_name(part)}")
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
        return {"type": "text", "text": str(part.get("text", ""))}
    if kind == "refusal":
        return {"type": "text", "text": str(part.get("refusal", ""))}
    if kind == "input_image":
        url = part.get("image_url") or (f"file:{part['file_id']}" if part.get("file_id") else "")
        image: dict[str, Any] = {"url": url}
        if part.get("detail"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    return dict(part)  # input_file, input_audio...: kept as they are


def _responses_content(content: object, where: str) -> Any:
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise HttpCaptureError(f"{where}: expected a string or a list of parts, got {_type_name(content)}")
    return [_responses_part(part, f"{where}[{k}]") for k, part in enumerate(content)]


def _tool_call(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    name = item.get("name")
    if not isinstance(name, str):
        raise HttpCaptureError(f"{where}.name: expected a string, got {_type_name(name)}")
    arguments = item.get("arguments", item.get("input", ""))
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {"id": str(item.get("call_id") or item.get("id") or ""), "type": "function",
            "function": {"name": name, "arguments": arguments}}  # fmt: skip


def _responses_items(items: Sequence[Any], where: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    open_assistant = False  # the last message is an assistant turn that further tool calls join
    for k, item in enumerate(items):
        w = f"{where}[{k}]"
        if isinstance(item, str):
            messages.append({"role": "user", "content": item})
            open_assistant = False
            continue
        if not isinstance(item, Mapping):
            raise HttpCaptureError(f"{w}: expected an object, got {_type_name(item)}")
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            if not isinstance(role, str):
                raise HttpCaptureError(f"{w}.role: expected a string, got {_type_name(role)}")
            messages.append(
                {"role": role, "content": _responses_content(item.get("content"), f"{w}.content")}
            )
            open_assistant = role == "assistant"
        elif kind in ("function_call", "custom_tool_call"):
            call = _tool_call(item, w)
            if open_assistant:
                messages[-1].setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
                open_assistant = True
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            content = output if isinstance(output, str) else _responses_content(output, f"{w}.output")
            messages.append(
                {"role": "tool", "tool_call_id": str(item.get("call_id", "")), "content": content}
            )
            open_assistant = False
        else:
            # reasoning, item_reference, web_search_call...: the model sees them; keep their bytes so a
            # change still shows up in the diff
            text = json.dumps(item, ensure_ascii=False, sort_keys=True)
            role = item.get("role") if isinstance(item.get("role"), str) else "assistant"
            messages.append({"role": role, "content": text})
            open_assistant = role == "assistant"
    return messages


def _responses_tool(tool: object, where: str) -> Any:
    if not isinstance(tool, Mapping):
        raise HttpCaptureError(f"{where}: expected an object, got {_type_name(tool)}")
    if tool.get("type") == "function" and "function" not in tool:
        function = {k: v for k, v in tool.items() if k != "type"}
        return {"type": "function", "function": function}
    return dict(tool)  # built-in tools (web_search, file_search...) as they are


def responses_request_to_chat(body: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI Responses API request body as the chat-completions body promptkit analyzes.

    ``instructions`` becomes a leading system message; ``input`` (a string, or a list of items) becomes
    ``messages``: message items keep their role (``input_text`` / ``output_text`` parts become ``text``
    parts, ``input_image`` an ``image_url`` part); ``function_call`` items become the assistant's
    ``tool_calls`` (consecutive calls join one assistant message), ``function_call_output`` items ``tool``
    messages; other items (reasoning, item references, built-in tool calls) become assistant messages
    holding the item's JSON, so that a change in them still shows in the diff. Function tools ``{"type":
    "function", "name", ...}`` are nested as ``{"type": "function", "function": {...}}``. Every other
    field (``model``, ``previous_response_id``...) is kept. Raises :class:`HttpCaptureError` naming the
    field.

    >>> chat = responses_request_to_chat({"model": "gpt-5", "instructions": "Be terse.", "input": [
    ...     {"role": "user", "content": "time?"},
    ...     {"type": "function_call", "call_id": "c1", "name": "now", "arguments": "{}"},
    ...     {"type": "function_call_output", "call_id": "c1", "output": "12:00"}],
    ...     "tools": [{"type": "function", "name": "now", "parameters": {"type": "object"}}]})
    >>> [m["role"] for m in chat["messages"]], chat["messages"][2]["tool_calls"][0]["function"]["name"]
    (['system', 'user', 'assistant', 'tool'], 'now')
    >>> chat["tools"][0]["function"]["name"]
    'now'
    """
    if not isinstance(body, Mapping):
        raise HttpCaptureError(f"request.body: expected an object, got {_type_name(body)}")
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str):
        if instructions:
            messages.append({"role": "system", "content": instructions})
    elif isinstance(instructions, list):
        messages.extend(
            {**m, "role": "system"} if m["role"] == "user" else m
            for m in _responses_items(instructions, "request.body.instructions")
        )
    elif instructions is not None:
        raise HttpCaptureError(
            f"request.body.instructions: expected a string, got {_type_name(instructions)}"
        )
    inp = body.get("input")
    if isinstance(inp, str):
        messages.append({"role": "user", "content": inp})
    elif isinstance(inp, list):
        messages.extend(_responses_items(inp, "request.body.input"))
    elif inp is not None:
        raise HttpCaptureError(f"request.body.input: expected a string or a list, got {_type_name(inp)}")
    out = {k: v for k, v in body.items() if k not in ("input", "instructions", "tools")}
    out["messages"] = messages
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise HttpCaptureError(f"request.body.tools: expected a list, got {_type_name(tools)}")
        out["tools"] = [_responses_tool(t, f"request.body.tools[{k}]") for k, t in enumerate(tools)]
    return out


def responses_response_to_chat(body: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI Responses API response as a chat-completions response: the ``output`` items become the
    first choice's assistant message (text joined, ``function_call`` items as ``tool_calls``, reasoning
    summaries as ``reasoning_content``); ``usage`` (``input_tokens``, ``input_tokens_details.cached_tokens``)
    is kept as it is, ``status`` becomes the ``finish_reason``.

    >>> chat = responses_response_to_chat({"id": "resp_1", "model": "gpt-5", "status": "completed",
    ...     "output": [{"type": "message", "role": "assistant",
    ...                 "content": [{"type": "output_text", "text": "12:00"}]}],
    ...     "usage": {"input_tokens": 2006, "input_tokens_details": {"cached_tokens": 1920}, "output_tokens": 3}})
    >>> chat["choices"][0]["message"], chat["usage"]["input_tokens_details"]["cached_tokens"]
    ({'role': 'assistant', 'content': '12:00'}, 1920)
    """
    if not isinstance(body, Mapping):
        raise HttpCaptureError(f"response.body: expected an object, got {_type_name(body)}")
    output = body.get("output") or []
    if not isinstance(output, list):
        raise HttpCaptureError(f"response.body.output: expected a list, got {_type_name(output)}")
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for k, item in enumerate(output):
        w = f"response.body.output[{k}]"
        if not isinstance(item, Mapping):
            raise HttpCaptureError(f"{w}: expected an object, got {_type_name(item)}")
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if isinstance(part, Mapping) and part.get("type") == "output_text":
                    text.append(str(part.get("text", "")))
                elif isinstance(part, Mapping) and part.get("type") == "refusal":
                    text.append(str(part.get("refusal", "")))
        elif kind in ("function_call", "custom_tool_call"):
            calls.append(_tool_call(item, w))
        elif kind == "reasoning":
            for part in item.get("summary") or ():
                if isinstance(part, Mapping):
                    reasoning.append(str(part.get("text", "")))
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if reasoning:
        message["reasoning_content"] = "\n".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    chat: dict[str, Any] = {"id": body.get("id"), "object": "response", "model": body.get("model"),
                            "created": body.get("created_at")}  # fmt: skip
    chat = {k: v for k, v in chat.items() if v is not None}
    chat["choices"] = [{"index": 0, "message": message, "finish_reason": body.get("status")}]
    if body.get("usage") is not None:
        chat["usage"] = body["usage"]
    return chat


# ---------------------------------------------------------------------------------------------------
# one exchange -> one log record


def _json_body(raw: bytes | str | Mapping[str, Any] | list[Any], where: str) -> Any:
    if isinstance(raw, Mapping | list):
        return raw
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    try:
        return json.loads(text)
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
    failure: dict[str, Any] | None = dict(error) if error is not None else None
    response: Any = None
    if response_body is not None:
        try:
            if stream:
                text = (
                    response_body.decode("utf-8", "replace")
                    if isinstance(response_body, bytes)
                    else response_body
                )
                if not isinstance(text, str):
                    raise HttpCaptureError("response.body: a stream must be text")
                result = reassemble_stream(api, text)
                response = result.body
                if failure is None and result.error is not None:
                    failure = {"kind": "stream-error", "body": result.error}
                elif failure is None and not result.complete and (status is None or status < 400):
                    failure = {"kind": "stream-dropped", "message": "the stream ended before its final event"}
            else:
                response = _json_body(response_body, "response.body")
        except HttpCaptureError as exc:
            raw = (
                response_body
                if isinstance(response_body, str | Mapping)
                else response_body.decode("utf-8", "replace")
            )
            response = None
            if failure is None:
                failure = {"kind": "undecodable", "message": str(exc), "body": raw}
    if failure is None and status is not None and status >= 400:
        failure = {"kind": "http-status", "status": status, "body": response}
    elif failure is not None and response is not None and failure.get("kind") != "http-status":
        failure["partial_response"] = response
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
    http: dict[str, Any] = {"method": method, "url": redact_url(url), "status": status, "api": api}
    provider = provider_from_url(url)
    if provider is not None:
        http["provider"] = provider
    http["stream"] = stream
    record["http"] = http
    if failure is not None:
        record["error"] = failure
    if original:
        record["original"] = original
    if layout is not None:
        record["layout"] = [dict(entry) for entry in layout]
    return record


# ---------------------------------------------------------------------------------------------------
# the capture reader


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
        return '"entries"' in text or len(text) >= 60000
    first = next((line for line in text.split("\n") if line.strip()), "")
    try:
        obj = json.loads(first)
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


def _timestamp(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
        return seconds / 1000.0 if seconds > 1e11 else seconds  # milliseconds (JavaScript's Date.now())
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


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
        started=_timestamp(request.get("timestamp", obj.get("logged_at"))),
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
        started=_timestamp(entry.get("startedDateTime")),
    )


def _har_entries(text: str) -> Iterator[tuple[int, Any]]:
    """(line, entry) for each entry of a HAR document, the line being where the entry starts."""
    data = json.loads(text)
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
            yield LoadProblem(file, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})")
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
        return
    last = max((n for n, t in buffered if t.strip()), default=0)
    for lineno, raw in buffered:
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            torn = " (a torn last line: the writer stopped mid-record)" if lineno == last else ""
            yield LoadProblem(file, lineno, f"invalid JSON: {exc.msg} (column {exc.colno}){torn}")
            continue
        try:
            exchange = _pair_exchange(obj)
        except HttpCaptureError as exc:
            yield LoadProblem(file, lineno, str(exc))
            continue
        yield _record_of(exchange, file, lineno, session)


FORMAT = LogFormat(
    name=NAME,
    description="HTTP captures: claude-trace JSONL request/response pairs, or HAR 1.2 (Anthropic Messages, "
    "OpenAI Chat Completions and Responses; SSE reassembled)",
    sniff=lambda source: sniff(source.path, source.head),
    read=lambda source: read(source.path, source.lines()),
    priority=20,
)
