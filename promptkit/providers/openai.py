"""OpenAI chat-completions request bodies (``POST /v1/chat/completions``).

>>> from promptkit import Message
>>> body = openai_request([Message(role="system", content="你是小助手"), Message(role="user", content="hi")],
...                       model="gpt-4o-mini", max_tokens=256)
>>> body["messages"][1], body["max_completion_tokens"]
({'role': 'user', 'content': 'hi'}, 256)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from promptkit.chat.message import Message, to_openai_dict
from promptkit.providers._common import (
    MediaFormatError,
    PreparedInput,
    RequestBuildError,
    check_function_tools,
    check_model,
    merge_extra,
    parse_data_url,
    prepare_input,
    put_given,
    request_arguments,
    stop_list,
    warn_not_sent,
)
from promptkit.providers.prices import PRICES_AS_OF, ModelPrice
from promptkit.providers.registry import ProviderProfile
from promptkit.tokens.cache_models import SteppedPrefixCache

__all__ = ["OPENAI_AUDIO_FORMATS", "MaxTokensField", "openai_message", "openai_request"]

#: Which field carries ``max_tokens``: OpenAI deprecated ``max_tokens`` for ``max_completion_tokens``
#: (and its reasoning models reject ``max_tokens``); many OpenAI-compatible servers only know ``max_tokens``.
MaxTokensField = Literal["max_completion_tokens", "max_tokens"]

#: ``data:`` URL media types an ``input_audio`` part takes, and the format name it is sent with.
OPENAI_AUDIO_FORMATS: Final[dict[str, str]] = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/vnd.wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}


def _audio_part(url: str, *, index: int, k: int, where: str) -> dict[str, Any]:
    parsed = parse_data_url(url)
    if parsed is None or not parsed[1] or parsed[0] not in OPENAI_AUDIO_FORMATS:
        raise MediaFormatError(
            f"{where}: messages[{index}].audios[{k}]: chat-completions takes audio as a base64 data: URL of "
            f"type {sorted(OPENAI_AUDIO_FORMATS)}, got {url[:60]!r}"
        )
    return {
        "type": "input_audio",
        "input_audio": {"data": parsed[2], "format": OPENAI_AUDIO_FORMATS[parsed[0]]},
    }


def openai_message(
    message: Message, *, index: int = 0, where: str = "openai_request", include_reasoning: bool = False
) -> dict[str, Any]:
    """One prepared :class:`Message` as a chat-completions message dict.

    Starts from :func:`promptkit.to_openai_dict` (images become ``image_url`` parts on user messages) and
    applies what the chat-completions message types require: ``content`` is a string (``""`` for None)
    except on an assistant message with tool calls; a tool message has ``tool_call_id`` (required) and
    no ``name`` (its type has no such field); audio clips become ``input_audio`` parts on user messages.
    Images or audio on other roles cannot be carried and raise a
    :class:`~promptkit.providers.ContentNotSentWarning`. ``index`` is the caller's message index, for errors.
    """
    out = to_openai_dict(message, include_reasoning=include_reasoning)
    role = message.role
    if role == "tool":
        out.pop("name", None)
        if message.tool_call_id is None:
            raise RequestBuildError(f"{where}: messages[{index}] is a tool result without tool_call_id")
    if out["content"] is None and not (role == "assistant" and message.tool_calls):
        out["content"] = ""
    if message.images and role != "user":
        warn_not_sent(
            f"{where}: messages[{index}] (role {role}): {len(message.images)} image(s) not sent; "
            "chat-completions carries images on user messages only"
        )
    if message.audios:
        if role != "user":
            warn_not_sent(
                f"{where}: messages[{index}] (role {role}): {len(message.audios)} audio clip(s) not sent; "
                "chat-completions carries audio on user messages only"
            )
        else:
            content = out["content"]
            parts: list[dict[str, Any]] = (
                list(content)
                if isinstance(content, list)
                else ([{"type": "text", "text": content}] if content else [])
            )
            parts.extend(
                _audio_part(url, index=index, k=k, where=where) for k, url in enumerate(message.audios)
            )
            out["content"] = parts
    return out


def chat_completions_body(
    prepared: PreparedInput,
    messages: Sequence[Message],
    *,
    model: str,
    tools: Sequence[Mapping[str, Any]] | None,
    tool_choice: str | Mapping[str, Any] | None,
    temperature: float | None,
    max_tokens: int | None,
    max_tokens_field: MaxTokensField,
    top_p: float | None,
    stop: str | Sequence[str] | None,
    stream: bool | None,
    reasoning_for: Sequence[bool] | None,
    extra: Mapping[str, Any],
    where: str,
) -> dict[str, Any]:
    """The chat-completions body shared by OpenAI and DeepSeek; ``messages`` align with ``prepared``."""
    check_model(model, where=where)
    if max_tokens_field not in ("max_completion_tokens", "max_tokens"):
        raise RequestBuildError(f"{where}: max_tokens_field must be 'max_completion_tokens' or 'max_tokens'")
    body: dict[str, Any] = {
        "model": model,
        "messages": [
            openai_message(
                m,
                index=prepared.sources[j],
                where=where,
                include_reasoning=bool(reasoning_for and reasoning_for[j]),
            )
            for j, m in enumerate(messages)
        ],
    }
    checked_tools = check_function_tools(tools, where=where)
    if checked_tools:
        body["tools"] = checked_tools
    if tool_choice is not None:
        body["tool_choice"] = tool_choice if isinstance(tool_choice, str) else dict(tool_choice)
    put_given(
        body,
        [
            ("temperature", temperature),
            ("top_p", top_p),
            (max_tokens_field, max_tokens),
            ("stop", stop_list(stop)),
            ("stream", stream),
        ],
    )
    return merge_extra(body, extra, where=where)


def openai_request(
    prompt_or_messages: Any,
    *,
    model: str,
    tools: Sequence[Mapping[str, Any]] | None = None,
    tool_choice: str | Mapping[str, Any] | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    top_p: float | None = None,
    stop: str | Sequence[str] | None = None,
    stream: bool | None = None,
    max_tokens_field: MaxTokensField = "max_completion_tokens",
    **extra: Any,
) -> dict[str, Any]:
    """The OpenAI chat-completions JSON body for a sequence of :class:`Message`, an ``AssembledPrompt`` or a
    :class:`promptkit.chat.ChatModelRequest` (its ``tools``, ``temperature`` and ``max_tokens`` fill those
    arguments; ``think=True`` is not sent, chat-completions has no on/off switch for thinking: a
    :class:`ContentNotSentWarning` says so, use ``reasoning_effort=`` instead).

    Calls :func:`promptkit.prepare_llm_messages` first; the messages keep their order, one body message
    per prepared message (so an assembled layout stays aligned, see :func:`request_record`). ``name``,
    ``tool_calls`` and ``tool_call_id`` pass through; images become ``image_url`` parts on user messages
    only. ``tools`` are OpenAI function tool dicts (validated, copied). ``max_tokens`` is sent as
    ``max_completion_tokens`` (OpenAI deprecated ``max_tokens``, and its reasoning models reject it);
    ``max_tokens_field="max_tokens"`` for OpenAI-compatible servers that only know the old field. Any other
    keyword (``seed``, ``response_format``, ``prompt_cache_key``...) is added to the body as given.

    >>> from promptkit import Message
    >>> openai_request([Message(role="notice", content="服务重启")], model="gpt-4o")["messages"]
    [{'role': 'system', 'content': '[系统通知] 服务重启'}]
    """
    where = "openai_request"
    args = request_arguments(
        prompt_or_messages,
        tools=tools,
        temperature=temperature,
        max_tokens=max_tokens,
        where=where,
        top_p=top_p,
        stop=stop,
        stream=stream,
    )
    if args.think:
        warn_not_sent(
            f"{where}: think=True not sent; chat-completions has no on/off thinking switch "
            "(pass reasoning_effort= for a reasoning model)"
        )
    prepared = prepare_input(args.prompt_or_messages, where=where)
    return chat_completions_body(
        prepared,
        prepared.messages,
        model=model,
        tools=args.tools,
        tool_choice=tool_choice,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        max_tokens_field=max_tokens_field,
        top_p=top_p,
        stop=stop,
        stream=stream,
        reasoning_for=None,
        extra=extra,
        where=where,
    )


# OpenAI: https://platform.openai.com/docs/pricing ("Standard" tier: input, cached input, output).
_PRICE_PAGE = "https://platform.openai.com/docs/pricing"
# The Codex-era models: OpenAI's pricing page (developers.openai.com/api/docs/pricing, "Standard"), read
# through dated copies of it, because the page itself was not reachable from here: the gpt-5*-codex rows
# as quoted on 2026-05-05 (fernando-nog.netlify.app/gpt-coding-model-costs-2026), gpt-5.4 and
# gpt-5.4-mini as listed in June 2026 (morphllm.com/openai-api-pricing); both agree with GitHub's
# Copilot table (github/docs data/tables/copilot/models-and-pricing.yml). Cache hit, miss, output.
_CODEX_PRICE_PAGE = "https://developers.openai.com/api/docs/pricing"
_CODEX_ERA_PRICES: tuple[tuple[str, float, float, float, str], ...] = (
    ("gpt-5-codex", 0.125, 1.25, 10.0, "2026-05-05"),
    ("gpt-5.1-codex", 0.125, 1.25, 10.0, "2026-05-05"),
    ("gpt-5.1-codex-max", 0.125, 1.25, 10.0, "2026-05-05"),
    ("gpt-5.2-codex", 0.175, 1.75, 14.0, "2026-05-05"),
    ("gpt-5.3-codex", 0.175, 1.75, 14.0, "2026-05-05"),
    ("gpt-5.4", 0.25, 2.50, 15.0, "2026-06"),
    ("gpt-5.4-mini", 0.075, 0.75, 4.50, "2026-06"),
    ("gpt-5.4-nano", 0.02, 0.20, 1.25, "2026-06"),
)
# The legacy GPT-4 models, from OpenAI's model pages (developers.openai.com/api/docs/models/gpt-4: input
# $30, output $60, default snapshot gpt-4-0613; .../gpt-4-turbo: $10 and $30, snapshot
# gpt-4-turbo-2024-04-09), read 2026-12-07; gpt-4-32k (no page of its own any more) as OpenRouter passes
# OpenAI's price through (openrouter.ai/models/openai/gpt-4-32k-0314: $60 and $120). These models predate
# prompt caching (no "cached input" price): a prompt token read from a cache is billed as input, so
# cache hit = cache miss. Dated snapshots (gpt-4-0613, gpt-4-0314, gpt-4-32k-0613) find these rows.
_LEGACY_AS_OF = "2026-12-07"
_LEGACY_PRICES: tuple[tuple[str, float, float, str], ...] = (
    ("gpt-4", 30.0, 60.0, "https://developers.openai.com/api/docs/models/gpt-4"),
    ("gpt-4-32k", 60.0, 120.0, "https://openrouter.ai/models/openai/gpt-4-32k-0314"),
    ("gpt-4-turbo", 10.0, 30.0, "https://developers.openai.com/api/docs/models/gpt-4-turbo"),
)
#: Its models' list prices (cache hit, cache miss, output; USD per million tokens), dated and sourced.
PRICES = (
    ModelPrice("openai", "gpt-5", 0.125, 1.25, 10.0, source=_PRICE_PAGE, as_of=PRICES_AS_OF),
    ModelPrice("openai", "gpt-5-mini", 0.025, 0.25, 2.0, source=_PRICE_PAGE, as_of=PRICES_AS_OF),
    ModelPrice("openai", "gpt-5-nano", 0.005, 0.05, 0.4, source=_PRICE_PAGE, as_of=PRICES_AS_OF),
    ModelPrice("openai", "gpt-4.1", 0.5, 2.0, 8.0, source=_PRICE_PAGE, as_of=PRICES_AS_OF),
    ModelPrice("openai", "gpt-4.1-mini", 0.1, 0.4, 1.6, source=_PRICE_PAGE, as_of=PRICES_AS_OF),
    ModelPrice("openai", "gpt-4.1-nano", 0.025, 0.1, 0.4, source=_PRICE_PAGE, as_of=PRICES_AS_OF),
    ModelPrice("openai", "gpt-4o", 1.25, 2.5, 10.0, source=_PRICE_PAGE, as_of=PRICES_AS_OF),
    ModelPrice("openai", "gpt-4o-mini", 0.075, 0.15, 0.6, source=_PRICE_PAGE, as_of=PRICES_AS_OF),
    *(
        ModelPrice("openai", model, hit, miss, out, source=_CODEX_PRICE_PAGE, as_of=as_of)
        for model, hit, miss, out, as_of in _CODEX_ERA_PRICES
    ),
    *(
        ModelPrice("openai", model, miss, miss, out, source=page, as_of=_LEGACY_AS_OF)
        for model, miss, out, page in _LEGACY_PRICES
    ),
)
# OpenAI's prompt caching: https://platform.openai.com/docs/guides/prompt-caching ("Caching is enabled
# automatically for prompts that are 1024 tokens or longer"; cached counts grow in 128-token steps;
# the in-memory cache is cleared after 5 to 10 minutes of inactivity, always within an hour). "Requests
# are routed to a machine based on a hash of the initial prefix of the prompt. The hash typically uses
# the first 256 tokens" (Cache Routing), and a request that overflows to another machine, or meets an
# evicted prefix, reads less: the cache is best effort, a hit is not guaranteed. The cache keeps the
# generated answer too: on seven public Codex rollouts (gpt-5.3-codex and gpt-5.1-codex, 524 calls) the
# reads pass the previous prompt on 53% of calls and never pass the previous prompt + its output
# (benchmarks/codex_accuracy.py).
_CACHE_PAGE = "https://platform.openai.com/docs/guides/prompt-caching"
#: The values of ``prompt_cache_retention`` that keep a cached prefix longer than the in-memory cache:
#: ``"24h"`` (extended retention, "up to a maximum of 24 hours"; _CACHE_PAGE#prompt-cache-retention).
RETENTION_OPTIONS: Final[tuple[tuple[str, float], ...]] = (("24h", 24 * 3600.0),)
#: The cache model: nothing under 1,024 tokens, then 128-token steps, 10 minutes after last use, the answer
#: cached with its prompt, requests routed by their first 256 tokens.
CACHE_MODEL = SteppedPrefixCache(
    min_tokens=1024,
    step=128,
    ttl=600.0,
    retention=RETENTION_OPTIONS,
    include_completion=True,
    routed_by=256,
)

PROFILE = ProviderProfile(
    name="openai",
    prices=PRICES,
    description="OpenAI chat completions / Responses: automatic prefix caching from 1,024 tokens in 128-token steps",
    tokenizer="o200k_base",
    render="chatml",
    cache_model=CACHE_MODEL,
    retention_options=RETENTION_OPTIONS,
    # Codex CLI speaks only the Responses API of OpenAI (github.com/openai/codex)
    native_formats=("codex",),
    build_request=openai_request,
    default_model="gpt-4.1",
    context_window=1_047_576,
    model_patterns=(r"gpt-", r"o\d", r"chatgpt-", r"codex-", r"text-embedding-"),
    url_hosts=("openai.com", "openai.azure.com"),
    model_vendors=("openai",),
    aliases=("azure", "text-completion-openai", "azure.ai.openai", "az.ai.openai"),
    # an OpenAI-compatible usage object (many servers write it); the weakest evidence, asked last
    usage_keys=("prompt_tokens_details", "input_tokens_details"),
    usage_keys_shared=True,
    # routed by a hash of the prompt's start, served from whichever machine it lands on: best effort
    # (_CACHE_PAGE, "Cache Routing"): a shortfall is the provider's (routing_miss), with a calibration
    best_effort=True,
    # fitted on seven public Codex rollouts (promptkit/data/calibration-openai.json says which)
    calibration="calibration-openai.json",
)
PROFILES = (PROFILE,)
