"""promptkit's own log format: JSON Lines, one call per line (or a ``.json`` file holding one record or
a list of them).

Each line is either a bare chat-completions request body
(``{"model": ..., "messages": [...], "tools": [...]}``) or a wrapped call::

    {"request": {...}, "response": {...}, "session": "s1", "timestamp": 1775786368.2,
     "layout": [{"slot": "identity", "key": "persona.card"}, {"slot": "history", "key": null}, ...],
     "provider": "deepseek", "url": "https://api.deepseek.com/chat/completions"}

``response`` is the provider's response body (its ``usage`` and its first choice's message, the
*completion*); ``usage`` may also stand at the top level; ``session`` defaults to the file name (without
``.jsonl``), ``timestamp`` is seconds since the epoch or an ISO 8601 string (naive = UTC), ``layout`` is
the assembler's per-message layout aligned with ``request["messages"]``, ``provider`` and ``url`` are
optional. An Anthropic Messages body (top-level ``system``) is read as it is.
:meth:`promptkit.layout.RequestRecord.to_json` writes this form.

>>> import json, pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "calls.jsonl"
>>> _ = path.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\\n")
>>> from promptkit.formats import read_logs
>>> [(r.session, r.index, r.line) for r in read_logs(path).records]
[('calls', 0, 1)]
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from promptkit.errors import RecordFormatError
from promptkit.formats.base import Item, LogFormat, Source, json_lines, reporter
from promptkit.formats.fields import (
    check_request,
    completion_of,
    loads_json,
    optional_field,
    parse_layout,
    parse_timestamp,
)
from promptkit.layout import LoadProblem, RequestRecord, Usage, type_name
from promptkit.providers.registry import normalize_usage

__all__ = ["FORMAT", "record_from_json"]


def _session(obj: Mapping[str, Any], default_session: str, report: Callable[[str], None]) -> str:
    """A wrapped call's ``session`` (a number as its text), else ``default_session`` (with a problem when
    the field is there but not a non-empty string)."""
    session = obj.get("session", default_session)
    if isinstance(session, int) and not isinstance(session, bool):
        session = str(session)
    if not isinstance(session, str) or not session:
        report(
            f"session: expected a non-empty string, got {type_name(session)}; the record is kept in session {default_session!r}"
        )
        return default_session
    return session


def _completion_and_usage(
    obj: Mapping[str, Any], report: Callable[[str], None]
) -> tuple[dict[str, Any] | None, Usage | None]:
    """A wrapped call's completion (its ``response``'s first message) and usage (the response's, else the
    top-level ``usage``); either None, with a problem, when it cannot be read."""
    completion = None
    response = obj.get("response")
    raw_usage: Any = obj.get("usage")
    usage_where = "usage"
    if response is not None:
        if not isinstance(response, Mapping):
            report(f"response: expected an object, got {type_name(response)}; the record is kept without it")
        else:
            completion = optional_field(
                report, "the record is kept without a completion", completion_of, response, "response"
            )
            if response.get("usage") is not None:
                raw_usage, usage_where = response["usage"], "response.usage"
    if raw_usage is None:
        return completion, None
    usage = optional_field(
        report, "the record is kept without usage", normalize_usage, raw_usage, usage_where
    )
    return completion, usage


def _string(value: object, field: str, report: Callable[[str], None]) -> str | None:
    """An optional string field (anything else is ignored, with a problem)."""
    if value is not None and not isinstance(value, str):
        report(f"{field}: expected a string, got {type_name(value)}; ignored")
        return None
    return value


def _meta(obj: Mapping[str, Any], report: Callable[[str], None]) -> dict[str, Any]:
    """A wrapped call's ``meta`` (ignored, with a problem, when not an object), with the response's
    ``diagnostics`` (Anthropic's cache diagnostics)."""
    meta = obj.get("meta")
    if meta is not None and not isinstance(meta, Mapping):
        report(f"meta: expected an object, got {type_name(meta)}; ignored")
        meta = None
    meta = dict(meta or {})
    response = obj.get("response")
    if isinstance(response, Mapping) and isinstance(response.get("diagnostics"), Mapping):
        meta.setdefault("diagnostics", response["diagnostics"])
    return meta


def record_from_json(
    obj: object, *, file: str | None, line: int | None, default_session: str, problems: list[LoadProblem]
) -> RequestRecord | None:
    """One object of promptkit's log form (bare body or wrapped call) as a record; problems with the
    record (None is returned) or with an optional field (the record is kept without it) are appended to
    ``problems``, never raised."""
    report = reporter(problems, file, line)
    if not isinstance(obj, Mapping):
        report(f"expected a JSON object, got {type_name(obj)}")
        return None
    wrapped = "request" in obj
    try:
        request = check_request(obj["request"] if wrapped else obj, "request" if wrapped else "body")
    except RecordFormatError as exc:
        report(str(exc))
        return None
    if not wrapped:
        return RequestRecord(request, default_session, file=file, line=line)
    error = obj.get("error")
    if error is not None:  # a failed call recorded by the proxy or the capture wrapper: not a cache event
        kind = error.get("kind") if isinstance(error, Mapping) else None
        report(f"error: the call failed ({kind or type_name(error)}): not analyzed")
        return None
    raw_http = obj.get("http")
    http: Mapping[str, Any] = raw_http if isinstance(raw_http, Mapping) else {}
    session = _session(obj, default_session, report)
    timestamp = optional_field(
        report, "the record is kept without a timestamp", parse_timestamp, obj.get("timestamp")
    )
    layout = optional_field(
        report,
        "the record is kept without a layout",
        parse_layout,
        obj.get("layout"),
        len(request["messages"]),
    )
    completion, usage = _completion_and_usage(obj, report)
    return RequestRecord(
        request,
        session,
        timestamp=timestamp,
        completion=completion,
        usage=usage,
        layout=layout,
        file=file,
        line=line,
        provider=_string(obj.get("provider", http.get("provider")), "provider", report),
        url=_string(obj.get("url", http.get("url")), "url", report),
        meta=_meta(obj, report),
    )


def _is_record(obj: object) -> bool:
    return isinstance(obj, Mapping) and ("request" in obj or "messages" in obj)


def _first_json_line(head: str) -> object:
    for raw in head.split("\n")[:5]:
        if raw.strip():
            try:
                return loads_json(raw)
            except json.JSONDecodeError:
                return None
    return None


def sniff(source: Source) -> bool:
    """JSONL whose first object is a request body or a wrapped call; or a ``.json`` file that starts a
    record or a list of records. Falls back to any ``.jsonl`` file (its lines are then reported one by one)."""
    name = source.name
    head = source.head.lstrip()
    if name.endswith(".json"):
        return head.startswith("[") or (
            head.startswith("{") and ('"request"' in head or '"messages"' in head)
        )
    if _is_record(_first_json_line(source.head)):
        return True
    return name.endswith((".jsonl", ".ndjson"))


def read(source: Source) -> Iterator[Item]:
    """Records of a promptkit JSONL file (or ``.json`` record / list of records)."""
    problems: list[LoadProblem] = []
    session = source.stem
    if source.name.endswith(".json"):
        try:
            data = loads_json(source.text())
        except json.JSONDecodeError as exc:
            yield LoadProblem(source.file, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})")
            return
        items = data if isinstance(data, list) else [data]
        for i, item in enumerate(items):
            sub: list[LoadProblem] = []
            record = record_from_json(
                item, file=source.file, line=None, default_session=session, problems=sub
            )
            for p in sub:
                yield LoadProblem(
                    p.file, p.line, f"item {i}: {p.reason}" if isinstance(data, list) else p.reason
                )
            if record is not None:
                yield record
        return
    for item in json_lines(source):
        if isinstance(item, LoadProblem):
            yield item
            continue
        lineno, obj = item
        record = record_from_json(
            obj, file=source.file, line=lineno, default_session=session, problems=problems
        )
        yield from problems
        problems.clear()
        if record is not None:
            yield record


FORMAT = LogFormat(
    name="promptkit",
    description="promptkit JSONL: one request body or wrapped call (request, response, session, layout) per line",
    sniff=sniff,
    read=read,
    priority=-10,
)
