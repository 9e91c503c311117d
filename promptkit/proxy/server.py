"""The recording proxy: forward every request unchanged, stream every answer back as it arrives, and
record each LLM call whole in promptkit's log format.

Built on aiohttp (server and client). Per request:

1. The body is read; the session is decided (:mod:`promptkit.formats.wire.sessions`).
2. The request goes upstream as it came (method, path and query, headers but the hop-by-hop ones, the
   body's bytes; aiohttp adds none of its default headers the client did not send).
3. The status, headers and body bytes come back to the client unchanged, chunk by chunk as they arrive
   (still compressed when the upstream compressed them). A connection the upstream drops mid-body is
   dropped towards the client too; a timeout or refused connection before any answer becomes a
   ``504`` / ``502`` with a JSON ``error`` body.
4. Calls to the Messages, Chat Completions and Responses APIs are recorded
   (:func:`~promptkit.formats.wire.record.exchange_record`): request and reassembled response, session,
   timestamp, ``duration`` and ``first_byte`` seconds, safe request headers (never a header that can
   carry a credential: :func:`~promptkit.formats.wire.redact.is_secret_header`), and an ``error`` for
   failed calls. Only ``POST`` requests to those API paths are calls; anything else (a ``GET`` of
   ``/v1/messages``, ``/v1/models``) is forwarded and not recorded. A record is written whole or not at
   all; a failing log, or a body promptkit cannot parse (nested too deep, not JSON), never stops
   forwarding (:class:`~promptkit.capture.RecordLog`): it is counted in ``unrecorded`` and logged.
5. The live figures (:mod:`promptkit.proxy.live`) are updated; ``GET /_promptkit/`` shows them,
   ``GET /_promptkit/stats.json`` returns them. Both are read-only.

Example::

    >>> config = ProxyConfig(upstream="https://api.anthropic.com", log=None)
    >>> config.listen_url
    'http://127.0.0.1:8787'
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import ipaddress
import logging
import math
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit

import attrs
from aiohttp import (
    ClientConnectionError,
    ClientError,
    ClientPayloadError,
    ClientResponse,
    ClientSession,
    ClientTimeout,
    TCPConnector,
    web,
)

from promptkit.capture import RecordLog
from promptkit.errors import ProxyConfigError
from promptkit.formats.fields import loads_json
from promptkit.formats.wire import (
    HttpCaptureError,
    api_from_url,
    decode_body,
    exchange_record,
    is_secret_header,
    redact_text,
    redact_url,
    responses_request_to_chat,
    session_hint,
    url_credentials,
)
from promptkit.formats.wire.sessions import SessionTracker
from promptkit.proxy.live import LiveFigures, render_page

__all__ = [
    "LIVE_PATH",
    "ProxyConfig",
    "ProxyConfigError",
    "ProxyState",
    "RunningProxy",
    "build_app",
    "run_proxy",
    "serve",
]

#: Where the live page and the JSON endpoint are served (never forwarded upstream).
LIVE_PATH: Final[str] = "/_promptkit"

_log = logging.getLogger("promptkit.proxy")
_T = TypeVar("_T")

#: Hop-by-hop headers (RFC 9110 section 7.6.1) and the ones aiohttp sets itself: not forwarded.
_HOP: Final[frozenset[str]] = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host",
     "content-length", "expect"}
)  # fmt: skip
# "expect" (RFC 9110 section 10.1.1): the proxy answered ``100 Continue`` to its client itself and has the
# whole body; sent on, the upstream's client would wait for a second ``100`` that never comes.

#: The most bytes of one answer kept for its record; past it the answer is still relayed whole, and the
#: call is recorded with an ``error`` of kind ``too-large`` and no response body (an endless stream
#: cannot grow the proxy without bound).
MAX_RECORDED_RESPONSE: Final[int] = 64 * 1024 * 1024
#: Headers aiohttp's client adds unless told not to.
_AUTO: Final[tuple[str, ...]] = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")


def _is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _check_upstream(_self: Any, _attr: Any, value: str) -> None:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ProxyConfigError(f"upstream: expected an http:// or https:// URL, got {redact_url(value)!r}")


def _optional_path(value: str | Path | None) -> Path | None:
    return None if value is None else Path(value)


def _check_seconds(_self: Any, attr: Any, value: float) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ProxyConfigError(f"{attr.name}: expected a number of seconds greater than 0, got {value!r}")


@attrs.frozen(slots=True)
class ProxyConfig:
    """How the proxy runs.

    ``upstream`` is the API's base URL (scheme, host and an optional path prefix the request path is
    appended to, e.g. ``https://api.anthropic.com``); ``host``/``port`` where it listens (port 0: any free
    port); ``log`` the JSONL file records are appended to (None: record nothing); ``redact`` regular
    expressions whose matches in recorded bodies become ``[REDACTED]`` (API-key shapes always are);
    ``allow_remote`` must be True to listen on a non-loopback address; ``connect_timeout`` and
    ``read_timeout`` (seconds without a byte from the upstream; finite and greater than 0) bound each
    call; ``client_timeout`` bounds how long a client may take to send its request body (a slow client
    gets ``408``, and holds no worker meanwhile), ``header_timeout`` how long a new connection may take to
    send its first request head (then it is closed), and ``max_connections`` how many connections are
    open at once (one more is closed at once): a client that opens sockets and sends a byte now and then
    (slowloris) cannot take every file descriptor from the callers; ``predict`` runs the analyzer for the live figures with
    the cache rules of ``provider`` (default: inferred).

    Browsers are kept out (:func:`_guard`): a request whose ``Origin`` is not a loopback address (a web
    page's cross-site POST) is refused with ``403``, and so, unless ``allow_remote``, is one whose ``Host``
    is not a loopback name (DNS rebinding): API clients send neither.

    Credentials in ``upstream`` (``https://user:password@host``) are sent upstream as HTTP Basic
    authentication (unless the client sends its own ``Authorization``) and never shown or recorded:
    :attr:`upstream_display` has the password redacted.

    >>> ProxyConfig(upstream="http://me:pw@127.0.0.1:9", log=None).upstream_display
    'http://me:%5BREDACTED%5D@127.0.0.1:9'
    """

    upstream: str = attrs.field(validator=_check_upstream)
    host: str = "127.0.0.1"
    port: int = 8787
    log: Path | None = attrs.field(default=Path("promptkit-proxy.jsonl"), converter=_optional_path)
    redact: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    allow_remote: bool = False
    connect_timeout: float = attrs.field(default=30.0, validator=_check_seconds)
    read_timeout: float = attrs.field(default=600.0, validator=_check_seconds)
    predict: bool = True
    provider: str | None = None
    client_timeout: float = attrs.field(default=60.0, validator=_check_seconds)
    header_timeout: float = attrs.field(default=30.0, validator=_check_seconds)
    max_connections: int = attrs.field(
        default=512,
        validator=attrs.validators.and_(attrs.validators.instance_of(int), attrs.validators.ge(1)),
    )

    def __attrs_post_init__(self) -> None:
        if not self.allow_remote and not _is_loopback(self.host):
            raise ProxyConfigError(
                f"listen: {self.host!r} is not a loopback address; the proxy sees your API keys and prompts, "
                "so listening beyond this machine needs allow_remote=True (--allow-remote)"
            )
        if not 0 <= self.port <= 65535:
            raise ProxyConfigError(f"listen: port {self.port} is out of range")

    @property
    def upstream_display(self) -> str:
        """``upstream`` as it may be shown and recorded: its password redacted."""
        return redact_url(self.upstream)

    @property
    def listen_url(self) -> str:
        """``http://host:port`` the proxy listens on."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


class ProxyState:
    """What a running proxy holds: its config, log, session tracker, live figures and counters."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        try:
            self.log = (
                RecordLog(config.log, redact_patterns=config.redact) if config.log is not None else None
            )
        except Exception as exc:  # a bad pattern
            raise ProxyConfigError(str(exc)) from None
        self.sessions = SessionTracker()
        self.figures = LiveFigures(provider=config.provider, predict=config.predict)
        self.forwarded = 0
        self.unrecorded = 0
        self.refused = 0
        self.client: ClientSession | None = None
        # recording (parsing, redacting and writing bodies) runs on one thread of its own, in arrival
        # order, so a 200 MB body does not stop the event loop serving every other client
        self.recorder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="promptkit-recorder")

        self._recording: set[asyncio.Future[Any]] = set()

    async def off_loop(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` on the recording thread (in submission order), awaited."""
        return await asyncio.get_running_loop().run_in_executor(self.recorder, fn, *args)

    async def record(self, fn: Callable[[], None]) -> None:
        """Run a call's recording ``fn`` on the recording thread; :meth:`drained` waits for it."""
        job = asyncio.ensure_future(self.off_loop(fn))
        self._recording.add(job)
        try:
            await job
        finally:
            self._recording.discard(job)

    async def drained(self, timeout: float | None = None) -> None:
        """Wait until every call whose answer has been relayed is recorded (or counted as unrecorded):
        recording runs off the event loop, so a client that stops reading early may be done a moment
        before its record is written. Calls still streaming are not waited for; ``timeout`` bounds the
        wait (the live page waits at most 2 s)."""
        pending = list(self._recording)
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    def recording(self) -> dict[str, Any]:
        log = self.log
        return {
            "log": str(log.path) if log is not None else None,
            "written": log.written if log is not None else 0,
            "failures": log.failures if log is not None else 0,
            "last_error": log.last_error if log is not None else None,
            "unrecorded": self.unrecorded,
            "too_deep": log.too_deep if log is not None else 0,
            "reopened": log.reopened if log is not None else 0,
            "forwarded": self.forwarded,
            "refused": self.refused,
        }


def _safe_headers(headers: Any) -> dict[str, str]:
    """The request headers a record keeps: no hop-by-hop header, and no header that can carry a
    credential (:func:`~promptkit.formats.wire.redact.is_secret_header`)."""
    out: dict[str, str] = {}
    for name, value in headers.items():
        low = name.lower()
        if low in _HOP or is_secret_header(low):
            continue
        out[low] = value
    return out


def _error_response(status: int, kind: str, message: str) -> web.Response:
    body = {"error": {"type": kind, "message": message, "source": "promptkit-proxy"}}
    return web.json_response(body, status=status)


def _record(
    state: ProxyState,
    *,
    url: str,
    method: str,
    body: bytes,
    headers: Any,
    session: str | None,
    status: int | None,
    response_headers: Any,
    response_body: bytes | None,
    started: float,
    duration: float,
    first_byte: float | None,
    error: dict[str, Any] | None,
) -> None:
    if state.log is None and not state.config.predict:
        return
    response: bytes | None = None
    failure = error
    if response_body is not None:
        try:
            response = decode_body(response_body, response_headers.get("Content-Encoding"))
        except HttpCaptureError as exc:
            failure = failure or {"kind": "undecodable", "message": str(exc)}
    try:
        record = exchange_record(
            url=url, method=method, request_body=body, status=status, response_body=response,
            content_type=response_headers.get("Content-Type") if response_headers is not None else None,
            started=started, duration=duration, session=session, error=failure,
        )  # fmt: skip
    except HttpCaptureError as exc:
        state.unrecorded += 1
        _log.warning(
            "promptkit proxy: %s %s not recorded: %s", method, redact_url(url), redact_text(str(exc))
        )
        return
    if first_byte is not None:
        record["first_byte"] = round(first_byte, 6)
    record["http"]["headers"] = _safe_headers(headers)
    if state.log is not None:
        state.log.append(record)
    state.figures.observe(record, record.get("session") or "unknown")


def _record_safely(state: ProxyState, **kw: Any) -> None:
    """:func:`_record`, never raising: recording must not break forwarding. A call that cannot be
    recorded is counted in ``unrecorded`` and logged."""
    try:
        _record(state, **kw)
    except Exception as exc:  # deliberately broad: the answer has been forwarded; say what was lost
        state.unrecorded += 1
        _log.warning(
            "promptkit proxy: %s %s not recorded: %s: %s",
            kw.get("method"), redact_url(str(kw.get("url"))), type(exc).__name__, redact_text(str(exc)),
        )  # fmt: skip


async def _forward(request: web.Request) -> web.StreamResponse:
    state: ProxyState = request.app[_STATE]
    assert state.client is not None
    started, t0 = time.time(), time.perf_counter()
    try:
        body = await asyncio.wait_for(request.read(), timeout=state.config.client_timeout)
    except TimeoutError:
        state.refused += 1
        return _error_response(
            408, "proxy_client_timeout",
            f"the request body did not arrive within {state.config.client_timeout:g} s (--client-timeout)",
        )  # fmt: skip
    base, user, password = url_credentials(state.config.upstream)
    url = base.rstrip("/") + request.raw_path
    # only POSTs to an API path are calls; a GET of the same path is forwarded and not recorded
    api = api_from_url(request.path) if request.method == "POST" else None
    headers = _upstream_headers(request.headers, user, password)
    skip = [h for h in _AUTO if h not in request.headers]
    state.forwarded += 1
    if api is None:
        return await _exchange(state, request, _Outbound(url, headers, skip, body, t0), None)
    session = await state.off_loop(_session_of, state, api, request.headers, body)

    async def record(**kw: Any) -> None:
        kw.update(url=url, method=request.method, body=body, headers=request.headers, session=session,
                  started=started, duration=time.perf_counter() - t0)  # fmt: skip
        await state.record(functools.partial(_record_safely, state, **kw))

    return await _exchange(state, request, _Outbound(url, headers, skip, body, t0), record)


@attrs.frozen
class _Outbound:
    """The request as it goes upstream: URL, headers, the auto headers to skip, body, and when it came
    (``perf_counter``)."""

    url: str
    headers: list[tuple[str, str]]
    skip: list[str]
    body: bytes
    t0: float


async def _exchange(
    state: ProxyState,
    request: web.Request,
    out: _Outbound,
    record: Callable[..., Awaitable[None]] | None,
) -> web.StreamResponse:
    """Send the request upstream and relay the answer; ``record`` (None: not a call) records it."""
    assert state.client is not None
    try:
        upstream = await state.client.request(
            request.method, out.url, headers=out.headers, data=out.body or None, skip_auto_headers=out.skip,
            allow_redirects=False, compress=None,
        )  # fmt: skip
    except (TimeoutError, ClientError) as exc:
        answer, failure = _unreachable(state.config, exc)
        if record is not None:
            await record(
                status=None, response_headers=None, response_body=None, first_byte=None, error=failure
            )
        return answer
    first_byte = time.perf_counter() - out.t0
    response = _response_head(upstream)
    relayed = await _relay(request, response, upstream, keep=record is not None)
    if record is not None:
        kept = None if relayed.chunks is None else b"".join(relayed.chunks)
        await record(status=upstream.status, response_headers=upstream.headers, response_body=kept,
                     first_byte=first_byte, error=relayed.error)  # fmt: skip
    if relayed.error is not None and relayed.error["kind"] != "too-large":
        # pass the drop on: the client must see a broken response, as it came from the upstream
        if relayed.held and relayed.error["kind"] == "stream-dropped":
            with contextlib.suppress(ConnectionError, ClientConnectionError):
                await response.write(relayed.held)
        if request.transport is not None:
            request.transport.close()
        return response
    with contextlib.suppress(ConnectionError, ClientConnectionError):
        if relayed.held:
            await response.write(relayed.held)
        await response.write_eof()
    return response


def _session_of(state: ProxyState, api: str | None, headers: Any, body: bytes) -> str | None:
    """The session of an API call (None for anything else, and for a body that is not JSON)."""
    if api is None:
        return None
    try:
        parsed = loads_json(body.decode("utf-8", "replace"))
        chat = responses_request_to_chat(parsed) if api == "openai-responses" else parsed
        return state.sessions.assign(chat, session_hint(headers, parsed))
    except (ValueError, HttpCaptureError, AttributeError, TypeError, RecursionError):
        return None  # not JSON, or nested too deep: forwarded all the same, reported when recorded


def _upstream_headers(headers: Any, user: str | None, password: str | None) -> list[tuple[str, str]]:
    """The client's headers but the hop-by-hop ones, plus the upstream URL's credentials if any."""
    out = [(k, v) for k, v in headers.items() if k.lower() not in _HOP]
    if user is not None and "Authorization" not in headers:
        # the upstream URL's credentials, sent the way aiohttp would send them, unless the client sent
        # its own (aiohttp refuses both at once)
        token = base64.b64encode(f"{user}:{password or ''}".encode()).decode("ascii")
        out.append(("Authorization", f"Basic {token}"))  # RFC 7617
    return out


def _unreachable(config: ProxyConfig, exc: Exception) -> tuple[web.Response, dict[str, Any]]:
    """A timeout (504) or a connection that failed (502) before any answer: the JSON ``error`` answer,
    and the error its record carries."""
    if isinstance(exc, TimeoutError):
        message = (
            f"upstream {config.upstream_display} did not answer within the timeout ({exc.__class__.__name__})"
        )
        return _error_response(504, "proxy_upstream_timeout", message), {
            "kind": "timeout",
            "message": message,
        }
    message = f"cannot reach upstream {config.upstream_display}: {redact_text(str(exc))}"
    answer = _error_response(502, "proxy_upstream_unreachable", message)
    return answer, {"kind": "connection", "message": message}


def _response_head(upstream: ClientResponse) -> web.StreamResponse:
    """The response to the client: the upstream's status and headers but the hop-by-hop ones."""
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
    for name, value in upstream.headers.items():
        if name.lower() not in _HOP:
            response.headers.add(name, value)
    chunked = "chunked" in upstream.headers.get("Transfer-Encoding", "").lower()
    if upstream.content_length is not None and not chunked:
        response.content_length = upstream.content_length
    return response


@attrs.define
class _Relayed:
    """What :func:`_relay` leaves: the chunks kept for the record (None when not kept, or when the answer
    outgrew :data:`MAX_RECORDED_RESPONSE`), the error of a stream that broke on either side or grew too
    large to record (None when it went through whole), and, for an answer of known length, its last chunk,
    not sent yet: it goes once the call is recorded, so a client that has its whole answer finds the call
    recorded (a chunked answer, a stream, is sent as it comes: its end is the terminating chunk, sent
    after the record)."""

    chunks: list[bytes] | None
    error: dict[str, Any] | None
    held: bytes = b""


async def _relay(
    request: web.Request, response: web.StreamResponse, upstream: ClientResponse, *, keep: bool
) -> _Relayed:
    """Stream the upstream's body to the client chunk by chunk, all but the last (see :class:`_Relayed`)."""
    chunks: list[bytes] | None = [] if keep else None
    size = 0
    held = b""
    hold = response.content_length is not None
    dropped: str | None = None
    client_gone = False
    try:
        await response.prepare(request)
        async for chunk in upstream.content.iter_any():
            if chunks is not None:
                size += len(chunk)
                chunks.append(chunk)
                if size > MAX_RECORDED_RESPONSE:  # relayed on, no longer kept
                    chunks = None
            try:
                if held:
                    await response.write(held)
                held = chunk
                if not hold:
                    await response.write(held)
                    held = b""
            except (ConnectionError, ClientConnectionError):
                client_gone = True
                break
    except (ClientPayloadError, ClientConnectionError, TimeoutError) as exc:
        dropped = f"the upstream connection broke mid-response: {exc.__class__.__name__}: {exc}"
    finally:
        upstream.release() if dropped is None and not client_gone else upstream.close()
    if dropped is not None:
        return _Relayed(chunks, {"kind": "stream-dropped", "message": dropped}, held)
    if client_gone:
        gone = {"kind": "client-disconnected", "message": "the client closed the connection mid-response"}
        return _Relayed(chunks, gone)
    if keep and chunks is None:
        large = f"the answer was relayed whole but is over {MAX_RECORDED_RESPONSE:,} bytes: not kept"
        return _Relayed(None, {"kind": "too-large", "message": large}, held)
    return _Relayed(chunks, None, held)


async def _live_page(request: web.Request) -> web.Response:
    state: ProxyState = request.app[_STATE]
    await state.drained(timeout=2.0)  # a call already answered shows on the page
    recording = state.recording()
    page = render_page(
        state.figures.snapshot(),
        upstream=state.config.upstream_display,
        log=recording["log"],
        recording=recording,
    )
    return web.Response(text=page, content_type="text/html", headers={"Cache-Control": "no-store"})


async def _live_json(request: web.Request) -> web.Response:
    state: ProxyState = request.app[_STATE]
    await state.drained(timeout=2.0)  # a call already answered is counted
    data = {
        "upstream": state.config.upstream_display,
        "recording": state.recording(),
        **state.figures.snapshot(),
    }
    return web.json_response(data, headers={"Cache-Control": "no-store"})


async def _live_redirect(request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound(LIVE_PATH + "/")


async def _read_only(request: web.Request) -> web.Response:
    return web.Response(
        status=405, text="the promptkit live page is read-only\n", headers={"Allow": "GET, HEAD"}
    )


_STATE: Final = web.AppKey("promptkit_proxy_state", ProxyState)


def _loopback_origin(origin: str) -> bool:
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.hostname is not None and _is_loopback(parts.hostname)


@web.middleware
async def _guard(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
    """Keep browsers out: the proxy forwards with the user's credentials, so a web page must not reach it.

    - ``Origin`` (sent by browsers, never by API clients) that is not a loopback origin: a page on
      another site posting here (CSRF): ``403``;
    - ``Host`` that is not a loopback name while the proxy listens on loopback only: a page whose name
      was rebound to 127.0.0.1 (DNS rebinding): ``403``.
    """
    state: ProxyState = request.app[_STATE]
    origin = request.headers.get("Origin")
    if origin is not None and not _loopback_origin(origin):
        state.refused += 1
        return _error_response(
            403, "proxy_forbidden_origin", f"requests from a web page ({origin}) are refused"
        )
    host = request.headers.get("Host")
    if host is not None and not state.config.allow_remote:
        name = urlsplit(f"//{host}").hostname
        if name is None or not _is_loopback(name):
            state.refused += 1
            return _error_response(
                403,
                "proxy_forbidden_host",
                f"Host {host!r} is not this machine (the proxy listens on loopback)",
            )
    response: web.StreamResponse = await handler(request)
    return response


def build_app(config: ProxyConfig) -> web.Application:
    """The aiohttp application of a proxy with ``config`` (use :func:`serve` to run it).

    >>> app = build_app(ProxyConfig(upstream="http://127.0.0.1:9", log=None))
    >>> sorted({r.method for r in app.router.routes()})
    ['*', 'GET', 'HEAD']
    """
    state = ProxyState(config)
    app = web.Application(client_max_size=512 * 1024 * 1024, middlewares=[_guard])
    app[_STATE] = state

    async def start_client(app: web.Application) -> None:
        timeout = ClientTimeout(total=None, connect=config.connect_timeout, sock_read=config.read_timeout)
        state.client = ClientSession(
            timeout=timeout, auto_decompress=False, connector=TCPConnector(limit=0), trust_env=False,
            skip_auto_headers=(),
        )  # fmt: skip

    async def stop_client(app: web.Application) -> None:
        if state.client is not None:
            await state.client.close()
        await asyncio.get_running_loop().run_in_executor(None, state.recorder.shutdown)  # records finish
        state.figures.close()
        if state.log is not None:
            state.log.close()

    app.on_startup.append(start_client)
    app.on_cleanup.append(stop_client)
    app.router.add_get(LIVE_PATH, _live_redirect)
    app.router.add_get(LIVE_PATH + "/", _live_page)
    app.router.add_get(LIVE_PATH + "/stats.json", _live_json)
    app.router.add_route("*", LIVE_PATH + "/{tail:.*}", _read_only)
    app.router.add_route("*", "/{tail:.*}", _forward)
    return app


@attrs.frozen(slots=True)
class RunningProxy:
    """A proxy started by :func:`serve`: the ``url`` it listens on and its ``state``."""

    url: str
    state: ProxyState


@contextlib.asynccontextmanager
async def serve(config: ProxyConfig) -> AsyncIterator[RunningProxy]:
    """Run a proxy in the current event loop while the ``async with`` block runs (port 0 picks a free one).

    Example (no request is sent, so the upstream is never contacted)::

        >>> async def main() -> None:
        ...     async with serve(ProxyConfig(upstream="https://api.openai.com", port=0)) as proxy:
        ...         print(proxy.url)
        >>> asyncio.run(main())
        http://127.0.0.1:...
    """
    app = build_app(config)
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    server: asyncio.Server | None = None
    try:
        gate = _Gate(config.max_connections, config.header_timeout, app[_STATE])
        handler = runner.server
        assert handler is not None
        server = await asyncio.get_running_loop().create_server(
            lambda: _HeadGuard(handler(), gate), config.host, config.port, reuse_address=True
        )
        host, port = server.sockets[0].getsockname()[:2]
        host = f"[{host}]" if ":" in host else host
        yield RunningProxy(f"http://{host}:{port}", app[_STATE])
    finally:
        if server is not None:
            server.close()
        await runner.cleanup()
        if server is not None:
            await server.wait_closed()


@attrs.define
class _Gate:
    """The connections open now, against ``limit``; how long a new one may take to send its first head."""

    limit: int
    head_timeout: float
    state: ProxyState
    open: int = 0


class _HeadGuard(asyncio.Protocol):
    """aiohttp's request handler behind a gate: at most ``gate.limit`` connections at once (one more is
    closed at once, counted in ``refused``), and a connection whose first request head (up to its blank
    line) has not come within ``gate.head_timeout`` seconds is closed (counted too). aiohttp bounds none
    of these itself: without them slow sockets take every file descriptor (slowloris)."""

    def __init__(self, inner: asyncio.Protocol, gate: _Gate) -> None:
        self.inner, self.gate = inner, gate
        self.transport: asyncio.BaseTransport | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.tail = b""
        self.admitted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        if self.gate.open >= self.gate.limit:
            self.gate.state.refused += 1
            transport.close()
            return
        self.admitted = True
        self.gate.open += 1
        self.inner.connection_made(transport)
        self.timer = asyncio.get_running_loop().call_later(self.gate.head_timeout, self._too_slow)

    def _too_slow(self) -> None:
        self.timer = None
        self.gate.state.refused += 1
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.timer is not None:
            seen = self.tail + data
            if b"\r\n\r\n" in seen:  # the first head is complete: aiohttp takes it from here
                self.timer.cancel()
                self.timer = None
            self.tail = seen[-3:]
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.admitted else None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.admitted:
            self.admitted = False
            self.gate.open -= 1
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


def run_proxy(config: ProxyConfig, *, out: Callable[[str], None] | None = None) -> None:
    """Run the proxy until interrupted (Ctrl-C or SIGTERM); print where it listens.

    Example (not run with the other examples: it serves until interrupted)::

        >>> run_proxy(ProxyConfig(upstream="https://api.anthropic.com"))  # doctest: +SKIP
        promptkit proxy on http://127.0.0.1:8787 -> https://api.anthropic.com
    """
    say = out or (lambda text: print(text, file=sys.stderr, flush=True))

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        async with serve(config) as proxy:
            say(f"promptkit proxy on {proxy.url} -> {config.upstream_display}")
            say(f"  log: {config.log or 'off (nothing recorded)'}")
            say(f"  live figures: {proxy.url}{LIVE_PATH}/  (JSON: {proxy.url}{LIVE_PATH}/stats.json)")
            await stop.wait()
            say("promptkit proxy: stopping")

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
