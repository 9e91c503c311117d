"""The cache clock's model, shared by :mod:`promptkit.analysis.clock` (which documents the rules and
re-exports every name here) and the transcript reader (:mod:`promptkit.analysis.transcript_clock`): the
calls (:class:`ClockCall`), the lifetimes a provider's cache model gives (:class:`Lifetimes`), one session's
running figures (:class:`ClockTally`) and the answer (:class:`CacheClock`).

    >>> life = Lifetimes(default=300.0, long=3600.0)
    >>> price = ClockPrice(hit=0.5, miss=5.0, output=25.0, write=6.25, write_1h=10.0)
    >>> call = life.call(sent_at=0.0, model="m", prompt_tokens=100, cached_tokens=0, written_tokens=90,
    ...                  written_1h_tokens=0, output_tokens=1, price=price)
    >>> clock_of([call], session="s", now=60.0).seconds_left
    240.0
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.layout import Usage

__all__ = [
    "CLOCK_CAUSES",
    "CacheClock",
    "ClockCall",
    "ClockPrice",
    "ClockTally",
    "Lifetimes",
    "clock_of",
    "clock_price",
    "format_left",
    "lifetimes_of",
    "price_table",
    "usage_call",
]

#: The causes the clock names, each one of :data:`promptkit.analysis.causes.CAUSES`.
CLOCK_CAUSES: Final[tuple[str, ...]] = (
    "cold_start",
    "model_switch",
    "ttl_expiry",
    "compaction",
    "head_changed",
    "history_rewritten",
)
_MILLION: Final[float] = 1_000_000.0


def _clock_price_of(value: ClockPrice | Mapping[str, Any] | None) -> ClockPrice | None:
    """A band's price as given, or read from the dict saved state holds (``attrs.asdict``)."""
    return ClockPrice(**value) if isinstance(value, Mapping) else value


@attrs.frozen(slots=True)
class ClockPrice:
    """A model's prices in USD per million tokens, as the clock needs them (a light copy of
    :class:`~promptkit.providers.prices.ModelPrice`): ``write`` and ``write_1h`` None where the
    provider does not bill writes (they cost ``miss`` then).

    >>> ClockPrice(0.3, 3.0, 15.0, 3.75, 6.0).cost(prompt=1000, cached=800, written=100, written_1h=0, output=10)
    0.001065
    """

    hit: float
    miss: float
    output: float
    write: float | None = None
    write_1h: float | None = None
    #: A band above a prompt length (ModelPrice's ``above_tokens``, its prices from
    #: :meth:`~promptkit.providers.prices.ModelPrice.band`): a call whose prompt is longer than
    #: ``above_tokens`` costs ``above``'s prices (a dict, as saved state holds it, is read as one).
    above_tokens: int | None = None
    above: ClockPrice | None = attrs.field(default=None, converter=_clock_price_of)

    def cost(self, *, prompt: int, cached: int, written: int, written_1h: int, output: int) -> float:
        """The USD cost of one call (the formula of :func:`promptkit.report.pricing.request_costs`),
        at the band its ``prompt`` length falls in.

        >>> p = ClockPrice(0.01, 0.1, 0.5, above_tokens=100, above=ClockPrice(0.05, 0.5, 2.5))
        >>> p.cost(prompt=100, cached=0, written=0, written_1h=0, output=0) * 1e6, p.cost(prompt=101, cached=0, written=0, written_1h=0, output=0) * 1e6
        (10.0, 50.5)
        """
        if self.above is not None and self.above_tokens is not None and prompt > self.above_tokens:
            return self.above.cost(
                prompt=prompt, cached=cached, written=written, written_1h=written_1h, output=output
            )
        write = self.miss if self.write is None else self.write
        write_1h = write if self.write_1h is None else self.write_1h
        hour = min(written_1h, written)
        uncached = max(prompt - cached - written, 0)
        total = cached * self.hit + (written - hour) * write + hour * write_1h + uncached * self.miss
        return round((total + output * self.output) / _MILLION, 9)


