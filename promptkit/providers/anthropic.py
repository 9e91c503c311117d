"""Anthropic Messages request bodies (``POST /v1/messages``), with automatic prompt-cache breakpoints.

The assembled layout puts everything that is stable for a session before the history and everything
that changes per turn after it. Anthropic caches only up to explicit ``cache_control`` breakpoints, so
:func:`anthropic_request` places them where that layout says the cache boundaries are: at the end of the
stable head (the top-level ``system``) and at the end of the history.

>>> from promptkit import Message
>>> body = anthropic_request([Message(role="system", content="你是小助手"), Message(role="user", content="hi")],
...                          model="claude-sonnet-4-5")
>>> body["system"]
[{'type': 'text', 'text': '你是小助手', 'cache_control': {'type': 'ephemeral'}}]
>>> body["messages"]
[{'role': 'user', 'content': [{'type': 'text', 'text': 'hi'}]}]
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import attrs

from promptkit.chat.message import Message
from promptkit.layout import FrameSlot, LayoutEntry, last_history_index
from promptkit.providers._common import (
    MediaFormatError,
    PreparedInput,
    RequestBuildError,
    ToolDefinitionError,
    check_function_tool,
    check_model,
    merge_extra,
    parse_data_url,
    parse_tool_arguments,
    prepare_input,
    put_given,
    request_arguments,
    stop_list,
    system_hint_content,
    tool_sequence,
    warn_not_sent,
)
from promptkit.providers.prices import PRICES_AS_OF, ModelPrice
from promptkit.providers.registry import ProviderProfile
from promptkit.tokens.cache_models import BreakpointCache

__all__ = [
    "ANTHROPIC_DEFAULT_MAX_TOKENS",
    "ANTHROPIC_IMAGE_TYPES",
    "ANTHROPIC_MAX_BREAKPOINTS",
    "ANTHROPIC_MIN_CACHEABLE_TOKENS",
    "CacheTTL",
    "anthropic_min_cacheable_tokens",
    "anthropic_request",
    "anthropic_tool",
    "history_end",
]

#: ``max_tokens`` is required by the Messages API; this is sent when the caller gives none.
ANTHROPIC_DEFAULT_MAX_TOKENS: Final[int] = 4096
#: The Messages API accepts at most this many ``cache_control`` breakpoints in one request.
ANTHROPIC_MAX_BREAKPOINTS: Final[int] = 4
#: Media types of a base64 image source.
ANTHROPIC_IMAGE_TYPES: Final[tuple[str, ...]] = ("image/jpeg", "image/png", "image/gif", "image/webp")
#: Lifetime of a cache entry: five minutes (the default) or one hour.
CacheTTL = Literal["5m", "1h"]

_Block = dict[str, Any]


def anthropic_tool(tool: Any, *, index: int = 0, where: str = "anthropic_request") -> dict[str, Any]:
    """One tool definition for the Messages API.

    An OpenAI function tool ``{"type": "function", "function": {name, description, parameters}}`` becomes
    ``{name, description, input_schema}`` (an empty object schema when it has no parameters; ``strict``
    and a top-level ``cache_control`` are kept). Any other dict that has a ``name`` and no ``function``
    (a native Anthropic tool, a server tool such as ``web_search``) passes through as a copy.

    >>> anthropic_tool({"type": "function", "function": {"name": "now", "description": "the time"}})
    {'name': 'now', 'description': 'the time', 'input_schema': {'type': 'object', 'properties': {}}}
    """
    if isinstance(tool, Mapping) and "function" not in tool and tool.get("type") != "function":
        if not isinstance(tool.get("name"), str) or not tool["name"]:
            raise ToolDefinitionError(f"{where}: tools[{index}]: a native tool needs a non-empty 'name'")
        return copy.deepcopy(dict(tool))
    checked = check_function_tool(tool, index=index, where=where)
    fn = checked["function"]
    out: dict[str, Any] = {"name": fn["name"]}
    if "description" in fn:
        out["description"] = fn["description"]
    out["input_schema"] = fn.get("parameters") or {"type": "object", "properties": {}}
    if "strict" in fn:
        out["strict"] = fn["strict"]
    if "cache_control" in checked:
        out["cache_control"] = checked["cache_control"]
    return out


def _tool_choice(choice: str | Mapping[str, Any], where: str) -> dict[str, Any]:
    simple = {"auto": "auto", "none": "none", "required": "any", "any": "any"}
    if isinstance(choice, str):
        if choice not in simple:
            raise RequestBuildError(f"{where}: tool_choice {choice!r} is not one of {sorted(simple)}")
        return {"type": simple[choice]}
    if isinstance(choice, Mapping):
        if choice.get("type") == "function":
            fn = choice.get("function")
            name = fn.get("name") if isinstance(fn, Mapping) else None
            if not isinstance(name, str):
                raise RequestBuildError(f"{where}: tool_choice.function.name must be a string")
            return {"type": "tool", "name": name}
        if choice.get("type") in ("auto", "any", "tool", "none"):
            return copy.deepcopy(dict(choice))
    raise RequestBuildError(f"{where}: unsupported tool_choice {choice!r}")


def _image_block(url: str, *, index: int, k: int, where: str) -> _Block:
    parsed = parse_data_url(url)
    if parsed is not None:
        media_type, is_base64, data = parsed
        media_type = "image/jpeg" if media_type == "image/jpg" else media_type
        if not is_base64 or media_type not in ANTHROPIC_IMAGE_TYPES:
            raise MediaFormatError(
                f"{where}: messages[{index}].images[{k}]: a data: URL image must be base64 of type "
                f"{list(ANTHROPIC_IMAGE_TYPES)}, got {url[:40]!r}"
            )
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    if url.lower().startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    raise MediaFormatError(
        f"{where}: messages[{index}].images[{k}]: the Messages API takes images as base64 data: URLs or "
        f"http(s) URLs; resolve {url[:60]!r} first"
    )


def _text(content: str | None) -> list[_Block]:
    # The Messages API rejects empty and whitespace-only text blocks.
    return [{"type": "text", "text": content}] if content is not None and content.strip() else []


def _message_blocks(m: Message, *, index: int, where: str) -> tuple[str, list[_Block]]:
    """The role and content blocks of one prepared message that is not part of the stable head."""
    blocks: list[_Block] = []
    if m.role == "system":  # a system message after the head: Anthropic has no system role in messages
        role = "user"
        blocks += _text(
            system_hint_content(m.content) if m.content is not None and m.content.strip() else None
        )
    elif m.role == "tool":
        role = "user"
        if m.tool_call_id is None:
            raise RequestBuildError(f"{where}: messages[{index}] is a tool result without tool_call_id")
        block: _Block = {"type": "tool_result", "tool_use_id": m.tool_call_id}
        if m.content:
            block["content"] = m.content
        blocks.append(block)
    else:
        role = m.role
        blocks += _text(m.content)
        for call in m.tool_calls or ():
            if role != "assistant":
                raise RequestBuildError(f"{where}: messages[{index}] (role {role}) carries tool calls")
            args = parse_tool_arguments(call, index=index, where=where)
            blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": args})
    if m.images:
        if role == "user":
            blocks += [_image_block(url, index=index, k=k, where=where) for k, url in enumerate(m.images)]
        else:
            warn_not_sent(
                f"{where}: messages[{index}] (role {m.role}): {len(m.images)} image(s) not sent; "
                "the Messages API carries images in user turns only"
            )
    if m.audios:
        warn_not_sent(
            f"{where}: messages[{index}]: {len(m.audios)} audio clip(s) not sent; the Messages API has no audio input"
        )
    return role, blocks


def history_end(prepared: PreparedInput) -> int | None:
    """Index (in ``prepared.messages``) of the last history message, or None when there is no history.

    The history is what the layout says it is: the caller's layout when the input is an
    ``AssembledPrompt``, else the assembler's reading of the messages (:func:`promptkit.assembly.layout_of`:
    the per-turn tail is the current user message, the injected blocks before it (turn-context, volatile,
    focus, turn-hint, a directive block) and this turn's tool loop after it). The last message whose slot
    is ``history`` ends it; messages of the stable head are never history.
    """
    layout = [LayoutEntry.coerce(e) for e in prepared.frame_layout()[: len(prepared.messages)]]
    return last_history_index(layout, prepared.head_length())


def _cut_points(points: Any, prepared: PreparedInput, where: str) -> list[int]:
    """The cut points (input message indices) as sorted indices into ``prepared.messages``."""
    if points is None:
        return []
    if isinstance(points, str | bytes) or not isinstance(points, Sequence):
        raise RequestBuildError(f"{where}: cut_points must be a sequence of message indices, got {points!r}")
    n = len(prepared.inputs)
    out: set[int] = set()
    for k, point in enumerate(points):
        if isinstance(point, bool) or not isinstance(point, int) or not 0 <= point <= n:
            raise RequestBuildError(
                f"{where}: cut_points[{k}] must be a message index from 0 to {n}, got {point!r}"
            )
        # the first prepared message that comes from input message `point` or later
        out.add(next((j for j, src in enumerate(prepared.sources) if src >= point), len(prepared.messages)))
    return sorted(out)


def _ends_in_tool_loop(prepared: PreparedInput) -> bool:
    layout = prepared.frame_layout()
    return (
        bool(layout)
        and len(layout) > prepared.head_length()
        and LayoutEntry.coerce(layout[-1]).slot == FrameSlot.TOOL_LOOP
    )


def anthropic_request(
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
    cache_breakpoints: bool = True,
    ttl: CacheTTL = "5m",
    cut_points: Sequence[int] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The Anthropic Messages JSON body for a sequence of :class:`Message` or an ``AssembledPrompt``.

    Calls :func:`promptkit.prepare_llm_messages` first, then:

    - the stable head (the leading run of system messages) becomes the top-level ``system``, one text
      block per message (images there are not sent: a :class:`ContentNotSentWarning` says so);
    - a later system message becomes user text, prefixed with ``[系统提示]`` and a newline unless it starts
      with ``[`` (the rule of :func:`normalize_system_placement`; directive blocks too, since the Messages
      API has no system role in ``messages``); it merges with its neighbouring user turn;
    - content is always a list of blocks: ``text`` (empty and blank text is never sent: the API rejects
      it), ``image`` (``data:`` URLs as a base64 source, http(s) URLs as a url source, anything else is a
      :class:`MediaFormatError`), ``tool_use`` (arguments parsed to an object; malformed ones raise
      :class:`ToolArgumentsError`), ``tool_result``;
    - consecutive messages of one role are merged into one turn (the API wants alternation), so the tool
      results of one assistant turn and the user message carrying their images form one user turn; in a
      user turn the ``tool_result`` blocks come first, as the API requires;
    - ``name`` is not sent (the API has none: the speaker belongs in the content, see
      :func:`promptkit.prefix_sender`), nor is ``reasoning_content`` (thinking blocks need signatures);
    - ``max_tokens`` defaults to :data:`ANTHROPIC_DEFAULT_MAX_TOKENS`; ``stop`` becomes ``stop_sequences``;
      ``temperature`` and ``top_p`` are sent only when given: the newest Claude models answer 400 to
      non-default sampling parameters and the anthropic SDK's request types (2.x) no longer list them, so
      with the SDK pass them through ``extra_body`` (older models still accept them);
      ``tool_choice`` takes the OpenAI spellings (``"auto"``, ``"none"``, ``"required"``, a function) or a
      native dict; ``tools`` are OpenAI function tools or native tools (see :func:`anthropic_tool`).

    Cache breakpoints (``cache_breakpoints=True``): ``cache_control`` on the last block of the history
    (see :func:`history_end`: the caller's layout, or the assembler's reading of the messages) and on the
    last block of the stable head (the last ``system`` block; the last tool when there is no system); and
    when the request ends in this turn's tool loop (slot ``tool-loop``), on its last block too, so the
    next call of the loop reads it. Breakpoints the caller already put on tools, and a top-level
    ``cache_control`` keyword, count toward the API's limit of :data:`ANTHROPIC_MAX_BREAKPOINTS`; when
    fewer are left, they go in that order: history, head, tool loop, chunk (below). ``ttl`` is ``"5m"``
    (sent as ``{"type": "ephemeral"}``) or ``"1h"``. A prefix shorter than the model's minimum cacheable
    length is simply not cached.

    Cut points (``cut_points``: indices of input messages before which a later trimming cut starts
    rewriting the prompt; by default the input's own ``cut_points`` when it has them, as a
    :class:`promptkit.assembly.TrimResult` does): the head breakpoint goes on the last system block
    *before* the first cut point, so a compaction summary at the end of the head (which changes at every
    cut) is left out of it and the stable head is still read after a cut; and a **chunk** breakpoint
    goes on the last block before the last cut point inside the history (the end of the last closed
    chunk), a prefix that stays byte-identical until the next cut and is read whatever the lookback
    from the end of the history finds.

    A :class:`promptkit.chat.ChatModelRequest` is accepted in place of the messages: its ``tools``,
    ``temperature`` and ``max_tokens`` fill those arguments. ``think=True`` is not sent (the Messages API's
    switch needs a token budget: pass ``thinking={"type": "enabled", "budget_tokens": ...}``); a
    :class:`ContentNotSentWarning` says so.

    >>> from promptkit import Message
    >>> msgs = [Message(role="system", content="persona"), Message(role="system", content="summary"),
    ...         Message(role="user", content="q1"), Message(role="assistant", content="a1"),
    ...         Message(role="user", content="q2"), Message(role="assistant", content="a2"),
    ...         Message(role="user", content="now")]
    >>> body = anthropic_request(msgs, model="claude-sonnet-4-5", cut_points=[1, 4])
    >>> ["cache_control" in b for b in body["system"]]
    [True, False]
    >>> [[("cache_control" in b) for b in m["content"]] for m in body["messages"]]
    [[False], [True], [False], [True], [False]]
    """
    where = "anthropic_request"
    _check_options(model, ttl, extra, where)
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
    if args.think and "thinking" not in extra:
        warn_not_sent(
            f"{where}: think=True not sent; the Messages API needs a budget: "
            'pass thinking={"type": "enabled", "budget_tokens": N}'
        )
    prepared = prepare_input(args.prompt_or_messages, where=where)
    cuts = _cut_points(
        cut_points if cut_points is not None else getattr(prompt_or_messages, "cut_points", None),
        prepared,
        where,
    )
    system = _system_blocks(prepared, where)
    turns = _turns(prepared, where)
    anthropic_tools = [
        anthropic_tool(t, index=i, where=where) for i, t in enumerate(tool_sequence(args.tools, where=where))
    ]
    if cache_breakpoints:
        _place_breakpoints(prepared, system, turns, anthropic_tools, cuts, ttl, extra, where)
    body = _body(model, args.max_tokens, system, turns, anthropic_tools, tool_choice, where)
    put_given(
        body,
        [
            ("temperature", args.temperature),
            ("top_p", top_p),
            ("stop_sequences", stop_list(stop)),
            ("stream", stream),
        ],
    )
    return merge_extra(body, extra, where=where)


