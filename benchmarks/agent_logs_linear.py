"""Reading agent logs stays linear in their length.

A Claude Code transcript's request is the whole thread before each call, and a Codex rollout's the whole
item list: built naively, reading a session is quadratic. The readers build each call's context from the
previous one's (Claude Code: the nearest earlier call on the ``parentUuid`` chain; Codex: the converted
prefix of the items). This script writes synthetic tool loops of 250, 500 and 1000 calls in each format
(streamed assistant lines, tool results of a few hundred characters), reads each one (best of 3, after a
warm-up that loads the tokenizer), and prints the time per call and the ratios t(500)/t(250) and
t(1000)/t(500): about 2 means linear, about 4 quadratic.

    python benchmarks/agent_logs_linear.py
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

from promptkit.formats import read_logs

SIZES = (250, 500, 1000)


def claude_code(calls: int) -> list[dict[str, Any]]:
    """A Claude Code main thread: each call streamed as a text line and a tool_use line, then its result."""
    out: list[dict[str, Any]] = []
    parent: str | None = None

    def event(kind: str, uid: str, content: Any, **message: Any) -> None:
        nonlocal parent
        out.append({"type": kind, "uuid": uid, "parentUuid": parent, "sessionId": "bench", "isSidechain": False,
                    "timestamp": "2026-02-12T16:00:00Z", "message": {"role": kind, "content": content, **message}})  # fmt: skip
        parent = uid

    event("user", "u", "start")
    for i in range(calls):
        usage = {"input_tokens": 3, "cache_read_input_tokens": 20_000 + 300 * i, "cache_creation_input_tokens": 300,
                 "output_tokens": 50}  # fmt: skip
        message = {"id": f"msg_{i}", "model": "claude-sonnet-4-5", "usage": usage}
        event("assistant", f"a{i}", [{"type": "text", "text": f"step {i}"}], **message)
        event(
            "assistant",
            f"b{i}",
            [{"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"i": i}}],
            **message,
        )
        event(
            "user", f"r{i}", [{"type": "tool_result", "tool_use_id": f"t{i}", "content": f"line {i}\n" * 40}]
        )
    return out


def codex(calls: int) -> list[dict[str, Any]]:
    """A Codex rollout: per call a reasoning item, a function call, a token_count, the call's output."""
    out: list[dict[str, Any]] = [
        {"type": "session_meta", "payload": {"id": "bench", "base_instructions": {"text": "You are Codex."}}},
        {"type": "turn_context", "payload": {"model": "gpt-5-codex"}},
        {"type": "response_item", "payload": {"type": "message", "role": "user",
                                              "content": [{"type": "input_text", "text": "start"}]}},
    ]  # fmt: skip
    for i in range(calls):
        usage = {
            "input_tokens": 20_000 + 300 * i,
            "cached_input_tokens": 19_000 + 300 * i,
            "output_tokens": 50,
        }
        out += [
            {"type": "response_item", "payload": {"type": "reasoning", "summary": [], "encrypted_content": "x" * 40}},
            {"type": "response_item", "payload": {"type": "function_call", "name": "exec_command",
                                                  "arguments": json.dumps({"cmd": f"ls {i}"}), "call_id": f"c{i}"}},
            {"type": "event_msg", "payload": {"type": "token_count", "info": {"last_token_usage": usage,
                                                                              "total_token_usage": usage}}},
            {"type": "response_item", "payload": {"type": "function_call_output", "call_id": f"c{i}",
                                                  "output": f"line {i}\n" * 40}},
        ]  # fmt: skip
    return out


def best_time(path: Path, calls: int) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        result = read_logs(path)
        best = min(best, time.perf_counter() - start)
        assert len(result.records) == calls, (path, len(result.records))
    return best


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for name, build in (("claude-code", claude_code), ("codex", codex)):
            times = []
            for calls in SIZES:
                path = Path(tmp) / f"{name}-{calls}.jsonl"
                path.write_text("\n".join(json.dumps(e) for e in build(calls)) + "\n", encoding="utf-8")
                if calls == SIZES[0]:
                    read_logs(path)  # warm-up: imports and the tokenizer
                times.append(best_time(path, calls))
            rows.append((name, times))
    print(
        f"{'format':<12} "
        + " ".join(f"{f'ms/call @{n}':>14}" for n in SIZES)
        + f" {'t(500)/t(250)':>14} {'t(1000)/t(500)':>15}"
    )
    for name, times in rows:
        per_call = " ".join(f"{1000 * t / n:>14.3f}" for t, n in zip(times, SIZES, strict=True))
        print(f"{name:<12} {per_call} {times[1] / times[0]:>14.2f} {times[2] / times[1]:>15.2f}")


if __name__ == "__main__":
    main()
