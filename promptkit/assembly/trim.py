"""Trimming a prompt to a token budget without throwing away the provider's prefix cache.

Only history messages are ever dropped. The history is grouped with
:func:`promptkit.chat.history.group_tool_calls`, so an assistant tool call and its results are one unit
and go together. The stable head (persona, identity, knowledge, context), the per-turn blocks
(turn-context, volatile, focus, turn-hint), the directive block, the current message and this turn's
tool loop are never dropped or shortened, and neither is a history unit holding a request-time directive
block (``metadata["injector"]`` in ``DIRECTIVE_KINDS``: "agent 裁剪时不缩不删"); an archived message that
merely has a directive *kind* (a host notice stored as ``role="notice"``) is ordinary history. When what
may not be dropped alone exceeds the budget, :attr:`TrimResult.fits` is false and the caller decides.

Two policies say *which* units go:

- ``"sliding"`` drops the oldest units one by one until the prompt fits. Once a conversation has reached
  its budget, every new turn drops one more unit right after the head, so the request differs from the
  previous one from there on and nothing after the head is ever read from the cache again
  (**cache-hostile**: over 240 agent turns under DeepSeek's rules, a hit ratio of 0.29 to 0.36 against
  0.90 to 0.97 for the chunked policy; see ``docs/how-to/trimming.md``).
- ``"chunked"`` (the default) drops whole **chunks**. The droppable units are cut into chunks from the
  start of the history: a chunk closes as soon as it holds ``step = ceil((1 - low_water) * budget)``
  tokens. When the prompt is over budget, the fewest oldest chunks go that make it fit; as a
  conversation grows a few tokens at a time, that leaves it at about ``low_water * budget``, and the
  next turns extend that prompt byte for byte until it overflows again. The chunk boundaries depend on
  the history, ``budget``, ``low_water`` and the counter only (not on what follows the history), so
  the policy keeps no state: two processes trimming the same conversation cut at the same places, and a
  restart loses nothing. Pass the whole conversation every turn (a history whose first message moves
  moves every boundary).

Compaction (``compaction=``, chunked only) replaces the dropped chunks by a summary: one system message
(injector and layout key :data:`SUMMARY_INJECTOR`, slot ``context``) at the **end of the stable head**,
right before the kept history. It changes only at a cut, and a cut rewrites everything after the head
anyway, so there it costs no extra cache miss; anywhere earlier it would break the head's cache at every
cut, anywhere later it would break the history's. The caller's summarizer folds one dropped chunk at a
time into the summary so far (``summarize(chunk, previous) -> summary``: append to it, or rewrite it to
keep it short); each answer is kept in :attr:`Compaction.cache` under :func:`chunk_key`, so a chunk is
summarized once, at the cut that drops it, and the summary is as deterministic as the summarizer.

>>> from promptkit.chat.message import Message
>>> def prompt(n):  # a turn's request: the persona, n earlier messages, the current message
...     history = [Message(role="user" if i % 2 == 0 else "assistant", content=f"m{i} " * 8) for i in range(n)]
...     return [Message(role="system", content="persona"), *history, Message(role="user", content="now?")]
>>> def kept(result):
...     return " ".join(m.content.split()[0] for m in result.messages[1:-1])
>>> for n in range(7, 12):  # one more message every turn, a budget of 80 tokens: sliding | chunked
...     print(kept(trim_to_budget(prompt(n), 80, policy="sliding")), "|", kept(trim_to_budget(prompt(n), 80)))
m0 m1 m2 m3 m4 m5 m6 | m0 m1 m2 m3 m4 m5 m6
m1 m2 m3 m4 m5 m6 m7 | m5 m6 m7
m2 m3 m4 m5 m6 m7 m8 | m5 m6 m7 m8
m3 m4 m5 m6 m7 m8 m9 | m5 m6 m7 m8 m9
m4 m5 m6 m7 m8 m9 m10 | m5 m6 m7 m8 m9 m10
>>> def summarize(chunk, previous):  # a real one asks a model; the summary so far comes first
...     span = f"{chunk[0].content.split()[0]}-{chunk[-1].content.split()[0]}: ..."
...     return f"{previous}; {span}" if previous else span
>>> r = trim_to_budget(prompt(11), 80, compaction=Compaction(summarize, header="Earlier:"))
>>> r.summary_at, r.chunks_dropped, kept(r), r.messages[1].content
(1, 1, 'Earlier: m5 m6 m7 m8 m9 m10', 'Earlier:\\n\\nm0-m4: ...')
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, MutableMapping, Sequence
from typing import Any, Final, Literal, get_args

import attrs

from promptkit.assembly.anchors import SUMMARY_INJECTOR, Anchor, FrameSlot, LayoutEntry
from promptkit.assembly.placement import AssembledPrompt, layout_of
from promptkit.assembly.registry import message_tuple
from promptkit.assembly.token_counts import Counter, message_tokens, resolve_counter
from promptkit.chat.history import group_tool_calls
from promptkit.chat.message import DIRECTIVE_KINDS, Message
from promptkit.errors import UsageError
from promptkit.layout import head_end

__all__ = [
    "DEFAULT_LOW_WATER",
    "DEFAULT_SUMMARY_HEADER",
    "TRIM_POLICIES",
    "Compaction",
    "DroppedUnit",
    "Summarizer",
    "TrimPolicy",
    "TrimResult",
    "chunk_key",
    "trim_to_budget",
]

#: How to choose what to drop: see the module docstring.
TrimPolicy = Literal["sliding", "chunked"]
TRIM_POLICIES: Final[tuple[str, ...]] = get_args(TrimPolicy)
#: Where a chunked cut leaves the prompt, as a fraction of the budget. Chosen from the table of
#: ``benchmarks/trim_policies.py`` (see ``docs/how-to/trimming.md``).
DEFAULT_LOW_WATER: Final[float] = 0.5
#: First line of the compaction summary message.
DEFAULT_SUMMARY_HEADER: Final[str] = "Summary of the earlier conversation (removed to fit the context):"

#: A summarizer: (the messages of one dropped chunk, the summary of the chunks dropped before it or
#: None) -> the summary of everything dropped so far.
Summarizer = Callable[[tuple[Message, ...], str | None], str]


def _tuple(value: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(value)


def chunk_key(messages: Sequence[Message], previous: str | None = None) -> str:
    """The key under which :class:`Compaction` caches the summary of one chunk: a SHA-256 of the chunk's
    messages (every field) and of the summary it was folded into (``previous``).

    Neither changes once the chunk is closed, so the key is stable across turns and processes; use it
    to keep summaries in a persistent store.

    >>> from promptkit.chat.message import Message
    >>> chunk = [Message(role="user", content="hi")]
    >>> len(chunk_key(chunk)), chunk_key(chunk) == chunk_key(chunk, "earlier")
    (64, False)
    """
    payload = json.dumps(
        [previous, [attrs.asdict(m) for m in messages]], sort_keys=True, ensure_ascii=False, default=repr
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@attrs.frozen
class Compaction:
    """How the chunks a chunked trim drops are replaced by a summary.

    ``summarize(chunk, previous)`` is any callable: ``chunk`` is the tuple of messages of one dropped
    chunk (in order), ``previous`` the summary of the chunks dropped before it (None for the first); it
    returns the summary of everything dropped so far (append to ``previous``, or rewrite it to keep it
    short: the summary counts toward the budget). It is called once per chunk, at the cut that drops
    it; the answer is kept in ``cache`` under :func:`chunk_key` (a dict by default; pass any mutable
    mapping, e.g. a ``shelve``, to keep summaries across restarts). The summary message is ``header``, a
    blank line and the summary.

    >>> from promptkit.chat.message import Message
    >>> c = Compaction(lambda chunk, previous: f"{previous or ''}[{len(chunk)} messages]")
    >>> first = c.summary_of([Message(role="user", content="hi")], None)
    >>> first, c.summary_of([Message(role="user", content="bye")], first), len(c.cache)
    ('[1 messages]', '[1 messages][1 messages]', 2)
    """

    summarize: Summarizer = attrs.field()
    header: str = attrs.field(default=DEFAULT_SUMMARY_HEADER, validator=attrs.validators.instance_of(str))
    cache: MutableMapping[str, str] = attrs.field(factory=dict, eq=False, repr=False)

    @summarize.validator
    def _check_summarize(self, attribute: attrs.Attribute[Summarizer], value: Summarizer) -> None:
        if not callable(value):
            raise UsageError(f"Compaction: summarize must be a callable, got {type(value).__name__}")

    def summary_of(self, chunk: Sequence[Message], previous: str | None) -> str:
        """The summary after folding ``chunk`` into ``previous``: from :attr:`cache`, else from
        ``summarize`` (then cached). A summarizer that returns anything but a ``str`` is a ``TypeError``."""
        key = chunk_key(chunk, previous)
        text = self.cache.get(key)
        if text is None:
            text = self.summarize(tuple(chunk), previous)
            if not isinstance(text, str):
                raise UsageError(
                    f"Compaction: summarize returned {type(text).__name__}, expected str (the summary)"
                )
            self.cache[key] = text
        return text

    def message(self, summary: str) -> Message:
        """The summary message: :attr:`header`, a blank line, ``summary``."""
        return Message(
            role="system",
            content=f"{self.header}\n\n{summary}",
            metadata={"injector": SUMMARY_INJECTOR},
        )


@attrs.frozen
class DroppedUnit:
    """One history unit that was dropped: indices into the input (``at``), its shape (``complete``,
    ``partial``, ``loose``, ``single``, as :func:`group_tool_calls` says), its messages and their tokens."""

    at: tuple[int, ...] = attrs.field(converter=_tuple)
    shape: str
    messages: tuple[Message, ...] = attrs.field(converter=_tuple)
    tokens: int


@attrs.frozen
class TrimResult:
    """The trimmed messages and their layout, what was dropped (oldest first), and the token counts.

    For the chunked policy also: ``chunks_dropped`` (how many chunks went: it changes only at a cut),
    ``chunk_starts`` (indices into ``messages`` of the first message of each kept chunk, where later cuts
    will fall) and ``summary_at`` (index of the compaction summary message, or None).
    """

    messages: tuple[Message, ...] = attrs.field(converter=_tuple)
    layout: tuple[LayoutEntry, ...] = attrs.field(converter=_tuple)
    dropped: tuple[DroppedUnit, ...] = attrs.field(converter=_tuple)
    tokens_before: int
    tokens_after: int
    budget: int
    policy: str = "sliding"
    chunks_dropped: int = 0
    chunk_starts: tuple[int, ...] = attrs.field(default=(), converter=_tuple)
    summary_at: int | None = None

    @property
    def fits(self) -> bool:
        """True when ``tokens_after <= budget``."""
        return self.tokens_after <= self.budget

    @property
    def dropped_tokens(self) -> int:
        """Tokens the dropped units cost (``tokens_before - tokens_after`` unless a summary was added)."""
        return sum(u.tokens for u in self.dropped)

    @property
    def cut_points(self) -> tuple[int, ...]:
        """Indices into ``messages`` before which a later cut starts rewriting the prompt: the summary
        message, then the start of each kept chunk. Everything before the first one survives every cut;
        :func:`promptkit.anthropic_request` places its cache breakpoints with them in mind."""
        first = () if self.summary_at is None else (self.summary_at,)
        return (*first, *self.chunk_starts)

    def to_prompt(self) -> AssembledPrompt:
        """The trimmed messages and layout as an :class:`AssembledPrompt`."""
        return AssembledPrompt(messages=self.messages, layout=self.layout)


def _check_low_water(low_water: float) -> float:
    if (
        isinstance(low_water, bool)
        or not isinstance(low_water, int | float)
        or not math.isfinite(low_water)
        or not 0 < low_water < 1
    ):
        raise UsageError(f"low_water must be a number strictly between 0 and 1, got {low_water!r}")
    return float(low_water)


def _compaction_of(compaction: Compaction | Summarizer | None) -> Compaction | None:
    if compaction is None or isinstance(compaction, Compaction):
        return compaction
    if callable(compaction):
        return Compaction(compaction)
    raise UsageError(
        f"compaction must be a Compaction, a callable (chunk, previous summary) -> summary, or None; "
        f"got {type(compaction).__name__}"
    )


@attrs.frozen
class _Unit:
    at: tuple[int, ...]
    shape: str
    tokens: int


def trim_to_budget(
    prompt: AssembledPrompt | Sequence[Message],
    budget: int,
    *,
    policy: TrimPolicy = "chunked",
    low_water: float = DEFAULT_LOW_WATER,
    compaction: Compaction | Summarizer | None = None,
    count: Counter | None = None,
    tokenizer: Any = None,
) -> TrimResult:
    """Drop the oldest history units of ``prompt`` until its tokens fit ``budget``.

    ``prompt`` is an :class:`AssembledPrompt` (its layout says which messages are history) or a list of
    messages (read with :func:`promptkit.assembly.placement.layout_of`; a block of a contributor it cannot
    know is then recognised only by its position). Tokens per message are
    :func:`promptkit.assembly.token_counts.message_tokens` with ``count`` (a ``str -> int`` callable) or
    ``tokenizer`` (anything with ``encode``), by default the cheap :func:`estimate_tokens`.

    ``policy`` is ``"chunked"`` (default: drop whole chunks of about ``(1 - low_water) * budget``
    tokens, fixed from the start of the history, so that consecutive prompts extend each other byte for
    byte between cuts) or ``"sliding"`` (drop unit by unit: cache-hostile once the budget is reached);
    see the module docstring. ``low_water`` (strictly between 0 and 1) is where a chunked cut leaves
    the prompt, as a fraction of ``budget``. ``compaction`` (chunked only) is a :class:`Compaction` or a
    summarizer callable: the dropped chunks are replaced by a summary at the end of the stable head.

    Returns a :class:`TrimResult`; never mutates its input. A ``budget`` below zero, an unknown
    ``policy`` or a ``low_water`` outside (0, 1) is a ``ValueError``.

    >>> from promptkit.chat.message import Message
    >>> msgs = [Message(role="system", content="persona"),
    ...         *[Message(role="user", content="question " * 10), Message(role="assistant", content="ok")] * 3,
    ...         Message(role="user", content="now?")]
    >>> r = trim_to_budget(msgs, 60)
    >>> r.tokens_before, r.tokens_after, r.chunks_dropped, [u.at for u in r.dropped], r.chunk_starts
    (99, 39, 2, [(1,), (2,), (3,), (4,)], (1,))
    """
    low_water, compactor = _check_trim_args(budget, policy, low_water, compaction)
    counter = resolve_counter(count, tokenizer)
    if isinstance(prompt, AssembledPrompt):
        messages, layout = prompt.messages, prompt.layout
    else:
        messages = message_tuple(prompt, "trim_to_budget")
        layout = layout_of(messages)
    costs = [message_tokens(m, counter) for m in messages]
    tokens_before = sum(costs)
    units = _history_units(messages, layout, costs)

    if policy == "sliding":
        drop, total = _sliding(units, tokens_before, budget)
        return _result(messages, layout, units, drop, total, tokens_before, budget, policy)

    chunks, closed = _chunks(units, max(1, math.ceil((1 - low_water) * budget)))
    summaries = _Summaries(messages, compactor, counter)
    cut, drop, rest, text = _chunked_cut(chunks, closed, summaries, tokens_before, budget)
    summary = None if compactor is None or text is None else compactor.message(text)
    return _result(
        messages,
        layout,
        units,
        drop,
        rest + summaries.tokens(text),
        tokens_before,
        budget,
        policy,
        cut,
        _chunk_starts(chunks, drop),
        summary,
    )


def _check_trim_args(
    budget: int, policy: str, low_water: float, compaction: Compaction | Summarizer | None
) -> tuple[float, Compaction | None]:
    """Check :func:`trim_to_budget`'s settings; the checked ``low_water`` and the :class:`Compaction`."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise UsageError(f"budget must be a non-negative int, got {budget!r}")
    if policy not in TRIM_POLICIES:
        raise UsageError(f"policy must be one of {list(TRIM_POLICIES)}, got {policy!r}")
    low_water = _check_low_water(low_water)
    compactor = _compaction_of(compaction)
    if compactor is not None and policy != "chunked":
        raise UsageError(
            "compaction needs policy='chunked': a sliding window would rewrite the summary every turn"
        )
    return low_water, compactor


