"""Scaling of the analysis over workers: wall time, speed-up, CPU time, the coordinator's share of it
and the peak memory of the coordinator and of a worker, for each job count, side by side.

On the corpus of ``benchmarks/corpus.py`` (generated into a temporary directory unless ``--corpus``)
it runs :func:`promptkit.analysis.analyze` for each view in a fresh process per configuration (so each
one's peak memory is its own):

- ``jobs=1``: the whole analysis in one process (the reference for speed-up and memory);
- ``pool N``: the file plan (:mod:`promptkit.analysis.plans.files`) on a local pool of N worker processes,
  for each N of ``--jobs`` (``pool 1`` measures the coordinator's share with one worker: the part of
  the work that more workers cannot divide);
- ``dask N`` (``--dask``): the same plan on a ``dask.distributed`` LocalCluster of N workers on
  127.0.0.1, started and warmed before the clock starts.

Start-up is left out of every configuration alike and shown on its own: the measuring process imports
the analysis and loads the log-format and provider registries before the clock starts, as a worker does
(:func:`promptkit.analysis.executors.warm_worker`), and ``jobs=1``, which tokenizes itself, loads the
tokenizer there too (its ``start s``); a pool's workers are forked before it (from
a fork server that imported the same modules and loaded the named tokenizer), and a Dask cluster's
workers are started and warmed before it (each imports the analysis and loads the tokenizer:
:func:`promptkit.analysis.executors.warm_worker`). The ``start s`` column is that start-up of the
workers, which the command line overlaps with its own imports (it starts the fork server as soon as it
has read ``--jobs``: :func:`promptkit.analysis.executors.start_fork_server`) and a reused pool or cluster
pays once. CPU time is user + system time spent inside the clock: the coordinator's (``RUSAGE_SELF``)
and the workers' (each pool worker's and the fork server's from ``/proc`` before and after; for Dask,
each worker's own ``getrusage`` before and after). Peak memory is the maximum resident set
(``ru_maxrss``): the coordinator's, and the largest worker's. Every result is checked equal to
``jobs=1`` (requests and composition frames, notes). Each configuration runs ``--runs`` times; the
table shows the fastest run (others load this machine too).

    python benchmarks/scaling.py [--jobs 1,2,4] [--views consecutive,simulated,default] [--dask]
                                 [--provider openai --tokenizer cl100k_base] [--corpus DIR]
                                 [--sessions 20] [--calls 130] [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[1]


def _cpu(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


def _digest(result: Any) -> str:
    """A fingerprint of a result's frames and notes, to check every configuration against ``jobs=1``."""
    import hashlib

    h = hashlib.sha256()
    for frame in (result.requests, result.composition, result.problems):
        h.update(str(frame.schema).encode())
        h.update(frame.hash_rows().to_numpy().tobytes())
    h.update(repr(result.notes).encode())
    return h.hexdigest()


