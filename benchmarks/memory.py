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
from promptkit.cache.engine import analyze
t = time.perf_counter()
r = analyze(sys.argv[1], provider=sys.argv[2], stream=sys.argv[3] == "stream")
elapsed = time.perf_counter() - t
print(r.requests.height, r.problems.height, f"{elapsed:.1f}", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
      f"{r.hit_ratio:.6f}")
"""


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
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "calls.jsonl"
        t = time.perf_counter()
        size = write_log(log, requests=args.requests, calls=args.calls)
        print(
            f"generated {args.requests:,} requests in sessions of {args.calls}: {size / 1e6:,.0f} MB "
            f"in {time.perf_counter() - t:.0f} s"
        )
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
            ),
        }
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
