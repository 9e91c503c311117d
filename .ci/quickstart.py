"""Print the README's Quick start commands, one per line (the single source for CI and users)."""

from __future__ import annotations

import pathlib
import sys


def quickstart_commands(readme: pathlib.Path) -> list[str]:
    lines = readme.read_text(encoding="utf-8").splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip().lower().lstrip("#").strip() == "quick start")
    except StopIteration:
        sys.exit(f"{readme}: no '## Quick start' heading")
    fence = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("```")), None)
    if fence is None:
        sys.exit(f"{readme}: no code block under 'Quick start'")
    commands = []
    for line in lines[fence + 1 :]:
        if line.startswith("```"):
            break
        if line.strip() and not line.lstrip().startswith("#"):
            commands.append(line.strip())
    return commands


if __name__ == "__main__":
    cmds = quickstart_commands(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "README.md"))
    if len(cmds) != 2:
        sys.exit(f"README Quick start must hold exactly two commands, found {len(cmds)}: {cmds}")
    print("\n".join(cmds))
