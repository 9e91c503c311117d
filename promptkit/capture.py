"""Live capture: record every call an ``openai`` or ``anthropic`` client makes, as promptkit log records.

:func:`capture` wraps a client's HTTP transport (the SDKs' ``http_client``). While the app runs, every
call to the Messages, Chat Completions or Responses API is appended to a JSONL file as one whole record
(:func:`promptkit.formats.wire.record.exchange_record`): the request body exactly as sent, the whole
response (a streamed one reassembled while the client still reads the stream unchanged), timestamps,
durations and, when the prompt was built by promptkit, its layout (:meth:`Recorder.layout`). Nothing
sent or received is changed; credentials (headers) are never written.

Example (no network here: the client would call the API)::

    >>> import openai                                                          # doctest: +SKIP
    >>> from promptkit.capture import capture                                  # doctest: +SKIP
    >>> recorder = capture(openai.OpenAI(), "calls.jsonl", session="run-1")   # doctest: +SKIP
    >>> client = recorder.client                                               # doctest: +SKIP
    >>> with recorder.layout(prompt):                                          # doctest: +SKIP
    ...     client.chat.completions.create(model="gpt-4o", messages=openai_request(prompt, model="gpt-4o")["messages"])
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import errno
import json
import logging
import os
import re
import sys
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any

from promptkit.errors import CaptureError, LogFileError
from promptkit.formats.fields import loads_json
from promptkit.formats.wire import (
    MAX_DEPTH,
    SECRET_PATTERNS,
    HttpCaptureError,
    api_from_url,
    decode_body,
    exchange_record,
    is_event_stream,
    redact_counted,
    redact_text,
    redact_url,
    session_hint,
)

__all__ = [
    "AsyncCaptureTransport",
    "CaptureError",
    "CaptureTransport",
    "LayoutMismatchWarning",
    "RecordLog",
    "Recorder",
    "capture",
    "layout_of",
]

_log = logging.getLogger("promptkit.capture")
#: Never follow a symbolic link to the log (a link planted at the log's path would send prompts elsewhere).
_NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)


def _compile(patterns: Sequence[str | re.Pattern[str]], *, defaults: bool) -> tuple[re.Pattern[str], ...]:
    out: list[re.Pattern[str]] = [re.compile(p) for p in SECRET_PATTERNS] if defaults else []
    for p in patterns:
        try:
            out.append(p if isinstance(p, re.Pattern) else re.compile(p))
        except re.error as exc:
            raise CaptureError(f"redaction pattern {p!r}: {exc}") from None
    return tuple(out)


class RecordLog:
    """An append-only JSONL log that never holds half a record.

    Each record is serialized first (bodies redacted with the key patterns
    :data:`~promptkit.formats.wire.redact.SECRET_PATTERNS`, secret fields such as ``api_key``, and
    ``redact`` patterns; see :func:`~promptkit.formats.wire.redact.redact_counted`), then written with
    one ``write`` on a file opened with ``O_APPEND`` (mode 0600; an existing log readable by others is made
    0600, with a warning; a path that is a symbolic link is refused, not followed): a record is on disk
    whole or not at all. A log removed or replaced while it is written (rotation, ``rm``) is noticed at the
    next record, which starts a new file at the path (counted in ``reopened``, and logged).
    A part of a record nested deeper than :data:`~promptkit.formats.wire.redact.MAX_DEPTH` levels is
    written as a ``[REDACTED: nested deeper than ...]`` marker, counted in ``too_deep`` and logged. A
    short write (disk full) is cut back off the file; if even that fails the next record starts on a new
    line, and so does the first record written to a file whose last line was torn by a crash: one torn
    line is all a reader ever meets (a counted problem), and the records after it are intact. A failure never raises: ``append`` returns
    False, counts it in ``failures``, keeps the message in ``last_error`` and logs it loudly (the
    ``promptkit.capture`` logger, and stderr); the next record tries again.

    >>> import tempfile, pathlib
    >>> log = RecordLog(pathlib.Path(tempfile.mkdtemp()) / "calls.jsonl")
    >>> log.append({"request": {"messages": [], "api_key": "sk-0123456789abcdefghijKLMN"}})
    True
    >>> log.path.read_text()
    '{"request": {"messages": [], "api_key": "[REDACTED]"}}\\n'
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        redact_patterns: Sequence[str | re.Pattern[str]] = (),
        redact_keys: bool = True,
        on_failure: Callable[[str], None] | None = None,
    ) -> None:
        from pathlib import Path

        self.path = Path(path)
        self.patterns = _compile(redact_patterns, defaults=redact_keys)
        self.written = 0
        self.failures = 0
        self.too_deep = 0
        self.last_error: str | None = None
        self._on_failure = on_failure
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._torn = False
        self.reopened = 0

    def _open(self) -> int:
        if self._fd is not None and self._moved(self._fd):
            # removed or replaced while we write (log rotation, a user's rm): writing on would put the
            # records in a file nobody can open any more; start the file again at its path
            os.close(self._fd)
            self._fd = None
            self.reopened += 1
            _log.warning(
                "promptkit: %s was removed or replaced while recording; writing a new file there", self.path
            )
        if self._fd is None:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | _NOFOLLOW, 0o600)
            except PermissionError:  # a log we may append to but not read: no torn line to look for
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW, 0o600)
                return self._fd
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise LogFileError(
                        self.path,
                        "is a symbolic link: a log of API calls is not written through one (give its real path)",
                    ) from None
                raise
            self._private(fd)
            try:
                size = os.fstat(fd).st_size
                # a crash may have left the last line torn: start on a fresh line, not glued onto it
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    self._torn = True
            except OSError:
                os.close(fd)
                raise
            self._fd = fd
        return self._fd

    def _moved(self, fd: int) -> bool:
        """Whether the open file is no longer the one at ``path`` (removed, or replaced by another)."""
        try:
            at = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return True
        mine = os.fstat(fd)
        return (at.st_ino, at.st_dev) != (mine.st_ino, mine.st_dev)

    def _private(self, fd: int) -> None:
        """Make an existing log readable by its owner only (prompts and answers are in it), as a new one is."""
        mode = os.fstat(fd).st_mode
        if os.name == "posix" and mode & 0o077:
            try:
                os.fchmod(fd, 0o600)
                _log.warning(
                    "promptkit: %s was readable by others (mode %o); it is now 0600", self.path, mode & 0o777
                )
            except OSError as exc:  # not ours: say so, write all the same
                _log.warning(
                    "promptkit: %s is readable by others and cannot be made private: %s", self.path, exc
                )

    def _fail(self, reason: str) -> bool:
        self.failures += 1
        self.last_error = reason
        message = (
            f"promptkit: RECORDING FAILED ({self.failures} so far): {reason}; the call itself went through"
        )
        _log.error(message)
        print(message, file=sys.stderr, flush=True)
        if self._on_failure is not None:
            self._on_failure(reason)
        return False

    def append(self, record: Mapping[str, Any]) -> bool:
        """Write one record as one line; True when it is on disk, False (reported) when it is not."""
        try:
            clean, cut = redact_counted(record, self.patterns)
            line = json.dumps(clean, ensure_ascii=False, allow_nan=False) + "\n"
        except (TypeError, ValueError, RecursionError) as exc:
            return self._fail(f"{self.path}: record is not JSON-serializable: {exc}")
        if cut:
            with self._lock:
                self.too_deep += 1
            _log.warning(
                "promptkit: %s: a record had %d part(s) nested deeper than %d levels; written as markers",
                self.path, cut, MAX_DEPTH,
            )  # fmt: skip
        data = line.encode("utf-8")
        with self._lock:
            try:
                fd = self._open()
                if self._torn:
                    os.write(fd, b"\n")
                    self._torn = False
                size = os.fstat(fd).st_size
                written = os.write(fd, data)
                if written != len(data):
                    try:
                        os.ftruncate(fd, size)
                    except OSError:
                        self._torn = True
                    raise LogFileError(self.path, f"short write ({written} of {len(data)} bytes)")
            except OSError as exc:
                if self._fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(self._fd)
                    self._fd = None
                return self._fail(
                    str(exc) if isinstance(exc, LogFileError) else f"{self.path}: {exc.strerror or exc}"
                )
            self.written += 1
            return True

    def close(self) -> None:
        """Close the file (the next ``append`` reopens it)."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


# ---------------------------------------------------------------------------------------------------
# layouts


class LayoutMismatchWarning(UserWarning):
    """The layout attached with :meth:`Recorder.layout` does not align with the request's messages; the
    call is recorded without it."""


def layout_of(prompt_or_layout: Any) -> list[dict[str, Any]]:
    """The layout entries ``[{"slot", "key"}, ...]`` of an ``AssembledPrompt`` (one per message of the
    OpenAI / DeepSeek body built from it, as :func:`promptkit.request_record` writes them), or of a list of
    ``{"slot", "key"}`` mappings / ``(slot, key)`` pairs / layout entries given as they are.

    >>> layout_of([("identity", "persona.card"), {"slot": "current", "key": None}])
    [{'slot': 'identity', 'key': 'persona.card'}, {'slot': 'current', 'key': None}]
    """
    if hasattr(prompt_or_layout, "messages") and hasattr(prompt_or_layout, "layout"):
        from promptkit.providers.record import request_record
        from promptkit.providers.registry import GENERIC_PROVIDER

        record = request_record(prompt_or_layout, provider=GENERIC_PROVIDER, model="layout")
        return list(record.get("layout") or [])
    out: list[dict[str, Any]] = []
    for k, item in enumerate(prompt_or_layout):
        if isinstance(item, Mapping):
            slot, key = item.get("slot"), item.get("key")
        elif isinstance(item, tuple) and len(item) == 2:
            slot, key = item
        else:
            slot, key = getattr(item, "slot", None), getattr(item, "key", None)
        slot = getattr(slot, "value", slot)
        if not isinstance(slot, str) or not slot:
            raise CaptureError(f"layout[{k}].slot: expected a non-empty string, got {slot!r}")
        out.append({"slot": slot, "key": key if key is None else str(key)})
    return out


def _aligned(layout: list[dict[str, Any]], body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    if len(layout) == len(messages):
        return layout
    extra = len(layout) - len(messages)
    if extra > 0 and body.get("system"):  # Anthropic: the system messages went to the top-level system
        return layout[extra:]
    return None


# ---------------------------------------------------------------------------------------------------
# the recorder and its transports


_LAYOUT: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar(
    "promptkit_layout", default=None
)


class Recorder:
    """What :func:`capture` returns: the wrapped ``client`` (the same object), its :class:`RecordLog`
    ``log``, and :meth:`layout` to attach a promptkit layout to the calls made inside a ``with`` block."""

    def __init__(self, client: Any, log: RecordLog, session: str | None) -> None:
        from promptkit.formats.wire.sessions import SessionTracker

        self.client = client
        self.log = log
        self.session = session
        self._tracker = SessionTracker()
        self._tracker_lock = threading.Lock()
        #: calls that were made but could not be recorded (each one logged)
        self.unrecorded = 0
        # calls whose answer is still being read: at exit, one never read to its end is recorded as such
        self._open: set[_Call] = set()
        _OPEN_RECORDERS.add(self)

    def _finish_open(self) -> None:
        """Record every call whose stream was never read to its end nor closed (at interpreter exit, while
        the modules a record needs are still there), as ``stream-not-closed``."""
        with self._tracker_lock:
            calls = list(self._open)
        for call in calls:
            call.finish(
                {"kind": "stream-not-closed",
                 "message": "the process ended before the client read the answer to its end or closed it"}
            )  # fmt: skip

    @contextlib.contextmanager
    def layout(self, prompt_or_layout: Any) -> Iterator[list[dict[str, Any]]]:
        """Attach the layout of ``prompt_or_layout`` (an ``AssembledPrompt`` or layout entries, see
        :func:`layout_of`) to every call made inside the block (in this thread or task)."""
        entries = layout_of(prompt_or_layout)
        token = _LAYOUT.set(entries)
        try:
            yield entries
        finally:
            _LAYOUT.reset(token)

    # called by the transports ----------------------------------------------------------------------

    def _unrecorded(self, url: str, reason: str) -> None:
        with self._tracker_lock:
            self.unrecorded += 1
        _log.warning("promptkit.capture: %s not recorded: %s", redact_url(url), redact_text(reason))

    def _begin_safely(self, request: Any) -> _Call | None:
        """:meth:`_begin`, never raising: a request promptkit cannot read is sent all the same, and
        counted as unrecorded."""
        try:
            return self._begin(request)
        except Exception as exc:  # deliberately broad: the user's call must go through
            if getattr(request, "method", None) == "POST" and api_from_url(str(request.url)) is not None:
                self._unrecorded(str(request.url), f"{type(exc).__name__}: {exc}")
            return None

    def _begin(self, request: Any) -> _Call | None:
        if request.method != "POST" or api_from_url(str(request.url)) is None:
            return None
        try:
            body = bytes(request.content)
        except Exception:  # a streaming upload: not an LLM call body
            return None
        try:
            parsed = loads_json(body.decode("utf-8", "replace"))
        except ValueError:  # JSONDecodeError: not JSON, or nested too deep to parse
            parsed = None
        session = self.session
        layout = None
        if isinstance(parsed, Mapping):
            session = session or session_hint(request.headers, parsed)
            if session is None:
                from promptkit.formats.wire import responses_request_to_chat

                try:
                    chat = responses_request_to_chat(parsed) if "input" in parsed else parsed
                    with self._tracker_lock:
                        session = self._tracker.assign(chat)
                except (HttpCaptureError, RecursionError):
                    session = None
            entries = _LAYOUT.get()
            if entries is not None:
                layout = _aligned(entries, parsed)
                if layout is None:
                    import warnings

                    count = len(parsed.get("messages") or [])
                    warnings.warn(
                        f"promptkit.capture: the attached layout has {len(entries)} entries for {count} request "
                        "messages; the call is recorded without a layout",
                        LayoutMismatchWarning,
                        stacklevel=2,
                    )
        call = _Call(self, str(request.url), body, session, layout)
        with self._tracker_lock:
            self._open.add(call)
        return call


class _Call:
    """One call in flight: collects the response bytes and writes the record once."""

    def __init__(self, recorder: Recorder, url: str, body: bytes, session: str | None, layout: Any) -> None:
        self.recorder = recorder
        self.url = url
        self.body = body
        self.session = session
        self.layout = layout
        self.started = time.time()
        self.t0 = time.perf_counter()
        self.first_byte: float | None = None
        self.status: int | None = None
        self.headers: Any = None
        self.chunks: list[bytes] = []
        self.done = False

    def answered(self, response: Any) -> None:
        self.first_byte = time.perf_counter() - self.t0
        self.status = response.status_code
        self.headers = response.headers

    def closed_early(self) -> None:
        """The client closed the response before its end: an SSE client stops at the final event (the
        reassembly judges whether it came), anything else was cut off."""
        if self.headers is not None and is_event_stream(self.headers.get("content-type")):
            self.finish()
        else:
            self.finish(
                {"kind": "client-disconnected", "message": "the client closed the response before its end"}
            )

    def finish(self, error: Mapping[str, Any] | None = None) -> None:
        """Write the call's record once; never raises (the user's call must not fail because of promptkit):
        a call that cannot be recorded is counted in the recorder's ``unrecorded`` and logged."""
        if self.done:
            return
        self.done = True
        with self.recorder._tracker_lock:
            self.recorder._open.discard(self)
        try:
            self._write(error)
        except Exception as exc:  # deliberately broad: recording must never break the user's call
            self.recorder._unrecorded(self.url, f"{type(exc).__name__}: {exc}")

    def _write(self, error: Mapping[str, Any] | None) -> None:
        response: bytes | None = None
        failure = dict(error) if error is not None else None
        if self.headers is not None:
            try:
                response = decode_body(b"".join(self.chunks), self.headers.get("content-encoding"))
            except HttpCaptureError as exc:
                failure = failure or {"kind": "undecodable", "message": str(exc)}
        try:
            record = exchange_record(
                url=self.url, request_body=self.body, status=self.status, response_body=response,
                content_type=self.headers.get("content-type") if self.headers is not None else None,
                started=self.started, duration=time.perf_counter() - self.t0, session=self.session,
                error=failure, layout=self.layout,
            )  # fmt: skip
        except HttpCaptureError as exc:
            self.recorder._unrecorded(self.url, str(exc))
            return
        if self.first_byte is not None:
            record["first_byte"] = round(self.first_byte, 6)
        self.recorder.log.append(record)


