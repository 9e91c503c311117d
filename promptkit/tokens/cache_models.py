"""Cache models: the prefix-cache mechanisms providers use, as small documented classes.

Each class models a *mechanism* and is named after it; a provider profile (``promptkit/providers/``)
builds the one its provider uses, with the provider's parameters and the documentation they come from
(``get_provider(NAME).new_cache_model()``). No class here knows which provider uses it.

A cache model answers three questions about one call, all in tokens of the analyzed rendering:

1. what the call *writes* to the cache (:meth:`CacheModel.plan` returns a :class:`CachePlan` with the
   entries: how many tokens, which time-to-live, whether any prefix of them can be read or only the
   exact length — Anthropic's breakpoints);
2. how many prompt tokens a later call gets from the cache, given the longest prefix it shares with
   live cached content and the exact entries on that prefix (:meth:`CacheModel.cached_tokens`);
3. how many tokens the call writes, when the provider reports it (:meth:`CacheModel.write_tokens`).

The views of :mod:`promptkit.analysis.replay` and the radix cache of :mod:`promptkit.analysis.simulator`
do the matching; the models only apply the rules. Every model takes ``ttl`` (seconds an entry lives
after its last use; None = until evicted), ``capacity`` (tokens the simulated cache holds, LRU
eviction; None = unbounded) and ``delay`` (seconds after a call before its entry can be read).

====================  ===========================================================================
``exact``             any prefix of anything seen (prompt and answer), token by token: the upper bound
``unit-prefix``       the shared prefix in whole units (64 tokens); an entry may cover the prompt *and*
                      the generated answer (:class:`UnitPrefixCache`)
``stepped-prefix``    nothing under a minimum (1024 tokens), then steps (128 tokens); the prompt, and
                      the answer with ``include_completion``; retention values a request may ask
                      for (:class:`SteppedPrefixCache`)
``breakpoint``        explicit ``cache_control`` breakpoints (or automatic ones from a layout), exact
                      entries, per-model minimum length, 20-block lookback, named TTLs, writes
                      (:class:`BreakpointCache`)
``paged-block``       full blocks of 16 tokens (prompt and answer); the last prompt token is recomputed
                      (:class:`PagedBlockCache`)
``prefix``            any prefix above a (per-model) minimum, optionally in units (:class:`PrefixCache`)
====================  ===========================================================================

A provider's name (``--provider``, ``cache-model:NAME``) is resolved by the providers:
:func:`promptkit.providers.resolve.resolve_cache_model` gives that profile's model; this module knows
only the mechanisms.

Example::

    >>> m = get_cache_model("unit-prefix")
    >>> m.cached_tokens(CachePlan(prompt_len=3049, entries=()), prefix_tokens=3013)
    3008
    >>> get_cache_model("stepped-prefix").cached_tokens(CachePlan(prompt_len=5000, entries=()), prefix_tokens=1300)
    1280
"""

from __future__ import annotations

import abc
import bisect
import math
import operator
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final

import attrs

from promptkit.errors import UnknownAttributeError, UsageError
from promptkit.layout import head_end, last_history_index

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.layout import LayoutEntry
    from promptkit.tokens.tokenize import TokenizedRequest

__all__ = [
    "CACHE_MODELS",
    "OPAQUE_HEAD_BREAKPOINT",
    "BreakpointCache",
    "CacheEntry",
    "CacheModel",
    "CachePlan",
    "ExactCache",
    "PagedBlockCache",
    "PlanColumns",
    "PrefixCache",
    "SteppedPrefixCache",
    "UnitPrefixCache",
    "get_cache_model",
    "message_ends",
    "register_cache_model",
]


