"""The records plan: one provider group's records in this process, the stages on an executor's workers
by chunks of whole sessions (:func:`analyze_group`).

The consecutive view runs the local plan on each chunk (sessions are independent). The simulated view
runs stage 1 on the workers (:func:`~promptkit.analysis.wire.tokenize_chunk`), the replay here over its
columns (:func:`~promptkit.analysis.plans.coordinator.replay_shipped`, with no tokenizer loaded here),
and stage 3 on a worker, sent only the records the divergences read. Without an executor, the group
runs the local plan here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from promptkit.analysis.assemble import ChunkResult, finish_group
from promptkit.analysis.attribute import attribute_records, read_by
from promptkit.analysis.plans.coordinator import replay_shipped
from promptkit.analysis.plans.local import analyze_chunk, run_local
from promptkit.analysis.spec import AnalysisContext, AnalysisSpec, DescribedContext, profile_and_model
from promptkit.analysis.wire import DeltaReader, Divergent, TokenizedChunk, tokenize_chunk

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.analysis.executors import Executor
    from promptkit.analysis.result import AnalysisResult
    from promptkit.layout import LoadProblem, RequestRecord

__all__ = ["analyze_group", "session_chunks"]


def session_chunks(
    items: Sequence[tuple[int, RequestRecord]], parts: int
) -> list[list[tuple[int, RequestRecord]]]:
    """Whole sessions packed into about ``parts`` chunks of similar record counts (first-seen order)."""
    by_session: dict[str, list[tuple[int, RequestRecord]]] = {}
    for item in items:
        by_session.setdefault(item[1].session, []).append(item)
    target = max(1, -(-len(items) // max(parts, 1)))
    chunks: list[list[tuple[int, RequestRecord]]] = []
    current: list[tuple[int, RequestRecord]] = []
    for group in by_session.values():
        current.extend(group)
        if len(current) >= target:
            chunks.append(current)
            current = []
    if current:
        chunks.append(current)
    return chunks


def analyze_group(
    items: Sequence[tuple[int, RequestRecord]],
    load_problems: list[LoadProblem],
    spec: AnalysisSpec,
    *,
    executor: Executor | None = None,
    progress: bool = False,
) -> AnalysisResult:
    """Analyze one provider's records (see :func:`analyze_requests`), in this process or on ``executor``."""
    if executor is None or not items:
        ctx = AnalysisContext(spec)
        partials = [run_local(ctx, items, progress=progress)] if items else []
        return finish_group(ctx, partials, load_problems, len(items))
    chunks = session_chunks(items, executor.workers * 4)
    if spec.view == "consecutive":
        partials = list(executor.map(analyze_chunk, [(spec, chunk) for chunk in chunks]))
        return finish_group(AnalysisContext(spec), partials, load_problems, len(items))
    described, partial = _simulate_chunks(spec, items, chunks, executor, progress)
    return finish_group(described, [partial], load_problems, len(items))


def _simulate_chunks(
    spec: AnalysisSpec,
    items: Sequence[tuple[int, RequestRecord]],
    chunks: Sequence[Sequence[tuple[int, RequestRecord]]],
    executor: Executor,
    progress: bool,
) -> tuple[DescribedContext, ChunkResult]:
    """The records plan's simulated view on ``executor``: phase 1 on the workers, chunk by chunk of
    whole sessions (:func:`tokenize_chunk`), then the replay here over its columns, as the
    file plan runs it (:func:`~promptkit.analysis.plans.coordinator.replay_shipped`), with no tokenizer loaded here; a
    worker attributes the divergences, sent only the records they read (``progress``: a bar over the
    chunks)."""
    import polars as pl

    results: Iterable[TokenizedChunk] = executor.map(tokenize_chunk, [(spec, chunk) for chunk in chunks])
    if progress:  # imported only when asked for: tqdm.auto warns in a kernel without ipywidgets
        from tqdm.auto import tqdm

        results = tqdm(
            results, total=len(chunks), desc="analyze (simulated, by chunk)", unit="chunk", delay=0.5
        )
    phases = list(results)
    facts = [p.facts for p in phases]
    profile, model = profile_and_model(spec.provider, spec.cache_model)
    described = DescribedContext(spec, profile, model, *phases[0].names)
    records = dict(items)

    def attribute_on_worker(divergent: list[Divergent]) -> list[tuple[Any, ...]]:
        read = {pos: records[pos] for pos in read_by(divergent)}
        return executor.submit(attribute_records, spec, read, divergent).result()  # type: ignore[no-any-return]

    return described, replay_shipped(
        described,
        DeltaReader([(0, p.deltas) for p in phases], [p.composition for p in phases]),
        pl.concat([f.frame for f in facts]),
        [q for f in facts for q in f.problems],
        [m for f in facts for m in f.mended],
        {pos: got for f in facts for pos, got in f.ruler_inputs.items()},
        attribute_on_worker,
    )


#: The provider assumed for records whose provider nothing in the log recognises: the generic rules
