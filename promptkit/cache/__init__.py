"""Cache analysis: load request logs, tokenize them, model each provider's prefix cache, report.

The public names are imported lazily (``from promptkit.cache import analyze`` loads the engine, which
loads polars and numpy only when it runs), so importing this package is cheap.

Example::

    >>> from promptkit.cache import analyze
    >>> result = analyze("fixtures/real-logs/deepseek", provider="deepseek")  # from the repository root
    >>> result.requests.height, round(result.hit_ratio, 4)
    (154, 0.9794)
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> module that defines it
_EXPORTS: dict[str, str] = {}


def _export(module: str, *names: str) -> None:
    for name in names:
        _EXPORTS[name] = module if module.startswith("promptkit.") else f"promptkit.cache.{module}"


_export(
    "models",
    "get_cache_model", "register_cache_model", "CacheModel", "CachePlan", "CacheEntry", "ExactCache",
    "DeepSeekCache", "OpenAICache", "AnthropicCache", "VLLMCache", "PrefixCache",
    "anthropic_min_cacheable_tokens",
)  # fmt: skip
_export("simulator", "RadixCache", "CacheSimulator", "CacheLookup", "CacheOutcome")
_export(
    "engine",
    "analyze", "analyze_requests", "AnalysisResult", "DEFAULT_PROVIDER", "REQUEST_COLUMNS",
    "COMPOSITION_COLUMNS", "VIEWS",
)  # fmt: skip
_export("tokenizers", "get_tokenizer", "Tokenizer")
_export("causes", "explain_causes", "classify_change", "CAUSES")
_export(
    "calibration",
    "Calibration", "fit_calibration", "load_calibration", "apply_calibration", "default_calibration",
)  # fmt: skip
_export(
    "causes_report",
    "causes_by_cause", "causes_by_slot", "causes_by_change", "causes_headline", "write_accounting",
    "reads_invariant", "diagnostics_comparison", "check_gate", "lint",
)  # fmt: skip
# the record contract and the log readers, re-exported for analysis code
_export("promptkit.formats", "read_logs", "records_from_requests")
_export("promptkit.providers.usage", "normalize_usage")
_export("promptkit.layout", "RequestRecord", "LoadResult", "LoadProblem", "Usage", "LayoutEntry")
_export("render", "get_render_model", "RenderModel")
_export("tokenize", "RequestTokenizer", "TokenizedRequest")

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'promptkit.cache' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
