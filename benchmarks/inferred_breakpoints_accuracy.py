"""How close promptkit comes on Anthropic logs that show no cache_control (breakpoints inferred).

OpenCode exports, LiteLLM payloads, OpenTelemetry spans and ATIF trajectories keep the messages of an
Anthropic call but not the ``cache_control`` the client added; promptkit then places the breakpoints from
the reported counts (:mod:`promptkit.analysis.breakpoints`). Real logs of those routes with usage are
rare, so this measures on real Claude Code projects read as such a log would be: every ``cache_control``
stripped from the requests and the end of the system prompt unmarked. For each project folder given, and
pooled, it prints the calls with usage, the reported hit ratio, the predicted one without the inference
(what promptkit predicted before: nothing is cached without a breakpoint) and with it, the calls whose
breakpoints were inferred, the calls predicted exactly, and the columns of docs/reference/accuracy.md
(its row was made with this on the five projects of marot/spotter's ``test/fixtures/transcripts/``)::

    PYTHONPATH=$PWD python benchmarks/inferred_breakpoints_accuracy.py p-258c7280 p-4d5611e5 p-8463c716 p-ae4a77f8 p-fa812bfe
"""

from __future__ import annotations

import sys
from typing import Any

import attrs
import polars as pl

from promptkit.analysis.api import analyze_requests
from promptkit.formats import read_logs
from promptkit.layout import RequestRecord
from promptkit.providers.registry import get_provider


def stripped(record: RequestRecord) -> RequestRecord:
    """The record as a log that does not show cache_control holds it: none in the request, no mark at the
    end of the head the transcript does not show."""

    def clean(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {k: clean(v) for k, v in obj.items() if k != "cache_control"}
        if isinstance(obj, list):
            return [clean(v) for v in obj]
        return obj

    meta = {k: v for k, v in record.meta.items() if k != "opaque_head_cache_control"}
    return attrs.evolve(record, request=clean(record.request), meta=meta)


def calls(path: str) -> pl.DataFrame:
    """The calls with usage of the project at ``path``, read without cache_control and analyzed as
    Anthropic's (positions in the provider's units), with ``local_prompt_tokens`` (ruler mode off) and
    ``blind_cached_tokens`` (the prediction without the write counts: no breakpoint inferred)."""
    records = [stripped(r) for r in read_logs(path).records]
    result = analyze_requests(records, provider="anthropic")
    exact = attrs.evolve(get_provider("anthropic"), exact_tokenizer=True)
    local = analyze_requests(records, provider=exact, view=result.view).requests.select(
        "session", "index", pl.col("prompt_tokens").alias("local_prompt_tokens")
    )
    blind_records = [
        attrs.evolve(r, usage=attrs.evolve(r.usage, cache_write_tokens=None)) if r.usage else r
        for r in records
    ]
    blind = analyze_requests(blind_records, provider="anthropic", view=result.view).requests.select(
        "session", "index", pl.col("predicted_cached_tokens").alias("blind_cached_tokens")
    )
    frame = result.requests.join(local, on=["session", "index"], how="left").join(
        blind, on=["session", "index"], how="left"
    )
    return frame.filter(pl.col("reported_cached_tokens").is_not_null())


def row(name: str, q: pl.DataFrame) -> dict[str, object]:
    """The figures of one project (or the pooled ones)."""
    prompt, reported = int(q["reported_prompt_tokens"].sum()), int(q["reported_cached_tokens"].sum())
    upper = q["predicted_cached_tokens"]
    return {
        "projects": name,
        "calls": q.height,
        "inferred": int(q["inferred_breakpoints"].is_not_null().sum()),
        "local exact": f"{float((q['local_prompt_tokens'] == q['reported_prompt_tokens']).mean() or 0):.1%}",
        "placed exactly": f"{float((q['position_basis'] == 'exact').mean() or 0):.1%}",
        "reported hit": f"{reported / prompt:.3f}",
        "predicted hit, no inference": f"{int(q['blind_cached_tokens'].sum()) / prompt:.3f}",
        "predicted hit": f"{int(upper.sum()) / prompt:.3f}",
        "exact calls": f"{int((upper == q['reported_cached_tokens']).sum())} / {q.height}",
        "under the report": f"{float((upper < q['reported_cached_tokens']).mean() or 0):.1%}",
        "upper error": f"{100 * (int(upper.sum()) - reported) / prompt:+.2f} pp",
        "MAE": f"{float((upper - q['reported_cached_tokens']).abs().mean() or 0):,.0f}",
    }


def main(paths: list[str]) -> None:
    frames = {p.rstrip("/").rsplit("/", 1)[-1]: calls(p) for p in paths}
    rows = [row(name, q) for name, q in frames.items()]
    if len(frames) > 1:
        rows.append(row("(pooled)", pl.concat(list(frames.values()), how="vertical_relaxed")))
    with pl.Config(tbl_cols=-1, tbl_width_chars=250, tbl_rows=-1):
        print(pl.DataFrame(rows))


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:] or ["fixtures/claude-code"])
