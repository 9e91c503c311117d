"""Mooncake-style traces, in and out: block-hash streams of requests, and the prefix cache run on them.

A Mooncake trace (kvcache-ai/Mooncake, ``FAST25-release/traces``) is JSONL, one request per line::

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ..., 2354]}

``timestamp`` is milliseconds since the first request, ``input_length`` / ``output_length`` are token
counts, and ``hash_ids`` has one id per block of ``block_size`` tokens of the input (512 in Mooncake's
traces; the last block may be partial). A block's id stands for its tokens *and everything before
them* (a chained hash), so two requests share a cached prefix exactly as long as their leading ids agree.

- :func:`read_trace` reads such a file into :class:`TraceRecord` values;
- :func:`simulate_trace` runs promptkit's radix cache (:class:`~promptkit.analysis.simulator.RadixCache`)
  over the block ids in time order — one id is one cache unit of ``block_size`` tokens — and returns a
  polars frame of cached tokens per request (:func:`trace_hit_ratio` sums it);
- :func:`trace_from_requests` turns request records into a trace (tokenize each request, hash its
  token blocks chained like Mooncake's, number the distinct hashes in order of first use), and
  :func:`write_trace` writes it.

Example::

    >>> trace = read_trace("fixtures/traces/mooncake-readme-sample.jsonl")
    >>> frame = simulate_trace(trace, block_size=512)
    >>> frame["cached_tokens"].to_list()
    [0, 6144]
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs
import numpy as np

from promptkit.errors import RecordFormatError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from promptkit.layout import RequestRecord

__all__ = [
    "MOONCAKE_BLOCK_SIZE",
    "TraceFormatError",
    "TraceRecord",
    "iter_trace",
    "parse_trace_line",
    "read_trace",
    "simulate_trace",
    "trace_from_requests",
    "trace_hit_ratio",
    "write_trace",
]

#: The block size of Mooncake's published traces (tokens per hash id).
MOONCAKE_BLOCK_SIZE: Final[int] = 512


class TraceFormatError(RecordFormatError):
    """A trace line is not a Mooncake record; the message names the file and line."""


def _ids(value: Iterable[int]) -> tuple[int, ...]:
    return tuple(int(x) for x in value)


def _non_negative(instance: Any, attribute: attrs.Attribute[Any], value: int) -> None:
    if value < 0:
        raise UsageError(f"{attribute.name} must be >= 0, got {value}")


@attrs.frozen(slots=True)
class TraceRecord:
    """One request of a trace: arrival time (ms), input and output tokens, block hash ids."""

    timestamp: float
    input_length: int = attrs.field(validator=_non_negative)
    output_length: int = attrs.field(validator=_non_negative)
    hash_ids: tuple[int, ...] = attrs.field(converter=_ids)

    def to_json(self) -> dict[str, Any]:
        """The record as Mooncake writes it (an integral timestamp as an int).

        >>> TraceRecord(0.0, 10, 2, [7]).to_json()
        {'timestamp': 0, 'input_length': 10, 'output_length': 2, 'hash_ids': [7]}
        """
        ts: float | int = int(self.timestamp) if float(self.timestamp).is_integer() else self.timestamp
        return {
            "timestamp": ts,
            "input_length": self.input_length,
            "output_length": self.output_length,
            "hash_ids": list(self.hash_ids),
        }


def _int_field(obj: Mapping[str, Any], name: str, where: str) -> int:
    value = obj.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TraceFormatError(f"{where}: field {name!r} must be a non-negative integer, got {value!r}")
    return value


def read_trace(path: str | os.PathLike[str]) -> list[TraceRecord]:
    """Read a Mooncake trace (JSONL); raises :class:`TraceFormatError` naming the file and line.

    >>> [r.input_length for r in read_trace("fixtures/traces/mooncake-readme-sample.jsonl")]
    [6955, 6472]
    """
    return list(iter_trace(path))


def iter_trace(path: str | os.PathLike[str]) -> Iterator[TraceRecord]:
    """:func:`read_trace` one record at a time (for a trace larger than memory, e.g. into a sampled
    :func:`~promptkit.analysis.capacity.capacity_curve`). A gzip- or zstd-compressed file is read
    decompressed (detected by its magic bytes, whatever its name).

    >>> next(iter_trace("fixtures/traces/mooncake-readme-sample.jsonl")).input_length
    6955
    """
    from promptkit.formats.base import Source

    source = Source.open(path)
    for n, line in source.lines():
        if line.strip():
            yield parse_trace_line(line, f"{source.file}:{n}")


def parse_trace_line(line: str, where: str) -> TraceRecord:
    """One trace line as a :class:`TraceRecord`; :class:`TraceFormatError` names ``where`` and the field.

    >>> parse_trace_line('{"timestamp": 5, "input_length": 3, "output_length": 1, "hash_ids": [9]}', "t:1")
    TraceRecord(timestamp=5.0, input_length=3, output_length=1, hash_ids=(9,))
    >>> parse_trace_line('{"timestamp": 5, "input_length": -3}', "t:1")
    Traceback (most recent call last):
    ...
    promptkit.analysis.trace.TraceFormatError: t:1: field 'hash_ids' must be a list of integers
    """
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"{where}: not JSON ({exc.msg})") from exc
    if not isinstance(obj, dict):
        raise TraceFormatError(f"{where}: expected an object, got {type(obj).__name__}")
    ts = obj.get("timestamp")
    if isinstance(ts, bool) or not isinstance(ts, int | float):
        raise TraceFormatError(f"{where}: field 'timestamp' must be a number, got {ts!r}")
    ids = obj.get("hash_ids")
    if not isinstance(ids, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in ids):
        raise TraceFormatError(f"{where}: field 'hash_ids' must be a list of integers")
    return TraceRecord(
        float(ts), _int_field(obj, "input_length", where), _int_field(obj, "output_length", where), ids
    )


def simulate_trace(
    records: Sequence[TraceRecord],
    *,
    block_size: int = MOONCAKE_BLOCK_SIZE,
    capacity_blocks: int | None = None,
    ttl: float | None = None,
) -> pl.DataFrame:
    """Run a prefix cache over a trace's block ids, in time order (ties keep file order).

    Each request looks its ``hash_ids`` up in a :class:`~promptkit.analysis.simulator.RadixCache` (one
    id = one cache unit), then stores them. ``capacity_blocks`` bounds the cache (LRU eviction),
    ``ttl`` (seconds) expires blocks not used for that long; by default the cache keeps everything.
    Columns: ``request`` (line order), ``timestamp``, ``input_length``, ``blocks``, ``cached_blocks``,
    ``cached_tokens`` (``cached_blocks * block_size``, at most ``input_length``), ``hit_ratio``.

    >>> r = [TraceRecord(0, 1000, 1, [1, 2]), TraceRecord(5, 1100, 1, [1, 2, 3])]
    >>> simulate_trace(r, block_size=512)["cached_tokens"].to_list()
    [0, 1024]
    """
    import polars as pl

    from promptkit.analysis.simulator import RadixCache

    if block_size <= 0:
        raise UsageError(f"block_size must be > 0, got {block_size}")
    cache = RadixCache(capacity=capacity_blocks)
    order = sorted(range(len(records)), key=lambda k: (records[k].timestamp, k))
    cached_blocks = [0] * len(records)
    for k in order:
        r = records[k]
        ids = np.asarray(r.hash_ids, dtype=np.int64)
        now = r.timestamp / 1000.0
        # touch=False: the insert right after marks exactly the request's blocks used; a match would
        # also mark the unmatched tail of the edge it stops in, which is not least-recently-used order
        cached_blocks[k] = cache.match(ids, now, touch=False).prefix_tokens
        cache.insert(ids, now, ttl=ttl, source=str(k))
    input_length = [r.input_length for r in records]
    cached_tokens = [min(b * block_size, n) for b, n in zip(cached_blocks, input_length, strict=True)]
    return pl.DataFrame(
        {
            "request": list(range(len(records))),
            "timestamp": [r.timestamp for r in records],
            "input_length": input_length,
            "blocks": [len(r.hash_ids) for r in records],
            "cached_blocks": cached_blocks,
            "cached_tokens": cached_tokens,
            "hit_ratio": [c / n if n else None for c, n in zip(cached_tokens, input_length, strict=True)],
        },
        schema={
            "request": pl.Int64, "timestamp": pl.Float64, "input_length": pl.Int64, "blocks": pl.Int64,
            "cached_blocks": pl.Int64, "cached_tokens": pl.Int64, "hit_ratio": pl.Float64,
        },
    )  # fmt: skip


def trace_hit_ratio(frame: pl.DataFrame) -> float | None:
    """Token-weighted hit ratio of a :func:`simulate_trace` frame (None without input tokens).

    >>> trace_hit_ratio(simulate_trace([TraceRecord(0, 512, 0, [1]), TraceRecord(1, 512, 0, [1])]))
    0.5
    """
    total = int(frame["input_length"].sum())
    return int(frame["cached_tokens"].sum()) / total if total else None


def _block_hashes(tokens: np.ndarray, block_size: int) -> list[bytes]:
    """Chained digests of the blocks of ``tokens``: block k's digest covers blocks 0..k."""
    out: list[bytes] = []
    previous = b""
    data = np.ascontiguousarray(tokens, dtype="<i8")
    for start in range(0, int(data.shape[0]), block_size):
        h = hashlib.blake2b(previous, digest_size=16)
        h.update(data[start : start + block_size].tobytes())
        previous = h.digest()
        out.append(previous)
    return out


