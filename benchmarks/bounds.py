"""The lower bound of tokenizing a corpus of logs, shared by the benchmarks that compare with it
(``whole_history.py --tokenize``, ``agent_runs_bound.py``).

The bound is the work any tool that counts the tokens of every request must do: read the logs (a JSON
parse of every file), load the tokenizer, render every request with its chat template and encode each
unique text piece between special tokens once (sub-agents, resumed sessions and each call of a
conversation repeat whole prefixes: those are not encoded again). Run as a script it measures each
phase with the CPU clock in a fresh process and prints them as one JSON object::

    PYTHONPATH=$PWD python benchmarks/bounds.py DIR [--tokenizer cl100k_base] [--provider NAME]

``--provider``: every request rendered with this provider's template (default: each record's provider,
as the analysis recognises it).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any


def log_files(paths: Iterable[Path]) -> list[Path]:
    """The log files under ``paths`` (files as given, folders searched for ``*.json*`` and ``*.traj``)."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files += sorted(
                f for f in p.rglob("*") if f.is_file() and f.suffix in (".json", ".jsonl", ".traj")
            )
        else:
            files.append(p)
    return files


def parse_all(files: Sequence[Path]) -> int:
    """Parse every file as JSON (one document, or one per line): the reading every tool pays; the
    number of JSON values parsed."""
    values = 0
    for f in files:
        text = f.read_text(encoding="utf-8")
        try:
            json.loads(text)
            values += 1
        except ValueError:  # JSON lines
            for line in text.splitlines():
                if line.strip():
                    json.loads(line)
                    values += 1
    return values


def record_renders(records: Sequence[Any], provider: str | None = None) -> list[Any]:
    """Each record's render model: ``provider``'s for all, or (default) each record's provider's as the
    analysis recognises it; loaded once per provider."""
    from promptkit.analysis.spec import DEFAULT_PROVIDER
    from promptkit.providers.registry import get_provider, infer_record_provider

    loaded: dict[str, Any] = {}
    renders = []
    for r in records:
        name = provider or infer_record_provider(r) or DEFAULT_PROVIDER
        if name not in loaded:
            loaded[name] = get_provider(name).load_render()
        renders.append(loaded[name])
    return renders


def unique_pieces(records: Sequence[Any], renders: Sequence[Any]) -> set[str]:
    """The unique text pieces (between special tokens) of every request of ``records`` rendered with its
    render model (``renders``, one a record: :func:`record_renders`) and with its completion."""
    from promptkit.analysis.prepare import chat_body

    pieces: set[str] = set()
    for r, render in zip(records, renders, strict=True):
        for piece in render.render(chat_body(r.request)[0], completion=r.completion):
            if not piece.special:
                pieces.add(piece.text)
    return pieces


def encode_each_once(pieces: Iterable[str], tokenizer: Any) -> int:
    """Encode each of ``pieces`` once with ``tokenizer``; the number of tokens."""
    return sum(len(tokenizer.encode(text)) for text in pieces)


def bound_phases(paths: Sequence[Path], tokenizer: str, provider: str | None = None) -> dict[str, Any]:
    """The bound's phases on ``paths``, each in CPU seconds of this process (``parse``, ``load``: the
    tokenizer and the render models, ``render``, ``encode``), with ``read`` (promptkit's reader: the
    records the render needs; not part of the bound) and the counts (``files``, ``requests``,
    ``pieces``, ``tokens``)."""
    for module in ("promptkit.analysis.prepare", "promptkit.analysis.spec"):  # not part of the bound
        importlib.import_module(module)
    from promptkit.formats import read_logs
    from promptkit.tokens.tokenizers import get_tokenizer

    files = log_files(paths)
    clock = time.process_time
    t0 = clock()
    parse_all(files)
    t1 = clock()
    records = read_logs(list(paths)).records
    t2 = clock()
    tok = get_tokenizer(tokenizer)
    renders = record_renders(records, provider)
    t3 = clock()
    pieces = unique_pieces(records, renders)
    t4 = clock()
    tokens = encode_each_once(pieces, tok)
    t5 = clock()
    return {
        "parse": t1 - t0, "read": t2 - t1, "load": t3 - t2, "render": t4 - t3, "encode": t5 - t4,
        "files": len(files), "requests": len(records), "pieces": len(pieces), "tokens": tokens,
    }  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--tokenizer", default="cl100k_base")
    parser.add_argument("--provider", default=None)
    args = parser.parse_args(argv)
    print(json.dumps(bound_phases(args.paths, args.tokenizer, args.provider)))


if __name__ == "__main__":
    sys.exit(main())
