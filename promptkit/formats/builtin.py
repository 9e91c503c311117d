"""Registers the log formats that ship with promptkit (imported by the registry on first use)."""

from __future__ import annotations

from promptkit.formats import claude_code, codex, http_capture, mini_swe_agent, promptkit_jsonl
from promptkit.formats.base import register_format

for _module in (claude_code, codex, http_capture, mini_swe_agent, promptkit_jsonl):
    register_format(_module.FORMAT, replace=True)
