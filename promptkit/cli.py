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
        default="consecutive",
        help="consecutive: each request against the previous one of its session; "
        "simulated: a shared cache over every earlier request (default: %(default)s)",
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
    _add_output_options(analyze)
    progress = analyze.add_mutually_exclusive_group()
    progress.add_argument(
        "--progress", dest="progress", action="store_true", default=None, help="always show the progress bar"
    )
    progress.add_argument(
        "--no-progress", dest="progress", action="store_false", help="never show the progress bar"
    )
    analyze.set_defaults(handler=_run_analyze)
    _add_proxy_command(commands)
    return parser


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
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="upstream silence before giving up (default: %(default)s)",
    )
    proxy.set_defaults(handler=_run_proxy)


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
    accepted = inspect.signature(analyze).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
    unsupported = [k for k in options if k not in accepted and not takes_any]
    if unsupported:
        raise CLIError(f"this version of analyze() does not accept --{unsupported[0]}", EXIT_USAGE)
    return analyze(paths, **options)


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
    flat.write_csv(written[1])
    written[2].write_text(summary_text, encoding="utf-8")
    problems = getattr(result, "problems", None)
    if isinstance(problems, pl.DataFrame) and problems.height:
        problems.write_csv(out / "problems.csv")
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
    tables = summarize(result, prices=prices, model=args.model)
    header = _header(result, paths)
    if args.provider is None:
        defaulted = any("name no provider and none was recognised" in n for n in getattr(result, "notes", ()))
        header += (
            "\n(provider: no session named one or was recognised; the default was used, see the notes)"
            if defaulted
            else "\n(provider: recognised per session from the log's URLs, model names or usage)"
        )
    if not (args.quiet or args.json):
        # a terminal's own width; 200 when stdout is not a terminal (a file or pipe: no need to wrap)
        width = max(60, shutil.get_terminal_size((200, 24)).columns)
        _emit(stdout, header + "\n\n" + format_summary(tables, width=width) + _legend(tables))

    out: Path = args.out
    try:
        written = _write_tables(
            result, out, header + "\n\n" + format_summary(tables, width=200) + _legend(tables)
        )
        if not args.no_html:
            from promptkit.cache.html import write_html

            target = args.html if args.html is not None else out / "report.html"
            written.append(write_html(result, target, tables=tables, sources=_sources(args, paths)))
        if not args.no_plots:
            written += _save_plots(result, out, info)
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


def _save_plots(result: Any, out: Path, info: _Info) -> list[Path]:
    """The PNG plots; a plot with nothing to show is not written, and stderr says so."""
    from promptkit.cache.plots import save_plots

    skipped: dict[str, str] = {}
    plots = save_plots(result, out, skipped=skipped)
    for name, why in skipped.items():
        info(f"promptkit: {name}.png not written: {why}")
    sessions = result.requests["session"].n_unique()
    drawn = sum(1 for name in plots if name.startswith("composition-"))
    if 0 < drawn < sessions:
        info(f"promptkit: composition plotted for the first {drawn} of {sessions} sessions")
    return list(plots.values())


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

    >>> main(["--version"])  # doctest: +SKIP
    promptkit 0.1.0
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
    except KeyboardInterrupt:
        print("promptkit: interrupted", file=err)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
