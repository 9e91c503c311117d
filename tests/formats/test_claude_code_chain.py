"""A long Claude Code conversation: what the analysis holds grows linearly with its length, and the
shared buffers give the frames the copies gave (the chain of benchmarks/whole_history.py)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from polars.testing import assert_frame_equal

from benchmarks.whole_history import write_chain, write_corpus
from promptkit.analysis import analyze
from promptkit.analysis.composition import CompositionRows
from promptkit.analysis.plans import local
from promptkit.analysis.result import AnalysisResult
from promptkit.formats import read_logs
from promptkit.formats.head_buffer import HeadBuffers

#: Where the analysis allocates a request's tokens and per-message offsets.
_TOKEN_STORES = ("head_buffer.py", "opaque_head.py", "tokenize.py", "composition.py")


def _held(folder: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """Bytes the analysis of ``folder`` holds in tokens and offsets once every request is replayed."""
    held: list[int] = []
    partial = local.LocalRun.partial

    def measured(self: local.LocalRun) -> object:
        snapshot = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(True, f"*promptkit*{name}") for name in _TOKEN_STORES]
        )
        held.append(sum(s.size for s in snapshot.statistics("filename")))
        return partial(self)

    monkeypatch.setattr(local.LocalRun, "partial", measured)
    tracemalloc.start()
    try:
        analyze(folder)
    finally:
        tracemalloc.stop()
    return held[0]


@pytest.mark.slow  # half a minute: two chains analyzed under tracemalloc
def test_a_chains_held_tokens_grow_linearly_with_its_length(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    analyze(write_chain(tmp_path / "warm", 20).parent)  # the tokenizer loaded before measuring
    small = _held(write_chain(tmp_path / "small", 400).parent, monkeypatch)
    large = _held(write_chain(tmp_path / "large", 800).parent, monkeypatch)
    # linear: about 2 (a copy of each request's prompt: about 3 here, 4 in the limit)
    assert large / small < 2.2, (small, large)


def _peak(folder: Path) -> tuple[int, AnalysisResult]:
    """The most bytes the analysis of ``folder`` held at once (tracemalloc, numpy's arrays included),
    and its result (its composition frame not read yet)."""
    tracemalloc.start()
    try:
        result = analyze(folder)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, result


@pytest.mark.slow  # half a minute: two chains analyzed under tracemalloc
def test_a_chains_composition_is_held_in_linear_memory_and_made_when_read(tmp_path: Path) -> None:
    # the composition frame has a row per message of every request (quadratic): the analysis holds
    # only each request's message offsets, views of one chain, and makes the frame on first read
    analyze(write_chain(tmp_path / "warm", 20).parent)  # the tokenizer loaded before measuring
    small, _ = _peak(write_chain(tmp_path / "small", 400).parent)
    large, result = _peak(write_chain(tmp_path / "large", 800).parent)
    # measured 2.33 (the frame made by every chunk as it ends: 3.52)
    assert large / small < 2.6, (small, large)
    assert "composition" not in result._held  # nothing read it yet
    frame = result.composition
    requests = result.requests.height
    assert requests == 400
    assert frame.height > requests * requests // 2  # quadratic: every request's messages
    assert result.composition is frame  # made once, then held
    assert frame["index"].n_unique() == requests


def _copying(self: HeadBuffers, tokens: np.ndarray, head: np.ndarray, key: str) -> None:
    return None


def _copied(
    self: CompositionRows, session: str, what: str, values: np.ndarray, known: int | None = None
) -> np.ndarray:
    if known is not None:  # the previous values' first ``known``, then ``values``
        values = np.concatenate([self._chains[(session, what)][1][:known], values])
    self._chains[(session, what)] = (None, values)  # type: ignore[assignment]
    return values


def test_shared_buffers_give_the_frames_of_copies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = write_chain(tmp_path / "chain", 120).parent
    shared = analyze(folder)
    monkeypatch.setattr(HeadBuffers, "tokens", _copying)
    monkeypatch.setattr(CompositionRows, "_chained", _copied)
    copied = analyze(folder)
    assert shared.requests.height == 60
    assert_frame_equal(shared.requests, copied.requests)
    assert_frame_equal(shared.composition, copied.composition)
    assert_frame_equal(shared.problems, copied.problems)


def test_a_rewound_chain_gives_the_frames_of_copies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a branch: the user goes back to an earlier message; the shared buffers start a new chain there
    path = write_chain(tmp_path / "rewind", 40)
    lines = path.read_text().splitlines()
    branch = [line.replace('"parentUuid": "00000019-', '"parentUuid": "00000009-') for line in lines[20:]]
    path.write_text("\n".join(lines[:20] + branch) + "\n")
    shared = analyze(path.parent)
    monkeypatch.setattr(HeadBuffers, "tokens", _copying)
    monkeypatch.setattr(CompositionRows, "_chained", _copied)
    copied = analyze(path.parent)
    assert "rewind" in (shared.requests["log_events"].to_list())
    assert_frame_equal(shared.requests, copied.requests)
    assert_frame_equal(shared.composition, copied.composition)


def test_the_corpus_copies_are_sessions_of_their_own_with_the_same_calls(tmp_path: Path) -> None:
    write_corpus(tmp_path, 3)
    loaded = read_logs(tmp_path)
    one = read_logs(["fixtures/claude-code", "fixtures/codex"])
    assert len(loaded.records) == 3 * len(one.records)
    sessions = {r.session for r in loaded.records}
    assert len(sessions) == 3 * len({r.session for r in one.records})
    ids = [r.meta.get("request_id") for r in loaded.records if r.meta.get("request_id")]
    assert len(ids) == len(set(ids))  # fresh request ids: a resumed-session check finds no copies
    stamps = sorted(r.timestamp for r in loaded.records if r.timestamp is not None)
    base = sorted(r.timestamp for r in one.records if r.timestamp is not None)
    assert stamps[-1] - base[-1] == pytest.approx(2 * 86400, abs=1)  # each copy a day later
