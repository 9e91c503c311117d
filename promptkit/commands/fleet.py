"""``promptkit fleet`` as functions: :func:`fleet_report` reads traces or logs, compares every replica count
× policy × capacity (:func:`~promptkit.analysis.fleet.compare_fleet`) and writes ``fleet.csv``,
``fleet.png`` and ``report.html``; :func:`run_fleet` returns what the command prints: the verdict first,
then the pivot tables (or, with ``as_json``, the same content as JSON).

(``fleet_report`` lived in :mod:`promptkit.report.fleet` before; the old import path still works for one
release, with a :class:`DeprecationWarning`.)

>>> import tempfile
>>> report = fleet_report(["fixtures/traces/mooncake-conversation-head.jsonl"], replicas=[1, 4],
...                       policies=["round_robin", "prefix_aware"], capacities=[4096, None],
...                       out=tempfile.mkdtemp())
>>> sorted(p.name for p in report.files)
['fleet.csv', 'fleet.png', 'report.html']
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.analysis.fleet import FleetResult, RouterSettings
    from promptkit.analysis.fleet_latency import GpuProfile, LatencyModel
    from promptkit.analysis.sizes import Size

__all__ = ["FleetReport", "fleet_json", "fleet_report", "run_fleet"]


@attrs.frozen(slots=True, eq=False)
class FleetReport:
    """What :func:`fleet_report` computed and wrote."""

    result: FleetResult
    files: tuple[Path, ...]
    notes: tuple[str, ...]


def fleet_report(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    replicas: Sequence[int],
    policies: Sequence[str],
    capacities: Sequence[int | None] = (None,),
    capacity_bytes: Sequence[float] = (),
    models: Sequence[str] = (),
    shared_capacity: int | None = None,
    shared_tier: bool = False,
    provider: str | None = None,
    block_size: int | None = None,
    arrival_interval: float = 1.0,
    router: RouterSettings | None = None,
    latency: LatencyModel | GpuProfile | None = None,
    out: str | os.PathLike[str] | None = None,
) -> FleetReport:
    """Read ``paths`` (:func:`~promptkit.analysis.fleet_input.load_fleet_input`), compare every replica
    count × policy × capacity (:func:`~promptkit.analysis.fleet.compare_fleet`), and, with ``out``,
    write ``fleet.csv``, ``fleet.png`` and ``report.html`` there."""
    from promptkit.analysis.fleet import RouterSettings, compare_fleet, load_fleet_input
    from promptkit.report.fleet import plot_fleet
    from promptkit.report.html import render_fleet_html

    data = load_fleet_input(
        paths, provider=provider, block_size=block_size, arrival_interval=arrival_interval
    )
    result = compare_fleet(
        data, replicas=replicas, policies=policies, capacities=capacities, capacity_bytes=capacity_bytes,
        models=models, shared_capacity=shared_capacity, shared_tier=shared_tier, block_size=data.block_size,
        router=router or RouterSettings(), latency=latency,
    )  # fmt: skip
    files: list[Path] = []
    if out is not None:
        target = Path(out)
        target.mkdir(parents=True, exist_ok=True)
        result.summary.write_csv(target / "fleet.csv")
        plot_fleet(result.summary).savefig(target / "fleet.png", dpi=110)
        sources = [str(p) for p in ([paths] if isinstance(paths, str | os.PathLike) else paths)]
        (target / "report.html").write_text(
            render_fleet_html(result.summary, sources=sources), encoding="utf-8"
        )
        files = [target / "fleet.csv", target / "fleet.png", target / "report.html"]
    return FleetReport(result, tuple(files), data.notes)


def fleet_json(report: FleetReport) -> dict[str, Any]:
    """The report as JSON-ready data: ``notes``, ``verdict`` (one object per capacity and replica count:
    ``best``, ``runner_up``, ...), ``table`` (one object per configuration, TTFT percentiles included),
    ``files``."""
    from promptkit.report.fleet import fleet_verdict

    summary = report.result.summary
    return {
        "notes": list(report.notes),
        "verdict": fleet_verdict(summary).to_dicts(),
        "table": summary.to_dicts(),
        "files": [str(p) for p in report.files],
    }


def run_fleet(
    paths: Sequence[str | os.PathLike[str]],
    *,
    replicas: Sequence[int],
    policies: Sequence[str],
    capacities: Sequence[Size] = (),
    models: Sequence[str] = (),
    as_json: bool = False,
    **options: Any,
) -> str:
    """What ``promptkit fleet`` prints. ``capacities``: sizes as the command line parses them
    (:func:`~promptkit.analysis.sizes.parse_size`: tokens, or bytes that need ``models``; none given:
    unbounded); ``options`` go to :func:`fleet_report`."""
    from promptkit.report import table_config
    from promptkit.report.fleet import fleet_pivot, fleet_verdict, verdict_lines

    tokens = [c.value for c in capacities if c.kind == "tokens"] or ([] if capacities else [None])
    sizes = [float(c.value) for c in capacities if c.kind == "bytes" and c.value is not None]
    report = fleet_report(
        list(paths), replicas=replicas, policies=policies, capacities=tokens, capacity_bytes=sizes,
        models=models, **options,
    )  # fmt: skip
    if as_json:
        return json.dumps(fleet_json(report), indent=2, default=str) + "\n"
    summary = report.result.summary

    def pivot(value: str) -> str:
        import polars as pl

        return str(fleet_pivot(summary, value).with_columns(pl.selectors.float().round(4)))

    lines = [*(f"note: {n}" for n in report.notes), "", "Verdict (best policy per capacity and replica count):"]
    lines += [f"  {line}" for line in verdict_lines(fleet_verdict(summary))]
    with table_config(200, rows=-1):
        lines += ["", "Fleet hit ratio (one column per policy):", pivot("hit_ratio")]
        lines += ["", "Load imbalance (max / mean input tokens per replica):", pivot("load_imbalance")]
        if summary["ttft_p50_s"].null_count() < summary.height:
            for value in ("ttft_p50_s", "ttft_p99_s"):
                lines += ["", f"{value} (seconds):", pivot(value)]
    lines += [f"wrote {p}" for p in report.files]
    return "\n".join(lines) + "\n"
