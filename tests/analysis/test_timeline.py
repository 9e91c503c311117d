"""The timeline plan (the simulated view streamed in time order) gives the loaded analysis' result on
every golden log and on generated corpora, lets go of what the cache can no longer read, names the
files out of time order beyond its look-ahead, and is what ``analyze`` runs on large inputs."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from polars.testing import assert_frame_equal

from promptkit.analysis import api
from promptkit.analysis.api import analyze, analyze_requests
from promptkit.analysis.plans import timeline, timeline_index
from promptkit.analysis.plans.timeline import analyze_timeline, in_time_order
from promptkit.analysis.plans.timeline_index import index_logs
from promptkit.analysis.result import AnalysisResult
from promptkit.analysis.simulator import CacheSimulator
from promptkit.errors import LogFileError
from promptkit.formats import read_logs
from promptkit.tokens.cache_models import CacheEntry, CachePlan, get_cache_model
from tests.golden_frames import LOGS, ROOT


def _corpus_builder() -> Any:
    spec = importlib.util.spec_from_file_location(
        "claude_code_corpus", ROOT / "benchmarks" / "claude_code_corpus.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["claude_code_corpus"] = module
    spec.loader.exec_module(module)
    return module


def assert_same(a: AnalysisResult, b: AnalysisResult | None) -> None:
    """Every public field of two results equal (frames cell by cell)."""
    assert b is not None
    for field in attrs.fields(type(a)):
        if not field.init:  # what a result computes from its frames and holds
            continue
        # a field's public name (``_composition`` is read through the ``composition`` property)
        x, y = getattr(a, field.alias), getattr(b, field.alias)
        if hasattr(x, "columns"):
            assert_frame_equal(x, y)
        else:
            assert x == y, field.name


def loaded(paths: Any, **kwargs: Any) -> AnalysisResult:
    """The reference: every record loaded, then analyzed (the local plan)."""
    return analyze_requests(read_logs(paths), **kwargs)


@pytest.mark.parametrize("spill", [True, False], ids=["spilled", "held"])
@pytest.mark.parametrize("view", ["simulated", "consecutive", None])
@pytest.mark.parametrize("name", sorted(LOGS))
def test_golden_logs_give_the_loaded_result(name: str, view: str | None, spill: bool) -> None:
    paths = [str(ROOT / p) for p in LOGS[name][0]]
    want = loaded(paths, view=view)
    got = analyze_timeline(paths, None, view=view, spill=spill)
    if got is None:  # a record has no time: the loaded plan's order (load order) is used instead
        assert want.requests["timestamp"].null_count() > 0 or want.problems.height > 0
        return
    assert_same(want, got)


def test_the_default_view_of_a_claude_code_project() -> None:
    paths = str(ROOT / "fixtures/claude-code")
    want = loaded(paths)
    assert want.view == "simulated"
    assert_same(want, analyze_timeline(paths, None))


def test_a_log_of_the_consecutive_view_is_streamed_in_that_view() -> None:
    paths = str(ROOT / "fixtures/real-logs/deepseek")
    want = loaded(paths)
    assert want.view == "consecutive"
    assert_same(want, analyze_timeline(paths, None))


def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many items the first pass took from each file it read (read_items wrapped)."""
    taken: list[int] = []
    real = timeline_index.read_items

    def counted(fmt: Any, source: Any) -> Any:
        taken.append(0)
        for item in real(fmt, source):
            taken[-1] += 1
            yield item

    monkeypatch.setattr(timeline_index, "read_items", counted)
    return taken


def test_the_first_pass_stops_at_the_first_record_it_cannot_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a timed flat log is indexed whole (both views stream it)
    _write_sessions(tmp_path)
    taken = _counting_reads(monkeypatch)
    index = index_logs(tmp_path, None, None)
    assert index is not None and index.records == len(read_logs(tmp_path).records) > 2
    assert len(taken) == 2 and sum(taken) >= index.records
    # a record without a time stops it whatever the view: the streamed plan replays only timed groups
    for f in tmp_path.iterdir():
        f.unlink()
    _write_sessions(tmp_path, untimed=True)
    taken.clear()
    assert index_logs(tmp_path, None, None) is None
    assert sum(taken) < len(read_logs(tmp_path).records)


