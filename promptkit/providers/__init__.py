"""Provider request bodies and provider-specific normalization.

One module per provider turns promptkit messages (a sequence of :class:`~promptkit.Message`, or an
``AssembledPrompt``) into that API's JSON body; each calls :func:`promptkit.prepare_llm_messages` first.

- :func:`openai_request`: OpenAI chat-completions;
- :func:`deepseek_request`: DeepSeek, the OpenAI shape after :func:`normalize_system_placement`;
- :func:`ollama_request`: Ollama ``/api/chat``;
- :func:`anthropic_request`: Anthropic Messages, with automatic prompt-cache breakpoints;
- :func:`request_record` / :func:`write_jsonl`: the JSON-lines log records the cache analyzer reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from promptkit.lazy import LazyExports

if TYPE_CHECKING:  # the names as mypy and readers see them; at run time each loads on first use
    from promptkit.providers._common import (
        SYSTEM_HINT_PREFIX,
        ContentNotSentWarning,
        MediaFormatError,
        RequestBuildError,
        ToolArgumentsError,
        ToolDefinitionError,
    )
    from promptkit.providers.anthropic import ANTHROPIC_DEFAULT_MAX_TOKENS, anthropic_request
    from promptkit.providers.deepseek import deepseek_request, normalize_system_placement
    from promptkit.providers.ollama import ollama_request
    from promptkit.providers.openai import openai_request
    from promptkit.providers.record import request_record, write_jsonl

#: each public name -> the submodule that defines it (imported on first use: the analysis reads the
#: profiles, not the request builders)
_MODULES: dict[str, str] = {
    **dict.fromkeys(("SYSTEM_HINT_PREFIX", "ContentNotSentWarning", "MediaFormatError", "RequestBuildError", "ToolArgumentsError", "ToolDefinitionError",), "promptkit.providers._common"),
    **dict.fromkeys(("ANTHROPIC_DEFAULT_MAX_TOKENS", "anthropic_request",), "promptkit.providers.anthropic"),
    **dict.fromkeys(("deepseek_request", "normalize_system_placement",), "promptkit.providers.deepseek"),
    **dict.fromkeys(("ollama_request",), "promptkit.providers.ollama"),
    **dict.fromkeys(("openai_request",), "promptkit.providers.openai"),
    **dict.fromkeys(("request_record", "write_jsonl",), "promptkit.providers.record"),
}  # fmt: skip
__all__ = [
    "ANTHROPIC_DEFAULT_MAX_TOKENS",
    "SYSTEM_HINT_PREFIX",
    "ContentNotSentWarning",
    "MediaFormatError",
    "RequestBuildError",
    "ToolArgumentsError",
    "ToolDefinitionError",
    "anthropic_request",
    "deepseek_request",
    "normalize_system_placement",
    "ollama_request",
    "openai_request",
    "request_record",
    "write_jsonl",
]
_EXPORTS = LazyExports(__name__, _MODULES)


def __getattr__(name: str) -> Any:
    return _EXPORTS.load(name, globals())


def __dir__() -> list[str]:
    return _EXPORTS.dir(globals())
