"""The ``promptkit`` command line: a thin shell over :mod:`promptkit.cache`.

``promptkit analyze [PATH ...]`` analyzes request logs (JSONL or ``.traj.json``), prints the summary
tables with a legend of their columns (``--json``: a machine-readable summary; ``--quiet``: the headline
line only), and writes the per-request table (parquet and CSV), the HTML report (``report.html``) and
the plots (PNG; a plot with nothing to show is skipped, and stderr says so) into ``--out``.
With no PATH it analyzes the log bundled with the package (``promptkit/data/default-session.jsonl``).

Exit codes: 0 success, 1 bad input (the message names the file), 2 usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.resources
import inspect
import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, TextIO

from promptkit.errors import PromptkitError


def _version() -> str:
    try:
        from promptkit import __version__

        return __version__
    except ImportError:  # an editable install made before promptkit/__init__.py existed
        from importlib.metadata import version

        return version("promptkit")


__all__ = ["DEFAULT_LOG", "DEFAULT_OUT", "CLIError", "build_parser", "main"]

#: The bundled log analyzed when ``promptkit analyze`` gets no PATH (relative to the package).
DEFAULT_LOG: Final[str] = "data/default-session.jsonl"
#: Where ``promptkit analyze`` writes its files unless ``--out`` says otherwise.
DEFAULT_OUT: Final[str] = "promptkit-report"
#: Set to 1 to get Python tracebacks instead of one-line error messages.
DEBUG_ENV: Final[str] = "PROMPTKIT_DEBUG"

EXIT_OK: Final[int] = 0
EXIT_INPUT: Final[int] = 1
EXIT_USAGE: Final[int] = 2


class CLIError(PromptkitError):
    """A failure the command reports in one line (no traceback) with an exit code."""

    def __init__(self, message: str, code: int = EXIT_INPUT) -> None:
        super().__init__(message)
        self.code = code


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, with one subparser per command (``analyze`` for now)."""
    parser = argparse.ArgumentParser(
        prog="promptkit",
        description="Build LLM requests that keep the provider's prefix cache hitting, and measure it.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    analyze = commands.add_parser(
        "analyze",
        help="analyze request logs: hit ratio, tokens lost per anchor, predicted vs reported, cost",
        description=(
            "Analyze request logs of any supported format (detected per file; gzip and zstd read "
            "transparently). Prints the summary tables and a legend of their columns, and writes "
            "requests.parquet, requests.csv, summary.txt, report.html (one self-contained page) and PNG "
            "plots into --out."
        ),
    )
    analyze.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="log files or directories (searched for *.jsonl, *.json, *.traj, *.har, plain or .gz/.zst); "
        "default: the bundled fixture log promptkit/" + DEFAULT_LOG,
    )
    analyze.add_argument(
        "--provider",
        metavar="NAME",
        help="provider whose tokenizer and cache rules apply (deepseek, openai, anthropic, ollama, vllm, "
        "exact); default: each session's, recognised from the log's URL, model name or usage",
    )
    analyze.add_argument(
        "--format",
        metavar="NAME",
        help="read every file as this log format (default: detected per file); see promptkit formats",
    )
    analyze.add_argument("--tokenizer", metavar="NAME", help="tokenizer name (default: the provider's)")
    analyze.add_argument(
        "--render", metavar="NAME", help="render model / chat template (default: the provider's)"
    )
    analyze.add_argument(
        "--view",
        choices=("consecutive", "simulated"),
        default=None,
        help="consecutive: each request against the previous one of its session; "
        "simulated: a shared cache over every earlier request (default: simulated for conversation "
        "trees such as Claude Code projects, else consecutive)",
    )
    analyze.add_argument(
        "--out", metavar="DIR", default=DEFAULT_OUT, type=Path, help="output directory (default: %(default)s)"
    )
    analyze.add_argument(
        "--model", metavar="NAME", help="model to price the calls at (default: the log's or the provider's)"
    )
    analyze.add_argument(
        "--prices",
        metavar="FILE",
        type=Path,
        help="JSON or CSV prices (USD per million tokens) overriding the built-in table",
    )
    analyze.add_argument("--no-plots", action="store_true", help="do not write PNG plots")
    analyze.add_argument(
        "--jobs",
        metavar="N",
        type=int,
        default=1,
        help="worker processes for the per-session work (with --engine dask: local cluster workers); "
        "same results (default: %(default)s)",
    )
    analyze.add_argument(
        "--engine",
        choices=("local", "dask"),
        default="local",
        help="local: this machine; dask: a dask.distributed cluster (pip install 'promptkit[dask]') "
        "(default: %(default)s)",
    )
    analyze.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="with --engine dask: the scheduler to connect to (default: start a local cluster)",
    )
    analyze.add_argument(
        "--stream",
        action="store_true",
        help="read the logs by streaming and analyze session by session (consecutive view; less memory)",
    )
    _add_output_options(analyze)
    progress = analyze.add_mutually_exclusive_group()
    progress.add_argument(
        "--progress", dest="progress", action="store_true", default=None, help="always show the progress bar"
    )
    progress.add_argument(
        "--no-progress", dest="progress", action="store_false", help="never show the progress bar"
    )
    analyze.add_argument(
        "--calibration",
        metavar="FILE",
        help="a calibration from `promptkit calibrate` (or 'default': the one bundled for the provider) "
        "adding expected_cached_tokens beside the upper bound",
    )
    analyze.set_defaults(handler=_run_analyze)
    _add_cause_commands(commands)
    _add_proxy_command(commands)
    _add_whatif_command(commands)
    _add_fleet_command(commands)
    return parser


