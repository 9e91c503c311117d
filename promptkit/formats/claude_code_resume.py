"""Resumed Claude Code sessions: the calls a resume copied from an earlier session, counted once.

Resuming a session (``claude --resume`` / ``--continue`` in the versions that start a new transcript)
writes a new ``<session>.jsonl`` that begins with copies of the earlier session's entries: the same
``requestId`` and message ids, with the new ``sessionId`` and timestamps rewritten to the resume. Read
as it is, every call of the earlier session would be counted twice (once per file), and its cost too.

The rule: a call of a main-thread transcript is a **copy** when another transcript in the same project
folder holds the same ``requestId`` with an earlier timestamp (a tie goes to the file whose path sorts
first). Only the file's leading run of calls is checked, since a resume copies the earlier conversation
before anything new: the first call that is not a copy ends the run. Copies are left out of the file's
records (their events stay in the file, so the later calls' context still holds the copied
conversation); the earlier file keeps the call.

The sibling transcripts are scanned once per process (cached by path, size and modification time): only
lines holding a ``requestId`` are looked at, and only their ``requestId`` and ``timestamp`` are read.

>>> import json, tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> line = lambda rid, ts: json.dumps({"type": "assistant", "requestId": rid, "timestamp": ts})
>>> _ = (folder / "a.jsonl").write_text(line("req_1", "2026-01-01T10:00:00Z") + "\\n")
>>> _ = (folder / "b.jsonl").write_text(line("req_1", "2026-01-02T09:00:00Z") + "\\n")
>>> earlier_copies(folder / "b.jsonl", [("req_1", 1767344400.0), ("req_2", 1767344460.0)])
{'req_1': 'a.jsonl'}
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from promptkit.errors import LogFileError, RecordFormatError
from promptkit.formats.base import COMPRESSED_SUFFIXES, Source
from promptkit.formats.fields import parse_timestamp

__all__ = ["earlier_copies", "request_times"]

_REQUEST_ID: Final[re.Pattern[str]] = re.compile(r'"requestId"\s*:\s*"([^"]+)"')
_TIMESTAMP: Final[re.Pattern[str]] = re.compile(r'"timestamp"\s*:\s*"([^"]+)"')
_SUFFIXES: Final[tuple[str, ...]] = tuple(f".jsonl{s}" for s in ("", *COMPRESSED_SUFFIXES))


@functools.lru_cache(maxsize=256)
def _times(path: str, size: int, mtime_ns: int) -> Mapping[str, float]:
    """``requestId`` -> earliest timestamp of one transcript (``size`` and ``mtime_ns`` key the cache)."""
    out: dict[str, float] = {}
    try:
        lines = Source.open(Path(path)).lines()
        for _, text in lines:
            if '"requestId"' not in text:
                continue
            rid, ts = _REQUEST_ID.search(text), _TIMESTAMP.search(text)
            if rid is None or ts is None:
                continue
            try:
                when = parse_timestamp(ts.group(1), "timestamp")
            except RecordFormatError:
                continue
            if when is not None and (rid.group(1) not in out or when < out[rid.group(1)]):
                out[rid.group(1)] = when
    except (LogFileError, OSError, UnicodeDecodeError):
        return {}  # a sibling that cannot be read is reported where it is read itself
    return out


def request_times(path: Path) -> Mapping[str, float]:
    """The earliest timestamp of each ``requestId`` in the transcript at ``path`` (empty when it cannot
    be read)."""
    stat = path.stat()
    return _times(str(path), stat.st_size, stat.st_mtime_ns)


def _siblings(path: Path) -> list[Path]:
    """The other transcripts of the project folder of ``path`` (plain or compressed)."""
    try:
        entries = sorted(path.parent.iterdir())
    except OSError:
        return []
    return [p for p in entries if p != path and p.name.endswith(_SUFFIXES) and p.is_file()]


def earlier_copies(path: Path, calls: Iterable[tuple[str | None, float | None]]) -> dict[str, str]:
    """The leading calls of the transcript at ``path`` (``(requestId, timestamp)`` in line order) that an
    earlier session in the same folder already holds: ``requestId`` -> the name of the file that keeps
    the call. The run ends at the first call that no sibling holds earlier."""
    siblings = _siblings(path)
    out: dict[str, str] = {}
    if not siblings:
        return out
    for rid, when in calls:
        owner = None if rid is None or when is None else _earlier_owner(path, siblings, rid, when)
        if owner is None:
            break
        out[str(rid)] = owner.name
    return out


def _earlier_owner(path: Path, siblings: list[Path], rid: str, when: float) -> Path | None:
    for other in siblings:
        theirs = request_times(other).get(rid)
        if theirs is not None and (theirs < when or (theirs == when and str(other) < str(path))):
            return other
    return None
