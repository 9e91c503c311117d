"""Claude Code session transcripts: ``~/.claude/projects/<project>/<session-uuid>.jsonl``.

Claude Code writes one JSON event per line: ``user`` and ``assistant`` events carry an Anthropic
Messages ``message`` (the assistant's with ``id``, ``model``, ``content`` blocks and ``usage``), every
event its ``uuid``, ``parentUuid``, ``sessionId``, ``isSidechain`` and ``timestamp``, assistant events the
API ``requestId``; other events (``progress``, ``system``, ``summary``, ``file-history-snapshot``...) are
bookkeeping. Sub-agents write sidechains: in recent versions in ``<session>/subagents/agent-<id>.jsonl``
(events with ``agentId``), in older ones inside the main file.

How the file becomes request records:

- **Sessions.** The main thread is session ``<sessionId>``; each sub-agent's sidechain is a session of
  its own, ``<sessionId>/agent-<agentId>`` (an older in-file sidechain without ``agentId``:
  ``<sessionId>/sidechain-<first 8 characters of its root uuid>``).
- **One request per model call.** Claude Code writes a streamed answer once per content block, each line
  repeating the message ``id``, ``requestId`` and ``usage``. The lines of one message id (else request
  id) are merged into one record: content blocks in line order, usage from the last line that has one,
  file, line and timestamp from the first. Synthetic assistant messages (model ``<synthetic>``, written
  for interruptions and API errors) are not model calls and are left out, also from the context.
- **The request** is the conversation before that message on its thread: the ``parentUuid`` chain back
  to the root or to a ``compact_boundary`` event (compaction starts a new context; Claude Code 1.0.x
  writes no boundary, and its compaction's context starts at a root user event marked
  ``isCompactSummary``, the summary: read as a compaction too), plus the tool results
  of parallel tool calls, which Claude Code hangs off their own ``tool_use`` line rather than the chain.
  Consecutive user events are one user turn, as Claude Code sends them. Converted to the chat-completions
  shape: ``tool_use`` blocks become the assistant's ``tool_calls``, ``tool_result`` blocks ``tool``
  messages (before the turn's other blocks), text blocks text; ``thinking`` blocks are left out (the API
  drops earlier turns' thinking from most models' context). The last message carries
  ``cache_control`` as Claude Code's requests do (``"ttl": "1h"`` when most of the session's cache writes
  were 1-hour writes), so Anthropic's cache rules apply.
- **Usage** is normalized: prompt = ``input_tokens`` + ``cache_creation_input_tokens`` +
  ``cache_read_input_tokens``; the 5-minute / 1-hour write split is kept.
- **The opaque head.** Transcripts hold neither the system prompt nor the tool definitions. Each record
  gets ``meta["opaque_head_tokens"]`` (estimated per session and model by
  :func:`~promptkit.formats.opaque_head.estimate_opaque_heads`) and ``meta["opaque_head_key"] =
  "claude-code:<session>:<model>"``; the analysis puts that many placeholder tokens before the messages.
  Claude Code marks the end of its system prompt with ``cache_control`` too (the prefix tools + system
  is read by every request of the session with the same head), so the head ends in a breakpoint:
  ``meta["opaque_head_cache_control"]``, with the last message's TTL.
- **The compaction sub-agent** (``subagents/agent-acompact-<id>.jsonl``) holds only the summary
  instruction, whose ``parentUuid`` is the main thread's last event: Claude Code compacts by sending the
  main thread's request (its system prompt, tools and conversation) with that instruction appended. Its
  request is built so, from the main thread's transcript (``<session>.jsonl`` beside ``<session>/``),
  and it gets the main thread's head (key ``claude-code:<session>:<model>`` and length), so it reads
  what the main thread's calls wrote and the main thread's next call reads the head it wrote. Without
  the main thread's file it keeps what its own file holds (and the missing parent is a problem).

- **The conversation tree.** Every record has ``meta["conversation_tree"] = True``: its calls follow
  ``parentUuid``, a rewind or a branch is a path sharing a prefix with an earlier one, and sub-agents
  share the account's cache, so the analysis takes the ``simulated`` view by default. What the
  transcript shows happened since the thread's previous call is in ``meta["log_events"]``:
  ``compaction`` (the context starts at a ``compact_boundary``) or ``rewind`` (the call's chain leaves
  the previous call out), ``thinking_changed`` (the thinking settings of the prompt it answers differ
  from the previous call's: :mod:`promptkit.formats.claude_code_thinking`); the causes name a rebuild
  from them.

- **Resumed sessions.** A transcript that starts with copies of an earlier session's calls (a resume: the
  same ``requestId``, timestamps rewritten) keeps only the calls after them; the earlier file counts the
  copied ones, and a note says so (:mod:`promptkit.formats.claude_code_resume`).

Other events (``progress``, ``system``, ``attachment``...) are not part of the requests; what Claude Code
derives from some of them and sends (hook output, attachments as ``<system-reminder>`` text) is not
reconstructed.

A malformed line, an event without ``type`` or a user/assistant event without ``uuid`` or ``message`` is
a problem naming file, line and field; the rest of the file is still read.

>>> from promptkit.formats import read_logs
>>> r = read_logs("fixtures/claude-code")
>>> len(r.records), sorted({x.session for x in r.records}), r.formats
(3, ['4d5611e5-241a-462a-8d15-5122611a9569', '4d5611e5-241a-462a-8d15-5122611a9569/agent-a2898e3'], {'claude-code': 2})
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from promptkit.errors import LogFileError, RecordFormatError
from promptkit.formats.base import COMPRESSED_SUFFIXES, Item, LogFormat, Source, json_values, reporter
from promptkit.formats.claude_code_resume import earlier_copies
from promptkit.formats.claude_code_thinking import set_by_words, thinking_setting
from promptkit.formats.fields import chat_body, first_json_lines, optional_field, parse_timestamp
from promptkit.formats.opaque_head import estimate_opaque_heads
from promptkit.layout import LoadProblem, RequestRecord, Usage, type_name
from promptkit.providers.registry import native_provider, normalize_usage

__all__ = ["FORMAT", "NAME", "transcript_records"]

#: The format name (``--format claude-code``).
NAME: Final[str] = "claude-code"
#: Event types that carry an API message.
_MESSAGE_TYPES: Final[frozenset[str]] = frozenset({"user", "assistant"})
#: Event types that only Claude Code writes (for sniffing).
_BOOKKEEPING_TYPES: Final[frozenset[str]] = frozenset(
    {"summary", "file-history-snapshot", "queue-operation", "progress", "system"}
)


@attrs.frozen(slots=True)
class _Event:
    """What promptkit keeps of one line (not the line itself: ``toolUseResult`` copies can be large)."""

    line: int
    type: str
    uuid: str | None
    parent: str | None
    blocks: tuple[Mapping[str, Any], ...] = ()
    message_key: str = ""  # what the streamed lines of one model call share: message id, else request id
    model: str | None = None
    usage: Any = None
    timestamp: Any = None
    request_id: str | None = None
    session_id: str | None = None
    agent_id: str | None = None
    sidechain: bool = False
    compact_boundary: bool = False
    compact_summary: bool = False  # Claude Code 1.0.x: the summary a compaction starts a new root with
    prelude: bool = False  # an event of the main thread's file, read for a compaction sub-agent's context
    thinking: str | None = None  # a typed prompt's thinking setting (claude_code_thinking)

    @property
    def synthetic(self) -> bool:
        return self.type == "assistant" and self.model == "<synthetic>"

    @property
    def order(self) -> tuple[int, int]:
        """Where the event stands in the conversation: the main thread's events (a prelude) before the
        file's own, each in line order."""
        return (0 if self.prelude else 1, self.line)


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _parse_event(obj: object, line: int) -> _Event:
    """One line's event; raises RecordFormatError naming the field."""
    if not isinstance(obj, Mapping):
        raise RecordFormatError(f"expected a JSON object, got {type_name(obj)}")
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise RecordFormatError(
            "missing 'type'" if kind is None else f"type: expected a string, got {type_name(kind)}"
        )
    uuid = obj.get("uuid")
    parent = obj.get("parentUuid")
    if parent is not None and not isinstance(parent, str):
        raise RecordFormatError(f"parentUuid: expected a string or null, got {type_name(parent)}")
    blocks: tuple[Mapping[str, Any], ...] = ()
    message: Mapping[str, Any] = {}
    if kind in _MESSAGE_TYPES:
        if not isinstance(uuid, str) or not uuid:
            raise RecordFormatError(
                f"{kind} event: missing 'uuid'"
                if uuid is None
                else f"uuid: expected a string, got {type_name(uuid)}"
            )
        raw_message = obj.get("message")
        if not isinstance(raw_message, Mapping):
            raise RecordFormatError(
                f"{kind} event: missing 'message'"
                if raw_message is None
                else f"message: expected an object, got {type_name(raw_message)}"
            )
        message = raw_message
        content = message.get("content")
        if isinstance(content, str):
            blocks = ({"type": "text", "text": content},)
        elif isinstance(content, list):
            for k, block in enumerate(content):
                if not isinstance(block, Mapping):
                    raise RecordFormatError(
                        f"message.content[{k}]: expected an object, got {type_name(block)}"
                    )
            blocks = tuple(content)
        else:
            raise RecordFormatError(
                f"message.content: expected a string or a list of blocks, got {type_name(content)}"
            )
    uuid_s = uuid if isinstance(uuid, str) else None
    request_id = _str_or_none(obj.get("requestId"))
    mid = _str_or_none(message.get("id"))
    key = "msg:" + mid if mid else ("req:" + request_id if request_id else "uuid:" + str(uuid_s))
    return _Event(
        line,
        kind,
        uuid_s,
        parent,
        blocks=blocks,
        message_key=key,
        model=_str_or_none(message.get("model")),
        usage=message.get("usage"),
        timestamp=obj.get("timestamp"),
        request_id=request_id,
        session_id=_str_or_none(obj.get("sessionId")),
        agent_id=_str_or_none(obj.get("agentId")),
        sidechain=obj.get("isSidechain") is True,
        compact_boundary=kind == "system" and obj.get("subtype") == "compact_boundary",
        compact_summary=kind == "user" and obj.get("isCompactSummary") is True,
        thinking=thinking_setting(obj) if kind == "user" else None,
    )


