"""A whole history: ``promptkit analyze`` on N copies of the bundled agent logs, and on one long chain.

Prints, side by side in one run, for every revision given (``--revision LABEL=PATH``: the ``PYTHONPATH``
its commands run with; default: this checkout):

- **N× corpus** (``--copies``, default 5 and 20): the bundled Claude Code project (main thread and
  sub-agent) and Codex rollout copied N times, each copy with fresh uuids, session, message and request
  ids and its timestamps shifted by a day per copy (so no copy reads another's cache). For each N: the
  default command ``python -m promptkit analyze DIR --no-plots --no-html -q`` (time, CPU time, peak
  RSS of the process), the JSON-parse bound of the same files (a process that only runs ``json.loads``
  on every line) and the ratios analyze / parse bound and N=20 / N=5;
- **one long Claude Code chain** (``--chain``, default 2k, 4k and 8k events; 16k with ``--chain
  2000,4000,8000,16000``): a single conversation of alternating user and assistant events
  (:func:`claude_code_chain`), through the same command (time, CPU time, peak RSS): linear memory
  doubles with the events, quadratic quadruples;
- **--jobs 2 vs --jobs 1** through the command on the largest N× corpus, and the ratio;
- **tokenizing each unique piece once** (``--tokenize``, in a child of this checkout): every request
  of the largest N× corpus tokenized with the analysis's tokenizer (its content-keyed segment cache
  and its resume from an earlier request's prefix), then with a tokenizer that keeps neither (each
  request from scratch), and the lower bound (:mod:`bounds`): every request rendered, each unique text
  piece encoded once; segment cache hits and misses.

Every measurement runs in a fresh child process; its peak RSS is the child's own (``os.wait4``).
``--timeout`` (seconds) stops a child that takes longer (shown as ``>T``). The machine's load moves the
wall-clock figures; the CPU time (user + system) moves less.

    python benchmarks/whole_history.py [--quick] [--copies 5,20] [--chain 2000,4000,8000] \\
        [--revision before=/tmp/base40 --revision after=.]

``--quick``: copies 2 and 4, chains of 500 and 1,000 events (a minute).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
#: The bundled agent logs an N× corpus copies (folders, relative to the repository root).
SOURCES: tuple[str, ...] = ("fixtures/claude-code", "fixtures/codex")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_IDS = re.compile(r'"((?:req|msg|toolu|call|resp|rs|fc)_[A-Za-z0-9]+)"')
_AGENT = re.compile(r"agent-(a[0-9a-f]+)")
_STAMP = re.compile(r'"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)"')
_PARSE = "import json, sys\nfor f in sys.argv[1:]:\n    for line in open(f, encoding='utf-8'):\n        line.strip() and json.loads(line)\n"


def claude_code_chain(events: int, session: str = "5e55a0f0-0000-4000-8000-000000000001") -> list[str]:
    """The lines of one Claude Code main thread of ``events`` short events: user questions and assistant
    answers alternating, each event's ``parentUuid`` the one before, each answer with a usage consistent
    with the growing prompt (about 290 bytes an event, like a real transcript's short turns)."""
    lines: list[str] = []
    parent: str | None = None
    for i in range(events):
        kind = "user" if i % 2 == 0 else "assistant"
        uid = f"{i:08d}-0000-4000-8000-{i:012d}"
        event: dict[str, Any] = {
            "parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/home/u/project",
            "sessionId": session, "version": "2.1.39", "gitBranch": "main", "type": kind,
            "timestamp": f"2026-02-12T{10 + i // 7200:02d}:{(i // 120) % 60:02d}:{(i // 2) % 60:02d}.000Z",
            "uuid": uid,
        }  # fmt: skip
        if kind == "user":
            event["message"] = {"role": "user", "content": f"question {i}: what about item {i}?"}
        else:
            usage = {"input_tokens": 3, "cache_creation_input_tokens": 60,
                     "cache_read_input_tokens": 5000 + 20 * i, "output_tokens": 12}  # fmt: skip
            event["requestId"] = f"req_{i:08d}"
            event["message"] = {"id": f"msg_{i:08d}", "model": "claude-sonnet-4-5", "role": "assistant",
                                "type": "message", "usage": usage,
                                "content": [{"type": "text", "text": f"answer {i}: item {i} is fine."}]}  # fmt: skip
        lines.append(json.dumps(event))
        parent = uid
    return lines


def write_chain(folder: Path, events: int) -> Path:
    """Write :func:`claude_code_chain` of ``events`` events into ``folder`` (a project folder); the file."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "5e55a0f0-0000-4000-8000-000000000001.jsonl"
    path.write_text("\n".join(claude_code_chain(events)) + "\n", encoding="utf-8")
    return path


def _fresh(text: str, copy: int, ids: dict[str, str]) -> str:
    """``text`` with every uuid, message / request / tool id and agent id replaced by this copy's own
    (``ids``: the copy's mapping, filled as met) and every timestamp shifted by ``copy`` days."""

    def new_uuid(m: re.Match[str]) -> str:
        return ids.setdefault(m.group(0), str(uuid.uuid5(uuid.NAMESPACE_URL, f"{copy}:{m.group(0)}")))

    def new_id(m: re.Match[str]) -> str:
        return '"' + ids.setdefault(m.group(1), f"{m.group(1)}c{copy}") + '"'

    def new_agent(m: re.Match[str]) -> str:
        return "agent-" + ids.setdefault(m.group(1), f"{m.group(1)}{copy:x}")

    def shifted(m: re.Match[str]) -> str:
        at = datetime.fromisoformat(m.group(1).replace("Z", "+00:00")) + timedelta(days=copy)
        return '"' + at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + 'Z"'

    text = _UUID.sub(new_uuid, text)
    text = _IDS.sub(new_id, text)
    text = _AGENT.sub(new_agent, text)
    return _STAMP.sub(shifted, text)


def write_corpus(out: Path, copies: int, sources: Sequence[str] = SOURCES) -> list[Path]:
    """``copies`` copies of the log files under ``sources`` in ``out`` (see the module docstring): file
    and folder names renamed as their contents are, so each copy is a session tree of its own."""
    written: list[Path] = []
    for copy in range(copies):
        ids: dict[str, str] = {}
        for source in sources:
            base = ROOT / source
            for path in sorted(base.rglob("*.jsonl")):
                text = _fresh(path.read_text(encoding="utf-8"), copy, ids)
                rel = _fresh(str(path.relative_to(base)), copy, ids)
                target = out / f"copy{copy:03d}" / Path(source).name / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
                written.append(target)
    return written


class Measured(NamedTuple):
    """One child process: wall seconds, CPU seconds (user + system), peak RSS (MB); None when it ran
    past the timeout; ``ok``: it exited 0."""

    wall: float | None
    cpu: float | None
    rss_mb: float | None
    ok: bool


def run_child(argv: Sequence[str], pythonpath: str, timeout: float) -> Measured:
    """Run ``argv`` (a Python command) with ``PYTHONPATH=pythonpath``: its time and peak RSS."""
    env = {**os.environ, "PYTHONPATH": pythonpath}
    start = time.perf_counter()
    # cwd: not a checkout (``python -m`` puts the working directory before PYTHONPATH on sys.path)
    proc = subprocess.Popen(
        argv, env=env, cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = start + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            os.wait4(proc.pid, 0)
            return Measured(None, None, None, False)
        time.sleep(0.02)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr is not None else ""
    if proc.returncode != 0:
        print(f"  (exit {proc.returncode}: {err.strip()[-300:]})", file=sys.stderr)
    return Measured(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode == 0)


def analyze_argv(folder: Path, out: Path, jobs: int = 1) -> list[str]:
    """The default command a user types, without plots or the HTML page."""
    argv = [sys.executable, "-m", "promptkit", "analyze", str(folder), "--no-plots", "--no-html", "-q"]
    return [*argv, "--out", str(out), *(["--jobs", str(jobs)] if jobs != 1 else []), "--no-progress"]


def _fmt(m: Measured | None, timeout: float) -> str:
    if m is None:
        return "-"
    if m.wall is None:
        return f">{timeout:.0f} s"
    flag = "" if m.ok else " (failed)"
    return f"{m.wall:6.1f} s ({m.cpu:5.1f} cpu) {m.rss_mb:6.0f} MB{flag}"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:5.2f}" if a is not None and b else "  -  "


def _table(title: str, header: Sequence[str], rows: Iterator[Sequence[str]]) -> None:
    print(f"\n{title}")
    widths = [max(14, len(h)) for h in header]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)))


