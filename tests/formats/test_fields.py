"""promptkit/formats/fields.py: the JSON lines a sniffer reads (first_json_lines) against a slow twin."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings, strategies as st

from promptkit.formats import claude_code, codex
from promptkit.formats.base import Source
from promptkit.formats.fields import SNIFF_LINES, first_json_lines, loads_json


def every_line_parsed(head: str) -> tuple[Any, ...]:
    """The readable twin: try every non-blank line, keep the first SNIFF_LINES that parse."""
    out: list[Any] = []
    for raw in head.split("\n"):
        if len(out) >= SNIFF_LINES:
            break
        if not raw.strip():
            continue
        try:
            out.append(loads_json(raw))
        except json.JSONDecodeError:
            continue
    return tuple(out)


_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
_blanks = st.sampled_from(["", " ", "\t", "\r", "\x0b", "\x1c", "\u00a0", "\u2028", "  \t"])


@st.composite
def _lines(draw: st.DrawFn) -> str:
    value = draw(_values)
    kind = draw(st.sampled_from(["compact", "pretty", "suffix", "quoted", "garbage"]))
    if kind == "compact":
        text = json.dumps(value, ensure_ascii=draw(st.booleans()))
    elif kind == "pretty":  # every line of a pretty-printed document, one of them
        lines = json.dumps({"v": value}, indent=2).split("\n")
        text = lines[draw(st.integers(0, len(lines) - 1))]
    elif kind == "suffix":  # a value followed by what a document's line ends with
        text = json.dumps(value) + draw(st.sampled_from([",", ":", "{", "[", '"', "}", "]", ", {"]))
    elif kind == "quoted":  # raw text between quotes: control characters, escapes, quotes, key-like
        text = '"' + draw(st.text(alphabet='ab"\\:\t\x01\u2028 nu0', max_size=10)) + '"'
        text += draw(st.sampled_from(["", ": 1", ' "x"']))
    else:
        text = draw(st.text(alphabet='{}[]:," \\0123abnulltrue', max_size=12))
    return draw(_blanks) + text + draw(_blanks)


@settings(max_examples=1000, deadline=None)
@given(st.lists(_lines(), max_size=20))
def test_the_json_lines_of_a_head_are_those_of_parsing_every_line(lines: list[str]) -> None:
    head = "\n".join(lines)
    assert first_json_lines(head) == every_line_parsed(head)


def test_a_pretty_printed_document_gives_the_lines_that_are_json_texts_only() -> None:
    head = json.dumps({"info": {"n": [1, 2]}, "messages": [{"role": "user"}, 7, "x"]}, indent=2)
    assert first_json_lines(head) == every_line_parsed(head) == (2, "x")  # "1," and "7," are not JSON


def test_at_most_sniff_lines_and_the_same_values_for_the_same_head() -> None:
    head = "\n".join(json.dumps({"k": i}) for i in range(3 * SNIFF_LINES))
    found = first_json_lines(head)
    assert found == tuple({"k": i} for i in range(SNIFF_LINES))
    assert first_json_lines("".join(head)) is found  # kept: the next sniffer of this head reads it again


def test_the_sniffers_still_tell_their_formats_and_a_trajectory_from_both(tmp_path: Any) -> None:
    claude = tmp_path / "c.jsonl"
    claude.write_text('{"type": "summary", "leafUuid": "u"}\n', encoding="utf-8")
    rollout = tmp_path / "r.jsonl"
    rollout.write_text(
        "".join(json.dumps({"type": "response_item", "payload": {"i": i}}) + "\n" for i in range(6)),
        encoding="utf-8",
    )
    trajectory = tmp_path / "t.traj.json"
    trajectory.write_text(
        json.dumps({"info": {}, "messages": [{"role": "user"}]}, indent=2), encoding="utf-8"
    )
    assert claude_code.sniff(Source.open(claude)) and not codex.sniff(Source.open(claude))
    assert codex.sniff(Source.open(rollout)) and not claude_code.sniff(Source.open(rollout))
    assert not claude_code.sniff(Source.open(trajectory)) and not codex.sniff(Source.open(trajectory))


def test_the_codex_sniffer_judges_the_first_five_json_lines_only(tmp_path: Any) -> None:
    """Codex's rule is "most of the first five": three rollout lines of five are a rollout, whatever
    follows in the rest of the head's eight."""
    rollout = [json.dumps({"type": "response_item", "payload": {"i": i}}) for i in range(3)]
    other = [json.dumps({"note": i}) for i in range(5)]
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(rollout + other) + "\n", encoding="utf-8")
    assert len(first_json_lines(Source.open(path).head)) == SNIFF_LINES
    assert codex.sniff(Source.open(path))
