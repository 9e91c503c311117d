"""The default command on N× copies of the bundled Claude Code project: the simulated view streamed in
time order (the timeline plan) next to the loaded one, time and peak memory, side by side in one run.

For each N of ``--copies`` it builds the corpus (``benchmarks/claude_code_corpus.py``: fresh ids,
copies ``--gap-hours`` apart so they never share a live cache entry) and runs, each in a fresh
process, ``python -m promptkit analyze DIR --no-plots --no-html -q --out TMP`` (the default view:
simulated for Claude Code) with:

- **timeline**: ``TIMELINE_MIN_BYTES`` set to 0 (always streamed);
- **loaded**: ``TIMELINE_MIN_BYTES`` set past the corpus (every record loaded first);
- with ``--jobs``, also **jobs1** / **jobsK**: the command with ``--jobs 1`` and ``--jobs K`` as a user
  types it (``--jobs`` > 1 runs the file plan; ``--jobs 1`` on a corpus over the threshold streams).

It prints each run's wall time, CPU time (user + system of the process and its workers) and peak RSS
(the largest process), the JSON-parse bound of the same files (every line parsed once with ``json``)
and the ratios.

- with ``--before DIR``, also **before**: the default command of another checkout (``git archive``
  of the code before this plan, unpacked in DIR).

    python benchmarks/stream_simulated.py [--copies 5,20,500,2000] [--gap-hours 3] [--jobs 2] [--before DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from claude_code_corpus import build

ROOT = Path(__file__).resolve().parent.parent

_RUN = """
import json, resource, sys
import promptkit.analysis.api as api
api.TIMELINE_MIN_BYTES = int(sys.argv[1])
from promptkit.cli import main
code = main(sys.argv[3:])
me, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = me.ru_utime + me.ru_stime + workers.ru_utime + workers.ru_stime
with open(sys.argv[2], "w") as f:
    json.dump({"cpu": cpu, "rss": max(me.ru_maxrss, workers.ru_maxrss) / 1024}, f)
raise SystemExit(code)
"""


def run(corpus: Path, threshold: int, extra: list[str], root: Path = ROOT) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (with workers) and peak RSS (MB, the largest process) of one command
    (``root``: the checkout whose ``promptkit`` runs)."""
    with tempfile.TemporaryDirectory() as out:
        figures = Path(out) / "figures.json"
        args = [sys.executable, "-c", _RUN, str(threshold), str(figures), "analyze", str(corpus)]
        args += ["--no-plots", "--no-html", "-q", "--out", out, *extra]
        env = {**os.environ, "PYTHONPATH": str(root)}
        t = time.perf_counter()
        # cwd: ``python -c`` puts the working directory first on sys.path, before PYTHONPATH
        code = subprocess.run(args, env=env, cwd=root, stdout=subprocess.DEVNULL, check=False).returncode
        wall = time.perf_counter() - t
        if code != 0:
            raise SystemExit(f"{' '.join(args)} exited {code}")
        got = json.loads(figures.read_text())
    return wall, got["cpu"], got["rss"]


def parse_bound(corpus: Path) -> float:
    """Seconds to parse every line of the corpus' files with ``json``."""
    t = time.perf_counter()
    for path in sorted(corpus.rglob("*.jsonl")):
        with path.open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    json.loads(line)
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", default="5,20,500,2000")
    parser.add_argument("--gap-hours", type=float, default=3.0)
    parser.add_argument("--jobs", type=int, default=0, help="also compare --jobs 1 with --jobs K")
    parser.add_argument(
        "--before",
        type=Path,
        help="also run the default command of this checkout (e.g. a `git archive` of main)",
    )
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(c) for c in args.copies.split(",")):
            corpus = Path(tmp) / f"x{n}"
            size = build(corpus, n, args.gap_hours)
            bound = parse_bound(corpus)
            modes = {"timeline": (0, []), "loaded": (size * 10 + 1, [])}
            if args.jobs:
                modes[f"jobs{args.jobs}"] = (size * 10 + 1, ["--jobs", str(args.jobs)])
                modes["jobs1"] = (size * 10 + 1, ["--jobs", "1"])
            if args.before is not None:
                modes["before"] = (0, [])
            for mode, (threshold, extra) in modes.items():
                root = args.before if mode == "before" else ROOT
                wall, cpu, rss = run(corpus, threshold, extra, root)
                rows.append((n, size, mode, wall, cpu, rss, bound))
                print(
                    f"N={n:<5} {size / 1e6:7.1f} MB  {mode:8}  wall {wall:6.1f} s  cpu {cpu:6.1f} s  "
                    f"peak {rss:7.0f} MB  json bound {bound:5.2f} s  wall/bound {wall / bound:6.1f}",
                    flush=True,
                )
    print()
    by = {(n, mode): (wall, cpu, rss) for n, _, mode, wall, cpu, rss, _ in rows}
    sizes = sorted({n for n, *_ in rows})
    for n in sizes:
        t, lo = by[(n, "timeline")], by[(n, "loaded")]
        print(
            f"N={n}: timeline / loaded: wall {t[0] / lo[0]:.2f}x, cpu {t[1] / lo[1]:.2f}x, peak {t[2] / lo[2]:.2f}x"
        )
        if args.before is not None:
            b = by[(n, "before")]
            print(
                f"N={n}: timeline / before: wall {t[0] / b[0]:.2f}x, cpu {t[1] / b[1]:.2f}x, peak {t[2] / b[2]:.2f}x"
            )
        if args.jobs:
            k, one = by[(n, f"jobs{args.jobs}")], by[(n, "jobs1")]
            print(
                f"N={n}: --jobs {args.jobs} / --jobs 1 (loaded): wall {k[0] / one[0]:.2f}x, peak {k[2] / one[2]:.2f}x"
            )
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]
        for mode in ("timeline", "loaded", *(("before",) if args.before is not None else ())):
            a, b = by[(small, mode)], by[(large, mode)]
            print(
                f"{mode}: N={large} / N={small}: peak {b[2] / a[2]:.2f}x, "
                f"wall per copy {b[0] / large / (a[0] / small):.2f}x"
            )


if __name__ == "__main__":
    main()
