"""``promptkit analyze DIR --jobs 2`` against ``--jobs 1``, through the command a user types, on real runs.

One command builds the corpora and prints, side by side in one run, for each of them:

- **the whole-history corpus** (:func:`whole_history.write_corpus`: the bundled Claude Code project and
  Codex rollout copied ``--copies`` times, fresh ids, a day apart): in its default view (consecutive: the
  Codex rollouts are not conversation trees) and in the simulated view (``--view simulated``);
- **the bundled real agent runs** (:func:`write_agent_runs`: the mini-swe-agent trajectories of
  ``fixtures/real-logs/deepseek`` and ``fixtures/real-logs/gemini``, real DeepSeek and Gemini calls, copied
  ``--runs`` times, each copy a session of its own a day after the previous one) in the simulated view;

``python -m promptkit analyze DIR --no-plots --no-html -q --out OUT [--view V] --jobs N`` for N = 1 and
2 (each in a fresh process): its wall time, the CPU time (user + system) of every process of its tree
(the coordinator, each worker, the fork server; read from ``/proc`` while it runs), the peak RSS of the
largest process, the wall ratio jobs 2 / jobs 1, a CPU bound of the critical path at ``--jobs 2`` (the
coordinator's CPU plus the busiest worker's: what the wall time would be on two idle cores if the
coordinator never ran beside a worker) over ``--jobs 1``'s CPU, the same with the fork server's CPU
added (``+ server``: as if the workers waited for all of it; they wait for its imports and the
tokenizers it loads, while the coordinator imports and lists the logs beside it), and whether the two
runs wrote identical frames (every CSV byte for byte, ``requests.parquet`` frame for frame).

    python benchmarks/jobs_cli.py [--copies 500] [--runs 30] [--repeat 1] [--revision LABEL=PATH ...]

Each revision's bytecode is compiled first (``compileall``), as an installed package's is, so that no
command compiles its modules (``PYTHONDONTWRITEBYTECODE`` would make every run do it).

The machine's load moves the wall-clock figures (the processes share its cores with whatever else runs);
the CPU figures move less. ``--repeat`` runs each pair that many times and keeps the fastest wall time.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from whole_history import add_revisions, revisions_of, write_corpus

ROOT = Path(__file__).resolve().parent.parent
#: The bundled real agent runs :func:`write_agent_runs` copies (folders, relative to the repository root).
AGENT_RUNS: tuple[str, ...] = ("fixtures/real-logs/deepseek", "fixtures/real-logs/gemini")
_CREATED = re.compile(r'("created":\s*)(\d+)')
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def write_agent_runs(out: Path, copies: int, sources: Sequence[str] = AGENT_RUNS) -> list[Path]:
    """``copies`` copies of the trajectories under ``sources`` in ``out``: each copy's file named after its
    copy (a mini-swe-agent session is its file's name) and its calls' ``created`` times a day later per
    copy (so no copy reads another's cache)."""
    written: list[Path] = []
    for copy in range(copies):
        for source in sources:
            for path in sorted((ROOT / source).glob("*.traj.json")):
                text = _CREATED.sub(partial(_later, days=copy), path.read_text(encoding="utf-8"))
                target = out / f"copy{copy:03d}" / Path(source).name / f"c{copy:03d}-{path.name}"
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
                written.append(target)
    return written


def _later(m: re.Match[str], days: int) -> str:
    """A ``"created": SECONDS`` field ``days`` days later."""
    return m.group(1) + str(int(m.group(2)) + days * 86400)


class Tree(NamedTuple):
    """One command's process tree: wall seconds, each process' CPU seconds and peak RSS (MB) by pid (the
    command's own first), whether it exited 0, and each process' parent (by pid)."""

    wall: float
    cpu: dict[int, float]
    rss: dict[int, float]
    ok: bool
    parent: dict[int, int]


def _children() -> dict[int, list[int]]:
    """Every process' children, by parent pid (from ``/proc``)."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(entry))
    return kids


def _sample(root: int, cpu: dict[int, float], rss: dict[int, float], parent: dict[int, int]) -> None:
    """Record the CPU time and resident set of ``root`` and its descendants now, and their parents."""
    kids, todo = _children(), [root]
    while todo:
        pid = todo.pop()
        todo.extend(kids.get(pid, ()))
        parent.update((kid, pid) for kid in kids.get(pid, ()))
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        cpu[pid] = (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime
        hwm = re.search(r"VmHWM:\s+(\d+) kB", status)
        if hwm:
            rss[pid] = max(rss.get(pid, 0.0), int(hwm.group(1)) / 1024)


def run_tree(argv: Sequence[str], pythonpath: str, timeout: float) -> Tree:
    """Run ``argv`` with ``PYTHONPATH=pythonpath``, sampling its process tree every 50 ms."""
    env = {**os.environ, "PYTHONPATH": pythonpath}
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    cpu: dict[int, float] = {}
    rss: dict[int, float] = {}
    parent: dict[int, int] = {}
    while proc.poll() is None:
        _sample(proc.pid, cpu, rss, parent)
        if time.perf_counter() - start > timeout:
            proc.kill()
        time.sleep(0.05)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace") if proc.stderr is not None else ""
    if proc.returncode != 0:
        print(f"  (exit {proc.returncode}: {err.strip()[-300:]})", file=sys.stderr)
    return Tree(wall, cpu, rss, proc.returncode == 0, parent)


def analyze_argv(folder: Path, out: Path, jobs: int, view: str | None) -> list[str]:
    """The command a user types, without plots or the HTML page."""
    argv = [sys.executable, "-m", "promptkit", "analyze", str(folder), "--no-plots", "--no-html", "-q"]
    argv += ["--out", str(out), "--no-progress", "--jobs", str(jobs)]
    return argv + (["--view", view] if view else [])


def same_frames(a: Path, b: Path) -> bool:
    """Whether two ``--out`` folders hold the same frames: every CSV byte for byte, the Parquet frame for
    frame (the summary may differ by a note)."""
    import polars as pl

    names = sorted(p.name for p in a.iterdir() if p.suffix in (".csv", ".parquet"))
    if names != sorted(p.name for p in b.iterdir() if p.suffix in (".csv", ".parquet")) or not names:
        return False
    for name in names:
        if name.endswith(".parquet"):
            if not pl.read_parquet(a / name).equals(pl.read_parquet(b / name)):
                return False
        elif (a / name).read_bytes() != (b / name).read_bytes():
            return False
    return True


def _pair(folder: Path, work: Path, view: str | None, pythonpath: str, repeat: int, timeout: float) -> str:
    """jobs 1 and jobs 2 on ``folder``, ``repeat`` times each (alternating): one line of figures."""
    best: dict[int, Tree] = {}
    for _ in range(repeat):
        for jobs in (1, 2):
            got = run_tree(analyze_argv(folder, work / f"out{jobs}", jobs, view), pythonpath, timeout)
            if jobs not in best or got.wall < best[jobs].wall:
                best[jobs] = got
    one, two = best[1], best[2]
    own = next(iter(two.cpu.values()), 0.0)  # the command's own process is sampled first
    pids = list(two.cpu)
    workers = sorted((two.cpu[p] for p in pids[1:] if two.cpu[p] > 0.2), reverse=True)  # not the tracker
    # the fork server: the parent of the workers (a child of the command that has children itself)
    servers = {two.parent[p] for p in pids if two.parent.get(p, pids[0]) != pids[0]}
    server = sum(two.cpu.get(p, 0.0) for p in servers)
    busiest = max(
        (two.cpu[p] for p in pids if two.parent.get(p) in servers), default=max(workers, default=0.0)
    )
    one_cpu = sum(one.cpu.values())
    bound = own + busiest
    equal = one.ok and two.ok and same_frames(work / "out1", work / "out2")
    return (
        f"{one.wall:6.1f} s ({one_cpu:5.1f} cpu, {max(one.rss.values(), default=0):5.0f} MB) | "
        f"{two.wall:6.1f} s (coordinator {own:4.1f} cpu, others {' + '.join(f'{w:.1f}' for w in workers)}; "
        f"largest {max(two.rss.values(), default=0):5.0f} MB) | wall 2/1 {two.wall / one.wall:5.2f} | "
        f"cpu bound 2/1 {bound / one_cpu:5.2f} (+ server {(bound + server) / one_cpu:4.2f}) | "
        f"frames {'identical' if equal else 'DIFFER'}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--copies", type=int, default=500, help="copies of the whole-history corpus (500)")
    parser.add_argument("--runs", type=int, default=30, help="copies of the bundled agent runs (30)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each pair; the fastest is kept")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a command may run (600)")
    add_revisions(parser)
    args = parser.parse_args(argv)
    revisions = revisions_of(args)
    work = Path(tempfile.mkdtemp(prefix="jobs-cli-"))
    try:
        history, runs = work / "history", work / "runs"
        files = write_corpus(history, args.copies)
        agent = write_agent_runs(runs, args.runs)
        size = sum(f.stat().st_size for f in files) / 1e6
        runs_size = sum(f.stat().st_size for f in agent) / 1e6
        cases = [
            (f"whole history {args.copies}x ({len(files)} files, {size:.0f} MB), default view", history, None),
            (f"whole history {args.copies}x, --view simulated", history, "simulated"),
            (f"agent runs {args.runs}x ({len(agent)} files, {runs_size:.0f} MB), --view simulated", runs, "simulated"),
        ]  # fmt: skip
        for path in revisions.values():  # an installed package has its bytecode: no run compiles it
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(path) / "promptkit")], check=False,
                           stdout=subprocess.DEVNULL)  # fmt: skip
        print(f"promptkit analyze DIR --jobs 1 | --jobs 2 (os.cpu_count() = {os.cpu_count()}; "
              f"load average {os.getloadavg()[0]:.1f} at the start)")  # fmt: skip
        for title, folder, view in cases:
            print(f"\n{title}")
            for label, path in revisions.items():
                line = _pair(folder, work, view, str(Path(path).resolve()), args.repeat, args.timeout)
                print(f"  [{label}] {line}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