def test_logs_without_records_are_left_to_the_loaded_plan(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("")
    assert analyze_timeline(tmp_path, None) is None


@pytest.mark.parametrize("gap_hours", [0.02, 3.0, 30.0])
def test_claude_code_copies_give_the_loaded_result(
    gap_hours: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # copies a minute apart share the live cache, three hours apart an expired one, 30 hours apart
    # nothing (forgotten); tiny sweeps and flushes run both many times
    _corpus_builder().build(tmp_path, 6, gap_hours)
    monkeypatch.setattr(timeline, "SWEEP_MIN", 2)
    monkeypatch.setattr(timeline, "FLUSH_ROWS", 4)
    held: list[int] = []
    partial = timeline.BoundedRun.partial

    def spy(self: timeline.BoundedRun) -> Any:
        held.append(len(self.prepared))
        # the frames went to disk as they were made, the run never held more rows than a flush's
        assert self.sweeps > 0 and self.sink is not None and self.sink.batches > 1
        assert not self.requests_frames and 0 < self.most_rows <= 4
        assert self.replay.sims  # the simulated view
        for sim in self.replay.sims.values():  # every session ended, in every model's cache
            assert not sim._latest and not sim.cache._cursors and not sim.cache._paths
        assert not self.replay.session_tokens
        out = partial(self)
        assert out.requests["_seq"].to_list() == list(range(out.requests.height))  # across flushes
        return out

    monkeypatch.setattr(timeline.BoundedRun, "partial", spy)
    want = loaded(tmp_path)
    assert want.requests.height == 18
    assert_same(want, analyze_timeline(tmp_path, None))
    if gap_hours > 24:  # each copy's requests are let go of once its content is forgotten
        assert held and max(held) <= 2 * 3


def _log_line(session: str, k: int, ts: float | None, model: str) -> str:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "a shared system prompt " * 40}]
    for j in range(k + 1):
        messages.append({"role": "user", "content": f"{session} question {j} " * 30})
        if j < k:
            messages.append({"role": "assistant", "content": f"{session} answer {j} " * 20})
    return json.dumps(
        {"session": session, "timestamp": ts, "request": {"model": model, "messages": messages}}
    )


def _write_sessions(folder: Path, disorder: bool = True, untimed: bool = False) -> None:
    """Two files of interleaved sessions of two providers, one session spanning both files, the calls
    a little out of time order within a file (and one without a time)."""
    rng = np.random.default_rng(5)
    folder.mkdir(parents=True, exist_ok=True)
    for f, (sessions, model) in enumerate(
        [(("a", "b", "x"), "deepseek-chat"), (("c", "x"), "claude-sonnet-4-5")]
    ):
        lines = []
        for s in sessions:
            start = 1000.0 * ord(s[0]) if s != "x" else 50_000.0 + 400.0 * f
            calls = range(f * 4, f * 4 + 4) if s == "x" else range(6)
            lines += [(start + 200.0 * k + rng.uniform(0, 50), s, k) for k in calls]
        lines.sort()
        if disorder:  # swap neighbours: a log nearly in time order
            for i in range(0, len(lines) - 1, 5):
                lines[i], lines[i + 1] = lines[i + 1], lines[i]
        text = [_log_line(s, k, None if untimed and (s, k) == ("c", 3) else ts, model) for ts, s, k in lines]
        (folder / f"calls-{f}.jsonl").write_text("\n".join(text) + "\n")


def test_interleaved_sessions_of_two_providers_give_the_loaded_result(tmp_path: Path) -> None:
    _write_sessions(tmp_path)
    want = loaded(tmp_path, view="simulated")
    assert set(want.provider.split(", ")) == {"deepseek", "anthropic"}
    assert any("calls were not in time order" in n for n in want.notes)
    assert any("spans 2 files" in n for n in want.notes)
    assert_same(want, analyze_timeline(tmp_path, None, view="simulated"))


