"""``engine="dask"`` on a real local dask.distributed cluster (2 worker processes on 127.0.0.1): the
same frames and notes as the local engine, in both views."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from polars.testing import assert_frame_equal

from promptkit.cache.engine import analyze

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
    contexts = client.run(lambda: len(__import__("promptkit.cache.engine").cache.engine._CONTEXTS))
    assert sum(contexts.values()) >= 1


def test_dask_engine_streamed_by_address(client: Any) -> None:
    local = analyze("fixtures/real-logs/deepseek")
    remote = analyze(
        "fixtures/real-logs/deepseek", stream=True, engine="dask", client=client.scheduler.address
    )
    assert_frame_equal(local.requests, remote.requests)
    assert local.notes == remote.notes
