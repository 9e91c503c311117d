"""What ``promptkit whatif`` does, as a function of its parsed arguments (the parser lives in
:mod:`promptkit.cli`): read the logs, replay the ``--transform`` specs or rank ``--suggest`` ions, and
return the text to print (tables or ``--json``).

Errors: :class:`~promptkit.errors.UsageError` for a bad spec or option (exit code 2),
:class:`~promptkit.errors.ReplayError` and other :class:`~promptkit.errors.PromptkitError` for bad input
(exit code 1).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from promptkit.errors import ReplayError, UsageError

__all__ = ["replay_arguments", "run_whatif"]


def _options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {"view": args.view}
    if args.provider is not None:
        from promptkit.providers.registry import available_providers

        if args.provider not in available_providers():
            raise UsageError(
                f"--provider: unknown provider {args.provider!r}; known: {', '.join(available_providers())}"
            )
        options["provider"] = args.provider
    return options


def run_whatif(args: argparse.Namespace, *, paths: Sequence[Path] | None = None) -> str:
    """The output of ``promptkit whatif`` for ``args`` (see ``promptkit whatif --help``); ``paths``: the
    logs to read (default ``args.paths``; the CLI passes the bundled log when none is given).

    >>> from pathlib import Path
    >>> from promptkit.cli import build_parser
    >>> args = build_parser().parse_args(["whatif", "fixtures/logs/session-before.jsonl", "--transform", "bogus"])
    >>> run_whatif(args)
    Traceback (most recent call last):
    ...
    promptkit.errors.UsageError: --transform 'bogus': unknown transform 'bogus'; known: move, normalize, sort-tools, pin-model, provider, cache-model, ttl, retention, cache-key, breakpoints, elide
    """
    from promptkit.whatif.replays import REPLAY_NOTE, format_whatif, replay
    from promptkit.whatif.spec import parse_transform
    from promptkit.whatif.suggestions import suggest

    transforms = [parse_transform(s) for s in args.transform or []]
    if args.limit < 1:
        raise UsageError(f"--limit: expected a number >= 1, got {args.limit}")
    options = _options(args)
    prices = None
    if args.prices is not None:
        from promptkit.report import load_prices

        prices = load_prices(args.prices)
    if args.format is not None:
        from promptkit.formats import available_formats

        if args.format not in available_formats():
            raise UsageError(
                f"--format: unknown log format {args.format!r}; known: {', '.join(available_formats())}"
            )
    from promptkit.formats import read_logs

    paths = list(paths if paths is not None else args.paths)
    loaded = read_logs(paths, format=args.format)
    if not loaded.records:
        first = loaded.problems[0] if loaded.problems else None
        detail = f"; first: {first.file}:{first.line}: {first.reason}" if first else ""
        raise ReplayError(
            f"{', '.join(map(str, paths))}: no request to replay ({len(loaded.problems)} problem(s){detail})"
        )
    if args.suggest:
        found = suggest(loaded, prices=prices, model=args.model, **options)
        gains = [s for s in found if not s.is_cost][: args.limit]
        costs = [s for s in found if s.is_cost][: args.limit]
        if args.json:
            return (
                json.dumps(
                    {
                        "suggestions": [s.to_json() for s in gains],
                        "costs": [s.to_json() for s in costs],
                        "notes": [REPLAY_NOTE],
                    },
                    indent=2,
                    ensure_ascii=False,
                )
                + "\n"
            )
        return _format_suggestions(gains, costs, REPLAY_NOTE, replay_arguments(args))
    w = replay(loaded, transforms, prices=prices, model=args.model, **options)
    if w.before.requests.height == 0:
        raise ReplayError(f"{', '.join(map(str, paths))}: no request could be analyzed")
    if args.json:
        return (
            json.dumps(
                {
                    "transform": w.describe(),
                    "specs": list(args.transform or []),
                    "sessions": w.comparison.to_dicts()[:-1],
                    "overall": w.overall,
                    "notes": [*w.notes, *w.after.notes],
                },
                indent=2,
                ensure_ascii=False,
            )
            + "\n"
        )
    return format_whatif(w) + "\n"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _measured(s: Any) -> str:
    from promptkit.whatif.suggestions import format_usd

    cost = (
        f"cost {s.before_cost_usd:.4f} → {s.after_cost_usd:.4f} (saving {'+' if s.saving_usd >= 0 else ''}"
        f"{format_usd(s.saving_usd)})"
        if s.priced
        else "cost n/a (no price: pass --prices FILE or --model NAME)"
    )
    return (
        f"    hit ratio {_pct(s.before_hit_ratio)} → {_pct(s.after_hit_ratio)}; prompt tokens "
        f"{s.before_prompt_tokens:,} → {s.after_prompt_tokens:,}; {cost}"
    )


def _format_suggestions(gains: list[Any], costs: list[Any], note: str, paths: str = "") -> str:
    if not gains and not costs:
        return (
            f"No candidate transform found: nothing in the stable head changes between calls.\nnote: {note}\n"
        )
    lines = ["Suggestions, largest measured saving first (replayed; cost in USD):", ""]
    for k, s in enumerate(gains, 1):
        lines.append(f"{k:>2}. {s.transform.describe()}")
        lines.append(f"    {s.command(paths)}")
        lines.append(_measured(s))
        if s.reason:
            lines.append(f"    why: {s.reason}")
    if not gains:
        lines.append("   (none saves anything on this log)")
    if costs:
        lines += ["", "Costs: these lose money on this log (replayed), least costly first:", ""]
        for k, s in enumerate(costs, 1):
            lines.append(f"{k:>2}. {s.transform.describe()}")
            lines.append(f"    {s.command(paths)}")
            lines.append(_measured(s))
            if s.tradeoff:
                lines.append(f"    trade-off: {s.tradeoff}")
    lines += ["", f"note: {note}"]
    return "\n".join(lines) + "\n"


def replay_arguments(args: argparse.Namespace) -> str:
    """The paths and analysis options the user gave, as ``promptkit whatif`` arguments (so a printed
    fix replays the same analysis)."""
    import shlex

    words = [str(p) for p in args.paths]
    for option in ("provider", "format", "model", "prices"):
        value = getattr(args, option, None)
        if value is not None:
            words += [f"--{option}", str(value)]
    view = getattr(args, "view", None)
    if view not in (None, "consecutive"):
        words += ["--view", view]
    return shlex.join(words)