def _check_options(model: str, ttl: str, extra: Mapping[str, Any], where: str) -> None:
    """A :class:`RequestBuildError` for a bad ``model`` or ``ttl``, or a body field only the builder sets."""
    check_model(model, where=where)
    if ttl not in ("5m", "1h"):
        raise RequestBuildError(f"{where}: ttl must be '5m' or '1h', got {ttl!r}")
    for reserved in ("system", "messages"):
        if reserved in extra:
            raise RequestBuildError(f"{where}: {reserved!r} is built from the messages; it cannot be passed")


def _body(
    model: str,
    max_tokens: int | None,
    system: _Sourced,
    turns: _Turns,
    anthropic_tools: list[_Block],
    tool_choice: str | Mapping[str, Any] | None,
    where: str,
) -> dict[str, Any]:
    """The body's fields up to ``tool_choice``, in the body's key order."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": ANTHROPIC_DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens,
    }
    if system.blocks:
        body["system"] = system.blocks
    body["messages"] = turns.turns
    if anthropic_tools:
        body["tools"] = anthropic_tools
    if tool_choice is not None:
        body["tool_choice"] = _tool_choice(tool_choice, where)
    return body


@attrs.frozen
class _Sourced:
    """Blocks of the body, each with the index (in ``prepared.messages``) of the message it came from."""

    blocks: list[_Block]
    sources: list[int]


@attrs.frozen
class _Turns:
    """The body's turns, and for each turn the source (index in ``prepared.messages``) of each block."""

    turns: list[dict[str, Any]]
    sources: list[list[int]]

    def flat(self) -> list[tuple[_Block, int]]:
        """Every block of every turn with its source, in order."""
        return [
            (block, src)
            for turn, sources in zip(self.turns, self.sources, strict=True)
            for block, src in zip(turn["content"], sources, strict=True)
        ]


