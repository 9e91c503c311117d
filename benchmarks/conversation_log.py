"""A large conversation log, analyzed by the default command: requests, time, peak memory, the parse bound.

Writes, streaming to disk (only the open sessions are held), a request log of ``--requests`` calls in
promptkit's JSONL format (one wrapped call a line: ``session``, ``timestamp``, ``request`` with the
whole conversation so far, ``response`` with the answer): ``--active`` sessions open at once, their calls
interleaved in time order like a chat service's log, each session ``--calls`` calls long (a system prompt
drawn from ``--prompts`` shared ones, then user questions and assistant answers: each call's prompt is
the previous call's plus its answer and the next question), rotated into files of ``--file-requests``
calls. Then runs the default command a user types, ``python -m promptkit analyze DIR --no-plots
--no-html -q`` (``--view`` adds a view, ``--stream`` adds ``--stream``: the default view of this log,
whose records are plain calls, is the consecutive one, which loads every record; ``--stream`` reads it
session by session), and a process that only parses every line (``json.loads``: the JSON-parse bound),
each in a fresh child process, and prints: requests, MB of logs, wall, CPU, peak RSS (the child's own,
``os.wait4``), requests per CPU second and the ratio to the parse bound.

    python benchmarks/conversation_log.py --requests 1000000            # the 1M figure: one command
    python benchmarks/conversation_log.py --requests 10000,100000       # memory flat? (side by side)
    python benchmarks/conversation_log.py --requests 100000 --revision before=/tmp/base --revision after=.

``--keep DIR`` writes the logs there and leaves them (else a temporary folder, removed at the end).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from whole_history import _PARSE, Measured, _fmt, _ratio, _sizes, add_revisions, revisions_of, run_child

_WORDS = (
    "cache prefix token request session model prompt history answer question context window layout "
    "system user assistant block anchor breakpoint provider hit miss write read expiry time cost price "
    "file line field record report frame replay simulator tokenizer render chat message tool result"
).split()


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def system_prompts(count: int, seed: int = 7) -> list[str]:
    """``count`` system prompts (about 1 KB each) that the sessions share."""
    rng = random.Random(seed)
    return [f"You are assistant #{k}. Follow the house rules.\n" + _text(rng, 150) for k in range(count)]


def conversation_lines(
    requests: int, *, calls: int = 20, active: int = 64, prompts: int = 8, seed: int = 7
) -> Iterator[str]:
    """The log's lines, one call each, in time order: ``requests`` calls of sessions ``calls`` calls
    long, ``active`` of them open at once. A session's history is held as the JSON text of its messages
    (each call's line is that text, its question and its answer), so a line costs its own length."""
    rng = random.Random(seed)
    systems = [json.dumps({"role": "system", "content": s}) for s in system_prompts(prompts, seed)]
    histories: dict[int, str] = {}  # an open session's messages so far, as JSON text
    made: dict[int, int] = {}  # its calls so far
    next_id, now = 0, 1_780_000_000.0
    for _ in range(requests):
        if len(histories) < active:
            histories[next_id], made[next_id] = systems[next_id % len(systems)], 0
            next_id += 1
        sid = rng.choice(list(histories))
        history, k = histories[sid], made[sid]
        question = json.dumps({"role": "user", "content": f"question {k}: " + _text(rng, rng.randint(5, 25))})
        answer = {"role": "assistant", "content": f"answer {k}: " + _text(rng, rng.randint(10, 40))}
        history += ", " + question
        now += rng.uniform(0.01, 0.2)
        yield (
            f'{{"session": "s{sid:07d}", "timestamp": {now:.3f}, "request": {{"model": "deepseek-chat", '
            f'"messages": [{history}]}}, "response": {{"choices": [{{"index": 0, "message": '
            f'{json.dumps(answer)}, "finish_reason": "stop"}}]}}}}'
        )
        if k + 1 >= calls:
            del histories[sid], made[sid]
        else:
            histories[sid], made[sid] = history + ", " + json.dumps(answer), k + 1


def write_log(
    out: Path,
    requests: int,
    *,
    calls: int = 20,
    active: int = 64,
    prompts: int = 8,
    file_requests: int = 100_000,
) -> list[Path]:
    """Write :func:`conversation_lines` into ``out`` (files of ``file_requests`` lines); the files."""
    out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    handle = None
    try:
        for n, line in enumerate(conversation_lines(requests, calls=calls, active=active, prompts=prompts)):
            if n % file_requests == 0:
                if handle is not None:
                    handle.close()
                files.append(out / f"calls-{len(files):04d}.jsonl")
                handle = files[-1].open("w", encoding="utf-8")
            assert handle is not None
            handle.write(line + "\n")
    finally:
        if handle is not None:
            handle.close()
    return files


def analyze_argv(folder: Path, out: Path, view: str | None, stream: bool = False) -> list[str]:
    """The default command a user types, without plots or the HTML page (``view``, ``stream``: with
    ``--view`` / ``--stream``)."""
    argv = [sys.executable, "-m", "promptkit", "analyze", str(folder), "--no-plots", "--no-html", "-q"]
    extra = [*(["--view", view] if view else []), *(["--stream"] if stream else [])]
    return [*argv, "--out", str(out), "--no-progress", *extra]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=_sizes, default=[10_000], help="calls in the log (comma list)")
    parser.add_argument("--calls", type=int, default=20, help="calls per session (default 20)")
    parser.add_argument("--active", type=int, default=64, help="sessions open at once (default 64)")
    parser.add_argument("--prompts", type=int, default=8, help="distinct shared system prompts (default 8)")
    parser.add_argument("--file-requests", type=int, default=100_000, help="calls per log file")
    parser.add_argument("--view", choices=["consecutive", "simulated"], help="a view (default: the default)")
    parser.add_argument("--stream", action="store_true", help="add --stream (the consecutive view streamed)")
    parser.add_argument("--keep", type=Path, help="write the logs here and keep them")
    parser.add_argument("--no-parse", action="store_true", help="leave out the JSON-parse bound")
    parser.add_argument("--timeout", type=float, default=7200.0, help="seconds a child may run")
    add_revisions(parser)
    args = parser.parse_args(argv)
    revisions = revisions_of(args)
    work = args.keep or Path(tempfile.mkdtemp(prefix="conversation-log-"))
    print(f"{'requests':>10}  {'MB':>7}  {'JSON-parse bound':<30}  revision  {'analyze: wall (cpu) peak RSS':<30}"
          "  req/cpu s  x parse (cpu)", flush=True)  # fmt: skip
    try:
        for n in args.requests:
            folder = work / f"log{n}"
            files = write_log(folder, n, calls=args.calls, active=args.active, prompts=args.prompts,
                              file_requests=args.file_requests)  # fmt: skip
            mb = sum(f.stat().st_size for f in files) / 1e6
            parse: Measured | None = None
            if not args.no_parse:
                parse = run_child([sys.executable, "-c", _PARSE, *map(str, files)], "", args.timeout)
            for label, path in revisions.items():
                m = run_child(
                    analyze_argv(folder, work / f"out{n}-{label}", args.view, args.stream), path, args.timeout
                )
                rate = f"{n / m.cpu:9.0f}" if m.cpu else "   -"
                print(f"{n:>10,}  {mb:7.0f}  {_fmt(parse, args.timeout):<30}  {label:<8}  "
                      f"{_fmt(m, args.timeout):<30}  {rate}  {_ratio(m.cpu, parse.cpu if parse else None)}",
                      flush=True)  # fmt: skip
            if args.keep is None:
                shutil.rmtree(folder, ignore_errors=True)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
