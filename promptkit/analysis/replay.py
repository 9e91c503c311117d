"""Stage 2: the replay. Requests go through the provider's cache one after the other, and each comes
out with the columns its cache outcome gives: tokens shared with what was cached, read and written, the
request it read from, the divergence token, and the facts :mod:`promptkit.analysis.causes` reads.

One :meth:`Replayer.step` serves every plan: the local plan steps each request as it tokenizes it
(:mod:`promptkit.analysis.plans.local`), the coordinator of a parallel simulated view steps the requests
the workers tokenized, read back from the wire (:mod:`promptkit.analysis.plans.coordinator`). The cache
is a :class:`~promptkit.analysis.simulator.CacheSimulator` shared by every session (the simulated view),
or each session's previous request (the consecutive view,
:func:`~promptkit.analysis.simulator.consecutive_outcome`). A request whose prompt left the cached
content is named as a :class:`~promptkit.analysis.wire.Divergent` for stage 3
(:mod:`promptkit.analysis.attribute`). In ruler mode (a provider whose tokenizer is not public) the step
also places the row's positions in the provider's units (:func:`~promptkit.analysis.ruler.place_row`).

The slow, readable twin every fast path is checked against is
``tests/analysis/simulator_reference.py``.
"""

from __future__ import annotations

import math
import operator
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import attrs

from promptkit.analysis.columns import OUTCOME_COLUMNS
from promptkit.analysis.ruler import Ruler, local_basis, place_row, ruler_of, stays_local
from promptkit.analysis.simulator import CacheSimulator, consecutive_outcome
from promptkit.analysis.wire import EXCERPT_TOKENS, Divergent
from promptkit.tokens.cache_models import CacheEntry, CachePlan

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from promptkit.analysis.prepare import RequestLocal
    from promptkit.analysis.simulator import CacheOutcome
    from promptkit.tokens.cache_models import CacheModel
    from promptkit.tokens.tokenize import TokenizedRequest

__all__ = [
    "EXCERPT_SOURCES",
    "FORGET_AFTER",
    "OUTSIDE_SOURCE",
    "RULED",
    "CauseFacts",
    "Replayer",
    "RequestFacts",
    "SourceFacts",
    "StoredRequest",
    "find_source",
    "outcome_values",
    "outside_head",
    "stored_tokens",
    "write_1h",
]

#: How long (seconds) the simulated view remembers content after its last entry expired, to tell an
#: expiry (``ttl_expiry``, with the idle gap) from content never stored: a call that comes back to
#: content expired longer ago reads it as never stored. It bounds what a replay over a long history
#: holds (the live entries and a day of expired content, not every prompt ever sent).
FORGET_AFTER: Final[float] = 86_400.0

#: How many recent requests' tokens are kept to show what the cache held at a divergence.
EXCERPT_SOURCES: Final[int] = 512

#: The source a session's first request reads its head from when the cache is shared across sessions
#: (:attr:`~promptkit.tokens.cache_models.CacheModel.shared_across_sessions`): what a request outside the
#: log wrote.
OUTSIDE_SOURCE: Final[str] = "(outside the log)"

#: Ruler mode: the row's columns that need no cache outcome but that ruler mode places with the
#: outcome (the replay knows them: the plan's prompt, the head's end, no basis yet).
RULED: Final = ("prompt_tokens", "head_end_tokens", "position_basis")


class StoredRequest(NamedTuple):
    """What a session's previous request left in the consecutive view's cache (the ``stored``
    argument of :func:`~promptkit.analysis.simulator.consecutive_outcome`)."""

    tokens: np.ndarray
    plan: CachePlan
    at: float | None
    source: str


class RequestFacts(NamedTuple):
    """What the replay keeps of a request that a later one may read from: its model name, time, the
    tokens it stored and its record's position (perf: a tuple, made once per request)."""

    model: str | None
    at: float | None
    stored_tokens: int
    pos: int  # its record's position


class CauseFacts(NamedTuple):
    """The facts :mod:`promptkit.analysis.causes` reads from a row: the idle gap before a lost entry, the
    tokens its source stored, the tokens a model switch made unreadable, the class of the change (a
    model switch; a change of the prompt is classified by stage 3)."""

    idle_seconds: float | None
    source_stored_tokens: int | None
    model_switch_tokens: int | None
    change_class: str | None
    change_detail: str | None


class SourceFacts(NamedTuple):
    """What :func:`find_source` found: the outcome (with nothing read where the model switched), the
    id of the request read from (or whose content was lost) and its facts, the tokens a model switch
    made unreadable and the idle gap before a lost entry."""

    outcome: CacheOutcome
    source_id: str | None
    source: RequestFacts | None
    switched: int | None
    idle: float | None