def _system_blocks(prepared: PreparedInput, where: str) -> _Sourced:
    """The top-level ``system``: one text block per message of the stable head (images are not sent)."""
    system = _Sourced([], [])
    for j in range(prepared.head_length()):
        m = prepared.messages[j]
        blocks = _text(m.content)
        system.blocks.extend(blocks)
        system.sources.extend([j] * len(blocks))
        if m.images:
            warn_not_sent(
                f"{where}: messages[{prepared.sources[j]}] (stable head): {len(m.images)} image(s) not sent; "
                "the top-level system prompt takes text only"
            )
    return system


def _turns(prepared: PreparedInput, where: str) -> _Turns:
    """The messages after the head as alternating turns: consecutive messages of one role merged, the
    ``tool_result`` blocks first in a user turn."""
    messages = prepared.messages
    out = _Turns([], [])
    for j in range(prepared.head_length(), len(messages)):
        role, blocks = _message_blocks(messages[j], index=prepared.sources[j], where=where)
        if not blocks:
            continue
        if out.turns and out.turns[-1]["role"] == role:
            out.turns[-1]["content"].extend(blocks)
            out.sources[-1].extend([j] * len(blocks))
        else:
            out.turns.append({"role": role, "content": blocks})
            out.sources.append([j] * len(blocks))
    if not out.turns:
        raise RequestBuildError(
            f"{where}: no message after the system head; the Messages API needs at least one"
        )
    for turn, sources in zip(out.turns, out.sources, strict=True):
        if turn["role"] == "user":
            order = sorted(
                range(len(sources)), key=lambda k: (turn["content"][k]["type"] != "tool_result", k)
            )
            turn["content"] = [turn["content"][k] for k in order]
            sources[:] = [sources[k] for k in order]
    return out


