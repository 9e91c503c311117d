"""What every command of the command line shares: the exit codes, the one-line error, the default
paths, and how output is written."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final, TextIO

from promptkit.errors import PromptkitError

__all__ = [
    "DEBUG_ENV", "DEFAULT_LOG", "DEFAULT_OUT", "EXIT_CODES", "EXIT_FAILED", "EXIT_INPUT",
    "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "CLIError", "check_paths", "emit",
]  # fmt: skip

#: The bundled log analyzed when ``promptkit analyze`` gets no PATH (relative to the package).
DEFAULT_LOG: Final[str] = "data/default-session.jsonl"
#: Where ``promptkit analyze`` writes its files unless ``--out`` says otherwise.
DEFAULT_OUT: Final[str] = "promptkit-report"
#: Set to 1 to get Python tracebacks instead of one-line error messages.
DEBUG_ENV: Final[str] = "PROMPTKIT_DEBUG"

EXIT_OK: Final[int] = 0
#: A threshold failed: ``promptkit check`` found a session under --min-hit or over --max-layout-loss.
EXIT_FAILED: Final[int] = 1
#: Bad input: a missing path, an unreadable or empty log, a file that cannot be written.
EXIT_INPUT: Final[int] = 2
#: A usage error: a bad option or argument (argparse's own code).
EXIT_USAGE: Final[int] = 2
#: Interrupted (Ctrl-C), as a shell reports SIGINT.
EXIT_INTERRUPTED: Final[int] = 130
#: Every exit code of every command and what it means (the CLI reference lists them).
EXIT_CODES: Final[dict[int, str]] = {
    EXIT_OK: "pass: the command did what it was asked",
    EXIT_FAILED: "a threshold failed (promptkit check)",
    EXIT_INPUT: "bad input or usage: a missing path, an unreadable log, a bad option",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
}


class CLIError(PromptkitError):
    """A failure the command reports in one line (no traceback) with an exit code."""

    def __init__(self, message: str, code: int = EXIT_INPUT) -> None:
        super().__init__(message)
        self.code = code


def emit(stream: TextIO, text: str) -> None:
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


def check_paths(paths: Sequence[Path]) -> None:
    """Raise :class:`CLIError` (bad input) naming the first of ``paths`` that is missing or unreadable."""
    for path in paths:
        if not path.exists():
            raise CLIError(f"{path}: no such file or directory")
        if not os.access(path, os.R_OK):
            raise CLIError(f"{path}: cannot read the file (permission denied)")
