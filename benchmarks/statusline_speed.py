"""How fast ``promptkit statusline`` answers on a large Claude Code transcript, cold and warm, side by side
with a full parse.

Writes a synthetic Claude Code main thread (``--calls`` model calls, each streamed as three assistant
lines with progress lines between and a tool result of ``--result-bytes`` characters; the default is
about 37 MB), then times, in one run on the same file:

- ``full parse``: :func:`promptkit.formats.read_logs` (what ``promptkit analyze`` reads first);
- ``json lines``: ``json.loads`` of every line, the least any reader that parses the file does;
- ``cold``: :func:`promptkit.commands.statusline.status_line` with an empty state folder (it reads the
  whole file once, parsing only the lines that can be events it needs, and prices the model);
- ``warm``: the same with the state the cold run left (the file unchanged: nothing is read);
- ``warm +1 call``: after one more call was appended (only the new lines are read);
- the same as processes (``python -m promptkit statusline``, as Claude Code runs it), with
  ``python -c pass`` (the interpreter's own start), ``python -c "import attrs"`` and
  ``python -c "import promptkit.cli"`` (what every promptkit command pays) for reference. The
  processes write and use bytecode (an installed package has it) in a temporary ``PYTHONPYCACHEPREFIX``,
  whatever ``PYTHONDONTWRITEBYTECODE`` says, after one warm-up run.

Times are the best of ``--repeat`` runs (a cold run gets a fresh state folder each time), wall-clock and
CPU (this process and its children: less moved by other load on the machine, to the 10 ms tick of
``os.times`` on Linux); the ratios are the wall-clock times against the full parse.

    python benchmarks/statusline_speed.py [--calls 2000] [--result-bytes 8000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from promptkit.commands.statusline import status_line  # noqa: E402
from promptkit.formats import read_logs  # noqa: E402

SESSION = "bench-0000-4000-8000-000000000000"


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _call_lines(i: int, parent: str, t0: float, result_bytes: int) -> tuple[list[str], str]:
    """The lines of call ``i``: its tool result (a user event), three streamed assistant lines, progress."""
    base = {
        "sessionId": SESSION,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/w",
        "version": "2.1.0",
    }
    at = t0 + 20 * i
    user = f"u{i}"
    content = [{"type": "tool_result", "tool_use_id": f"t{i - 1}", "content": "x" * result_bytes}]
    lines = [{**base, "type": "user", "uuid": user, "parentUuid": parent, "timestamp": _iso(at),
              "message": {"role": "user", "content": content}, "toolUseResult": {"stdout": "x" * result_bytes}}]  # fmt: skip
    usage = {"input_tokens": 3, "cache_creation_input_tokens": 400, "cache_read_input_tokens": 20_000 + 400 * i,
             "cache_creation": {"ephemeral_5m_input_tokens": 400, "ephemeral_1h_input_tokens": 0}, "output_tokens": 90}  # fmt: skip
    last = user
    for k, block in enumerate(
        ({"type": "thinking", "thinking": "hmm " * 50}, {"type": "text", "text": f"step {i}"},
         {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": f"echo {i}"}})
    ):  # fmt: skip
        lines.append({"type": "progress", "uuid": f"p{i}{k}", "parentUuid": last, "timestamp": _iso(at + 1),
                      "data": {"type": "hook_progress", "hookName": "PostToolUse"}})  # fmt: skip
        uid = f"a{i}-{k}"
        lines.append({**base, "type": "assistant", "uuid": uid, "parentUuid": last, "requestId": f"req_{i}",
                      "timestamp": _iso(at + 2 + k), "message": {"id": f"msg_{i}", "model": "claude-sonnet-4-5",
                      "role": "assistant", "content": [block], "usage": usage}})  # fmt: skip
        last = uid
    return [json.dumps(x, separators=(",", ":")) for x in lines], last


def write_transcript(path: Path, calls: int, result_bytes: int, t0: float) -> None:
    parent = "root"
    with path.open("w", encoding="utf-8") as f:
        f.write(json.dumps({"type": "user", "uuid": "root", "parentUuid": None, "sessionId": SESSION,
                            "timestamp": _iso(t0 - 1), "message": {"role": "user", "content": "go"}}) + "\n")  # fmt: skip
        for i in range(calls):
            lines, parent = _call_lines(i, parent, t0, result_bytes)
            f.write("\n".join(lines) + "\n")


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def best(fn: Callable[[], Any], repeat: int, setup: Callable[[], None] = lambda: None) -> tuple[float, float]:
    """The least wall-clock and the least CPU seconds (this process and its children) of ``repeat`` runs."""
    walls, cpus = [], []
    for _ in range(repeat):
        setup()
        start, cpu = time.perf_counter(), _cpu()
        fn()
        walls.append(time.perf_counter() - start)
        cpus.append(_cpu() - cpu)
    return min(walls), min(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--result-bytes", type=int, default=8000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / f"{SESSION}.jsonl"
        t0 = time.time() - 20 * args.calls
        write_transcript(path, args.calls, args.result_bytes, t0)
        stdin = json.dumps(
            {"session_id": SESSION, "transcript_path": str(path), "model": {"display_name": "Sonnet"}}
        )
        size = path.stat().st_size
        print(f"transcript: {args.calls} calls, {size / 1e6:.1f} MB, {sum(1 for _ in path.open('rb'))} lines")

        counter = iter(range(10**6))
        cache = {"dir": folder / "cache-0"}

        def fresh() -> None:
            cache["dir"] = folder / f"cache-{next(counter)}"

        rows: list[tuple[str, tuple[float, float]]] = []
        rows.append(("full parse (read_logs)", best(lambda: read_logs(str(path)), 1)))
        rows.append(
            (
                "json lines (json.loads each)",
                best(lambda: [json.loads(x) for x in path.open("rb")], args.repeat),
            )
        )
        rows.append(
            ("statusline cold", best(lambda: status_line(stdin, cache_dir=cache["dir"]), args.repeat, fresh))
        )
        line = status_line(stdin, cache_dir=cache["dir"])
        rows.append(
            ("statusline warm", best(lambda: status_line(stdin, cache_dir=cache["dir"]), args.repeat))
        )
        extra, _ = _call_lines(args.calls, f"a{args.calls - 1}-2", t0, args.result_bytes)

        def grow() -> None:
            with path.open("a", encoding="utf-8") as f:
                f.write("\n".join(extra) + "\n")

        rows.append(
            (
                "statusline warm +1 call",
                best(lambda: status_line(stdin, cache_dir=cache["dir"]), args.repeat, grow),
            )
        )

        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONPYCACHEPREFIX": str(folder / "pycache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        command = [sys.executable, "-m", "promptkit", "statusline"]

        def process(cache_dir: Path) -> None:
            subprocess.run([*command, "--cache-dir", str(cache_dir)], input=stdin, text=True, env=env,
                           check=True, capture_output=True)  # fmt: skip

        def python(code: str) -> None:
            subprocess.run([sys.executable, "-c", code], env=env, check=True)

        process(folder / "warm-up")
        rows.append(("process: python -c pass", best(lambda: python("pass"), args.repeat)))
        rows.append(("process: import attrs", best(lambda: python("import attrs"), args.repeat)))
        rows.append(
            ("process: import promptkit.cli", best(lambda: python("import promptkit.cli"), args.repeat))
        )
        rows.append(("process: statusline cold", best(lambda: process(cache["dir"]), args.repeat, fresh)))
        rows.append(("process: statusline warm", best(lambda: process(cache["dir"]), args.repeat)))

        full = rows[0][1][0]
        print(f"line: {line}")
        print(f"{'':32} {'wall ms':>9} {'CPU ms':>9} {'x full parse':>13}")
        for name, (seconds, cpu) in rows:
            print(f"{name:32} {seconds * 1000:9.1f} {cpu * 1000:9.1f} {seconds / full:13.4f}")


if __name__ == "__main__":
    main()