@attrs.frozen(slots=True)
class ClockCall:
    """One model call as the clock sees it: when it was sent (seconds since the epoch), its model, its
    reported counts (``written_1h_tokens`` None when the usage does not split writes by TTL;
    ``writes_reported`` False when the provider does not report writes at all, as OpenAI's automatic
    cache: such a call is taken to have written its prompt), the
    lifetime of what it wrote (``write_ttl``: None when it wrote nothing or the lifetime is not known;
    derived by :meth:`Lifetimes.call`), the provider's lifetime for a call that
    reports no writes (``default_ttl``), whether the log shows a compaction since the previous call,
    and its model's price (None: unpriced)."""

    sent_at: float
    model: str | None
    prompt_tokens: int
    cached_tokens: int
    written_tokens: int = 0
    written_1h_tokens: int | None = None
    output_tokens: int = 0
    price: ClockPrice | None = None
    write_ttl: float | None = None
    default_ttl: float | None = None
    compaction: bool = False
    writes_reported: bool = True

    @property
    def cost_usd(self) -> float | None:
        """What this call cost at its model's list prices, None when unpriced."""
        if self.price is None:
            return None
        return self.price.cost(
            prompt=self.prompt_tokens,
            cached=self.cached_tokens,
            written=self.written_tokens,
            written_1h=self.written_1h_tokens or 0,
            output=self.output_tokens,
        )


@attrs.frozen(slots=True)
class Lifetimes:
    """A provider's cache lifetimes in seconds, as its profile's cache model declares them
    (:func:`lifetimes_of`): ``default`` for an entry written without a named TTL (None: no documented
    lifetime), ``long`` the longest a write may ask for (Anthropic's ``"ttl": "1h"``; None when there
    is none).
    """

    default: float | None
    long: float | None = None

    def write_ttl(self, written: int, written_long: int | None) -> float | None:
        """The lifetime of a call's writes: ``long`` when the usage says every written token was a
        long write (Anthropic's ``cache_creation.ephemeral_1h_input_tokens``), else ``default``; None
        when it wrote nothing.

        >>> life = Lifetimes(300.0, 3600.0)
        >>> life.write_ttl(90, 90), life.write_ttl(90, 40), life.write_ttl(90, None), life.write_ttl(0, 0)
        (3600.0, 300.0, 300.0, None)
        """
        if not written:
            return None
        if self.long is not None and written_long is not None and written_long >= written:
            return self.long
        return self.default

    def call(self, **fields: Any) -> ClockCall:
        """A :class:`ClockCall` of ``fields`` with these lifetimes."""
        ttl = self.write_ttl(fields.get("written_tokens", 0), fields.get("written_1h_tokens"))
        if not fields.get("writes_reported", True):
            ttl = self.default
        return ClockCall(**fields, write_ttl=ttl, default_ttl=self.default)

    def to_json(self) -> list[float | None]:
        """``[default, long]`` (:meth:`from_json` reads it back)."""
        return [self.default, self.long]

    @classmethod
    def from_json(cls, data: Any) -> Lifetimes:
        """The lifetimes :meth:`to_json` wrote; a :class:`~promptkit.errors.RecordFormatError` else."""
        from promptkit.errors import RecordFormatError

        if not isinstance(data, list) or len(data) != 2 or not all(_seconds(x) for x in data):
            raise RecordFormatError(f"lifetimes: expected [default, long] seconds, got {data!r}")
        return cls(*(None if x is None else float(x) for x in data))


def _seconds(value: object) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool) and value >= 0)


def lifetimes_of(provider: str, request: Mapping[str, Any] | None = None) -> Lifetimes:
    """The cache lifetimes of ``provider``'s profile (its cache model's ``ttl`` and longest named TTL),
    for ``request`` where the lifetime depends on it
    (:meth:`~promptkit.tokens.cache_models.CacheModel.entry_ttl`).

    >>> lifetimes_of("anthropic"), lifetimes_of("deepseek").default
    (Lifetimes(default=300.0, long=3600.0), None)
    """
    from promptkit.providers.registry import get_provider

    model = get_provider(provider).cache_model
    named = [seconds for _, seconds in getattr(model, "ttl_names", ())]
    default = model.entry_ttl(request or {})
    longest = max(named) if named else None
    return Lifetimes(
        default, longest if longest is not None and (default is None or longest > default) else None
    )


