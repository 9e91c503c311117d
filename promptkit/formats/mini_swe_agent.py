"""mini-swe-agent trajectories (``*.traj.json``): one session per file.

Every assistant message is one call: its request is every chat message before it (messages with a
non-chat role such as ``exit`` are skipped and reported), its completion is the assistant message
itself, ``extra.response.usage`` gives the usage and ``extra.response.created`` the timestamp. Only the
chat-completions fields of each message are kept (``extra`` and litellm's bookkeeping fields are not sent
to the provider). ``tool_calls`` stored as a list, a JSON string or a Python repr are parsed; unparseable
ones are reported. Requests of a trajectory that uses tools get :data:`MINI_SWE_AGENT_BASH_TOOL` as
``tools`` and the model name of ``info.config.model``. A trajectory with no calls loads as zero records
and one problem.

>>> from promptkit.formats import read_logs
>>> r = read_logs("fixtures/real-logs/deepseek/deepseek_chat_dev__pvlib__pvlib-python-1072.traj.json")
>>> len(r.records), r.records[2].usage.cached_tokens, r.formats
(74, 3008, {'mini-swe-agent': 1})
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from promptkit.errors import RecordFormatError
from promptkit.formats.base import Item, LogFormat, Source, read_json_document
from promptkit.formats.fields import CHAT_ROLES, clean_message, parse_timestamp
from promptkit.layout import LoadProblem, RequestRecord, Usage, type_name
from promptkit.providers.registry import normalize_usage

__all__ = ["FORMAT", "MINI_SWE_AGENT_BASH_TOOL", "trajectory_records"]

#: The one tool mini-swe-agent's tool-calling models declare (``BASH_TOOL`` in
#: ``minisweagent/models/utils/actions_toolcall.py``, SWE-agent/mini-swe-agent, MIT). Trajectories do
#: not store the request's ``tools``; the importer adds this definition to every request of a
#: trajectory whose assistant messages carry ``tool_calls``.
MINI_SWE_AGENT_BASH_TOOL: Final[Mapping[str, Any]] = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Execute a bash command",
        "parameters": {
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "description": "The bash command to execute",
                }
            },
            "required": ["command"],
        },
    },
}


def _provider_of(model: str | None) -> str | None:
    from promptkit.providers.registry import infer_provider

    return infer_provider(model=model) if model else None


def _model_name(data: Mapping[str, Any]) -> str | None:
    info = data.get("info")
    config = info.get("config") if isinstance(info, Mapping) else None
    model = config.get("model") if isinstance(config, Mapping) else None
    name = model.get("model_name") if isinstance(model, Mapping) else None
    return name.rsplit("/", 1)[-1] if isinstance(name, str) and name else None


def _call_facts(
    message: Mapping[str, Any], where: str, report: Callable[[str], None]
) -> tuple[Usage | None, float | None]:
    """An assistant message's usage and time, from its ``extra.response`` (each one that cannot be read is
    reported and left out; the call is kept)."""
    extra = message.get("extra")
    response = extra.get("response") if isinstance(extra, Mapping) else None
    usage = timestamp = None
    if not isinstance(response, Mapping):
        report(f"{where}: assistant message without extra.response (no usage, no timestamp)")
        return None, None
    if response.get("usage") is not None:
        try:
            usage = normalize_usage(response["usage"], f"{where}.extra.response.usage")
        except RecordFormatError as exc:
            report(f"{exc}; the call is kept without usage")
    raw_ts = response.get("created")
    if raw_ts is None and isinstance(extra, Mapping):
        raw_ts = extra.get("timestamp")
    try:
        timestamp = parse_timestamp(raw_ts, f"{where}.extra.response.created")
    except RecordFormatError as exc:
        report(f"{exc}; the call is kept without a timestamp")
    return usage, timestamp


def trajectory_records(
    data: object, file: str, session: str, problems: list[LoadProblem]
) -> list[RequestRecord]:
    def report(reason: str) -> None:
        problems.append(LoadProblem(file, None, reason))

    if not isinstance(data, Mapping) or not isinstance(data.get("messages"), list):
        report("not a mini-swe-agent trajectory: no 'messages' list")
        return []
    messages: list[Any] = data["messages"]
    uses_tools = any(
        isinstance(m, Mapping)
        and (m.get("role") == "tool" or m.get("tool_calls") not in (None, "", [], "[]"))
        for m in messages
    )
    model = _model_name(data)
    provider = _provider_of(model)  # one model for the whole trajectory: recognised once
    chat: list[dict[str, Any]] = []
    records: list[RequestRecord] = []
    for k, message in enumerate(messages):
        where = f"messages[{k}]"
        if not isinstance(message, Mapping):
            report(f"{where}: expected an object, got {type_name(message)}; skipped")
            continue
        role = message.get("role")
        if role not in CHAT_ROLES:
            report(f"{where}: skipped non-chat message (role {role!r})")
            continue
        try:
            cleaned = clean_message(message, where)
        except RecordFormatError as exc:
            if "tool_calls" not in str(exc):
                report(f"{exc}; message skipped")
                continue
            report(f"{exc}; the message is kept without its tool calls")
            cleaned = {
                key: value
                for key, value in message.items()
                if key in ("role", "content", "name", "tool_call_id")
            }
        if role == "assistant":
            body: dict[str, Any] = {}
            if model is not None:
                body["model"] = model
            body["messages"] = list(chat)
            if uses_tools:
                body["tools"] = [MINI_SWE_AGENT_BASH_TOOL]
            usage, timestamp = _call_facts(message, where, report)
            records.append(
                RequestRecord(
                    body,
                    session,
                    timestamp=timestamp,
                    completion=cleaned,
                    usage=usage,
                    file=file,
                    provider=provider,
                )
            )
        chat.append(cleaned)
    if not records:
        info = data.get("info")
        status = info.get("exit_status") if isinstance(info, Mapping) else None
        detail = info.get("exception_str") if isinstance(info, Mapping) else None
        why = f" (exit status {status!r}{': ' + str(detail) if detail else ''})" if status else ""
        report(f"trajectory has no model calls{why}: zero requests loaded")
    return records


def sniff(source: Source) -> bool:
    """A ``*.traj.json`` file, or a JSON object with ``trajectory_format: mini-swe-agent-*``."""
    if source.name.endswith(".traj.json"):
        return True
    head = source.head.lstrip()
    return head.startswith("{") and '"trajectory_format"' in head and "mini-swe-agent" in head


def read(source: Source) -> Iterator[Item]:
    """The calls of one trajectory file."""
    return read_json_document(source, trajectory_records)


FORMAT = LogFormat(
    name="mini-swe-agent",
    description="mini-swe-agent trajectory (*.traj.json): every assistant message is a call",
    sniff=sniff,
    read=read,
    priority=10,
)
