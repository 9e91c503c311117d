"""Gemini CLI chat recordings (``~/.gemini/tmp/<project>/chats/session-*.json`` or ``.jsonl``).

Gemini CLI records every session (``packages/core/src/services/chatRecordingService.ts`` and
``chatRecordingTypes.ts`` in google-gemini/gemini-cli). Two layouts:

- **JSON** (CLI 0.38 and earlier): one ``ConversationRecord``: ``sessionId``, ``projectHash``,
  ``startTime``, ``lastUpdated``, ``messages``;
- **JSONL** (0.39 on): a first line with the metadata (``sessionId``, ``projectHash``...), then one
  message per line. A message written again with the same ``id`` replaces the earlier copy (the CLI
  re-appends a model message once its tokens or tool results are known); ``{"$set": {...}}`` updates the
  metadata (``$set.messages`` replaces the history); ``{"$rewindTo": id}`` drops that message and every
  later one (a rewind: later calls start from the shorter history).

A message has ``id``, ``timestamp``, ``type`` (``user``, ``gemini``, or ``info`` / ``error`` /
``warning``, which the model never sees) and ``content`` (a string or Gemini parts). A ``gemini`` message
is one model call: its ``model``, its ``toolCalls`` (``id``, ``name``, ``args``, ``result``: the
``functionResponse`` parts sent back), its ``thoughts`` and its ``tokens``: ``input``
(``promptTokenCount``, the cached tokens included), ``cached`` (``cachedContentTokenCount``), ``output``,
``thoughts``, ``tool``.

Each call's request is the history before it, in the OpenAI shape: user messages, earlier model
messages as assistant messages with their tool calls, followed by the tool results as ``tool``
messages. The recording holds neither the system instruction nor the tool declarations: like Claude Code
transcripts, every record gets an estimated opaque head
(:func:`~promptkit.formats.opaque_head.estimate_opaque_heads`, key ``gemini-cli:<session>:<model>``).
The provider comes from the model name (``gemini-*``).

>>> from promptkit.formats import read_logs
>>> r = read_logs("fixtures/gemini-cli/session-2026-04-01T11-11-5cdd2021.jsonl")
>>> [(len(rec.request["messages"]), rec.usage.prompt_tokens, rec.usage.cached_tokens) for rec in r.records]
[(1, 6907, 4062), (4, 7318, 6081), (6, 8509, 0)]
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

import attrs

from promptkit.errors import RecordFormatError
from promptkit.formats.base import Item, LogFormat, Source, json_lines
from promptkit.formats.fields import loads_json, parse_timestamp
from promptkit.formats.opaque_head import estimate_opaque_heads
from promptkit.layout import LoadProblem, RequestRecord, Usage, token_count, type_name
from promptkit.providers.registry import native_provider

__all__ = ["FORMAT", "GEMINI_CLI", "RecordingDialect", "recording_records"]

NAME: Final[str] = "gemini-cli"
#: Message types the model never sees (shown to the user only).
_NOT_SENT: Final[frozenset[str]] = frozenset({"info", "error", "warning"})


@attrs.frozen(slots=True)
class RecordingDialect:
    """What tells one agent's chat recordings from another's when the agent is a Gemini CLI fork (Qwen
    Code keeps the recording layout and types its model turns ``qwen``): the format ``name``, which is
    also the prefix of the opaque-head key and finds the type of a model turn (:meth:`turn`).

    >>> RecordingDialect("gemini-cli").turn()
    'gemini'
    """

    name: str

    def turn(self) -> str | None:
        """The ``type`` of this agent's model turns: the name of the provider whose API it was written
        for (``MessageRecord.type`` is ``'user' | 'gemini' | 'info' | 'error' | 'warning'`` in Gemini
        CLI's chatRecordingTypes.ts, ``'qwen'`` in Qwen Code's), read from the profile that declares the
        format as its own (``native_formats``) instead of being spelled here."""
        return _model_turn(self.name)


#: Gemini CLI itself.
GEMINI_CLI: Final[RecordingDialect] = RecordingDialect(NAME)


@functools.cache
def _model_turn(log_format: str) -> str | None:
    return native_provider(log_format)


def _text(content: object, where: str) -> str:
    """A message's ``content`` (a string, a part, or a list of parts) as text; non-text parts are named."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else [content]
    out: list[str] = []
    for i, part in enumerate(parts):
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, Mapping):
            if isinstance(part.get("text"), str):
                out.append(part["text"])
            elif "functionResponse" in part:
                response = part["functionResponse"]
                if not isinstance(response, Mapping):
                    raise RecordFormatError(
                        f"{where}[{i}].functionResponse: expected an object, got {type_name(response)}"
                    )
                out.append(json.dumps(response.get("response"), ensure_ascii=False, sort_keys=True))
            elif "inlineData" in part or "fileData" in part:
                out.append(f"[{next(iter(part))}]")
        else:
            raise RecordFormatError(
                f"{where}[{i}]: expected a string or a part object, got {type_name(part)}"
            )
    return "".join(out)


