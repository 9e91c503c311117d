"""Explain every uncached token: per request, integer ``lost_<cause>`` columns that add up exactly.

:func:`explain_causes` takes an analysis' requests frame
(:attr:`~promptkit.analysis.result.AnalysisResult.requests`) and returns one row per request with the tokens the cache did not serve split by cause. The total is the *reported*
uncached tokens (``reported_prompt_tokens - reported_cached_tokens``) where the log has usage, else
the predicted ones (``prompt_tokens - predicted_cached_tokens``): the columns ``lost_*`` always add up
to ``uncached_tokens``.

How a request's uncached tokens are split, walking the prompt from the predicted cached point on:

==================  =================================================================================
``model_switch``    the cached entry was written by another model (caches are per model)
``eviction``        an entry held more, but the cache's capacity evicted it (simulated view)
``ttl_expiry``      an entry held more, but it expired: ``idle_seconds`` says how long it sat unused
``below_minimum``   the shared prefix (or the prompt) is under the provider's minimum cacheable size
``granularity``     the shared prefix rounded down to the provider's unit (DeepSeek 64, OpenAI 128 ...)
``<change class>``  the prompt changed where the cache held more: ``tools_changed``,
                    ``system_changed``, ``message_edited`` (edited or removed), ``compaction``
                    (the context shrank), ``volatile_value`` (timestamp, date, uuid, counter ...),
                    ``reordered`` (tools or JSON keys), ``whitespace``; charged from the divergence to
                    the end of what the cache held (``cause_slot`` / ``cause_key`` name the anchor and
                    contributor for prompts promptkit built)
``cold_start``      nothing of this prefix was cached yet (the first request of a session, past any
                    head shared with other sessions)
``new_tokens``      appended since the cached entry: never sent before, so never cacheable
``head_changed``    the log reports less cached than the content predicts, the reads fell back into
                    the head (system prompt, tools, what the log does not show), and the provider's
                    cache is not best effort: the head changed (``change_detail`` names the boundary)
``history_rewritten`` the same, with the reads fallen back inside the history (an edit, context
                    editing, an injected reminder the log does not show)
``thinking_changed`` the same, with the reads fallen back into the head after the log shows the thinking
                    settings changed (Claude Code: ``thinkingMetadata``, a "think" / "ultrathink"
                    prompt; a request's ``thinking`` budget): Anthropic keeps system prompt and tools
                    cached and invalidates the cached messages
``provider_miss``   the log reports less cached than the rules allow, on a provider whose cache is
                    documented as best effort (DeepSeek) or that said why (Anthropic's diagnostics)
``reads_unreported`` the log reports 0 cached tokens on every call of the session although the rules
                    allow reads on at least two of them: the route may not report cache reads at all
                    (Kimi through a local Ollama or OpenCode), so the difference is no loss of the
                    prompt's and the reported figure no measurement (:func:`unreported_sessions`)
``routing_miss``    the same on a best-effort cache that routes requests by a hash of the prompt's
                    start (OpenAI, :attr:`~promptkit.tokens.cache_models.CacheModel.routing_tokens`),
                    the reads fallen back before the end of the session's previous prompt while the log
                    shows no change of the prompt: the request met a machine that did not hold its
                    longer prefix (it fell back to the head, to an earlier prompt, or to 0)
``unexplained``     the rest: prompt-length differences between our rendering and the provider's
==================  =================================================================================

When the provider reports more cached tokens than predicted, the surplus is taken off the first
causes in prompt order (it sits right after the predicted cached point). Layout causes (the change
classes and ``model_switch``) are what the user's prompt layout lost; provider causes
(``granularity, below_minimum, ttl_expiry, eviction, provider_miss, routing_miss``) are the provider's rules and
behaviour; ``cold_start`` and ``new_tokens`` are inherent.

Example::

    >>> from promptkit.analysis.api import analyze_requests
    >>> a = {"messages": [{"role": "system", "content": "Now: 2026-12-03T09:45:00Z. Be terse."},
    ...                   {"role": "user", "content": "hi"}]}
    >>> b = {"messages": [{"role": "system", "content": "Now: 2026-12-03T09:46:10Z. Be terse."},
    ...                   {"role": "user", "content": "hi"}]}
    >>> causes = explain_causes(analyze_requests([a, b], provider="exact"))
    >>> causes.row(1, named=True)["cause"]
    'volatile_value'
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from promptkit.tokens.cache_models import CacheModel

__all__ = [
    "CAUSES",
    "CHANGE_CLASSES",
    "HEAD_CHANGES",
    "INHERENT_CAUSES",
    "LAYOUT_CAUSES",
    "PROVIDER_CAUSES",
    "SETTING_CHANGES",
    "UNSEEN_CHANGES",
    "Change",
    "classify_change",
    "explain_causes",
    "find_change",
    "is_head_change",
    "unreported_note",
    "unreported_sessions",
    "volatile_spans",
]

#: The prefix-change classes, most specific first.
CHANGE_CLASSES: Final[tuple[str, ...]] = (
    "model_switch",
    "tools_changed",
    "system_changed",
    "message_edited",
    "compaction",
    "volatile_value",
    "reordered",
    "whitespace",
)
#: The changes of the head (what sits before the history) that the log shows, as :func:`classify_change`
#: names them: the system prompt, the tool definitions, a volatile value, a reordering, whitespace.
#: ``promptkit lint`` reports exactly these (:func:`is_head_change`), ``promptkit analyze`` names them in
#: its causes: one detector for both. (``head_changed`` is left out: the log does not show that change.)
HEAD_CHANGES: Final[tuple[str, ...]] = (
    "system_changed",
    "tools_changed",
    "volatile_value",
    "reordered",
    "whitespace",
)


def is_head_change(change_class: str | None) -> bool:
    """Whether ``change_class`` (a :data:`CHANGE_CLASSES` name) is a change of the head that lint reports.

    >>> is_head_change("system_changed"), is_head_change("message_edited"), is_head_change(None)
    (True, False, False)
    """
    return change_class in HEAD_CHANGES


#: Changes the log does not show, named from the reported cache reads (see :func:`explain_causes`).
UNSEEN_CHANGES: Final[tuple[str, ...]] = ("head_changed", "history_rewritten")
#: Changes of the request's settings the log shows, which invalidate part of the cache without changing
#: the prompt's text: thinking settings (Anthropic: "Changes to thinking parameters (enabled/disabled or
#: budget allocation) invalidate message cache breakpoints", system prompt and tools stay cached,
#: https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#extended-thinking-with-prompt-caching).
SETTING_CHANGES: Final[tuple[str, ...]] = ("thinking_changed",)
#: Causes the user's own prompt layout is responsible for.
LAYOUT_CAUSES: Final[tuple[str, ...]] = (*CHANGE_CLASSES, *UNSEEN_CHANGES, *SETTING_CHANGES)
#: Causes that are the provider's rules or behaviour.
PROVIDER_CAUSES: Final[tuple[str, ...]] = (
    "granularity",
    "below_minimum",
    "ttl_expiry",
    "eviction",
    "provider_miss",
    "routing_miss",
    "reads_unreported",
)
#: Causes no layout avoids.
INHERENT_CAUSES: Final[tuple[str, ...]] = ("cold_start", "new_tokens")
#: Every cause, in the column order of :func:`explain_causes` (``lost_<cause>``).
CAUSES: Final[tuple[str, ...]] = (*INHERENT_CAUSES, *LAYOUT_CAUSES, *PROVIDER_CAUSES, "unexplained")

# ------------------------------------------------------------------------------- volatile values

#: Volatile-value patterns, most specific first: (kind, regex).
VOLATILE_PATTERNS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    (
        "uuid",
        re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
    ),
    (
        "timestamp",
        re.compile(
            r"\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\b"
            r"|\b\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?\s*(?:[AaPp][Mm]|UTC|GMT)?"
        ),
    ),
    ("date", re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b")),
    ("epoch", re.compile(r"\b1\d{9}(?:\d{3})?(?:\.\d+)?\b")),
    ("hex_id", re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{12,}\b")),
    ("counter", re.compile(r"\d+")),
)


def volatile_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each volatile value in ``text``: uuids, timestamps, dates, epoch numbers,
    hex ids, counters (any other number), left to right, non-overlapping.

    Example::

        >>> volatile_spans("at 2026-12-03T09:45:00Z, call 7")
        [(3, 23, 'timestamp'), (30, 31, 'counter')]
    """
    # perf: the spans taken are disjoint and kept sorted by start (so by end too): a new span overlaps
    # one of them only if it overlaps the last one that starts before it ends (bisect, not a scan)
    starts: list[int] = []
    ends: list[int] = []
    taken: list[tuple[int, int, str]] = []
    for kind, pattern in VOLATILE_PATTERNS:
        for m in pattern.finditer(text):
            s, e = m.span()
            i = bisect.bisect_left(starts, e)
            if e > s and not (i and ends[i - 1] > s):
                starts.insert(i, s)
                ends.insert(i, e)
                taken.insert(i, (s, e, kind))
    return taken


