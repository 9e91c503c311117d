"""The diff engine: tokenize each request, find what the provider could have cached, apply its rules.

For every request the engine renders and tokenizes the prompt (and the generated answer, when the log
has it) with :class:`~promptkit.tokens.tokenize.RequestTokenizer`, finds the longest token prefix it
shares with what the provider could have cached, applies the cache model's rules
(:mod:`promptkit.tokens.cache_models`) and maps the first divergent token back to its message, role and —
when the request carries the assembler's layout — its slot (anchor) and contributor key.

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

import operator
import os
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import attrs

from promptkit.analysis.composition import COMPOSITION_COLUMNS
from promptkit.analysis.ruler import (
    POSITION_COLUMNS,
    Ruler,
    own_anchors,
    row_to_provider,
    usage_contradictions,
)
from promptkit.analysis.runtime import gc_paused, phase
from promptkit.errors import LONE_SURROGATE, LoneSurrogateError, RecordFormatError, UsageError
from promptkit.formats import read_logs, records_from_requests
from promptkit.formats.opaque_head import (
    OPAQUE_HEAD_SLOT,
    opaque_decoder,
    opaque_head_breakpoint,
    opaque_head_of,
    with_opaque_head,
)
from promptkit.layout import LayoutEntry, LoadProblem, LoadResult, RequestRecord
from promptkit.providers.registry import (
    GENERIC_PROVIDER,
    ProviderProfile,
    get_provider,
    infer_record_provider,
)
from promptkit.providers.resolve import resolve_cache_model, resolve_render, resolve_tokenizer
from promptkit.tokens.cache_models import OPAQUE_HEAD_BREAKPOINT, CacheModel, _PlanColumns

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import polars as pl

    from promptkit.analysis.composition import CompositionRows
    from promptkit.analysis.executors import Executor
    from promptkit.analysis.simulator import CacheOutcome
    from promptkit.tokens.cache_models import CachePlan
    from promptkit.tokens.tokenize import RequestTokenizer, TokenizedRequest, _TokenBuffer

__all__ = [
    "COMPOSITION_COLUMNS",
    "PROBLEM_COLUMNS",
    "REQUEST_COLUMNS",
    "VIEWS",
    "AnalysisResult",
    "RequestRow",
    "analyze",
    "analyze_requests",
]

VIEWS: Final[tuple[str, ...]] = ("consecutive", "simulated")


def _column(dtype: str) -> Any:
    """A :class:`RequestRow` field: a column of the requests frame of polars type ``dtype`` (``"str"``,
    ``"int"``, ``"float"`` or ``"bool"``), null (None) unless set."""
    return attrs.field(default=None, metadata={"dtype": dtype})


@attrs.frozen(slots=True, kw_only=True)
class RequestRow:
    """One row of :attr:`AnalysisResult.requests`: the frame's columns are this class' fields, in
    order, and their polars types are the fields' ``dtype`` metadata (:data:`REQUEST_COLUMNS` and the
    frame schema are derived from it: a new column is one field here, set where the row is made).

    >>> RequestRow(session="s", index=0, prompt_tokens=10).prompt_tokens
    10
    >>> REQUEST_COLUMNS[:3]
    ('session', 'index', 'timestamp')
    """

    session: str | None = _column("str")
    index: int | None = _column("int")
    timestamp: float | None = _column("float")
    prompt_tokens: int | None = _column("int")
    prefix_tokens: int | None = _column("int")
    predicted_cached_tokens: int | None = _column("int")
    hit_ratio: float | None = _column("float")
    reported_prompt_tokens: int | None = _column("int")
    reported_cached_tokens: int | None = _column("int")
    divergence_message: int | None = _column("int")
    divergence_role: str | None = _column("str")
    divergence_anchor: str | None = _column("str")
    divergence_key: str | None = _column("str")
    file: str | None = _column("str")
    line: int | None = _column("int")
    model: str | None = _column("str")
    completion_tokens: int | None = _column("int")
    reported_completion_tokens: int | None = _column("int")
    predicted_cache_write_tokens: int | None = _column("int")
    reported_cache_write_tokens: int | None = _column("int")
    divergence_token: int | None = _column("int")
    cached_source: str | None = _column("str")
    divergence_cached_text: str | None = _column("str")
    divergence_prompt_text: str | None = _column("str")
    divergence_context_text: str | None = _column("str")
    # facts for promptkit.analysis.causes (see its module docstring)
    unexpired_cached_tokens: int | None = _column("int")
    unevicted_cached_tokens: int | None = _column("int")
    idle_seconds: float | None = _column("float")
    source_stored_tokens: int | None = _column("int")
    model_switch_tokens: int | None = _column("int")
    change_class: str | None = _column("str")
    change_detail: str | None = _column("str")
    predicted_cache_write_1h_tokens: int | None = _column("int")
    reported_cache_write_1h_tokens: int | None = _column("int")
    provider_miss_reason: str | None = _column("str")
    provider_missed_tokens: int | None = _column("int")
    # ruler mode (promptkit.analysis.ruler): how the positions were placed, where the prompt's head ends
    position_basis: str | None = _column("str")
    head_end_tokens: int | None = _column("int")
    best_effort_cache: bool | None = _column("bool")
    log_events: str | None = _column("str")


#: Columns of :attr:`AnalysisResult.requests`, in order: the fields of :class:`RequestRow`.
REQUEST_COLUMNS: Final[tuple[str, ...]] = tuple(f.name for f in attrs.fields(RequestRow))

#: Tokens decoded on each side of a divergence for ``divergence_cached_text`` / ``divergence_prompt_text``.
EXCERPT_TOKENS: Final[int] = 12
#: How many recent requests' tokens are kept to show what the cache held at a divergence.
_EXCERPT_SOURCES: Final[int] = 512


#: The segment cache bound of a streamed analysis (tokens): it keeps the heads sessions share (system
#: prompts, tools) while memory stays flat over millions of requests.
STREAM_CACHE_TOKENS: Final[int] = 1_000_000

#: Records per chunk of a streamed analysis: few polars frames, little memory.
_STREAM_BATCH: Final[int] = 512

#: Chunks of a streamed analysis merged into one block of contiguous frames (see :func:`_merged`).
_MERGE_EVERY: Final[int] = 16

#: Columns of :attr:`AnalysisResult.problems`.
PROBLEM_COLUMNS: Final[tuple[str, ...]] = ("file", "line", "reason")


def _schemas() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    import polars as pl

    s, i, f = pl.String, pl.Int64, pl.Float64
    dtypes = {"str": s, "int": i, "float": f, "bool": pl.Boolean}
    requests = {a.name: dtypes[a.metadata["dtype"]] for a in attrs.fields(RequestRow)}
    composition = dict(zip(COMPOSITION_COLUMNS, (s, i, s, s, i, i, i, s), strict=True))
    problems = dict(zip(PROBLEM_COLUMNS, (s, i, s), strict=True))
    return requests, composition, problems


@attrs.frozen(slots=True, eq=False, repr=False)
class AnalysisResult:
    """The outcome of an analysis: three polars frames and the configuration that produced them.

    - ``requests``: one row per analyzed request, columns :data:`REQUEST_COLUMNS` (``session, index,
      timestamp, prompt_tokens, prefix_tokens, predicted_cached_tokens, hit_ratio,
      reported_prompt_tokens, reported_cached_tokens, divergence_message, divergence_role,
      divergence_anchor, divergence_key`` then the extras ``file, line, model, completion_tokens,
      reported_completion_tokens, predicted_cache_write_tokens, reported_cache_write_tokens,
      divergence_token, cached_source, divergence_cached_text, divergence_prompt_text``). Token counts are
      ours (the analyzed rendering), ``reported_*`` the provider's; null where unknown (no usage, no
      layout, no divergence). The two ``*_text`` columns decode :data:`EXCERPT_TOKENS` tokens from the
      divergence on: what the cache held there, and what the prompt sent instead.
    - ``composition``: per request, the token span (``start``, ``tokens``) of the header (``tools`` or
      ``header``), of each message (its layout ``slot`` and ``key``, or its role without a layout)
      and of the trailing generation prompt (``generation``); ``message`` is the message index.
    - ``problems``: every line, record or request that could not be used (``file, line, reason``).
    - ``provider``, ``tokenizer``, ``render``, ``cache_model``, ``view``: the configuration; ``notes``:
      what the analysis had to assume (e.g. no timestamps, so no expiry); ``provider_assumed``: True when
      some session's provider was not recognised and the generic profile
      (:data:`DEFAULT_PROVIDER`) was used for it (a note says so too).
    """

    requests: pl.DataFrame
    composition: pl.DataFrame
    problems: pl.DataFrame
    provider: str
    tokenizer: str
    render: str
    cache_model: CacheModel
    view: str
    notes: tuple[str, ...] = ()
    provider_assumed: bool = False
    # what is computed from the frames once and then held (a copy made by attrs.evolve starts empty)
    _held: dict[str, Any] = attrs.field(factory=dict, init=False)

    @property
    def causes(self) -> pl.DataFrame:
        """Per request, the uncached tokens split by cause (:func:`~promptkit.analysis.causes.explain_causes`),
        computed on first use and held by the result, so every table, report file and gate reads the same
        frame without computing it again."""
        held = self._held.get("causes")
        if held is None:
            from promptkit.analysis.causes import explain_causes

            held = self._held["causes"] = explain_causes(self)
        return held

    @property
    def hit_ratio(self) -> float | None:
        """Token-weighted predicted hit ratio over every analyzed request (None without tokens)."""
        prompt = int(self.requests["prompt_tokens"].sum())
        cached = int(self.requests["predicted_cached_tokens"].sum())
        return cached / prompt if prompt else None

    def __repr__(self) -> str:
        sessions = self.requests["session"].n_unique() if self.requests.height else 0
        ratio = self.hit_ratio
        shown = "n/a" if ratio is None else f"{ratio:.1%}"
        return (
            f"<AnalysisResult {self.requests.height} requests in {sessions} session(s), predicted hit ratio "
            f"{shown}; {self.problems.height} problem(s); provider={self.provider!r} tokenizer={self.tokenizer!r} "
            f"render={self.render!r} cache_model={self.cache_model.name!r} view={self.view!r}>"
        )

    @property
    def config(self) -> dict[str, Any]:
        """The configuration as plain values (for reports)."""
        return {
            "provider": self.provider,
            "tokenizer": self.tokenizer,
            "render": self.render,
            "cache_model": self.cache_model.name,
            "cache_model_params": (
                attrs.asdict(self.cache_model)  # type: ignore[arg-type]
                if attrs.has(type(self.cache_model))
                else repr(self.cache_model)
            ),
            "view": self.view,
        }


# ---------------------------------------------------------------------------------------------------
# helpers


def _chat_body(request: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool]:
    """An Anthropic Messages body's top-level ``system`` becomes a leading system message (its blocks,
    with their ``cache_control``, become the message's content parts). Returns (body, converted)."""
    system = request.get("system")
    if system is None or system == "" or system == []:
        return request, False
    content = system if isinstance(system, str | list) else str(system)
    body = {k: v for k, v in request.items() if k != "system"}
    body["messages"] = [{"role": "system", "content": content}, *request["messages"]]
    return body, True


