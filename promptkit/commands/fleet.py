"""``promptkit fleet`` as one function: :func:`run_fleet` replays logs or a Mooncake trace over replicas
behind routing policies (:func:`~promptkit.report.fleet.fleet_report`), writes its files and returns the
text to print: the notes, the table and the files written.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

__all__ = ["run_fleet"]


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
    from promptkit.report.fleet import fleet_report, fleet_table

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
