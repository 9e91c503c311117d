"""OpenCode sessions, as ``opencode export <sessionID>`` writes them: one JSON document per session.

The document is ``{"info": Session, "messages": [{"info": Message, "parts": [Part, ...]}], "todos": ...}``
(``packages/opencode/src/cli/cmd/export.ts`` and ``src/session/message-v2.ts`` in anomalyco/opencode,
formerly sst/opencode); its messages and parts are the JSON OpenCode keeps in its storage.

- A **user** message's ``text`` parts are its content (``ignored`` ones are not sent); ``file`` parts
  with an image ``mime`` are images.
- An **assistant** message (``modelID``, ``providerID``) holds one or more **steps**: each
  ``step-start`` ... ``step-finish`` span is one model call. Within it, ``text`` parts are the answer and
  ``tool`` parts (``callID``, ``tool``, ``state.input``, and ``state.output`` or ``state.error``) are tool
  calls whose results are sent with the next call. ``reasoning`` parts are not replayed (as for the other
  agent formats).
- A call's usage is its ``step-finish`` part's ``tokens``: ``input`` (the input not read from or written
  to the cache, as OpenCode computes it), ``cache.read``, ``cache.write``, ``output`` and ``reasoning``;
  the prompt is ``input + cache.read + cache.write``. OpenCode versions before AI SDK 6 stored the raw
  input count (cache included) for providers other than Anthropic: such files overstate the prompt.

Each call's request is the session before it, in the OpenAI shape. The export holds neither the system
prompt nor the tool definitions: every record gets an estimated opaque head
(:func:`~promptkit.formats.opaque_head.estimate_opaque_heads`, key ``opencode:<session>:<model>``). The
provider comes from the model name (``claude-…``, ``google/gemini-…`` through OpenRouter).

>>> from promptkit.formats import read_logs
>>> r = read_logs("fixtures/opencode/ses_6aade4081ffe216ygZUgcUQdR1.json")
>>> [(len(rec.request["messages"]), rec.usage.prompt_tokens, rec.usage.cached_tokens) for rec in r.records]
[(1, 9640, 0), (3, 9912, 9600), (5, 10210, 9856)]
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, Final

import attrs

from promptkit.errors import RecordFormatError
from promptkit.formats.base import Item, LogFormat, Source, read_json_document
from promptkit.formats.fields import assistant_message, chat_body, optional_field
from promptkit.formats.opaque_head import estimate_opaque_heads
from promptkit.layout import LoadProblem, RequestRecord, Usage, token_count, type_name

__all__ = ["FORMAT", "export_records"]

NAME: Final[str] = "opencode"


def _usage(tokens: object, where: str) -> Usage | None:
    if tokens is None:
        return None
    if not isinstance(tokens, Mapping):
        raise RecordFormatError(f"{where}: expected an object, got {type_name(tokens)}")
    cache = tokens.get("cache") if tokens.get("cache") is not None else {}
    if not isinstance(cache, Mapping):
        raise RecordFormatError(f"{where}.cache: expected an object, got {type_name(cache)}")
    fresh = token_count(tokens.get("input"), f"{where}.input")
    read = token_count(cache.get("read"), f"{where}.cache.read") or 0
    write = token_count(cache.get("write"), f"{where}.cache.write") or 0
    output = token_count(tokens.get("output"), f"{where}.output")
    reasoning = token_count(tokens.get("reasoning"), f"{where}.reasoning")
    prompt = None if fresh is None else fresh + read + write
    completion = None if output is None and reasoning is None else (output or 0) + (reasoning or 0)
    return Usage(prompt, completion, read, write)


def _user(parts: list[Any], where: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for i, part in enumerate(parts):
        if not isinstance(part, Mapping):
            raise RecordFormatError(f"{where}.parts[{i}]: expected an object, got {type_name(part)}")
        if part.get("type") == "text" and not part.get("ignored"):
            content.append({"type": "text", "text": str(part.get("text", ""))})
        elif part.get("type") == "file" and str(part.get("mime", "")).startswith("image/"):
            content.append({"type": "image_url", "image_url": {"url": str(part.get("url", ""))}})
    if all(p["type"] == "text" for p in content):
        return {"role": "user", "content": "\n".join(p["text"] for p in content)}
    return {"role": "user", "content": content}


class _Step:
    """The answer of one model call: its text and tool calls, and the tool results sent after it."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: list[dict[str, Any]] = []
        self.results: list[dict[str, Any]] = []
        self.ended_at: float | None = None

    def tool(self, part: Mapping[str, Any], where: str) -> None:
        state = part.get("state")
        if not isinstance(state, Mapping):
            raise RecordFormatError(f"{where}.state: expected an object, got {type_name(state)}")
        call_id = str(part.get("callID") or part.get("id") or f"call_{len(self.calls)}")
        args = state.get("input") if state.get("input") is not None else {}
        self.calls.append(
            {
                "id": call_id,
                "type": "function",
                "function": {
                    "name": str(part.get("tool", "")),
                    "arguments": json.dumps(args, ensure_ascii=False),
                },
            }
        )
        status = state.get("status")
        if status in ("completed", "error"):
            output = state.get("output") if status == "completed" else state.get("error")
            self.results.append({"role": "tool", "tool_call_id": call_id, "content": str(output or "")})
            end = (state.get("time") or {}).get("end") if isinstance(state.get("time"), Mapping) else None
            if isinstance(end, int | float) and not isinstance(end, bool):
                self.ended_at = end / 1000.0

    def messages(self) -> list[dict[str, Any]]:
        return [assistant_message("".join(self.text), self.calls), *self.results]


