"""Every ``promptkit`` command line that README.md and the docs show in a ```bash block runs as written.

Each page's command lines run in page order, in one scratch directory per page where ``fixtures/`` and
``promptkit/`` point at the repository's (so the paths read as from the repository root). A line whose
PATH arguments name files that only exist on the reader's machine (``~/.claude/projects/...``,
``calls.jsonl``) is an illustration and is left out; ``proxy`` (a server) too. The commands the
advice engine's issue names are required to be among those that run.
"""

from __future__ import annotations

import io
import re
import shlex
from pathlib import Path

import pytest

from promptkit.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
BASH = re.compile(r"^```(?:bash|console|sh|shell)\n(.*?)^```", re.S | re.M)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: Commands that must run as written (README's advice block and the CLI reference).
REQUIRED = {
    "promptkit lint",
    "promptkit whatif --suggest",
    "promptkit formats",
    "promptkit providers",
    "promptkit check --min-hit 0.4 --max-layout-loss 0.6",
}


def command_lines(page: Path) -> list[list[str]]:
    """The ``promptkit ...`` lines of the page's shell blocks, as argument lists (comments, a ``$ ``
    prompt and a shell redirection removed)."""
    out = []
    for block in BASH.findall(page.read_text(encoding="utf-8")):
        for line in block.replace("\\\n", " ").splitlines():  # a line continued with a backslash
            text = line.strip().removeprefix("$ ").strip()
            if not text.startswith("promptkit "):
                continue
            words = shlex.split(text, comments=True)
            if ">" in words:
                words = words[: words.index(">")]
            out.append(words)
    return out


def _runnable(words: list[str], here: Path) -> bool:
    if words[1] == "proxy":
        return False
    args = build_parser().parse_args(words[1:])
    paths = getattr(args, "paths", None) or []
    prices = getattr(args, "prices", None)
    calibration = getattr(args, "calibration", None)
    needed = [*paths, *([prices] if prices else [])]
    if calibration not in (None, "default"):
        needed.append(Path(calibration))
    return all((here / p).exists() for p in needed)


def _link(tmp_path: Path) -> Path:
    for name in ("fixtures", "promptkit"):
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize(
    "page", [p for p in PAGES if command_lines(p)], ids=lambda p: str(p.relative_to(ROOT))
)
@pytest.mark.usefixtures("shared_replays")
def test_the_commands_of_a_page_run_as_written(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = _link(tmp_path)
    monkeypatch.chdir(here)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    for words in command_lines(page):
        if not _runnable(words, here):
            continue
        out, err = io.StringIO(), io.StringIO()
        code = main(words[1:], stdout=out, stderr=err)
        allowed = (0, 1) if words[1] == "check" else (0,)
        assert code in allowed, f"{page.name}: {shlex.join(words)} exited {code}: {err.getvalue()[-2000:]}"


def test_the_commands_the_issue_names_are_shown_and_run() -> None:
    here = ROOT
    shown = {shlex.join(w) for p in PAGES for w in command_lines(p) if _runnable(w, here)}
    assert REQUIRED <= shown, REQUIRED - shown