def find_source(
    facts: Mapping[str, RequestFacts],
    model: CacheModel,
    outcome: CacheOutcome,
    plan: CachePlan,
    model_name: str | None,
    now: float | None,
    prev: StoredRequest | None = None,
) -> SourceFacts:
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
    return SourceFacts(outcome, src_id, src, switched, idle)


def outside_head(tokens: np.ndarray, head_end: int, now: float | None) -> StoredRequest | None:
    """What a request outside the log may have left in a cache shared across sessions: the first
    ``head_end`` tokens of ``tokens`` (its head: system prompt, tools, an opaque head), stored as one
    entry (:data:`OUTSIDE_SOURCE`); None when the request has no head."""
    if head_end <= 0:
        return None
    return StoredRequest(tokens[:head_end], CachePlan(head_end, (CacheEntry(head_end),)), now, OUTSIDE_SOURCE)


def write_1h(plan: Any, cached: int) -> int:
    """Tokens of a call's cache write that fall under a 1-hour entry (Anthropic ``ttl: "1h"``): the span
    from the previous entry (or the cached point) to each 1-hour entry."""
    total, start = 0, cached
    for entry in sorted(plan.entries, key=lambda e: e.length):
        if entry.length > start:
            if entry.ttl is not None and entry.ttl >= 3600:
                total += entry.length - start
            start = entry.length
    return total


def stored_tokens(plan: CachePlan) -> int:
    """The tokens a request's plan stores: its longest entry."""
    return max((e.length for e in plan.entries), default=0)


def outcome_values(
    plan: CachePlan, outcome: CacheOutcome, token: int | None, causes: CauseFacts
) -> tuple[Any, ...]:
    """The columns of a request's row that the cache's outcome and the causes' facts give, in
    :data:`~promptkit.analysis.columns.OUTCOME_COLUMNS` order, ``token`` the divergence token (None:
    the prompt did not leave the cached content); the divergence's message and excerpts (stage 3,
    :data:`~promptkit.analysis.attribute.ATTRIBUTED`) are None here."""
    prompt_len = plan.prompt_len
    cached, write = outcome.cached_tokens, outcome.write_tokens
    return (
        min(outcome.prefix_tokens, prompt_len),  # prefix_tokens
        cached,  # predicted_cached_tokens
        cached / prompt_len if prompt_len > 0 else None,  # hit_ratio
        None,  # divergence_message
        None,  # divergence_role
        None,  # divergence_anchor
        None,  # divergence_key
        write,  # predicted_cache_write_tokens
        token,  # divergence_token
        outcome.source,  # cached_source
        None,  # divergence_cached_text
        None,  # divergence_prompt_text
        None,  # divergence_context_text
        outcome.unexpired_cached_tokens,
        outcome.unevicted_cached_tokens,
        causes.idle_seconds,
        causes.source_stored_tokens,
        causes.model_switch_tokens,
        causes.change_class,
        causes.change_detail,
        write_1h(plan, cached) if write is not None else None,  # predicted_cache_write_1h_tokens
    )


