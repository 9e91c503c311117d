"""The shape of the house, checked from the code's own imports (docs/concepts/architecture.md).

Data flows one way: chat -> assembly -> tokens -> providers -> formats -> analysis -> report ->
whatif/proxy -> cli. These tests read every module's imports (function-local and type-checking ones
too) with :mod:`ast`, so a new upward import or a cycle between concerns fails here, naming file and line.

``tokens`` holds what a provider profile builds its objects from (the tokenizers, the chat-template
renders, the request tokenizer and the cache models): it sits below the providers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "promptkit"

# the floors, lowest first; a concern may import only its own floor and those below it
FLOORS: list[set[str]] = [
    {"errors", "lazy", "plugins"},
    {"layout"},
    {"codelint"},  # reads the anchors of promptkit.layout; nothing above it
    {"chat"},
    {"assembly"},
    {"tokens"},
    {"providers"},
    {"formats"},
    {"analysis"},
    {"report"},
    {"whatif", "proxy", "capture", "testing", "cache", "commands"},
    {"cli", "__main__", "__init__"},
]
FLOOR_OF = {concern: i for i, floor in enumerate(FLOORS) for concern in floor}


def modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


def concern(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports_of(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every promptkit module ``module`` imports, with the line (``if TYPE_CHECKING`` imports too)."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("promptkit"):
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
                if not node.module:  # "from . import x": x is a module of the package
                    for alias in node.names:
                        yield f"{target}.{alias.name}", node.lineno
                    continue
            else:
                target = node.module or ""
            if target.startswith("promptkit"):
                yield target, node.lineno


ALL = dict(modules())


def test_every_concern_has_a_floor() -> None:
    unknown = sorted({concern(m) for m in ALL} - set(FLOOR_OF))
    assert not unknown, f"give these a floor in FLOORS: {unknown}"


def test_nothing_imports_upward() -> None:
    upward = []
    for module, path in ALL.items():
        here = concern(module)
        for target, line in imports_of(module, path):
            there = concern(target)
            if there == here or there not in FLOOR_OF:
                continue
            if FLOOR_OF[there] > FLOOR_OF[here]:
                upward.append(f"{path.relative_to(ROOT)}:{line}: {here} imports {target}")
    assert not upward, "imports that run back up:\n" + "\n".join(upward)


def test_analysis_never_imports_presentation_or_its_users() -> None:
    banned = ("promptkit.report", "promptkit.cli", "promptkit.whatif", "promptkit.proxy", "promptkit.cache")
    found = [
        f"{path.relative_to(ROOT)}:{line}: {target}"
        for module, path in ALL.items()
        if concern(module) in ("analysis", "tokens")
        for target, line in imports_of(module, path)
        if target.startswith(banned)
    ]
    assert not found, "the analysis knows nothing of presentation:\n" + "\n".join(found)


def test_no_import_cycle_between_concerns() -> None:
    graph: dict[str, set[str]] = {}
    for module, path in ALL.items():
        for target, _ in imports_of(module, path):
            if concern(target) != concern(module):
                graph.setdefault(concern(module), set()).add(concern(target))
    # depth-first search for a back edge
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, trail: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle.extend([*trail, node, nxt])
                return True
            if nxt not in state and visit(nxt, [*trail, node]):
                return True
        state[node] = 2
        return False

    for node in sorted(graph):
        if node not in state and visit(node, []):
            break
    assert not cycle, " -> ".join(cycle)


def test_the_report_never_calls_back_into_the_analysis_run() -> None:
    """The report reads results (it may name their types); it never runs an analysis itself, and reads
    the causes the result holds (``result.causes``) instead of computing them again."""
    runs = {"analyze", "analyze_requests", "analyze_files", "explain_causes"}  # causes: result.causes
    found = []
    for module, path in ALL.items():
        if concern(module) != "report":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("promptkit.analysis"):
                found += [
                    f"{path.relative_to(ROOT)}:{node.lineno}: {a.name}" for a in node.names if a.name in runs
                ]
    assert not found, "the report runs an analysis:\n" + "\n".join(found)


def test_the_checks_see_an_upward_import(tmp_path: Path) -> None:
    """imports_of reads relative, absolute, function-local and type-checking imports."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\nimport promptkit.report\nif TYPE_CHECKING:\n"
        "    from promptkit.whatif import replay\ndef f():\n    from . import sibling\n"
    )
    found = {target for target, _ in imports_of("promptkit.analysis.sample", sample)}
    assert found == {"promptkit.report", "promptkit.whatif", "promptkit.analysis.sibling"}
    assert (
        concern("promptkit.tokens.cache_models") == "tokens"
        and concern("promptkit.analysis.engine") == "analysis"
    )


def test_no_bare_built_in_raise() -> None:
    """Every error the library raises is a PromptkitError subclass (which may also be the built-in):
    ``raise ValueError(...)`` and the like do not appear in promptkit/ (a re-raise ``raise`` does)."""
    import builtins

    built_in = {
        name
        for name, value in vars(builtins).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    found = []
    for _, path in ALL.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Raise) and node.exc is not None:
                target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(target, ast.Name) and target.id in built_in:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {target.id}")
    assert not found, "bare built-in raises:\n" + "\n".join(found)


#: Profiles that model no provider (an ideal cache, the rules for an unrecognised one): their names are
#: words of the analysis ("exact" prefix), not a provider's.
ANALYSIS_ONLY_PROFILES = frozenset({"exact", "generic"})


def provider_names() -> set[str]:
    """The names of the registered provider profiles (built-ins and plugins), lower-cased."""
    from promptkit.providers.registry import available_providers

    return {name.lower() for name in available_providers()} - ANALYSIS_ONLY_PROFILES


def code_strings(source: str, filename: str = "<sample>") -> Iterator[tuple[int, str]]:
    """Every string constant of ``source`` that is not a docstring (f-string pieces included)."""
    tree = ast.parse(source, filename)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def test_no_module_outside_providers_names_a_provider() -> None:
    """Provider knowledge lives in the profiles (``promptkit/providers/``): no other module holds a
    string that is a provider's name (docstrings aside); it asks a profile a capability question,
    resolves a name through :mod:`promptkit.providers.resolve`, or reads the name from a profile."""
    names = provider_names()
    assert {"deepseek", "anthropic", "openai", "gemini", "vllm"} <= names  # the profiles are loaded
    found = [
        f"{path.relative_to(ROOT)}:{line}: {value!r}"
        for module, path in ALL.items()
        if concern(module) != "providers"
        for line, value in code_strings(path.read_text(encoding="utf-8"), str(path))
        if value.lower() in names
    ]
    assert not found, "provider names outside promptkit/providers:\n" + "\n".join(found)


def test_the_provider_name_check_sees_code_and_not_docstrings() -> None:
    sample = '"""Reads DeepSeek logs."""\nX = "OpenAI"\ndef f():\n    """anthropic"""\n    return f"{X}/gemini" + "vllm"\n'
    assert [(line, v) for line, v in code_strings(sample) if v.lower() in provider_names()] == [
        (2, "OpenAI"),
        (5, "vllm"),
    ]
