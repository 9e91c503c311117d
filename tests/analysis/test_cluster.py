"""``engine="dask"`` on a real local dask.distributed cluster (2 worker processes on 127.0.0.1) and
``jobs=2``: the same frames and notes as the single-process run, in both views, by the file plan
(:mod:`promptkit.analysis.plans.files`) and by the records plan it steps back to."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from promptkit.analysis.api import analyze

# every test here starts a real Dask cluster or a process pool (spawned interpreters): minutes
pytestmark = pytest.mark.slow

LOGS = ["fixtures/logs", "fixtures/real-logs/deepseek"]


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    )
    client = Client(cluster, timeout="60s")
    try:
        client.wait_for_workers(2, timeout=60)
        yield client
    finally:
        client.close()
        cluster.close()


@pytest.mark.parametrize("view", ["consecutive", "simulated"])
def test_dask_engine_equals_local(client: Any, view: str) -> None:
    local = analyze(LOGS, view=view)
    remote = analyze(LOGS, view=view, engine="dask", client=client)
    assert len(client.scheduler_info()["workers"]) == 2
    assert_frame_equal(local.requests, remote.requests)
    assert_frame_equal(local.composition, remote.composition)
    assert_frame_equal(local.problems, remote.problems)
    assert local.notes == remote.notes
    # the work ran on the cluster: both workers hold a promptkit analysis context
    contexts = client.run(lambda: len(__import__("promptkit.analysis.spec").analysis.spec._CONTEXTS))
    assert sum(contexts.values()) >= 1


def test_a_dask_executor_warms_every_worker(client: Any) -> None:
    """Made with a tokenizer's name, the executor has each worker import the analysis and load it once
    (as a local pool's fork server does), before any task; a name no worker knows is left to the tasks."""
    from promptkit.analysis.executors import DaskExecutor

    def cached() -> list[str]:
        from promptkit.tokens import tokenizers

        return sorted(tokenizers._CACHE)

    client.run(
        lambda: __import__("promptkit.tokens.tokenizers").tokens.tokenizers._CACHE.pop("o200k_base", None)
    )
    assert all("o200k_base" not in names for names in client.run(cached).values())
    DaskExecutor(client, tokenizers=["o200k_base", "no-such-tokenizer"]).close()
    assert all("o200k_base" in names for names in client.run(cached).values())
    assert len(client.run(cached)) == 2


def test_dask_engine_streamed_by_address(client: Any) -> None:
    local = analyze("fixtures/real-logs/deepseek")
    remote = analyze(
        "fixtures/real-logs/deepseek", stream=True, engine="dask", client=client.scheduler.address
    )
    assert_frame_equal(local.requests, remote.requests)
    assert local.notes == remote.notes


SYSTEM = "You are a careful assistant who answers in short sentences. " * 120  # > 1024 tokens: cacheable


def _call(session: str, t: float | None, messages: list[dict[str, Any]], model: str) -> str:
    import json

    record: dict[str, Any] = {"session": session, "request": {"model": model, "messages": messages}}
    if t is not None:
        record["timestamp"] = t
    record["response"] = {"choices": [{"message": {"role": "assistant", "content": f"ok {len(messages)}"}}]}
    return json.dumps(record)


def _session(session: str, start: float, calls: int, model: str, *, gap_at: int | None = None) -> list[str]:
    """A growing conversation (each call repeats the previous ones and their answers) whose system
    prompt every session shares; ``gap_at``: a two-hour pause before that call (an OpenAI entry expires)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    lines, t = [], start
    for k in range(calls):
        messages.append({"role": "user", "content": f"{session} question {k}: " + "why? " * (40 + 7 * k)})
        if session == "b1" and k == 2:
            messages[1] = {"role": "user", "content": "an edited first question \ud800 with a lone surrogate"}
        lines.append(_call(session, t, list(messages), model))
        messages.append({"role": "assistant", "content": f"ok {len(messages)}"})
        t += 7200.0 if gap_at is not None and k + 1 == gap_at else 30.0
    return lines


def write_logs(root: Path, *, untimed_file: bool = False) -> Path:
    """Three log files of interleaved sessions of two providers (OpenAI by ``gpt-4o``, DeepSeek by
    ``deepseek-chat``), a bad line, an edited message, a lone surrogate, a two-hour pause, and a file of
    no known format; ``untimed_file``: one more file whose only call has no timestamp."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "a.jsonl").write_text(
        "\n".join(_session("a1", 1000.0, 5, "gpt-4o", gap_at=3) + _session("a2", 1010.0, 4, "deepseek-chat"))
        + "\n"
    )
    (root / "b.jsonl").write_text(
        "\n".join([*_session("b1", 1005.0, 4, "gpt-4o"), '{"session": "b1", "request": 7}']) + "\n"
    )
    (root / "c.jsonl").write_text("\n".join(_session("c1", 1020.0, 3, "deepseek-chat")) + "\n")
    (root / "notes.json").write_text('{"not": "a log"}')
    if untimed_file:
        (root / "d.jsonl").write_text(_call("d1", None, [{"role": "user", "content": "hi"}], "gpt-4o") + "\n")
    return root