def _non_negative_or_none(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (not isinstance(value, int | float) or isinstance(value, bool) or value < 0):
        raise UsageError(
            f"{type(instance).__name__}.{attribute.name}: expected a number >= 0 or None, got {value!r}"
        )


def _positive_int(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise UsageError(
            f"{type(instance).__name__}.{attribute.name}: expected an integer >= 1, got {value!r}"
        )


def _non_negative(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0 or not math.isfinite(value):
        raise UsageError(
            f"{type(instance).__name__}.{attribute.name}: expected a finite number >= 0, got {value!r}"
        )


@attrs.frozen(slots=True)
class CacheEntry:
    """One entry a call writes: its first ``length`` tokens, alive ``ttl`` seconds after last use
    (None = no expiry). ``exact`` entries (Anthropic breakpoints) can only be read whole; other
    entries serve any of their prefixes."""

    length: int
    ttl: float | None = None
    exact: bool = False


@attrs.frozen(slots=True)
class CachePlan:
    """What a model says about one call before the cache is consulted.

    ``prompt_len``: tokens of the prompt; ``entries``: what the call writes afterwards;
    ``lookup_points``: for exact-entry models, the positions where a read may land (block boundaries
    within the lookback window of a breakpoint), None for any-prefix models; ``breakpoints``: the
    positions of the call's cache breakpoints (Anthropic), for reporting.
    """

    prompt_len: int
    entries: tuple[CacheEntry, ...] = ()
    lookup_points: tuple[int, ...] | None = None
    breakpoints: tuple[int, ...] = ()


@attrs.define(slots=True, eq=False)
class PlanColumns:
    """Cache plans as flat columns of Python values (perf: a worker ships a chunk's plans in a few lists,
    not an object per plan and entry; the coordinator rebuilds plan ``i`` with :meth:`plan`). Plan
    ``i``'s entries are ``entry_*[entry_at[i]:entry_at[i + 1]]``, its lookup points (None where
    ``has_lookup[i]`` is false) and breakpoints likewise. Every field of :class:`CachePlan` and
    :class:`CacheEntry` has its column here (``tests/tokens/test_cache_models.py`` checks it)."""

    prompt_len: list[int] = attrs.field(factory=list)
    entry_at: list[int] = attrs.field(factory=lambda: [0])
    entry_len: list[int] = attrs.field(factory=list)
    entry_ttl: list[float | None] = attrs.field(factory=list)
    entry_exact: list[bool] = attrs.field(factory=list)
    has_lookup: list[bool] = attrs.field(factory=list)
    lookup_at: list[int] = attrs.field(factory=lambda: [0])
    lookups: list[int] = attrs.field(factory=list)
    bp_at: list[int] = attrs.field(factory=lambda: [0])
    bps: list[int] = attrs.field(factory=list)

    @classmethod
    def of(cls, plans: Iterable[CachePlan]) -> PlanColumns:
        """The columns of ``plans``, in their order."""
        columns = cls()
        for plan in plans:
            columns.prompt_len.append(plan.prompt_len)
            for entry in plan.entries:
                columns.entry_len.append(entry.length)
                columns.entry_ttl.append(entry.ttl)
                columns.entry_exact.append(entry.exact)
            columns.entry_at.append(len(columns.entry_len))
            columns.has_lookup.append(plan.lookup_points is not None)
            columns.lookups.extend(plan.lookup_points or ())
            columns.lookup_at.append(len(columns.lookups))
            columns.bps.extend(plan.breakpoints)
            columns.bp_at.append(len(columns.bps))
        return columns

    def plan(self, i: int) -> CachePlan:
        """Plan ``i``, as it was given."""
        entries = [
            CacheEntry(self.entry_len[j], self.entry_ttl[j], self.entry_exact[j])
            for j in range(self.entry_at[i], self.entry_at[i + 1])
        ]
        return CachePlan(
            self.prompt_len[i],
            tuple(entries),
            tuple(self.lookups[self.lookup_at[i] : self.lookup_at[i + 1]]) if self.has_lookup[i] else None,
            tuple(self.bps[self.bp_at[i] : self.bp_at[i + 1]]),
        )




#: The former private name (``promptkit.analysis`` still uses it until its split lands).
_PlanColumns = PlanColumns
class CacheModel(abc.ABC):
    """Base class of the cache models (all are frozen attrs classes with ``ttl``, ``capacity``, ``delay``).

    Subclasses set ``name`` and ``includes_completion`` (whether a call's entry covers its generated
    answer, so the engine tokenizes the completion too) and implement :meth:`cached_tokens`; the
    default :meth:`plan` writes one any-prefix entry of the prompt (and the answer when included).
    """

    __slots__ = ()
    name: ClassVar[str] = "base"
    ttl: float | None
    capacity: int | None
    delay: float

    @property
    def includes_completion(self) -> bool:
        """Whether a call's entry covers its generated answer."""
        return False

    def entry_ttl(self, request: Mapping[str, Any]) -> float | None:
        """The time-to-live of the entries ``request`` writes (``ttl`` by default)."""
        return self.ttl

    def stored_length(self, tokens: int) -> int:
        """How many of a call's ``tokens`` its entry keeps (all of them by default)."""
        return tokens

    def plan(
        self,
        tokenized: TokenizedRequest,
        request: Mapping[str, Any],
        layout: Sequence[LayoutEntry] | None = None,
        *,
        units: Callable[[int], int] | None = None,
    ) -> CachePlan:
        """The entries the call writes: its tokens (prompt, plus answer when included) as one entry.

        ``units``: where the local tokenizer is not the provider's (ruler mode,
        :mod:`promptkit.cache.ruler`), a local position in the provider's units; a rule that counts
        tokens at plan time (a minimum size) applies to that count. None: the local count is the
        provider's. Positions in the plan stay local."""
        stored = self.stored_length(
            len(tokenized.tokens) if self.includes_completion else tokenized.prompt_len
        )
        entry = CacheEntry(stored, self.entry_ttl(request), False)
        return CachePlan(tokenized.prompt_len, (entry,) if stored > 0 else ())

    @abc.abstractmethod
    def cached_tokens(self, plan: CachePlan, prefix_tokens: int, exact_entries: Sequence[int] = ()) -> int:
        """Prompt tokens read from the cache when the prompt shares ``prefix_tokens`` with live cached
        content and ``exact_entries`` (lengths of live exact entries that are prefixes of the prompt)."""

    def write_tokens(self, plan: CachePlan, cached_tokens: int) -> int | None:
        """Tokens the provider reports as written to the cache, or None when it does not report it."""
        return None

    # capability questions (asked by the engine, the simulator and the causes instead of a provider's name)

    @property
    def exact_entries(self) -> bool:
        """Whether entries are exact (read only whole, at breakpoints) rather than any-prefix; such a
        cache writes nothing without a breakpoint and is simulated with a shadow of everything stored."""
        return False

    @property
    def cache_unit(self) -> int | None:
        """The unit a cached prefix is rounded down to, in tokens (None: any length)."""
        return None

    def min_cacheable_tokens(self, model: str | None = None) -> int:
        """The smallest prefix (or prompt) the provider caches at all for ``model`` (0: no minimum)."""
        return 0

    @property
    def no_write_reason(self) -> str:
        """Why a request may write no entry under this model's rules (for the analysis notes)."""
        return "nothing to store under its rules"

    def partition(self, model: str | None) -> str | None:
        """The part of the cache a request for ``model`` reads and writes: None (the default) is one
        cache for every model; a per-model cache (Gemini's implicit cache) answers the model's name, so
        a request to one model never reads what a request to another wrote, and a session that goes
        back to a model reads what that model's earlier calls wrote."""
        return None

    @property
    def shared_across_sessions(self) -> bool:
        """Whether the cache is shared by every request of the account or project rather than tied to a
        session, so a session's first request may read the head (system prompt, tools, what the log does
        not show) that a request outside the log wrote (Gemini's implicit cache)."""
        return False

    @property
    def routing_tokens(self) -> int | None:
        """How many leading tokens of a prompt pick the machine (and so the cache) that serves it, where
        the provider routes requests by a hash of the prompt's start (OpenAI: about 256); None: one
        cache serves every request. A request routed to a machine that does not hold its longer prefix
        reads less than the rules allow although its prompt did not change (the cause ``routing_miss``)."""
        return None


def _units(n: int, unit: int) -> int:
    return (n // unit) * unit


@attrs.frozen(slots=True)
class ExactCache(CacheModel):
    """The upper bound: any prefix of anything seen before is cached, token by token.

    Rule: cached = min(shared prefix, prompt length). With ``include_completion`` (default) an entry
    also covers the call's generated answer.
    """

    name: ClassVar[str] = "exact"
    ttl: float | None = attrs.field(default=None, validator=_non_negative_or_none)
    capacity: int | None = attrs.field(default=None, validator=_non_negative_or_none)
    delay: float = attrs.field(default=0.0, validator=_non_negative)
    include_completion: bool = True

    @property
    def includes_completion(self) -> bool:
        return self.include_completion

    def cached_tokens(self, plan: CachePlan, prefix_tokens: int, exact_entries: Sequence[int] = ()) -> int:
        return max(0, min(prefix_tokens, plan.prompt_len))


@attrs.frozen(slots=True)
class UnitPrefixCache(CacheModel):
    """A prefix cache that stores whole units: what a disk-backed context cache such as DeepSeek's does.

    Rule: cached = the shared prefix rounded *down* to whole ``unit`` s (64 tokens by default), never
    more than the prompt. With ``include_completion`` (default) a call's entry covers its prompt **and
    its generated answer**, so the next call of a conversation hits through the previous answer: on
    the shared DeepSeek logs, pvlib-1072 call 2 had prompt 2942 + answer 71 = 3013 tokens, and call 3
    hit 3008 = 47 × 64.

    ``ttl`` None (no expiry) and ``delay`` 0 by default: a best-effort cache that clears unused
    entries after hours or days is modelled as what it *can* serve, an upper bound. The provider
    profile that uses it gives the provider's parameters and their sources
    (``promptkit/providers/deepseek.py``).
    """

    name: ClassVar[str] = "unit-prefix"
    unit: int = attrs.field(default=64, validator=_positive_int)
    ttl: float | None = attrs.field(default=None, validator=_non_negative_or_none)
    capacity: int | None = attrs.field(default=None, validator=_non_negative_or_none)
    delay: float = attrs.field(default=0.0, validator=_non_negative)
    include_completion: bool = True

    @property
    def includes_completion(self) -> bool:
        return self.include_completion

    @property
    def cache_unit(self) -> int | None:
        return self.unit

    def cached_tokens(self, plan: CachePlan, prefix_tokens: int, exact_entries: Sequence[int] = ()) -> int:
        return _units(max(0, min(prefix_tokens, plan.prompt_len)), self.unit)


def _named_ttls(value: Any) -> tuple[tuple[str, float], ...]:
    """Named lifetimes (``retention``, ``ttl_names``) as sorted ``(name, seconds)`` pairs (a mapping is
    accepted)."""
    items = value.items() if isinstance(value, Mapping) else value
    pairs = tuple(sorted((str(k), float(v)) for k, v in items))
    for name, seconds in pairs:
        if seconds < 0 or not math.isfinite(seconds):
            raise UsageError(
                f"named lifetime {name!r}: expected a finite number of seconds >= 0, got {seconds}"
            )
    return pairs


@attrs.frozen(slots=True)
class SteppedPrefixCache(CacheModel):
    """An automatic prefix cache with a minimum and a step: what OpenAI's prompt caching does.

    Rule: nothing is cached under ``min_tokens`` (1024) shared tokens; above, the cached count grows in
    ``step`` s (128): cached = 1024 + 128 · ⌊(shared − 1024) / 128⌋, never more than the prompt. With
    ``include_completion`` a call's entry covers its prompt **and its generated answer** (as the next
    request renders it: the assistant message appended), so the next call of a conversation can read
    into the previous answer; without it (the default) only the prompt is cached. Entries live ``ttl``
    seconds after last use (600 by default). ``routed_by``: the provider routes a request by a hash of
    its first ``routed_by`` tokens (:attr:`CacheModel.routing_tokens`; None: not modelled). ``retention``: the values of a request's ``prompt_cache_retention`` field that keep its
    entry longer, with their lifetime in seconds (none by default; the provider profile gives its
    own, with their source: ``promptkit/providers/openai.py``).

    Example::

        >>> m = SteppedPrefixCache(retention={"24h": 86400})
        >>> m.entry_ttl({"prompt_cache_retention": "24h"}), m.entry_ttl({})
        (86400.0, 600.0)
    """

    name: ClassVar[str] = "stepped-prefix"
    min_tokens: int = attrs.field(default=1024, validator=_positive_int)
    step: int = attrs.field(default=128, validator=_positive_int)
    ttl: float | None = attrs.field(default=600.0, validator=_non_negative_or_none)
    capacity: int | None = attrs.field(default=None, validator=_non_negative_or_none)
    delay: float = attrs.field(default=0.0, validator=_non_negative)
    retention: tuple[tuple[str, float], ...] = attrs.field(default=(), converter=_named_ttls)
    include_completion: bool = False
    routed_by: int | None = attrs.field(default=None, validator=attrs.validators.optional(_positive_int))

    @property
    def routing_tokens(self) -> int | None:
        return self.routed_by

    @property
    def includes_completion(self) -> bool:
        return self.include_completion

    def entry_ttl(self, request: Mapping[str, Any]) -> float | None:
        asked = request.get("prompt_cache_retention")
        for value, seconds in self.retention:
            if asked == value:
                return seconds
        return self.ttl

    @property
    def cache_unit(self) -> int | None:
        return self.step

    def min_cacheable_tokens(self, model: str | None = None) -> int:
        return self.min_tokens

    def cached_tokens(self, plan: CachePlan, prefix_tokens: int, exact_entries: Sequence[int] = ()) -> int:
        shared = min(prefix_tokens, plan.prompt_len)
        if shared < self.min_tokens:
            return 0
        return self.min_tokens + _units(shared - self.min_tokens, self.step)


@attrs.frozen(slots=True)
class PagedBlockCache(CacheModel):
    """A paged KV cache that reuses full blocks: vLLM's automatic prefix caching (and other paged-KV
    servers, SGLang, llama.cpp's server as Ollama runs it).

    Rule: only full blocks of ``block_size`` (16) tokens are cached, for the prompt and the generated
    tokens; the last prompt token is always recomputed (its logits are needed), so
    cached = ⌊min(shared, prompt − 1) / 16⌋ · 16. Blocks stay until evicted: set ``capacity`` to the
    KV cache size in tokens.
    """

    name: ClassVar[str] = "paged-block"
    block_size: int = attrs.field(default=16, validator=_positive_int)
    ttl: float | None = attrs.field(default=None, validator=_non_negative_or_none)
    capacity: int | None = attrs.field(default=None, validator=_non_negative_or_none)
    delay: float = attrs.field(default=0.0, validator=_non_negative)
    include_completion: bool = True

    @property
    def includes_completion(self) -> bool:
        return self.include_completion

    def stored_length(self, tokens: int) -> int:
        """Only full blocks are stored."""
        return _units(tokens, self.block_size)

    @property
    def cache_unit(self) -> int | None:
        return self.block_size

    def cached_tokens(self, plan: CachePlan, prefix_tokens: int, exact_entries: Sequence[int] = ()) -> int:
        return _units(max(0, min(prefix_tokens, plan.prompt_len - 1)), self.block_size)


def _model_minimum(pairs: tuple[tuple[str, int], ...], model: str | None, default: int) -> int:
    """The minimum of the longest model-name prefix in ``pairs`` that ``model`` starts with (its
    ``vendor/`` prefix and case ignored), else ``default``."""
    if model:
        bare = model.rsplit("/", 1)[-1].lower()
        best = max((p for p, _ in pairs if bare.startswith(p)), key=len, default=None)
        if best is not None:
            return dict(pairs)[best]
    return default


def _minimums(value: Any) -> tuple[tuple[str, int], ...]:
    """``min_tokens_by_model`` as sorted ``(model prefix, tokens)`` pairs (a mapping is accepted)."""
    items = value.items() if isinstance(value, Mapping) else value
    pairs = tuple(sorted((str(k), int(v)) for k, v in items))
    for prefix, tokens in pairs:
        if tokens < 0:
            raise UsageError(f"min_tokens_by_model[{prefix!r}]: expected a count >= 0, got {tokens}")
    return pairs


@attrs.frozen(slots=True)
class PrefixCache(CacheModel):
    """An automatic prefix cache described by its parameters: what most providers document (Gemini's
    implicit cache, DashScope, Zhipu, MiniMax, Moonshot) and the generic rules for an unknown one.

    Rules: a call whose prompt is shorter than the model's minimum (``min_tokens_by_model``, longest
    matching model-name prefix, else ``min_tokens``) neither reads nor writes; otherwise cached = the
    shared prefix rounded down to whole ``unit`` s (None: any length), never more than the prompt.
    ``include_completion``: whether an entry covers the generated answer too. ``per_model``: one cache
    per model (:meth:`CacheModel.partition`); ``shared_heads``: shared by the requests of every session
    (:attr:`CacheModel.shared_across_sessions`). The parameters of each
    provider, with their sources, live in its profile (``promptkit/providers/``). Where the local
    tokenizer is not the provider's, the minimum applies to the provider's count of the prompt (the
    ``units`` of :meth:`plan`: its reported prompt tokens, ruler mode).

    Example::

        >>> m = PrefixCache(min_tokens=1024, unit=None)
        >>> m.cached_tokens(CachePlan(prompt_len=3000, entries=(CacheEntry(3000),)), prefix_tokens=2500)
        2500
        >>> m.cached_tokens(CachePlan(prompt_len=900), prefix_tokens=800)  # under the minimum: no entry, no read
        0
    """

    name: ClassVar[str] = "prefix"
    min_tokens: int = attrs.field(default=0, validator=_non_negative)
    min_tokens_by_model: tuple[tuple[str, int], ...] = attrs.field(default=(), converter=_minimums)
    unit: int | None = attrs.field(default=None, validator=attrs.validators.optional(_positive_int))
    ttl: float | None = attrs.field(default=None, validator=_non_negative_or_none)
    capacity: int | None = attrs.field(default=None, validator=_non_negative_or_none)
    delay: float = attrs.field(default=0.0, validator=_non_negative)
    include_completion: bool = False
    per_model: bool = False
    shared_heads: bool = False

    @property
    def includes_completion(self) -> bool:
        return self.include_completion

    @property
    def cache_unit(self) -> int | None:
        return self.unit

    def min_cacheable_tokens(self, model: str | None = None) -> int:
        return _model_minimum(self.min_tokens_by_model, model, int(self.min_tokens))

    def partition(self, model: str | None) -> str | None:
        return model if self.per_model else None

    @property
    def shared_across_sessions(self) -> bool:
        return self.shared_heads

    def plan(
        self,
        tokenized: TokenizedRequest,
        request: Mapping[str, Any],
        layout: Sequence[LayoutEntry] | None = None,
        *,
        units: Callable[[int], int] | None = None,
    ) -> CachePlan:
        model = request.get("model")
        # the minimum is the provider's count of the prompt (ruler mode: ``units``), not the local one
        length = tokenized.prompt_len if units is None else units(tokenized.prompt_len)
        if length < self.min_cacheable_tokens(model if isinstance(model, str) else None):
            return CachePlan(tokenized.prompt_len)  # under the minimum: nothing is stored
        return super().plan(tokenized, request, layout, units=units)

    def cached_tokens(self, plan: CachePlan, prefix_tokens: int, exact_entries: Sequence[int] = ()) -> int:
        if not plan.entries:  # only a prompt under the minimum stores nothing: it reads nothing either
            return 0
        shared = max(0, min(prefix_tokens, plan.prompt_len))
        return shared if self.unit is None else _units(shared, self.unit)


# ---------------------------------------------------------------------------------------------------
# explicit breakpoints

#: The request key under which the analysis passes a breakpoint at the end of an opaque head (a system
#: prompt and tools the log does not show): ``{"tokens": N, "cache_control": {...}}``.
OPAQUE_HEAD_BREAKPOINT: Final[str] = "opaque_head_breakpoint"


def _cache_control(obj: object) -> Mapping[str, Any] | None:
    if isinstance(obj, Mapping):
        cc = obj.get("cache_control")
        if isinstance(cc, Mapping):
            return cc
    return None


def _marks_of(messages: Sequence[Any], start: int) -> list[tuple[int, Mapping[str, Any]]]:
    """(index, cache_control) of every mark on ``messages[start:]``: a message's own, then its content
    parts', in order. perf: a plain dict is told by its type (an isinstance against Mapping costs
    more than the rest of the loop)."""
    found: list[tuple[int, Mapping[str, Any]]] = []
    for i in range(start, len(messages)):
        message = messages[i]
        if type(message) is not dict and not isinstance(message, Mapping):
            continue
        cc = message.get("cache_control")
        if cc is not None and isinstance(cc, Mapping):
            found.append((i, cc))
        content = message.get("content")
        if type(content) is list:
            for part in content:
                if type(part) is dict or isinstance(part, Mapping):
                    cc = part.get("cache_control")
                    if cc is not None and isinstance(cc, Mapping):
                        found.append((i, cc))
    return found


class _MessageMarks:
    """The marks of the messages list read last (perf: a conversation's next call repeats its
    messages, the same objects as the loaders intern them, so only its new messages are read; the
    previous call's last message may have been marked since: then all but it are repeated)."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: tuple[list[Any], list[tuple[int, Mapping[str, Any]]]] | None = None

    def marks(self, messages: Sequence[Any]) -> list[tuple[int, Mapping[str, Any]]]:
        """:func:`_marks_of` ``messages`` from the start."""
        last = self._last  # one read: another thread may replace it
        known: list[tuple[int, Mapping[str, Any]]] = []
        start = 0
        if last is not None and type(messages) is list:
            before, marks = last
            k = len(before)
            for j in (k, k - 1) if len(messages) >= k else ():
                try:
                    same = j > 0 and messages[:j] == before[:j]
                except (ValueError, TypeError):  # no truth value (an array inside): read them all
                    same = False
                if same:
                    known, start = marks[: bisect.bisect_left(marks, j, key=operator.itemgetter(0))], j
                    break
        found = known + _marks_of(messages, start)
        if type(messages) is list:
            self._last = (messages, found)
        return found


_MESSAGE_MARKS: Final = _MessageMarks()


def _lookback_points(tokenized: TokenizedRequest, points: Sequence[int], lookback: int) -> set[int]:
    """The block boundaries (message ends, the header's end and the ``points``) where a breakpoint at
    each of ``points`` is looked up: the ``lookback`` last at or before it. perf: the boundaries are
    made a set and sorted in C, and each point found by bisection (no Python loop over the messages)."""
    if not points:
        return set()
    given = getattr(tokenized, "message_ends", None)
    ends = message_ends(tokenized) if given is None else given
    every = sorted({*ends, tokenized.header_len, *points})
    boundaries = every[bisect.bisect_right(every, 0) : bisect.bisect_right(every, tokenized.prompt_len)]
    lookup: set[int] = set()
    for pos in points:
        k = bisect.bisect_left(boundaries, pos)  # each point is a boundary
        lookup.update(boundaries[max(0, k + 1 - lookback) : k + 1])
    return lookup


@attrs.frozen(slots=True)
class BreakpointCache(CacheModel):
    """A cache written only at explicit breakpoints, read whole: what Anthropic's prompt caching does
    (the profile in ``promptkit/providers/anthropic.py`` gives its parameters and their sources).

    Rules:

    - **Breakpoints.** ``cache_control`` on a tool (→ end of the tool definitions), on a message or
      any of its content parts (→ end of that message; the top-level ``system`` of an Anthropic
      body is analyzed as a leading system message), or at the top level of the request (automatic
      caching → end of the prompt). Without any, and when the request has a layout, automatic
      breakpoints at the end of the stable head (the leading run of persona, system, identity, knowledge and context messages) and at the end
      of the history — what :func:`promptkit.anthropic_request` writes. Without either, nothing is
      cached.
    - **A head the log does not show.** ``request[OPAQUE_HEAD_BREAKPOINT]`` (``{"tokens": N,
      "cache_control": {...}}``, set by the analysis for a record whose opaque head ends in a
      breakpoint, :mod:`promptkit.formats.opaque_head`) → a breakpoint after the first N tokens. Cache
      prefixes are built in the order tools, system, messages, and a breakpoint caches the prefix up to
      it (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching): Claude Code marks the
      end of its system prompt, so a request whose messages changed (a compaction) still reads the
      tools + system prefix that any request with the same head wrote within the TTL.
    - **Entries are exact.** A call writes one entry per breakpoint (the prefix up to it) if that
      prefix has at least the model's minimum: ``min_tokens`` when given, else the longest model-name
      prefix of ``min_tokens_by_model``, else ``default_min_tokens``. A later call reads an entry
      only whole.
    - **Lookback.** For each breakpoint, the cache is checked at ``lookback`` (20) block boundaries:
      the breakpoint's and the 19 before it (blocks 30 down to 11 for a breakpoint on block 30); the
      longest live entry found there is read.
    - **TTL.** ``cache_control: {"ttl": NAME}`` keeps an entry the lifetime ``ttl_names`` gives NAME
      (none by default); without one, ``ttl`` (300 s); refreshed on every read.
    - **Writes.** Tokens from the cached point to the last eligible breakpoint are written
      (``cache_creation_input_tokens``).

    Approximation: blocks are counted per message (plus the tool definitions as one block); a
    breakpoint on a content part is placed at the end of its message, since the analysis locates
    messages, not parts.
    """

    name: ClassVar[str] = "breakpoint"
    min_tokens: int | None = attrs.field(default=None, validator=_non_negative_or_none)
    lookback: int = attrs.field(default=20, validator=_positive_int)
    ttl: float | None = attrs.field(default=300.0, validator=_non_negative_or_none)
    capacity: int | None = attrs.field(default=None, validator=_non_negative_or_none)
    delay: float = attrs.field(default=0.0, validator=_non_negative)
    auto_from_layout: bool = True
    min_tokens_by_model: tuple[tuple[str, int], ...] = attrs.field(default=(), converter=_minimums)
    default_min_tokens: int = attrs.field(default=0, validator=_non_negative)
    ttl_names: tuple[tuple[str, float], ...] = attrs.field(default=(), converter=_named_ttls)

    @property
    def exact_entries(self) -> bool:
        return True

    def min_cacheable_tokens(self, model: str | None = None) -> int:
        if self.min_tokens is not None:
            return int(self.min_tokens)
        return _model_minimum(self.min_tokens_by_model, model, int(self.default_min_tokens))

    @property
    def no_write_reason(self) -> str:
        return "no cache_control breakpoint and no layout to place automatic ones: nothing is cached for them"

    def _ttl_of(self, cc: Mapping[str, Any]) -> float | None:
        ttl = cc.get("ttl")
        for name, seconds in self.ttl_names:
            if ttl == name:
                return seconds
        return self.ttl

    def breakpoints(
        self,
        tokenized: TokenizedRequest,
        request: Mapping[str, Any],
        layout: Sequence[LayoutEntry] | None = None,
    ) -> list[tuple[int, float | None]]:
        """(position, ttl) of each cache breakpoint of the request, sorted, positions in tokens."""
        given = getattr(tokenized, "message_ends", None)
        ends = message_ends(tokenized) if given is None else given  # perf: a tuple read where marked
        messages = request.get("messages") or []
        points: dict[int, float | None] = {}

        def add(pos: int, ttl: float | None) -> None:
            if 0 < pos <= tokenized.prompt_len:
                old = points.get(pos)
                points[pos] = ttl if old is None or (ttl is not None and ttl > old) else old

        tools = request.get("tools") or []
        for tool in tools if isinstance(tools, list) else []:
            cc = _cache_control(tool)
            if cc is not None:
                add(tokenized.header_len, self._ttl_of(cc))
        for i, cc in _MESSAGE_MARKS.marks(messages):
            add(int(ends[i]), self._ttl_of(cc))
        top = _cache_control(request)
        if top is not None:
            add(tokenized.prompt_len, self._ttl_of(top))
        opaque = request.get(OPAQUE_HEAD_BREAKPOINT)  # a system prompt the log does not show, marked
        mark = _cache_control(opaque)
        if mark is not None and isinstance(opaque, Mapping) and isinstance(opaque.get("tokens"), int):
            add(int(opaque["tokens"]), self._ttl_of(mark))
        if not points and layout is not None and self.auto_from_layout:
            ends = message_ends(tokenized)
            aligned = layout[: len(ends)]
            head = head_end(aligned)  # the leading run of head slots
            last = last_history_index(aligned, head)
            if head:
                add(ends[head - 1], self.ttl)
            if last is not None:
                add(ends[last], self.ttl)
        return sorted(points.items())

    def plan(
        self,
        tokenized: TokenizedRequest,
        request: Mapping[str, Any],
        layout: Sequence[LayoutEntry] | None = None,
        *,
        units: Callable[[int], int] | None = None,
    ) -> CachePlan:
        model = request.get("model")
        minimum = self.min_cacheable_tokens(model if isinstance(model, str) else None)
        bps = self.breakpoints(tokenized, request, layout)
        lookup = _lookback_points(tokenized, [pos for pos, _ in bps], self.lookback)
        # a breakpoint's prefix is held to the minimum in the provider's units (ruler mode: ``units``)
        entries = tuple(
            CacheEntry(pos, ttl, True)
            for pos, ttl in bps
            if (pos if units is None else units(pos)) >= minimum
        )
        return CachePlan(tokenized.prompt_len, entries, tuple(sorted(lookup)), tuple(p for p, _ in bps))

    def cached_tokens(self, plan: CachePlan, prefix_tokens: int, exact_entries: Sequence[int] = ()) -> int:
        points = set(plan.lookup_points or ())
        hits = [n for n in exact_entries if n in points and n <= min(prefix_tokens, plan.prompt_len)]
        return max(hits, default=0)

    def write_tokens(self, plan: CachePlan, cached_tokens: int) -> int | None:
        last = max((e.length for e in plan.entries), default=0)
        return max(0, last - cached_tokens)


def message_ends(tokenized: TokenizedRequest) -> list[int]:
    """Token offset just past each message (``message_ends`` when the tokenizer gives them)."""
    ends = getattr(tokenized, "message_ends", None)
    if ends is not None:
        return [int(e) for e in ends]
    starts = list(tokenized.message_starts)
    order = sorted(range(len(starts)), key=lambda i: (starts[i], i))
    out = [0] * len(starts)
    for k, i in enumerate(order):
        out[i] = starts[order[k + 1]] if k + 1 < len(order) else tokenized.prompt_len
    return out


# ---------------------------------------------------------------------------------------------------
# registry

CACHE_MODELS: dict[str, Callable[..., CacheModel]] = {
    "exact": ExactCache,
    "unit-prefix": UnitPrefixCache,
    "stepped-prefix": SteppedPrefixCache,
    "breakpoint": BreakpointCache,
    "paged-block": PagedBlockCache,
    "prefix": PrefixCache,
}

#: The classes' names before they were named after their mechanism: importable for one release, with
#: a DeprecationWarning (a provider's own parameters come from its profile, not from these classes).
_DEPRECATED: Final[Mapping[str, str]] = {
    "DeepSeekCache": "UnitPrefixCache",
    "OpenAICache": "SteppedPrefixCache",
    "AnthropicCache": "BreakpointCache",
    "VLLMCache": "PagedBlockCache",
}


def __getattr__(name: str) -> Any:
    new = _DEPRECATED.get(name)
    if new is None:
        raise UnknownAttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"promptkit.tokens.cache_models.{name} is deprecated: it is {new}, named after its mechanism; "
        "a provider's cache model with the provider's parameters is get_provider(NAME).new_cache_model()",
        DeprecationWarning,
        stacklevel=2,
    )
    return globals()[new]


def register_cache_model(name: str, factory: Callable[..., CacheModel]) -> None:
    """Make ``get_cache_model(name, **overrides)`` build ``factory(**overrides)``.

    Raises ValueError when ``name`` is already registered.
    """
    if name in CACHE_MODELS:
        raise UsageError(f"cache model {name!r} is already registered")
    CACHE_MODELS[name] = factory


def get_cache_model(name: str | CacheModel, **overrides: Any) -> CacheModel:
    """A cache model by mechanism name (:data:`CACHE_MODELS`: ``exact``, ``unit-prefix``,
    ``stepped-prefix``, ``breakpoint``, ``paged-block``, ``prefix``, and those registered), with its
    parameters overridden; a :class:`CacheModel` instance passes through (``attrs.evolve``-d with the
    overrides). A provider's name is the providers' to resolve
    (:func:`promptkit.providers.resolve.resolve_cache_model`).

    Example::

        >>> get_cache_model("unit-prefix", ttl=3600)
        UnitPrefixCache(unit=64, ttl=3600, capacity=None, delay=0.0, include_completion=True)
        >>> get_cache_model("paged-block", block_size=32).block_size
        32
    """
    if isinstance(name, CacheModel):
        try:
            return attrs.evolve(name, **overrides) if overrides else name  # type: ignore[misc]
        except TypeError as exc:
            raise UsageError(f"cache model {name.name!r}: {exc}") from None
    if not isinstance(name, str):
        raise UsageError(f"cache_model: expected a name or a CacheModel, got {type(name).__name__}")
    factory = CACHE_MODELS.get(name)
    if factory is None:
        raise UsageError(
            f"cache_model: unknown cache model {name!r}; known: {', '.join(CACHE_MODELS)} (a provider's "
            "name is resolved by promptkit.providers.resolve.resolve_cache_model)"
        )
    try:
        return factory(**overrides)
    except TypeError as exc:
        raise UsageError(f"cache model {name!r}: {exc}") from None
