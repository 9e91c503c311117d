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

    python benchmarks/whatif_tradeoffs.py [--steps 10 30 60 100] [--lines 10 50 200]
"""

from __future__ import annotations

import argparse
import sys
import time
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


def elision_table(steps_grid: list[int], lines_grid: list[int]) -> list[dict[str, Any]]:
    rows = []
    for provider in PROVIDERS:
        for steps in steps_grid:
            for lines in lines_grid:
                records = agent_log(steps, lines, provider)
                base = _prepare(provider)
                keep = replay(records, base, **_options(provider))
                elide = replay(keep.records, [parse_transform("elide:5,role=user")], **_options(provider))
                batch = replay(
                    keep.records, [parse_transform("elide:5,polling=10,role=user")], **_options(provider)
                )
                k, e, b = keep.overall, elide.overall, batch.overall
                rows.append(
                    {
                        "provider": provider,
                        "steps": steps,
                        "lines": lines,
                        "keep_prompt": k["after_prompt_tokens"],
                        "keep_hit": k["after_hit_ratio"],
                        "keep_cost": k["after_cost_usd"],
                        "elide_prompt": e["after_prompt_tokens"],
                        "elide_hit": e["after_hit_ratio"],
                        "elide_cost": e["after_cost_usd"],
                        "batch_hit": b["after_hit_ratio"],
                        "batch_cost": b["after_cost_usd"],
                    }
                )
    return rows


def timestamp_table(steps: int, lines: int) -> list[dict[str, Any]]:
    rows = []
    for provider in PROVIDERS:
        records = agent_log(steps, lines, provider, timestamp_in_system=True)
        base = _prepare(provider)
        variants = {
            "time in the system prompt": base,
            "time before the last user message": [
                parse_transform("move:to=turn-hint,regex=Current time:.*"),
                *base,
            ],
            "constant placeholder": [parse_transform("normalize:timestamps"), *base],
        }
        for name, transforms in variants.items():
            w = replay(records, transforms, **_options(provider))
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[10, 30, 60, 100])
    parser.add_argument("--lines", type=int, nargs="+", default=[10, 50, 200])
    parser.add_argument("--ts-steps", type=int, default=30)
    parser.add_argument("--ts-lines", type=int, default=50)
    args = parser.parse_args(argv)

    print("(a) keep every tool output vs elide all but the last 5 (SWE-agent) vs the same with polling=10")
    print(
        f"{'provider':<10} {'steps':>5} {'lines':>5} | {'keep: prompt':>12} {'hit':>6} {'cost $':>8} | "
        f"{'elide: prompt':>13} {'hit':>6} {'cost $':>8} | {'elide/keep':>10} | {'batch hit':>9} {'batch/keep':>10}"
    )
    for r in elision_table(args.steps, args.lines):
        ratio = r["elide_cost"] / r["keep_cost"] if r["keep_cost"] else float("nan")
        batch = r["batch_cost"] / r["keep_cost"] if r["keep_cost"] else float("nan")
        print(
            f"{r['provider']:<10} {r['steps']:>5} {r['lines']:>5} | {r['keep_prompt']:>12,} {r['keep_hit']:>6.1%} "
            f"{r['keep_cost']:>8.4f} | {r['elide_prompt']:>13,} {r['elide_hit']:>6.1%} {r['elide_cost']:>8.4f} | "
            f"{ratio:>10.2f} | {r['batch_hit']:>9.1%} {batch:>10.2f}"
        )
    print()
    print(f"(b) a timestamp per call, {args.ts_steps} steps of {args.ts_lines} lines")
    print(f"{'provider':<10} {'variant':<34} | {'prompt':>9} {'hit':>6} {'cost $':>8}")
    for r in timestamp_table(args.ts_steps, args.ts_lines):
        print(
            f"{r['provider']:<10} {r['variant']:<34} | {r['prompt']:>9,} {r['hit']:>6.1%} {r['cost']:>8.4f}"
        )
    print()
    print(
        "Costs include the logged answers as output tokens (the same in every variant); the replay changes only"
    )
    print("the prompts: the model's answers would change too, and the replay keeps the logged ones.")


if __name__ == "__main__":
    main()