def _tool_content(value: Any) -> Any:
    """A ``tool_result``'s content as a chat message's: its text, or its parts when it holds an image."""
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, list):
        if all(isinstance(b, Mapping) and b.get("type") == "text" for b in value):
            return "".join(str(b.get("text", "")) for b in value)
        return [dict(b) if isinstance(b, Mapping) else {"type": "text", "text": str(b)} for b in value]
    return json.dumps(value, ensure_ascii=False)


def _user_messages(blocks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One user turn's blocks: a ``tool`` message per ``tool_result``, then a user message with the rest."""
    out: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    for b in blocks:
        if b.get("type") == "tool_result":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": str(b.get("tool_use_id", "")),
                    "content": _tool_content(b.get("content")),
                }
            )
        else:
            rest.append({k: v for k, v in b.items() if k != "cache_control"})
    if rest:
        if all(p.get("type") == "text" for p in rest):
            out.append({"role": "user", "content": "".join(str(p.get("text", "")) for p in rest)})
        else:
            out.append({"role": "user", "content": rest})
    return out


def _assistant_message(blocks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One assistant message's blocks as a chat-completions assistant message (thinking left out)."""
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for b in blocks:
        kind = b.get("type")
        if kind in ("thinking", "redacted_thinking"):
            continue
        if kind == "tool_use":
            calls.append(
                {
                    "id": str(b.get("id", "")),
                    "type": "function",
                    "function": {
                        "name": str(b.get("name", "")),
                        "arguments": json.dumps(b.get("input", {}), ensure_ascii=False),
                    },
                }
            )
        else:
            parts.append(dict(b))
    content: Any = (
        "".join(str(p.get("text", "")) for p in parts)
        if all(p.get("type") == "text" for p in parts)
        else parts
    )
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        out["tool_calls"] = calls
    return out


class _Transcript:
    """The events of one file, indexed for walking the parentUuid chains. ``prelude``: the main thread's
    events a compaction sub-agent's conversation continues (:func:`_compaction_prelude`), found where
    the file's own chain leaves it."""

    def __init__(self, events: list[_Event], file: str, stem: str, prelude: Sequence[_Event] = ()) -> None:
        self.events = events
        self.file = file
        self.by_uuid = {e.uuid: e for e in prelude if e.uuid is not None}
        self.by_uuid.update({e.uuid: e for e in events if e.uuid is not None})
        self.answers: dict[str, list[_Event]] = {}  # tool_use id -> user events holding its tool_result
        for e in [*prelude, *events]:
            if e.type == "user":
                for b in e.blocks:
                    if b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str):
                        self.answers.setdefault(b["tool_use_id"], []).append(e)
        self.missing_parents: list[tuple[int, str]] = []
        self.loops: list[
            tuple[int, str]
        ] = []  # a call's line, and the uuid its parentUuid chain loops back to
        self.session: str = next((e.session_id for e in events if e.session_id), stem)
        self._contexts: dict[str, list[dict[str, Any]]] = {}  # first line's uuid of a call -> its context
        self.compacted: set[int] = set()  # lines of calls whose context starts at a compact boundary
        self.known_call: dict[int, str | None] = {}  # a call's line -> the nearest earlier call on its chain
        self.commands: dict[int, list[str]] = {}  # a call's line -> slash commands since the call before
        self.thinking: dict[str, str | None] = {}  # a call's first uuid -> its thinking setting
        # the prompts' words set the thinking budget only where no prompt carries thinkingMetadata
        self.by_words = not any(e.thinking is not None and not set_by_words(e.thinking) for e in events)

    def segment(self, first: _Event) -> tuple[list[_Event], _Event | None]:
        """The ancestors of ``first``, newest first, back to the root, a compaction boundary or the
        nearest call whose context is already known (returned second, and included in the list)."""
        out: list[_Event] = []
        seen: set[str] = set()
        cur = first.parent
        while cur is not None:
            if cur in seen or cur == first.uuid:  # a parentUuid cycle: the chain has no root
                self.loops.append((first.line, cur))
                break
            seen.add(cur)
            ev = self.by_uuid.get(cur)
            if ev is None:
                self.missing_parents.append((first.line, cur))
                break
            if ev.compact_boundary:
                if not ev.prelude:  # the main thread's earlier compaction is not this thread's event
                    self.compacted.add(first.line)
                break
            out.append(ev)
            if cur in self._contexts:
                return out, ev
            if ev.compact_summary and ev.parent is None and not ev.prelude:
                # Claude Code 1.0.x writes no compact_boundary: a compaction's context starts at a root
                # user event marked isCompactSummary (the summary), so the call is after a compaction
                self.compacted.add(first.line)
            cur = ev.parent
        return out, None

    def thread_of(self, e: _Event) -> str:
        """The session of an event: the main thread, a sub-agent, or an older in-file sidechain."""
        if e.sidechain or e.agent_id:
            if e.agent_id:
                return f"{self.session}/agent-{e.agent_id}"
            root = e
            seen: set[str] = set()
            while root.parent is not None and root.parent in self.by_uuid and root.parent not in seen:
                seen.add(root.parent)
                root = self.by_uuid[root.parent]
            return f"{self.session}/sidechain-{(root.uuid or str(root.line))[:8]}"
        return self.session

    def context(self, first: _Event) -> list[dict[str, Any]]:
        """The chat messages before the model call whose first line is ``first``.

        Calls are visited in file order and each one's context is kept, so a call's context is the
        nearest earlier call's (on its chain) plus the events since: linear in the file's length."""
        segment, known = self.segment(first)
        self.known_call[first.line] = known.uuid if known is not None else None
        self.commands[first.line] = [
            c for e in segment if e.type == "user" and not e.prelude for c in _commands(e)
        ]
        if first.uuid is not None:  # the newest prompt's setting since the call before, else that call's
            own = next(
                (
                    e.thinking
                    for e in segment
                    if e.thinking and (self.by_words or not set_by_words(e.thinking))
                ),
                None,
            )
            self.thinking[first.uuid] = (
                own if own is not None or known is None else self.thinking.get(str(known.uuid))
            )
        chain = [e for e in segment if e.type in _MESSAGE_TYPES and not e.synthetic]
        on_chain = {e.uuid for e in chain}
        answered = {
            b.get("tool_use_id")
            for e in chain
            if e.type == "user"
            for b in e.blocks
            if b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str)
        }
        extra: list[_Event] = []
        for e in chain:
            if e.type != "assistant":
                continue
            for b in e.blocks:
                tid = b.get("id")
                if b.get("type") == "tool_use" and isinstance(tid, str) and tid not in answered:
                    for ans in self.answers.get(tid, []):
                        if ans.order < first.order and ans.uuid not in on_chain:
                            extra.append(ans)
                            on_chain.add(ans.uuid)
        events = sorted([*chain, *extra], key=lambda e: e.order)
        turns: list[tuple[str, list[Mapping[str, Any]]]] = []
        assistant_turn: dict[str, int] = {}
        for e in events:
            if e.type == "assistant":
                if e.message_key in assistant_turn:
                    turns[assistant_turn[e.message_key]][1].extend(e.blocks)
                else:
                    assistant_turn[e.message_key] = len(turns)
                    turns.append(("assistant", list(e.blocks)))
            elif turns and turns[-1][0] == "user":
                turns[-1][1].extend(e.blocks)
            else:
                turns.append(("user", list(e.blocks)))
        messages: list[dict[str, Any]] = list(self._contexts[known.uuid]) if known and known.uuid else []
        for role, blocks in turns:
            if role == "assistant":
                messages.append(_assistant_message(blocks))
            else:
                messages.extend(_user_messages(blocks))
        if first.uuid is not None:
            self._contexts[first.uuid] = messages
        return messages


