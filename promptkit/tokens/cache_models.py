"""Cache models: each provider's prefix-cache rules, as small documented classes.

A cache model answers three questions about one call, all in tokens of the analyzed rendering:

1. what the call *writes* to the cache (:meth:`CacheModel.plan` returns a :class:`CachePlan` with the
   entries: how many tokens, which time-to-live, whether any prefix of them can be read or only the
   exact length — Anthropic's breakpoints);
2. how many prompt tokens a later call gets from the cache, given the longest prefix it shares with
   live cached content and the exact entries on that prefix (:meth:`CacheModel.cached_tokens`);
3. how many tokens the call writes, when the provider reports it (:meth:`CacheModel.write_tokens`).

The views of :mod:`promptkit.analysis.engine` and the radix cache of :mod:`promptkit.analysis.simulator`
do the matching; the models only apply the rules. Every model takes ``ttl`` (seconds an entry lives
after its last use; None = until evicted), ``capacity`` (tokens the simulated cache holds, LRU
eviction; None = unbounded) and ``delay`` (seconds after a call before its entry can be read).

=============  ==================================================================================
``exact``      any prefix of anything seen (prompt and answer), token by token: the upper bound
``deepseek``   64-token units; an entry covers the prompt *and* the generated answer
``openai``     nothing under 1024 tokens, then 128-token steps; prompt only
``anthropic``  explicit ``cache_control`` breakpoints (or automatic ones from a layout), exact
               entries, per-model minimum length, 20-block lookback, 5-minute / 1-hour TTL, writes
``vllm``       full blocks of 16 tokens (prompt and answer); the last prompt token is recomputed
=============  ==================================================================================

Example::

    >>> m = get_cache_model("deepseek")
    >>> m.cached_tokens(CachePlan(prompt_len=3049, entries=()), prefix_tokens=3013)
    3008
    >>> get_cache_model("openai").cached_tokens(CachePlan(prompt_len=5000, entries=()), prefix_tokens=1300)
    1280
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final

import attrs

from promptkit.errors import UsageError
from promptkit.layout import HEAD_SLOTS

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.layout import LayoutEntry
    from promptkit.tokens.tokenize import TokenizedRequest

__all__ = [
    "ANTHROPIC_MIN_CACHEABLE_TOKENS",
    "CACHE_MODELS",
    "OPAQUE_HEAD_BREAKPOINT",
    "AnthropicCache",
    "CacheEntry",
    "CacheModel",
    "CachePlan",
    "DeepSeekCache",
    "ExactCache",
    "OpenAICache",
    "PrefixCache",
    "VLLMCache",
    "anthropic_min_cacheable_tokens",
    "get_cache_model",
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
class DeepSeekCache(CacheModel):
    """DeepSeek's context cache (on disk, per account, across sessions).

    Rule: cached = the shared prefix rounded *down* to whole ``unit`` s (64 tokens), never more than
    the prompt. A call's entry covers its prompt **and its generated answer** (``include_completion``),
    so the next call of a conversation hits through the previous answer: pvlib-1072 call 2 had
    prompt 2942 + answer 71 = 3013 tokens, and call 3 hit 3008 = 47 × 64.

    DeepSeek clears unused entries "within a few hours to a few days" and persists them best effort;
    the default ``ttl`` is None (no expiry) and ``delay`` 0: the real logs show no delay that
    separates the calls that found the previous entry from those that did not (see the README), so
    the model predicts what the cache *can* serve — an upper bound on a best-effort cache.
    """

    name: ClassVar[str] = "deepseek"
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


@attrs.frozen(slots=True)
class OpenAICache(CacheModel):
    """OpenAI's automatic prompt caching.

    Rule: nothing is cached under ``min_tokens`` (1024) shared tokens; above, the cached count grows in
    ``step`` s (128): cached = 1024 + 128 · ⌊(shared − 1024) / 128⌋, never more than the prompt. Only
    the prompt is cached (not the answer). Entries live ``ttl`` seconds after last use (default 600:
    "5 to 10 minutes of inactivity, up to an hour off-peak"); a request with
    ``prompt_cache_retention: "24h"`` keeps its entry 24 hours.
    """

    name: ClassVar[str] = "openai"
    min_tokens: int = attrs.field(default=1024, validator=_positive_int)
    step: int = attrs.field(default=128, validator=_positive_int)
    ttl: float | None = attrs.field(default=600.0, validator=_non_negative_or_none)
    capacity: int | None = attrs.field(default=None, validator=_non_negative_or_none)
    delay: float = attrs.field(default=0.0, validator=_non_negative)

    def entry_ttl(self, request: Mapping[str, Any]) -> float | None:
        if request.get("prompt_cache_retention") == "24h":
            return 24 * 3600.0
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
class VLLMCache(CacheModel):
    """vLLM's automatic prefix caching (and other paged-KV servers).

    Rule: only full blocks of ``block_size`` (16) tokens are cached, for the prompt and the generated
    tokens; the last prompt token is always recomputed (its logits are needed), so
    cached = ⌊min(shared, prompt − 1) / 16⌋ · 16. Blocks stay until evicted: set ``capacity`` to the
    KV cache size in tokens.
    """

    name: ClassVar[str] = "vllm"
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


def _minimums(value: Any) -> tuple[tuple[str, int], ...]:
    """``min_tokens_by_model`` as sorted ``(model prefix, tokens)`` pairs (a mapping is accepted)."""
    items = value.items() if isinstance(value, Mapping) else value
    pairs = tuple(sorted((str(k), int(v)) for k, v in items))
    for prefix, tokens in pairs:
        if tokens < 0:
            raise UsageError(
                f"PrefixCache.min_tokens_by_model[{prefix!r}]: expected a count >= 0, got {tokens}"
            )
    return pairs


@attrs.frozen(slots=True)
class PrefixCache(CacheModel):
    """An automatic prefix cache described by its parameters: what most providers document (Gemini's
    implicit cache, DashScope, Zhipu, MiniMax, Moonshot) and the generic rules for an unknown one.

    Rules: a call whose prompt is shorter than the model's minimum (``min_tokens_by_model``, longest
    matching model-name prefix, else ``min_tokens``) neither reads nor writes; otherwise cached = the
    shared prefix rounded down to whole ``unit`` s (None: any length), never more than the prompt.
    ``include_completion``: whether an entry covers the generated answer too. The parameters of each
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

    @property
    def includes_completion(self) -> bool:
        return self.include_completion

    @property
    def cache_unit(self) -> int | None:
        return self.unit

    def min_cacheable_tokens(self, model: str | None = None) -> int:
        if model:
            bare = model.rsplit("/", 1)[-1].lower()
            best = max((p for p, _ in self.min_tokens_by_model if bare.startswith(p)), key=len, default=None)
            if best is not None:
                return dict(self.min_tokens_by_model)[best]
        return int(self.min_tokens)

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
# Anthropic

