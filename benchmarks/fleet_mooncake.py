"""``promptkit fleet`` on Mooncake's published traces: the checks of issue 43, and the time they take.

Pass the traces (``FAST25-release/traces/conversation_trace.jsonl`` and ``synthetic_trace.jsonl`` of
kvcache-ai/Mooncake); a trace that is absent is skipped (said so, exit 0), since the repository does not
carry them. For each trace it:

- reads it plain, gzipped and from a folder, and checks that the three give the same figures;
- checks that a contradicting ``--block-size`` (256) is refused;
- runs the command's ``--json`` over ``--replicas`` × every policy but ``session`` at ``--capacity``, with
  the latency model of ``--gpu`` / ``--model``, and prints the verdict, the best policy per replica
  count, and round robin's and prefix-aware's median TTFT at 16 replicas (prefix-aware must be no worse);
- prints the wall time of the whole comparison and of one configuration.

    python benchmarks/fleet_mooncake.py conversation_trace.jsonl synthetic_trace.jsonl \\
        [--replicas 4,16,40] [--capacity 256K,1M,unbounded] [--gpu h100] [--model llama-3.1-8b]
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from promptkit.cli import main

POLICIES = "round_robin,random,least_loaded,consistent_hash,prefix_aware,kv_cost,weighted_scorers,load_aware"


def _fleet(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["fleet", *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _check_inputs(trace: Path, work: Path) -> None:
    gz = work / "gz" / (trace.name + ".gz")
    gz.parent.mkdir()
    gz.write_bytes(gzip.compress(trace.read_bytes()))
    folder = work / "folder"
    folder.mkdir()
    shutil.copy(trace, folder / trace.name)
    tables = []
    for source in (trace, gz, folder):
        code, out, err = _fleet(str(source), "--replicas", "4", "--policy", "round_robin,prefix_aware", "--json",
                                "--out", str(work / "out"))  # fmt: skip
        if code:
            raise SystemExit(f"{source}: exit {code}: {err}")
        tables.append(json.loads(out)["table"])
    same = tables[0] == tables[1] == tables[2]
    print(f"  plain, gzipped and folder give the same figures: {same}")
    code, _, err = _fleet(str(trace), "--replicas", "4", "--block-size", "256", "--out", str(work / "out"))
    print(f"  --block-size 256 refused: {code != 0} ({err.strip()[:150]}...)")
    if not same or code == 0:
        raise SystemExit("a check failed")


def _compare(trace: Path, args: argparse.Namespace, work: Path) -> None:
    flags = ["--replicas", args.replicas, "--policy", POLICIES, "--capacity", args.capacity, "--gpu", args.gpu,
             "--model", args.model, "--out", str(work / "full")]  # fmt: skip
    start = time.perf_counter()
    code, out, err = _fleet(str(trace), *flags, "--json")
    whole = time.perf_counter() - start
    if code:
        raise SystemExit(f"exit {code}: {err}")
    data = json.loads(out)
    start = time.perf_counter()
    _fleet(str(trace), "--replicas", "16", "--policy", "prefix_aware", "--capacity", "unbounded", "--gpu", args.gpu,
           "--model", args.model, "--json", "--out", str(work / "one"))  # fmt: skip
    one = time.perf_counter() - start
    print(f"  {len(data['table'])} configurations in {whole:.1f} s; one (16 replicas, prefix_aware) {one:.1f} s")
    for row in data["verdict"]:
        print(
            f"  {row['capacity']:>22} {row['replicas']:>3} replicas: best {row['best']} "
            f"({row['share_of_ceiling']:.1%} of {row['ceiling_hit_ratio']:.4f}, imbalance {row['load_imbalance']:.3f}, "
            f"TTFT p50 {row['best_ttft_p50_s']:.3f} s); runner-up {row['runner_up']} ({row['runner_up_share']:.1%}); "
            f"fastest {row['fastest']} ({row['fastest_ttft_p50_s']:.3f} s)"
        )
    at16 = {r["policy"]: r for r in data["table"] if r["replicas"] == 16 and r["capacity_tokens"] is None}
    if at16:
        rr, pa = at16["round_robin"]["ttft_p50_s"], at16["prefix_aware"]["ttft_p50_s"]
        print(f"  16 replicas, unbounded: median TTFT round_robin {rr:.3f} s, prefix_aware {pa:.3f} s "
              f"(no worse: {pa <= rr})")  # fmt: skip
        if pa > rr:
            raise SystemExit("prefix_aware's median TTFT is worse than round robin's at 16 replicas")


def main_() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--replicas", default="4,16,40")
    parser.add_argument("--capacity", default="256K,1M,unbounded")
    parser.add_argument("--gpu", default="h100")
    parser.add_argument("--model", default="llama-3.1-8b")
    args = parser.parse_args()
    if not args.traces:
        print("no trace given: pass Mooncake's conversation_trace.jsonl / synthetic_trace.jsonl; skipped")
        return 0
    for trace in args.traces:
        if not trace.is_file():
            print(f"{trace}: absent, skipped")
            continue
        print(trace)
        with tempfile.TemporaryDirectory() as tmp:
            _check_inputs(trace, Path(tmp))
            _compare(trace, args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main_())
