"""Trade-offs worth measuring, replayed under DeepSeek's, OpenAI's and Anthropic's cache rules and prices.

(a) **Eliding old tool outputs.** SWE-agent replaces every observation but the last 5 with
"Old environment output: (N lines omitted)": fewer prompt tokens per call, but the elided message
changes at every step, so the cached prefix breaks there each time. A constructed agent log (a
system prompt, a task, then N steps of an action and an observation of L lines, one call per step,
20 seconds apart) is replayed as it is, through ``elide:5`` and through ``elide:5,polling=10`` (SWE-agent's
``polling``: the elision window moves once every 10 steps, so the prefix breaks once every 10 steps); the table gives the cost of each
and the ratios, for several N and L.

(b) **A timestamp in the system prompt** ("Current time: ..." updated at every call) against the same
timestamp in a block right before the last user message (``move:to=turn-hint,regex=Current time:.*``),
and the upper bound with a constant placeholder (``normalize:timestamps``).

Everything is deterministic (no randomness, no network). Tokenizers: o200k_base for OpenAI, cl100k_base
for Anthropic (an approximation, as the analyzer's Anthropic profile), DeepSeek's own.

    python benchmarks/whatif_tradeoffs.py [--steps 10 30 60 100] [--lines 10 50 200] [--jobs 2]

The figures are deterministic; tests/test_figures.py recomputes them with :func:`run` and compares them
with the tables and the prose of docs/how-to/what-if.md.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from promptkit.layout import RequestRecord  # noqa: E402
from promptkit.whatif import parse_transform, replay  # noqa: E402

PROVIDERS: dict[str, str] = {
    "deepseek": "deepseek-chat",
    "openai": "gpt-4.1",
    "anthropic": "claude-sonnet-4-5",
}
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
STEP_SECONDS = 20.0
#: The grid of table (a) and the log of table (b), as docs/how-to/what-if.md shows them.
STEPS: tuple[int, ...] = (10, 30, 60, 100)
LINES: tuple[int, ...] = (10, 50, 200)
TS_STEPS = 30
TS_LINES = 50

_WORDS = (
    "repository function module test patch error value config parser request cache token "
    "session handler import return class method string number list index file line output"
).split()


def _text(seed: int, words: int) -> str:
    """Deterministic filler text of ``words`` words."""
    return " ".join(_WORDS[(seed * 7 + i * 13 + (i * i) % 5) % len(_WORDS)] for i in range(words))


def system_prompt(timestamp: float | None = None) -> str:
    rules = "\n".join(f"{i + 1}. {_text(i, 18)}." for i in range(60))
    head = "You are a software engineering agent. Work in the shell; one command per reply.\n"
    if timestamp is not None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))
        head += f"Current time: {stamp}\n"
    return head + "Rules:\n" + rules


def observation(step: int, lines: int) -> str:
    return "\n".join(f"{step:03d}:{i:04d} {_text(step + i, 8)}" for i in range(lines))


def agent_log(
    steps: int, lines: int, provider: str, *, timestamp_in_system: bool = False
) -> list[RequestRecord]:
    """One session of ``steps`` calls; call k sends the system prompt, the task and steps 1..k-1
    (an action and its observation each) and gets action k back."""
    task = {"role": "user", "content": "Fix the failing test in the repository.\n" + _text(999, 120)}
    history: list[dict[str, Any]] = []
    records = []
    for k in range(steps):
        now = START + k * STEP_SECONDS
        system = {"role": "system", "content": system_prompt(now if timestamp_in_system else None)}
        action = {
            "role": "assistant",
            "content": f"THOUGHT: {_text(k, 20)}\n```bash\ncat src/module_{k}.py\n```",
        }
        request = {"model": PROVIDERS[provider], "messages": [system, task, *history]}
        records.append(
            RequestRecord(request, session=f"agent-{steps}x{lines}", index=k, timestamp=now, completion=action,
                          provider=provider)
        )  # fmt: skip
        history += [action, {"role": "user", "content": observation(k, lines)}]
    return records


def _options(provider: str) -> dict[str, Any]:
    if provider == "openai":
        return {"provider": provider, "tokenizer": "o200k_base"}
    if provider == "anthropic":
        return {"provider": provider, "tokenizer": "cl100k_base"}
    return {"provider": provider}


def _prepare(provider: str) -> list[Any]:
    """Anthropic caches nothing without breakpoints: every variant gets them at the end of the system
    prompt, of the history and of the last message (applied after the other transforms)."""
    return [parse_transform("breakpoints:head+history+last")] if provider == "anthropic" else []


def elision_row(provider: str, steps: int, lines: int) -> dict[str, Any]:
    """One row of table (a): the log of ``steps`` calls with observations of ``lines`` lines, kept as it
    is, elided (``elide:5``) and elided with ``polling=10``, under ``provider``'s rules.

    The log as sent (with Anthropic's breakpoints) is analyzed once: it is the *before* side of both
    replays, so its figures are their ``before_*`` columns.
    """
    from promptkit.analysis import analyze_requests
    from promptkit.whatif import apply_transforms

    keep_records = apply_transforms(agent_log(steps, lines, provider), _prepare(provider))
    keep = analyze_requests(keep_records, **_options(provider))
    elide = replay(keep_records, [parse_transform("elide:5,role=user")], before=keep, **_options(provider))
    batch = replay(
        keep_records, [parse_transform("elide:5,polling=10,role=user")], before=keep, **_options(provider)
    )
    e, b = elide.overall, batch.overall
    return {
        "provider": provider,
        "steps": steps,
        "lines": lines,
        "keep_prompt": e["before_prompt_tokens"],
        "keep_hit": e["before_hit_ratio"],
        "keep_cost": e["before_cost_usd"],
        "elide_prompt": e["after_prompt_tokens"],
        "elide_hit": e["after_hit_ratio"],
        "elide_cost": e["after_cost_usd"],
        "batch_hit": b["after_hit_ratio"],
        "batch_cost": b["after_cost_usd"],
    }


#: The variants of table (b): the transforms applied to the log with the time in the system prompt.
TIMESTAMP_VARIANTS: dict[str, tuple[str, ...]] = {
    "time in the system prompt": (),
    "time before the last user message": ("move:to=turn-hint,regex=Current time:.*",),
    "constant placeholder": ("normalize:timestamps",),
}


def timestamp_rows(provider: str, steps: int, lines: int) -> list[dict[str, Any]]:
    """The rows of table (b) for ``provider``: one per :data:`TIMESTAMP_VARIANTS` entry."""
    records = agent_log(steps, lines, provider, timestamp_in_system=True)
    base = _prepare(provider)
    rows = []
    before = None  # the log as logged, analyzed once for the three replays
    for name, specs in TIMESTAMP_VARIANTS.items():
        w = replay(records, [*map(parse_transform, specs), *base], before=before, **_options(provider))
        before = w.before
        o = w.overall
        rows.append(
            {
                "provider": provider,
                "variant": name,
                "prompt": o["after_prompt_tokens"],
                "hit": o["after_hit_ratio"],
                "cost": o["after_cost_usd"],
            }
        )
    return rows


#: A unit of work: a function and its (provider, steps, lines).
Work = tuple[Callable[[tuple[str, int, int]], list[dict[str, Any]]], tuple[str, int, int]]


def _elision_task(task: tuple[str, int, int]) -> list[dict[str, Any]]:
    return [elision_row(*task)]


def _timestamp_task(task: tuple[str, int, int]) -> list[dict[str, Any]]:
    return timestamp_rows(*task)


def tasks(
    steps_grid: Sequence[int] = STEPS,
    lines_grid: Sequence[int] = LINES,
    ts_steps: int = TS_STEPS,
    ts_lines: int = TS_LINES,
) -> list[Work]:
    """Every unit of work of both tables, as (function, argument), the most expensive first (each is
    independent: :func:`run` maps them over a process pool)."""
    work = [(_elision_task, (p, s, n)) for p in PROVIDERS for s in steps_grid for n in lines_grid]
    work += [(_timestamp_task, (p, ts_steps, ts_lines)) for p in PROVIDERS]
    return sorted(work, key=lambda w: -w[1][1] * (w[1][1] * w[1][2] + 1_000))


def call(work: Work) -> tuple[str, list[dict[str, Any]]]:
    """Do one unit of work of :func:`tasks`: (which table, its rows)."""
    function, argument = work
    return ("elision" if function is _elision_task else "timestamp"), function(argument)


def assemble(
    done: Sequence[tuple[str, list[dict[str, Any]]]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows of table (a) and of table (b), in table order, from the results of :func:`call`."""
    elision = [r for table, rows in done if table == "elision" for r in rows]
    stamps = [r for table, rows in done if table == "timestamp" for r in rows]
    order = list(PROVIDERS)
    elision.sort(key=lambda r: (order.index(r["provider"]), r["steps"], r["lines"]))
    stamps.sort(key=lambda r: (order.index(r["provider"]), list(TIMESTAMP_VARIANTS).index(r["variant"])))
    return elision, stamps


def run(work: Sequence[Work], *, jobs: int = 2) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Both tables from ``work`` (:func:`tasks`), in ``jobs`` worker processes (spawned: safe from a
    process that already runs polars' thread pool)."""
    if jobs > 1:
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            return assemble(list(pool.map(call, work)))
    return assemble([call(w) for w in work])


def elision_markdown(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Table (a) as docs/how-to/what-if.md shows it."""
    lines = [
        "| provider | steps | lines | keep: prompt tokens | hit | cost $ | elide: prompt tokens | hit | cost $ "
        "| elide / keep | polling=10: hit | polling=10 / keep |",
        "|---|" + "---:|" * 11,
    ]
    for r in rows:
        lines.append(
            f"| {r['provider']} | {r['steps']} | {r['lines']} | {r['keep_prompt']:,} | {r['keep_hit']:.1%} | "
            f"{r['keep_cost']:.4f} | {r['elide_prompt']:,} | {r['elide_hit']:.1%} | {r['elide_cost']:.4f} | "
            f"{r['elide_cost'] / r['keep_cost']:.2f} | {r['batch_hit']:.1%} | {r['batch_cost'] / r['keep_cost']:.2f} |"
        )
    return lines


def timestamp_markdown(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Table (b) as docs/how-to/what-if.md shows it."""
    lines = ["| provider | variant | prompt tokens | hit | cost $ |", "|---|---|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['provider']} | {r['variant']} | {r['prompt']:,} | {r['hit']:.1%} | {r['cost']:.4f} |"
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=list(STEPS))
    parser.add_argument("--lines", type=int, nargs="+", default=list(LINES))
    parser.add_argument("--ts-steps", type=int, default=TS_STEPS)
    parser.add_argument("--ts-lines", type=int, default=TS_LINES)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    args = parser.parse_args(argv)
    started, cpu_started = time.perf_counter(), _cpu_seconds()
    elision, stamps = run(tasks(args.steps, args.lines, args.ts_steps, args.ts_lines), jobs=args.jobs)

    print("(a) keep every tool output vs elide all but the last 5 (SWE-agent) vs the same with polling=10\n")
    print("\n".join(elision_markdown(elision)))
    print(f"\n(b) a timestamp per call, {args.ts_steps} steps of {args.ts_lines} lines\n")
    print("\n".join(timestamp_markdown(stamps)))
    print()
    print(
        "Costs include the logged answers as output tokens (the same in every variant); the replay changes only"
    )
    print("the prompts: the model's answers would change too, and the replay keeps the logged ones.")
    print(
        f"\n{time.perf_counter() - started:.0f} s wall with {args.jobs} job(s), "
        f"{_cpu_seconds() - cpu_started:.0f} s CPU (this machine)"
    )


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the worker processes)."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


if __name__ == "__main__":
    main()