def test_a_record_without_a_time_leaves_the_group_to_the_loaded_plan(tmp_path: Path) -> None:
    _write_sessions(tmp_path, untimed=True)
    assert analyze_timeline(tmp_path, None, view="simulated") is None


def test_records_out_of_order_beyond_the_look_ahead_are_named_and_replayed_in_time_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timeline_index, "LOOKAHEAD", 2)
    log = tmp_path / "calls.jsonl"
    order = [("a", k, 100.0 * k) for k in range(8)]
    # call 6 on line 2: calls 3, 4 and 5 (lines 5 to 7) come 3 or more lines after it
    order.insert(1, order.pop(6))
    log.write_text("\n".join(_log_line(s, k, ts, "deepseek-chat") for s, k, ts in order) + "\n")
    want = loaded(log, view="simulated")
    got = analyze_timeline(log, None, view="simulated")
    assert got is not None
    extra = [n for n in got.notes if n not in want.notes]
    assert extra == [
        f"{log}: line 5: 3 record(s) out of time order by more than 2 records in the file; the file was held "
        "whole to replay it in time order"
    ]
    assert_same(attrs.evolve(want, notes=got.notes), got)


def test_records_out_of_order_within_the_look_ahead_need_no_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timeline_index, "LOOKAHEAD", 2)
    log = tmp_path / "calls.jsonl"
    order = [("a", k, 100.0 * k) for k in range(8)]
    order.insert(2, order.pop(0))  # call 0 on line 3, two lines after calls 1 and 2
    log.write_text("\n".join(_log_line(s, k, ts, "deepseek-chat") for s, k, ts in order) + "\n")
    want = loaded(log, view="simulated")
    assert_same(want, analyze_timeline(log, None, view="simulated"))


