"""The frames ``promptkit analyze`` writes for every bundled log, kept as golden files.

``python -m tests.golden_frames [NAME ...]`` (from the repository root) rewrites ``fixtures/golden/`` (only
the named logs' goldens when names are given); the test
``tests/test_golden_frames.py`` runs the same analyses and compares every CSV frame cell by cell, so a
refactoring that changes a figure fails there, naming the log, the frame, the column and the row. The
golden files are rewritten only on purpose, when a change of the figures is intended (the commit that
does it says why).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "fixtures" / "golden"

# name -> (paths, extra CLI arguments); every bundled log format, the real logs and both views
LOGS: dict[str, tuple[list[str], list[str]]] = {
    "support-before": (["promptkit/data/default-session.jsonl"], []),
    "support-after": (["fixtures/logs/support-after.jsonl"], []),
    "session-before": (["fixtures/logs/session-before.jsonl"], []),
    "session-after-simulated": (["fixtures/logs/session-after.jsonl"], ["--view", "simulated"]),
    "real-deepseek": (["fixtures/real-logs/deepseek"], []),
    "real-deepseek-simulated": (["fixtures/real-logs/deepseek"], ["--view", "simulated"]),
    "claude-code": (["fixtures/claude-code"], []),
    "codex": (["fixtures/codex"], []),
    "http-capture": (["fixtures/http-capture"], []),
    "litellm": (["fixtures/litellm"], []),
    "otel-genai": (["fixtures/otel_genai"], []),
    "atif": (["fixtures/atif"], []),
    "swe-agent": (["fixtures/swe_agent"], []),
    "real-gemini": (["fixtures/real-logs/gemini"], []),
    "gemini-cli": (["fixtures/gemini-cli"], []),
    "gemini-cli-real": (["fixtures/gemini-cli-real"], []),
    "opencode": (["fixtures/opencode"], []),
    "mooncake-trace": (["fixtures/traces/mooncake-conversation-head.jsonl"], []),
}
FRAMES = ("requests.csv", "causes.csv")


def analyze_into(name: str, out: Path) -> None:
    """Run ``promptkit analyze`` for one golden log, writing its frames into ``out``."""
    from promptkit.cli import main

    paths, extra = LOGS[name]
    code = main(
        ["analyze", *[str(ROOT / p) for p in paths], *extra, "--out", str(out), "--no-plots", "--no-html", "-q"]
    )
    assert code == 0, f"promptkit analyze {name} exited {code}"


def normalized(csv: Path) -> str:
    """A frame's CSV text with this checkout's absolute paths made relative to the repository root."""
    return csv.read_text().replace(f"{ROOT}/", "")


def write_all(names: list[str] | None = None) -> None:
    """Rewrite the goldens of ``names`` (every log when empty)."""
    import tempfile

    unknown = sorted(set(names or ()) - set(LOGS))
    if unknown:
        raise SystemExit(f"unknown golden log(s): {', '.join(unknown)}; known: {', '.join(LOGS)}")
    for name in names or LOGS:
        with tempfile.TemporaryDirectory() as tmp:
            analyze_into(name, Path(tmp))
            target = GOLDEN / name
            target.mkdir(parents=True, exist_ok=True)
            for frame in FRAMES:
                if (Path(tmp) / frame).exists():
                    (target / frame).write_text(normalized(Path(tmp) / frame))
        print("wrote", GOLDEN / name, file=sys.stderr)


if __name__ == "__main__":
    write_all(sys.argv[1:])
