"""Render models: how a provider turns a chat-completions request into the text its model reads.

A render model returns the rendering as a list of :class:`RenderedPiece`: text that the tokenizer
encodes as ordinary text, and *special* pieces that are single special tokens of the template
(``<｜User｜>``, ``<|im_start|>``). Each piece says which message of ``request["messages"]`` produced it
(``None`` for the header — BOS and tool definitions — and for the trailing generation prompt and the
completion), which is what lets the analysis say *which message broke the cache*.

One module per family: :mod:`~promptkit.tokens.render.base` (the contract and the request readers),
:mod:`~promptkit.tokens.render.deepseek`, :mod:`~promptkit.tokens.render.chatml`,
:mod:`~promptkit.tokens.render.jinja`; this package holds the registry (:func:`get_render_model`).

Models:

- :class:`DeepSeekV3Render` — DeepSeek-V3's published chat template, in Python, piece by piece (a test
  renders the real jinja template and checks the text is identical), plus the tool definitions that
  DeepSeek's API server puts in front of the prompt.
- :class:`ChatMLRender` — ``<|im_start|>role\\ncontent<|im_end|>\\n`` for OpenAI-compatible APIs.
- :class:`JinjaTemplateRender` — any Hugging Face jinja chat template.

Content given as a list of parts is joined: text parts are concatenated; any other part (an image)
is rendered as the placeholder ``<image sha1=…>`` (its real token cost is unknown, but two requests
with the same image get the same placeholder and a different image breaks the prefix, as it does at
the provider).

Example::

    >>> model = get_render_model("deepseek-v3")
    >>> pieces = model.render({"messages": [{"role": "user", "content": "hi"}]})
    >>> [(p.text, p.special, p.message_index) for p in pieces]
    [('<｜begin▁of▁sentence｜>', True, None), ('<｜User｜>', True, 0), ('hi', False, 0), ('<｜Assistant｜>', True, None)]
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from promptkit.errors import RenderError, UsageError
from promptkit.tokens.render.base import (
    IncrementalRenderModel,
    RenderedPiece,
    RenderModel,
    content_text,
    rendered_text,
)
from promptkit.tokens.render.chatml import CHATML_SPECIAL_TOKENS, ChatMLRender
from promptkit.tokens.render.deepseek import (
    DEEPSEEK_V3_CHAT_TEMPLATE,
    DEEPSEEK_V3_SPECIAL_TOKENS,
    DEEPSEEK_V32_SPECIAL_TOKENS,
    DEEPSEEK_V32_TOOLS_TEMPLATE,
    DeepSeekV3Render,
    DeepSeekV32Render,
    deepseek_tools_text,
    deepseek_v32_tools_text,
)
from promptkit.tokens.render.jinja import JinjaTemplateRender, load_chat_template

__all__ = [
    "CHATML_SPECIAL_TOKENS",
    "DEEPSEEK_V3_CHAT_TEMPLATE",
    "DEEPSEEK_V3_SPECIAL_TOKENS",
    "DEEPSEEK_V32_SPECIAL_TOKENS",
    "DEEPSEEK_V32_TOOLS_TEMPLATE",
    "KNOWN_RENDER_MODELS",
    "ChatMLRender",
    "DeepSeekV3Render",
    "DeepSeekV32Render",
    "IncrementalRenderModel",
    "JinjaTemplateRender",
    "RenderError",
    "RenderModel",
    "RenderedPiece",
    "content_text",
    "deepseek_tools_text",
    "deepseek_v32_tools_text",
    "get_render_model",
    "load_chat_template",
    "register_render_model",
    "rendered_text",
]


# ---------------------------------------------------------------------------------------------------
# registry

_NAMED: dict[str, Callable[[], Any]] = {
    "deepseek-v3": DeepSeekV3Render,
    "deepseek-v3.2": DeepSeekV32Render,
    "deepseek-v3.2-thinking": lambda: DeepSeekV32Render(thinking=True, name="deepseek-v3.2-thinking"),
    "chatml": ChatMLRender,
}

#: The names this package resolves by itself (those registered with :func:`register_render_model` come
#: on top: a provider profile registers its own name for its render).
KNOWN_RENDER_MODELS: tuple[str, ...] = (*_NAMED, "hf:PATH")
_BUILTIN: frozenset[str] = frozenset(_NAMED)


def register_render_model(name: str, factory: Callable[[], RenderModel]) -> None:
    """Make ``get_render_model(name)`` build ``factory()`` (once per process). A provider profile
    registers its name for the render it uses this way; registering the same factory again is a no-op.

    Raises :class:`~promptkit.errors.UsageError` when ``name`` is built in or already registered with
    another factory.
    """
    if name in _BUILTIN or name.startswith("hf:"):
        raise UsageError(f"register_render_model: {name!r} is a built-in render model name")
    if _NAMED.get(name, factory) is not factory:
        raise UsageError(f"register_render_model: a render model named {name!r} is already registered")
    _NAMED[name] = factory


@functools.cache
def _named(name: str) -> RenderModel:
    model: RenderModel = _NAMED[name]()
    return model


def get_render_model(name: str | RenderModel) -> RenderModel:
    """A render model by name, or a :class:`RenderModel` passed through.

    Names: ``"deepseek-v3.2"`` (the encoding DeepSeek's API uses today: it reproduces the API's
    reported ``prompt_tokens`` exactly; ``"deepseek-v3.2-thinking"`` for thinking mode, i.e.
    deepseek-reasoner), ``"deepseek-v3"`` (DeepSeek-V3's published chat template, which hoists every
    system message to the front), ``"chatml"``, ``"hf:PATH"`` where PATH is a ``tokenizer_config.json``
    or a ``.jinja`` file, and the names registered with :func:`register_render_model` (a provider's
    name, by its profile: resolve one with :func:`promptkit.providers.resolve.resolve_render`).

    Example::

        >>> get_render_model("chatml").name
        'chatml'
    """
    if not isinstance(name, str):
        if isinstance(name, RenderModel):
            return name
        raise UsageError(
            f"get_render_model: render: expected a name or a RenderModel, got {type(name).__name__}"
        )
    if name in _NAMED:
        return _named(name)
    if name.startswith("hf:") and len(name) > 3:
        return load_chat_template(name[3:])
    raise UsageError(
        f"render: unknown render model {name!r}; known: {', '.join([*_NAMED, 'hf:PATH'])} (a provider's "
        "render is registered by its profile: promptkit.providers.resolve.resolve_render loads the "
        "profiles first)"
    )
