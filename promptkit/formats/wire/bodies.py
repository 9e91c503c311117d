"""HTTP bodies: undoing a ``Content-Encoding``, bounded so that a small compressed body cannot expand
into gigabytes.

>>> import gzip
>>> decode_body(gzip.compress(b'{"a": 1}'), "gzip")
b'{"a": 1}'
"""

from __future__ import annotations

import zlib
from typing import Final

from promptkit.errors import HttpCaptureError

__all__ = ["MAX_BODY_BYTES", "decode_body"]

#: The most bytes a recorded body may decode to (256 MiB); a body that would expand further is not
#: decoded (:class:`HttpCaptureError`: the call is forwarded all the same and recorded as ``undecodable``).
MAX_BODY_BYTES: Final[int] = 256 * 1024 * 1024


def _too_big(coding: str, limit: int) -> HttpCaptureError:
    return HttpCaptureError(
        f"content-encoding: the {coding} body decodes to more than {limit} bytes (the limit); not decoded"
    )


def _zlib(body: bytes, wbits: int, coding: str, limit: int) -> bytes:
    d = zlib.decompressobj(wbits)
    out = d.decompress(body, limit + 1)
    if len(out) > limit:
        raise _too_big(coding, limit)
    if not d.eof:
        raise HttpCaptureError(f"content-encoding: broken {coding} data (the stream is truncated)")
    return out


def _zstd(body: bytes, limit: int) -> bytes:
    import zstandard

    out: list[bytes] = []
    size = 0
    rest = body
    try:
        while rest:
            d = zstandard.ZstdDecompressor().decompressobj()
            for start in range(0, len(rest), 4096):  # small input steps bound each step's output
                piece = d.decompress(rest[start : start + 4096])
                size += len(piece)
                if size > limit:
                    raise _too_big("zstd", limit)
                out.append(piece)
                if d.eof:
                    break
            if not d.eof:
                raise HttpCaptureError("content-encoding: broken zstd data (the stream is truncated)")
            rest = d.unused_data
    except zstandard.ZstdError as exc:
        raise HttpCaptureError(f"content-encoding: broken zstd data ({exc})") from None
    return b"".join(out)


def decode_body(raw: bytes, content_encoding: str | None, *, limit: int = MAX_BODY_BYTES) -> bytes:
    """Undo a ``Content-Encoding`` (``gzip``, ``deflate``, ``identity``; ``br`` and ``zstd`` when their
    packages are installed), checking that each stream is whole. Raises :class:`HttpCaptureError` for an
    unknown, broken or truncated encoding, or a body that decodes to more than ``limit`` bytes.

    >>> import gzip
    >>> decode_body(gzip.compress(b'{"a": 1}'), "gzip")
    b'{"a": 1}'
    >>> decode_body(gzip.compress(b"0" * 5000), "gzip", limit=1000)
    Traceback (most recent call last):
    ...
    promptkit.errors.HttpCaptureError: content-encoding: the gzip body decodes to more than 1000 bytes (the limit); not decoded
    """
    body = raw
    for coding in reversed([c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]):
        try:
            if coding == "identity":
                continue
            if coding in ("gzip", "x-gzip"):
                body = _zlib(body, 16 + zlib.MAX_WBITS, coding, limit)
            elif coding == "deflate":
                try:
                    body = _zlib(body, zlib.MAX_WBITS, coding, limit)
                except zlib.error:
                    body = _zlib(body, -zlib.MAX_WBITS, coding, limit)
            elif coding == "br":
                import brotli

                body = brotli.decompress(body)
                if len(body) > limit:
                    raise _too_big(coding, limit)
            elif coding == "zstd":
                body = _zstd(body, limit)
            else:
                raise HttpCaptureError(f"content-encoding: unknown coding {coding!r}")
        except ImportError:
            raise HttpCaptureError(
                f"content-encoding: {coding!r} needs a package that is not installed"
            ) from None
        except zlib.error as exc:
            raise HttpCaptureError(f"content-encoding: broken {coding} data ({exc})") from None
    return body
