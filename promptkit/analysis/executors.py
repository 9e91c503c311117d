"""Where an analysis runs its per-session work: this process, a local process pool, or a Dask cluster.

:func:`~promptkit.analysis.engine.analyze_requests` splits a provider's records into chunks of whole
sessions. In the consecutive view each chunk is analyzed where the executor runs it (sessions are
independent); in the simulated view the chunks are tokenized there (phase 1) and the ordered cache
simulation runs in the calling process over the tokens (phase 2). Results are the same on every
executor: chunks carry each record's position and are put back in record order.

:func:`~promptkit.analysis.engine.analyze` on paths sends one task per log file instead
(:mod:`promptkit.analysis.filetasks`): the workers read the files themselves.

- :class:`ProcessPool` (``jobs=N``): ``concurrent.futures.ProcessPoolExecutor`` with ``N`` worker
  processes (forked from a fresh server process that imported the analysis once; each builds its own
  tokenizer once and reuses it across the tasks it gets).
- :class:`DaskExecutor` (``engine="dask"``): the workers of a ``dask.distributed`` cluster (the
  ``dask`` extra: ``pip install "promptkit[dask]"``); see ``docs/how-to/cluster.md``.

Example::

    >>> with ProcessPool(1) as pool:
    ...     list(pool.map(divmod, [(7, 2), (9, 4)]))
    [(3, 1), (2, 1)]
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from promptkit.errors import UsageError

__all__ = ["ENGINES", "DaskExecutor", "Executor", "ProcessPool", "make_executor"]

#: The engines ``analyze(engine=...)`` / ``--engine`` accept.
ENGINES: tuple[str, ...] = ("local", "dask")


class Executor(Protocol):
    """Runs ``fn(*args)`` for each args tuple somewhere and yields the results in order."""

    workers: int

    def map(self, fn: Callable[..., Any], calls: Iterable[tuple[Any, ...]]) -> Iterator[Any]: ...

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Start ``fn(*args)``; the returned future's ``result()`` waits for it."""
        ...

    def close(self) -> None: ...


#: Modules a local pool's workers import before they are forked (see :class:`ProcessPool`).
_PRELOAD: tuple[str, ...] = (
    "promptkit.analysis.engine",
    "promptkit.analysis.filetasks",
    "promptkit.tokens.tokenize",
    "promptkit.analysis.simulator",
    "promptkit.formats",
    "tiktoken",
    "polars",
)


class ProcessPool:
    """A local pool of ``workers`` processes, forked from a fresh ``forkserver`` process that imported
    the analysis (:data:`_PRELOAD`) once, so no state of this process is inherited (spawned where there
    is no forkserver).

    At most ``2 * workers`` calls are in flight: a long stream of chunks is not all held in memory.
    """

    def __init__(self, workers: int) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        if workers < 1:
            raise UsageError(f"jobs: expected at least 1 worker, got {workers}")
        self.workers = workers
        if "forkserver" in multiprocessing.get_all_start_methods():
            # perf: a fresh server process imports the analysis once and forks each worker from it
            # (nothing of this process is inherited): a worker starts in milliseconds, not in the
            # half second a spawned one spends importing numpy, polars and the tokenizers
            server = multiprocessing.get_context("forkserver")
            server.set_forkserver_preload(list(_PRELOAD))
            context: multiprocessing.context.BaseContext = server
        else:  # pragma: no cover - Windows
            context = multiprocessing.get_context("spawn")
        self._pool = ProcessPoolExecutor(max_workers=workers, mp_context=context)

    def map(self, fn: Callable[..., Any], calls: Iterable[tuple[Any, ...]]) -> Iterator[Any]:
        """``fn(*args)`` for each ``args``, results in order."""
        from collections import deque

        pending: deque[Any] = deque()
        for args in calls:
            pending.append(self._pool.submit(fn, *args))
            if len(pending) >= 2 * self.workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Start ``fn(*args)`` in a worker: a ``concurrent.futures.Future``."""
        return self._pool.submit(fn, *args)

    def close(self) -> None:
        """Shut the worker processes down."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ProcessPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DaskExecutor:
    """The workers of a ``dask.distributed`` cluster: ``client`` (a ``distributed.Client``), or the
    scheduler at ``address``, or, with neither, the current client (``distributed.get_client``), or a
    new ``LocalCluster`` of ``workers`` processes on 127.0.0.1 that :meth:`close` shuts down."""

    def __init__(self, client: Any = None, *, address: str | None = None, workers: int | None = None) -> None:
        try:
            from distributed import Client, LocalCluster, get_client
        except ImportError:  # pragma: no cover - the dask extra is in dev
            raise UsageError('engine "dask" needs dask.distributed: pip install "promptkit[dask]"') from None
        self._owned: list[Any] = []
        if client is None and address is not None:
            client = Client(address)  # type: ignore[no-untyped-call]
            self._owned.append(client)
        if client is None:
            try:
                client = get_client()
            except ValueError:
                cluster = LocalCluster(  # type: ignore[no-untyped-call]
                    n_workers=workers or 2,
                    threads_per_worker=1,
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address=None,
                    silence_logs=logging.ERROR,
                )
                client = Client(cluster)  # type: ignore[no-untyped-call]
                self._owned.extend([client, cluster])
        self.client = client
        self.workers = max(1, len(client.scheduler_info().get("workers", {})) or (workers or 1))

    def map(self, fn: Callable[..., Any], calls: Iterable[tuple[Any, ...]]) -> Iterator[Any]:
        """``fn(*args)`` for each ``args`` on the cluster, results in order (at most ``4 * workers``
        in flight)."""
        from collections import deque

        pending: deque[Any] = deque()
        for args in calls:
            pending.append(self.client.submit(fn, *args, pure=False))
            if len(pending) >= 4 * self.workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Start ``fn(*args)`` on the cluster: a ``distributed.Future``."""
        return self.client.submit(fn, *args, pure=False)

    def close(self) -> None:
        """Close the client and cluster this executor started (not one it was given)."""
        for obj in self._owned:
            obj.close()
        self._owned.clear()


def make_executor(
    engine: str = "local", jobs: int = 1, *, client: Any = None, address: str | None = None
) -> Executor | None:
    """The executor for ``engine`` and ``jobs`` (None: run in this process); ``client`` is a
    ``distributed.Client`` or a scheduler address (engine ``"dask"`` only).

    >>> make_executor("local", 1) is None
    True
    """
    if engine not in ENGINES:
        raise UsageError(f"engine: unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")
    if isinstance(client, str):  # a scheduler address
        client, address = None, client
    if engine == "dask":
        return DaskExecutor(client, address=address, workers=jobs if jobs > 1 else None)
    if client is not None or address is not None:
        raise UsageError('engine: a client or scheduler address needs engine="dask"')
    if jobs < 1:
        raise UsageError(f"jobs: expected at least 1, got {jobs}")
    return ProcessPool(jobs) if jobs > 1 else None
