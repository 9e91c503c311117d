"""``jobs=N``: the per-session work in a local process pool gives the same frames and notes as jobs=1."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import attrs
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from promptkit.analysis.api import analyze, analyze_requests
from promptkit.analysis.executors import ProcessPool, make_executor
from promptkit.analysis.plans import transport
from promptkit.analysis.result import AnalysisResult
from promptkit.errors import UsageError
from promptkit.layout import RequestRecord

LOGS = ["fixtures/logs", "fixtures/real-logs/deepseek"]  # split and reordered sessions, problems


def assert_same(a: AnalysisResult, b: AnalysisResult) -> None:
    assert_frame_equal(a.requests, b.requests)
    assert_frame_equal(a.composition, b.composition)
    assert_frame_equal(a.problems, b.problems)
    assert a.notes == b.notes
    assert (a.provider, a.tokenizer, a.render, a.view) == (b.provider, b.tokenizer, b.render, b.view)


@pytest.mark.slow
def test_jobs_give_the_same_result() -> None:
    serial = analyze(LOGS)
    parallel = analyze(LOGS, jobs=2)
    assert serial.requests.height == 352
    assert serial.problems.height > 0  # the fixtures hold problems: they must come back in order
    assert_same(serial, parallel)


def _mixed() -> list[RequestRecord]:
    """Interleaved sessions of two providers, one request that cannot be tokenized."""
    records = []
    system = {"role": "system", "content": "You are a careful assistant. " * 20}
    for turn in range(4):
        for s, provider in (("a", "exact"), ("b", "deepseek"), ("c", "exact"), ("d", "openai")):
            messages = [system] + [
                {"role": "user" if k % 2 == 0 else "assistant", "content": f"{s} turn {k} " * 5}
                for k in range(turn * 2 + 1)
            ]
            if s == "c" and turn == 2:
                messages.append({"role": "user", "content": {"not": "a string"}})
            if s == "a" and turn == 3:
                messages.append({"role": "user", "content": "a lone surrogate \ud800 here"})
            records.append(
                RequestRecord(
                    {"model": "m", "messages": messages},
                    s,
                    index=turn,
                    timestamp=1000.0 + turn * 10 + ord(s),
                    provider=provider,
                    file="mixed.jsonl",
                    line=turn * 4 + ord(s) - ord("a") + 1,
                )
            )
    return records


@pytest.mark.slow
@pytest.mark.parametrize("view", ["consecutive", "simulated"])
def test_jobs_with_several_providers_and_a_bad_request(view: str) -> None:
    records = _mixed()
    serial = analyze_requests(records, view=view)
    parallel = analyze_requests(records, view=view, jobs=2)
    assert len(serial.provider.split(", ")) == 3
    assert serial.requests.height + serial.problems.height == len(records)
    assert serial.problems.height == 1 and "c#2" in serial.problems["reason"][0]
    assert any("U+FFFD" in n for n in serial.notes)
    assert_same(serial, parallel)


def _bad_late_in_the_first_session() -> list[RequestRecord]:
    """Two interleaved sessions, each with a request that cannot be tokenized: session a's (listed first,
    its worker's problems first) comes after session b's in time, the order the analysis names them in."""
    system = {"role": "system", "content": "You are a careful assistant. " * 20}
    records = []
    for turn in range(3):
        for s, bad in (("a", 2), ("b", 0)):
            messages = [system] + [
                {"role": "user" if k % 2 == 0 else "assistant", "content": f"{s} turn {k} " * 5}
                for k in range(turn * 2 + 1)
            ]
            if turn == bad:
                messages.append({"role": "user", "content": {"not": "a string"}})
            records.append(
                RequestRecord(
                    {"model": "deepseek-chat", "messages": messages},
                    s,
                    index=turn,
                    timestamp=1000.0 + turn * 10 + ord(s),
                    provider="deepseek",
                    file=f"{s}.jsonl",
                    line=turn + 1,
                )
            )
    return records


@pytest.mark.slow
def test_jobs_name_the_problems_in_the_analysis_order_not_the_workers() -> None:
    records = _bad_late_in_the_first_session()
    serial = analyze_requests(records, view="simulated")
    parallel = analyze_requests(records, view="simulated", jobs=2)
    # b#0 (t=1098) is analyzed before a#2 (t=1117), though session a's worker returns its problems first
    assert [(Path(f).name, line) for f, line in serial.problems.select("file", "line").rows()] == [
        ("b.jsonl", 1),
        ("a.jsonl", 3),
    ]
    assert "b#0: cannot tokenize" in serial.problems["reason"][0]
    assert_same(serial, parallel)


@pytest.mark.slow
def test_process_pool_keeps_order_with_few_workers() -> None:
    with ProcessPool(2) as pool:
        assert list(pool.map(pow, [(k, 2) for k in range(20)])) == [k * k for k in range(20)]


def test_bad_jobs_and_engines_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="jobs"):
        make_executor("local", 0)
    with pytest.raises(UsageError, match="engine"):
        make_executor("spark", 2)
    with pytest.raises(UsageError, match="dask"):
        make_executor("local", 2, client="tcp://127.0.0.1:1")


@pytest.mark.slow
def test_jobs_choose_the_default_view_from_the_files(tmp_path: Any, monkeypatch: Any) -> None:
    """Without a view, the workers read their own files and choose the records' default view: the
    simulated one for conversation trees (Claude Code projects), the consecutive one when any file's
    records are not trees; the same result and notes as one process, and no record is loaded here."""
    import shutil

    from promptkit.analysis.plans import files as filetasks

    trees = tmp_path / "trees"
    shutil.copytree("fixtures/claude-code", trees, ignore=shutil.ignore_patterns("*.md"))
    mixed = tmp_path / "mixed"
    shutil.copytree(trees, mixed / "cc")
    shutil.copytree("fixtures/real-logs/deepseek", mixed / "deepseek")
    calls: list[Any] = []
    real = filetasks.analyze_files
    monkeypatch.setattr(filetasks, "analyze_files", lambda *a, **k: calls.append(k) or real(*a, **k))
    for paths, view in ((trees, "simulated"), (mixed, "consecutive")):
        serial = analyze(paths)
        calls.clear()
        parallel = analyze(paths, jobs=2)
        assert serial.view == parallel.view == view
        assert calls and calls[0]["view"] is None
        assert_same(serial, parallel)


@pytest.mark.slow
@pytest.mark.parametrize("view", ["consecutive", "simulated"])
def test_the_file_plan_coordinator_loads_no_tokenizer(view: str, monkeypatch: Any) -> None:
    """The workers tokenize (and, simulated, compose the blocks); the coordinator only names the
    tokenizer: loading one here (0.2 s and tens of MB for cl100k_base) is a failure. The workers are
    forked from a fresh server process: the patch does not reach them."""
    from promptkit.analysis.plans.files import analyze_files
    from promptkit.providers import registry, resolve

    serial = analyze("fixtures/real-logs/deepseek", view=view)

    def refuse(*_: Any) -> Any:
        raise AssertionError("the coordinator loaded a tokenizer")

    monkeypatch.setattr(resolve, "resolve_tokenizer", refuse)
    monkeypatch.setattr(registry.ProviderProfile, "load_tokenizer", refuse)
    with ProcessPool(1) as pool:
        parallel = analyze_files("fixtures/real-logs/deepseek", executor=pool, view=view)
    assert parallel is not None
    assert serial.composition.height > serial.requests.height > 0
    assert_same(serial, parallel)


def _columns_logs(root: Any, *, with_usage: bool = True, timed: bool = True) -> Any:
    """Three sessions in three files, interleaved in time, that share a system prompt: one calls another
    model (a switch), one holds a lone surrogate, one usage contradicts its session's previous one, and
    the prompts diverge from other sessions' entries."""
    import json

    system = {"role": "system", "content": "You are a careful assistant for the build team. " * 40}
    root.mkdir()
    for s, model in (("a", "deepseek-chat"), ("b", "deepseek-chat"), ("c", "deepseek-reasoner")):
        lines = []
        for turn in range(5):
            messages = [system] + [
                {"role": "user" if k % 2 == 0 else "assistant", "content": f"{s} turn {k} " * 30}
                for k in range(turn * 2 + 1)
            ]
            if s == "a" and turn == 3:
                messages.append({"role": "user", "content": "a lone surrogate \ud800 here"})
            # calls c#2 and a#4 read more than their prompt: the reader's problems (kept without usage),
            # named in the files' order as read_logs lists them (a read larger than the earlier calls
            # could write is no problem any more: a read from outside the log, a note)
            usage = {"prompt_tokens": 900 + 100 * turn, "completion_tokens": 5}
            usage["prompt_cache_hit_tokens"] = {("c", 2): 1150, ("a", 4): 1350}.get((s, turn), 0)
            lines.append(
                json.dumps(
                    {
                        "session": s,
                        # untimed: session b has no times (the group is analyzed in position order)
                        "timestamp": 1000.0 + turn * 10 + ord(s) if timed or s != "b" else None,
                        "request": {"model": model, "messages": messages},
                        "response": {
                            "choices": [{"message": {"role": "assistant", "content": "ok"}}],
                            **({"usage": usage} if with_usage else {}),
                        },
                    }
                )
            )
        (root / f"{s}.jsonl").write_text("\n".join(lines) + "\n")
    return root


