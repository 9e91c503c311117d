"""OpenAI Codex CLI rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``.

Every line is ``{"timestamp", "type", "payload"}``:

- ``session_meta``: the session ``id``, the base instructions (``base_instructions.text``, older
  builds ``instructions``), ``cwd``, ``cli_version``...;
- ``turn_context``: per turn, the ``model`` (and sandbox and approval settings);
- ``response_item``: the Responses API items of the conversation, as the model sees them: ``message``
  (user, developer, assistant), ``function_call`` / ``custom_tool_call``, their ``*_output``,
  ``reasoning``...;
- ``event_msg``: UI events; ``token_count`` carries the usage of one model call in
  ``info.last_token_usage`` (``input_tokens``, ``cached_input_tokens``, ``output_tokens``) and the running
  ``info.total_token_usage``;
- ``compacted``: the history was compacted (``replacement_history``, or a summary ``message``).

How the file becomes request records (one per model call):

- A ``token_count`` event with usage ends a call. Codex writes the same event again when only the rate
  limits changed: a ``token_count`` whose ``info`` equals the previous one is a repeat, and one with
  ``info: null`` carries no usage; neither is a call.
- The call's **output** is the run of model items (assistant messages, tool calls, reasoning) written
  since the last input item (user or developer message, tool output); its **request** is the base
  instructions plus every response item before that run, converted like a captured Responses API body
  (:func:`promptkit.formats.wire.responses.responses_request_to_chat`: reasoning items are kept as their
  JSON, since the model sees them and a change must show).
- Usage from ``last_token_usage`` (the difference of two ``total_token_usage`` when it is missing):
  prompt = ``input_tokens``, cached = ``cached_input_tokens``, cache writes = ``cache_write_input_tokens``
  when reported. Provider ``openai``; the model from the latest ``turn_context`` (else ``session_meta``).
- Timestamp: the first output item's (when the answer started), else the ``token_count`` event's; file
  and line: the ``token_count`` line.
- Rollouts hold no tool definitions (``session_meta.tools`` is used when present): each record gets an
  opaque head estimated per session and model (:mod:`promptkit.formats.opaque_head`, key
  ``codex:<session>:<model>``).
- After ``compacted`` the history is its ``replacement_history``, else one user message with the summary.

A malformed line, a line without ``type`` or ``payload``, or a malformed response item is a problem naming
file, line and field; the item is left out and reading goes on.

>>> from promptkit.formats import read_logs
>>> r = read_logs("fixtures/codex")
>>> len(r.records), [x.usage.cached_tokens for x in r.records], r.records[0].request["model"]
(3, [3456, 17280, 18304], 'gpt-5.3-codex')
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

import attrs

from promptkit.errors import RecordFormatError
from promptkit.formats.base import Item, LogFormat, Source, json_values
from promptkit.formats.fields import first_json_lines, optional_field, parse_timestamp
from promptkit.formats.opaque_head import estimate_opaque_heads
from promptkit.formats.wire.responses import responses_request_to_chat, responses_response_to_chat
from promptkit.layout import LoadProblem, RequestRecord, token_count, type_name
from promptkit.providers.registry import infer_provider, native_provider, normalize_usage, provider_named

__all__ = ["FORMAT", "NAME", "rollout_records"]

#: The format name (``--format codex``).
NAME: Final[str] = "codex"
#: The line types of a rollout.
LINE_TYPES: Final[frozenset[str]] = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)
#: Response items the model writes (the output of a call); every other item is input.
_OUTPUT_ITEMS: Final[frozenset[str]] = frozenset(
    {
        "reasoning",
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "web_search_call",
        "tool_search_call",
    }
)
_COUNTS: Final[tuple[str, ...]] = (
    "input_tokens", "cached_input_tokens", "output_tokens", "cache_write_input_tokens",
)  # fmt: skip


def _is_output(item: Mapping[str, Any]) -> bool:
    kind = item.get("type", "message")
    if kind == "message":
        return item.get("role") == "assistant"
    return isinstance(kind, str) and kind in _OUTPUT_ITEMS


def _counts(value: object, where: str) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise RecordFormatError(f"{where}: expected an object, got {type_name(value)}")
    out: dict[str, int] = {}
    for name in _COUNTS:
        n = token_count(value.get(name), f"{where}.{name}")
        if n is not None:
            out[name] = n
    if "input_tokens" not in out:
        raise RecordFormatError(f"{where}: missing 'input_tokens'")
    return out


def reasoning_stub(item: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """A ``reasoning`` item as the reader keeps it, and the number of characters of encrypted reasoning
    it held: ``encrypted_content`` (base64 that the model decrypts server-side) is replaced by a short
    marker with its length and a digest, so a changed blob still shows in the diff while its bytes are
    not tokenized as text; the provider's counts (the ruler's anchors) measure what it really costs.
    Any other item is returned as it is, with 0.

    >>> stub, n = reasoning_stub({"type": "reasoning", "summary": [], "encrypted_content": "gAAAAB" * 100})
    >>> n, stub["encrypted_content"]
    (600, '[encrypted reasoning: 600 chars, sha256 1c184c215db1e9d9]')
    """
    blob = item.get("encrypted_content")
    if item.get("type") != "reasoning" or not isinstance(blob, str) or not blob:
        return dict(item), 0
    digest = hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]
    marker = f"[encrypted reasoning: {len(blob)} chars, sha256 {digest}]"
    return {**item, "encrypted_content": marker}, len(blob)


def _all_zero(info: Mapping[str, Any]) -> bool:
    """Whether a ``token_count`` reports no call: 0 input and 0 output tokens in ``last_token_usage``.
    Codex writes one at a compaction (its ``total_tokens`` may still hold a running figure, 940,499 in a
    real rollout); a prompt is never 0 tokens, so no model call was made."""
    last = info.get("last_token_usage")
    return isinstance(last, Mapping) and last.get("input_tokens") == 0 and not last.get("output_tokens")


def route_provider(model_provider: str | None, model: str | None) -> str | None:
    """The provider whose rules analyze a call of ``model`` that Codex sent through its configured
    ``model_provider`` (the session meta's field; ``None`` in rollouts that predate it: OpenAI).

    Through OpenAI (or an alias of it, such as Azure) the model name decides, else OpenAI. Through
    another known provider (a local or cloud Ollama) a model recognised as another vendor's (Kimi, Qwen,
    GLM, DeepSeek...) is analyzed with that vendor's rules, and any other model (``gpt-oss``, ``llama``)
    with the route's. Through a route promptkit does not know, the model name decides, else None (the
    analysis then assumes the generic provider and says so).

    >>> route_provider(None, "gpt-5-codex"), route_provider("ollama", "kimi-k2:1t-cloud")
    ('openai', 'kimi')
    >>> route_provider("oss", "gpt-oss:20b"), route_provider("my-proxy", "llama3.1")
    ('ollama', None)
    """
    by_model = infer_provider(model=model) if model else None
    if model_provider is None:
        return by_model or native_provider(NAME)
    route = provider_named(model_provider)  # "oss" (``codex --oss``) is an alias of the Ollama profile
    if route is None:
        return by_model
    if route == native_provider(NAME):
        return by_model or route
    return by_model if by_model is not None and by_model != native_provider(NAME) else route


def _usage_of(info: Mapping[str, Any], previous_total: dict[str, int] | None) -> dict[str, int]:
    """The call's counts: ``last_token_usage``, else this total minus the previous one."""
    last = info.get("last_token_usage")
    if last is not None:
        return _counts(last, "payload.info.last_token_usage")
    total = _counts(info.get("total_token_usage"), "payload.info.total_token_usage")
    if previous_total is None:
        return total
    return {k: max(0, v - previous_total.get(k, 0)) for k, v in total.items()}


