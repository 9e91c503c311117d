"""The ``promptkit`` command line: a thin shell over :mod:`promptkit.analysis`.

``promptkit analyze [PATH ...]`` analyzes request logs (JSONL or ``.traj.json``), prints the summary
tables with a legend of their columns (``--json``: a machine-readable summary; ``--quiet``: the headline
line only), and writes the per-request table (parquet and CSV), the HTML report (``report.html``) and
the plots (PNG; a plot with nothing to show is skipped, and stderr says so) into ``--out``.
With no PATH it analyzes the log bundled with the package (``promptkit/data/default-session.jsonl``).

Exit codes, the same for every command (:data:`EXIT_CODES`): 0 pass, 1 a threshold failed (``check``),
2 bad input or usage (a missing path, an unreadable log, a bad option; the message names what and where),
130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import importlib.resources
import os
import shutil
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from promptkit.cli._common import (
    DEBUG_ENV as DEBUG_ENV,
    DEFAULT_LOG as DEFAULT_LOG,
    DEFAULT_OUT as DEFAULT_OUT,
    EXIT_CODES as EXIT_CODES,
    EXIT_FAILED as EXIT_FAILED,
    EXIT_INPUT as EXIT_INPUT,
    EXIT_INTERRUPTED as EXIT_INTERRUPTED,
    EXIT_OK as EXIT_OK,
    EXIT_USAGE as EXIT_USAGE,
    CLIError as CLIError,
    check_paths as _check_paths,
    emit as _emit,
)
from promptkit.cli._fleet import _add_fleet_command
from promptkit.errors import PromptkitError


def _version() -> str:
    try:
        from promptkit import __version__

        return __version__
    except ImportError:  # an editable install made before promptkit/__init__.py existed
        from importlib.metadata import version

        return version("promptkit")


__all__ = ["DEFAULT_LOG", "DEFAULT_OUT", "EXIT_CODES", "CLIError", "build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose "invalid choice" errors (a mistyped command, ``--view``, ``--engine``)
    end with the closest choice: ``did you mean 'analyze'?``."""

    def error(self, message: str) -> Any:  # argparse's signature (NoReturn)
        import difflib
        import re

        found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if found:
            choices = re.findall(r"'([^']*)'", found.group(2))
            close = difflib.get_close_matches(found.group(1), choices, n=1, cutoff=0.6)
            if close:
                message += f"; did you mean {close[0]!r}?"
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, with one subparser per command, each built by its own ``_add_*`` function."""
    parser = _Parser(
        prog="promptkit",
        description="Build LLM requests that keep the provider's prefix cache hitting, and measure it.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in (
        _add_analyze_command,
        _add_calibrate_command,
        _add_check_command,
        _add_lint_command,
        _add_lint_code_command,
        _add_catalog_commands,
        _add_proxy_command,
        _add_whatif_command,
        _add_fleet_command,
        _add_statusline_command,
    ):
        add(commands)
    return parser


# --- promptkit analyze --------------------------------------------------------------------------------


def _add_analyze_command(commands: Any) -> None:
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
    _add_analysis_options(analyze)
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
        help="JSON or CSV prices (USD per million tokens) overriding the built-in table; optional "
        "above_tokens and above_* columns price prompts longer than above_tokens",
    )
    analyze.add_argument("--no-plots", action="store_true", help="do not write PNG plots")
    _add_engine_options(analyze)
    _add_output_options(analyze)
    _add_progress_options(analyze)
    analyze.set_defaults(handler=_run_analyze_paused)


class _ProviderOption(argparse.Action):
    """``--provider NAME``, whose help lists every registered provider: read from the registry when the
    help is shown (plugins included), so a parse costs no import of the providers."""

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option: Any = None) -> None:
        setattr(namespace, self.dest, values)

    @property
    def help(self) -> str:
        from promptkit.providers.registry import available_providers

        return (
            f"provider whose tokenizer and cache rules apply ({', '.join(available_providers())}; see "
            "promptkit providers); default: each session's, recognised from the log's URL, model name or usage"
        )

    @help.setter
    def help(self, value: str | None) -> None:  # argparse sets it: the property computes it instead
        pass


def _add_analysis_options(analyze: argparse.ArgumentParser) -> None:
    """--provider, --format, --tokenizer, --render and --view of ``promptkit analyze``."""
    analyze.add_argument("--provider", metavar="NAME", action=_ProviderOption)
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


def _add_engine_options(analyze: argparse.ArgumentParser) -> None:
    """--jobs, --engine, --scheduler and --stream: where and how the analysis runs."""
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
        help="read the logs by streaming and analyze session by session (consecutive view; less memory; "
        "from 32 MB of logs one job streams either view in time order without it)",
    )


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
        help="print exactly one line: the headline (errors still go to stderr)",
    )


def _add_progress_options(analyze: argparse.ArgumentParser) -> None:
    """--progress / --no-progress, --calibration and --advice."""
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
    analyze.add_argument(
        "--advice",
        action="store_true",
        help="give each of the largest breaks its fix, measured by replay (promptkit whatif --suggest's "
        "candidates; as many more analyses as there are candidates)",
    )
    analyze.add_argument(
        "--redact-outputs",
        action="store_true",
        help="redact keys and URL credentials in every text the report copies from the prompts (the "
        "cached and sent text of each break, requests.csv, the HTML page): for a report to share",
    )


def _run_analyze_paused(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    # perf: what the command imports and reads lives until it exits, and the analysis pauses the cyclic
    # GC anyway (promptkit.analysis.runtime.gc_paused): with it on, its collections rescan every module
    # object imported so far; garbage is still freed by reference count. At exit the interpreter's last
    # collection would rescan everything the command built, in a process whose memory goes back whole:
    # gc.freeze, run at exit, leaves it out (each a tenth of a second of a short run)
    from promptkit.analysis.runtime import gc_paused

    atexit.unregister(gc.freeze)  # once, however many commands a process runs
    atexit.register(gc.freeze)
    with gc_paused():
        return _run_analyze(args, stdout, stderr)


def _run_analyze(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    if args.jobs > 1 and args.engine == "local":
        # perf: the workers' fork server imports the analysis while this process does the same (not for
        # logs too small for workers: the analysis then runs in this process)
        from promptkit.analysis.executors import may_start_workers, named_tokenizers, start_fork_server

        if may_start_workers(args.paths or ["-"]):
            # the tokenizers named, else the server finds those of the providers of a few of the logs:
            # loaded once, in the server, rather than by every worker
            named = named_tokenizers(args.tokenizer, args.provider)
            start_fork_server(named, logs=() if named else args.paths or ())
    from promptkit.commands.analyze import run_analyze
    from promptkit.errors import ReportInputError
    from promptkit.report.files import check_out_dir, report_formats
    from promptkit.whatif.cli import replay_arguments

    prices = _prices(args.prices)
    _check_names(args)
    try:
        out = check_out_dir(args.out)
    except ReportInputError as exc:
        raise CLIError(str(exc), EXIT_USAGE) from exc
    progress = args.progress if args.progress is not None else stderr.isatty()
    with contextlib.ExitStack() as stack:
        paths = _log_paths(args, stack, stderr)
        if args.scheduler is not None and args.engine != "dask":
            raise CLIError("--scheduler needs --engine dask", EXIT_USAGE)
        with _bad_input(paths):
            run = run_analyze(
                paths, out=out, provider=args.provider, format=args.format, tokenizer=args.tokenizer,
                render=args.render, view=args.view, model=args.model, prices=prices, jobs=args.jobs,
                engine=args.engine, scheduler=args.scheduler, stream=args.stream, calibration=args.calibration,
                advice=args.advice, replay_args=replay_arguments(args) if args.advice else "",
                formats=report_formats(html=not args.no_html, plots=not args.no_plots), html_path=args.html,
                sources=_sources(args, paths), progress=progress, progress_file=stderr,
                redact_outputs=args.redact_outputs,
            )  # fmt: skip
    warning = (run.expectation or {}).get("warning")
    if warning:  # a calibration fitted elsewhere: said even with --quiet / --json
        print(f"promptkit: warning: {warning}", file=stderr)
    if not (args.quiet or args.json):
        for note in run.written.notes:
            print(f"promptkit: {note}", file=stderr)
    if args.json:
        _emit(stdout, run.json_text())
    elif args.quiet:
        _emit(stdout, run.quiet_text())
    else:
        # a terminal's own width; 200 when stdout is not a terminal (a file or pipe: no need to wrap)
        _emit(stdout, run.text(width=max(60, shutil.get_terminal_size((200, 24)).columns)))
        _emit(stdout, run.wrote_line())
    return EXIT_OK


def _sources(args: argparse.Namespace, paths: Sequence[Path]) -> list[str]:
    """The analyzed paths as the report names them (the bundled log by its package path)."""
    return [str(p) for p in paths] if args.paths else [f"the bundled log promptkit/{DEFAULT_LOG}"]


# --- promptkit calibrate, check, lint, formats, providers ---------------------------------------------


def _add_log_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="log files or directories (default: the bundled log promptkit/" + DEFAULT_LOG + ")",
    )
    sub.add_argument("--provider", metavar="NAME", help="provider (default: each session's)")
    sub.add_argument("--format", metavar="NAME", help="log format (default: detected per file)")
    sub.add_argument(
        "--view",
        choices=("consecutive", "simulated"),
        default=None,
        help="analysis view (default: simulated for conversation trees such as Claude Code projects, "
        "else consecutive)",
    )


def _add_calibrate_command(commands: Any) -> None:
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


def _run_calibrate(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from promptkit.commands.calibrate import run_calibrate

    with contextlib.ExitStack() as stack:
        paths = _log_paths(args, stack, stderr)
        with _bad_input(paths):
            text = run_calibrate(
                paths, out=args.out, provider=args.provider, format=args.format, view=args.view
            )
    _emit(stdout, text)
    return EXIT_OK


def _add_check_command(commands: Any) -> None:
    check = commands.add_parser(
        "check",
        help="CI gate: exit 1 when a session's hit ratio or layout loss misses a threshold",
        description="Analyze the logs and check every session: exit 1 printing the failing sessions and their "
        "top causes, 0 when all pass.",
    )
    _add_log_options(check)
    check.add_argument(
        "--min-hit",
        metavar="X",
        type=_ratio,
        help="minimum hit ratio per session: a ratio (0-1, e.g. 0.80) or a percentage (80%%)",
    )
    check.add_argument(
        "--max-layout-loss",
        metavar="Y",
        type=_ratio,
        help="maximum share of the prompt lost to the layout: a ratio (0-1, e.g. 0.10) or a percentage (10%%)",
    )
    check.set_defaults(handler=_run_check)


def _run_check(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from promptkit.commands.check import run_check

    if args.min_hit is None and args.max_layout_loss is None:
        raise CLIError("check: give --min-hit and/or --max-layout-loss", EXIT_USAGE)
    with contextlib.ExitStack() as stack:
        paths = _log_paths(args, stack, stderr)
        with _bad_input(paths):
            run = run_check(
                paths, min_hit=args.min_hit, max_layout_loss=args.max_layout_loss, provider=args.provider,
                format=args.format, view=args.view,
            )  # fmt: skip
    _emit(stdout, run.text)
    return EXIT_OK if run.passed else EXIT_FAILED


def _add_lint_command(commands: Any) -> None:
    lint = commands.add_parser(
        "lint",
        help="volatile-value lint: head regions that change every request, what they cost, how to fix them",
        description="Lint the logs: every head region that changes between requests, the tokens it costs, "
        "and its fix as a `promptkit whatif` command with the saving measured by replay (hit ratio and "
        "cost before and after, for the complete set of changes that gives it).",
    )
    _add_log_options(lint)
    lint.add_argument("--json", action="store_true", help="print the findings and their fixes as JSON")
    lint.add_argument("--model", metavar="NAME", help="model to price the calls at (default: the log's)")
    lint.add_argument(
        "--prices", metavar="FILE", type=Path, help="JSON or CSV prices overriding the built-ins"
    )
    lint.set_defaults(handler=_run_lint)


def _run_lint(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from promptkit.commands.lint import run_lint
    from promptkit.whatif.cli import replay_arguments

    prices = _prices(args.prices)
    with contextlib.ExitStack() as stack:
        paths = _log_paths(args, stack, stderr)
        with _bad_input(paths):
            text = run_lint(
                paths, prices=prices, model=args.model, view=args.view, provider=args.provider,
                format=args.format, as_json=args.json, replay_args=replay_arguments(args),
            )  # fmt: skip
    _emit(stdout, text)
    return EXIT_OK


def _add_lint_code_command(commands: Any) -> None:
    lint_code = commands.add_parser(
        "lint-code",
        help="static lint of Python code that builds LLM requests: changing values before repeated content",
        description="Read the Python files (never run them) and report every value that changes between "
        "calls (a clock, an id, a set's order, the turn's input) placed before content that repeats (system "
        "prompt, tools, the start of the history). Exit 1 with findings, 0 without, 2 on bad input.",
    )
    lint_code.add_argument("paths", nargs="+", metavar="PATH", type=Path, help="Python files or folders")
    lint_code.add_argument(
        "--format", choices=("text", "json", "sarif"), default="text", help="output format (default: text)"
    )
    lint_code.set_defaults(handler=_run_lint_code)


def _run_lint_code(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from promptkit.commands.lint_code import run_lint_code
    from promptkit.errors import CodeInputError

    try:
        run = run_lint_code(args.paths, format=args.format, version=_version())
    except CodeInputError as exc:
        raise CLIError(str(exc), EXIT_USAGE) from exc
    _emit(stdout, run.text)
    return run.code


def _add_catalog_commands(commands: Any) -> None:
    formats = commands.add_parser(
        "formats", help="list the log formats promptkit reads (what --format takes) and what each reads"
    )
    formats.set_defaults(handler=_run_formats)
    providers = commands.add_parser(
        "providers",
        help="list the provider profiles (what --provider takes): tokenizer, cache rules, minimum, TTLs, "
        "priced models and the date of their prices",
    )
    providers.add_argument("--json", action="store_true", help="print every profile's fields as JSON")
    providers.set_defaults(handler=_run_providers)


def _run_formats(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from promptkit.commands.catalog import formats_text

    _emit(stdout, formats_text())
    return EXIT_OK


def _run_providers(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from promptkit.commands.catalog import providers_text

    _emit(stdout, providers_text(as_json=args.json))
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
    proxy.add_argument(
        "--client-timeout",
        type=_seconds,
        default=60.0,
        metavar="SECONDS",
        help="how long a client may take to send its request body; a slower one gets 408 (default: %(default)s)",
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
            client_timeout=args.client_timeout,
            predict=not args.no_predict,
            provider=args.provider,
        )
        run_proxy(config, out=lambda text: print(text, file=stderr, flush=True))
    except ProxyConfigError as exc:
        raise CLIError(str(exc)) from exc
    except OSError as exc:
        raise CLIError(f"--listen {args.listen}: {exc.strerror or exc}") from exc
    return EXIT_OK


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
    whatif.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="log files or directories (default: the bundled log promptkit/" + DEFAULT_LOG + ")",
    )
    what = whatif.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--transform",
        action="append",
        metavar="SPEC",
        help="a transform to apply (repeatable, applied in order)",
    )
    what.add_argument("--suggest", action="store_true", help="derive, replay and rank candidate transforms")
    whatif.add_argument("--json", action="store_true", help="print JSON instead of tables")
    whatif.add_argument(
        "--limit", type=int, default=10, metavar="N", help="suggestions shown (default: %(default)s)"
    )
    whatif.add_argument(
        "--provider", metavar="NAME", help="provider whose rules apply (default: each session's)"
    )
    whatif.add_argument("--format", metavar="NAME", help="read every file as this log format")
    whatif.add_argument("--view", choices=("consecutive", "simulated"), default="consecutive")
    whatif.add_argument("--model", metavar="NAME", help="model to price the calls at (default: the log's)")
    whatif.add_argument(
        "--prices", metavar="FILE", type=Path, help="JSON or CSV prices overriding the built-ins"
    )
    whatif.set_defaults(handler=_run_whatif)


def _run_whatif(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from promptkit.whatif.cli import run_whatif

    with contextlib.ExitStack() as stack:
        paths = _log_paths(args, stack, stderr)
        try:
            text = run_whatif(args, paths=paths)
        except PromptkitError as exc:
            from promptkit.errors import UsageError

            raise CLIError(str(exc), EXIT_USAGE if isinstance(exc, UsageError) else EXIT_INPUT) from exc
        except _input_errors() as exc:
            if isinstance(exc, KeyError | IndexError) or os.environ.get(DEBUG_ENV):
                raise
            raise CLIError(_with_path(exc, paths)) from exc
    _emit(stdout, text)
    return EXIT_OK


# --- promptkit statusline -----------------------------------------------------------------------------
def _moment(text: str) -> float:
    """``--now``: seconds since the epoch, or an ISO 8601 time (naive = UTC)."""
    from datetime import UTC, datetime

    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither seconds nor an ISO 8601 time") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _add_statusline_command(commands: Any) -> None:
    statusline = commands.add_parser(
        "statusline",
        help="Claude Code's status line: hit ratio, time left before the cache expires, cost, last miss",
        description="Read the JSON Claude Code passes to a status-line command on stdin and print one line: "
        "the session's cache hit ratio, the time left before its cache expires ('expired' once past), the "
        "cost so far and the cause of the last miss (see docs/how-to/cache-clock.md). Bad input prints a "
        "short line and exits 0, so the prompt never breaks.",
    )
    statusline.add_argument(
        "--now",
        type=_moment,
        metavar="TIME",
        help="the time to count from (seconds or ISO 8601; default: now)",
    )
    statusline.add_argument(
        "--cache-dir", type=Path, metavar="DIR",
        help="where to keep what it learnt between runs (default: $XDG_CACHE_HOME/promptkit/statusline)",
    )  # fmt: skip
    statusline.add_argument(
        "--no-cache", action="store_true", help="keep no state: read the whole transcript"
    )
    statusline.set_defaults(handler=_run_statusline)


def _run_statusline(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from promptkit.commands.statusline import default_cache_dir, run_statusline

    cache_dir = None if args.no_cache else (args.cache_dir or default_cache_dir())
    return run_statusline(sys.stdin, stdout, now=args.now, cache_dir=cache_dir)


# --- promptkit fleet ----------------------------------------------------------------------------------


def _ratio(text: str) -> float:
    """An argparse type: a ratio in [0, 1], or a percentage with its sign (``80%`` is 0.80: the sign
    says what the number means); ``80`` is refused with a hint at ``0.80``."""
    raw = text.strip()
    percent = raw.endswith("%")
    try:
        value = float(raw.removesuffix("%")) / (100.0 if percent else 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a ratio between 0 and 1 (e.g. 0.80) or a percentage (80%), got {text!r}"
        ) from None
    if percent and not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a percentage between 0% and 100%, got {text!r}")
    if not 0.0 <= value <= 1.0:
        hint = f"; did you mean {value / 100:.2f}?" if 1.0 < value <= 100.0 else ""
        raise argparse.ArgumentTypeError(f"expected a ratio between 0 and 1, got {text}{hint}")
    return value


def _log_paths(args: argparse.Namespace, stack: contextlib.ExitStack, stderr: TextIO) -> list[Path]:
    """The paths to read: the ones given, else the bundled log (and stderr says so)."""
    if args.paths:
        _check_paths(args.paths)
        return list(args.paths)
    path = _default_log(stack)
    if not (getattr(args, "quiet", False) or getattr(args, "json", False)):
        print(f"promptkit: no PATH given, analyzing the bundled log {path}", file=stderr)
    return [path]


def _default_log(stack: contextlib.ExitStack) -> Path:
    resource: Any
    try:
        resource = importlib.resources.files("promptkit").joinpath(DEFAULT_LOG)
    except (NotADirectoryError, TypeError):
        # an editable install made before promptkit/__init__.py existed registers promptkit as a
        # namespace package whose resource reader fails; the files sit next to this module anyway
        resource = Path(__file__).parents[1] / DEFAULT_LOG
    if not resource.is_file():
        raise CLIError(
            f"no PATH given and the bundled fixture log promptkit/{DEFAULT_LOG} is missing from this "
            "installation; pass the log files to analyze"
        )
    return stack.enter_context(importlib.resources.as_file(resource))


def _check_names(args: argparse.Namespace) -> None:
    """--provider and --format name known ones (a usage error listing them otherwise)."""
    if args.provider is not None:
        from promptkit.providers.registry import available_providers

        if args.provider not in available_providers():
            raise CLIError(
                f"unknown provider {args.provider!r}; known: {', '.join(available_providers())} "
                "(see promptkit providers)",
                EXIT_USAGE,
            )
    if args.format is not None:
        from promptkit.formats import available_formats

        if args.format not in available_formats():
            raise CLIError(
                f"unknown log format {args.format!r}; known: {', '.join(available_formats())} "
                "(see promptkit formats)",
                EXIT_USAGE,
            )


def _prices(path: Path | None) -> Any:
    if path is None:
        return None
    from promptkit.report import PriceError, load_prices

    try:
        return load_prices(path)
    except PriceError as exc:
        raise CLIError(str(exc)) from exc


@contextlib.contextmanager
def _bad_input(paths: Sequence[Path]) -> Iterator[None]:
    """Errors of a command's library function as one line and an exit code: a bad report argument is a
    usage error (2); bad input is 1, its message naming the file (a ``KeyError`` or ``IndexError`` is a
    bug and keeps its traceback, as does everything with ``PROMPTKIT_DEBUG`` set)."""
    from promptkit.errors import CalibrationError, NoRequestError, OutputFileError, ReportInputError

    try:
        yield
    except CLIError:
        raise
    except ReportInputError as exc:
        raise CLIError(str(exc), EXIT_USAGE) from exc
    except (NoRequestError, OutputFileError, CalibrationError) as exc:
        raise CLIError(str(exc)) from exc
    except _input_errors() as exc:
        if isinstance(exc, KeyError | IndexError) or os.environ.get(DEBUG_ENV):
            raise  # a bug, not bad input: keep the traceback
        raise CLIError(_with_path(exc, paths)) from exc


def _input_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean bad input (reported in one line), as opposed to a bug (traceback)."""
    return (PromptkitError, OSError, ValueError, LookupError, UnicodeError)


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
    except PromptkitError as exc:  # any library error is bad input: one line, exit 2
        if os.environ.get(DEBUG_ENV):
            raise
        print(f"promptkit: error: {exc}", file=err)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("promptkit: interrupted", file=err)
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
