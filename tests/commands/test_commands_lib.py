"""The library functions behind the commands (promptkit/commands/) and the decisions moved out of the
CLI into their homes: report_formats, header_line / analysis_head, with_break_fixes."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from promptkit.analysis import analyze_requests
from promptkit.commands.analyze import analyze_logs, no_request_error, run_analyze
from promptkit.commands.calibrate import run_calibrate
from promptkit.commands.catalog import formats_text, providers_text
from promptkit.commands.check import run_check
from promptkit.commands.lint import run_lint
from promptkit.errors import NoRequestError, OutputFileError, UsageError
from promptkit.formats import available_formats
from promptkit.report.files import REPORT_FORMATS, report_formats
from promptkit.report.summary import analysis_head, header_line

ROOT = Path(__file__).resolve().parents[2]
BEFORE = ROOT / "fixtures" / "logs" / "session-before.jsonl"
AFTER = ROOT / "fixtures" / "logs" / "session-after.jsonl"


def test_report_formats_drop_only_what_is_turned_off() -> None:
    assert report_formats() == list(REPORT_FORMATS)
    assert "png" not in report_formats(plots=False) and "html" in report_formats(plots=False)
    assert "html" not in report_formats(html=False) and "png" in report_formats(html=False)
    assert report_formats(html=False, plots=False) == [f for f in REPORT_FORMATS if f not in ("html", "png")]


@pytest.mark.slow
def test_header_counts_files_from_records_else_from_paths() -> None:
    result = analyze_requests([{"messages": [{"role": "user", "content": "hi"}]}] * 2, provider="exact")
    assert header_line(result, ["a", "b", "c"]).startswith(
        "2 requests in 1 sessions from 3 file(s); provider: exact"
    )
    logged = analyze_logs([BEFORE, AFTER])
    assert header_line(logged, []).startswith(
        f"{logged.requests.height} requests in 1 sessions from 2 file(s)"
    )


def test_analysis_head_names_how_the_provider_was_chosen_only_when_not_given() -> None:
    result = analyze_requests([{"messages": [{"role": "user", "content": "hi"}]}], provider="exact")
    assert "(provider:" not in analysis_head(result, provider_given=True)
    assert "(provider:" in analysis_head(result, provider_given=False).splitlines()[1]
    expectation = {"expected_hit_ratio": 0.5, "upper_bound": 0.6, "stale_probability": 0.1, "basis": "b"}
    assert (
        analysis_head(result, expectation=expectation).splitlines()[-1].startswith("Expected hit ratio 50.0%")
    )


def test_no_request_error_names_paths_and_first_problem() -> None:
    problems = pl.DataFrame({"file": ["x.jsonl"], "line": [3], "reason": ["not JSON"]})
    assert str(no_request_error(["x.jsonl"], problems)) == (
        "x.jsonl: no request could be analyzed (1 problem(s); first: x.jsonl:3: not JSON)"
    )
    assert str(no_request_error(["a", "b"])) == "a, b: no request could be analyzed"


def test_run_analyze_writes_the_formats_asked_and_holds_what_is_printed(tmp_path: Path) -> None:
    run = run_analyze([BEFORE], out=tmp_path, formats=["csv", "summary"], provider="deepseek")
    assert [p.name for p in run.written.paths] == ["requests.csv", "summary.txt"]
    assert (tmp_path / "summary.txt").read_text(encoding="utf-8") == run.text(width=200)
    assert "(provider:" not in run.head  # named by the caller
    assert json.loads(run.json_text())["files"] == [str(p) for p in run.written.paths]
    assert run.quiet_text().startswith("predicted hit ratio")
    assert run.wrote_line() == f"\nWrote 2 files to {tmp_path}/: requests.csv, summary.txt\n"


@pytest.mark.slow
@pytest.mark.usefixtures("shared_replays")
def test_run_analyze_with_advice_puts_break_fixes_after_largest_breaks(tmp_path: Path) -> None:
    run = run_analyze([BEFORE], out=tmp_path, formats=["csv"], advice=True, replay_args="log.jsonl")
    names = list(run.tables)
    assert names[names.index("largest_breaks") + 1] == "break_fixes"
    commands = run.tables["break_fixes"]["command"].drop_nulls().to_list()
    assert commands and all("log.jsonl" in c for c in commands)


def test_run_analyze_refuses_an_unwritable_report(tmp_path: Path) -> None:
    (tmp_path / "requests.csv").mkdir()  # the CSV file's place is taken (root can write anywhere else)
    with pytest.raises(OutputFileError, match=r"cannot write the report: .*requests\.csv"):
        run_analyze([BEFORE], out=tmp_path, formats=["csv"])


def test_empty_logs_are_a_no_request_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"not": "a request"}\n')
    with pytest.raises(NoRequestError, match="no request could be analyzed"):
        run_analyze([empty], out=tmp_path / "out", format="promptkit")


@pytest.mark.slow
def test_run_check_passes_and_fails_on_the_thresholds() -> None:
    assert run_check([BEFORE], min_hit=0.0).passed
    failed = run_check([BEFORE], min_hit=0.99)
    assert not failed.passed and failed.text.startswith("promptkit check: 1 of 1 session(s) fail\n  ")
    with pytest.raises(UsageError, match="--min-hit"):
        run_check([BEFORE])


@pytest.mark.slow
@pytest.mark.usefixtures("shared_replays")
def test_run_lint_json_and_text() -> None:
    bundled = ROOT / "promptkit" / "data" / "default-session.jsonl"
    items = json.loads(run_lint([bundled], as_json=True))
    assert isinstance(items, list) and items
    assert (
        run_lint([ROOT / "fixtures" / "opencode"])
        == "promptkit lint: no head region changes between requests\n"
    )
    # the two logs share a session id: interleaved, their system prompts differ at every request, and lint
    # names what analyze names
    classes = {
        item["finding"]["change_class"] for item in json.loads(run_lint([BEFORE, AFTER], as_json=True))
    }
    assert classes == {"system_changed"}
    text = run_lint([bundled], replay_args="mine.jsonl")
    assert "promptkit whatif mine.jsonl" in text and text.rstrip().splitlines()[-1].startswith("note: ")


@pytest.mark.slow
def test_run_calibrate_writes_the_calibration(tmp_path: Path) -> None:
    source = ROOT / "fixtures" / "real-logs" / "deepseek"
    out = tmp_path / "cal.json"
    text = run_calibrate([source], out=out)
    assert out.exists() and text.startswith(
        "calibration for deepseek (routes: model deepseek-chat): p(stale) = "
    )
    assert text.endswith(f"wrote {out}\n")
    with pytest.raises(OutputFileError, match="cannot write the calibration"):
        run_calibrate([source], out=tmp_path / "missing" / "cal.json")


def test_catalogs_list_every_format_and_provider() -> None:
    text = formats_text()
    assert all(f"  {name}" in text for name in available_formats())
    assert (
        text.splitlines()[0]
        == f"{len(available_formats())} log formats (detected per file; --format NAME reads every file as one):"
    )
    text = providers_text()
    assert "\ndeepseek   deepseek" in text and "priced models" in text and "<function" not in text


def test_the_names_that_moved_into_commands_warn_at_their_old_homes() -> None:
    """``fleet_report`` / ``FleetReport`` (promptkit.report.fleet) and ``apply_expectation``
    (promptkit.report.summary) run a step of a command, so they live in promptkit.commands; the old
    names work for one release, with a DeprecationWarning naming the new home."""
    import promptkit.report.fleet as old_fleet
    import promptkit.report.summary as old_summary
    from promptkit.commands.expectation import apply_expectation
    from promptkit.commands.fleet import FleetReport, fleet_report

    with pytest.warns(DeprecationWarning, match=r"promptkit\.commands\.fleet\.fleet_report"):
        assert old_fleet.fleet_report is fleet_report
    with pytest.warns(DeprecationWarning, match=r"promptkit\.commands\.fleet\.FleetReport"):
        assert old_fleet.FleetReport is FleetReport
    with pytest.warns(DeprecationWarning, match=r"promptkit\.commands\.expectation\.apply_expectation"):
        assert old_summary.apply_expectation is apply_expectation
    for module in (old_fleet, old_summary):
        with pytest.raises(AttributeError, match="no_such_name"):
            _ = module.no_such_name


def test_apply_expectation_without_a_calibration_keeps_the_result() -> None:
    from promptkit.commands.expectation import apply_expectation

    result = analyze_requests([{"messages": [{"role": "user", "content": "hi"}]}], provider="exact")
    assert apply_expectation(result, None) == (result, None)
