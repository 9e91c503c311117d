"""Tests for promptkit/commands/statusline.py and ``promptkit statusline``: one line from Claude Code's
status-line JSON, at a fixed ``--now``; bad input never breaks the prompt; the state kept between runs
is used."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import promptkit.commands.statusline as statusline
from promptkit.cli import main
from tests.analysis.clock_transcripts import SESSION, T0, Call, a_session, iso, write_transcript

ROOT = Path(__file__).resolve().parents[2]


def _stdin(transcript: Path | str, **extra: object) -> str:
    return json.dumps({"session_id": SESSION, "transcript_path": str(transcript), "cwd": "/w",
                       "model": {"id": "claude-opus-4-6", "display_name": "Opus 4.6"},
                       "workspace": {"current_dir": "/w", "project_dir": "/w"}, **extra})  # fmt: skip


def _run(monkeypatch: pytest.MonkeyPatch, stdin: str, *args: str) -> tuple[int, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    out, err = io.StringIO(), io.StringIO()
    code = main(["statusline", *args], stdout=out, stderr=err)
    assert err.getvalue() == ""
    return code, out.getvalue()


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def test_five_minute_writes_to_the_second_then_expired(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_transcript(tmp_path / "p" / f"{SESSION}.jsonl", a_session())
    code, out = _run(monkeypatch, _stdin(path), "--now", iso(T0 + 600), "--cache-dir", str(cache))
    assert code == 0
    assert (
        out == "Opus 4.6 · cache 57.6% hit · 3:35 left (5m) · $0.157 · last miss: ttl_expiry, 8,400 tokens\n"
    )
    _, later = _run(monkeypatch, _stdin(path), "--now", str(T0 + 814), "--cache-dir", str(cache))
    assert "· 0:01 left (5m) ·" in later
    _, expired = _run(monkeypatch, _stdin(path), "--now", str(T0 + 815), "--cache-dir", str(cache))
    assert expired == "Opus 4.6 · cache 57.6% hit · expired · $0.157 · last miss: ttl_expiry, 8,400 tokens\n"


def test_one_hour_writes(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_transcript(
        tmp_path / f"{SESSION}.jsonl", [Call(0, read=0, write_1h=12000), Call(60, read=12000, write_1h=500)]
    )
    _, out = _run(monkeypatch, _stdin(path), "--now", iso(T0 + 160.5), "--cache-dir", str(cache))
    assert out == "Opus 4.6 · cache 49.0% hit · 58:19 left (1h) · $0.134\n"
    assert "last miss" not in out
    _, out = _run(monkeypatch, _stdin(path), "--now", iso(T0 + 3660), "--cache-dir", str(cache))
    assert "· expired ·" in out


@pytest.mark.parametrize(
    ("stdin", "line"),
    [
        ("", "promptkit: the status-line input is not JSON"),
        ("{not json", "promptkit: the status-line input is not JSON"),
        ("[1, 2]", "promptkit: the status-line input is not a JSON object"),
        ('{"session_id": "x"}', "promptkit: no transcript_path in the status-line input"),
        ('{"transcript_path": 42}', "promptkit: no transcript_path in the status-line input"),
        (
            '{"transcript_path": "/no/such/dir/t.jsonl", "model": {"display_name": "Opus"}}',
            "Opus · cache: no calls yet",
        ),
        ('{"transcript_path": "/"}', "promptkit: cannot read the transcript: Is a directory"),
    ],
)
def test_bad_input_prints_one_short_line_and_exits_0(
    stdin: str, line: str, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _run(monkeypatch, stdin, "--cache-dir", str(cache)) == (0, line + "\n")


def test_an_empty_transcript_and_a_failure_inside_are_one_line(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"type":"file-history-snapshot"}\n')
    assert (
        _run(monkeypatch, _stdin(empty), "--cache-dir", str(cache))[1] == "Opus 4.6 · cache: no calls yet\n"
    )

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk on fire\nsecond line")

    monkeypatch.setattr(statusline, "read_transcript", broken)
    monkeypatch.delenv("PROMPTKIT_DEBUG", raising=False)
    code, out = _run(monkeypatch, _stdin(empty), "--cache-dir", str(cache))
    assert (code, out) == (0, "promptkit: status line failed: RuntimeError: disk on fire second line\n")


def test_a_bad_option_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("{}"))
    assert main(["statusline", "--now", "yesterday"], stdout=io.StringIO(), stderr=io.StringIO()) == 2


def test_the_state_is_kept_and_used(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second run reads only what was written since the first: bytes changed in place before the
    saved offset are not read again (with --no-cache they are), and an appended call is."""
    path = write_transcript(tmp_path / f"{SESSION}.jsonl", a_session())
    args = ("--now", str(T0 + 600), "--cache-dir", str(cache))
    _, first = _run(monkeypatch, _stdin(path), *args)
    [state_file] = [p for p in cache.iterdir() if p.name != "facts.json"]
    kept = json.loads(state_file.read_text())
    assert kept["state"]["offset"] == path.stat().st_size and kept["state"]["path"] == str(path)
    assert json.loads((cache / "facts.json").read_text())["lifetimes"] == [300.0, 3600.0]

    data = path.read_bytes()
    path.write_bytes(data.replace(b'"cache_read_input_tokens":12800', b'"cache_read_input_tokens":99999'))
    assert _run(monkeypatch, _stdin(path), *args)[1] == first  # the state, not the file
    assert _run(monkeypatch, _stdin(path), "--now", str(T0 + 600), "--no-cache")[1] != first

    write_transcript(
        path, [*a_session(), Call(560, read=13500, write_5m=300)]
    )  # the same lines, and one more call
    assert path.read_bytes().startswith(data)
    _, grown = _run(monkeypatch, _stdin(path), *args)
    assert grown == _run(monkeypatch, _stdin(path), "--now", str(T0 + 600), "--no-cache")[1]
    assert "· 4:20 left (5m) ·" in grown and "last miss" not in grown


