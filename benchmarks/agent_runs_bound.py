"""The longest real agent runs: ``promptkit analyze`` as a user types it next to the lower bound.

Picks the ``--count`` (default 20) longest mini-swe-agent runs (``*.traj.json``, by their number of
calls: assistant messages) under ``--logs`` (default ``/work/shared/real-logs``, the real DeepSeek and
Gemini runs; ``fixtures/real-logs`` holds a bundled few), copies them into a temporary folder and prints,
side by side in one run:

- **the command** ``python -m promptkit analyze DIR --no-plots --no-html -q`` with ``--tokenizer
  cl100k_base`` (``--tokenizer``; left out, with a line saying so, for a revision whose ``analyze`` has
  no such option) in a fresh child: wall, CPU (user + system) and peak RSS (``os.wait4``), for every
  revision given (``--revision LABEL=PATH``: the ``PYTHONPATH`` of its checkout; default: this one);
- **the lower bound** (:mod:`bounds`, in a fresh child of this checkout, CPU clock): parse every file
  as JSON, load the tokenizer and the render models, render every request, encode each unique text
  piece once; printed without and with the interpreter start any command pays (the CPU of
  ``python -c pass`` with the revision's ``PYTHONPATH``);
- **the ratios** command CPU / bound, / (bound + start), and / (render + encode + start): the bound
  without the parse and the loading.

``--copies N`` (N > 1) adds N-1 copies of the runs, every message text prefixed with its copy number,
for a corpus of more calls than the runs at hand (no text piece is shared between copies, so neither
the bound nor the analysis encodes one once for all of them).

Each revision's ``promptkit`` is compiled to bytecode first (``compileall``), as an installed package
has it. Each child runs ``--repeat`` times (default 3), taking turns; each is reported by its least CPU. The
files each revision wrote (``requests.csv``, ``requests.parquet``, ``summary.txt``, ...) are compared
with the first revision's, byte for byte.

    python benchmarks/agent_runs_bound.py [--logs DIR] [--count 20] [--copies 1] [--repeat 3] \\
        [--revision before=/tmp/base --revision after=.]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from whole_history import ROOT, Measured, add_revisions, analyze_argv, revisions_of, run_child

DEFAULT_LOGS = Path("/work/shared/real-logs")


def run_calls(path: Path) -> int:
    """The number of calls of a mini-swe-agent trajectory (its assistant messages); 0 when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    messages = data.get("messages") if isinstance(data, dict) else None
    if not isinstance(messages, list):
        return 0
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")


def longest_runs(folder: Path, count: int) -> list[tuple[Path, int]]:
    """The ``count`` runs under ``folder`` with the most calls (path, calls), longest first (ties by path)."""
    runs = [(p, run_calls(p)) for p in sorted(folder.rglob("*.traj.json"))]
    runs = [(p, n) for p, n in runs if n > 0]
    runs.sort(key=lambda run: (-run[1], str(run[0])))
    return runs[:count]


def _marked(messages: list[Any], copy: int) -> None:
    """Prefix every text of ``messages`` (a string content or a text part's) with ``[copy N]``."""
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            message["content"] = f"[copy {copy}] {content}"
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    part["text"] = f"[copy {copy}] {part['text']}"


def copy_runs(runs: Sequence[tuple[Path, int]], folder: Path, into: Path, copies: int = 1) -> None:
    """Copy ``runs`` (found under ``folder``) into ``into``, keeping their paths relative to ``folder``;
    ``copies`` > 1: also copies 1 .. N-1 of each (``copyN-NAME``: a session of its own), every message
    text prefixed with ``[copy N]`` so that no text piece is shared between copies (nor encoded once for
    all of them)."""
    for path, _ in runs:
        target = into / path.relative_to(folder)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        for copy in range(1, copies):
            data = json.loads(path.read_text(encoding="utf-8"))
            _marked(data["messages"], copy)
            target = into / path.relative_to(folder).with_name(f"copy{copy}-{path.name}")  # its own session
            target.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")


def has_tokenizer_option(pythonpath: str) -> bool:
    """Whether the revision's ``promptkit analyze`` takes ``--tokenizer``."""
    proc = subprocess.run(
        [sys.executable, "-m", "promptkit", "analyze", "--help"],
        env={**os.environ, "PYTHONPATH": pythonpath}, cwd=tempfile.gettempdir(),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return "--tokenizer" in proc.stdout


def compile_bytecode(pythonpath: str) -> None:
    """Compile the revision's ``promptkit`` to bytecode, as an installed package has it (with
    ``PYTHONDONTWRITEBYTECODE`` set, every command would compile its sources again)."""
    package = Path(pythonpath) / "promptkit"
    if package.is_dir():
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=False)


