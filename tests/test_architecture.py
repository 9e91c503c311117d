"""The shape of the house, checked from the code's own imports (docs/concepts/architecture.md).

Data flows one way: chat -> assembly -> tokens -> providers -> formats -> analysis -> report ->
whatif/proxy -> cli. These tests read every module's imports (function-local and type-checking ones
too) with :mod:`ast`, so a new upward import or a cycle between concerns fails here, naming file and line.

Module by module (DESIGN.md, "Rules of the house"), from the syntax tree too: no module over 1,000 lines;
no private name (``_x``) taken from another module unless that module is private (``_name.py``), by
``from m import _x`` or by ``m._x`` on an imported module; no import circle between modules, function-local
imports included (``if TYPE_CHECKING:`` imports never run, so they are left out); no ``hasattr`` /
``getattr`` on an executor (an executor declares what it can do). Each check is a function of a package
directory, and each is run once on a small planted package to show that it catches what it is for.

``tokens`` holds what a provider profile builds its objects from (the tokenizers, the chat-template
renders, the request tokenizer and the cache models): it sits below the providers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


# ---------------------------------------------------------------------------------------------------------
# Module-level rules (DESIGN.md "Rules of the house"): the size of a module, private names, import circles
# between modules and probed executors. Each check is a function of a package directory, so the tests below
# run it on promptkit/ and on a small planted package (the checks must catch what they are for).

#: the most lines one module of promptkit/ may have
MAX_MODULE_LINES = 1000


def package_modules(package: Path) -> dict[str, Path]:
    """Every module of ``package`` by dotted name (``promptkit.formats.base``; a package by its own name)."""
    root = package.parent
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def is_private(name: str) -> bool:
    """``_x`` is private; a dunder (``__version__``, ``__all__``) is not."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def is_private_module(module: str) -> bool:
    """A module whose own name (or a package above it, below the top) is private: ``providers._common``."""
    return any(is_private(part) for part in module.split(".")[1:])


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` reads from."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


class ImportSite:
    """One name bound by an import: the module it comes from, the name (None for ``import x``), the line and
    whether it sits in an ``if TYPE_CHECKING:`` block."""

    def __init__(self, source: str, name: str | None, line: int, typing_only: bool) -> None:
        self.source, self.name, self.line, self.typing_only = source, name, line, typing_only


def import_sites(module: str, path: Path, tree: ast.Module | None = None) -> list[ImportSite]:
    """Every import of ``module`` (module level, function-local and type-checking ones)."""
    tree = tree or ast.parse(path.read_text(encoding="utf-8"), str(path))
    sites: list[ImportSite] = []

    def visit(node: ast.AST, typing_only: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, typing_only)
            return
        if isinstance(node, ast.Import):
            sites.extend(ImportSite(a.name, None, node.lineno, typing_only) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, path, node)
            sites.extend(ImportSite(source, a.name, node.lineno, typing_only) for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child, typing_only)

    visit(tree, False)
    return sites


def target_module(site: ImportSite, known: dict[str, Path]) -> str:
    """The module an import site loads: ``from pkg import sub`` loads ``pkg.sub`` when that is a module."""
    if site.name is not None and f"{site.source}.{site.name}" in known:
        return f"{site.source}.{site.name}"
    return site.source


def long_modules(package: Path, limit: int = MAX_MODULE_LINES) -> list[str]:
    """``file: N lines`` for every module of ``package`` longer than ``limit`` lines."""
    root = package.parent
    found = []
    for path in package_modules(package).values():
        count = len(path.read_text(encoding="utf-8").splitlines())
        if count > limit:
            found.append(f"{path.relative_to(root)}:1: {count} lines (at most {limit})")
    return found


def _module_aliases(module: str, path: Path, tree: ast.Module, known: dict[str, Path]) -> dict[str, str]:
    """Local names bound to a module of the package (``import a.b as m``, ``from a import b``)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name in known:
                    aliases[a.asname] = a.name
                elif not a.asname:
                    head = a.name.split(".")[0]
                    if head in known:
                        aliases[head] = head
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, path, node)
            for a in node.names:
                if f"{source}.{a.name}" in known:
                    aliases[a.asname or a.name] = f"{source}.{a.name}"
    return aliases


def _dotted(node: ast.expr) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def private_crossings(package: Path) -> list[str]:
    """Every private name one module takes from another (not private) module: ``from m import _x`` and
    ``m._x`` on an imported module ``m``, type-checking imports included."""
    root = package.parent
    known = package_modules(package)
    found = []
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        where = path.relative_to(root)
        for site in import_sites(module, path, tree):
            if site.name is None or site.source not in known or f"{site.source}.{site.name}" in known:
                continue  # a whole module (a private one is fine), or not one of ours
            if is_private(site.name) and not is_private_module(site.source) and site.source != module:
                found.append(f"{where}:{site.line}: from {site.source} import {site.name}")
        aliases = _module_aliases(module, path, tree, known)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and is_private(node.attr)):
                continue
            chain = _dotted(node.value)
            if not chain or chain[0] not in aliases:
                continue
            owner = ".".join([aliases[chain[0]], *chain[1:]])
            if owner in known and owner != module and not is_private_module(owner):
                found.append(f"{where}:{node.lineno}: {owner}.{node.attr}")
    return found


def module_graph(package: Path) -> dict[str, dict[str, tuple[Path, int]]]:
    """module -> {imported module: (file, first line)}, function-local imports included, type-checking
    imports left out (they never run)."""
    known = package_modules(package)
    graph: dict[str, dict[str, tuple[Path, int]]] = {m: {} for m in known}
    for module, path in known.items():
        for site in import_sites(module, path):
            target = target_module(site, known)
            if site.typing_only or target not in known or target == module:
                continue
            graph[module].setdefault(target, (path, site.line))
    return graph


def strongly_connected(graph: dict[str, dict[str, tuple[Path, int]]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def import_circles(package: Path) -> list[str]:
    """One entry per circle of modules, naming each import inside it (file and line)."""
    root = package.parent
    graph = module_graph(package)
    found = []
    for group in strongly_connected(graph):
        members = set(group)
        edges = [
            f"  {path.relative_to(root)}:{line}: {module} -> {target}"
            for module in group
            for target, (path, line) in sorted(graph[module].items())
            if target in members
        ]
        found.append(f"circle of {len(group)} modules: {', '.join(group)}\n" + "\n".join(edges))
    return found


def _names_an_executor(node: ast.expr) -> bool:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name.lower().lstrip("_").endswith("executor")


def probed_executors(package: Path) -> list[str]:
    """Every ``hasattr(executor, ...)`` / ``getattr(executor, ...)``: an executor declares what it can do
    (attributes of its protocol) instead of being probed."""
    root = package.parent
    found = []
    for path in package_modules(package).values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("hasattr", "getattr")
                and node.args
                and _names_an_executor(node.args[0])
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {node.func.id} on an executor")
    return found


def test_no_module_over_1000_lines() -> None:
    found = long_modules(PACKAGE)
    assert not found, "modules to split:\n" + "\n".join(found)


@pytest.mark.slow
def test_no_private_name_crosses_a_module() -> None:
    found = private_crossings(PACKAGE)
    assert not found, (
        "private names taken from another module (make them public, or move them into a private `_name.py`"
        " module):\n" + "\n".join(found)
    )


@pytest.mark.slow
def test_no_import_circle_between_modules() -> None:
    found = import_circles(PACKAGE)
    assert not found, "import circles (function-local imports included):\n" + "\n".join(found)


@pytest.mark.slow
def test_no_executor_is_probed() -> None:
    found = probed_executors(PACKAGE)
    assert not found, "executors probed for what they can do:\n" + "\n".join(found)


def _plant(root: Path, files: dict[str, str]) -> Path:
    """A package ``pkg`` under ``root`` with ``files`` (name -> source); returns its directory."""
    package = root / "pkg"
    for name, source in {"__init__.py": "", **files}.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return package


def test_the_module_checks_catch_a_long_module(tmp_path: Path) -> None:
    package = _plant(tmp_path, {"long.py": "x = 1\n" * 1001, "fits.py": "x = 1\n" * 1000})
    assert long_modules(package) == ["pkg/long.py:1: 1001 lines (at most 1000)"]


def test_the_module_checks_catch_a_private_name_crossing(tmp_path: Path) -> None:
    package = _plant(
        tmp_path,
        {
            "a.py": "_x = 1\n_y = 2\n__version__ = '1'\n",
            "_shared.py": "_z = 3\n",
            "sub/__init__.py": "",
            "sub/c.py": "_w = 4\n",
            "b.py": (
                "from pkg.a import _x\n"  # 1: flagged
                "from pkg import a as m, _shared\n"
                "import pkg.a\n"
                "from pkg.a import __version__\n"  # a dunder is not private
                "from pkg._shared import _z\n"  # a private module may share private names
                "def f():\n"
                "    from .sub.c import _w\n"  # 7: flagged (relative, function-local)
                "    return m._y + pkg.a._x + _shared._z + _w\n"  # 8: two flagged, _shared._z not
            ),
        },
    )
    assert sorted(private_crossings(package)) == [
        "pkg/b.py:1: from pkg.a import _x",
        "pkg/b.py:7: from pkg.sub.c import _w",
        "pkg/b.py:8: pkg.a._x",
        "pkg/b.py:8: pkg.a._y",
    ]


def test_the_module_checks_catch_an_import_circle(tmp_path: Path) -> None:
    package = _plant(
        tmp_path,
        {
            "c.py": "import pkg.d\n",
            "d.py": "def f():\n    from pkg import c\n",  # a function-local import closes the circle
            "e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.f import F\n",
            "f.py": "from pkg.e import E\n",  # only a type-checking import back: no circle
        },
    )
    assert import_circles(package) == [
        "circle of 2 modules: pkg.c, pkg.d\n  pkg/c.py:1: pkg.c -> pkg.d\n  pkg/d.py:2: pkg.d -> pkg.c"
    ]


def test_the_module_checks_catch_a_probed_executor(tmp_path: Path) -> None:
    package = _plant(
        tmp_path,
        {
            "g.py": (
                "def run(executor, pool_executor, other):\n"
                "    a = hasattr(executor, 'map_held')\n"
                "    b = getattr(pool_executor, 'shares_files', False)\n"
                "    c = getattr(other, 'x', None)\n"  # not an executor
                "    return a, b, c, getattr(self.executor, 'y')\n"
            )
        },
    )
    assert probed_executors(package) == [
        "pkg/g.py:2: hasattr on an executor",
        "pkg/g.py:3: getattr on an executor",
        "pkg/g.py:5: getattr on an executor",
    ]
