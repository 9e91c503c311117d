"""The examples in the docstrings of promptkit.whatif and in docs/how-to/what-if.md run and print what they show."""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = [
    "promptkit.whatif",
    "promptkit.whatif.transforms",
    "promptkit.whatif.spec",
    "promptkit.whatif.replays",
    "promptkit.whatif.suggestions",
    "promptkit.whatif.cli",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_how_to_page_examples(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    page = (ROOT / "docs/how-to/what-if.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```pycon\n(.*?)```", page, re.S)
    assert blocks
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    globs: dict[str, object] = {}
    for k, block in enumerate(blocks):
        runner.run(parser.get_doctest(block, globs, f"what-if.md block {k}", "what-if.md", 0))
    assert runner.summarize(verbose=False).failed == 0
