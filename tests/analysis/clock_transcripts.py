"""Claude Code transcripts for the cache-clock tests, written as Claude Code writes them: a user event
per prompt or tool result, each model call streamed as several assistant lines repeating its message id
and usage (the earlier lines with a partial output count), progress lines in between, and optionally a
``compact_boundary``, a sidechain and a synthetic message."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

SESSION = "5b7c9a52-1111-4222-8333-944455556666"
#: The first user event's time.
T0 = datetime(2026, 3, 2, 10, 0, 0, tzinfo=UTC).timestamp()
MODEL = "claude-opus-4-6"


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@attrs.frozen
class Call:
    """One model call: the user event at ``at`` (seconds after :data:`T0`), the first assistant line
    ``latency`` seconds later, its reported counts."""

    at: float
    read: int
    write_5m: int = 0
    write_1h: int = 0
    uncached: int = 3
    output: int = 50
    model: str = MODEL
    latency: float = 4.0
    lines: int = 3
    compact_before: bool = False
    split: bool = True  # whether the usage splits writes into ephemeral_5m / ephemeral_1h


def usage(call: Call, output: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "input_tokens": call.uncached,
        "cache_creation_input_tokens": call.write_5m + call.write_1h,
        "cache_read_input_tokens": call.read,
        "output_tokens": output,
        "service_tier": "standard",
    }
    if call.split:
        out["cache_creation"] = {
            "ephemeral_5m_input_tokens": call.write_5m,
            "ephemeral_1h_input_tokens": call.write_1h,
        }
    return out


def events(
    calls: Sequence[Call], *, sidechain: bool = False, synthetic: bool = False
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"type": "file-history-snapshot", "messageId": "m0", "snapshot": {}}]
    parent: str | None = None
    base = {
        "sessionId": SESSION,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/w",
        "version": "2.1.0",
    }
    for n, call in enumerate(calls):
        if call.compact_before:
            out.append({**base, "type": "system", "subtype": "compact_boundary", "uuid": f"c{n}",
                        "parentUuid": None, "timestamp": iso(T0 + call.at - 1), "content": "Conversation compacted"})  # fmt: skip
            parent = f"c{n}"
        user = f"u{n}"
        out.append({**base, "type": "user", "uuid": user, "parentUuid": parent, "timestamp": iso(T0 + call.at),
                    "message": {"role": "user", "content": f"question {n}"}})  # fmt: skip
        parent = user
        for k in range(call.lines):
            out.append({"type": "progress", "uuid": f"p{n}-{k}", "timestamp": iso(T0 + call.at + 1),
                        "data": {"type": "hook_progress", "message": {"type": "user"}}})  # fmt: skip
            line = f"a{n}-{k}"
            out.append({**base, "type": "assistant", "uuid": line, "parentUuid": parent, "requestId": f"req_{n}",
                        "timestamp": iso(T0 + call.at + call.latency + k),
                        "message": {"id": f"msg_{n}", "model": call.model, "role": "assistant", "type": "message",
                                    "content": [{"type": "text", "text": f"answer {n}.{k}"}],
                                    "usage": usage(call, call.output if k == call.lines - 1 else 1)}})  # fmt: skip
            parent = line
        if sidechain:
            out.append({**base, "isSidechain": True, "type": "assistant", "uuid": f"s{n}", "parentUuid": parent,
                        "timestamp": iso(T0 + call.at + 30), "requestId": f"side_{n}",
                        "message": {"id": f"side_{n}", "model": "claude-haiku-4-5", "role": "assistant",
                                    "content": [{"type": "text", "text": "side"}], "usage": usage(Call(0, 0, 999), 1)}})  # fmt: skip
        if synthetic:
            out.append({**base, "type": "assistant", "uuid": f"y{n}", "parentUuid": parent,
                        "timestamp": iso(T0 + call.at + 31),
                        "message": {"id": f"syn_{n}", "model": "<synthetic>", "role": "assistant",
                                    "content": [{"type": "text", "text": "API Error"}], "usage": usage(Call(0, 0, 999), 0)}})  # fmt: skip
    return out


def write_transcript(path: Path, calls: Sequence[Call], **kwargs: Any) -> Path:
    """``path`` (``<SESSION>.jsonl``) with the events of ``calls``, one compact JSON line each."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(e, separators=(",", ":")) for e in events(calls, **kwargs)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def a_session() -> list[Call]:
    """A session of four calls: a cold start, two hits, and a fourth call after a 7-minute pause
    that reads only the system prompt back (a TTL expiry)."""
    return [
        Call(0, read=0, write_5m=12000),
        Call(40, read=12000, write_5m=800),
        Call(95, read=12800, write_5m=600),
        Call(95 + 420, read=5000, write_5m=8500),
    ]