def _source_id(record: RequestRecord) -> str:
    return f"{record.session}#{record.index}"


@attrs.frozen(slots=True)
class _Prepared:
    record: RequestRecord
    body: Mapping[str, Any]
    shifted: bool  # a top-level system message was prepended
    layout: tuple[LayoutEntry, ...] | None


def _prepare(record: RequestRecord) -> _Prepared:
    body, shifted = _chat_body(record.request)
    layout = record.layout
    if shifted and layout is not None:
        layout = (LayoutEntry("persona", None), *layout)
    return _Prepared(record, body, shifted, layout)


def _changed_message(
    tok: TokenizedRequest, pos: int, messages: Sequence[Any], source: Sequence[Any] | None
) -> int | None:
    """The message that made the prompt diverge at token ``pos``.

    That is the message of the token at ``pos``, unless that message is identical in the request whose
    entry was read (``source``): then the token differs only because it straddles into what follows (BPE
    merges across a message boundary, e.g. system prompts joined by a blank line), and the cause is the
    next message in token order that is not identical.
    """
    i = tok.message_at(pos)
    if source is None or tok.message_ends is None:
        return i
    seen = set()
    while i is not None and i not in seen and i < len(source) and source[i] == messages[i]:
        seen.add(i)
        nxt = tok.message_at(tok.message_ends[i])
        if nxt is None:
            break
        i = nxt
    return i


def _divergence(
    p: _Prepared, tok: TokenizedRequest, pos: int, source: Sequence[Any] | None = None
) -> tuple[int | None, str | None, str | None, str | None]:
    """(message index, role, slot, key) of the message that made the prompt diverge at token ``pos``."""
    i = _changed_message(tok, pos, p.body["messages"], source)
    if i is None:
        head = opaque_head_of(p.record)
        if head is not None and pos < head.tokens:
            return None, OPAQUE_HEAD_SLOT, None, None
        if pos < tok.header_len:
            return None, ("tools" if p.body.get("tools") else "header"), None, None
        return None, "generation", None, None
    role = p.body["messages"][i].get("role")
    slot = key = None
    if p.layout is not None and i < len(p.layout):
        slot, key = p.layout[i].slot, p.layout[i].key
    original = i - 1 if p.shifted else i
    return (original if original >= 0 else None), (str(role) if role is not None else None), slot, key


def _log_events(record: RequestRecord) -> str | None:
    """What the log shows happened before the call (``meta["log_events"]``: ``compaction``,
    ``rewind``...), comma-separated; None when nothing."""
    events = record.meta.get("log_events")
    if isinstance(events, (list, tuple)) and events:
        return ",".join(str(e) for e in events)
    return None


def _head_end(tok: TokenizedRequest, body: Mapping[str, Any]) -> int:
    """Local tokens of the prompt's head: the tool definitions, an opaque head and a leading system
    message (what ``head_changed`` names a change in)."""
    messages = body.get("messages") or []
    end = tok.header_len
    if (
        messages
        and isinstance(messages[0], Mapping)
        and messages[0].get("role") in ("system", "developer")
        and len(tok.message_starts) > 1
    ):
        end = max(end, tok.message_starts[1])
    return int(end)


#: The ruler of a prompt with no anchor past its start (immutable: shared by every such prompt).
_NO_ANCHOR: Final = Ruler.start()


def _ruler_of(
    rulers: dict[str, Ruler],
    source_id: str,
    src_id: str | None,
    prompt_len: int,
    shared: int,
    plan: Any,
    usage: Any,
) -> Ruler:
    """The request's ruler (kept in ``rulers`` under ``source_id``): the anchors it shares with its
    source (its first ``shared`` local tokens are the source's) and its own usage's."""
    inherited = rulers.get(src_id) if src_id is not None else None
    points = own_anchors(prompt_len, max((e.length for e in plan.entries), default=None), usage)
    if not points and (inherited is None or not inherited.anchored):
        ruler = _NO_ANCHOR  # perf: nothing to inherit or add: the one ruler of no anchor, not a new one
    else:
        ruler = (inherited.inherited(shared) if inherited is not None else _NO_ANCHOR).extended(points)
    rulers[source_id] = ruler
    return ruler


def _stays_local(ruler: Ruler, usage: Any, head_breakpoint: int | None) -> bool:
    """Whether a request's positions stay its local ones: no anchor (a call without usage, read from
    none with one) and no reported prompt or marked head to place, so every position is its own
    (:meth:`Ruler.to_provider`) and the row only says how they were placed (:func:`_local_basis`)."""
    return (
        not ruler.anchored
        and not isinstance(getattr(usage, "prompt_tokens", None), int)
        and head_breakpoint is None
    )


def _local_basis(predicted_cached: int) -> str:
    """The position basis of a row whose positions stay local: ``local`` where something was read (the
    read's end is the local tokenizer's count), ``exact`` where nothing was."""
    return "local" if predicted_cached > 0 else "exact"


def _measure(
    row: dict[str, Any],
    ruler: Ruler,
    rulers: dict[str, Ruler],
    source_id: str,
    src_id: str | None,
    plan: Any,
    usage: Any,
    model: CacheModel | None = None,
    head_breakpoint: int | None = None,
) -> None:
    """Ruler mode (:mod:`promptkit.analysis.ruler`): convert the request's positions to provider units
    by its ``ruler`` (:func:`_ruler_of`: the anchors it shares with its source and its own usage's; one
    that stays local, :func:`_stays_local`, is the caller's: only the basis changes). ``head_breakpoint``:
    the local end of an opaque head that ends in a breakpoint (:func:`_place_head`)."""
    reported = getattr(usage, "prompt_tokens", None)
    local_prefix, local_cached = int(row["prefix_tokens"] or 0), int(row["predicted_cached_tokens"])
    row["head_end_tokens"] = ruler.to_provider(int(row["head_end_tokens"]))[0]
    row["position_basis"] = row_to_provider(row, ruler, reported)
    if (
        model is not None
        and plan.lookup_points is None
        and local_cached > 0
        and model.cached_tokens(plan, local_prefix) == local_cached
    ):
        # an any-prefix cache's rule (minimum, unit) applies in the provider's units: to the shared
        # prefix placed by the ruler, not to the local count
        prompt = int(row["prompt_tokens"])
        cached = model.cached_tokens(attrs.evolve(plan, prompt_len=prompt), int(row["prefix_tokens"] or 0))
        row["predicted_cached_tokens"] = cached
        row["hit_ratio"] = cached / prompt if prompt > 0 else None
        row["position_basis"] = ruler.to_provider(local_prefix)[1]  # the rule's input was placed so
    if head_breakpoint is not None:
        _place_head(row, rulers, source_id, src_id, usage, head_breakpoint, local_cached)


def _place_head(
    row: dict[str, Any],
    rulers: dict[str, Ruler],
    source_id: str,
    src_id: str | None,
    usage: Any,
    head: int,
    local_cached: int,
) -> None:
    """Ruler mode for a head that ends in a breakpoint the log does not show (Claude Code's system
    prompt: :func:`~promptkit.formats.opaque_head.opaque_head_breakpoint`), at local position ``head``.

    - A read predicted at the head (after a compaction) is a position every earlier call of the head
      shares: without an anchor there it is placed by the proportions of the call it read from, not by
      this call's own prompt (whose part after the head the log may not show, as Claude Code's
      re-attached files after a compaction), and never past the head's own length: its placeholder
      tokens are the provider's count on the call the head was estimated on (a compaction sub-agent,
      sent the whole conversation, has proportions that the transcript's hidden parts stretch).
    - The call's reported reads mark where the head's breakpoint is, in the provider's units, for the
      calls after it, when they landed on it: the read was predicted at the head, or the reads fell back
      into the head from further on (``head_changed``), not after a change of the tools the log shows.
    """
    reads = getattr(usage, "cached_tokens", None)
    source = rulers.get(src_id) if src_id is not None else None
    if local_cached == head and row["position_basis"] != "exact" and source is not None:
        own = row["predicted_cached_tokens"]  # the head placed by this call's own anchors
        placed, basis = source.to_provider(head)
        if basis != "exact" and placed > head:
            # the head's placeholder tokens were counted in the provider's units (its reported prompt less
            # the rest, on the call they were estimated on): the head ends there at the latest, wherever
            # the proportions of a call whose prompt the log shows less of would stretch it
            placed, basis = head, "interpolated"
        placed = min(placed, own)  # never past what this call's own reported prompt allows
        for column in ("head_end_tokens", *POSITION_COLUMNS):  # the same point, placed the same way
            if row.get(column) == own:
                row[column] = placed
        row["predicted_cached_tokens"], row["position_basis"] = placed, basis
        prompt = row["prompt_tokens"]
        row["hit_ratio"] = placed / prompt if isinstance(prompt, int) and prompt > 0 else None
    if not isinstance(reads, int) or reads <= 0 or local_cached < head:
        return
    events = str(row.get("log_events") or "").split(",")
    fell_back = (
        local_cached > head
        and reads < int(row["predicted_cached_tokens"])
        and reads <= int(row["head_end_tokens"])
        and "tools_changed" not in events
    )
    if local_cached == head or fell_back:
        rulers[source_id] = rulers[source_id].extended([(head, reads)])


class _Local(NamedTuple):
    """What a request's row needs of it alone, before the cache is consulted: the cache model's plan,
    where its head ends (local tokens, :func:`_head_end`) and the local end of an opaque head whose
    breakpoint stores an entry (None: none). Phase 1 computes them where it tokenizes (perf: a plan
    reads every message of an Anthropic prompt: the coordinator reads none)."""

    plan: CachePlan
    head_end: int
    marked: int | None


def _local(
    model: CacheModel, exact_units: bool, record: RequestRecord, p: _Prepared, tok: TokenizedRequest
) -> _Local:
    """The request-local facts of ``record`` (prepared as ``p``, tokenized as ``tok``)."""
    head_bp = opaque_head_breakpoint(record)  # the end of a head the log does not show, marked
    body = p.body if head_bp is None else {**p.body, OPAQUE_HEAD_BREAKPOINT: head_bp}
    plan = model.plan(tok, body, p.layout, units=_own_units(tok, record.usage, exact_units))
    marked = None  # the head's breakpoint, where it stores an entry
    if head_bp is not None and any(e.length == head_bp["tokens"] for e in plan.entries):
        marked = int(head_bp["tokens"])
    return _Local(plan, _head_end(tok, p.body), marked)


