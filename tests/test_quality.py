"""ruff and mypy run as part of the test suite, so the README's test command is also the lint gate."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True)


def test_ruff_check_is_clean() -> None:
    out = _run("ruff", "check", "promptkit", "tests", "benchmarks", "fixtures", "notebooks")
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.slow
def test_mypy_is_clean() -> None:
    out = _run("mypy", "promptkit")
    assert out.returncode == 0, out.stdout + out.stderr