@attrs.frozen(slots=True)
class ClockTally:
    """What the clock learnt from a session's calls so far (a value: :meth:`add` returns a new one).
    The status line keeps it between runs (:meth:`to_json` / :meth:`from_json`)."""

    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    model: str | None = None
    last_call_at: float | None = None
    last_use_at: float | None = None
    ttl: float | None = None
    held_tokens: int = 0  # what the last call left in the cache: its reads plus its writes
    last_missed: bool = False
    missed_tokens: int = 0
    last_miss_cause: str | None = None

    def add(self, call: ClockCall) -> ClockTally:
        """The tally with ``call`` (the session's next call in time order) counted."""
        cause = self._miss_cause(call)
        expected = self.held_tokens if self.calls else 0
        cost = call.cost_usd
        used = call.cached_tokens > 0 or call.written_tokens > 0 or not call.writes_reported
        ttl = call.write_ttl if call.write_ttl is not None else (self.ttl if self.calls else None)
        if ttl is None and self.ttl is None:
            ttl = call.default_ttl
        return ClockTally(
            calls=self.calls + 1,
            prompt_tokens=self.prompt_tokens + call.prompt_tokens,
            cached_tokens=self.cached_tokens + call.cached_tokens,
            cost_usd=round(self.cost_usd + (cost or 0.0), 9),
            unpriced_calls=self.unpriced_calls + (cost is None),
            model=call.model if call.model is not None else self.model,
            last_call_at=call.sent_at,
            last_use_at=call.sent_at if used else self.last_use_at,
            ttl=ttl,
            held_tokens=call.cached_tokens + call.written_tokens,
            last_missed=cause is not None,
            missed_tokens=max(expected - call.cached_tokens, 0) if cause is not None else 0,
            last_miss_cause=cause,
        )

    def _miss_cause(self, call: ClockCall) -> str | None:
        """The cause of ``call``'s miss, None when it read all the previous call left cached."""
        if not self.calls:
            return "cold_start" if call.cached_tokens == 0 and call.prompt_tokens > 0 else None
        if call.cached_tokens >= self.held_tokens:
            return None
        if call.model is not None and self.model is not None and call.model != self.model:
            return "model_switch"
        if self.expires_at is not None and call.sent_at >= self.expires_at:
            return "ttl_expiry"
        if call.compaction:
            return "compaction"
        return "head_changed" if call.cached_tokens == 0 else "history_rewritten"

    @property
    def expires_at(self) -> float | None:
        """When the cache expires: ``ttl`` after the last use (None without a use or a known lifetime)."""
        if self.last_use_at is None or self.ttl is None:
            return None
        return self.last_use_at + self.ttl

    def to_json(self) -> dict[str, Any]:
        """The tally as JSON-ready data (:meth:`from_json` reads it back)."""
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClockTally:
        """The tally :meth:`to_json` wrote; a :class:`~promptkit.errors.RecordFormatError` (or the
        ``TypeError`` of a field of the wrong type) on anything else."""
        names = {a.name for a in attrs.fields(cls)}
        if set(data) != names:
            from promptkit.errors import RecordFormatError

            raise RecordFormatError(f"a clock tally has the fields {sorted(names)}, got {sorted(data)}")
        return cls(**data)


@attrs.frozen(slots=True)
class CacheClock:
    """One session's cache clock at ``now`` (seconds since the epoch).

    ``hit_ratio`` is cached / prompt tokens over the session's calls (None without prompt tokens);
    ``expires_at`` is when the cache expires (None when no call used the cache or the provider's
    lifetime is unknown), ``seconds_left`` the time left before it (0 once past) and ``expired`` whether
    it is past; ``cost_usd`` the cost so far of the priced calls (``unpriced_calls`` were not priced);
    ``last_miss_cause`` the cause of the last call's miss (None when it hit), ``missed_tokens`` what
    it failed to read of what the previous call left cached.
    """

    session: str
    now: float
    calls: int
    prompt_tokens: int
    cached_tokens: int
    cost_usd: float | None
    unpriced_calls: int
    model: str | None
    last_call_at: float | None
    last_use_at: float | None
    ttl_seconds: float | None
    expires_at: float | None
    last_miss_cause: str | None
    missed_tokens: int
    provider: str | None = None

    @classmethod
    def of(cls, tally: ClockTally, *, session: str, now: float, provider: str | None = None) -> CacheClock:
        """The clock of ``tally`` at ``now``."""
        priced = tally.calls - tally.unpriced_calls
        return cls(
            session=session,
            now=now,
            calls=tally.calls,
            prompt_tokens=tally.prompt_tokens,
            cached_tokens=tally.cached_tokens,
            cost_usd=round(tally.cost_usd, 6) if priced else None,
            unpriced_calls=tally.unpriced_calls,
            model=tally.model,
            last_call_at=tally.last_call_at,
            last_use_at=tally.last_use_at,
            ttl_seconds=tally.ttl if tally.last_use_at is not None else None,
            expires_at=tally.expires_at,
            last_miss_cause=tally.last_miss_cause,
            missed_tokens=tally.missed_tokens,
            provider=provider,
        )

    @property
    def hit_ratio(self) -> float | None:
        """Cached / prompt tokens, to 4 places."""
        return round(self.cached_tokens / self.prompt_tokens, 4) if self.prompt_tokens else None

    @property
    def seconds_left(self) -> float | None:
        """Seconds before the cache expires, to the millisecond (0 once expired; None without a clock)."""
        return None if self.expires_at is None else round(max(self.expires_at - self.now, 0.0), 3)

    @property
    def expired(self) -> bool:
        """Whether the cache has expired at ``now``."""
        return self.expires_at is not None and self.now >= self.expires_at

    @property
    def status(self) -> str:
        """``"expired"``, the time left (``"4:05 left"``), or why there is no clock."""
        if self.expires_at is None:
            return "no cache yet" if self.last_use_at is None else "no TTL known"
        return "expired" if self.expired else f"{format_left(self.seconds_left or 0.0)} left"

    def to_json(self) -> dict[str, Any]:
        """The clock as JSON-ready data, with the derived figures (``hit_ratio``, ``seconds_left``,
        ``expired``, ``status``)."""
        out = attrs.asdict(self)
        out.update(
            hit_ratio=self.hit_ratio, seconds_left=self.seconds_left, expired=self.expired, status=self.status
        )
        return out