def _mask(text: str) -> str:
    out, last = [], 0
    for s, e, kind in volatile_spans(text):
        out.append(text[last:s])
        out.append(f"\x00{kind}\x00")
        last = e
    out.append(text[last:])
    return "".join(out)


@attrs.frozen(slots=True)
class Change:
    """How a prompt changed where it left the cached one: ``cls`` (one of :data:`CHANGE_CLASSES`),
    ``kind`` (e.g. ``timestamp``, ``tool order``, ``json keys``), ``message`` (index in the request's
    messages, None for the tool definitions / model), ``offset`` (character offset in the message's
    text, or None), ``snippet`` (what changed, ``old -> new``)."""

    cls: str
    kind: str | None = None
    message: int | None = None
    offset: int | None = None
    snippet: str | None = None

    @property
    def detail(self) -> str:
        """One line: kind, where, snippet."""
        where = "tools" if self.message is None else f"messages[{self.message}]"
        if self.offset is not None:
            where += f" char {self.offset}"
        parts = [p for p in (self.kind, where, self.snippet) if p]
        return ": ".join(parts)


def _dump(value: Any, *, sort: bool = False) -> str:
    return json.dumps(value, sort_keys=sort, ensure_ascii=False, default=str)


def _text_of(message: Any) -> str:
    """A message as text for diffing: its content (parts joined) and its tool calls as JSON."""
    if not isinstance(message, Mapping):
        return _dump(message)
    content = message.get("content")
    if isinstance(content, list):
        text = "".join(str(p.get("text", "")) if isinstance(p, Mapping) else str(p) for p in content)
    else:
        text = "" if content is None else str(content)
    calls = message.get("tool_calls")
    if calls:
        text += "\n" + _dump(calls)
    return text


