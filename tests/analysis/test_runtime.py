"""The runtime helpers of a long analysis: the reading's progress bar (promptkit/analysis/runtime.py)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from promptkit.analysis import analyze
from promptkit.analysis.runtime import ReadProgress

LOG = Path("fixtures/claude-code")


def test_the_read_bar_counts_every_files_bytes_and_names_the_requests(tmp_path: Path) -> None:
    files = []
    for name, size in (("a.jsonl", 1500), ("b.jsonl", 2500)):
        path = tmp_path / name
        path.write_bytes(b"x" * size)
        files.append(path)
    out = io.StringIO()
    with ReadProgress("load", enabled=True, file=out) as bar:
        assert bar.on_file is not None
        for path in files:
            bar.on_file(path)
        bar.done(1234)
    text = out.getvalue().replace("\r", "\n").splitlines()[-1]
    assert "4.00kB" in text and "B/s" in text and "1,234 requests" in text


def test_a_disabled_read_bar_shows_nothing() -> None:
    out = io.StringIO()
    with ReadProgress("load", enabled=False, file=out) as bar:
        assert bar.on_file is None
        bar.done(5)
    assert out.getvalue() == ""


def test_analyze_with_progress_shows_megabytes_and_requests_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    analyze(LOG, progress=True)
    err = capsys.readouterr().err
    read = sum(p.stat().st_size for p in LOG.rglob("*.jsonl"))  # every byte of the log files read
    assert "load:" in err and f"{read / 1000:.1f}kB [" in err and "B/s" in err and "3 requests" in err
    analyze(LOG)
    assert capsys.readouterr().err == ""