def _history_units(
    messages: Sequence[Message], layout: Sequence[LayoutEntry], costs: Sequence[int]
) -> list[_Unit]:
    """The droppable units of the history (tool groups kept whole), oldest first."""
    history = [i for i, entry in enumerate(layout) if entry.slot == FrameSlot.HISTORY.value]
    units: list[_Unit] = []
    for group in group_tool_calls([messages[i] for i in history]):
        at = tuple(history[k] for k in group.at)
        if any(messages[i].injector in DIRECTIVE_KINDS for i in at):
            continue  # a request-time directive block is never trimmed, wherever it sits
        units.append(_Unit(at, group.shape, sum(costs[i] for i in at)))
    return units


def _chunks(units: Sequence[_Unit], step: int) -> tuple[list[list[_Unit]], int]:
    """``units`` cut into chunks from the start, a chunk closing once it holds ``step`` tokens; and how
    many chunks are closed (the last one may still be filling)."""
    chunks: list[list[_Unit]] = []
    filled = step
    for unit in units:
        if filled >= step:  # the chunk is closed: its units never change again
            chunks.append([])
            filled = 0
        chunks[-1].append(unit)
        filled += unit.tokens
    closed = len(chunks) if filled >= step else len(chunks) - 1
    return chunks, closed


@attrs.frozen
class _Summaries:
    """The compaction of one trim: the messages of dropped units and the tokens of a summary message."""

    messages: Sequence[Message]
    compactor: Compaction | None
    counter: Counter

    def messages_of(self, part: Sequence[_Unit]) -> list[Message]:
        return [self.messages[i] for i in sorted(i for u in part for i in u.at)]

    def tokens(self, text: str | None) -> int:
        if self.compactor is None or text is None:
            return 0
        return message_tokens(self.compactor.message(text), self.counter)


