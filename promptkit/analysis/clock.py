"""The cache clock (its model in :mod:`promptkit.analysis.clock_core`, re-exported here): per session, the hit ratio, the time left before the cache expires, the cost so far
and the cause of the last miss, from the calls a log or a transcript shows.

A prompt cache lives a fixed time after its last use, and a read or a write refreshes it. Anthropic:
"By default, the cache has a 5-minute lifetime. The cache is refreshed for no additional cost each time
the cached content is used", and a ``cache_control`` breakpoint with ``"ttl": "1h"`` keeps an entry an
hour (https://platform.claude.com/docs/en/build-with-claude/prompt-caching, "How prompt caching works"
and "1-hour cache duration"); Claude Code's usage says which TTL each call wrote with
(``cache_creation.ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens``). Other providers' TTLs
come from their profile's cache model (:meth:`~promptkit.tokens.cache_models.CacheModel.entry_ttl`:
OpenAI 10 minutes, 24 hours with ``prompt_cache_retention``); a provider whose cache has no documented
lifetime (DeepSeek, Gemini's implicit cache) has no clock (``ttl_seconds`` None).

The rules, one call at a time (:meth:`ClockTally.add`):

- **Last use** is the time of the latest call that read or wrote the cache (a provider that does not
  report writes, as OpenAI, writes every call's prompt); the cache **expires**
  ``ttl`` seconds after it. ``ttl`` is the lifetime of the latest call's writes: 1 hour when every
  token it wrote was a 1-hour write, else 5 minutes (when a call writes both, the 5-minute entries, the
  end of the conversation, expire first: that is when the next call starts paying). A call that
  writes nothing keeps the lifetime of the writes before it.
- **A miss**: a call that read fewer tokens from the cache than the previous call of the session left
  there (what it read plus what it wrote: ``reads(n) = reads(n-1) + writes(n-1)`` when the prompt only
  grew), or a session's first call that read nothing. Its **cause**, in this order (the names are those
  of :data:`promptkit.analysis.causes.CAUSES`): ``cold_start`` (the session's first call),
  ``model_switch`` (another model than the previous call: caches are per model), ``ttl_expiry`` (the
  call came after the cache had expired), ``compaction`` (the log shows the context was compacted),
  ``head_changed`` (it read nothing: even the system prompt and tools were rewritten) or
  ``history_rewritten`` (it read part of the prefix: an edit, a rewind, an injected reminder).
- **Cost** at the model's list prices (:class:`ClockPrice`, from the provider profiles): reads at the
  cache-hit price, 5-minute writes at the write price, 1-hour writes at the 1-hour write price, the
  rest of the prompt at the input price, output at the output price; a call whose model has no price
  is counted in ``unpriced_calls``.

Example::

    >>> price = ClockPrice(hit=0.5, miss=5.0, output=25.0, write=6.25, write_1h=10.0)
    >>> life = Lifetimes(default=300.0, long=3600.0)  # Anthropic's, from its profile: lifetimes_of("anthropic")
    >>> calls = [life.call(sent_at=0.0, model="claude-opus-4-6", prompt_tokens=20000,
    ...              cached_tokens=0, written_tokens=19990, written_1h_tokens=0, output_tokens=100, price=price),
    ...          life.call(sent_at=60.0, model="claude-opus-4-6", prompt_tokens=20500,
    ...              cached_tokens=19990, written_tokens=500, written_1h_tokens=0, output_tokens=80, price=price)]
    >>> clock = clock_of(calls, session="s", now=200.0)
    >>> clock.hit_ratio, clock.seconds_left, clock.expired, clock.last_miss_cause
    (0.4936, 160.0, False, None)
    >>> clock_of(calls, session="s", now=400.0).status
    'expired'
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from promptkit.analysis.clock_core import (
    CLOCK_CAUSES as CLOCK_CAUSES,
    CacheClock as CacheClock,
    ClockCall as ClockCall,
    ClockPrice as ClockPrice,
    ClockTally as ClockTally,
    Lifetimes as Lifetimes,
    clock_of as clock_of,
    clock_price as clock_price,
    format_left as format_left,
    lifetimes_of as lifetimes_of,
    price_table,
    usage_call as usage_call,
)

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.layout import RequestRecord

__all__ = [
    "CLOCK_CAUSES",
    "CacheClock",
    "ClockCall",
    "ClockPrice",
    "ClockTally",
    "Lifetimes",
    "cache_clock",
    "clock_of",
    "clock_price",
    "format_left",
    "lifetimes_of",
    "usage_call",
]


def _record_call(record: RequestRecord, provider: str | None, table: Mapping[str, Any]) -> ClockCall | None:
    """The clock's view of one record (None without a time or usage)."""
    if record.timestamp is None or record.usage is None:
        return None
    model = record.request.get("model")
    model = model if isinstance(model, str) else None
    return usage_call(
        record.usage,
        sent_at=record.timestamp,
        model=model,
        lifetimes=lifetimes_of(provider, record.request) if provider is not None else Lifetimes(None),
        price=clock_price(model, table),
        compaction="compaction" in (record.meta.get("log_events") or ()),
    )


