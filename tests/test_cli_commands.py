"""The consistent commands of issue 24: the bundled log by default, formats / providers listings,
ratios validated, --out collisions, and machine outputs that carry what the text shows."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from promptkit.cli import main


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["check", "--min-hit", "0.4"], ["whatif", "--transform", "sort-tools"]])
def test_commands_that_read_logs_use_the_bundled_log_and_say_so(argv: list[str]) -> None:
    code, out, err = _run(*argv)
    assert code == 0 and out
    assert "no PATH given, analyzing the bundled log" in err and "default-session.jsonl" in err


def test_a_ratio_above_one_is_a_usage_error_that_suggests_the_ratio(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, _ = _run("check", "--min-hit", "80")  # argparse's usage errors go to sys.stderr
    assert (
        code == 2
        and "expected a ratio between 0 and 1, got 80; did you mean 0.80?" in capsys.readouterr().err
    )
    code, _, _ = _run("check", "--max-layout-loss", "-0.1")
    assert code == 2 and "expected a ratio between 0 and 1" in capsys.readouterr().err


def test_formats_and_providers_list_what_each_reads() -> None:
    from promptkit.formats import available_formats
    from promptkit.providers.registry import available_providers

    code, out, _ = _run("formats")
    assert code == 0
    for name, fmt in available_formats().items():
        assert f"  {name}" in out and fmt.description[:40] in out
    assert "mooncake-trace" in out
    code, out, _ = _run("providers")
    assert code == 0
    for name in available_providers():
        assert f"\n{name} " in out  # one row per profile
    assert "claude-opus-4-6" in out and "as of 2026-12-04" in out  # the priced models and their date
    assert "<function" not in out and "Cache(" not in out  # no Python reprs


@pytest.mark.slow
def test_the_expectation_and_its_basis_are_in_json_and_quiet_and_not_claimed_learnt_without_usage(
    tmp_path: Path,
) -> None:
    code, out, _ = _run(
        "analyze", "--calibration", "default", "--json", "--no-plots", "--out", str(tmp_path / "j")
    )
    assert code == 0
    summary = json.loads(out)
    expectation = summary["expectation"]
    assert expectation["basis"] == "population rate"  # the bundled log has no usage to learn from
    assert 0 < expectation["expected_hit_ratio"] < expectation["upper_bound"]
    assert "learnt per session" not in out and "learnt from its earlier usage" not in out
    code, out, _ = _run(
        "analyze", "--calibration", "default", "-q", "--no-plots", "--out", str(tmp_path / "q")
    )
    assert f"expected hit ratio {expectation['expected_hit_ratio']:.2%} (calibrated)" in out
    assert "learnt per session" not in out and len(out.splitlines()) == 1


def test_a_real_log_with_usage_says_learnt_per_session(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    code, out, _ = _run(
        "analyze", str(root / "fixtures/real-logs/deepseek"), "--calibration", "default", "--json", "--no-plots",
        "--no-html", "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 0 and json.loads(out)["expectation"]["basis"] == "learnt per session from its usage"


@pytest.mark.slow
def test_the_terminal_shows_the_by_cause_table_with_unexplained_when_not_zero(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    code, out, _ = _run(
        "analyze",
        str(root / "fixtures/real-logs/deepseek"),
        "--no-plots",
        "--no-html",
        "--out",
        str(tmp_path),
    )
    assert code == 0 and "Tokens lost by cause" in out
    from promptkit.analysis import analyze
    from promptkit.report.causes import causes_by_cause

    table = causes_by_cause(analyze(str(root / "fixtures/real-logs/deepseek")))
    for cause in table["cause"].to_list():
        assert f"│ {cause}" in out
    if "unexplained" in table["cause"].to_list():
        assert "; unexplained: " in out.split("\n\n")[0]


def test_the_header_reads_provider_assumed_as_a_field_never_the_note_text() -> None:
    from types import SimpleNamespace

    from promptkit.report.summary import provider_line

    note = "2 session(s) name no provider and none was recognised; the default was used"
    assert "the default was used" in provider_line(SimpleNamespace(provider_assumed=True, notes=()))
    # the same note text without the field: recognised (the text is never matched)
    assert "recognised per session" in provider_line(SimpleNamespace(notes=(note,)))


@pytest.mark.slow
@pytest.mark.usefixtures("shared_replays")
def test_lint_json_gives_each_finding_its_measured_fix() -> None:
    code, out, _ = _run("lint", "--json")
    assert code == 0
    [item] = json.loads(out)
    assert item["finding"]["key"] == "account-snapshot" and item["saves"] is True
    assert item["fix"]["specs"] == ["move:key=account-snapshot", "move:key=help-center"]
    assert item["fix"]["after_hit_ratio"] > item["fix"]["before_hit_ratio"]
