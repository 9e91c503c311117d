"""Model, provider and cache settings of a request: :class:`PinModel`, :class:`ChangeProvider`,
:class:`SetTTL`, :class:`SetRetention`, :class:`SetCacheKey` and :class:`UseCacheModel` (the last
changes the cache model the replay's *after* analysis uses).

>>> PinModel("gpt-4.1").describe()
'pin the model to gpt-4.1'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from promptkit.errors import UsageError
from promptkit.layout import (
    RequestRecord,
)
from promptkit.whatif.transforms._bodies import (
    _body,
)
from promptkit.whatif.transforms.base import Transform

__all__ = ["ChangeProvider", "PinModel", "SetCacheKey", "SetRetention", "SetTTL", "UseCacheModel"]


@attrs.frozen(slots=True)
class PinModel(Transform):
    """Send every request to one ``model`` (a session that switches models starts a new cache).

    >>> PinModel("gpt-4.1").describe()
    'pin the model to gpt-4.1'
    """

    model: str

    def describe(self) -> str:
        return f"pin the model to {self.model}"

    def apply(self, record: RequestRecord) -> RequestRecord:
        if record.request.get("model") == self.model:
            return record
        return attrs.evolve(record, request={**record.request, "model": self.model})


@attrs.frozen(slots=True)
class ChangeProvider(Transform):
    """Send the requests to another ``provider`` (its tokenizer, rendering, cache rules and prices
    apply). The request's model becomes ``model`` if given, else stays when the provider recognises it,
    else becomes the provider's default model.

    >>> ChangeProvider("anthropic").apply(RequestRecord({"model": "gpt-4.1", "messages": []}, session="s")).request["model"]
    'claude-sonnet-4-5'
    """

    provider: str
    model: str | None = None

    def describe(self) -> str:
        return f"send to {self.provider}" + (f" ({self.model})" if self.model else "")

    def apply(self, record: RequestRecord) -> RequestRecord:
        from promptkit.providers.registry import get_provider

        profile = get_provider(self.provider)
        current = record.request.get("model")
        model = self.model
        if model is None:
            model = (
                current
                if isinstance(current, str) and profile.recognises_model(current)
                else profile.default_model
            )
        request = dict(record.request)
        if model is not None:
            request["model"] = model
        return attrs.evolve(record, request=request, provider=profile.name)

    def after_options(self) -> dict[str, Any]:
        """The *after* analysis uses this provider, even when the replay was given another one."""
        return {"provider": self.provider}


def _each_cache_control(body: dict[str, Any], fn: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Apply ``fn`` to every ``cache_control`` object of ``body`` in place (body is a private copy)."""

    def visit(obj: Any) -> None:
        if isinstance(obj, dict):
            if isinstance(obj.get("cache_control"), Mapping):
                obj["cache_control"] = fn(dict(obj["cache_control"]))
            for v in obj.values():
                if isinstance(v, list | dict):
                    visit(v)
        elif isinstance(obj, list):
            for v in obj:
                visit(v)

    if isinstance(body.get("cache_control"), Mapping):
        body["cache_control"] = fn(dict(body["cache_control"]))
    for name in ("tools", "system", "messages"):
        visit(body.get(name))


@attrs.frozen(slots=True)
class SetTTL(Transform):
    """Give every Anthropic cache breakpoint the time-to-live ``ttl`` (``"5m"`` or ``"1h"``): adds
    ``"ttl"`` to each ``cache_control``. A 1-hour write costs twice the input price (the replay prices
    it so). Requests without breakpoints are unchanged (add some with :class:`Breakpoints`).

    >>> r = RequestRecord({"system": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}],
    ...                    "messages": []}, session="s")
    >>> SetTTL("1h").apply(r).request["system"][0]["cache_control"]
    {'type': 'ephemeral', 'ttl': '1h'}
    """

    ttl: str = attrs.field(default="1h")

    @ttl.validator
    def _check(self, attribute: attrs.Attribute[str], value: str) -> None:
        if value not in ("5m", "1h"):
            raise UsageError(f"SetTTL.ttl: expected '5m' or '1h', got {value!r}")

    def describe(self) -> str:
        return f"cache breakpoints with a {self.ttl} TTL"

    def apply(self, record: RequestRecord) -> RequestRecord:
        body = _body(record)
        _each_cache_control(body, lambda cc: {**cc, "ttl": self.ttl})
        return record if body == record.request else attrs.evolve(record, request=body)


@attrs.frozen(slots=True)
class SetRetention(Transform):
    """OpenAI's ``prompt_cache_retention`` (``"24h"`` keeps a cached prefix 24 hours; ``"in_memory"``
    the default 5 to 10 minutes).

    >>> SetRetention("24h").describe()
    'OpenAI prompt_cache_retention=24h'
    """

    retention: str = "24h"

    def describe(self) -> str:
        return f"OpenAI prompt_cache_retention={self.retention}"

    def apply(self, record: RequestRecord) -> RequestRecord:
        return attrs.evolve(record, request={**record.request, "prompt_cache_retention": self.retention})


@attrs.frozen(slots=True)
class SetCacheKey(Transform):
    """OpenAI's ``prompt_cache_key`` (``{session}`` is replaced by the record's session).

    The cache models already assume ideal routing (every request reaches the cache that holds its
    prefix), so a key changes no predicted figure; it is here so that a replayed log carries it.

    >>> SetCacheKey().apply(RequestRecord({"messages": []}, session="s1")).request["prompt_cache_key"]
    's1'
    """

    key: str = "{session}"

    def describe(self) -> str:
        return f"OpenAI prompt_cache_key={self.key}"

    def apply(self, record: RequestRecord) -> RequestRecord:
        key = self.key.replace("{session}", record.session)
        return attrs.evolve(record, request={**record.request, "prompt_cache_key": key})


@attrs.frozen(slots=True)
class UseCacheModel(Transform):
    """Analyze the *after* side with another cache model (``exact``, ``deepseek``, ``openai``,
    ``anthropic``, ``vllm``); records are unchanged.

    >>> UseCacheModel("vllm").after_options()
    {'cache_model': 'vllm'}
    """

    name: str

    def describe(self) -> str:
        return f"use the {self.name} cache model"

    def apply(self, record: RequestRecord) -> RequestRecord:
        return record

    def after_options(self) -> dict[str, Any]:
        return {"cache_model": self.name}
