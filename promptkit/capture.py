"""Live capture: record every call an ``openai`` or ``anthropic`` client makes, as promptkit log records.

:func:`capture` wraps a client's HTTP transport (the SDKs' ``http_client``). While the app runs, every
call to the Messages, Chat Completions or Responses API is appended to a JSONL file as one whole record
(:func:`promptkit.formats.http_capture.exchange_record`): the request body exactly as sent, the whole
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
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Final

from promptkit.formats.http_capture import (
    SECRET_PATTERNS,
    HttpCaptureError,
    api_from_url,
    decode_body,
    exchange_record,
    redact,
    session_hint,
)

__all__ = ["CaptureError", "RecordLog", "Recorder", "capture", "layout_of"]

_log = logging.getLogger("promptkit.capture")


class CaptureError(RuntimeError):
    """The capture wrapper cannot be set up (a client it cannot wrap, a bad pattern)."""


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
    :data:`~promptkit.formats.http_capture.SECRET_PATTERNS` and ``redact`` patterns), then written with
    one ``write`` on a file opened with ``O_APPEND`` (mode 0600): a record is on disk whole or not at all.
    A short write (disk full) is cut back off the file; if even that fails the next record starts on a
    new line, so one torn line is all a reader ever meets. A failure never raises: ``append`` returns
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
        self.last_error: str | None = None
        self._on_failure = on_failure
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._torn = False

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return self._fd

    def _fail(self, reason: str) -> bool:
        self.failures += 1
        self.last_error = reason
        message = f"promptkit: RECORDING FAILED ({self.failures} so far): {reason}; the call itself went through"
        _log.error(message)
        print(message, file=sys.stderr, flush=True)
        if self._on_failure is not None:
            self._on_failure(reason)
        return False

    def append(self, record: Mapping[str, Any]) -> bool:
        """Write one record as one line; True when it is on disk, False (reported) when it is not."""
        try:
            line = json.dumps(redact(record, self.patterns), ensure_ascii=False, allow_nan=False) + "\n"
        except (TypeError, ValueError) as exc:
            return self._fail(f"{self.path}: record is not JSON-serializable: {exc}")
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
                    raise OSError(errno.ENOSPC, f"short write ({written} of {len(data)} bytes)")
            except OSError as exc:
                if self._fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(self._fd)
                    self._fd = None
                return self._fail(f"{self.path}: {exc.strerror or exc}")
            self.written += 1
            return True

    def close(self) -> None:
        """Close the file (the next ``append`` reopens it)."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
