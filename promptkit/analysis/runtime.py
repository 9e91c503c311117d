"""Runtime helpers of a long analysis: pausing Python's cyclic garbage collector, showing a phase.

An analysis holds every loaded record (millions of small objects: dicts, strings, lists) while it
allocates many short-lived ones. CPython's cyclic collector then keeps re-scanning the whole loaded
heap (its oldest generation is collected whenever it grows by a quarter), which on 2.6k agent calls
costs more than the analysis itself. The objects an analysis creates hold no reference cycles that
need the collector (reference counting frees them), so it is paused while loading and analyzing and
restored afterwards.

:func:`phase` shows one step of a long command (loading, tables, ...) as a progress line on a terminal;
:class:`ReadProgress` shows the reading of the logs: megabytes read, MB/s and the requests found.

Example::

    >>> import gc
    >>> with gc_paused():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

__all__ = ["ReadProgress", "gc_paused", "phase"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic garbage collector inside the block; re-enable it after (if it was enabled).

    Nesting is safe: only the outermost block re-enables it.

    >>> import gc
    >>> with gc_paused():
    ...     with gc_paused():
    ...         pass
    ...     gc.isenabled()
    False
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def phase(name: str, *, enabled: bool, file: TextIO | None = None) -> Iterator[Any]:
    """Show ``name`` as a one-step progress bar (tqdm) while the block runs, when ``enabled``.

    Yields the bar (None when disabled); the bar shows the elapsed time and completes when the block
    ends. Nothing is printed when ``enabled`` is False.

    >>> with phase("tables", enabled=False) as bar:
    ...     bar is None
    True
    """
    if not enabled:
        yield None
        return
    from tqdm.auto import tqdm

    bar = tqdm(total=1, desc=name, file=file, bar_format="{desc}: {elapsed}{postfix}", leave=True)
    try:
        yield bar
        bar.update(1)
    finally:
        bar.close()


class ReadProgress:
    """A progress bar (tqdm) of the logs read: megabytes, MB/s and, once read, the requests found; a
    context manager. :attr:`on_file` is :func:`~promptkit.formats.read_logs`'s ``on_file`` (None when
    not ``enabled``: then nothing is shown); :meth:`done` names the requests found.

    >>> import io
    >>> out = io.StringIO()
    >>> with ReadProgress("load", enabled=True, file=out) as bar:
    ...     bar.on_file(Path("fixtures/claude-code/README.md"))
    ...     bar.done(3)
    >>> "B/s" in out.getvalue(), "3 requests" in out.getvalue()
    (True, True)
    """

    __slots__ = ("_bar", "_pending", "on_file")

    def __init__(self, name: str, *, enabled: bool, file: TextIO | None = None) -> None:
        self._bar: Any = None
        self._pending: Path | None = None  # the file being read: counted when the next one starts
        self.on_file = self._next if enabled else None
        if enabled:
            from tqdm.auto import tqdm

            self._bar = tqdm(
                desc=name,
                file=file,
                unit="B",
                unit_scale=True,
                unit_divisor=1000,
                leave=True,
                mininterval=0.5,
            )

    def _size(self) -> int:
        try:
            return os.path.getsize(self._pending) if self._pending is not None else 0
        except OSError:
            return 0

    def _next(self, path: Path) -> None:
        if self._bar is not None:
            self._bar.update(self._size())
        self._pending = path

    def done(self, requests: int) -> None:
        """Count the last file read and show the ``requests`` found."""
        if self._bar is not None:
            self._bar.update(self._size())
            self._pending = None
            self._bar.set_postfix_str(f"{requests:,} requests", refresh=True)

    def __enter__(self) -> ReadProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()