class Replayer:
    """Stage 2 over one provider group: the cache and what later requests look back at, a request at a
    time (:meth:`step`), in the order the view asks for (time in the simulated view, position in the
    consecutive one).

    ``view``: ``simulated`` (one :class:`~promptkit.analysis.simulator.CacheSimulator` over every
    session) or ``consecutive`` (each session's previous request); ``ruled``: ruler mode (the local
    tokenizer is not the provider's: :data:`columns` then end with :data:`RULED`); ``offsets``: where
    a step is not handed its request's message offsets, the function that gives them for its tokens
    (the coordinator's :meth:`~promptkit.analysis.wire.DeltaReader.with_offsets`).

    After a step, :attr:`divergent` names its request when its prompt left the cached content (None
    else), and :attr:`released` is the position of the request the consecutive view no longer looks
    back at (-1: none), whose messages the caller may let go of.

    >>> import numpy as np
    >>> from promptkit.tokens.cache_models import CachePlan, CacheEntry, get_cache_model
    >>> replay = Replayer(get_cache_model("exact"), "consecutive")
    >>> plan = CachePlan(4, (CacheEntry(4),))
    >>> first = replay.step(0, "s", 0, None, None, np.arange(4), plan)
    >>> dict(zip(replay.columns, replay.step(1, "s", 1, None, None, np.arange(4), plan)))["predicted_cached_tokens"]
    4
    """

    __slots__ = (
        "_forgot", "_offsets", "_read_at", "_values", "columns", "divergent", "facts", "model", "previous", "recent",
        "released", "rulers", "session_tokens", "sim", "sims", "steps", "writes_nothing",
    )  # fmt: skip

    def __init__(
        self,
        model: CacheModel,
        view: str,
        *,
        ruled: bool = False,
        offsets: Callable[[np.ndarray], TokenizedRequest] | None = None,
    ) -> None:
        self.model = model
        # memory: perf: the cache keeps the prompts' read-only token arrays (views of each session's token
        # buffer) by reference, as the session's buffer holds them anyway: a run is not copied
        self.sim = CacheSimulator(model, share_tokens=True) if view == "simulated" else None
        # a per-model cache (CacheModel.partition): one simulator per model, the first one ``sim``
        self.sims: dict[str | None, CacheSimulator] = {} if self.sim is None else {None: self.sim}
        # consecutive: each session's previous request (per model for a per-model cache)
        self.previous: dict[Hashable, StoredRequest] = {}
        self.session_tokens: dict[Hashable, np.ndarray] = {}  # simulated: each session's previous tokens
        self.facts: dict[str, RequestFacts] = {}  # request id -> what a later request looks back at
        self.recent: OrderedDict[str, np.ndarray] = OrderedDict()  # request id -> tokens (excerpts)
        self.rulers: dict[str, Ruler] | None = {} if ruled else None  # request id -> its anchors
        self.columns: tuple[str, ...] = OUTCOME_COLUMNS + (RULED if ruled else ())
        self.steps = 0  # requests stepped: the row of the next one
        self.writes_nothing = 0  # requests whose plan stores no cache entry
        self.divergent: Divergent | None = None
        self.released = -1
        self._offsets = offsets
        self._forgot = -math.inf  # when content expired FORGET_AFTER before was last forgotten
        # perf: bound once, not looked up per request
        self._values = operator.itemgetter(*self.columns)
        # ruler mode: where it reads the outcome's figures in the tuple of outcome_values
        self._read_at = tuple(
            OUTCOME_COLUMNS.index(c)
            for c in ("prefix_tokens", "predicted_cached_tokens", "unexpired_cached_tokens")
        )

    def step(
        self,
        pos: int,
        session: str,
        index: int,
        now: float | None,
        model_name: str | None,
        tokens: np.ndarray,
        plan: CachePlan,
        local: RequestLocal | None = None,
        usage: Any = None,
        events: str | None = None,
        think: str | None = None,
        *,
        tok: TokenizedRequest | None = None,
        known: tuple[np.ndarray, int] | None = None,
        shared: int | None = None,
    ) -> tuple[Any, ...]:
        """Replay the request at ``pos`` (``index`` of ``session``, at time ``now``, None: untimed) and
        return its row's :attr:`columns`: ``tokens`` and ``plan`` its prompt's, ``local`` its
        request-local facts, ``usage`` and ``events`` its reported usage and log events (ruler mode
        places its positions with them), ``think`` its thinking render. ``tok``: its tokens with their
        message offsets where they are at hand. perf: ``known``, a hint that its first ``k`` tokens are
        those of an earlier array (``(array, k)``, the tokenizer's resume), or ``shared``, how many
        first tokens it shares with its session's previous request, exactly (the wire's deltas)."""
        if not plan.entries:
            self.writes_nothing += 1
        source_id = f"{session}#{index}"
        prev = None
        part = self.model.partition(model_name)
        key: Hashable = session if part is None else (session, part)  # the session's part of the cache
        if self.sim is not None:
            if shared is None or part is not None:  # the wire's count is against the session's last call
                shared = self._shared_with_previous(key, tokens, known)
            sim = self.sims.get(part)
            if sim is None:  # a model's first request: its own cache
                sim = self.sims[part] = CacheSimulator(self.model, share_tokens=True)
            if now is not None and now - self._forgot > FORGET_AFTER / 4:  # memory: amortized
                for each in self.sims.values():
                    each.forget_expired(now - FORGET_AFTER)
                self._forgot = now
            outcome = sim.step(tokens, plan, now, source_id, session=key, shared=shared)
        else:
            prev = self.previous.get(key)
            if prev is None and local is not None and self.model.shared_across_sessions:
                prev = outside_head(tokens, local.head_end, now)
            # perf: the prompt's first tokens are the previous request's (the tokenizer resumed from it):
            # the lookup compares from there on only
            hint = known if known is not None and prev is not None and known[0] is prev.tokens else None
            outcome = consecutive_outcome(self.model, prev, tokens, plan, now, known=hint)
            self.previous[key] = StoredRequest(tokens, plan, now, source_id)
        found = find_source(self.facts, self.model, outcome, plan, model_name, now, prev)
        outcome, src = found.outcome, found.source
        self.facts[source_id] = RequestFacts(model_name, now, stored_tokens(plan), pos)
        prompt_len = plan.prompt_len
        prefix = min(outcome.prefix_tokens, prompt_len)
        token = None
        self.divergent = None
        if outcome.diverged and prefix < prompt_len:
            token = prefix
            against = src if found.switched is None else None
            self.divergent = self._diverged(pos, think, tokens, tok, outcome.source, against, prefix, prev)
        self._remember(source_id, tokens, prev)
        change: tuple[str | None, str | None] = (None, None)
        if found.switched is not None:
            change = ("model_switch", f"{src.model if src else None} -> {model_name}")
        causes = CauseFacts(
            found.idle, src.stored_tokens if src is not None else None, found.switched, *change
        )
        values = outcome_values(plan, outcome, token, causes)
        if self.rulers is not None:
            assert local is not None  # ruler mode places the head the request's plan marks
            values = self._place(values, source_id, found.source_id, plan, local, usage, events, prev)
        self.steps += 1
        return values

    def _shared_with_previous(
        self, session: Hashable, tokens: np.ndarray, known: tuple[np.ndarray, int] | None
    ) -> int:
        """How many first tokens ``tokens`` shares with its session's previous request: known from the
        tokenizer's resume (``known``), and compared from there on."""
        import numpy as np

        prev = self.session_tokens.get(session)
        self.session_tokens[session] = tokens
        if prev is None:
            return 0
        k = min(known[1], len(prev), len(tokens)) if known is not None and known[0] is prev else 0
        n = min(len(prev), len(tokens))
        differ = np.flatnonzero(np.asarray(prev[k:n]) != np.asarray(tokens[k:n]))
        return k + (int(differ[0]) if differ.size else n - k)

    def _diverged(
        self,
        pos: int,
        think: str | None,
        tokens: np.ndarray,
        tok: TokenizedRequest | None,
        source: str | None,
        against: RequestFacts | None,
        prefix: int,
        prev: StoredRequest | None,
    ) -> Divergent:
        """What stage 3 needs of a request whose prompt left the cached content at ``prefix`` (``source``:
        the request read from; ``against``: the facts of the request its change is classified against)."""
        if tok is None:
            assert self._offsets is not None
            tok = self._offsets(tokens)
        if self.sim is None:  # consecutive: the session's previous request is the only source
            cached = prev.tokens if prev is not None and source == prev.source else None
        else:
            cached = self.recent.get(source) if source is not None else None
        read = self.facts.get(source) if source is not None else None
        prompt_len = tok.prompt_len
        return Divergent(
            self.steps,
            pos,
            read.pos if read is not None else -1,
            against.pos if against is not None else -1,
            prefix,
            tok.message_starts,
            tok.message_ends,
            tok.header_len,
            prompt_len,
            think,
            cached[prefix : prefix + EXCERPT_TOKENS].tolist()
            if cached is not None and prefix < len(cached)
            else None,
            tokens[prefix : min(prefix + EXCERPT_TOKENS, prompt_len)].tolist(),
            tokens[max(0, prefix - EXCERPT_TOKENS) : prefix].tolist(),
        )

    def _remember(self, source_id: str, tokens: np.ndarray, prev: StoredRequest | None) -> None:
        """Keep what later requests look back at: the recent tokens (simulated); the consecutive view
        lets go of the session's previous request (memory: a session needs only its predecessor)."""
        self.released = -1
        if self.sim is not None:
            recent = self.recent
            recent[source_id] = tokens
            if len(recent) > EXCERPT_SOURCES:
                recent.popitem(last=False)
        elif prev is not None:
            gone = self.facts.pop(prev.source, None)
            self.released = gone.pos if gone is not None else -1

    def _place(
        self,
        values: tuple[Any, ...],
        source_id: str,
        src_id: str | None,
        plan: CachePlan,
        local: RequestLocal,
        usage: Any,
        events: str | None,
        prev: StoredRequest | None,
    ) -> tuple[Any, ...]:
        """Ruler mode: the outcome's ``values`` and the :data:`RULED` columns, the request's positions in
        the provider's units from the anchors it shares with its source and its own usage's."""
        rulers = self.rulers
        assert rulers is not None
        prefix_at, cached_at, unexpired_at = self._read_at
        shared = max(values[prefix_at] or 0, values[unexpired_at] or 0)
        ruler = ruler_of(rulers, source_id, src_id, plan.prompt_len, shared, plan, usage)
        if prev is not None and prev.source != source_id:  # memory: the consecutive view needs no older one
            rulers.pop(prev.source, None)
        if stays_local(ruler, usage, local.marked):  # perf: only the basis is made: no dict of the row
            return (*values, plan.prompt_len, local.head_end, local_basis(values[cached_at] or 0))
        fields = dict(zip(OUTCOME_COLUMNS, values, strict=True))
        fields.update(prompt_tokens=plan.prompt_len, head_end_tokens=local.head_end, position_basis=None)
        fields["log_events"] = events  # read by the placing of a marked head, not a column made here
        place_row(fields, ruler, rulers, source_id, src_id, plan, usage, self.model, local.marked)
        return self._values(fields)  # type: ignore[no-any-return]
