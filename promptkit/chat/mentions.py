"""The ``<at id="X">`` mention grammar, OneBot CQ codes, and markup-aware escaping and splitting.

Pipeline contract §5. Adapters write mentions and media into the text a model reads as a small family
of inline tags; everything downstream (archive, vector memory, trigger policy) reads them back with
the regexes below. This module is the one place that writes and reads them (the forward
placeholder's formatter is :func:`promptkit.forward_placeholder`, which the renderer calls).

Producers::

    <at id="QQ">昵称</at>        a mention          format_at(user_id, name)
    <at self id="QQ">昵称</at>   the bot itself     format_at_self(user_id, name)
    <at>all</at>                 everybody          format_at_all()

Tags the OneBot renderer writes for the other segments (one form, always with double quotes)::

    <image url="U"/>  <record url="U"/>  <video url="U"/>  <reply id="I"/>  <face id="I"/>
    <forward id="I">[合并转发消息]</forward>

>>> normalize_cq_message("[CQ:at,qq=42] 你好&#91;1&#93;", self_id="42", nicknames={"42": "小爱"})
'<at self id="42">小爱</at> 你好[1]'
>>> extract_mentions('<at id="7">阿七</at> <at self id="42">小爱</at> <at>all</at>')
['7', '42']
>>> check_immediate_mention('<at self id="42">小爱</at> 在吗')
True
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import attrs

from promptkit.errors import MarkupError

__all__ = [
    "AT_SELF_PATTERN",
    "MARKUP_TAG_NAMES",
    "MENTION_PATTERN",
    "CQSegment",
    "MarkupError",
    "check_immediate_mention",
    "escape_markup",
    "extract_mentions",
    "format_at",
    "format_at_all",
    "format_at_self",
    "normalize_cq_message",
    "parse_cq_segments",
    "render_cq_segments",
    "split_markup_text",
]


# --- the grammar ----------------------------------------------------------------------------------

#: The inline tag family (pipeline contract §5.1). ``at`` and ``forward`` are paired (``<at …>…</at>``); the
#: others are single tags (``<image url="…"/>``).
MARKUP_TAG_NAMES: Final[tuple[str, ...]] = ("at", "image", "reply", "face", "video", "record", "forward")
_PAIRED: Final[frozenset[str]] = frozenset({"at", "forward"})

#: The bot was mentioned: ``<at self …>…</at>``, exactly the contract's regex (trigger policy reads it).
#: Its lazy ``[\s\S]*?`` backtracks from every opener, so ``AT_SELF_PATTERN.search`` is quadratic
#: on text with many unclosed ``<at self`` openers; :func:`check_immediate_mention` gives the same
#: answer in linear time.
AT_SELF_PATTERN: Final[re.Pattern[str]] = re.compile(r"<at self[\s>][\s\S]*?</at>")

#: The id of a mention or self-mention, exactly the contract's regex (archive and vector memory read it).
MENTION_PATTERN: Final[re.Pattern[str]] = re.compile(r'<at(?:\s+self)?\s+id="([^"]+)">')

_ESCAPED_LT: Final[str] = "＜"  # U+FF1C FULLWIDTH LESS-THAN SIGN
_LOOKALIKE: Final[re.Pattern[str]] = re.compile(
    r"<(?=/?(?i:" + "|".join(MARKUP_TAG_NAMES) + r")(?:[\s>/]|\Z))"
)


def escape_markup(text: str) -> str:
    """``text`` with every look-alike of an inline tag defused, so typed text cannot forge one.

    A ``<`` that opens or closes a tag of the family (``<at``, ``</at``, ``<forward``, ``<image``,
    ``<reply``, ``<face``, ``<video``, ``<record``, any letter case) followed by whitespace, ``>``,
    ``/`` or the end of the text becomes ``＜`` (U+FF1C). Nothing else changes. The result never
    matches :data:`AT_SELF_PATTERN`, :data:`MENTION_PATTERN` or a forward placeholder, and stays safe
    between tags (an opener cut at the end of the text is defused too, so a following tag cannot
    complete it). Escape a whole run of text at once: two pieces escaped apart and then joined can
    re-form an opener split between them (``<a`` + ``t self …``); :func:`render_cq_segments` joins
    adjacent text segments first for that reason.

    The escape is idempotent (``escape_markup(escape_markup(t)) == escape_markup(t)``) and not
    reversible: a ``＜`` the user typed reads the same as an escaped ``<``. A model reads either as
    the user's text.

    >>> escape_markup('<at self id="42">小爱</at> 1<2 <atom>')
    '＜at self id="42">小爱＜/at> 1<2 <atom>'
    """
    return _LOOKALIKE.sub(_ESCAPED_LT, text)


def _attr(value: str) -> str:
    """An attribute value: ``"`` -> ``&quot;``, ``<`` -> ``&lt;``, ``>`` -> ``&gt;``; the rest as is."""
    return value.replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def format_at(user_id: str, name: str | None = None) -> str:
    """A mention: ``<at id="X">name</at>``; ``name`` defaults to the id.

    The name is user-controlled (a nickname), so it goes through :func:`escape_markup`; the id is
    written as an attribute (``"``, ``<``, ``>`` become ``&quot;``, ``&lt;``, ``&gt;``; platform ids
    never contain them). An assistant reply writes @everybody as ``format_at("all")``.

    >>> format_at("123", "阿三"), format_at("123")
    ('<at id="123">阿三</at>', '<at id="123">123</at>')
    """
    return f'<at id="{_attr(user_id)}">{escape_markup(user_id if name is None else name)}</at>'


