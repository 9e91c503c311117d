"""What a fleet simulation replays: Mooncake traces or request logs, read into one block-id stream.

:func:`load_fleet_input` looks at every file after decompression (gzip and zstd are recognised by their
magic bytes, whatever the name), in the folders and files given:

- all of them Mooncake traces (JSONL with ``hash_ids`` and ``input_length``): their lines as they are.
  The block size is checked on every line (``len(hash_ids) == ceil(input_length / block_size)``) and a
  contradiction is refused, naming the file, the line and the block sizes the trace fits. Several
  trace files are one fleet's traffic side by side in time (each file's timestamps count from its own
  first request); their block ids are kept apart, since each file numbers its own;
- all of them request logs: tokenized as the analysis does and cut into chained blocks
  (:func:`~promptkit.analysis.trace.trace_from_requests`), their session ids kept for the ``session``
  policy;
- a mix of both is refused.

**Timestamps absent** (a log without them, or a trace whose requests all carry the same one): the
requests arrive in input order, one every ``arrival_interval`` seconds (1 s by default), and a note says
so. Without that, every request would arrive at once: the in-flight window would never expire and the
load-aware policies would count requests over the whole input.

>>> data = load_fleet_input("fixtures/traces/mooncake-readme-sample.jsonl")
>>> len(data.trace), data.sessions, data.block_size
(2, None, 512)
>>> load_fleet_input("fixtures/traces/mooncake-readme-sample.jsonl", block_size=256)
Traceback (most recent call last):
...
promptkit.errors.UsageError: block size 256 (--block-size) contradicts the trace: fixtures/traces/mooncake-readme-sample.jsonl:1 has 14 hash ids for 6955 input tokens, where blocks of 256 tokens make ceil(6955 / 256) = 28 (2 of 2 lines disagree); every line fits a block size from 498 to 534
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from promptkit.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.analysis.trace import TraceRecord

__all__ = ["FleetInput", "load_fleet_input"]


@attrs.frozen(slots=True, eq=False)
class FleetInput:
    """Requests as block-id streams (a trace) and, when the input knows them, their session ids;
    ``notes`` say what the loader decided (block size, timestamps, skipped records)."""

    trace: tuple[TraceRecord, ...]
    sessions: tuple[str, ...] | None = None
    block_size: int = 512
    notes: tuple[str, ...] = ()


@attrs.define(slots=True)
class _BlockCheck:
    """The block sizes every line so far fits, and the first line that contradicts the one given."""

    block_size: int
    low: int = 1
    high: float = math.inf
    bad: int = 0
    first: str | None = None

    def line(self, record: TraceRecord, where: str) -> None:
        k, n = len(record.hash_ids), record.input_length
        if k:
            self.low = max(self.low, -(-n // k))
            self.high = min(self.high, (n - 1) // (k - 1) if k > 1 else math.inf)
        elif n:
            self.low, self.high = 1, 0  # tokens without blocks: no block size fits
        want = -(-n // self.block_size)
        if want != k:
            self.bad += 1
            if self.first is None:
                self.first = (
                    f"{where} has {k} hash ids for {n} input tokens, where blocks of {self.block_size} "
                    f"tokens make ceil({n} / {self.block_size}) = {want}"
                )

    def check(self, lines: int) -> None:
        if self.first is None:
            return
        fits = (
            f"every line fits a block size from {self.low} to {self.high}"
            if self.low <= self.high
            else "no one block size fits every line"
        )
        raise UsageError(
            f"block size {self.block_size} (--block-size) contradicts the trace: {self.first} "
            f"({self.bad} of {lines} lines disagree); {fits}"
        )


def _read_traces(files: Sequence[Path], block_size: int) -> tuple[list[TraceRecord], list[str]]:
    from promptkit.analysis.trace import TraceRecord, parse_trace_line
    from promptkit.formats.base import Source

    check = _BlockCheck(block_size)
    out: list[TraceRecord] = []
    offset = 0
    lines = 0
    for path in files:
        source = Source.open(path)
        top = -1
        for n, line in source.lines():
            if not line.strip():
                continue
            record = parse_trace_line(line, f"{source.file}:{n}")
            check.line(record, f"{source.file}:{n}")
            lines += 1
            if record.hash_ids:
                top = max(top, max(record.hash_ids))
            if offset:
                record = TraceRecord(
                    record.timestamp, record.input_length, record.output_length,
                    [h + offset for h in record.hash_ids],
                )  # fmt: skip
            out.append(record)
        offset += top + 1
    check.check(lines)
    notes = [f"blocks of {block_size} tokens, checked against every trace line"]
    if len(files) > 1:
        notes.append(
            f"{len(files)} trace files replayed side by side in time; their block ids are kept apart "
            "(each file numbers its own)"
        )
    return out, notes


def _is_trace(path: Path) -> bool:
    from promptkit.formats.base import Source
    from promptkit.formats.mooncake_trace import sniff

    return sniff(Source.open(path))


def _spread(trace: list[TraceRecord], interval: float, why: str) -> tuple[list[TraceRecord], str]:
    """Arrivals in input order, ``interval`` seconds apart."""
    from promptkit.analysis.trace import TraceRecord

    spread = [
        TraceRecord(k * interval * 1000.0, r.input_length, r.output_length, r.hash_ids)
        for k, r in enumerate(trace)
    ]
    note = (
        f"timestamps absent ({why}): the {len(trace)} requests arrive in input order, one every "
        f"{interval:g} s (--arrival-interval)"
    )
    return spread, note


def load_fleet_input(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    provider: str | None = None,
    block_size: int | None = None,
    arrival_interval: float = 1.0,
) -> FleetInput:
    """Read Mooncake traces or any logs promptkit reads (see the module docstring).

    ``block_size``: tokens per block; a trace's is checked against it (None: Mooncake's 512), logs are
    cut into blocks of it (None: 512). ``provider`` tokenizes logs (default: the one the first record
    names, else the generic one). Records the log loader skipped are counted in ``notes``.
    """
    from promptkit.analysis.trace import MOONCAKE_BLOCK_SIZE
    from promptkit.formats.discovery import find_log_files

    if isinstance(arrival_interval, bool) or not isinstance(arrival_interval, int | float) or arrival_interval <= 0:
        raise UsageError(f"arrival_interval must be a number of seconds > 0, got {arrival_interval!r}")
    bs = MOONCAKE_BLOCK_SIZE if block_size is None else block_size
    if isinstance(bs, bool) or not isinstance(bs, int) or bs <= 0:
        raise UsageError(f"block_size must be a positive whole number of tokens, got {bs!r}")
    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    files = [p for p, _ in find_log_files(items)[0]]
    kinds = [_is_trace(p) for p in files]
    if any(kinds) and not all(kinds):
        traces = [str(p) for p, t in zip(files, kinds, strict=True) if t]
        logs = [str(p) for p, t in zip(files, kinds, strict=True) if not t]
        raise UsageError(
            f"the inputs mix Mooncake traces ({', '.join(traces[:3])}) with request logs "
            f"({', '.join(logs[:3])}); give one kind at a time"
        )
    if files and all(kinds):
        trace, notes = _read_traces(files, bs)
        if len(trace) > 1 and len({r.timestamp for r in trace}) == 1:
            trace, note = _spread(trace, float(arrival_interval), "every request has the same timestamp")
            notes.append(note)
        return FleetInput(tuple(trace), None, bs, tuple(notes))
    return _from_logs(items, provider, bs, float(arrival_interval))


def _from_logs(
    items: Sequence[str | os.PathLike[str]], provider: str | None, block_size: int, interval: float
) -> FleetInput:
    from promptkit.analysis.trace import trace_from_requests
    from promptkit.formats import read_logs
    from promptkit.providers.registry import GENERIC_PROVIDER, infer_record_provider

    loaded = read_logs(items)
    if not loaded.records:
        raise UsageError(f"no request records found in {', '.join(str(p) for p in items)}")
    records = loaded.records
    chosen = provider or infer_record_provider(records[0]) or GENERIC_PROVIDER
    trace = trace_from_requests(records, provider=chosen, block_size=block_size)
    notes = list(loaded.notes)
    if loaded.problems:
        notes.append(f"{len(loaded.problems)} records skipped by the loader (see read_logs problems)")
    notes.append(f"tokenized with provider {chosen!r}, blocks of {block_size} tokens")
    untimed = sum(r.timestamp is None for r in records)
    if untimed and len(records) > 1:
        trace, note = _spread(trace, interval, f"{untimed} of {len(records)} records have none")
        notes.append(note)
    return FleetInput(tuple(trace), tuple(r.session for r in records), block_size, tuple(notes))