def _claude_code_events(root: Any) -> Any:
    """A Claude Code transcript whose log events place positions in ruler mode: an MCP reconnect (the
    tools changed, so the next call's reads falling back into the head do not mark where it ends), then
    calls that read the head."""
    import json

    from tests.formats.test_claude_code_tree import _event, _usage

    text = "a line of the project's code, repeated so that the prompt is long enough to cache. " * 20
    command = "<command-name>/mcp</command-name>\n<command-message>mcp</command-message>\n<command-args></command-args>"
    events = [
        _event("user", "u1", None, "one " + text, "00:00"),
        _event("assistant", "a1", "u1", [{"type": "text", "text": "A1"}], "00:05", _usage(0, 21832)),
        _event("user", "m1", "a1", command, "00:20"),
        _event("user", "u2", "m1", "two " + text, "00:30"),
        _event("assistant", "a2", "u2", [{"type": "text", "text": "A2"}], "00:35", _usage(15000, 7800)),
        _event("user", "u3", "a2", "three " + text, "01:00"),
        _event("assistant", "a3", "u3", [{"type": "text", "text": "A3"}], "01:05", _usage(22800, 900)),
    ]
    root.mkdir()
    path = root / "s1.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    return path


def _compacted_logs(root: Any, *, fall_back: bool) -> Any:
    """``tests.formats.test_claude_code_tree._compacted``'s session, in a folder of its own."""
    from tests.formats.test_claude_code_tree import _compacted

    root.mkdir()
    return _compacted(root, fall_back=fall_back)


