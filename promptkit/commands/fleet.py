"""``promptkit fleet`` as one function: :func:`run_fleet` replays logs or a Mooncake trace over replicas
behind routing policies (:func:`fleet_report`), writes its files and returns the text to print: the
notes, the table and the files written.

:func:`fleet_report` runs the comparison (:func:`~promptkit.analysis.fleet.compare_fleet`) and writes
its table, plot and HTML page (:mod:`promptkit.report.fleet`, :mod:`promptkit.report.html`).

>>> import tempfile
>>> report = fleet_report(["fixtures/traces/mooncake-conversation-head.jsonl"], replicas=[1, 4],
...                       policies=["round_robin", "prefix_aware"], capacities=[4096, None],
...                       out=tempfile.mkdtemp())
>>> sorted(p.name for p in report.files)
['fleet.csv', 'fleet.png', 'report.html']
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.analysis.fleet import FleetResult, RouterSettings

__all__ = ["FleetReport", "fleet_report", "run_fleet"]


def run_fleet(
    paths: Sequence[str | os.PathLike[str]],
    *,
    replicas: Sequence[int],
    policies: Sequence[str],
    capacities: Sequence[tuple[str, float | None]] = (("tokens", None),),
    models: Sequence[str] = (),
    shared_capacity: int | None = None,
    provider: str | None = None,
    block_size: int = 512,
    out: str | os.PathLike[str] | None = None,
) -> str:
    """``capacities``: ``("tokens", n)`` (None: unbounded) or ``("bytes", n)`` per replica, as the
    command line's ``--capacity`` gives them; the byte sizes need ``models``."""
    from promptkit.report import table_config
    from promptkit.report.fleet import fleet_table

    tokens = [None if v is None else int(v) for kind, v in capacities if kind == "tokens"]
    sizes = [float(v) for kind, v in capacities if kind == "bytes" and v is not None]
    report = fleet_report(
        list(paths), replicas=replicas, policies=policies, capacities=tokens, capacity_bytes=sizes,
        models=models, shared_capacity=shared_capacity, provider=provider, block_size=block_size, out=out,
    )  # fmt: skip
    with table_config(200, rows=-1):
        text = str(fleet_table(report.result.summary))
    lines = [*report.notes, text, *(f"wrote {p}" for p in report.files)]
    return "\n".join(lines) + "\n"


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
    block_size: int = 512,
    router: RouterSettings | None = None,
    out: str | os.PathLike[str] | None = None,
) -> FleetReport:
    """Read ``paths`` (:func:`~promptkit.analysis.fleet.load_fleet_input`), compare every replica
    count × policy × capacity (:func:`~promptkit.analysis.fleet.compare_fleet`), and, with ``out``,
    write ``fleet.csv``, ``fleet.png`` and ``report.html`` there."""
    from promptkit.analysis.fleet import RouterSettings, compare_fleet, load_fleet_input
    from promptkit.report.fleet import plot_fleet
    from promptkit.report.html import render_fleet_html

    data = load_fleet_input(paths, provider=provider, block_size=block_size)
    result = compare_fleet(
        data, replicas=replicas, policies=policies, capacities=capacities, capacity_bytes=capacity_bytes,
        models=models, shared_capacity=shared_capacity, shared_tier=shared_tier, block_size=block_size,
        router=router or RouterSettings(),
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
