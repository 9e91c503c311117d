"""Peak memory of an analysis of a large generated log: streamed (session by session) next to loaded.

Generates one JSONL log of ``--requests`` small requests (default 1,000,000) in many sessions of
``--calls`` calls each (every line repeats the conversation so far, like real logs; four sessions are
open at a time, their lines interleaved), then analyzes it in a fresh subprocess per mode and prints
each one's time and peak RSS (``resource.getrusage(RUSAGE_SELF).ru_maxrss``):

- **stream**: ``analyze(path, stream=True)`` — records read lazily, analyzed and released session by
  session (:func:`promptkit.formats.stream_logs`); memory holds the open sessions and the result frames;
- **load**: ``analyze(path)`` — every record loaded first (:func:`promptkit.formats.read_logs`,
  identical messages shared across a session's records).

    python benchmarks/memory.py [--requests 1000000] [--calls 10] [--provider exact] [--modes stream,load]

``--big-message MB`` instead writes one request holding a single message of ``MB`` megabytes (words,
newlines, indentation and CJK) and prints the time and peak RSS of its streamed analysis with each of
``--providers`` (default ``openai,deepseek``: tiktoken's cl100k_base and DeepSeek's HF tokenizer):

    python benchmarks/memory.py --big-message 50
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_WORDS = "the cache prefix token request session agent tool output file line error value".split()

_RUN = """
import resource, sys, time
from promptkit.analysis.api import analyze
t = time.perf_counter()
r = analyze(sys.argv[1], provider=sys.argv[2], stream=sys.argv[3] == "stream")
elapsed = time.perf_counter() - t
print(r.requests.height, r.problems.height, f"{elapsed:.1f}", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
      f"{r.hit_ratio:.6f}")
"""


_BIG_WORDS = ["alpha", "beta", "gamma", "delta", "value", "x=1;", "return", "\n", "    ", "函数"]


def write_big_message(path: Path, *, megabytes: int, seed: int = 3) -> int:
    """Write one request whose only message holds ``megabytes`` MB of text; returns its characters."""
    rng = random.Random(seed)
    size = megabytes * 1_000_000
    text = " ".join(rng.choice(_BIG_WORDS) for _ in range(size // 5))[:size]
    record = {
        "session": "big",
        "timestamp": 1.0,
        "request": {"model": "gpt-4o", "messages": [{"role": "user", "content": text}]},
    }
    with path.open("w", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    return len(text)


def write_log(path: Path, *, requests: int, calls: int, seed: int = 11) -> int:
    """Write ``requests`` requests in sessions of ``calls`` calls (four open at a time); returns bytes."""
    rng = random.Random(seed)
    system = {"role": "system", "content": "You are a coding agent. " + " ".join(rng.choices(_WORDS, k=40))}
    sessions = -(-requests // calls)
    written = 0
    open_sessions: list[tuple[int, list[dict[str, str]], int]] = []
    next_session = 0
    with path.open("w", encoding="utf-8") as f:
        while written < requests:
            while len(open_sessions) < 4 and next_session < sessions:
                task = {
                    "role": "user",
                    "content": f"task {next_session}: " + " ".join(rng.choices(_WORDS, k=12)),
                }
                open_sessions.append((next_session, [system, task], 0))
                next_session += 1
            slot = rng.randrange(len(open_sessions))
            s, messages, k = open_sessions[slot]
            line = {
                "session": f"s{s:07d}",
                "timestamp": 1_700_000_000.0 + written * 0.5,
                "request": {"model": "gpt-4o", "messages": messages},
            }
            f.write(json.dumps(line) + "\n")
            written += 1
            messages = [
                *messages,
                {"role": "assistant", "content": " ".join(rng.choices(_WORDS, k=8))},
                {"role": "user", "content": "tool output: " + " ".join(rng.choices(_WORDS, k=20))},
            ]
            if k + 1 >= calls:
                open_sessions.pop(slot)
            else:
                open_sessions[slot] = (s, messages, k + 1)
    return path.stat().st_size


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--provider", default="exact")
    parser.add_argument("--modes", default="stream,load")
    parser.add_argument("--big-message", type=int, default=None, metavar="MB")
    parser.add_argument("--providers", default="openai,deepseek")
    args = parser.parse_args(argv)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
        ),
    }
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "calls.jsonl"
        if args.big_message is not None:
            chars = write_big_message(log, megabytes=args.big_message)
            print(f"one message of {chars:,} characters ({log.stat().st_size / 1e6:,.0f} MB of JSON)")
            for provider in args.providers.split(","):
                done = subprocess.run(
                    [sys.executable, "-c", _RUN, str(log), provider, "stream"],
                    capture_output=True,
                    text=True,
                    env=env,
                    check=True,
                )
                _, _, elapsed, peak_kb, _ = done.stdout.split()
                print(f"{provider:>9}: {elapsed} s, peak RSS {int(peak_kb) / 1024:,.0f} MB")
            return
        t = time.perf_counter()
        size = write_log(log, requests=args.requests, calls=args.calls)
        print(
            f"generated {args.requests:,} requests in sessions of {args.calls}: {size / 1e6:,.0f} MB "
            f"in {time.perf_counter() - t:.0f} s"
        )
        for mode in args.modes.split(","):
            done = subprocess.run(
                [sys.executable, "-c", _RUN, str(log), args.provider, mode],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            )
            rows, problems, elapsed, peak_kb, ratio = done.stdout.split()
            print(
                f"{mode:>6}: {int(rows):,} requests analyzed, {problems} problems, {elapsed} s, "
                f"peak RSS {int(peak_kb) / 1024:,.0f} MB ({int(peak_kb) * 1024 / max(int(rows), 1):,.0f} "
                f"bytes/request), hit ratio {ratio}"
            )


if __name__ == "__main__":
    main()