def _first_diff(a: str, b: str) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _snippet(a: str, b: str, at: int, width: int = 24) -> str:
    def cut(t: str) -> str:
        return t[at : at + width].replace("\n", "⏎")

    return f"{cut(a)!r} -> {cut(b)!r}"


def _json_equal(a: str, b: str) -> bool:
    try:
        x, y = json.loads(a), json.loads(b)
    except (ValueError, TypeError):
        return False
    return bool(x == y) and a != b


def _text_change(old: str, new: str, message: int | None, base: str) -> Change:
    """Classify a change between two texts: whitespace, json key order, volatile value, else ``base``."""
    at = _first_diff(old, new)
    if re.sub(r"\s+", "", old) == re.sub(r"\s+", "", new):
        return Change("whitespace", "whitespace", message, at, _snippet(old, new, at))
    if _json_equal(old, new):
        return Change("reordered", "json keys", message, at, _snippet(old, new, at))
    if _mask(old) == _mask(new):
        spans = [s for s in volatile_spans(new) if s[1] > at]
        kind = spans[0][2] if spans else "value"
        start = spans[0][0] if spans else at
        old_spans = [s for s in volatile_spans(old) if s[1] > at]
        old_value = old[old_spans[0][0] : old_spans[0][1]] if old_spans else old[at : at + 12]
        new_value = new[start : spans[0][1]] if spans else new[at : at + 12]
        return Change("volatile_value", kind, message, start, f"{old_value!r} -> {new_value!r}")
    return Change(base, None, message, at, _snippet(old, new, at))


