"""Qwen Code chat recordings (``~/.qwen/tmp/<project>/chats/session-*.json`` or ``.jsonl``).

Qwen Code (QwenLM/qwen-code) is a fork of Gemini CLI and keeps its chat recording layout
(:mod:`promptkit.formats.gemini_cli`: a ``ConversationRecord`` with ``sessionId``, ``projectHash`` and
``messages``, or the JSONL layout with ``$set`` / ``$rewindTo`` lines); its model turns are typed
``qwen`` instead of ``gemini``, with the same ``tokens`` (``input`` with the cached tokens included,
``cached``, ``output``, ``thoughts``, ``tool``, ``total``). Each ``qwen`` message is one model call, read
exactly as a Gemini CLI call; the opaque head's key is ``qwen-code:<session>:<model>``.

The provider comes from the model name, as for any record without one: ``qwen3-coder-plus`` and the
other Qwen models are analyzed with the Qwen profile (Alibaba Cloud Model Studio's implicit cache, the
exact Qwen tokenizer); a Qwen Code session configured with another OpenAI-compatible model gets that
model's provider.

>>> from promptkit.formats import read_logs
>>> r = read_logs("fixtures/qwen-code/session-2026-03-02T10-15-7a1c3e55.json")
>>> [(rec.provider, rec.usage.prompt_tokens, rec.usage.cached_tokens) for rec in r.records]
[('qwen', 5210, 0), ('qwen', 5291, 5120)]
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Final

from promptkit.formats import gemini_cli
from promptkit.formats.base import Item, LogFormat, Source
from promptkit.formats.gemini_cli import RecordingDialect, recording_records

__all__ = ["DIALECT", "FORMAT", "NAME"]

#: The format name (``--format qwen-code``).
NAME: Final[str] = "qwen-code"
#: Qwen Code's recordings: its model turns are typed with the Qwen profile's name (``qwen``).
DIALECT: Final[RecordingDialect] = RecordingDialect(NAME)


@functools.cache
def _turn_pattern() -> re.Pattern[str]:
    return re.compile(rf'"type"\s*:\s*"{re.escape(DIALECT.turn() or "")}"')


def sniff(source: Source) -> bool:
    """A Gemini CLI-shaped recording (``sessionId`` and ``projectHash``) that shows a ``qwen`` model turn
    in its head or lies under a ``.qwen`` folder."""
    if not gemini_cli.sniff(source):
        return False
    return bool(_turn_pattern().search(source.head)) or ".qwen" in source.path.parts


def read(source: Source) -> Iterator[Item]:
    """The model calls of one Qwen Code recording, problems first."""
    records, problems = recording_records(source, DIALECT)
    yield from problems
    yield from records


FORMAT = LogFormat(
    name=NAME,
    description="Qwen Code chat recording (~/.qwen/tmp/<project>/chats/session-*.json or .jsonl; a Gemini "
    "CLI fork whose model turns are typed qwen): one request per model call",
    sniff=sniff,
    read=read,
    priority=26,  # before Gemini CLI, whose sniff accepts the same layout
)
