"""Stage 1, per request: the body as the chat template reads it, its tokens, its cache plan and the
columns of its row that need no cache outcome.

- :func:`prepare_request` turns a record's request into the chat body (an Anthropic top-level
  ``system`` becomes a leading message, its layout shifted);
- :func:`tokenize_one` renders and tokenizes it, lone UTF-16 surrogates mended where they are rendered
  (:class:`SurrogateMemo` keeping the scan of repeated messages cheap), and reads what the record says
  of an opaque head in one go (:func:`~promptkit.formats.opaque_head.opaque_head_facts`: its
  placeholder tokens, its breakpoint, its span for the composition);
- :func:`request_local` gives what its row needs of it alone (:class:`RequestLocal`: the cache plan,
  where its head ends, a marked head's breakpoint);
- :func:`fixed_fields` gives its row's :data:`~promptkit.analysis.columns.FIXED_COLUMNS`, and
  :func:`composition_frame` the frame of its composition rows;
- :class:`Preparer` runs these for a chunk's records, one at a time, and keeps the problems, the mended
  records and the thinking renders they produce: every plan prepares its records through it.

The local plan runs this stage and the next in one loop (:mod:`promptkit.analysis.plans.local`); the
parallel simulated view runs it on the workers and ships what it made (:mod:`promptkit.analysis.wire`).

>>> from promptkit.layout import RequestRecord
>>> record = RequestRecord({"system": "Be terse.", "messages": [{"role": "user", "content": "hi"}]}, "s", index=0)
>>> prepared = prepare_request(record)
>>> [m["role"] for m in prepared.body["messages"]], prepared.shifted
(['system', 'user'], True)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import attrs

from promptkit.analysis.breakpoints import infer_breakpoints
from promptkit.analysis.columns import frame_schemas
from promptkit.analysis.composition import CompositionRows
from promptkit.analysis.ruler import Ruler, usage_contradictions
from promptkit.errors import LONE_SURROGATE, LoneSurrogateError
from promptkit.formats.head_buffer import HeadBuffers
from promptkit.formats.opaque_head import NO_OPAQUE_HEAD, OpaqueHeadFacts, opaque_head_facts
from promptkit.layout import LayoutEntry, LoadProblem, RequestRecord
from promptkit.tokens.cache_models import OPAQUE_HEAD_BREAKPOINT, CacheModel

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from promptkit.analysis.spec import AnalysisContext
    from promptkit.tokens.cache_models import CachePlan
    from promptkit.tokens.tokenize import TokenizedRequest

__all__ = [
    "PreparedRecord",
    "PreparedRequest",
    "Preparer",
    "RequestLocal",
    "RulerFacts",
    "SurrogateMemo",
    "Tokenized",
    "chat_body",
    "completion_tokens",
    "composition_frame",
    "fixed_fields",
    "head_end",
    "log_events",
    "model_name",
    "prepare_request",
    "request_id",
    "request_local",
    "surrogate_where",
    "thinking_events",
    "tokenize_one",
    "usage_problems",
]


def chat_body(request: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool]:
    """An Anthropic Messages body's top-level ``system`` becomes a leading system message (its blocks,
    with their ``cache_control``, become the message's content parts). Returns (body, converted)."""
    system = request.get("system")
    if system is None or system == "" or system == []:
        return request, False
    content = system if isinstance(system, str | list) else str(system)
    body = {k: v for k, v in request.items() if k != "system"}
    body["messages"] = [{"role": "system", "content": content}, *request["messages"]]
    return body, True


def request_id(record: RequestRecord) -> str:
    """A request's id in the analysis: ``session#index`` (the ``cached_source`` column names it)."""
    return f"{record.session}#{record.index}"


@attrs.frozen(slots=True)
class PreparedRequest:
    """A record's request as the chat template reads it (:func:`chat_body`), with its layout shifted
    to match where a top-level system message was prepended."""

    record: RequestRecord
    body: Mapping[str, Any]
    shifted: bool  # a top-level system message was prepended
    layout: tuple[LayoutEntry, ...] | None