def find_change(old: Mapping[str, Any], new: Mapping[str, Any], message: int | None = None) -> Change:
    """How request body ``new`` differs from the cached request body ``old`` (chat-completions shape),
    looking at message index ``message`` (of ``new["messages"]``; None: find the first difference).

    Order of the checks: tools (same set in another order → ``reordered``; same JSON with other key
    order → ``reordered``; else ``tools_changed`` unless only volatile values / whitespace differ),
    then the message: removed (``message_edited``), fewer or shorter messages (``compaction``), role
    changed, and the text diff (whitespace, JSON key order, volatile value, else ``system_changed``
    for a system message and ``message_edited`` otherwise).

    Example::

        >>> t = lambda n: {"type": "function", "function": {"name": n}}
        >>> find_change({"messages": [], "tools": [t("a"), t("b")]}, {"messages": [], "tools": [t("b"), t("a")]}).cls
        'reordered'
    """
    old_tools, new_tools = old.get("tools") or [], new.get("tools") or []
    if old_tools != new_tools:
        a = [_dump(t, sort=True) for t in old_tools] if isinstance(old_tools, list) else []
        b = [_dump(t, sort=True) for t in new_tools] if isinstance(new_tools, list) else []
        if a == b:
            return Change(
                "reordered", "json keys", None, None, "tool definitions: same JSON, other key order"
            )
        if sorted(a) == sorted(b):
            return Change("reordered", "tool order", None, None, "same tools in another order")
        change = _text_change(_dump(old_tools), _dump(new_tools), None, "tools_changed")
        return attrs.evolve(change, offset=None) if change.cls == "tools_changed" else change
    old_msgs = list(old.get("messages") or [])
    new_msgs = list(new.get("messages") or [])
    i = message
    if i is None or i >= len(new_msgs) or (i < len(old_msgs) and old_msgs[i] == new_msgs[i]):
        i = next(
            (k for k in range(min(len(old_msgs), len(new_msgs))) if old_msgs[k] != new_msgs[k]),
            min(len(old_msgs), len(new_msgs)),
        )
    if i >= len(old_msgs):
        return Change(
            "message_edited", "assistant answer", i, None, "the history differs from the logged answer"
        )
    if i >= len(new_msgs):
        return Change("compaction", "shrank", i, None, f"{len(old_msgs)} -> {len(new_msgs)} messages")
    size_old = sum(len(_text_of(m)) for m in old_msgs)
    size_new = sum(len(_text_of(m)) for m in new_msgs)
    shrank = size_new < size_old * 0.9
    if len(new_msgs) < len(old_msgs):
        if len(new_msgs) == len(old_msgs) - 1 and new_msgs[i:] == old_msgs[i + 1 :]:
            return Change("message_edited", "removed", i, None, f"messages[{i}] removed")
        return Change(
            "compaction",
            "shrank",
            i,
            None,
            f"{len(old_msgs)} -> {len(new_msgs)} messages, {size_old} -> {size_new} chars",
        )
    m_old, m_new = old_msgs[i], new_msgs[i]
    role_old = m_old.get("role") if isinstance(m_old, Mapping) else None
    role_new = m_new.get("role") if isinstance(m_new, Mapping) else None
    if role_old != role_new:
        if i + 1 < len(old_msgs) and old_msgs[i + 1] == m_new:
            return Change("message_edited", "removed", i, None, f"messages[{i}] removed")
        return Change("message_edited", "role", i, None, f"{role_old} -> {role_new}")
    base = "system_changed" if role_new in ("system", "developer") else "message_edited"
    t_old, t_new = _text_of(m_old), _text_of(m_new)
    if t_old == t_new:  # same text, other fields (name, tool_call_id, part structure, key order)
        if _dump(m_old, sort=True) == _dump(m_new, sort=True):
            return Change("reordered", "json keys", i, None, "same message, other key order")
        return _text_change(_dump(m_old), _dump(m_new), i, base)
    change = _text_change(t_old, t_new, i, base)
    if change.cls == base and shrank:
        return Change("compaction", "shrank", i, change.offset, f"{size_old} -> {size_new} chars")
    return change


def classify_change(
    old: Mapping[str, Any], new: Mapping[str, Any], message: int | None, *, shifted: bool = False
) -> tuple[str, str]:
    """(class, detail) of the change between two request bodies at the divergent ``message`` (the
    engine's ``divergence_message``; ``shifted`` when the bodies carry a leading system message the
    original request had at top level). Used by the engine for ``change_class`` / ``change_detail``.

    Example::

        >>> classify_change({"messages": [{"role": "user", "content": "a  b"}]},
        ...                 {"messages": [{"role": "user", "content": "a b"}]}, 0)[0]
        'whitespace'
    """
    index = None if message is None else message + (1 if shifted else 0)
    change = find_change(old, new, index)
    if shifted and change.message is not None:
        change = attrs.evolve(change, message=change.message - 1)
    return change.cls, change.detail


# ------------------------------------------------------------------------------------- causes


def _minimum(model: CacheModel, model_name: str | None) -> int:
    """The smallest prefix the provider caches at all (0 when it has no minimum): asked of the cache model."""
    return int(model.min_cacheable_tokens(model_name))


def _session_of(source: str | None) -> str | None:
    return None if source is None else source.rsplit("#", 1)[0]


def _take_front(segments: list[list[Any]], n: int) -> int:
    """Remove ``n`` tokens from the first segments; return what could not be removed."""
    for seg in segments:
        if n <= 0:
            break
        k = min(seg[1], n)
        seg[1] -= k
        n -= k
    return n


def _take_back(segments: list[list[Any]], n: int) -> int:
    for seg in reversed(segments):
        if n <= 0:
            break
        k = min(seg[1], n)
        seg[1] -= k
        n -= k
    return n


