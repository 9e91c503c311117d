"""Tests for promptkit/chat/mentions.py: <at> mentions, CQ codes, escaping and splitting (seed §5)."""

from __future__ import annotations

import doctest
import re

import attrs
import pytest
from hypothesis import given, settings, strategies as st

import promptkit.chat.mentions as mentions_module
from promptkit.chat.mentions import (
    AT_SELF_PATTERN,
    MARKUP_TAG_NAMES,
    MENTION_PATTERN,
    CQSegment,
    MarkupError,
    _markup_tags,
    check_immediate_mention,
    escape_markup,
    extract_mentions,
    format_at,
    format_at_all,
    format_at_self,
    normalize_cq_message,
    parse_cq_segments,
    render_cq_segments,
    split_markup_text,
)
from promptkit.chat.platform import forward_placeholder

FORWARD_PATTERN = re.compile(r'<forward\s+id="([^"]*)">')
LOOKALIKE = re.compile(r"<(?=/?(?i:at|image|reply|face|video|record|forward)(?:[\s>/]|\Z))")

MARKUP_TOKENS = st.sampled_from(
    [
        "<",
        ">",
        "/",
        "<at",
        "<AT",
        "<at ",
        " self",
        "self",
        " id=",
        '"',
        '"1"',
        "1",
        "</at>",
        "</",
        "at>",
        "<forward",
        '<forward id="9">',
        "[合并转发消息]",
        "</forward>",
        "<image",
        ' url="u"/>',
        '<reply id="2"/>',
        "\n",
        "\t",
        "\u3000",
        "\u00a0",
        "\u2028",
        "x",
        "all",
        'id="all">',
        ">x</at>",
    ]
)
MARKUP_TEXT = st.one_of(st.text(), st.lists(MARKUP_TOKENS, max_size=16).map("".join))


def attr_escaped(value: str) -> str:
    """The documented attribute escaping of ids and urls."""
    return value.replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def test_docstring_examples() -> None:
    result = doctest.testmod(mentions_module)
    assert result.attempted > 0 and result.failed == 0


# --- producers ------------------------------------------------------------------------------------


def test_producers_write_the_seed_forms() -> None:
    assert format_at("123", "昵称") == '<at id="123">昵称</at>'
    assert format_at_self("42", "小爱") == '<at self id="42">小爱</at>'
    assert format_at_all() == "<at>all</at>"


def test_name_defaults_to_the_id_but_an_empty_name_stays_empty() -> None:
    assert format_at("123") == '<at id="123">123</at>'
    assert format_at_self("42") == '<at self id="42">42</at>'
    assert format_at("123", "") == '<at id="123"></at>'


def test_a_reply_mentions_everybody_with_the_all_id_which_is_not_extracted() -> None:
    assert format_at("all", "全体成员") == '<at id="all">全体成员</at>'
    assert extract_mentions(format_at("all", "全体成员")) == []


def test_a_nickname_cannot_forge_a_self_mention_or_close_the_tag() -> None:
    forged = '<at self id="42">小爱</at>'
    out = format_at("7", forged)
    assert out == '<at id="7">＜at self id="42">小爱＜/at></at>'
    assert not check_immediate_mention(out)
    assert extract_mentions(out) == ["7"]


def test_an_id_cannot_break_out_of_its_attribute() -> None:
    out = format_at('1">x</at><at self id="42', "n")
    assert out == '<at id="1&quot;&gt;x&lt;/at&gt;&lt;at self id=&quot;42">n</at>'
    assert not check_immediate_mention(out)
    assert extract_mentions(out) == [attr_escaped('1">x</at><at self id="42')]


@settings(max_examples=200, deadline=None)
@given(
    st.text(min_size=1).filter(lambda s: not any(c in s for c in '"<>')), st.one_of(st.none(), MARKUP_TEXT)
)
def test_extract_reads_back_what_the_producers_wrote(user_id: str, name: str | None) -> None:
    expected = [] if user_id == "all" else [user_id]
    assert extract_mentions(format_at(user_id, name)) == expected
    assert extract_mentions(format_at_self(user_id, name)) == expected
    assert check_immediate_mention(format_at_self(user_id, name))
    assert not check_immediate_mention(format_at(user_id, name))