#: Items that join the assistant message before them when converted (so a cut before them is not final).
_JOINING: Final[frozenset[str]] = frozenset({"function_call", "custom_tool_call"})


class _History:
    """The conversation's response items and their chat-completions conversion, each item converted once:
    the conversion of ``items[:m]`` is final when ``items[m]`` starts a message of its own."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.ts: list[float | None] = []
        self.hidden: list[int] = []  # characters of encrypted reasoning each item held (left out)
        self._done = 0  # items[:_done] are converted into _messages; items[_done] starts a message
        self._messages: list[dict[str, Any]] = []

    def reset(self, items: list[dict[str, Any]], ts: float | None) -> None:
        stubs = [reasoning_stub(i) for i in items]
        self.items, self.ts = [i for i, _ in stubs], [ts] * len(items)
        self.hidden = [n for _, n in stubs]
        self._done, self._messages = 0, []

    def append(self, item: Mapping[str, Any], ts: float | None) -> None:
        stub, hidden = reasoning_stub(item)
        self.items.append(stub)
        self.ts.append(ts)
        self.hidden.append(hidden)

    def messages(self, cut: int) -> list[dict[str, Any]]:
        """The chat messages of ``items[:cut]``."""
        b = min(cut, len(self.items) - 1)  # a final cut needs a next item that starts a message
        while b > self._done and _is_joining(self.items[b]):
            b -= 1
        if b > self._done:
            self._messages += _convert(self.items[self._done : b])
            self._done = b
        return self._messages + _convert(self.items[self._done : cut])


def _convert(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if not items:
        return []
    messages: list[dict[str, Any]] = responses_request_to_chat({"input": items})["messages"]
    return merge_answers(messages)


def _text_of(content: object) -> str | None:
    """An assistant message's content as one text (None: a part that is not text)."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list) and all(isinstance(p, Mapping) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    return None