def test_a_file_changed_between_the_passes_is_an_error(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    log.write_text("\n".join(_log_line("a", k, 10.0 * k, "deepseek-chat") for k in range(3)) + "\n")
    index = index_logs(log, None, None)
    with log.open("a") as f:
        f.write(_log_line("a", 3, 40.0, "deepseek-chat") + "\n")
    with pytest.raises(LogFileError, match="changed while it was analyzed"):
        list(in_time_order(index))


def test_the_index_orders_as_the_local_plan(tmp_path: Path) -> None:
    _write_sessions(tmp_path)
    # calls at the same time (turns then follow the places), and a session whose last call in time
    # is not its last line
    ties = [("t", 0, 100.0), ("u", 0, 100.0), ("t", 2, 300.0), ("t", 1, 100.0), ("u", 1, 300.0)]
    text = "\n".join(_log_line(s, k, ts, "deepseek-chat") for s, k, ts in ties) + "\n"
    (tmp_path / "calls-2.jsonl").write_text(text)
    index = index_logs(tmp_path, None, None)
    records = read_logs(tmp_path).records
    turns = sorted(range(len(records)), key=lambda k: (records[k].timestamp, k))
    got = [(int(index.pos[r]), record.session, int(index.index[r])) for r, record in in_time_order(index)]
    assert got == [(k, records[k].session, records[k].index) for k in turns]
    last = {records[k].session: k for k in turns}
    assert sorted(int(index.pos[r]) for r in np.flatnonzero(index.last)) == sorted(last.values())


def test_analyze_streams_large_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _corpus_builder().build(tmp_path, 3, 0.5)
    calls: list[Any] = []
    real = api.analyze_timeline

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(api, "analyze_timeline", spy)
    small = analyze(tmp_path)
    assert not calls  # below the threshold: loaded
    monkeypatch.setattr(api, "TIMELINE_MIN_BYTES", 1)
    assert_same(small, analyze(tmp_path))
    assert len(calls) == 1
    small = analyze(tmp_path, view="consecutive")
    monkeypatch.setattr(api, "TIMELINE_MIN_BYTES", 2**62)
    assert_same(analyze(tmp_path, view="consecutive"), small)
    assert len(calls) == 2  # the consecutive view is streamed the same way


def test_forgotten_content_reads_as_never_stored() -> None:
    sim = CacheSimulator(get_cache_model("unit-prefix", ttl=300, unit=1))
    plan = CachePlan(3000, (CacheEntry(3000, ttl=300.0),))
    sim.store(np.arange(3000), plan, now=0.0, source="old#0")
    lost = sim.lookup(np.arange(3000), plan, now=1000.0)
    assert lost.cached_tokens == 0 and lost.lost_source == "old#0" and lost.unexpired_cached_tokens == 3000
    assert sim.sources() == {"old#0"}
    assert sim.forget_expired(200.0) == 0  # expired at 300: not before 200
    assert sim.forget_expired(400.0) == 3000
    gone = sim.lookup(np.arange(3000), plan, now=1000.0)
    assert gone.lost_source is None and not gone.unexpired_cached_tokens
    assert sim.sources() == set()


def test_an_ended_session_is_forgotten() -> None:
    sim = CacheSimulator(get_cache_model("unit-prefix"))
    sim.step(np.arange(500), CachePlan(500, (CacheEntry(500),)), 0.0, "s#0", session="s")
    sim.step(np.arange(600), CachePlan(600, (CacheEntry(600),)), 1.0, "s#1", session="s", shared=500)
    assert "s" in sim.cache._cursors and "s" in sim.cache._paths  # the continuation kept its path
    sim.end_session("s")
    assert "s" not in sim.cache._cursors and "s" not in sim.cache._paths


def test_the_sources_are_every_label_and_pending_write() -> None:
    sim = CacheSimulator(get_cache_model("unit-prefix", unit=1, delay=10.0))
    sim.store(np.arange(100), CachePlan(100, (CacheEntry(100, exact=True),)), now=0.0, source="a#0")
    assert sim.sources() == {"a#0"}  # still pending
    sim.store(np.arange(300), CachePlan(300, (CacheEntry(300),)), now=20.0, source="a#1")
    # a#0 written at 10 and marks an exact entry; a#1 pending
    assert sim.sources() == {"a#0", "a#1"}
    sim.lookup(np.arange(300), CachePlan(300), now=40.0)  # writes a#1 over a#0's run, not its mark
    assert sim.sources() == {"a#0", "a#1"}


def test_a_profile_object_and_a_progress_bar(tmp_path: Path) -> None:
    from promptkit.providers.registry import get_provider

    _write_sessions(tmp_path)
    profile = get_provider("deepseek")
    want = loaded(tmp_path, view="simulated", provider=profile)
    assert_same(want, analyze_timeline(tmp_path, None, view="simulated", provider=profile, progress=True))


def test_a_compressed_file_and_a_file_of_no_known_format(tmp_path: Path) -> None:
    import gzip

    _corpus_builder().build(tmp_path, 3, 0.01)
    first = sorted(tmp_path.rglob("*.jsonl"))[0]
    first.with_suffix(".jsonl.gz").write_bytes(gzip.compress(first.read_bytes()))
    first.unlink()
    (tmp_path / "junk.jsonl").write_text("not json\n")
    want = loaded(tmp_path)
    assert want.problems.height == 1
    assert_same(want, analyze_timeline(tmp_path, None))


def test_the_composition_rows_follow_the_requests_order(tmp_path: Path) -> None:
    # the composition frame is made when read, from rows added in time order: in record order, as the
    # requests frame (each request's rows together)
    _write_sessions(tmp_path)
    for result in (loaded(tmp_path, view="simulated"), analyze_timeline(tmp_path, None, view="simulated")):
        assert result is not None
        spans = result.composition.select("session", "index")
        requests = result.requests.select("session", "index").rows()
        assert spans.unique(maintain_order=True).rows() == requests
        assert spans.height > len(requests)
