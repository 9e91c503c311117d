"""Runtime helpers of a long analysis: pausing Python's cyclic garbage collector, showing a phase.

An analysis holds every loaded record (millions of small objects: dicts, strings, lists) while it
allocates many short-lived ones. CPython's cyclic collector then keeps re-scanning the whole loaded
heap (its oldest generation is collected whenever it grows by a quarter), which on 2.6k agent calls
costs more than the analysis itself. The objects an analysis creates hold no reference cycles that
need the collector (reference counting frees them), so it is paused while loading and analyzing and
restored afterwards.

:func:`phase` shows one step of a long command (loading, tables, ...) as a progress line on a terminal.

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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

__all__ = ["gc_paused", "phase"]


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