def _own_units(tok: TokenizedRequest, usage: Any, exact_units: bool) -> Callable[[int], int] | None:
    """Ruler mode at plan time: a local position in the provider's units from the call's own reported
    prompt (the anchor at its end, proportions before it), so a rule that counts tokens when the call
    stores (a minimum size) counts the provider's tokens. None where the local count is the provider's
    or the call reports no prompt."""
    reported = getattr(usage, "prompt_tokens", None)
    if exact_units or not isinstance(reported, int) or reported <= 0 or tok.prompt_len <= 0:
        return None
    ruler = Ruler.start().extended([(int(tok.prompt_len), reported)])
    return lambda position: ruler.to_provider(position)[0]


def _write_1h(plan: Any, cached: int) -> int:
    """Tokens of a call's cache write that fall under a 1-hour entry (Anthropic ``ttl: "1h"``): the span
    from the previous entry (or the cached point) to each 1-hour entry."""
    total, start = 0, cached
    for entry in sorted(plan.entries, key=lambda e: e.length):
        if entry.length > start:
            if entry.ttl is not None and entry.ttl >= 3600:
                total += entry.length - start
            start = entry.length
    return total


def _stored_tokens(plan: CachePlan) -> int:
    """The tokens a request's plan stores: its longest entry."""
    return max((e.length for e in plan.entries), default=0)


def _provider_diagnostics(meta: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """Anthropic's cache diagnostics when the log kept them: ``diagnostics.cache_miss_reason`` of the
    response (``{"type": "tools_changed", "cache_missed_input_tokens": 1234}``), looked up in the
    record's ``meta`` (``meta.diagnostics`` or ``meta.response.diagnostics``)."""
    if not meta:
        return None, None
    for holder in (meta, meta.get("response")):
        if not isinstance(holder, Mapping):
            continue
        diag = holder.get("diagnostics")
        if not isinstance(diag, Mapping):
            continue
        reason = diag.get("cache_miss_reason")
        if isinstance(reason, Mapping):
            kind = reason.get("type")
            missed = reason.get("cache_missed_input_tokens")
            return (
                str(kind) if kind is not None else None,
                int(missed) if isinstance(missed, int) and not isinstance(missed, bool) else None,
            )
        if isinstance(reason, str):
            return reason, None
        return "none", None  # diagnostics present, no divergence found
    return None, None


def _profile_and_model(
    provider: str | ProviderProfile, cache_model: str | CacheModel | None
) -> tuple[ProviderProfile, CacheModel]:
    """The provider's profile and the cache model, without loading a tokenizer or a render (a
    coordinator whose workers tokenized needs neither)."""
    profile = get_provider(provider)
    model = resolve_cache_model(cache_model) if cache_model is not None else profile.new_cache_model()
    return profile, model


def _resolve(
    provider: str | ProviderProfile,
    tokenizer: Any,
    render: Any,
    cache_model: str | CacheModel | None,
) -> tuple[ProviderProfile, Any, Any, CacheModel]:
    profile, model = _profile_and_model(provider, cache_model)
    # a name given here may be a provider's (``--tokenizer deepseek``): the providers resolve it
    return (
        profile,
        (resolve_tokenizer(tokenizer) if tokenizer is not None else profile.load_tokenizer()),
        (resolve_render(render) if render is not None else profile.load_render()),
        model,
    )


def _without_surrogates(value: Any) -> Any:
    """``value`` with every lone UTF-16 surrogate in its strings replaced by U+FFFD (JSON logs can hold
    ``\\ud800`` escapes; no tokenizer encodes them)."""
    if isinstance(value, str):
        return LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, Mapping):
        return {k: _without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_without_surrogates(v) for v in value]
    return value


