"""Where an analysis runs its per-session work: this process, a local process pool, or a Dask cluster.

:func:`~promptkit.analysis.api.analyze_requests` splits a provider's records into chunks of whole
sessions. In the consecutive view each chunk is analyzed where the executor runs it (sessions are
independent); in the simulated view the chunks are tokenized there (stage 1) and the replay runs in
the calling process over the tokens (stage 2, :mod:`promptkit.analysis.plans.coordinator`). Results are the same on every
executor: chunks carry each record's position and are put back in record order.

:func:`~promptkit.analysis.api.analyze` on paths sends one task per log file instead
(:mod:`promptkit.analysis.plans.files`): the workers read the files themselves.

An executor declares what it can do as attributes of the :class:`Executor` protocol
(:attr:`~Executor.shares_files`, :attr:`~Executor.holds_results`): the plans read them, never probe.

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
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, Protocol

from promptkit.errors import UsageError

__all__ = [
    "ENGINES",
    "JOBS_MIN_BYTES",
    "DaskExecutor",
    "Executor",
    "ProcessPool",
    "jobs_min_bytes",
    "likely_tokenizers",
    "make_executor",
    "may_start_workers",
    "named_tokenizers",
    "sniffed_files",
    "start_fork_server",
    "warm_worker",
]

#: The engines ``analyze(engine=...)`` / ``--engine`` accept.
ENGINES: tuple[str, ...] = ("local", "dask")


#: Below this many bytes of logs, :func:`~promptkit.analysis.api.analyze` with ``jobs`` > 1 on this
#: machine (``engine="local"``) runs in its own process, as ``jobs=1`` does, and a note says so: starting
#: the workers and joining their pieces costs more than they save on a small input. The environment
#: variable ``PROMPTKIT_JOBS_MIN_BYTES`` overrides it (0: always the workers). Measured in
#: docs/concepts/performance.md.
JOBS_MIN_BYTES: Final[int] = 8 * 1024 * 1024


def jobs_min_bytes() -> int:
    """The bytes of logs from which :func:`~promptkit.analysis.api.analyze` starts local workers for
    ``jobs`` > 1: ``PROMPTKIT_JOBS_MIN_BYTES`` when set to a whole number, else :data:`JOBS_MIN_BYTES`.

    >>> jobs_min_bytes() >= 0
    True
    """
    value = os.environ.get("PROMPTKIT_JOBS_MIN_BYTES", "").strip()
    return int(value) if value.isdigit() else JOBS_MIN_BYTES


def may_start_workers(paths: Iterable[str | os.PathLike[str]]) -> bool:
    """Whether the files under ``paths`` (walked, stopping at :func:`jobs_min_bytes`) may be large enough
    for local workers: the command line starts their fork server early only then. A cheap walk with no
    format sniffing (it may count a file the analysis passes over: then a server is started for
    nothing); what cannot be listed counts as large (standard input: the analysis decides).

    >>> may_start_workers(["-"])
    True
    """
    least, total = jobs_min_bytes(), 0
    todo = [os.fspath(p) for p in paths]
    while todo and total < least:
        path = todo.pop()
        try:
            if os.path.isdir(path):
                todo.extend(entry.path for entry in os.scandir(path))
            else:
                total += os.stat(path).st_size
        except OSError:
            return True
    return total >= least


#: At most how many log files :func:`likely_tokenizers` reads, and the largest it reads (bytes).
SNIFF_FILES: Final[int] = 8
SNIFF_MAX_BYTES: Final[int] = 2 * 1024 * 1024


def sniffed_files(paths: Iterable[str | os.PathLike[str]], seen_at_most: int = 64) -> list[str]:
    """A few log files under ``paths`` to guess their providers from: among the first ``seen_at_most``
    log files of a walk (each folder's entries in name order; a file named in ``paths`` counts whatever
    its name), the first of each folder name (an agent's folders name its provider or project:
    ``deepseek/``, ``claude-code/<project>/``, ``subagents/``), at most :data:`SNIFF_FILES`, none over
    :data:`SNIFF_MAX_BYTES`, regular files only."""
    from promptkit.formats.discovery import iter_log_paths

    picked: dict[str, str] = {}
    for seen, path in enumerate(iter_log_paths(paths)):
        if seen >= seen_at_most or len(picked) >= SNIFF_FILES:
            break
        try:
            info = os.stat(path)  # a regular file only: reading a FIFO would wait for a writer
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_size <= SNIFF_MAX_BYTES:
            picked.setdefault(os.path.basename(os.path.dirname(path)), path)
    return list(picked.values())


def likely_tokenizers(paths: Iterable[str | os.PathLike[str]], format: str | None = None) -> tuple[str, ...]:
    """The providers (tokenizer or provider names, as :func:`warm_worker` takes them) of a few of the log
    files under ``paths`` (:func:`sniffed_files`; ``format``: the log format they are read in, else sniffed):
    a guess of the tokenizers the workers will need, which the fork server makes and loads them with
    (:func:`start_fork_server`'s ``logs``), once for all the workers. Never wrong in effect: a
    provider it misses is loaded by each worker that needs it, one it adds costs the server its load.
    What cannot be read adds nothing (the analysis reports it). It reads a file's first calls as its
    format gives them (a format may load a tokenizer to estimate an opaque head: in the server, where
    it is wanted).

    >>> likely_tokenizers(["fixtures/real-logs/deepseek", "fixtures/real-logs/gemini"])
    ('deepseek', 'gemini')
    """
    from itertools import islice

    from promptkit.errors import PromptkitError
    from promptkit.formats.base import STDIN_PATHS, Source, get_format, read_items
    from promptkit.formats.discovery import format_of
    from promptkit.layout import RequestRecord
    from promptkit.providers.registry import infer_record_provider

    found: dict[str, None] = {}
    items = [p for p in paths if os.fspath(p) not in STDIN_PATHS]
    for path in sniffed_files(items):
        try:
            forced = get_format(format) if format is not None else None
            fmt = format_of(Source.open(path), forced, named=False, problems=[])
            if fmt is None:
                continue
            # perf: the format's records as read, not read_file's (which estimates opaque heads with a
            # tokenizer); a file's first calls name its provider
            records = [
                r for r in islice(read_items(fmt, Source.open(path)), 64) if isinstance(r, RequestRecord)
            ]
        except (PromptkitError, OSError, ValueError):
            continue
        found.update((name, None) for name in map(infer_record_provider, records) if name is not None)
    return tuple(found)


class Executor(Protocol):
    """Runs ``fn(*args)`` for each args tuple somewhere and yields the results in order, and declares
    what the plans may ask of it."""

    #: How many workers run the calls (the plans cut their work into about four chunks per worker).
    workers: int

    @property
    def shares_files(self) -> bool:
        """Its workers run on this machine, so they can leave what a later task reads in a file (the
        simulated view's records, the Arrow files the coordinator maps:
        :func:`~promptkit.analysis.plans.files.analyze_files`) instead of sending it through this process."""
        ...

    @property
    def holds_results(self) -> bool:
        """:meth:`map_held` keeps the second part of each result on the worker that made it (a future a
        later :meth:`submit` takes); False: it comes back with the first."""
        ...

    def map(self, fn: Callable[..., Any], calls: Iterable[tuple[Any, ...]]) -> Iterator[Any]:
        """``fn(*args)`` for each ``args``, results in order."""
        ...

    def map_held(self, fn: Callable[..., Any], calls: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, Any]]:
        """``fn(*args)`` for each ``args``, where ``fn`` returns a pair: its first part, in order, and its
        second, held where it was made when :attr:`holds_results` (else the value itself)."""
        ...

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Start ``fn(*args)``; the returned future's ``result()`` waits for it."""
        ...

    def close(self) -> None:
        """Release the workers this executor started."""
        ...


#: The environment variable naming the tokenizers (or providers, for theirs) the fork server loads for
#: its workers (:func:`start_fork_server`, :mod:`promptkit.analysis._workerinit`).
TOKENIZERS_ENV: Final[str] = "PROMPTKIT_WORKER_TOKENIZERS"

#: The environment variable naming log paths (separated by ``os.pathsep``) whose providers' tokenizers
#: the fork server loads for its workers (:func:`start_fork_server`'s ``logs``).
LOGS_ENV: Final[str] = "PROMPTKIT_WORKER_LOGS"

#: The most characters of paths passed in :data:`LOGS_ENV` (the first paths only: a guess needs a few).
_LOGS_MAX: Final[int] = 16 * 1024

#: Modules a local pool's workers import before they are forked (see :class:`ProcessPool`).
_PRELOAD: tuple[str, ...] = (
    "promptkit.analysis.api",
    "promptkit.analysis.plans.files",
    "promptkit.analysis.plans.records",
    "promptkit.tokens.tokenize",
    "promptkit.analysis.simulator",
    "promptkit.formats",
    "tiktoken",
    "polars",
)


def named_tokenizers(tokenizer: Any, provider: Any) -> tuple[str, ...]:
    """The tokenizer workers are started with, where a call names it: ``tokenizer``'s name, else
    ``provider``'s (its tokenizer); none when each session's provider decides or an object is given.

    >>> named_tokenizers(None, "deepseek"), named_tokenizers("cl100k_base", "openai")
    (('deepseek',), ('cl100k_base',))
    >>> named_tokenizers(lambda: None, "openai"), named_tokenizers(None, None)  # an object: no name
    ((), ())
    """
    for spec in (tokenizer, provider):
        if spec is not None:
            return (spec,) if isinstance(spec, str) else ()
    return ()


def warm_worker(tokenizers: Iterable[str] = (), logs: Sequence[str] = ()) -> None:
    """What a worker starts with, before its first task: the analysis' modules (:data:`_PRELOAD`), the
    log-format and provider registries (each an entry-point scan of every installed distribution, about
    20 ms apiece) and ``tokenizers`` (tokenizer or provider names; cl100k_base takes about 0.1 s to load
    and 20 ms to encode its first text). A local pool's fork server runs it once for all its workers
    (:mod:`promptkit.analysis._workerinit`); :class:`DaskExecutor` runs it on each worker of its
    cluster. ``logs``: log paths whose providers' tokenizers it loads too (:func:`likely_tokenizers`).
    It never fails: what does not load here (a broken plugin, an unknown tokenizer name) is
    left for the task that needs it, which raises the error naming it. No polars operation runs here:
    a process forked after polars has started its thread pool may deadlock.

    >>> warm_worker(["cl100k_base"])
    """
    import importlib

    from promptkit.errors import PromptkitError

    for module in _PRELOAD:
        importlib.import_module(module)
    from promptkit.formats.base import available_formats
    from promptkit.providers.registry import available_providers
    from promptkit.providers.resolve import resolve_tokenizer

    for load in (available_formats, available_providers):
        try:
            load()
        except PromptkitError:  # pragma: no cover - a broken plugin: the task that needs it reports it
            pass
    names = list(filter(None, tokenizers))
    if logs:
        try:
            names.extend(likely_tokenizers(logs))
        except Exception:  # pragma: no cover - a guess: the analysis reads the logs and reports them
            pass
    for name in dict.fromkeys(names):
        try:
            resolve_tokenizer(name).encode("warm")  # loaded, and its first encoding's set-up done
        except Exception:  # the task that needs it raises the error naming it
            pass


def start_fork_server(tokenizers: Sequence[str] = (), logs: Iterable[str | os.PathLike[str]] = ()) -> bool:
    """Start the fork server local pools fork their workers from, without waiting for it (False where
    the platform has none). Its imports (:data:`_PRELOAD`, about 0.4 s) then run beside this process'
    own work: the command line calls it as soon as it has read ``--jobs``, before its own imports and
    the listing of the files, and a :class:`ProcessPool` calls it when made, not at its first task.
    ``tokenizers``: tokenizer or provider names whose tokenizers the server loads for every worker
    (:mod:`promptkit.analysis._workerinit`); ``logs``: log paths whose providers' tokenizers the server
    loads as well, guessed from a few of their files (:func:`likely_tokenizers`: perf: the command
    line names them when no tokenizer or provider is given; the server reads them while this process
    imports and lists the logs, and no worker loads those tokenizers again: 0.6 s a worker for the
    Claude Code and Codex logs, 1.2 s for DeepSeek and Gemini runs). A server already running is kept
    as it is (its preload and tokenizers were set when it started; the workers load what else they
    need).

    >>> start_fork_server() in (True, False)
    True
    """
    import multiprocessing
    import multiprocessing.forkserver
    import os

    if "forkserver" not in multiprocessing.get_all_start_methods():  # pragma: no cover - Windows
        return False
    # the analysis, then warm_worker with the tokenizers named here (the registries, the tokenizers)
    multiprocessing.get_context("forkserver").set_forkserver_preload(
        [*_PRELOAD, "promptkit.analysis._workerinit"]
    )
    names = ",".join(t for t in tokenizers if isinstance(t, str) and "," not in t)
    paths = os.pathsep.join(os.fspath(p) for p in logs if os.pathsep not in os.fspath(p))[:_LOGS_MAX]
    paths = paths if len(paths) < _LOGS_MAX else paths.rpartition(os.pathsep)[0]  # whole paths only
    before = {env: os.environ.get(env) for env in (TOKENIZERS_ENV, LOGS_ENV)}
    os.environ.update({TOKENIZERS_ENV: names, LOGS_ENV: paths})  # the server gets this environment
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        for env, value in before.items():
            if value is None:
                del os.environ[env]
            else:
                os.environ[env] = value
    return True


class ProcessPool:
    """A local pool of ``workers`` processes, forked from a fresh ``forkserver`` process that imported
    the analysis (:data:`_PRELOAD`) and loaded ``tokenizers`` (tokenizer or provider names) and those of
    the providers of the logs under ``logs`` (:func:`likely_tokenizers`) once, so no
    state of this process is inherited (spawned where there is no forkserver; see
    :func:`start_fork_server`).

    At most ``2 * workers`` calls are in flight: a long stream of chunks is not all held in memory.
    """

    #: Its workers run on this machine (:attr:`Executor.shares_files`).
    shares_files: Final = True
    #: What its workers return comes back to this process (:attr:`Executor.holds_results`).
    holds_results: Final = False

    def __init__(
        self, workers: int, *, tokenizers: Sequence[str] = (), logs: Iterable[str | os.PathLike[str]] = ()
    ) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        if workers < 1:
            raise UsageError(f"jobs: expected at least 1 worker, got {workers}")
        self.workers = workers
        if start_fork_server(tokenizers, logs):
            # perf: a fresh server process imports the analysis once and forks each worker from it
            # (nothing of this process is inherited): a worker starts in milliseconds, not in the
            # half second a spawned one spends importing numpy, polars and the tokenizers
            context: multiprocessing.context.BaseContext = multiprocessing.get_context("forkserver")
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

    def map_held(self, fn: Callable[..., Any], calls: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, Any]]:
        """:meth:`map` of a ``fn`` that returns pairs: both parts come back (a local pool holds nothing)."""
        yield from self.map(fn, calls)

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
    new ``LocalCluster`` of ``workers`` processes on 127.0.0.1 that :meth:`close` shuts down. Each
    worker is warmed when the executor is made (:func:`warm_worker`, with ``tokenizers``)."""

    #: Its workers may run on other machines: what one task leaves for another stays in the cluster
    #: (:meth:`map_held`), not in a file.
    shares_files: Final = False
    #: :meth:`map_held` keeps the second part of a result on its worker (:attr:`Executor.holds_results`).
    holds_results: Final = True

    def __init__(
        self,
        client: Any = None,
        *,
        address: str | None = None,
        workers: int | None = None,
        tokenizers: Sequence[str] = (),
    ) -> None:
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
        # each worker imports the analysis and loads the named tokenizers once, all at the same time
        # (a worker that has them already returns at once); a worker that cannot is left to its tasks
        client.run(warm_worker, tuple(tokenizers), on_error="ignore")

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

    def map_held(self, fn: Callable[..., Any], calls: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, Any]]:
        """``fn(*args)`` for each ``args`` on the cluster, where ``fn`` returns a pair: its first part comes
        back, in order; its second stays on the worker that made it, as a ``distributed.Future`` that a
        later :meth:`submit` can take among its arguments (the cluster moves it between workers, never
        through this process)."""
        import operator
        from collections import deque

        pending: deque[tuple[Any, Any]] = deque()
        for args in calls:
            pair = self.client.submit(fn, *args, pure=False)
            light = self.client.submit(operator.getitem, pair, 0, pure=False)
            pending.append((light, self.client.submit(operator.getitem, pair, 1, pure=False)))
            if len(pending) >= 4 * self.workers:
                light, held = pending.popleft()
                yield light.result(), held
        while pending:
            light, held = pending.popleft()
            yield light.result(), held

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Start ``fn(*args)`` on the cluster: a ``distributed.Future`` (futures among ``args``, also in
        lists and tuples, are their results where it runs)."""
        return self.client.submit(fn, *args, pure=False)

    def close(self) -> None:
        """Close the client and cluster this executor started (not one it was given)."""
        for obj in self._owned:
            obj.close()
        self._owned.clear()


def make_executor(
    engine: str = "local",
    jobs: int = 1,
    *,
    client: Any = None,
    address: str | None = None,
    tokenizers: Sequence[str] = (),
    logs: Iterable[str | os.PathLike[str]] = (),
) -> Executor | None:
    """The executor for ``engine`` and ``jobs`` (None: run in this process); ``client`` is a
    ``distributed.Client`` or a scheduler address (engine ``"dask"`` only); ``tokenizers``: what a
    local pool's workers are forked with (:class:`ProcessPool`), and ``logs``, whose providers'
    tokenizers they are forked with too.

    >>> make_executor("local", 1) is None
    True
    """
    if engine not in ENGINES:
        raise UsageError(f"engine: unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")
    if isinstance(client, str):  # a scheduler address
        client, address = None, client
    if engine == "dask":
        return DaskExecutor(
            client, address=address, workers=jobs if jobs > 1 else None, tokenizers=tokenizers
        )
    if client is not None or address is not None:
        raise UsageError('engine: a client or scheduler address needs engine="dask"')
    if jobs < 1:
        raise UsageError(f"jobs: expected at least 1, got {jobs}")
    return ProcessPool(jobs, tokenizers=tokenizers, logs=logs) if jobs > 1 else None
