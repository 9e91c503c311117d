"""The documentation site builds, and every code example on its pages runs and shows what it says.

- ``mkdocs build --strict`` into a temporary directory (notebooks rendered without execution).
- Every page ``docs/**/*.md`` (new pages are picked up automatically): its fenced code blocks run in
  page order in one globals dict per page. A ```pycon block is a doctest session (``>>> `` prompts,
  the expected output under them; ELLIPSIS and NORMALIZE_WHITESPACE); a ```python block is executed.
  ```py, ```bash, ```json, ```text ... blocks are shown, not run: write code that needs an API key, a
  network or a service as ```py (or put the line ``<!-- docs: skip -->`` right before its block).
- Examples run in a fresh temporary directory per page in which ``fixtures/``, ``notebooks/``,
  ``docs/`` and ``promptkit/`` of the repository are symlinked: paths read as from the repository
  root, and files an example writes vanish with the directory.
- A failure names the page and the line of the example (``docs/x.md:42``).
"""

from __future__ import annotations

import doctest
import os
import re
import subprocess
import sys
import textwrap
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: What the example directory of each page links to from the repository root.
LINKED = ("fixtures", "notebooks", "docs", "promptkit")
SKIP_MARK = "<!-- docs: skip -->"
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)\s*(?P<info>[^\n`]*)$")
RUN_LANGUAGES = {"python", "pycon"}


class Block(NamedTuple):
    language: str  # "python" or "pycon"
    line: int  # 1-based line of the first code line in the page
    code: str
    skipped: bool


def code_blocks(text: str) -> Iterator[Block]:
    """The fenced blocks of a Markdown page, in order (indented fences, e.g. in lists, included).

    >>> [b.language for b in code_blocks("```pycon\\n>>> 1\\n1\\n```\\n\\n```bash\\nls\\n```\\n")]
    ['pycon', 'bash']
    """
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence = match["indent"], match["fence"]
        language = (match["info"].split() or [""])[0].lstrip("{.").rstrip("}").lower()
        skipped = i > 0 and lines[i - 1].strip() == SKIP_MARK
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not (
            lines[j].strip().startswith(fence) and lines[j].strip().strip(fence[0]) == ""
        ):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        yield Block(language, i + 2, "\n".join(body) + "\n", skipped)
        i = j + 1


def pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if "_ext" not in p.parts and p.name != "README.md")


def _example_dir(tmp_path: Path) -> Path:
    for name in LINKED:
        if (ROOT / name).exists():
            (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    return tmp_path


def _run_python(block: Block, where: str, globs: dict[str, Any]) -> str | None:
    code = compile("\n" * (block.line - 1) + block.code, where, "exec")
    try:
        exec(code, globs)
    except Exception:
        return f"{where}:{block.line}: the python block raised\n{traceback.format_exc(limit=-3)}"
    return None


def _run_pycon(block: Block, where: str, globs: dict[str, Any]) -> str | None:
    parser = doctest.DocTestParser()
    examples = parser.get_examples(block.code, name=where)
    test = doctest.DocTest(examples, globs, where, where, block.line - 1, block.code)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=flags)
    runner.run(test, out=report.append, clear_globs=False)
    globs.update(test.globs)  # DocTest works on a copy: what the session defined stays for later blocks
    # doctest names the page and its line: test.lineno + example.lineno + 1
    return "".join(report) or None


@pytest.mark.slow
@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_page_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    where = str(page.relative_to(ROOT))
    blocks = [b for b in code_blocks(page.read_text(encoding="utf-8")) if b.language in RUN_LANGUAGES]
    if not any(not b.skipped for b in blocks):
        return  # nothing to run on this page
    monkeypatch.chdir(_example_dir(tmp_path))
    # a page that registers a log format registers it for its own examples only (the tests after it
    # sniff with the registry they started with, as a fresh worker process does)
    from promptkit.formats import base

    base.available_formats()  # the built-ins and entry points loaded before the copy
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.syspath_prepend(str(ROOT))
    globs: dict[str, Any] = {"__name__": "__docs__"}
    for block in blocks:
        if block.skipped:
            continue
        run = _run_pycon if block.language == "pycon" else _run_python
        failure = run(block, where, globs)
        assert failure is None, failure


def test_code_blocks_are_found_with_their_page_lines() -> None:
    text = textwrap.dedent(
        """\
        # Title

        ```pycon
        >>> 1 + 1
        2
        ```

        <!-- docs: skip -->
        ```python
        import openai
        ```

        1. a list item:

           ```python
           x = 1
           ```
        """
    )
    blocks = list(code_blocks(text))
    assert [(b.language, b.line, b.skipped) for b in blocks] == [
        ("pycon", 4, False),
        ("python", 10, True),
        ("python", 16, False),
    ]
    assert blocks[2].code == "x = 1\n"


def test_blocks_of_a_page_share_their_names() -> None:
    globs: dict[str, Any] = {}
    assert _run_python(Block("python", 3, "x = 40\n", False), "docs/demo.md", globs) is None
    assert _run_pycon(Block("pycon", 9, ">>> y = x + 1\n", False), "docs/demo.md", globs) is None
    assert _run_pycon(Block("pycon", 12, ">>> x + y\n81\n", False), "docs/demo.md", globs) is None


def test_a_failing_example_names_the_page_and_line(tmp_path: Path) -> None:
    block = Block("pycon", 7, ">>> 1 + 1\n3\n", False)
    failure = _run_pycon(block, "docs/demo.md", {})
    assert failure is not None and 'File "docs/demo.md", line 7' in failure and "Expected:\n    3" in failure
    block = Block("python", 12, "x = 1\nraise ValueError('boom')\n", False)
    failure = _run_python(block, "docs/demo.md", {})
    assert failure is not None and "docs/demo.md:12" in failure and 'File "docs/demo.md", line 13' in failure


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    site = tmp_path / "site"
    assert (site / "index.html").is_file()
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert "analyze_requests" in api  # mkdocstrings rendered the docstrings
    assert (site / "notebooks" / "02-measure-cache-hit-rate" / "index.html").is_file()  # notebooks rendered


def test_every_column_of_the_frames_is_documented() -> None:
    from promptkit.analysis.columns import COMPOSITION_COLUMNS, PROBLEM_COLUMNS, REQUEST_COLUMNS

    page = (DOCS / "reference" / "columns.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([a-z0-9_<>]+)` \|", page, flags=re.M))
    missing = [c for c in (*REQUEST_COLUMNS, *COMPOSITION_COLUMNS, *PROBLEM_COLUMNS) if c not in documented]
    assert not missing, f"docs/reference/columns.md does not document: {', '.join(missing)}"


def test_the_cli_reference_is_generated_from_the_parser() -> None:
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        import cli_help
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    from promptkit.cli import build_parser

    text = cli_help.on_page_markdown("# CLI\n\n" + cli_help.MARKER + "\n")
    assert cli_help.MARKER not in text
    analyze = next(a for a in build_parser()._actions if a.dest == "command").choices["analyze"]  # type: ignore[attr-defined]
    for action in analyze._actions:
        for option in action.option_strings:
            assert option in text, f"{option} missing from the generated CLI reference"
    assert "### promptkit analyze" in text


def test_the_site_extensions_keep_their_examples() -> None:
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        import doctest_fences
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    assert doctest.testmod(doctest_fences).failed == 0
    text = doctest_fences.markdown_of("Uses :meth:`Foo.bar`.\n\n>>> x = 1\n\nEnd::\n\n    code\n")
    assert text.splitlines()[:5] == ["Uses `bar`.", "", "```pycon", ">>> x = 1", "```"]
    assert "End:\n" in text and "End::" not in text