def _usage(tokens: object, where: str) -> Usage | None:
    if tokens is None:
        return None
    if not isinstance(tokens, Mapping):
        raise RecordFormatError(f"{where}: expected an object, got {type_name(tokens)}")
    prompt = token_count(tokens.get("input"), f"{where}.input")
    cached = token_count(tokens.get("cached"), f"{where}.cached")
    output = token_count(tokens.get("output"), f"{where}.output")
    thoughts = token_count(tokens.get("thoughts"), f"{where}.thoughts")
    tool = token_count(tokens.get("tool"), f"{where}.tool")
    total = token_count(tokens.get("total"), f"{where}.total")
    if prompt == 0 and not any((cached, output, thoughts, tool, total)):
        # A real recording (CLI 0.10, fixtures/gemini-cli-real/) writes all-zero tokens on a model
        # message whose usage was never received: a prompt is never 0 tokens, so nothing was measured.
        raise RecordFormatError(
            f"{where}.input: 0 input tokens (every count is 0): the usage was not recorded"
        )
    if prompt is not None and cached is not None and cached > prompt:
        raise RecordFormatError(f"{where}.cached: {cached} cached tokens exceed the {prompt} input tokens")
    parts = (prompt, output, thoughts, tool)
    if total is not None and None not in parts and total != sum(p or 0 for p in parts):
        # totalTokenCount = promptTokenCount + candidatesTokenCount + thoughtsTokenCount +
        # toolUsePromptTokenCount (Gemini API UsageMetadata, ai.google.dev/api/generate-content)
        raise RecordFormatError(
            f"{where}.total: {total} is not input + output + thoughts + tool "
            f"({prompt} + {output} + {thoughts} + {tool})"
        )
    completion = None if output is None and thoughts is None else (output or 0) + (thoughts or 0)
    return Usage(prompt, completion, cached, None)


