"""The same commands timed on two revisions of promptkit, side by side in one run: did a change slow it down?

It checks out ``--base`` (a commit, default the one before the package split of the third stage) into a
temporary git worktree, and for each workload runs the command once with that checkout first on
``PYTHONPATH`` and once with this one, taking turns ``--repeat`` times so that both meet the same moments of
a busy machine. Each side is reported by its fastest run (the run least disturbed by the rest of the
machine, as ``timeit`` advises), and the ratio *this / base* is printed: below 1.0 is faster, above is
slower.

The workloads are whole commands, so that they mean the same on both revisions whatever moved inside:

- ``import``: ``import promptkit`` (what every user pays);
- ``analyze``: ``promptkit analyze CORPUS --no-plots --no-html --quiet`` on the corpus of
  ``benchmarks/corpus.py`` (loading, tokenizing, the cache model, the causes, the frames);
- ``analyze-simulated``: the same with ``--view simulated``;
- ``analyze-jobs2``: ``analyze`` with ``--jobs 2 --view simulated`` (the file plan: stage 1 on two
  workers, the replay in the coordinator);
- ``report``: ``promptkit analyze`` on the bundled log with plots and the HTML page.

Both sides write the frames of ``analyze`` into separate folders and the script checks that
``requests.csv`` is byte-identical between them, so the comparison is of the same work.

    python benchmarks/compare_revisions.py [--base REV] [--sessions 20] [--calls 130] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import write_corpus

HERE = Path(__file__).resolve().parent.parent
#: the last commit before ``promptkit/cache/`` was split into analysis, tokens and report
DEFAULT_BASE = "9087b4c^"


def _run(root: Path, args: list[str], cwd: Path) -> float:
    """Seconds one command takes with ``root`` first on the import path (raises on a failed run)."""
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONWARNINGS="ignore")
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{root}: {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return elapsed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--base", default=DEFAULT_BASE, help=f"revision to compare with (default {DEFAULT_BASE})"
    )
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--calls", type=int, default=130)
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per side and workload (the fastest counts)"
    )
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        base = tmp / "base"
        subprocess.run(
            ["git", "-C", str(HERE), "worktree", "add", "--detach", "-q", str(base), args.base], check=True
        )
        try:
            corpus = tmp / "corpus"
            write_corpus(corpus, sessions=args.sessions, calls=args.calls)
            sides = {"base": base, "this": HERE}
            workloads = {
                "import": lambda out: ["-c", "import promptkit"],
                "analyze": lambda out: [
                    "-m",
                    "promptkit",
                    "analyze",
                    str(corpus),
                    "--provider",
                    "deepseek",
                    "--no-plots",
                    "--no-html",
                    "--quiet",
                    "--out",
                    str(out),
                ],
                "analyze-simulated": lambda out: [
                    "-m",
                    "promptkit",
                    "analyze",
                    str(corpus),
                    "--provider",
                    "deepseek",
                    "--view",
                    "simulated",
                    "--no-plots",
                    "--no-html",
                    "--quiet",
                    "--out",
                    str(out),
                ],
                "analyze-jobs2": lambda out: [
                    "-m",
                    "promptkit",
                    "analyze",
                    str(corpus),
                    "--provider",
                    "deepseek",
                    "--view",
                    "simulated",
                    "--jobs",
                    "2",
                    "--no-plots",
                    "--no-html",
                    "--quiet",
                    "--out",
                    str(out),
                ],
                "report": lambda out: ["-m", "promptkit", "analyze", "--quiet", "--out", str(out)],
            }
            best: dict[tuple[str, str], float] = {}
            for i in range(max(1, args.repeat)):
                for work, command in workloads.items():
                    order = ("base", "this") if i % 2 == 0 else ("this", "base")
                    for side in order:
                        out = tmp / f"out-{side}-{work}"
                        seconds = _run(sides[side], command(out), cwd=tmp)
                        key = (work, side)
                        best[key] = min(best.get(key, seconds), seconds)
            for work in ("analyze", "analyze-simulated", "analyze-jobs2"):
                a = (tmp / f"out-base-{work}" / "requests.csv").read_bytes()
                b = (tmp / f"out-this-{work}" / "requests.csv").read_bytes()
                same = "identical" if a == b else "DIFFERENT"
                print(f"{work}: requests.csv {same} on both revisions")
            print(
                f"\nbase = {args.base}, this = working tree; fastest of {args.repeat} runs each, taking turns\n"
            )
            print(f"{'workload':<20} {'base s':>8} {'this s':>8} {'this/base':>10}")
            for work in workloads:
                b, t = best[(work, "base")], best[(work, "this")]
                print(f"{work:<20} {b:>8.3f} {t:>8.3f} {t / b:>10.2f}")
        finally:
            subprocess.run(["git", "-C", str(HERE), "worktree", "remove", "--force", str(base)], check=False)


if __name__ == "__main__":
    main()
