"""A static analysis of the Python code that builds LLM requests: values that change between calls
placed before content that repeats (``promptkit lint-code``).

The prefix cache of every provider reuses a request's prefix only while its bytes stay the same. A
clock reading, a fresh id, a set's hash order or the current turn's input placed in the system prompt,
the tool definitions or the first messages of the history changes those bytes every call. This
package finds them in the code, before any log exists: it follows each such value from the line that
makes it, through variables, f-strings, containers, helpers in other modules, attributes set in
``__init__`` and default arguments, to the request (Chat Completions, Responses, Messages,
``litellm.completion``, promptkit's assembler) and the slot it lands in.

It parses with the standard library's :mod:`ast`: the code is only read, never imported or run (so
linting a project needs none of its dependencies), ``ast`` follows every Python version the project
runs on, and it parses a 50,000-line project in well under a second.

>>> import pathlib, tempfile
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> _ = (folder / "bot.py").write_text(
...     "import datetime\\n"
...     "def ask(client, question):\\n"
...     "    system = f'You are helpful. Now: {datetime.datetime.now()}'\\n"
...     "    return client.chat.completions.create(model='m', messages=[\\n"
...     "        {'role': 'system', 'content': system}, {'role': 'user', 'content': question}])\\n"
... )
>>> [(f.rule, f.line, f.slot) for f in lint_code([folder])]
[('clock', 3, 'messages[0] (system message)')]
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from promptkit.codelint.flow import analyze_project
from promptkit.codelint.model import Finding, LintResult, Location, Note
from promptkit.codelint.output import FORMATS, format_json, format_result, format_sarif, format_text
from promptkit.codelint.project import load_project
from promptkit.codelint.sources import RULES, Rule

__all__ = [
    "FORMATS",
    "RULES",
    "Finding",
    "LintResult",
    "Location",
    "Note",
    "Rule",
    "format_json",
    "format_result",
    "format_sarif",
    "format_text",
    "lint_code",
    "lint_code_result",
]


def lint_code_result(paths: Sequence[str | os.PathLike[str]]) -> LintResult:
    """The findings and notes of the Python files under ``paths`` (files or folders).

    Raises :class:`~promptkit.errors.CodeInputError` for a missing path, a file that is not UTF-8
    or a syntax error (the message names ``file:line``).
    """
    return analyze_project(load_project(paths))


def lint_code(paths: Sequence[str | os.PathLike[str]]) -> list[Finding]:
    """Every value that changes between calls and lands before repeated content in a request built by
    the Python files under ``paths``; see :func:`lint_code_result` for the notes and counts too.

    >>> lint_code([]) # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    promptkit.errors.CodeInputError: no path given: name the Python files or folders to lint
    """
    return list(lint_code_result(paths).findings)