def format_at_self(user_id: str, name: str | None = None) -> str:
    """A mention of the bot itself: ``<at self id="X">name</at>`` (escaping as :func:`format_at`).

    >>> format_at_self("42", "小爱")
    '<at self id="42">小爱</at>'
    """
    return f'<at self id="{_attr(user_id)}">{escape_markup(user_id if name is None else name)}</at>'


def format_at_all() -> str:
    """A mention of everybody as an adapter writes it: ``<at>all</at>``."""
    return "<at>all</at>"


def _single_tag(name: str, attribute: str, value: str) -> str:
    return f'<{name} {attribute}="{_attr(value)}"/>'


def _forward_tag(forward_id: str) -> str:
    # The placeholder's one formatter lives with the platform layer (imported here, not at module
    # level, so the platform layer may import this module). _attr removes the '"' it would reject.
    from promptkit.chat.platform import forward_placeholder

    return forward_placeholder(_attr(forward_id))


# --- reading mentions -----------------------------------------------------------------------------


def check_immediate_mention(text: str) -> bool:
    """Whether ``text`` mentions the bot: ``AT_SELF_PATTERN.search(text) is not None``, in linear time.

    Only the structured ``<at self …>…</at>`` counts; CQ codes were normalized by the adapter and a
    name typed as text is not a mention.

    >>> check_immediate_mention('<at id="7">阿七</at>'), check_immediate_mention("<at self>x</at>")
    (False, True)
    """
    pos = 0
    while True:
        start = text.find("<at self", pos)
        if start == -1:
            return False
        after = start + len("<at self")
        if after < len(text) and (text[after] == ">" or text[after].isspace()):
            # The first opener decides: if no "</at>" follows it, none follows a later one either.
            return text.find("</at>", after + 1) != -1
        pos = start + 1


def extract_mentions(text: str) -> list[str]:
    """The ids mentioned in ``text``: ``<at id="…">`` and ``<at self id="…">``.

    In order of first appearance, without duplicates; ``all`` is never an id (adapters write
    @everybody as ``<at>all</at>``, replies as ``<at id="all">``). Ids are returned as written.

    >>> extract_mentions('<at id="1">a</at><at id="all">全体</at><at self id="2">b</at><at id="1">a</at>')
    ['1', '2']
    """
    seen: dict[str, None] = {}
    for match in MENTION_PATTERN.finditer(text):
        user_id = match.group(1)
        if user_id != "all":
            seen.setdefault(user_id, None)
    return list(seen)


