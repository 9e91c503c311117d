"""The lint-code corpus (tests/lint_code/): small realistic programs, each stating its expected findings.

A program is a file or a folder (a project of several modules). Its header says what it must give:
``# expect: <rule> [<file>]@<line> <slot>`` per finding, or ``# expect: none``. The test asserts
exactly those findings (rule, file, line that makes the value, slot) and no other. Each expected line
carries a ``# @<line>`` comment, which checks the header against the code itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from promptkit.codelint import lint_code

CORPUS = Path(__file__).resolve().parents[1] / "lint_code"
EXPECT = re.compile(r"^# expect: (?:none|(\S+) (?:(\S+\.py))?@(\d+) (.+))$", re.M)
PROGRAMS = sorted(p for p in CORPUS.iterdir() if p.suffix == ".py" or p.is_dir())


def expected(program: Path) -> tuple[set[tuple[str, str, int, str]], bool]:
    files = [program] if program.is_file() else sorted(program.glob("*.py"))
    found, stated = set(), False
    for file in files:
        for match in EXPECT.finditer(file.read_text(encoding="utf-8")):
            stated = True
            if match.group(1):
                where = match.group(2) or file.name
                found.add((match.group(1), where, int(match.group(3)), match.group(4)))
    return found, stated


def test_the_corpus_covers_faulty_and_correct_programs() -> None:
    faulty = [p for p in PROGRAMS if expected(p)[0]]
    correct = [p for p in PROGRAMS if not expected(p)[0]]
    assert len(faulty) >= 8 and len(correct) >= 5
    rules = {rule for p in faulty for rule, *_ in expected(p)[0]}
    assert rules == {"clock", "random-id", "process", "set-order", "json-order", "per-turn"}
    slots = {slot.split("[")[0].split(" ")[0] for p in faulty for *_, slot in expected(p)[0]}
    assert {"system", "instructions", "tools", "messages", "contributor", "the"} <= slots


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_each_program_gives_exactly_its_expected_findings(program: Path) -> None:
    want, stated = expected(program)
    assert stated, f"{program.name}: the header states no '# expect:' line"
    for _, where, line, _ in want:
        file = program if program.is_file() else program / where
        assert file.read_text(encoding="utf-8").splitlines()[line - 1].endswith(f"# @{line}"), (file, line)
    got = {(f.rule, Path(f.path).name, f.line, f.slot) for f in lint_code([program])}
    assert got == want