#: Every recorder still alive, for the exit hook (:func:`_finish_open_calls`).
_OPEN_RECORDERS: weakref.WeakSet[Recorder] = weakref.WeakSet()


@atexit.register
def _finish_open_calls() -> None:
    """At interpreter exit, record the calls whose streams were never read to their end nor closed: after
    exit the modules a record needs are gone (a record written from a finalizer then failed with an
    ImportError and nothing was written)."""
    for recorder in list(_OPEN_RECORDERS):
        recorder._finish_open()
        recorder.log.close()


def _error_of(exc: BaseException) -> dict[str, Any]:
    name = type(exc).__name__
    kind = "timeout" if "Timeout" in name else "connection"
    return {"kind": kind, "message": f"{name}: {exc}"}


_STREAM_CLASSES: dict[tuple[str, bool], type] = {}


def _tee_class(module: Any, asynchronous: bool) -> type:
    """A byte stream of ``module`` (httpx or httpx2) that passes chunks on and keeps a copy."""
    key = (module.__name__, asynchronous)
    cls = _STREAM_CLASSES.get(key)
    if cls is not None:
        return cls
    if asynchronous:

        class AsyncTee(module.AsyncByteStream):  # type: ignore[misc]
            def __init__(self, inner: Any, call: _Call) -> None:
                self.inner, self.call, self.ended = inner, call, False

            async def __aiter__(self) -> AsyncIterator[bytes]:
                try:
                    async for chunk in self.inner:
                        self.call.chunks.append(bytes(chunk))
                        yield chunk
                except BaseException as exc:
                    self.call.finish({"kind": "stream-dropped", "message": f"{type(exc).__name__}: {exc}"})
                    raise
                self.ended = True
                self.call.finish()

            async def aclose(self) -> None:
                try:
                    await self.inner.aclose()
                finally:
                    if not self.ended:
                        self.call.closed_early()

        cls = AsyncTee
    else:

        class SyncTee(module.SyncByteStream):  # type: ignore[misc]
            def __init__(self, inner: Any, call: _Call) -> None:
                self.inner, self.call, self.ended = inner, call, False

            def __iter__(self) -> Iterator[bytes]:
                try:
                    for chunk in self.inner:
                        self.call.chunks.append(bytes(chunk))
                        yield chunk
                except BaseException as exc:
                    self.call.finish({"kind": "stream-dropped", "message": f"{type(exc).__name__}: {exc}"})
                    raise
                self.ended = True
                self.call.finish()

            def close(self) -> None:
                try:
                    self.inner.close()
                finally:
                    if not self.ended:
                        self.call.closed_early()

        cls = SyncTee
    _STREAM_CLASSES[key] = cls
    return cls


