"""What each module of the project defines and imports, read once from its syntax tree.

- :class:`ModuleIndex`: the names a module imports from outside the project (``aliases``: local name ->
  qualified name, ``from datetime import datetime as dt`` gives ``dt -> datetime.datetime``), the names
  it imports from the project, its functions and its classes;
- :class:`FuncInfo`: one function (a ``def``, a method, a nested function or a lambda), its parameters
  and their defaults;
- :class:`ClassInfo`: one class, its methods, and for each ``self.<name>`` the methods that set it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

import attrs

from promptkit.codelint.project import Module, Project

__all__ = ["ClassInfo", "FuncInfo", "FunctionNode", "ModuleIndex", "build_indexes", "statements"]

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


@attrs.define(eq=False)
class FuncInfo:
    """One function of the project: ``key`` is unique (``path:qualname`` or ``path:line:col`` for a
    lambda), ``params`` its parameter names in call order (positional, then keyword-only),
    ``defaults`` the default expression of a parameter by index, ``outer`` the environment of the
    function it is nested in (its closure)."""

    key: str
    name: str
    node: FunctionNode
    module: ModuleIndex
    klass: ClassInfo | None = None
    outer: dict[str, Any] | None = None
    params: list[str] = attrs.field(factory=list)
    positional: int = 0
    defaults: dict[int, ast.expr] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        args = self.node.args
        positional = [*args.posonlyargs, *args.args]
        self.positional = len(positional)
        self.params = [a.arg for a in positional] + [a.arg for a in args.kwonlyargs]
        first_default = len(positional) - len(args.defaults)
        for i, default in enumerate(args.defaults):
            self.defaults[first_default + i] = default
        for i, kw_default in enumerate(args.kw_defaults):
            if kw_default is not None:
                self.defaults[len(positional) + i] = kw_default

    @property
    def is_method(self) -> bool:
        """A plain method of a class (its first parameter is ``self``)."""
        if self.klass is None or isinstance(self.node, ast.Lambda) or not self.params:
            return False
        decorators = {d.id for d in self.node.decorator_list if isinstance(d, ast.Name)}
        return not decorators & {"staticmethod", "classmethod"}


@attrs.define(eq=False)
class ClassInfo:
    """One class: its methods by name and, per attribute of ``self``, the methods that assign it."""

    key: str
    name: str
    node: ast.ClassDef
    module: ModuleIndex
    methods: dict[str, FuncInfo] = attrs.field(factory=dict)
    setters: dict[str, list[FuncInfo]] = attrs.field(factory=dict)


@attrs.define(eq=False)
class ModuleIndex:
    """One module's imports, functions and classes (see the module docstring)."""

    module: Module
    aliases: dict[str, str] = attrs.field(factory=dict)
    imports: dict[str, tuple[Module, str | None]] = attrs.field(factory=dict)
    funcs: dict[str, FuncInfo] = attrs.field(factory=dict)
    classes: dict[str, ClassInfo] = attrs.field(factory=dict)


def _self_assignments(method: FuncInfo) -> set[str]:
    """The attributes ``method`` assigns on its first parameter (``self.x = ...``, ``self.x += ...``)."""
    if not method.params or isinstance(method.node, ast.Lambda):
        return set()
    me = method.params[0]
    names = set()
    for node in statements(method.node.body):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == me
            ):
                names.add(target.attr)
    return names


def _index_class(index: ModuleIndex, node: ast.ClassDef) -> ClassInfo:
    info = ClassInfo(f"{index.module.path}:{node.name}", node.name, node, index)
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            method = FuncInfo(f"{info.key}.{item.name}", f"{node.name}.{item.name}", item, index, info)
            info.methods[item.name] = method
            if method.is_method:
                for name in sorted(_self_assignments(method)):
                    info.setters.setdefault(name, []).append(method)
    return info


def _index_import(index: ModuleIndex, project: Project, node: ast.Import | ast.ImportFrom) -> None:
    module = index.module
    if isinstance(node, ast.Import):
        for alias in node.names:
            bound = alias.asname or alias.name.split(".")[0]
            # "import a.b" binds "a"; "import a.b as c" binds c to a.b
            found = project.find(alias.name if alias.asname else bound, module)
            if found is not None:
                index.imports[bound] = (found, None)
            else:
                index.aliases[bound] = alias.name if alias.asname else bound
        return
    base = project.resolve(module, node.module, node.level)
    for alias in node.names:
        if alias.name == "*":
            continue
        bound = alias.asname or alias.name
        target = project.find(f"{base}.{alias.name}", module) if base else None
        if target is not None:
            index.imports[bound] = (target, None)
            continue
        holder = project.find(base, module) if base else None
        if holder is not None:
            index.imports[bound] = (holder, alias.name)
        elif base:
            index.aliases[bound] = f"{base}.{alias.name}"


def build_indexes(project: Project) -> list[ModuleIndex]:
    """One :class:`ModuleIndex` per module of ``project`` (imports anywhere in a module count)."""
    indexes = []
    for module in project.modules:
        index = ModuleIndex(module)
        for node in statements(module.tree.body):
            if isinstance(node, ast.Import | ast.ImportFrom):
                _index_import(index, project, node)
        for node in _top_level(module.tree.body):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                index.funcs[node.name] = FuncInfo(f"{module.path}:{node.name}", node.name, node, index)
            elif isinstance(node, ast.ClassDef):
                index.classes[node.name] = _index_class(index, node)
        indexes.append(index)
    return indexes


def statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of ``body``, nested ones included (without walking expressions: much faster
    than :func:`ast.walk`)."""
    for node in body:
        yield node
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                yield from statements(inner)
        for handler in getattr(node, "handlers", ()):
            yield from statements(handler.body)
        for case in getattr(node, "cases", ()):
            yield from statements(case.body)


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of a module body, those inside a top-level ``if``/``try`` included."""
    out: list[ast.stmt] = []
    for node in body:
        out.append(node)
        if isinstance(node, ast.If):
            out += _top_level(node.body) + _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            out += _top_level(node.body) + _top_level(node.orelse) + _top_level(node.finalbody)
            for handler in node.handlers:
                out += _top_level(handler.body)
    return out
