"""What one analysis of one provider's records takes: :class:`AnalysisSpec` (picklable: a worker process
is sent the spec, never a tokenizer) and :class:`AnalysisContext`, the spec made live in a process (the
profile, the cache model, the request tokenizers), made once per process (:func:`context_for`).

>>> spec = AnalysisSpec("exact", None, None, None, "consecutive", timed=False)
>>> context_for(spec).model.name
'exact'
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

from promptkit.layout import RequestRecord
from promptkit.providers.registry import GENERIC_PROVIDER, ProviderProfile, get_provider
from promptkit.providers.resolve import resolve_cache_model, resolve_render, resolve_tokenizer
from promptkit.tokens.cache_models import CacheModel

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.tokens.tokenize import RequestTokenizer

__all__ = [
    "CONTEXTS_KEPT",
    "DEFAULT_PROVIDER",
    "VIEWS",
    "AnalysisContext",
    "AnalysisSpec",
    "DescribedContext",
    "context_for",
    "default_view",
    "name_of",
    "profile_and_model",
]

#: The two views of an analysis (see :mod:`promptkit.analysis.api`).
VIEWS: Final[tuple[str, ...]] = ("consecutive", "simulated")

#: The provider assumed for records whose provider nothing in the log recognises: the generic rules
#: (exact prefix, no minimum, no unit; no provider's own rules are borrowed), always with a note and
#: ``AnalysisResult.provider_assumed``.
DEFAULT_PROVIDER: Final[str] = GENERIC_PROVIDER


def default_view(records: Sequence[RequestRecord]) -> str:
    """``simulated`` when every record is a call of a conversation tree (``meta["conversation_tree"]``,
    set by readers of logs such as Claude Code's, where calls branch and share one cache), else
    ``consecutive``."""
    if records and all(r.meta.get("conversation_tree") for r in records):
        return "simulated"
    return "consecutive"


def name_of(obj: Any) -> str:
    """The ``name`` of a tokenizer or render (its ``str`` when it has none)."""
    name = getattr(obj, "name", None)
    return name if isinstance(name, str) else str(obj)


def profile_and_model(
    provider: str | ProviderProfile, cache_model: str | CacheModel | None
) -> tuple[ProviderProfile, CacheModel]:
    """The provider's profile and the cache model, without loading a tokenizer or a render (a
    coordinator whose workers tokenized needs neither)."""
    profile = get_provider(provider)
    model = resolve_cache_model(cache_model) if cache_model is not None else profile.new_cache_model()
    return profile, model


def _resolve(
    provider: str | ProviderProfile,
    tokenizer: Any,
    render: Any,
    cache_model: str | CacheModel | None,
) -> tuple[ProviderProfile, Any, Any, CacheModel]:
    profile, model = profile_and_model(provider, cache_model)
    # a name given here may be a provider's (``--tokenizer deepseek``): the providers resolve it
    return (
        profile,
        (resolve_tokenizer(tokenizer) if tokenizer is not None else profile.load_tokenizer()),
        (resolve_render(render) if render is not None else profile.load_render()),
        model,
    )


@attrs.frozen(slots=True)
class AnalysisSpec:
    """What analyzing one provider's records takes, picklable for worker processes: the provider (a name
    or a profile), the overrides, the view, and whether every record of the group has a timestamp."""

    provider: str | ProviderProfile
    tokenizer: Any
    render: Any
    cache_model: str | CacheModel | None
    view: str
    timed: bool
    cache_tokens: int | None = None  # the segment cache's bound (None: RequestTokenizer's default)


class AnalysisContext:
    """A spec made live: the profile, cache model and request tokenizers (kept across chunks: a worker
    process reuses its tokenizer's snapshots across the sessions it is sent)."""

    def __init__(self, spec: AnalysisSpec) -> None:
        from promptkit.tokens.tokenize import RequestTokenizer

        self.spec = spec
        self.profile, tok_spec, render_spec, self.model = _resolve(
            spec.provider, spec.tokenizer, spec.render, spec.cache_model
        )
        # lone surrogates are found in the texts the tokenizer encodes (promptkit.analysis.prepare mends them)
        bound = {} if spec.cache_tokens is None else {"cache_tokens": spec.cache_tokens}
        self.rt = RequestTokenizer(render_spec, tok_spec, reject_surrogates=True, **bound)
        self.thinking: dict[str, RequestTokenizer] = {}  # thinking-mode renders, made on first use

    @property
    def tokenizer_name(self) -> str:
        return name_of(self.rt.tokenizer)

    @property
    def render_name(self) -> str:
        return name_of(self.rt.render_model)

    def thinking_name(self, record: RequestRecord) -> str | None:
        """The thinking render of ``record`` (None: the profile's render)."""
        return _thinking_name(self.spec, self.profile, record)

    def request_tokenizer(self, think: str | None) -> RequestTokenizer:
        """The request tokenizer of the render ``think`` (None: the profile's; a record's is
        ``request_tokenizer(thinking_name(record))``)."""
        return self.rt if think is None else self.tokenizer_for_render(think)

    def tokenizer_for_render(self, name: str) -> RequestTokenizer:
        """The request tokenizer of the thinking render ``name``, made on first use."""
        if name not in self.thinking:
            from promptkit.tokens.tokenize import RequestTokenizer  # perf: imported once a render is made

            self.thinking[name] = RequestTokenizer(name, self.rt.tokenizer, reject_surrogates=True)
        return self.thinking[name]


def _thinking_name(spec: AnalysisSpec, profile: ProviderProfile, record: RequestRecord) -> str | None:
    """The provider's thinking-mode render for a thinking call (DeepSeek: deepseek-reasoner, or
    ``thinking: {"type": "enabled"}``) unless a render model was given; None for any other call."""
    if spec.render is not None or profile.thinking_render is None:
        return None
    return profile.thinking_render(record.request)


@attrs.frozen(slots=True)
class DescribedContext:
    """What :func:`~promptkit.analysis.assemble.finish_group` reads of a :class:`AnalysisContext`, without a tokenizer loaded (a coordinator
    whose workers did the tokenizing only names it)."""

    spec: AnalysisSpec
    profile: ProviderProfile
    model: CacheModel
    tokenizer_name: str
    render_name: str


# per process: worker processes build a context once per spec and keep the last few (the most recently
# used last), so that a worker sent files of several providers in turn keeps each one's tokenizer caches
_CONTEXTS: dict[bytes, AnalysisContext] = {}
#: How many analysis contexts a process keeps (:func:`context_for`).
CONTEXTS_KEPT: Final[int] = 4


def context_for(spec: AnalysisSpec) -> AnalysisContext:
    """The live context of ``spec``, made once per process and kept among the :data:`CONTEXTS_KEPT` most
    recently used. perf: a worker sent DeepSeek and Gemini files in turn rebuilt its request tokenizer
    (and lost its content-keyed cache) on every file when it kept one context only."""
    key = pickle.dumps(attrs.evolve(spec, timed=False))
    ctx = _CONTEXTS.pop(key, None) or AnalysisContext(spec)
    _CONTEXTS[key] = ctx
    while len(_CONTEXTS) > CONTEXTS_KEPT:
        del _CONTEXTS[next(iter(_CONTEXTS))]
    ctx.spec = spec  # the same but for ``timed``, which a context made for another analysis may differ in
    return ctx