def _module_of(obj: Any) -> Any:
    return sys.modules[type(obj).__module__.split(".")[0]]


def _recorded(request: Any, response: Any, call: Any, *, is_async: bool) -> Any:
    """``response``, its stream recorded into ``call`` as the client reads it (one already in memory, a
    mock or a cached answer, is recorded at once); shared by the sync and async transports."""
    call.answered(response)
    module = _module_of(request)
    if isinstance(response.stream, module.ByteStream):
        call.chunks.append(bytes(b"".join(response.stream)))
        call.finish()
    else:
        response.stream = _tee_class(module, is_async)(response.stream, call)
    return response


class CaptureTransport:
    """An httpx / httpx2 transport that records each LLM call through ``inner`` with ``recorder``.

    Use it to build your own ``http_client`` (``httpx2.Client(transport=CaptureTransport(httpx2.HTTPTransport(),
    recorder))``); :func:`capture` installs it for you.
    """

    def __init__(self, inner: Any, recorder: Recorder) -> None:
        self.inner = inner
        self.recorder = recorder

    def handle_request(self, request: Any) -> Any:
        call = self.recorder._begin_safely(request)
        if call is None:
            return self.inner.handle_request(request)
        try:
            response = self.inner.handle_request(request)
        except Exception as exc:
            call.finish(_error_of(exc))
            raise
        return _recorded(request, response, call, is_async=False)

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> CaptureTransport:
        self.inner.__enter__()
        return self

    def __exit__(self, *args: Any) -> None:
        self.inner.__exit__(*args)


