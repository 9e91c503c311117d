"""Every ```pycon example in docs/**/*.md runs as a doctest from the repository root."""

from __future__ import annotations

import doctest
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```pycon\n(.*?)^```", re.S | re.M)
PAGES = sorted((ROOT / "docs").rglob("*.md"))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_doc_examples_run(page: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(ROOT)
    blocks = BLOCK.findall(page.read_text(encoding="utf-8"))
    assert blocks, f"{page} has no pycon example"
    parser = doctest.DocTestParser()
    test = parser.get_doctest("\n".join(blocks), {}, page.name, str(page), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} example(s) failed in {page} (cwd {os.getcwd()})"