def _existing_breakpoints(anthropic_tools: Sequence[_Block], extra: Mapping[str, Any], where: str) -> int:
    """The breakpoints the caller already set (on tools, a top-level ``cache_control``); too many is an error."""
    existing = sum(1 for t in anthropic_tools if t.get("cache_control") is not None)
    existing += 1 if extra.get("cache_control") is not None else 0
    if existing > ANTHROPIC_MAX_BREAKPOINTS:
        raise RequestBuildError(
            f"{where}: {existing} cache breakpoints are already on the tools and the top-level "
            f"cache_control; the API allows {ANTHROPIC_MAX_BREAKPOINTS}"
        )
    return existing


def _place_breakpoints(
    prepared: PreparedInput,
    system: _Sourced,
    turns: _Turns,
    anthropic_tools: Sequence[_Block],
    cuts: Sequence[int],
    ttl: CacheTTL,
    extra: Mapping[str, Any],
    where: str,
) -> None:
    """Put ``cache_control`` on as many targets as the API's limit leaves (see :func:`anthropic_request`)."""
    existing = _existing_breakpoints(anthropic_tools, extra, where)
    control: dict[str, Any] = {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}
    for block in _breakpoint_targets(prepared, system, turns, anthropic_tools, cuts)[
        : ANTHROPIC_MAX_BREAKPOINTS - existing
    ]:
        block["cache_control"] = dict(control)