def _split(row: Mapping[str, Any], first: bool, minimum: int) -> list[list[Any]]:
    """The predicted uncached tokens of one request as positional (cause, tokens) segments."""
    p = int(row["prompt_tokens"])
    c = int(row["predicted_cached_tokens"])
    if p <= c:
        return []
    if 0 < p < minimum:
        return [["below_minimum", p - c]]
    if row.get("change_class") == "model_switch" and not row.get("model_switch_tokens"):
        return [["model_switch", p - c]]  # the session's previous call used another model: a new cache
    segments: list[list[Any]] = []
    base = c
    switched = row.get("model_switch_tokens")
    if switched:
        segments.append(["model_switch", min(int(switched), p) - base])
        base = min(int(switched), p)
    for cause, column in (("eviction", "unevicted_cached_tokens"), ("ttl_expiry", "unexpired_cached_tokens")):
        value = row.get(column)
        if value is not None and min(int(value), p) > base:
            segments.append([cause, min(int(value), p) - base])
            base = min(int(value), p)
    reach = max(base, min(int(row["prefix_tokens"] or 0), p))
    if reach > base:
        if "compaction" in (row.get("log_events") or "").split(","):
            # the log shows a compaction: the new context's first breakpoint was never written
            segments.append(["compaction", reach - base])
        else:
            segments.append(
                ["below_minimum" if base == 0 and reach < minimum else "granularity", reach - base]
            )
    tail = p - reach
    change = row.get("change_class")
    if tail > 0:
        compacted = change == "compaction" and "compaction" in (row.get("log_events") or "").split(",")
        if first or (reach == 0 and base == 0 and not switched and not compacted):
            segments.append(["cold_start", tail])
        elif change is not None and change != "model_switch":
            stored = row.get("source_stored_tokens")
            changed = tail if stored is None else max(0, min(int(stored), p) - reach)
            changed = min(changed, tail)
            segments.append([change, changed])
            segments.append(["new_tokens", tail - changed])
        else:
            segments.append(["new_tokens", tail])
    return segments


def _routing_miss(row: Mapping[str, Any], reads: int) -> tuple[str, str]:
    """``routing_miss`` and where the reads fell back: a request of a prefix-routed best-effort cache
    (OpenAI: "Requests are routed to a machine based on a hash of the initial prefix of the prompt",
    https://platform.openai.com/docs/guides/prompt-caching) that read less than the rules allow while
    the log shows no change of its prompt."""
    head = row.get("head_end_tokens")
    if reads == 0:
        where = "nothing was read"
    elif head is not None and reads <= int(head):
        where = f"reads fell back to {reads:,} tokens, inside the head ({int(head):,} tokens)"
    else:
        where = f"reads fell back to {reads:,} tokens, an earlier point of the conversation"
    predicted = int(row["predicted_cached_tokens"])
    return "routing_miss", (
        f"{where} where {predicted:,} could be read, with the prompt unchanged: the request was routed "
        "to a machine that did not hold the longer prefix (the cache is best effort)"
    )


#: The fewest calls the rules predict a read for, all reported as 0 cached, before a session's route is
#: taken not to report cache reads (one such call can be a miss).
UNREPORTED_MIN_CALLS: Final = 2


def unreported_sessions(requests: pl.DataFrame) -> list[str]:
    """The sessions of ``requests`` (an analysis' requests frame) whose log reports 0 cached tokens on
    every call with usage although the cache rules allow a read on at least
    :data:`UNREPORTED_MIN_CALLS` of them: their route may not report cache reads at all (Kimi through a
    local Ollama, or OpenCode, writes 0 on every call), so what the rules allow is not a loss of theirs.

    >>> import polars as pl
    >>> frame = pl.DataFrame({"session": ["a", "a", "a", "b", "b"], "reported_cached_tokens": [0, 0, 0, 0, 900],
    ...                       "predicted_cached_tokens": [0, 2000, 4000, 0, 1000]})
    >>> unreported_sessions(frame)
    ['a']
    """
    import polars as pl

    if "reported_cached_tokens" not in requests.columns or not requests.height:
        return []
    usage = requests.filter(pl.col("reported_cached_tokens").is_not_null())
    sessions = usage.group_by("session", maintain_order=True).agg(
        (pl.col("reported_cached_tokens") == 0).all().alias("none"),
        (pl.col("predicted_cached_tokens") > 0).sum().alias("allowed"),
    )
    found = sessions.filter(pl.col("none") & (pl.col("allowed") >= UNREPORTED_MIN_CALLS))
    return [str(s) for s in found["session"]]


def unreported_note(requests: pl.DataFrame) -> str | None:
    """The analysis note on the sessions of :func:`unreported_sessions` (None when there are none)."""
    import polars as pl

    sessions = unreported_sessions(requests)
    if not sessions:
        return None
    rows = requests.filter(pl.col("session").is_in(sessions))
    allowed = int(rows["predicted_cached_tokens"].fill_null(0).sum())
    model = (
        rows["model"].drop_nulls()[0]
        if "model" in rows.columns and rows["model"].drop_nulls().len()
        else None
    )
    shown = f"{sessions[0]!r}" + (f", {model}" if model else "")
    return (
        f"{len(sessions)} session(s) report 0 cached tokens on every call although the cache rules allow "
        f"{allowed:,} (e.g. {shown}): the route may not report cache reads at all (Kimi through a local "
        "Ollama or OpenCode reports 0 on every call), so its reported hit ratio is no measurement and the "
        "causes charge the difference to reads_unreported, not to the prompt"
    )