def merge_answers(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each run of consecutive assistant messages (one model answer: its reasoning items, text and tool
    calls) as one assistant message: the texts joined by a newline, the tool calls in order. A call's
    completion is its answer converted the same way, so the next request's rendering of the answer is
    the completion's (OpenAI keeps the answer's KV in the cache: a read may go past the prompt into it).

    >>> merge_answers([{"role": "assistant", "content": "r"}, {"role": "assistant", "content": "a",
    ...     "tool_calls": [{"id": "c"}]}, {"role": "tool", "content": "x"}])
    [{'role': 'assistant', 'content': 'r\\na', 'tool_calls': [{'id': 'c'}]}, {'role': 'tool', 'content': 'x'}]
    """
    out: list[dict[str, Any]] = []
    for m in messages:
        last = out[-1] if out else None
        text, before = _text_of(m.get("content")), _text_of(last.get("content")) if last else None
        if (
            last is not None
            and m.get("role") == last.get("role") == "assistant"
            and text is not None
            and before is not None
            and not last.get("tool_calls")
            and set(m) <= {"role", "content", "tool_calls"}
            and set(last) <= {"role", "content", "tool_calls"}
        ):
            merged: dict[str, Any] = {
                "role": "assistant",
                "content": "\n".join(t for t in (before, text) if t),
            }
            if m.get("tool_calls"):
                merged["tool_calls"] = list(m["tool_calls"])
            out[-1] = merged
        else:
            out.append(m)
    return out


def _raw_usage(counts: Mapping[str, int]) -> dict[str, Any]:
    """A call's counts as a Responses API ``usage`` object."""
    raw_usage: dict[str, Any] = {
        "input_tokens": counts["input_tokens"],
        "input_tokens_details": {"cached_tokens": counts.get("cached_input_tokens", 0)},
    }
    if "cache_write_input_tokens" in counts:
        raw_usage["input_tokens_details"]["cache_write_tokens"] = counts["cache_write_input_tokens"]
    if "output_tokens" in counts:
        raw_usage["output_tokens"] = counts["output_tokens"]
    return raw_usage


