"""Process-level settings for a long analysis: pausing Python's cyclic garbage collector.

An analysis holds every loaded record (millions of small objects: dicts, strings, lists) while it
allocates many short-lived ones. CPython's cyclic collector then keeps re-scanning the whole loaded
heap (its oldest generation is collected whenever it grows by a quarter), which on 2.6k agent calls
costs more than the analysis itself. The objects an analysis creates hold no reference cycles that
need the collector (reference counting frees them), so it is paused while loading and analyzing and
restored afterwards.

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

__all__ = ["gc_paused"]


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