class AsyncCaptureTransport:
    """The asynchronous :class:`CaptureTransport`."""

    def __init__(self, inner: Any, recorder: Recorder) -> None:
        self.inner = inner
        self.recorder = recorder

    async def handle_async_request(self, request: Any) -> Any:
        call = self.recorder._begin_safely(request)
        if call is None:
            return await self.inner.handle_async_request(request)
        try:
            response = await self.inner.handle_async_request(request)
        except Exception as exc:
            call.finish(_error_of(exc))
            raise
        return _recorded(request, response, call, is_async=True)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> AsyncCaptureTransport:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *args: Any) -> None:
        await self.inner.__aexit__(*args)


def capture(
    client: Any,
    log: str | os.PathLike[str] | RecordLog,
    *,
    session: str | None = None,
    redact: Sequence[str | re.Pattern[str]] = (),
) -> Recorder:
    """Record every Messages / Chat Completions / Responses call ``client`` makes into the JSONL ``log``.

    ``client`` is an ``openai`` or ``anthropic`` client, sync or async (or an ``httpx`` / ``httpx2``
    client): its HTTP transport (and those of its mounts) is wrapped in place, so the client is used as
    before. ``session`` names the session of every call (default: the ``x-promptkit-session`` header,
    else prefix affinity as in the proxy); ``redact`` adds patterns to blank out of recorded bodies.

    >>> import httpx2, json, tempfile, pathlib
    >>> def api(request):
    ...     return httpx2.Response(200, json={"choices": [{"message": {"role": "assistant", "content": "hi"}}],
    ...                                       "usage": {"prompt_tokens": 5, "completion_tokens": 1}})
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "calls.jsonl"
    >>> http = httpx2.Client(transport=httpx2.MockTransport(api))
    >>> recorder = capture(http, path, session="demo")
    >>> http.post("https://api.openai.com/v1/chat/completions", json={"model": "gpt-4o", "messages": []}).json()["choices"][0]["message"]["content"]
    'hi'
    >>> record = json.loads(path.read_text())
    >>> record["session"], record["response"]["usage"]["prompt_tokens"]
    ('demo', 5)
    """
    record_log = log if isinstance(log, RecordLog) else RecordLog(log, redact_patterns=redact)
    http = getattr(client, "_client", client)  # the SDKs keep their httpx client here
    if not hasattr(http, "_transport"):
        raise CaptureError(
            f"capture: cannot find the HTTP transport of {type(client).__name__}; pass an openai / anthropic "
            "client or an httpx client"
        )
    recorder = Recorder(client, record_log, session)
    asynchronous = hasattr(http, "aclose")  # httpx.AsyncClient (a sync Client has close only)
    wrap: Callable[[Any], Any] = (
        (lambda t: AsyncCaptureTransport(t, recorder))
        if asynchronous
        else (lambda t: CaptureTransport(t, recorder))
    )
    if isinstance(http._transport, CaptureTransport | AsyncCaptureTransport):
        raise CaptureError("capture: this client is already being captured")
    http._transport = wrap(http._transport)
    mounts = getattr(http, "_mounts", None)
    if isinstance(mounts, dict):
        for pattern, transport in list(mounts.items()):
            if transport is not None:
                mounts[pattern] = wrap(transport)
    return recorder
