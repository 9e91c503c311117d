"""Registers the log formats that ship with promptkit (imported by the registry on first use)."""

from __future__ import annotations

from promptkit.formats import (
    atif,
    claude_code,
    codex,
    gemini_cli,
    http_capture,
    litellm,
    mini_swe_agent,
    mooncake_trace,
    opencode,
    otel_genai,
    promptkit_jsonl,
    swe_agent,
)
from promptkit.formats.base import register_format

for _module in (
    claude_code,
    codex,
    gemini_cli,
    http_capture,
    mini_swe_agent,
    promptkit_jsonl,
    otel_genai,
    litellm,
    atif,
    swe_agent,
    mooncake_trace,
    opencode,
):
    register_format(_module.FORMAT, replace=True)
