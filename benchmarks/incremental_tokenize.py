"""Incremental vs naive request tokenization on one long agent session, side by side in one run.

Builds a deterministic synthetic session (a coding agent: user turns, assistant turns with a tool call,
tool outputs; mixed English, Chinese and code), tokenizes *every* request of it (request k = the
conversation up to turn k) with ``RequestTokenizer.tokenize`` (segment cache) and with
``RequestTokenizer.tokenize_naive`` (whole text, every time), checks that both give the same tokens and
message offsets, and prints both times and the speed-up, for cl100k_base + ChatML, DeepSeek + DeepSeek-V3
and DeepSeek + DeepSeek-V3.2.

    python benchmarks/incremental_tokenize.py [--turns 350] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from textgen import IDENTS, chinese, code, english

from promptkit.tokens.tokenize import RequestTokenizer, TokenizedRequest


def build_session(turns: int, seed: int) -> list[dict[str, Any]]:
    """A deterministic conversation: system prompt, then ``turns`` user/assistant/tool rounds."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. " + english(rng, 30) + "\n" + chinese(rng, 10)}
    ]
    for turn in range(turns):
        if turn % 10 == 0:
            messages.append({"role": "user", "content": english(rng, 3) + "\n" + chinese(rng, 2)})
        call = {
            "id": f"call_{turn}",
            "type": "function",
            "function": {
                "name": "bash",
                "arguments": json.dumps({"command": f"grep -n {rng.choice(IDENTS)} src/*.py"}),
            },
        }
        messages.append(
            {"role": "assistant", "content": english(rng, 2) + chinese(rng, 1), "tool_calls": [call]}
        )
        output = rng.choice(
            [code(rng, rng.randint(2, 6)), english(rng, 14), chinese(rng, 12) + "\n" + code(rng, 2)]
        )
        messages.append({"role": "tool", "content": output, "tool_call_id": call["id"]})
    return messages


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Execute a bash command",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    }
]


def requests_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One request per assistant turn: everything before it."""
    return [
        {"messages": messages[:k], "tools": TOOLS} for k, m in enumerate(messages) if m["role"] == "assistant"
    ]


def same(a: TokenizedRequest, b: TokenizedRequest) -> bool:
    return bool(
        a.tokens.shape == b.tokens.shape
        and (a.tokens == b.tokens).all()
        and a.message_starts == b.message_starts
        and a.message_ends == b.message_ends
        and (a.header_len, a.prompt_len) == (b.header_len, b.prompt_len)
    )


def run(label: str, render_model: str, tokenizer: str, requests: list[dict[str, Any]]) -> float:
    fast = RequestTokenizer(render_model, tokenizer)
    naive = RequestTokenizer(render_model, tokenizer)
    fast.tokenize(
        {"messages": [{"role": "user", "content": "warm up"}]}
    )  # load the tokenizer outside the timing
    t_fast = t_naive = 0.0
    last = 0
    for k, request in enumerate(requests):
        t0 = time.perf_counter()
        a = fast.tokenize(request)
        t1 = time.perf_counter()
        b = naive.tokenize_naive(request)
        t2 = time.perf_counter()
        t_fast += t1 - t0
        t_naive += t2 - t1
        if not same(a, b):
            sys.exit(f"{label}: request {k}: incremental and naive tokenization differ")
        last = len(a)
    ratio = t_naive / t_fast
    info = fast.cache_info()
    print(
        f"{label:<28} {len(requests):>5} {last:>12,} {t_naive:>9.2f} {t_fast:>9.2f} {ratio:>8.1f}x"
        f"   (cache: {info['segments']} segments, {info['tokens']:,} tokens)"
    )
    return ratio


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=350)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    requests = requests_of(build_session(args.turns, args.seed))
    print(f"session: {args.turns} turns, seed {args.seed}; every request tokenized both ways; results equal")
    print(
        f"{'render + tokenizer':<28} {'reqs':>5} {'last tokens':>12} {'naive s':>9} {'incr. s':>9} {'speed-up':>9}"
    )
    run("chatml + cl100k_base", "chatml", "cl100k_base", requests)
    run("deepseek-v3 + deepseek", "deepseek-v3", "deepseek", requests)
    run("deepseek-v3.2 + deepseek", "deepseek-v3.2", "deepseek", requests)


if __name__ == "__main__":
    main()
