"""How close promptkit's predicted cache reads come to Anthropic's on Claude Code projects.

For each project folder given (a Claude Code project: session files and their ``subagents/``), analyze it
with the defaults (simulated view, ruler mode) and print one row: calls, warm calls whose predicted cached
tokens equal the reported ones (a warm call follows a call of its session within the 5-minute TTL, with
no compaction or rewind in between), the aggregate error of the cached tokens, the per-call mean absolute
error, the calls predicted under what the provider read, and the unexplained share of the lost tokens;
then every rebuild (a call after the first of its thread that read less than half its prompt, and the
first call after each compaction) with its predicted and reported reads and its cause. The table of docs/concepts/ruler.md was made
with it on the five projects of marot/spotter's ``test/fixtures/transcripts/``.

    python benchmarks/claude_code_accuracy.py fixtures/claude-code/-home-USER-projects-spotter-worktrees-spotter-dov
"""

from __future__ import annotations

import sys

import polars as pl

from promptkit.analysis.api import analyze
from promptkit.analysis.causes import explain_causes


def measure(path: str) -> tuple[dict[str, object], pl.DataFrame]:
    result = analyze(path)
    q = result.requests.sort("session", "index").with_columns(
        (pl.col("timestamp") - pl.col("timestamp").shift(1).over("session")).alias("gap")
    )
    causes = explain_causes(result)
    warm = q.filter(
        (pl.col("index") > 0)
        & (pl.col("gap") < 300)
        & pl.col("log_events").is_null()
        & pl.col("reported_cached_tokens").is_not_null()
    )
    lost = sum(int(v or 0) for v in causes.select(pl.col("^lost_.*$")).sum().row(0))
    predicted, reported = int(q["predicted_cached_tokens"].sum()), int(q["reported_cached_tokens"].sum())
    row = {
        "project": path.rstrip("/").rsplit("/", 1)[-1][-12:],
        "calls": q.height,
        "warm exact": f"{int((warm['predicted_cached_tokens'] == warm['reported_cached_tokens']).sum())} / {warm.height}",
        "aggregate error": f"{(predicted - reported) / reported:+.1%}" if reported else "n/a",
        "under read": int((q["predicted_cached_tokens"] < q["reported_cached_tokens"]).sum()),
        "per-call MAE": round(
            float((q["predicted_cached_tokens"] - q["reported_cached_tokens"]).abs().mean() or 0)
        ),
        "unexplained": f"{int(causes['lost_unexplained'].sum()) / lost:.1%}" if lost else "0.0%",
    }
    rebuilds = (
        causes.join(
            q.select("session", "index", "gap", "reported_cached_tokens", "reported_prompt_tokens"),
            on=["session", "index"],
        )
        .join(q.select("session", "index", "predicted_cached_tokens", "log_events"), on=["session", "index"])
        .filter(
            (pl.col("index") > 0)
            & (
                (pl.col("reported_cached_tokens") < 0.5 * pl.col("reported_prompt_tokens"))
                | pl.col("log_events").str.contains("compaction")
            )
        )
        .select(
            "session",
            "index",
            "gap",
            "predicted_cached_tokens",
            "reported_cached_tokens",
            "reported_prompt_tokens",
            "cause",
            "change_detail",
        )
    )
    return row, rebuilds


def main(paths: list[str]) -> None:
    rows = []
    for path in paths:
        row, rebuilds = measure(path)
        rows.append(row)
        with pl.Config(tbl_rows=50, fmt_str_lengths=60, tbl_width_chars=200):
            print(path, "rebuilds:", rebuilds, sep="\n")
    with pl.Config(tbl_rows=50, tbl_width_chars=200):
        print(pl.DataFrame(rows))


if __name__ == "__main__":
    main(sys.argv[1:] or ["fixtures/claude-code/-home-USER-projects-spotter-worktrees-spotter-dov"])