def _has_surrogates(value: Any) -> bool:
    if isinstance(value, str):  # perf: an ASCII string (most) holds none; isascii() is a C scan
        return not value.isascii() and LONE_SURROGATE.search(value) is not None
    if isinstance(value, Mapping):
        return any(_has_surrogates(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_surrogates(v) for v in value)
    return False


def _surrogate_field(value: Any, where: str) -> str | None:
    """The path of the first string holding a lone surrogate in ``value`` (keys included), walked with a
    stack (no recursion); None when there is none."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if LONE_SURROGATE.search(item):
                return path
        elif isinstance(item, Mapping):
            for k, v in reversed(list(item.items())):
                if isinstance(k, str) and LONE_SURROGATE.search(k):
                    return f"{path} (a key)"
                stack.append((v, f"{path}.{k}"))
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{path}[{i}]") for i, v in reversed(list(enumerate(item))))
    return None


def _surrogate_where(record: RequestRecord) -> str:
    """Where a record's first lone surrogate is: its id, file and line, and the field."""
    field = _surrogate_field(record.request, "request") or (
        _surrogate_field(record.completion, "completion") if record.completion is not None else None
    )
    place = f"{record.file}:{record.line}, " if record.file is not None else ""
    return f"{_source_id(record)} ({place}{field or 'a rendered field'})"


def _equal(a: Any, b: Any) -> bool:
    """``a == b`` as a bool; False when the comparison has no truth value (an array inside)."""
    try:
        return bool(a == b)
    except (ValueError, TypeError):
        return False


class _SurrogateMemo:
    """perf: :func:`_has_surrogates` of request bodies, each message scanned once per session rather
    than once per request. Per session it keeps the last message list found clean: a request whose
    messages start with that list (compared in C, by identity first: the loaders intern the messages a
    session's records repeat, :func:`~promptkit.formats.discovery.intern_messages`) scans only the
    messages after it. Other messages are remembered by identity (the memo holds them: an id is not
    reused while its object lives). Both are emptied when ``size`` entries are held.

    ``dirty`` holds the sessions whose text held a lone surrogate: their later requests are scanned
    before tokenizing (the others are not: the tokenizer finds one in the texts it encodes)."""

    __slots__ = ("_clean", "_fields", "_seen", "dirty", "size")

    def __init__(self, size: int = 8192) -> None:
        self._seen: dict[int, tuple[Any, bool]] = {}
        self._clean: dict[str | None, list[Any]] = {}
        self._fields: dict[str, Any] = {}  # a body field -> its last value found clean
        self.dirty: set[str | None] = set()
        self.size = size

    def message(self, value: Any) -> bool:
        hit = self._seen.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        found = _has_surrogates(value)
        if len(self._seen) >= self.size:
            self._seen.clear()
        self._seen[id(value)] = (value, found)
        return found

    def _messages(self, messages: list[Any], session: str | None) -> bool:
        clean = self._clean.get(session)
        k = len(clean) if clean is not None else 0
        if clean is not None and len(messages) >= k and _equal(messages[:k], clean):
            found = any(self.message(m) for m in messages[k:])
        else:
            found = any(self.message(m) for m in messages)
        if not found:
            if len(self._clean) >= self.size:
                self._clean.clear()
            self._clean[session] = messages
        return found

    def body(self, body: Mapping[str, Any], session: str | None = None) -> bool:
        """:func:`_has_surrogates` of a request body (of ``session``)."""
        for key, value in body.items():
            if key == "messages" and isinstance(value, list):
                if self._messages(value, session):
                    return True
            elif type(value) in (str, list, tuple, dict):  # tools and the like: equal to the last clean one?
                last = self._fields.get(key, self)
                if last is value or (type(last) is type(value) and _equal(last, value)):
                    continue
                if _has_surrogates(value):
                    return True
                self._fields[key] = value
            elif _has_surrogates(value):
                return True
        return False


def _tokenize_or_mend(
    rt: RequestTokenizer,
    prepared: _Prepared,
    record: RequestRecord,
    mended: list[str],
    memo: _SurrogateMemo | None = None,
) -> TokenizedRequest:
    """Tokenize a prepared request. Lone UTF-16 surrogates (JSON logs can hold ``\\ud800`` escapes;
    DeepSeek's tokenizer rejects them, tiktoken replaces them quietly) in the text the request renders
    to are replaced by U+FFFD, the same way for every tokenizer, and the request's id goes to
    ``mended`` for the note.

    perf: ``rt`` rejects a text with one (``reject_surrogates``) as it encodes it, so a clean request is
    not scanned; once a session had one, its requests are scanned (and mended) before tokenizing."""
    body, completion = prepared.body, record.completion
    memo = memo if memo is not None else _SurrogateMemo()
    if record.session not in memo.dirty:
        try:
            return rt.tokenize(body, completion=completion)
        except LoneSurrogateError:
            memo.dirty.add(record.session)
    if memo.body(body, record.session) or (completion is not None and memo.message(completion)):
        mended.append(_source_id(record))
        body = _without_surrogates(body)
        completion = _without_surrogates(completion) if completion is not None else None
    return rt.tokenize(body, completion=completion)


def _name_of(obj: Any) -> str:
    name = getattr(obj, "name", None)
    return name if isinstance(name, str) else str(obj)


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


@attrs.frozen(slots=True)
class _Spec:
    """What analyzing one provider's records takes, picklable for worker processes: the provider (a name
    or a profile), the overrides, the view, and whether every record of the group has a timestamp."""

    provider: str | ProviderProfile
    tokenizer: Any
    render: Any
    cache_model: str | CacheModel | None
    view: str
    timed: bool
    cache_tokens: int | None = None  # the segment cache's bound (None: RequestTokenizer's default)


class _Context:
    """A spec made live: the profile, cache model and request tokenizers (kept across chunks: a worker
    process reuses its tokenizer's snapshots across the sessions it is sent)."""

    def __init__(self, spec: _Spec) -> None:
        from promptkit.tokens.tokenize import RequestTokenizer

        self.spec = spec
        self.profile, tok_spec, render_spec, self.model = _resolve(
            spec.provider, spec.tokenizer, spec.render, spec.cache_model
        )
        # lone surrogates are found in the texts the tokenizer encodes (_tokenize_or_mend mends them)
        bound = {} if spec.cache_tokens is None else {"cache_tokens": spec.cache_tokens}
        self.rt = RequestTokenizer(render_spec, tok_spec, reject_surrogates=True, **bound)
        self.thinking: dict[str, RequestTokenizer] = {}  # thinking-mode renders, made on first use

    @property
    def tokenizer_name(self) -> str:
        return _name_of(self.rt.tokenizer)

    @property
    def render_name(self) -> str:
        return _name_of(self.rt.render_model)

    def thinking_name(self, record: RequestRecord) -> str | None:
        return _thinking_name(self.spec, self.profile, record)

    def request_tokenizer(self, think: str | None) -> RequestTokenizer | None:
        """The request tokenizer of the render ``think`` (None: the profile's)."""
        return self.rt if think is None else self.tokenizer_for_render(think)

    def tokenizer_for(self, record: RequestRecord) -> tuple[RequestTokenizer, str | None]:
        """The request tokenizer for ``record`` and the thinking render's name when it is one (see
        :func:`_thinking_name`)."""
        name = _thinking_name(self.spec, self.profile, record)
        return (self.rt, None) if name is None else (self.tokenizer_for_render(name), name)

    def tokenizer_for_render(self, name: str) -> RequestTokenizer:
        """The request tokenizer of the thinking render ``name``, made on first use."""
        if name not in self.thinking:
            from promptkit.tokens.tokenize import RequestTokenizer  # perf: imported once a render is made

            self.thinking[name] = RequestTokenizer(name, self.rt.tokenizer, reject_surrogates=True)
        return self.thinking[name]


def _thinking_name(spec: _Spec, profile: ProviderProfile, record: RequestRecord) -> str | None:
    """The provider's thinking-mode render for a thinking call (DeepSeek: deepseek-reasoner, or
    ``thinking: {"type": "enabled"}``) unless a render model was given; None for any other call."""
    if spec.render is not None or profile.thinking_render is None:
        return None
    return profile.thinking_render(record.request)


@attrs.frozen(slots=True)
class _Described:
    """What :func:`_finish` reads of a :class:`_Context`, without a tokenizer loaded (a coordinator
    whose workers did the tokenizing only names it)."""

    spec: _Spec
    profile: ProviderProfile
    model: CacheModel
    tokenizer_name: str
    render_name: str


_CONTEXTS: dict[bytes, _Context] = {}  # per process: worker processes rebuild a context once


def _context_for(spec: _Spec) -> _Context:
    import pickle

    key = pickle.dumps(attrs.evolve(spec, timed=False))
    if key not in _CONTEXTS:
        _CONTEXTS.clear()
        _CONTEXTS[key] = _Context(spec)
    ctx = _CONTEXTS[key]
    ctx.spec = spec  # the same but for ``timed``, which a context made for another analysis may differ in
    return ctx


@attrs.define(slots=True, eq=False)
class _Partial:
    """What analyzing a chunk of a group's records produced. The frames carry ``_pos`` (the record's
    place in the group) and ``_seq`` (the order it was analyzed in) to put chunks back in order."""

    requests: pl.DataFrame
    composition: pl.DataFrame
    problems: list[tuple[int, LoadProblem]]
    writes_nothing: int
    thinking: dict[str, int]  # render name -> position of its first request
    mended: list[tuple[int, str]]


def _merged(parts: Sequence[_Partial]) -> _Partial:
    """One partial holding ``parts`` (frames joined into contiguous columns): a streamed analysis keeps
    a few large blocks instead of thousands of small frames, whose per-frame overhead would grow with
    the requests."""
    import polars as pl

    thinking: dict[str, int] = {}
    for p in parts:
        for name, pos in p.thinking.items():
            thinking[name] = min(pos, thinking.get(name, pos))
    return _Partial(
        pl.concat([p.requests for p in parts], rechunk=True),
        pl.concat([p.composition for p in parts], rechunk=True),
        [q for p in parts for q in p.problems],
        sum(p.writes_nothing for p in parts),
        thinking,
        [m for p in parts for m in p.mended],
    )


@attrs.frozen(slots=True)
class _Tokenized:
    """One request's tokens (or why it could not be tokenized) and whether lone surrogates were mended."""

    value: TokenizedRequest | str
    mended: bool


def _tokenize_one(
    ctx: _Context, record: RequestRecord, memo: _SurrogateMemo | None = None
) -> tuple[_Prepared, _Tokenized, str | None]:
    prepared = _prepare(record)
    rt, think = ctx.tokenizer_for(record)
    mended: list[str] = []
    try:
        tok = _tokenize_or_mend(rt, prepared, record, mended, memo)
        tok = with_opaque_head(tok, record)  # placeholder tokens for a head the log omits
    except (ValueError, KeyError, TypeError) as exc:
        return prepared, _Tokenized(f"{_source_id(record)}: cannot tokenize: {exc}", bool(mended)), think
    return prepared, _Tokenized(tok, bool(mended)), think


class _Shipped(NamedTuple):
    """One tokenized request, as phase 1 puts it in a :class:`_DeltaStream`."""

    position: int
    base: int  # the position of its session's previous tokenized request, -1 for none
    shared: int  # its first tokens that are that request's
    tail: np.ndarray  # the tokens after those
    tok: TokenizedRequest
    local: _Local


class _DeltaStream:
    """Phase 1's tokenized requests of a chunk, as it ships them: per-session token delta streams in
    columns (perf: a handful of arrays per chunk, which the coordinator unpickles in a few calls: the
    streams of the benchmark's 20 files in 0.5 ms, where an object of three arrays per request had it
    rebuild about 7,600 small arrays).

    A request's tokens are those it shares with its session's previous tokenized request (``base``,
    a position, -1 for none; ``shared`` tokens), left out, followed by its ``tail``, sent (int32 when
    the ids fit): a session's stream so carries each new token once, exactly (what a Mooncake
    block-hash chain carries, plus the token ids that place a divergence to the token). Row ``i``'s
    tail is ``tails[tail_at[i]:tail_at[i + 1]]``, its message offsets ``starts[starts_at[i]:...]`` and
    ``ends[...]`` (``has_ends``: the render gave them). ``room``: the most tokens of a request of the
    session from this one on (the buffer phase 2 rebuilds them in is made that large once).

    The request-local facts (:class:`_Local`) travel as columns too: ``head_end``, ``marked`` (-1:
    None) and the plans (``plans``, :class:`~promptkit.tokens.cache_models._PlanColumns`). A record
    that could not be tokenized is not in the stream (its problem travels with the chunk's facts,
    :class:`_ChunkFacts`)."""

    __slots__ = (
        "base", "ends", "has_ends", "head_end", "header_len", "marked", "plans", "positions", "prompt_len", "room",
        "shared", "starts", "starts_at", "tail_at", "tails",
    )  # fmt: skip

    def __init__(self) -> None:
        import numpy as np

        empty = np.zeros(0, np.int64)
        self.positions, self.base, self.shared, self.header_len, self.prompt_len, self.room = (empty,) * 6
        self.head_end, self.marked = empty, empty
        self.plans = _PlanColumns()
        self.tails, self.starts, self.ends = empty, empty.astype(np.int32), empty.astype(np.int32)
        self.tail_at = self.starts_at = np.zeros(1, np.int64)
        self.has_ends = np.zeros(0, bool)

    @classmethod
    def of(cls, rows: Sequence[_Shipped]) -> _DeltaStream:
        """The stream of ``rows``."""
        import numpy as np

        stream = cls()
        if not rows:
            return stream
        n = len(rows)

        def column(values: Iterable[Any], dtype: Any = np.int64) -> np.ndarray:
            return np.fromiter(values, dtype, n)

        def concat(parts: Sequence[Sequence[Any] | np.ndarray], dtype: Any) -> tuple[np.ndarray, np.ndarray]:
            at = np.zeros(len(parts) + 1, np.int64)
            np.cumsum([len(x) for x in parts], out=at[1:])
            return (np.concatenate(parts).astype(dtype, copy=False) if at[-1] else np.zeros(0, dtype)), at

        toks = [r.tok for r in rows]
        stream.positions, stream.base = column(r.position for r in rows), column(r.base for r in rows)
        stream.shared = column(r.shared for r in rows)
        stream.header_len = column(t.header_len for t in toks)
        stream.prompt_len = column(t.prompt_len for t in toks)
        tails = [r.tail for r in rows]
        low = min((int(t.min()) for t in tails if t.size), default=0)
        high = max((int(t.max()) for t in tails if t.size), default=0)
        stream.tails, stream.tail_at = concat(
            tails, np.int32 if -(2**31) <= low and high < 2**31 else np.int64
        )
        stream.starts, stream.starts_at = concat([t.message_starts for t in toks], np.int32)
        stream.ends, _ = concat([t.message_ends or t.message_starts for t in toks], np.int32)
        stream.has_ends = column((t.message_ends is not None for t in toks), bool)
        stream.head_end = column(r.local.head_end for r in rows)
        stream.marked = column(-1 if r.local.marked is None else r.local.marked for r in rows)
        stream.plans = _PlanColumns.of(r.local.plan for r in rows)
        # a row's room: the longest request of its chain from it on (rows are in position order, and a
        # row's base is an earlier row's position)
        room = (stream.shared + np.diff(stream.tail_at)).tolist()
        row_of = {r.position: i for i, r in enumerate(rows)}
        for i in range(n - 1, -1, -1):
            if rows[i].base >= 0:
                j = row_of[rows[i].base]
                room[j] = max(room[j], room[i])
        stream.room = np.asarray(room, np.int64)
        return stream


@attrs.frozen(slots=True)
class _ChunkFacts:
    """What the coordinator of a parallel simulated view needs of a chunk's records, so that it holds
    none of them (:mod:`promptkit.analysis.ordered`).

    ``frame``: one row per record, in position order (``_pos``): whether it was tokenized (``_ok``),
    its thinking render (``_think``) and the columns of its row that need no cache outcome
    (:data:`_FIXED_COLUMNS`; of a record that was not tokenized, only session, index and timestamp).
    ``problems``: (position, problem) of a record that could not be tokenized and of the usage
    contradictions of one that was (each session's calls in position order, which is their order in
    the analysis too); ``mended``: (position, where) of the records whose lone surrogates were mended."""

    frame: pl.DataFrame
    problems: list[tuple[int, LoadProblem]]
    mended: list[tuple[int, str]]
    # ruler mode: position -> (the usage a request reported, its log events): what places its positions
    # (:func:`_measure`) that is not a column the coordinator makes
    ruler_inputs: dict[int, tuple[Any, str | None]]


@attrs.frozen(slots=True)
class _Phase1:
    """What phase 1 of a parallel simulated view returns for a chunk: the per-session token delta
    streams (:class:`_DeltaStream`), and the chunk's composition rows (``_pos`` its records'
    positions), which need no cache outcome: the worker that tokenized a request also places its
    tokens in its blocks, and the coordinator only joins the columns. ``facts``: what the row of each
    request needs of its record (:class:`_ChunkFacts`)."""

    deltas: _DeltaStream
    composition: pl.DataFrame
    facts: _ChunkFacts
    names: tuple[str, str]  # the tokenizer's and the render's: the coordinator loads neither


class _FactRows:
    """Phase 1's :class:`_ChunkFacts` of a chunk, a record at a time."""

    def __init__(self, ctx: _Context) -> None:
        self.exact, self.best_effort = ctx.profile.exact_tokenizer, ctx.profile.best_effort
        self.rows: list[tuple[Any, ...]] = []
        self.problems: list[tuple[int, LoadProblem]] = []
        self.mended: list[tuple[int, str]] = []
        self.ruler_inputs: dict[int, tuple[Any, str | None]] = {}
        self.last_usage: dict[str, Any] = {}

    def add(
        self, pos: int, record: RequestRecord, think: str | None, tokenized: _Tokenized, local: _Local | None
    ) -> None:
        """The record at ``pos``: tokenized (``local``: its request-local facts) or not (None)."""
        if tokenized.mended:
            self.mended.append((pos, _surrogate_where(record)))
        tok = tokenized.value
        if isinstance(tok, str) or local is None:
            self.problems.append((pos, LoadProblem(record.file, record.line, str(tok))))
            known = dict(session=record.session, index=record.index, timestamp=record.timestamp)
            self.rows.append((pos, False, think, *(known.get(c) for c in _FIXED_COLUMNS)))
            return
        ruler = _RulerFacts(
            "exact" if self.exact else None, local.head_end, self.best_effort, _log_events(record)
        )
        fixed = _fixed_fields(
            record, local.plan, _model_name(record), _completion(record, tok, local.plan), ruler
        )
        self.rows.append((pos, True, think, *(fixed[c] for c in _FIXED_COLUMNS)))
        if not self.exact and (record.usage is not None or ruler.log_events is not None):
            self.ruler_inputs[pos] = (record.usage, ruler.log_events)
        self.problems.extend((pos, problem) for problem in _usage_problems(record, self.last_usage))

    def facts(self) -> _ChunkFacts:
        import polars as pl

        requests = _schemas()[0]
        schema = {
            "_pos": pl.Int64,
            "_ok": pl.Boolean,
            "_think": pl.String,
            **{c: requests[c] for c in _FIXED_COLUMNS},
        }
        columns = [list(c) for c in zip(*self.rows, strict=True)] or [[] for _ in schema]
        frame = pl.DataFrame(dict(zip(schema, columns, strict=True)), schema=schema)
        return _ChunkFacts(frame, self.problems, self.mended, self.ruler_inputs)


def _usage_problems(record: RequestRecord, last_usage: dict[str, Any]) -> list[LoadProblem]:
    """A usage that contradicts itself or its session's previous one (``last_usage``: session -> usage,
    updated): a problem naming file, line and field, kept as reported."""
    usage = record.usage
    if usage is None:
        return []
    previous, last_usage[record.session] = last_usage.get(record.session), usage
    return [
        LoadProblem(record.file, record.line, f"{reason}; kept as reported")
        for reason in usage_contradictions(usage, previous)
    ]


@gc_paused()  # perf: a worker's task (see promptkit.analysis.runtime)
def _tokenize_chunk(spec: _Spec, items: Sequence[tuple[int, RequestRecord]]) -> _Phase1:
    """Phase 1 of a parallel simulated view (runs in a worker): tokenize each record of whole sessions
    into per-session delta streams (:class:`_DeltaStream`), its composition rows and what each
    request's row needs of its record (:class:`_ChunkFacts`)."""
    import numpy as np

    from promptkit.analysis.composition import CompositionRows

    ctx = _context_for(spec)
    memo = _SurrogateMemo()  # perf: per chunk, so it holds only messages the chunk's records hold
    last: dict[str, tuple[int, np.ndarray]] = {}
    rows: list[_Shipped] = []
    composition = CompositionRows()
    fact_rows = _FactRows(ctx)
    for pos, record in sorted(items, key=lambda t: t[0]):
        prepared, tokenized, think = _tokenize_one(ctx, record, memo)
        result = tokenized.value
        local = None
        if not isinstance(result, str):  # one that is not is a problem of the facts (_FactRows)
            _compose(composition, pos, record, prepared, result)
            tokens = result.tokens
            base, shared = -1, 0
            prev = last.get(record.session)
            if prev is not None:
                n = min(len(prev[1]), len(tokens))
                diff = np.flatnonzero(prev[1][:n] != tokens[:n])
                base, shared = prev[0], int(diff[0]) if diff.size else n
            local = _local(ctx.model, ctx.profile.exact_tokenizer, record, prepared, result)
            rows.append(_Shipped(pos, base, shared, tokens[shared:], result, local))
            last[record.session] = (pos, tokens)
        fact_rows.add(pos, record, think, tokenized, local)
    return _Phase1(
        _DeltaStream.of(rows),
        _composition_frame(composition),
        fact_rows.facts(),
        (ctx.tokenizer_name, ctx.render_name),
    )


def _compose(
    rows: CompositionRows, pos: int, record: RequestRecord, p: _Prepared, tok: TokenizedRequest
) -> None:
    """Add the composition rows of the record at ``pos`` (tokenized as ``tok``)."""
    head = opaque_head_of(record)
    rows.add(
        record.session,
        record.index,
        p.body,
        tok,
        layout=p.layout,
        shifted=p.shifted,
        opaque=(head.tokens, head.key) if head is not None else None,
        position=pos,
    )


def _composition_frame(rows: CompositionRows) -> pl.DataFrame:
    """The composition frame of ``rows`` with the records' positions in ``_pos``."""
    _, comp_schema, _ = _schemas()
    return rows.frame(comp_schema, position=True).rename({"_position": "_pos"})


class _Undelta:
    """Phase 2's tokens from phase 1's delta streams (:class:`_DeltaStream`, each with the offset of
    its positions in the load order), rebuilt as phase 2 asks for them: a request's tokens are its
    session's previous tokenized request's first ``shared`` tokens and its ``tail``.
    memory: a session's requests are views of one growing buffer, as the tokenizer hands them out
    (``_TokenBuffer``): what the simulator stores of them is held once, not once per request.
    perf: a request comes without its message offsets (they grow with the conversation); phase 2 asks
    for them where it diverged (:meth:`with_offsets`)."""

    __slots__ = (
        "_at", "_columns", "_extend", "_last", "_taken", "_trusted", "composition", "local", "shared",
    )  # fmt: skip

    def __init__(
        self, streams: Sequence[tuple[int, _DeltaStream]], composition: Sequence[pl.DataFrame] = ()
    ) -> None:
        from promptkit.tokens.tokenize import TokenizedRequest, _TokenBuffer

        # perf: looked up once, not per request
        self._extend, self._trusted = _TokenBuffer.extend, TokenizedRequest._trusted
        self.composition = list(composition)  # phase 1's composition rows (``_pos``: record positions)
        self._last: dict[str, _TokenBuffer] = {}
        self.shared = 0  # the last request taken: its first tokens that are its session's previous one's
        self.local: _Local | None = None  # the last request taken: its request-local facts
        self._taken = (0, 0)  # the last request taken: (stream, row)
        # perf: each stream's small columns as Python ints once (a numpy scalar per request costs more)
        self._columns: list[tuple[Any, ...]] = []
        self._at: dict[int, tuple[int, int]] = {}  # load-order position -> (stream, row)
        for offset, stream in streams:
            k = len(self._columns)
            self._columns.append(
                (
                    stream.room.tolist(),
                    stream.base.tolist(),
                    stream.shared.tolist(),
                    stream.header_len.tolist(),
                    stream.prompt_len.tolist(),
                    stream.tail_at.tolist(),
                    stream.tails,
                    stream.head_end.tolist(),
                    [None if m < 0 else m for m in stream.marked.tolist()],
                    stream.plans,
                    stream,  # memory: the message offsets stay arrays (rebuilt only where asked for)
                )
            )
            self._at.update((pos + offset, (k, i)) for i, pos in enumerate(stream.positions.tolist()))

    def tokens(self, pos: int, session: str) -> np.ndarray:
        """The tokens of the tokenized request at ``pos`` (of ``session``), alone: its request-local facts
        are :attr:`local` until the next call."""
        k, i = self._taken = self._at.pop(pos)
        room, base, shared, _, _, tail_at, tails, head_end, marked, plans, _ = self._columns[k]
        buffer = self._last.get(session) if base[i] >= 0 else None
        self.shared = shared[i] if buffer is not None else 0
        # perf: the int32 tail is written into the int64 buffer as it is (no int64 copy of it first); a
        # new buffer holds the session's longest request to come (its prefix is copied once)
        tokens, self._last[session], _ = self._extend(
            buffer, self.shared, tails[tail_at[i] : tail_at[i + 1]], room[i]
        )
        self.local = _Local(plans.plan(i), head_end[i], marked[i])
        return tokens

    def with_offsets(self, tokens: np.ndarray) -> TokenizedRequest:
        """The last request taken (its ``tokens``), with its message offsets."""
        k, i = self._taken
        columns = self._columns[k]
        stream = columns[-1]
        a, b = int(stream.starts_at[i]), int(stream.starts_at[i + 1])
        return self._trusted(
            tokens,
            tuple(stream.starts[a:b].tolist()),
            columns[3][i],
            columns[4][i],
            tuple(stream.ends[a:b].tolist()) if stream.has_ends[i] else None,
        )


@gc_paused()  # perf: a worker's task (see promptkit.analysis.runtime)
def _analyze_chunk(spec: _Spec, items: Sequence[tuple[int, RequestRecord]]) -> _Partial:
    """The consecutive view of whole sessions (runs in a worker)."""
    return _run(_context_for(spec), items)


class _Stored(NamedTuple):
    """What a session's previous request left in the consecutive view's cache (the ``stored``
    argument of :func:`~promptkit.analysis.simulator.consecutive_outcome`)."""

    tokens: np.ndarray
    plan: CachePlan
    at: float | None
    source: str


class _Facts(NamedTuple):
    """What :mod:`promptkit.analysis.causes` compares of a request that a later one read from: its body,
    model name, time and the tokens it stored (perf: a tuple, made once per request)."""

    body: Mapping[str, Any] | None  # None: held elsewhere (the coordinator of a parallel simulated view)
    model: str | None
    at: float | None
    stored_tokens: int
    pos: int = -1  # its record's position


@attrs.frozen(slots=True)
class _Divergence:
    """Where and why a prompt left what the cache held: the columns ``divergence_*``."""

    message: int | None = None
    role: str | None = None
    anchor: str | None = None
    key: str | None = None
    token: int | None = None
    cached_text: str | None = None
    prompt_text: str | None = None
    context_text: str | None = None


#: The divergence columns of a request whose prompt did not leave the cached content.
_NO_DIVERGENCE: Final = _Divergence()


@attrs.frozen(slots=True)
class _RulerFacts:
    """Ruler mode's columns of a row as made (:func:`_measure` converts its positions afterwards)."""

    position_basis: str | None
    head_end_tokens: int
    best_effort: bool
    log_events: str | None


@attrs.frozen(slots=True)
class _Causes:
    """The facts :mod:`promptkit.analysis.causes` reads from a row: the idle gap before a lost entry, the
    tokens its source stored, the tokens a model switch made unreadable, the class of the change."""

    idle_seconds: float | None
    source_stored_tokens: int | None
    model_switch_tokens: int | None
    change_class: str | None
    change_detail: str | None


#: A :class:`RequestRow`'s fields as a tuple, in column order (perf: one C call, not ``attrs.astuple``).
_ROW_FIELDS: Final = operator.attrgetter(*REQUEST_COLUMNS)  # a RequestRow's fields, in column order
_ROW_VALUES: Final = operator.itemgetter(*REQUEST_COLUMNS)  # the same of a row's fields by name
_BASIS: Final = REQUEST_COLUMNS.index("position_basis")


def _source_facts(
    facts: Mapping[str, _Facts],
    model: CacheModel,
    outcome: CacheOutcome,
    plan: CachePlan,
    model_name: str | None,
    now: float | None,
    prev: _Stored | None = None,
) -> tuple[CacheOutcome, str | None, _Facts | None, int | None, float | None]:
    """The request read from (or whose content was lost) and its facts (``facts``: request id -> its
    facts), the outcome with nothing read when the model switched (the provider's cache is per model),
    the switch's tokens and the idle gap. Consecutive view: a prompt that read nothing but left the
    session's previous request (``prev``) is compared with it."""
    src_id = outcome.source if outcome.source is not None else outcome.lost_source
    if src_id is None and prev is not None and outcome.diverged and outcome.prefix_tokens > 0:
        # nothing read, but the prompt shares a prefix with the previous one and then leaves it:
        # compare with it (sharing not one token is a cold start, as in the simulated view)
        src_id = prev.source
    src = facts.get(src_id) if src_id is not None else None
    switched = None
    if (
        src is not None
        and outcome.source is not None
        and src.model != model_name
        and outcome.cached_tokens > 0
    ):
        switched = outcome.cached_tokens
        outcome = attrs.evolve(
            outcome, cached_tokens=0, write_tokens=model.write_tokens(plan, 0), source=None
        )
    idle = None
    if outcome.lost_source is not None and src is not None and src.at is not None and now is not None:
        idle = now - src.at
    return outcome, src_id, src, switched, idle


class _Columns:
    """The requests frame of a run: :meth:`add` keeps a :class:`RequestRow`'s fields as one tuple
    (perf: one append per row); :meth:`frame` turns them into one list per column (``zip``, in C) and
    the frame (plus ``_pos`` and ``_seq``)."""

    __slots__ = ("_names", "_rows")

    def __init__(self) -> None:
        self._names = (*REQUEST_COLUMNS, "_pos", "_seq")
        self._rows: list[tuple[Any, ...]] = []

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, fields: tuple[Any, ...], pos: int) -> None:
        """Add a row: its fields in :data:`REQUEST_COLUMNS` order."""
        self._rows.append((*fields, pos, len(self._rows)))

    def frame(self) -> pl.DataFrame:
        import polars as pl

        schema = {**_schemas()[0], "_pos": pl.Int64, "_seq": pl.Int64}
        columns = [list(c) for c in zip(*self._rows, strict=True)] or [[] for _ in self._names]
        return pl.DataFrame(dict(zip(self._names, columns, strict=True)), schema=schema)