def _add_log_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="log files or directories")
    sub.add_argument("--provider", metavar="NAME", help="provider (default: each session's)")
    sub.add_argument("--format", metavar="NAME", help="log format (default: detected per file)")
    sub.add_argument(
        "--view",
        choices=("consecutive", "simulated"),
        default=None,
        help="analysis view (default: simulated for conversation trees such as Claude Code projects, "
        "else consecutive)",
    )


def _add_cause_commands(commands: Any) -> None:
    calibrate = commands.add_parser(
        "calibrate",
        help="fit the best-effort cache model on logs that report usage and save it (JSON)",
        description="Fit the stale-state model of a best-effort provider cache (see docs/how-to/calibration.md) "
        "on logs with usage, print it and its leave-one-session-out error, and save it to --out.",
    )
    _add_log_options(calibrate)
    calibrate.add_argument(
        "--out", metavar="FILE", type=Path, required=True, help="where to write the calibration"
    )
    calibrate.set_defaults(handler=_run_calibrate)

    check = commands.add_parser(
        "check",
        help="CI gate: exit 1 when a session's hit ratio or layout loss misses a threshold",
        description="Analyze the logs and check every session: exit 1 printing the failing sessions and their "
        "top causes, 0 when all pass.",
    )
    _add_log_options(check)
    check.add_argument("--min-hit", metavar="X", type=float, help="minimum hit ratio per session (0-1)")
    check.add_argument(
        "--max-layout-loss",
        metavar="Y",
        type=float,
        help="maximum share of the prompt lost to the layout (0-1)",
    )
    check.set_defaults(handler=_run_check)

    lint = commands.add_parser(
        "lint",
        help="volatile-value lint: head regions that change every request, what they cost, how to fix them",
    )
    _add_log_options(lint)
    lint.set_defaults(handler=_run_lint)


def _analyze_for(args: argparse.Namespace) -> Any:
    _check_paths(args.paths)
    from promptkit.cache import analyze

    options: dict[str, Any] = {"view": args.view}
    for name in ("provider", "format"):
        value = getattr(args, name)
        if value is not None:
            options[name] = value
    try:
        result = analyze(args.paths, **options)
    except _input_errors() as exc:
        if isinstance(exc, KeyError | IndexError) or os.environ.get(DEBUG_ENV):
            raise
        raise CLIError(_with_path(exc, args.paths)) from exc
    if result.requests.height == 0:
        raise CLIError(f"{', '.join(map(str, args.paths))}: no request could be analyzed")
    return result