# --- OneBot CQ codes ------------------------------------------------------------------------------


def _copy_data(data: Mapping[str, str]) -> dict[str, str]:
    return dict(data)


@attrs.frozen
class CQSegment:
    """One OneBot message segment: ``type`` and its ``data`` (values are strings).

    Plain text is ``CQSegment("text", {"text": …})``. ``data`` is copied on construction.
    """

    type: str
    data: dict[str, str] = attrs.field(factory=dict, converter=_copy_data, hash=False)


_CQ_UNESCAPES: Final[dict[str, str]] = {"&amp;": "&", "&#91;": "[", "&#93;": "]", "&#44;": ","}
_CQ_ESCAPE: Final[re.Pattern[str]] = re.compile("&amp;|&#91;|&#93;|&#44;")
_CQ_TYPE: Final[re.Pattern[str]] = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_BRACKET: Final[re.Pattern[str]] = re.compile(r"[\[\]]")


def _cq_unescape(value: str) -> str:
    # One pass, so "&amp;#91;" becomes "&#91;" and not "[".
    if "&" not in value:
        return value
    return _CQ_ESCAPE.sub(lambda m: _CQ_UNESCAPES[m.group(0)], value)


def _cq_code(body: str) -> CQSegment | None:
    """``type,key=value,…`` -> a segment, or None when the body is not a well-formed CQ code."""
    parts = body.split(",")
    if not _CQ_TYPE.fullmatch(parts[0]):
        return None
    data: dict[str, str] = {}
    for part in parts[1:]:
        key, eq, value = part.partition("=")
        if not eq or not key:
            return None
        data[key] = _cq_unescape(value)
    return CQSegment(parts[0], data)


def parse_cq_segments(text: str) -> list[CQSegment]:
    """OneBot v11 string-format message -> segments.

    ``[CQ:type,key=value,…]`` becomes ``CQSegment(type, {key: value})`` (a repeated key keeps its last
    value); the text between codes becomes ``CQSegment("text", {"text": …})``. The CQ escapes
    ``&amp;`` ``&#91;`` ``&#93;`` ``&#44;`` are undone in text and in values, in one pass. A code is
    ``[CQ:`` + a type of ``[A-Za-z0-9_.-]`` + ``,key=value`` pairs (non-empty key, no ``[``) + ``]``;
    anything else (``[CQ:at,qq]``, an unclosed ``[CQ:``) stays in the text, nothing is dropped.
    Linear time, never raises on a string.

    >>> parse_cq_segments("hi[CQ:at,qq=1]&#44;[CQ:face,id=14]")
    [CQSegment(type='text', data={'text': 'hi'}), CQSegment(type='at', data={'qq': '1'}), CQSegment(type='text', data={'text': ','}), CQSegment(type='face', data={'id': '14'})]
    """
    segments: list[CQSegment] = []
    text_start = 0  # start of the pending text
    pos = text.find("[CQ:")
    while pos != -1:
        bracket = _BRACKET.search(text, pos + 4)
        if bracket is None:
            break  # no "]" left: no code can close
        if bracket.group(0) == "]":
            code = _cq_code(text[pos + 4 : bracket.start()])
            if code is not None:
                if pos > text_start:
                    segments.append(CQSegment("text", {"text": _cq_unescape(text[text_start:pos])}))
                segments.append(code)
                text_start = bracket.end()
            pos = text.find("[CQ:", bracket.end())
        else:  # a "[" before any "]": this opener cannot close; the next candidate is at or after it
            pos = text.find("[CQ:", bracket.start())
    if text_start < len(text):
        segments.append(CQSegment("text", {"text": _cq_unescape(text[text_start:])}))
    return segments


_MEDIA: Final[dict[str, str]] = {"image": "image", "record": "record", "video": "video"}
_BY_ID: Final[frozenset[str]] = frozenset({"reply", "face"})


