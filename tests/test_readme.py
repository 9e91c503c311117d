"""Every Python example in README.md runs, in order, as a reader would paste them.

The blocks run in one interpreter (later examples may use names from earlier ones), in a scratch
directory where ``fixtures/`` points at the repository's, so relative paths in the examples work and
nothing is written into the checkout.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def readme_blocks() -> list[str]:
    return BLOCK.findall((ROOT / "README.md").read_text(encoding="utf-8"))


def test_readme_has_examples() -> None:
    assert len(readme_blocks()) >= 1


@pytest.mark.slow
def test_readme_python_examples_run(tmp_path: pathlib.Path) -> None:
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures", target_is_directory=True)
    parts = ["import matplotlib\nmatplotlib.use('Agg')\n"]
    for i, block in enumerate(readme_blocks()):
        parts.append(f"print('--- README block {i}', flush=True)\n{block}\n")
    script = tmp_path / "readme_examples.py"
    script.write_text("".join(parts), encoding="utf-8")
    out = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, out.stdout[-3000:] + "\n" + out.stderr[-5000:]
