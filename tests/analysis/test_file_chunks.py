"""The file plan's tasks are chunks of consecutive files (:func:`promptkit.analysis.plans.files.plan_chunks`):
the frames of one process whatever the chunks hold; a session across two files of one chunk steps back
as one across chunks does; small logs run in one process with a note; a worker keeps a few contexts."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, strategies as st
from polars.testing import assert_frame_equal

from benchmarks.jobs_cli import write_agent_runs
from benchmarks.whole_history import write_corpus
from promptkit.analysis import executors, spec as specs
from promptkit.analysis.api import analyze
from promptkit.analysis.executors import JOBS_MIN_BYTES, jobs_min_bytes, may_start_workers
from promptkit.analysis.plans import files as filetasks
from tests.analysis.test_parallel import assert_same


@given(st.lists(st.integers(0, 3 * filetasks.CHUNK_MAX_BYTES), max_size=60), st.integers(1, 8))
def test_chunks_are_runs_of_consecutive_files_filled_up_to_their_share(
    sizes: list[int], workers: int
) -> None:
    chunks = filetasks.plan_chunks(sizes, workers)
    assert [k for chunk in chunks for k in chunk] == list(range(len(sizes)))  # every file once, in order
    assert all(len(chunk) > 0 for chunk in chunks)
    share = -(-sum(sizes) // (filetasks.TASKS_PER_WORKER * workers))
    target = min(filetasks.CHUNK_MAX_BYTES, max(1, share))
    for chunk in chunks:
        assert len(chunk) == 1 or sum(sizes[k] for k in chunk) <= target  # past it: one large file alone
    for chunk, after in itertools.pairwise(chunks):
        assert (
            sum(sizes[k] for k in chunk) + sizes[after[0]] > target
        )  # cut only where the next file overflows
    if sizes and max(sizes) <= target:
        assert len(chunks) <= 2 * -(-sum(sizes) // target) + 1  # about the share: no task of one tiny file


def test_chunks_of_a_large_history_stay_under_the_cap() -> None:
    """However large the history, a task reads at most CHUNK_MAX_BYTES (unless one file is larger)."""
    sizes = [filetasks.CHUNK_MAX_BYTES // 3] * 300
    chunks = filetasks.plan_chunks(sizes, 2)
    assert len(chunks) == 100 and all(len(chunk) == 3 for chunk in chunks)
    assert len(filetasks.plan_chunks([1000] * 80, 2)) == filetasks.TASKS_PER_WORKER * 2  # 10 files a task
    assert filetasks.plan_chunks([5 * filetasks.CHUNK_MAX_BYTES, 1, 1], 2) == [range(0, 1), range(1, 3)]


def test_a_session_across_two_files_of_one_chunk_is_flagged() -> None:
    """'group:73921' has calls in two files: read in one task, its piece says so (the plan then steps
    back to shipping records, as when the two files are read by two tasks)."""
    options = filetasks.FileOptions(None, None, None, None, "consecutive")
    both = [
        (str(Path("fixtures/logs") / name), None) for name in ("session-after.jsonl", "session-before.jsonl")
    ]
    assert filetasks.chunk_task(options, both).spans
    assert not any(filetasks.chunk_task(options, [one]).spans for one in both)
    piece = filetasks.chunk_task(options, [*both, ("fixtures/README.md", None)])
    assert len(piece.formats) == 3 and piece.formats[2] is None  # the README is of no known format
    assert any("README" in str(p.file) for p in piece.problems)


class _Here:
    """An executor that runs each call in this process (one worker; its files are this machine's)."""

    workers = 1
    shares_files = True
    holds_results = False

    def map(self, fn: Any, calls: Any) -> Any:
        return (fn(*args) for args in calls)

    def submit(self, fn: Any, *args: Any) -> Any:
        from concurrent.futures import Future

        done: Future[Any] = Future()
        done.set_result(fn(*args))
        return done


def test_a_session_across_two_files_of_one_chunk_steps_back(tmp_path: Path, monkeypatch: Any) -> None:
    """Both files of 'group:73921' in one task: the file plan answers None (the caller ships records),
    as when they are read by two tasks."""
    import shutil

    for name in ("session-after.jsonl", "session-before.jsonl"):
        shutil.copy(Path("fixtures/logs") / name, tmp_path / name)
    assert filetasks.analyze_files(tmp_path, executor=_Here(), view="consecutive") is None  # two tasks
    monkeypatch.setattr(filetasks, "plan_chunks", lambda sizes, workers: [range(len(sizes))])
    assert filetasks.analyze_files(tmp_path, executor=_Here(), view="consecutive") is None  # one task
    (tmp_path / "session-after.jsonl").unlink()
    assert filetasks.analyze_files(tmp_path, executor=_Here(), view="consecutive") is not None


@pytest.mark.slow
@pytest.mark.parametrize("view", [None, "simulated"])
def test_chunks_of_many_files_give_the_frames_of_one_process(tmp_path: Path, view: str | None) -> None:
    """A history of many small files (Claude Code project and Codex rollout copied) and the real DeepSeek
    and Gemini runs copied: tasks of several files each, two providers, the frames of ``jobs=1``."""
    history = write_corpus(tmp_path / "history", 8)
    runs = write_agent_runs(tmp_path / "runs", 2)
    sizes = [p.stat().st_size for p in sorted(history)]
    assert max(len(chunk) for chunk in filetasks.plan_chunks(sizes, 2)) > 1  # chunks of several files
    for folder in (tmp_path / "history", tmp_path / "runs"):
        serial = analyze(folder, view=view)
        parallel = analyze(folder, view=view, jobs=2)
        assert serial.requests.height > 20
        assert_same(serial, parallel)
    assert len(runs) == 12 and set(analyze(tmp_path / "runs", jobs=2).provider.split(", ")) == {
        "deepseek",
        "gemini",
    }


def test_small_logs_run_in_one_process_with_a_note(monkeypatch: Any) -> None:
    """Below the threshold, ``jobs=2`` is ``jobs=1`` (the file plan never runs) and a note says so; at 0
    the workers run whatever the size; the command line starts no fork server for small logs."""
    monkeypatch.setenv("PROMPTKIT_JOBS_MIN_BYTES", str(10**9))
    assert jobs_min_bytes() == 10**9
    monkeypatch.setattr(filetasks, "analyze_files", lambda *a, **k: pytest.fail("the file plan ran"))
    one = analyze("fixtures/real-logs/deepseek", provider="deepseek")
    two = analyze("fixtures/real-logs/deepseek", provider="deepseek", jobs=2)
    assert_frame_equal(one.requests, two.requests)
    assert two.notes[:-1] == one.notes and "analyzed in one process" in two.notes[-1]
    assert "1.0 GB" not in two.notes[-1] and "1000.0 MB" in two.notes[-1]
    assert not may_start_workers(["fixtures/real-logs/deepseek"])
    monkeypatch.setenv("PROMPTKIT_JOBS_MIN_BYTES", "0")
    assert may_start_workers(["fixtures/real-logs/deepseek"]) and may_start_workers(["no/such/path"])
    monkeypatch.setenv("PROMPTKIT_JOBS_MIN_BYTES", "not a number")
    assert jobs_min_bytes() == JOBS_MIN_BYTES
    monkeypatch.setenv("PROMPTKIT_JOBS_MIN_BYTES", str(800_000))  # the folder holds 875 kB
    assert may_start_workers(["fixtures/real-logs/deepseek"])
    assert not may_start_workers(
        ["fixtures/real-logs/deepseek/deepseek_reasoner_dev__pvlib__pvlib-python-1154.traj.json"]
    )


def test_a_process_keeps_its_last_few_contexts(monkeypatch: Any) -> None:
    """Files of two providers in turn reuse each one's context (its tokenizer caches); the least recently
    used is dropped past CONTEXTS_KEPT."""
    monkeypatch.setattr(specs, "_CONTEXTS", {})

    def spec(bound: int) -> specs.AnalysisSpec:
        return specs.AnalysisSpec("exact", None, None, None, "simulated", True, cache_tokens=bound)

    first, second = specs.context_for(spec(1)), specs.context_for(spec(2))
    assert specs.context_for(spec(1)) is first and specs.context_for(spec(2)) is second
    timed = specs.context_for(
        specs.AnalysisSpec("exact", None, None, None, "simulated", False, cache_tokens=1)
    )
    assert timed is first and not timed.spec.timed  # the same context, its spec the caller's
    for bound in range(3, 3 + specs.CONTEXTS_KEPT - 1):
        specs.context_for(spec(bound))
    assert specs.context_for(spec(1)) is first  # used more recently than the second one
    assert specs.context_for(spec(2)) is not second  # the least recently used: dropped, made again
    assert len(specs._CONTEXTS) == specs.CONTEXTS_KEPT


def test_the_command_starts_no_fork_server_for_small_logs(tmp_path: Path, monkeypatch: Any) -> None:
    """``promptkit analyze DIR --jobs 2`` on logs under the threshold starts no fork server (the analysis
    runs in its own process); over it, the server is started before the command's imports."""
    from promptkit import cli
    from promptkit.commands import analyze as command

    started: list[tuple[list[str], list[str]]] = []
    monkeypatch.setattr(
        executors, "start_fork_server", lambda names=(), logs=(): started.append((list(names), list(logs)))
    )
    monkeypatch.setattr(command, "run_analyze", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    out = str(tmp_path / "out")
    monkeypatch.setenv("PROMPTKIT_JOBS_MIN_BYTES", str(10**9))
    assert cli.main(["analyze", "fixtures/real-logs/deepseek", "--jobs", "2", "--out", out]) == 130
    assert started == []
    monkeypatch.setenv("PROMPTKIT_JOBS_MIN_BYTES", "1000")
    assert cli.main(["analyze", "fixtures/real-logs/deepseek", "--jobs", "2", "--out", out]) == 130
    assert started == [([], [Path("fixtures/real-logs/deepseek")])]  # no provider named: the server guesses
    argv = ["analyze", "fixtures/real-logs/deepseek", "--provider", "deepseek", "--jobs", "2", "--out", out]
    assert cli.main(argv) == 130
    assert started[-1] == (["deepseek"], [])  # named: its tokenizer, nothing to guess


def test_the_file_plan_shows_a_bar_over_the_files_and_the_requests_read(monkeypatch: Any) -> None:
    """With ``progress``, a bar counts the files as their chunks come back, and the requests read."""
    import tqdm.auto

    bars: list[Any] = []

    class Bar:
        def __init__(self, **options: Any) -> None:
            self.options, self.n, self.postfix = options, 0, ""
            bars.append(self)

        def __enter__(self) -> Any:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def update(self, n: int) -> None:
            self.n += n

        def set_postfix_str(self, text: str, refresh: bool = True) -> None:
            self.postfix = text

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    result = filetasks.analyze_files(
        "fixtures/real-logs/deepseek",
        executor=_Here(),
        view="consecutive",
        provider="deepseek",
        progress=True,
    )
    assert result is not None
    (bar,) = bars
    assert bar.options["total"] == bar.n == 4 and bar.options["unit"] == "file"
    assert bar.postfix == f"{result.requests.height:,} requests"  # every record read is a request here


class _Recording(_Here):
    """:class:`_Here` with ``workers`` workers, naming each call submitted to them."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.submitted: list[str] = []

    def submit(self, fn: Any, *args: Any) -> Any:
        self.submitted.append(fn.__name__)
        return super().submit(fn, *args)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_each_provider_group_replays_on_a_worker_of_its_own_when_there_is_one(
    tmp_path: Path, workers: int
) -> None:
    """The real DeepSeek and Gemini runs (two provider groups, each a cache of its own) in the simulated
    view: with a worker for each group, both replay on the workers and this process replays none; with
    one worker, the largest (DeepSeek) replays here, the other on the worker. The frames are those of
    ``jobs=1`` either way."""
    write_agent_runs(tmp_path, 1)
    executor = _Recording(workers)
    result = filetasks.analyze_files(tmp_path, executor=executor, view="simulated")
    assert result is not None and set(result.provider.split(", ")) == {"deepseek", "gemini"}
    replays = executor.submitted.count("finish_group_task")
    assert replays == (2 if workers >= 2 else 1)
    # the coordinator's own replay sends its divergences to a worker; a worker's replay attributes its own
    assert executor.submitted.count("attribute_files") == (0 if workers >= 2 else 1)
    assert_same(analyze(tmp_path, view="simulated"), result)


def test_a_single_provider_group_replays_here(tmp_path: Path) -> None:
    """One provider group: this process replays it (a worker would do it no sooner), whatever the workers."""
    write_agent_runs(tmp_path, 1, sources=("fixtures/real-logs/deepseek",))
    executor = _Recording(4)
    result = filetasks.analyze_files(tmp_path, executor=executor, view="simulated")
    assert result is not None and result.provider == "deepseek"
    assert "finish_group_task" not in executor.submitted and "attribute_files" in executor.submitted


def test_the_fork_server_loads_the_tokenizers_of_the_providers_of_the_logs(monkeypatch: Any) -> None:
    """What the fork server starts with (``warm_worker``) loads the tokenizers named and those of the
    providers found in a few of the logs: DeepSeek and Gemini runs, once each."""
    from promptkit.providers import resolve

    loaded: list[str] = []
    real = resolve.resolve_tokenizer

    def recording(name: Any, *args: Any, **kwargs: Any) -> Any:
        loaded.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(resolve, "resolve_tokenizer", recording)
    executors.warm_worker(["cl100k_base"], ["fixtures/real-logs/deepseek", "fixtures/real-logs/gemini"])
    assert loaded == ["cl100k_base", "deepseek", "gemini"]
    loaded.clear()
    executors.warm_worker([], [])
    assert loaded == []


def test_a_few_small_files_are_read_to_guess_the_providers(tmp_path: Path, monkeypatch: Any) -> None:
    """The guess reads the first file of each folder name, at most SNIFF_FILES, none over SNIFF_MAX_BYTES,
    a file named explicitly whatever its name; what is no log of a known format adds nothing."""
    for k in range(12):
        (tmp_path / f"p{k:02d}").mkdir()
        for name in ("a.jsonl", "b.jsonl", "notes.txt"):
            (tmp_path / f"p{k:02d}" / name).write_text("{}\n" * (k + 1))
    picked = executors.sniffed_files([tmp_path])
    assert [Path(p).relative_to(tmp_path).as_posix() for p in picked] == [
        f"p{k:02d}/a.jsonl" for k in range(executors.SNIFF_FILES)
    ]
    runs = write_agent_runs(tmp_path / "runs", 3)
    assert executors.likely_tokenizers([tmp_path / "runs"]) == ("deepseek", "gemini")
    assert len(executors.sniffed_files([tmp_path / "runs"])) == 2 < len(runs)  # one file of each folder name
    monkeypatch.setattr(executors, "SNIFF_MAX_BYTES", 6)  # p00 and p01 hold 3 and 6 bytes a file
    assert len(executors.sniffed_files([tmp_path])) == 2
    assert executors.sniffed_files([tmp_path / "p00" / "notes.txt"]) == [str(tmp_path / "p00" / "notes.txt")]
    assert executors.likely_tokenizers([tmp_path, "-"]) == ()  # no request in "{}" lines
    os.mkfifo(tmp_path / "p00" / "0.jsonl")  # first in its folder: never read (it would wait for a writer)
    assert executors.sniffed_files([tmp_path / "p00"]) == [str(tmp_path / "p00" / "a.jsonl")]


def test_analyze_on_workers_names_the_logs_to_the_fork_server_when_no_provider_is(monkeypatch: Any) -> None:
    """``analyze(paths, jobs=2)`` makes its pool with the paths (the server guesses their providers), or
    with the tokenizer of the provider named (nothing to guess)."""
    from promptkit.analysis import api

    made: list[tuple[Any, Any]] = []

    def make(engine: str, jobs: int, **kw: Any) -> None:
        made.append((kw["tokenizers"], kw["logs"]))  # no pool: the records are shipped in this process

    monkeypatch.setattr(api, "make_executor", make)
    monkeypatch.setenv("PROMPTKIT_JOBS_MIN_BYTES", "0")
    analyze("fixtures/real-logs/deepseek", jobs=2)
    analyze(["fixtures/real-logs/deepseek"], provider="deepseek", jobs=2)
    assert made == [((), ["fixtures/real-logs/deepseek"]), (("deepseek",), [])]
