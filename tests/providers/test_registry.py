"""Provider profiles as objects: recognition, capability answers, usage parsers, entry points."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from promptkit.errors import RecordFormatError
from promptkit.providers.gemini import gemini_usage
from promptkit.providers.registry import (
    ENTRY_POINT_GROUP,
    GENERIC_PROVIDER,
    available_providers,
    get_provider,
    infer_provider,
    normalize_usage,
    usage_shape,
)
from promptkit.tokens.cache_models import CacheModel, PrefixCache

# ------------------------------------------------------------------------------------ recognition


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://localhost:11434/api/chat", "ollama"),  # Ollama's port, whatever the host
        ("http://10.0.0.5:11434/v1/chat/completions", "ollama"),
        ("https://api.deepseek.com/chat/completions", "deepseek"),
        (
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent",
            "gemini",
        ),
        ("https://us-central1-aiplatform.googleapis.com/v1/projects/p", "gemini"),
        ("https://dashscope-intl.aliyuncs.com/compatible-mode/v1", "qwen"),
        ("https://api.moonshot.ai/v1", "kimi"),
        ("http://127.0.0.1:8000/v1", None),
    ],
)
def test_one_infer_provider_for_urls(url: str, expected: str | None) -> None:
    assert infer_provider(url=url) == expected


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("anthropic/claude-sonnet-4.5", "anthropic"),
        ("openai/gpt-4.1-mini", "openai"),
        ("deepseek/deepseek-chat", "deepseek"),
        ("google/gemini-3-pro-preview", "gemini"),
        ("models/gemini-2.5-flash", "gemini"),
        ("gemini-2.5-pro", "gemini"),
        ("qwen/qwen3-coder", "qwen"),
        ("z-ai/glm-4.6", "glm"),
        ("minimax/minimax-m2", "minimax"),
        ("moonshotai/kimi-k2-0905", "kimi"),
        ("google/gemma-3-27b-it", None),  # Google's open model: not Gemini's cache
        ("my-finetune", None),
    ],
)
def test_a_router_routes_vendor_model_names_to_the_vendor(model: str, expected: str | None) -> None:
    assert infer_provider(url="https://openrouter.ai/api/v1/chat/completions", model=model) == expected


def test_usage_objects_are_recognised_by_their_own_keys_before_openai_compatible_ones() -> None:
    assert infer_provider(usage={"promptTokenCount": 10, "cachedContentTokenCount": 0}) == "gemini"
    assert infer_provider(usage={"prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": 5}) == "deepseek"
    assert infer_provider(usage={"input_tokens": 1, "cache_read_input_tokens": 0}) == "anthropic"
    openrouter = {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 0}, "cost": 0.1}
    assert infer_provider(usage=openrouter) == "openai"
    assert usage_shape({"cachedContentTokenCount": 3}) == "gemini"
    # a URL beats a model name, a model name beats usage
    assert (
        infer_provider(url="https://api.deepseek.com", model="gpt-4o", usage={"promptTokenCount": 1})
        == "deepseek"
    )
    assert infer_provider(model="gpt-4o", usage={"promptTokenCount": 1}) == "openai"


# ------------------------------------------------------------------------ objects and capabilities


def test_profiles_give_objects_not_names() -> None:
    for name, profile in available_providers().items():
        assert isinstance(profile.cache_model, CacheModel), name
        assert isinstance(profile.new_cache_model(), CacheModel), name
    assert get_provider("gemini").new_cache_model(ttl=60).ttl == 60
    assert get_provider("deepseek").load_tokenizer().name == "deepseek"


@pytest.mark.parametrize(
    ("name", "exact_tokenizer", "best_effort", "exact_entries", "unit", "minimum"),
    [
        ("deepseek", True, True, False, 64, 0),
        ("openai", False, True, False, 128, 1024),  # routed by the prompt's start: best effort
        ("anthropic", False, False, True, None, 1024),
        ("gemini", False, True, False, None, 1024),
        ("qwen", True, True, False, None, 256),
        ("glm", True, True, False, None, 0),
        ("minimax", True, True, False, None, 512),
        ("kimi", False, True, False, None, 0),
        (GENERIC_PROVIDER, False, False, False, None, 0),
    ],
)
def test_capability_answers(
    name: str, exact_tokenizer: bool, best_effort: bool, exact_entries: bool, unit: int | None, minimum: int
) -> None:
    p = get_provider(name)
    assert (p.exact_tokenizer, p.best_effort, p.exact_entries, p.cache_unit, p.min_cacheable_tokens()) == (
        exact_tokenizer,
        best_effort,
        exact_entries,
        unit,
        minimum,
    )


def test_minimum_per_model() -> None:
    gemini, anthropic = get_provider("gemini"), get_provider("anthropic")
    assert gemini.min_cacheable_tokens("gemini-2.5-pro") == 2048
    assert gemini.min_cacheable_tokens("google/gemini-3-pro-preview") == 2048
    assert gemini.min_cacheable_tokens("gemini-2.5-flash-lite") == 1024
    assert anthropic.min_cacheable_tokens("claude-haiku-4-5") == 4096


def test_the_best_effort_providers_with_real_logs_have_a_bundled_calibration() -> None:
    from promptkit.analysis.calibration import default_calibration

    assert {n for n, p in available_providers().items() if p.calibration} == {"deepseek", "gemini", "openai"}
    assert default_calibration("gemini").provider == "gemini"
    assert default_calibration("openai").provider == "openai"
    assert default_calibration("openai").fitted_on["runs"] == 7  # the seven public Codex rollouts
    assert default_calibration("qwen") is None


@pytest.mark.slow
def test_open_model_tokenizers_load_offline_and_are_the_providers_own() -> None:
    qwen = get_provider("qwen").load_tokenizer()
    assert qwen.name == "qwen-3"
    assert qwen.encode("hello world") == [14990, 1879]  # Qwen's vocabulary (cl100k would give 15339, 1917)
    assert get_provider("glm").load_tokenizer().name == "glm-4.5v"
    assert get_provider("minimax").load_tokenizer().name == "minimax"


# ------------------------------------------------------------------------------------------- usage


def test_gemini_usage_metadata_is_parsed_in_both_spellings() -> None:
    camel = {"promptTokenCount": 5000, "cachedContentTokenCount": 4000, "candidatesTokenCount": 7}
    snake = {"prompt_token_count": 5000, "cached_content_token_count": 4000, "candidates_token_count": 7}
    for usage in (camel, snake):
        u = normalize_usage(usage)
        assert (u.prompt_tokens, u.cached_tokens, u.completion_tokens) == (5000, 4000, 7)
    assert get_provider("gemini").parse_usage(camel) == normalize_usage(camel)


def test_openrouter_usage_of_a_gemini_call_is_read_as_openai_style() -> None:
    usage = {"prompt_tokens": 2398, "completion_tokens": 71, "prompt_tokens_details": {"cached_tokens": 2006}}
    u = gemini_usage(usage)
    assert (u.prompt_tokens, u.cached_tokens, u.completion_tokens) == (2398, 2006, 71)


def test_a_bad_gemini_count_names_the_field() -> None:
    with pytest.raises(RecordFormatError, match=r"usage\.cachedContentTokenCount"):
        normalize_usage({"promptTokenCount": 10, "cachedContentTokenCount": -1})


# ------------------------------------------------------------------------------------ registration


def test_built_ins_are_registered_through_the_entry_points_declared_in_pyproject() -> None:
    declared = tomllib.loads(Path("pyproject.toml").read_text())["project"]["entry-points"][ENTRY_POINT_GROUP]
    installed = {ep.name: ep.value for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    assert declared.items() <= installed.items()
    assert set(declared) == set(available_providers())
    for name, target in declared.items():
        module, attribute = target.split(":")
        assert getattr(__import__(module, fromlist=[attribute]), attribute) is get_provider(name)


def test_prefix_cache_rules() -> None:
    from promptkit.tokens.cache_models import CacheEntry, CachePlan

    model = PrefixCache(min_tokens=100, min_tokens_by_model={"big-": 1000}, unit=16)
    plan = CachePlan(prompt_len=500, entries=(CacheEntry(500),))
    assert model.cached_tokens(plan, prefix_tokens=450) == 448  # whole units only
    assert model.cached_tokens(CachePlan(prompt_len=500), prefix_tokens=450) == 0  # under the minimum
    assert model.min_cacheable_tokens("vendor/big-model") == 1000
    assert model.min_cacheable_tokens("small") == 100


def test_names_other_tools_give_a_provider_resolve_through_the_profiles() -> None:
    from promptkit.providers.registry import provider_named

    assert provider_named("Azure.AI.OpenAI") == "openai"  # OpenTelemetry's name, case ignored
    assert provider_named("ollama_chat") == "ollama" and provider_named("hosted_vllm") == "vllm"  # LiteLLM's
    assert provider_named("gcp.vertex_ai") == "gemini" and provider_named("vertex_ai") == "gemini"
    assert provider_named("deepseek") == "deepseek"  # a profile's own name
    assert provider_named("aws.bedrock") is None  # hosts many providers' models: the model name decides


def test_a_profile_prices_its_models_by_family() -> None:
    anthropic = get_provider("anthropic")
    assert anthropic.price("claude-sonnet-4-5-20250929") is anthropic.prices["claude-sonnet-4-5"]
    assert anthropic.price("anthropic/claude-opus-4-1").cache_miss == 15.0
    assert get_provider("gemini").price("gemini-2.5-flash-lite").cache_miss == 0.10  # longest name wins
    assert get_provider("deepseek").price(None) is get_provider("deepseek").prices["deepseek-chat"]
    assert get_provider("generic").price("anything") is None


def test_glm_and_minimax_render_with_their_own_chat_templates() -> None:
    from promptkit.tokens.render.base import rendered_text

    body = {"messages": [{"role": "system", "content": "terse"}, {"role": "user", "content": "hi"}]}
    glm = rendered_text(get_provider("glm").load_render().render(body))
    minimax = rendered_text(get_provider("minimax").load_render().render(body))
    # GLM's template opens with [gMASK]<sop> and marks roles <|system|>, <|user|>; none writes ChatML
    assert glm.startswith("[gMASK]<sop>") and "<|user|>" in glm and "<|im_start|>" not in glm
    assert "terse" in minimax and "<|im_start|>" not in minimax
    assert rendered_text(get_provider("qwen").load_render().render(body)).startswith("<|im_start|>system")


def test_the_usage_names_that_moved_to_the_registry_warn() -> None:
    """``normalize_usage`` and ``usage_shape`` dispatch over the profiles, so they live in the registry;
    the old names work for one release with a DeprecationWarning naming the new home."""
    import promptkit.providers.usage as old

    with pytest.warns(DeprecationWarning, match=r"promptkit\.providers\.registry\.normalize_usage"):
        assert old.normalize_usage is normalize_usage
    with pytest.warns(DeprecationWarning, match=r"promptkit\.providers\.registry\.usage_shape"):
        assert old.usage_shape is usage_shape
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = old.no_such_name
