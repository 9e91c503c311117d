"""A synthetic corpus shaped like 20 real coding-agent runs: deterministic, seeded, promptkit JSONL.

Each session is a mini-swe-agent-style run: a system prompt, a task, then about 130 calls; every call's
request is the whole conversation so far (the agent appends its previous answer — an assistant message
with a thought and one ``bash`` tool call — and the tool's output), so the prompt grows to 30–60k
tokens. Text mixes English, Chinese and code (like real tool outputs). Sessions start a few minutes
apart and their calls interleave in time, so the simulated view sees a shared cache. One line per call:
``{"session", "timestamp", "request": {"model", "messages", "tools"}, "response": {"choices": [...]}}``
(no ``usage``: a synthetic corpus has no provider report).

    python benchmarks/corpus.py OUT_DIR [--sessions 20] [--calls 130] [--seed 7]

Writes one ``<session>.jsonl`` per session into OUT_DIR.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from incremental_tokenize import IDENTS, TOOLS, chinese, code, english

#: Characters per token of this generator's text, measured with cl100k_base (≈ 3.3): used to size sessions.
CHARS_PER_TOKEN = 3.3


def _tool_output(rng: random.Random, budget_chars: int) -> str:
    parts: list[str] = []
    size = 0
    while size < budget_chars:
        kind = rng.random()
        if kind < 0.55:
            part = code(rng, rng.randint(1, 4))
        elif kind < 0.85:
            part = english(rng, rng.randint(2, 8))
        else:
            part = chinese(rng, rng.randint(2, 6))
        parts.append(part)
        size += len(part)
    return "\n".join(parts)


def session_calls(name: str, calls: int, seed: int, start: float) -> Iterator[dict[str, Any]]:
    """The records of one session: call k's request is the conversation before the k-th answer."""
    rng = random.Random(f"{seed}:{name}")
    final_tokens = rng.randint(30_000, 60_000)
    system = "You are a helpful assistant that can interact with a computer shell.\n" + english(
        random.Random(seed), 40
    )
    task = "Please solve this issue in the repository.\n" + english(rng, 12) + "\n" + code(rng, 3)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": task},
    ]
    fixed = len(system) + len(task)
    per_call_chars = max(200, int((final_tokens * CHARS_PER_TOKEN - fixed) / max(calls, 1)))
    now = start
    for k in range(calls):
        command = f"grep -rn {rng.choice(IDENTS)} src/ | head -{rng.randint(5, 40)}"
        answer = {
            "role": "assistant",
            "content": "THOUGHT: " + english(rng, rng.randint(1, 3)),
            "tool_calls": [
                {
                    "id": f"call_{name}_{k}",
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"command": command})},
                }
            ],
        }
        yield {
            "session": name,
            "timestamp": round(now, 3),
            "request": {"model": "deepseek-chat", "messages": list(messages), "tools": TOOLS},
            "response": {"choices": [{"index": 0, "message": answer, "finish_reason": "tool_calls"}]},
        }
        budget = int(per_call_chars * rng.uniform(0.3, 1.7)) - len(answer["content"])
        output = _tool_output(rng, max(budget, 40))
        messages += [
            answer,
            {"role": "tool", "content": output, "tool_call_id": answer["tool_calls"][0]["id"]},
        ]
        now += rng.uniform(3.0, 25.0)


def write_corpus(out_dir: Path, *, sessions: int = 20, calls: int = 130, seed: int = 7) -> list[Path]:
    """Write the corpus (one JSONL file per session); returns the files.

    >>> import tempfile
    >>> files = write_corpus(Path(tempfile.mkdtemp()), sessions=2, calls=3)
    >>> [f.name for f in files], len(files[0].read_text().splitlines())
    (['s00.jsonl', 's01.jsonl'], 3)
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    written = []
    for s in range(sessions):
        name = f"s{s:02d}"
        n = max(1, calls + rng.randint(-calls // 10, calls // 10))
        path = out_dir / f"{name}.jsonl"
        with path.open("w", encoding="utf-8") as f:
            for record in session_calls(name, n, seed, 1_700_000_000.0 + 240.0 * s):
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--calls", type=int, default=130)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    files = write_corpus(args.out, sessions=args.sessions, calls=args.calls, seed=args.seed)
    size = sum(f.stat().st_size for f in files)
    print(f"wrote {len(files)} sessions, {size / 1e6:.0f} MB, to {args.out}")


if __name__ == "__main__":
    main()
