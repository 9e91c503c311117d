"""``promptkit lint`` as one function: :func:`run_lint` finds every head region that changes between
requests, what it costs, and its fix measured by replay
(:func:`~promptkit.whatif.advice.lint_advice`), and returns the text to print (or JSON).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

__all__ = ["run_lint"]


def run_lint(
    paths: Sequence[str | os.PathLike[str]],
    *,
    prices: Any = None,
    model: str | None = None,
    view: str | None = None,
    provider: str | None = None,
    format: str | None = None,
    as_json: bool = False,
    replay_args: str = "",
) -> str:
    """The findings of ``paths`` and their fixes: a text whose printed ``promptkit whatif`` commands
    replay ``replay_args`` (the paths and options as the user gave them), or with ``as_json`` a JSON list.

    >>> print(run_lint(["fixtures/logs/session-before.jsonl"], as_json=True)[:1])
    [
    """
    from promptkit.formats import read_logs
    from promptkit.whatif.advice import format_lint_advice, lint_advice
    from promptkit.whatif.replays import REPLAY_NOTE

    advice = lint_advice(
        read_logs(list(paths), format=format), prices=prices, model=model, view=view, provider=provider
    )
    if as_json:
        return (
            json.dumps([a.to_json() for a in advice.items], indent=2, ensure_ascii=False, default=str) + "\n"
        )
    note = f"note: {REPLAY_NOTE}\n" if advice.items else ""
    return format_lint_advice(advice, paths=replay_args) + note