def prepare_request(record: RequestRecord) -> PreparedRequest:
    """The record prepared for its chat template (see :class:`PreparedRequest`)."""
    body, shifted = chat_body(record.request)
    layout = record.layout
    if shifted and layout is not None:
        layout = (LayoutEntry("persona", None), *layout)
    return PreparedRequest(record, body, shifted, layout)


def log_events(record: RequestRecord) -> str | None:
    """What the log shows happened before the call (``meta["log_events"]``: ``compaction``,
    ``rewind``...), comma-separated; None when nothing."""
    events = record.meta.get("log_events")
    if isinstance(events, (list, tuple)) and events:
        return ",".join(str(e) for e in events)
    return None


_NO_REQUEST: Final = object()  # a session's previous request, before its first


def thinking_events(record: RequestRecord, events: str | None, last: dict[str, Any]) -> str | None:
    """``events`` (:func:`log_events`) with ``thinking_changed`` added where the request's ``thinking``
    parameter (Anthropic's extended thinking: enabled or not, its ``budget_tokens``) differs from its
    session's previous request's (``last``: session -> that parameter, updated). Anthropic invalidates
    the cached messages then, not the system prompt and tools
    (https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#extended-thinking-with-prompt-caching).

    >>> from promptkit.layout import RequestRecord
    >>> last = {}
    >>> on = RequestRecord({"messages": [], "thinking": {"type": "enabled", "budget_tokens": 4000}}, "s")
    >>> more = RequestRecord({"messages": [], "thinking": {"type": "enabled", "budget_tokens": 16000}}, "s")
    >>> thinking_events(on, None, last), thinking_events(on, None, last), thinking_events(more, "rewind", last)
    (None, None, 'rewind,thinking_changed')
    """
    thinking = record.request.get("thinking")
    before = last.get(record.session, _NO_REQUEST)
    last[record.session] = thinking
    shown = events.split(",") if events else []
    if before is _NO_REQUEST or before == thinking or "thinking_changed" in shown:
        return events
    return ",".join([*shown, "thinking_changed"])


def head_end(tok: TokenizedRequest, body: Mapping[str, Any]) -> int:
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


class RequestLocal(NamedTuple):
    """What a request's row needs of it alone, before the cache is consulted: the cache model's plan,
    where its head ends (local tokens, :func:`head_end`) and the local end of an opaque head whose
    breakpoint stores an entry (None: none). Phase 1 computes them where it tokenizes (perf: a plan
    reads every message of an Anthropic prompt: the coordinator reads none)."""

    plan: CachePlan
    head_end: int
    marked: int | None
    # the breakpoints placed from the reported counts where the body shows none (the
    # ``inferred_breakpoints`` column: :mod:`promptkit.analysis.breakpoints`)
    inferred: str | None = None


def request_local(
    model: CacheModel,
    exact_units: bool,
    record: RequestRecord,
    p: PreparedRequest,
    tok: TokenizedRequest,
    opaque: OpaqueHeadFacts,
) -> RequestLocal:
    """The request-local facts of ``record`` (prepared as ``p``, tokenized as ``tok``, its opaque head
    ``opaque``)."""
    head_bp = opaque.breakpoint  # the end of a head the log does not show, marked
    body = p.body if head_bp is None else {**p.body, OPAQUE_HEAD_BREAKPOINT: head_bp}
    units = _own_units(tok, record.usage, exact_units)
    plan = model.plan(tok, body, p.layout, units=units)
    inferred = None
    if model.exact_entries and not plan.breakpoints and head_bp is None:
        # a breakpoint cache, and the log shows no breakpoint: the reported counts place them
        found = infer_breakpoints(tok, body, record.usage, exact_units=exact_units)
        if found is not None:
            head_bp = _inferred_head(opaque, found.control)
            body = found.body if head_bp is None else {**found.body, OPAQUE_HEAD_BREAKPOINT: head_bp}
            plan = model.plan(tok, body, p.layout, units=units)
            inferred = found.label(shifted=p.shifted)
            inferred = inferred if head_bp is None else ",".join(("head", inferred))
    marked = None  # the head's breakpoint, where it stores an entry
    if head_bp is not None and any(e.length == head_bp["tokens"] for e in plan.entries):
        marked = int(head_bp["tokens"])
    return RequestLocal(plan, head_end(tok, p.body), marked, inferred)


