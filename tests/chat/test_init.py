"""promptkit/chat/__init__.py re-exports every public name of its modules, and its docstring runs."""

from __future__ import annotations

import doctest
import importlib

import pytest

import promptkit.chat as schema

MODULES = ["message", "attachments", "identity", "mentions", "platform", "history", "delivery", "request", "stream", "archive"]


@pytest.mark.parametrize("name", MODULES)
def test_every_public_name_is_exported(name: str) -> None:
    module = importlib.import_module(f"promptkit.chat.{name}")
    missing = [n for n in module.__all__ if getattr(schema, n, None) is not getattr(module, n)]
    assert not missing and set(module.__all__) <= set(schema.__all__)


def test_package_docstring_example() -> None:
    result = doctest.testmod(schema)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("name", MODULES)
def test_every_public_definition_is_in_all(name: str) -> None:
    module = importlib.import_module(f"promptkit.chat.{name}")
    defined = [
        n
        for n, obj in vars(module).items()
        if not n.startswith("_") and callable(obj) and getattr(obj, "__module__", None) == module.__name__
    ]
    assert sorted(set(defined) - set(module.__all__)) == []
