"""The spec map names real things (its ```pycon sessions run in tests/test_docs.py)."""

from __future__ import annotations

import importlib
import pathlib
import re
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").rglob("*.md"))
PYCON = re.compile(r"^```pycon\n(.*?)^```", re.S | re.M)


def test_the_spec_map_has_examples() -> None:
    assert PYCON.findall((ROOT / "docs/reference/spec-map.md").read_text(encoding="utf-8"))


_HOMES = ["promptkit.chat", "promptkit.chat.egress", "promptkit.providers", "promptkit.assembly", "promptkit"]


def _resolve(dotted: str) -> Any:
    if dotted.startswith("promptkit."):
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                obj: Any = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
            return obj
        raise ImportError(dotted)
    head, *rest = dotted.split(".")
    for home in _HOMES:
        module = importlib.import_module(home)
        if hasattr(module, head):
            obj = getattr(module, head)
            for attr in rest:
                obj = getattr(obj, attr)
            return obj
    raise AttributeError(f"{dotted} is in none of {_HOMES}")


def test_every_name_of_a_holding_row_exists() -> None:
    rows = re.findall(r"^\| ([PM]-\d+) \|[^|]*(?:\\\|[^|]*)*\| (.*) \| (holds|out of scope|does not[^|]*) \|$",
                      (ROOT / "docs/reference/spec-map.md").read_text(encoding="utf-8"), re.M)  # fmt: skip
    assert len(rows) > 100
    checked = 0
    for row, python, status in rows:
        if status != "holds":
            continue
        for name in re.findall(r"`([A-Za-z_][\w.]*)`", python):
            _resolve(name)
            checked += 1
        assert re.search(r"`[A-Za-z_]", python), f"{row}: a holding row names its Python"
    assert checked > 100


def test_the_counts_are_the_rows() -> None:
    """The status line and the counting table say what the rows say, per document and in all."""
    page = (ROOT / "docs/reference/spec-map.md").read_text(encoding="utf-8")
    statuses = re.findall(
        r"^\| ([PM])-\d+ \|.*\| (holds|out of scope|does not fully hold[^|]*) \|$", page, re.M
    )
    counts: dict[str, list[int]] = {}
    for doc, status in statuses:
        row = counts.setdefault(doc, [0, 0, 0, 0])
        row[0] += 1
        row[1 if status == "holds" else 2 if status == "out of scope" else 3] += 1
    total = [sum(c[i] for c in counts.values()) for i in range(4)]
    for name, c in (("pipeline", counts["P"]), ("platform message contract", counts["M"]), ("both", total)):
        failing = str(c[3]) if c[3] == 0 else f"{c[3]} ("
        assert f"| {name} | {c[0]} | {c[1]} | {c[2]} | {failing}" in page, (name, c)
    assert (
        f"**Status.** {total[0]} contracts: {total[1]} hold (implemented and tested), {total[2]} are out of scope"
        in page
    )
