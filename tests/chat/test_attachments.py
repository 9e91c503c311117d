"""Tests for promptkit/chat/attachments.py: the [图片: desc | ref:…] grammar (pipeline seed §4)."""

from __future__ import annotations

import doctest
import re

import attrs
import pytest
from hypothesis import assume, given, settings, strategies as st

import promptkit.chat.attachments as attachments_module
from promptkit.chat.attachments import (
    ATTACHMENT_REF_KINDS,
    MATCHER_NESTED_OPENERS,
    AttachmentRef,
    AttachmentRefError,
    AttachmentRefKind,
    build_attachment_ref_matcher,
    format_attachment_ref,
    parse_attachment_refs,
    sanitize_desc,
)

# The grammar as a plain regex: the reference the linear scanner must agree with.
REFERENCE = re.compile(r"\[(图片|音频|视频|文件)(?:: ([^\]|\n]*))? \| ref:([^\]\n]+)\]")
# The matcher as the seed describes it (desc excludes only "]" and "\n").
SEED_MATCHER = r"\[{kind}(?:: [^\]\n]*)? \| ref:{ref}\]"

KINDS = st.sampled_from(list(AttachmentRefKind))
# Refs the caller guarantees: non-empty, no "]", no "\n".
SAFE_REFS = st.text(min_size=1).filter(lambda r: "]" not in r and "\n" not in r and r.strip() != "")
# Fragments that exercise every branch of the grammar.
TOKENS = st.sampled_from(
    [
        "[",
        "]",
        "|",
        " ",
        ":",
        ": ",
        "\n",
        "a",
        "图片",
        "音频",
        "照片",
        " | ref:",
        "ref:",
        "[图片: ",
        "[图片 | ref:",
        "[音频: ",
    ]
)
GRAMMAR_TEXT = st.lists(TOKENS, max_size=14).map("".join)


def reference_parse(text: str) -> list[AttachmentRef]:
    """The reference: the regex, then ``ref.trim()`` and ``desc?.trim()`` (a blank ref is no reference)."""
    return [
        AttachmentRef(m.group(1), m.group(3).strip(), (m.group(2) or "").strip() or None)
        for m in REFERENCE.finditer(text)
        if m.group(3).strip()
    ]


def normalized(ref: AttachmentRef) -> AttachmentRef:
    """What parsing the formatted placeholder gives back: the sanitized desc, blank -> None."""
    desc = None if ref.desc is None else sanitize_desc(ref.desc)
    return attrs.evolve(ref, ref=ref.ref.strip(), desc=desc if desc and desc.strip() else None)


def test_docstring_examples() -> None:
    result = doctest.testmod(attachments_module)
    assert result.attempted > 0 and result.failed == 0


# --- kinds ----------------------------------------------------------------------------------------


def test_kind_display_names_are_the_seed_ones() -> None:
    assert [k.value for k in AttachmentRefKind] == ["图片", "音频", "视频", "文件"]
    assert str(AttachmentRefKind.IMAGE) == "图片"
    assert AttachmentRefKind.FILE == "文件"


def test_attachment_ref_kinds_maps_every_attachment_kind_and_is_read_only() -> None:
    assert dict(ATTACHMENT_REF_KINDS) == {
        "image": AttachmentRefKind.IMAGE,
        "audio": AttachmentRefKind.AUDIO,
        "video": AttachmentRefKind.VIDEO,
        "file": AttachmentRefKind.FILE,
    }
    with pytest.raises(TypeError):
        ATTACHMENT_REF_KINDS["gif"] = AttachmentRefKind.IMAGE  # type: ignore[index]


# --- AttachmentRef --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [AttachmentRefKind.AUDIO, "音频", "audio"])
def test_kind_accepts_the_enum_its_display_name_and_the_attachment_kind(kind: str) -> None:
    assert AttachmentRef(kind, "a.mp3").kind is AttachmentRefKind.AUDIO


def test_unknown_kind_is_rejected_naming_the_field() -> None:
    with pytest.raises(AttachmentRefError, match=r"AttachmentRef\.kind: unknown kind 'gif'"):
        AttachmentRef("gif", "a.gif")


@pytest.mark.parametrize("ref", ["", None, 3])
def test_empty_or_non_string_ref_is_rejected(ref: object) -> None:
    with pytest.raises(AttachmentRefError, match=r"AttachmentRef\.ref"):
        AttachmentRef("image", ref)  # type: ignore[arg-type]


