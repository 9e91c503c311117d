"""The log formats that ship with promptkit, listed by module name (as tiktoken's ``tiktoken_ext``
lists its encodings): the registry imports each module on first use and registers its ``FORMAT``,
exactly as it loads a plugin's. Nothing here imports a format, so the formats, which import the
registry (:mod:`promptkit.formats.base`), are no circle with it.

Adding a built-in format is one new module in ``promptkit/formats/`` and its name here, in sniffing
order among formats of the same priority.
"""

from __future__ import annotations

from typing import Final

__all__ = ["BUILTIN_FORMAT_MODULES"]

#: The modules that hold the built-in formats (each a ``FORMAT``), in registration order.
BUILTIN_FORMAT_MODULES: Final[tuple[str, ...]] = (
    "promptkit.formats.claude_code",
    "promptkit.formats.codex",
    "promptkit.formats.gemini_cli",
    "promptkit.formats.qwen_code",
    "promptkit.formats.http_capture",
    "promptkit.formats.mini_swe_agent",
    "promptkit.formats.promptkit_jsonl",
    "promptkit.formats.otel_genai",
    "promptkit.formats.litellm",
    "promptkit.formats.atif",
    "promptkit.formats.swe_agent",
    "promptkit.formats.mooncake_trace",
    "promptkit.formats.opencode",
)