def _chunked_cut(
    chunks: Sequence[Sequence[_Unit]], closed: int, summaries: _Summaries, rest: int, budget: int
) -> tuple[int, int, int, str | None]:
    """The fewest oldest chunks to drop so that ``rest`` tokens fit ``budget``: (chunks dropped, units
    dropped, tokens kept without the summary, the summary text or None)."""
    compactor = summaries.compactor
    cut = 0
    folded: str | None = None  # the summary of the chunks dropped so far
    while rest + summaries.tokens(folded) > budget and cut < closed:
        rest -= sum(u.tokens for u in chunks[cut])
        if compactor is not None:
            folded = compactor.summary_of(summaries.messages_of(chunks[cut]), folded)
        cut += 1
    drop = sum(len(chunk) for chunk in chunks[:cut])
    text = folded
    if cut == closed < len(chunks) and rest + summaries.tokens(folded) > budget:
        # Every closed chunk is gone and the prompt still does not fit: what is never dropped takes more
        # than low_water * budget. The chunk still being filled goes unit by unit, as the sliding policy
        # would (a cut at every turn: cache-hostile, but the newest history stays).
        extra, rest, text = _cut_growing(chunks[cut], summaries, folded, rest, budget)
        drop += extra
    return cut, drop, rest, text


def _cut_growing(
    growing: Sequence[_Unit], summaries: _Summaries, folded: str | None, rest: int, budget: int
) -> tuple[int, int, str | None]:
    """Drop the oldest units of the chunk still being filled until the prompt fits: (units dropped,
    tokens kept without the summary, the summary text)."""
    text = folded
    extra = 0
    while extra < len(growing) and rest + summaries.tokens(folded) > budget:
        rest -= growing[extra].tokens
        extra += 1
    compactor = summaries.compactor
    while compactor is not None:  # the summarizer is asked only once the units alone would fit
        text = compactor.summary_of(summaries.messages_of(growing[:extra]), folded)
        if rest + summaries.tokens(text) <= budget or extra == len(growing):
            break
        rest -= growing[extra].tokens
        extra += 1
    return extra, rest, text


