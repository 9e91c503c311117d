"""Ollama ``/api/chat`` request bodies.

>>> from promptkit import Message
>>> body = ollama_request([Message(role="user", content="看图", images=("data:image/png;base64,iVBORw0KGgo=",))],
...                       model="llava", temperature=0.2, max_tokens=128)
>>> body["messages"][0]["images"], body["options"]
(['iVBORw0KGgo='], {'temperature': 0.2, 'num_predict': 128})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from promptkit.chat.message import Message
from promptkit.providers._common import (
    MediaFormatError,
    RequestBuildError,
    check_function_tools,
    check_model,
    merge_extra,
    parse_data_url,
    parse_tool_arguments,
    prepare_input,
    put_given,
    request_arguments,
    stop_list,
    think_field,
    warn_not_sent,
)
from promptkit.providers.registry import ProviderProfile
from promptkit.tokens.cache_models import PagedBlockCache

__all__ = ["ollama_image", "ollama_request"]


def ollama_image(url: str, *, index: int = 0, k: int = 0, where: str = "ollama_request") -> str:
    """An image reference as Ollama wants it: a ``data:`` URL becomes its bare base64 payload; any other
    string (already bare base64, or something the caller's Ollama setup resolves) passes through.

    >>> ollama_image("data:image/jpeg;base64,/9j/4AAQ"), ollama_image("/9j/4AAQ")
    ('/9j/4AAQ', '/9j/4AAQ')
    """
    parsed = parse_data_url(url)
    if parsed is None:
        return url
    if not parsed[1]:
        raise MediaFormatError(
            f"{where}: messages[{index}].images[{k}]: Ollama takes base64 images; this data: URL is not base64"
        )
    return parsed[2]


def ollama_request(
    prompt_or_messages: Any,
    *,
    model: str,
    tools: Sequence[Mapping[str, Any]] | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    top_p: float | None = None,
    stop: str | Sequence[str] | None = None,
    stream: bool | None = None,
    options: Mapping[str, Any] | None = None,
    include_reasoning: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    """The Ollama ``/api/chat`` JSON body for a sequence of :class:`Message` or an ``AssembledPrompt``.

    Calls :func:`promptkit.prepare_llm_messages` first; one body message per prepared message.

    - ``images`` is a list on the message (any role; a tool result's images were already moved to a user
      message by prepare): ``data:`` URLs become bare base64, other strings pass through unchanged (Ollama's
      HTTP API wants base64; http(s) URLs and file paths are not fetched by the server).
    - ``tool_calls`` are ``[{"function": {"name", "arguments": {...}}}]`` with the arguments as a JSON
      object (blank arguments are ``{}``; malformed ones raise :class:`ToolArgumentsError` naming the
      message index and the call id). A tool result gets ``tool_name`` from the call it answers.
    - sampling parameters go to ``options``: ``temperature``, ``top_p``, ``num_predict`` (from
      ``max_tokens``), ``stop``; ``options`` adds any other Ollama option (a key also given as a keyword
      argument is an error). ``include_reasoning=True`` sends an assistant's ``reasoning_content`` as
      ``thinking``. Audio clips are not sent (Ollama has no audio input; a
      :class:`ContentNotSentWarning` says so). Any other keyword (``think``, ``format``, ``keep_alive``)
      is added to the body as given.
    - ``tools`` are OpenAI function tool dicts, sent as ``{"type": "function", "function": {"name",
      "description", "parameters"}}``; OpenAI-only fields (``strict``) are not part of Ollama's tool type
      and are not sent.
    - ``stream`` is omitted when None, and Ollama's HTTP API then streams: pass ``stream=False`` for one
      JSON answer.
    - a :class:`promptkit.chat.ChatModelRequest` is accepted in place of the messages: its ``tools``,
      ``temperature`` and ``max_tokens`` fill those arguments, its ``think`` becomes ``think``.
    """
    where = "ollama_request"
    check_model(model, where=where)
    request = request_arguments(
        prompt_or_messages,
        tools=tools,
        temperature=temperature,
        max_tokens=max_tokens,
        where=where,
        top_p=top_p,
        stop=stop,
        stream=stream,
    )
    extra = think_field(extra, "think", request.think, where=where)
    prepared = prepare_input(request.prompt_or_messages, where=where)
    call_names: dict[str, str] = {}
    out_messages = [
        _ollama_message(
            m,
            index=prepared.sources[j],
            include_reasoning=include_reasoning,
            call_names=call_names,
            where=where,
        )
        for j, m in enumerate(prepared.messages)
    ]
    body: dict[str, Any] = {"model": model, "messages": out_messages}
    put_given(body, [("tools", _ollama_tools(request.tools, where) or None)])
    opts = _ollama_options(
        [
            ("temperature", request.temperature),
            ("top_p", top_p),
            ("num_predict", request.max_tokens),
            ("stop", stop_list(stop)),
        ],
        options,
        where,
    )
    put_given(body, [("options", opts or None), ("stream", stream)])
    return merge_extra(body, extra, where=where)


def _ollama_message(
    m: Message,
    *,
    index: int,
    include_reasoning: bool,
    call_names: dict[str, str],
    where: str,
) -> dict[str, Any]:
    """One prepared message as an ``/api/chat`` message; records its tool calls' names in ``call_names``
    (by call id), so that a later tool result gets the ``tool_name`` of the call it answers."""
    d: dict[str, Any] = {"role": m.role, "content": m.content or ""}
    if m.images:
        d["images"] = [ollama_image(url, index=index, k=k, where=where) for k, url in enumerate(m.images)]
    if include_reasoning and m.role == "assistant" and m.reasoning_content is not None:
        d["thinking"] = m.reasoning_content
    if m.tool_calls:
        calls = []
        for call in m.tool_calls:
            args = parse_tool_arguments(call, index=index, where=where)
            calls.append({"function": {"name": call.name, "arguments": args}})
            call_names[call.id] = call.name
        d["tool_calls"] = calls
    if m.role == "tool" and m.tool_call_id is not None and m.tool_call_id in call_names:
        d["tool_name"] = call_names[m.tool_call_id]
    if m.audios:
        warn_not_sent(
            f"{where}: messages[{index}]: {len(m.audios)} audio clip(s) not sent; Ollama has no audio input"
        )
    return d


def _ollama_tools(tools: Sequence[Mapping[str, Any]] | None, where: str) -> list[dict[str, Any]]:
    """OpenAI function tools as Ollama's tool type: ``name``, ``description`` and ``parameters`` only."""
    return [
        {
            "type": "function",
            "function": {
                k: v for k, v in t["function"].items() if k in ("name", "description", "parameters")
            },
        }
        for t in check_function_tools(tools, where=where)
    ]


def _ollama_options(
    given: Sequence[tuple[str, Any]], options: Mapping[str, Any] | None, where: str
) -> dict[str, Any]:
    """The ``options`` object: the sampling parameters given as keywords, then the caller's ``options``
    (an option given both ways is an error)."""
    opts = put_given({}, given)
    for key, value in (options or {}).items():
        if key in opts:
            raise RequestBuildError(f"{where}: option {key!r} given twice (keyword argument and options)")
        opts[key] = value
    return opts


PROFILE = ProviderProfile(
    name="ollama",
    description="Ollama /api/chat (a local llama.cpp server): exact prefix reuse of the last prompt",
    tokenizer="cl100k_base",
    render="chatml",
    cache_model=PagedBlockCache(),
    build_request=ollama_request,
    # "oss": Codex's model_provider for a local open-weights model (`codex --oss`, served by Ollama)
    aliases=("ollama_chat", "oss"),
    url_hosts=("ollama.com",),
    url_ports=(11434,),  # Ollama's default port (docs.ollama.com/faq: "binds 127.0.0.1 port 11434")
)
PROFILES = (PROFILE,)
