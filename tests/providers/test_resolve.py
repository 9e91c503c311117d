"""The name resolvers: a provider's name is its profile's object; any other name or object is the
mechanism's (``promptkit/tokens/``)."""

from __future__ import annotations

import pytest

from promptkit.errors import PromptkitError
from promptkit.providers.registry import get_provider
from promptkit.providers.resolve import resolve_cache_model, resolve_render, resolve_tokenizer
from promptkit.tokens.cache_models import UnitPrefixCache
from promptkit.tokens.render import get_render_model
from promptkit.tokens.tokenizers import get_tokenizer


def test_a_provider_name_gives_its_profiles_objects() -> None:
    assert resolve_tokenizer("openai").name == get_provider("openai").load_tokenizer().name == "o200k_base"
    assert resolve_render("anthropic").name == get_provider("anthropic").load_render().name
    deepseek = resolve_cache_model("deepseek")
    assert isinstance(deepseek, UnitPrefixCache) and deepseek.cache_unit == 64


def test_other_names_and_objects_go_to_the_mechanisms() -> None:
    assert resolve_tokenizer("cl100k_base").name == "cl100k_base"
    assert resolve_tokenizer().name == "cl100k_base"
    tok = get_tokenizer("o200k_base")
    assert resolve_tokenizer(tok) is tok
    assert (
        resolve_render("deepseek-v3").name
        == get_render_model("deepseek-v3").name
        != get_render_model("chatml").name
    )
    render = get_render_model("chatml")
    assert resolve_render(render) is render


def test_overrides_reach_the_model_either_way() -> None:
    assert resolve_cache_model("unit-prefix", unit=32).cache_unit == 32
    assert resolve_cache_model("deepseek", unit=16).cache_unit == 16
    model = UnitPrefixCache(unit=8)
    assert resolve_cache_model(model).cache_unit == 8


def test_an_unknown_name_is_a_clear_error() -> None:
    with pytest.raises(PromptkitError, match="no-such-tokenizer"):
        resolve_tokenizer("no-such-tokenizer")
    with pytest.raises(PromptkitError, match="no-such-model"):
        resolve_cache_model("no-such-model")
