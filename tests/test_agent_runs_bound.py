"""benchmarks/agent_runs_bound.py and benchmarks/bounds.py: the runs it picks, the copies it makes, the
lower bound's unique pieces and the comparison of the files each revision wrote."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from agent_runs_bound import copy_runs, longest_runs, same_files  # noqa: E402
from bounds import encode_each_once, record_renders, unique_pieces  # noqa: E402

from promptkit.formats import read_logs  # noqa: E402
from promptkit.tokens.tokenizers import get_tokenizer  # noqa: E402

REAL = ROOT / "fixtures" / "real-logs"


def test_the_longest_runs_by_calls_first_and_runs_without_calls_left_out() -> None:
    runs = longest_runs(REAL, 3)
    assert [(p.name, n) for p, n in runs] == [
        ("deepseek_chat_dev__pvlib__pvlib-python-1072.traj.json", 74),
        ("sympy__sympy-16597.traj.json", 65),
        ("deepseek_chat_test_1-100__django__django-12453.traj.json", 42),
    ]
    assert all(n > 0 for _, n in longest_runs(REAL, 20)) and len(longest_runs(REAL, 20)) == 5


def test_copies_are_sessions_of_their_own_sharing_no_text(tmp_path: Path) -> None:
    runs = longest_runs(REAL, 1)
    copy_runs(runs, REAL, tmp_path, copies=3)
    records = read_logs([tmp_path]).records
    assert len(records) == 3 * 74 and len({r.session for r in records}) == 3
    firsts = {r.session: r.request["messages"][1]["content"] for r in records if r.index == 0}
    original = json.loads(runs[0][0].read_text())["messages"][1]["content"]
    stem = runs[0][0].name.removesuffix(".traj.json")
    assert firsts == {
        stem: original,
        f"copy1-{stem}": f"[copy 1] {original}",
        f"copy2-{stem}": f"[copy 2] {original}",
    }


def test_the_bound_encodes_each_unique_piece_once(tmp_path: Path) -> None:
    records = read_logs([REAL / "deepseek"]).records
    pieces = unique_pieces(records, record_renders(records))
    doubled = unique_pieces([*records, *records], record_renders([*records, *records]))
    assert doubled == pieces and len(pieces) < sum(len(r.request["messages"]) for r in records)
    tok = get_tokenizer("cl100k_base")
    assert encode_each_once(pieces, tok) == sum(len(tok.encode(p)) for p in pieces)


def test_the_files_of_two_revisions_are_compared_byte_for_byte(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for folder in (a, b):
        folder.mkdir()
        (folder / "requests.csv").write_text("x\n1\n")
    assert same_files(a, b) == "identical"
    (b / "requests.csv").write_text("x\n2\n")
    (b / "extra.txt").write_text("")
    assert same_files(a, b) == "differ: extra.txt, requests.csv"
