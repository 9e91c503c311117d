"""``promptkit analyze`` as one function: :func:`run_analyze` analyzes the logs, applies a calibration,
computes the summary tables (with each large break's measured fix when asked), and writes the report
files; the :class:`AnalyzeRun` it returns holds what the command prints (the tables, ``--json`` or
``--quiet``). :func:`analyze_logs` is the analysis the other log commands (``check``, ``calibrate``)
share.

>>> import tempfile
>>> run = run_analyze(["fixtures/logs/session-before.jsonl"], out=tempfile.mkdtemp(), formats=["csv"])
>>> run.head.splitlines()[0]
'71 requests in 1 sessions from 1 file(s); provider: deepseek; tokenizer: deepseek; render: deepseek-v3.2; cache model: unit-prefix; view: consecutive'
>>> [p.name for p in run.written.paths]
['requests.csv']
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import attrs

from promptkit.errors import NoRequestError, OutputFileError

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from promptkit.analysis.result import AnalysisResult
    from promptkit.report.files import ReportFiles

__all__ = ["AnalyzeRun", "analyze_logs", "no_request_error", "run_analyze"]


def no_request_error(paths: Sequence[object], problems: pl.DataFrame | None = None) -> NoRequestError:
    """The error for logs of which not one request could be analyzed, naming the paths and, with the
    ``problems`` frame, how many records were skipped and the first one's file, line and reason."""
    detail = ""
    if problems is not None:
        first = problems.row(0, named=True) if problems.height else None
        where = f"{first['file']}:{first['line']}" if first and first["line"] is not None else None
        first_text = f"; first: {where or first['file']}: {first['reason']}" if first else ""
        detail = f" ({problems.height} problem(s){first_text})"
    return NoRequestError(f"{', '.join(map(str, paths))}: no request could be analyzed{detail}")


def analyze_logs(
    paths: Sequence[str | os.PathLike[str]],
    *,
    view: str | None = None,
    provider: str | None = None,
    format: str | None = None,
) -> AnalysisResult:
    """:func:`~promptkit.analysis.analyze` of ``paths``; a :class:`~promptkit.errors.NoRequestError`
    when not one request could be analyzed."""
    from promptkit.analysis import analyze  # looked up on the package: tests replace it there

    result: AnalysisResult = analyze(list(paths), view=view, provider=provider, format=format)
    if result.requests.height == 0:
        raise no_request_error(paths)
    return result


@attrs.frozen(slots=True, eq=False)
class AnalyzeRun:
    """What :func:`run_analyze` computed and wrote: the ``result`` (with the expectation applied), the
    summary ``tables``, the ``expectation`` (None without a calibration), the lines above the tables
    (``head``), the columns' ``legend``, the files ``written`` into ``out``, and the analyzed ``paths``."""

    result: AnalysisResult
    tables: dict[str, pl.DataFrame]
    expectation: dict[str, Any] | None
    head: str
    legend: str
    written: ReportFiles
    out: Path
    paths: tuple[Path, ...]

    def text(self, width: int = 200) -> str:
        """The terminal summary: the head, the tables at ``width`` columns and the legend."""
        from promptkit.report import format_summary

        return self.head + "\n\n" + format_summary(self.tables, width=width) + self.legend

    def wrote_line(self) -> str:
        """The line naming the files written."""
        names = ", ".join(p.name for p in self.written.paths)
        return f"\nWrote {len(self.written.paths)} files to {self.out}/: {names}\n"

    def json_text(self) -> str:
        """The ``--json`` document (:func:`~promptkit.report.summary.summary_dict`), indented."""
        from promptkit.report.summary import summary_dict

        summary = summary_dict(
            self.result,
            self.tables,
            paths=[str(p) for p in self.paths],
            files=[str(p) for p in self.written.paths],
            expectation=self.expectation,
        )
        return json.dumps(summary, indent=2, ensure_ascii=False, default=str) + "\n"

    def quiet_text(self) -> str:
        """The ``--quiet`` headline (:func:`~promptkit.report.summary.quiet_text`)."""
        from promptkit.report.summary import quiet_text

        return quiet_text(self.result, self.tables, self.expectation)


