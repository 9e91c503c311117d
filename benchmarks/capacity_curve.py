"""The whole LRU capacity curve in one pass vs one simulation at a single capacity, side by side.

Reads Mooncake traces (the bundled slice by default; pass the published traces, e.g.
``FAST25-release/traces/conversation_trace.jsonl`` and ``synthetic_trace.jsonl`` of kvcache-ai/Mooncake),
then times, in turns and best of ``--repeat``:

- the curve: :func:`promptkit.analysis.capacity.capacity_curve` at every power of two blocks and unbounded;
- one simulation: :func:`promptkit.analysis.trace.simulate_trace` at one capacity (``--capacity`` tokens,
  default 1M) and unbounded (the simulator's fastest case),

checks that the curve gives the simulated hit ratio at that capacity, and prints both times and the ratio
(goal: the curve costs less than twice one simulation). ``--sampling`` also prints the SHARDS error
(largest absolute error of the hit ratio over seeds 0-4) at several rates.

    python benchmarks/capacity_curve.py [TRACE ...] [--capacity 1048576] [--repeat 3] [--sampling]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from promptkit.analysis.capacity import capacity_curve
from promptkit.analysis.trace import TraceRecord, read_trace, simulate_trace, trace_hit_ratio

SLICE = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "mooncake-conversation-head.jsonl"


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, value = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def measure(trace: list[TraceRecord], capacity: int, repeat: int) -> dict[str, float]:
    """Times (seconds) of the curve and of single simulations, and the hit ratios they give."""
    blocks = capacity // 512
    curve_s, curve = _best(lambda: capacity_curve(trace), repeat)
    at = capacity_curve(trace, [capacity, None])
    bounded_s, bounded = _best(lambda: simulate_trace(trace, capacity_blocks=blocks), repeat)
    unbounded_s, unbounded = _best(lambda: simulate_trace(trace), repeat)
    assert abs(at["hit_ratio"][0] - (trace_hit_ratio(bounded) or 0.0)) < 1e-12
    assert abs(at["hit_ratio"][1] - (trace_hit_ratio(unbounded) or 0.0)) < 1e-12
    return {
        "curve_s": curve_s,
        "curve_points": curve.height,
        "bounded_s": bounded_s,
        "unbounded_s": unbounded_s,
        "hit_at_capacity": at["hit_ratio"][0],
        "hit_unbounded": at["hit_ratio"][1],
    }


def sampling_error(trace: list[TraceRecord], rates: list[float]) -> dict[float, float]:
    """Largest absolute error of the SHARDS hit ratio (seeds 0-4) at 1M, 4M, 16M, 64M tokens and unbounded."""
    caps: list[int | None] = [c * 2**20 for c in (1, 4, 16, 64)] + [None]
    exact = capacity_curve(trace, caps)["hit_ratio"].to_numpy()
    out = {}
    for rate in rates:
        errors = [
            np.abs(
                capacity_curve(trace, caps, sample_rate=rate, seed=s)["hit_ratio"].to_numpy() - exact
            ).max()
            for s in range(5)
        ]
        out[rate] = float(max(errors))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("traces", nargs="*", type=Path, default=[SLICE])
    parser.add_argument("--capacity", type=int, default=2**20, help="tokens (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sampling", action="store_true", help="also print the SHARDS error")
    args = parser.parse_args()
    for path in args.traces:
        trace = read_trace(path)
        reads = sum(len(r.hash_ids) for r in trace)
        m = measure(trace, args.capacity, args.repeat)
        print(f"{path.name}: {len(trace):,} requests, {reads:,} block reads")
        print(f"  curve ({m['curve_points']} capacities, one pass): {m['curve_s']:.3f} s")
        print(f"  one simulation at {args.capacity:,} tokens:      {m['bounded_s']:.3f} s")
        print(f"  one simulation, unbounded:            {m['unbounded_s']:.3f} s")
        print(f"  ratio curve / simulation at capacity: {m['curve_s'] / m['bounded_s']:.2f}")
        print(f"  ratio curve / simulation unbounded:   {m['curve_s'] / m['unbounded_s']:.2f}")
        print(f"  hit ratio at capacity {m['hit_at_capacity']:.4f}, unbounded {m['hit_unbounded']:.4f}")
        if args.sampling:
            for rate, error in sampling_error(trace, [0.5, 0.1, 0.01, 0.001]).items():
                print(f"  SHARDS rate {rate:g}: largest absolute error {error:.4f}")


if __name__ == "__main__":
    main()
