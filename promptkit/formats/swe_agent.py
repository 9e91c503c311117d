"""SWE-agent trajectories (``<instance_id>.traj``, SWE-agent — not mini-swe-agent): one session per file.

A ``.traj`` file is one JSON object with ``trajectory`` (one entry per step: ``response``, ``thought``,
``action``, ``observation``, ``state``, ``execution_time``, and since SWE-agent 1.1 ``query``, the exact
messages sent to the model for that step), ``history`` (the agent's message history, each message with
``agent`` and ``message_type``) and ``info`` (``model_stats``, ``exit_status``, ``submission``...).

Every step is one call. Its request is the step's ``query``: the messages as the history processors left
them, with SWE-agent's bookkeeping fields dropped (``agent``, ``message_type``, ``thought``, ``action``,
``is_demo``, ``tags``) and its ``tool_call_ids`` sent as ``tool_call_id``, the way its LiteLLM model
sends them. Its completion is the step's assistant message from ``history`` (content and tool calls), or
``response`` when the history does not have it. Trajectories written before 1.1 have no ``query``: the
request is then rebuilt from ``history`` (every message of the main agent before the step's assistant
message, the whole history for a last step whose assistant message was never appended;
``meta["query"] = "history"`` says so). That is exact as long as no history processor elided earlier
observations (``last_n_observations`` does after *n* of them). The model name comes from ``replay_config`` when the
file has one.

SWE-agent records token totals for the whole run only (``info.model_stats``: ``tokens_sent``,
``tokens_received``, ``api_calls``), not per call: the records carry no usage, and
``meta["model_stats"]`` of the first record holds the totals. Analyze with ``view="simulated"``.

>>> from promptkit.formats import read_logs
>>> r = read_logs("fixtures/swe_agent/swe-agent-test-repo-i1.traj")
>>> [len(rec.request["messages"]) for rec in r.records], r.records[0].meta["query"]
([2, 4, 6, 8, 10], 'step')
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from promptkit.errors import RecordFormatError
from promptkit.formats.base import Item, LogFormat, Source, read_json_document
from promptkit.formats.fields import CHAT_ROLES, clean_message
from promptkit.layout import LoadProblem, RequestRecord, type_name

__all__ = ["FORMAT", "query_messages", "trajectory_records"]

_TRAJECTORY_KEY: Final[re.Pattern[str]] = re.compile(r'"trajectory"\s*:\s*\[')


def query_messages(query: object, where: str) -> list[dict[str, Any]]:
    """The chat-completions messages of a SWE-agent query (history items): bookkeeping fields dropped,
    ``tool_call_ids`` sent as ``tool_call_id``; raises :class:`~promptkit.errors.RecordFormatError`
    naming the message.

    >>> query_messages([{"role": "tool", "content": "8.2", "agent": "main", "message_type": "observation",
    ...                  "tool_call_ids": ["call_dc"]}], "query")
    [{'role': 'tool', 'content': '8.2', 'tool_call_id': 'call_dc'}]
    """
    if not isinstance(query, list):
        raise RecordFormatError(f"{where}: expected a list of messages, got {type_name(query)}")
    out = []
    for i, item in enumerate(query):
        w = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise RecordFormatError(f"{w}: expected an object, got {type_name(item)}")
        if item.get("role") not in CHAT_ROLES:
            raise RecordFormatError(
                f"{w}.role: expected one of {', '.join(CHAT_ROLES)}, got {item.get('role')!r}"
            )
        message = dict(item)
        ids = message.pop("tool_call_ids", None)
        if message.get("tool_call_id") is None and isinstance(ids, list) and ids:
            message["tool_call_id"] = str(ids[0])
        out.append(clean_message(message, w))
    return out


def _main_history(history: object) -> list[Mapping[str, Any]]:
    if not isinstance(history, list):
        return []
    return [m for m in history if isinstance(m, Mapping) and m.get("agent", "main") == "main"]


def _model_name(data: Mapping[str, Any]) -> str | None:
    config: Any = data.get("replay_config")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except json.JSONDecodeError:
            return None
    agent = config.get("agent") if isinstance(config, Mapping) else None
    model = agent.get("model") if isinstance(agent, Mapping) else None
    name = model.get("name") if isinstance(model, Mapping) else None
    return name if isinstance(name, str) and name else None


def trajectory_records(
    data: object, file: str, session: str, problems: list[LoadProblem]
) -> list[RequestRecord]:
    """The calls of one parsed SWE-agent trajectory; problems (naming the step and field) go to ``problems``."""

    def report(reason: str) -> None:
        problems.append(LoadProblem(file, None, reason))

    if not isinstance(data, Mapping):
        report(f"expected a SWE-agent trajectory object, got {type_name(data)}")
        return []
    steps = data.get("trajectory")
    if not isinstance(steps, list):
        report(f"trajectory: expected a list, got {type_name(steps)}")
        return []
    history = _main_history(data.get("history"))
    assistant_at = [i for i, m in enumerate(history) if m.get("role") == "assistant"]
    model = _model_name(data)
    info = data.get("info")
    stats = info.get("model_stats") if isinstance(info, Mapping) else None
    records: list[RequestRecord] = []
    for k, step in enumerate(steps):
        where = f"trajectory[{k}]"
        if not isinstance(step, Mapping):
            report(f"{where}: expected an object, got {type_name(step)}; skipped")
            continue
        query = step.get("query")
        try:
            if query not in (None, [], [{}]):
                messages, origin = query_messages(query, f"{where}.query"), "step"
            elif k <= len(assistant_at) and history:
                # the last step's assistant message is not in the history when the run ended on it
                cut = assistant_at[k] if k < len(assistant_at) else len(history)
                messages = query_messages(list(history[:cut]), f"history[:{cut}]")
                origin = "history"
            else:
                raise RecordFormatError(
                    f"{where}.query: missing, and history has no assistant message for this step"
                )
        except RecordFormatError as exc:
            report(f"{exc}; step skipped")
            continue
        if not messages:
            report(f"{where}.query: no messages; step skipped")
            continue
        completion: dict[str, Any] | None = None
        if k < len(assistant_at):
            try:
                completion = query_messages([history[assistant_at[k]]], f"history[{assistant_at[k]}]")[0]
            except RecordFormatError as exc:
                report(f"{exc}; the completion is the step's response")
        if completion is None and isinstance(step.get("response"), str):
            completion = {"role": "assistant", "content": step["response"]}
        body: dict[str, Any] = {}
        if model is not None:
            body["model"] = model
        body["messages"] = messages
        meta: dict[str, Any] = {"query": origin}
        if not records and isinstance(stats, Mapping):
            meta["model_stats"] = dict(stats)
        records.append(RequestRecord(body, session, completion=completion, file=file, meta=meta))
    if not records and not any(p.file == file for p in problems):
        status = info.get("exit_status") if isinstance(info, Mapping) else None
        report(f"trajectory has no steps (exit status {status!r}): zero requests loaded")
    return records


def sniff(source: Source) -> bool:
    """A ``*.traj`` file, or JSON with a top-level ``"trajectory": [`` list (not mini-swe-agent's
    ``trajectory_format``)."""
    head = source.head.lstrip()
    if not head.startswith("{") or '"trajectory_format"' in head[:4096]:
        return False
    return source.name.endswith(".traj") or _TRAJECTORY_KEY.search(head[:4096]) is not None


def read(source: Source) -> Iterator[Item]:
    """The calls of one SWE-agent trajectory file."""
    return read_json_document(source, trajectory_records)


FORMAT = LogFormat(
    name="swe-agent",
    description="SWE-agent trajectory (*.traj): every step's query is a call",
    sniff=sniff,
    read=read,
    priority=12,
)
