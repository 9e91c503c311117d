"""Names a user types, resolved: a provider's name or a mechanism's, for a tokenizer, a render or a cache model.

``promptkit/tokens/`` knows the mechanisms (``cl100k_base``, ``chatml``, ``unit-prefix``, ``hf:PATH``)
and the names the profiles register there; it knows no provider. What ``--provider deepseek``,
``--tokenizer deepseek`` or ``cache-model:openai`` mean is the profiles' to say, so these resolvers
load the profiles first and ask the one of that name; any other name goes to ``tokens/``.

Example::

    >>> resolve_cache_model("deepseek").cache_unit, resolve_cache_model("unit-prefix", unit=32).cache_unit
    (64, 32)
    >>> resolve_tokenizer("openai").name, resolve_render("anthropic").name
    ('o200k_base', 'chatml')
"""

from __future__ import annotations

from typing import Any

from promptkit.providers.registry import available_providers
from promptkit.tokens.cache_models import CacheModel, get_cache_model as mechanism_cache_model
from promptkit.tokens.render import RenderModel, get_render_model as named_render
from promptkit.tokens.tokenizers import Tokenizer, get_tokenizer as named_tokenizer

__all__ = [
    "get_cache_model",
    "get_render_model",
    "get_tokenizer",
    "resolve_cache_model",
    "resolve_render",
    "resolve_tokenizer",
]


def resolve_tokenizer(spec: Any = "cl100k_base") -> Tokenizer:
    """A tokenizer: a provider's name gives that profile's tokenizer
    (:meth:`~promptkit.providers.registry.ProviderProfile.load_tokenizer`); any other name or object
    goes to :func:`promptkit.tokens.tokenizers.get_tokenizer`, once the profiles have registered theirs."""
    profiles = available_providers()
    if isinstance(spec, str) and spec in profiles:
        tokenizer: Tokenizer = profiles[spec].load_tokenizer()
        return tokenizer
    return named_tokenizer(spec)


def resolve_render(spec: Any) -> RenderModel:
    """A render model: a provider's name gives that profile's render
    (:meth:`~promptkit.providers.registry.ProviderProfile.load_render`); any other name or object goes
    to :func:`promptkit.tokens.render.get_render_model`, once the profiles have registered theirs."""
    profiles = available_providers()
    if isinstance(spec, str) and spec in profiles:
        render: RenderModel = profiles[spec].load_render()
        return render
    return named_render(spec)


def resolve_cache_model(spec: str | CacheModel, **overrides: Any) -> CacheModel:
    """A cache model with ``overrides``: a provider's name gives that profile's model with the
    provider's parameters (:meth:`~promptkit.providers.registry.ProviderProfile.new_cache_model`); a
    mechanism's name or a :class:`~promptkit.tokens.cache_models.CacheModel` goes to
    :func:`promptkit.tokens.cache_models.get_cache_model`."""
    profiles = available_providers()
    if isinstance(spec, str) and spec in profiles:
        model: CacheModel = profiles[spec].new_cache_model(**overrides)
        return model
    return mechanism_cache_model(spec, **overrides)


#: The names :mod:`promptkit.analysis` exports: the same resolvers, under the names of the ``tokens/``
#: functions they extend (a provider's name is accepted where a mechanism's is).
get_tokenizer = resolve_tokenizer
get_render_model = resolve_render
get_cache_model = resolve_cache_model
