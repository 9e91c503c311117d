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
from typing import Any

from promptkit.cache.tokenize import RequestTokenizer, TokenizedRequest

WORDS = (
    "the cache prefix request token model provider message system user assistant tool output error file "
    "function value because before after should could would every never always small large first last "
    "test fix bug change update read write parse render split join count check return build install run"
).split()
HANZI = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严"
IDENTS = "cache token prefix render split segment message request offset tokenizer model count index".split()


def english(rng: random.Random, n: int) -> str:
    sentences = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(6, 16))]
        sentences.append(" ".join(words).capitalize() + rng.choice([".", ".", "?", "!"]))
    return " ".join(sentences)


def chinese(rng: random.Random, n: int) -> str:
    return "".join("".join(rng.choice(HANZI) for _ in range(rng.randint(8, 24))) + "。" for _ in range(n))


def code(rng: random.Random, n: int) -> str:
    lines = []
    for _ in range(n):
        name = "_".join(rng.sample(IDENTS, 2))
        args = ", ".join(rng.sample(IDENTS, rng.randint(1, 3)))
        lines.append(f"def {name}({args}):")
        lines.append(f'    """{english(rng, 1)}"""')
        for _ in range(rng.randint(2, 5)):
            lines.append(f"    {rng.choice(IDENTS)} = {rng.choice(IDENTS)}.get({rng.randint(0, 999)!r}, [])")
        lines.append(f"    return {rng.choice(IDENTS)}\n")
    return "\n".join(lines)


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
