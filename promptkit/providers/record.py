"""Request log records: what promptkit's cache analyzer reads.

One JSON object per line::

    {"request": <chat-completions body>, "layout": [{"slot": ..., "key": ...}, ...],
     "session": "...", "timestamp": ..., "response": {...}}

``layout`` is aligned index by index with ``request["messages"]`` and is present only when the input was
an assembled prompt; ``session``, ``timestamp`` and ``response`` are present only when given.

>>> from promptkit import Message
>>> rec = request_record([Message(role="user", content="hi")], provider="openai", model="gpt-4o", session="s1")
>>> sorted(rec)
['request', 'session']
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from promptkit.errors import InternalError, ProviderError, RequestBuildError, UsageError
from promptkit.layout import LayoutEntry
from promptkit.providers._common import prepare_input
from promptkit.providers.registry import available_providers, get_provider

__all__ = ["request_record", "write_jsonl"]


def request_record(
    prompt_or_messages: Any,
    *,
    provider: str = "deepseek",
    model: str,
    session: str | None = None,
    timestamp: float | int | str | None = None,
    response: Mapping[str, Any] | None = None,
    **params: Any,
) -> dict[str, Any]:
    """The JSON-lines log record of one call: ``{"request", "layout", "session", "timestamp", "response"}``.

    ``request`` is built by the provider profile's body builder (:func:`deepseek_request`, :func:`openai_request`, :func:`ollama_request`; ``params`` are passed to it:
    ``tools``, ``temperature``...). When the input is an ``AssembledPrompt`` (anything with ``.messages``
    and ``.layout``), ``layout`` holds one ``{"slot", "key"}`` entry per body message, in order: a user
    message that :func:`promptkit.prepare_llm_messages` inserts to carry the images of a run of tool results gets the
    entry of the first tool message of that run that had images. ``timestamp`` is written as given (use the unit your log uses; the
    provider's ``created`` is seconds). ``response`` is the provider's response (its ``usage`` is what the
    analyzer compares predictions with). Keys whose value is None are left out.

    >>> from promptkit import Message
    >>> rec = request_record([Message(role="user", content="hi")], model="deepseek-chat", timestamp=1700000000)
    >>> rec["request"]["messages"], rec["timestamp"]
    ([{'role': 'user', 'content': 'hi'}], 1700000000)
    """
    try:
        profile = get_provider(provider)
    except ProviderError as exc:
        raise RequestBuildError(f"request_record: {exc}") from None
    builder = profile.build_request
    if builder is None or not profile.layout_aligned:
        usable = sorted(n for n, p in available_providers().items() if p.build_request and p.layout_aligned)
        raise RequestBuildError(
            f"request_record: provider must be one of {usable} (bodies with one message per prepared "
            f"message, so the layout stays aligned), got {provider!r}"
        )
    body = builder(prompt_or_messages, model=model, **params)
    record: dict[str, Any] = {"request": body}
    prepared = prepare_input(prompt_or_messages, where="request_record")
    if prepared.layout is not None:
        if len(prepared.layout) != len(body["messages"]):  # pragma: no cover - builders are one-to-one
            raise InternalError("request_record: the body's messages do not align with the prepared messages")
        record["layout"] = [
            LayoutEntry.coerce(entry, where=f"request_record: layout[{prepared.sources[j]}]").to_dict()
            for j, entry in enumerate(prepared.layout)
        ]
    for key, value in (("session", session), ("timestamp", timestamp), ("response", response)):
        if value is not None:
            record[key] = dict(value) if isinstance(value, Mapping) else value
    return record


def write_jsonl(
    records: Iterable[Mapping[str, Any]], path: str | os.PathLike[str], *, append: bool = False
) -> int:
    """Write ``records`` to ``path`` as JSON lines (UTF-8, non-ASCII kept as is); returns how many were written.

    A record that is not JSON-serializable raises ``TypeError`` naming its index; the lines before it are
    already written. ``append=True`` adds to an existing file.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "calls.jsonl"
    >>> write_jsonl([{"request": {"model": "m", "messages": []}}], p)
    1
    """
    count = 0
    with open(path, "a" if append else "w", encoding="utf-8", newline="\n") as f:
        for i, record in enumerate(records):
            try:
                line = json.dumps(record, ensure_ascii=False, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise UsageError(
                    f"write_jsonl: record {i} for {os.fspath(path)!r} is not JSON-serializable: {exc}"
                ) from exc
            f.write(line + "\n")
            count += 1
    return count
