"""Analysis-only profiles: the generic rules for an unrecognised provider, a vLLM-style block cache,
and an exact longest-common-prefix cache.

>>> from promptkit.providers.registry import get_provider
>>> g = get_provider("generic")
>>> g.cache_unit, g.min_cacheable_tokens(), g.exact_tokenizer, g.best_effort
(None, 0, False, False)
"""

from __future__ import annotations

from promptkit.providers.openai import openai_request
from promptkit.providers.registry import GENERIC_PROVIDER, ProviderProfile
from promptkit.tokens.cache_models import ExactCache, PagedBlockCache, PrefixCache

__all__ = ["EXACT", "GENERIC", "PROFILES", "VLLM"]

VLLM = ProviderProfile(
    name="vllm",
    description="a vLLM / SGLang server with automatic prefix caching in 16-token blocks",
    tokenizer="cl100k_base",
    render="chatml",
    cache_model=PagedBlockCache(block_size=16),  # vLLM's default block size (docs.vllm.ai, --block-size)
    build_request=openai_request,
    aliases=("hosted_vllm",),
)

EXACT = ProviderProfile(
    name="exact",
    description="an ideal cache: every token of the longest common prefix with any earlier request hits",
    tokenizer="cl100k_base",
    render="chatml",
    cache_model=ExactCache(),
)

#: The one default: what promptkit assumes of a provider it does not recognise, always with a note
#: (and ``AnalysisResult.provider_assumed``). No provider's own rule is borrowed: any prefix of an
#: earlier prompt is cached (no minimum, no unit, no expiry, the answer not included), and the local
#: tokenizer (o200k_base) is only a proportion estimate: where the log reports usage, the reported
#: counts are the ruler.
GENERIC = ProviderProfile(
    name=GENERIC_PROVIDER,
    description="an unrecognised provider: exact prefix cache, no minimum, no unit; counts from usage",
    tokenizer="o200k_base",
    render="chatml",
    cache_model=PrefixCache(),
    build_request=openai_request,
)

PROFILES = (VLLM, EXACT, GENERIC)