def _created(info: Mapping[str, Any]) -> float | None:
    time = info.get("time")
    created = time.get("created") if isinstance(time, Mapping) else None
    return created / 1000.0 if isinstance(created, int | float) and not isinstance(created, bool) else None


@attrs.define
class _Export:
    """One export read message by message: the chat so far (the request of the next model call) and the
    calls found; problems (naming message and part) go to ``problems``."""

    file: str
    session: str
    problems: list[LoadProblem]
    chat: list[dict[str, Any]] = attrs.field(factory=list)
    records: list[RequestRecord] = attrs.field(factory=list)

    def report(self, reason: str) -> None:
        self.problems.append(LoadProblem(self.file, None, reason))

    def message(self, entry: object, where: str) -> None:
        """Read one message: a user message extends the chat, an assistant message's steps are calls."""
        try:
            assistant = self._read(entry, where)
        except RecordFormatError as exc:
            self.report(f"{exc}; message skipped")
            return
        if assistant is not None:
            self._steps(*assistant, where)

    def _read(self, entry: object, where: str) -> tuple[Mapping[str, Any], list[Any]] | None:
        """A user message goes onto the chat (None is returned); an assistant message's info and parts are
        returned. Raises :class:`RecordFormatError` naming the field."""
        if not isinstance(entry, Mapping) or not isinstance(entry.get("info"), Mapping):
            raise RecordFormatError(f"{where}: expected an object with an 'info' object")
        message, parts = entry["info"], entry.get("parts") or []
        if not isinstance(parts, list):
            raise RecordFormatError(f"{where}.parts: expected a list, got {type_name(parts)}")
        role = message.get("role")
        if role == "user":
            self.chat.append(_user(parts, where))
            return None
        if role != "assistant":
            raise RecordFormatError(f"{where}.info.role: expected 'user' or 'assistant', got {role!r}")
        return message, parts

    def _steps(self, message: Mapping[str, Any], parts: list[Any], where: str) -> None:
        """The steps of an assistant message, each ``step-start`` ... ``step-finish`` one call."""
        started = _created(message)
        step: _Step | None = None
        for i, part in enumerate(parts):
            w = f"{where}.parts[{i}]"
            if not isinstance(part, Mapping):
                self.report(f"{w}: expected an object, got {type_name(part)}; skipped")
                continue
            kind = part.get("type")
            if kind == "step-start":
                step = _Step()
            elif step is None:
                if kind in ("text", "tool"):
                    self.report(f"{w}: a {kind} part outside a step; skipped")
            elif kind == "text":
                step.text.append(str(part.get("text", "")))
            elif kind == "tool":
                try:
                    step.tool(part, w)
                except RecordFormatError as exc:
                    self.report(f"{exc}; tool call skipped")
            elif kind == "step-finish":
                self._call(message, step, part, w, started)
                started = step.ended_at if step.ended_at is not None else started
                step = None

    def _call(
        self,
        message: Mapping[str, Any],
        step: _Step,
        finish: Mapping[str, Any],
        where: str,
        started: float | None,
    ) -> None:
        """A finished step: a call whose request is the chat so far; then its answer joins the chat."""
        usage = optional_field(
            self.report, "the call is kept without usage", _usage, finish.get("tokens"), f"{where}.tokens"
        )
        body = chat_body(message.get("modelID"), list(self.chat))
        if self.chat:
            self.records.append(
                RequestRecord(
                    body,
                    self.session,
                    timestamp=started,
                    completion=step.messages()[0],
                    usage=usage,
                    file=self.file,
                    meta={
                        "opencode_message_id": message.get("id"),
                        "opencode_provider": message.get("providerID"),
                    },
                )
            )
        else:
            self.report(f"{where}: a model call with no earlier message; skipped")
        self.chat.extend(step.messages())


def export_records(
    data: object, file: str, default_session: str, problems: list[LoadProblem]
) -> list[RequestRecord]:
    """The model calls of one ``opencode export`` document; problems (naming message and part) go to
    ``problems``."""
    if not isinstance(data, Mapping) or not isinstance(data.get("messages"), list):
        problems.append(
            LoadProblem(file, None, "expected an OpenCode export: an object with 'info' and 'messages'")
        )
        return []
    info = data.get("info") if isinstance(data.get("info"), Mapping) else {}
    assert isinstance(info, Mapping)
    found = info.get("id")
    session: str = found if isinstance(found, str) and found else default_session
    export = _Export(file, session, problems)
    for k, entry in enumerate(data["messages"]):
        export.message(entry, f"messages[{k}]")
    if not export.records and not problems:
        problems.append(LoadProblem(file, None, "export has no model call: zero requests loaded"))
    return estimate_opaque_heads(
        export.records, key_of=lambda r: f"opencode:{r.session}:{r.request.get('model', '?')}"
    )


def sniff(source: Source) -> bool:
    """A JSON object whose session ``info`` has an ``ses_`` id, with messages of ``msg_`` ids."""
    head = source.head.lstrip()
    return head.startswith("{") and '"ses_' in head[:8192] and '"msg_' in head[:65536]


def read(source: Source) -> Iterator[Item]:
    """The model calls of one exported session."""
    return read_json_document(source, export_records)


FORMAT = LogFormat(
    name=NAME,
    description="OpenCode session export (opencode export <sessionID>): one request per model step",
    sniff=sniff,
    read=read,
    priority=25,
)