def test_non_string_desc_is_rejected() -> None:
    with pytest.raises(AttachmentRefError, match=r"AttachmentRef\.desc"):
        AttachmentRef("image", "x.png", desc=3)  # type: ignore[arg-type]


def test_attachment_ref_is_a_frozen_value() -> None:
    ref = AttachmentRef("image", "x.png", "猫")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        ref.ref = "y.png"  # type: ignore[misc]
    assert ref == AttachmentRef(AttachmentRefKind.IMAGE, "x.png", "猫")
    assert hash(ref) == hash(AttachmentRef("图片", "x.png", "猫"))


# --- format ---------------------------------------------------------------------------------------


def test_seed_examples_byte_for_byte() -> None:
    assert (
        format_attachment_ref(AttachmentRef(AttachmentRefKind.IMAGE, "data/x.png", desc="一只猫"))
        == "[图片: 一只猫 | ref:data/x.png]"
    )
    assert (
        format_attachment_ref(AttachmentRef(AttachmentRefKind.IMAGE, "data/x.png"))
        == "[图片 | ref:data/x.png]"
    )
    # schema-message seed, outboundMediaMessage examples
    assert (
        format_attachment_ref(AttachmentRef("audio", "data:/audio/a.mp3", desc="描述"))
        == "[音频: 描述 | ref:data:/audio/a.mp3]"
    )
    assert (
        format_attachment_ref(AttachmentRef("file", "workspace:/a.html", desc="主页.html"))
        == "[文件: 主页.html | ref:workspace:/a.html]"
    )


@pytest.mark.parametrize("desc", [None, "", " ", "\t", "\n", "\r\n", "\u2028"])
def test_missing_empty_or_blank_desc_omits_the_colon_part(desc: str | None) -> None:
    assert format_attachment_ref(AttachmentRef("video", "v.mp4", desc)) == "[视频 | ref:v.mp4]"


@pytest.mark.parametrize(
    ("desc", "written"),
    [
        ("a\nb", "a b"),
        ("a\r\nb", "a b"),  # one line break, one space
        ("a\rb", "a b"),
        ("a\n\nb", "a b"),  # a run of breaks folds to one space (reference: /[\r\n]+/g)
        ("a\u2028b\u2029c\x85d\x0be\x0cf", "a b c d e f"),
        ("| 列 | 值 |", "丨 列 丨 值 丨"),
        ("数组[0]", "数组[0］"),
        (" 前后留空 ", "前后留空"),  # trimmed (reference: desc?.trim())
        (" 猫 ", "猫"),
    ],
)
def test_desc_is_sanitized_on_write(desc: str, written: str) -> None:
    assert sanitize_desc(desc) == written
    assert format_attachment_ref(AttachmentRef("image", "x.png", desc)) == f"[图片: {written} | ref:x.png]"


def test_ref_is_written_as_is() -> None:
    assert format_attachment_ref(AttachmentRef("image", "a]b|c\nd")) == "[图片 | ref:a]b|c\nd]"


def test_format_rejects_something_else_than_a_ref() -> None:
    with pytest.raises(AttachmentRefError, match="expected an AttachmentRef"):
        format_attachment_ref("[图片 | ref:x]")  # type: ignore[arg-type]


@pytest.mark.slow
@given(st.text())
def test_sanitized_desc_has_no_delimiter_and_no_line_break(desc: str) -> None:
    out = sanitize_desc(desc)
    assert "]" not in out and "|" not in out
    assert len(out.splitlines()) <= 1 and not any(c in out for c in "\n\r")
    assert sanitize_desc(out) == out


# --- parse ----------------------------------------------------------------------------------------


def test_parse_reads_both_forms_in_order() -> None:
    text = (
        "看 [图片: 一只猫 | ref:data/x.png] 还有 [音频 | ref:a.mp3] 和 [文件: 主页.html | ref:workspace:/a]"
    )
    assert parse_attachment_refs(text) == [
        AttachmentRef("image", "data/x.png", "一只猫"),
        AttachmentRef("audio", "a.mp3", None),
        AttachmentRef("file", "workspace:/a", "主页.html"),
    ]


@pytest.mark.parametrize("text", ["[图片:  | ref:x]", "[图片:    | ref:x]", "[图片: \t | ref:x]"])
def test_empty_or_blank_desc_parses_as_none(text: str) -> None:
    assert parse_attachment_refs(text) == [AttachmentRef("image", "x", None)]


