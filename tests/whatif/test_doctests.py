"""The examples in the docstrings of promptkit.whatif and in docs/how-to/what-if.md run and print what they show."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = [
    "promptkit.whatif",
    "promptkit.whatif.transforms",
    "promptkit.whatif.transforms._bodies",
    "promptkit.whatif.transforms.base",
    "promptkit.whatif.transforms.moves",
    "promptkit.whatif.transforms.volatile",
    "promptkit.whatif.transforms.tools",
    "promptkit.whatif.transforms.settings",
    "promptkit.whatif.transforms.breakpoints",
    "promptkit.whatif.transforms.elide",
    "promptkit.whatif.spec",
    "promptkit.whatif.replays",
    "promptkit.whatif.suggestions",
    "promptkit.whatif.cli",
    "promptkit.whatif.advice",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
