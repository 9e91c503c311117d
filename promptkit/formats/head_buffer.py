"""perf: memory: the opaque head put in front of a chain of requests' tokens once, not once per request.

A request of a log that omits its head (:mod:`promptkit.formats.opaque_head`) gets placeholder tokens in
front of its rendered tokens. Made by concatenation, every request holds a copy of its whole prompt:
a conversation of ``n`` calls holds ``n`` copies of its growing prefix, memory quadratic in its length
(a Claude Code chain of 8,000 short events held 3.4 GB). The tokenizer already hands out a session's
tokens as read-only views of one growing buffer (:class:`~promptkit.tokens.tokenize.TokenBuffer`: what
it wrote is never rewritten). :class:`HeadBuffers` mirrors each such buffer with the head in front: the
shifted tokens of every request whose tokens are a view of the same buffer are views of one shifted
buffer, and each request copies only its new tokens into it.

For tokens that are not a view from the start of a read-only buffer :meth:`HeadBuffers.tokens` gives
None: they are shifted by a copy, as before
(:func:`~promptkit.formats.opaque_head.shift_tokenized`, which takes the tokens given here).

>>> import numpy as np
>>> from promptkit.tokens.tokenize import TokenBuffer
>>> a, buf, _ = TokenBuffer.extend(None, 0, np.array([7, 8, 9]))
>>> b, buf, _ = TokenBuffer.extend(buf, 3, np.array([10]))
>>> heads = HeadBuffers()
>>> head = np.array([100, 101])
>>> x, y = heads.tokens(a, head, "k"), heads.tokens(b, head, "k")
>>> x.tolist(), y.tolist(), np.shares_memory(x, y)
([100, 101, 7, 8, 9], [100, 101, 7, 8, 9, 10], True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

__all__ = ["HeadBuffers"]


class _Mirror:
    """One source buffer with a head in front: ``data`` (read-only, handed out as views) holds the
    head and the first ``copied`` tokens of ``source`` after it, written through ``write``."""

    __slots__ = ("copied", "data", "source", "write")

    def __init__(self, source: np.ndarray, head: np.ndarray) -> None:
        import numpy as np

        self.source = source  # held: its id stays its own while this mirror lives
        self.data = np.empty(int(head.shape[0]) + int(source.shape[0]), dtype=np.int64)
        self.write = self.data[:]
        self.data.flags.writeable = False
        self.write[: head.shape[0]] = head
        self.copied = 0


def _source_of(tokens: np.ndarray) -> np.ndarray | None:
    """The read-only array ``tokens`` is a view of from its first element on (None: not such a view, or
    its memory can still be written through it)."""
    base = tokens.base
    if (
        base is None
        or not isinstance(base, type(tokens))
        or base.base is not None
        or base.flags.writeable
        or base.ndim != 1
        or base.dtype != tokens.dtype
        or tokens.strides != base.strides
        or tokens.__array_interface__["data"][0] != base.__array_interface__["data"][0]
    ):
        return None
    return base


class HeadBuffers:
    """The shifted tokens of requests (their opaque head in front) as views of one buffer per source
    buffer and head (see the module docstring). ``size``: how many mirrors are kept (the oldest one is
    dropped beyond it; its views stay valid)."""

    __slots__ = ("_mirrors", "size")

    def __init__(self, size: int = 256) -> None:
        self._mirrors: dict[tuple[int, str, int], _Mirror] = {}
        self.size = size

    def __len__(self) -> int:
        return len(self._mirrors)

    def tokens(self, tokens: np.ndarray, head: np.ndarray, key: str) -> np.ndarray | None:
        """``head`` (the placeholder ids of the head named ``key``) then ``tokens``, as a read-only view
        of the buffer that mirrors the one ``tokens`` is a view of; None where ``tokens`` is not a view
        from the start of a read-only buffer (or ``head`` is empty)."""
        n = int(head.shape[0])
        source = _source_of(tokens)
        if n == 0 or source is None:
            return None
        mirror_key = (id(source), key, n)
        mirror = self._mirrors.get(mirror_key)
        if mirror is None or mirror.source is not source:
            mirror = _Mirror(source, head)
            if len(self._mirrors) >= self.size:
                self._mirrors.pop(next(iter(self._mirrors)))
            self._mirrors[mirror_key] = mirror
        end = int(tokens.shape[0])
        if end > mirror.copied:  # the source's memory is never rewritten: only what is new is copied
            mirror.write[n + mirror.copied : n + end] = source[mirror.copied : end]
            mirror.copied = end
        return mirror.data[: n + end]
