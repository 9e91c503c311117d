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
``meta["query"] = "history"`` says so), and the history processors ``replay_config`` declares are
applied to it: ``last_n_observations`` elides all but the last *n* observations to SWE-agent's
placeholder (:func:`last_n_observations`), ``default`` and ``cache_control`` leave the messages as they
are; any other declared processor is named in a problem (the rebuilt requests may differ from those
sent). A step's ``messages`` is read like its ``query``. The model name comes from ``replay_config``
when the file has one.

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
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from promptkit.errors import RecordFormatError
from promptkit.formats.base import Item, LogFormat, Source, read_json_document
from promptkit.formats.fields import CHAT_ROLES, clean_message, loads_json
from promptkit.layout import LoadProblem, RequestRecord, type_name

__all__ = ["ELIDED", "FORMAT", "last_n_observations", "query_messages", "trajectory_records"]

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


def _agent_config(data: Mapping[str, Any]) -> Mapping[str, Any]:
    config: Any = data.get("replay_config")
    if isinstance(config, str):
        try:
            config = loads_json(config)
        except json.JSONDecodeError:
            return {}
    agent = config.get("agent") if isinstance(config, Mapping) else None
    return agent if isinstance(agent, Mapping) else {}


def _model_name(data: Mapping[str, Any]) -> str | None:
    model = _agent_config(data).get("model")
    name = model.get("name") if isinstance(model, Mapping) else None
    return name if isinstance(name, str) and name else None


def _history_processors(data: Mapping[str, Any], report: Callable[[str], None]) -> list[Mapping[str, Any]]:
    """The history processors ``replay_config`` declares (``agent.history_processors``, a list, or the
    older single ``agent.history_processor``), in order. A processor whose fields have the wrong type
    is reported (naming the field) and left out."""
    agent = _agent_config(data)
    declared = agent.get("history_processors", agent.get("history_processor"))
    if isinstance(declared, Mapping):
        declared = [declared]
    if not isinstance(declared, list):
        return []
    out = []
    for k, p in enumerate(declared):
        where = f"replay_config.agent.history_processors[{k}]"
        problem = _processor_problem(p)
        if problem is not None:
            report(f"{where}{problem}; the processor is not applied")
            continue
        out.append(p)
    return out


