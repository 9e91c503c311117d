"""Output conventions of ``promptkit analyze``: --json, --quiet, the column legend, report.html, no
empty figure files, and ``python -m promptkit``. The real engine runs on small logs (provider exact)."""

from __future__ import annotations

import io
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from promptkit import cli, report

ROOT = Path(__file__).resolve().parents[1]


def _write_log(path: Path, *, usage: bool = True, sessions: tuple[str, ...] = ("alpha", "beta")) -> None:
    lines = []
    for session in sessions:
        history: list[dict[str, str]] = []
        for turn in range(3):
            messages = [
                {"role": "system", "content": f"You help with {session}. " * 40},
                {"role": "system", "content": f"The time is 10:0{turn}."},  # breaks the prefix every turn
                *history,
                {"role": "user", "content": f"question {turn}"},
            ]
            answer = {"role": "assistant", "content": f"answer {turn}"}
            record = {
                "session": session,
                "timestamp": 1_700_000_000 + turn,
                "request": {"messages": messages},
            }
            record["response"] = {"choices": [{"message": answer}]}
            if usage:
                record["response"]["usage"] = {
                    "prompt_tokens": 500,
                    "completion_tokens": 3,
                    "prompt_tokens_details": {"cached_tokens": 384 if turn else 0},
                }
            lines.append(json.dumps(record))
            history += [messages[-1], answer]
    lines.append('{"broken": ')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "calls.jsonl"
    _write_log(path)
    return path


def test_json_prints_the_headline_sessions_and_problem_count(log: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    code, out, err = run(["analyze", str(log), "--provider", "exact", "--out", str(out_dir), "--json"])
    assert code == 0, err
    summary = json.loads(out)  # stdout is the JSON document and nothing else
    requests = pl.read_parquet(out_dir / "requests.parquet")
    head = summary["headline"]
    assert head["requests"] == requests.height == 6 and head["sessions"] == 2
    assert head["hit_ratio"] == pytest.approx(
        requests["predicted_cached_tokens"].sum() / requests["prompt_tokens"].sum()
    )
    assert head["reported_hit_ratio"] == pytest.approx(
        requests["reported_cached_tokens"].sum() / requests["reported_prompt_tokens"].sum()
    )
    assert [s["session"] for s in summary["sessions"]] == ["alpha", "beta"]
    assert summary["problems"] == pl.read_csv(out_dir / "problems.csv").height == 1
    assert {Path(f).name for f in summary["files"]} >= {"requests.parquet", "report.html", "hit_ratio.png"}
    assert summary["version"] == 2 and summary["paths"] == [str(log)]
    assert summary["expectation"] is None and summary["causes"][0].startswith("Lost to your layout")
    causes = {row["cause"]: row["tokens_lost"] for row in summary["lost_by_cause"]}
    uncached = requests["reported_prompt_tokens"].sum() - requests["reported_cached_tokens"].sum()
    assert causes and sum(causes.values()) == uncached  # every uncached token has a cause
    assert err == ""  # informational lines are silenced with --json


def test_quiet_prints_one_headline_line(log: Path, tmp_path: Path) -> None:
    code, out, err = run(["analyze", str(log), "--provider", "exact", "--out", str(tmp_path / "o"), "-q"])
    assert code == 0, err
    first, *rest = out.splitlines()
    assert first.startswith("predicted hit ratio ")
    assert rest == []  # exactly one line: the tables, --json and summary.txt hold the rest
    _, as_json, _ = run(["analyze", str(log), "--provider", "exact", "--out", str(tmp_path / "j"), "--json"])
    head = json.loads(as_json)["headline"]
    assert f"{head['hit_ratio']:.2%}" in out and f"{head['reported_hit_ratio']:.2%}" in out
    assert "6 requests in 2 session(s)" in out and "1 problem(s)" in out
    assert err == ""


def test_json_and_quiet_exclude_each_other(log: Path) -> None:
    code, _, _ = run(["analyze", str(log), "--json", "--quiet"])
    assert code == 2


def test_every_short_header_has_a_legend_entry() -> None:
    missing = [short for short in report.SHORT_NAMES.values() if short not in report.COLUMN_LEGEND]
    assert not missing


def test_text_output_ends_with_a_legend_of_the_headers_it_used(log: Path, tmp_path: Path) -> None:
    code, out, err = run(["analyze", str(log), "--provider", "exact", "--out", str(tmp_path / "o")])
    assert code == 0, err
    tables, legend = out.split("\nColumns:\n", 1)
    explained = {line.split("  ")[1].strip() for line in legend.splitlines() if line.startswith("  ")}
    lines = tables.splitlines()
    headers = {  # a table's header row is the line under its top border
        cell.strip()
        for above, line in itertools.pairwise(lines)
        if above.startswith("┌") and line.startswith("│ ")
        for cell in line.strip("│").split("┆")
    }
    assert {"rep hit", "=prompt", "Δhit", "MAE", "lost"} <= headers
    assert headers - explained == set()
    assert "rep hit" in legend and "reported by the provider" in legend
    summary = (tmp_path / "o" / "summary.txt").read_text(encoding="utf-8")
    assert "\nColumns:\n" in summary  # the file carries the legend too


def test_report_html_is_written_by_default_or_where_asked(log: Path, tmp_path: Path) -> None:
    code, out, err = run(
        ["analyze", str(log), "--provider", "exact", "--out", str(tmp_path / "a"), "--no-plots"]
    )
    assert code == 0, err
    page = (tmp_path / "a" / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "report.html" in out
    target = tmp_path / "elsewhere" / "cache.html"
    code, _, err = run(
        [
            "analyze",
            str(log),
            "--provider",
            "exact",
            "--out",
            str(tmp_path / "b"),
            "--no-plots",
            "--html",
            str(target),
        ]
    )
    assert code == 0, err
    assert target.is_file() and not (tmp_path / "b" / "report.html").exists()
    code, _, err = run(
        ["analyze", str(log), "--provider", "exact", "--out", str(tmp_path / "c"), "--no-html"]
    )
    assert code == 0, err
    assert not (tmp_path / "c" / "report.html").exists()


def test_no_empty_plot_is_written_and_stderr_says_so(tmp_path: Path) -> None:
    log = tmp_path / "no-usage.jsonl"
    _write_log(log, usage=False)
    out_dir = tmp_path / "o"
    code, _, err = run(["analyze", str(log), "--provider", "exact", "--out", str(out_dir)])
    assert code == 0, err
    assert not (out_dir / "predicted_vs_reported.png").exists()
    assert "plot skipped: predicted_vs_reported: no reported usage" in err
    assert (out_dir / "hit_ratio.png").read_bytes()[:4] == b"\x89PNG"
    # --quiet keeps stderr for errors only
    code, _, err = run(["analyze", str(log), "--provider", "exact", "--out", str(tmp_path / "q"), "--quiet"])
    assert code == 0 and err == ""


@pytest.mark.slow
def test_python_dash_m_promptkit(tmp_path: Path, log: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "promptkit", "analyze", str(log), "--provider", "exact", "--no-plots", "-q",
         "--out", str(tmp_path / "o")],
        capture_output=True, text=True, cwd=ROOT, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("predicted hit ratio ")
    version = subprocess.run(
        [sys.executable, "-m", "promptkit", "--version"], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert version.returncode == 0 and version.stdout.startswith("promptkit ")