def _inferred_head(opaque: OpaqueHeadFacts, control: Mapping[str, Any]) -> dict[str, Any] | None:
    """The breakpoint at the end of a record's opaque head (``opaque``: the system prompt the log does not
    show), inferred with the call's other breakpoints (``control``: their ``cache_control``); None without
    an opaque head of one piece."""
    head = opaque.head
    if head is None or opaque.blocks:
        return None
    return {"tokens": head.tokens, "cache_control": dict(control)}


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


def surrogate_where(record: RequestRecord) -> str:
    """Where a record's first lone surrogate is: its id, file and line, and the field."""
    field = _surrogate_field(record.request, "request") or (
        _surrogate_field(record.completion, "completion") if record.completion is not None else None
    )
    place = f"{record.file}:{record.line}, " if record.file is not None else ""
    return f"{request_id(record)} ({place}{field or 'a rendered field'})"


def _equal(a: Any, b: Any) -> bool:
    """``a == b`` as a bool; False when the comparison has no truth value (an array inside)."""
    try:
        return bool(a == b)
    except (ValueError, TypeError):
        return False


class SurrogateMemo:
    """perf: :func:`_has_surrogates` of request bodies, each message scanned once per session rather
    than once per request. Per session it keeps the last message list found clean: a request whose
    messages start with that list (compared in C, by identity first: the loaders intern the messages a
    session's records repeat, :func:`~promptkit.formats.discovery.intern_messages`) scans only the
    messages after it. Other messages are remembered by identity (the memo holds them: an id is not
    reused while its object lives). Both are emptied when ``size`` entries are held.

    ``dirty`` holds the sessions whose text held a lone surrogate: their later requests are scanned
    (and mended) before tokenizing (the others are not: the tokenizer finds one in the texts it encodes,
    so a surrogate only in a field no render reads is left as it is)."""

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

    def mended(
        self, body: Mapping[str, Any], completion: Any, session: str | None = None
    ) -> tuple[Mapping[str, Any], Any] | None:
        """``body`` and ``completion`` (of ``session``) with every lone UTF-16 surrogate in their strings
        replaced by U+FFFD, where they hold one (JSON logs can hold ``\\ud800`` escapes; DeepSeek's
        tokenizer rejects them, tiktoken replaces them quietly: mended, every tokenizer reads the same
        text); None where they hold none."""
        if self.body(body, session) or (completion is not None and self.message(completion)):
            return _without_surrogates(body), (
                _without_surrogates(completion) if completion is not None else None
            )
        return None


@attrs.frozen(slots=True)
class Tokenized:
    """One request's tokens (or why it could not be tokenized), whether lone surrogates were mended
    and its opaque head (what its record says of the head its log does not show)."""

    value: TokenizedRequest | str
    mended: bool
    opaque: OpaqueHeadFacts = NO_OPAQUE_HEAD


