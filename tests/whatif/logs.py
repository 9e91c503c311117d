"""Constructed logs for the what-if tests: every effect of a transform on them is known exactly."""

from __future__ import annotations

from typing import Any

from promptkit.layout import LayoutEntry, RequestRecord

RULES = "Answer in English. Cite the file and line of every claim you make about the code. " * 30


def layout_record(turn: int, *, session: str = "s", volatile: bool = True) -> RequestRecord:
    """A prompt promptkit built: persona, a stable context block, a changing one (``files``), history,
    the current message. ``turn`` messages of history (alternating user / assistant)."""
    history: list[dict[str, Any]] = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "words " * 20}
        for i in range(turn)
    ]
    files = f"Open files: file_{turn}.py" if volatile else "Open files: main.py"
    messages = [
        {"role": "system", "content": "You are a helpful assistant.\n" + RULES},
        {"role": "system", "content": "Project rules: be brief."},
        {"role": "system", "content": files},
        *history,
        {"role": "user", "content": f"question {turn}"},
    ]
    layout = (
        LayoutEntry("persona"),
        LayoutEntry("context", "rules"),
        LayoutEntry("context", "files"),
        *(LayoutEntry("history") for _ in history),
        LayoutEntry("current"),
    )
    return RequestRecord(
        {"model": "deepseek-chat", "messages": messages},
        session=session,
        index=turn // 2,
        layout=layout,
        provider="deepseek",
        completion={"role": "assistant", "content": f"answer {turn}"},
        timestamp=1_767_225_600.0 + 30 * turn,
    )


def layout_log(turns: int = 4, *, volatile: bool = True) -> list[RequestRecord]:
    return [layout_record(2 * k, volatile=volatile) for k in range(turns)]


def plain_log(
    n: int, *, timestamp: bool, session: str = "p", provider: str = "deepseek", repeat: int = 1
) -> list[RequestRecord]:
    """A log without layout: a system prompt (with a ``Current time:`` line that changes at every call
    when ``timestamp``, else a fixed one), a growing conversation."""
    out = []
    history: list[dict[str, Any]] = []
    for i in range(n):
        clock = f"2026-01-01 10:{i:02d}" if timestamp else "2026-01-01 10:00"
        system = f"You are a coding assistant.\nCurrent time: {clock}\n{RULES * repeat}"
        messages = [
            {"role": "system", "content": system},
            *history,
            {"role": "user", "content": f"step {i} " * 10},
        ]
        answer = {"role": "assistant", "content": f"done {i} " * 10}
        out.append(
            RequestRecord(
                {"model": "deepseek-chat", "messages": messages},
                session=session,
                index=i,
                provider=provider,
                completion=answer,
                timestamp=1_767_225_600.0 + 60 * i,
            )
        )
        history += [messages[-1], answer]
    return out
