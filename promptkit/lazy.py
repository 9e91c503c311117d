"""One lazy-export helper for the packages whose names load heavy modules only when used.

A package lists ``name -> defining module`` once; the first access imports that module and caches the
name in the package's namespace, so ``import promptkit`` stays cheap (polars, numpy and the tokenizers
load only when an analysis runs).

>>> exports = LazyExports("demo", {"sqrt": "math", "dumps": "json"})
>>> exports.names
['dumps', 'sqrt']
>>> namespace: dict[str, object] = {}
>>> exports.load("sqrt", namespace)(16.0)
4.0
>>> "sqrt" in namespace
True
>>> exports.load("nope", namespace)
Traceback (most recent call last):
...
promptkit.errors.UnknownAttributeError: module 'demo' has no attribute 'nope'
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, MutableMapping
from typing import Any

from promptkit.errors import UnknownAttributeError

__all__ = ["LazyExports"]


class LazyExports:
    """The lazily imported public names of one package: ``name -> module that defines it``."""

    __slots__ = ("_modules", "package")

    def __init__(self, package: str, modules: Mapping[str, str]) -> None:
        self.package = package
        self._modules = dict(modules)

    @property
    def names(self) -> list[str]:
        """The public names, sorted (the package's ``__all__``)."""
        return sorted(self._modules)

    def module_of(self, name: str) -> str | None:
        """The module that defines ``name``, or None when the package does not export it."""
        return self._modules.get(name)

    def load(self, name: str, namespace: MutableMapping[str, Any]) -> Any:
        """Import ``name`` from its module, keep it in ``namespace`` (the package's globals) and return it."""
        module = self._modules.get(name)
        if module is None:
            raise UnknownAttributeError(f"module {self.package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def dir(self, namespace: Mapping[str, Any]) -> list[str]:
        """What ``dir(package)`` lists: its globals and its lazy names."""
        return sorted(set(namespace) | set(self._modules))
