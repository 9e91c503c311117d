"""Run mutmut's mutants of one module by hand: apply each to the source file, run the tests, restore.

mutmut 3's own runner forks a child per mutant from a process that has started the analysis' fork
server and Dask clusters; on this suite its children hang or hit its timeout (a mutant that fails its
tests in 2 s by hand came back "timeout"). This script takes the mutants mutmut generated (``mutmut
run`` once, then stop it: the names are in ``mutmut results --all true``), applies each one's diff
inside its function, runs the given tests in a fresh pytest and restores the file::

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


def main(argv: list[str]) -> None:
    source, names_file, *tests = argv
    path = Path(source)
    original = path.read_text(encoding="utf-8")
    names = [line.strip() for line in Path(names_file).read_text().splitlines() if "__mutmut_" in line]
    outcomes: Counter[str] = Counter()
    for name in names:
        show = subprocess.run(["mutmut", "show", name], capture_output=True, text=True, check=True).stdout
        found = re.search(r"\.x_(\w+?)__mutmut_\d+$", name)
        if found is None or "ǁ" in name:  # methods are named xǁClassǁmethod: not handled here
            outcomes["unapplied"] += 1
            print(name, "unapplied", flush=True)
            continue
        body = [ln for ln in show.splitlines() if ln[:1] in "-+ " and not ln.startswith(("---", "+++"))]
        old = "\n".join(ln[1:] for ln in body if ln[:1] in "- ")
        new = "\n".join(ln[1:] for ln in body if ln[:1] in "+ ")
        start = original.index(f"\ndef {found.group(1)}(")
        end = original.find("\ndef ", start + 5)
        end = len(original) if end < 0 else end
        region = original[start:end]
        if old not in region:
            outcomes["unapplied"] += 1
            print(name, "unapplied", flush=True)
            continue
        path.write_text(original[:start] + region.replace(old, new, 1) + original[end:], encoding="utf-8")
        try:
            run = subprocess.run(
                [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
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
