"""The report's files: :func:`write_report` is the one function that decides which files an analysis
writes into its output directory (``promptkit analyze --out DIR`` calls it).

>>> import tempfile
>>> from promptkit.analysis import analyze_requests
>>> result = analyze_requests([{"messages": [{"role": "user", "content": "hi"}]}], provider="exact")
>>> written = write_report(result, tempfile.mkdtemp(), formats=("parquet", "csv"))
>>> [p.name for p in written.paths]
['requests.parquet', 'requests.csv']
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs
import polars as pl

from promptkit.errors import ReportInputError

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.analysis.result import AnalysisResult

__all__ = ["REPORT_FORMATS", "ReportFiles", "check_out_dir", "report_formats", "write_report"]

#: What :func:`write_report` can write: ``parquet`` / ``csv`` (the per-request table), ``summary``
#: (``summary.txt``: the text the terminal shows), ``causes`` (``causes.csv``, and ``writes.csv`` /
#: ``reads-invariant.csv`` when the analysis has cache writes), ``problems`` (``problems.csv`` when a
#: record was skipped), ``html`` (``report.html``) and ``png`` (the plots).
REPORT_FORMATS: Final[tuple[str, ...]] = ("parquet", "csv", "summary", "causes", "problems", "html", "png")


def report_formats(*, html: bool = True, plots: bool = True) -> list[str]:
    """The formats of :data:`REPORT_FORMATS` to write: all of them, less ``html`` (``html=False``,
    ``--no-html``) and ``png`` (``plots=False``, ``--no-plots``).

    >>> report_formats(plots=False)
    ['parquet', 'csv', 'summary', 'causes', 'problems', 'html']
    """
    dropped = ({"html"} if not html else set()) | ({"png"} if not plots else set())
    return [f for f in REPORT_FORMATS if f not in dropped]


@attrs.frozen(slots=True)
class ReportFiles:
    """What :func:`write_report` wrote (``paths``, in order) and why a file was left out (``notes``)."""

    paths: tuple[Path, ...]
    notes: tuple[str, ...] = ()


def check_out_dir(out: str | os.PathLike[str], *, what: str = "--out") -> Path:
    """``out`` as a directory to write into: a clear :class:`~promptkit.errors.ReportInputError` when it
    names an existing file (or sits below one).

    >>> import tempfile
    >>> f = Path(tempfile.mkdtemp()) / "taken"
    >>> _ = f.write_text("x")
    >>> check_out_dir(f)
    Traceback (most recent call last):
    ...
    promptkit.errors.ReportInputError: --out ...taken: is an existing file, not a directory; name a directory (it is created if missing) or remove the file
    """
    path = Path(out)
    for p in (path, *path.parents):
        if p.exists() and not p.is_dir():
            shown = f"{path}" if p == path else f"{path} (its parent {p})"
            raise ReportInputError(
                f"{what} {shown}: is an existing file, not a directory; name a directory (it is created if "
                "missing) or remove the file"
            )
    return path


#: What a spreadsheet reads as the start of a formula (OWASP, CSV injection:
#: https://owasp.org/www-community/attacks/CSV_Injection).
_FORMULA_START: Final[str] = r"^[=+\-@\t\r]"


def write_csv(frame: pl.DataFrame, path: Path) -> None:
    """Write ``frame`` as CSV with every text cell that a spreadsheet would run as a formula (a session id
    ``=HYPERLINK(...)``, ``+1``, ``-2``, ``@SUM``) prefixed by ``'``, so it opens as text; numbers are
    left as they are (the Parquet file keeps the raw values)."""
    text = [c for c, t in frame.schema.items() if t == pl.String]
    safe = frame.with_columns(
        pl.when(pl.col(c).str.contains(_FORMULA_START))
        .then(pl.lit("'") + pl.col(c))
        .otherwise(pl.col(c))
        .alias(c)
        for c in text
    )
    safe.write_csv(path)


def _has_writes(requests: pl.DataFrame) -> bool:
    return any(
        c in requests.columns and bool((requests[c].fill_null(0) > 0).any())
        for c in ("reported_cache_write_tokens", "predicted_cache_write_tokens")
    )


def _flat(requests: pl.DataFrame) -> pl.DataFrame:
    """CSV holds scalars only: nested columns (lists, structs) as JSON text."""
    nested = [
        c for c, t in requests.schema.items() if isinstance(t, pl.List | pl.Array | pl.Struct | pl.Object)
    ]
    return requests.with_columns(
        pl.col(c).map_elements(
            lambda v: json.dumps(v.to_list() if hasattr(v, "to_list") else v, default=str),
            return_dtype=pl.String,
        )
        for c in nested
    )


def write_report(
    result: AnalysisResult,
    out: str | os.PathLike[str],
    *,
    formats: Iterable[str] = REPORT_FORMATS,
    summary_text: str | None = None,
    tables: Mapping[str, pl.DataFrame] | None = None,
    html_path: str | os.PathLike[str] | None = None,
    sources: Sequence[str] = (),
    progress: Any = None,
) -> ReportFiles:
    """Write the report of ``result`` into the directory ``out`` (created if missing): the files of
    ``formats`` (names from :data:`REPORT_FORMATS`), and only those.

    ``summary_text``: what ``summary.txt`` holds (default: :func:`~promptkit.report.format_summary`
    of ``tables``); ``tables``: :func:`~promptkit.report.summarize`'s (computed when needed);
    ``html_path``: where ``report.html`` goes (default ``out/report.html``); ``sources``: the analyzed
    paths as the report names them; ``progress``: a ``phase(name)`` context-manager factory timing each
    step (None: none). Raises :class:`~promptkit.errors.ReportInputError` for an unknown format or an
    ``out`` that is a file.
    """
    import contextlib

    wanted = list(dict.fromkeys(formats))
    unknown = [f for f in wanted if f not in REPORT_FORMATS]
    if unknown:
        raise ReportInputError(
            f"write_report: unknown format(s) {', '.join(map(repr, unknown))}; known: {', '.join(REPORT_FORMATS)}"
        )
    directory = check_out_dir(out)
    directory.mkdir(parents=True, exist_ok=True)
    phase = progress if progress is not None else (lambda name: contextlib.nullcontext())
    requests: pl.DataFrame = result.requests
    written: list[Path] = []
    notes: list[str] = []
    if tables is None and ("summary" in wanted or "html" in wanted):
        from promptkit.report.text import summarize

        tables = summarize(result)
    if "parquet" in wanted:
        requests.write_parquet(directory / "requests.parquet")
        written.append(directory / "requests.parquet")
    if "csv" in wanted:
        write_csv(_flat(requests), directory / "requests.csv")
        written.append(directory / "requests.csv")
    if "summary" in wanted:
        from promptkit.report.text import format_summary

        assert tables is not None
        text = summary_text if summary_text is not None else format_summary(tables, width=200)
        (directory / "summary.txt").write_text(text, encoding="utf-8")
        written.append(directory / "summary.txt")
    if "causes" in wanted and hasattr(result, "cache_model"):
        write_csv(result.causes, directory / "causes.csv")
        written.append(directory / "causes.csv")
        if _has_writes(requests):
            from promptkit.report.causes import reads_invariant, write_accounting

            write_csv(write_accounting(result), directory / "writes.csv")
            written.append(directory / "writes.csv")
            if "reported_cache_write_tokens" in requests.columns and bool(
                requests["reported_cache_write_tokens"].is_not_null().any()
            ):
                write_csv(reads_invariant(result), directory / "reads-invariant.csv")
                written.append(directory / "reads-invariant.csv")
    problems = getattr(result, "problems", None)
    if "problems" in wanted and isinstance(problems, pl.DataFrame) and problems.height:
        write_csv(problems, directory / "problems.csv")
        written.append(directory / "problems.csv")
    if "html" in wanted:
        from promptkit.report.html import write_html

        target = Path(html_path) if html_path is not None else directory / "report.html"
        if target.is_dir():
            raise ReportInputError(f"--html {target}: is a directory; name the HTML file to write")
        with phase("html"):
            written.append(write_html(result, target, tables=tables, sources=list(sources)))
    if "png" in wanted:
        from promptkit.report.plots import save_plots

        with phase("plots"):
            plots = save_plots(result, directory)
        written += list(plots.values())
        notes += [f"plot skipped: {note}" for note in getattr(plots, "notes", ())]
    return ReportFiles(paths=tuple(written), notes=tuple(notes))
