"""The large conversation log of benchmarks/conversation_log.py: the calls asked for, in time order, each
session's prompt the previous one plus its answer and the next question, the system prompts shared, read
by the loaders without a problem."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from benchmarks.conversation_log import write_log
from promptkit.formats import read_logs


def test_the_log_holds_growing_sessions_in_time_order_that_the_loaders_read(tmp_path: Path) -> None:
    files = write_log(tmp_path, 300, calls=5, active=4, prompts=2, file_requests=120)
    assert [f.name for f in files] == ["calls-0000.jsonl", "calls-0001.jsonl", "calls-0002.jsonl"]
    lines = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    assert len(lines) == 300
    stamps = [x["timestamp"] for x in lines]
    assert stamps == sorted(stamps)
    by_session: dict[str, list[dict]] = {}
    for x in lines:
        by_session.setdefault(x["session"], []).append(x)
    assert len(by_session) >= 300 // 5 and all(len(calls) <= 5 for calls in by_session.values())
    for calls in by_session.values():
        for before, after in itertools.pairwise(calls):
            answer = before["response"]["choices"][0]["message"]
            previous = before["request"]["messages"]
            assert after["request"]["messages"][: len(previous) + 1] == [*previous, answer]
            assert len(after["request"]["messages"]) == len(previous) + 2
    systems = {calls[0]["request"]["messages"][0]["content"] for calls in by_session.values()}
    assert len(systems) == 2  # every session starts with one of the shared system prompts
    loaded = read_logs(tmp_path)
    assert len(loaded.records) == 300 and not loaded.problems
