"""The wire: what LLM API calls look like on HTTP, shared by the capture reader
(:mod:`promptkit.formats.http_capture`), the live capture wrapper (:mod:`promptkit.capture`), the
recording proxy (:mod:`promptkit.proxy`) and the Codex reader (:mod:`promptkit.formats.codex`).

One module per concern:

- :mod:`~promptkit.formats.wire.urls`: which API and provider a URL calls, the session a request names;
- :mod:`~promptkit.formats.wire.redact`: credentials kept out of records (headers, URLs, body fields,
  key shapes), iteratively and to a depth limit;
- :mod:`~promptkit.formats.wire.bodies`: content encodings, bounded;
- :mod:`~promptkit.formats.wire.sse`: server-sent events;
- :mod:`~promptkit.formats.wire.streams`: stream reassembly for the three stream kinds;
- :mod:`~promptkit.formats.wire.responses`: the OpenAI Responses API as chat completions;
- :mod:`~promptkit.formats.wire.record`: one exchange as promptkit's JSONL log record.

>>> from promptkit.formats.wire import api_from_url, redact_url
>>> api_from_url("/v1/chat/completions"), redact_url("https://h.example/v1?api_key=abc")
('openai-chat', 'https://h.example/v1?api_key=%5BREDACTED%5D')
"""

from promptkit.errors import HttpCaptureError
from promptkit.formats.wire.bodies import MAX_BODY_BYTES, decode_body
from promptkit.formats.wire.record import completion_of, exchange_record
from promptkit.formats.wire.redact import (
    MAX_DEPTH,
    REDACTED,
    SECRET_PATTERNS,
    SENSITIVE_HEADERS,
    TOO_DEEP,
    default_patterns,
    is_secret_field,
    is_secret_header,
    is_secret_query,
    redact,
    redact_counted,
    redact_text,
    redact_url,
    safe_headers,
    url_credentials,
)
from promptkit.formats.wire.responses import responses_request_to_chat, responses_response_to_chat
from promptkit.formats.wire.sse import SSEEvent, is_event_stream, parse_sse
from promptkit.formats.wire.streams import StreamResult, reassemble_stream
from promptkit.formats.wire.urls import (
    API_KINDS,
    SESSION_HEADER,
    ApiKind,
    api_from_url,
    header_value,
    provider_from_url,
    session_hint,
)

__all__ = [
    "API_KINDS",
    "MAX_BODY_BYTES",
    "MAX_DEPTH",
    "REDACTED",
    "SECRET_PATTERNS",
    "SENSITIVE_HEADERS",
    "SESSION_HEADER",
    "TOO_DEEP",
    "ApiKind",
    "HttpCaptureError",
    "SSEEvent",
    "StreamResult",
    "api_from_url",
    "completion_of",
    "decode_body",
    "default_patterns",
    "exchange_record",
    "header_value",
    "is_event_stream",
    "is_secret_field",
    "is_secret_header",
    "is_secret_query",
    "parse_sse",
    "provider_from_url",
    "reassemble_stream",
    "redact",
    "redact_counted",
    "redact_text",
    "redact_url",
    "responses_request_to_chat",
    "responses_response_to_chat",
    "safe_headers",
    "session_hint",
    "url_credentials",
]
