"""``promptkit analyze --redact-outputs``: a report to share holds no key a user pasted into a prompt."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from promptkit import cli

KEY = "sk-proj-" + "Qx7Lm2Pz" * 5
PASSWORD = "hunter2-Zq9"


def _log(tmp_path: Path) -> Path:
    system = {"role": "system", "content": "You are a support agent. " * 40}
    turns = [
        [system, {"role": "user", "content": "hello, what can you do?"}],
        [
            system,
            {"role": "user", "content": f"my key is {KEY} and the db is postgres://app:{PASSWORD}@db:5432/x"},
        ],
    ]
    path = tmp_path / "calls.jsonl"
    lines = [
        {"request": {"model": "deepseek-chat", "messages": m}, "session": "s", "timestamp": 1775786375.0 + i}
        for i, m in enumerate(turns)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return path


def _everything(out: Path, printed: str) -> str:
    texts = [printed] + [
        p.read_text(encoding="utf-8", errors="replace")
        for p in out.iterdir()
        if p.suffix in (".csv", ".txt", ".html", ".json")
    ]
    return "\n".join(texts)


@pytest.mark.parametrize("redact", [False, True])
def test_a_report_to_share_holds_no_pasted_key(tmp_path: Path, redact: bool) -> None:
    out = tmp_path / "report"
    stdout = io.StringIO()
    args = ["analyze", str(_log(tmp_path)), "--provider", "deepseek", "--out", str(out), "--no-plots"]
    code = cli.main([*args, *(["--redact-outputs"] if redact else [])], stdout=stdout, stderr=io.StringIO())
    assert code == 0
    text = _everything(out, stdout.getvalue())
    assert (out / "requests.csv").exists() and (out / "report.html").exists()
    if redact:
        assert "Qx7Lm2" not in text and PASSWORD not in text  # not even a key cut short by an excerpt
        assert "[REDACTED]" in (out / "requests.csv").read_text(encoding="utf-8")
    else:  # what the option is for: without it, the break's text carries (part of) the key into the report
        assert "sk-proj-Qx7Lm2" in text
