"""The examples of the cause / gate / calibration how-to pages run and print what the pages say."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("page", ["why-did-my-cache-miss.md", "ci-gate.md", "calibration.md"])
def test_page_examples(page: str) -> None:
    result = doctest.testfile(str(ROOT / "docs/how-to" / page), module_relative=False, verbose=False)
    assert result.attempted > 0
    assert result.failed == 0