def _breakpoint_targets(
    prepared: PreparedInput,
    system: _Sourced,
    turns: _Turns,
    anthropic_tools: Sequence[_Block],
    cuts: Sequence[int],
) -> list[_Block]:
    """The blocks that get a breakpoint, in order of priority: history, head, tool loop, chunk."""
    targets: list[_Block] = []
    flat = turns.flat()
    end = history_end(prepared)
    if end is not None:
        upto = [block for block, src in flat if src <= end]
        if upto:
            targets.append(upto[-1])
    stable = [
        block for block, src in zip(system.blocks, system.sources, strict=True) if not cuts or src < cuts[0]
    ]
    if stable:
        targets.append(stable[-1])
    elif anthropic_tools and anthropic_tools[-1].get("cache_control") is None:
        targets.append(anthropic_tools[-1])
    if _ends_in_tool_loop(prepared) and all(flat[-1][0] is not t for t in targets):
        targets.append(flat[-1][0])
    if len(cuts) > 1 and cuts[-1] > max(prepared.head_length(), cuts[0]):
        before = [block for block, src in flat if src < cuts[-1]]
        if before and all(before[-1] is not t for t in targets):
            targets.append(before[-1])
    return targets


# Anthropic: https://platform.claude.com/docs/en/about-claude/pricing (the "Model pricing" and "Prompt
# caching" tables): 5-minute cache writes 1.25 x input, 1-hour writes 2 x input, cache hits and
# refreshes 0.1 x input. Opus 4.5 and 4.6 cost $5 / $25, Opus 4 and 4.1 $15 / $75. Opus 4.7 and 4.8
# (read 2026-12-07 from the page's "Model pricing" table: $5 base input, $6.25 5m writes, $10 1h writes,
# $0.50 cache hits, $25 output). Sonnet 4.6, Sonnet 5 and 5.5, Opus 5 and 5.5: base input and output
# from each model's page (read 2026-12-07; e.g. platform.claude.com/docs/en/models/sonnet-4-6/overview:
# "Input pricing: $3 / MTok · Output pricing: $15 / MTok"), cache prices by the caching multipliers above.
# Fable 5 and 5.1 (read 2026-12-07 from the page's "Model pricing" table): $10 base input, $12.50 5m
# writes, $20 1h writes, $50 output; cache hits $1 on Fable 5 and $0.25 on Fable 5.1, which do not follow
# the multipliers (the Fable 5.1 overview, platform.claude.com/docs/en/models/fable-5-1/overview: input
# and output prices unchanged from Fable 5, cache reads cut to a quarter), so they are given as listed.
# Haiku 5.5 is priced in two bands by prompt length (read 2026-12-08 from its page,
# platform.claude.com/docs/en/models/haiku-5-5/overview, "Pricing": "Input $0.10 / MTok for prompts up
# to 100,000 tokens, $0.50 / MTok for prompts over 100,000 tokens", output $0.50 / $2.50, "5m cache
# write $0.125 / MTok for prompts up to 100,000 tokens, $0.625 / MTok for prompts over 100,000 tokens");
# its 1-hour writes ($0.20 / $1.00) and cache hits ($0.01 / $0.05) by the caching multipliers above,
# which its 5-minute writes follow (1.25 x input in each band). The page prices by "prompts"; promptkit
# takes a prompt's length as the whole prompt, its cache reads and writes included (the page gives no
# narrower count), from the reported usage where the log has it.
_PRICE_PAGE = "https://platform.claude.com/docs/en/about-claude/pricing"
_MODEL_PAGE = "https://platform.claude.com/docs/en/models/{}/overview"