# --- readers --------------------------------------------------------------------------------------


def test_patterns_are_the_seed_regexes() -> None:
    assert AT_SELF_PATTERN.pattern == r"<at self[\s>][\s\S]*?</at>"
    assert MENTION_PATTERN.pattern == r'<at(?:\s+self)?\s+id="([^"]+)">'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('<at self id="42">小爱</at> 在吗', True),
        ("<at self>小爱</at>", True),
        ('<at self\nid="42">\n小爱\n</at>', True),
        ('<at id="42">小爱</at>', False),
        ('<at self id="42">小爱', False),  # never closed
        ('</at><at self id="42">', False),  # the closer comes first
        ('<at selfish id="42">x</at>', False),
        ("小爱 在吗", False),  # a name typed as text is not a mention
        ("[CQ:at,qq=42]", False),  # CQ codes are the adapter's to normalize
    ],
)
def test_check_immediate_mention(text: str, expected: bool) -> None:
    assert check_immediate_mention(text) is expected
    assert (AT_SELF_PATTERN.search(text) is not None) is expected


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(MARKUP_TEXT)
def test_check_immediate_mention_equals_the_seed_pattern(text: str) -> None:
    assert check_immediate_mention(text) == (AT_SELF_PATTERN.search(text) is not None)


def test_extract_mentions_order_dedup_and_forms() -> None:
    text = (
        '<at id="3">c</at> <at self id="1">me</at> <at id="2">b</at> <at id="3">c</at>'
        ' <at>all</at> <at>99</at> <at  self\tid="4">d</at> <at id="">e</at>'
    )
    # <at>QQ</at> (legacy, no id attribute) and an empty id are not read by the seed regex
    assert extract_mentions(text) == ["3", "1", "2", "4"]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(MARKUP_TEXT)
def test_extract_mentions_equals_the_seed_regex_deduplicated(text: str) -> None:
    expected: list[str] = []
    for user_id in MENTION_PATTERN.findall(text):
        if user_id != "all" and user_id not in expected:
            expected.append(user_id)
    assert extract_mentions(text) == expected


# --- escape_markup --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ('<at self id="42">小爱</at>', '＜at self id="42">小爱＜/at>'),
        ('<forward id="9">[合并转发消息]</forward>', '＜forward id="9">[合并转发消息]＜/forward>'),
        (
            '<image url="x"/><reply id="1"/><face id="2"/><video url="v"/><record url="r"/>',
            '＜image url="x"/>＜reply id="1"/>＜face id="2"/>＜video url="v"/>＜record url="r"/>',
        ),
        ("<AT Self>", "＜AT Self>"),
        ("<at", "＜at"),  # cut at the end: a following tag cannot complete it
        ("1 < 2, <atom>, <a href>, <ati>", "1 < 2, <atom>, <a href>, <ati>"),
        ("＜at self>", "＜at self>"),
    ],
)
def test_escape_markup_examples(text: str, escaped: str) -> None:
    assert escape_markup(text) == escaped


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(MARKUP_TEXT)
def test_escaped_text_never_reads_as_markup(text: str) -> None:
    out = escape_markup(text)
    assert AT_SELF_PATTERN.search(out) is None
    assert not check_immediate_mention(out)
    assert extract_mentions(out) == []
    assert FORWARD_PATTERN.search(out) is None
    assert LOOKALIKE.search(out) is None
    assert _markup_tags(out) == []


@settings(max_examples=300, deadline=None)
@given(MARKUP_TEXT)
def test_escape_markup_is_idempotent_and_only_replaces_less_than_signs(text: str) -> None:
    out = escape_markup(text)
    assert escape_markup(out) == out
    assert len(out) == len(text)
    assert all(a == b or (a == "<" and b == "＜") for a, b in zip(text, out, strict=True))