def bench_corpus(
    work: Path, copies: Sequence[int], revisions: dict[str, str], timeout: float
) -> dict[int, Path]:
    """The N× corpus section; returns each N's folder."""
    folders: dict[int, Path] = {}
    results: dict[tuple[str, int], Measured] = {}
    parse: dict[int, Measured] = {}
    sizes: dict[int, float] = {}
    for n in copies:
        folder = work / f"corpus{n}"
        files = write_corpus(folder, n)
        folders[n] = folder
        sizes[n] = sum(f.stat().st_size for f in files) / 1e6
        parse[n] = run_child([sys.executable, "-c", _PARSE, *map(str, files)], "", timeout)
        for label, path in revisions.items():
            results[label, n] = run_child(analyze_argv(folder, work / "out"), path, timeout)

    def rows() -> Iterator[list[str]]:
        for n in copies:
            row = [f"{n}x ({sizes[n]:.1f} MB)", _fmt(parse[n], timeout)]
            for label in revisions:
                m = results[label, n]
                row += [_fmt(m, timeout), _ratio(m.cpu, parse[n].cpu)]
            yield row
        if len(copies) > 1:
            lo, hi = copies[0], copies[-1]
            row = [f"{hi}x / {lo}x", ""]
            for label in revisions:
                a, b = results[label, hi], results[label, lo]
                row += [f"cpu {_ratio(a.cpu, b.cpu)}  rss {_ratio(a.rss_mb, b.rss_mb)}", ""]
            yield row

    header = ["corpus", "JSON-parse bound"]
    for label in revisions:
        header += [f"analyze [{label}]", "x parse (cpu)"]
    _table("N x corpus (bundled Claude Code project + Codex rollout): wall (cpu) peak RSS", header, rows())
    return folders