def _run_calibrate(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    import polars as pl

    from promptkit.cache.calibration import fit_calibration, leave_one_run_out
    from promptkit.cache.report import table_config
    from promptkit.errors import CalibrationError

    result = _analyze_for(args)
    try:
        cal = fit_calibration(result)
    except CalibrationError as exc:
        raise CLIError(str(exc)) from exc
    try:
        cal.save(args.out)
    except OSError as exc:
        raise CLIError(f"{args.out}: cannot write the calibration: {exc.strerror or exc}") from exc
    lines = [
        f"calibration for {cal.provider}: p(stale) = {cal.stale_probability:.4f} "
        f"({cal.fitted_on.get('stale')} stale / {cal.fitted_on.get('events')} decidable requests, "
        f"{cal.fitted_on.get('runs')} sessions)"
        + (
            ""
            if cal.split_on is None
            else f"; {cal.split_on} >= {cal.threshold:g}: {cal.stale_probability_above:.4f}"
        )
    ]
    sessions = result.requests["session"].unique(maintain_order=True).to_list()
    if len(sessions) >= 2:
        runs = {s: result.requests.filter(pl.col("session") == s) for s in sessions}
        with table_config(200):
            lines.append("held-out error, leave one session out:\n" + str(leave_one_run_out(runs)))
    lines.append(f"wrote {args.out}")
    _emit(stdout, "\n".join(lines) + "\n")
    return EXIT_OK


def _run_check(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from promptkit.cache.causes_report import check_gate

    if args.min_hit is None and args.max_layout_loss is None:
        raise CLIError("check: give --min-hit and/or --max-layout-loss", EXIT_USAGE)
    result = _analyze_for(args)
    gate = check_gate(result, min_hit=args.min_hit, max_layout_loss=args.max_layout_loss)
    n = gate.sessions.height
    if gate.passed:
        _emit(stdout, f"promptkit check: all {n} session(s) pass\n")
        return EXIT_OK
    text = f"promptkit check: {len(gate.failures)} of {n} session(s) fail\n" + "".join(
        f"  {line}\n" for line in gate.failures
    )
    _emit(stdout, text)
    return EXIT_INPUT


def _run_lint(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from promptkit.cache.causes_report import lint
    from promptkit.cache.report import table_config

    table = lint(_analyze_for(args))
    if table.height == 0:
        _emit(stdout, "promptkit lint: no head region changes between requests\n")
        return EXIT_OK
    with table_config(200, rows=50):
        _emit(stdout, f"promptkit lint: {table.height} changing head region(s)\n{table}\n")
    return EXIT_OK


# --- promptkit proxy ----------------------------------------------------------------------------------


def _add_proxy_command(commands: Any) -> None:
    proxy = commands.add_parser(
        "proxy",
        help="a local recording proxy: forward LLM API calls unchanged, record them, show live cache figures",
        description=(
            "Forward every request to --upstream unchanged and record each Anthropic Messages, OpenAI Chat "
            "Completions or Responses call (request + whole response) in promptkit's log format. Point a "
            "client's base URL at the proxy (ANTHROPIC_BASE_URL, OPENAI_BASE_URL). Live figures: "
            "http://LISTEN/_promptkit/ (JSON: /_promptkit/stats.json). Needs the 'proxy' extra (aiohttp)."
        ),
    )
    proxy.add_argument(
        "--upstream", required=True, metavar="URL", help="the API base URL, e.g. https://api.anthropic.com"
    )
    proxy.add_argument(
        "--listen",
        default="127.0.0.1:8787",
        metavar="HOST:PORT",
        help="where to listen (default: %(default)s)",
    )
    proxy.add_argument(
        "--log",
        default="promptkit-proxy.jsonl",
        metavar="FILE",
        help="JSONL log to append to (default: %(default)s)",
    )
    proxy.add_argument("--no-log", action="store_true", help="record nothing (live figures only)")
    proxy.add_argument(
        "--redact",
        action="append",
        default=[],
        metavar="REGEX",
        help="redact matches in recorded bodies (repeatable)",
    )
    proxy.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow listening on a non-loopback address (other machines)",
    )
    proxy.add_argument(
        "--provider", metavar="NAME", help="cache rules for the predicted figures (default: inferred)"
    )
    proxy.add_argument(
        "--no-predict", action="store_true", help="do not run the analyzer for live predictions"
    )
    proxy.add_argument(
        "--timeout",
        type=_seconds,
        default=600.0,
        metavar="SECONDS",
        help="upstream silence before giving up (default: %(default)s)",
    )
    proxy.set_defaults(handler=_run_proxy)


def _seconds(text: str) -> float:
    """An argparse type: a finite number of seconds greater than 0 (``-1``, ``0``, ``nan`` and ``inf``
    are usage errors, never "no timeout")."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds greater than 0, got {text!r}")
    return value


def _run_proxy(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    host, sep, port_text = args.listen.rpartition(":")
    if not sep or not port_text.isdigit():
        raise CLIError(f"--listen: expected HOST:PORT, got {args.listen!r}", EXIT_USAGE)
    try:
        from promptkit.proxy import ProxyConfig, ProxyConfigError, run_proxy
    except ImportError as exc:
        raise CLIError(f"the proxy needs aiohttp: pip install 'promptkit[proxy]' ({exc})") from exc
    try:
        config = ProxyConfig(
            upstream=args.upstream,
            host=host.strip("[]") or "127.0.0.1",
            port=int(port_text),
            log=None if args.no_log else Path(args.log),
            redact=tuple(args.redact),
            allow_remote=args.allow_remote,
            read_timeout=args.timeout,
            predict=not args.no_predict,
            provider=args.provider,
        )
        run_proxy(config, out=lambda text: print(text, file=stderr, flush=True))
    except ProxyConfigError as exc:
        raise CLIError(str(exc)) from exc
    except OSError as exc:
        raise CLIError(f"--listen {args.listen}: {exc.strerror or exc}") from exc
    return EXIT_OK


def _add_output_options(analyze: argparse.ArgumentParser) -> None:
    """--html / --no-html, and what goes to stdout: the tables (default), --json or --quiet."""
    html = analyze.add_mutually_exclusive_group()
    html.add_argument(
        "--html",
        metavar="FILE",
        nargs="?",
        const=None,
        default=None,
        type=Path,
        help="write the HTML report to FILE (default: report.html in --out; it is always written "
        "unless --no-html)",
    )
    html.add_argument("--no-html", action="store_true", help="do not write the HTML report")
    shown = analyze.add_mutually_exclusive_group()
    shown.add_argument(
        "--json",
        action="store_true",
        help="print a machine-readable JSON summary (headline, sessions, notes, problem count) instead "
        "of the tables",
    )
    shown.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="print only the one-line headline (errors still go to stderr)",
    )


# --- promptkit whatif ---------------------------------------------------------------------------------


def _add_whatif_command(commands: Any) -> None:
    whatif = commands.add_parser(
        "whatif",
        help="replay request logs under changed prompts (--transform) or find what to change (--suggest)",
        description=(
            "Replay request logs with transformed prompts and print, per session and overall, hit ratio, "
            "prompt tokens, cached tokens and cost before -> after. --suggest derives candidate transforms "
            "from where the cache breaks, replays each and ranks them by cost saving. SPEC: move:SELECTOR"
            "[,to=ANCHOR], normalize[:NAMES][,scope=all], sort-tools, pin-model:MODEL, provider:NAME, "
            "cache-model:NAME, ttl:1h, retention:24h, cache-key[:KEY], breakpoints:auto, elide[:KEEP] "
            "(see docs/how-to/what-if.md). The replay changes only the prompts; it keeps the logged answers."
        ),
    )
    whatif.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="log files or directories")
    what = whatif.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--transform", action="append", metavar="SPEC", help="a transform to apply (repeatable, applied in order)"
    )
    what.add_argument("--suggest", action="store_true", help="derive, replay and rank candidate transforms")
    whatif.add_argument("--json", action="store_true", help="print JSON instead of tables")
    whatif.add_argument("--limit", type=int, default=10, metavar="N", help="suggestions shown (default: %(default)s)")
    whatif.add_argument("--provider", metavar="NAME", help="provider whose rules apply (default: each session's)")
    whatif.add_argument("--format", metavar="NAME", help="read every file as this log format")
    whatif.add_argument("--view", choices=("consecutive", "simulated"), default="consecutive")
    whatif.add_argument("--model", metavar="NAME", help="model to price the calls at (default: the log's)")
    whatif.add_argument("--prices", metavar="FILE", type=Path, help="JSON or CSV prices overriding the built-ins")
    whatif.set_defaults(handler=_run_whatif)


def _run_whatif(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from promptkit.whatif.cli import run_whatif

    _check_paths(args.paths)
    try:
        text = run_whatif(args)
    except PromptkitError as exc:
        from promptkit.errors import UsageError

        raise CLIError(str(exc), EXIT_USAGE if isinstance(exc, UsageError) else EXIT_INPUT) from exc
    except _input_errors() as exc:
        if isinstance(exc, KeyError | IndexError) or os.environ.get(DEBUG_ENV):
            raise
        raise CLIError(_with_path(exc, args.paths)) from exc
    _emit(stdout, text)
    return EXIT_OK


def _default_log(stack: contextlib.ExitStack) -> Path:
    resource: Any
    try:
        resource = importlib.resources.files("promptkit").joinpath(DEFAULT_LOG)
    except (NotADirectoryError, TypeError):
        # an editable install made before promptkit/__init__.py existed registers promptkit as a
        # namespace package whose resource reader fails; the files sit next to this module anyway
        resource = Path(__file__).parent / DEFAULT_LOG
    if not resource.is_file():
        raise CLIError(
            f"no PATH given and the bundled fixture log promptkit/{DEFAULT_LOG} is missing from this "
            "installation; pass the log files to analyze"
        )
    return stack.enter_context(importlib.resources.as_file(resource))


# --- promptkit fleet ----------------------------------------------------------------------------------

_SIZE_UNITS: Final[dict[str, int]] = {
    "": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40,
}  # fmt: skip


def _size(text: str) -> tuple[str, float | None]:
    """``1M`` / ``16Mi`` / ``4096`` tokens, ``80GB`` / ``80GiB`` bytes, ``unbounded``: (kind, value)."""
    raw = text.strip().lower()
    if raw in ("unbounded", "none", "inf"):
        return "tokens", None
    kind = "bytes" if raw.endswith("b") else "tokens"
    number = raw.removesuffix("b") if kind == "bytes" else raw
    unit = number.lstrip("0123456789.")
    try:
        return kind, float(number[: len(number) - len(unit)]) * _SIZE_UNITS[unit]
    except (KeyError, ValueError):
        raise argparse.ArgumentTypeError(
            f"{text!r}: a capacity is tokens (4096, 1M, 16Mi), bytes (80GB, 64GiB) or 'unbounded'"
        ) from None


def _listed(item: Any) -> Any:
    def parse(text: str) -> list[Any]:
        return [item(part) for part in text.split(",") if part.strip()]

    return parse


def _add_fleet_command(commands: Any) -> None:
    fleet = commands.add_parser(
        "fleet",
        help="replay logs or a Mooncake trace over R replicas behind routing policies, at capacities",
        description="Simulate a fleet of replicas, each with its own LRU prefix cache, behind each routing "
        "policy (round_robin, random, least_loaded, session, consistent_hash, prefix_aware), for every "
        "replica count x capacity x model given; print the table and write fleet.csv, fleet.png and "
        "report.html to --out (see docs/how-to/fleet.md).",
    )
    fleet.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="a Mooncake trace, or logs")
    fleet.add_argument("--replicas", type=_listed(int), default=[1, 4, 16], metavar="N,...")
    fleet.add_argument(
        "--policy", type=_listed(str), default=["round_robin", "least_loaded", "consistent_hash", "prefix_aware"],
        metavar="NAME,...", help="routing policies (default: %(default)s)",
    )  # fmt: skip
    fleet.add_argument(
        "--capacity", type=_listed(_size), default=[("tokens", None)], metavar="SIZE,...",
        help="cache per replica: tokens (1M, 16Mi), bytes with --model (80GB), or unbounded",
    )  # fmt: skip
    fleet.add_argument(
        "--model", type=_listed(str), default=[], metavar="NAME,...", help="models or config.json paths"
    )
    fleet.add_argument(
        "--shared-capacity", type=_size, metavar="SIZE", help="add a shared tier of SIZE tokens"
    )
    fleet.add_argument("--block-size", type=int, default=512, help="tokens per block (default: %(default)s)")
    fleet.add_argument("--provider", metavar="NAME", help="tokenize logs as this provider")
    fleet.add_argument(
        "--out", type=Path, default=Path("promptkit-fleet"), help="where to write (default: %(default)s)"
    )
    fleet.set_defaults(handler=_run_fleet)


def _run_fleet(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from promptkit.cache.fleet_report import fleet_report, fleet_table
    from promptkit.cache.report import table_config

    _check_paths(args.paths)
    tokens = [None if v is None else int(v) for kind, v in args.capacity if kind == "tokens"]
    sizes = [float(v) for kind, v in args.capacity if kind == "bytes" and v is not None]
    shared = args.shared_capacity
    if shared is not None and (shared[0] != "tokens" or shared[1] is None):
        raise CLIError("--shared-capacity: give a number of tokens", EXIT_USAGE)
    report = fleet_report(
        args.paths, replicas=args.replicas, policies=args.policy, capacities=tokens, capacity_bytes=sizes,
        models=args.model, shared_capacity=None if shared is None else int(shared[1]), provider=args.provider,
        block_size=args.block_size, out=args.out,
    )  # fmt: skip
    with table_config(200, rows=-1):
        text = str(fleet_table(report.result.summary))
    lines = [*report.notes, text, *(f"wrote {p}" for p in report.files)]
    _emit(stdout, "\n".join(lines) + "\n")
    return EXIT_OK


def _check_paths(paths: Sequence[Path]) -> None:
    for path in paths:
        if not path.exists():
            raise CLIError(f"{path}: no such file or directory")
        if not os.access(path, os.R_OK):
            raise CLIError(f"{path}: cannot read the file (permission denied)")


def _input_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean bad input (reported in one line), as opposed to a bug (traceback)."""
    return (PromptkitError, OSError, ValueError, LookupError, UnicodeError)


def _call_analyze(paths: list[Path], args: argparse.Namespace, progress: bool) -> Any:
    from promptkit.cache import analyze

    options: dict[str, Any] = {"view": args.view, "progress": progress}
    for name in ("provider", "tokenizer", "render", "format"):
        value = getattr(args, name)
        if value is not None:
            options[name] = value
    if getattr(args, "jobs", 1) != 1:
        options["jobs"] = args.jobs
    if getattr(args, "engine", "local") != "local":
        options["engine"] = args.engine
    if getattr(args, "stream", False):
        options["stream"] = True
    if getattr(args, "scheduler", None) is not None:
        if options.get("engine") != "dask":
            raise CLIError("--scheduler needs --engine dask", EXIT_USAGE)
        options["client"] = args.scheduler  # a scheduler address
    accepted = inspect.signature(analyze).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
    unsupported = [k for k in options if k not in accepted and not takes_any]
    if unsupported:
        raise CLIError(f"this version of analyze() does not accept --{unsupported[0]}", EXIT_USAGE)
    return analyze(paths, **options)


#: What a spreadsheet reads as the start of a formula (OWASP, CSV injection:
#: https://owasp.org/www-community/attacks/CSV_Injection).
_FORMULA_START: Final[str] = r"^[=+\-@\t\r]"


def _write_csv(frame: Any, path: Path) -> None:
    """Write ``frame`` as CSV with every text cell that a spreadsheet would run as a formula (a session id
    ``=HYPERLINK(...)``, ``+1``, ``-2``, ``@SUM``) prefixed by ``'``, so it opens as text; numbers are
    left as they are."""
    import polars as pl

    text = [c for c, t in frame.schema.items() if t == pl.String]
    safe = frame.with_columns(
        pl.when(pl.col(c).str.contains(_FORMULA_START))
        .then(pl.lit("'") + pl.col(c))
        .otherwise(pl.col(c))
        .alias(c)
        for c in text
    )
    safe.write_csv(path)


def _write_tables(result: Any, out: Path, summary_text: str) -> list[Path]:
    import polars as pl

    out.mkdir(parents=True, exist_ok=True)
    requests: pl.DataFrame = result.requests
    written = [out / "requests.parquet", out / "requests.csv", out / "summary.txt"]
    requests.write_parquet(written[0])
    # CSV holds scalars only: nested columns (lists, structs) are written as JSON text.
    nested = [
        c for c, t in requests.schema.items() if isinstance(t, pl.List | pl.Array | pl.Struct | pl.Object)
    ]
    flat = requests.with_columns(
        pl.col(c).map_elements(
            lambda v: json.dumps(v.to_list() if hasattr(v, "to_list") else v, default=str),
            return_dtype=pl.String,
        )
        for c in nested
    )
    _write_csv(flat, written[1])
    written[2].write_text(summary_text, encoding="utf-8")
    if hasattr(result, "cache_model"):
        from promptkit.cache.causes import explain_causes

        _write_csv(explain_causes(result), out / "causes.csv")
        written.append(out / "causes.csv")
        if _has_writes(requests):
            from promptkit.cache.causes_report import reads_invariant, write_accounting

            _write_csv(write_accounting(result), out / "writes.csv")
            written.append(out / "writes.csv")
            if requests["reported_cache_write_tokens"].is_not_null().any():
                _write_csv(reads_invariant(result), out / "reads-invariant.csv")
                written.append(out / "reads-invariant.csv")
    problems = getattr(result, "problems", None)
    if isinstance(problems, pl.DataFrame) and problems.height:
        _write_csv(problems, out / "problems.csv")
        written.append(out / "problems.csv")
    return written


def _run_analyze(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    with contextlib.ExitStack() as stack:
        paths: list[Path] = list(args.paths) if args.paths else [_default_log(stack)]
        return _analyze_paths(paths, args, stdout, stderr)


def _analyze_paths(paths: list[Path], args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from promptkit.cache.report import PriceError, format_summary, load_prices, summarize

    info = _Info(stderr, quiet=args.quiet or args.json)
    if not args.paths:
        info(f"promptkit: no PATH given, analyzing the bundled log {paths[0]}")
    _check_paths(paths)
    prices = None
    if args.prices is not None:
        try:
            prices = load_prices(args.prices)
        except PriceError as exc:
            raise CLIError(str(exc)) from exc
    if args.provider is not None:
        from promptkit.providers.registry import available_providers

        if args.provider not in available_providers():
            raise CLIError(
                f"unknown provider {args.provider!r}; known: {', '.join(available_providers())}", EXIT_USAGE
            )
    if args.format is not None:
        from promptkit.formats import available_formats

        if args.format not in available_formats():
            raise CLIError(
                f"unknown log format {args.format!r}; known: {', '.join(available_formats())}", EXIT_USAGE
            )
    progress = args.progress if args.progress is not None else stderr.isatty()
    try:
        result = _call_analyze(paths, args, progress)
    except CLIError:
        raise
    except _input_errors() as exc:
        if isinstance(exc, KeyError | IndexError) or os.environ.get(DEBUG_ENV):
            raise  # a bug, not bad input: keep the traceback
        raise CLIError(_with_path(exc, paths)) from exc

    if result.requests.height == 0:
        problems = result.problems
        first = problems.row(0, named=True) if problems.height else None
        where = f"{first['file']}:{first['line']}" if first and first["line"] is not None else None
        detail = f"; first: {where or first['file']}: {first['reason']}" if first else ""
        raise CLIError(
            f"{', '.join(map(str, paths))}: no request could be analyzed "
            f"({problems.height} problem(s){detail})"
        )
    result, causes_line = _causes_and_expectation(result, args)
    from promptkit.cache.runtime import phase

    out: Path = args.out
    header = _header(result, paths)
    if args.provider is None:
        defaulted = any("name no provider and none was recognised" in n for n in getattr(result, "notes", ()))
        header += (
            "\n(provider: no session named one or was recognised; the default was used, see the notes)"
            if defaulted
            else "\n(provider: recognised per session from the log's URLs, model names or usage)"
        )
    header += "\n" + causes_line
    try:
        with phase("tables", enabled=progress, file=stderr):
            tables = summarize(result, prices=prices, model=args.model)
            legend = _legend(tables)
            written = _write_tables(result, out, header + "\n\n" + format_summary(tables, width=200) + legend)
        if not (args.quiet or args.json):
            # a terminal's own width; 200 when stdout is not a terminal (a file or pipe: no need to wrap)
            width = max(60, shutil.get_terminal_size((200, 24)).columns)
            _emit(stdout, header + "\n\n" + format_summary(tables, width=width) + legend)
        if not args.no_html:
            from promptkit.cache.html import write_html

            target = args.html if args.html is not None else out / "report.html"
            with phase("html", enabled=progress, file=stderr):
                written.append(write_html(result, target, tables=tables, sources=_sources(args, paths)))
        if not args.no_plots:
            from promptkit.cache.plots import save_plots

            with phase("plots", enabled=progress, file=stderr):
                plots = save_plots(result, out)
            written += list(plots.values())
            for note in getattr(plots, "notes", ()):
                info(f"promptkit: plot skipped: {note}")
    except OSError as exc:
        raise CLIError(f"{exc.filename or out}: cannot write the report: {exc.strerror or exc}") from exc
    if args.json:
        from promptkit.cache.summary import summary_dict

        summary = summary_dict(result, tables, paths=[str(p) for p in paths], files=[str(p) for p in written])
        _emit(stdout, json.dumps(summary, indent=2, ensure_ascii=False, default=str) + "\n")
    elif args.quiet:
        from promptkit.cache.summary import headline, headline_line

        _emit(stdout, headline_line(headline(result, tables)) + "\n")
    else:
        _emit(stdout, f"\nWrote {len(written)} files to {out}/: {', '.join(p.name for p in written)}\n")
    return EXIT_OK


def _sources(args: argparse.Namespace, paths: Sequence[Path]) -> list[str]:
    """The analyzed paths as the report names them (the bundled log by its package path)."""
    return [str(p) for p in paths] if args.paths else [f"the bundled log promptkit/{DEFAULT_LOG}"]


class _Info:
    """Informational lines for stderr, silenced by --quiet and --json."""

    def __init__(self, stream: TextIO, *, quiet: bool) -> None:
        self.stream, self.quiet = stream, quiet

    def __call__(self, text: str) -> None:
        if not self.quiet:
            print(text, file=self.stream)


def _legend(tables: Any) -> str:
    from promptkit.cache.report import format_legend

    legend = format_legend(tables)
    return "\n" + legend + "\n" if legend else ""


def _has_writes(requests: Any) -> bool:
    """Whether the analysis has cache writes (reported, or predicted by a model that bills them)."""
    return any(
        c in requests.columns and bool((requests[c].fill_null(0) > 0).any())
        for c in ("reported_cache_write_tokens", "predicted_cache_write_tokens")
    )


def _causes_and_expectation(result: Any, args: argparse.Namespace) -> tuple[Any, str]:
    """The analysis with ``expected_cached_tokens`` when a calibration applies, and the causes headline
    (plus a line on cache writes and their waste when the analysis has writes)."""
    from promptkit.cache.causes_report import causes_headline, write_accounting

    line = causes_headline(result)
    if hasattr(result, "cache_model") and _has_writes(result.requests):
        writes = write_accounting(result)
        five, hour = int(writes["write_5m_tokens"].sum()), int(writes["write_1h_tokens"].sum())
        wasted = int(writes["wasted_5m_tokens"].sum()) + int(writes["wasted_1h_tokens"].sum())
        line += (
            f"\nCache writes: {five + hour:,} tokens (5-minute {five:,}, 1-hour {hour:,}); "
            f"never read before they expired: {wasted:,}"
        )
    spec = getattr(args, "calibration", None)
    if spec is None:
        return result, line
    from promptkit.cache.calibration import apply_calibration, default_calibration, load_calibration
    from promptkit.errors import CalibrationError

    try:
        cal = default_calibration(str(result.provider)) if spec == "default" else load_calibration(spec)
    except CalibrationError as exc:
        raise CLIError(str(exc)) from exc
    if cal is None:
        raise CLIError(f"--calibration default: no calibration is bundled for provider {result.provider!r}")
    result = apply_calibration(result, cal)
    prompt = int(result.requests["prompt_tokens"].sum())
    if prompt:
        expected = float(result.requests["expected_cached_tokens"].sum()) / prompt
        learnt = ", learnt per session from its usage" if cal.learns else ""
        line += (
            f"\nExpected hit ratio {expected:.1%} (upper bound {result.hit_ratio:.1%}; "
            f"calibration p(stale) = {cal.stale_probability:.3f}{learnt})"
        )
    return result, line


def _emit(stream: TextIO, text: str) -> None:
    """Write to stdout; if its reader went away (``promptkit analyze | head``), keep working silently."""
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        try:
            fileno = stream.fileno()
        except (AttributeError, OSError, ValueError):  # pragma: no cover - not a real file
            return
        os.dup2(os.open(os.devnull, os.O_WRONLY), fileno)


def _header(result: Any, paths: Sequence[Path]) -> str:
    requests = result.requests
    files = set(requests["file"].drop_nulls()) if "file" in requests.columns else set()
    problems = getattr(result, "problems", None)
    if problems is not None and "file" in problems.columns:
        files |= set(problems["file"].drop_nulls())
    parts = [
        f"{requests.height} requests in {requests['session'].n_unique()} sessions "
        f"from {len(files) or len(paths)} file(s)"
    ]
    for name in ("provider", "tokenizer", "render", "cache_model", "view"):
        value = getattr(result, name, None)
        if value is not None:
            parts.append(f"{name.replace('_', ' ')}: {getattr(value, 'name', value)}")
    return "; ".join(parts)


def _with_path(exc: BaseException, paths: Sequence[Path]) -> str:
    """The error message, naming the file when the exception itself does not."""
    message = str(exc) or type(exc).__name__
    filename = getattr(exc, "filename", None)
    if filename and str(filename) not in message:
        return f"{filename}: {message}"
    if isinstance(exc, OSError | UnicodeError) and not any(
        str(p) in message or p.name in message for p in paths
    ):
        return f"{', '.join(map(str, paths))}: {message}"
    return message


def main(
    argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Run the command line; returns the exit code (the console script exits with it).

    >>> main(["--version"])
    promptkit ...
    0
    """
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help / --version (0) or a usage error (2)
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    try:
        code: int = args.handler(args, out, err)
        return code
    except CLIError as exc:
        print(f"promptkit: error: {exc}", file=err)
        return exc.code
    except PromptkitError as exc:  # any library error is bad input: one line, exit 1
        if os.environ.get(DEBUG_ENV):
            raise
        print(f"promptkit: error: {exc}", file=err)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("promptkit: interrupted", file=err)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
