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
