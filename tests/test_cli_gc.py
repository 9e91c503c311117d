"""promptkit/cli: the analyze command runs with the cyclic GC paused and leaves its objects out of the
collection at exit (gc.freeze); both are speed only: the figures are the same."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import promptkit.analysis
from promptkit import cli

ROOT = Path(__file__).resolve().parents[1]
LOG = str(ROOT / "fixtures" / "logs" / "session-before.jsonl")


def test_the_command_runs_with_the_gc_paused_and_gives_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    analyze = promptkit.analysis.analyze

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return analyze(*args, **kwargs)

    monkeypatch.setattr(promptkit.analysis, "analyze", spy)
    assert gc.isenabled()
    code = cli.main(["analyze", LOG, "--no-plots", "--no-html", "-q", "--out", str(tmp_path)])
    assert code == 0 and seen == [False]
    assert gc.isenabled()  # given back, also to a caller that runs more than one command


_AT_EXIT = """
import atexit, gc, sys
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count() > 0, flush=True))
from promptkit.cli import main
code = main(sys.argv[1:])
print("frozen before exit:", gc.get_freeze_count() > 0, flush=True)
sys.exit(code)
"""


@pytest.mark.parametrize("argv", [["analyze", LOG, "--no-plots", "--no-html", "-q"], ["--version"]])
def test_at_exit_the_analyze_command_leaves_what_it_built_out_of_the_last_collection(
    tmp_path: Path, argv: list[str]
) -> None:
    out_dir = ["--out", str(tmp_path)] if argv[0] == "analyze" else []
    proc = subprocess.run(
        [sys.executable, "-c", _AT_EXIT, *argv, *out_dir], capture_output=True, text=True, check=True
    )
    analyzing = argv[0] == "analyze"
    assert "frozen before exit: False" in proc.stdout  # nothing frozen while the process still runs
    assert f"frozen at exit: {analyzing}" in proc.stdout
