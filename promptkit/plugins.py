"""Entry-point plugins: the one loader the provider and log-format registries share.

A third-party package registers an object under an entry-point group (``promptkit.providers`` or
``promptkit.formats``); the entry point names the object itself, or a module holding it under a
conventional attribute (``PROFILE``, ``FORMAT``).
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import metadata
from typing import Any, TypeVar

from promptkit.errors import PromptkitError

__all__ = ["entry_point_objects"]

T = TypeVar("T")


def entry_point_objects(
    group: str, kind: type[T], *, attribute: str, what: str, error: type[PromptkitError] = PromptkitError
) -> Iterator[T]:
    """The ``kind`` objects registered under entry-point ``group``: each entry point's object, or its
    ``attribute`` when it is a module. A plugin that fails to load, or names something else, raises
    ``error`` naming the plugin (``what`` says what it should be, e.g. ``"provider plugin"``).

    >>> list(entry_point_objects("promptkit.no-such-group", int, attribute="X", what="test plugin"))
    []
    """
    for ep in metadata.entry_points(group=group):
        try:
            obj: Any = ep.load()
        except Exception as exc:
            raise error(f"{what} {ep.name!r} ({ep.value}) failed to load: {exc}") from exc
        found = getattr(obj, attribute, obj)
        if not isinstance(found, kind):
            raise error(f"{what} {ep.name!r} ({ep.value}) is a {type(found).__name__}, not a {kind.__name__}")
        yield found