@settings(max_examples=300, deadline=None)
@given(
    MARKUP_TEXT,
    st.sampled_from([format_at("1", "a"), format_at_self("2"), '<image url="u"/>', forward_placeholder("3")]),
)
def test_escaped_text_stays_inert_next_to_a_real_tag(text: str, tag: str) -> None:
    for joined in (escape_markup(text) + tag, tag + escape_markup(text)):
        assert check_immediate_mention(joined) == (tag == format_at_self("2"))
        assert len(extract_mentions(joined)) == (1 if tag.startswith("<at") else 0)
        assert len(FORWARD_PATTERN.findall(joined)) == (1 if tag.startswith("<forward") else 0)


# --- CQ codes: parse ------------------------------------------------------------------------------


def cq_escape_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("[", "&#91;").replace("]", "&#93;")


def cq_escape_value(value: str) -> str:
    return cq_escape_text(value).replace(",", "&#44;")


def to_cq(segments: list[CQSegment]) -> str:
    out = []
    for s in segments:
        if s.type == "text":
            out.append(cq_escape_text(s.data["text"]))
        else:
            params = "".join(f",{k}={cq_escape_value(v)}" for k, v in s.data.items())
            out.append(f"[CQ:{s.type}{params}]")
    return "".join(out)


def test_parse_cq_segments_example() -> None:
    text = (
        "[CQ:reply,id=-12]你好[CQ:at,qq=42] 看 [CQ:image,file=a.jpg,url=https://x/a?b=1&amp;c=2]&#91;完&#93;"
    )
    assert parse_cq_segments(text) == [
        CQSegment("reply", {"id": "-12"}),
        CQSegment("text", {"text": "你好"}),
        CQSegment("at", {"qq": "42"}),
        CQSegment("text", {"text": " 看 "}),
        CQSegment("image", {"file": "a.jpg", "url": "https://x/a?b=1&c=2"}),
        CQSegment("text", {"text": "[完]"}),
    ]


def test_cq_escapes_are_undone_in_one_pass_in_text_and_values() -> None:
    assert parse_cq_segments("&amp;#91;&#44;&amp;amp;") == [CQSegment("text", {"text": "&#91;,&amp;"})]
    assert parse_cq_segments("[CQ:share,title=a&#44;b&#91;c&#93;&amp;#44;]") == [
        CQSegment("share", {"title": "a,b[c]&#44;"})
    ]


@pytest.mark.parametrize(
    "text",
    [
        "[CQ:at,qq]",
        "[CQ:at,=1]",
        "[CQ:]",
        "[CQ:,qq=1]",
        "[CQ:at qq=1]",
        "[CQ:at,qq=1",
        "[CQ:face,id=1,]",
        "[CQ:at,qq=[1]",
    ],
)
def test_malformed_codes_stay_text(text: str) -> None:
    assert parse_cq_segments(text) == [CQSegment("text", {"text": text})]


def test_a_malformed_opener_does_not_hide_the_next_code() -> None:
    assert parse_cq_segments("[CQ:at,qq=[CQ:face,id=1]x") == [
        CQSegment("text", {"text": "[CQ:at,qq="}),
        CQSegment("face", {"id": "1"}),
        CQSegment("text", {"text": "x"}),
    ]


def test_repeated_key_keeps_the_last_value_and_empty_values_are_kept() -> None:
    assert parse_cq_segments("[CQ:at,qq=1,qq=2,name=]") == [CQSegment("at", {"qq": "2", "name": ""})]


def test_empty_text_has_no_segments() -> None:
    assert parse_cq_segments("") == []


def test_cq_segment_is_a_frozen_value_that_copies_its_data() -> None:
    data = {"qq": "1"}
    segment = CQSegment("at", data)
    data["qq"] = "2"
    assert segment.data == {"qq": "1"}
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        segment.type = "face"  # type: ignore[misc]
    assert segment == CQSegment("at", {"qq": "1"}) != CQSegment("at", {"qq": "2"})
    assert isinstance(hash(segment), int)  # hashable although data is a dict


