"""The streamed plans' frames written to disk as they are made (:mod:`promptkit.analysis.plans.sink`),
and the consecutive view streamed in time order (:mod:`promptkit.analysis.plans.timeline`): the same
result as the loaded plan, batches on disk before the run ends, the rows held never more than a flush's,
each session let go of at its last call, bad lines still problems with their file and line, and the
spill folder removed once nothing reads it."""

from __future__ import annotations

import gc
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from polars.testing import assert_frame_equal

from benchmarks.conversation_log import write_log
from promptkit.analysis import api
from promptkit.analysis.composition import CompositionRows
from promptkit.analysis.plans import sink as sink_module, timeline
from promptkit.analysis.plans.sink import FrameSink
from promptkit.analysis.plans.stream import STREAM_CACHE_TOKENS
from promptkit.analysis.plans.timeline import analyze_timeline
from promptkit.commands.analyze import run_analyze
from promptkit.tokens.tokenize import RequestTokenizer
from tests.analysis.test_timeline import assert_same, loaded


def _write_log(folder: Path, requests: int, *, calls: int, active: int, file_requests: int = 10_000) -> None:
    write_log(folder, requests, calls=calls, active=active, prompts=3, file_requests=file_requests)


def _spy_runs(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What each run held when it finished (before its frames were read back)."""
    seen: list[dict[str, Any]] = []
    partial = timeline.BoundedRun.partial

    def spy(self: timeline.BoundedRun) -> Any:
        seen.append(
            {
                "batches": self.sink.batches if self.sink is not None else 0,
                "held_frames": len(self.requests_frames),
                "most_rows": self.most_rows,
                "previous": len(self.replay.previous),
                "facts": len(self.replay.facts),
                "prepared": len(self.prepared),
                "cache_tokens": self.ctx.rt.cache_tokens,
            }
        )
        return partial(self)

    monkeypatch.setattr(timeline.BoundedRun, "partial", spy)
    return seen


def test_the_consecutive_view_streamed_holds_a_flush_of_rows_and_the_open_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_log(tmp_path, 300, calls=6, active=8, file_requests=120)
    monkeypatch.setattr(timeline, "FLUSH_ROWS", 16)
    written_while_running: list[int] = []
    release = timeline.BoundedRun.release

    def spy_release(self: timeline.BoundedRun, session: str, last: bool) -> None:
        release(self, session, last)
        assert self.sink is not None
        written_while_running.append(self.sink.batches)
        # the consecutive view keeps each open session's previous request, no more
        assert len(self.replay.previous) <= 8 and len(self.prepared) <= 8 and len(self.replay.facts) <= 8

    monkeypatch.setattr(timeline.BoundedRun, "release", spy_release)
    runs = _spy_runs(monkeypatch)
    want = loaded(tmp_path)
    assert want.view == "consecutive" and want.requests.height == 300
    assert_same(want, analyze_timeline(tmp_path, None))
    # batches were on disk long before the run ended, one per 16 rows; the run never held more rows
    assert written_while_running[150] >= 150 // 16 - 1
    (run,) = runs
    assert run["batches"] >= 300 // 16 and run["held_frames"] == 0 and 0 < run["most_rows"] <= 16
    assert run["previous"] == run["facts"] == run["prepared"] == 0  # every session ended
    assert run["cache_tokens"] == STREAM_CACHE_TOKENS  # the segment cache bounded as the stream plan's


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    requests=st.integers(1, 120),
    calls=st.integers(1, 9),
    active=st.integers(1, 12),
    flush=st.integers(1, 40),
    spill=st.booleans(),
)
def test_streamed_consecutive_frames_are_the_loaded_ones(
    tmp_path_factory: pytest.TempPathFactory, requests: int, calls: int, active: int, flush: int, spill: bool
) -> None:
    folder = tmp_path_factory.mktemp("log")
    _write_log(folder, requests, calls=calls, active=active, file_requests=50)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(timeline, "FLUSH_ROWS", flush)
        got = analyze_timeline(folder, None, spill=spill)
    assert_same(loaded(folder), got)


def test_bad_lines_in_a_streamed_run_are_problems_with_their_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_log(tmp_path, 40, calls=4, active=3)
    log = tmp_path / "calls-0000.jsonl"
    lines = log.read_text().splitlines()
    lines.insert(5, "{not json")
    lines.insert(9, json.dumps({"session": "s9", "timestamp": 1_780_000_001.0, "request": {"model": "x"}}))
    log.write_text("\n".join(lines) + "\n")
    calls: list[Any] = []
    real = api.analyze_timeline
    monkeypatch.setattr(api, "analyze_timeline", lambda *a, **k: calls.append(a) or real(*a, **k))
    monkeypatch.setattr(api, "TIMELINE_MIN_BYTES", 1)
    got = api.analyze(tmp_path)
    assert calls and got.view == "consecutive"
    assert_same(loaded(tmp_path), got)
    where = {(Path(f).name, line) for f, line in got.problems.select("file", "line").rows()}
    assert ("calls-0000.jsonl", 6) in where and ("calls-0000.jsonl", 10) in where


def test_the_spill_folder_goes_once_nothing_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_log(tmp_path / "log", 60, calls=5, active=4)
    monkeypatch.setattr(timeline, "FLUSH_ROWS", 8)
    monkeypatch.setenv(sink_module.SPILL_ENV, str(tmp_path / "spill"))
    (tmp_path / "spill").mkdir()
    result = analyze_timeline(tmp_path / "log", None)
    assert result is not None
    (folder,) = (tmp_path / "spill").iterdir()  # made where PROMPTKIT_SPILL_DIR says
    assert (
        len(list(folder.glob("requests-*.arrow")))
        == len(list(folder.glob("composition-*.pickle")))
        >= 60 // 8
    )
    assert_frame_equal(result.composition, loaded(tmp_path / "log").composition)  # read back from disk
    del result
    gc.collect()
    assert not folder.exists()


def test_a_sink_without_batches_and_removed_at_once(tmp_path: Path) -> None:
    sink = FrameSink(tmp_path)
    assert sink.path.parent == tmp_path and sink.requests().height == 0
    sink.remove()
    assert not sink.path.exists()


def test_pickled_composition_rows_make_the_same_frame_without_the_sessions_messages() -> None:
    rt = RequestTokenizer("chatml", "cl100k_base")
    rows = CompositionRows()
    first = {"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}]}
    second = {
        "messages": [
            *first["messages"],
            {"role": "assistant", "content": "yo"},
            {"role": "user", "content": "x"},
        ]
    }
    rows.add("s", 0, first, rt.tokenize(first))
    rows.add("s", 1, second, rt.tokenize(second))
    state = rows.__getstate__()
    assert "_last" not in state and "_chains" not in state
    assert b"Be terse" not in pickle.dumps(rows)  # the messages' content stays behind
    assert_frame_equal(pickle.loads(pickle.dumps(rows)).frame(position=True), rows.frame(position=True))


def test_the_command_writes_the_same_files_streamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_log(tmp_path / "log", 80, calls=5, active=6, file_requests=30)
    formats = ["parquet", "csv", "summary", "causes", "problems"]
    monkeypatch.setattr(api, "TIMELINE_MIN_BYTES", 2**62)
    want = run_analyze([tmp_path / "log"], out=tmp_path / "loaded", formats=formats)
    monkeypatch.setattr(api, "TIMELINE_MIN_BYTES", 1)
    monkeypatch.setattr(timeline, "FLUSH_ROWS", 7)
    got = run_analyze([tmp_path / "log"], out=tmp_path / "streamed", formats=formats)
    assert got.quiet_text() == want.quiet_text() and got.text() == want.text()
    for path in want.written.paths:
        assert (tmp_path / "streamed" / path.name).read_bytes() == path.read_bytes(), path.name
