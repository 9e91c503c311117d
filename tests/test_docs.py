"""Every example in docs/**/*.md runs: ```pycon sessions as doctests (their shown output compared),
```python blocks executed in order, one interpreter per page, as a reader would paste them.

``py`` blocks are shown, not run: code that needs a live service or an API key (the capture wrapper
around a real client, say). ``pycon`` sessions run from the repository root. ``python`` blocks run in a scratch directory where
``fixtures/`` points at the repository's, so relative paths work and nothing is written into the checkout.
"""

from __future__ import annotations

import doctest
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYCON = re.compile(r"^```pycon\n(.*?)^```", re.S | re.M)
PYTHON = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
PAGES = sorted((ROOT / "docs").rglob("*.md"))


def _pages(pattern: re.Pattern[str]) -> list[Path]:
    return [p for p in PAGES if pattern.search(p.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("page", _pages(PYCON), ids=lambda p: str(p.relative_to(ROOT)))
def test_pycon_examples_show_what_they_print(page: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(ROOT)
    blocks = PYCON.findall(page.read_text(encoding="utf-8"))
    parser = doctest.DocTestParser()
    test = parser.get_doctest("\n".join(blocks), {}, page.name, str(page), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} example(s) failed in {page} (cwd {os.getcwd()})"


@pytest.mark.parametrize("page", _pages(PYTHON), ids=lambda p: str(p.relative_to(ROOT)))
def test_python_examples_run(page: Path, tmp_path: Path) -> None:
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures", target_is_directory=True)
    parts = ["import matplotlib\nmatplotlib.use('Agg')\n"]
    for i, block in enumerate(PYTHON.findall(page.read_text(encoding="utf-8"))):
        parts.append(f"print('--- {page.name} block {i}', flush=True)\n{block}\n")
    script = tmp_path / "examples.py"
    script.write_text("".join(parts), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=900, env=env
    )
    assert out.returncode == 0, f"{page}:\n" + out.stdout[-3000:] + "\n" + out.stderr[-5000:]
