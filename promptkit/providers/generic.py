"""Analysis-only profiles: a vLLM-style block cache, and an exact longest-common-prefix cache.

>>> from promptkit.providers.registry import get_provider
>>> get_provider("exact").cache_model
'exact'
"""

from __future__ import annotations

from promptkit.providers.openai import openai_request
from promptkit.providers.registry import ProviderProfile

__all__ = ["EXACT", "PROFILES", "VLLM"]

VLLM = ProviderProfile(
    name="vllm",
    description="a vLLM / SGLang server with automatic prefix caching in 16-token blocks",
    tokenizer="cl100k_base",
    render="chatml",
    cache_model="vllm",
    build_request=openai_request,
)

EXACT = ProviderProfile(
    name="exact",
    description="an ideal cache: every token of the longest common prefix with any earlier request hits",
    tokenizer="cl100k_base",
    render="chatml",
    cache_model="exact",
)

PROFILES = (VLLM, EXACT)