def _render_segment(segment: CQSegment, self_id: str | None, nicknames: Mapping[str, str] | None) -> str:
    data = segment.data
    kind = segment.type
    if kind == "at":
        qq = str(data.get("qq", ""))
        if qq == "all":
            return format_at_all()
        nick = nicknames.get(qq) if nicknames is not None else None
        if nick is None:
            nick = qq
        return format_at_self(qq, nick) if self_id and qq == self_id else format_at(qq, nick)
    if kind in _MEDIA:
        return _single_tag(_MEDIA[kind], "url", data.get("url") or data.get("file") or "")
    if kind in _BY_ID:
        return _single_tag(kind, "id", data.get("id", ""))
    if kind == "forward":
        return _forward_tag(data.get("id", ""))
    return escape_markup(f"[{kind}]")


def render_cq_segments(
    segments: Iterable[CQSegment],
    *,
    self_id: str | None = None,
    nicknames: Mapping[str, str] | None = None,
) -> str:
    """Segments -> the text a model reads (the OneBot adapter's renderer, pipeline contract §5.1).

    - ``at``: ``<at id="QQ">nick</at>``, with ``self`` when ``qq == self_id`` (a non-empty
      ``self_id``); ``qq=all`` -> ``<at>all</at>``; ``nick`` is ``nicknames[qq]`` or the qq.
    - ``image`` / ``record`` / ``video``: ``<image url="…"/>`` etc., the ``url`` data (or ``file``).
    - ``reply`` / ``face``: ``<reply id="…"/>`` / ``<face id="…"/>``.
    - ``forward``: the forward placeholder ``<forward id="…">[合并转发消息]</forward>``.
    - ``text``: the text through :func:`escape_markup`. Adjacent text segments are joined before
      escaping, so an opener split across two segments is defused too.
    - any other type: ``[type]`` (e.g. ``[json]``, ``[poke]``), so no CQ code reaches the model.

    >>> render_cq_segments([CQSegment("reply", {"id": "9"}), CQSegment("text", {"text": "<at self>"})])
    '<reply id="9"/>＜at self>'
    """
    out: list[str] = []
    pending: list[str] = []
    for segment in segments:
        if segment.type == "text":
            pending.append(str(segment.data.get("text", "")))
            continue
        if pending:
            out.append(escape_markup("".join(pending)))
            pending.clear()
        out.append(_render_segment(segment, self_id, nicknames))
    if pending:
        out.append(escape_markup("".join(pending)))
    return "".join(out)


def normalize_cq_message(
    text: str,
    *,
    self_id: str | None = None,
    nicknames: Mapping[str, str] | None = None,
) -> str:
    """A CQ-code string as the model reads it: ``render_cq_segments(parse_cq_segments(text), …)``.

    Without ``self_id`` and ``nicknames`` this is the contract's normalization of forwarded node content
    (``[CQ:at,qq=X]`` -> ``<at id="X">X</at>``).

    >>> normalize_cq_message("[CQ:image,file=a.jpg,url=https://x/a.jpg]看图")
    '<image url="https://x/a.jpg"/>看图'
    """
    return render_cq_segments(parse_cq_segments(text), self_id=self_id, nicknames=nicknames)


# --- splitting long text --------------------------------------------------------------------------

_TAG_OPEN: Final[re.Pattern[str]] = re.compile(r"<(" + "|".join(MARKUP_TAG_NAMES) + r")(?=[\s>/])")
_OPENER_END: Final[re.Pattern[str]] = re.compile(r"[<>\n]")
_WHITESPACE: Final[re.Pattern[str]] = re.compile(r"\s")


class _NextFinder:
    """``text.find(needle, pos)`` for non-decreasing ``pos``, in amortized linear total time."""

    __slots__ = ("found", "needle", "text")

    def __init__(self, text: str, needle: str) -> None:
        self.text = text
        self.needle = needle
        self.found = -2  # -2: not looked yet; -1: none after the last look-up point

    def find(self, pos: int) -> int:
        if self.found == -1 or self.found >= pos:
            return self.found
        self.found = self.text.find(self.needle, pos)
        return self.found


