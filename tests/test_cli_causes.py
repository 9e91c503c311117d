"""Tests for the cause commands of promptkit/cli.py: check (exit codes), lint, calibrate,
analyze --calibration and the causes headline."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from promptkit import cli
from promptkit.analysis.calibration import load_calibration
from promptkit.layout import RequestRecord

LONG = "You are a careful assistant. " * 4


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _log(tmp_path: Path, *, stamp: bool, name: str = "calls.jsonl") -> Path:
    lines, history = [], [{"role": "user", "content": "start"}]
    for k in range(4):
        system = f"Current time: 2026-12-03T10:{k:02d}:00Z. {LONG}" if stamp else LONG
        body = {"model": "m", "messages": [{"role": "system", "content": system}, *history]}
        lines.append(json.dumps(RequestRecord(body, session="s", index=k, timestamp=float(k)).to_json()))
        history += [
            {"role": "assistant", "content": f"reply {k}"},
            {"role": "user", "content": f"more {k} " * 20},
        ]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_check_exits_1_with_the_failing_sessions_and_their_causes(tmp_path: Path) -> None:
    code, out, _ = run(
        ["check", str(_log(tmp_path, stamp=True)), "--provider", "exact", "--max-layout-loss", "0.05"]
    )
    assert code == 1
    assert "1 of 1 session(s) fail" in out
    assert "s: layout loss" in out and "volatile_value" in out


def test_check_exits_0_when_every_session_passes(tmp_path: Path) -> None:
    path = _log(tmp_path, stamp=False)
    code, out, _ = run(
        ["check", str(path), "--provider", "exact", "--max-layout-loss", "0", "--min-hit", "0.5"]
    )
    assert (code, out) == (0, "promptkit check: all 1 session(s) pass\n")
    code, out, _ = run(["check", str(path), "--provider", "exact", "--min-hit", "0.99"])
    assert code == 1 and "hit ratio" in out


def test_check_needs_a_threshold(tmp_path: Path) -> None:
    code, _, err = run(["check", str(_log(tmp_path, stamp=False))])
    assert code == 2 and "--min-hit" in err


def test_lint_prints_the_planted_timestamp(tmp_path: Path) -> None:
    code, out, _ = run(["lint", str(_log(tmp_path, stamp=True)), "--provider", "exact"])
    assert code == 0
    assert "1 changing head region(s)" in out and "timestamp" in out


@pytest.mark.slow
def test_calibrate_writes_a_file_analyze_applies(tmp_path: Path) -> None:
    out_file = tmp_path / "cal.json"
    code, out, _ = run(
        ["calibrate", "fixtures/real-logs/deepseek", "--provider", "deepseek", "--out", str(out_file)]
    )
    assert code == 0, out
    assert "held-out error, leave one session out" in out
    cal = load_calibration(out_file)
    assert cal.fitted_on["runs"] == 3
    code, out, _ = run(
        [
            "analyze",
            "fixtures/real-logs/deepseek",
            "--no-plots",
            "--out",
            str(tmp_path / "r"),
            "--calibration",
            str(out_file),
        ]
    )
    assert code == 0
    assert "Lost to your layout: 0 tokens" in out
    assert "Expected hit ratio" in out
    assert (tmp_path / "r" / "causes.csv").is_file()


def test_calibrate_without_usage_is_one_line_error(tmp_path: Path) -> None:
    code, _, err = run(
        [
            "calibrate",
            str(_log(tmp_path, stamp=False)),
            "--provider",
            "exact",
            "--out",
            str(tmp_path / "c.json"),
        ]
    )
    assert code == 2
    assert "no request reports usage with cached tokens" in err and err.count("\n") == 1


@pytest.mark.parametrize("spec", ["default"])
def test_analyze_default_calibration_needs_a_bundled_one(tmp_path: Path, spec: str) -> None:
    code, _, err = run(
        [
            "analyze",
            str(_log(tmp_path, stamp=False)),
            "--provider",
            "exact",
            "--no-plots",
            "--out",
            str(tmp_path / "r"),
            "--calibration",
            spec,
        ]
    )
    assert code == 2 and "no calibration is bundled for provider 'exact'" in err


def test_anthropic_cache_diagnostics_from_a_captured_log_are_compared(tmp_path: Path) -> None:
    from promptkit.analysis.api import analyze
    from promptkit.report.causes import diagnostics_comparison

    system_a, system_b = "Rules v1. " + LONG, "Rules v2, stricter. " + LONG
    lines = []
    for k, (system, reason) in enumerate(
        [(system_a, None), (system_b, {"type": "system_changed", "cache_missed_input_tokens": 60})]
    ):
        response = {
            "role": "assistant",
            "content": "ok",
            "usage": {
                "input_tokens": 50,
                "output_tokens": 2,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 0,
            },
        }
        if reason is not None:
            response["diagnostics"] = {"cache_miss_reason": reason}
        body = {
            "model": "m",
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": "hi"}],
        }
        lines.append(
            json.dumps({"request": body, "response": response, "session": "s", "timestamp": float(k)})
        )
    path = tmp_path / "captured.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    table = diagnostics_comparison(analyze(path, provider="exact"))
    assert table.select("index", "provider_miss_reason", "change_class", "agrees").rows() == [
        (1, "system_changed", "system_changed", True)
    ]


def test_analyze_reports_cache_writes_and_their_waste(tmp_path: Path) -> None:
    lines = []
    for k, t in enumerate([0.0, 30.0, 1000.0]):  # the last call comes after the 5-minute entry expired
        messages = [
            {
                "role": "system",
                "content": [{"type": "text", "text": LONG * 60, "cache_control": {"type": "ephemeral"}}],
            }
        ]
        messages += [{"role": "user", "content": f"question {j}"} for j in range(k + 1)]
        body = {"model": "claude-sonnet-4-5", "messages": messages}
        lines.append(json.dumps(RequestRecord(body, session="a", index=k, timestamp=t).to_json()))
    path = tmp_path / "anthropic.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out_dir = tmp_path / "r"
    code, out, err = run(
        ["analyze", str(path), "--provider", "anthropic", "--no-plots", "--out", str(out_dir)]
    )
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("Cache writes:"))
    assert "1-hour 0" in line and "never read before they expired: " in line
    writes = (out_dir / "writes.csv").read_text(encoding="utf-8").splitlines()
    assert writes[0].startswith("session,index,basis,write_5m_tokens")
    assert len(writes) == 4