@attrs.define
class _Rollout:
    """One rollout read line by line: the session's settings, its history, the calls found and the
    problems met."""

    file: str
    stem: str
    problems: list[LoadProblem] = attrs.field(factory=list)
    records: list[RequestRecord] = attrs.field(factory=list)
    session: str | None = None
    instructions: str | None = None
    tools: list[Any] | None = None
    model: str | None = None
    model_provider: str | None = None
    history: _History = attrs.field(factory=_History)
    call_start: int | None = None  # index in items where the current call's output starts
    last_info: Any = None
    last_total: dict[str, int] | None = None
    zero_usage: int = 0  # all-zero token_count events (compactions), not calls
    pending: tuple[int, int] | None = None  # (record, cut) of a call whose answer is logged after its usage

    def problem(self, line: int, reason: str) -> None:
        self.problems.append(LoadProblem(self.file, line, reason))

    def read_line(self, lineno: int, obj: object) -> None:
        """Read one line's JSON value."""
        header = self._header(lineno, obj)
        if header is None:
            return
        kind, payload, ts = header
        if kind == "session_meta":
            self._session_meta(payload)
        elif kind == "turn_context":
            if isinstance(payload.get("model"), str) and payload["model"]:
                self.model = payload["model"]
        elif kind == "compacted":
            self._compacted(payload, ts)
        elif kind == "response_item":
            self._response_item(lineno, payload, ts)
        elif kind == "event_msg" and payload.get("type") == "token_count":
            self._token_count(lineno, payload, ts)

    def _header(self, lineno: int, obj: object) -> tuple[str, Mapping[str, Any], float | None] | None:
        """A line's ``type``, ``payload`` and timestamp; None (with a problem) for a line that is not one."""
        if not isinstance(obj, Mapping):
            self.problem(lineno, f"expected a JSON object, got {type_name(obj)}")
            return None
        kind, payload = obj.get("type"), obj.get("payload")
        if not isinstance(kind, str):
            self.problem(
                lineno,
                "missing 'type'" if kind is None else f"type: expected a string, got {type_name(kind)}",
            )
            return None
        if not isinstance(payload, Mapping):
            self.problem(
                lineno,
                "missing 'payload'"
                if payload is None
                else f"payload: expected an object, got {type_name(payload)}",
            )
            return None
        ts = optional_field(
            lambda reason: self.problem(lineno, reason),
            "the line is read without a timestamp",
            parse_timestamp,
            obj.get("timestamp"),
        )
        return kind, payload, ts

    def _session_meta(self, payload: Mapping[str, Any]) -> None:
        if self.session is not None:
            return
        sid = payload.get("id")
        self.session = sid if isinstance(sid, str) and sid else self.stem
        base = payload.get("base_instructions")
        text = base.get("text") if isinstance(base, Mapping) else payload.get("instructions")
        self.instructions = text if isinstance(text, str) and text else None
        if isinstance(payload.get("tools"), list):
            self.tools = list(payload["tools"])
        if isinstance(payload.get("model"), str) and self.model is None:
            self.model = payload["model"]
        route = payload.get("model_provider")
        if isinstance(route, str) and route:
            self.model_provider = route

    def settle(self) -> None:
        """Give the pending call (older Codex builds, 0.58, write a call's ``token_count`` before its output
        items) the answer logged since: the output items up to the next input item, token_count or
        compaction, as one assistant message (what the next request renders)."""
        if self.pending is None:
            return
        index, cut = self.pending
        self.pending = None
        answer = _convert(self.history.items[cut:])
        if len(answer) == 1 and answer[0].get("role") == "assistant":
            if answer[0].get("content") or answer[0].get("tool_calls"):
                self.records[index] = attrs.evolve(self.records[index], completion=answer[0])

    def _compacted(self, payload: Mapping[str, Any], ts: float | None) -> None:
        self.settle()
        replacement = payload.get("replacement_history")
        if isinstance(replacement, list):
            self.history.reset([dict(i) for i in replacement if isinstance(i, Mapping)], ts)
        else:
            summary = payload.get("message")
            self.history.reset(
                [
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": str(summary or "")}],
                    }
                ],
                ts,
            )
        self.call_start = None

    def _response_item(self, lineno: int, payload: Mapping[str, Any], ts: float | None) -> None:
        try:
            responses_request_to_chat({"input": [payload]})
        except RecordFormatError as exc:
            self.problem(
                lineno,
                f"payload: {str(exc).replace('request.body.input[0]', 'response item')}; item left out",
            )
            return
        if _is_output(payload):
            if self.call_start is None:
                self.call_start = len(self.history.items)
        else:
            self.settle()  # an input item ends the answer of a call whose usage came first
            self.call_start = None
        self.history.append(payload, ts)

    def _token_count(self, lineno: int, payload: Mapping[str, Any], ts: float | None) -> None:
        """A ``token_count`` event: the end of a call, unless it repeats the previous one's usage or
        reports all zeros (Codex writes one at a compaction; no model call was made)."""
        info = payload.get("info")
        if info is None or info == self.last_info:
            return
        if not isinstance(info, Mapping):
            self.problem(lineno, f"payload.info: expected an object, got {type_name(info)}")
            return
        self.last_info = info
        self.settle()
        if _all_zero(info):
            self.zero_usage += 1
            return
        try:
            counts = _usage_of(info, self.last_total)
        except RecordFormatError as exc:
            self.problem(lineno, f"{exc}; no call recorded for this token_count")
            return
        try:
            self.last_total = _counts(info.get("total_token_usage"), "payload.info.total_token_usage")
        except RecordFormatError:
            self.last_total = None
        cut = self.call_start if self.call_start is not None else len(self.history.items)
        try:
            request, completion = self._exchange(cut)
        except RecordFormatError as exc:
            self.problem(lineno, f"{exc}; no call recorded for this token_count")
            return
        self.records.append(self._record(lineno, cut, request, completion, counts, ts))
        if cut == len(self.history.items):  # no output logged yet: the answer follows the usage
            self.pending = (len(self.records) - 1, cut)
        self.call_start = None

    def _record(
        self,
        lineno: int,
        cut: int,
        request: dict[str, Any],
        completion: dict[str, Any],
        counts: Mapping[str, int],
        ts: float | None,
    ) -> RequestRecord:
        """The record of a call ending on line ``lineno``; usage that cannot be true (more cached than
        prompt tokens...) is a problem naming the line and the field, and the record is kept without it."""
        try:
            usage = normalize_usage(_raw_usage(counts), "payload.info.last_token_usage")
        except RecordFormatError as exc:
            self.problem(lineno, f"{exc}; the call is kept without usage")
            usage = None
        history = self.history
        started = history.ts[cut] if cut < len(history.ts) and history.ts[cut] is not None else ts
        meta: dict[str, Any] = {"codex_items": cut}
        if self.model_provider is not None:
            meta["codex_model_provider"] = self.model_provider
        hidden = history.hidden[:cut]
        if any(hidden):
            meta["codex_encrypted_reasoning"] = {"items": sum(1 for n in hidden if n), "chars": sum(hidden)}
        return RequestRecord(
            request,
            self.session or self.stem,
            timestamp=started,
            completion=completion if completion.get("content") or completion.get("tool_calls") else None,
            usage=usage,
            file=self.file,
            line=lineno,
            provider=route_provider(self.model_provider, request.get("model")),
            meta=meta,
        )

    def _exchange(self, cut: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """The request (instructions, tools and the history before ``cut``) and the completion (the
        history from ``cut`` on) of a call; raises :class:`RecordFormatError`."""
        body: dict[str, Any] = {"model": self.model or "gpt-5", "input": []}
        if self.instructions is not None:
            body["instructions"] = self.instructions
        if self.tools is not None:
            body["tools"] = self.tools
        request = responses_request_to_chat(body)
        request["messages"] = request["messages"] + self.history.messages(cut)
        output = self.history.items[cut:]
        answer = _convert(output)  # the answer as the next request renders it, when it is one message
        if len(answer) == 1 and answer[0].get("role") == "assistant":
            return request, answer[0]
        completion: dict[str, Any] = responses_response_to_chat({"output": output})["choices"][0]["message"]
        return request, completion


def rollout_records(
    lines: Iterable[tuple[int, str]], *, file: str, stem: str
) -> tuple[list[RequestRecord], list[LoadProblem]]:
    """The model calls of one rollout file (see the module docstring) and the problems met.

    >>> lines = ['{"type": "session_meta", "payload": {"id": "s", "instructions": "Be brief."}}',
    ...          '{"type": "response_item", "payload": {"type": "message", "role": "user", "content": "hi"}}',
    ...          '{"type": "event_msg", "payload": {"type": "token_count", "info": {"last_token_usage": '
    ...          '{"input_tokens": 1200, "cached_input_tokens": 1024, "output_tokens": 5}}}}']
    >>> records, problems = rollout_records(enumerate(lines, 1), file="r.jsonl", stem="r")
    >>> [m["role"] for m in records[0].request["messages"]], records[0].usage.cached_tokens, problems
    (['system', 'user'], 1024, [])
    """
    rollout = _Rollout(file, stem)
    for item in json_values(lines, file):
        if isinstance(item, LoadProblem):
            rollout.problems.append(item)
        else:
            rollout.read_line(*item)
    rollout.settle()
    records = estimate_opaque_heads(
        rollout.records, key_of=lambda r: f"codex:{r.session}:{r.request.get('model', '?')}"
    )
    return records, rollout.problems


def _is_line_type(kind: object) -> bool:
    return isinstance(kind, str) and kind in LINE_TYPES


def _is_joining(item: Mapping[str, Any]) -> bool:
    """Whether ``item`` joins the assistant message before it when converted: a tool call, and (an
    answer is one message, :func:`merge_answers`) an assistant message or reasoning item."""
    kind = item.get("type")
    if kind == "message":
        return item.get("role") == "assistant"
    return isinstance(kind, str) and (kind in _JOINING or kind == "reasoning")


def sniff(source: Source) -> bool:
    """JSONL whose first lines are rollout lines, ``{"type": "session_meta" | "response_item" | ...,
    "payload": {...}}``: most of the first five that parse, and none a chat request."""
    objs = first_json_lines(source.head)[:5]
    rollout = sum(
        isinstance(o, Mapping) and _is_line_type(o.get("type")) and isinstance(o.get("payload"), Mapping)
        for o in objs
    )
    chat = any(isinstance(o, Mapping) and ("messages" in o or "request" in o) for o in objs)
    return not chat and 2 * rollout > len(objs)


def read(source: Source) -> Iterator[Item]:
    """The model calls of one rollout file, problems first."""
    records, problems = rollout_records(source.lines(), file=source.file, stem=source.stem)
    yield from problems
    yield from records


FORMAT = LogFormat(
    name=NAME,
    description="OpenAI Codex CLI rollout (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl): one request per "
    "model call (token_count event)",
    sniff=sniff,
    read=read,
    priority=25,
)