def _shortfall(
    row: Mapping[str, Any],
    reads: int,
    routed: bool = False,
    before: int | None = None,
    unreported: bool = False,
) -> tuple[str, str | None]:
    """The cause of reported cache reads short of what the content predicts, and where they fell back.

    Only a provider that documents its cache as best effort (the profile's ``best_effort``:
    DeepSeek), that said why it missed (Anthropic's diagnostics) or whose calibration learnt that it
    serves less than the rules allow (an ``expected_cached_tokens`` below the upper bound, from
    :func:`~promptkit.analysis.calibration.apply_calibration`) gets ``provider_miss``. Elsewhere
    the provider's cache is deterministic (Anthropic: "cache hits require 100% identical prompt
    segments", https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching), so the prompt
    changed where the log does not show it: ``head_changed`` when the reads fell back into the head
    (system prompt, tools, an opaque head: ``head_end_tokens``), ``history_rewritten`` when they fell
    back inside the history. ``routed``: the cache routes requests by the prompt's start
    (:attr:`~promptkit.tokens.cache_models.CacheModel.routing_tokens`): a best-effort shortfall with no
    change the log shows, whose reads fell back before ``before`` (the session's previous prompt as the
    cache serves it: the machine that served that call computed it), is a ``routing_miss``
    (:func:`_routing_miss`); short of that point (part of an answer not read) it stays a
    ``provider_miss``. ``unreported``: the session's route reports no cache read at all
    (:func:`unreported_sessions`): ``reads_unreported``."""
    if unreported:
        return "reads_unreported", None
    if (
        routed
        and row.get("best_effort_cache")
        and row.get("provider_miss_reason") is None
        and row.get("change_class") is None
        and (before is None or reads < before)
    ):
        return _routing_miss(row, reads)
    if row.get("best_effort_cache") or row.get("provider_miss_reason") is not None:
        return "provider_miss", None
    expected = row.get("expected_cached_tokens")  # a calibration learnt that this provider serves less
    if expected is not None and float(expected) < int(row["predicted_cached_tokens"]):
        return "provider_miss", None
    head = row.get("head_end_tokens")
    if head is not None and reads <= int(head):
        events = (row.get("log_events") or "").split(",")
        if "compaction" in events:
            # a compaction keeps only the head: reads that stop in it are the compaction's (where the
            # head's breakpoint lies was placed by proportions, not yet by a read that landed on it)
            return (
                "compaction",
                f"reads stopped at {reads:,} tokens, in the head; the log shows a compaction here",
            )
        for event, why in _HEAD_EVENTS:
            if event in events:
                return event, f"reads fell back to {reads:,} tokens, inside the head; the log shows {why}"
        return "head_changed", (
            f"reads fell back to {reads:,} tokens, inside the head ({int(head):,} tokens: system prompt, "
            "tools, what the log does not show); the prompt changed after that point"
        )
    return "history_rewritten", (
        f"reads fell back to {reads:,} tokens, inside the history; the prompt changed after that point"
    )


#: The log events that name a rebuild whose reads fell back into the head, and what the log shows.
_HEAD_EVENTS: tuple[tuple[str, str], ...] = (
    ("tools_changed", "the tools changed before this call (an MCP reconnect)"),
    (
        "thinking_changed",
        "the thinking settings changed before this call (system prompt and tools stay cached, the messages do not)",
    ),
)


def _relabelled(row: dict[str, Any], first: bool, model_before: str | None) -> dict[str, Any]:
    """``row`` with the change class the session's log shows: a compaction it records, or a switch from
    ``model_before`` (the session's previous call's model) to another model."""
    events = (row.get("log_events") or "").split(",")
    if "trace" in events and row.get("change_class") in CHANGE_CLASSES:
        # a block trace has no text: where its block ids diverge, the tokens are new to the cache and
        # nothing says the user's layout changed (an edit and another user's prompt look the same)
        return {
            **row,
            "change_class": None,
            "change_detail": "block trace: the block ids differ from here on (no text, so no layout cause)",
        }
    # a compaction the log shows (the new context shares only the head) names the rebuild, and wins
    # over a model switch at the same call
    compacted = "compaction" in events and not first and row.get("change_class") in (None, "compaction")
    switched = model_before != row.get("model") and row.get("change_class") != "model_switch"
    if compacted and row.get("change_class") is None:
        return {**row, "change_class": "compaction", "change_detail": "the log shows a compaction here"}
    if switched and not (compacted or first):
        # caches are per model: nothing the previous model's calls wrote is read (the prompt may
        # even differ from the start, as a head estimated per model does)
        return {
            **row,
            "change_class": "model_switch",
            "change_detail": f"{model_before} -> {row.get('model')}",
        }
    return row


