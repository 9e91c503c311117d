"""The cache analysis: tokenize each request, model each provider's prefix cache, name every break's cause.

It returns frames and result objects (:class:`~promptkit.analysis.engine.AnalysisResult`) and knows
nothing of presentation: tables, text, HTML and plots live in :mod:`promptkit.report`, which reads
these results. One module per concern:

- :mod:`~promptkit.analysis.engine` runs an analysis (:func:`analyze`, :func:`analyze_requests`);
- :mod:`~promptkit.tokens.tokenize` and :mod:`~promptkit.tokens.tokenizers` turn a request into
  tokens, through a chat template from :mod:`~promptkit.tokens.render`;
- :mod:`~promptkit.tokens.cache_models` holds the cache models, :mod:`~promptkit.analysis.simulator` the
  radix cache that replays them;
- :mod:`~promptkit.analysis.causes` names why tokens were not cached;
  :mod:`~promptkit.analysis.calibration` learns how far a best-effort cache falls short;
- :mod:`~promptkit.analysis.ruler` places positions in the provider's units from its reported counts;
- :mod:`~promptkit.analysis.trace` reads hashed traces, :mod:`~promptkit.analysis.executors` and
  :mod:`~promptkit.analysis.filetasks` run files and sessions in parallel or on a cluster;
- :mod:`~promptkit.analysis.capacity` (capacity curves in one pass), :mod:`~promptkit.analysis.kv_bytes`
  (bytes per token of a model's KV cache) and :mod:`~promptkit.analysis.fleet` (replicas behind a
  router; its inputs in :mod:`~promptkit.analysis.fleet_input`, its routers in
  :mod:`~promptkit.analysis.fleet_policies`, its time to first token in
  :mod:`~promptkit.analysis.fleet_latency`, sizes in :mod:`~promptkit.analysis.sizes`) answer what a
  self-hosted fleet would cache and how long its users wait.

The public names are imported lazily (``from promptkit.analysis import analyze`` loads the engine, which
loads polars and numpy only when it runs), so importing this package is cheap.

Example::

    >>> from promptkit.analysis import analyze
    >>> result = analyze("fixtures/real-logs/deepseek", provider="deepseek")
    >>> result.requests.height
    154
"""

from __future__ import annotations

from typing import Any

from promptkit.lazy import LazyExports

_MODULES: dict[str, str] = {
    **dict.fromkeys(
        (
            "register_cache_model", "CacheModel", "CachePlan", "CacheEntry", "ExactCache", "PrefixCache",
            "UnitPrefixCache", "SteppedPrefixCache", "BreakpointCache", "PagedBlockCache",
            # deprecated names of the four above (a DeprecationWarning on use)
            "DeepSeekCache", "OpenAICache", "AnthropicCache", "VLLMCache",
        ),
        "promptkit.tokens.cache_models",
    ),
    # the tokens' resolvers extended to the providers' names (``get_cache_model("deepseek")``)
    **dict.fromkeys(
        (
            "get_cache_model", "get_tokenizer", "get_render_model", "resolve_cache_model",
            "resolve_tokenizer", "resolve_render",
        ),
        "promptkit.providers.resolve",
    ),
    **dict.fromkeys(("anthropic_min_cacheable_tokens",), "promptkit.providers.anthropic"),
    **dict.fromkeys(
        ("RadixCache", "CacheSimulator", "CacheLookup", "CacheOutcome"), "promptkit.analysis.simulator"
    ),
    **dict.fromkeys(
        (
            "analyze", "analyze_requests", "AnalysisResult", "DEFAULT_PROVIDER", "REQUEST_COLUMNS",
            "COMPOSITION_COLUMNS", "VIEWS",
        ),
        "promptkit.analysis.engine",
    ),
    **dict.fromkeys(("Tokenizer",), "promptkit.tokens.tokenizers"),
    **dict.fromkeys(("explain_causes", "classify_change", "CAUSES"), "promptkit.analysis.causes"),
    **dict.fromkeys(("cache_clock", "CacheClock"), "promptkit.analysis.clock"),
    **dict.fromkeys(
        ("Calibration", "fit_calibration", "load_calibration", "apply_calibration", "default_calibration"),
        "promptkit.analysis.calibration",
    ),
    **dict.fromkeys(("RenderModel",), "promptkit.tokens.render"),
    **dict.fromkeys(("RequestTokenizer", "TokenizedRequest"), "promptkit.tokens.tokenize"),
    # the record contract and the log readers, re-exported for analysis code
    **dict.fromkeys(("read_logs", "records_from_requests"), "promptkit.formats"),
    **dict.fromkeys(("normalize_usage",), "promptkit.providers.registry"),
    **dict.fromkeys(
        ("RequestRecord", "LoadResult", "LoadProblem", "Usage", "LayoutEntry"), "promptkit.layout"
    ),
}  # fmt: skip
__all__ = sorted(_MODULES)
_EXPORTS = LazyExports(__name__, _MODULES)


def __getattr__(name: str) -> Any:
    return _EXPORTS.load(name, globals())


def __dir__() -> list[str]:
    return _EXPORTS.dir(globals())
