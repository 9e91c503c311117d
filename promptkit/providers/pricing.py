"""Prices: USD per million tokens, per model. Each provider profile carries its models' list prices.

>>> ModelPrice("anthropic", "claude-sonnet-4-5", cache_hit=0.3, cache_miss=3, output=15, cache_write=3.75,
...            cache_write_1h=6).cache_write_1h
6.0
"""

from __future__ import annotations

import math

import attrs

from promptkit.errors import PriceError

__all__ = ["ModelPrice"]


@attrs.frozen(slots=True)
class ModelPrice:
    """One model's prices in USD per million tokens.

    ``cache_hit`` is a prompt token read from the cache, ``cache_miss`` a prompt token computed afresh
    (the plain input price), ``output`` a generated token, ``cache_write`` a prompt token written to
    the cache where the provider bills writes (Anthropic's 5-minute write; ``None`` elsewhere, where
    a write costs the miss price); ``cache_write_1h`` Anthropic's 1-hour write (2 x input).

    >>> ModelPrice("deepseek", "deepseek-chat", cache_hit=0.028, cache_miss=0.28, output=0.42).cache_write
    """

    provider: str
    model: str
    cache_hit: float = attrs.field(converter=float)
    cache_miss: float = attrs.field(converter=float)
    output: float = attrs.field(converter=float)
    cache_write: float | None = attrs.field(default=None, converter=attrs.converters.optional(float))
    cache_write_1h: float | None = attrs.field(default=None, converter=attrs.converters.optional(float))

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
    def _check_write(self, attribute: attrs.Attribute[float | None], value: float | None) -> None:
        if value is not None and (not math.isfinite(value) or value < 0):
            raise PriceError(
                f"price {self.model}.{attribute.name} must be a finite number >= 0, got {value!r}"
            )