#: A slash command as Claude Code records it: a user message ``<command-name>/mcp</command-name>...``.
_COMMAND: Final[re.Pattern[str]] = re.compile(r"\s*<command-name>/?([\w:.-]+)</command-name>")
#: Slash commands that change what the prompt's head holds: ``/mcp`` reconnects MCP servers, whose tool
#: definitions are part of the prompt (tools changed).
_HEAD_COMMANDS: Final[dict[str, str]] = {"mcp": "tools_changed"}


def _commands(event: _Event) -> list[str]:
    """The slash commands a user event records (``mcp``, ``model``, ``compact``...)."""
    out = []
    for b in event.blocks:
        text = b.get("text") if b.get("type") == "text" else None
        m = _COMMAND.match(text) if isinstance(text, str) else None
        if m:
            out.append(m.group(1))
    return out


def _events_before(t: _Transcript, first: _Event, previous: str | None) -> list[str]:
    """What the transcript shows happened since the thread's previous call (``previous``: its first
    line's uuid; ``""`` for the thread's first call): ``compaction`` when the call's context starts at
    a ``compact_boundary``; ``rewind`` when its ``parentUuid`` chain leaves the previous call out (the
    user went back to an earlier message, or the call is on another branch of the tree);
    ``tools_changed`` after an MCP reconnect (the ``/mcp`` command); ``thinking_changed`` when the call's
    thinking setting differs from the previous call's (:mod:`promptkit.formats.claude_code_thinking`)."""
    events = [_HEAD_COMMANDS[c] for c in t.commands.get(first.line, []) if c in _HEAD_COMMANDS]
    before, now = t.thinking.get(previous or ""), t.thinking.get(first.uuid or "")
    if before is not None and now is not None and before != now:
        events.append("thinking_changed")
    if first.line in t.compacted:
        return ["compaction", *events]
    known = t.known_call.get(first.line)
    if previous and known != previous:
        return ["rewind", *events]
    return events