class _RunState:
    """One analysis run (:func:`_run`) over a chunk of records, request after request: the cache (a
    simulator over every session in the simulated view; each session's previous request in the
    consecutive view), what later requests look back at (bodies, facts, recent tokens for excerpts),
    and what the chunk produces (rows, composition, problems, notes' counts)."""

    def __init__(self, ctx: _Context) -> None:
        from promptkit.analysis.composition import CompositionRows
        from promptkit.analysis.simulator import CacheSimulator

        self.ctx = ctx
        self.model, self.view, self.timed = ctx.model, ctx.spec.view, ctx.spec.timed
        self.writes_nothing = 0  # requests whose plan stores no cache entry
        self.recent_tokens: OrderedDict[str, np.ndarray] = OrderedDict()  # request id -> tokens (excerpts)
        self.problems: list[tuple[int, LoadProblem]] = []
        self.mended: list[tuple[int, str]] = []
        self.thinking: dict[str, int] = {}
        self.memo = _SurrogateMemo()  # perf: per chunk, so it holds only messages the chunk's records hold
        self.rows = _Columns()
        self.composition = CompositionRows()  # perf: numpy rows per request, strings as codes
        # memory: perf: the cache keeps the prompts' read-only token arrays (views of each session's token
        # buffer) by reference, as the session's buffer holds them anyway: a run is not copied
        self.sim = CacheSimulator(self.model, share_tokens=True) if self.view == "simulated" else None
        self.session_tokens: dict[str, np.ndarray] = {}  # simulated: each session's previous tokens
        self.previous: dict[str, _Stored] = {}  # consecutive: each session's previous request
        self.bodies: dict[str, Sequence[Any]] = {}  # request id -> its messages, to attribute divergences
        self.facts: dict[str, _Facts] = {}  # request id -> what promptkit.analysis.causes compares
        self.rulers: dict[str, Ruler] = {}  # request id -> its anchors (ruler mode, promptkit.analysis.ruler)
        self.last_usage: dict[str, Any] = {}  # session -> its previous call's usage (reads are checked)
        # the local tokenizer is the provider's: positions are exact and need no ruler
        self.exact_units = ctx.profile.exact_tokenizer
        self.best_effort = ctx.profile.best_effort

    def order(self, items: Sequence[tuple[int, RequestRecord]]) -> list[int]:
        """The order the records are analyzed in: time (simulated view, all timed), else position."""
        if self.view == "simulated" and self.timed:
            return sorted(range(len(items)), key=lambda j: (items[j][1].timestamp, items[j][0]))
        return sorted(range(len(items)), key=lambda j: items[j][0])

    def tokenized(
        self, pos: int, record: RequestRecord
    ) -> tuple[_Prepared, RequestTokenizer | None, TokenizedRequest, str | None, _Local] | None:
        """The record prepared and tokenized, its request tokenizer (None: none here), thinking render
        and request-local facts (None, with a problem recorded, when it cannot be tokenized)."""
        prepared, result, think = _tokenize_one(self.ctx, record, self.memo)
        rt = self.ctx.request_tokenizer(think)
        if think is not None:
            self.thinking.setdefault(think, pos)
        if result.mended:
            self.mended.append((pos, _surrogate_where(record)))
        if isinstance(result.value, str):
            self.problems.append((pos, LoadProblem(record.file, record.line, result.value)))
            return None
        local = _local(self.model, self.exact_units, record, prepared, result.value)
        return prepared, rt, result.value, think, local

    def lookup(
        self,
        record: RequestRecord,
        rt: RequestTokenizer | None,
        tok: TokenizedRequest,
        plan: CachePlan,
        now: float | None,
    ) -> tuple[CacheOutcome, _Stored | None]:
        """The cache's outcome for the request, and (consecutive view) the session's previous request."""
        import numpy as np

        from promptkit.analysis.simulator import consecutive_outcome

        source_id = _source_id(record)
        if self.sim is not None:
            # perf: the prompt resumes from its session's previous call: the simulation compares and
            # walks its new tokens only (the outcome is the same)
            common = self.shared_with_previous(record.session, rt, tok.tokens)
            return self.sim.step(
                tok.tokens, plan, now, source_id, session=record.session, shared=common
            ), None
        # a cache holding only what the session's previous request stored
        prev = self.previous.get(record.session)
        # perf: the prompt's first tokens are the previous request's (the tokenizer resumed from it):
        # the lookup compares from there on only
        shared = rt.shared_prefix if rt is not None else None
        known = shared if shared is not None and prev is not None and shared[0] is prev.tokens else None
        outcome = consecutive_outcome(self.model, prev, tok.tokens, plan, now, known=known)
        self.previous[record.session] = _Stored(np.asarray(tok.tokens), plan, now, source_id)
        return outcome, prev

    def shared_with_previous(self, session: str, rt: RequestTokenizer | None, tokens: np.ndarray) -> int:
        """How many first tokens ``tokens`` shares with its session's previous tokenized request: known
        from the tokenizer's resume, and compared from there on."""
        import numpy as np

        prev = self.session_tokens.get(session)
        self.session_tokens[session] = tokens
        if prev is None:
            return 0
        hint = rt.shared_prefix if rt is not None else None
        k = min(hint[1], len(prev), len(tokens)) if hint is not None and hint[0] is prev else 0
        n = min(len(prev), len(tokens))
        differ = np.flatnonzero(np.asarray(prev[k:n]) != np.asarray(tokens[k:n]))
        return k + (int(differ[0]) if differ.size else n - k)

    def source_facts(
        self,
        outcome: CacheOutcome,
        plan: CachePlan,
        model_name: str | None,
        now: float | None,
        prev: _Stored | None,
    ) -> tuple[CacheOutcome, str | None, _Facts | None, int | None, float | None]:
        """:func:`_source_facts` of this run's requests."""
        return _source_facts(self.facts, self.model, outcome, plan, model_name, now, prev)

    def divergence(
        self,
        p: _Prepared,
        rt: RequestTokenizer | None,
        think: str | None,
        tok: TokenizedRequest,
        outcome: CacheOutcome,
        prefix: int,
        prompt_len: int,
        prev: _Stored | None,
    ) -> _Divergence:
        """The divergence columns of a request whose prompt left the cached content at token ``prefix``."""
        source_messages = self.bodies.get(outcome.source) if outcome.source is not None else None
        message, role, anchor, key = _divergence(p, tok, prefix, source_messages)
        if prev is not None:  # consecutive: the session's previous request is the only source
            cached = prev.tokens if outcome.source == prev.source else None
        else:
            cached = self.recent_tokens.get(outcome.source) if outcome.source is not None else None
        # what the prompt sent, and the text just before the divergence (what the report shows in grey),
        # even when no cached entry is left to show the other side (expired, below the minimum)
        cached_ids = (
            cached[prefix : prefix + EXCERPT_TOKENS].tolist()
            if cached is not None and prefix < len(cached)
            else None
        )
        prompt_ids = tok.tokens[prefix : min(prefix + EXCERPT_TOKENS, prompt_len)].tolist()
        context_ids = tok.tokens[max(0, prefix - EXCERPT_TOKENS) : prefix].tolist()
        assert rt is not None  # a run tokenizes where it runs (_Context)
        decode = opaque_decoder(rt.decode)
        return _Divergence(
            message,
            role,
            anchor,
            key,
            prefix,
            decode(cached_ids) if cached_ids is not None else None,
            decode(prompt_ids),
            decode(context_ids),
        )

    def remember(self, source_id: str, p: _Prepared, tok: TokenizedRequest, prev: _Stored | None) -> None:
        """Keep what later requests look back at: the messages (and, simulated, the recent tokens)."""
        if self.sim is not None:
            self.bodies[source_id] = p.body["messages"]
            self.recent_tokens[source_id] = tok.tokens
            if len(self.recent_tokens) > _EXCERPT_SOURCES:
                self.recent_tokens.popitem(last=False)
            return
        if prev is not None:  # perf: memory: a session needs only its predecessor's messages and facts
            self.bodies.pop(prev.source, None)
            self.facts.pop(prev.source, None)
        self.bodies[source_id] = p.body["messages"]

    def check_usage(self, pos: int, record: RequestRecord) -> None:
        """A usage that contradicts itself is a problem naming file, line and field, kept as reported."""
        self.problems.extend((pos, problem) for problem in _usage_problems(record, self.last_usage))

    def measure(
        self,
        row: RequestRow,
        source_id: str,
        src_id: str | None,
        plan: CachePlan,
        usage: Any,
        prev: _Stored | None,
        head: int | None = None,
    ) -> tuple[Any, ...]:
        """The row's fields in column order. Ruler mode: where the local tokenizer is not the provider's,
        its positions in provider units from the anchors the request shares with its source and its own
        usage's (:func:`_measure`)."""
        fields: tuple[Any, ...] = _ROW_FIELDS(row)
        if self.exact_units:  # positions are already the provider's: no anchors needed
            return fields
        shared = max(row.prefix_tokens or 0, row.unexpired_cached_tokens or 0)
        ruler = _ruler_of(self.rulers, source_id, src_id, row.prompt_tokens or 0, shared, plan, usage)
        if prev is not None and prev.source != source_id:  # memory: the consecutive view needs no older one
            self.rulers.pop(prev.source, None)
        if _stays_local(ruler, usage, head):  # perf: only the basis changes: no dict of the row
            basis = _local_basis(row.predicted_cached_tokens or 0)
            return (*fields[:_BASIS], basis, *fields[_BASIS + 1 :])
        values = dict(zip(REQUEST_COLUMNS, fields, strict=True))
        _measure(values, ruler, self.rulers, source_id, src_id, plan, usage, self.model, head)
        measured: tuple[Any, ...] = _ROW_VALUES(values)
        return measured

    def add(self, pos: int, record: RequestRecord) -> None:
        """Analyze one record and add its row (or its problem)."""
        done = self.tokenized(pos, record)
        if done is None:
            return
        p, rt, tok, think, local = done
        source_id = _source_id(record)
        plan = local.plan
        if not plan.entries:
            self.writes_nothing += 1
        now = record.timestamp if self.timed else None
        outcome, prev = self.lookup(record, rt, tok, plan, now)
        model_name = _model_name(record)
        outcome, src_id, src, switched, idle = self.source_facts(outcome, plan, model_name, now, prev)
        self.facts[source_id] = _Facts(p.body, model_name, now, _stored_tokens(plan), pos)
        prompt_len = plan.prompt_len
        prefix = min(outcome.prefix_tokens, prompt_len)
        diverged = outcome.diverged and prefix < prompt_len
        div = _Divergence()
        if diverged:
            # phase 2 rebuilds a request's message offsets only where it diverged (perf: they grow with
            # the conversation, not with its new tokens)
            div = self.divergence(p, rt, think, tok, outcome, prefix, prompt_len, prev)
        self.remember(source_id, p, tok, prev)
        self.check_usage(pos, record)
        change_class = change_detail = None
        if switched is not None:
            change_class, change_detail = "model_switch", f"{src.model if src else None} -> {model_name}"
        elif diverged and src is not None and src.body is not None:
            from promptkit.analysis.causes import classify_change

            change_class, change_detail = classify_change(src.body, p.body, div.message, shifted=p.shifted)
        causes = _Causes(
            idle, src.stored_tokens if src is not None else None, switched, change_class, change_detail
        )
        facts = _RulerFacts(
            "exact" if self.exact_units else None, local.head_end, self.best_effort, _log_events(record)
        )
        row = _request_row(record, tok, plan, outcome, div, causes, model_name, facts)
        self.rows.add(self.measure(row, source_id, src_id, plan, record.usage, prev, local.marked), pos)
        _compose(self.composition, pos, record, p, tok)

    def partial(self) -> _Partial:
        """What the run produced."""
        return _Partial(
            self.rows.frame(),
            _composition_frame(self.composition),
            self.problems,
            self.writes_nothing,
            self.thinking,
            self.mended,
        )


