"""Stage 4: a provider group's frames from its chunks' (:class:`ChunkResult`), in load order, with the
problems and the notes on what the analysis had to assume; then the groups joined into one
:class:`~promptkit.analysis.result.AnalysisResult` (:func:`combine_groups`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

import attrs

from promptkit.analysis.breakpoints import inferred_note
from promptkit.analysis.causes import unreported_note
from promptkit.analysis.columns import frame_schemas
from promptkit.analysis.composition import CompositionRows
from promptkit.analysis.result import AnalysisResult
from promptkit.analysis.ruler import reads_from_outside
from promptkit.analysis.spec import DEFAULT_PROVIDER, AnalysisContext, DescribedContext, name_of
from promptkit.layout import LoadProblem
from promptkit.providers.registry import ProviderProfile, get_provider

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from promptkit.tokens.cache_models import CacheModel

__all__ = [
    "VIEW_NOTE",
    "ChunkResult",
    "CompositionSource",
    "PendingComposition",
    "combine_groups",
    "composition_frame_empty",
    "composition_of",
    "defaulted_note",
    "finish_group",
    "merged",
]


class CompositionSource(Protocol):
    """What makes a chunk's composition frame: its :class:`~promptkit.analysis.composition.CompositionRows`,
    or the same rows spilled to disk by a streamed plan (:class:`~promptkit.analysis.plans.sink.SpilledRows`)."""

    def frame(self, schema: Mapping[str, Any] | None = None, *, position: bool = False) -> pl.DataFrame:
        """The composition frame (with ``_position`` after the columns when ``position``)."""
        ...  # pragma: no cover


@attrs.frozen(slots=True, eq=False)
class PendingComposition:
    """A chunk's composition rows not yet made a frame: :meth:`frame` makes it (with ``_pos``).

    memory: the composition frame has one row per message of every request, quadratic in a
    conversation's length, while the rows (:class:`CompositionRows`) hold each request's message
    offsets as views of one chain per session: linear. A chunk hands these on and the result makes
    the frame only when something reads it (:attr:`AnalysisResult.composition`)."""

    rows: tuple[CompositionSource, ...]

    def frame(self) -> pl.DataFrame:
        """The composition frame of every row set, in the order held, with ``_pos``."""
        import polars as pl

        _, comp_schema, _ = frame_schemas()
        frames = [r.frame(comp_schema, position=True).rename({"_position": "_pos"}) for r in self.rows]
        return pl.concat(frames) if frames else composition_frame_empty(comp_schema)


@attrs.frozen(slots=True, eq=False)
class _ResultComposition:
    """A group's composition frame made on first read: the chunks' rows in record order, no ``_pos``."""

    parts: tuple[PendingComposition, ...]

    def __call__(self) -> pl.DataFrame:
        return _by_position([part.frame() for part in self.parts]).drop("_pos")


@attrs.frozen(slots=True, eq=False)
class _JoinedComposition:
    """The composition frames of several groups' results, joined on first read."""

    results: tuple[AnalysisResult, ...]

    def __call__(self) -> pl.DataFrame:
        import polars as pl

        return pl.concat([part.composition for part in self.results])


def composition_of(part: ChunkResult) -> pl.DataFrame:
    """``part``'s composition frame (with ``_pos``), made now where it is still rows."""
    held = part.composition
    return held.frame() if isinstance(held, PendingComposition) else held


@attrs.define(slots=True, eq=False)
class ChunkResult:
    """What analyzing a chunk of a group's records produced. The frames carry ``_pos`` (the record's
    place in the group) and ``_seq`` (the order it was analyzed in) to put chunks back in order."""

    requests: pl.DataFrame
    composition: pl.DataFrame | PendingComposition  # rows until a frame is needed
    problems: list[tuple[int, LoadProblem]]
    writes_nothing: int
    thinking: dict[str, int]  # render name -> position of its first request
    mended: list[tuple[int, str]]


def merged(parts: Sequence[ChunkResult]) -> ChunkResult:
    """One partial holding ``parts`` (frames joined into contiguous columns): a streamed analysis keeps
    a few large blocks instead of thousands of small frames, whose per-frame overhead would grow with
    the requests."""
    import polars as pl

    thinking: dict[str, int] = {}
    for p in parts:
        for name, pos in p.thinking.items():
            thinking[name] = min(pos, thinking.get(name, pos))
    held = [p.composition for p in parts]
    composition: pl.DataFrame | PendingComposition
    if all(isinstance(c, PendingComposition) for c in held):
        composition = PendingComposition(
            tuple(r for c in held if isinstance(c, PendingComposition) for r in c.rows)
        )
    else:
        composition = pl.concat([composition_of(p) for p in parts], rechunk=True)
    return ChunkResult(
        pl.concat([p.requests for p in parts], rechunk=True),
        composition,
        [q for p in parts for q in p.problems],
        sum(p.writes_nothing for p in parts),
        thinking,
        [m for p in parts for m in p.mended],
    )


