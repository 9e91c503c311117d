"""Tests for promptkit/cli.py: arguments, exit codes, printed tables, written files."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest

import promptkit.analysis
from promptkit import cli

ROOT = Path(__file__).resolve().parents[1]


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def _fake_result(paths: list[Path]) -> SimpleNamespace:
    requests = pl.DataFrame(
        {
            "session": ["s1", "s1", "s2"],
            "index": [0, 1, 0],
            "timestamp": [1.0, 2.0, 3.0],
            "prompt_tokens": [100, 300, 120],
            "prefix_tokens": [0, 100, 0],
            "predicted_cached_tokens": [0, 64, 0],
            "hit_ratio": [0.0, 64 / 300, 0.0],
            "reported_prompt_tokens": [110, 310, None],
            "reported_cached_tokens": [0, 64, None],
            "divergence_message": [None, 2, None],
            "divergence_role": [None, "user", None],
            "divergence_anchor": [None, "current", None],
            "divergence_key": [None, None, None],
            "file": [str(p) for p in (paths * 3)[:3]],
            "completion_tokens": [10, 20, 30],
            "divergence_token": [[1, 2], [3], None],  # a nested column must still reach the CSV
        },
        schema_overrides={"divergence_key": pl.String, "divergence_token": pl.List(pl.Int64)},
    )
    composition = pl.DataFrame(
        {
            "session": ["s1", "s1", "s1", "s1", "s2"],
            "index": [0, 0, 1, 1, 0],
            "slot": ["identity", "current", "identity", "current", "identity"],
            "key": [None] * 5,
            "start": [0, 50, 0, 50, 0],
            "tokens": [50, 50, 50, 250, 120],
        },
        schema_overrides={"key": pl.String},
    )
    problems = pl.DataFrame(
        {"file": [str(paths[0])] * 2, "line": [4, 9], "reason": ["not valid JSON", "no messages"]}
    )
    return SimpleNamespace(
        requests=requests, composition=composition, problems=problems, provider="deepseek", view="consecutive"
    )


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Replace promptkit.analysis.analyze with a fake that records its arguments."""
    seen: list[dict[str, Any]] = []

    def analyze(
        paths: list[Path],
        *,
        provider: str = "deepseek",
        tokenizer: str | None = None,
        render: str | None = None,
        view: str = "consecutive",
        progress: bool = False,
        **options: Any,  # the CLI passes every analyze option by name (stream, format, jobs, ...)
    ) -> Any:
        seen.append(
            {
                "paths": list(paths),
                "provider": provider,
                "tokenizer": tokenizer,
                "render": render,
                "view": view,
                "progress": progress,
            }
        )
        for p in paths:
            if "broken" in Path(p).name:
                raise ValueError(f"{p}: line 1: request.messages: expected a list")
        return _fake_result(list(paths))

    monkeypatch.setattr(promptkit.analysis, "analyze", analyze, raising=False)
    return seen