def _one_hour_sessions(records: Sequence[RequestRecord]) -> set[str]:
    """Sessions where most written cache tokens were 1-hour writes."""
    hour: dict[str, int] = {}
    total: dict[str, int] = {}
    for r in records:
        if r.usage is not None and r.usage.cache_write_tokens:
            total[r.session] = total.get(r.session, 0) + r.usage.cache_write_tokens
            hour[r.session] = hour.get(r.session, 0) + (r.usage.cache_write_1h_tokens or 0)
    return {s for s, n in total.items() if 2 * hour.get(s, 0) > n}


def _with_breakpoint(record: RequestRecord, ttl: str | None) -> RequestRecord:
    messages = list(record.request["messages"])
    if not messages:
        return record
    cc: dict[str, Any] = {"type": "ephemeral"}
    if ttl is not None:
        cc["ttl"] = ttl
    messages[-1] = {**messages[-1], "cache_control": cc}
    # Claude Code also marks the end of its system prompt (after the tools): the opaque head ends in a
    # breakpoint, so a call whose conversation changed (after a compaction) still reads the head
    meta = {**record.meta, "opaque_head_cache_control": dict(cc)}
    return attrs.evolve(record, request={**record.request, "messages": messages}, meta=meta)


def _events(lines: Iterable[tuple[int, str]], file: str, problems: list[LoadProblem]) -> list[_Event]:
    """The events of a transcript's lines; a line that is not JSON or not an event is a problem."""
    events: list[_Event] = []
    for item in json_values(lines, file):
        if isinstance(item, LoadProblem):
            problems.append(item)
            continue
        lineno, obj = item
        try:
            events.append(_parse_event(obj, lineno))
        except RecordFormatError as exc:
            problems.append(LoadProblem(file, lineno, f"{exc}; line skipped"))
    return events


