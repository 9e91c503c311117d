"""Reports meant to be shared, without the secrets the prompts carried (``--redact-outputs``).

An analysis copies text out of the prompts: the cached and the sent text around each break
(``divergence_prompt_text``, ``before_text``, ``after_text`` in ``requests.csv`` and the HTML page), a
problem's reason. A key a user pasted into a prompt would travel with the report. :func:`redact_result`
passes every text column of a result through the redaction the proxy and the capture wrapper apply to
what they record (:func:`~promptkit.formats.wire.redact.redact_text`: the key shapes and the credentials
of every URL), and through the shapes of keys cut short by an excerpt
(:data:`~promptkit.formats.wire.redact.CUT_KEY_PATTERNS`), so every file and table made from it (CSV,
Parquet, summary, HTML, the terminal) holds ``[REDACTED]`` instead.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

__all__ = ["redact_result"]


def _patterns() -> list[re.Pattern[str]]:
    from promptkit.formats.wire.redact import CUT_KEY_PATTERNS, default_patterns

    return [*default_patterns(), *(re.compile(p) for p in CUT_KEY_PATTERNS)]


def _redacted(frame: pl.DataFrame) -> pl.DataFrame:
    import polars as pl

    from promptkit.formats.wire.redact import redact_text

    patterns = _patterns()
    texts = [name for name, dtype in frame.schema.items() if dtype == pl.String]
    return frame.with_columns(
        pl.col(name).map_elements(lambda t: redact_text(t, patterns), return_dtype=pl.String, skip_nulls=True)
        for name in texts
    )


def redact_result(result: Any) -> Any:
    """``result`` (an :class:`~promptkit.analysis.AnalysisResult`) with every text of its requests and
    problems redacted; the numbers are untouched.

    >>> import polars as pl
    >>> from promptkit.analysis import analyze_requests
    >>> result = analyze_requests([{"messages": [{"role": "user", "content": "hi"}]}], provider="exact")
    >>> pasted = result.requests.with_columns(pl.lit("key sk-proj-a1B2a1B2a1B2a1B2a1B2").alias("after_text"))
    >>> redact_result(attrs.evolve(result, requests=pasted)).requests["after_text"].to_list()
    ['key [REDACTED]']
    """
    return attrs.evolve(result, requests=_redacted(result.requests), problems=_redacted(result.problems))