@pytest.mark.parametrize(
    "logs",
    [
        "columns", "columns-local", "fixtures/real-logs/gemini", "fixtures/claude-code", "claude-code-events",
        "compacted, head read", "compacted, head by proportions",
    ],
)  # fmt: skip
@pytest.mark.slow
def test_the_simulated_coordinator_reads_no_record(logs: str, tmp_path: Any, monkeypatch: Any) -> None:
    """The file plan's simulated view runs the cache over phase 1's columns: the coordinator unpickles
    no record (a worker reads the divergences' messages), and the result is the records plan's, with an
    exact tokenizer (DeepSeek: model switches, problems, mended surrogates, classified divergences) and
    in ruler mode (Gemini, Claude: positions placed by each call's usage)."""
    from promptkit.analysis.plans.files import analyze_files
    from promptkit.layout import RequestRecord

    made = {
        "columns": _columns_logs,
        # ruler mode with no usage (positions stay local), and a session without times
        "columns-local": lambda root: _columns_logs(root, with_usage=False, timed=False),
        "claude-code-events": _claude_code_events,
        # a marked head placed where an earlier call's reads put it, or by the earlier calls' proportions
        "compacted, head read": lambda root: _compacted_logs(root, fall_back=True),
        "compacted, head by proportions": lambda root: _compacted_logs(root, fall_back=False),
    }
    path = made[logs](tmp_path / "logs") if logs in made else logs
    settings = {"provider": "openai", "tokenizer": "cl100k_base"} if logs == "columns-local" else {}
    serial = analyze(path, view="simulated", **settings)

    def refuse(*_: Any) -> Any:
        raise AssertionError("the coordinator unpickled a record")

    monkeypatch.setattr(RequestRecord, "__setstate__", refuse)
    with ProcessPool(2) as pool:
        parallel = analyze_files(path, executor=pool, view="simulated", **settings)
    assert parallel is not None
    assert_same(serial, parallel)
    requests = serial.requests
    if logs == "columns-local":
        assert set(requests["position_basis"]) == {"local", "exact"}  # no anchor: every position is local
        assert any("no timestamp" in note for note in serial.notes)
    if logs == "columns":
        assert requests["divergence_message"].drop_nulls().len() > 0
        assert serial.provider == "deepseek" and serial.view == "simulated"
        assert "model_switch" in requests["change_class"].to_list()
        assert requests.filter(
            pl.col("change_class").is_not_null() & (pl.col("change_class") != "model_switch")
        ).height
        reasons = " ".join(serial.problems["reason"].to_list())
        assert [Path(f).name for f in serial.problems["file"]] == ["a.jsonl", "c.jsonl"]
        assert "kept without usage" in reasons
        assert any("U+FFFD" in n for n in serial.notes)
    else:
        assert set(requests["position_basis"].drop_nulls()) - {"local"}  # the usage's anchors placed them


class _InThisProcess:
    """An executor that runs each call here, and declares that it shares no files (as a Dask cluster's
    workers, which may be on other machines) and holds no results."""

    workers = 1
    shares_files = False
    holds_results = False

    def map(self, fn: Any, calls: Any) -> Any:
        return (fn(*args) for args in calls)

    def map_held(self, fn: Any, calls: Any) -> Any:
        return self.map(fn, calls)

    def submit(self, fn: Any, *args: Any) -> Any:
        from concurrent.futures import Future

        done: Future[Any] = Future()
        done.set_result(fn(*args))
        return done

    def close(self) -> None:
        pass