def bench_chain(work: Path, sizes: Sequence[int], revisions: dict[str, str], timeout: float) -> None:
    """The long-chain section."""
    results: dict[tuple[str, int], Measured] = {}
    megabytes: dict[int, float] = {}
    for events in sizes:
        path = write_chain(work / f"chain{events}", events)
        megabytes[events] = path.stat().st_size / 1e6
        for label, pythonpath in revisions.items():
            results[label, events] = run_child(analyze_argv(path.parent, work / "out"), pythonpath, timeout)

    def rows() -> Iterator[list[str]]:
        previous: int | None = None
        for events in sizes:
            row = [f"{events} events ({megabytes[events]:.1f} MB)"]
            for label in revisions:
                m = results[label, events]
                grow = ""
                if previous is not None:
                    p = results[label, previous]
                    grow = f"cpu {_ratio(m.cpu, p.cpu)} rss {_ratio(m.rss_mb, p.rss_mb)}"
                row += [_fmt(m, timeout), grow]
            previous = events
            yield row

    header = ["Claude Code chain"]
    for label in revisions:
        header += [f"analyze [{label}]", "x previous size"]
    _table("One Claude Code conversation: wall (cpu) peak RSS; x previous: 2 = linear, 4 = quadratic",
           header, rows())  # fmt: skip


def bench_jobs(work: Path, folder: Path, n: int, revisions: dict[str, str], timeout: float) -> None:
    """``--jobs 2`` against ``--jobs 1`` through the command."""

    def rows() -> Iterator[list[str]]:
        for label, pythonpath in revisions.items():
            one = run_child(analyze_argv(folder, work / "out1", jobs=1), pythonpath, timeout)
            two = run_child(analyze_argv(folder, work / "out2", jobs=2), pythonpath, timeout)
            yield [label, _fmt(one, timeout), _fmt(two, timeout), _ratio(two.wall, one.wall)]

    _table(f"--jobs 2 vs --jobs 1 on the {n}x corpus (os.cpu_count() = {os.cpu_count()})",
           ["revision", "--jobs 1", "--jobs 2", "wall 2/1"], rows())  # fmt: skip