def _processor_problem(p: object) -> str | None:
    """What is wrong with one declared processor (``.field: ...``), or None."""
    if not isinstance(p, Mapping):
        return f": expected an object, got {type_name(p)}"
    if not isinstance(p.get("type", "default"), str):
        return f".type: expected a string, got {type_name(p.get('type'))}"
    for name in ("n", "polling"):
        value = p.get(name, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return f".{name}: expected a whole number >= 0, got {value!r}"
    for name in ("always_remove_output_for_tags", "always_keep_output_for_tags"):
        tags = p.get(name, [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            return f".{name}: expected a list of strings"
    return None


#: The placeholder SWE-agent writes for an elided observation (``LastNObservations`` in
#: ``sweagent/agent/history_processors.py``).
ELIDED: Final[str] = "Old environment output: ({lines} lines omitted)"


def _content_stats(content: object) -> tuple[int, int]:
    """(text lines, images) of a history item's content, as SWE-agent counts them."""
    if isinstance(content, str):
        return len(content.splitlines()), 0
    if not isinstance(content, list):
        return 0, 0
    parts = [p for p in content if isinstance(p, Mapping)]
    lines = sum(len(str(p.get("text", "")).splitlines()) for p in parts if p.get("type") == "text")
    return lines, sum(1 for p in parts if p.get("type") == "image_url")


def last_n_observations(
    history: list[Mapping[str, Any]], config: Mapping[str, Any]
) -> list[Mapping[str, Any]]:
    """SWE-agent's ``last_n_observations`` history processor, as its source has it
    (``sweagent/agent/history_processors.py``, ``LastNObservations``): every observation but the first
    (the instance template) and the last ``n`` (kept in steps of ``polling``) has its content replaced
    by ``Old environment output: (<lines> lines omitted)``; ``tags`` force an observation out
    (``remove_output``) or in (``keep_output``); demonstrations are never counted. Items without
    ``message_type`` (trajectories written before it existed) count as observations when their role
    is ``user`` or ``tool``.

    >>> h = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "ls"},
    ...      {"role": "tool", "content": "a.py"}, {"role": "assistant", "content": "cat a.py"},
    ...      {"role": "tool", "content": "x = 1"}]
    >>> [m["content"] for m in last_n_observations(h, {"n": 1})]
    ['task', 'ls', 'Old environment output: (1 lines omitted)', 'cat a.py', 'x = 1']
    """
    n, polling = int(config.get("n", 0)), max(1, int(config.get("polling", 1)))
    remove_tags = set(config.get("always_remove_output_for_tags", ["remove_output"]))
    keep_tags = set(config.get("always_keep_output_for_tags", ["keep_output"]))
    typed = any("message_type" in m for m in history)

    def is_observation(m: Mapping[str, Any]) -> bool:
        if typed:
            return m.get("message_type") == "observation"
        return m.get("role") in ("user", "tool")

    observations = [i for i, m in enumerate(history) if is_observation(m) and not m.get("is_demo", False)]
    last_removed = max(0, (len(observations) // polling) * polling - n)
    omit = set(observations[1:last_removed])
    out: list[Mapping[str, Any]] = []
    for i, m in enumerate(history):
        raw_tags = m.get("tags")
        tags = {t for t in raw_tags if isinstance(t, str)} if isinstance(raw_tags, list) else set()
        if (i not in omit or tags & keep_tags) and not tags & remove_tags:
            out.append(m)
            continue
        lines, images = _content_stats(m.get("content"))
        text = ELIDED.format(lines=lines) + (f" ({images} images omitted)" if images else "")
        out.append({**m, "content": text})
    return out


#: History processors that leave the messages as they are (``cache_control`` only adds Anthropic
#: breakpoints, which the cache model places itself).
_NEUTRAL_PROCESSORS: Final[frozenset[str]] = frozenset({"default", "cache_control"})


def _processed(
    history: list[Mapping[str, Any]], processors: list[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    for config in processors:
        if config.get("type") == "last_n_observations":
            history = last_n_observations(history, config)
    return history


def _unapplied(processors: list[Mapping[str, Any]]) -> list[str]:
    """The declared processors promptkit cannot apply when rebuilding a request from the history."""
    return [
        str(p.get("type"))
        for p in processors
        if p.get("type") not in _NEUTRAL_PROCESSORS and p.get("type") != "last_n_observations"
    ]


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
    processors = _history_processors(data, report)
    rebuilt = False
    info = data.get("info")
    stats = info.get("model_stats") if isinstance(info, Mapping) else None
    records: list[RequestRecord] = []
    for k, step in enumerate(steps):
        where = f"trajectory[{k}]"
        if not isinstance(step, Mapping):
            report(f"{where}: expected an object, got {type_name(step)}; skipped")
            continue
        field = "query" if step.get("query") not in (None, [], [{}]) else "messages"
        query = step.get(field)
        try:
            if query not in (None, [], [{}]):
                messages, origin = query_messages(query, f"{where}.{field}"), "step"
            elif k <= len(assistant_at) and history:
                # the last step's assistant message is not in the history when the run ended on it
                cut = assistant_at[k] if k < len(assistant_at) else len(history)
                messages = query_messages(_processed(list(history[:cut]), processors), f"history[:{cut}]")
                origin = "history"
                rebuilt = True
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
    unapplied = _unapplied(processors)
    if rebuilt and unapplied:
        report(
            f"replay_config declares history processor(s) {', '.join(unapplied)} that promptkit does not "
            "apply: the requests rebuilt from the history may differ from those sent"
        )
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