def bound_child(folder: Path, tokenizer: str) -> dict[str, float]:
    """The lower bound's phases on ``folder`` (:func:`bounds.bound_phases`), in a fresh child of this checkout."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bounds.py"), str(folder), "--tokenizer", tokenizer],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tempfile.gettempdir(),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    phases: dict[str, float] = json.loads(proc.stdout)
    return phases


def least(runs: Sequence[Measured]) -> Measured:
    """The run with the least CPU (a run past the timeout, when every one was)."""
    done = [m for m in runs if m.cpu is not None]
    return min(done, key=lambda m: m.cpu or 0.0) if done else runs[0]


def same_files(a: Path, b: Path) -> str:
    """``identical`` when folders ``a`` and ``b`` hold the same files with the same bytes, else which differ."""
    names = sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()})
    differ = [n for n in names if not ((a / n).is_file() and (b / n).is_file()
                                       and (a / n).read_bytes() == (b / n).read_bytes())]  # fmt: skip
    return "identical" if not differ else "differ: " + ", ".join(differ)


def measure(
    folder: Path, work: Path, revisions: dict[str, str], tokenizer: str, repeat: int, timeout: float
) -> tuple[dict[str, Measured], dict[str, Measured], dict[str, float], dict[str, bool]]:
    """Each revision's command and interpreter start, and the bound, ``repeat`` times taking turns."""
    for path in {*revisions.values(), str(ROOT)}:
        compile_bytecode(path)
    options = {label: has_tokenizer_option(path) for label, path in revisions.items()}
    commands: dict[str, list[Measured]] = {label: [] for label in revisions}
    starts: dict[str, list[Measured]] = {label: [] for label in revisions}
    bounds: list[dict[str, float]] = []
    for _ in range(max(1, repeat)):
        for label, path in revisions.items():
            argv = analyze_argv(folder, work / f"out-{label}")
            argv += ["--tokenizer", tokenizer] if options[label] else []
            commands[label].append(run_child(argv, path, timeout))
            starts[label].append(run_child([sys.executable, "-c", "pass"], path, timeout))
        bounds.append(bound_child(folder, tokenizer))
    best = {key: min(b[key] for b in bounds) for key in bounds[0]}
    return (
        {label: least(runs) for label, runs in commands.items()},
        {label: least(runs) for label, runs in starts.items()},
        best,
        options,
    )


def report(
    runs: Sequence[tuple[Path, int]], copies: int, folder: Path, work: Path, revisions: dict[str, str],
    tokenizer: str, repeat: int, timeout: float,
) -> None:  # fmt: skip
    """Measure (:func:`measure`) and print the table."""
    commands, starts, bound, options = measure(folder, work, revisions, tokenizer, repeat, timeout)
    calls = sum(n for _, n in runs) * copies
    copied = f" x {copies} copies" if copies > 1 else ""
    print(f"{len(runs)} longest runs{copied} ({calls} calls, {bound['requests']:.0f} requests read, "
          f"{bound['pieces']:.0f} unique pieces, {bound['tokens']:.0f} tokens in them); "
          f"least CPU of {max(1, repeat)} runs each")  # fmt: skip
    core = bound["render"] + bound["encode"]
    required = bound["parse"] + bound["load"] + core
    print(f"\nlower bound ({tokenizer}, CPU): parse {bound['parse']:.3f} s + load tokenizer and renders "
          f"{bound['load']:.3f} s + render every request {bound['render']:.3f} s + encode each unique piece "
          f"once {bound['encode']:.3f} s = {required:.3f} s (render + encode alone {core:.3f} s; "
          f"promptkit's reader, not in the bound: {bound['read']:.3f} s)")  # fmt: skip
    header = ["revision", "tokenizer", "command: wall (cpu) peak RSS", "start (cpu)", "bound + start",
              "cpu / bound", "cpu / (bound + start)", "cpu / (render + encode + start)", "files"]  # fmt: skip
    widths = [10, 26, 30, 12, 14, 12, 22, 31, 30]
    print()
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    first = next(iter(revisions))
    for label in revisions:
        m, start = commands[label], starts[label].cpu or 0.0
        cpu = m.cpu or float("nan")
        flag = "" if m.ok else " (failed)"
        row = [
            label, f"{tokenizer} (--tokenizer)" if options[label] else "provider's (no option)",
            f"{m.wall or float('nan'):.2f} s ({cpu:.2f}) {m.rss_mb or 0:.0f} MB{flag}", f"{start:.3f} s",
            f"{required + start:.3f} s", f"{cpu / required:.2f}x", f"{cpu / (required + start):.2f}x",
            f"{cpu / (core + start):.2f}x", "-" if label == first else same_files(work / f"out-{first}", work / f"out-{label}"),
        ]  # fmt: skip
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument(
        "--logs", type=Path, default=DEFAULT_LOGS, help=f"runs to pick from (default {DEFAULT_LOGS})"
    )
    parser.add_argument("--count", type=int, default=20, help="how many of the longest runs (default 20)")
    parser.add_argument("--tokenizer", default="cl100k_base", help="tokenizer (default cl100k_base)")
    parser.add_argument(
        "--copies", type=int, default=1,
        help="N > 1: also N-1 copies of the runs, each message text prefixed with its copy number (more "
        "calls than the runs at hand, no piece shared between copies)",
    )  # fmt: skip
    parser.add_argument("--repeat", type=int, default=3, help="runs of each child (the least CPU counts)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a child may run (default 600)")
    add_revisions(parser)
    args = parser.parse_args(argv)
    if not args.logs.is_dir():
        print(f"{args.logs}: no such folder; skipped (give --logs, e.g. fixtures/real-logs)")
        return
    runs = longest_runs(args.logs, args.count)
    if not runs:
        print(f"{args.logs}: no mini-swe-agent run (*.traj.json) found; skipped")
        return
    work = Path(tempfile.mkdtemp(prefix="agent-runs-bound-"))
    try:
        folder = work / "runs"
        copy_runs(runs, args.logs, folder, args.copies)
        report(runs, args.copies, folder, work, revisions_of(args), args.tokenizer, args.repeat, args.timeout)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