CQ_TYPES = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,6}", fullmatch=True).filter(lambda t: t != "text")
CQ_KEYS = st.from_regex(r"[a-z_]{1,5}", fullmatch=True)
CQ_CODES = st.builds(CQSegment, CQ_TYPES, st.dictionaries(CQ_KEYS, st.text(max_size=8), max_size=3))
CQ_TEXTS = st.builds(lambda t: CQSegment("text", {"text": t}), st.text(min_size=1, max_size=12))


@st.composite
def cq_messages(draw: st.DrawFn) -> list[CQSegment]:
    codes = draw(st.lists(CQ_CODES, max_size=4))
    out: list[CQSegment] = []
    for code in codes:
        if draw(st.booleans()):
            out.append(draw(CQ_TEXTS))
        out.append(code)
    if draw(st.booleans()):
        out.append(draw(CQ_TEXTS))
    return out


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(cq_messages())
def test_parse_reads_back_escaped_segments(segments: list[CQSegment]) -> None:
    assert parse_cq_segments(to_cq(segments)) == segments


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(),
        st.lists(
            st.sampled_from(["[CQ:", "at", ",", "qq=", "1", "]", "[", "&#91;", "&amp;", "x"]), max_size=16
        ).map("".join),
    )
)
def test_parse_never_raises_and_drops_nothing(text: str) -> None:
    segments = parse_cq_segments(text)
    assert all(s.type != "text" or s.data["text"] for s in segments)
    # every character is accounted for: re-escaping gives the text back up to escape normalization
    assert parse_cq_segments(to_cq(segments)) == segments
    if "&" not in text and "[CQ:" not in text:
        assert segments == ([CQSegment("text", {"text": text})] if text else [])


# --- CQ codes: render -----------------------------------------------------------------------------


def test_render_each_segment_type() -> None:
    segments = [
        CQSegment("at", {"qq": "7"}),
        CQSegment("at", {"qq": "42"}),
        CQSegment("at", {"qq": "all"}),
        CQSegment("image", {"file": "a.jpg", "url": "https://x/a.jpg?a=1&b=2"}),
        CQSegment("image", {"file": "b.jpg"}),
        CQSegment("record", {"file": "v.amr"}),
        CQSegment("video", {"url": "https://x/v.mp4"}),
        CQSegment("reply", {"id": "-3"}),
        CQSegment("face", {"id": "14"}),
        CQSegment("forward", {"id": "F1"}),
        CQSegment("json", {"data": "{}"}),
        CQSegment("text", {"text": "end"}),
    ]
    assert render_cq_segments(segments, self_id="42", nicknames={"7": "阿七", "42": "小爱"}) == (
        '<at id="7">阿七</at><at self id="42">小爱</at><at>all</at>'
        '<image url="https://x/a.jpg?a=1&b=2"/><image url="b.jpg"/><record url="v.amr"/>'
        '<video url="https://x/v.mp4"/><reply id="-3"/><face id="14"/>'
        '<forward id="F1">[合并转发消息]</forward>[json]end'
    )


def test_render_forward_is_the_platform_placeholder() -> None:
    assert render_cq_segments([CQSegment("forward", {"id": "7231"})]) == forward_placeholder("7231")
    # a quote in a forward id is escaped instead of raising
    assert render_cq_segments([CQSegment("forward", {"id": 'a"b'})]) == forward_placeholder("a&quot;b")


def test_render_self_needs_a_non_empty_self_id() -> None:
    assert render_cq_segments([CQSegment("at", {"qq": ""})], self_id="") == '<at id=""></at>'
    assert render_cq_segments([CQSegment("at", {"qq": "42"})], self_id=None) == '<at id="42">42</at>'


def test_render_nick_defaults_to_the_qq_but_an_empty_nick_is_kept() -> None:
    assert render_cq_segments([CQSegment("at", {"qq": "7"})], nicknames={}) == '<at id="7">7</at>'
    assert render_cq_segments([CQSegment("at", {"qq": "7"})], nicknames={"7": ""}) == '<at id="7"></at>'


