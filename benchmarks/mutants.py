"""A small mutation pass: hand-made semantic mutations, each applied alone, must make a test fail.

Each mutant replaces one exact piece of source (it must occur once) and runs the test files that cover
that module with ``pytest -x``; a mutant that leaves every test passing *survived*. The source file is
restored after each run, whatever happens. The list holds the mutations issue 25's review found
surviving (causes, trimming, the Claude Code reader) and the contract details added with it.

    PYTHONPATH=$PWD python benchmarks/mutants.py            # every mutant: killed / survived, the score
    PYTHONPATH=$PWD python benchmarks/mutants.py --only causes

Runs a pytest process per mutant (about 2-20 s each on 2 cores; the delivery mutant waits out a shortened
timeout), so it is a benchmark-style check, not part of the suite.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
import time

import attrs

ROOT = pathlib.Path(__file__).resolve().parents[1]


@attrs.frozen
class Mutant:
    """One mutation: in ``path`` replace ``old`` (occurring once) by ``new``; ``tests`` should catch it."""

    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


CAUSES = ("tests/analysis/test_causes.py",)
TRIM = ("tests/assembly/test_trim.py",)
CLAUDE = ("tests/formats/test_claude_code.py",)

MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "causes: the reported surplus taken off the last causes",
        "promptkit/analysis/causes.py",
        "unexplained -= _take_front(segments, rc - c)",
        "unexplained -= _take_back(segments, rc - c)",
        CAUSES,
    ),
    Mutant(
        "causes: compaction threshold 0.9 -> 0.5",
        "promptkit/analysis/causes.py",
        "shrank = size_new < size_old * 0.9",
        "shrank = size_new < size_old * 0.5",
        CAUSES,
    ),
    Mutant(
        "causes: compaction boundary < -> <=",
        "promptkit/analysis/causes.py",
        "shrank = size_new < size_old * 0.9",
        "shrank = size_new <= size_old * 0.9",
        CAUSES,
    ),
    Mutant(
        "causes: cold_start only on a session's first request",
        "promptkit/analysis/causes.py",
        "if first or (reach == 0 and base == 0 and not switched):",
        "if first:",
        CAUSES,
    ),
    Mutant(
        "trim: the growing chunk treated as closed",
        "promptkit/assembly/trim.py",
        "closed = len(chunks) if filled >= step else len(chunks) - 1",
        "closed = len(chunks)",
        TRIM,
    ),
    Mutant(
        "claude-code: the 1-hour TTL never set",
        "promptkit/formats/claude_code.py",
        "hour = _one_hour_sessions(records)",
        "hour: set[str] = set()",
        CLAUDE,
    ),
    Mutant(
        "claude-code: exactly half the writes counts as most",
        "promptkit/formats/claude_code.py",
        "if 2 * hour.get(s, 0) > n}",
        "if 2 * hour.get(s, 0) >= n}",
        CLAUDE,
    ),
    Mutant(
        "claude-code: a parallel tool result written after the call is taken",
        "promptkit/formats/claude_code.py",
        "if ans.line < first.line and ans.uuid not in on_chain:",
        "if ans.uuid not in on_chain:",
        CLAUDE,
    ),
    Mutant(
        "claude-code: a compact boundary with a parent does not cut",
        "promptkit/formats/claude_code.py",
        "            if ev.compact_boundary:\n                break",
        "            if ev.compact_boundary and ev.parent is None:\n                break",
        CLAUDE,
    ),
    Mutant(
        "contract: a host notice may act for a real user",
        "promptkit/chat/platform.py",
        'if self.from_turn is None and self.actor != Actor(self.platform, ""):',
        "if self.from_turn is None and self.actor is None:",
        ("tests/chat/test_platform.py",),
    ),
    Mutant(
        "contract: await_delivery ignores the abort signal",
        "promptkit/chat/delivery.py",
        "    receipt = asyncio.ensure_future(delivery)\n",
        "    receipt = asyncio.ensure_future(delivery)\n    signal = None\n    timeout_ms = min(timeout_ms, 200)\n",
        ("tests/chat/test_delivery.py",),
    ),
    Mutant(
        "contract: the sender label keeps the nickname's padding",
        "promptkit/chat/identity.py",
        "name = nickname.strip() if isinstance(nickname, str) else nickname",
        "name = nickname",
        ("tests/chat/test_identity.py",),
    ),
    Mutant(
        "contract: the placeholder parser returns desc and ref untrimmed",
        "promptkit/chat/attachments.py",
        "    ref = ref.strip()\n    desc = None if desc is None else desc.strip()\n",
        "    desc = None if desc is None or not desc.strip() else desc\n",
        ("tests/chat/test_attachments.py",),
    ),
    Mutant(
        "contract: a tool call's start time is its arrival",
        "promptkit/chat/stream.py",
        "self._times.append((self._started.get(len(self._tool_calls), now), now))",
        "self._times.append((now, now))",
        ("tests/chat/test_stream.py",),
    ),
    Mutant(
        "egress: lone surrogates left in the content",
        "promptkit/chat/egress.py",
        'return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")',
        "return text",
        ("tests/chat/test_egress.py",),
    ),
)


def run(mutant: Mutant) -> tuple[bool, float]:
    """Apply ``mutant``, run its tests, restore the file; (killed, seconds)."""
    path = ROOT / mutant.path
    original = path.read_text(encoding="utf-8")
    if original.count(mutant.old) != 1:
        raise SystemExit(
            f"{mutant.name}: the piece to mutate occurs {original.count(mutant.old)} times in {mutant.path}"
        )
    start = time.perf_counter()
    try:
        path.write_text(original.replace(mutant.old, mutant.new), encoding="utf-8")
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider", *mutant.tests],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        path.write_text(original, encoding="utf-8")
    return proc.returncode != 0, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", default="", help="run the mutants whose name contains this text")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if args.only in m.name]
    killed = 0
    for mutant in chosen:
        dead, seconds = run(mutant)
        killed += dead
        print(f"{'killed  ' if dead else 'SURVIVED'} {seconds:5.1f} s  {mutant.name}", flush=True)
    print(f"score: {killed} of {len(chosen)} mutants killed")
    return 0 if killed == len(chosen) else 1


if __name__ == "__main__":
    raise SystemExit(main())
