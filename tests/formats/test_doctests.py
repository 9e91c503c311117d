"""The examples in the docstrings of the log formats and the wire run and print what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "promptkit.formats.claude_code",
    "promptkit.formats.codex",
    "promptkit.formats.opaque_head",
    "promptkit.formats.base",
    "promptkit.formats.http_capture",
    "promptkit.formats.wire",
    "promptkit.formats.wire.bodies",
    "promptkit.formats.wire.record",
    "promptkit.formats.wire.redact",
    "promptkit.formats.wire.responses",
    "promptkit.formats.wire.sse",
    "promptkit.formats.wire.streams",
    "promptkit.formats.wire.urls",
    "promptkit.capture",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.formats.test_claude_code import ROOT

    monkeypatch.chdir(ROOT)  # the examples read fixtures/ from the repository root
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
