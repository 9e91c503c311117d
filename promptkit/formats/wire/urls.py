"""Which API and provider a request URL calls, and which session a request names itself.

>>> api_from_url("https://api.anthropic.com/v1/messages?beta=true")
'anthropic-messages'
>>> session_hint({"X-Promptkit-Session": "run-7"}, {})
'run-7'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, Literal
from urllib.parse import urlsplit

__all__ = [
    "API_KINDS",
    "SESSION_HEADER",
    "ApiKind",
    "api_from_url",
    "header_value",
    "provider_from_url",
    "session_hint",
]

ApiKind = Literal["anthropic-messages", "openai-chat", "openai-responses"]
#: The APIs whose calls are recorded, in the order :func:`api_from_url` tries them.
API_KINDS: Final[tuple[ApiKind, ...]] = ("anthropic-messages", "openai-chat", "openai-responses")

#: A request header a client may set to name its session (read by the proxy and the capture reader).
SESSION_HEADER: Final[str] = "x-promptkit-session"


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
    """The provider a URL's host (or Ollama's port) belongs to, as the provider profiles recognise it
    (:func:`~promptkit.providers.registry.infer_provider`); None for a host no profile claims (a local
    server, a gateway, a router such as OpenRouter, whose calls are recognised by their model names).

    >>> provider_from_url("https://api.deepseek.com/chat/completions")
    'deepseek'
    >>> provider_from_url("https://api.anthropic.com/v1/messages"), provider_from_url("http://127.0.0.1:8000/v1")
    ('anthropic', None)
    """
    from promptkit.providers.registry import infer_provider

    return infer_provider(url=url)


def header_value(headers: Mapping[str, str] | Iterable[tuple[str, str]] | None, name: str) -> str | None:
    """The value of header ``name`` (lower case) in a mapping or a list of pairs; None when absent.

    >>> header_value([("Content-Type", "text/plain")], "content-type")
    'text/plain'
    """
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
    value = header_value(headers, SESSION_HEADER)
    if value:
        return value.strip()
    if isinstance(body, Mapping):
        metadata = body.get("metadata")
        user = metadata.get("user_id") if isinstance(metadata, Mapping) else None
        if isinstance(user, str) and "_session_" in user:
            return user.rsplit("_session_", 1)[1] or None
    return None