def test_the_parser_trims_desc_and_ref() -> None:
    """「parseAttachmentRefs 扫描文本里所有形如 [<kind>(: <desc>)? | ref:<ref>] 的占位符」, and returns what it
    found as the reference implementation does: desc and ref trimmed (``desc?.trim()``, ``ref.trim()``)."""
    assert parse_attachment_refs("[图片:  a  | ref:x]") == [AttachmentRef("image", "x", "a")]
    assert parse_attachment_refs("[图片:  一只猫 \t | ref: data/x.png  ]") == [
        AttachmentRef("image", "data/x.png", "一只猫")
    ]
    assert parse_attachment_refs("[文件 | ref:\u3000workspace:/a.html ]") == [
        AttachmentRef("file", "workspace:/a.html")
    ]
    assert parse_attachment_refs("[图片: 猫 | ref:   ]") == []  # a blank ref is no reference
    # what the formatter writes parses back the same: it trims the desc, and a ref is written as given
    ref = AttachmentRef("image", "p.png", " 猫 ")
    assert parse_attachment_refs(format_attachment_ref(ref)) == [AttachmentRef("image", "p.png", "猫")]


def test_ref_with_bracket_is_cut_at_the_first_bracket() -> None:
    text = format_attachment_ref(AttachmentRef("image", "a]b"))
    assert parse_attachment_refs(text) == [AttachmentRef("image", "a")]


def test_ref_with_newline_does_not_parse() -> None:
    assert parse_attachment_refs(format_attachment_ref(AttachmentRef("image", "a\nb"))) == []


@pytest.mark.parametrize(
    "text",
    [
        "[照片 | ref:x]",  # unknown kind
        "[图片| ref:x]",  # no space before the bar
        "[图片 |ref:x]",
        "[图片 | ref:]",  # empty ref
        "[图片:a | ref:x]",  # no space after the colon
        "[图片: a|b | ref:x]",  # a bare "|" in the desc: the parser does not read it (the matcher does)
        "[图片: a\nb | ref:x]",
        "[图片 | ref:x",
        "图片 | ref:x]",
    ],
)
def test_near_misses_do_not_parse(text: str) -> None:
    assert parse_attachment_refs(text) == []


def test_a_ref_may_hold_the_separator_and_brackets() -> None:
    assert parse_attachment_refs("[图片: d | ref:a | ref:[b]") == [AttachmentRef("image", "a | ref:[b", "d")]


def test_leftmost_opener_wins_inside_one_bracket_pair() -> None:
    # Regex semantics: the match starts at the first "[" that can start one.
    assert parse_attachment_refs("[图片: 见[图片: 猫 | ref:x]") == [
        AttachmentRef("image", "x", "见[图片: 猫")
    ]
    assert parse_attachment_refs("[图片: a|b [音频 | ref:x]") == [AttachmentRef("audio", "x")]


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(GRAMMAR_TEXT)
def test_parser_agrees_with_the_reference_regex(text: str) -> None:
    assert parse_attachment_refs(text) == reference_parse(text)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_parser_never_raises_on_arbitrary_text(text: str) -> None:
    assert parse_attachment_refs(text) == reference_parse(text)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(KINDS, SAFE_REFS, st.one_of(st.none(), st.text(), GRAMMAR_TEXT))
def test_format_then_parse_round_trips(kind: AttachmentRefKind, ref: str, desc: str | None) -> None:
    original = AttachmentRef(kind, ref, desc)
    text = format_attachment_ref(original)
    assert parse_attachment_refs(text) == [normalized(original)]
    # ... also with other placeholders and text around it, separated by a line break
    other = AttachmentRef("file", "f.txt", "x")
    around = f"前文\n{text}\n{format_attachment_ref(other)} 后文"
    assert parse_attachment_refs(around) == [normalized(original), other]


# --- matcher --------------------------------------------------------------------------------------


def test_matcher_rewrites_a_description() -> None:
    matcher = build_attachment_ref_matcher(AttachmentRefKind.IMAGE, "data/x.png")
    text = "前 [图片: 旧描述 | ref:data/x.png] 中 [图片 | ref:data/x.png] 后 [图片 | ref:data/y.png]"
    new = format_attachment_ref(AttachmentRef("image", "data/x.png", "新描述"))
    assert matcher.sub(new, text) == f"前 {new} 中 {new} 后 [图片 | ref:data/y.png]"