def _markup_tags(text: str) -> list[tuple[int, int]]:
    """Spans of the inline tags in ``text``, in order, never overlapping.

    A tag opens with ``<NAME`` (a family name, lowercase) followed by whitespace, ``>`` or ``/``, and
    its opener runs to the first ``>`` with no ``<`` and no line break before it. ``at`` and
    ``forward`` openers not ending in ``/>`` extend to the first matching closer (``</at>``) when it
    comes before the next line break; otherwise the opener alone is the tag. Tags never contain a
    line break. Linear time.
    """
    spans: list[tuple[int, int]] = []
    closers = {name: _NextFinder(text, f"</{name}>") for name in _PAIRED}
    newline = _NextFinder(text, "\n")
    last_end = 0
    for match in _TAG_OPEN.finditer(text):
        start = match.start()
        if start < last_end:
            continue
        stop = _OPENER_END.search(text, match.end())
        if stop is None or stop.group(0) != ">":
            continue  # the next candidate is at or after `stop`, so nothing is scanned twice
        end = stop.end()
        name = match.group(1)
        if name in _PAIRED and text[end - 2] != "/":
            close = closers[name].find(end)
            line_end = newline.find(end)
            if close != -1 and (line_end == -1 or close < line_end):
                end = close + len(name) + 3
        spans.append((start, end))
        last_end = end
    return spans


def split_markup_text(text: str, max_len: int) -> list[str]:
    """``text`` cut into pieces of at most ``max_len`` characters, never inside an inline tag.

    Tags are ``<at …>…</at>``, ``<forward …>…</forward>`` and the single ``<image …>``, ``<record …>``,
    ``<video …>``, ``<reply …>``, ``<face …>`` (see :func:`escape_markup` for typed look-alikes,
    which are plain text). Each piece ends at the last line break in reach (the ``\\n`` stays at the
    end of the piece); failing that, after the last whitespace character outside a tag; failing that,
    at the furthest position not inside a tag. A tag longer than ``max_len`` becomes a piece of its
    own, the only case where a piece is longer than ``max_len``.

    Nothing is removed: ``"".join(pieces) == text`` (strip the pieces yourself if the platform wants
    it). An empty text gives ``[]``. Lengths count code points. Linear time (plus a logarithmic
    look-up per piece).

    >>> split_markup_text('ab <at id="1">某某</at> cd\\nefgh', 6)
    ['ab ', '<at id="1">某某</at>', ' cd\\n', 'efgh']
    """
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1:
        raise MarkupError(f"split_markup_text: max_len must be an int >= 1, got {max_len!r}")
    if len(text) <= max_len:
        return [text] if text else []
    spans = _markup_tags(text)
    starts = [s for s, _ in spans]
    newline_cuts = [m.end() for m in re.finditer("\n", text)]
    space_cuts: list[int] = []
    gap_start = 0
    for s, e in [*spans, (len(text), len(text))]:
        space_cuts.extend(m.end() for m in _WHITESPACE.finditer(text, gap_start, s))
        gap_start = e

    def last_cut(cuts: Sequence[int], lo: int, hi: int) -> int | None:
        i = bisect.bisect_right(cuts, hi) - 1
        return cuts[i] if i >= 0 and cuts[i] > lo else None

    pieces: list[str] = []
    pos = 0
    while len(text) - pos > max_len:
        limit = pos + max_len
        cut = last_cut(newline_cuts, pos, limit)
        if cut is None:
            cut = last_cut(space_cuts, pos, limit)
        if cut is None:
            cut = limit
            i = bisect.bisect_right(starts, limit) - 1
            if i >= 0 and starts[i] < limit < spans[i][1]:  # the limit falls inside a tag
                cut = starts[i] if starts[i] > pos else spans[i][1]
        pieces.append(text[pos:cut])
        pos = cut
    if pos < len(text):
        pieces.append(text[pos:])
    return pieces
