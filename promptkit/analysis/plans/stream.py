"""The stream plan: the consecutive view, session by session as the logs are streamed
(:func:`~promptkit.formats.stream_logs`), each chunk of whole sessions analyzed by the local plan (in
this process or on an executor's workers) and released: memory holds the sessions open at once, not
every record (:func:`analyze_stream`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

import attrs

from promptkit.analysis.assemble import ChunkResult, combine_groups, defaulted_note, finish_group, merged
from promptkit.analysis.executors import make_executor, named_tokenizers
from promptkit.analysis.plans.local import analyze_chunk
from promptkit.analysis.result import AnalysisResult
from promptkit.analysis.runtime import phase
from promptkit.analysis.spec import DEFAULT_PROVIDER, AnalysisContext, AnalysisSpec
from promptkit.errors import UsageError
from promptkit.layout import RequestRecord
from promptkit.providers.registry import ProviderProfile, infer_record_provider
from promptkit.tokens.cache_models import CacheModel

__all__ = ["STREAM_CACHE_TOKENS", "analyze_stream"]

#: The segment cache bound of a streamed analysis (tokens): it keeps the heads sessions share (system
#: prompts, tools) while memory stays flat over millions of requests.
STREAM_CACHE_TOKENS: Final[int] = 1_000_000

#: Records per chunk of a streamed analysis: few polars frames, little memory.
_STREAM_BATCH: Final[int] = 512

#: Chunks of a streamed analysis merged into one block of contiguous frames (see :func:`merged`).
_MERGE_EVERY: Final[int] = 16


def _stream_batches(
    stream: Any,
    specs: Mapping[str | ProviderProfile, AnalysisSpec],
    group_of: Callable[[str | None], str | ProviderProfile],
    inferred: bool,
    order: deque[str | ProviderProfile],
    defaulted: set[str],
) -> Iterator[tuple[AnalysisSpec, list[tuple[int, RequestRecord]]]]:
    """A stream's whole sessions in chunks of about ``_STREAM_BATCH`` records per provider group, each
    chunk's group appended to ``order`` as it is sent (``inferred``: providers recognised per record;
    the sessions none was recognised for go into ``defaulted``)."""
    pending: dict[str | ProviderProfile, list[tuple[int, RequestRecord]]] = {}
    for items in stream.positioned():
        for pos, record in items:
            name = infer_record_provider(record)
            if inferred and name is None:
                defaulted.add(record.session)
            key = group_of(name)
            pending.setdefault(key, []).append((pos, record))
        for key in list(pending):
            if len(pending[key]) >= _STREAM_BATCH:
                order.append(key)
                yield specs[key], pending.pop(key)
    for key, rest in pending.items():
        order.append(key)
        yield specs[key], rest


def analyze_stream(
    paths: Any,
    fmt: Any,
    *,
    provider: str | ProviderProfile | None = None,
    tokenizer: Any = None,
    render: Any = None,
    cache_model: str | CacheModel | None = None,
    view: str | None = "consecutive",
    progress: bool = False,
    jobs: int = 1,
    engine: str = "local",
    client: Any = None,
) -> AnalysisResult:
    """The consecutive view, session by session as the logs are streamed (see :func:`~promptkit.analysis.api.analyze`)."""
    from promptkit.formats import stream_logs

    if view not in (None, "consecutive"):
        raise UsageError(
            "stream: streaming analyzes session by session, which only the consecutive view allows "
            "(the simulated view needs every session in time order)"
        )
    with phase("index", enabled=progress):
        stream = stream_logs(paths, format=fmt)

    def group_of(name: str | None) -> str | ProviderProfile:
        if provider is not None:
            return provider
        return name if name is not None else DEFAULT_PROVIDER

    timed: dict[str | ProviderProfile, bool] = {}
    first: dict[str | ProviderProfile, int] = {}
    for name, ok in stream.timed.items():
        key = group_of(name)
        timed[key] = timed.get(key, True) and ok
        first[key] = min(stream.first[name], first.get(key, stream.first[name]))
    specs = {
        key: AnalysisSpec(key, tokenizer, render, cache_model, "consecutive", timed[key], STREAM_CACHE_TOKENS)
        for key in timed
    }
    partials: dict[str | ProviderProfile, list[ChunkResult]] = {key: [] for key in specs}
    counts: dict[str | ProviderProfile, int] = dict.fromkeys(specs, 0)
    fresh: dict[str | ProviderProfile, int] = dict.fromkeys(specs, 0)  # partials not merged yet
    defaulted: set[str] = set()

    order: deque[str | ProviderProfile] = deque()  # the group of each chunk sent, in order
    batches = _stream_batches(stream, specs, group_of, provider is None, order, defaulted)
    executor = make_executor(engine, jobs, client=client, tokenizers=named_tokenizers(tokenizer, provider))
    try:
        bar: Any = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=stream.records, desc="analyze (consecutive, streamed)", unit="req", delay=0.5)
        if executor is None:
            results: Iterator[ChunkResult] = (analyze_chunk(spec, chunk) for spec, chunk in batches)
        else:
            results = executor.map(analyze_chunk, batches)
        for part in results:
            key = order.popleft()
            group = partials[key]
            group.append(part)
            fresh[key] += 1
            if fresh[key] >= _MERGE_EVERY:  # memory: a few large blocks, not many small frames
                group[-fresh[key] :] = [merged(group[-fresh[key] :])]
                fresh[key] = 0
            counts[key] += part.requests.height + len(part.problems)
            if bar is not None:
                bar.update(part.requests.height + len(part.problems))
        if bar is not None:
            bar.close()
    finally:
        if executor is not None:
            executor.close()
    keys = sorted(specs, key=lambda k: first[k]) or [group_of(None)]
    empty = AnalysisSpec(keys[0], tokenizer, render, cache_model, "consecutive", False)  # no records at all
    return _stream_result(stream, keys, specs, partials, counts, defaulted, empty)


def _stream_result(
    stream: Any,
    keys: list[str | ProviderProfile],
    specs: Mapping[str | ProviderProfile, AnalysisSpec],
    partials: Mapping[str | ProviderProfile, list[ChunkResult]],
    counts: Mapping[str | ProviderProfile, int],
    defaulted: set[str],
    empty: AnalysisSpec,
) -> AnalysisResult:
    """A streamed analysis' result from each provider group's partials (``empty``: the spec of the
    one group of a stream without records)."""
    notes = list(stream.notes)
    if defaulted:
        notes.append(defaulted_note(len(defaulted)))
    results_by_group = [
        finish_group(
            AnalysisContext(specs[key] if key in specs else empty),
            partials.get(key, []),
            list(stream.problems) if i == 0 else [],
            counts.get(key, 0),
        )
        for i, key in enumerate(keys)
    ]
    return attrs.evolve(
        combine_groups(results_by_group, notes, "consecutive"), provider_assumed=bool(defaulted)
    )