def assert_same(a: Any, b: Any) -> None:
    assert_frame_equal(a.requests, b.requests)
    assert_frame_equal(a.composition, b.composition)
    assert_frame_equal(a.problems, b.problems)
    assert a.notes == b.notes
    assert (a.provider, a.tokenizer, a.render, a.view) == (b.provider, b.tokenizer, b.render, b.view)


def _watch_the_file_plan(monkeypatch: Any) -> list[str]:
    """What :func:`~promptkit.analysis.plans.files.analyze_files` did in each call :func:`analyze` made of
    it: the executor's class where the file plan itself ran, "stepped back" where it returned None (a
    session spans files: the records are loaded here and shipped by session)."""
    from promptkit.analysis.plans import files as file_plan

    ran: list[str] = []
    plan = file_plan.analyze_files

    def watched(*args: Any, executor: Any, **kwargs: Any) -> Any:
        result = plan(*args, executor=executor, **kwargs)
        ran.append("stepped back" if result is None else type(executor).__name__)
        return result

    monkeypatch.setattr(file_plan, "analyze_files", watched)
    return ran


@pytest.mark.parametrize(
    ("view", "untimed"),
    [("consecutive", False), ("consecutive", True), ("simulated", False), ("simulated", True)],
)
def test_jobs_and_dask_give_the_frames_of_one_process(
    client: Any, tmp_path: Path, monkeypatch: Any, view: str, untimed: bool
) -> None:
    """The file plan (workers read their own files) on a local pool and on a real Dask cluster gives
    the frames of the single-process run, in both views; with a file whose call has no time, the
    OpenAI group is analyzed without times everywhere (its files that assumed times are redone)."""
    logs = write_logs(tmp_path / "logs", untimed_file=untimed)
    one = analyze(logs, view=view)
    assert one.problems.height == 2  # the bad line and the file of no known format
    assert set(one.requests["model"]) == {"gpt-4o", "deepseek-chat"}
    assert one.requests["change_class"].drop_nulls().len() > 0  # the edit was found and classified
    assert any("surrogate" in note for note in one.notes)
    expired = one.requests.filter((pl.col("session") == "a1") & (pl.col("index") == 3))
    assert (expired["predicted_cached_tokens"][0] > 0) == untimed  # expired after two hours, if timed
    ran = _watch_the_file_plan(monkeypatch)
    assert_same(one, analyze(logs, view=view, jobs=2))
    assert_same(one, analyze(logs, view=view, engine="dask", client=client))
    # the file plan itself ran on both (no session spans files here), not the records plan it steps back to
    assert ran == ["ProcessPool", "DaskExecutor"]


def test_a_session_across_files_steps_back_to_shipping_records(monkeypatch: Any) -> None:
    ran = _watch_the_file_plan(monkeypatch)
    assert_same(analyze("fixtures/logs"), analyze("fixtures/logs", jobs=2))
    assert ran == ["stepped back"]  # 'group:73921' spans two files


def test_dask_keeps_the_records_on_the_workers(client: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """The simulated view's file plan on the cluster: each file's records stay on the worker that read
    them (the client holds a future, never their bytes) and the worker that attributes the divergences
    gets them from the cluster; the result is the single process's."""
    from distributed import Future

    from promptkit.analysis.executors import DaskExecutor
    from promptkit.analysis.plans import files as filetasks
    from tests.analysis.test_parallel import _columns_logs, assert_same

    logs = _columns_logs(tmp_path / "logs")
    local = analyze(logs, view="simulated")
    assert local.requests["divergence_message"].drop_nulls().len() > 0  # the records are read again
    seen: list[Any] = []
    assemble = filetasks._assemble

    def watched(pieces: Any, *args: Any, **kwargs: Any) -> Any:
        seen.extend(piece.loaded for piece in pieces.values())
        return assemble(pieces, *args, **kwargs)

    monkeypatch.setattr(filetasks, "_assemble", watched)
    remote = filetasks.analyze_files(logs, executor=DaskExecutor(client), view="simulated")
    assert remote is not None
    assert_same(local, remote)
    assert len(seen) == 3 and all(isinstance(loaded, Future) for loaded in seen)