def _chunk_starts(chunks: Sequence[Sequence[_Unit]], drop: int) -> list[int]:
    """Input index of the first message of each kept chunk (of it or of any later one: units of a tool
    group can interleave with the messages moved after it), the first ``drop`` units being dropped."""
    starts: list[int] = []
    seen = 0
    for chunk in chunks:
        kept = chunk[max(0, drop - seen) :]
        seen += len(chunk)
        if kept:
            starts.append(min(i for u in kept for i in u.at))
    for k in range(len(starts) - 2, -1, -1):
        starts[k] = min(starts[k], starts[k + 1])
    return starts


def _sliding(units: Sequence[_Unit], total: int, budget: int) -> tuple[int, int]:
    """How many of the oldest units to drop (one by one until it fits), and the tokens left."""
    drop = 0
    for unit in units:
        if total <= budget:
            break
        total -= unit.tokens
        drop += 1
    return drop, total


def _result(
    messages: Sequence[Message],
    layout: Sequence[LayoutEntry],
    units: Sequence[_Unit],
    drop: int,
    total: int,
    tokens_before: int,
    budget: int,
    policy: str,
    cut: int = 0,
    chunk_starts: Sequence[int] = (),
    summary: Message | None = None,
) -> TrimResult:
    dropped = [
        DroppedUnit(at=u.at, shape=u.shape, messages=[messages[i] for i in u.at], tokens=u.tokens)
        for u in units[:drop]
    ]
    removed = {i for u in units[:drop] for i in u.at}
    keep = [i for i in range(len(messages)) if i not in removed]
    out_messages = [messages[i] for i in keep]
    out_layout = [layout[i] for i in keep]
    position = {i: k for k, i in enumerate(keep)}
    starts = [position[i] for i in chunk_starts]
    summary_at: int | None = None
    if summary is not None:
        summary_at = head_end(out_layout)
        out_messages.insert(summary_at, summary)
        out_layout.insert(summary_at, LayoutEntry(slot=Anchor.CONTEXT, key=SUMMARY_INJECTOR))
        starts = [s + 1 for s in starts]
    return TrimResult(
        messages=out_messages,
        layout=out_layout,
        dropped=dropped,
        tokens_before=tokens_before,
        tokens_after=total,
        budget=budget,
        policy=policy,
        chunks_dropped=cut,
        chunk_starts=starts,
        summary_at=summary_at,
    )
