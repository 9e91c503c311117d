"""The examples in the docstrings of every module under promptkit/ run and print what they show.

The modules are found on disk (not by importing the packages at collection time, so collecting stays
cheap, and a module moved or added is picked up without a list to keep); each is imported and its
examples run in its own test, from the repository root (some read ``fixtures/``)."""

from __future__ import annotations

import doctest
import importlib
import io
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "promptkit"


def module_names() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = module_names()


def test_every_module_is_found() -> None:
    assert len(MODULES) > 50
    assert {"promptkit", "promptkit.chat.delivery", "promptkit.assembly.trim"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    out = io.StringIO()
    for test in doctest.DocTestFinder().find(module, name):
        runner.run(test, out=out.write)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, out.getvalue()


def test_the_examples_are_many() -> None:
    """A finder that found nothing would pass every module: count the examples of a few."""
    finder = doctest.DocTestFinder()
    for name in ("promptkit.assembly.trim", "promptkit.chat.platform", "promptkit.formats.wire.redact"):
        module = importlib.import_module(name)
        assert sum(len(t.examples) for t in finder.find(module, name)) >= 10, name