def _take_frames(partials: Sequence[ChunkResult], name: str) -> list[pl.DataFrame]:
    """The ``name`` frames of ``partials``, which let go of them (an empty frame is left behind)."""
    frames = [getattr(p, name) for p in partials]
    for p, frame in zip(partials, frames, strict=True):
        setattr(p, name, frame.clear())
    return frames


def _by_position(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """``frames`` joined and stably sorted by ``_pos``, built one column at a time while the joined
    column is let go (``frames`` is emptied): the peak is the frames plus one column, not twice them."""
    import numpy as np
    import polars as pl

    joined = pl.concat(frames)
    frames.clear()
    if joined["_pos"].is_sorted():  # perf: one chunk in record order (the consecutive view): nothing to do
        return joined
    order = pl.Series(np.argsort(joined["_pos"].to_numpy(), kind="stable"))
    columns: list[pl.Series] = []
    for name in joined.columns:
        columns.append(joined[name].gather(order))
        joined = joined.drop(name)
    return pl.DataFrame(columns)


def finish_group(
    ctx: AnalysisContext | DescribedContext,
    partials: Sequence[ChunkResult],
    load_problems: Sequence[LoadProblem],
    records: int,
) -> AnalysisResult:
    """One group's result from its chunks: frames in record order, problems and notes."""
    import polars as pl

    model, view, profile = ctx.model, ctx.spec.view, ctx.profile
    req_schema, comp_schema, prob_schema = frame_schemas()
    notes: list[str] = []
    if records and not ctx.spec.timed and (model.ttl is not None or model.delay > 0 or model.exact_entries):
        notes.append("some records have no timestamp: the analysis ignores TTL expiry and entry delays")
    # memory: each partial's frames are handed over and released column by column as they are sorted
    requests = (
        _by_position(_take_frames(partials, "requests"))
        if partials
        else pl.DataFrame(schema={**req_schema, "_pos": pl.Int64, "_seq": pl.Int64})
    )
    pending = [p.composition for p in partials]
    composition: pl.DataFrame | Callable[[], pl.DataFrame]
    if partials and all(isinstance(c, PendingComposition) for c in pending):  # memory: made when read
        composition = _ResultComposition(tuple(c for c in pending if isinstance(c, PendingComposition)))
    else:
        for p in partials:
            p.composition = composition_of(p)
        composition = (
            _by_position(_take_frames(partials, "composition"))
            if partials
            else composition_frame_empty(comp_schema)
        ).drop("_pos")
    consecutive = view == "consecutive"
    # the order requests were analyzed in: record order (consecutive), time order (simulated)
    analyzed = requests if consecutive else requests.sort("_seq")

    def ordered(pairs: Iterable[tuple[int, Any]]) -> list[Any]:
        pairs = list(pairs)
        return [v for _, v in (sorted(pairs, key=lambda t: t[0]) if consecutive else pairs)]

    problems = list(load_problems) + ordered(q for p in partials for q in p.problems)
    notes += _warm_notes(analyzed) if consecutive else []
    notes += _partial_notes(model, partials, requests.height, consecutive, ordered)
    notes += _window_notes(profile, analyzed)
    silent = unreported_note(analyzed)  # a route that reports no cache read at all
    notes += [silent] if silent is not None else []
    notes += _inferred_notes(analyzed)
    notes += _outside_notes(analyzed)
    problem_frame = pl.DataFrame(
        {
            "file": [p.file for p in problems],
            "line": [p.line for p in problems],
            "reason": [p.reason for p in problems],
        },
        schema=prob_schema,
    )
    return AnalysisResult(
        requests=requests.drop("_pos", "_seq"),
        composition=composition,
        problems=problem_frame,
        provider=profile.name,
        tokenizer=ctx.tokenizer_name,
        render=ctx.render_name,
        cache_model=model,
        view=view,
        notes=tuple(notes),
    )


def _warm_notes(analyzed: pl.DataFrame) -> list[str]:
    """The consecutive view's note on sessions whose first request the provider found cached."""
    import polars as pl

    warm = analyzed.filter(
        (pl.col("index") == 0)
        & (pl.col("reported_cached_tokens").fill_null(0) > 0)
        & (pl.col("predicted_cached_tokens").fill_null(0) == 0)
    )
    if not warm.height:
        return []
    return [
        f"{warm.height} session(s) hit the provider's cache on their first request (e.g. "
        f"{warm['session'][0]!r}): a head shared across sessions, which only the simulated view (--view simulated) can credit"
    ]


def _partial_notes(
    model: CacheModel,
    partials: Sequence[ChunkResult],
    total: int,
    consecutive: bool,
    ordered: Callable[[Iterable[tuple[int, Any]]], list[Any]],
) -> list[str]:
    """The notes on what the chunks counted: requests that store nothing, thinking renders, mended
    surrogates."""
    notes: list[str] = []
    writes_nothing = sum(p.writes_nothing for p in partials)
    if writes_nothing:
        notes.append(
            f"{writes_nothing} of {total} requests write no cache entry ({model.name}): {model.no_write_reason}"
        )
    firsts: dict[str, int] = {}
    for p in partials:
        for name, pos in p.thinking.items():
            firsts[name] = min(pos, firsts.get(name, pos))
    thinking = list(firsts) if not consecutive else sorted(firsts, key=lambda n: firsts[n])
    if thinking:
        notes.append(f"thinking-mode requests were rendered with {', '.join(thinking)}")
    mended = ordered(m for p in partials for m in p.mended)
    if mended:
        notes.append(
            f"{len(mended)} request(s) hold lone UTF-16 surrogates (e.g. {mended[0]}), which no provider can "
            "tokenize: they were analyzed with each one replaced by U+FFFD"
        )
    return notes


def _window_notes(profile: ProviderProfile, analyzed: pl.DataFrame) -> list[str]:
    """The note on requests longer than the provider's largest context window."""
    import polars as pl

    window = profile.context_window
    if window is None or not analyzed.height:
        return []
    over = analyzed.filter(pl.col("prompt_tokens") > window)
    if not over.height:
        return []
    row = over.row(0, named=True)
    return [
        f"{over.height} request(s) are longer than the largest context window of {profile.name} "
        f"({window:,} tokens; e.g. {row['session']}#{row['index']} with "
        f"{row['prompt_tokens']:,}): the provider would have rejected them"
    ]


def _inferred_notes(analyzed: pl.DataFrame) -> list[str]:
    """The note on requests whose breakpoints were placed from the reported counts
    (:mod:`promptkit.analysis.breakpoints`)."""
    import polars as pl

    if "inferred_breakpoints" not in analyzed.columns:
        return []
    inferred = analyzed.filter(pl.col("inferred_breakpoints").is_not_null())
    if not inferred.height:
        return []
    row = inferred.row(0, named=True)
    example = f"{row['session']}#{row['index']}: {row['inferred_breakpoints']}"
    return [inferred_note(inferred.height, analyzed.height, example)]


def _outside_notes(analyzed: pl.DataFrame) -> list[str]:
    """The note on calls whose reported reads the log's earlier calls cannot have written
    (:func:`~promptkit.analysis.ruler.reads_from_outside`)."""
    timed = analyzed.height and analyzed["timestamp"].null_count() == 0
    # memory: the columns the check reads, sorted, not a sorted copy of the whole frame
    read = analyzed.select(
        "timestamp",
        "session",
        "index",
        "reported_prompt_tokens",
        "reported_completion_tokens",
        "reported_cached_tokens",
    )
    outside = reads_from_outside(read.sort("timestamp", maintain_order=True) if timed else read)
    if not outside.height:
        return []
    row = outside.row(0, named=True)
    before = row["written_before"]
    example = f"{row['session']}#{row['index']} read {row['reported_cached_tokens']:,} tokens, " + (
        "the log's first call" if before is None else f"where earlier calls could write {before:,} at most"
    )
    return [
        f"{outside.height} call(s) read more from the cache than the log's earlier calls could have written "
        f"({int(outside['reported_cached_tokens'].sum()):,} tokens; e.g. {example}): reads from outside the "
        "log (a prefix written by another session or a retried request the log does not hold), kept as "
        "reported; not a problem of the log"
    ]


def composition_frame_empty(schema: Mapping[str, Any]) -> pl.DataFrame:
    """An empty composition frame (with ``_pos``) of ``schema``."""
    import polars as pl

    return CompositionRows().frame(schema).with_columns(pl.lit(None, dtype=pl.Int64).alias("_pos"))


def combine_groups(results: list[AnalysisResult], notes: list[str], view: str) -> AnalysisResult:
    """One result from the groups' results (one group per provider), their notes prefixed."""
    import polars as pl

    if len(results) == 1:
        return attrs.evolve(results[0], notes=(*notes, *results[0].notes))
    for part in results:
        notes.extend(f"[{part.provider}] {n}" for n in part.notes)
    first = results[0]
    return AnalysisResult(
        requests=pl.concat([part.requests for part in results]),
        composition=_JoinedComposition(tuple(results)),
        problems=pl.concat([part.problems for part in results]),
        provider=", ".join(part.provider for part in results),
        tokenizer=", ".join(dict.fromkeys(part.tokenizer for part in results)),
        render=", ".join(dict.fromkeys(part.render for part in results)),
        cache_model=first.cache_model,
        view=view,
        notes=tuple(notes),
    )


#: The note of an analysis whose records chose the simulated view (:func:`~promptkit.analysis.spec.default_view`).
VIEW_NOTE: Final[str] = (
    "view: simulated (the default for conversation trees: rewinds, branches and sub-agents "
    "share one cache with its TTL); pass view='consecutive' for each call against the previous one"
)


def defaulted_note(count: int) -> str:
    """The note on ``count`` sessions whose provider nothing recognised (analyzed with the default's rules)."""
    profile = get_provider(DEFAULT_PROVIDER)
    unit = "no unit" if profile.cache_unit is None else f"{profile.cache_unit}-token units"
    return (
        f"{count} session(s) name no provider and none was recognised from model, URL or usage: "
        f"analyzed with the {DEFAULT_PROVIDER!r} rules (exact prefix, {unit}; tokenizer "
        f"{name_of(profile.load_tokenizer())} as an estimate) (pass --provider to choose)"
    )