def _price(
    model: str, base: float, output: float, as_of: str = PRICES_AS_OF, page: str | None = None
) -> ModelPrice:
    return ModelPrice(
        "anthropic",
        model,
        cache_hit=round(0.1 * base, 6),
        cache_miss=base,
        output=output,
        cache_write=round(1.25 * base, 6),
        cache_write_1h=2 * base,
        source=_PRICE_PAGE if page is None else _MODEL_PAGE.format(page),
        as_of=as_of,
    )


#: Its models' list prices, one per model version (USD per million tokens), dated and sourced.
PRICES = (
    ModelPrice("anthropic", "claude-fable-5-1", 0.25, 10.0, 50.0, 12.5, 20.0, _PRICE_PAGE, "2026-12-07"),
    ModelPrice("anthropic", "claude-fable-5", 1.0, 10.0, 50.0, 12.5, 20.0, _PRICE_PAGE, "2026-12-07"),
    attrs.evolve(
        _price("claude-haiku-5-5", 0.10, 0.50, "2026-12-08", "haiku-5-5"),
        above_tokens=100_000,
        above_cache_hit=0.05,
        above_cache_miss=0.50,
        above_output=2.50,
        above_cache_write=0.625,
        above_cache_write_1h=1.00,
    ),
    _price("claude-opus-5-5", 4.00, 20.00, "2026-12-07", "opus-5-5"),
    _price("claude-opus-5", 5.00, 25.00, "2026-12-07", "opus-5"),
    _price("claude-sonnet-5-5", 2.00, 10.00, "2026-12-07", "sonnet-5-5"),
    _price("claude-sonnet-5", 2.00, 10.00, "2026-12-07", "sonnet-5"),
    _price("claude-sonnet-4-6", 3.00, 15.00, "2026-12-07", "sonnet-4-6"),
    _price("claude-opus-4-8", 5.00, 25.00, "2026-12-07"),
    _price("claude-opus-4-7", 5.00, 25.00, "2026-12-07"),
    _price("claude-opus-4-6", 5.00, 25.00),
    _price("claude-opus-4-5", 5.00, 25.00),
    _price("claude-opus-4-1", 15.00, 75.00),
    _price("claude-opus-4", 15.00, 75.00),
    _price("claude-sonnet-4-5", 3.00, 15.00),
    _price("claude-sonnet-4", 3.00, 15.00),
    _price("claude-3-7-sonnet", 3.00, 15.00),
    _price("claude-haiku-4-5", 1.00, 5.00),
    _price("claude-3-5-haiku", 0.80, 4.00),
    _price("claude-3-haiku", 0.25, 1.25),
)
# Anthropic's prompt caching: https://platform.claude.com/docs/en/build-with-claude/prompt-caching
_CACHE_PAGE = "https://platform.claude.com/docs/en/build-with-claude/prompt-caching"

