"""Provider knowledge lives in the profiles: the analysis modules this issue cleaned name no provider."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from promptkit.providers.registry import available_providers

#: Modules whose provider tables and name comparisons were replaced by capability questions.
CLEANED = (
    "promptkit/analysis/engine.py",
    "promptkit/analysis/simulator.py",
    "promptkit/analysis/causes.py",
    "promptkit/analysis/calibration.py",
    "promptkit/formats/opaque_head.py",
    "promptkit/formats/litellm.py",
    "promptkit/formats/otel_genai.py",
)


def _code_strings(path: str) -> list[tuple[int, str]]:
    """String constants of a module's code: docstrings and f-string text left out."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    joined = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and id(node) not in joined
    ]


@pytest.mark.parametrize("path", CLEANED)
def test_no_provider_is_named_in_code(path: str) -> None:
    names = set(available_providers()) - {"exact", "generic"}  # analysis-only profiles are not providers
    found = [(line, s) for line, s in _code_strings(path) if s.lower() in names]
    assert found == [], f"{path} names a provider in code: {found}"


def test_the_check_finds_a_provider_name(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""doc: deepseek"""\nDEFAULT = "deepseek"\nNOTE = f"as {DEFAULT} does"\n', encoding="utf-8"
    )
    assert _code_strings(str(sample)) == [(2, "deepseek")]