_TOKENIZE = """
import sys, time
sys.path.insert(0, sys.argv[2])
from bounds import encode_each_once, unique_pieces
from promptkit.formats import read_logs
from promptkit.providers.registry import get_provider
from promptkit.tokens.tokenize import RequestTokenizer
from promptkit.analysis.prepare import chat_body
records = read_logs(sys.argv[1]).records
profile = get_provider("anthropic")
render, tokenizer = profile.load_render(), profile.load_tokenizer()
def run(rt):
    t = time.perf_counter()
    for r in records:
        rt.tokenize(chat_body(r.request)[0], completion=r.completion)
    return time.perf_counter() - t
cached = RequestTokenizer(render, tokenizer)
fresh = RequestTokenizer(render, tokenizer, cache_tokens=0, snapshots=0)
t = time.perf_counter()
pieces = unique_pieces(records, [render] * len(records))
encode_each_once(pieces, tokenizer)
bound = time.perf_counter() - t
a, b = run(cached), run(fresh)
info = cached.cache_info()
print(f"{len(records)} requests, {len(pieces)} unique pieces: cached {a:.2f} s, no cache {b:.2f} s, "
      f"bound (render every request, encode each unique piece once) {bound:.2f} s; cached / bound {a / bound:.2f}, no cache / cached {b / a:.2f}; "
      f"segment hits {info['hits']}, misses {info['misses']}, requests resumed {info['resumed']}")
"""


def bench_tokenize(folder: Path, n: int, timeout: float) -> None:
    """Tokenizing every request of the ``n``x corpus: with the analysis's caches, without, and the bound."""
    print(f"\nTokenizing the {n}x corpus (anthropic profile: its render and local tokenizer)")
    proc = subprocess.run(
        [sys.executable, "-c", _TOKENIZE, str(folder), str(ROOT / "benchmarks")],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    print(proc.stdout.strip() or proc.stderr.strip()[-500:])


def _sizes(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def add_revisions(parser: argparse.ArgumentParser) -> None:
    """The ``--revision LABEL=PATH`` option every benchmark of this family takes (repeatable)."""
    parser.add_argument(
        "--revision", action="append", default=[], metavar="LABEL=PATH",
        help="a revision to measure: the PYTHONPATH of its checkout (repeatable; default: this one)",
    )  # fmt: skip


def revisions_of(args: argparse.Namespace) -> dict[str, str]:
    """The revisions ``--revision`` named, label -> absolute PYTHONPATH (default: this checkout)."""
    revisions = dict(r.split("=", 1) for r in args.revision) or {"this": str(ROOT)}
    return {label: str(Path(path).resolve()) for label, path in revisions.items()}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--copies", type=_sizes, default=[5, 20], help="N of the N x corpus (default 5,20)")
    parser.add_argument("--chain", type=_sizes, default=[2000, 4000, 8000], help="chain sizes in events")
    parser.add_argument("--quick", action="store_true", help="copies 2,4 and chains of 500,1000 events")
    parser.add_argument("--no-jobs", action="store_true", help="leave out --jobs 2 vs --jobs 1")
    parser.add_argument("--tokenize", action="store_true", help="also measure tokenizing each piece once")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a child may run (default 600)")
    add_revisions(parser)
    args = parser.parse_args(argv)
    copies, chain = ([2, 4], [500, 1000]) if args.quick else (args.copies, args.chain)
    revisions = revisions_of(args)
    work = Path(tempfile.mkdtemp(prefix="whole-history-"))
    try:
        folders = bench_corpus(work, copies, revisions, args.timeout) if copies else {}
        if chain:
            bench_chain(work, chain, revisions, args.timeout)
        if folders and not args.no_jobs:
            n = max(folders)
            bench_jobs(work, folders[n], n, revisions, args.timeout)
        if folders and args.tokenize:
            bench_tokenize(folders[max(folders)], max(folders), args.timeout)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
