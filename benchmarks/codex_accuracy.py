"""The accuracy row of docs/reference/accuracy.md for Codex rollouts on OpenAI, measured on real rollouts
this repository does not hold (they carry no licence): give their folder, and the script prints what the
Codex reader made of the files (calls, problems, compaction events that are not calls, encrypted
reasoning left out of the text) and the row (the columns of ``tests/analysis/test_accuracy.py``).
Without a folder, or when it is absent, it says so and exits 0.

    PYTHONPATH=$PWD python benchmarks/codex_accuracy.py /tmp/codex-rollouts

The row of the docs was made on seven rollouts in one folder: the six of madshn/localpush,
``src-tauri/tests/fixtures/codex/2026-02-23/raw/sessions/`` (commit 219b539), and the one of
AcidicSoil/codex-session-view, ``.sample_session/`` (commit 23314e0). One rollout alone has no other run
to be held out against: its row keeps the bundled calibration's error only. Rollouts whose route
reports 0 cached tokens on every call (Kimi through a local Ollama) have no accuracy to measure: the
script prints what the analysis says of them instead (the note, the tokens charged to
``reads_unreported``, none to the layout).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from promptkit.analysis.api import analyze
from promptkit.analysis.calibration import default_calibration, expected_cached
from promptkit.analysis.causes import LAYOUT_CAUSES, explain_causes, unreported_sessions
from promptkit.formats import read_logs

ROOT = Path(__file__).resolve().parents[1]


def reader_figures(folder: Path) -> dict[str, object]:
    """What the Codex reader made of the rollouts: calls, problems, ``token_count`` events with 0 input
    and 0 output tokens (written at a compaction: not calls), and the encrypted reasoning left out."""
    result = read_logs(folder)
    zero = 0
    for path in sorted(folder.rglob("rollout-*.jsonl")):
        for text in path.read_text(encoding="utf-8").splitlines():
            payload = json.loads(text).get("payload") or {}
            info = payload.get("info") if payload.get("type") == "token_count" else None
            last = info.get("last_token_usage") if isinstance(info, dict) else None
            zero += isinstance(last, dict) and last.get("input_tokens") == 0 and not last.get("output_tokens")
    hidden = [r.meta.get("codex_encrypted_reasoning", {}).get("chars", 0) for r in result.records]
    return {
        "files": result.formats.get("codex", 0),
        "calls": len(result.records),
        "problems": len(result.problems),
        "compaction token_counts (not calls)": zero,
        "providers": sorted({str(r.provider) for r in result.records}),
        "most encrypted reasoning left out of one request (chars)": max(hidden, default=0),
    }


def _accuracy_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "accuracy", ROOT / "tests" / "analysis" / "test_accuracy.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> int:
    if not argv or not Path(argv[0]).is_dir():
        print("no rollout folder given (or it is absent): nothing measured")
        return 0
    folder = Path(argv[0])
    print(reader_figures(folder))
    result = analyze(folder)
    silent = unreported_sessions(result.requests)
    if silent and len(silent) == result.requests["session"].n_unique():
        print(no_read_figures(result))  # a route that reports no cache read: no accuracy to measure
        return 0
    accuracy = _accuracy_module()
    provider = str(result.provider)
    frame = accuracy.calls_with_usage(str(folder), provider)
    if frame["session"].n_unique() > 1:
        row = accuracy.accuracy_row(provider, frame, "Codex")
    else:  # one rollout: no other run to hold it out against; the bundled calibration is still a fit on others
        row = single_run_row(accuracy, provider, frame)
    print(row)
    print(" | ".join(_cells(row)))
    return 0


def single_run_row(accuracy: ModuleType, provider: str, frame: Any) -> dict[str, object]:
    """The row of one rollout: the held-out expectation needs other runs to fit on, so it is left out
    (None); the bundled calibration's error is kept (fitted on other rollouts, it is a held-out figure
    for this one)."""
    import attrs

    from promptkit.providers.registry import get_provider, register_provider

    name = f"{provider}-single-run"
    register_provider(attrs.evolve(get_provider(provider), name=name, best_effort=False), replace=True)
    row: dict[str, object] = accuracy.accuracy_row(name, frame, "Codex")
    bundled = default_calibration(provider)
    if bundled is not None:
        mine = frame.join(expected_cached(frame, bundled), on=["session", "index"])
        row["bundled_error_pp"] = 100 * (
            mine["expected_cached_tokens"].sum() - frame["reported_cached_tokens"].sum()
        ) / frame["reported_prompt_tokens"].sum()
    return row


def no_read_figures(result: Any) -> dict[str, object]:
    """What the analysis says of rollouts whose route reports 0 cached tokens on every call (Kimi through
    a local Ollama): the calls, the reported and the upper-bound hit ratios, the calls the rules allow a
    read for, the tokens charged to ``reads_unreported`` (none to the layout) and the note."""
    frame = result.requests
    causes = explain_causes(frame, result.cache_model)
    prompt = int(frame["reported_prompt_tokens"].sum())
    return {
        "provider": result.provider,
        "calls": frame.height,
        "reported_hit_ratio": int(frame["reported_cached_tokens"].sum()) / prompt,
        "upper_hit_ratio": int(frame["predicted_cached_tokens"].sum()) / prompt,
        "calls the rules allow a read for": int((frame["predicted_cached_tokens"] > 0).sum()),
        "lost_reads_unreported": int(causes["lost_reads_unreported"].sum()),
        "lost to the layout": int(sum(causes[f"lost_{c}"].sum() for c in LAYOUT_CAUSES)),
        "note": [n for n in result.notes if "may not report cache reads" in n],
    }


def _cells(row: dict[str, object]) -> list[str]:
    """The row as docs/reference/accuracy.md shows it ("–" where a figure does not apply)."""

    def pp(value: object) -> str:
        return "–" if value is None else f"{float(str(value)):+.2f} pp".replace("-", "\u2212")

    def share(value: object, fmt: str) -> str:
        return format(float(str(value)), fmt)

    return [
        str(row["calls"]), share(row["exact_share"], ".0%"), share(row["placed_exact"], ".0%"),
        share(row["reported_hit_ratio"], ".3f"), share(row["upper_below"], ".1%") + " of calls",
        pp(row["upper_error_pp"]), pp(row["expected_error_pp"]), pp(row["bundled_error_pp"]),
        share(row["mae_tokens"], ",.0f") + " tokens",
        "–" if row["expected_mae_tokens"] is None else share(row["expected_mae_tokens"], ",.0f") + " tokens",
    ]  # fmt: skip


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
