"""The examples in the docstrings of promptkit.providers run and print what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "promptkit.providers._common",
    "promptkit.providers.openai",
    "promptkit.providers.deepseek",
    "promptkit.providers.ollama",
    "promptkit.providers.anthropic",
    "promptkit.providers.record",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
