"""The cache analysis: tokenize each request, model each provider's prefix cache, name every break's cause.

It returns frames and result objects (:class:`~promptkit.analysis.result.AnalysisResult`) and knows
nothing of presentation: tables, text, HTML and plots live in :mod:`promptkit.report`, which reads
these results. The analysis runs as stages, and plans are ways to run them:

- :mod:`~promptkit.analysis.api` is the entry (:func:`analyze`, :func:`analyze_requests`): it checks
  the arguments, groups the records by provider and picks a plan;
- :mod:`~promptkit.analysis.prepare` (stage 1: body, tokens, cache plan, the columns that need no cache
  outcome), :mod:`~promptkit.analysis.replay` (stage 2: one :class:`~promptkit.analysis.replay.Replayer`
  over the shared or the consecutive cache), :mod:`~promptkit.analysis.attribute` (stage 3: a divergence
  to its message, slot, excerpts and change class), :mod:`~promptkit.analysis.assemble` (stage 4: the
  frames in load order, the notes);
- :mod:`~promptkit.analysis.columns` (the columns), :mod:`~promptkit.analysis.result` (the result),
  :mod:`~promptkit.analysis.spec` (what one analysis takes), :mod:`~promptkit.analysis.wire` (what
  crosses between processes);
- :mod:`~promptkit.analysis.plans` (local, records, files, stream; the coordinator and the transport)
  on an :mod:`~promptkit.analysis.executors` executor;
- :mod:`~promptkit.analysis.simulator` the radix cache that replays the cache models
  (:mod:`~promptkit.tokens.cache_models`), :mod:`~promptkit.analysis.ruler` places positions in the
  provider's units from its reported counts;
- :mod:`~promptkit.analysis.causes` names why tokens were not cached;
  :mod:`~promptkit.analysis.calibration` learns how far a best-effort cache falls short;
- :mod:`~promptkit.analysis.trace` reads hashed traces; :mod:`~promptkit.analysis.capacity` (capacity
  curves in one pass), :mod:`~promptkit.analysis.kv_bytes` (bytes per token of a model's KV cache) and
  :mod:`~promptkit.analysis.fleet` (replicas behind a router; its inputs in
  :mod:`~promptkit.analysis.fleet_input`, its routers in :mod:`~promptkit.analysis.fleet_policies`, its
  time to first token in :mod:`~promptkit.analysis.fleet_latency`, sizes in
  :mod:`~promptkit.analysis.sizes`) answer what a self-hosted fleet would cache and how long its users
  wait; :mod:`~promptkit.analysis.clock` tells how long a session's cache has left.

:mod:`promptkit.analysis.engine` is a deprecated alias of the public names, kept for one release.

The public names are imported lazily (``from promptkit.analysis import analyze`` loads the analysis,
which loads polars and numpy only when it runs), so importing this package is cheap.

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
    **dict.fromkeys(("analyze", "analyze_requests"), "promptkit.analysis.api"),
    **dict.fromkeys(("AnalysisResult",), "promptkit.analysis.result"),
    **dict.fromkeys(("REQUEST_COLUMNS", "COMPOSITION_COLUMNS", "PROBLEM_COLUMNS", "RequestRow"), "promptkit.analysis.columns"),
    **dict.fromkeys(("DEFAULT_PROVIDER", "VIEWS"), "promptkit.analysis.spec"),
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
