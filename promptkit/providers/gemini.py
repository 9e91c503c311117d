"""Google Gemini: the implicit prefix cache, used directly (Gemini API, Vertex AI) or through a router.

Rules, each from Google's documentation:

- **Implicit caching** is on by default for Gemini 2.5 and newer models and gives "no cost saving
  guarantee": a hit is **best effort** (ai.google.dev/gemini-api/docs/caching, "Implicit caching").
  Requests that share a prefix with a recent request may hit; the cached part is reported as
  ``usageMetadata.cachedContentTokenCount`` (OpenRouter: ``prompt_tokens_details.cached_tokens``).
- **Minimum input size** per model: Gemini API, 1,024 tokens for 2.5 Flash and 3 Flash, 2,048 for 2.5
  Pro (the announcement of 2025-05-08, developers.googleblog.com "Gemini 2.5 models now support implicit
  caching"), while later revisions of the caching page list 4,096 for 3 Pro; Vertex AI: "caching requests
  must contain a minimum of 2,048 tokens" (cloud.google.com/vertex-ai/generative-ai/docs/context-cache/
  context-cache-overview). The minimum applies to the request's input. A profile predicts an upper
  bound for every surface a log may have used, so each model family takes the **smallest** documented
  minimum: 1,024 for Flash, 2,048 for Pro. On the shared OpenRouter runs of Gemini 3 Pro, calls with
  prompts of 2,398 and 2,627 tokens hit, which a 4,096 minimum would forbid. The minimum is held to
  Google's count of the prompt (the reported prompt tokens, ruler mode: ``CacheModel.plan``'s
  ``units``), not to the local estimate.
- **One cache per model, shared across sessions.** The page's minimums are per model, and a request is
  matched on its prefix alone ("try to send requests with similar prefix in a short amount of time"; the
  API supports "stateless conversation modes"): nothing ties a hit to a session, so a session's first
  call may read the head (system instruction, tools) another request of the project wrote, and a call
  to one model reads nothing another model's calls wrote (a KV cache belongs to the weights that made
  it). The profile's cache is ``per_model`` and ``shared_heads`` (``PrefixCache``). Revisions of the
  page checked on 2026-12-07: 2026-05-07 (3 Flash and 2.5 Flash 1,024; 3 Pro and 2.5 Pro 4,096) and
  2026-10-13 (2.5 Flash and 2.5 Pro 2,048; 3.1 Pro 4,096); the smallest of each family is kept.
- **Unit**: Google documents none, so none is modelled (any prefix length). The reads of Gemini 3 Pro
  through OpenRouter sit under whole blocks of 2,048 tokens of Google's own count (reported at 0.97-0.98
  of it); the Gemini CLI sessions show no block: the calibrated expectation absorbs it.
- **The answer is not cached with its prompt** (unlike OpenAI's cache): over 19 real runs a read passes
  the previous call's prompt on 6 of 1,084 calls after a read, so ``include_completion`` stays off.
- **TTL**: the Gemini API documents none ("send requests with similar prefix in a short amount of
  time"). Vertex AI keeps implicit entries in memory ("Memory capacity is limited, so prefixes are
  evicted as capacity is reclaimed"), then in a durable tier; the page's Japanese and Korean versions
  add that a cached prefix expires within 24 hours of its creation and that most are evicted sooner
  (docs.cloud.google.com/gemini-enterprise-agent-platform/models/context-cache/context-cache-overview).
  No lifetime is modelled in the bound (the Gemini API gives none); the calibration's miss rate after
  an idle gap carries the eviction.
- **Tokenizer**: Gemini's is not public. The local tokenizer (o200k_base) is a proportion estimate
  (``exact_tokenizer=False``); the counts the provider reports are the ruler.

>>> from promptkit.providers.registry import get_provider, infer_provider
>>> g = get_provider("gemini")
>>> g.best_effort, g.exact_tokenizer, g.cache_unit
(True, False, None)
>>> g.min_cacheable_tokens("gemini-2.5-flash"), g.min_cacheable_tokens("google/gemini-3-pro-preview")
(1024, 2048)
>>> infer_provider(model="models/gemini-2.5-pro"), infer_provider(model="google/gemini-3-pro-preview")
('gemini', 'gemini')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from promptkit.layout import Usage, token_count as count
from promptkit.providers.openai import openai_request
from promptkit.providers.prices import PRICES_AS_OF, ModelPrice
from promptkit.providers.registry import ProviderProfile, normalize_usage
from promptkit.providers.usage import check_usage
from promptkit.tokens.cache_models import PrefixCache

__all__ = ["GEMINI_MIN_CACHEABLE_TOKENS", "PROFILE", "PROFILES", "gemini_usage"]

#: Smallest documented minimum input per model family (model-name prefix -> tokens); see the module
#: docstring for the sources. Longest matching prefix wins; an unknown Gemini model gets 1,024.
GEMINI_MIN_CACHEABLE_TOKENS: Final[Mapping[str, int]] = {
    "gemini-2.5-flash": 1024,
    "gemini-3-flash": 1024,
    "gemini-2.5-pro": 2048,
    "gemini-3-pro": 2048,
    "gemini-3.1-pro": 2048,
}


def gemini_usage(usage: Mapping[str, Any], where: str = "usage") -> Usage:
    """Gemini's ``usageMetadata`` (or the Python SDK's snake_case ``usage_metadata``) as a
    :class:`~promptkit.layout.Usage`; any other shape (OpenRouter's OpenAI-style usage with
    ``prompt_tokens_details.cached_tokens``) goes to :func:`~promptkit.providers.registry.normalize_usage`.

    ``promptTokenCount`` includes the cached tokens (``cachedContentTokenCount``); the completion is
    ``candidatesTokenCount`` plus ``thoughtsTokenCount`` (thinking is billed as output).

    >>> gemini_usage({"promptTokenCount": 5000, "cachedContentTokenCount": 4096, "candidatesTokenCount": 20,
    ...               "thoughtsTokenCount": 30})
    Usage(prompt_tokens=5000, completion_tokens=50, cached_tokens=4096, cache_write_tokens=None, cache_write_1h_tokens=None)
    """
    camel = "promptTokenCount" in usage or "cachedContentTokenCount" in usage
    snake = "prompt_token_count" in usage or "cached_content_token_count" in usage
    if not camel and not snake:
        return normalize_usage(usage, where)
    names = (
        ("promptTokenCount", "cachedContentTokenCount", "candidatesTokenCount", "thoughtsTokenCount")
        if camel
        else (
            "prompt_token_count",
            "cached_content_token_count",
            "candidates_token_count",
            "thoughts_token_count",
        )
    )
    prompt, cached, candidates, thoughts = (count(usage.get(n), f"{where}.{n}") for n in names)
    completion = None if candidates is None and thoughts is None else (candidates or 0) + (thoughts or 0)
    return check_usage(Usage(prompt, completion, cached or 0, None), where, cached_field=names[1])


# Paid-tier list prices, USD per million tokens, prompts up to 200k tokens:
# https://ai.google.dev/gemini-api/docs/pricing. ``cache_hit`` is the implicit-cache read ("context
# caching") price; storage per hour is not a per-request cost and is left out.
# The 3.x preview rows as quoted from that page on 2026-07-04 (factquire.com/models/google/, "Input price
# $0.50 ... Context caching price $0.05" for 3 Flash; 3.1 Pro at the 3 Pro row's $2 / $0.20 / $12).
# gemini-3-pro-preview agrees to the cent with the cost OpenRouter reported on the shared real runs.
_PRICES = [
    ModelPrice(
        "gemini",
        m,
        cache_hit=hit,
        cache_miss=miss,
        output=out,
        source="https://ai.google.dev/gemini-api/docs/pricing",
        as_of=PRICES_AS_OF,
    )
    for m, miss, hit, out in (
        ("gemini-3-pro-preview", 2.00, 0.20, 12.00),
        ("gemini-3.1-pro-preview", 2.00, 0.20, 12.00),  # the page's 3.1 Pro row (it replaced 3 Pro)
        ("gemini-3-flash-preview", 0.50, 0.05, 3.00),  # text / image / video input
        ("gemini-2.5-pro", 1.25, 0.125, 10.00),
        ("gemini-2.5-flash", 0.30, 0.03, 2.50),
        ("gemini-2.5-flash-lite", 0.10, 0.01, 0.40),
    )
]

PROFILE = ProviderProfile(
    name="gemini",
    description="Google Gemini (API, Vertex AI, or routed): best-effort implicit prefix cache, minimum per model",
    tokenizer="o200k_base",
    render="chatml",
    cache_model=PrefixCache(
        min_tokens=1024, min_tokens_by_model=GEMINI_MIN_CACHEABLE_TOKENS, per_model=True, shared_heads=True
    ),
    # the Gemini API's OpenAI-compatible endpoint (ai.google.dev/gemini-api/docs/openai) takes this body
    build_request=openai_request,
    prices=_PRICES,
    default_model="gemini-2.5-flash",
    context_window=1_048_576,
    model_patterns=(r"gemini",),
    model_vendors=("google", "google-vertex", "vertex_ai", "gemini"),
    model_excludes=(r"gemma",),
    # Gemini CLI speaks only Google's Gemini API (Gemini API or Vertex AI; github.com/google-gemini/gemini-cli),
    # and its recordings type a model turn with this profile's name (formats/gemini_cli.py)
    native_formats=("gemini-cli",),
    # LiteLLM's provider names, and OpenTelemetry's gen_ai.provider.name values for Google
    aliases=(
        "vertex_ai",
        "vertex_ai_beta",
        "google",
        "gcp.gemini",
        "gcp.vertex_ai",
        "gcp.gen_ai",
    ),  # Google's open models, served by other providers
    url_hosts=(
        "generativelanguage.googleapis.com",
        "aiplatform.googleapis.com",
        "-aiplatform.googleapis.com",
    ),
    usage_keys=(
        "promptTokenCount",
        "cachedContentTokenCount",
        "prompt_token_count",
        "cached_content_token_count",
    ),
    usage_parser=gemini_usage,
    exact_tokenizer=False,
    best_effort=True,
    # fitted on the two shared OpenRouter runs, in the provider's units (tests/analysis/test_accuracy.py)
    calibration="calibration-gemini.json",
)

PROFILES = (PROFILE,)
