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


#: The modules whose examples run a whole analysis, lint or replay (seconds each): `slow`, so that
#: ``pytest -m "not slow"`` stays an edit-test loop; the full suite runs them.
HEAVY = {
    "promptkit.analysis.api",
    "promptkit.commands.fleet",
    "promptkit.commands.lint",
    "promptkit.providers.deepseek",
    "promptkit.tokens.tokenizers",
    "promptkit.whatif.advice",
    "promptkit.whatif.replays",
}
MODULES = module_names()
#: Modules whose docstrings must show examples (a module that lost every example would pass the run).
WITH_EXAMPLES = [
    *(f"promptkit.providers.{m}" for m in ("_common", "openai", "deepseek", "ollama", "anthropic", "record")),
    "promptkit.whatif",
    *(
        f"promptkit.whatif.transforms{m}"
        for m in (
            "",
            "._bodies",
            ".base",
            ".moves",
            ".volatile",
            ".tools",
            ".settings",
            ".breakpoints",
            ".elide",
        )
    ),
    *(f"promptkit.whatif.{m}" for m in ("spec", "replays", "suggestions", "cli", "advice")),
]


def test_every_module_is_found() -> None:
    assert len(MODULES) > 50
    assert {"promptkit", "promptkit.chat.delivery", "promptkit.assembly.trim"} <= set(MODULES)


@pytest.mark.parametrize(
    "name", [pytest.param(m, marks=pytest.mark.slow) if m in HEAVY else m for m in MODULES]
)
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


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_these_modules_show_examples(name: str) -> None:
    module = importlib.import_module(name)
    assert sum(len(t.examples) for t in doctest.DocTestFinder().find(module, name)) > 0