def tokenize_one(
    ctx: AnalysisContext,
    record: RequestRecord,
    memo: SurrogateMemo | None = None,
    heads: HeadBuffers | None = None,
) -> tuple[PreparedRequest, Tokenized, str | None]:
    """Stage 1 of one record: prepared, tokenized with its render (the thinking render's name when it
    is one, else None), or why it cannot be.

    Lone surrogates are mended where they are rendered: the tokenizer rejects a text holding one
    (``reject_surrogates``; a clean request is not scanned), and the session is then marked
    (:attr:`SurrogateMemo.dirty`): this request is mended (:meth:`SurrogateMemo.mended`; the prepared
    body stays as the log has it) and tokenized again, the session's later ones are mended before they
    are tokenized, once. Then the tokens get the placeholders of the record's opaque head
    (:func:`~promptkit.formats.opaque_head.opaque_head_facts`, read once: its breakpoint and span
    travel in the result). ``heads``: where a chain of requests' tokens with their opaque head in front
    share one buffer (memory: else each request's are a copy)."""
    prepared = prepare_request(record)
    memo = memo if memo is not None else SurrogateMemo()
    body, completion = prepared.body, record.completion
    text = memo.mended(body, completion, record.session) if record.session in memo.dirty else None
    if text is not None:
        body, completion = text
    think = ctx.thinking_name(record)
    rt = ctx.request_tokenizer(think)
    try:
        try:
            tok = rt.tokenize(body, completion=completion)
        except LoneSurrogateError:  # the session's first: mended where the scan finds it, tokenized again
            memo.dirty.add(record.session)
            text = memo.mended(body, completion, record.session)
            if text is None:
                raise
            body, completion = text
            tok = rt.tokenize(body, completion=completion)
        opaque = opaque_head_facts(record)  # placeholder tokens for a head the log omits, its breakpoint
        tok = opaque.shift(tok, heads)
    except (ValueError, KeyError, TypeError) as exc:
        return prepared, Tokenized(f"{request_id(record)}: cannot tokenize: {exc}", text is not None), think
    return prepared, Tokenized(tok, text is not None, opaque), think


def usage_problems(record: RequestRecord) -> list[LoadProblem]:
    """A usage that contradicts itself: a problem naming file, line and field, kept as reported (reads
    from outside the log are no problem: the analysis' note, :func:`~promptkit.analysis.ruler.reads_from_outside`)."""
    usage = record.usage
    if usage is None:
        return []
    return [
        LoadProblem(record.file, record.line, f"{reason}; kept as reported")
        for reason in usage_contradictions(usage)
    ]


@attrs.frozen(slots=True)
class RulerFacts:
    """Ruler mode's columns of a row as made (:func:`promptkit.analysis.ruler.place_row` converts its positions afterwards)."""

    position_basis: str | None
    head_end_tokens: int
    best_effort: bool
    log_events: str | None


def fixed_fields(
    record: RequestRecord,
    plan: CachePlan,
    model_name: str | None,
    completion: int | None,
    ruler: RulerFacts,
    inferred: str | None = None,
) -> dict[str, Any]:
    """The columns of a request's row that need no cache outcome (:data:`FIXED_COLUMNS`): its record's
    figures and the ruler facts (``completion``: tokens after the prompt, None without a completion;
    ``inferred``: the breakpoints placed from the reported counts, :class:`RequestLocal`)."""
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
        inferred_breakpoints=inferred,
    )


def model_name(record: RequestRecord) -> str | None:
    """The model a record's request names (None: none, or not a string)."""
    name = record.request.get("model")
    return name if isinstance(name, str) else None


def completion_tokens(record: RequestRecord, tok: TokenizedRequest, plan: CachePlan) -> int | None:
    """The completion's tokens (after the prompt): None where the record has no completion."""
    return len(tok.tokens) - plan.prompt_len if record.completion is not None else None


def composition_frame(rows: CompositionRows) -> pl.DataFrame:
    """The composition frame of ``rows`` with the records' positions in ``_pos``."""
    _, comp_schema, _ = frame_schemas()
    return rows.frame(comp_schema, position=True).rename({"_position": "_pos"})


