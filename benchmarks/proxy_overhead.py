"""What the recording proxy adds: latency (p50 / p99) and throughput, direct vs through the proxy, side by side.

The fake upstream of the tests (``tests/proxy/fake_upstream.py``, Anthropic Messages and OpenAI Chat
Completions, whole and streamed answers) and the proxy (recording to a temporary JSONL log; live
predictions off unless ``--predict``) each run in a process of their own on 127.0.0.1; this process is
the client. For each kind of call:

- latency: ``--requests`` calls one after the other, directly and through the proxy, interleaved;
  the time until the whole answer is read; p50 and p99 of each and the added milliseconds;
- throughput: ``--requests`` calls with ``--concurrency`` in flight, directly and through the proxy;
  calls per second of each and the ratio.

    python benchmarks/proxy_overhead.py [--requests 300] [--concurrency 32] [--predict]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("anthropic whole", "/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 64, "system": "You are terse. " * 200,
                                         "messages": [{"role": "user", "content": "hi"}]}),
    ("anthropic stream", "/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": True,
                                          "system": "You are terse. " * 200, "messages": [{"role": "user", "content": "hi"}]}),
    ("chat whole", "/v1/chat/completions", {"model": "gpt-4o", "messages": [{"role": "system", "content": "You are terse. " * 200},
                                                                           {"role": "user", "content": "hi"}]}),
    ("chat stream", "/v1/chat/completions", {"model": "gpt-4o", "stream": True, "stream_options": {"include_usage": True},
                                            "messages": [{"role": "system", "content": "You are terse. " * 200},
                                                         {"role": "user", "content": "hi"}]}),
]  # fmt: skip


def _upstream(queue: Any) -> None:
    from tests.proxy.fake_upstream import fake_upstream

    async def main() -> None:
        async with fake_upstream() as up:
            queue.put(up.url)
            await asyncio.Event().wait()

    asyncio.run(main())


def _proxy(upstream: str, log: str, predict: bool, queue: Any) -> None:
    from promptkit.proxy import ProxyConfig, serve

    async def main() -> None:
        async with serve(ProxyConfig(upstream=upstream, port=0, log=Path(log), predict=predict)) as proxy:
            queue.put(proxy.url)
            await asyncio.Event().wait()

    asyncio.run(main())


async def _call(session: aiohttp.ClientSession, url: str, body: bytes) -> float:
    t0 = time.perf_counter()
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as r:
        await r.read()
        if r.status != 200:
            raise RuntimeError(f"{url}: HTTP {r.status}")
    return time.perf_counter() - t0


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


async def _bench(direct: str, proxied: str, n: int, concurrency: int) -> None:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as s:
        print(f"{'call':<18}{'direct p50':>11}{'proxy p50':>11}{'added':>8}{'direct p99':>12}{'proxy p99':>11}"
              f"{'added':>8}   {'direct/s':>9}{'proxy/s':>9}{'ratio':>7}")  # fmt: skip
        for name, path, payload in CALLS:
            body = json.dumps(payload).encode()
            for _ in range(10):  # warm the connections
                await _call(s, direct + path, body)
                await _call(s, proxied + path, body)
            d: list[float] = []
            p: list[float] = []
            for _ in range(n):
                d.append(await _call(s, direct + path, body))
                p.append(await _call(s, proxied + path, body))
            rates = []
            for base in (direct, proxied):
                gate = asyncio.Semaphore(concurrency)

                async def one(
                    base: str = base, gate: asyncio.Semaphore = gate, path: str = path, body: bytes = body
                ) -> None:
                    async with gate:
                        await _call(s, base + path, body)

                t0 = time.perf_counter()
                await asyncio.gather(*(one() for _ in range(n)))
                rates.append(n / (time.perf_counter() - t0))
            d50, p50, d99, p99 = _pct(d, 0.5), _pct(p, 0.5), _pct(d, 0.99), _pct(p, 0.99)
            print(f"{name:<18}{d50:>9.2f}ms{p50:>9.2f}ms{p50 - d50:>6.2f}ms{d99:>10.2f}ms{p99:>9.2f}ms"
                  f"{p99 - d99:>6.2f}ms   {rates[0]:>9.0f}{rates[1]:>9.0f}{rates[1] / rates[0]:>7.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--requests", type=int, default=300, help="calls per measurement (default: %(default)s)"
    )
    parser.add_argument(
        "--concurrency", type=int, default=32, help="calls in flight for throughput (default: %(default)s)"
    )
    parser.add_argument("--predict", action="store_true", help="run the live predictions in the proxy too")
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "proxy.jsonl"
        upstream = ctx.Process(target=_upstream, args=(queue,), daemon=True)
        upstream.start()
        up_url = queue.get(timeout=60)
        proxy = ctx.Process(target=_proxy, args=(up_url, str(log), args.predict, queue), daemon=True)
        proxy.start()
        proxy_url = queue.get(timeout=60)
        try:
            print(f"fake upstream {up_url}, proxy {proxy_url} (recording to a temporary log; "
                  f"predictions {'on' if args.predict else 'off'}); {args.requests} calls per cell, "
                  f"{args.concurrency} in flight for throughput\n")  # fmt: skip
            asyncio.run(_bench(up_url, proxy_url, args.requests, args.concurrency))
            records = sum(1 for _ in log.open(encoding="utf-8"))
            print(f"\nrecords written by the proxy: {records}")
        finally:
            proxy.terminate()
            upstream.terminate()
            proxy.join(10)
            upstream.join(10)


if __name__ == "__main__":
    main()