def _proc(pid: int) -> tuple[float, int]:
    """CPU seconds (user + system) and peak RSS (kB) of a live process, from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    status = Path(f"/proc/{pid}/status").read_text()
    peak = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    return cpu, peak


def _pool_usage(pool: Any) -> dict[str, tuple[float, int]] | None:
    """CPU seconds and peak RSS (kB) of each of a local pool's workers and of the fork server they
    came from (``"server"``), read while the pool is up (forked workers are not this process'
    children: ``RUSAGE_CHILDREN`` does not see them). None without ``/proc``."""
    import multiprocessing.forkserver as fs

    if not Path("/proc/self/stat").exists():
        return None
    usage = {str(pid): _proc(pid) for pid in pool._pool._processes}
    server = getattr(fs._forkserver, "_forkserver_pid", None)
    if server:
        usage["server"] = _proc(server)
    return usage


def run_one(corpus: Path, view: str, config: str, options: dict[str, Any]) -> dict[str, Any]:
    """One configuration in this (fresh) process: ``jobs=1``, ``pool N`` or ``dask N``."""
    import numpy  # noqa: F401  # imported before the clock in every configuration: start-up is not measured
    import polars  # noqa: F401

    from promptkit.analysis.plans.transport import maps_arrow

    if maps_arrow():  # a pool's coordinator maps the workers' Arrow files with it (about 20 ms to import)
        import pyarrow.ipc  # noqa: F401

    from promptkit.analysis.api import analyze, analyze_records
    from promptkit.analysis.executors import DaskExecutor, ProcessPool, named_tokenizers, warm_worker
    from promptkit.analysis.plans.files import analyze_files
    from promptkit.formats import read_logs

    kind, _, n = config.partition(" ")
    named = named_tokenizers(options["tokenizer"], options["provider"])
    # start-up, left out alike: this process imports the analysis and loads the registries as a worker
    # does, and the tokenizer where it tokenizes itself (jobs 1; a coordinator never loads one)
    t = time.perf_counter()
    warm_worker(named if kind == "jobs" else ())
    own_start = time.perf_counter() - t
    workers_before: dict[str, Any] = {}
    client = cluster = None
    cluster_start = 0.0
    dask: Any = None
    if kind == "dask":
        from distributed import Client, LocalCluster

        t = time.perf_counter()
        cluster = LocalCluster(
            n_workers=int(n),
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        client = Client(cluster)
        client.wait_for_workers(int(n))
        # each worker imports the analysis and loads the tokenizer, as a pool's fork server does
        dask = DaskExecutor(client, tokenizers=named)
        cluster_start = time.perf_counter() - t
        workers_before = client.run(lambda: _cpu(resource.getrusage(resource.RUSAGE_SELF)))
    startup = own_start if kind == "jobs" else 0.0
    pool = pool_before = None
    if kind == "pool":  # the workers forked and ready, as for Dask: start-up is shown on its own
        t = time.perf_counter()
        pool = ProcessPool(int(n), tokenizers=named)
        list(pool.map(time.sleep, [(0.2,)] * int(n)))  # each call in a worker of its own: all forked
        startup = time.perf_counter() - t - 0.2
        pool_before = _pool_usage(pool)
    elif client is not None:
        startup = cluster_start
    self0, children0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    if view == "default":  # no view given: the records' default (the path `promptkit analyze` takes)
        view = None
    if kind == "jobs":
        result = analyze(corpus, view=view, **options)
    else:
        executor = pool if pool is not None else dask
        try:
            result = analyze_files(corpus, executor=executor, view=view, **options)
            if result is None:  # a session spans files: the records plan
                result = analyze_records(
                    read_logs(corpus),
                    executor,
                    view=view,
                    progress=False,
                    render=None,
                    cache_model=None,
                    **options,
                )
            pool_usage = _pool_usage(executor) if kind == "pool" else None
        finally:
            executor.close()
    wall = time.perf_counter() - t
    self1, children1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    coordinator = _cpu(self1) - _cpu(self0)
    workers = _cpu(children1) - _cpu(children0)
    worker_rss = children1.ru_maxrss
    busiest = workers
    if kind == "pool" and pool_usage is not None and pool_before is not None:
        spent = {k: cpu - pool_before.get(k, (0.0, 0))[0] for k, (cpu, _) in pool_usage.items()}
        server = spent.pop("server", 0.0)
        workers = sum(spent.values()) + server
        busiest = max(spent.values()) + server
        worker_rss = max(peak for k, (_, peak) in pool_usage.items() if k != "server")
    if client is not None:
        after = client.run(lambda: _cpu(resource.getrusage(resource.RUSAGE_SELF)))
        workers = sum(after[w] - workers_before[w] for w in after)
        busiest = max(after[w] - workers_before[w] for w in after)
        worker_rss = max(client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss).values())
        client.close()
        assert cluster is not None
        cluster.close()
    return {
        "wall": wall,
        "startup": startup,
        "coordinator_cpu": coordinator,
        "worker_cpu": workers,
        "busiest_worker_cpu": busiest,
        "coordinator_rss_mb": self1.ru_maxrss / 1024,
        "worker_rss_mb": worker_rss / 1024 if kind != "jobs" else None,
        "digest": _digest(result),
        "requests": result.requests.height,
    }


def _measure(corpus: Path, view: str, config: str, args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run(
        [sys.executable, __file__, "--one", view, config, "--corpus", str(corpus),
         "--provider", args.provider, "--tokenizer", args.tokenizer],
        check=True, capture_output=True, text=True, env=env,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--provider", default="openai")
    parser.add_argument("--tokenizer", default="cl100k_base")
    parser.add_argument("--corpus", type=Path, default=None)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--calls", type=int, default=130)
    parser.add_argument("--jobs", default="1,2,4", help="worker counts, comma-separated")
    parser.add_argument(
        "--views", default="consecutive,simulated", help="comma-separated; `default`: no view given"
    )
    parser.add_argument("--dask", action="store_true", help="also run on a local Dask cluster")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--one", nargs=2, metavar=("VIEW", "CONFIG"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    options = {"provider": args.provider, "tokenizer": args.tokenizer}
    if args.one:
        print(json.dumps(run_one(args.corpus, args.one[0], args.one[1], options)))
        return
    from corpus import write_corpus

    jobs = [int(j) for j in args.jobs.split(",")]
    configs = (
        ["jobs 1"] + [f"pool {n}" for n in jobs] + ([f"dask {n}" for n in jobs if n > 1] if args.dask else [])
    )
    with tempfile.TemporaryDirectory() as tmp:
        corpus = args.corpus
        if corpus is None:
            corpus = Path(tmp) / "corpus"
            write_corpus(corpus, sessions=args.sessions, calls=args.calls)
        size = sum(f.stat().st_size for f in corpus.rglob("*") if f.is_file())
        print(f"corpus: {corpus} ({size / 1e6:,.0f} MB); {os.cpu_count()} cores; best of {args.runs} run(s)")
        header = (f"{'view':<12} {'run':<8} {'wall s':>7} {'speed-up':>8} {'start s':>7} {'CPU s':>7} "
                  f"{'coord. share':>12} {'share, all runs':>15} {'path s':>7} {'path speed-up':>13} {'coord. MB':>9} "
                  f"{'worker MB':>9}")  # fmt: skip
        print(header)
        for view in args.views.split(","):
            base: dict[str, Any] | None = None
            for config in configs:
                runs = [_measure(corpus, view, config, args) for _ in range(args.runs)]
                best = min(runs, key=lambda r: r["wall"])
                base = base or best
                assert all(r["digest"] == base["digest"] for r in runs), f"{view} {config}: results differ"
                print(_line(view, config, best, base, runs), flush=True)
        print(
            "start: start-up before the clock (jobs 1: its imports and tokenizer; a pool: its fork "
            "server imports and forks; Dask: the cluster starts and warms). CPU: coordinator + workers "
            "(user + system) inside the clock. path: the coordinator's CPU plus the busiest worker's, "
            "about the wall time with a free core per process; path speed-up: jobs 1's CPU over it. "
            "share, all runs: the lowest and the highest of the coordinator's share over the runs (a noisy "
            "machine moves it more than a change does)."
        )


def _share(run: dict[str, Any]) -> float:
    return float(run["coordinator_cpu"] / (run["coordinator_cpu"] + run["worker_cpu"]))


def _line(
    view: str, config: str, best: dict[str, Any], base: dict[str, Any], runs: list[dict[str, Any]]
) -> str:
    cpu = best["coordinator_cpu"] + best["worker_cpu"]
    one = config == "jobs 1"
    share = 1.0 if one else _share(best)
    shares = [_share(r) for r in runs]
    spread = "-" if one else f"{min(shares):.1%}-{max(shares):.1%}"
    path = cpu if one else best["coordinator_cpu"] + best["busiest_worker_cpu"]
    base_cpu = base["coordinator_cpu"] + base["worker_cpu"]
    worker = f"{best['worker_rss_mb']:>9,.0f}" if best["worker_rss_mb"] is not None else f"{'-':>9}"
    return (
        f"{view:<12} {config:<8} {best['wall']:>7.2f} {base['wall'] / best['wall']:>7.2f}x "
        f"{best['startup']:>7.2f} {cpu:>7.2f} "
        f"{share:>11.1%} {spread:>15} {path:>7.2f} {base_cpu / path:>12.2f}x {best['coordinator_rss_mb']:>9,.0f} {worker}"
    )


if __name__ == "__main__":
    main()
