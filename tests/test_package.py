"""Package-level contracts: cheap import, every public name resolves, typed package."""

from __future__ import annotations

import importlib.resources
import subprocess
import sys

import pytest

import promptkit

HEAVY = ("polars", "matplotlib", "numpy", "tokenizers", "jinja2", "tiktoken")


def test_import_promptkit_is_light() -> None:
    code = (
        "import sys, promptkit\n"
        "from promptkit import Message, prepare_llm_messages, PromptRegistry, openai_request, Anchor\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"import promptkit pulled in heavy modules: {out.stdout.strip()}"


def test_every_public_name_resolves() -> None:
    missing = []
    for name in promptkit.__all__:
        try:
            getattr(promptkit, name)
        except (AttributeError, ImportError) as exc:
            missing.append(f"{name}: {exc}")
    assert not missing, "\n".join(missing)


def test_unknown_name_is_attribute_error() -> None:
    try:
        promptkit.does_not_exist  # noqa: B018
    except AttributeError as exc:
        assert "does_not_exist" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_py_typed_is_shipped() -> None:
    assert importlib.resources.files("promptkit").joinpath("py.typed").is_file()


def test_the_top_level_is_the_core_api_and_chat_helpers_live_in_promptkit_chat() -> None:
    import promptkit
    import promptkit.chat

    assert len(promptkit.__all__) <= 40
    assert {"Message", "PromptRegistry", "analyze", "read_logs", "PromptkitError"} <= set(promptkit.__all__)
    assert "format_at" not in promptkit.__all__ and "format_at" in promptkit.chat.__all__
    # a name that moved still resolves, with a warning that names its new home
    with pytest.warns(DeprecationWarning, match=r"promptkit\.format_at moved to promptkit\.chat\.format_at"):
        moved = promptkit.format_at
    assert moved is promptkit.chat.format_at
    with pytest.raises(AttributeError):
        promptkit.no_such_name  # noqa: B018


def test_at_most_40_top_level_names_each_resolving_and_the_plots_live_in_the_report() -> None:
    import promptkit.report.plots

    assert len(promptkit.__all__) <= 40
    assert len(set(promptkit.__all__)) == len(promptkit.__all__)
    for name in promptkit.__all__:
        assert getattr(promptkit, name) is not None, name
    for name in ("plot_hit_ratio", "plot_composition", "plot_predicted_vs_reported"):
        assert name not in promptkit.__all__
        with pytest.warns(
            DeprecationWarning, match=rf"promptkit\.{name} moved to promptkit\.report\.plots\.{name}"
        ):
            moved = getattr(promptkit, name)
        assert moved is getattr(promptkit.report.plots, name)
