"""The Python files ``promptkit lint-code`` reads: parsed once, named as modules, imports resolved.

A module's dotted name is its path below the folder it was found in (``app/prompts.py`` given as
``app`` is ``prompts``, given as ``.`` it is ``app.prompts``); an import is resolved by the longest
dotted suffix it shares with a module of the project, preferring a module in the importer's folder,
so ``from prompts import system`` and ``from app.prompts import system`` both find it.

>>> found = ignored_rules("x = 1  # promptkit: ignore[clock, set-order]\\ny = 2  # promptkit: ignore\\n")
>>> {line: sorted(rules) for line, rules in found.items()}
{1: ['clock', 'set-order'], 2: ['*']}
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

from promptkit.errors import CodeInputError

__all__ = ["Module", "Project", "ignored_rules", "load_project"]

_IGNORE = re.compile(r"#\s*promptkit:\s*ignore(?:\[([^\]]*)\])?")
_SKIPPED_FOLDERS = frozenset({".git", ".hg", ".venv", "venv", "__pycache__", "node_modules", ".tox", "build"})


@attrs.frozen(eq=False)
class Module:
    """One parsed file: its dotted ``name``, the ``path`` shown in findings, its syntax tree, whether it
    is a package's ``__init__``, and the rules its ``# promptkit: ignore[...]`` comments silence per line."""

    name: str
    path: str
    tree: ast.Module
    package: bool
    ignores: dict[int, frozenset[str]]

    @property
    def folder(self) -> str:
        """The folder of the file (as shown)."""
        return os.path.dirname(self.path)


def ignored_rules(text: str) -> dict[int, frozenset[str]]:
    """``{line: rules}`` of the ``# promptkit: ignore[rule, ...]`` comments of ``text`` (``*``: all)."""
    found: dict[int, frozenset[str]] = {}
    if "promptkit:" not in text:
        return found
    for number, line in enumerate(text.splitlines(), start=1):
        match = _IGNORE.search(line)
        if match:
            names = match.group(1)
            rules = {r.strip() for r in names.split(",") if r.strip()} if names is not None else {"*"}
            found[number] = frozenset(rules or {"*"})
    return found


@attrs.define
class Project:
    """The modules of the paths given, with an index of dotted-name suffixes for resolving imports."""

    modules: list[Module]
    _by_suffix: dict[str, list[Module]] = attrs.field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        for module in self.modules:
            parts = module.name.split(".")
            for i in range(len(parts)):
                self._by_suffix.setdefault(".".join(parts[i:]), []).append(module)

    def find(self, dotted: str, importer: Module) -> Module | None:
        """The module of the project named ``dotted`` (a suffix match; the importer's folder first)."""
        candidates = self._by_suffix.get(dotted)
        if not candidates:
            return None
        exact = [m for m in candidates if m.name == dotted]
        near = [m for m in candidates if m.folder == importer.folder]
        return (near or exact or candidates)[0]

    def resolve(self, importer: Module, module: str | None, level: int) -> str | None:
        """The absolute dotted name ``from <level dots><module> import`` means in ``importer``."""
        if not level:
            return module
        base = importer.name.split(".")
        if not importer.package:
            base = base[:-1]
        if level > 1:
            base = base[: len(base) - level + 1]
        return ".".join([*base, module] if module else base) or None


def _files(paths: Sequence[str | os.PathLike[str]]) -> Iterable[tuple[Path, Path]]:
    """``(file, root)`` for every Python file of ``paths`` (a folder is walked, sorted)."""
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise CodeInputError(f"{path}: no such file or directory")
        if path.is_file():
            yield path, path.parent
            continue
        for folder, subfolders, names in os.walk(path):
            subfolders[:] = sorted(
                d for d in subfolders if d not in _SKIPPED_FOLDERS and not d.startswith(".")
            )
            for name in sorted(names):
                if name.endswith(".py"):
                    yield Path(folder) / name, path


def _module_name(file: Path, root: Path) -> tuple[str, bool]:
    parts = list(file.relative_to(root).with_suffix("").parts)
    package = parts[-1] == "__init__"
    if package:
        parts = parts[:-1] or [root.resolve().name]
    return ".".join(parts), package


def _parse(file: Path) -> tuple[ast.Module, str]:
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CodeInputError(f"{file}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise CodeInputError(f"{file}: cannot read the file ({exc.strerror or exc})") from exc
    try:
        return ast.parse(text, str(file)), text
    except SyntaxError as exc:
        raise CodeInputError(f"{file}:{exc.lineno or 0}: syntax error: {exc.msg}") from exc
    except ValueError as exc:  # source with a null byte
        raise CodeInputError(f"{file}: cannot parse: {exc}") from exc


def load_project(paths: Sequence[str | os.PathLike[str]]) -> Project:
    """Parse every Python file of ``paths`` (files or folders); :class:`CodeInputError` names a missing
    path, a file that is not UTF-8 or a syntax error (``file:line``)."""
    if not paths:
        raise CodeInputError("no path given: name the Python files or folders to lint")
    modules: list[Module] = []
    seen: set[Path] = set()
    for file, root in _files(paths):
        resolved = file.resolve()
        if resolved in seen:
            continue
        seen.add(resolved)
        tree, text = _parse(file)
        name, package = _module_name(file, root)
        modules.append(Module(name, str(file), tree, package, ignored_rules(text)))
    return Project(modules)
