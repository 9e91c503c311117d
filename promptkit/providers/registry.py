"""Provider profiles: everything promptkit knows about one provider, in one place, and a registry.

A :class:`ProviderProfile` names the provider's request-body builder, its system-placement
normalization, the tokenizer and render model the analyzer uses for it (and the render for thinking
calls), its cache model, its models' prices and default model, and how to recognise it from a model
name, an endpoint URL or the shape of a usage object. The engine, ``--provider``,
:func:`~promptkit.providers.record.request_record`, pricing and the log loaders all ask this registry.
Third-party packages add providers through the ``promptkit.providers`` entry-point group (an entry
point names a :class:`ProviderProfile`, or a module with ``PROFILE``).

>>> get_provider("deepseek").cache_model
'deepseek'
>>> infer_provider(model="claude-sonnet-4-5"), infer_provider(model="gpt-4o-mini"), infer_provider(url="https://api.deepseek.com/v1")
('anthropic', 'openai', 'deepseek')
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import attrs

from promptkit.errors import ProviderError
from promptkit.layout import RequestRecord

if TYPE_CHECKING:  # pragma: no cover
    # the one pricing module; imported for typing only (it sits above providers)
    from promptkit.cache.report.pricing import ModelPrice

__all__ = [
    "ENTRY_POINT_GROUP",
    "ProviderProfile",
    "available_providers",
    "get_provider",
    "infer_provider",
    "infer_record_provider",
    "register_provider",
]

#: The entry-point group third-party provider profiles register under.
ENTRY_POINT_GROUP: Final[str] = "promptkit.providers"


def _prices(value: Any) -> Mapping[str, ModelPrice]:
    if isinstance(value, Mapping):
        return dict(value)
    return {p.model: p for p in value}


@attrs.frozen(slots=True)
class ProviderProfile:
    """One provider.

    - ``name``: what ``--provider`` takes; ``description``: one line.
    - ``build_request``: ``(prompt_or_messages, *, model, ...) -> dict``, the request body builder (None
      for analysis-only profiles such as ``exact``).
    - ``normalize``: the provider's system-placement normalization of a message list (DeepSeek's
      system-to-user rule), or None.
    - ``tokenizer``, ``render``, ``cache_model``: names for
      :func:`~promptkit.cache.tokenizers.get_tokenizer`, :func:`~promptkit.cache.render.get_render_model`
      and :func:`~promptkit.cache.models.get_cache_model`; ``thinking_render(request)`` returns the render
      for a request in thinking mode (None otherwise).
    - ``prices`` (model name -> :class:`~promptkit.cache.report.pricing.ModelPrice`: a plugin's own
      models; the built-in models' dated prices are :data:`~promptkit.cache.report.pricing.BUILTIN_PRICES`)
      and ``default_model``
      (priced when a log does not name its model); ``context_window``: the largest prompt any of its
      models takes, in tokens (None: unknown).
    - Recognition: ``model_patterns`` (regular expressions matched at the start of a model name, a
      ``provider/`` prefix removed), ``url_hosts`` (host suffixes), ``usage_shapes`` (names from
      :func:`~promptkit.providers.usage.usage_shape`).
    - ``exact_tokens``: whether the tokenizer is the provider's own (token counts exact) or an
      approximation; ``layout_aligned``: whether ``build_request`` keeps one body message per prepared
      message (so a layout stays aligned with the body, as request logs need).
    """

    name: str
    description: str
    tokenizer: str
    render: str
    cache_model: str
    build_request: Callable[..., dict[str, Any]] | None = None
    normalize: Callable[[Sequence[Any]], list[Any]] | None = None
    thinking_render: Callable[[Mapping[str, Any]], str | None] | None = None
    prices: Mapping[str, ModelPrice] = attrs.field(factory=dict, converter=_prices)
    default_model: str | None = None
    context_window: int | None = None
    model_patterns: tuple[str, ...] = ()
    url_hosts: tuple[str, ...] = ()
    usage_shapes: tuple[str, ...] = ()
    exact_tokens: bool = False
    layout_aligned: bool = True

    def recognises_model(self, model: str) -> bool:
        """Whether ``model`` (``provider/`` prefix and case ignored) is one of this provider's models."""
        bare = model.rsplit("/", 1)[-1].lower()
        return any(re.match(p, bare) for p in self.model_patterns)

    def recognises_url(self, url: str) -> bool:
        """Whether ``url``'s host is (a subdomain of) one of :attr:`url_hosts`."""
        host = (urlsplit(url if "//" in url else "//" + url).hostname or "").lower()
        return any(host == h or host.endswith("." + h) for h in self.url_hosts)


_REGISTRY: dict[str, ProviderProfile] = {}
_LOADED = False


def register_provider(profile: ProviderProfile, *, replace: bool = False) -> ProviderProfile:
    """Add a provider profile (``replace=True`` to override one of the same name); returns it."""
    if not isinstance(profile, ProviderProfile):
        raise ProviderError(f"register_provider: expected a ProviderProfile, got {type(profile).__name__}")
    if profile.name in _REGISTRY and not replace and _REGISTRY[profile.name] is not profile:
        raise ProviderError(f"register_provider: a provider named {profile.name!r} is already registered")
    _REGISTRY[profile.name] = profile
    return profile


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    from promptkit.providers import anthropic, deepseek, generic, ollama, openai

    for module in (deepseek, openai, anthropic, ollama, generic):
        for profile in module.PROFILES:
            _REGISTRY.setdefault(profile.name, profile)
    from promptkit.plugins import entry_point_objects

    for profile in entry_point_objects(
        ENTRY_POINT_GROUP, ProviderProfile, attribute="PROFILE", what="provider plugin", error=ProviderError
    ):
        _REGISTRY.setdefault(profile.name, profile)


def available_providers() -> dict[str, ProviderProfile]:
    """Every registered provider profile by name (built-ins, then entry-point plugins)."""
    _load()
    return dict(_REGISTRY)


def get_provider(name: str | ProviderProfile) -> ProviderProfile:
    """The profile called ``name`` (a profile is returned as it is); raises
    :class:`~promptkit.errors.ProviderError` listing the known names."""
    if isinstance(name, ProviderProfile):
        return name
    providers = available_providers()
    if not isinstance(name, str) or name not in providers:
        raise ProviderError(f"unknown provider {name!r}; known: {', '.join(providers)}")
    return providers[name]


def infer_provider(
    *, model: str | None = None, url: str | None = None, usage_shape: str | None = None
) -> str | None:
    """The provider recognised from an endpoint ``url`` (most specific), a ``model`` name, or a usage
    object's shape (:func:`~promptkit.providers.usage.usage_shape`), in that order; None when nothing
    matches."""
    providers = available_providers().values()
    if url:
        for p in providers:
            if p.recognises_url(url):
                return p.name
    if model:
        for p in providers:
            if p.recognises_model(model):
                return p.name
    if usage_shape:
        for p in providers:
            if usage_shape in p.usage_shapes:
                return p.name
    return None


def infer_record_provider(record: RequestRecord) -> str | None:
    """The provider of a record: the one it names, else the one recognised from its URL, its request's
    model name, or its usage (:func:`infer_provider`)."""
    if record.provider is not None:
        return record.provider
    model = record.request.get("model")
    shape = record.meta.get("usage_shape")
    return infer_provider(
        model=model if isinstance(model, str) else None,
        url=record.url,
        usage_shape=shape if isinstance(shape, str) else None,
    )
