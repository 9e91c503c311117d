"""Run mutmut's mutants of one module by hand: apply each to the source file, run the tests, restore.

mutmut 3's own runner forks a child per mutant from a process that has started the analysis' fork
server and Dask clusters; on this suite its children hang or hit its timeout (a mutant that fails its
tests in 2 s by hand came back "timeout"). This script takes the mutants mutmut generated (``mutmut
run`` once, then stop it: the names are in ``mutmut results --all true``), applies each one's diff
inside its function or method, runs the given tests in a fresh pytest and restores the file::

    mutmut results --all true | grep -E 'x__measure__|x__place_head__' | cut -d: -f1 > names.txt
    PYTHONPATH=$PWD python benchmarks/mutmut_apply.py promptkit/analysis/engine.py names.txt \\
        tests/analysis/test_ruler.py tests/formats/test_claude_code_tree.py

Prints each mutant's outcome (killed, survived, timeout, unapplied) and the counts.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path


def _span(source: str, name: str) -> tuple[int, int] | None:
    """Where the function a mutant belongs to is in ``source``: a module function (``x_name``) or a
    method (``xǁClassǁname``), from its ``def`` to the next ``def`` or ``class`` at its indentation or
    above (None where it is not found)."""
    ends: tuple[str, ...]
    method = re.search(r"\.xǁ(\w+)ǁ(\w+?)__mutmut_\d+$", name)
    function = re.search(r"\.x_(\w+?)__mutmut_\d+$", name)
    if method is not None:
        klass = source.find(f"\nclass {method.group(1)}")
        start = source.find(f"\n    def {method.group(2)}(", klass) if klass >= 0 else -1
        ends = ("\n    def ", "\n    @", "\nclass ", "\ndef ", "\n@")
    elif function is not None:
        start = source.find(f"\ndef {function.group(1)}(")
        ends = ("\ndef ", "\nclass ", "\n@")
    else:
        return None
    if start < 0:
        return None
    found = [k for k in (source.find(e, start + 5) for e in ends) if k >= 0]
    return start, min(found, default=len(source))


def _mutated(region: str, show: str, *, method: bool) -> str | None:
    """``region`` (one function's or method's source) with the mutant ``mutmut show`` printed applied,
    or None where its text is not found. mutmut shows a method dedented to module level: its lines are
    indented back; a docstring line in the context keeps its own indent, so where the context does not
    match, the changed lines alone are looked for (once)."""
    body = [ln for ln in show.splitlines() if ln[:1] in "-+ " and not ln.startswith(("---", "+++"))]
    shift = "    " if method else ""
    tries = [[ln[:1] + shift + ln[1:] for ln in body]] if method else []
    tries = [body, *tries, [ln[:1] + shift + ln[1:] for ln in body if ln[:1] in "-+"]]
    for lines in tries:
        old = "\n".join(ln[1:] for ln in lines if ln[:1] in "- ")
        new = "\n".join(ln[1:] for ln in lines if ln[:1] in "+ ")
        if old and region.count(old) == 1:
            return region.replace(old, new, 1)
    return None


def main(argv: list[str]) -> None:
    source, names_file, *tests = argv
    path = Path(source)
    original = path.read_text(encoding="utf-8")
    names = [line.strip() for line in Path(names_file).read_text().splitlines() if "__mutmut_" in line]
    outcomes: Counter[str] = Counter()
    for name in names:
        show = subprocess.run(["mutmut", "show", name], capture_output=True, text=True, check=True).stdout
        span = _span(original, name)
        start, end = span if span is not None else (0, 0)
        mutated = _mutated(original[start:end], show, method="ǁ" in name) if span is not None else None
        if mutated is None:
            outcomes["unapplied"] += 1
            print(name, "unapplied", flush=True)
            continue
        path.write_text(original[:start] + mutated + original[end:], encoding="utf-8")
        try:
            run = subprocess.run(
                [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider", *tests],
                capture_output=True,
                text=True,
                timeout=300,
            )
            outcome = "survived" if run.returncode == 0 else "killed"
        except subprocess.TimeoutExpired:
            outcome = "timeout"
        finally:
            path.write_text(original, encoding="utf-8")
        outcomes[outcome] += 1
        print(name, outcome, flush=True)
    total = sum(outcomes.values())
    print(f"score: {outcomes['killed']}/{total} killed; {dict(outcomes)}")


if __name__ == "__main__":
    main(sys.argv[1:])