def _fixed_fields(
    record: RequestRecord, plan: CachePlan, model_name: str | None, completion: int | None, ruler: _RulerFacts
) -> dict[str, Any]:
    """The columns of a request's row that need no cache outcome (:data:`_FIXED_COLUMNS`): its record's
    figures and the ruler facts (``completion``: tokens after the prompt, None without a completion)."""
    usage = record.usage
    miss_reason, missed = _provider_diagnostics(record.meta)
    return dict(
        session=record.session,
        index=record.index,
        timestamp=record.timestamp,
        prompt_tokens=plan.prompt_len,
        reported_prompt_tokens=usage.prompt_tokens if usage else None,
        reported_cached_tokens=usage.cached_tokens if usage else None,
        file=record.file,
        line=record.line,
        model=model_name,
        completion_tokens=completion,
        reported_completion_tokens=usage.completion_tokens if usage else None,
        reported_cache_write_tokens=usage.cache_write_tokens if usage else None,
        reported_cache_write_1h_tokens=usage.cache_write_1h_tokens if usage else None,
        provider_miss_reason=miss_reason,
        provider_missed_tokens=missed,
        position_basis=ruler.position_basis,
        head_end_tokens=ruler.head_end_tokens,
        best_effort_cache=ruler.best_effort,
        log_events=ruler.log_events,
    )