def _model_calls(events: Sequence[_Event]) -> list[list[_Event]]:
    """The lines of each model call: the (non-synthetic) assistant events of one message, in file order."""
    groups: dict[str, list[_Event]] = {}
    for e in events:
        if e.type == "assistant" and not e.synthetic:
            groups.setdefault(e.message_key, []).append(e)
    return list(groups.values())


def _usage_and_timestamp(
    group: Sequence[_Event], file: str, problems: list[LoadProblem]
) -> tuple[Usage | None, float | None]:
    """A call's usage (its last line that has one) and timestamp (its first line's); a problem naming the
    line for either that cannot be read."""
    usage = None
    usage_event = next((g for g in reversed(group) if g.usage is not None), None)
    if usage_event is not None:
        usage = optional_field(
            reporter(problems, file, usage_event.line),
            "the call is kept without usage",
            normalize_usage,
            usage_event.usage,
            "message.usage",
        )
    timestamp = optional_field(
        reporter(problems, file, group[0].line),
        "the call is kept without a timestamp",
        parse_timestamp,
        group[0].timestamp,
    )
    return usage, timestamp


def _call_meta(t: _Transcript, group: Sequence[_Event], last_call: dict[str, str | None]) -> dict[str, Any]:
    """A call's ``meta``: its lines, the log events since its thread's previous call (``last_call``: thread
    -> the uuid of its latest call's first line, updated) and its request id."""
    first = group[0]
    meta: dict[str, Any] = {"claude_code_lines": [g.line for g in group], "conversation_tree": True}
    thread = t.thread_of(first)
    shown = _events_before(t, first, last_call.get(thread, ""))
    if shown:
        meta["log_events"] = shown
    last_call[thread] = first.uuid
    if first.request_id is not None:
        meta["request_id"] = first.request_id
    return meta


