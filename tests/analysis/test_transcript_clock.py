"""Tests for promptkit/analysis/transcript_clock.py: reading a Claude Code transcript incrementally gives
what one full read gives, whatever the points the file was read at."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from promptkit.analysis.clock import ClockPrice, Lifetimes
from promptkit.analysis.transcript_clock import TranscriptClockState, read_transcript
from promptkit.errors import RecordFormatError
from tests.analysis.clock_transcripts import SESSION, T0, Call, a_session, write_transcript

LIFE = Lifetimes(300.0, 3600.0)
PRICE = ClockPrice(0.5, 5.0, 25.0, 6.25, 10.0)


def _read(state: TranscriptClockState) -> TranscriptClockState:
    return read_transcript(state, price_of=lambda model: PRICE, lifetimes=LIFE)


def _full(path: Path) -> TranscriptClockState:
    return _read(TranscriptClockState.start(str(path)))


def test_a_full_read(tmp_path: Path) -> None:
    path = write_transcript(tmp_path / f"{SESSION}.jsonl", a_session())
    state = _full(path)
    clock = state.clock(now=T0 + 600)
    assert (clock.session, clock.calls, clock.last_call_at) == (SESSION, 4, T0 + 515)  # the user event's time
    assert (state.offset, state.size, state.skipped_lines) == (path.stat().st_size, path.stat().st_size, 0)
    assert state.lines == len(path.read_text().splitlines())


def test_streamed_lines_of_one_call_are_one_call_with_the_last_lines_usage(tmp_path: Path) -> None:
    one = write_transcript(tmp_path / "one.jsonl", [Call(0, read=0, write_5m=9000, output=400, lines=1)])
    three = write_transcript(tmp_path / "three.jsonl", [Call(0, read=0, write_5m=9000, output=400, lines=3)])
    a, b = _full(one).clock(now=T0 + 10), _full(three).clock(now=T0 + 10)
    assert a.calls == b.calls == 1 and a.cost_usd == b.cost_usd
    assert b.cost_usd == PRICE.cost(prompt=9003, cached=0, written=9000, written_1h=0, output=400)


def test_sidechains_and_synthetic_messages_are_not_the_sessions_calls(tmp_path: Path) -> None:
    plain = _full(write_transcript(tmp_path / "a.jsonl", a_session())).clock(now=T0 + 600)
    noisy = _full(write_transcript(tmp_path / "b.jsonl", a_session(), sidechain=True, synthetic=True))
    assert noisy.clock(now=T0 + 600) == plain


def test_reading_in_pieces_gives_the_full_read(tmp_path: Path) -> None:
    """The file grows line by line, and also stops mid-line: after every growth the state is read
    on, and in the end it is the state of one full read."""
    calls = [*a_session(), Call(600, read=13500, write_1h=900, compact_before=True)]
    full_path = write_transcript(tmp_path / "full.jsonl", calls)
    data = full_path.read_bytes()
    ends = [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    cuts = sorted({*ends, *(e - 7 for e in ends[1:])})  # every line end, and 7 bytes before each
    growing = tmp_path / "growing.jsonl"
    growing.write_bytes(b"")
    state = TranscriptClockState.start(str(growing))
    for cut in cuts:
        with growing.open("r+b") as f:
            f.seek(0, os.SEEK_END)
            f.write(data[f.tell() : cut])
        state = _read(state)
        assert state.offset <= cut and data[state.offset - 1 : state.offset] in (b"\n", b"")
    expected = _full(full_path)
    assert state.clock(now=T0 + 700) == expected.clock(now=T0 + 700)
    assert state.tally == expected.tally and state.lines == expected.lines
    assert state.clock(now=T0 + 700).last_miss_cause is None  # read all the previous call left


def test_a_compaction_before_a_miss_is_its_cause(tmp_path: Path) -> None:
    calls = [*a_session()[:3], Call(200, read=5000, write_5m=2000, compact_before=True)]
    assert (
        _full(write_transcript(tmp_path / "c.jsonl", calls)).clock(now=T0 + 250).last_miss_cause
        == "compaction"
    )


def test_a_file_that_shrank_or_was_replaced_is_read_again(tmp_path: Path) -> None:
    path = write_transcript(tmp_path / "t.jsonl", a_session())
    state = _full(path)
    write_transcript(path, a_session()[:2])  # shorter: rewritten
    again = _read(state)
    assert again.clock(now=T0 + 100) == _full(path).clock(now=T0 + 100)
    assert again.clock(now=T0 + 100).calls == 2
    other = write_transcript(tmp_path / "other.jsonl", a_session()[:3])
    os.replace(other, path)  # another file (inode) under the same name
    assert _read(again).clock(now=T0 + 100).calls == 3


def test_an_unchanged_file_is_not_read(tmp_path: Path) -> None:
    path = write_transcript(tmp_path / "t.jsonl", a_session())
    state = _full(path)
    assert _read(state) is state


def test_a_bad_line_is_counted_and_named_and_the_rest_is_read(tmp_path: Path) -> None:
    path = write_transcript(tmp_path / "t.jsonl", a_session())
    lines = path.read_text().splitlines()
    bad_usage = json.loads(next(x for x in lines if '"assistant"' in x))
    bad_usage["message"]["usage"]["cache_read_input_tokens"] = "many"
    bad_usage["message"]["id"] = "msg_bad"
    lines[1:1] = ['{"type":"assistant", not json', json.dumps(bad_usage)]
    path.write_text("\n".join(lines) + "\n")
    state = _full(path)
    assert state.skipped_lines == 2 and state.clock(now=T0).calls == 4
    assert state.first_skip is not None and state.first_skip.startswith(f"{path}:2: ")
    assert "cache_read_input_tokens" in _full_skip_of(tmp_path, bad_usage)


def _full_skip_of(tmp_path: Path, event: dict[str, object]) -> str:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(event) + "\n")
    return _full(path).first_skip or ""


def test_a_state_round_trips_through_json_and_refuses_others(tmp_path: Path) -> None:
    state = _full(write_transcript(tmp_path / "t.jsonl", a_session()))
    assert TranscriptClockState.from_json(json.loads(json.dumps(state.to_json()))) == state
    with pytest.raises(RecordFormatError, match="offset"):
        TranscriptClockState.from_json({**state.to_json(), "offset": -1})
    with pytest.raises(KeyError):
        TranscriptClockState.from_json({"path": "x"})