def _outcome_values(
    plan: CachePlan, outcome: CacheOutcome, div: _Divergence, causes: _Causes
) -> tuple[Any, ...]:
    """The columns of a request's row that the cache's outcome, the divergence and the causes' facts
    give, in :data:`_OUTCOME_COLUMNS` order (perf: the parallel simulated view's coordinator keeps the
    tuple as it is, :mod:`promptkit.analysis.ordered`)."""
    prompt_len = plan.prompt_len
    cached, write = outcome.cached_tokens, outcome.write_tokens
    return (
        min(outcome.prefix_tokens, prompt_len),  # prefix_tokens
        cached,  # predicted_cached_tokens
        cached / prompt_len if prompt_len > 0 else None,  # hit_ratio
        div.message,
        div.role,
        div.anchor,
        div.key,
        write,  # predicted_cache_write_tokens
        div.token,
        outcome.source,  # cached_source
        div.cached_text,
        div.prompt_text,
        div.context_text,
        outcome.unexpired_cached_tokens,
        outcome.unevicted_cached_tokens,
        causes.idle_seconds,
        causes.source_stored_tokens,
        causes.model_switch_tokens,
        causes.change_class,
        causes.change_detail,
        _write_1h(plan, cached) if write is not None else None,  # predicted_cache_write_1h_tokens
    )


def _outcome_fields(
    plan: CachePlan, outcome: CacheOutcome, div: _Divergence, causes: _Causes
) -> dict[str, Any]:
    """:func:`_outcome_values` by column name."""
    return dict(zip(_OUTCOME_COLUMNS, _outcome_values(plan, outcome, div, causes), strict=True))


#: The columns of :func:`_fixed_fields` and of :func:`_outcome_fields`: together, every column of
#: :class:`RequestRow` once (a test checks it), so a parallel simulated view's phase 1 makes the first
#: (:func:`_tokenize_chunk`) and its coordinator the second (:mod:`promptkit.analysis.ordered`).
_FIXED_COLUMNS: Final = (
    "session", "index", "timestamp", "prompt_tokens", "reported_prompt_tokens", "reported_cached_tokens", "file",
    "line", "model", "completion_tokens", "reported_completion_tokens", "reported_cache_write_tokens",
    "reported_cache_write_1h_tokens", "provider_miss_reason", "provider_missed_tokens", "position_basis",
    "head_end_tokens", "best_effort_cache", "log_events",
)  # fmt: skip
_OUTCOME_COLUMNS: Final = tuple(c for c in REQUEST_COLUMNS if c not in _FIXED_COLUMNS)


def _model_name(record: RequestRecord) -> str | None:
    model_name = record.request.get("model")
    return model_name if isinstance(model_name, str) else None


def _completion(record: RequestRecord, tok: TokenizedRequest, plan: CachePlan) -> int | None:
    """The completion's tokens (after the prompt): None where the record has no completion."""
    return len(tok.tokens) - plan.prompt_len if record.completion is not None else None


def _request_row(
    record: RequestRecord,
    tok: TokenizedRequest,
    plan: CachePlan,
    outcome: CacheOutcome,
    div: _Divergence,
    causes: _Causes,
    model_name: str | None,
    ruler: _RulerFacts,
) -> RequestRow:
    """The row of a request: its record's figures, the cache's outcome, the divergence, the causes' facts."""
    return RequestRow(
        **_fixed_fields(record, plan, model_name, _completion(record, tok, plan), ruler),
        **_outcome_fields(plan, outcome, div, causes),
    )


def _run(
    ctx: _Context,
    items: Sequence[tuple[int, RequestRecord]],
    progress: bool = False,
) -> _Partial:
    """Analyze ``items`` (``(position, record)`` pairs) in this process: whole sessions in the
    consecutive view, every record of the group in the simulated view."""
    state = _RunState(ctx)
    order: Iterable[int] = state.order(items)
    bar: Any = None
    if progress:  # imported only when asked for: tqdm.auto warns in a kernel without ipywidgets
        from tqdm.auto import tqdm

        order = bar = tqdm(order, total=len(items), desc=f"analyze ({state.view})", unit="req", delay=0.5)
    for j in order:
        state.add(*items[j])
    if bar is not None:
        bar.close()
    return state.partial()


def _take_frames(partials: Sequence[_Partial], name: str) -> list[pl.DataFrame]:
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


def _finish(
    ctx: _Context | _Described,
    partials: Sequence[_Partial],
    load_problems: Sequence[LoadProblem],
    records: int,
) -> AnalysisResult:
    """One group's result from its chunks: frames in record order, problems and notes."""
    import polars as pl

    model, view, profile = ctx.model, ctx.spec.view, ctx.profile
    req_schema, comp_schema, prob_schema = _schemas()
    notes: list[str] = []
    if records and not ctx.spec.timed and (model.ttl is not None or model.delay > 0 or model.exact_entries):
        notes.append("some records have no timestamp: the analysis ignores TTL expiry and entry delays")
    # memory: each partial's frames are handed over and released column by column as they are sorted
    requests = (
        _by_position(_take_frames(partials, "requests"))
        if partials
        else pl.DataFrame(schema={**req_schema, "_pos": pl.Int64, "_seq": pl.Int64})
    )
    composition = (
        _by_position(_take_frames(partials, "composition"))
        if partials
        else composition_frame_empty(comp_schema)
    )
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
        composition=composition.drop("_pos"),
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
    partials: Sequence[_Partial],
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