def format_left(seconds: float) -> str:
    """Seconds as ``m:ss`` (``h:mm:ss`` from an hour), rounded down to the second.

    >>> format_left(299.6), format_left(3599.0), format_left(3600.0)
    ('4:59', '59:59', '1:00:00')
    """
    whole = max(math.floor(seconds), 0)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def clock_of(
    calls: Iterable[ClockCall], *, session: str, now: float, provider: str | None = None
) -> CacheClock:
    """The clock of one session's ``calls`` (in time order) at ``now``."""
    tally = ClockTally()
    for call in calls:
        tally = tally.add(call)
    return CacheClock.of(tally, session=session, now=now, provider=provider)


# ----------------------------------------------------------------------------- from request records


def clock_price(model: str | None, prices: Mapping[str, Any] | None = None) -> ClockPrice | None:
    """The :class:`ClockPrice` of ``model`` from ``prices`` (model -> ModelPrice; default: every price
    the provider profiles carry), found as :func:`~promptkit.providers.prices.lookup_model` finds it;
    None when it has none.

    >>> clock_price("claude-opus-4-6-20260101").miss, clock_price("my-own-model")
    (5.0, None)
    """
    from promptkit.providers.prices import lookup_model

    table = price_table(None) if prices is None else prices
    key = lookup_model(model, table) if model else None
    if key is None:
        return None
    p = table[key]
    base = ClockPrice(p.cache_hit, p.cache_miss, p.output, p.cache_write, p.cache_write_1h)
    if p.above_tokens is None:
        return base
    band = p.band(p.above_tokens + 1)  # the prices of a prompt past the threshold
    above = ClockPrice(band.cache_hit, band.cache_miss, band.output, band.cache_write, band.cache_write_1h)
    return attrs.evolve(base, above_tokens=p.above_tokens, above=above)


def usage_call(
    usage: Usage,
    *,
    sent_at: float,
    model: str | None,
    lifetimes: Lifetimes,
    price: ClockPrice | None = None,
    compaction: bool = False,
) -> ClockCall | None:
    """The clock's view of one call from its normalized ``usage`` (None without prompt counts).

    >>> from promptkit.layout import Usage
    >>> usage_call(Usage(1000, 5, 800, 150, 150), sent_at=9.0, model=None, lifetimes=Lifetimes(300.0, 3600.0)).write_ttl
    3600.0
    """
    if usage.prompt_tokens is None:
        return None
    return lifetimes.call(
        sent_at=float(sent_at),
        model=model,
        prompt_tokens=usage.prompt_tokens,
        cached_tokens=usage.cached_tokens or 0,
        written_tokens=usage.cache_write_tokens or 0,
        written_1h_tokens=usage.cache_write_1h_tokens,
        output_tokens=usage.completion_tokens or 0,
        price=price,
        compaction=compaction,
        writes_reported=usage.cache_write_tokens is not None,
    )


def price_table(prices: Mapping[str, Any] | None) -> dict[str, Any]:
    """Every provider profile's prices by model, ``prices`` over them."""
    from promptkit.providers.registry import available_providers

    table: dict[str, Any] = {}
    for profile in available_providers().values():
        table.update(profile.prices)
    table.update(prices or {})
    return table