@pytest.mark.slow
def test_workers_of_this_machine_leave_records_and_frames_in_a_folder_the_analysis_removes(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """A pool's workers write each file's records, its frames as Arrow files and its delta streams to a
    temporary folder; the coordinator passes the records' path on (never the bytes) and maps the frames
    and the streams' arrays; the folder is gone when the analysis ends, also when it fails, and the
    mapped frames stay readable. Without
    pyarrow the frames come back as bytes, and the consecutive view makes no folder. An executor that
    does not share this machine's files gets everything back as bytes. All give the records plan's
    result."""
    import tempfile

    from promptkit.analysis.plans import files as filetasks

    logs = _columns_logs(tmp_path / "logs")
    serial = analyze(logs, view="simulated")
    spill_root = tmp_path / "tmp"
    spill_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill_root))  # the coordinator's temporary folders
    seen: list[tuple[Any, bool, list[Any]]] = []
    assemble = filetasks._assemble

    def watched(pieces: Any, *args: Any, **kwargs: Any) -> Any:
        for p in pieces.values():
            frames = [f for g in p.groups for f in (g.requests, g.composition, g.deltas) if f is not None]
            on_disk = all(Path(x).is_file() for x in [p.loaded, *frames] if isinstance(x, str))
            seen.append((p.loaded, on_disk, frames))
        return assemble(pieces, *args, **kwargs)

    def folders_made(view: str | None) -> list[str]:
        made: list[Any] = []
        folders = tempfile.TemporaryDirectory
        monkeypatch.setattr(tempfile, "TemporaryDirectory", lambda **kw: made.append(kw) or folders(**kw))
        filetasks.analyze_files(logs, executor=pool, view=view)
        monkeypatch.setattr(tempfile, "TemporaryDirectory", folders)
        return [kw["prefix"] for kw in made]

    monkeypatch.setattr(filetasks, "_assemble", watched)
    assert transport.maps_arrow()  # pyarrow is in the dev extra
    with ProcessPool(2) as pool:
        parallel = filetasks.analyze_files(logs, executor=pool, view="simulated")
        assert parallel is not None
        assert_same(serial, parallel)  # read after the folder is gone: the maps outlive the files
        assert len(seen) == 3 and all(on_disk for _, on_disk, _ in seen)  # one file of records per log
        (folder,) = {Path(x).parent for loaded, _, frames in seen for x in [loaded, *frames]}
        assert folder.parent == spill_root and folder.name.startswith("promptkit-pieces-")
        assert all(loaded.endswith(".records") for loaded, _, _ in seen)
        # the composition as an Arrow file (no requests frame), the delta streams' arrays after their pickle
        assert [[Path(f).suffix for f in frames] for _, _, frames in seen] == [[".arrow", ".deltas"]] * 3
        assert not folder.exists()  # removed with what was in it
        seen.clear()
        consecutive = filetasks.analyze_files(logs, executor=pool, view="consecutive")
        assert consecutive is not None
        assert_same(analyze(logs, view="consecutive"), consecutive)
        assert all(loaded == b"" and on_disk for loaded, on_disk, _ in seen)  # no records: the frames
        assert [[f.endswith(".arrow") for f in frames] for _, _, frames in seen] == [[True, True]] * 3
        assert folders_made("consecutive") == ["promptkit-pieces-"]
        monkeypatch.setattr(filetasks, "maps_arrow", lambda: False)  # no pyarrow: frames as bytes
        assert folders_made("consecutive") == []  # the consecutive view reads no record again: no folder
        assert folders_made(None) == ["promptkit-pieces-"]  # each file's default view may be simulated
        seen.clear()
        unmapped = filetasks.analyze_files(logs, executor=pool, view="simulated")
        assert unmapped is not None
        assert_same(serial, unmapped)
        assert [[type(f).__name__ for f in frames] for _, _, frames in seen] == [["bytes", "DeltaStream"]] * 3
        assert all(loaded.endswith(".records") for loaded, _, _ in seen)
        monkeypatch.undo()
        monkeypatch.setattr(tempfile, "tempdir", str(spill_root))

        def failing(*_: Any, **__: Any) -> Any:
            raise RuntimeError("the simulation failed")

        monkeypatch.setattr(filetasks, "_assemble", failing)
        with pytest.raises(RuntimeError, match="the simulation failed"):
            filetasks.analyze_files(logs, executor=pool, view="simulated")
        assert not [p for p in spill_root.iterdir() if p.name.startswith("promptkit-pieces-")]
    monkeypatch.setattr(filetasks, "_assemble", watched)
    seen.clear()
    here = filetasks.analyze_files(logs, executor=_InThisProcess(), view="simulated")
    assert here is not None
    assert_same(serial, here)
    assert len(seen) == 3 and all(isinstance(loaded, bytes) and loaded for loaded, _, _ in seen)
    assert [[type(f).__name__ for f in frames] for _, _, frames in seen] == [["bytes", "DeltaStream"]] * 3


def test_a_worker_s_delta_streams_come_back_as_maps_of_the_file_it_wrote(tmp_path: Any) -> None:
    """The delta streams a worker writes to the shared folder come back equal, array for array: maps of
    the file (read-only, each at a 64-byte boundary, still readable once the file is removed); without
    a folder they stay as they are."""
    import numpy as np

    from promptkit.analysis.plans import files as filetasks

    logs = _columns_logs(tmp_path / "logs")
    folder = tmp_path / "shared"
    folder.mkdir()
    options = filetasks.FileOptions(None, None, None, None, "simulated", None, str(folder), True)
    piece = filetasks.file_task(options, str(sorted(logs.iterdir())[0]), None)
    (group,) = piece.groups
    assert isinstance(group.deltas, str) and Path(group.deltas).parent == folder
    plain = filetasks.file_task(
        attrs.evolve(options, spill=None, mapped=False), str(sorted(logs.iterdir())[0]), None
    )
    kept = plain.groups[0].deltas
    assert transport.arrays_out(kept, None) is kept
    assert transport.arrays_in(kept) is kept
    mapped = transport.arrays_in(group.deltas)
    for path in folder.iterdir():
        path.unlink()
    for name in type(kept).__slots__:
        want, got = getattr(kept, name), getattr(mapped, name)
        if isinstance(want, np.ndarray):
            assert got.dtype == want.dtype and np.array_equal(got, want), name
            if got.nbytes >= 64:  # large enough to travel out of band
                assert not got.flags.writeable and got.ctypes.data % 64 == 0, name
    assert pickle.dumps(mapped.plans) == pickle.dumps(kept.plans)
    for count in range(1, 12):  # however many arrays: the header's length places the first one
        arrays = tuple(np.arange(k * 8, dtype=np.int64) for k in range(1, count + 1))
        back = transport.arrays_in(transport.arrays_out(arrays, options.spill))  # type: ignore[arg-type]
        assert len(back) == count and all(np.array_equal(a, b) for a, b in zip(arrays, back, strict=True))