def _chain_problem(found: list[tuple[int, str]], file: str, say: str) -> LoadProblem:
    """One problem for the calls whose parentUuid chain broke the same way (``found``: a call's line and
    the uuid where it broke, the first named), ``say`` formatted with that uuid and how many more."""
    line, uuid = found[0]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return LoadProblem(file, line, say.format(uuid=repr(uuid), more=more))


_MISSING_PARENT: Final[str] = (
    "parentUuid {uuid} is not in this file{more}: the conversation before it is unknown "
    "(a resumed session or a trimmed file); the calls are kept with what the file holds"
)
_LOOPING_CHAIN: Final[str] = (
    "the parentUuid chain loops back to {uuid}{more}: the events form a cycle, not a conversation; "
    "the call's context is cut where the loop closes"
)


#: The agent id of Claude Code's compaction sub-agent starts so (``subagents/agent-acompact-<id>.jsonl``).
_COMPACTION_AGENT: Final[str] = "acompact"


@attrs.frozen(slots=True)
class _MainThread:
    """What a compaction sub-agent takes from its main thread's transcript: the events up to where it
    forked off (its conversation's prefix) and the main thread's opaque heads (key -> tokens, basis)."""

    events: tuple[_Event, ...]
    heads: Mapping[str, tuple[int, str | None]]


