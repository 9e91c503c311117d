"""Bytes of KV cache per token of a model, from its Hugging Face ``config.json``.

A prefix cache holds, for every cached token, what each attention layer keeps of it:

- **standard attention** (multi-head or grouped-query): a key and a value per KV head,
  ``2 × num_key_value_heads × head_dim`` numbers per layer (``head_dim`` defaults to
  ``hidden_size / num_attention_heads``);
- **multi-head latent attention** (MLA: DeepSeek V2/V3, Kimi K2): one compressed latent of
  ``kv_lora_rank`` numbers and one decoupled RoPE key of ``qk_rope_head_dim`` numbers per layer,
  whatever the head count (DeepSeek-V2 technical report, arXiv:2405.04434, section 2.1.3: the cache
  holds ``(d_c + d_h^R) · l`` elements per token);
- **sliding-window layers** keep only the last ``sliding_window`` tokens, so over a prefix of ``T``
  tokens they cost ``min(T, window) / T`` of a full layer per token. Which layers slide:
  ``layer_types`` (``"sliding_attention"`` / ``"full_attention"``, Gemma 3, gpt-oss),
  ``sliding_window_pattern`` (Gemma 3: every ``pattern``-th layer is global), Gemma 2 (every other
  layer, from the first), Qwen2's ``use_sliding_window`` with ``max_window_layers`` (the first
  ``max_window_layers`` layers are full), otherwise a ``sliding_window`` slides every layer
  (Mistral 7B v0.1).

Each number takes the bytes of the KV dtype: the config's ``torch_dtype`` (``dtype`` in newer
files) unless ``kv_dtype=`` says otherwise (an FP8 KV cache: ``kv_dtype="fp8"``).

Example::

    >>> layout = kv_layout({"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    ...                     "hidden_size": 4096, "torch_dtype": "bfloat16"})
    >>> layout.bytes_per_token()          # 2 (K and V) x 32 layers x 8 heads x 128 x 2 bytes
    131072.0
    >>> known_model("deepseek-v3").bytes_per_token()   # 61 layers x (512 + 64) x 2 bytes
    70272.0
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs

from promptkit.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

__all__ = ["KNOWN_MODELS", "KVLayout", "known_model", "kv_bytes_table", "kv_layout", "model_layout"]

_DTYPE_BYTES: Final[dict[str, int]] = {
    "float32": 4, "fp32": 4, "float": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
    "float8": 1, "fp8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1,
}  # fmt: skip


@attrs.frozen(slots=True)
class KVLayout:
    """What one token costs in a model's KV cache, by kind of layer.

    ``attention``: ``"standard"`` or ``"mla"``; ``full_layers`` keep every token, ``sliding_layers``
    the last ``sliding_window`` tokens; ``layer_bytes``: bytes one layer keeps per token.
    """

    name: str
    attention: str
    full_layers: int
    sliding_layers: int
    sliding_window: int | None
    layer_bytes: int
    dtype_bytes: int

    def bytes_per_token(self, context_tokens: int | None = None) -> float:
        """Bytes per cached token; with ``context_tokens`` (the length of the cached prefixes), the
        sliding layers count ``min(context, window) / context`` of a token; without, every layer
        counts fully (what a cache that ignores the window holds: an upper bound).

        >>> known_model("gemma-3-27b").bytes_per_token() > known_model("gemma-3-27b").bytes_per_token(32768)
        True
        """
        sliding: float = float(self.sliding_layers)
        if context_tokens is not None and self.sliding_window is not None and context_tokens > 0:
            sliding *= min(context_tokens, self.sliding_window) / context_tokens
        return (self.full_layers + sliding) * self.layer_bytes

    def tokens_for(self, capacity_bytes: float, context_tokens: int | None = None) -> int:
        """How many tokens ``capacity_bytes`` of KV cache holds.

        >>> known_model("llama-3.1-8b").tokens_for(80 * 2**30)
        655360
        """
        if capacity_bytes <= 0:
            raise UsageError(f"capacity must be > 0 bytes, got {capacity_bytes!r}")
        return int(capacity_bytes // self.bytes_per_token(context_tokens))


def _positive_int(config: Mapping[str, Any], field: str, where: str) -> int:
    value = config.get(field)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise UsageError(f"{where}: field {field!r} must be a positive integer, got {value!r}")
    return value


def _dtype_bytes(value: Any, where: str, field: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str) and value.lower().removeprefix("torch.") in _DTYPE_BYTES:
        return _DTYPE_BYTES[value.lower().removeprefix("torch.")]
    raise UsageError(
        f"{where}: {field} {value!r} is not a dtype promptkit knows ({', '.join(sorted(_DTYPE_BYTES))})"
    )


def _sliding_flags(config: Mapping[str, Any], layers: int, where: str) -> list[bool]:
    """Which layers slide (see the module docstring for the conventions read)."""
    window = config.get("sliding_window")
    types = config.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers:
            raise UsageError(f"{where}: field 'layer_types' must list {layers} layers, got {types!r}")
        unknown = sorted({t for t in types if t not in ("sliding_attention", "full_attention")})
        if unknown:
            raise UsageError(f"{where}: layer_types {unknown} have no KV-per-token formula in promptkit")
        return [t == "sliding_attention" for t in types]
    if window is None:
        return [False] * layers
    if config.get("use_sliding_window") is False:
        return [False] * layers
    pattern = config.get("sliding_window_pattern")
    if pattern is not None:
        if isinstance(pattern, bool) or not isinstance(pattern, int) or pattern <= 0:
            raise UsageError(
                f"{where}: field 'sliding_window_pattern' must be a positive integer, got {pattern!r}"
            )
        return [(i + 1) % pattern != 0 for i in range(layers)]
    if config.get("model_type") == "gemma2":
        return [i % 2 == 0 for i in range(layers)]
    if config.get("use_sliding_window") is True and isinstance(config.get("max_window_layers"), int):
        return [i >= int(config["max_window_layers"]) for i in range(layers)]
    return [True] * layers


def kv_layout(
    config: Mapping[str, Any] | str | os.PathLike[str],
    *,
    kv_dtype: str | int | None = None,
    name: str | None = None,
) -> KVLayout:
    """The :class:`KVLayout` of a model from its ``config.json`` (a mapping or a path).

    A multimodal config's ``text_config`` is read when the top level has no layers. A field that
    makes no sense (no layers, a zero head count, an unknown dtype) is a
    :class:`~promptkit.errors.UsageError` naming the file and the field.

    >>> kv_layout({"num_hidden_layers": 0, "num_attention_heads": 8, "hidden_size": 512})
    Traceback (most recent call last):
    ...
    promptkit.errors.UsageError: config: field 'num_hidden_layers' must be a positive integer, got 0
    """
    where = "config"
    if not isinstance(config, Mapping):
        where = str(config)
        try:
            config = json.loads(Path(config).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise UsageError(f"{where}: cannot read a model config ({exc})") from exc
        if not isinstance(config, Mapping):
            raise UsageError(f"{where}: a model config is a JSON object")
    top = config
    if "num_hidden_layers" not in config and isinstance(config.get("text_config"), Mapping):
        config = {**{k: v for k, v in top.items() if k in ("torch_dtype", "dtype")}, **config["text_config"]}
        where += ": text_config"
    layers = _positive_int(config, "num_hidden_layers", where)
    raw_dtype = (
        kv_dtype if kv_dtype is not None else config.get("torch_dtype", config.get("dtype", "bfloat16"))
    )
    dtype = _dtype_bytes(raw_dtype, where, "kv_dtype" if kv_dtype is not None else "torch_dtype")
    label = name or str(top.get("_name_or_path") or top.get("model_type") or "model")
    if config.get("kv_lora_rank") is not None:  # multi-head latent attention
        rank = _positive_int(config, "kv_lora_rank", where)
        rope = _positive_int(config, "qk_rope_head_dim", where)
        return KVLayout(label, "mla", layers, 0, None, (rank + rope) * dtype, dtype)
    heads = _positive_int(config, "num_attention_heads", where)
    kv_heads = (
        _positive_int(config, "num_key_value_heads", where) if "num_key_value_heads" in config else heads
    )
    if config.get("head_dim") is not None:
        head_dim = _positive_int(config, "head_dim", where)
    else:
        hidden = _positive_int(config, "hidden_size", where)
        if hidden % heads:
            raise UsageError(
                f"{where}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}"
            )
        head_dim = hidden // heads
    flags = _sliding_flags(config, layers, where)
    sliding = sum(flags)
    window = _positive_int(config, "sliding_window", where) if sliding else None
    return KVLayout(
        label, "standard", layers - sliding, sliding, window, 2 * kv_heads * head_dim * dtype, dtype
    )


#: Common open models: (the config.json they come from, the fields of it that size the KV cache).
KNOWN_MODELS: Final[dict[str, tuple[str, dict[str, Any]]]] = {
    "llama-3.1-8b": (
        "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/blob/main/config.json",
        {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
         "torch_dtype": "bfloat16"},
    ),
    "llama-3.1-70b": (
        "https://huggingface.co/meta-llama/Llama-3.1-70B-Instruct/blob/main/config.json",
        {"num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8, "hidden_size": 8192,
         "torch_dtype": "bfloat16"},
    ),
    "qwen2.5-7b": (
        "https://huggingface.co/Qwen/Qwen2.5-7B-Instruct/blob/main/config.json",
        {"num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4, "hidden_size": 3584,
         "sliding_window": 131072, "use_sliding_window": False, "torch_dtype": "bfloat16"},
    ),
    "qwen3-32b": (
        "https://huggingface.co/Qwen/Qwen3-32B/blob/main/config.json",
        {"num_hidden_layers": 64, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
         "hidden_size": 5120, "use_sliding_window": False, "torch_dtype": "bfloat16"},
    ),
    "mistral-7b-v0.1": (
        "https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json",
        {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
         "sliding_window": 4096, "torch_dtype": "bfloat16"},
    ),
    "gemma-3-27b": (
        "https://huggingface.co/google/gemma-3-27b-it/blob/main/config.json",
        {"text_config": {"num_hidden_layers": 62, "num_attention_heads": 32, "num_key_value_heads": 16,
                         "head_dim": 128, "hidden_size": 5376, "sliding_window": 1024,
                         "sliding_window_pattern": 6},
         "torch_dtype": "bfloat16"},
    ),
    "gpt-oss-120b": (
        "https://huggingface.co/openai/gpt-oss-120b/blob/main/config.json",
        {"num_hidden_layers": 36, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
         "hidden_size": 2880, "sliding_window": 128,
         "layer_types": ["sliding_attention", "full_attention"] * 18, "torch_dtype": "bfloat16"},
    ),
    "deepseek-v3": (
        "https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json",
        {"num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "hidden_size": 7168,
         "kv_lora_rank": 512, "qk_rope_head_dim": 64, "torch_dtype": "bfloat16"},
    ),
}  # fmt: skip


def known_model(name: str, *, kv_dtype: str | int | None = None) -> KVLayout:
    """The :class:`KVLayout` of a model of :data:`KNOWN_MODELS`.

    >>> known_model("llama-3.1-70b").bytes_per_token()
    327680.0
    """
    if name not in KNOWN_MODELS:
        raise UsageError(
            f"unknown model {name!r}; known: {', '.join(KNOWN_MODELS)} (or give a config.json path)"
        )
    return kv_layout(KNOWN_MODELS[name][1], kv_dtype=kv_dtype, name=name)


def model_layout(model: str | os.PathLike[str], *, kv_dtype: str | int | None = None) -> KVLayout:
    """A model by name (:data:`KNOWN_MODELS`) or by the path of its ``config.json``.

    >>> model_layout("deepseek-v3").attention
    'mla'
    """
    if isinstance(model, str) and model in KNOWN_MODELS:
        return known_model(model, kv_dtype=kv_dtype)
    if not Path(model).is_file():
        raise UsageError(
            f"model {str(model)!r} is neither a known model ({', '.join(KNOWN_MODELS)}) nor a file"
        )
    return kv_layout(model, kv_dtype=kv_dtype, name=Path(model).parent.name or str(model))


def kv_bytes_table(context_tokens: int = 32768) -> pl.DataFrame:
    """The KV bytes per token of :data:`KNOWN_MODELS` (every token in every layer, and with the
    sliding layers amortized over ``context_tokens``), with each row's source.

    >>> table = kv_bytes_table()
    >>> dict(zip(table["model"], table["kib_per_token"]))["deepseek-v3"]
    68.625
    """
    import polars as pl

    rows = []
    for name, (source, _) in KNOWN_MODELS.items():
        layout = known_model(name)
        rows.append(
            {
                "model": name,
                "attention": layout.attention,
                "full_layers": layout.full_layers,
                "sliding_layers": layout.sliding_layers,
                "sliding_window": layout.sliding_window,
                "kib_per_token": layout.bytes_per_token() / 1024,
                "kib_per_token_at_context": layout.bytes_per_token(context_tokens) / 1024,
                "source": source,
            }
        )
    return pl.DataFrame(rows)
