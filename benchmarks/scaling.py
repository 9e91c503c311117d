"""Scaling of the analysis over workers, measured side by side in one run, plus the figures behind the
100M-request estimate in ``docs/how-to/cluster.md``.

On the corpus of ``benchmarks/corpus.py`` (generated into a temporary directory unless ``--corpus``)
it times :func:`promptkit.cache.analyze` for each view with: the local engine in one process
(``jobs=1``), a local process pool (``jobs=2``), and a ``dask.distributed`` LocalCluster on 127.0.0.1
with 1 and with 2 worker processes (the cluster is started before the clock starts). Every result is
checked equal to ``jobs=1``. It then prints:

- the speed-up of each configuration over ``jobs=1``;
- prompt tokens analyzed per second per core (consecutive view, ``jobs=1``) and new tokens per second
  (each session's tokens counted once: the work incremental tokenization really does);
- the bytes phase 1 of the simulated view ships per request (per-session token delta streams, pickled)
  next to full token arrays (8 bytes a token) and to Mooncake-style chained block hashes (16 bytes per
  512-token block).

    python benchmarks/scaling.py [--provider openai --tokenizer cl100k_base] [--corpus DIR]
                                 [--sessions 20] [--calls 130]
"""

from __future__ import annotations

import argparse
import logging
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import write_corpus
from polars.testing import assert_frame_equal

from promptkit.cache.engine import _session_chunks, _Spec, _tokenize_chunk, analyze
from promptkit.formats import read_logs


def _timed(corpus: Path, **kwargs: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    result = analyze(corpus, **kwargs)
    return time.perf_counter() - t, result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--provider", default="openai")
    parser.add_argument("--tokenizer", default="cl100k_base")
    parser.add_argument("--corpus", type=Path, default=None)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--calls", type=int, default=130)
    args = parser.parse_args(argv)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
    )  # for worker processes
    from distributed import Client, LocalCluster

    options = {"provider": args.provider, "tokenizer": args.tokenizer}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = args.corpus
        if corpus is None:
            corpus = Path(tmp) / "corpus"
            write_corpus(corpus, sessions=args.sessions, calls=args.calls)
        loaded = read_logs(corpus)
        print(f"corpus: {len(loaded.records):,} requests in {args.sessions} sessions; {os.cpu_count()} cores")
        clusters = {}
        for n in (1, 2):
            cluster = LocalCluster(
                n_workers=n,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
                silence_logs=logging.ERROR,
            )
            clusters[n] = (cluster, Client(cluster))
        rows = []
        try:
            for view in ("consecutive", "simulated"):
                base_time, base = _timed(corpus, view=view, **options)
                rows.append((view, "local, jobs=1", base_time))
                runs: list[tuple[str, dict[str, Any]]] = [
                    ("local, jobs=2", {"jobs": 2}),
                    ("dask, 1 worker", {"engine": "dask", "client": clusters[1][1]}),
                    ("dask, 2 workers", {"engine": "dask", "client": clusters[2][1]}),
                ]
                for label, extra in runs:
                    elapsed, result = _timed(corpus, view=view, **options, **extra)
                    assert_frame_equal(base.requests, result.requests)
                    assert_frame_equal(base.composition, result.composition)
                    assert base.notes == result.notes
                    rows.append((view, label, elapsed))
                if view == "consecutive":
                    prompt_tokens = int(base.requests["prompt_tokens"].sum())
                    new_tokens = int(base.requests.group_by("session").agg(
                        __import__("polars").col("prompt_tokens").max()
                    )["prompt_tokens"].sum())
                    per_core = (prompt_tokens / base_time, new_tokens / base_time)
        finally:
            for cluster, client in clusters.values():
                client.close()
                cluster.close()
        print(f"\n{'view':<12} {'engine':<16} {'seconds':>8} {'speed-up':>9}")
        firsts = {v: t for v, label, t in rows if label == "local, jobs=1"}
        for view, label, elapsed in rows:
            print(f"{view:<12} {label:<16} {elapsed:>8.1f} {firsts[view] / elapsed:>8.2f}x")
        print(f"\nconsecutive, jobs=1: {per_core[0]:,.0f} prompt tokens/s per core; "
              f"{per_core[1]:,.0f} new tokens/s per core (each session's final prompt counted once)")

        items = list(enumerate(loaded.records))
        spec = _Spec(args.provider, args.tokenizer, None, None, "simulated", True)
        shipped = 0
        tokens = 0
        blocks = 0
        for chunk in _session_chunks(items, 8):
            part = _tokenize_chunk(spec, chunk)
            shipped += len(pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL))
            for delta, _ in part.values():
                if not isinstance(delta, str):
                    tokens += delta.shared + len(delta.tail)
                    blocks += -(-delta.prompt_len // 512)
        n = len(items)
        print(
            f"simulated phase 1 ships {shipped / n:,.0f} bytes/request as token deltas; full token arrays "
            f"would be {8 * tokens / n:,.0f} bytes/request, Mooncake block hashes (16 B per 512 tokens) "
            f"{16 * blocks / n:,.0f} bytes/request; {tokens / n:,.0f} tokens/request on average"
        )


if __name__ == "__main__":
    main()