#: Minimum cacheable prompt length per Claude model (prefix of the model id → tokens), from Anthropic's
#: prompt-caching documentation (checked 2026): a breakpoint whose prefix is shorter writes nothing.
#: Longest matching prefix wins; unknown models get 1024. Override with ``AnthropicCache(min_tokens=...)``.
ANTHROPIC_MIN_CACHEABLE_TOKENS: Final[Mapping[str, int]] = {
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
    "claude-sonnet-4-6": 2048,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
    "claude-haiku-3": 2048,
    "claude-sonnet-4-5": 1024,
    "claude-opus-4-1": 1024,
    "claude-opus-4": 1024,
    "claude-sonnet-4": 1024,
    "claude-3-7-sonnet": 1024,
    "claude-3-5-sonnet": 1024,
    "claude-3-opus": 1024,
}


def anthropic_min_cacheable_tokens(model: str | None) -> int:
    """The minimum cacheable prompt length of Claude ``model`` (see :data:`ANTHROPIC_MIN_CACHEABLE_TOKENS`).

    Example::

        >>> anthropic_min_cacheable_tokens("claude-3-5-haiku-20241022"), anthropic_min_cacheable_tokens("claude-sonnet-4-5")
        (2048, 1024)
    """
    if not model:
        return 1024
    name = model.rsplit("/", 1)[-1]
    best = max((p for p in ANTHROPIC_MIN_CACHEABLE_TOKENS if name.startswith(p)), key=len, default=None)
    return 1024 if best is None else ANTHROPIC_MIN_CACHEABLE_TOKENS[best]