def _provider_of(record: RequestRecord, override: str | None) -> str | None:
    from promptkit.providers.registry import infer_provider

    if override is not None:
        return override
    if record.provider is not None:
        return record.provider
    model = record.request.get("model")
    return infer_provider(model=model if isinstance(model, str) else None)


def _transcript_clock(
    path: str, *, now: float | None, provider: str | None, prices: Mapping[str, Any] | None
) -> dict[str, CacheClock]:
    import time

    from promptkit.analysis.transcript_clock import TranscriptClockState, read_transcript
    from promptkit.providers.registry import native_provider

    table = price_table(prices)
    name = provider or native_provider("claude-code")
    life = lifetimes_of(name) if name is not None else Lifetimes(None)
    state = read_transcript(
        TranscriptClockState.start(path), price_of=lambda m: clock_price(m, table), lifetimes=life
    )
    if state.open_call is None:
        return {}
    clock = state.clock(now=time.time() if now is None else float(now), provider=name)
    return {clock.session: clock}


def cache_clock(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | Iterable[RequestRecord],
    *,
    now: float | None = None,
    provider: str | None = None,
    format: str | None = None,
    prices: Mapping[str, Any] | None = None,
) -> dict[str, CacheClock]:
    """Each session's :class:`CacheClock` at ``now`` (default: the current time), by session name.

    ``source`` is a log path (a Claude Code transcript, any log :func:`promptkit.formats.read_logs`
    reads, a folder), several, or request records; ``provider`` forces the provider whose lifetimes
    apply (default: the record's, else the one its model names); ``prices`` overrides the built-in
    prices (model -> :class:`~promptkit.providers.prices.ModelPrice`). A record without a timestamp or
    usage is not a call the clock can place and is left out.

    One Claude Code transcript file is read as the status line reads it
    (:mod:`promptkit.analysis.transcript_clock`: its main thread, each call timed by the event it
    answers, when Claude Code sent the request); in a folder or a mix of logs each call is timed by its
    log timestamp, for Claude Code its first line's (written when the first content block ends, so
    its clock runs up to the time to that block longer).

    Example::

        >>> clocks = cache_clock("fixtures/claude-code", now=1770912180.0)
        >>> main = clocks["4d5611e5-241a-462a-8d15-5122611a9569"]
        >>> main.hit_ratio, main.status, main.ttl_seconds, main.last_miss_cause
        (0.6953, '4:34 left', 300.0, None)
    """
    import time

    from promptkit.layout import RequestRecord

    if isinstance(source, str | os.PathLike) or (
        isinstance(source, Sequence) and all(isinstance(s, str | os.PathLike) for s in source)
    ):
        from promptkit.formats import read_logs

        paths = [source] if isinstance(source, str | os.PathLike) else list(source)
        read = read_logs([str(p) for p in paths], format=format)
        if len(paths) == 1 and os.path.isfile(paths[0]) and read.formats == {"claude-code": 1}:
            return _transcript_clock(str(paths[0]), now=now, provider=provider, prices=prices)
        records: Iterable[Any] = read.records
    else:
        records = source
    table = price_table(prices)
    by_session: dict[str, list[tuple[float, int, ClockCall]]] = {}
    providers: dict[str, str | None] = {}
    for n, record in enumerate(records):
        if not isinstance(record, RequestRecord):
            from promptkit.errors import UsageError

            raise UsageError(f"cache_clock: item {n} is a {type(record).__name__}, not a RequestRecord")
        name = _provider_of(record, provider)
        call = _record_call(record, name, table)
        if call is not None:
            by_session.setdefault(record.session, []).append((call.sent_at, n, call))
            providers.setdefault(record.session, name)
    at = time.time() if now is None else float(now)
    return {
        session: clock_of(
            (c for _, _, c in sorted(calls, key=lambda x: x[:2])),
            session=session,
            now=at,
            provider=providers[session],
        )
        for session, calls in by_session.items()
    }
