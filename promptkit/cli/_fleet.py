"""``promptkit fleet`` on the command line: its options and the call of :func:`promptkit.commands.fleet.run_fleet`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from promptkit.cli._common import EXIT_OK, EXIT_USAGE, CLIError, check_paths, emit


def _size(text: str) -> Any:
    """An argparse type: a size as :func:`promptkit.analysis.sizes.parse_size` reads it (binary units)."""
    from promptkit.analysis.sizes import parse_size
    from promptkit.errors import UsageError

    try:
        return parse_size(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _listed(item: Any) -> Any:
    def parse(text: str) -> list[Any]:
        return [item(part) for part in text.split(",") if part.strip()]

    return parse


def _add_fleet_command(commands: Any) -> None:
    from promptkit.analysis.fleet_policies import POLICIES, VIEWS

    fleet = commands.add_parser(
        "fleet",
        help="replay logs or a Mooncake trace over R replicas behind routing policies, at capacities",
        description="Simulate a fleet of replicas, each with its own LRU prefix cache, behind each routing "
        f"policy ({', '.join(POLICIES)}), for every replica count x capacity x model given; print the "
        "verdict and the pivot tables, write fleet.csv, fleet.png and report.html to --out (see "
        "docs/how-to/fleet.md). Sizes are binary: 1M = 1Mi = 1,048,576 tokens, 80GB = 80GiB.",
    )
    fleet.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH", help="Mooncake traces, or logs (files, folders)"
    )
    fleet.add_argument("--replicas", type=_listed(int), default=[1, 4, 16], metavar="N,...")
    fleet.add_argument(
        "--policy", type=_listed(str), default=["round_robin", "least_loaded", "consistent_hash", "prefix_aware"],
        metavar="NAME,...", help="routing policies (default: %(default)s)",
    )  # fmt: skip
    fleet.add_argument(
        "--capacity", type=_listed(_size), default=[], metavar="SIZE,...",
        help="cache per replica: tokens (1M, 16Mi), bytes with --model (80GB), or unbounded (default)",
    )  # fmt: skip
    fleet.add_argument(
        "--model", type=_listed(str), default=[], metavar="NAME,...", help="models or config.json paths"
    )
    fleet.add_argument(
        "--shared-capacity", type=_size, metavar="SIZE", help="add a shared tier of SIZE tokens"
    )
    fleet.add_argument(
        "--block-size",
        type=int,
        metavar="TOKENS",
        help="tokens per block (default: 512; checked against a trace)",
    )
    fleet.add_argument("--provider", metavar="NAME", help="tokenize logs as this provider")
    fleet.add_argument(
        "--arrival-interval", type=float, default=1.0, metavar="SECONDS",
        help="without timestamps, requests arrive this far apart (default: %(default)s)",
    )  # fmt: skip
    speed = fleet.add_argument_group("latency model (time to first token)")
    speed.add_argument(
        "--prefill-rate", type=float, metavar="TOKENS/S", help="prefill throughput per replica"
    )
    speed.add_argument("--decode-rate", type=float, metavar="TOKENS/S", help="decode speed per request")
    speed.add_argument(
        "--gpu", metavar="PROFILE", help="h100, h200, a100, l40s, b200 or COUNTxNAME, with --model"
    )
    router = fleet.add_argument_group("router settings")
    for flag, kind, text in (
        ("--cache-threshold", float, "prefix_aware: share of the prompt cached to follow the cache (0.3)"),
        ("--balance-abs-threshold", int, "prefix_aware: load difference that counts as imbalanced (64)"),
        ("--balance-rel-threshold", float, "prefix_aware: load ratio that counts as imbalanced (1.5)"),
        ("--overlap-weight", float, "kv_cost: weight of the prefill blocks (1.0)"),
        ("--prefix-weight", float, "weighted_scorers: prefix-cache scorer weight (3)"),
        ("--queue-weight", float, "weighted_scorers: queue scorer weight (2)"),
        ("--kv-weight", float, "weighted_scorers: KV-utilisation scorer weight (2)"),
        ("--load-beta", float, "load_aware: weight of the relative load (0.5)"),
        ("--inflight-seconds", float, "without a latency model, how long a request counts as load (10)"),
        ("--hash-blocks", int, "consistent_hash: leading blocks keyed on (4)"),
        ("--seed", int, "random: the generator's seed (0)"),
        ("--router-instances", int, "routers sharing the load, each seeing its own requests (1)"),
    ):
        router.add_argument(flag, type=kind, metavar="X", help=text)
    router.add_argument(
        "--router-view", choices=VIEWS, help="exact: the replicas' caches; routed: what it sent"
    )
    router.add_argument(
        "--router-view-capacity", type=_size, metavar="SIZE", help="tokens per replica the routed view keeps"
    )
    fleet.add_argument("--json", action="store_true", help="print the verdict and the table as JSON")
    fleet.add_argument(
        "--out", type=Path, default=Path("promptkit-fleet"), help="where to write (default: %(default)s)"
    )
    fleet.set_defaults(handler=_run_fleet)


def _fleet_router(args: argparse.Namespace) -> Any:
    from promptkit.analysis.fleet_policies import RouterSettings

    names = (
        "cache_threshold", "balance_abs_threshold", "balance_rel_threshold", "overlap_weight", "prefix_weight",
        "queue_weight", "kv_weight", "load_beta", "inflight_seconds", "hash_blocks", "seed",
    )  # fmt: skip
    given = {n: getattr(args, n) for n in names if getattr(args, n) is not None}
    if args.router_instances is not None:
        given["instances"] = args.router_instances
    if args.router_view is not None:
        given["view"] = args.router_view
    if args.router_view_capacity is not None:
        given["view_capacity"] = _fleet_tokens(args.router_view_capacity, "--router-view-capacity")
    return RouterSettings(**given)


def _fleet_tokens(size: Any, flag: str) -> int:
    if size.kind != "tokens" or size.value is None:
        raise CLIError(f"{flag}: give a number of tokens", EXIT_USAGE)
    return int(size.value)


def _fleet_latency(args: argparse.Namespace) -> Any:
    from promptkit.analysis.fleet_latency import LatencyModel, gpu_profile

    if args.gpu is not None and args.prefill_rate is not None:
        raise CLIError("give --gpu (with --model) or --prefill-rate, not both", EXIT_USAGE)
    if args.gpu is not None:
        return gpu_profile(args.gpu)
    if args.prefill_rate is not None:
        return LatencyModel(args.prefill_rate, args.decode_rate)
    if args.decode_rate is not None:
        raise CLIError("--decode-rate needs --prefill-rate", EXIT_USAGE)
    return None


def _run_fleet(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from promptkit.commands.fleet import run_fleet

    check_paths(args.paths)
    shared = args.shared_capacity
    text = run_fleet(
        args.paths, replicas=args.replicas, policies=args.policy, capacities=args.capacity, models=args.model,
        as_json=args.json, shared_capacity=None if shared is None else _fleet_tokens(shared, "--shared-capacity"),
        provider=args.provider, block_size=args.block_size, arrival_interval=args.arrival_interval,
        router=_fleet_router(args), latency=_fleet_latency(args), out=args.out,
    )  # fmt: skip
    emit(stdout, text)
    return EXIT_OK


# --- shared: arguments, paths, errors, output ---------------------------------------------------------