def test_a_mapped_frame_equals_the_workers_and_only_posix_with_pyarrow_maps(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """A frame the coordinator maps equals the one the worker wrote; only a POSIX system with pyarrow
    maps (elsewhere the frames come back as bytes)."""
    import importlib.util

    from promptkit.analysis.plans import files as filetasks

    frame = pl.concat([pl.DataFrame({"_pos": [0, 1], "role": ["user", "tool"]})] * 2, rechunk=False)
    options = filetasks.FileOptions(None, None, None, None, "simulated", None, str(tmp_path), True)
    path = transport.frame_out(frame, options.spill)
    assert isinstance(path, str) and path.endswith(".arrow")
    mapped = transport.frame_in(path)
    assert mapped.equals(frame)
    assert isinstance(transport.frame_out(frame, None), bytes)
    assert transport.maps_arrow()
    monkeypatch.setattr(transport.os, "name", "nt")
    assert not transport.maps_arrow()
    monkeypatch.undo()
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    assert not transport.maps_arrow()


def test_a_held_file_task_returns_its_piece_without_the_records(tmp_path: Any) -> None:
    """What a Dask worker sends back of a file's task is its piece without the records; the records are
    the second part, which stays on the worker (DaskExecutor.map_held)."""
    import pickle

    from promptkit.analysis.plans.files import FileOptions, file_task, file_task_held
    from promptkit.formats import get_format

    logs = _columns_logs(tmp_path / "logs")
    path = str(sorted(Path(logs).iterdir())[0])
    options = FileOptions(None, None, None, None, "simulated")
    light, records = file_task_held(options, path, get_format("promptkit"))
    whole = file_task(options, path, get_format("promptkit"))
    assert light.loaded == b"" and records == whole.loaded and records
    held = pickle.loads(records)
    assert len(held) == light.records > 0 and {r.session for r in held} == set(light.sessions)
    assert light.records == whole.records and light.sessions == whole.sessions


@pytest.mark.slow
def test_the_records_plan_shows_a_bar_over_its_chunks(monkeypatch: Any) -> None:
    """A session split across files: with ``progress``, the simulated view shows a bar over the chunks
    the workers tokenize (phase 1, the long part), and the result is one process's."""
    import tqdm.auto

    bars: list[dict[str, Any]] = []

    def bar(iterable: Any, **kwargs: Any) -> Any:
        bars.append(kwargs)
        return iterable

    monkeypatch.setattr(tqdm.auto, "tqdm", bar)
    records = _mixed()
    serial = analyze_requests(records, view="simulated")
    with ProcessPool(2) as pool:
        from promptkit.analysis.api import analyze_records

        shown = analyze_records(
            records,
            pool,
            view="simulated",
            progress=True,
            render=None,
            cache_model=None,
            provider=None,
            tokenizer=None,
        )
    assert_same(serial, shown)
    chunks = [kw for kw in bars if kw.get("desc") == "analyze (simulated, by chunk)"]
    assert chunks and all(kw["unit"] == "chunk" and kw["delay"] == 0.5 and kw["total"] >= 1 for kw in chunks)


@pytest.mark.slow
def test_the_records_plan_coordinator_loads_no_tokenizer(monkeypatch: Any) -> None:
    """The records plan's simulated view (records shipped by session) tokenizes on the workers and
    attributes the divergences there too: the coordinator only names the tokenizer, as the file plan's."""
    from promptkit.analysis.api import analyze_records
    from promptkit.providers import registry, resolve

    records = _mixed()
    serial = analyze_requests(records, view="simulated")

    def refuse(*_: Any) -> Any:
        raise AssertionError("the coordinator loaded a tokenizer")

    monkeypatch.setattr(resolve, "resolve_tokenizer", refuse)
    monkeypatch.setattr(registry.ProviderProfile, "load_tokenizer", refuse)
    with ProcessPool(2) as pool:
        parallel = analyze_records(
            records,
            pool,
            view="simulated",
            progress=False,
            render=None,
            cache_model=None,
            provider=None,
            tokenizer=None,
        )
    assert_same(serial, parallel)


@pytest.mark.slow
def test_the_workers_sniff_the_files_found_in_a_directory(tmp_path: Any, monkeypatch: Any) -> None:
    """The coordinator reads no file found in a directory (each one's worker finds its format; one of
    no known format is a problem at its place, as one process reports it); a file named explicitly is
    sniffed first and one of no known format raises before any work, as ``read_logs`` raises."""
    import shutil

    from promptkit.analysis.plans.files import analyze_files
    from promptkit.errors import LogFileError
    from promptkit.formats import discovery

    logs = tmp_path / "logs"
    shutil.copytree("fixtures/real-logs/deepseek", logs / "b")
    (logs / "a.json").write_text('{"not": "a log"}')
    serial = analyze(logs)
    assert serial.problems["file"][0] == str(logs / "a.json")  # the first file's problem comes first

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("the coordinator sniffed a file")

    monkeypatch.setattr(discovery, "sniff_format", refuse)  # the workers, forked from a fresh server, sniff
    with ProcessPool(2) as pool:
        parallel = analyze_files(logs, executor=pool)
        assert parallel is not None
        assert_same(serial, parallel)
        monkeypatch.undo()
        with pytest.raises(LogFileError, match=r"a\.json"):
            analyze_files([logs / "a.json", logs / "b"], executor=pool)
        # a forced format (by name) is every file's, sniffed by none; a file not named like a log is
        # passed over with the note one process writes
        (logs / "b" / "README.txt").write_text("not a log")
        (logs / "b" / "data.csv").write_text("not,a,log")
        forced = analyze(logs / "b", format="mini-swe-agent")
        assert any("passed over (1 " in note and ", 1 ." in note for note in forced.notes)
        assert_same(forced, analyze_files(logs / "b", executor=pool, format="mini-swe-agent"))
        # forced onto a file not of that format: the format's own problem, as one process reports it
        wrong = analyze(logs, format="mini-swe-agent")
        assert wrong.problems["file"][0] == str(logs / "a.json")
        assert_same(wrong, analyze_files(logs, executor=pool, format="mini-swe-agent"))
        named = [logs / "a.json", *sorted((logs / "b").glob("*.json"))]  # named, and forced: not sniffed
        assert_same(
            analyze(named, format="mini-swe-agent"),
            analyze_files(named, executor=pool, format="mini-swe-agent"),
        )


@pytest.mark.slow
def test_the_workers_sniff_with_the_callers_formats(tmp_path: Any, monkeypatch: Any) -> None:
    """A log format registered at run time is the caller's only (a worker is forked from a fresh
    server): the workers sniff the files found in a directory with the caller's formats, in its order,
    so they name the same formats tried as one process does. A format that cannot be sent (a lambda)
    leaves them their own, and a note says which. Every built-in format can be sent."""
    import pickle
    import shutil

    from promptkit.analysis.plans.files import analyze_files
    from promptkit.formats import base

    for fmt in base.available_formats().values():
        assert pickle.loads(pickle.dumps(fmt)).name == fmt.name
    logs = tmp_path / "logs"
    shutil.copytree("fixtures/real-logs/deepseek", logs / "b")
    (logs / "a.json").write_text('{"not": "a log"}')
    mini = base.get_format("mini-swe-agent")
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))  # registered for this test only
    base.register_format(base.LogFormat("mini-again", "the same, first", mini.sniff, mini.read, priority=99))
    serial = analyze(logs)
    assert "tried: mini-again, " in serial.problems["reason"][0]
    with ProcessPool(2) as pool:
        assert_same(serial, analyze_files(logs, executor=pool))
        base.register_format(base.LogFormat("stuck", "a lambda", lambda s: False, lambda s: iter(())))
        parallel = analyze_files(logs, executor=pool)
    assert parallel is not None
    assert any(
        note.startswith("log format(s) stuck cannot be sent to the workers") for note in parallel.notes
    )
    assert parallel.problems["reason"][0].startswith("not a log of any known format (tried: ")
    assert "stuck" not in parallel.problems["reason"][0]  # the workers' own formats