def test_render_escapes_typed_markup_and_joins_adjacent_text_first() -> None:
    split_opener = [CQSegment("text", {"text": "<a"}), CQSegment("text", {"text": 't self id="42">x</at>'})]
    out = render_cq_segments(split_opener, self_id="42")
    assert out == '＜at self id="42">x＜/at>'
    assert not check_immediate_mention(out)


def test_normalize_matches_the_seeds_forward_node_normalization() -> None:
    seed = re.compile(r"\[CQ:at,[^\]]*qq=([^,\]]+)[^\]]*\]")
    text = "[CQ:at,qq=123] 你看 [CQ:at,name=x,qq=456,text=y]"
    assert normalize_cq_message(text) == seed.sub(r'<at id="\1">\1</at>', text)
    assert normalize_cq_message(text) == '<at id="123">123</at> 你看 <at id="456">456</at>'


def test_normalize_example_with_self_and_nicknames() -> None:
    out = normalize_cq_message(
        "[CQ:at,qq=42] 帮我看看 [CQ:at,qq=7]", self_id="42", nicknames={"42": "小爱", "7": "阿七"}
    )
    assert out == '<at self id="42">小爱</at> 帮我看看 <at id="7">阿七</at>'
    assert check_immediate_mention(out) and extract_mentions(out) == ["42", "7"]


QQS = st.sampled_from(["42", "7", "all", "", '1"2', "<at self id=", "8"])
RENDER_SEGMENTS = st.lists(
    st.one_of(
        st.builds(lambda t: CQSegment("text", {"text": t}), MARKUP_TEXT),
        st.builds(lambda q: CQSegment("at", {"qq": q}), QQS),
        st.builds(
            lambda t, v: CQSegment(t, {"url": v, "id": v}),
            st.sampled_from(["image", "record", "video", "reply", "face", "forward", "poke", "<at"]),
            MARKUP_TEXT,
        ),
    ),
    max_size=8,
)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(
    RENDER_SEGMENTS, st.sampled_from([None, "", "42", "all"]), st.dictionaries(QQS, MARKUP_TEXT, max_size=3)
)
def test_rendered_text_mentions_exactly_the_at_segments(
    segments: list[CQSegment], self_id: str | None, nicknames: dict[str, str]
) -> None:
    out = render_cq_segments(segments, self_id=self_id, nicknames=nicknames)
    qqs = [s.data["qq"] for s in segments if s.type == "at"]
    expected: list[str] = []
    for qq in qqs:
        if qq not in ("", "all") and attr_escaped(qq) not in expected:
            expected.append(attr_escaped(qq))
    assert extract_mentions(out) == expected
    assert check_immediate_mention(out) == any(bool(self_id) and qq == self_id and qq != "all" for qq in qqs)
    assert len(FORWARD_PATTERN.findall(out)) == sum(s.type == "forward" for s in segments)
    assert "[CQ:" not in out or any(s.type == "text" and "[CQ:" in s.data["text"] for s in segments)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_normalize_never_raises(text: str) -> None:
    out = normalize_cq_message(text, self_id="42")
    assert isinstance(out, str)


# --- split_markup_text ----------------------------------------------------------------------------


def test_split_prefers_newlines_then_whitespace_then_a_hard_cut() -> None:
    assert split_markup_text("aaaa\nbb cc", 8) == ["aaaa\n", "bb cc"]
    assert split_markup_text("aa bb cc dd", 7) == ["aa bb ", "cc dd"]
    assert split_markup_text("abcdefghij", 4) == ["abcd", "efgh", "ij"]


def test_split_never_cuts_a_tag() -> None:
    tag = format_at("123", "某某")
    text = f"ab{tag}cd"
    # the limit falls inside the tag twice: first the cut moves before it, then after it
    assert split_markup_text(text, len(tag) + 1) == ["ab", tag + "c", "d"]
    assert split_markup_text(text, len(tag) + 2) == ["ab" + tag, "cd"]


def test_a_tag_longer_than_max_len_is_a_piece_of_its_own() -> None:
    tag = '<image url="https://example.com/very/long/path.png"/>'
    assert split_markup_text(f"看{tag}了", 10) == ["看", tag, "了"]