def _advised(
    tables: dict[str, pl.DataFrame], paths: list[Path], options: dict[str, Any], replay_args: str
) -> dict[str, pl.DataFrame]:
    """``tables`` with each large break's fix, measured by replay (``--advice``)."""
    from promptkit.formats import read_logs
    from promptkit.whatif.advice import lint_advice, with_break_fixes

    records = read_logs(paths, format=options["format"])
    advice = lint_advice(records, **{k: options[k] for k in ("prices", "model", "view", "provider")})
    return with_break_fixes(tables, advice, paths=replay_args)


def run_analyze(
    paths: Iterable[str | os.PathLike[str]],
    *,
    out: str | os.PathLike[str],
    provider: str | None = None,
    format: str | None = None,
    tokenizer: str | None = None,
    render: str | None = None,
    view: str | None = None,
    model: str | None = None,
    prices: Any = None,
    jobs: int = 1,
    engine: str = "local",
    scheduler: str | None = None,
    stream: bool = False,
    calibration: Any = None,
    advice: bool = False,
    replay_args: str = "",
    formats: Iterable[str] | None = None,
    html_path: str | os.PathLike[str] | None = None,
    sources: Sequence[str] | None = None,
    progress: bool = False,
    progress_file: TextIO | None = None,
    redact_outputs: bool = False,
) -> AnalyzeRun:
    """``promptkit analyze``: analyze ``paths`` (:func:`~promptkit.analysis.analyze` with ``provider``,
    ``format``, ``tokenizer``, ``render``, ``view``, ``jobs``, ``engine``, ``scheduler`` and
    ``stream``), apply ``calibration`` (:func:`~promptkit.commands.expectation.apply_expectation`), summarize
    at ``prices`` / ``model``, add each large break's measured fix when ``advice`` (its printed
    commands replay ``replay_args``), and write the files of ``formats`` (default: all of
    :data:`~promptkit.report.files.REPORT_FORMATS`) into ``out``; ``sources``: the paths as the report
    names them (default: ``paths``); ``progress``: time each step on ``progress_file``; ``redact_outputs``:
    every text the report copies from the prompts is redacted (:func:`~promptkit.report.redaction.redact_result`),
    for a report to share.

    Raises :class:`~promptkit.errors.NoRequestError` when not one request could be analyzed,
    :class:`~promptkit.errors.OutputFileError` when a file cannot be written, and the errors of the
    analysis, the calibration and the report.
    """
    from promptkit.analysis.runtime import phase
    from promptkit.commands.expectation import apply_expectation
    from promptkit.report import format_legend, format_summary, summarize
    from promptkit.report.files import REPORT_FORMATS, check_out_dir, write_report
    from promptkit.report.summary import analysis_head

    directory = check_out_dir(out)
    files = [Path(p) for p in paths]
    options = {"provider": provider, "format": format, "view": view}
    result = _analyze(
        files,
        {**options, "tokenizer": tokenizer, "render": render, "stream": stream, "progress": progress,
         "jobs": jobs, "engine": engine, "client": scheduler},
    )  # fmt: skip
    if redact_outputs:
        from promptkit.report.redaction import redact_result

        result = redact_result(result)
    result, expectation = apply_expectation(result, calibration)
    with phase("tables", enabled=progress, file=progress_file):
        tables = summarize(result, prices=prices, model=model)
    if advice:
        tables = _advised(tables, files, {**options, "prices": prices, "model": model}, replay_args)
    head = analysis_head(result, files, expectation, provider_given=provider is not None)
    legend = format_legend(tables)
    legend = "\n" + legend + "\n" if legend else ""
    try:
        written = write_report(
            result,
            directory,
            formats=REPORT_FORMATS if formats is None else formats,
            summary_text=head + "\n\n" + format_summary(tables, width=200) + legend,
            tables=tables,
            html_path=html_path,
            sources=[str(p) for p in files] if sources is None else sources,
            progress=lambda name: phase(name, enabled=progress, file=progress_file),
        )
    except OSError as exc:
        where = exc.filename or directory
        raise OutputFileError(f"{where}: cannot write the report: {exc.strerror or exc}") from exc
    return AnalyzeRun(result, dict(tables), expectation, head, legend, written, directory, tuple(files))


def _analyze(paths: list[Path], options: dict[str, Any]) -> AnalysisResult:
    from promptkit.analysis import analyze  # looked up on the package: tests replace it there

    result: AnalysisResult = analyze(paths, **options)
    if result.requests.height == 0:
        raise no_request_error(paths, result.problems)
    return result
