"""``promptkit check`` as one function: :func:`run_check` analyzes the logs and checks every session
against the thresholds (:func:`~promptkit.report.causes.check_gate`); the :class:`CheckRun` says whether
all passed and holds the text to print.

>>> run = run_check(["fixtures/logs/session-before.jsonl"], min_hit=0.0)
>>> run.passed, run.text
(True, 'promptkit check: all 1 session(s) pass\\n')
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import attrs

from promptkit.commands.analyze import analyze_logs
from promptkit.errors import UsageError
from promptkit.report.causes import GateResult, check_gate

__all__ = ["CheckRun", "run_check"]


@attrs.frozen(slots=True, eq=False)
class CheckRun:
    """The ``gate`` (:class:`~promptkit.report.causes.GateResult`) and the ``text`` to print: the count of
    sessions that pass, or the failing ones with their top causes."""

    gate: GateResult
    text: str

    @property
    def passed(self) -> bool:
        """Whether every session met the thresholds."""
        return self.gate.passed


def run_check(
    paths: Sequence[str | os.PathLike[str]],
    *,
    min_hit: float | None = None,
    max_layout_loss: float | None = None,
    provider: str | None = None,
    format: str | None = None,
    view: str | None = None,
) -> CheckRun:
    """Analyze ``paths`` and check every session: hit ratio at least ``min_hit``, share of the prompt
    lost to the layout at most ``max_layout_loss`` (ratios; give one or both, else a
    :class:`~promptkit.errors.UsageError`)."""
    if min_hit is None and max_layout_loss is None:
        raise UsageError("check: give --min-hit and/or --max-layout-loss")
    result = analyze_logs(paths, view=view, provider=provider, format=format)
    gate = check_gate(result, min_hit=min_hit, max_layout_loss=max_layout_loss)
    n = gate.sessions.height
    if gate.passed:
        return CheckRun(gate, f"promptkit check: all {n} session(s) pass\n")
    text = f"promptkit check: {len(gate.failures)} of {n} session(s) fail\n" + "".join(
        f"  {line}\n" for line in gate.failures
    )
    return CheckRun(gate, text)