def _log(tmp_path: Path, name: str = "log.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    return path


def run(argv: list[str], stderr: io.StringIO | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), stderr if stderr is not None else io.StringIO()
    code = cli.main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    from importlib.metadata import version

    assert capsys.readouterr().out.strip() == f"promptkit {version('promptkit')}"


@pytest.mark.parametrize(
    "argv",
    [[], ["frobnicate"], ["analyze", "--view", "sideways"], ["analyze", "--progress", "--no-progress"]],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    assert "usage:" in capsys.readouterr().err


def test_analyze_prints_tables_and_writes_files(tmp_path: Path, calls: list[dict[str, Any]]) -> None:
    log = _log(tmp_path)
    out_dir = tmp_path / "report"
    code, out, err = run(
        [
            "analyze",
            str(log),
            "--provider",
            "deepseek",
            "--view",
            "simulated",
            "--tokenizer",
            "deepseek",
            "--out",
            str(out_dir),
        ]
    )
    assert code == 0, err
    assert calls == [
        {
            "paths": [log],
            "provider": "deepseek",
            "tokenizer": "deepseek",
            "render": None,
            "view": "simulated",
            "progress": False,
        }
    ]
    assert "Hit ratio per session" in out and "Tokens lost per slot" in out and "Cost in USD" in out
    assert "3 requests in 2 sessions from 1 file(s)" in out
    assert "Load problems: 2" in out and f"{log}:4: not valid JSON" in out
    files = {p.name for p in out_dir.iterdir()}
    assert {
        "requests.parquet",
        "requests.csv",
        "summary.txt",
        "problems.csv",
        "hit_ratio.png",
        "predicted_vs_reported.png",
        "composition.png",
    } <= files
    expected = _fake_result([log]).requests
    assert pl.read_parquet(out_dir / "requests.parquet").equals(expected)
    csv = pl.read_csv(out_dir / "requests.csv")
    assert csv.columns == expected.columns
    assert csv["prompt_tokens"].to_list() == expected["prompt_tokens"].to_list()
    assert csv["divergence_token"].to_list()[:2] == ["[1, 2]", "[3]"]
    assert "Hit ratio per session" in (out_dir / "summary.txt").read_text()
    assert f"Wrote {len(files)} files" in out


def test_analyze_without_plots_and_with_render(tmp_path: Path, calls: list[dict[str, Any]]) -> None:
    code, _, err = run(
        ["analyze", str(_log(tmp_path)), "--render", "chatml", "--no-plots", "--out", str(tmp_path / "o")]
    )
    assert code == 0, err
    assert calls[0]["render"] == "chatml"
    assert not list((tmp_path / "o").glob("*.png"))


def test_progress_follows_the_tty_unless_forced(tmp_path: Path, calls: list[dict[str, Any]]) -> None:
    log = str(_log(tmp_path))
    out = ["--out", str(tmp_path / "o"), "--no-plots"]
    run(["analyze", log, *out])
    run(["analyze", log, *out], stderr=FakeTTY())
    run(["analyze", log, "--no-progress", *out], stderr=FakeTTY())
    run(["analyze", log, "--progress", *out])
    assert [c["progress"] for c in calls] == [False, True, False, True]


def test_missing_file_exits_2_naming_it(tmp_path: Path, calls: list[dict[str, Any]]) -> None:
    code, out, err = run(["analyze", str(tmp_path / "absent.jsonl")])
    assert code == 2
    assert err.strip() == f"promptkit: error: {tmp_path / 'absent.jsonl'}: no such file or directory"
    assert calls == [] and out == ""


def test_bad_input_from_the_engine_exits_2_with_its_message(
    tmp_path: Path, calls: list[dict[str, Any]]
) -> None:
    broken = _log(tmp_path, "broken.jsonl")
    code, _, err = run(["analyze", str(broken), "--out", str(tmp_path / "o")])
    assert code == 2
    assert err.startswith("promptkit: error: ") and str(broken) in err
    assert "Traceback" not in err


def test_bad_price_file_exits_2_naming_it(tmp_path: Path, calls: list[dict[str, Any]]) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text("{oops")
    code, _, err = run(["analyze", str(_log(tmp_path)), "--prices", str(prices)])
    assert code == 2 and str(prices) in err
    assert calls == []


def test_prices_and_model_options_change_the_cost_table(tmp_path: Path, calls: list[dict[str, Any]]) -> None:
    prices = tmp_path / "prices.csv"
    prices.write_text("model,cache_hit,cache_miss,output\nhouse-model,0,1000000,0\n")
    code, out, err = run(
        [
            "analyze",
            str(_log(tmp_path)),
            "--prices",
            str(prices),
            "--model",
            "house-model",
            "--no-plots",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert code == 0, err
    # 1 USD per prompt token: the no-cache cost is the prompt token count, with thousands separators
    total = sum(_fake_result([Path("x")]).requests["prompt_tokens"])
    assert f"{total:,}" in out and "house-model" in out
    code, out, _ = run(
        [
            "analyze",
            str(_log(tmp_path)),
            "--model",
            "unknown-model",
            "--no-plots",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert code == 0
    assert "no price for model 'unknown-model'" in out


def test_no_path_uses_the_bundled_log(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, calls: list[dict[str, Any]]
) -> None:
    monkeypatch.setattr(cli, "DEFAULT_LOG", "py.typed")  # any file shipped inside the package
    code, _, err = run(["analyze", "--no-plots", "--out", str(tmp_path / "o")])
    assert code == 0, err
    assert calls[0]["paths"][0].name == "py.typed"
    assert calls[0]["paths"][0].parent.name == "promptkit"
    assert "bundled log" in err


def test_no_path_and_no_bundled_log_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, calls: list[dict[str, Any]]
) -> None:
    monkeypatch.setattr(cli, "DEFAULT_LOG", "data/not-there.jsonl")
    code, _, err = run(["analyze"])
    assert code == 2
    assert "promptkit/data/not-there.jsonl is missing" in err
    assert calls == []


def test_an_out_that_names_a_file_is_a_clear_usage_error(tmp_path: Path, calls: list[dict[str, Any]]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = run(["analyze", str(_log(tmp_path)), "--out", str(blocker / "sub")])
    assert code == 2 and f"--out {blocker / 'sub'} (its parent {blocker}): is an existing file" in err
    code, _, err = run(["analyze", str(_log(tmp_path)), "--out", str(blocker)])
    assert code == 2 and "is an existing file, not a directory" in err and "File exists" not in err
    assert calls == []  # refused before any analysis


@pytest.mark.slow
def test_module_entry_point_runs_without_traceback(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "promptkit.cli", "analyze", str(tmp_path / "nope.jsonl")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert "nope.jsonl" in done.stderr and "Traceback" not in done.stderr
    version = subprocess.run(
        [sys.executable, "-m", "promptkit.cli", "--version"], capture_output=True, text=True, cwd=ROOT
    )
    assert version.returncode == 0 and version.stdout.startswith("promptkit ")


# ------------------------------------------------------------------------ end to end (real engine)


def _write_log(
    path: Path,
    *,
    session: str = "demo",
    system: str = "You are a helpful assistant. " * 40,
    turns: int = 4,
    start: int = 1_700_000_000,
    bad_line_at: int | None = None,
) -> list[dict[str, Any]]:
    """A JSONL log of a growing conversation with DeepSeek usage; returns the usage of each call."""
    messages: list[dict[str, str]] = [{"role": "system", "content": system}]
    lines, usages = [], []
    for turn in range(turns):
        messages = [*messages, {"role": "user", "content": f"Question {turn}: what is {turn} + {turn}?"}]
        answer = {"role": "assistant", "content": f"The answer is {2 * turn}."}
        hit = 256 if turn else 0
        usage = {
            "prompt_tokens": 300 + 20 * turn,
            "completion_tokens": 7,
            "prompt_cache_hit_tokens": hit,
            "prompt_cache_miss_tokens": 300 + 20 * turn - hit,
        }
        usages.append(usage)
        lines.append(
            json.dumps(
                {
                    "session": session,
                    "timestamp": start + 10 * turn,
                    "request": {"model": "deepseek-chat", "messages": messages},
                    "response": {"choices": [{"message": answer}], "usage": usage},
                }
            )
        )
        messages = [*messages, answer]
    if bad_line_at is not None:
        lines.insert(bad_line_at - 1, "{not json")
    path.write_text("\n".join(lines) + "\n")
    return usages


def test_end_to_end_with_the_real_engine(tmp_path: Path) -> None:
    from promptkit.report import REQUEST_COLUMNS

    log = tmp_path / "calls.jsonl"
    usages = _write_log(log, bad_line_at=3)
    out_dir = tmp_path / "report"
    code, out, err = run(["analyze", str(log), "--provider", "deepseek", "--out", str(out_dir)])
    assert code == 0, err
    requests = pl.read_parquet(out_dir / "requests.parquet")
    assert requests.columns[: len(REQUEST_COLUMNS)] == list(REQUEST_COLUMNS)
    assert requests.height == len(usages)
    assert requests["reported_cached_tokens"].to_list() == [u["prompt_cache_hit_tokens"] for u in usages]
    assert requests["reported_prompt_tokens"].to_list() == [u["prompt_tokens"] for u in usages]
    assert pl.read_csv(out_dir / "requests.csv").height == len(usages)
    assert "4 requests in 1 sessions" in out and "provider: deepseek" in out
    assert "Load problems: 1" in out and f"{log}:3:" in out
    assert "deepseek-chat" in out  # the cost table priced the log's model
    for name in ("hit_ratio.png", "predicted_vs_reported.png", "composition.png"):
        assert (out_dir / name).read_bytes()[:4] == b"\x89PNG"


def test_end_to_end_view_is_passed_to_the_engine(tmp_path: Path) -> None:
    shared = "Shared static head for every session. " * 30
    _write_log(tmp_path / "one.jsonl", session="one", system=shared, turns=2)
    _write_log(tmp_path / "two.jsonl", session="two", system=shared, turns=2, start=1_700_000_100)
    first_cached = {}
    for view in ("consecutive", "simulated"):
        out_dir = tmp_path / view
        code, _, err = run(
            [
                "analyze",
                str(tmp_path / "one.jsonl"),
                str(tmp_path / "two.jsonl"),
                "--provider",
                "exact",
                "--view",
                view,
                "--out",
                str(out_dir),
                "--no-plots",
            ]
        )
        assert code == 0, err
        requests = pl.read_parquet(out_dir / "requests.parquet")
        first_cached[view] = requests.filter((pl.col("session") == "two") & (pl.col("index") == 0))[
            "predicted_cached_tokens"
        ].item()
    # only the simulated (cross-session) cache credits session two's first call with the shared head
    assert first_cached["consecutive"] == 0
    assert first_cached["simulated"] > 0


def test_end_to_end_bad_inputs_name_the_path(tmp_path: Path) -> None:
    empty = tmp_path / "empty-dir"
    empty.mkdir()
    code, _, err = run(["analyze", str(empty), "--out", str(tmp_path / "o")])
    assert code == 2 and str(empty) in err and "Traceback" not in err
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    code, _, err = run(["analyze", str(binary), "--out", str(tmp_path / "o")])
    assert code == 2 and str(binary) in err


def test_unknown_provider_is_a_usage_error(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    _write_log(log, turns=1)
    code, _, err = run(["analyze", str(log), "--provider", "nonesuch"])
    assert code == 2 and "unknown provider 'nonesuch'" in err and "deepseek" in err


def test_no_path_analyzes_the_bundled_log_or_says_it_is_missing(tmp_path: Path) -> None:
    bundled = Path(cli.__file__).parents[1] / cli.DEFAULT_LOG
    code, out, err = run(["analyze", "--no-plots", "--out", str(tmp_path / "o")])
    if bundled.is_file():
        assert code == 0, err
        assert "Hit ratio per session" in out and "bundled log" in err
    else:
        assert code == 2 and f"promptkit/{cli.DEFAULT_LOG} is missing" in err


def test_input_without_any_usable_request_exits_2(tmp_path: Path) -> None:
    log = tmp_path / "all-bad.jsonl"
    log.write_text('{bad\n{"x": 1}\n')
    code, out, err = run(["analyze", str(log), "--out", str(tmp_path / "o")])
    assert code == 2 and out == ""
    assert str(log) in err and "no request could be analyzed (2 problem(s)" in err


def test_progress_shows_the_tables_phase_and_names_skipped_plots(
    tmp_path: Path, calls: list[dict[str, Any]]
) -> None:
    err = FakeTTY()
    code, _, text = run(["analyze", str(_log(tmp_path)), "--out", str(tmp_path / "o")], stderr=err)
    assert code == 0, text
    assert calls[0]["progress"] is True
    # every phase after the analysis shows a line, in order
    shown = [text.find(f"{name}: ") for name in ("tables", "html", "plots")]
    assert -1 not in shown and shown == sorted(shown), text
    quiet = run(["analyze", str(_log(tmp_path)), "--no-progress", "--out", str(tmp_path / "q")])[2]
    assert not any(f"{name}: " in quiet for name in ("tables", "html", "plots"))


def test_every_library_error_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from promptkit.cli import main

    bad = tmp_path / "notes.json"
    bad.write_text('"not a log"', encoding="utf-8")
    for argv in (["check", str(bad), "--min-hit", "0.5"], ["lint", str(bad)]):
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2, (argv, err)
        assert (
            err.count("\n") == 1
            and err.startswith("promptkit: error: ")
            and "not a log of any known format" in err
        )


def test_csv_cells_that_a_spreadsheet_would_run_are_neutralised(tmp_path: Path) -> None:
    # mutation checked: writing the frames with write_csv directly leaves "=HYPERLINK(...)" as a formula
    log = tmp_path / "calls.jsonl"
    sessions = ['=HYPERLINK("http://x")', "+1", "-2", "@SUM(A1)", "plain"]
    log.write_text(
        "".join(
            json.dumps({"session": s, "request": {"model": "deepseek-chat",
                                                   "messages": [{"role": "user", "content": f"hi {k}"}]}}) + "\n"
            for k, s in enumerate(sessions)
        ),
        encoding="utf-8",
    )  # fmt: skip
    out = tmp_path / "out"
    assert cli.main(["analyze", str(log), "--out", str(out), "--no-html", "--quiet"]) == 0
    written = set(pl.read_csv(out / "requests.csv", infer_schema=False)["session"].to_list())
    assert written == {'\'=HYPERLINK("http://x")', "'+1", "'-2", "'@SUM(A1)", "plain"}
    assert set(pl.read_parquet(out / "requests.parquet")["session"].to_list()) == set(
        sessions
    )  # data as it is
    numbers = pl.read_csv(out / "requests.csv")
    assert numbers["prompt_tokens"].dtype.is_integer()  # numeric columns are left alone
