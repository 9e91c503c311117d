"""Provider profiles: everything promptkit knows about one provider, in one place, and a registry.

A :class:`ProviderProfile` names the provider's request-body builder, its system-placement
normalization, the tokenizer and render model the analyzer uses for it (and the render for thinking
calls), its cache model, its models' prices and default model, and how to recognise it from a model
name, an endpoint URL or the shape of a usage object. The engine, ``--provider``,
:func:`~promptkit.providers.record.request_record`, pricing and the log loaders all ask this registry.
Third-party packages add providers through the ``promptkit.providers`` entry-point group (an entry
point names a :class:`ProviderProfile`, or a module with ``PROFILE``).

>>> get_provider("deepseek").cache_unit, get_provider("deepseek").best_effort
(64, True)
>>> infer_provider(model="claude-sonnet-4-5"), infer_provider(model="gpt-4o-mini"), infer_provider(url="https://api.deepseek.com/v1")
('anthropic', 'openai', 'deepseek')
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

import attrs

from promptkit.errors import ProviderError, RecordFormatError
from promptkit.layout import RequestRecord, Usage, type_name
from promptkit.providers.prices import ModelPrice, lookup_model
from promptkit.providers.usage import check_usage, parse_usage

__all__ = [
    "ENTRY_POINT_GROUP",
    "GENERIC_PROVIDER",
    "ROUTER_HOSTS",
    "ProviderProfile",
    "available_providers",
    "get_provider",
    "infer_provider",
    "infer_record_provider",
    "native_provider",
    "normalize_usage",
    "provider_named",
    "register_provider",
    "usage_shape",
]

#: The entry-point group third-party provider profiles register under.
ENTRY_POINT_GROUP: Final[str] = "promptkit.providers"


def _prices(value: Any) -> Mapping[str, ModelPrice]:
    if isinstance(value, Mapping):
        return dict(value)
    return {p.model: p for p in value}


def normalize_usage(usage: Mapping[str, Any], where: str = "usage") -> Usage:
    """Normalize a provider's ``usage`` object to :class:`~promptkit.layout.Usage`: a profile that
    recognises it and brings a parser of its own (Gemini's ``usageMetadata``: ``promptTokenCount``,
    ``cachedContentTokenCount``, ``candidatesTokenCount``) parses it; any other shape (OpenAI, DeepSeek,
    Anthropic) is read by :func:`~promptkit.providers.usage.parse_usage`.

    Raises :class:`~promptkit.errors.RecordFormatError` naming the field when a count is not a
    non-negative integer, and when the counts contradict each other
    (:func:`~promptkit.providers.usage.check_usage`): a reported figure that cannot be true is a
    problem, never silently corrected.

    Example::

        >>> normalize_usage({"prompt_tokens": 2942, "completion_tokens": 71,
        ...                  "prompt_cache_hit_tokens": 320, "prompt_cache_miss_tokens": 2622})
        Usage(prompt_tokens=2942, completion_tokens=71, cached_tokens=320, cache_write_tokens=None, cache_write_1h_tokens=None)
        >>> normalize_usage({"promptTokenCount": 5000, "cachedContentTokenCount": 4096}).cached_tokens
        4096
    """
    if not isinstance(usage, Mapping):
        raise RecordFormatError(f"{where}: expected an object, got {type_name(usage)}")
    own = _own_parser(usage)
    if own is not None:  # a profile's own parser (a plugin's too) is held to the same rule
        result: Usage = check_usage(own(usage, where), where, cached_field="cached_tokens")
        return result
    return parse_usage(usage, where)


def _own_parser(usage: Mapping[str, Any]) -> Any:
    """The usage parser of a profile that recognises ``usage`` and brings a parser of its own (Gemini's
    ``usageMetadata``), else None."""
    for profile in available_providers().values():
        if profile.usage_parser is not default_usage_parser and profile.recognises_usage(usage):
            return profile.usage_parser
    return None


def default_usage_parser(usage: Mapping[str, Any], where: str) -> Usage:
    """The usage parser of a profile that brings none of its own: :func:`normalize_usage`."""
    return normalize_usage(usage, where)


def usage_shape(usage: object) -> str | None:
    """The provider whose usage object this looks like: the first registered profile whose
    ``usage_keys`` it carries (:meth:`ProviderProfile.recognises_usage`), else None. Kept for older
    callers: :func:`infer_provider` takes the usage object itself (``usage=``).

    >>> usage_shape({"prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": 10})
    'deepseek'
    >>> usage_shape({"input_tokens": 3, "cache_read_input_tokens": 0})
    'anthropic'
    """
    if not isinstance(usage, Mapping):
        return None
    for profile in sorted(available_providers().values(), key=lambda p: p.usage_keys_shared):
        if profile.recognises_usage(usage):
            return profile.name
    return None


#: Hosts of routers: a URL there says nothing of the provider; a ``vendor/model`` name does (OpenRouter
#: routes ``google/gemini-3-pro-preview`` to Google; https://openrouter.ai/docs/features/provider-routing).
ROUTER_HOSTS: Final[tuple[str, ...]] = ("openrouter.ai",)


@attrs.frozen(slots=True)
class ProviderProfile:
    """One provider: what promptkit knows of it, and the objects the analysis uses for it.

    - ``name``: what ``--provider`` takes; ``description``: one line.
    - ``build_request``: ``(prompt_or_messages, *, model, ...) -> dict``, the request body builder (None
      for analysis-only profiles such as ``exact``).
    - ``normalize``: the provider's system-placement normalization of a message list (DeepSeek's
      system-to-user rule), or None.
    - ``tokenizer``, ``render``: a name for :func:`~promptkit.tokens.tokenizers.get_tokenizer` /
      :func:`~promptkit.tokens.render.get_render_model`, the object itself, or a function that loads it; :meth:`load_tokenizer` and
      :meth:`load_render` give the objects. ``cache_model``: the provider's
      :class:`~promptkit.tokens.cache_models.CacheModel` object (:meth:`new_cache_model` gives it with overrides);
      ``thinking_render(request)`` returns the render for a request in thinking mode (None otherwise).
    - ``prices`` (model name -> :class:`~promptkit.providers.prices.ModelPrice`; :meth:`price` looks a
      model up) and ``default_model`` (priced when a log does not name its model); ``context_window``: the largest prompt any of its
      models takes, in tokens (None: unknown).
    - Recognition (:meth:`recognises`, :func:`infer_provider`): ``model_patterns`` (regular expressions
      matched at the start of a model name, a ``vendor/`` or ``models/`` prefix removed),
      ``model_vendors`` (the ``vendor/`` prefixes a router such as OpenRouter gives its models),
      ``aliases`` (the names other tools give the provider: LiteLLM's ``custom_llm_provider``,
      OpenTelemetry's ``gen_ai.provider.name``; see :func:`provider_named`),
      ``url_hosts`` (host suffixes; one starting with ``-`` also matches a prefixed name such as
      Vertex AI's ``us-central1-aiplatform.googleapis.com``), ``url_ports`` (ports that name it, Ollama's 11434), ``usage_keys``
      (keys of a usage object this provider writes; ``usage_keys_shared`` when other servers write them
      too, as OpenAI-compatible ones do: such a profile is asked last).
    - ``usage_parser(usage, where)``: the provider's usage object as a :class:`~promptkit.layout.Usage`.
    - Capabilities: ``exact_tokenizer`` (the tokenizer is the provider's own, so counts are exact; when
      False the local counts are a proportion estimate and the reported counts are the ruler),
      ``best_effort`` (the provider documents its cache as best effort: a hit is not guaranteed, so a
      shortfall can be a provider miss), ``calibration`` (the bundled calibration file in
      ``promptkit/data/``, or None); the cache model answers the rest (:attr:`exact_entries`,
      :attr:`cache_unit`, :meth:`min_cacheable_tokens`).
    - Cache settings a request may ask for (what the what-if suggestions propose, each profile citing
      its provider's documentation): ``needs_explicit_breakpoints`` (nothing is cached unless the
      request marks breakpoints, ``cache_control``), ``extended_ttl_options`` (``(name, seconds)``: a
      breakpoint's ``ttl`` values that keep an entry longer than the cache model's ``ttl``),
      ``retention_options`` (``(value, seconds)``: the request's ``prompt_cache_retention`` values
      that keep an entry longer).
    - ``native_formats``: the log formats (:mod:`promptkit.formats` names) written by an agent that
      speaks only this provider's API, so their calls are this provider's (:func:`native_provider`).
    - ``layout_aligned``: whether ``build_request`` keeps one body message per prepared message (so a
      layout stays aligned with the body, as request logs need).
    """

    name: str
    description: str
    tokenizer: Any
    render: Any
    cache_model: Any
    build_request: Callable[..., dict[str, Any]] | None = None
    normalize: Callable[[Sequence[Any]], list[Any]] | None = None
    thinking_render: Callable[[Mapping[str, Any]], str | None] | None = None
    prices: Mapping[str, ModelPrice] = attrs.field(factory=dict, converter=_prices)
    default_model: str | None = None
    context_window: int | None = None
    model_patterns: tuple[str, ...] = ()
    model_vendors: tuple[str, ...] = ()
    model_excludes: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    url_hosts: tuple[str, ...] = ()
    url_ports: tuple[int, ...] = ()
    usage_keys: tuple[str, ...] = ()
    usage_keys_shared: bool = False
    usage_parser: Callable[[Mapping[str, Any], str], Usage] = default_usage_parser
    exact_tokenizer: bool = False
    best_effort: bool = False
    calibration: str | None = None
    layout_aligned: bool = True
    needs_explicit_breakpoints: bool = False
    extended_ttl_options: tuple[tuple[str, float], ...] = ()
    retention_options: tuple[tuple[str, float], ...] = ()
    native_formats: tuple[str, ...] = ()

    # ------------------------------------------------------------------ the objects

    def load_tokenizer(self) -> Any:
        """The tokenizer object (:class:`~promptkit.tokens.tokenizers.Tokenizer`), loaded once per
        process: ``tokenizer`` is a name, the object, or a function without arguments that loads it
        (so that a profile costs nothing until it is used)."""
        from promptkit.tokens.tokenizers import get_tokenizer

        spec = self.tokenizer
        if callable(spec) and not hasattr(spec, "encode"):
            spec = spec()
        return get_tokenizer(spec)

    def load_render(self) -> Any:
        """The render model object (:class:`~promptkit.tokens.render.RenderModel`): ``render`` is a name,
        the object, or a function without arguments that loads it."""
        from promptkit.tokens.render import get_render_model

        spec = self.render
        if callable(spec) and not hasattr(spec, "render"):
            spec = spec()
        return get_render_model(spec)

    def new_cache_model(self, **overrides: Any) -> Any:
        """The provider's cache model object, with ``overrides`` (``ttl=...``) applied."""
        from promptkit.tokens.cache_models import get_cache_model

        return get_cache_model(self.cache_model, **overrides)

    # ------------------------------------------------------------------ capability questions

    @property
    def exact_tokens(self) -> bool:
        """Deprecated alias of :attr:`exact_tokenizer`."""
        return self.exact_tokenizer

    @property
    def exact_entries(self) -> bool:
        """Whether the cache stores exact entries read only whole (Anthropic's breakpoints) rather than
        any prefix of what it holds."""
        return bool(self.new_cache_model().exact_entries)

    @property
    def cache_unit(self) -> int | None:
        """The unit a cached prefix is rounded down to, in tokens (None: any length)."""
        unit = self.new_cache_model().cache_unit
        return None if unit is None else int(unit)

    def min_cacheable_tokens(self, model: str | None = None) -> int:
        """The smallest prompt the provider caches for ``model`` (0: no minimum)."""
        return int(self.new_cache_model().min_cacheable_tokens(model))

    def price(self, model: str | None = None) -> ModelPrice | None:
        """The list price of ``model``: its own version's entry (router prefix and case off, or a dated
        snapshot of it: :func:`~promptkit.providers.prices.lookup_model`; never another version's), else
        of :attr:`default_model` when no model is named; None when it has no price.

        >>> get_provider("gemini").price("google/gemini-3-pro-preview").cache_hit
        0.2
        >>> get_provider("anthropic").price("claude-opus-4-6").cache_miss, get_provider("anthropic").price("claude-opus-9")
        (5.0, None)
        """
        name = model.strip() if model else self.default_model
        if not name:
            return None
        key = lookup_model(name, self.prices)
        return None if key is None else self.prices[key]

    def parse_usage(self, usage: Mapping[str, Any], where: str = "usage") -> Usage:
        """``usage`` (this provider's usage object) as a :class:`~promptkit.layout.Usage`."""
        return self.usage_parser(usage, where)

    # ------------------------------------------------------------------ recognition

    def recognises_model(self, model: str) -> bool:
        """Whether ``model`` is one of this provider's models: its bare name (``vendor/`` or ``models/``
        prefix and case ignored) matches :attr:`model_patterns`, or its ``vendor/`` prefix is one of
        :attr:`model_vendors`; a name matching :attr:`model_excludes` never is."""
        lowered = model.strip().lower()
        bare = lowered.rsplit("/", 1)[-1]
        if any(re.match(p, bare) for p in self.model_excludes):
            return False
        if any(re.match(p, bare) for p in self.model_patterns):
            return True
        vendor = lowered.split("/", 1)[0] if "/" in lowered else None
        return vendor is not None and vendor in self.model_vendors

    def recognises_url(self, url: str) -> bool:
        """Whether ``url``'s host is (a subdomain of) one of :attr:`url_hosts`, or its port one of
        :attr:`url_ports`."""
        parts = urlsplit(url if "//" in url else "//" + url)
        host = (parts.hostname or "").lower()
        try:
            port = parts.port
        except ValueError:
            port = None
        if port is not None and port in self.url_ports:
            return True
        return any(
            host == h or host.endswith("." + h) or (h.startswith("-") and host.endswith(h))
            for h in self.url_hosts
        )

    def recognises_usage(self, usage: object) -> bool:
        """Whether a usage object carries one of this provider's own keys (:attr:`usage_keys`)."""
        return isinstance(usage, Mapping) and any(k in usage for k in self.usage_keys)

    def recognises(self, *, url: str | None = None, model: str | None = None, usage: object = None) -> bool:
        """Whether any of ``url``, ``model`` or ``usage`` is this provider's."""
        return bool(
            (url and self.recognises_url(url))
            or (model and self.recognises_model(model))
            or (usage is not None and self.recognises_usage(usage))
        )


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


#: The profile analyzed when nothing recognises a session's provider (always with a note, and
#: ``AnalysisResult.provider_assumed``): exact prefix, no cache unit, the reported counts as the ruler.
GENERIC_PROVIDER: Final[str] = "generic"

#: The modules of the built-in profiles. They are found through the entry points declared in
#: ``pyproject.toml`` (``[project.entry-points."promptkit.providers"]``), exactly as plugins are; this
#: list is read only when promptkit's own distribution metadata is absent (a source tree on
#: ``sys.path`` that was never installed), so the built-ins never depend on an install step.
_BUILTIN_MODULES: Final[tuple[str, ...]] = (
    "promptkit.providers.deepseek",
    "promptkit.providers.openai",
    "promptkit.providers.anthropic",
    "promptkit.providers.gemini",
    "promptkit.providers.open_models",
    "promptkit.providers.ollama",
    "promptkit.providers.generic",
)


def _builtin_fallback() -> list[ProviderProfile]:
    import importlib
    from importlib import metadata

    try:
        metadata.distribution("promptkit")
    except metadata.PackageNotFoundError:
        profiles: list[ProviderProfile] = []
        for name in _BUILTIN_MODULES:
            profiles.extend(importlib.import_module(name).PROFILES)
        return profiles
    return []


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    from promptkit.plugins import entry_point_objects

    found = list(
        entry_point_objects(
            ENTRY_POINT_GROUP,
            ProviderProfile,
            attribute="PROFILE",
            what="provider plugin",
            error=ProviderError,
        )
    )
    for profile in [*_builtin_fallback(), *found]:
        _REGISTRY.setdefault(profile.name, profile)
    if GENERIC_PROVIDER not in _REGISTRY:
        raise ProviderError(
            f"the built-in provider profiles are not registered (no {GENERIC_PROVIDER!r} under the "
            f"{ENTRY_POINT_GROUP!r} entry points): promptkit's install metadata is stale; reinstall it "
            "(pip install -e .)"
        )


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
    *,
    model: str | None = None,
    url: str | None = None,
    usage: object = None,
    usage_shape: str | None = None,
) -> str | None:
    """The provider recognised from an endpoint ``url``, a ``model`` name or a ``usage`` object, in
    that order; None when nothing matches (the caller then assumes :data:`GENERIC_PROVIDER`, and says so).

    A router's URL (OpenRouter, :data:`ROUTER_HOSTS`) names no provider: the model's ``vendor/`` prefix
    routes to the vendor's profile. ``usage_shape`` (a provider name, as
    :func:`usage_shape` returns) is accepted for older callers.

    Example::

        >>> infer_provider(url="http://localhost:11434/api/chat")
        'ollama'
        >>> infer_provider(url="https://openrouter.ai/api/v1", model="google/gemini-3-pro-preview")
        'gemini'
        >>> infer_provider(usage={"promptTokenCount": 10, "cachedContentTokenCount": 0})
        'gemini'
        >>> infer_provider(model="my-own-model") is None
        True
    """
    providers = [p for p in available_providers().values() if p.name != GENERIC_PROVIDER]
    if url and not _is_router(url):
        for p in providers:
            if p.recognises_url(url):
                return p.name
    if model:
        for p in providers:
            if p.recognises_model(model):
                return p.name
    if usage is not None:
        for p in sorted(providers, key=lambda p: p.usage_keys_shared):
            if p.recognises_usage(usage):
                return p.name
    if usage_shape and usage_shape in available_providers():
        return usage_shape
    return None