@pytest.mark.parametrize(
    "tag",
    [
        format_at_all(),
        format_at_self("42", "小 爱"),
        '<reply id="1"/>',
        '<face id="14"/>',
        '<video url="v w"/>',
        '<record url="r"/>',
        forward_placeholder("9"),
        '<image url="u">',
    ],
)
def test_every_tag_of_the_family_is_whole(tag: str) -> None:
    text = "x " * 5 + tag + " y" * 5
    for max_len in range(1, len(text) + 1):
        pieces = split_markup_text(text, max_len)
        assert "".join(pieces) == text
        assert any(tag in p for p in pieces), (max_len, pieces)


def test_paired_tag_stops_at_a_line_break_and_an_unclosed_opener_is_whole() -> None:
    assert _markup_tags('<at id="1">a\nb</at>') == [(0, 11)]
    assert _markup_tags('<at id="1">ab') == [(0, 11)]
    assert _markup_tags('<image url="a\nb"/>') == []
    assert _markup_tags('<image url="a<b"/>') == []
    assert _markup_tags("<atom> <at> </at>") == [(7, 17)]


def test_split_edge_cases() -> None:
    assert split_markup_text("", 5) == []
    assert split_markup_text("abc", 3) == ["abc"]
    for bad in (0, -1, True, 2.5):
        with pytest.raises(MarkupError, match="max_len"):
            split_markup_text("abc", bad)  # type: ignore[arg-type]


TAGS = st.one_of(
    st.builds(
        format_at,
        st.sampled_from(["1", "22", "all"]),
        st.text(max_size=6).filter(
            lambda s: "\n" not in s and not any(c in s for c in "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
        ),
    ),
    st.builds(format_at_self, st.sampled_from(["42"])),
    st.just(format_at_all()),
    st.builds(
        lambda u: f'<image url="{attr_escaped(u)}"/>', st.text(max_size=30).filter(lambda s: "\n" not in s)
    ),
    st.builds(forward_placeholder, st.sampled_from(["1", "abc"])),
    st.sampled_from(['<reply id="5"/>', '<face id="1"/>', '<video url="v"/>', '<record url="r"/>']),
)
PLAIN = st.text(alphabet=st.sampled_from(list("ab <>/\n\t\u3000中")), max_size=12)


@st.composite
def markup_documents(draw: st.DrawFn) -> tuple[str, list[tuple[int, int]]]:
    parts = draw(st.lists(st.tuples(PLAIN, TAGS), max_size=6))
    text, spans = "", []
    for plain, tag in parts:
        text += plain
        spans.append((len(text), len(text) + len(tag)))
        text += tag
    return text + draw(PLAIN), spans


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(markup_documents(), st.integers(min_value=1, max_value=40))
def test_split_properties(document: tuple[str, list[tuple[int, int]]], max_len: int) -> None:
    text, known = document
    pieces = split_markup_text(text, max_len)
    assert "".join(pieces) == text
    assert all(pieces)
    tags = _markup_tags(text)
    cuts, pos = [], 0
    for piece in pieces:
        if len(piece) > max_len:  # only a single oversized tag may exceed the limit
            assert (pos, pos + len(piece)) in tags
        pos += len(piece)
        cuts.append(pos)
    for cut in cuts:
        assert not any(s < cut < e for s, e in known)
        assert not any(s < cut < e for s, e in tags)
    pos = 0
    for piece in pieces[:-1]:
        window = text[pos : pos + max_len]
        if not piece.endswith("\n"):  # no line break was in reach
            assert "\n" not in window
            if not piece[-1].isspace():  # no whitespace outside a tag was in reach
                assert not any(
                    text[i].isspace() and not any(s <= i < e for s, e in tags)
                    for i in range(pos, pos + len(window))
                )
        pos += len(piece)


def test_every_family_name_is_escaped_and_split_aware() -> None:
    for name in MARKUP_TAG_NAMES:
        assert escape_markup(f"<{name} ") == f"＜{name} "
        assert _markup_tags(f"<{name} x>") != []