def _compaction_prelude(
    events: Sequence[_Event], main_thread: Callable[[], Source | None]
) -> _MainThread | None:
    """The main thread a compaction sub-agent continues, or None for any other transcript.

    Claude Code compacts by forking the main conversation: the compaction call is the main thread's
    request (its system prompt, tools and messages) plus the summary instruction, so its file holds only
    that instruction, whose ``parentUuid`` is the main thread's last event. The main thread's transcript
    (``main_thread()``: ``<session>.jsonl`` beside ``<session>/subagents/``) gives the conversation
    before it, up to the line it forked at, and the heads its calls were given. None where the file is
    not a compaction's, its chain does not leave it, or the main thread's file is absent, unreadable or
    does not hold the parent (the calls are then kept with what the file holds, and the missing parent
    is a problem)."""
    if not any(e.agent_id and e.agent_id.startswith(_COMPACTION_AGENT) for e in events):
        return None
    own = {e.uuid for e in events if e.uuid is not None}
    missing = {e.parent for e in events if e.parent is not None and e.parent not in own}
    source = main_thread() if missing else None
    if source is None:
        return None
    try:
        main_events = _events(source.lines(), source.file, [])  # its problems: where it is read itself
    except LogFileError:
        return None
    forks = [e.line for e in main_events if e.uuid in missing]
    if not forks:
        return None
    fork = max(forks)
    main_records = _records(main_events, source.file, source.stem, [])
    heads = {
        str(r.meta["opaque_head_key"]): (int(r.meta["opaque_head_tokens"]), r.meta.get("opaque_head_basis"))
        for r in main_records
        if "opaque_head_tokens" in r.meta
    }
    prelude = tuple(attrs.evolve(e, prelude=True) for e in main_events if e.line <= fork)
    return _MainThread(prelude, heads)


def _main_thread_source(source: Source) -> Callable[[], Source | None]:
    """Opens the main thread's transcript of a sub-agent's file (``<project>/<session>.jsonl``, plain or
    compressed, for ``<project>/<session>/subagents/agent-<id>.jsonl``) when called; None when there is
    none or it cannot be opened (reading it reports that)."""

    def open_main() -> Source | None:
        folder = source.path.parent
        if folder.name != "subagents":
            return None
        session = folder.parent
        for suffix in ("", *COMPRESSED_SUFFIXES):
            path = session.parent / f"{session.name}.jsonl{suffix}"
            if path.is_file():
                try:
                    return Source.open(path)
                except LogFileError:
                    return None
        return None

    return open_main


def transcript_records(
    lines: Iterator[tuple[int, str]] | Sequence[tuple[int, str]],
    *,
    file: str,
    stem: str,
    main_thread: Callable[[], Source | None] | None = None,
) -> tuple[list[RequestRecord], list[LoadProblem]]:
    """The model calls of one transcript file (see the module docstring) and the problems met.
    ``main_thread`` opens the main thread's transcript, read when the file is a compaction sub-agent's
    (:func:`_compaction_prelude`).

    >>> lines = ['{"type": "user", "uuid": "u1", "parentUuid": null, "sessionId": "s", "message": {"role": "user", "content": "hi"}}',
    ...          '{"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "s", "message": {"id": "m1", '
    ...          '"model": "claude-sonnet-4-5", "role": "assistant", "content": [{"type": "text", "text": "hello"}]}}', "{oops"]
    >>> records, problems = transcript_records(enumerate(lines, 1), file="s.jsonl", stem="s")
    >>> [(r.session, r.line, r.request["messages"][0]["content"]) for r in records], [(p.line, p.reason[:12]) for p in problems]
    ([('s', 2, 'hi')], [(3, 'invalid JSON')])
    """
    problems: list[LoadProblem] = []
    events = _events(lines, file, problems)
    main = _compaction_prelude(events, main_thread) if main_thread is not None else None
    return _records(events, file, stem, problems, main), problems