@attrs.frozen(slots=True)
class _Loss:
    """One request's uncached tokens split by cause: ``lost`` (tokens per cause, adding up to
    ``uncached``), whether the provider ``reported`` the counts, and the ``shortfall`` cause of reported
    reads short of the predicted ones with its ``fallback`` detail (None when there is none)."""

    lost: dict[str, int]
    uncached: int
    reported: bool
    shortfall: str | None
    fallback: str | None


def _loss(
    row: Mapping[str, Any],
    segments: list[list[Any]],
    routed: bool = False,
    before: int | None = None,
    unreported: bool = False,
) -> _Loss:
    """Split ``row``'s uncached tokens by cause from its predicted ``segments`` (see :func:`_split`),
    reconciled with the counts the provider reported when the log has them (``routed``, ``before``,
    ``unreported``: see :func:`_shortfall`)."""
    p, c = int(row["prompt_tokens"]), int(row["predicted_cached_tokens"])
    rp_raw, rc_raw = row.get("reported_prompt_tokens"), row.get("reported_cached_tokens")
    unexplained = 0
    shortfall = fallback = None
    if rp_raw is not None and rc_raw is not None:
        rp, rc = int(rp_raw), int(rc_raw)
        if rc < c:
            shortfall, fallback = _shortfall(row, rc, routed, before, unreported)
            segments.insert(0, [shortfall, c - rc])
        elif rc > c:
            unexplained -= _take_front(segments, rc - c)
        d = rp - p
        if d > 0:
            unexplained += d
        elif d < 0:
            unexplained -= _take_back(segments, -d)
        uncached = rp - rc
    else:
        uncached = p - c
    lost = dict.fromkeys(CAUSES, 0)
    for cause, n in segments:
        lost[cause] += n
    lost["unexplained"] += unexplained
    lost["unexplained"] += uncached - sum(lost.values())  # exact by construction; kept as a guard
    return _Loss(lost, uncached, rp_raw is not None and rc_raw is not None, shortfall, fallback)


def _cause_row(row: Mapping[str, Any], loss: _Loss, prev: float | None) -> dict[str, Any]:
    """The row of :func:`explain_causes` for request ``row`` (``prev``: the timestamp of the session's
    previous request)."""
    lost = loss.lost
    top = max((k for k in CAUSES if lost[k] > 0), key=lambda k: lost[k], default=None)
    ts = row.get("timestamp")
    change_class, change_detail = row.get("change_class"), row.get("change_detail")
    shortfall = loss.shortfall
    provider = shortfall in ("provider_miss", "routing_miss", "reads_unreported")
    if shortfall is not None and not provider and (change_class is None or top == shortfall):
        change_class, change_detail = shortfall, loss.fallback
    elif shortfall == "routing_miss" and change_class is None:
        change_detail = loss.fallback  # not a change of the prompt: where the reads fell back, and why
    is_change = change_class is not None and lost.get(change_class, 0) > 0
    return {
        "session": row["session"],
        "index": row["index"],
        "timestamp": ts,
        "prompt_tokens": row.get("reported_prompt_tokens") if loss.reported else int(row["prompt_tokens"]),
        "uncached_tokens": loss.uncached,
        "basis": "reported" if loss.reported else "predicted",
        **{f"lost_{k}": v for k, v in lost.items()},
        "cause": top,
        "change_class": change_class,
        "change_detail": change_detail,
        "cause_slot": (row.get("divergence_anchor") or row.get("divergence_role")) if is_change else None,
        "cause_key": row.get("divergence_key") if is_change else None,
        "gap_seconds": None if ts is None or prev is None else ts - prev,
        "idle_seconds": row.get("idle_seconds"),
        "provider_miss_reason": row.get("provider_miss_reason"),
    }


def _causes_schema() -> dict[str, Any]:
    """The column types of :func:`explain_causes`'s frame."""
    import polars as pl

    return {
        "session": pl.String,
        "index": pl.Int64,
        "timestamp": pl.Float64,
        "prompt_tokens": pl.Int64,
        "uncached_tokens": pl.Int64,
        "basis": pl.String,
        **{f"lost_{k}": pl.Int64 for k in CAUSES},
        "cause": pl.String,
        "change_class": pl.String,
        "change_detail": pl.String,
        "cause_slot": pl.String,
        "cause_key": pl.String,
        "gap_seconds": pl.Float64,
        "idle_seconds": pl.Float64,
        "provider_miss_reason": pl.String,
    }