_TTL_NAMES: Final[Mapping[str, float]] = {"5m": 300.0, "1h": 3600.0}

#: The request key under which the analysis passes a breakpoint at the end of an opaque head (a system
#: prompt and tools the log does not show): ``{"tokens": N, "cache_control": {...}}``.
OPAQUE_HEAD_BREAKPOINT: Final[str] = "opaque_head_breakpoint"

#: Layout slots of the stable head: the leading run of messages in these slots.


def _cache_control(obj: object) -> Mapping[str, Any] | None:
    if isinstance(obj, Mapping):
        cc = obj.get("cache_control")
        if isinstance(cc, Mapping):
            return cc
    return None


@attrs.frozen(slots=True)
class AnthropicCache(CacheModel):
    """Anthropic's prompt caching: explicit breakpoints, exact entries, lookback, TTLs, writes.

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
      breakpoint, :mod:`promptkit.analysis.opaque`) → a breakpoint after the first N tokens. Cache
      prefixes are built in the order tools, system, messages, and a breakpoint caches the prefix up to
      it (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching): Claude Code marks the
      end of its system prompt, so a request whose messages changed (a compaction) still reads the
      tools + system prefix that any request with the same head wrote within the TTL.
    - **Entries are exact.** A call writes one entry per breakpoint (the prefix up to it) if that
      prefix has at least ``min_tokens`` tokens (per model, :func:`anthropic_min_cacheable_tokens`
      unless given). A later call reads an entry only whole.
    - **Lookback.** For each breakpoint, the cache is checked at ``lookback`` (20) block boundaries:
      the breakpoint's and the 19 before it (blocks 30 down to 11 for a breakpoint on block 30); the
      longest live entry found there is read.
    - **TTL.** ``cache_control: {"ttl": "1h"}`` keeps an entry an hour, the default 5 minutes
      (``ttl``), refreshed on every read.
    - **Writes.** Tokens from the cached point to the last eligible breakpoint are written
      (``cache_creation_input_tokens``).

    Approximation: blocks are counted per message (plus the tool definitions as one block); a
    breakpoint on a content part is placed at the end of its message, since the analysis locates
    messages, not parts.
    """

    name: ClassVar[str] = "anthropic"
    min_tokens: int | None = attrs.field(default=None, validator=_non_negative_or_none)
    lookback: int = attrs.field(default=20, validator=_positive_int)
    ttl: float | None = attrs.field(default=300.0, validator=_non_negative_or_none)
    capacity: int | None = attrs.field(default=None, validator=_non_negative_or_none)
    delay: float = attrs.field(default=0.0, validator=_non_negative)
    auto_from_layout: bool = True

    @property
    def exact_entries(self) -> bool:
        return True

    def min_cacheable_tokens(self, model: str | None = None) -> int:
        return self.min_tokens if self.min_tokens is not None else anthropic_min_cacheable_tokens(model)

    @property
    def no_write_reason(self) -> str:
        return "no cache_control breakpoint and no layout to place automatic ones: nothing is cached for them"

    def _ttl_of(self, cc: Mapping[str, Any]) -> float | None:
        ttl = cc.get("ttl")
        if isinstance(ttl, str) and ttl in _TTL_NAMES:
            return _TTL_NAMES[ttl]
        return self.ttl

    def breakpoints(
        self,
        tokenized: TokenizedRequest,
        request: Mapping[str, Any],
        layout: Sequence[LayoutEntry] | None = None,
    ) -> list[tuple[int, float | None]]:
        """(position, ttl) of each cache breakpoint of the request, sorted, positions in tokens."""
        ends = _message_ends(tokenized)
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
        for i, message in enumerate(messages):
            if not isinstance(message, Mapping):
                continue
            ccs = [_cache_control(message)]
            content = message.get("content")
            if isinstance(content, list):
                ccs += [_cache_control(part) for part in content]
            for cc in ccs:
                if cc is not None:
                    add(ends[i], self._ttl_of(cc))
        top = _cache_control(request)
        if top is not None:
            add(tokenized.prompt_len, self._ttl_of(top))
        opaque = request.get(OPAQUE_HEAD_BREAKPOINT)  # a system prompt the log does not show, marked
        mark = _cache_control(opaque)
        if mark is not None and isinstance(opaque, Mapping) and isinstance(opaque.get("tokens"), int):
            add(int(opaque["tokens"]), self._ttl_of(mark))
        if not points and layout is not None and self.auto_from_layout:
            head: list[int] = []  # the leading run of head slots
            for i, s in enumerate(layout[: len(ends)]):
                if s.slot not in HEAD_SLOTS:
                    break
                head.append(ends[i])
            history = [ends[i] for i, s in enumerate(layout[: len(ends)]) if s.slot == "history"]
            if head:
                add(max(head), self.ttl)
            if history:
                add(max(history), self.ttl)
        return sorted(points.items())

    def plan(
        self,
        tokenized: TokenizedRequest,
        request: Mapping[str, Any],
        layout: Sequence[LayoutEntry] | None = None,
        *,
        units: Callable[[int], int] | None = None,
    ) -> CachePlan:
        minimum = (
            self.min_tokens
            if self.min_tokens is not None
            else anthropic_min_cacheable_tokens(request.get("model"))
        )
        bps = self.breakpoints(tokenized, request, layout)
        boundaries = sorted(
            {p for p in (*_message_ends(tokenized), tokenized.header_len) if 0 < p <= tokenized.prompt_len}
            | {pos for pos, _ in bps}
        )
        lookup: set[int] = set()
        for pos, _ in bps:
            k = boundaries.index(pos)
            lookup.update(boundaries[max(0, k + 1 - self.lookback) : k + 1])
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