def _assistant(message: Mapping[str, Any], where: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A model message as an assistant message with its tool calls, and the tool results sent after it."""
    calls = message.get("toolCalls") or []
    if not isinstance(calls, list):
        raise RecordFormatError(f"{where}.toolCalls: expected a list, got {type_name(calls)}")
    text = _text(message.get("content"), f"{where}.content")
    assistant: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
    tool_calls, results = [], []
    for i, call in enumerate(calls):
        w = f"{where}.toolCalls[{i}]"
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise RecordFormatError(f"{w}: expected an object with a string 'name'")
        call_id = str(call.get("id") or f"call_{i}")
        args = call.get("args") if call.get("args") is not None else {}
        tool_calls.append(
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(args, ensure_ascii=False)},
            }
        )
        results.append(
            {"role": "tool", "tool_call_id": call_id, "content": _text(call.get("result"), f"{w}.result")}
        )
    if tool_calls:
        assistant["tool_calls"] = tool_calls
    return assistant, results


class _Folded:
    """The recording folded line by line: the history as it stands, and each model call with the ids of
    the messages before it when it was first written."""

    def __init__(self, turn: str | None) -> None:
        self.turn = turn  # the type of a model turn
        self.order: list[str] = []  # the history, by message id
        self.latest: dict[str, tuple[int | None, Mapping[str, Any]]] = {}  # id -> (line, last copy)
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        self.called: set[str] = set()
        self.meta: dict[str, Any] = {}

    def message(self, line: int | None, msg: Mapping[str, Any], where: str) -> None:
        mid, kind = msg.get("id"), msg.get("type")
        if not isinstance(mid, str) or not mid:
            raise RecordFormatError(f"{where}.id: expected a non-empty string, got {type_name(mid)}")
        if not isinstance(kind, str):
            raise RecordFormatError(f"{where}.type: expected a string, got {type_name(kind)}")
        if mid not in self.order:
            self.order.append(mid)
        self.latest[mid] = (line, msg)
        if kind == self.turn and mid not in self.called:
            self.called.add(mid)
            self.calls.append((mid, tuple(self.order[:-1])))

    def rewind(self, target: object) -> None:
        if isinstance(target, str) and target in self.order:
            del self.order[self.order.index(target) :]
        else:  # an unknown target clears the history (as the CLI does)
            self.order.clear()


def _element_lines(text: str, key: str, count: int) -> list[int | None]:
    """The line each element of the document's first ``key`` array starts on (lines split at ``\\n``,
    as :meth:`Source.lines` numbers them); ``None`` for an element that could not be placed.

    >>> _element_lines('{"messages": [\\n  {"id": 1},\\n  {"id": 2}\\n]}', "messages", 2)
    [2, 3]
    """
    found: list[int | None] = []
    match = re.search(rf'"{re.escape(key)}"\s*:\s*\[', text)
    decoder = json.JSONDecoder()
    pos, line, counted = (match.end() if match else len(text)), 1, 0
    while match and len(found) < count:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        line += text.count("\n", counted, pos)
        counted = pos
        try:
            _, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            break
        found.append(line)
    return found + [None] * (count - len(found))


def _fold(source: Source, problems: list[LoadProblem], turn: str | None) -> _Folded:
    folded = _Folded(turn)
    text = source.text()
    try:
        whole = loads_json(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, Mapping) and isinstance(whole.get("messages"), list):  # the JSON layout
        folded.meta = {k: v for k, v in whole.items() if k != "messages"}
        lines = _element_lines(text, "messages", len(whole["messages"]))
        for i, msg in enumerate(whole["messages"]):
            try:
                if not isinstance(msg, Mapping):
                    raise RecordFormatError(f"messages[{i}]: expected an object, got {type_name(msg)}")
                folded.message(lines[i], msg, f"messages[{i}]")
            except RecordFormatError as exc:
                problems.append(LoadProblem(source.file, lines[i], f"{exc}; message skipped"))
        return folded
    for item in json_lines(source):  # the JSONL layout, one change a line
        if isinstance(item, LoadProblem):
            problems.append(attrs.evolve(item, reason=f"{item.reason}; line skipped"))
            continue
        lineno, obj = item
        try:
            if not isinstance(obj, Mapping):
                raise RecordFormatError(f"expected an object, got {type_name(obj)}")
            if "$rewindTo" in obj:
                folded.rewind(obj["$rewindTo"])
            elif "$set" in obj:
                update = obj["$set"]
                if not isinstance(update, Mapping):
                    raise RecordFormatError(f"$set: expected an object, got {type_name(update)}")
                folded.meta.update({k: v for k, v in update.items() if k != "messages"})
                if isinstance(update.get("messages"), list):
                    folded.order.clear()
                    for i, msg in enumerate(update["messages"]):
                        if isinstance(msg, Mapping):
                            folded.message(lineno, msg, f"$set.messages[{i}]")
            elif "type" in obj:
                folded.message(lineno, obj, "message")
            elif "sessionId" in obj:
                folded.meta.update(obj)
            else:
                raise RecordFormatError("neither a message (type), metadata (sessionId), $set nor $rewindTo")
        except RecordFormatError as exc:
            problems.append(LoadProblem(source.file, lineno, f"{exc}; line skipped"))
    return folded


def _history(folded: _Folded, ids: tuple[str, ...], where: str) -> list[dict[str, Any]]:
    chat: list[dict[str, Any]] = []
    for mid in ids:
        _, msg = folded.latest[mid]
        kind = msg.get("type")
        if kind == "user":
            chat.append({"role": "user", "content": _text(msg.get("content"), f"{where}.content")})
        elif kind == folded.turn:
            assistant, results = _assistant(msg, where)
            chat.append(assistant)
            chat.extend(results)
        elif kind not in _NOT_SENT:
            raise RecordFormatError(f"{where}.type: unknown message type {kind!r}")
    return chat


def recording_records(
    source: Source, dialect: RecordingDialect = GEMINI_CLI
) -> tuple[list[RequestRecord], list[LoadProblem]]:
    """The model calls of one recording written by Gemini CLI (or the fork ``dialect`` names), and the
    problems met (naming line and field)."""
    problems: list[LoadProblem] = []
    folded = _fold(source, problems, dialect.turn())
    session = folded.meta.get("sessionId")
    if not isinstance(session, str) or not session:
        session = source.stem
    records: list[RequestRecord] = []
    for mid, before in folded.calls:
        line, msg = folded.latest[mid]
        where = f"message {mid!r}"
        try:
            chat = _history(folded, before, where)
            completion, _ = _assistant(msg, where)
        except RecordFormatError as exc:
            problems.append(LoadProblem(source.file, line, f"{exc}; call skipped"))
            continue
        if not chat:
            problems.append(
                LoadProblem(source.file, line, f"{where}: a model call with no earlier message; skipped")
            )
            continue
        usage = timestamp = None
        try:
            usage = _usage(msg.get("tokens"), f"{where}.tokens")
        except RecordFormatError as exc:
            problems.append(LoadProblem(source.file, line, f"{exc}; the call is kept without usage"))
        try:
            timestamp = parse_timestamp(msg.get("timestamp"), f"{where}.timestamp")
        except RecordFormatError as exc:
            problems.append(LoadProblem(source.file, line, f"{exc}; the call is kept without a timestamp"))
        body: dict[str, Any] = {}
        if isinstance(msg.get("model"), str):
            body["model"] = msg["model"]
        body["messages"] = chat
        records.append(
            RequestRecord(
                body,
                session,
                timestamp=timestamp,
                completion=completion,
                usage=usage,
                file=source.file,
                line=line,
                meta={"gemini_cli_message_id": mid},
            )
        )
    if not records and not problems:
        problems.append(LoadProblem(source.file, None, _no_call_reason(folded)))
    records = estimate_opaque_heads(
        records, key_of=lambda r: f"{dialect.name}:{r.session}:{r.request.get('model', '?')}"
    )
    return records, problems


def _no_call_reason(folded: _Folded) -> str:
    """Why a recording gave no request: no message of the model-turn type, and the types it holds (a
    fork's recording read as Gemini CLI's shows its own model-turn type there, Qwen Code's ``qwen``)."""
    kinds: dict[str, int] = {}
    for _, msg in folded.latest.values():
        kind = msg.get("type")
        if isinstance(kind, str):
            kinds[kind] = kinds.get(kind, 0) + 1
    held = ", ".join(f"{n} {k!r}" for k, n in sorted(kinds.items())) or "no messages"
    reason = f"recording has no model call (no message typed {folded.turn!r}; it holds {held})"
    return reason + "; zero requests loaded"


def sniff(source: Source) -> bool:
    """A JSON object (or a first JSONL line) with ``sessionId`` and ``projectHash``."""
    head = source.head.lstrip()
    if not head.startswith("{"):
        return False
    first = head[:8192]
    return '"projectHash"' in first and '"sessionId"' in first


def read(source: Source) -> Iterator[Item]:
    """The model calls of one recording, problems first."""
    records, problems = recording_records(source)
    yield from problems
    yield from records


FORMAT = LogFormat(
    name=NAME,
    description="Gemini CLI chat recording (~/.gemini/tmp/<project>/chats/session-*.json or .jsonl): "
    "one request per model call",
    sniff=sniff,
    read=read,
    priority=25,
)
