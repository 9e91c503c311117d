"""promptkit/lazy.py: the one lazy-export helper of the packages."""

from __future__ import annotations

import sys

import pytest

from promptkit.errors import PromptkitError, UnknownAttributeError
from promptkit.lazy import LazyExports


def test_a_name_is_imported_on_first_use_and_kept() -> None:
    exports = LazyExports("pkg", {"dumps": "json", "sqrt": "math"})
    namespace: dict[str, object] = {}
    assert exports.names == ["dumps", "sqrt"]
    assert exports.module_of("dumps") == "json" and exports.module_of("nope") is None
    dumps = exports.load("dumps", namespace)
    assert dumps({"a": 1}) == '{"a": 1}'
    assert namespace == {"dumps": dumps}  # kept, so the next lookup does not come back here
    assert exports.dir({"x": 1}) == ["dumps", "sqrt", "x"]


def test_an_unknown_name_is_an_attribute_error_naming_the_package() -> None:
    exports = LazyExports("promptkit.demo", {"sqrt": "math"})
    with pytest.raises(
        UnknownAttributeError, match=r"module 'promptkit.demo' has no attribute 'nope'"
    ) as info:
        exports.load("nope", {})
    assert isinstance(info.value, AttributeError) and isinstance(info.value, PromptkitError)


def test_the_packages_stay_light_and_answer_hasattr() -> None:
    import promptkit
    import promptkit.whatif

    assert not hasattr(promptkit, "no_such_name") and not hasattr(promptkit.whatif, "no_such_name")
    assert "analyze" in dir(promptkit) and "replay" in dir(promptkit.whatif)
    assert promptkit.whatif.parse_transform("sort-tools").describe().startswith("sort tool definitions")


def test_the_deprecated_cache_alias_gives_the_moved_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    monkeypatch.delitem(sys.modules, "promptkit.cache.engine", raising=False)  # imported afresh here
    with pytest.warns(DeprecationWarning, match="promptkit.analysis.engine"):
        old = importlib.import_module("promptkit.cache.engine")
    assert old is sys.modules["promptkit.analysis.engine"]
    import promptkit.cache

    with pytest.warns(DeprecationWarning, match="promptkit.report.causes_by_cause"):
        causes_by_cause = promptkit.cache.causes_by_cause
    from promptkit.report import causes_by_cause as moved

    assert causes_by_cause is moved


def test_the_deprecated_engine_module_re_exports_the_stages_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """``promptkit.analysis.engine`` (the analysis' former single module) warns once imported and hands
    out the very objects of the stage modules, for one release."""
    import importlib

    monkeypatch.delitem(sys.modules, "promptkit.analysis.engine", raising=False)
    with pytest.warns(DeprecationWarning, match="promptkit.analysis.engine is deprecated"):
        old = importlib.import_module("promptkit.analysis.engine")
    from promptkit.analysis import api, columns, result, spec

    assert old.analyze is api.analyze and old.analyze_requests is api.analyze_requests
    assert old.AnalysisResult is result.AnalysisResult and old.RequestRow is columns.RequestRow
    assert old.REQUEST_COLUMNS == columns.REQUEST_COLUMNS and old.VIEWS == spec.VIEWS
    assert set(old.__all__) >= {
        "analyze",
        "analyze_requests",
        "AnalysisResult",
        "REQUEST_COLUMNS",
        "PROBLEM_COLUMNS",
    }


def _modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    import json
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_the_analysis_reads_messages_and_profiles_without_the_platform_grammars_or_the_builders() -> None:
    """``promptkit.chat`` and ``promptkit.providers`` load a submodule when one of its names is first
    used: reading the message types and the provider profiles (what an analysis needs) leaves out the
    chat platform's grammars, the delivery's asyncio and the request builders' record writer."""
    loaded = _modules_after(
        "from promptkit.chat.egress import to_llm_role\n"
        "from promptkit.providers.registry import available_providers\n"
        "available_providers()"
    )
    assert {"promptkit.chat.message", "promptkit.providers.deepseek"} <= loaded
    assert not loaded & {
        "asyncio",
        "promptkit.chat.platform",
        "promptkit.chat.mentions",
        "promptkit.providers.record",
    }


def test_every_name_of_chat_and_providers_is_its_submodules_object() -> None:
    import importlib

    import promptkit.chat
    import promptkit.providers

    for package in (promptkit.chat, promptkit.providers):
        for name in package.__all__:
            value = getattr(package, name)
            assert name in dir(package)
            owners = [m for m in list(sys.modules.values()) if m is not None
                      and (m.__name__ or "").startswith(package.__name__ + ".")
                      and getattr(m, name, None) is value]  # fmt: skip
            assert owners, f"{package.__name__}.{name} is no submodule's object"
    assert promptkit.chat.Message is importlib.import_module("promptkit.chat.message").Message
    assert (
        promptkit.providers.request_record
        is importlib.import_module("promptkit.providers.record").request_record
    )