class PreparedRecord(NamedTuple):
    """What stage 1 made of a record that could be tokenized: the prepared request, its tokens, its
    thinking render (None: the profile's), its request-local facts, its row's
    :data:`~promptkit.analysis.columns.FIXED_COLUMNS` (``fixed``, a fresh dict) and its log events."""

    prepared: PreparedRequest
    tok: TokenizedRequest
    think: str | None
    local: RequestLocal
    fixed: dict[str, Any]
    events: str | None


class Preparer:
    """Stage 1 over a chunk of records, a record at a time (:meth:`prepare`), for every plan: the local
    plan replays each record as it is prepared, a worker of a parallel simulated view ships what it
    prepared (:func:`~promptkit.analysis.wire.tokenize_chunk`). It keeps what the chunk's records
    produce besides their rows: their composition rows (``composition``: they need no cache outcome;
    :func:`composition_frame`), the problems (a record that cannot be tokenized, a usage that
    contradicts itself or its session's previous one), the records whose lone surrogates were mended
    and each thinking render's first position.

    A record goes down through the layers once: its body and its lone surrogates here, its tokenizer
    (:mod:`~promptkit.analysis.spec`), its tokens (:mod:`~promptkit.tokens.tokenize`), its opaque head
    (:mod:`~promptkit.formats.opaque_head`), then its plan and row here, its usage's contradictions
    (:mod:`~promptkit.analysis.ruler`) and its composition rows (:mod:`~promptkit.analysis.composition`)."""

    __slots__ = (
        "best_effort",
        "composition",
        "ctx",
        "exact",
        "heads",
        "last_thinking",
        "memo",
        "mended",
        "problems",
        "think",
        "thinking",
    )

    def __init__(self, ctx: AnalysisContext) -> None:
        self.ctx = ctx
        # the local tokenizer is the provider's: positions are exact and need no ruler
        self.exact, self.best_effort = ctx.profile.exact_tokenizer, ctx.profile.best_effort
        self.memo = SurrogateMemo()  # perf: per chunk, so it holds only messages the chunk's records hold
        self.heads = HeadBuffers()  # memory: a chain's tokens with their opaque head, one buffer
        self.composition = CompositionRows()  # perf: numpy rows per request, strings as codes
        self.problems: list[tuple[int, LoadProblem]] = []
        self.mended: list[tuple[int, str]] = []
        self.thinking: dict[str, int] = {}  # render name -> position of its first request
        self.last_thinking: dict[str, Any] = {}  # session -> its previous request's thinking parameter
        self.think: str | None = None  # the last record's thinking render

    def prepare(self, pos: int, record: RequestRecord) -> PreparedRecord | None:
        """Stage 1 of the record at ``pos``: None (and a problem) when it cannot be tokenized."""
        p, tokenized, think = tokenize_one(self.ctx, record, self.memo, self.heads)
        self.think = think
        if think is not None and pos < self.thinking.get(think, pos + 1):  # the first in record order
            self.thinking[think] = pos  # (a streamed plan meets the records in time order)
        if tokenized.mended:
            self.mended.append((pos, surrogate_where(record)))
        tok = tokenized.value
        if isinstance(tok, str):
            self.problems.append((pos, LoadProblem(record.file, record.line, tok)))
            return None
        local = request_local(self.ctx.model, self.exact, record, p, tok, tokenized.opaque)
        events = thinking_events(record, log_events(record), self.last_thinking)
        ruler = RulerFacts("exact" if self.exact else None, local.head_end, self.best_effort, events)
        plan = local.plan
        completion = completion_tokens(record, tok, plan)
        fixed = fixed_fields(record, plan, model_name(record), completion, ruler, local.inferred)
        self.problems.extend((pos, problem) for problem in usage_problems(record))
        head = tokenized.opaque.head
        self.composition.add(
            record.session,
            record.index,
            p.body,
            tok,
            layout=p.layout,
            shifted=p.shifted,
            opaque=(head.tokens, head.key) if head is not None else None,
            position=pos,
        )
        return PreparedRecord(p, tok, think, local, fixed, events)
