"""Trimming policies replayed through the cache analyzer: hit ratio and cost per 1,000 turns, side by side.

Builds one deterministic agent conversation (a coding agent: a ~1,100-token stable head, then ``--turns``
turns of a user question, zero to two tool calls with their results, and an answer; mixed English,
Chinese and code), and replays it once per trimming configuration: every model call of every turn is
one request (the head, the history trimmed with :func:`promptkit.assembly.trim_to_budget`, a volatile
block that changes every turn, the current message and this turn's tool loop). The requests go through
:func:`promptkit.analysis.analyze_requests` (consecutive view, with timestamps: a turn every 40 seconds,
a call every 5) under three providers' rules:

- DeepSeek: ``deepseek_request`` bodies, the DeepSeek-V3.2 render and the DeepSeek tokenizer (the
  ``--deepseek-tokenizer cl100k_base`` option counts with cl100k_base instead: faster, and within 0.002
  of the hit ratio here; the default run compares the two in :data:`COMPARED`); each entry covers the
  call's answer, which is passed as its completion;
- OpenAI: ``openai_request`` bodies, o200k_base with ChatML;
- Anthropic: ``anthropic_request`` bodies with their automatic breakpoints (placed at the cut points of
  the trim result), cl100k_base with ChatML (Anthropic publishes no tokenizer), claude-sonnet-4-5. Each
  top-level system block is analyzed as its own system message (see :func:`split_system`); the
  analyzer renders ``tool_use`` / ``tool_result`` blocks as a short digest, so Anthropic's prompt
  lengths are shorter than the others' (compare policies within a provider, not across).

Budgets are counted with cl100k_base (``count=`` a cached tiktoken counter). For each configuration it
prints the token-weighted hit ratio, the prompt cost per 1,000 turns (input tokens only, at the
provider's default model prices in ``promptkit.report``: cache reads, writes and misses; the
answers cost the same under every policy and are left out), the same without any cache, the mean
prompt length (how much context the model sees) and the number of cuts.

Policies: ``sliding`` (drop unit by unit), ``chunked`` at each ``--low-water`` mark, and
``chunked+summary`` (compaction with a deterministic stand-in summarizer that keeps the first words of
each dropped question, bounded to about 300 tokens; a real one costs one model call per cut, not
counted here).

    python benchmarks/trim_policies.py [--turns 120] [--budgets 4000,8000,16000]
        [--low-water 0.4,0.5,0.6,0.7,0.8] [--jobs 2] [--deepseek-tokenizer deepseek|cl100k_base]

About 40 s of CPU with the defaults (99 s at 240 turns, the default before), measured on a shared 2-core
machine (two worker processes). The figures themselves are deterministic: tests/test_figures.py recomputes them with :func:`tasks` and
:func:`measure` and compares them with docs/how-to/trimming.md (:func:`markdown` prints its tables).
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import random
import resource
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent))

import textgen
from textgen import IDENTS, chinese, english

from promptkit.assembly import VOLATILE_INJECTOR, TrimResult, trim_to_budget
from promptkit.assembly.trim import Compaction
from promptkit.chat.message import Message, ToolCall

TURN_SECONDS = 40.0
CALL_SECONDS = 5.0
MODELS = {"deepseek": "deepseek-chat", "openai": "gpt-4.1", "anthropic": "claude-sonnet-4-5"}
NAMES = {"deepseek": "DeepSeek", "openai": "OpenAI", "anthropic": "Anthropic"}


def code(rng: random.Random, n: int) -> str:
    """Python-like code without docstrings (what this benchmark's tool outputs have always been)."""
    return textgen.code(rng, n, docstrings=False)


@attrs.frozen
class Turn:
    """One turn: the user's message, the tool calls (call, result) the model made, its answer."""

    question: Message
    steps: tuple[tuple[Message, Message], ...]
    answer: Message


def build_conversation(turns: int, seed: int) -> tuple[list[Message], list[Turn]]:
    """The stable head (persona and a rules block, about 1,100 tokens) and ``turns`` turns."""
    rng = random.Random(seed)
    head = [
        Message(role="system", content="You are a coding agent. " + english(rng, 40)),
        Message(
            role="system",
            content="Project rules:\n" + english(rng, 25) + "\n" + chinese(rng, 8) + "\n" + code(rng, 3),
            metadata={"injector": "rules"},
        ),
    ]
    out = []
    for t in range(turns):
        question = Message(role="user", content=english(rng, rng.randint(1, 4)) + "\n" + chinese(rng, 1))
        steps = []
        for k in range(rng.choice([0, 0, 1, 1, 2])):
            call_id = f"call_{t}_{k}"
            args = json.dumps({"command": f"grep -n {rng.choice(IDENTS)} src/*.py"})
            call = Message(
                role="assistant",
                content=english(rng, 1),
                tool_calls=[ToolCall(id=call_id, name="bash", arguments=args)],
            )
            result = rng.choice(
                [code(rng, rng.randint(1, 4)), english(rng, rng.randint(4, 12)), chinese(rng, 6)]
            )
            steps.append((call, Message(role="tool", tool_call_id=call_id, content=result)))
        answer = Message(role="assistant", content=english(rng, rng.randint(2, 6)))
        out.append(Turn(question, tuple(steps), answer))
    return head, out


def summarize(chunk: tuple[Message, ...], previous: str | None) -> str:
    """A deterministic stand-in for a model: the first words of each question, the newest 1,200 characters."""
    lines = [" ".join((m.content or "").split()[:8]) for m in chunk if m.role == "user"]
    text = "\n".join([previous or "", *(f"- asked: {line}" for line in lines)]).strip()
    return text[-1200:]


@attrs.frozen
class Config:
    policy: str
    low_water: float | None

    @property
    def label(self) -> str:
        return self.policy if self.low_water is None else f"{self.policy} {self.low_water:.1f}"


@functools.cache
def _counter() -> Callable[[str], int]:
    from promptkit.analysis import get_tokenizer

    encode = get_tokenizer("cl100k_base").encode
    return functools.lru_cache(maxsize=None)(lambda text: len(encode(text)))


def replay(
    head: Sequence[Message], turns: Sequence[Turn], budget: int, config: Config
) -> tuple[list[tuple[TrimResult, Message, float]], int]:
    """Every call of the conversation trimmed under ``config``: (trim result, completion, timestamp); and
    the number of cuts (calls that drop a different number of units than the call before)."""
    count = _counter()
    compaction = Compaction(summarize) if config.policy == "chunked+summary" else None
    history: list[Message] = []
    calls: list[tuple[TrimResult, Message, float]] = []
    cuts = 0
    previous: int | None = None
    for t, turn in enumerate(turns):
        volatile = Message(
            role="system",
            content=f"Session state: turn {t}, {12 + t // 60:02d}:{t % 60:02d}, open files: {t % 7}",
            metadata={"injector": VOLATILE_INJECTOR},
        )
        loop: list[Message] = []
        for k in range(len(turn.steps) + 1):
            prompt = [*head, *history, volatile, turn.question, *loop]
            result = trim_to_budget(
                prompt,
                budget,
                count=count,
                policy="sliding" if config.policy == "sliding" else "chunked",
                low_water=config.low_water or 0.5,
                compaction=compaction,
            )
            if previous is not None and len(result.dropped) != previous:
                cuts += 1
            previous = len(result.dropped)
            completion = turn.steps[k][0] if k < len(turn.steps) else turn.answer
            calls.append((result, completion, t * TURN_SECONDS + k * CALL_SECONDS))
            if k < len(turn.steps):
                loop += turn.steps[k]
        history += [turn.question, *loop, turn.answer]
    return calls, cuts


def _completion_dict(m: Message) -> dict[str, Any]:
    from promptkit.chat.message import to_openai_dict

    return to_openai_dict(m)


def split_system(body: dict[str, Any]) -> dict[str, Any]:
    """The Anthropic body with each top-level ``system`` block as its own leading system message.

    The analyzer places a breakpoint that sits on a content part at the end of that part's message, and
    reads the top-level ``system`` as one message; Anthropic places it at the end of the block. One
    message per system block makes the two agree, so a head breakpoint placed before the compaction
    summary is seen there (the rendered prompt gains a few template tokens per block).
    """
    system = body.get("system") or []
    rest = {k: v for k, v in body.items() if k != "system"}
    rest["messages"] = [{"role": "system", "content": [block]} for block in system] + body["messages"]
    return rest


def analyze(
    provider: str, calls: Sequence[tuple[TrimResult, Message, float]], tokenizer: str | None = None
) -> Any:
    """The calls as ``provider``'s request bodies, analyzed under its rules (``tokenizer``: None for the
    provider's own)."""
    from promptkit.analysis import analyze_requests, records_from_requests
    from promptkit.providers import anthropic_request
    from promptkit.providers.record import request_record

    items: list[Any] = []
    for result, _, _ in calls:
        if provider == "anthropic":
            items.append(split_system(anthropic_request(result, model=MODELS[provider])))
        else:
            record = request_record(result.to_prompt(), provider=provider, model=MODELS[provider])  # type: ignore[arg-type]
            items.append((record["request"], record["layout"]))
    completions = [_completion_dict(c) for _, c, _ in calls] if provider == "deepseek" else None
    records = records_from_requests(
        items, session=provider, timestamps=[ts for _, _, ts in calls], completions=completions
    )
    return analyze_requests(records, provider=provider, tokenizer=tokenizer)


#: The defaults: what docs/how-to/trimming.md shows.
TURNS = 120
SEED = 7
BUDGETS: tuple[int, ...] = (4000, 8000, 16000)
LOW_WATERS: tuple[float, ...] = (0.4, 0.5, 0.6, 0.7, 0.8)
SUMMARY_LOW_WATER = 0.5
#: The two configurations, at the middle budget, in which DeepSeek is also analyzed with this tokenizer.
COMPARED_TOKENIZER = "cl100k_base"
COMPARED_BUDGET = 8000
COMPARED = (Config("chunked", 0.5), Config("sliding", None))

#: An analysis of a replay: the provider's rules, and the tokenizer (None: the provider's own).
Analysis = tuple[str, str | None]
Task = tuple[int, Config, tuple[Analysis, ...], int, int]


def configurations(
    low_waters: Sequence[float] = LOW_WATERS, summary_low_water: float = SUMMARY_LOW_WATER
) -> list[Config]:
    """The table's rows: sliding, chunked at each low-water mark, chunked with a summary."""
    return [
        Config("sliding", None),
        *(Config("chunked", float(w)) for w in low_waters),
        Config("chunked+summary", summary_low_water),
    ]


def measure(task: Task) -> list[dict[str, Any]]:
    """The rows of one configuration: replay once, then analyze and price under each provider's rules."""
    import polars as pl

    from promptkit.report import request_costs

    budget, config, analyses, turns, seed = task
    head, conversation = build_conversation(turns, seed)
    calls, cuts = replay(head, conversation, budget, config)
    count = _counter()
    summary_tokens = max(
        (count(r.messages[r.summary_at].content or "") for r, _, _ in calls if r.summary_at is not None),
        default=0,
    )
    rows = []
    for provider, tokenizer in analyses:
        result = analyze(provider, calls, tokenizer)
        frame = result.requests.with_columns(pl.lit(None, dtype=pl.Int64).alias("completion_tokens"))
        costs = request_costs(frame, provider=provider)
        prompt = int(frame["prompt_tokens"].sum())
        cached = int(frame["predicted_cached_tokens"].sum())
        rows.append(
            {
                "provider": provider,
                "tokenizer": tokenizer,
                "budget": budget,
                "policy": config.label,
                "hit_ratio": cached / prompt,
                "cost_1k_turns": float(costs["cost_predicted"].sum()) * 1000 / turns,
                "no_cache_1k_turns": float(costs["cost_no_cache"].sum()) * 1000 / turns,
                "mean_prompt": prompt / len(calls),
                "cuts": cuts,
                "calls": len(calls),
                "summary_tokens": summary_tokens,
            }
        )
    return rows


def tasks(
    *,
    turns: int = TURNS,
    seed: int = SEED,
    budgets: Sequence[int] = BUDGETS,
    configs: Sequence[Config] | None = None,
    providers: Sequence[str] = tuple(MODELS),
    deepseek_tokenizer: str | None = None,
    compared_tokenizer: str | None = COMPARED_TOKENIZER,
) -> list[Task]:
    """One task per (budget, configuration), the largest budgets first (so that two workers finish
    together). DeepSeek is analyzed with ``deepseek_tokenizer`` (None: its own); with
    ``compared_tokenizer``, also with that one in the :data:`COMPARED` configurations at
    :data:`COMPARED_BUDGET` (the replay is shared)."""
    configs = configurations() if configs is None else configs
    out = []
    for b in sorted(budgets, reverse=True):
        for c in configs:
            analyses: list[Analysis] = [
                (p, deepseek_tokenizer if p == "deepseek" else None) for p in providers
            ]
            if compared_tokenizer and "deepseek" in providers and b == COMPARED_BUDGET and c in COMPARED:
                analyses.append(("deepseek", compared_tokenizer))
            out.append((b, c, tuple(analyses), turns, seed))
    return out


def run(work: Sequence[Task], *, jobs: int = 2) -> list[dict[str, Any]]:
    """Every task's rows, in ``jobs`` worker processes (spawned: safe from a process that already runs
    polars' thread pool)."""
    if jobs > 1:
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            return [row for rows in pool.map(measure, work) for row in rows]
    return [row for task in work for row in measure(task)]


def provider_heading(provider: str) -> str:
    """The line above a provider's table: its rules, prices, tokenizer and render (from its profile)."""
    from promptkit.providers.registry import get_provider
    from promptkit.tokens.render import get_render_model

    profile = get_provider(provider)
    render = get_render_model(profile.render).name
    return (
        f"**{NAMES[provider]}'s rules ({MODELS[provider]} prices; {profile.tokenizer} tokenizer, {render} "
        "render)**: hit ratio, prompt $ per 1,000 turns, mean prompt tokens, cuts"
    )


def markdown(
    rows: Sequence[dict[str, Any]],
    provider: str,
    *,
    budgets: Sequence[int] = BUDGETS,
    configs: Sequence[Config] | None = None,
    tokenizer: str | None = None,
) -> list[str]:
    """A provider's table as docs/how-to/trimming.md shows it: the heading, the table, the line of
    costs without any cache."""
    configs = configurations() if configs is None else configs

    def row(budget: int, label: str) -> dict[str, Any]:
        return next(
            r
            for r in rows
            if (r["provider"], r["tokenizer"], r["budget"], r["policy"])
            == (provider, tokenizer, budget, label)
        )

    lines = [
        provider_heading(provider),
        "",
        "| policy | " + " | ".join(f"{b:,}: hit | $/1k | prompt | cuts" for b in budgets) + " |",
        "|" + "---|" * (1 + 4 * len(budgets)),
    ]
    for config in configs:
        cells = []
        for b in budgets:
            r = row(b, config.label)
            cells.append(
                f"{r['hit_ratio']:.3f} | {r['cost_1k_turns']:.2f} | {r['mean_prompt']:,.0f} | {r['cuts']}"
            )
        lines.append(f"| {config.label} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Without any cache (sliding): "
        + "; ".join(f"{b:,}: ${row(b, 'sliding')['no_cache_1k_turns']:.2f}" for b in budgets),
    ]
    return lines


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the worker processes)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=TURNS)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument("--low-water", default=",".join(map(str, LOW_WATERS)))
    parser.add_argument("--summary-low-water", type=float, default=SUMMARY_LOW_WATER)
    parser.add_argument("--providers", default=",".join(MODELS))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--deepseek-tokenizer", default="deepseek", choices=["deepseek", "cl100k_base"])
    args = parser.parse_args(argv)
    if args.turns < 1:
        sys.exit("--turns must be at least 1")
    budgets = [int(b) for b in args.budgets.split(",")]
    configs = configurations([float(w) for w in args.low_water.split(",")], args.summary_low_water)
    providers = tuple(args.providers.split(","))
    unknown = sorted(set(providers) - set(MODELS))
    if unknown:
        sys.exit(f"--providers: unknown {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    own = None if args.deepseek_tokenizer == "deepseek" else args.deepseek_tokenizer
    work = tasks(
        turns=args.turns,
        seed=args.seed,
        budgets=budgets,
        configs=configs,
        providers=providers,
        deepseek_tokenizer=own,
        compared_tokenizer=None if own else COMPARED_TOKENIZER,
    )
    started = time.perf_counter()
    cpu_started = _cpu_seconds()
    rows = run(work, jobs=args.jobs)
    elapsed = time.perf_counter() - started
    cpu = _cpu_seconds() - cpu_started
    calls = rows[0]["calls"]
    print(
        f"{args.turns} turns ({calls} model calls), seed {args.seed}; budgets counted with cl100k_base; "
        f"DeepSeek analyzed with the {args.deepseek_tokenizer} tokenizer"
    )
    for provider in providers:
        print()
        print(
            "\n".join(
                markdown(
                    rows,
                    provider,
                    budgets=budgets,
                    configs=configs,
                    tokenizer=own if provider == "deepseek" else None,
                )
            )
        )

    def find(tokenizer: str | None, policy: str) -> dict[str, Any] | None:
        return next(
            (
                r
                for r in rows
                if (r["provider"], r["tokenizer"], r["budget"], r["policy"])
                == ("deepseek", tokenizer, COMPARED_BUDGET, policy)
            ),
            None,
        )

    pairs = []
    for config in COMPARED:
        mine, other = find(None, config.label), find(COMPARED_TOKENIZER, config.label)
        if own is None and mine is not None and other is not None:
            pairs.append(f"{mine['hit_ratio']:.4f} against {other['hit_ratio']:.4f} {config.label}")
    if pairs:
        print(
            f"\nDeepSeek's tokenizer against {COMPARED_TOKENIZER}: {', '.join(pairs)}, at {COMPARED_BUDGET:,} tokens"
        )
    print(
        f"\n{len(work)} replays, {len(rows)} analyses: {elapsed:.0f} s wall with {args.jobs} job(s), "
        f"{cpu:.0f} s CPU (this machine)"
    )


if __name__ == "__main__":
    main()