def explain_causes(requests: pl.DataFrame | Any, cache_model: CacheModel | None = None) -> pl.DataFrame:
    """Per request of the requests frame ``requests`` (of an analysis,
    :attr:`~promptkit.analysis.result.AnalysisResult.requests`): the uncached tokens split by cause (see
    the module docstring); ``cache_model``: the analysis' (its minimum cacheable size tells a prompt too
    short to cache; None: no minimum). An object with ``requests`` (and ``cache_model``), such as an
    :class:`~promptkit.analysis.result.AnalysisResult`, is read for both (deprecated: pass the frame).

    Columns: ``session, index, timestamp, prompt_tokens, uncached_tokens, basis`` (``reported`` or
    ``predicted``), one integer ``lost_<cause>`` column per :data:`CAUSES` (they add up to
    ``uncached_tokens``), ``cause`` (the largest one, None when nothing was lost), ``change_class``,
    ``change_detail``, ``cause_slot`` / ``cause_key`` (the divergence anchor, or role, and contributor
    key of a prefix change), ``gap_seconds`` (since the previous request of the session),
    ``idle_seconds`` (how long the expired or evicted entry sat unused), ``provider_miss_reason``
    (Anthropic's own diagnostics when the log has them).

    Example::

        >>> from promptkit.analysis.api import analyze_requests
        >>> body = {"messages": [{"role": "user", "content": "hello"}]}
        >>> longer = {"messages": body["messages"] + [{"role": "assistant", "content": "hi"},
        ...                                           {"role": "user", "content": "bye"}]}
        >>> r = analyze_requests([body, longer], provider="exact")
        >>> t = explain_causes(r.requests, r.cache_model)
        >>> t["cause"].to_list()
        ['cold_start', 'new_tokens']
    """
    import polars as pl

    from promptkit.tokens.cache_models import CacheEntry, CachePlan

    model = cache_model
    if not isinstance(requests, pl.DataFrame):  # a result (or one duck-typed): its frame and model
        model = getattr(requests, "cache_model", None) if model is None else model
        requests = requests.requests
    routed = model is not None and model.routing_tokens is not None
    silent = set(unreported_sessions(requests))  # routes that report no cache read at all
    out: list[dict[str, Any]] = []
    frames: list[pl.DataFrame] = []
    seen: set[str] = set()
    last_time: dict[str, float | None] = {}
    last_model: dict[str, str | None] = {}
    last_prompt: dict[str, int | None] = {}  # session -> its previous prompt, read whole (provider's units)
    for row in _in_session_order(requests):
        if len(out) >= _CAUSE_ROWS:  # memory: a frame per chunk, not a dict per request of the whole log
            frames.append(pl.DataFrame(out, schema=_causes_schema(), orient="row"))
            out = []
        session = row["session"]
        first = session not in seen
        seen.add(session)
        minimum = 0 if model is None else _minimum(model, row.get("model"))
        model_before = last_model.get(session)
        last_model[session] = row.get("model")
        row = _relabelled(row, first, model_before)
        loss = _loss(row, _split(row, first, minimum), routed, last_prompt.get(session), session in silent)
        if routed and model is not None:  # the previous prompt as the cache serves it (its rule)
            before = int(row.get("reported_prompt_tokens") or row.get("prompt_tokens") or 0)
            last_prompt[session] = model.cached_tokens(CachePlan(before, (CacheEntry(before),)), before)
        out.append(_cause_row(row, loss, last_time.get(session)))
        last_time[session] = row.get("timestamp")
    frames.append(pl.DataFrame(out, schema=_causes_schema(), orient="row"))
    return pl.concat(frames) if len(frames) > 1 else frames[0]


#: Requests per chunk of :func:`explain_causes` (rows read in session order, then made a frame).
_CAUSE_ROWS: Final[int] = 16_384


def _in_session_order(requests: pl.DataFrame) -> Iterator[dict[str, Any]]:
    """The rows of ``requests`` as dicts, sorted by session and index (stable), gathered a chunk at a
    time (memory: the order is found on two columns, not by a sorted copy of the whole frame)."""
    import polars as pl

    order = (
        requests.select(pl.int_range(pl.len()).alias("_row"), "session", "index")
        .sort("session", "index", maintain_order=True)
        .get_column("_row")
    )
    for start in range(0, order.len(), _CAUSE_ROWS):
        yield from requests.select(pl.all().gather(order.slice(start, _CAUSE_ROWS))).iter_rows(named=True)
