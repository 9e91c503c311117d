"""The examples in the docstrings of the proxy's modules run and print what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["promptkit.proxy.server", "promptkit.proxy.live", "promptkit.proxy.sessions"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
