"""Tests for promptkit/analysis/kv_bytes.py: KV-cache bytes per token from a config.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptkit.analysis.kv_bytes import KNOWN_MODELS, known_model, kv_bytes_table, kv_layout, model_layout
from promptkit.errors import PromptkitError

LLAMA_8B = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096}


def test_standard_attention_is_two_layers_heads_dim_bytes() -> None:
    assert kv_layout({**LLAMA_8B, "torch_dtype": "bfloat16"}).bytes_per_token() == 2 * 32 * 8 * 128 * 2
    assert kv_layout({**LLAMA_8B, "torch_dtype": "float32"}).bytes_per_token() == 2 * 32 * 8 * 128 * 4
    assert kv_layout(LLAMA_8B, kv_dtype="fp8").bytes_per_token() == 2 * 32 * 8 * 128 * 1
    # an explicit head_dim wins over hidden_size / heads; no num_key_value_heads means one per head
    assert kv_layout({**LLAMA_8B, "head_dim": 64}).bytes_per_token() == 2 * 32 * 8 * 64 * 2
    no_gqa = {k: v for k, v in LLAMA_8B.items() if k != "num_key_value_heads"}
    assert kv_layout(no_gqa).bytes_per_token() == 2 * 32 * 32 * 128 * 2


def test_mla_caches_the_latent_and_the_rope_key_per_layer() -> None:
    v3 = {"num_hidden_layers": 61, "num_attention_heads": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64}
    assert kv_layout(v3).bytes_per_token() == 61 * (512 + 64) * 2
    # whatever the head count: the latent is shared by every head
    assert kv_layout({**v3, "num_attention_heads": 16}).bytes_per_token() == 61 * (512 + 64) * 2
    assert kv_layout(v3).attention == "mla"


def test_sliding_window_pattern_and_amortized_bytes() -> None:
    gemma = known_model("gemma-3-27b")
    # every 6th of 62 layers is global: layers 5, 11, ..., 59
    assert (gemma.full_layers, gemma.sliding_layers, gemma.sliding_window) == (10, 52, 1024)
    per_layer = 2 * 16 * 128 * 2
    assert gemma.bytes_per_token() == 62 * per_layer
    assert gemma.bytes_per_token(8192) == pytest.approx((10 + 52 * 1024 / 8192) * per_layer)
    assert gemma.bytes_per_token(512) == 62 * per_layer  # shorter than the window: every layer keeps all


@pytest.mark.parametrize(
    ("config", "sliding"),
    [
        ({"sliding_window": 4096}, 32),  # Mistral 7B v0.1: every layer
        ({"sliding_window": 4096, "use_sliding_window": False}, 0),  # Qwen2 with the window off
        ({"sliding_window": 4096, "use_sliding_window": True, "max_window_layers": 20}, 12),
        ({"sliding_window": 4096, "model_type": "gemma2"}, 16),
        ({"sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"] * 16}, 16),
        ({}, 0),
    ],
)
def test_which_layers_slide(config: dict[str, Any], sliding: int) -> None:
    layout = kv_layout({**LLAMA_8B, **config})
    assert (layout.sliding_layers, layout.full_layers) == (sliding, 32 - sliding)


def test_text_config_and_a_config_file(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"text_config": LLAMA_8B, "torch_dtype": "float16"}))
    assert model_layout(path).bytes_per_token() == 2 * 32 * 8 * 128 * 2
    assert kv_layout(path, kv_dtype=4).bytes_per_token() == 2 * 32 * 8 * 128 * 4


def test_table_lists_every_known_model_with_its_source() -> None:
    table = kv_bytes_table()
    assert table["model"].to_list() == list(KNOWN_MODELS)
    assert all(s.startswith("https://huggingface.co/") and s.endswith("config.json") for s in table["source"])
    rows = dict(zip(table["model"], table["kib_per_token"], strict=True))
    assert rows["llama-3.1-70b"] == 2 * 80 * 8 * 128 * 2 / 1024
    assert rows["deepseek-v3"] == 61 * 576 * 2 / 1024


def test_tokens_for_a_capacity() -> None:
    assert known_model("deepseek-v3").tokens_for(70272 * 1000) == 1000


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({**LLAMA_8B, "num_hidden_layers": 0}, "'num_hidden_layers'"),
        ({k: v for k, v in LLAMA_8B.items() if k != "num_hidden_layers"}, "'num_hidden_layers'"),
        ({**LLAMA_8B, "num_key_value_heads": -8}, "'num_key_value_heads'"),
        ({**LLAMA_8B, "hidden_size": 4000, "num_attention_heads": 30}, "hidden_size 4000"),
        ({**LLAMA_8B, "torch_dtype": "float7"}, "'float7'"),
        ({**LLAMA_8B, "layer_types": ["full_attention"] * 3}, "'layer_types'"),
        ({**LLAMA_8B, "layer_types": ["linear_attention"] * 32}, "linear_attention"),
        ({**LLAMA_8B, "sliding_window": 0}, "'sliding_window'"),
        ({"num_hidden_layers": 61, "kv_lora_rank": 512}, "'qk_rope_head_dim'"),
    ],
)
def test_nonsensical_config_is_one_clear_error(config: dict[str, Any], named: str) -> None:
    with pytest.raises(PromptkitError, match=named):
        kv_layout(config)


def test_bad_model_names_and_files(tmp_path: Path) -> None:
    with pytest.raises(PromptkitError, match="'gpt-9'"):
        model_layout("gpt-9")
    bad = tmp_path / "config.json"
    bad.write_text("[1, 2]")
    with pytest.raises(PromptkitError, match="JSON object"):
        model_layout(bad)
    with pytest.raises(PromptkitError, match="capacity"):
        known_model("llama-3.1-8b").tokens_for(0)
