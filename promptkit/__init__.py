"""promptkit: build LLM chat requests that keep a provider's prefix cache hitting, and measure it.

The core API is re-exported here and imported lazily, so ``import promptkit`` stays cheap: polars,
matplotlib and the tokenizers load only when the cache analysis is used. Everything else lives in its
subpackage: :mod:`promptkit.chat` (message contracts, chat-platform grammars, the mandatory exit),
:mod:`promptkit.assembly`, :mod:`promptkit.providers`, :mod:`promptkit.formats`, :mod:`promptkit.analysis`
(the analysis), :mod:`promptkit.whatif`, :mod:`promptkit.proxy`, :mod:`promptkit.capture`.

>>> import promptkit
>>> len(promptkit.__all__) <= 40
True
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from promptkit.errors import UnknownAttributeError
from promptkit.lazy import LazyExports

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {}


def _export(module: str, *names: str) -> None:
    for name in names:
        _EXPORTS[name] = module


# messages and the exit every request goes through
_export("promptkit.chat.message", "Message", "ToolCall")
_export("promptkit.chat.egress", "prepare_llm_messages")
# building prompts
_export(
    "promptkit.assembly",
    "PromptRegistry", "PromptView", "Anchor", "AssembledPrompt", "turn_frame", "trim_to_budget",
    "TrimResult", "audit", "layout_of",
)  # fmt: skip
# the record contract
_export("promptkit.layout", "LayoutEntry", "RequestRecord", "LoadResult", "LoadProblem", "Usage")
# provider request bodies and logs
_export(
    "promptkit.providers",
    "openai_request", "deepseek_request", "ollama_request", "anthropic_request", "request_record", "write_jsonl",
)  # fmt: skip
_export("promptkit.providers.registry", "get_provider", "available_providers", "infer_provider")
_export("promptkit.providers.prices", "ModelPrice")
# reading logs
_export("promptkit.formats", "read_logs", "records_from_requests", "available_formats")
# the analysis and its report
_export("promptkit.analysis", "analyze", "analyze_requests", "AnalysisResult")
_export("promptkit.report", "summarize", "format_summary", "cost_summary", "largest_breaks")
# errors
_export("promptkit.errors", "PromptkitError", "LogFileError", "RecordFormatError")

__all__ = sorted(_EXPORTS)

#: Names that left the top level, and the subpackage that holds them (they work here for one release,
#: with a DeprecationWarning naming the new home).
_MOVED: dict[str, str] = {
    "plot_hit_ratio": "promptkit.report.plots",
    "plot_composition": "promptkit.report.plots",
    "plot_predicted_vs_reported": "promptkit.report.plots",
}


_LAZY = LazyExports(__name__, _EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        warnings.warn(
            f"promptkit.{name} moved to {_MOVED[name]}.{name}; import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(_MOVED[name]), name)
    if _LAZY.module_of(name) is None:
        # names that moved to promptkit.chat keep working, with a warning naming the new home
        chat = importlib.import_module("promptkit.chat")
        if name in chat.__all__:
            warnings.warn(
                f"promptkit.{name} moved to promptkit.chat.{name}; import it from there",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(chat, name)
        raise UnknownAttributeError(f"module 'promptkit' has no attribute {name!r}")
    return _LAZY.load(name, globals())


def __dir__() -> list[str]:
    return _LAZY.dir(globals())


if TYPE_CHECKING:  # pragma: no cover - static re-exports for type checkers and IDEs
    from promptkit.analysis import (
        AnalysisResult as AnalysisResult,
        analyze as analyze,
        analyze_requests as analyze_requests,
    )
    from promptkit.assembly import (
        Anchor as Anchor,
        AssembledPrompt as AssembledPrompt,
        PromptRegistry as PromptRegistry,
        PromptView as PromptView,
        TrimResult as TrimResult,
        audit as audit,
        layout_of as layout_of,
        trim_to_budget as trim_to_budget,
        turn_frame as turn_frame,
    )
    from promptkit.chat.egress import prepare_llm_messages as prepare_llm_messages
    from promptkit.chat.message import Message as Message, ToolCall as ToolCall
    from promptkit.errors import (
        LogFileError as LogFileError,
        PromptkitError as PromptkitError,
        RecordFormatError as RecordFormatError,
    )
    from promptkit.formats import (
        available_formats as available_formats,
        read_logs as read_logs,
        records_from_requests as records_from_requests,
    )
    from promptkit.layout import (
        LayoutEntry as LayoutEntry,
        LoadProblem as LoadProblem,
        LoadResult as LoadResult,
        RequestRecord as RequestRecord,
        Usage as Usage,
    )
    from promptkit.providers import (
        anthropic_request as anthropic_request,
        deepseek_request as deepseek_request,
        ollama_request as ollama_request,
        openai_request as openai_request,
        request_record as request_record,
        write_jsonl as write_jsonl,
    )
    from promptkit.providers.prices import ModelPrice as ModelPrice
    from promptkit.providers.registry import (
        available_providers as available_providers,
        get_provider as get_provider,
        infer_provider as infer_provider,
    )
    from promptkit.report import (
        cost_summary as cost_summary,
        format_summary as format_summary,
        largest_breaks as largest_breaks,
        summarize as summarize,
    )