def _records(
    events: list[_Event], file: str, stem: str, problems: list[LoadProblem], main: _MainThread | None = None
) -> list[RequestRecord]:
    """The model calls of a transcript's events; ``main``: the main thread a compaction continues."""
    t = _Transcript(events, file, stem, prelude=main.events if main is not None else ())
    records: list[RequestRecord] = []
    last_call: dict[str, str | None] = {}  # thread -> the uuid of its latest call's first line
    for group in _model_calls(events):
        first = group[0]
        model = next((g.model for g in group if g.model is not None), None)
        body = chat_body(model, t.context(first))
        completion = _assistant_message([b for g in group for b in g.blocks if isinstance(b, Mapping)])
        usage, timestamp = _usage_and_timestamp(group, file, problems)
        meta = _call_meta(t, group, last_call)
        records.append(
            RequestRecord(
                body,
                t.thread_of(first),
                timestamp=timestamp,
                completion=completion,
                usage=usage,
                file=file,
                line=first.line,
                provider=native_provider(NAME),  # Claude Code speaks one provider's API
                meta=meta,
            )
        )
    if t.missing_parents:
        problems.append(_chain_problem(t.missing_parents, file, _MISSING_PARENT))
    if t.loops:
        problems.append(_chain_problem(t.loops, file, _LOOPING_CHAIN))
    hour = _one_hour_sessions(records)
    records = [_with_breakpoint(r, "1h" if r.session in hour else None) for r in records]
    if main is None:
        return estimate_opaque_heads(
            records, key_of=lambda r: f"claude-code:{r.session}:{r.request.get('model', '?')}"
        )
    # a compaction is sent with the main thread's system prompt and tools: the main thread's head (its
    # key, and its length where the main thread's calls of the model estimate it)
    records = estimate_opaque_heads(
        records, key_of=lambda r: f"claude-code:{t.session}:{r.request.get('model', '?')}"
    )
    return [_main_head(r, main.heads) for r in records]


def _main_head(record: RequestRecord, heads: Mapping[str, tuple[int, str | None]]) -> RequestRecord:
    """``record`` with the main thread's head of its key (tokens, and the call they were estimated on)."""
    head = heads.get(str(record.meta.get("opaque_head_key")))
    if head is None:
        return record
    meta = {**record.meta, "opaque_head_tokens": head[0]}
    if head[1] is not None:
        meta["opaque_head_basis"] = head[1]
    return attrs.evolve(record, meta=meta)


def sniff(source: Source) -> bool:
    """JSONL whose first events look like Claude Code's: ``sessionId`` with ``parentUuid`` or
    ``isSidechain``, or Claude Code's own bookkeeping events (``summary`` with ``leafUuid``,
    ``file-history-snapshot``, ``queue-operation``). Lines that are not JSON are passed over, so a
    transcript whose first line is corrupt is still recognised (the reader counts that line as a
    problem)."""
    for obj in first_json_lines(source.head):
        if not isinstance(obj, Mapping):
            return False
        if "sessionId" in obj and ("parentUuid" in obj or "isSidechain" in obj):
            return True
        kind = obj.get("type")
        if kind == "summary" and "leafUuid" in obj:
            return True
        if kind in ("file-history-snapshot", "queue-operation") and ("snapshot" in obj or "sessionId" in obj):
            return True
    return False


def without_resumed_copies(records: list[RequestRecord], path: Path) -> list[RequestRecord]:
    """The records of the main-thread transcript at ``path`` without the calls a resume copied from an
    earlier session of the same project folder (:mod:`promptkit.formats.claude_code_resume`); the first
    record left says so in ``meta["load_notes"]``, which the loader turns into a note."""
    if path.parent.name == "subagents" or not records:
        return records
    main = records[0].session.split("/")[0]
    leading = [
        (r.meta.get("request_id"), r.timestamp)
        for r in sorted(records, key=lambda r: r.line or 0)
        if r.session == main
    ]
    copies = earlier_copies(path, leading)
    if not copies:
        return records
    kept = [r for r in records if r.session != main or r.meta.get("request_id") not in copies]
    owners = sorted(set(copies.values()))
    note = (
        f"{len(copies)} call(s) at the start of {path.name} are copies of an earlier session's calls in "
        f"{', '.join(owners)} (a resumed session: same request ids, timestamps rewritten): each is "
        f"counted once, in {owners[0] if len(owners) == 1 else 'the earlier file'}"
    )
    if kept:
        kept[0] = attrs.evolve(kept[0], meta={**kept[0].meta, "load_notes": (note,)})
    return kept


def read(source: Source) -> Iterator[Item]:
    """The model calls of one transcript file, problems first (calls a resume copied from an earlier
    session left out: :func:`without_resumed_copies`)."""
    records, problems = transcript_records(
        source.lines(), file=source.file, stem=source.stem, main_thread=_main_thread_source(source)
    )
    yield from problems
    yield from without_resumed_copies(records, source.path)


FORMAT = LogFormat(
    name=NAME,
    description="Claude Code session transcript (~/.claude/projects/<project>/<session>.jsonl, sub-agent "
    "sidechains as sessions of their own): one request per model call",
    sniff=sniff,
    read=read,
    priority=25,
)
