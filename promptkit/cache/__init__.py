"""Deprecated alias: ``promptkit.cache`` moved to :mod:`promptkit.analysis` and :mod:`promptkit.report`.

The analysis (engine, simulator, causes, calibration, traces, executors) is :mod:`promptkit.analysis`,
the tokenizers, renders and cache models it builds on are :mod:`promptkit.tokens`; its presentation (metrics, pricing, summary, causes tables,
text, HTML, plots) is :mod:`promptkit.report`. Old imports keep working for one release, with a
:class:`DeprecationWarning` naming the new home: ``from promptkit.cache import analyze`` and
``import promptkit.cache.engine`` both resolve to the moved modules (the same module objects).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from promptkit.errors import UnknownAttributeError

# old submodule (under promptkit.cache) -> its new home
MOVED: dict[str, str] = {
    **{m: f"promptkit.analysis.{m}" for m in (
        "calibration", "causes", "composition", "engine", "executors", "runtime", "simulator",
        "trace", "ruler",
    )},
    **{m: f"promptkit.tokens.{m}" for m in (
        "tokenize", "tokenizers", "render", "render.base", "render.chatml", "render.deepseek", "render.jinja",
    )},
    "models": "promptkit.tokens.cache_models", "opaque": "promptkit.formats.opaque_head",
    "causes_report": "promptkit.report.causes", "html": "promptkit.report.html",
    "plots": "promptkit.report.plots", "plot_data": "promptkit.report.plot_data",
    "plot_png": "promptkit.report.plot_png", "summary": "promptkit.report.summary",
    "fleet_report": "promptkit.report.fleet", "filetasks": "promptkit.analysis.plans.files",
    "report": "promptkit.report", "report.metrics": "promptkit.report.metrics",
    "report.pricing": "promptkit.report.pricing", "report.text": "promptkit.report.text",
    "report.files": "promptkit.report.files",
}  # fmt: skip


def _warn(old: str, new: str) -> None:
    warnings.warn(f"{old} moved to {new}; import it from there", DeprecationWarning, stacklevel=3)


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        _warn(self.old, self.new)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """The moved module is already executed."""


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        prefix = f"{__name__}."
        if not fullname.startswith(prefix):
            return None
        new = MOVED.get(fullname[len(prefix) :])
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(fullname, new))


if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
    sys.meta_path.insert(0, _AliasFinder())


def __getattr__(name: str) -> Any:
    if name in MOVED and "." not in name:
        return importlib.import_module(f"{__name__}.{name}")
    for package in ("promptkit.analysis", "promptkit.report"):
        module = importlib.import_module(package)
        if name in getattr(module, "__all__", ()):
            _warn(f"promptkit.cache.{name}", f"{package}.{name}")
            return getattr(module, name)
    raise UnknownAttributeError(f"module {__name__!r} has no attribute {name!r}")
