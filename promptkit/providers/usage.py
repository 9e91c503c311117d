"""The usage objects of the OpenAI, DeepSeek and Anthropic shapes, read into
:class:`~promptkit.layout.Usage` (:func:`parse_usage`) and checked (:func:`check_usage`).

This module knows no provider profile: :func:`~promptkit.providers.registry.normalize_usage` (what the
log formats call) gives a usage object to the profile that brings a parser of its own for its shape
(Gemini's ``usageMetadata``), else to :func:`parse_usage`. Only the registry imports this module's
parser, so the two are no circle.

>>> parse_usage({"prompt_cache_hit_tokens": 30, "prompt_cache_miss_tokens": 70}).cached_tokens
30
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from promptkit.errors import RecordFormatError, UnknownAttributeError
from promptkit.layout import Usage, token_count as count, type_name

__all__ = ["check_usage", "parse_usage"]

#: Names that moved to :mod:`promptkit.providers.registry` (they work here for one release, with a
#: DeprecationWarning naming the new home).
_MOVED = ("normalize_usage", "usage_shape")


def _anthropic_split(usage: Mapping[str, Any], where: str, created: int | None) -> int | None:
    """Tokens written with the 1-hour TTL (``cache_creation.ephemeral_1h_input_tokens``); 0 when the
    usage splits writes and none were 1-hour, None when it does not split them."""
    detail = usage.get("cache_creation")
    if detail is None:
        return None
    if not isinstance(detail, Mapping):
        raise RecordFormatError(f"{where}.cache_creation: expected an object, got {type_name(detail)}")
    five = count(detail.get("ephemeral_5m_input_tokens"), f"{where}.cache_creation.ephemeral_5m_input_tokens")
    hour = count(detail.get("ephemeral_1h_input_tokens"), f"{where}.cache_creation.ephemeral_1h_input_tokens")
    if five is None and hour is None:
        return None
    if created is not None and (five or 0) + (hour or 0) != created:
        raise RecordFormatError(
            f"{where}.cache_creation: ephemeral_5m_input_tokens + ephemeral_1h_input_tokens = "
            f"{(five or 0) + (hour or 0)}, but cache_creation_input_tokens = {created}"
        )
    return hour or 0


def parse_usage(usage: Mapping[str, Any], where: str = "usage") -> Usage:
    """Read a usage object of the OpenAI, DeepSeek or Anthropic shape into :class:`~promptkit.layout.Usage`
    (:func:`~promptkit.providers.registry.normalize_usage` first gives a shape a profile parses itself,
    such as Gemini's, to that profile).

    - DeepSeek: ``prompt_cache_hit_tokens`` (cached) + ``prompt_cache_miss_tokens`` = ``prompt_tokens``.
    - Anthropic: ``cache_read_input_tokens`` (cached), ``cache_creation_input_tokens`` (written, split
      into ``cache_creation.ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens``) and
      ``input_tokens`` (after the last breakpoint) add up to the prompt; ``output_tokens``.
    - OpenAI: ``prompt_tokens`` with ``prompt_tokens_details.cached_tokens`` (and ``cache_write_tokens``
      when reported); the Responses API's ``input_tokens`` / ``input_tokens_details`` too.

    Raises :class:`~promptkit.errors.RecordFormatError` naming the field when a count is not a
    non-negative integer, and when the counts contradict each other (:func:`check_usage`): a reported
    figure that cannot be true is a problem, never silently corrected.

    Example::

        >>> parse_usage({"prompt_tokens": 2942, "completion_tokens": 71,
        ...                  "prompt_cache_hit_tokens": 320, "prompt_cache_miss_tokens": 2622})
        Usage(prompt_tokens=2942, completion_tokens=71, cached_tokens=320, cache_write_tokens=None, cache_write_1h_tokens=None)
        >>> parse_usage({"input_tokens": 21, "cache_read_input_tokens": 188086,
        ...                  "cache_creation_input_tokens": 0, "output_tokens": 393})
        Usage(prompt_tokens=188107, completion_tokens=393, cached_tokens=188086, cache_write_tokens=0, cache_write_1h_tokens=None)
    """
    if not isinstance(usage, Mapping):
        raise RecordFormatError(f"{where}: expected an object, got {type_name(usage)}")

    def get(key: str) -> int | None:
        return count(usage.get(key), f"{where}.{key}")

    read, created = get("cache_read_input_tokens"), get("cache_creation_input_tokens")
    hit, miss = get("prompt_cache_hit_tokens"), get("prompt_cache_miss_tokens")
    if read is not None or created is not None:  # Anthropic
        uncached = get("input_tokens")
        prompt = None if uncached is None else uncached + (read or 0) + (created or 0)
        stated = get("prompt_tokens")  # a gateway's total (LiteLLM, OpenRouter), when it gives one
        if prompt is not None and stated is not None and stated != prompt:
            raise RecordFormatError(
                f"{where}.prompt_tokens: {stated}, but input_tokens + cache_read_input_tokens + "
                f"cache_creation_input_tokens = {uncached} + {read or 0} + {created or 0} = {prompt}"
            )
        hour = _anthropic_split(usage, where, created)
        return check_usage(Usage(prompt, get("output_tokens"), read or 0, created or 0, hour), where)
    prompt = _one_of(get, where, "prompt_tokens", "input_tokens")
    completion = _one_of(get, where, "completion_tokens", "output_tokens")
    if hit is not None or miss is not None:  # DeepSeek
        _agrees(usage, where, hit)
        if prompt is None and hit is not None and miss is not None:
            prompt = hit + miss
        elif prompt is not None and hit is not None and miss is not None and hit + miss != prompt:
            raise RecordFormatError(
                f"{where}.prompt_cache_hit_tokens: {hit} + prompt_cache_miss_tokens {miss} = {hit + miss}, "
                f"but prompt_tokens = {prompt}"
            )
        return check_usage(
            Usage(prompt, completion, hit, None), where, cached_field="prompt_cache_hit_tokens"
        )
    details: object = usage.get("prompt_tokens_details")
    details_name = "prompt_tokens_details"
    if details is None:
        details, details_name = usage.get("input_tokens_details"), "input_tokens_details"
    cached = write = hour = None
    if details is not None:
        if not isinstance(details, Mapping):
            raise RecordFormatError(f"{where}.{details_name}: expected an object, got {type_name(details)}")
        cached = count(details.get("cached_tokens"), f"{where}.{details_name}.cached_tokens")
        write = count(details.get("cache_write_tokens"), f"{where}.{details_name}.cache_write_tokens")
        hour = count(details.get("cache_write_1h_tokens"), f"{where}.{details_name}.cache_write_1h_tokens")
    return check_usage(
        Usage(prompt, completion, cached, write, hour),
        where,
        cached_field=f"{details_name}.cached_tokens",
        write_field=f"{details_name}.cache_write_tokens",
    )


def _one_of(get: Callable[[str], int | None], where: str, name: str, alias: str) -> int | None:
    """The figure a usage object gives under ``name`` or its ``alias`` (Chat Completions' and the
    Responses API's names for the same count); both given and different is a contradiction, not a choice."""
    first, second = get(name), get(alias)
    if first is not None and second is not None and first != second:
        raise RecordFormatError(f"{where}.{name}: {first}, but {alias} = {second} (one count, two values)")
    return first if first is not None else second


def _agrees(usage: Mapping[str, Any], where: str, hit: int | None) -> None:
    """DeepSeek's ``prompt_cache_hit_tokens`` and the OpenAI-style ``prompt_tokens_details.cached_tokens``
    DeepSeek also sends are one figure: they must agree."""
    details = usage.get("prompt_tokens_details")
    if not isinstance(details, Mapping):
        return
    cached = count(details.get("cached_tokens"), f"{where}.prompt_tokens_details.cached_tokens")
    if cached is not None and hit is not None and cached != hit:
        raise RecordFormatError(
            f"{where}.prompt_cache_hit_tokens: {hit}, but prompt_tokens_details.cached_tokens = {cached} "
            "(one count, two values)"
        )


def check_usage(
    usage: Usage,
    where: str = "usage",
    *,
    cached_field: str = "cache_read_input_tokens",
    write_field: str = "cache_creation_input_tokens",
) -> Usage:
    """``usage`` when its counts can all be true; raises :class:`~promptkit.errors.RecordFormatError`
    naming the field otherwise. Every provider counts cached and written tokens inside the prompt
    (DeepSeek: ``prompt_cache_hit_tokens + prompt_cache_miss_tokens = prompt_tokens``,
    https://api-docs.deepseek.com/guides/kv_cache; OpenAI: ``cached_tokens`` is part of
    ``prompt_tokens``, https://platform.openai.com/docs/guides/prompt-caching; Anthropic: the prompt is
    ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``,
    https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching#tracking-cache-performance), so
    cached + written tokens can never exceed the prompt, and 1-hour writes never exceed the writes.

    >>> check_usage(Usage(prompt_tokens=10, cached_tokens=500), cached_field="prompt_tokens_details.cached_tokens")
    Traceback (most recent call last):
    ...
    promptkit.errors.RecordFormatError: usage.prompt_tokens_details.cached_tokens: 500 cached tokens of a 10-token prompt
    """
    prompt, cached, write = usage.prompt_tokens, usage.cached_tokens or 0, usage.cache_write_tokens or 0
    if prompt is not None and cached > prompt:
        raise RecordFormatError(f"{where}.{cached_field}: {cached} cached tokens of a {prompt}-token prompt")
    if prompt is not None and write > prompt:
        raise RecordFormatError(f"{where}.{write_field}: {write} tokens written of a {prompt}-token prompt")
    if prompt is not None and cached + write > prompt:
        raise RecordFormatError(
            f"{where}.{cached_field}: {cached} cached + {write} written = {cached + write} tokens, more than "
            f"the {prompt}-token prompt"
        )
    hour = usage.cache_write_1h_tokens
    if hour is not None and usage.cache_write_tokens is not None and hour > usage.cache_write_tokens:
        raise RecordFormatError(
            f"{where}.cache_write_1h_tokens: {hour} written with the 1-hour TTL of {write} written"
        )
    return usage


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        warnings.warn(
            f"promptkit.providers.usage.{name} moved to promptkit.providers.registry.{name}; "
            "import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module("promptkit.providers.registry"), name)
    raise UnknownAttributeError(f"module {__name__!r} has no attribute {name!r}")
