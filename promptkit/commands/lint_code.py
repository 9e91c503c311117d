"""``promptkit lint-code`` as one function: :func:`run_lint_code` lints the Python files of the paths
given (:func:`promptkit.codelint.lint_code_result`) and returns the text to print and the exit code:
1 when there are findings, 0 when there are none (bad input raises
:class:`~promptkit.errors.CodeInputError`, which the command line turns into exit code 2).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import attrs

__all__ = ["LintCodeRun", "run_lint_code"]


@attrs.frozen
class LintCodeRun:
    """What the command prints and the exit code it returns."""

    text: str
    code: int


def run_lint_code(
    paths: Sequence[str | os.PathLike[str]], *, format: str = "text", version: str = "0"
) -> LintCodeRun:
    """Lint ``paths`` and format the result as ``text``, ``json`` or ``sarif`` (``version``: the
    tool version a SARIF log names).

    >>> run = run_lint_code(["tests/lint_code/c02_sorted_set.py"])
    >>> run.code, run.text.splitlines()[-1]
    (0, 'promptkit lint-code: 1 file, no changing value before repeated content')
    """
    from promptkit.codelint import format_result, lint_code_result

    result = lint_code_result(paths)
    return LintCodeRun(format_result(result, format, version), 1 if result.findings else 0)