def trace_from_requests(
    records: Iterable[RequestRecord],
    *,
    provider: str | None = None,
    tokenizer: Any = None,
    render: Any = None,
    block_size: int = MOONCAKE_BLOCK_SIZE,
) -> list[TraceRecord]:
    """A Mooncake trace of request records: tokenize each prompt (the provider's defaults, as
    :func:`~promptkit.analysis.api.analyze_requests` does), hash its blocks of ``block_size`` tokens
    chained (a block's hash covers its tokens and its prefix), and number distinct hashes 0, 1, 2, …
    in order of first use. ``timestamp`` is milliseconds since the first record (record order when a
    record has no timestamp: then every timestamp is 0); ``output_length`` counts the completion's
    tokens (0 without one). ``provider``: the profile whose render and tokenizer count the tokens; by
    default the one the first record names or the registry recognises from it, else the generic one.

    >>> from promptkit.formats import records_from_requests
    >>> body = {"messages": [{"role": "user", "content": "hello " * 300}]}
    >>> longer = {"messages": body["messages"] + [{"role": "assistant", "content": "ok"},
    ...                                           {"role": "user", "content": "more " * 300}]}
    >>> a, b = trace_from_requests(records_from_requests([body, longer]), provider="exact", block_size=64)
    >>> a.hash_ids[:-1] == b.hash_ids[: len(a.hash_ids) - 1], len(a.hash_ids) > 2
    (True, True)
    """
    from promptkit.providers.registry import GENERIC_PROVIDER, get_provider, infer_record_provider
    from promptkit.tokens.tokenize import RequestTokenizer

    if block_size <= 0:
        raise UsageError(f"block_size must be > 0, got {block_size}")
    items = list(records)
    if provider is None:
        provider = (infer_record_provider(items[0]) if items else None) or GENERIC_PROVIDER
    profile = get_provider(provider)
    rt = RequestTokenizer(
        render if render is not None else profile.load_render(), tokenizer or profile.load_tokenizer()
    )
    timed = bool(items) and all(r.timestamp is not None for r in items)
    origin = min(float(r.timestamp) for r in items if r.timestamp is not None) if timed else 0.0
    ids: dict[bytes, int] = {}
    out: list[TraceRecord] = []
    for r in items:
        tok = rt.tokenize(r.request, completion=r.completion)
        prompt = tok.tokens[: tok.prompt_len]
        hashes = [ids.setdefault(h, len(ids)) for h in _block_hashes(prompt, block_size)]
        when = (float(r.timestamp) - origin) * 1000.0 if timed and r.timestamp is not None else 0.0
        output = len(tok.tokens) - tok.prompt_len if r.completion is not None else 0
        out.append(TraceRecord(round(when, 3), tok.prompt_len, output, hashes))
    return out


def write_trace(trace: Iterable[TraceRecord], path: str | os.PathLike[str]) -> Path:
    """Write ``trace`` as Mooncake JSONL; returns the path.

    >>> import tempfile
    >>> p = write_trace([TraceRecord(0, 10, 2, [0])], Path(tempfile.mkdtemp()) / "t.jsonl")
    >>> p.read_text()
    '{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [0]}\\n'
    """
    path = Path(path)
    with path.open("w", encoding="utf-8") as f:
        for record in trace:
            f.write(json.dumps(record.to_json()) + "\n")
    return path
