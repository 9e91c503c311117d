"""``promptkit whatif``: exit codes, printed comparison, --json shapes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from promptkit import cli
from promptkit.whatif import REPLAY_NOTE
from tests.whatif.logs import plain_log


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["whatif", *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("whatif") / "planted.jsonl"
    path.write_text(
        "".join(json.dumps(r.to_json()) + "\n" for r in plain_log(4, timestamp=True)), encoding="utf-8"
    )
    return path


def test_transform_prints_before_and_after_per_session(planted: Path) -> None:
    code, out, err = _run(str(planted), "--transform", "normalize:timestamps")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "What if: replace volatile values (timestamps) in the stable head with a placeholder"
    session = next(line for line in lines if line.startswith("p "))
    total = next(line for line in lines if line.startswith("(all)"))
    assert "0.0% → " in session and "0.0% → " in total
    assert f"note: {REPLAY_NOTE}" in lines


def test_transform_json_shape(planted: Path) -> None:
    code, out, _ = _run(
        str(planted),
        "--transform",
        "normalize:timestamps",
        "--transform",
        "pin-model:deepseek-chat",
        "--json",
    )
    assert code == 0
    data = json.loads(out)
    assert data["specs"] == ["normalize:timestamps", "pin-model:deepseek-chat"]
    assert [s["session"] for s in data["sessions"]] == ["p"]
    assert data["overall"]["session"] == "(all)"
    assert data["overall"]["after_hit_ratio"] > data["overall"]["before_hit_ratio"] == 0.0
    assert data["overall"]["requests"] == 4
    assert REPLAY_NOTE in data["notes"]


def test_suggest_json_lists_ranked_suggestions(planted: Path) -> None:
    code, out, _ = _run(str(planted), "--suggest", "--json")
    assert code == 0
    document = json.loads(out)
    suggestions = document["suggestions"]
    assert suggestions and isinstance(document["costs"], list) and document["notes"]
    for s in suggestions:
        assert {
            "transform",
            "spec",
            "before_hit_ratio",
            "after_hit_ratio",
            "before_cost_usd",
            "after_cost_usd",
        } <= set(s)
        assert isinstance(s["transform"], str) and isinstance(s["after_cost_usd"], float)
    assert suggestions[0]["spec"] == "normalize:timestamps"
    savings = [s["before_cost_usd"] - s["after_cost_usd"] for s in suggestions]
    assert savings == sorted(savings, reverse=True)


def test_suggest_text_names_the_spec_to_use(planted: Path) -> None:
    code, out, _ = _run(str(planted), "--suggest", "--limit", "1")
    assert code == 0
    assert " 1. replace volatile values (timestamps)" in out
    assert "promptkit whatif " + str(planted) + " --transform normalize:timestamps" in out
    assert " 2. " not in out


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--transform", "bogus"], 2, "unknown transform 'bogus'"),
        (["--transform", "move:key=a,to=nowhere"], 2, "Move.to"),
        (["--provider", "nobody", "--transform", "sort-tools"], 2, "unknown provider 'nobody'"),
        (["--suggest", "--limit", "0"], 2, "--limit"),
        ([], 2, ""),  # neither --transform nor --suggest
        (["--suggest", "--transform", "sort-tools"], 2, ""),
    ],
)
def test_usage_errors_exit_2(planted: Path, argv: list[str], code: int, message: str) -> None:
    got, _, err = _run(str(planted), *argv)
    assert got == code
    assert message in err


def test_bad_input_exits_2(tmp_path: Path) -> None:
    code, _, err = _run(str(tmp_path / "missing.jsonl"), "--suggest")
    assert code == 2 and "no such file" in err
    junk = tmp_path / "junk.jsonl"
    junk.write_text('{"request": {"messages": "nope"}, "session": "s"}\n', encoding="utf-8")
    code, _, err = _run(str(junk), "--transform", "sort-tools")
    assert code == 2
    assert "junk.jsonl" in err
