"""Tests for ``promptkit fleet`` (promptkit/cli.py): lists of replicas, policies, capacities, models."""

from __future__ import annotations

import io
from pathlib import Path

import polars as pl
import pytest

from promptkit.analysis.fleet import compare_fleet
from promptkit.analysis.trace import read_trace
from promptkit.cli import main

ROOT = Path(__file__).resolve().parents[1]
HEAD = ROOT / "fixtures" / "traces" / "mooncake-conversation-head.jsonl"


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["fleet", *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_one_run_compares_every_combination(tmp_path: Path) -> None:
    code, out, err = _run(
        str(HEAD), "--replicas", "1,4", "--policy", "round_robin,prefix_aware", "--capacity", "4Ki,unbounded",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 0, err
    written = pl.read_csv(tmp_path / "fleet.csv")
    want = compare_fleet(
        read_trace(HEAD), replicas=[1, 4], policies=["round_robin", "prefix_aware"], capacities=[4096, None]
    ).summary
    assert written.height == want.height == 8
    assert written["cached_tokens"].to_list() == want["cached_tokens"].to_list()
    assert written["hit_ratio"].to_list() == pytest.approx(want["hit_ratio"].to_list())
    assert (tmp_path / "fleet.png").read_bytes()[:4] == b"\x89PNG"
    assert 'id="fleet"' in (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "prefix_aware" in out and "unbounded" in out and "wrote" in out


def test_capacities_in_bytes_need_and_use_the_models(tmp_path: Path) -> None:
    code, _, err = _run(
        str(HEAD), "--replicas", "2", "--policy", "random", "--capacity", "10GB",
        "--model", "deepseek-v3,llama-3.1-8b", "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 0, err
    written = pl.read_csv(tmp_path / "fleet.csv")
    assert written["model"].to_list() == ["deepseek-v3", "llama-3.1-8b"]
    assert written["capacity_tokens"].to_list() == [int(10e9 // 70272), int(10e9 // 131072)]
    code, _, err = _run(str(HEAD), "--capacity", "10GB", "--out", str(tmp_path))
    assert code == 2 and "need a model" in err


@pytest.mark.parametrize(
    ("argv", "code", "named"),
    [
        (["--replicas", "0"], 2, "replicas must be a whole number >= 1, got 0"),
        (["--policy", "fastest"], 2, "'fastest'"),
        (["--capacity", "0"], 2, "got 0"),
        (["--capacity", "3zz"], 2, "'3zz'"),
        (["--model", "gpt-9", "--capacity", "1GB"], 2, "'gpt-9'"),
    ],
)
def test_bad_values_are_one_line_naming_them(
    argv: list[str], code: int, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    got, _, err = _run(str(HEAD), *argv, "--out", str(tmp_path))
    err += capsys.readouterr().err  # argparse writes its usage errors to sys.stderr itself
    assert got == code
    assert named in err and "Traceback" not in err
