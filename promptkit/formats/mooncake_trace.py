"""Mooncake block traces as a log format: ``promptkit analyze trace.jsonl`` reads them like any log.

A Mooncake trace (kvcache-ai/Mooncake, ``FAST25-release/traces``; see :mod:`promptkit.analysis.trace`) has
no text, only token counts and chained block hashes, one request per line::

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ..., 2354]}

Each line becomes a request whose prompt is an opaque head of blocks (``meta["opaque_head_blocks"]``:
one ``[hash id, tokens]`` per block of :data:`~promptkit.analysis.trace.MOONCAKE_BLOCK_SIZE` tokens, the
last one what is left of ``input_length``), analyzed with the ``exact`` provider (an exact prefix
cache: a trace has no provider). Two requests share a cached prefix exactly as long as their leading
hash ids agree. The trace is one session (a serving trace mixes users; analyze it with
``--view simulated``, a shared cache in time order); ``timestamp`` is milliseconds from the first
request. A line that is not a trace request is reported with its line and field. A trace has no text, so
its requests carry the log event ``trace`` (:data:`TRACE_EVENT`): where their block ids diverge the
analysis names no layout cause (the tokens past the shared blocks are new to the cache), and
``promptkit analyze`` points at ``promptkit fleet`` for replicas and routing.

>>> from promptkit.formats import read_logs
>>> loaded = read_logs("fixtures/traces/mooncake-readme-sample.jsonl")
>>> [r.meta["opaque_head_blocks"][-1] for r in loaded.records]
[['2354', 299], ['2366', 328]]
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from promptkit.formats.base import Item, LogFormat, Source, json_lines
from promptkit.formats.fields import loads_json
from promptkit.layout import LoadProblem, RequestRecord

__all__ = ["FORMAT"]

#: The ``meta["log_events"]`` entry of a trace request: ``explain_causes`` then names no text cause.
TRACE_EVENT = "trace"
#: Tokens per hash id in Mooncake's published traces.
BLOCK_SIZE = 512
_FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


def _is_trace_line(obj: Any) -> bool:
    return isinstance(obj, Mapping) and "hash_ids" in obj and "input_length" in obj and "messages" not in obj


def sniff(source: Source) -> bool:
    """JSONL whose first line is an object with ``hash_ids`` and ``input_length``."""
    for line in source.head.splitlines():
        if line.strip():
            try:
                return _is_trace_line(loads_json(line))
            except json.JSONDecodeError:
                return False
    return False


def _problem(obj: Any) -> str | None:
    if not isinstance(obj, Mapping):
        return f"expected a trace object ({', '.join(_FIELDS)}), got {type(obj).__name__}"
    ts = obj.get("timestamp")
    if isinstance(ts, bool) or not isinstance(ts, int | float):
        return f"timestamp: expected a number (milliseconds), got {ts!r}"
    for name in ("input_length", "output_length"):
        value = obj.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return f"{name}: expected a whole number >= 0, got {value!r}"
    ids = obj.get("hash_ids")
    if not isinstance(ids, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in ids):
        return "hash_ids: expected a list of integers"
    if obj["input_length"] > len(ids) * BLOCK_SIZE or (
        ids and obj["input_length"] <= (len(ids) - 1) * BLOCK_SIZE
    ):
        return (
            f"input_length: {obj['input_length']} tokens do not fill {len(ids)} block(s) of {BLOCK_SIZE} "
            "(the last one may be partial)"
        )
    return None


def read(source: Source) -> Iterator[Item]:
    """One request per trace line (see the module docstring)."""
    for item in json_lines(source):
        if isinstance(item, LoadProblem):
            yield item
            continue
        lineno, obj = item
        problem = _problem(obj)
        if problem is not None:
            yield LoadProblem(source.file, lineno, problem)
            continue
        ids: list[int] = obj["hash_ids"]
        last = obj["input_length"] - (len(ids) - 1) * BLOCK_SIZE if ids else 0
        blocks = [[str(h), BLOCK_SIZE] for h in ids[:-1]] + ([[str(ids[-1]), last]] if ids else [])
        yield RequestRecord(
            {"messages": []},
            session=source.stem,
            timestamp=float(obj["timestamp"]) / 1000.0,
            provider="exact",
            file=source.file,
            line=lineno,
            meta={
                "opaque_head_blocks": blocks,
                "trace_output_length": obj["output_length"],
                # a block trace has no text: the analysis names no layout cause for it
                "log_events": [TRACE_EVENT],
            },
        )


FORMAT = LogFormat(
    name="mooncake-trace",
    description="Mooncake block trace (timestamp, input_length, output_length, hash_ids per line): "
    "prompts as chained 512-token blocks, no text; analyzed with an exact prefix cache",
    sniff=sniff,
    read=read,
    priority=10,
)
