"""The one pricing path: a dated price per model version, never another version's price, a note for a
model without one, and the same cost from analyze, whatif and the HTML report."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from promptkit.cli import main
from promptkit.formats import read_logs
from promptkit.report import pricing, summarize

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "real-logs"  # beside the checkout, where the workplace lays it
LOG_DIRS = [ROOT / "fixtures", ROOT / "promptkit" / "data", *([SHARED] if SHARED.is_dir() else [])]


def _models_in_logs() -> set[str]:
    models: set[str] = set()
    for root in LOG_DIRS:
        for path in sorted(root.rglob("*")):
            if (
                not path.is_file()
                or path.suffix in {".md", ".py", ".j2", ".csv"}  # the golden frames are no logs
                or "calibration" in path.name
            ):
                continue
            for record in read_logs([path]).records:
                model = record.request.get("model")
                if isinstance(model, str):
                    models.add(model)
    return models


@pytest.mark.slow
def test_every_model_in_the_logs_has_its_own_dated_price_or_none_with_a_note() -> None:
    models = _models_in_logs()
    assert {"claude-opus-4-6", "deepseek-chat", "gemini-3-pro-preview"} <= models
    table = pricing.resolve_prices()
    unpriced = []
    for name in sorted(models):
        key = pricing.lookup_model(name, table)
        if key is None:
            unpriced.append(name)
            continue
        price = table[key]
        # its own version: the key is the name, or the name is a dated snapshot of it
        assert name.lower() == key or re.fullmatch(re.escape(key) + r"-\d{8}", name.lower()), (name, key)
        assert price.as_of and price.source, name
    # the rest are priced by nothing: their requests get empty costs and a note naming them
    frame = pl.DataFrame(
        {
            "session": ["s"] * len(unpriced),
            "index": list(range(len(unpriced))),
            "prompt_tokens": [1000] * len(unpriced),
            "predicted_cached_tokens": [0] * len(unpriced),
            "model": unpriced,
        }
    )
    if unpriced:
        tables = summarize(frame)
        notes = " ".join(tables["notes"]["note"].to_list())
        for name in unpriced:
            assert f"no price for model {name!r}" in notes
        assert tables["cost"].filter(pl.col("basis") == "predicted")["cost_with_cache"].is_null().all()


def test_a_newer_version_is_never_priced_as_an_older_one() -> None:
    table = pricing.resolve_prices()
    # Opus 4.6 has its own price ($5 / $25), not Opus 4's ($15 / $75)
    assert pricing.lookup_model("claude-opus-4-6", table) == "claude-opus-4-6"
    assert table["claude-opus-4-6"].cache_miss == 5.0 and table["claude-opus-4"].cache_miss == 15.0
    for name in ("claude-opus-4-9", "gpt-5.5", "gpt-4o-realtime-preview", "gemini-2.0-flash-lite"):
        assert pricing.lookup_model(name, table) is None, name
    # a dated snapshot of a version is that version
    assert pricing.lookup_model("claude-sonnet-4-5-20250929", table) == "claude-sonnet-4-5"
    assert pricing.lookup_model("claude-opus-4-20250514", table) == "claude-opus-4"
    assert pricing.lookup_model("gpt-4o-2024-08-06", table) == "gpt-4o"


def test_a_mixed_log_prices_what_it_can_and_notes_the_rest() -> None:
    frame = pl.DataFrame(
        {
            "session": ["s", "s"],
            "index": [0, 1],
            "prompt_tokens": [1_000_000, 1_000_000],
            "predicted_cached_tokens": [0, 0],
            "model": ["deepseek-chat", "gpt-9"],
        }
    )
    costs = pricing.request_costs(frame, missing="empty")
    assert costs["priced_as"].to_list() == ["deepseek-chat", None]
    assert costs["cost_no_cache"][0] == pytest.approx(0.28) and costs["cost_no_cache"][1] is None
    with pytest.raises(pricing.PriceError, match="no price for 'gpt-9'"):
        pricing.request_costs(frame)
    assert pricing.unpriced_models(costs) == {"gpt-9": 1}


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_a_missing_price_is_a_note_in_quiet_and_json_never_a_silently_dropped_cost(tmp_path: Path) -> None:
    code, out, _ = _run(
        "analyze", "--model", "gpt-9", "-q", "--no-plots", "--no-html", "--out", str(tmp_path / "q")
    )
    assert code == 0 and "no price for model 'gpt-9'" in out
    code, out, _ = _run(
        "analyze", "--model", "gpt-9", "--json", "--no-plots", "--no-html", "--out", str(tmp_path / "j")
    )
    summary = json.loads(out)
    assert summary["headline"]["cost_with_cache"] is None
    assert any("no price for model 'gpt-9'" in n["note"] for n in summary["notes"])


def _html_cost(path: Path) -> float:
    text = path.read_text(encoding="utf-8")
    match = re.search(r'id="cost-with" data-value="([0-9.e-]+)"', text)
    assert match, "the HTML report shows the cost with cache"
    return float(match.group(1))


@pytest.mark.slow
@pytest.mark.parametrize("log", ["promptkit/data/default-session.jsonl", "fixtures/claude-code"])
def test_analyze_whatif_and_the_html_report_give_the_same_cost(tmp_path: Path, log: str) -> None:
    path = str(ROOT / log)
    code, out, _ = _run("analyze", path, "--json", "--no-plots", "--out", str(tmp_path))
    assert code == 0
    analyzed: Any = json.loads(out)["headline"]["cost_with_cache"]
    code, out, _ = _run("whatif", path, "--transform", "ttl:1h", "--json")
    assert code == 0
    before = json.loads(out)["overall"]["before_cost_usd"]
    assert before == pytest.approx(analyzed, abs=1e-9)
    assert _html_cost(tmp_path / "report.html") == pytest.approx(analyzed, abs=1e-9)


def test_one_hour_writes_cost_the_same_in_analyze_and_whatif(tmp_path: Path) -> None:
    from promptkit.whatif import SetTTL, apply_transforms
    from tests.whatif.test_advice import _anthropic_log

    records = apply_transforms(_anthropic_log(), [SetTTL("1h")])
    log = tmp_path / "calls.jsonl"
    log.write_text("".join(json.dumps(r.to_json()) + "\n" for r in records), encoding="utf-8")
    code, out, _ = _run("analyze", str(log), "--json", "--no-plots", "--out", str(tmp_path / "o"))
    assert code == 0
    analyzed = json.loads(out)["headline"]["cost_with_cache"]
    requests = pl.read_parquet(tmp_path / "o" / "requests.parquet")
    assert requests["predicted_cache_write_1h_tokens"].sum() > 0  # the case where the paths disagreed
    code, out, _ = _run("whatif", str(log), "--transform", "sort-tools", "--json")
    assert json.loads(out)["overall"]["before_cost_usd"] == pytest.approx(analyzed, abs=1e-9)
    assert _html_cost(tmp_path / "o" / "report.html") == pytest.approx(analyzed, abs=1e-9)


@pytest.mark.parametrize(
    "name",
    [
        "promptkit.report.pricing",
        "promptkit.report.files",
        "promptkit.report.summary",
        "promptkit.report.metrics",
        "promptkit.formats.mooncake_trace",
        "promptkit.formats.opaque_head",
    ],
)
def test_the_docstring_examples_hold(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import doctest
    import importlib

    monkeypatch.chdir(ROOT)
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_writes_are_billed_at_the_write_price_or_at_the_input_price_when_there_is_none() -> None:
    # 1,000-token prompt: 300 read from the cache, 200 written (50 for an hour), 500 neither
    frame = pl.DataFrame({"session": ["s"], "index": [0], "prompt_tokens": [1000], "predicted_cached_tokens": [300],
                          "predicted_cache_write_tokens": [200], "predicted_cache_write_1h_tokens": [50],
                          "completion_tokens": [40]})  # fmt: skip
    bare = {"cache_hit": 0.1, "cache_miss": 1.0, "output": 2.0}
    costs = pricing.request_costs(frame, prices={"m": bare}, model="m").row(0, named=True)
    # no write price: a write costs what an uncached input token costs (not the hit price)
    assert costs["cost_predicted"] == pytest.approx((300 * 0.1 + 200 * 1.0 + 500 * 1.0 + 40 * 2.0) / 1e6)
    written = {**bare, "cache_write": 1.25}
    costs = pricing.request_costs(frame, prices={"m": written}, model="m").row(0, named=True)
    # a write price but no 1-hour price: the hour's writes at the write price
    assert costs["cost_predicted"] == pytest.approx((300 * 0.1 + 200 * 1.25 + 500 * 1.0 + 40 * 2.0) / 1e6)
    hour = {**written, "cache_write_1h": 2.0}
    costs = pricing.request_costs(frame, prices={"m": hour}, model="m").row(0, named=True)
    assert costs["cost_predicted"] == pytest.approx((300 * 0.1 + 150 * 1.25 + 50 * 2.0 + 500 * 1.0 + 40 * 2.0) / 1e6)
    assert costs["cost_no_cache"] == pytest.approx((1000 * 1.0 + 40 * 2.0) / 1e6)  # the output at its price
    assert costs["output_tokens"] == 40


def test_a_dated_openai_snapshot_is_priced_as_its_version_and_never_as_another() -> None:
    from promptkit.providers.prices import ModelPrice, lookup_model

    table = {name: ModelPrice("openai", name, 1.0, 2.0, 3.0) for name in ("gpt-4", "gpt-4o", "gpt-4.1")}
    assert lookup_model("gpt-4-0613", table) == "gpt-4"  # OpenAI's -MMDD snapshots
    assert lookup_model("gpt-4-0314", table) == "gpt-4"
    assert lookup_model("openai/GPT-4O-2024-08-06", table) == "gpt-4o"
    assert lookup_model("gpt-4.1-2025-04-14", table) == "gpt-4.1"
    assert lookup_model("gpt-4o-latest", table) == "gpt-4o"
    assert lookup_model("gpt-4-turbo", table) is None  # another model, not a snapshot
    assert lookup_model("gpt-4-06130", table) is None
    assert lookup_model("gpt-4-1106-preview", table) is None
    # where two keys match, the longer (the more specific version) prices it
    tagged = {name: ModelPrice("ollama", name, 0.0, 1.0, 1.0) for name in ("qwen3", "qwen3:32b")}
    assert lookup_model("qwen3:32b@gpu-box", tagged) == "qwen3:32b"
    assert lookup_model("qwen3:8b", tagged) == "qwen3"