def composition_frame_empty(schema: Mapping[str, Any]) -> pl.DataFrame:
    import polars as pl

    from promptkit.analysis.composition import CompositionRows

    return CompositionRows().frame(schema).with_columns(pl.lit(None, dtype=pl.Int64).alias("_pos"))


def _session_chunks(
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


def _analyze_group(
    items: Sequence[tuple[int, RequestRecord]],
    load_problems: list[LoadProblem],
    spec: _Spec,
    *,
    executor: Executor | None = None,
    progress: bool = False,
) -> AnalysisResult:
    """Analyze one provider's records (see :func:`analyze_requests`), in this process or on ``executor``."""
    if executor is None or not items:
        ctx = _Context(spec)
        partials = [_run(ctx, items, progress=progress)] if items else []
        return _finish(ctx, partials, load_problems, len(items))
    chunks = _session_chunks(items, executor.workers * 4)
    if spec.view == "consecutive":
        partials = list(executor.map(_analyze_chunk, [(spec, chunk) for chunk in chunks]))
        return _finish(_Context(spec), partials, load_problems, len(items))
    described, partial = _simulate_chunks(spec, items, chunks, executor, progress)
    return _finish(described, [partial], load_problems, len(items))


def _simulate_chunks(
    spec: _Spec,
    items: Sequence[tuple[int, RequestRecord]],
    chunks: Sequence[Sequence[tuple[int, RequestRecord]]],
    executor: Executor,
    progress: bool,
) -> tuple[_Described, _Partial]:
    """The records plan's simulated view on ``executor``: phase 1 on the workers, chunk by chunk of
    whole sessions (:func:`_tokenize_chunk`), then the ordered simulation here over its columns, as the
    file plan runs it (:func:`promptkit.analysis.ordered.simulate`), with no tokenizer loaded here; a
    worker attributes the divergences, sent only the records they read (``progress``: a bar over the
    chunks)."""
    import polars as pl

    from promptkit.analysis.ordered import Divergent, attribute_records, read_by, simulate

    results: Iterable[_Phase1] = executor.map(_tokenize_chunk, [(spec, chunk) for chunk in chunks])
    if progress:  # imported only when asked for: tqdm.auto warns in a kernel without ipywidgets
        from tqdm.auto import tqdm

        results = tqdm(
            results, total=len(chunks), desc="analyze (simulated, by chunk)", unit="chunk", delay=0.5
        )
    phases = list(results)
    facts = [p.facts for p in phases]
    profile, model = _profile_and_model(spec.provider, spec.cache_model)
    described = _Described(spec, profile, model, *phases[0].names)
    records = dict(items)

    def attribute_on_worker(divergent: list[Divergent]) -> list[tuple[Any, ...]]:
        read = {pos: records[pos] for pos in read_by(divergent)}
        return executor.submit(attribute_records, spec, read, divergent).result()  # type: ignore[no-any-return]

    return described, simulate(
        described,
        _Undelta([(0, p.deltas) for p in phases], [p.composition for p in phases]),
        pl.concat([f.frame for f in facts]),
        [q for f in facts for q in f.problems],
        [m for f in facts for m in f.mended],
        {pos: got for f in facts for pos, got in f.ruler_inputs.items()},
        attribute_on_worker,
    )


#: The provider assumed for records whose provider nothing in the log recognises: the generic rules
#: (exact prefix, no minimum, no unit; no provider's own rules are borrowed), always with a note and
#: ``AnalysisResult.provider_assumed``.
DEFAULT_PROVIDER: Final[str] = GENERIC_PROVIDER


def _combine(results: list[AnalysisResult], notes: list[str], view: str) -> AnalysisResult:
    """One result from the groups' results (one group per provider), their notes prefixed."""
    import polars as pl

    if len(results) == 1:
        return attrs.evolve(results[0], notes=(*notes, *results[0].notes))
    for part in results:
        notes.extend(f"[{part.provider}] {n}" for n in part.notes)
    first = results[0]
    return AnalysisResult(
        requests=pl.concat([part.requests for part in results]),
        composition=pl.concat([part.composition for part in results]),
        problems=pl.concat([part.problems for part in results]),
        provider=", ".join(part.provider for part in results),
        tokenizer=", ".join(dict.fromkeys(part.tokenizer for part in results)),
        render=", ".join(dict.fromkeys(part.render for part in results)),
        cache_model=first.cache_model,
        view=view,
        notes=tuple(notes),
    )


def _default_view(records: Sequence[RequestRecord]) -> str:
    """``simulated`` when every record is a call of a conversation tree (``meta["conversation_tree"]``,
    set by readers of logs such as Claude Code's, where calls branch and share one cache), else
    ``consecutive``."""
    if records and all(r.meta.get("conversation_tree") for r in records):
        return "simulated"
    return "consecutive"


#: The note of an analysis whose records chose the simulated view (:func:`_default_view`).
_VIEW_NOTE: Final[str] = (
    "view: simulated (the default for conversation trees: rewinds, branches and sub-agents "
    "share one cache with its TTL); pass view='consecutive' for each call against the previous one"
)


def _defaulted_note(count: int) -> str:
    profile = get_provider(DEFAULT_PROVIDER)
    unit = "no unit" if profile.cache_unit is None else f"{profile.cache_unit}-token units"
    return (
        f"{count} session(s) name no provider and none was recognised from model, URL or usage: "
        f"analyzed with the {DEFAULT_PROVIDER!r} rules (exact prefix, {unit}; tokenizer "
        f"{_name_of(profile.load_tokenizer())} as an estimate) (pass --provider to choose)"
    )


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
    from promptkit.analysis.executors import make_executor, named_tokenizers

    if view is not None and (not isinstance(view, str) or view not in VIEWS):
        raise UsageError(f"view: unknown view {view!r}; expected one of {', '.join(VIEWS)}")
    _check_arguments(records, provider=provider, progress=progress)
    executor = make_executor(engine, jobs, client=client, tokenizers=named_tokenizers(tokenizer, provider))
    try:
        return _analyze_records(
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


def _analyze_records(
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
    """:func:`analyze_requests` on ``executor`` (None: in this process)."""
    record_list, load_problems = _as_records(records)
    load_notes = list(records.notes) if isinstance(records, LoadResult) else []
    if view is None:
        view = _default_view(record_list)
        if view == "simulated":
            load_notes.append(_VIEW_NOTE)
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
        notes.append(_defaulted_note(len(defaulted)))
    if not groups:
        only = provider if provider is not None else DEFAULT_PROVIDER
        chosen[only if isinstance(only, str) else id(only)] = only
        groups[only if isinstance(only, str) else id(only)] = []
    results = [
        _analyze_group(
            items,
            load_problems if i == 0 else [],
            _Spec(
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
    return attrs.evolve(_combine(results, notes, view), provider_assumed=bool(defaulted))


def _stream_batches(
    stream: Any,
    specs: Mapping[str | ProviderProfile, _Spec],
    group_of: Callable[[str | None], str | ProviderProfile],
    inferred: bool,
    order: deque[str | ProviderProfile],
    defaulted: set[str],
) -> Iterator[tuple[_Spec, list[tuple[int, RequestRecord]]]]:
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


def _analyze_stream(
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
    """The consecutive view, session by session as the logs are streamed (see :func:`analyze`)."""
    from promptkit.analysis.executors import make_executor, named_tokenizers
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
        key: _Spec(key, tokenizer, render, cache_model, "consecutive", timed[key], STREAM_CACHE_TOKENS)
        for key in timed
    }
    partials: dict[str | ProviderProfile, list[_Partial]] = {key: [] for key in specs}
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
            results: Iterator[_Partial] = (_analyze_chunk(spec, chunk) for spec, chunk in batches)
        else:
            results = executor.map(_analyze_chunk, batches)
        for part in results:
            key = order.popleft()
            group = partials[key]
            group.append(part)
            fresh[key] += 1
            if fresh[key] >= _MERGE_EVERY:  # memory: a few large blocks, not many small frames
                group[-fresh[key] :] = [_merged(group[-fresh[key] :])]
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
    empty = _Spec(keys[0], tokenizer, render, cache_model, "consecutive", False)  # no records at all
    return _stream_result(stream, keys, specs, partials, counts, defaulted, empty)


def _stream_result(
    stream: Any,
    keys: list[str | ProviderProfile],
    specs: Mapping[str | ProviderProfile, _Spec],
    partials: Mapping[str | ProviderProfile, list[_Partial]],
    counts: Mapping[str | ProviderProfile, int],
    defaulted: set[str],
    empty: _Spec,
) -> AnalysisResult:
    """A streamed analysis' result from each provider group's partials (``empty``: the spec of the
    one group of a stream without records)."""
    notes = list(stream.notes)
    if defaulted:
        notes.append(_defaulted_note(len(defaulted)))
    results_by_group = [
        _finish(
            _Context(specs[key] if key in specs else empty),
            partials.get(key, []),
            list(stream.problems) if i == 0 else [],
            counts.get(key, 0),
        )
        for i, key in enumerate(keys)
    ]
    return attrs.evolve(_combine(results_by_group, notes, "consecutive"), provider_assumed=bool(defaulted))


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
    (:mod:`promptkit.analysis.filetasks`). Same result.

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
        return _analyze_stream(paths, format, **{**options, "view": view or "consecutive"})
    if jobs != 1 or engine != "local":
        return _analyze_by_file(paths, format, **options)
    with phase("load", enabled=progress):  # perf: the loading phase on a TTY
        loaded = read_logs(paths, format=format)
    return analyze_requests(loaded, **options)


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
) -> AnalysisResult:
    """:func:`analyze` on workers, one task per log file (:func:`~promptkit.analysis.filetasks.analyze_files`),
    also with ``view=None`` (each worker chooses its file's default view), or, when a session spans
    files, by loading the records here and shipping them by session."""
    from promptkit.analysis.executors import make_executor, named_tokenizers
    from promptkit.analysis.filetasks import analyze_files

    if view is not None and (not isinstance(view, str) or view not in VIEWS):
        raise UsageError(f"view: unknown view {view!r}; expected one of {', '.join(VIEWS)}")
    _check_arguments((), provider=provider, progress=progress)
    settings: dict[str, Any] = dict(
        provider=provider, tokenizer=tokenizer, render=render, cache_model=cache_model, view=view
    )
    executor = make_executor(engine, jobs, client=client, tokenizers=named_tokenizers(tokenizer, provider))
    try:
        if executor is not None:
            result = analyze_files(paths, executor=executor, format=fmt, progress=progress, **settings)
            if result is not None:
                return result
        loaded = read_logs(paths, format=fmt)
        return _analyze_records(loaded, executor, progress=progress, **settings)
    finally:
        if executor is not None:
            executor.close()
