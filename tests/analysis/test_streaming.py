"""Streaming load: sessions yielded once complete, messages shared across a session's records, the
streamed analysis equal to the loaded one, and a 50 MB message analyzed in bounded memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from polars.testing import assert_frame_equal

from promptkit.analysis.api import analyze
from promptkit.errors import UsageError
from promptkit.formats import iter_sessions, read_logs, stream_logs

LOGS = ["fixtures/logs", "fixtures/real-logs/deepseek"]


def _line(session: str, k: int, ts: float) -> str:
    messages = [{"role": "system", "content": "shared system prompt"}]
    for j in range(k + 1):
        messages.append({"role": "user", "content": f"{session} question {j}"})
        if j < k:
            messages.append({"role": "assistant", "content": f"{session} answer {j}"})
    return json.dumps(
        {"session": session, "timestamp": ts, "request": {"model": "deepseek-chat", "messages": messages}}
    )


def test_sessions_are_yielded_when_their_last_record_is_read(tmp_path: Path) -> None:
    # a0 b0 a1 c0 b1 c1: a ends on line 3, b on line 5, c on line 6
    order = [("a", 0), ("b", 0), ("a", 1), ("c", 0), ("b", 1), ("c", 1)]
    log = tmp_path / "calls.jsonl"
    log.write_text("\n".join(_line(s, k, 100.0 + n) for n, (s, k) in enumerate(order)) + "\n")
    stream = stream_logs(log)
    assert stream.records == 6
    seen = []
    for items in stream.positioned():
        seen.append((items[0][1].session, [pos for pos, _ in items], [r.index for _, r in items]))
    assert seen == [("a", [0, 2], [0, 1]), ("b", [1, 4], [0, 1]), ("c", [3, 5], [0, 1])]


@pytest.mark.slow
def test_streamed_sessions_match_read_logs() -> None:
    loaded = read_logs(LOGS)
    stream = stream_logs(LOGS)
    streamed = [r for session in stream.sessions() for r in session]
    assert sorted(streamed, key=lambda r: (r.session, r.index)) == sorted(
        loaded.records, key=lambda r: (r.session, r.index)
    )
    assert stream.problems == loaded.problems
    assert stream.notes == list(loaded.notes)  # split files, reordered calls
    assert sum(len(s) for s in iter_sessions(LOGS)) == len(loaded.records)


def test_loader_shares_identical_messages_across_a_session() -> None:
    loaded = read_logs("fixtures/real-logs/deepseek")
    first: dict[str, object] = {}
    shared = 0
    for r in loaded.records:
        system = r.request["messages"][0]
        if r.session in first:
            assert system == first[r.session]
            shared += system is first[r.session]
        first.setdefault(r.session, system)
    assert shared == len(loaded.records) - len(first)


@pytest.mark.slow
def test_streamed_analysis_equals_the_loaded_one() -> None:
    a = analyze(LOGS)
    b = analyze(LOGS, stream=True)
    assert_frame_equal(a.requests, b.requests)
    assert_frame_equal(a.composition, b.composition)
    assert_frame_equal(a.problems, b.problems)
    assert a.notes == b.notes
    assert a.requests.height + a.problems.height >= 352


def test_streaming_is_for_the_consecutive_view() -> None:
    with pytest.raises(UsageError, match="consecutive"):
        analyze(LOGS, view="simulated", stream=True)


# DeepSeek's tokenizer (HF tokenizers) runs at about 1 MB of text a second here, so its message is
# 10 MB: encoded whole it took 146 bytes a character (7.3 GB for 50 MB; 1.5 GB for this one), and
# encoded in chunks it stays far below 1 GB. benchmarks/memory.py --big-message measures 50 MB with both.
@pytest.mark.slow
@pytest.mark.parametrize(("provider", "megabytes"), [("openai", 50), ("deepseek", 10)])
def test_a_big_message_stays_under_1gb(tmp_path: Path, provider: str, megabytes: int) -> None:
    script = textwrap.dedent(
        """
        import resource, sys
        from pathlib import Path
        from benchmarks.memory import write_big_message
        from promptkit.analysis.api import analyze
        write_big_message(Path(sys.argv[1]), megabytes=int(sys.argv[3]))
        result = analyze(sys.argv[1], provider=sys.argv[2], stream=True)
        try:  # this interpreter's own peak: ru_maxrss keeps the parent's from before exec (Linux)
            with open("/proc/self/status") as status:
                peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
        except OSError:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(result.requests["prompt_tokens"][0], peak)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "big.jsonl"), provider, str(megabytes)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    tokens, peak_kb = map(int, done.stdout.split())
    assert tokens > megabytes * 200_000  # the whole message was tokenized (4 to 5 characters a token)
    assert peak_kb < 1024 * 1024, f"peak RSS {peak_kb / 1024:.0f} MB"


@pytest.mark.slow
def test_streamed_analysis_of_a_generated_log_equals_the_loaded_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the benchmark's log (sessions interleaved, four open at a time), plus a request with a lone
    # surrogate (mended, noted) and a broken line (a load problem); tiny chunks so that the streamed
    # path merges many chunks into blocks and sorts the blocks back into record order
    from benchmarks.memory import write_log
    from promptkit.analysis.plans import stream as stream_plan

    log = tmp_path / "calls.jsonl"
    write_log(log, requests=240, calls=7, seed=5)
    lines = log.read_text().splitlines()
    odd = json.loads(lines[100])
    odd["request"]["messages"][-1]["content"] += " \ud800"
    lines[100] = json.dumps(odd)
    lines.insert(50, '{"session": "broken", "request": ')
    log.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(stream_plan, "_STREAM_BATCH", 5)
    monkeypatch.setattr(stream_plan, "_MERGE_EVERY", 3)
    for provider in ("exact", None):
        loaded = analyze(log, provider=provider)
        streamed = analyze(log, provider=provider, stream=True)
        assert_frame_equal(loaded.requests, streamed.requests)
        assert_frame_equal(loaded.composition, streamed.composition)
        assert_frame_equal(loaded.problems, streamed.problems)
        assert loaded.notes == streamed.notes
        assert loaded.hit_ratio == streamed.hit_ratio
        assert streamed.requests.height == 240 and streamed.problems.height == 1
        assert any("surrogate" in note for note in streamed.notes)
        # record order: by file line, as loaded
        assert streamed.requests["line"].is_sorted()