def test_file_pieces_travel_as_compressed_arrow_moved_to_the_load_order() -> None:
    """A file's frames go back as zstd-compressed Arrow IPC (a session's composition rows repeat each
    request's blocks in the next: the bytes are a small fraction of the plain IPC), and come out with
    their positions moved by the file's offset in the load order, the rest untouched."""
    import io

    import polars as pl

    from promptkit.analysis.plans.transport import frame_in, to_ipc

    frame = pl.DataFrame(
        {
            "_pos": [k // 50 for k in range(5000)],
            "slot": ["context"] * 5000,
            "tokens": [k % 50 for k in range(5000)],
        }
    )
    plain = io.BytesIO()
    frame.write_ipc_stream(plain)
    data = to_ipc(frame)
    assert len(data) * 10 < len(plain.getvalue())
    assert_frame_equal(frame_in(data), frame)
    moved = frame_in(data, 7)
    assert moved["_pos"].to_list() == [p + 7 for p in frame["_pos"].to_list()]
    assert_frame_equal(moved.drop("_pos"), frame.drop("_pos"))
    assert moved.columns == frame.columns


_FORKED = """
import os
import sys

from promptkit.analysis.executors import TOKENIZERS_ENV, ProcessPool


def loaded():
    from promptkit.tokens import tokenizers

    return sorted(tokenizers._CACHE)


if __name__ == "__main__":
    from promptkit.tokens import tokenizers

    names = sys.argv[1:]
    with ProcessPool(2, tokenizers=names) as pool:
        workers = list(pool.map(loaded, [(), ()]))
    print(workers, sorted(tokenizers._CACHE), TOKENIZERS_ENV in os.environ)
"""


@pytest.mark.slow
def test_a_pool_s_workers_are_forked_with_the_tokenizers_it_names(tmp_path: Any) -> None:
    """The fork server loads the tokenizers a pool names (a tokenizer's or a provider's name; an unknown
    name is left for the worker that needs it), so each worker has them before its first task; the
    calling process loads none and its environment is as it was. Each run is a fresh process: the fork
    server is started once per process."""
    import subprocess
    import sys

    script = tmp_path / "forked.py"
    script.write_text(_FORKED, encoding="utf-8")

    def run(*names: str) -> str:
        out = subprocess.run(
            [sys.executable, str(script), *names], capture_output=True, text=True, check=True, timeout=120
        )
        return out.stdout.strip()

    loaded = "['cl100k_base', 'deepseek']"  # a tokenizer by its name, a provider's by the provider's
    assert run("cl100k_base", "deepseek", "no-such-tokenizer") == f"[{loaded}, {loaded}] [] False"
    assert run() == "[[], []] [] False"  # named none: a worker loads its own when it needs it


def test_the_command_line_starts_the_fork_server_first(monkeypatch: Any, tmp_path: Any) -> None:
    """``promptkit analyze --jobs N`` starts the workers' fork server (with the tokenizer it names)
    before it imports the analysis, so the server's imports run beside its own; one job starts none."""
    from promptkit import cli
    from promptkit.analysis import executors
    from promptkit.commands import analyze as command

    started: list[list[str]] = []
    ran: list[int] = []

    def stop(*_: Any, **options: Any) -> Any:
        ran.append(options["jobs"])
        raise KeyboardInterrupt  # the analysis itself is not what this test is about

    monkeypatch.setattr(
        executors, "start_fork_server", lambda names=(), logs=(): started.append([*names, *map(str, logs)])
    )
    monkeypatch.setattr(command, "run_analyze", stop)
    out = str(tmp_path / "out")
    assert (
        cli.main(["analyze", "fixtures/logs", "--jobs", "2", "--provider", "deepseek", "--out", out]) == 130
    )
    assert (
        cli.main(["analyze", "fixtures/logs", "--jobs", "3", "--tokenizer", "cl100k_base", "--out", out])
        == 130
    )
    assert cli.main(["analyze", "fixtures/logs", "--jobs", "2", "--out", out]) == 130
    assert cli.main(["analyze", "fixtures/logs", "--out", out]) == 130
    assert started == [["deepseek"], ["cl100k_base"], ["fixtures/logs"]]  # else the logs, for a guess
    assert ran == [2, 3, 2, 1]


def test_phase_two_rebuilds_a_session_in_one_buffer_from_int32_tails() -> None:
    """Phase 2 rebuilds each request from its session's previous one and the int32 tail phase 1
    shipped in its columns: the tokens are exact, and a tail that repeats what the buffer holds past the
    shared prefix (the previous request's answer, sent again as a message) is written into the same
    buffer, not copied into a new one. The request-local facts (plan, head end, marked head) come back
    as they went; the message offsets only when asked for (a divergence)."""
    import pickle

    import numpy as np

    from promptkit.analysis.prepare import RequestLocal
    from promptkit.analysis.wire import DeltaReader, DeltaStream, ShippedRequest
    from promptkit.tokens.cache_models import CacheEntry, CachePlan
    from promptkit.tokens.tokenize import TokenizedRequest

    first = [5, 6, 7, 100_000, 9]  # 9: the answer's token, after the prompt
    second = [*first, 11, 12]  # the answer sent again, then a new question
    third = [5, 6, 70_000]  # a fork after two tokens
    toks = [
        TokenizedRequest(np.asarray(first), (0, 2), 0, 4, (2, 4)),
        TokenizedRequest(np.asarray(second), (0, 2, 5), 0, 7),
        TokenizedRequest(np.asarray(third), (1,), 1, 3, (3,)),
    ]
    locals_ = [
        RequestLocal(CachePlan(4, (CacheEntry(4, None, False),)), 2, None),  # an any-prefix entry
        RequestLocal(CachePlan(7), 0, 3),  # nothing stored; a marked head at 3
        RequestLocal(  # breakpoints: exact entries with TTLs, lookup points
            CachePlan(3, (CacheEntry(2, 300.0, True), CacheEntry(3, 3600.0, True)), (1, 2, 3), (2, 3)),
            1,
            None,
        ),
    ]
    rows = [
        ShippedRequest(0, -1, 0, toks[0].tokens, toks[0], locals_[0]),
        ShippedRequest(1, 0, 4, toks[1].tokens[4:], toks[1], locals_[1]),
        ShippedRequest(2, 1, 2, toks[2].tokens[2:], toks[2], locals_[2]),
    ]
    stream = DeltaStream.of(rows)
    assert stream.tails.dtype == np.int32 and stream.tails.tolist() == [*first, 9, 11, 12, 70_000]
    assert stream.room.tolist() == [7, 7, 3]  # the longest request of the chain from each one on
    shipped = pickle.loads(pickle.dumps(stream))  # as a worker returns it
    undelta = DeltaReader([(10, shipped)])  # the chunk's positions start at 10 in the load order
    got, local, full, shared = [], [], [], []
    for pos in range(10, 13):
        got.append(undelta.tokens(pos, "s"))
        local.append(undelta.local)
        shared.append(undelta.shared)
        full.append(undelta.with_offsets(got[-1]))
    assert local == locals_ and shared == [0, 4, 2]
    for tokens, with_offsets, expected in zip(got, full, toks, strict=True):
        assert with_offsets == expected  # tokens, offsets (ends None where the render gave none), lengths
        assert tokens.dtype == np.int64 and np.array_equal(tokens, expected.tokens)
    assert np.shares_memory(got[0], got[1])  # the session's second request extends the first's buffer
    assert not np.shares_memory(got[1], got[2])  # a fork gets a buffer of its own
    with pytest.raises(KeyError):  # each request is taken once
        undelta.tokens(10, "s")
    wide_tok = TokenizedRequest(np.asarray([2**31]), (0,), 0, 1)
    wide = DeltaStream.of(
        [ShippedRequest(0, -1, 0, np.asarray([2**31]), wide_tok, RequestLocal(CachePlan(1), 0, None))]
    )
    assert wide.tails.dtype == np.int64 and DeltaReader([(0, wide)]).tokens(0, "w").tolist() == [2**31]


def test_a_row_is_its_fixed_columns_and_its_outcome_columns() -> None:
    """Stage 1 makes the columns of a row that need no cache outcome, the replay the others and stage 3
    the divergence's message and excerpts: each column of the requests frame is made by exactly one of
    the first two (a new column lands in one), and stage 3's are among the replay's, left empty there."""
    from promptkit.analysis.attribute import ATTRIBUTED
    from promptkit.analysis.columns import FIXED_COLUMNS, OUTCOME_COLUMNS, REQUEST_COLUMNS
    from promptkit.analysis.prepare import RulerFacts, fixed_fields
    from promptkit.analysis.replay import CauseFacts, outcome_values
    from promptkit.analysis.simulator import CacheOutcome
    from promptkit.tokens.cache_models import CacheEntry, CachePlan

    record = RequestRecord({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, "s", index=0)
    plan = CachePlan(prompt_len=10)
    fixed = fixed_fields(record, plan, "m", None, RulerFacts("exact", 3, False, None))
    causes = CauseFacts(30.0, 11, 12, "model_switch", "a -> m")
    values = outcome_values(plan, CacheOutcome(4, 3, 6, "s#0", True, 8, 9), 4, causes)
    assert tuple(fixed) == FIXED_COLUMNS and len(values) == len(OUTCOME_COLUMNS)
    assert sorted((*FIXED_COLUMNS, *OUTCOME_COLUMNS)) == sorted(REQUEST_COLUMNS)
    assert set(ATTRIBUTED) <= set(OUTCOME_COLUMNS)
    # each value under its own column (the replay keeps them as a tuple, by position)
    assert dict(zip(OUTCOME_COLUMNS, values, strict=True)) == {
        "prefix_tokens": 4, "predicted_cached_tokens": 3, "hit_ratio": 0.3, "divergence_message": None,
        "divergence_role": None, "divergence_anchor": None, "divergence_key": None,
        "predicted_cache_write_tokens": 6, "divergence_token": 4, "cached_source": "s#0",
        "divergence_cached_text": None, "divergence_prompt_text": None,
        "divergence_context_text": None, "unexpired_cached_tokens": 8, "unevicted_cached_tokens": 9,
        "idle_seconds": 30.0, "source_stored_tokens": 11, "model_switch_tokens": 12,
        "change_class": "model_switch", "change_detail": "a -> m", "predicted_cache_write_1h_tokens": 0,
    }  # fmt: skip
    # a 1-hour entry's write (from the cached point), none where the model reports no write, no ratio of
    # an empty prompt
    hour = CachePlan(prompt_len=1, entries=(CacheEntry(10, 3600.0, True),))

    def named(plan: CachePlan, outcome: CacheOutcome) -> dict[str, Any]:
        return dict(zip(OUTCOME_COLUMNS, outcome_values(plan, outcome, None, causes), strict=True))

    got = named(hour, CacheOutcome(1, 1, 9, None, False))
    assert (got["hit_ratio"], got["predicted_cache_write_1h_tokens"]) == (1.0, 9)
    got = named(CachePlan(prompt_len=0), CacheOutcome(0, 0, None, None, False))
    assert (got["hit_ratio"], got["predicted_cache_write_1h_tokens"]) == (None, None)
    assert len(fixed) + len(values) == len(REQUEST_COLUMNS)