def test_matcher_reads_a_stored_desc_with_a_bare_bar_that_the_parser_skips() -> None:
    stored = "[图片: | a | b | | ref:x.png]"
    assert parse_attachment_refs(stored) == []
    match = build_attachment_ref_matcher("image", "x.png").search(stored)
    assert match is not None and match.group(0) == stored


def test_matcher_is_specific_to_kind_and_ref() -> None:
    matcher = build_attachment_ref_matcher("image", "a.png")
    assert matcher.search("[音频 | ref:a.png]") is None
    assert matcher.search("[图片 | ref:a.png.bak]") is None
    assert matcher.search("[图片 | ref:b.png]") is None
    assert matcher.search("[图片: a\nb | ref:a.png]") is None  # no line break in a desc


def test_matcher_treats_the_ref_as_a_literal() -> None:
    matcher = build_attachment_ref_matcher("image", "a.b(c)*]")
    assert matcher.search("[图片 | ref:aXb(c)*]]") is None
    text = format_attachment_ref(AttachmentRef("image", "a.b(c)*]", "d"))
    match = matcher.search(text)
    assert match is not None and match.group(0) == text


@pytest.mark.parametrize("ref", ["", None])
def test_matcher_rejects_an_empty_ref(ref: object) -> None:
    with pytest.raises(AttachmentRefError, match="ref must be a non-empty string"):
        build_attachment_ref_matcher("image", ref)  # type: ignore[arg-type]


def test_matcher_rejects_an_unknown_kind() -> None:
    with pytest.raises(AttachmentRefError, match="unknown kind"):
        build_attachment_ref_matcher("gif", "x")


def test_matcher_bound_on_nested_openers_is_documented_behaviour() -> None:
    inner = "[图片: 猫 | ref:x]"
    within = "[图片: " + "[图片:" * MATCHER_NESTED_OPENERS + " 猫 | ref:x]"
    beyond = "[图片: " + "[图片:" * (MATCHER_NESTED_OPENERS + 1) + " 猫 | ref:x]"
    matcher = build_attachment_ref_matcher("image", "x")
    hit = matcher.search(within)
    assert hit is not None and hit.group(0) == within
    hit = matcher.search(beyond)
    assert hit is not None and hit.group(0) == inner and hit.end() == len(beyond)


@settings(max_examples=300, deadline=None)
@given(KINDS, st.text(min_size=1), st.one_of(st.none(), st.text(), GRAMMAR_TEXT))
def test_matcher_finds_whatever_format_wrote(kind: AttachmentRefKind, ref: str, desc: str | None) -> None:
    text = format_attachment_ref(AttachmentRef(kind, ref, desc))
    assume(text.count(f"[{kind.value}:") <= MATCHER_NESTED_OPENERS)
    match = build_attachment_ref_matcher(kind, ref).search(text)
    assert match is not None and match.group(0) == text


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "|", " ", "[", ":", "图片"]), max_size=10).map("".join), SAFE_REFS)
def test_matcher_finds_stored_descs_with_bare_bars(desc: str, ref: str) -> None:
    assume("]" not in desc and "\n" not in desc)
    stored = f"[图片: {desc} | ref:{ref}]"
    match = build_attachment_ref_matcher("image", ref).search(stored)
    assert match is not None and match.group(0) == stored


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(GRAMMAR_TEXT, st.sampled_from(["a", "a]", "ref:a", "a|b", "图片"]))
def test_matcher_agrees_with_the_seed_regex_within_the_opener_bound(text: str, ref: str) -> None:
    assume(text.count("[图片:") <= MATCHER_NESTED_OPENERS)
    seed = re.compile(SEED_MATCHER.format(kind="图片", ref=re.escape(ref)))
    ours = build_attachment_ref_matcher("image", ref)
    assert [m.span() for m in ours.finditer(text)] == [m.span() for m in seed.finditer(text)]


@given(st.text())
def test_written_desc_is_trimmed_and_parses_back(desc: str) -> None:
    # "must never emit" a blank or padded description: format trims it (reference: desc?.trim()).
    placeholder = format_attachment_ref(AttachmentRef("image", "p", desc))
    expected = sanitize_desc(desc) or None
    assert expected is None or expected == expected.strip()
    assert placeholder == (f"[图片: {expected} | ref:p]" if expected else "[图片 | ref:p]")
    assert [r.desc for r in parse_attachment_refs(placeholder)] == [expected]
