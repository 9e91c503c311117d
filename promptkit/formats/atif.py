"""Harbor ATIF trajectories (Agent Trajectory Interchange Format, ``trajectory.json``): one session per file.

An ATIF file is one JSON object: ``schema_version`` (``"ATIF-v1.x"``), ``session_id``, ``agent``
(``name``, ``version``, ``model_name``, from v1.5 on ``tool_definitions``) and ``steps``. Each step has a
``source``: ``system`` (the system prompt), ``user`` (a user message) or ``agent`` (one model turn: its
``message``, ``reasoning_content``, ``tool_calls`` and the ``observation`` the tools returned, with
per-step ``metrics``).

Every agent step is one call. Its request is everything before it, as the agent's client sent it: system
steps as system messages, user steps as user messages, each earlier agent step as an assistant message
(with its tool calls) followed by its observation results as ``tool`` messages (a result without
``source_call_id`` becomes a user message); the agent's ``tool_definitions`` are the ``tools``. Its
completion is the step itself (with its ``reasoning_content``), its model the step's ``model_name`` (else
``agent.model_name``), its timestamp the step's ``timestamp``. Metrics map onto usage as ATIF defines
them (since v1.2 ``prompt_tokens`` counts every input token, ``cached_tokens`` the cache hits among them);
``metrics.extra.cache_creation_input_tokens`` is read as cache writes. Reasoning of earlier turns is not
replayed into later requests (most clients drop it).

ATIF does not say which tool definitions the agent sent before v1.5 (``agent.tool_definitions``): without
them the analyzed prompt is shorter than the reported ``prompt_tokens``.

>>> from promptkit.formats import read_logs
>>> r = read_logs("fixtures/atif/rfc-example.trajectory.json")
>>> [(rec.index, len(rec.request["messages"]), rec.usage.cached_tokens) for rec in r.records]
[(0, 1, 200), (1, 4, None)]
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

import attrs

from promptkit.errors import RecordFormatError
from promptkit.formats.base import Item, LogFormat, Source, read_json_document, reporter
from promptkit.formats.fields import assistant_message, chat_body, count, optional_field, parse_timestamp
from promptkit.layout import LoadProblem, RequestRecord, Usage, type_name

__all__ = ["FORMAT", "trajectory_records"]

_VERSION: Final[re.Pattern[str]] = re.compile(r'"schema_version"\s*:\s*"ATIF-v\d')


def _text(message: object, where: str) -> str | list[dict[str, Any]]:
    """A step message: a string, or (ATIF v1.6+) a list of content parts."""
    if message is None:
        return ""
    if isinstance(message, str):
        return message
    if not isinstance(message, list):
        raise RecordFormatError(f"{where}: expected a string or a list of parts, got {type_name(message)}")
    parts: list[dict[str, Any]] = []
    for i, part in enumerate(message):
        if not isinstance(part, Mapping):
            raise RecordFormatError(f"{where}[{i}]: expected an object, got {type_name(part)}")
        if part.get("type") == "text":
            parts.append({"type": "text", "text": str(part.get("text", ""))})
        elif part.get("type") in ("image", "image_url"):
            source = part.get("source") or part.get("image_url") or {}
            url = source.get("url") or source.get("path") if isinstance(source, Mapping) else source
            parts.append({"type": "image_url", "image_url": {"url": str(url)}})
        else:
            raise RecordFormatError(f"{where}[{i}].type: unknown part type {part.get('type')!r}")
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _tool_calls(value: object, where: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordFormatError(f"{where}: expected a list, got {type_name(value)}")
    calls = []
    for i, call in enumerate(value):
        w = f"{where}[{i}]"
        if not isinstance(call, Mapping):
            raise RecordFormatError(f"{w}: expected an object, got {type_name(call)}")
        name = call.get("function_name")
        if not isinstance(name, str):
            raise RecordFormatError(f"{w}.function_name: expected a string, got {type_name(name)}")
        arguments = call.get("arguments", {})
        calls.append(
            {
                "id": str(call.get("tool_call_id") or ""),
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": arguments
                    if isinstance(arguments, str)
                    else json.dumps(arguments, ensure_ascii=False),
                },
            }
        )
    return calls


def _observation(value: object, where: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    results = value.get("results") if isinstance(value, Mapping) else None
    if not isinstance(results, list):
        raise RecordFormatError(f"{where}.results: expected a list, got {type_name(results)}")
    out = []
    for i, result in enumerate(results):
        w = f"{where}.results[{i}]"
        if not isinstance(result, Mapping):
            raise RecordFormatError(f"{w}: expected an object, got {type_name(result)}")
        content = result.get("content")
        if content is None and result.get("subagent_trajectory_ref") is not None:
            content = json.dumps(result["subagent_trajectory_ref"], ensure_ascii=False)
        text = _text(content, f"{w}.content")
        call_id = result.get("source_call_id")
        if call_id:
            out.append({"role": "tool", "tool_call_id": str(call_id), "content": text})
        else:
            out.append({"role": "user", "content": text})
    return out


def _usage(metrics: object, where: str) -> Usage | None:
    if metrics is None:
        return None
    if not isinstance(metrics, Mapping):
        raise RecordFormatError(f"{where}: expected an object, got {type_name(metrics)}")
    prompt = count(metrics.get("prompt_tokens"), f"{where}.prompt_tokens")
    completion = count(metrics.get("completion_tokens"), f"{where}.completion_tokens")
    cached = count(metrics.get("cached_tokens"), f"{where}.cached_tokens")
    extra = metrics.get("extra")
    written = None
    if isinstance(extra, Mapping):
        written = count(
            extra.get("cache_creation_input_tokens"), f"{where}.extra.cache_creation_input_tokens"
        )
    if prompt is None and completion is None and cached is None:
        return None
    if cached is not None and prompt is not None and cached > prompt:
        raise RecordFormatError(f"{where}.cached_tokens: {cached} cached of {prompt} prompt tokens")
    return Usage(prompt, completion, cached, written)


def _tools(agent: Mapping[str, Any]) -> list[Any] | None:
    tools = agent.get("tool_definitions")
    if not isinstance(tools, list) or not tools:
        return None
    return [
        t if isinstance(t, Mapping) and "function" in t else {"type": "function", "function": t}
        for t in tools
    ]


@attrs.define
class _Replay:
    """One trajectory read step by step: the chat so far (the request of the next agent step) and the
    calls found; problems (naming the step and field) go to ``problems``."""

    file: str
    session: str
    default_model: object
    tools: list[Any] | None
    problems: list[LoadProblem]
    chat: list[dict[str, Any]] = attrs.field(factory=list)
    records: list[RequestRecord] = attrs.field(factory=list)

    def report(self, reason: str) -> None:
        self.problems.append(LoadProblem(self.file, None, reason))

    def step(self, step: object, where: str) -> None:
        """Read one step: a system or user step extends the chat, an agent step is a call."""
        if not isinstance(step, Mapping):
            self.report(f"{where}: expected an object, got {type_name(step)}; skipped")
            return
        try:
            agent = self._read(step, where)
        except RecordFormatError as exc:
            self.report(f"{exc}; step skipped")
            return
        if agent is not None:
            self._agent(step, where, *agent)

    def _read(
        self, step: Mapping[str, Any], where: str
    ) -> tuple[str | list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]] | None:
        """A system or user step's messages go onto the chat (None is returned; a bad observation raises
        after its message is on the chat); an agent step's message, tool calls and observation messages
        are returned. Raises :class:`RecordFormatError` naming the field."""
        source = step.get("source")
        if source not in ("system", "user", "agent"):
            raise RecordFormatError(f"{where}.source: expected 'system', 'user' or 'agent', got {source!r}")
        message = _text(step.get("message"), f"{where}.message")
        if source != "agent":
            self.chat.append({"role": source, "content": message})
            self.chat.extend(_observation(step.get("observation"), f"{where}.observation"))
            return None
        calls = _tool_calls(step.get("tool_calls"), f"{where}.tool_calls")
        return message, calls, _observation(step.get("observation"), f"{where}.observation")

    def _agent(
        self,
        step: Mapping[str, Any],
        where: str,
        message: str | list[dict[str, Any]],
        calls: list[dict[str, Any]],
        observation: list[dict[str, Any]],
    ) -> None:
        """An agent step: a call whose request is the chat so far; then its answer joins the chat."""
        assistant = assistant_message(message, calls)
        record = self._record(step, where, assistant)
        if record is not None:
            self.records.append(record)
        self.chat.append(assistant)
        self.chat.extend(observation)

    def _record(self, step: Mapping[str, Any], where: str, assistant: dict[str, Any]) -> RequestRecord | None:
        completion = dict(assistant)
        reasoning = step.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            completion["reasoning_content"] = reasoning
        body = chat_body(step.get("model_name") or self.default_model, list(self.chat), self.tools)
        usage = optional_field(
            self.report, "the call is kept without usage", _usage, step.get("metrics"), f"{where}.metrics"
        )
        timestamp = optional_field(
            self.report,
            "the call is kept without a timestamp",
            parse_timestamp,
            step.get("timestamp"),
            f"{where}.timestamp",
        )
        if not self.chat:
            self.report(f"{where}: agent step with no earlier message; not a call that can be analyzed")
            return None
        meta = {"step_id": step.get("step_id")} if step.get("step_id") is not None else {}
        return RequestRecord(
            body,
            self.session,
            timestamp=timestamp,
            completion=completion,
            usage=usage,
            file=self.file,
            meta=meta,
        )


def _session(data: Mapping[str, Any], default_session: str, report: Callable[[str], None]) -> str:
    session = data.get("session_id")
    if isinstance(session, str) and session:
        return session
    report(f"session_id: expected a non-empty string, got {type_name(session)}; the file name is the session")
    return default_session


def trajectory_records(
    data: object, file: str, default_session: str, problems: list[LoadProblem]
) -> list[RequestRecord]:
    """The calls of one parsed ATIF trajectory; problems (naming the step and field) go to ``problems``."""
    report = reporter(problems, file)
    if not isinstance(data, Mapping):
        report(f"expected an ATIF trajectory object, got {type_name(data)}")
        return []
    steps = data.get("steps")
    if not isinstance(steps, list):
        report(f"steps: expected a list, got {type_name(steps)}")
        return []
    session = _session(data, default_session, report)
    agent = data.get("agent") if isinstance(data.get("agent"), Mapping) else {}
    assert isinstance(agent, Mapping)
    replay = _Replay(file, session, agent.get("model_name"), _tools(agent), problems)
    for k, step in enumerate(steps):
        replay.step(step, f"steps[{k}]")
    if not replay.records and not any(p.file == file for p in problems):
        report("trajectory has no agent steps: zero requests loaded")
    return replay.records


def sniff(source: Source) -> bool:
    """A JSON object with ``"schema_version": "ATIF-v..."``."""
    head = source.head.lstrip()
    return head.startswith("{") and _VERSION.search(head[:8192]) is not None


def read(source: Source) -> Iterator[Item]:
    """The calls of one ATIF trajectory file."""
    return read_json_document(source, trajectory_records)


FORMAT = LogFormat(
    name="atif",
    description="Harbor ATIF trajectory (schema_version ATIF-v1.x): every agent step is a call",
    sniff=sniff,
    read=read,
    priority=20,
)
