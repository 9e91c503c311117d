"""The analysis' entry points: :func:`analyze` (log files) and :func:`analyze_requests` (records or
request bodies). They check their arguments, group the records by provider and pick a plan
(:mod:`promptkit.analysis.plans`) that runs the stages:

1. :mod:`~promptkit.analysis.prepare`: each request's body, tokens, cache plan and fixed columns;
2. :mod:`~promptkit.analysis.replay`: the requests through the provider's cache, one after the other;
3. :mod:`~promptkit.analysis.attribute`: a divergence to its message, slot, excerpts and change class;
4. :mod:`~promptkit.analysis.assemble`: the frames in load order, with the notes.

Two views:

- ``consecutive``: each request against the previous request of its session (with that request's
  answer appended when the model's entries include it). This is the design card's view: "are
  adjacent turns byte-identical?"
- ``simulated``: a radix cache (:mod:`promptkit.analysis.simulator`) over *all* earlier requests of all
  sessions in time order, with the model's TTL, capacity and delay, so that a head shared across
  sessions is credited as a provider credits it.

Token arrays are compared with numpy (the first mismatch by vectorized comparison), never strings.

Example::

    >>> result = analyze("fixtures/real-logs/deepseek", provider="deepseek")  # from the repository root
    >>> result.requests.select("session", "index", "prompt_tokens", "predicted_cached_tokens").row(0)
    ('...', 0, ..., 0)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

from promptkit.analysis.assemble import VIEW_NOTE, combine_groups, defaulted_note
from promptkit.analysis.executors import Executor, jobs_min_bytes, make_executor, named_tokenizers
from promptkit.analysis.plans import files as file_plan
from promptkit.analysis.plans.records import analyze_group
from promptkit.analysis.plans.stream import analyze_stream
from promptkit.analysis.plans.timeline import analyze_timeline
from promptkit.analysis.result import AnalysisResult
from promptkit.analysis.runtime import ReadProgress, gc_paused
from promptkit.analysis.spec import DEFAULT_PROVIDER, VIEWS, AnalysisSpec, default_view
from promptkit.errors import PromptkitError, RecordFormatError, UsageError
from promptkit.formats import read_logs, records_from_requests
from promptkit.formats.discovery import LogListing, list_log_files
from promptkit.layout import LoadProblem, LoadResult, RequestRecord
from promptkit.providers.registry import ProviderProfile, infer_record_provider
from promptkit.tokens.cache_models import CacheModel

__all__ = ["TIMELINE_MIN_BYTES", "analyze", "analyze_records", "analyze_requests", "logs_size"]

#: From this many bytes of logs on, :func:`analyze` with one job runs either view streamed in time order
#: (:mod:`promptkit.analysis.plans.timeline`: the same frames, written to disk as they are made; memory
#: bounded by what the cache can still read, each open session's previous request in the consecutive
#: view); below it, it loads the records (faster: the logs are read once, not twice). Measured in
#: docs/concepts/performance.md.
TIMELINE_MIN_BYTES: Final[int] = 32 * 1024 * 1024

TIMELINE_OPTIONS: Final = ("provider", "tokenizer", "render", "cache_model", "view", "progress")


def logs_size(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> int:
    """The bytes of the log files under ``paths`` (as stored: compressed files count their compressed
    size; standard input, an iterator of paths and what cannot be listed count 0).

    >>> logs_size("fixtures/claude-code") > 0, logs_size("-")
    (True, 0)
    """
    listing = _listing(paths)
    return listing.size if listing is not None else 0


def _listing(paths: Any) -> LogListing | None:
    """The log files under ``paths`` with their sizes (:func:`~promptkit.formats.discovery.list_log_files`);
    None for standard input or an iterator of paths (read once only: never listed before) and for what
    cannot be listed (the load that follows says what is wrong)."""
    from promptkit.formats.base import STDIN_PATHS

    if not isinstance(paths, str | os.PathLike | list | tuple):
        return None
    items = [paths] if isinstance(paths, str | os.PathLike) else paths
    if any(str(p) in STDIN_PATHS for p in items):
        return None
    try:
        return list_log_files(paths)
    except PromptkitError:
        return None


def _check_arguments(records: object, *, provider: object, progress: object) -> None:
    """:class:`~promptkit.errors.UsageError` naming the argument of :func:`analyze_requests` whose type is wrong."""
    if isinstance(records, str | bytes | os.PathLike | Mapping) or not isinstance(records, Iterable):
        hint = (
            " (pass paths to analyze(), not analyze_requests())"
            if isinstance(records, str | os.PathLike)
            else ""
        )
        raise UsageError(
            "records: expected a LoadResult, RequestRecords or request bodies, "
            f"got {type(records).__name__}{hint}"
        )
    if provider is not None and not isinstance(provider, str | ProviderProfile):
        raise UsageError(
            f"provider: expected a provider name, a ProviderProfile or None, got {type(provider).__name__}"
        )
    if not isinstance(progress, bool):
        raise UsageError(f"progress: expected a bool, got {type(progress).__name__}")


def _as_records(
    records: LoadResult | Iterable[RequestRecord | Mapping[str, Any] | tuple[Mapping[str, Any], Any]],
) -> tuple[list[RequestRecord], list[LoadProblem]]:
    if isinstance(records, LoadResult):
        return list(records.records), list(records.problems)
    items = list(records)
    if all(isinstance(r, RequestRecord) for r in items):
        return items, []  # type: ignore[return-value]
    if any(isinstance(r, RequestRecord) for r in items):
        raise RecordFormatError(
            "records: mix of RequestRecord and plain request bodies; convert with records_from_requests"
        )
    return list(records_from_requests(items)), []  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------
# the engine


@gc_paused()  # perf: the cyclic GC would rescan every loaded record (promptkit.analysis.runtime)
def analyze_requests(
    records: LoadResult | Iterable[RequestRecord | Mapping[str, Any] | tuple[Mapping[str, Any], Any]],
    *,
    provider: str | ProviderProfile | None = None,
    tokenizer: Any = None,
    render: Any = None,
    cache_model: str | CacheModel | None = None,
    view: str | None = None,
    progress: bool = False,
    jobs: int = 1,
    engine: str = "local",
    client: Any = None,
) -> AnalysisResult:
    """Analyze requests: tokens shared with the provider's cache, predicted hits, divergence points.

    ``records``: a :class:`~promptkit.layout.LoadResult` (its problems are carried into the
    result), :class:`~promptkit.layout.RequestRecord` s, or plain request bodies /
    ``(body, layout)`` pairs (one session). ``provider`` (a name from
    :func:`~promptkit.providers.registry.available_providers`, or a profile) picks the tokenizer, render
    and cache model; None (the default) uses each session's provider as the log names it or as it is
    recognised from the model name, URL or usage shape, and :data:`DEFAULT_PROVIDER` for sessions
    nothing recognises (a note says so). Sessions of different providers are analyzed each with their
    own profile and the frames joined (``provider`` then lists them); ``tokenizer`` (a name for :func:`~promptkit.tokens.tokenizers.get_tokenizer`
    or an object), ``render`` (:func:`~promptkit.tokens.render.get_render_model`) and ``cache_model``
    (:func:`~promptkit.providers.resolve.resolve_cache_model`: a mechanism's or a provider's name) override them. ``view`` is ``"consecutive"`` or
    ``"simulated"``; None (the default) takes ``"simulated"`` when every record comes from a log of
    conversation trees (``meta["conversation_tree"]``: Claude Code projects, whose rewinds, branches and
    sub-agents share one cache with its TTL) and ``"consecutive"`` otherwise; a note says which.
    ``progress`` shows a progress bar.

    ``jobs`` > 1 runs the per-session work in that many local processes; ``engine="dask"`` runs it on
    a ``dask.distributed`` cluster (``client``: a ``distributed.Client`` or a scheduler address; else
    the current client, else a local cluster of ``jobs`` workers, shut down after); see :mod:`promptkit.analysis.executors`. The result is the same either way.

    A request that cannot be rendered or tokenized is left out of the frames and reported in
    ``problems`` (with its file and line). Time: TTLs and delays use the records' timestamps; when
    some record has none, nothing expires (a note says so).

    Example::

        >>> body = {"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}]}
        >>> longer = {"messages": body["messages"] + [{"role": "assistant", "content": "hello"},
        ...                                           {"role": "user", "content": "bye"}]}
        >>> r = analyze_requests([body, longer], provider="exact")
        >>> r.requests["prefix_tokens"].to_list()[1] > 0
        True
    """
    if view is not None and (not isinstance(view, str) or view not in VIEWS):
        raise UsageError(f"view: unknown view {view!r}; expected one of {', '.join(VIEWS)}")
    _check_arguments(records, provider=provider, progress=progress)
    executor = make_executor(engine, jobs, client=client, tokenizers=named_tokenizers(tokenizer, provider))
    try:
        return analyze_records(
            records,
            executor,
            provider=provider,
            tokenizer=tokenizer,
            render=render,
            cache_model=cache_model,
            view=view,
            progress=progress,
        )
    finally:
        if executor is not None:
            executor.close()


def analyze_records(
    records: LoadResult | Iterable[RequestRecord | Mapping[str, Any] | tuple[Mapping[str, Any], Any]],
    executor: Executor | None,
    *,
    provider: str | ProviderProfile | None,
    tokenizer: Any,
    render: Any,
    cache_model: str | CacheModel | None,
    view: str | None,
    progress: bool,
) -> AnalysisResult:
    """:func:`analyze_requests` on ``executor`` (None: in this process): the records grouped by provider,
    each group run by the records plan (:func:`~promptkit.analysis.plans.records.analyze_group`)."""
    record_list, load_problems = _as_records(records)
    load_notes = list(records.notes) if isinstance(records, LoadResult) else []
    if view is None:
        view = default_view(record_list)
        if view == "simulated":
            load_notes.append(VIEW_NOTE)
    # keyed by name: a profile object is not hashable (its fields hold mappings), so it is kept by id
    groups: dict[str | int, list[tuple[int, RequestRecord]]] = {}
    chosen: dict[str | int, str | ProviderProfile] = {}
    defaulted: set[str] = set()
    for k, r in enumerate(record_list):
        name: str | ProviderProfile | None = provider if provider is not None else infer_record_provider(r)
        if name is None:
            name = DEFAULT_PROVIDER
            defaulted.add(r.session)
        key = name if isinstance(name, str) else id(name)
        chosen[key] = name
        groups.setdefault(key, []).append((k, r))
    notes = list(load_notes)
    if defaulted:
        notes.append(defaulted_note(len(defaulted)))
    if not groups:
        only = provider if provider is not None else DEFAULT_PROVIDER
        chosen[only if isinstance(only, str) else id(only)] = only
        groups[only if isinstance(only, str) else id(only)] = []
    results = [
        analyze_group(
            items,
            load_problems if i == 0 else [],
            AnalysisSpec(
                chosen[key],
                tokenizer,
                render,
                cache_model,
                view,
                bool(items) and all(r.timestamp is not None for _, r in items),
            ),
            executor=executor,
            progress=progress,
        )
        for i, (key, items) in enumerate(groups.items())
    ]
    return attrs.evolve(combine_groups(results, notes, view), provider_assumed=bool(defaulted))


@gc_paused()  # perf: loading builds millions of objects the cyclic GC would rescan
def analyze(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    format: str | None = None,
    stream: bool = False,
    provider: str | ProviderProfile | None = None,
    tokenizer: Any = None,
    render: Any = None,
    cache_model: str | CacheModel | None = None,
    view: str | None = None,
    progress: bool = False,
    jobs: int = 1,
    engine: str = "local",
    client: Any = None,
) -> AnalysisResult:
    """Read request logs (:func:`~promptkit.formats.read_logs`; ``format=`` forces a log format) and
    analyze them (:func:`analyze_requests`, whose keyword arguments it takes, each by name); load
    problems and notes are carried into the result.

    ``stream=True`` (consecutive view only) reads the logs by streaming
    (:func:`~promptkit.formats.stream_logs`) and analyzes and releases them session by session: memory
    holds the sessions open at once instead of every record. Same result.

    ``jobs`` > 1 or ``engine="dask"`` (without ``stream``) runs one task per log file: the workers read,
    parse and analyze their own files and this process joins their frames
    (:mod:`promptkit.analysis.plans.files`). Same result.

    Example::

        >>> r = analyze("fixtures/real-logs/deepseek", provider="deepseek", view="simulated")
        >>> r.requests.height, r.problems.height
        (154, 5)
    """
    options: dict[str, Any] = {
        "provider": provider,
        "tokenizer": tokenizer,
        "render": render,
        "cache_model": cache_model,
        "view": view,
        "progress": progress,
        "jobs": jobs,
        "engine": engine,
        "client": client,
    }
    if stream:
        return analyze_stream(paths, format, **{**options, "view": view or "consecutive"})
    if jobs != 1 or engine != "local":
        listing = _listing(paths)  # perf: listed once, for the size and for the workers' tasks
        small = _too_small_for_jobs(listing) if engine == "local" and client is None else None
        if small is None:
            return _analyze_by_file(paths, format, listing=listing, **options)
        result = analyze(paths, format=format, **{**options, "jobs": 1})
        return attrs.evolve(result, notes=(*result.notes, small))
    if logs_size(paths) >= TIMELINE_MIN_BYTES:
        _check_arguments((), provider=provider, progress=progress)
        streamed = analyze_timeline(paths, format, **{k: options[k] for k in TIMELINE_OPTIONS})
        if streamed is not None:  # else: the consecutive view, or records without a time
            return streamed
    with ReadProgress("load", enabled=progress) as bar:  # the loading phase on a TTY: MB, MB/s
        loaded = read_logs(paths, format=format, on_file=bar.on_file)
        bar.done(len(loaded.records))
    return analyze_requests(loaded, **options)


def _too_small_for_jobs(listing: LogListing | None) -> str | None:
    """The note that says the logs of ``listing`` are analyzed in this process although ``jobs`` > 1
    (None: they are large enough for the workers, or could not be listed and sized without reading
    them: standard input)."""
    size, least = (listing.size if listing is not None else 0), jobs_min_bytes()
    if not 0 < size < least:
        return None
    return (
        f"jobs: {size / 1e6:.1f} MB of logs analyzed in one process (workers start from "
        f"{least / 1e6:.1f} MB on: below that they cost more than they save; PROMPTKIT_JOBS_MIN_BYTES=0 "
        "forces them)"
    )


def _analyze_by_file(
    paths: Any,
    fmt: Any,
    *,
    provider: str | ProviderProfile | None = None,
    tokenizer: Any = None,
    render: Any = None,
    cache_model: str | CacheModel | None = None,
    view: str | None = None,
    progress: bool = False,
    jobs: int = 1,
    engine: str = "local",
    client: Any = None,
    listing: LogListing | None = None,
) -> AnalysisResult:
    """:func:`analyze` on workers, one task per log file (:func:`~promptkit.analysis.plans.files.analyze_files`),
    also with ``view=None`` (each worker chooses its file's default view), or, when a session spans
    files, by loading the records here and shipping them by session (``listing``: the files under
    ``paths``, listed already)."""

    if view is not None and (not isinstance(view, str) or view not in VIEWS):
        raise UsageError(f"view: unknown view {view!r}; expected one of {', '.join(VIEWS)}")
    _check_arguments((), provider=provider, progress=progress)
    settings: dict[str, Any] = dict(
        provider=provider, tokenizer=tokenizer, render=render, cache_model=cache_model, view=view
    )
    named = named_tokenizers(tokenizer, provider)
    logs = [] if named or listing is None else ([paths] if isinstance(paths, str | os.PathLike) else paths)
    executor = make_executor(engine, jobs, client=client, tokenizers=named, logs=logs)
    try:
        if executor is not None:
            result = file_plan.analyze_files(
                paths, executor=executor, format=fmt, progress=progress, listing=listing, **settings
            )
            if result is not None:
                return result
        loaded = read_logs(paths, format=fmt)
        return analyze_records(loaded, executor, progress=progress, **settings)
    finally:
        if executor is not None:
            executor.close()