def _message_ends(tokenized: TokenizedRequest) -> list[int]:
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
    "deepseek": DeepSeekCache,
    "openai": OpenAICache,
    "anthropic": AnthropicCache,
    "vllm": VLLMCache,
    "prefix": PrefixCache,
}


def register_cache_model(name: str, factory: Callable[..., CacheModel]) -> None:
    """Make ``get_cache_model(name, **overrides)`` build ``factory(**overrides)``.

    Raises ValueError when ``name`` is already registered.
    """
    if name in CACHE_MODELS:
        raise UsageError(f"cache model {name!r} is already registered")
    CACHE_MODELS[name] = factory


def get_cache_model(name: str | CacheModel, **overrides: Any) -> CacheModel:
    """A cache model by name (``exact``, ``deepseek``, ``openai``, ``anthropic``, ``vllm``), with its
    parameters overridden; a :class:`CacheModel` instance passes through (``attrs.evolve``-d with the
    overrides).

    Example::

        >>> get_cache_model("deepseek", ttl=3600)
        DeepSeekCache(unit=64, ttl=3600, capacity=None, delay=0.0, include_completion=True)
        >>> get_cache_model("vllm", block_size=32).block_size
        32
    """
    if isinstance(name, CacheModel):
        return attrs.evolve(name, **overrides) if overrides else name  # type: ignore[misc]
    if not isinstance(name, str):
        raise UsageError(f"cache_model: expected a name or a CacheModel, got {type(name).__name__}")
    factory = CACHE_MODELS.get(name)
    if factory is None:
        raise UsageError(f"cache_model: unknown cache model {name!r}; known: {', '.join(CACHE_MODELS)}")
    try:
        return factory(**overrides)
    except TypeError as exc:
        raise UsageError(f"cache model {name!r}: {exc}") from None