def _is_router(url: str) -> bool:
    host = (urlsplit(url if "//" in url else "//" + url).hostname or "").lower()
    return any(host == h or host.endswith("." + h) for h in ROUTER_HOSTS)


def provider_named(name: str) -> str | None:
    """The provider another tool calls ``name`` (a profile's name or one of its ``aliases``, case
    ignored), or None.

    >>> provider_named("azure.ai.openai"), provider_named("vertex_ai"), provider_named("bedrock")
    ('openai', 'gemini', None)
    """
    wanted = name.strip().lower()
    for profile in available_providers().values():
        if wanted == profile.name or wanted in profile.aliases:
            return profile.name
    return None


def native_provider(log_format: str) -> str | None:
    """The provider whose API the agent writing ``log_format`` speaks (the profile that lists it in
    :attr:`~ProviderProfile.native_formats`), or None when the format may hold any provider's calls.

    >>> native_provider("claude-code"), native_provider("codex"), native_provider("litellm")
    ('anthropic', 'openai', None)
    """
    for profile in available_providers().values():
        if log_format in profile.native_formats:
            return profile.name
    return None


def infer_record_provider(record: RequestRecord) -> str | None:
    """The provider of a record: the one it names, else the one recognised from its URL, its request's
    model name, or its raw usage object (``meta["usage"]``) (:func:`infer_provider`)."""
    if record.provider is not None:
        return record.provider
    model = record.request.get("model")
    shape = record.meta.get("usage_shape")
    return infer_provider(
        model=model if isinstance(model, str) else None,
        url=record.url,
        usage=record.meta.get("usage"),
        usage_shape=shape if isinstance(shape, str) else None,
    )
