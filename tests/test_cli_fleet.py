"""Tests for ``promptkit fleet`` (promptkit/cli.py): lists of replicas, policies, capacities, models."""

from __future__ import annotations

import gzip
import io
import json
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_capacities_in_bytes_need_and_use_the_models(tmp_path: Path) -> None:
    code, _, err = _run(
        str(HEAD), "--replicas", "2", "--policy", "random", "--capacity", "10GB",
        "--model", "deepseek-v3,llama-3.1-8b", "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 0, err
    written = pl.read_csv(tmp_path / "fleet.csv")
    assert written["model"].to_list() == ["deepseek-v3", "llama-3.1-8b"]
    assert written["capacity_tokens"].to_list() == [10 * 2**30 // 70272, 10 * 2**30 // 131072]  # binary GB
    code, _, err = _run(str(HEAD), "--capacity", "10GB", "--out", str(tmp_path))
    assert code == 2 and "need a model" in err and "--model" in err


@pytest.mark.parametrize(
    ("argv", "code", "named"),
    [
        (["--replicas", "0"], 2, "replicas must be a whole number >= 1, got 0"),
        (["--replicas", "4,100000000"], 2, "replicas: 100,000,000 is more than the 65,536"),  # was 7.5 GB
        (["--replicas", "65537"], 2, "replicas: 65,537 is more than the 65,536"),
        (["--capacity", "1e30"], 2, "'1e30': a size is tokens"),  # was an OverflowError
        (["--policy", "fastest"], 2, "'fastest'"),
        (["--capacity", "0"], 2, "got 0"),
        (["--capacity", "3zz"], 2, "'3zz'"),
        (["--block-size", "256"], 2, "block size 256 (--block-size) contradicts the trace"),
        (["--router-view", "fuzzy"], 2, "fuzzy"),
        (["--router-instances", "0"], 2, "RouterSettings.instances"),
        (["--gpu", "h100"], 2, "needs a model"),
        (["--gpu", "h100", "--prefill-rate", "5"], 2, "not both"),
        (["--decode-rate", "5"], 2, "--decode-rate needs --prefill-rate"),
        (["--shared-capacity", "1GB"], 2, "--shared-capacity: give a number of tokens"),
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


@pytest.mark.slow
def test_json_carries_the_verdict_and_ttft_per_policy(tmp_path: Path) -> None:
    code, out, err = _run(
        str(HEAD), "--replicas", "1,4", "--policy", "round_robin,prefix_aware,kv_cost", "--prefill-rate", "20000",
        "--decode-rate", "50", "--json", "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    verdict = {row["replicas"]: row for row in data["verdict"]}
    assert verdict[1]["best"] == "any" and verdict[1]["runner_up"] is None
    best = verdict[4]
    assert best["best"] in ("round_robin", "prefix_aware", "kv_cost") and best["runner_up"] != best["best"]
    table = data["table"]
    assert len(table) == 6 and all(row["ttft_p50_s"] > 0 and row["ttft_p99_s"] >= row["ttft_p50_s"] for row in table)
    four = [row for row in table if row["replicas"] == 4]
    top = max(four, key=lambda r: (r["hit_ratio"], -r["load_imbalance"]))
    assert best["hit_ratio"] == top["hit_ratio"]
    assert best["share_of_ceiling"] == pytest.approx(top["hit_ratio"] / top["ceiling_hit_ratio"], abs=1e-4)
    written = pl.read_csv(tmp_path / "fleet.csv")
    assert written["ttft_p50_s"].to_list() == pytest.approx([row["ttft_p50_s"] for row in table])


@pytest.mark.slow
def test_text_output_starts_with_the_verdict_then_the_pivot(tmp_path: Path) -> None:
    code, out, err = _run(
        str(HEAD), "--replicas", "4", "--policy", "round_robin,prefix_aware", "--capacity", "4K,1M",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 0, err
    assert out.index("Verdict") < out.index("Fleet hit ratio") < out.index("Load imbalance")
    assert "4K tokens, 4 replicas:" in out and "1M tokens, 4 replicas:" in out and "of the one-cache ceiling" in out
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert 'id="fleet-verdict"' in html
    assert "1.037" in html  # prefix_aware's imbalance, three decimals (1.0 would hide it)


@pytest.mark.slow
def test_a_gzipped_trace_and_a_folder_print_what_the_plain_file_prints(tmp_path: Path) -> None:
    gz = tmp_path / "in" / "head.jsonl.gz"
    gz.parent.mkdir()
    gz.write_bytes(gzip.compress(HEAD.read_bytes()))
    outputs = []
    for source in (HEAD, gz, gz.parent):
        code, out, err = _run(str(source), "--replicas", "4", "--json", "--out", str(tmp_path / "o"))
        assert code == 0, err
        outputs.append(json.loads(out)["table"])
    assert outputs[0] == outputs[1] == outputs[2]


@pytest.mark.slow
def test_router_settings_reach_the_router(tmp_path: Path) -> None:
    def cached(*flags: str) -> list[int]:
        code, out, err = _run(str(HEAD), "--replicas", "4", "--policy", "consistent_hash", *flags, "--json",
                              "--out", str(tmp_path))  # fmt: skip
        assert code == 0, err
        return [row["cached_tokens"] for row in json.loads(out)["table"]]

    assert cached("--hash-blocks", "1") != cached("--hash-blocks", "4")


def test_the_old_import_path_of_fleet_report_warns() -> None:
    import promptkit.commands.fleet as new
    import promptkit.report.fleet as old

    with pytest.warns(DeprecationWarning, match="moved to promptkit.commands.fleet"):
        moved = old.fleet_report
    assert moved is new.fleet_report
    with pytest.raises(AttributeError):
        old.no_such_name  # noqa: B018
