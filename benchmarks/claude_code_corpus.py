"""An N× corpus of Claude Code projects made from the bundled fixtures (``fixtures/claude-code``):
each copy is a project folder of its own with fresh identifiers (session ids, uuids, request and
message ids, tool-use ids, agent ids) and its timestamps shifted by ``copy × gap`` (default 3 hours,
more than the longest cache TTL of an hour), so two copies never share a live cache entry. The
content of the prompts is the same in every copy, as with a project copied into distinct sessions.

    python benchmarks/claude_code_corpus.py OUT_DIR --copies 20 [--gap-hours 3]

Used by ``benchmarks/stream_simulated.py`` and the streamed simulated view's tests.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import uuid
from pathlib import Path

#: The bundled Claude Code projects this corpus copies.
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "claude-code"

#: Identifiers a copy renames: uuids, Anthropic message / request / tool-use ids, sub-agent ids.
_IDS = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"|\b(?:msg|req|toolu)_[A-Za-z0-9]+"
    r"|(?<=\"agentId\":\")[0-9a-f]+|(?<=agent-)[0-9a-f]+"
)
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")


def _fresh(name: str, copy: int) -> str:
    """The copy's identifier for ``name``: same shape, deterministic."""
    new = uuid.uuid5(uuid.NAMESPACE_URL, f"{copy}:{name}")
    if "-" in name and len(name) == 36:
        return str(new)
    prefix, _, rest = name.rpartition("_")
    tail = new.hex * 2
    return f"{prefix}_{tail[: len(rest)]}" if prefix else tail[: len(name)]


def _shifted(stamp: str, seconds: float) -> str:
    when = dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ" if "." in stamp else "%Y-%m-%dT%H:%M:%SZ")
    return (when + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _copy_text(text: str, copy: int, shift: float) -> str:
    text = _IDS.sub(lambda m: _fresh(m.group(0), copy), text)
    return _STAMP.sub(lambda m: _shifted(m.group(0), shift), text)


def build(out: Path, copies: int, gap_hours: float = 3.0, source: Path = FIXTURES) -> int:
    """Write ``copies`` copies of the projects under ``source`` into ``out``; return the bytes written."""
    total = 0
    files = sorted(p for p in source.rglob("*.jsonl") if p.is_file())
    for copy in range(copies):
        shift = copy * gap_hours * 3600.0
        for path in files:
            rel = path.relative_to(source)
            project, rest = rel.parts[0], Path(*rel.parts[1:])
            target = out / f"{project}-copy{copy:05d}" / _copy_text(str(rest), copy, shift)
            target.parent.mkdir(parents=True, exist_ok=True)
            text = _copy_text(path.read_text(encoding="utf-8"), copy, shift)
            target.write_text(text, encoding="utf-8")
            total += len(text.encode())
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--gap-hours", type=float, default=3.0)
    args = parser.parse_args()
    size = build(args.out, args.copies, args.gap_hours)
    print(f"{args.copies} copies, {size / 1e6:.1f} MB in {args.out}")


if __name__ == "__main__":
    main()