#: Minimum cacheable prompt length per Claude model (prefix of the model id → tokens), from
#: _CACHE_PAGE ("Cache limitations", checked 2026): a breakpoint whose prefix is shorter writes nothing.
#: Longest matching prefix wins; unknown models get 1024.
ANTHROPIC_MIN_CACHEABLE_TOKENS: Final[Mapping[str, int]] = {
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
    "claude-sonnet-4-6": 2048,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
    "claude-haiku-3": 2048,
    "claude-sonnet-4-5": 1024,
    "claude-opus-4-1": 1024,
    "claude-opus-4": 1024,
    "claude-sonnet-4": 1024,
    "claude-3-7-sonnet": 1024,
    "claude-3-5-sonnet": 1024,
    "claude-3-opus": 1024,
}

#: The ``ttl`` values of a ``cache_control`` breakpoint: 5 minutes (the default) and 1 hour
#: (_CACHE_PAGE, "1-hour cache duration"; a 1-hour write costs twice the base input price).
CACHE_TTLS: Final[tuple[tuple[str, float], ...]] = (("5m", 300.0), ("1h", 3600.0))

#: The cache model: explicit breakpoints, exact entries, the per-model minimum, a 20-block lookback
#: (a read is looked up at the breakpoint and the block boundaries before it, 20 blocks in all;
#: _CACHE_PAGE), 5 minutes by default.
CACHE_MODEL = BreakpointCache(
    lookback=20,
    ttl=300.0,
    min_tokens_by_model=ANTHROPIC_MIN_CACHEABLE_TOKENS,
    default_min_tokens=1024,
    ttl_names=CACHE_TTLS,
)


def anthropic_min_cacheable_tokens(model: str | None) -> int:
    """The minimum cacheable prompt length of Claude ``model`` (see :data:`ANTHROPIC_MIN_CACHEABLE_TOKENS`).

    Example::

        >>> anthropic_min_cacheable_tokens("claude-3-5-haiku-20241022"), anthropic_min_cacheable_tokens("claude-sonnet-4-5")
        (2048, 1024)
    """
    return CACHE_MODEL.min_cacheable_tokens(model)


PROFILE = ProviderProfile(
    name="anthropic",
    prices=PRICES,
    description="Anthropic Messages: explicit cache_control breakpoints, 5-minute / 1-hour TTLs, billed writes",
    tokenizer="cl100k_base",
    render="chatml",
    cache_model=CACHE_MODEL,
    # nothing is cached without a cache_control breakpoint (top-level automatic caching is one);
    # a breakpoint may ask for the 1-hour TTL instead of the default 5 minutes (_CACHE_PAGE)
    needs_explicit_breakpoints=True,
    extended_ttl_options=tuple((name, s) for name, s in CACHE_TTLS if s > 300.0),
    # Claude Code speaks only Anthropic's Messages API (its logs hold Messages bodies, cache_control)
    native_formats=("claude-code",),
    build_request=anthropic_request,
    default_model="claude-sonnet-4-5",
    context_window=1_000_000,
    model_patterns=(r"claude",),
    url_hosts=("anthropic.com",),
    model_vendors=("anthropic",),
    usage_keys=("cache_read_input_tokens", "cache_creation_input_tokens"),
    layout_aligned=False,
)
PROFILES = (PROFILE,)
