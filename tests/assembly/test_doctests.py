"""The examples in the docstrings of promptkit.assembly run and print what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "promptkit.assembly.anchors",
    "promptkit.assembly.audit",
    "promptkit.assembly.frame",
    "promptkit.assembly.placement",
    "promptkit.assembly.registry",
    "promptkit.assembly.tokens",
    "promptkit.assembly.trim",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
