"""How long ``promptkit lint-code`` takes on a 50,000-line project (is it fast enough for a pre-commit hook?).

The script writes a project of packages into a temporary folder: each module has helpers that build
prompt text (some with a clock or a set, most stable), a class that stores values in ``__init__`` and
sends requests from its methods, calls into the modules of its package, and every program of the
lint-code corpus (tests/lint_code/) copied in. It prints, side by side in one run, best of 3:

- ``ast.parse`` of every file alone (the floor: what reading the code costs at all);
- :func:`promptkit.codelint.lint_code_result` (parse + analysis), and its ratio to the floor;
- the command line end to end (``python -m promptkit lint-code``, with interpreter start-up), beside a
  Python process that only parses every file; for these two the CPU seconds too (user + system, from
  the children's resource usage), which a busy shared machine distorts less than the wall clock.

    PYTHONPATH=$PWD python benchmarks/lint_code_speed.py [--lines 50000]
"""

from __future__ import annotations

import argparse
import ast
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from promptkit.codelint import lint_code_result

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "lint_code"

MODULE = '''"""Module {m} of package {p}."""

import json
import time
from datetime import datetime

from openai import OpenAI

from pkg{p}.mod{prev} import helper_{prev}_0

client = OpenAI()
RULES_{m} = ["Be brief.", "Cite sources.", "Answer in English."]
FIELDS_{m} = {{"name", "email", "role"}}


def helper_{m}_0(topic: str) -> str:
    return "\\n".join(RULES_{m}) + f"\\nTopic: {{topic}}"


def helper_{m}_1() -> str:
    return json.dumps(dict.fromkeys(sorted(FIELDS_{m}), "string"), sort_keys=True)


def helper_{m}_2() -> str:
    return "Generated " + datetime.now().isoformat()


class Agent{m}:
    def __init__(self, name: str) -> None:
        self.name = name
        self.system = helper_{m}_0(name) + helper_{prev}_0(name)
        self.history: list[dict] = []

    def ask(self, text: str) -> str:
        started = time.time()
        self.history.append({{"role": "user", "content": f"[{{started}}] {{text}}"}})
        out = client.chat.completions.create(
            model="gpt-4.1",
            messages=[{{"role": "system", "content": self.system}}, *self.history],
        )
        for key in sorted(FIELDS_{m}):
            text += key
        return out.choices[0].message.content or ""

    def schema(self) -> str:
        return helper_{m}_1()

    def stamp(self) -> str:
        return helper_{m}_2() if self.name else ""
'''


def write_project(folder: Path, lines: int) -> tuple[int, int]:
    """Write the project; returns (files, lines)."""
    written, files, package = 0, 0, 0
    while written < lines:
        pkg = folder / f"pkg{package}"
        pkg.mkdir()
        (pkg / "__init__.py").write_text("")
        for m in range(10):
            text = MODULE.format(m=m, p=package, prev=(m - 1) % 10)
            (pkg / f"mod{m}.py").write_text(text)
            written += text.count("\n")
            files += 1
        package += 1
    for program in CORPUS.iterdir():
        target = folder / "corpus" / program.name
        if program.is_dir():
            shutil.copytree(program, target)
        elif program.suffix == ".py":
            target.parent.mkdir(exist_ok=True)
            shutil.copy(program, target)
    for path in (folder / "corpus").rglob("*.py"):
        written += path.read_text().count("\n")
        files += 1
    return files, written


def best(run: object, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def cpu_and_wall(command: list[str]) -> tuple[float, float]:
    """Best of 3 of a subprocess: (CPU seconds, wall seconds)."""
    runs = []
    for _ in range(3):
        before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        subprocess.run(command, capture_output=True, cwd=ROOT, check=False)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        runs.append((cpu, time.perf_counter() - start))
    return min(c for c, _ in runs), min(w for _, w in runs)


PARSE_ONLY = (
    "import ast, pathlib, sys; [ast.parse(p.read_text()) for p in pathlib.Path(sys.argv[1]).rglob('*.py')]"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--lines", type=int, default=50_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files, lines = write_project(folder, args.lines)
        sources = [p.read_text() for p in folder.rglob("*.py")]
        parse = best(lambda: [ast.parse(s) for s in sources])
        result = lint_code_result([folder])
        lint = best(lambda: lint_code_result([folder]))
        command = [sys.executable, "-m", "promptkit", "lint-code", "--format", "json", str(folder)]
        cli_cpu, cli_wall = cpu_and_wall(command)
        parse_cpu, parse_wall = cpu_and_wall([sys.executable, "-c", PARSE_ONLY, str(folder)])
        found = f"{len(result.findings)} findings, {len(result.notes)} notes"
        print(f"project: {files} files, {lines:,} lines; {found}")
        print(f"{'ast.parse alone (in process)':34} {parse:6.2f} s wall")
        print(f"{'lint_code_result (parse + flow)':34} {lint:6.2f} s wall  {lint / parse:4.1f}x the parse")
        print(f"{'a process that only parses':34} {parse_wall:6.2f} s wall  {parse_cpu:6.2f} s CPU")
        print(
            f"{'promptkit lint-code (the command)':34} {cli_wall:6.2f} s wall  {cli_cpu:6.2f} s CPU"
            f"  ({cli_cpu / parse_cpu:.1f}x the parse's CPU; {lines / cli_cpu:,.0f} lines per CPU second)"
        )


if __name__ == "__main__":
    main()