def test_a_broken_state_file_is_ignored(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_transcript(tmp_path / f"{SESSION}.jsonl", a_session())
    args = ("--now", str(T0 + 600), "--cache-dir", str(cache))
    _, first = _run(monkeypatch, _stdin(path), *args)
    for broken in ("{", '{"version": 1, "state": {"path": 3}}', '{"version": 99}'):
        for p in cache.iterdir():
            p.write_text(broken)
        assert _run(monkeypatch, _stdin(path), *args)[1] == first


def test_a_cache_dir_that_cannot_be_written_is_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_transcript(tmp_path / f"{SESSION}.jsonl", a_session())
    blocker = tmp_path / "file"
    blocker.write_text("")
    _, out = _run(monkeypatch, _stdin(path), "--now", str(T0 + 600), "--cache-dir", str(blocker / "sub"))
    assert "3:35 left" in out


def test_the_default_cache_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert statusline.default_cache_dir() == tmp_path / "promptkit" / "statusline"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert statusline.default_cache_dir() == tmp_path / "home" / ".cache" / "promptkit" / "statusline"


@pytest.mark.slow
def test_a_warm_run_imports_no_provider_profile_nor_polars(tmp_path: Path, cache: Path) -> None:
    """Run as Claude Code runs it (a process): the first run reads the profiles; the second imports
    neither them nor polars/numpy, and prints the same line."""
    path = write_transcript(tmp_path / f"{SESSION}.jsonl", a_session())
    code = (
        "import sys, io; from promptkit.cli import main\n"
        f"sys.stdin = io.StringIO({_stdin(path)!r})\n"
        f"main(['statusline', '--now', '{T0 + 600}', '--cache-dir', {str(cache)!r}])\n"
        "print(sorted(m for m in ('polars', 'numpy', 'promptkit.providers') if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, cwd=ROOT)
            for _ in range(2)]  # fmt: skip
    (line1, loaded1), (line2, loaded2) = (r.stdout.splitlines() for r in runs)
    assert line1 == line2 and "3:35 left" in line1
    assert loaded1 == "['promptkit.providers']" and loaded2 == "[]"
