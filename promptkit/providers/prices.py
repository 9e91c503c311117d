"""What a model costs: :class:`ModelPrice`, one dated price per model version, and the rule that finds it.

Each provider profile carries the prices of its own models (``ProviderProfile.prices``, read from the
provider's pricing page, with that page and the date it was read); :func:`lookup_model` finds the price
of a logged model name: the exact version, or a dated snapshot of it, never another version. The costs
of an analysis are computed from these in :mod:`promptkit.report.pricing`.

>>> table = {p.model: p for p in (ModelPrice("x", "claude-opus-4", 1.5, 15, 75), ModelPrice("x", "gpt-4o", 1.25, 2.5, 10))}
>>> lookup_model("claude-opus-4-20250514", table), lookup_model("claude-opus-4-6", table)
('claude-opus-4', None)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Final

import attrs

from promptkit.errors import PriceError

__all__ = ["BAND_FIELDS", "PRICES_AS_OF", "ModelPrice", "lookup_model"]

#: The prices of a band above a prompt length: each is the field of the same name without ``above_``.
BAND_FIELDS: Final[tuple[str, ...]] = (
    "above_cache_hit",
    "above_cache_miss",
    "above_output",
    "above_cache_write",
    "above_cache_write_1h",
)

#: When the built-in prices were last read from the providers' pricing pages.
PRICES_AS_OF: Final[str] = "2026-12-04"


@attrs.frozen(slots=True)
class ModelPrice:
    """One model's prices in USD per million tokens, with where and when they were read.

    ``cache_hit`` is a prompt token read from the cache, ``cache_miss`` a prompt token computed afresh
    (the plain input price), ``output`` a generated token, ``cache_write`` a prompt token written to
    the cache where the provider bills writes (Anthropic's 5-minute write; ``None`` elsewhere, where
    a write costs the miss price); ``cache_write_1h`` Anthropic's 1-hour write (2 x input).
    ``source`` is the page the prices were read from and ``as_of`` the date they were read (ISO).

    A provider that prices a call by its prompt length (Anthropic's Haiku 5.5: "$0.10 / MTok for
    prompts up to 100,000 tokens, $0.50 / MTok for prompts over 100,000 tokens") has a second band:
    ``above_tokens`` and the five ``above_*`` prices, which price the whole call (its prompt, cache
    reads and writes, and its output) when the call's prompt is longer than ``above_tokens``. The
    prompt length is the whole prompt, cached and written tokens included, in the provider's units:
    the reported prompt tokens where the log has them, else promptkit's own count. A price without a
    band has ``above_tokens`` None and no ``above_*`` price; one with a band needs ``above_cache_hit``,
    ``above_cache_miss`` and ``above_output`` (``above_cache_write`` None: a write costs the band's
    miss price). :meth:`band` gives the prices that apply to a prompt length.

    >>> ModelPrice("deepseek", "deepseek-chat", cache_hit=0.028, cache_miss=0.28, output=0.42).cache_write
    >>> p = ModelPrice("x", "m", 0.01, 0.1, 0.5, above_tokens=100_000, above_cache_hit=0.05,
    ...                above_cache_miss=0.5, above_output=2.5)
    >>> p.band(100_000).cache_miss, p.band(100_001).cache_miss
    (0.1, 0.5)
    """

    provider: str
    model: str
    cache_hit: float = attrs.field(converter=float)
    cache_miss: float = attrs.field(converter=float)
    output: float = attrs.field(converter=float)
    cache_write: float | None = attrs.field(default=None, converter=attrs.converters.optional(float))
    cache_write_1h: float | None = attrs.field(default=None, converter=attrs.converters.optional(float))
    source: str | None = None
    as_of: str | None = None
    above_tokens: int | None = attrs.field(default=None, kw_only=True)
    above_cache_hit: float | None = attrs.field(
        default=None, kw_only=True, converter=attrs.converters.optional(float)
    )
    above_cache_miss: float | None = attrs.field(
        default=None, kw_only=True, converter=attrs.converters.optional(float)
    )
    above_output: float | None = attrs.field(
        default=None, kw_only=True, converter=attrs.converters.optional(float)
    )
    above_cache_write: float | None = attrs.field(
        default=None, kw_only=True, converter=attrs.converters.optional(float)
    )
    above_cache_write_1h: float | None = attrs.field(
        default=None, kw_only=True, converter=attrs.converters.optional(float)
    )

    @cache_hit.validator
    @cache_miss.validator
    @output.validator
    def _check(self, attribute: attrs.Attribute[float], value: float) -> None:
        if not math.isfinite(value) or value < 0:
            raise PriceError(
                f"price {self.model}.{attribute.name} must be a finite number >= 0, got {value!r}"
            )

    @cache_write.validator
    @cache_write_1h.validator
    @above_cache_hit.validator
    @above_cache_miss.validator
    @above_output.validator
    @above_cache_write.validator
    @above_cache_write_1h.validator
    def _check_write(self, attribute: attrs.Attribute[float | None], value: float | None) -> None:
        if value is not None and (not math.isfinite(value) or value < 0):
            raise PriceError(
                f"price {self.model}.{attribute.name} must be a finite number >= 0, got {value!r}"
            )

    def __attrs_post_init__(self) -> None:
        """A band is whole or absent: ``above_tokens`` a whole number >= 1 with the band's prices."""
        banded = {name: getattr(self, name) for name in BAND_FIELDS}
        if self.above_tokens is None:
            given = [name for name, value in banded.items() if value is not None]
            if given:
                raise PriceError(f"price {self.model}: {', '.join(given)} given without above_tokens")
            return
        if (
            isinstance(self.above_tokens, bool)
            or not isinstance(self.above_tokens, int)
            or self.above_tokens < 1
        ):
            raise PriceError(
                f"price {self.model}.above_tokens must be a whole number of tokens >= 1, got {self.above_tokens!r}"
            )
        missing = [name for name in BAND_FIELDS[:3] if banded[name] is None]
        if missing:
            raise PriceError(
                f"price {self.model}: above_tokens={self.above_tokens} lacks {', '.join(missing)}"
            )

    def band(self, prompt_tokens: int | None) -> ModelPrice:
        """The prices of a call whose whole prompt is ``prompt_tokens`` long: this price's band above
        ``above_tokens`` when the prompt is longer (a price without a band: itself; None: the base band)."""
        if self.above_tokens is None or prompt_tokens is None or prompt_tokens <= self.above_tokens:
            return self
        return ModelPrice(
            self.provider,
            self.model,
            cache_hit=self.above_cache_hit,  # type: ignore[arg-type]  # set: checked at creation
            cache_miss=self.above_cache_miss,  # type: ignore[arg-type]
            output=self.above_output,  # type: ignore[arg-type]
            cache_write=self.above_cache_write,
            cache_write_1h=self.above_cache_write_1h,
            source=self.source,
            as_of=self.as_of,
        )


#: What may follow a model version's name and still be that version: a dated snapshot
#: (``-20250929``, ``-2024-08-06``, OpenAI's ``-0613``), ``-latest``, or a host's ``@…`` / ``:…`` tag.
_SNAPSHOT: Final[re.Pattern[str]] = re.compile(r"(-\d{8}|-\d{4}-\d{2}-\d{2}|-\d{4}|-latest|@.*|:.*)?")


def lookup_model(name: str, table: Mapping[str, ModelPrice]) -> str | None:
    """The key of ``table`` that prices ``name``: exact, else without a ``provider/`` prefix and case,
    else a key of which ``name`` is a dated snapshot (``gpt-4o-2024-08-06`` -> ``gpt-4o``,
    ``claude-sonnet-4-5-20250929`` -> ``claude-sonnet-4-5``). Never another version: ``claude-opus-4-6``
    is not ``claude-opus-4``, and ``gpt-5.3-codex`` is not ``gpt-5``.

    >>> table = {"claude-sonnet-4-5": ModelPrice("x", "claude-sonnet-4-5", 0.3, 3, 15)}
    >>> lookup_model("claude-sonnet-4-5-20250929", table), lookup_model("claude-opus-4-7", table)
    ('claude-sonnet-4-5', None)
    """
    if name in table:
        return name
    bare = name.rsplit("/", 1)[-1].lower()
    lowered = {k.lower(): k for k in table}
    if bare in lowered:
        return lowered[bare]
    candidates = [k for k in lowered if bare.startswith(k) and _SNAPSHOT.fullmatch(bare[len(k) :])]
    return lowered[max(candidates, key=len)] if candidates else None
