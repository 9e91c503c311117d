"""The attachment placeholder grammar ``[图片: desc | ref:…]`` (pipeline contract §4).

Attachments (images, audio, video, files) are written back into a model's text context as
readable, parseable placeholders. This module is the one source of that format: one formatter,
one parser, one matcher. Never write the string by hand.

>>> ref = AttachmentRef(AttachmentRefKind.IMAGE, "data/x.png", desc="一只猫")
>>> format_attachment_ref(ref)
'[图片: 一只猫 | ref:data/x.png]'
>>> format_attachment_ref(AttachmentRef("image", "data/x.png"))
'[图片 | ref:data/x.png]'
>>> parse_attachment_refs("看 [图片: 一只猫 | ref:data/x.png] 和 [音频 | ref:a.mp3]")
[AttachmentRef(kind=<AttachmentRefKind.IMAGE: '图片'>, ref='data/x.png', desc='一只猫'), AttachmentRef(kind=<AttachmentRefKind.AUDIO: '音频'>, ref='a.mp3', desc=None)]

Grammar (what :func:`parse_attachment_refs` reads)::

    "[" KIND ( ": " DESC )? " | ref:" REF "]"
    KIND = 图片 | 音频 | 视频 | 文件
    DESC = any characters but "]", "|" and "\\n"     (may be empty)
    REF  = one or more characters but "]" and "\\n"

The parser does not consume escapes, so :func:`format_attachment_ref` sanitizes the description on
write (line breaks -> a space, ``|`` -> ``丨``, ``]`` -> ``］``). The reference is written as it is:
a ``]`` in it makes the parser stop at that ``]`` (it returns the ref cut there), and a line break in
it makes the parser skip the whole placeholder. The parser trims the description and the reference it
returns, as the reference implementation does. :func:`build_attachment_ref_matcher` is unaffected:
it matches the ref as a literal.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

import attrs

from promptkit.errors import AttachmentRefError, InternalError, UsageError

__all__ = [
    "ATTACHMENT_REF_KINDS",
    "MATCHER_NESTED_OPENERS",
    "AttachmentRef",
    "AttachmentRefError",
    "AttachmentRefKind",
    "build_attachment_ref_matcher",
    "format_attachment_ref",
    "parse_attachment_refs",
    "sanitize_desc",
]


class AttachmentRefKind(enum.StrEnum):
    """The display name a placeholder starts with. Add a kind here and everything follows."""

    IMAGE = "图片"
    AUDIO = "音频"
    VIDEO = "视频"
    FILE = "文件"


#: Attachment kind (``MessageAttachment.kind``) -> placeholder kind. The one mapping every writer
#: and reader of placeholders looks up (platform message contract, "ATTACHMENT_REF_KINDS").
ATTACHMENT_REF_KINDS: Final[Mapping[str, AttachmentRefKind]] = MappingProxyType(
    {
        "image": AttachmentRefKind.IMAGE,
        "audio": AttachmentRefKind.AUDIO,
        "video": AttachmentRefKind.VIDEO,
        "file": AttachmentRefKind.FILE,
    }
)

_KIND_BY_NAME: Final[dict[str, AttachmentRefKind]] = {k.value: k for k in AttachmentRefKind}
# Every display name has the same length; the parser relies on it to look a kind up in O(1).
_KIND_LEN: Final[int] = 2
if any(len(name) != _KIND_LEN for name in _KIND_BY_NAME):  # pragma: no cover - guards future edits
    raise InternalError(f"AttachmentRefKind display names must all be {_KIND_LEN} characters long")

#: How many copies of its own opener (``[图片:`` for an image matcher) a description may contain and
#: still be matched from its real start by :func:`build_attachment_ref_matcher`. Bounding it keeps
#: ``search`` linear on adversarial text (see that function).
MATCHER_NESTED_OPENERS: Final[int] = 8

# \r\n counts as one line break; every other character str.splitlines() breaks on counts as one too.
_LINE_BREAK = re.compile(r"[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]+")
_SEPARATOR = " | ref:"


def _to_kind(value: object) -> AttachmentRefKind:
    if isinstance(value, AttachmentRefKind):
        return value
    if isinstance(value, str):
        if value in _KIND_BY_NAME:
            return _KIND_BY_NAME[value]
        if value in ATTACHMENT_REF_KINDS:
            return ATTACHMENT_REF_KINDS[value]
    known = ", ".join([*ATTACHMENT_REF_KINDS, *_KIND_BY_NAME])
    raise AttachmentRefError(f"AttachmentRef.kind: unknown kind {value!r} (expected one of {known})")


def _check_ref(_instance: object, _attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str):
        raise AttachmentRefError(f"AttachmentRef.ref: must be a string, got {type(value).__name__}")
    if not value:
        raise AttachmentRefError("AttachmentRef.ref: must not be empty (the placeholder would not parse)")


def _check_desc(_instance: object, _attribute: attrs.Attribute[str | None], value: str | None) -> None:
    if value is not None and not isinstance(value, str):
        raise AttachmentRefError(f"AttachmentRef.desc: must be a string or None, got {type(value).__name__}")


@attrs.frozen
class AttachmentRef:
    """One attachment placeholder: its kind, its reference and an optional description.

    ``kind`` accepts an :class:`AttachmentRefKind`, its display name (``"图片"``) or an attachment
    kind (``"image"``). ``ref`` is a local path, ``file://`` or ``http(s)`` URL or storage address,
    resolved by the caller; it must not be empty and should not contain ``]`` or a line break (the
    caller's guarantee, see the module docstring). ``desc`` is stored as given; the formatter
    sanitizes it on write.

    >>> AttachmentRef("image", "data/x.png").kind
    <AttachmentRefKind.IMAGE: '图片'>
    """

    kind: AttachmentRefKind = attrs.field(converter=_to_kind)
    ref: str = attrs.field(validator=_check_ref)
    desc: str | None = attrs.field(default=None, validator=_check_desc)


def sanitize_desc(desc: str) -> str:
    """The description as :func:`format_attachment_ref` writes it.

    Each run of line breaks folds to one space (``\\n``, ``\\r``, ``\\v``, ``\\f``, U+001C-U+001E,
    U+0085, U+2028 and U+2029, the breaks of :meth:`str.splitlines`), ``|`` becomes ``丨`` and ``]``
    becomes ``］``, then the result is stripped (the reference's ``desc?.trim()``): a blank
    description sanitizes to ``""``.

    >>> sanitize_desc("| a | b |\\r\\n|---|]")
    '丨 a 丨 b 丨 丨---丨］'
    >>> sanitize_desc(" 猫 "), sanitize_desc("一只\\n\\n猫"), sanitize_desc(" \\n ")
    ('猫', '一只 猫', '')
    """
    return _LINE_BREAK.sub(" ", desc).replace("|", "丨").replace("]", "］").strip()


def format_attachment_ref(ref: AttachmentRef) -> str:
    """The placeholder for ``ref``, byte-for-byte the historical format.

    The description is sanitized and trimmed (:func:`sanitize_desc`); a missing, empty or blank
    description omits the ``: desc`` part. The reference is written as it is.

    >>> format_attachment_ref(AttachmentRef("image", "data/x.png", desc="表格\\n| a | b |"))
    '[图片: 表格 丨 a 丨 b 丨 | ref:data/x.png]'
    >>> format_attachment_ref(AttachmentRef("image", "p", desc=" 猫 "))
    '[图片: 猫 | ref:p]'
    >>> format_attachment_ref(AttachmentRef("file", "workspace:/主页.html", desc="  "))
    '[文件 | ref:workspace:/主页.html]'
    """
    if not isinstance(ref, AttachmentRef):
        raise AttachmentRefError(
            f"format_attachment_ref: expected an AttachmentRef, got {type(ref).__name__}"
        )
    desc = sanitize_desc(ref.desc) if ref.desc is not None else ""
    head = f"{ref.kind.value}: {desc}" if desc else ref.kind.value
    return f"[{head}{_SEPARATOR}{ref.ref}]"


_DELIMITER = re.compile(r"[\]\n]")


def _found(kind: AttachmentRefKind, ref: str, desc: str | None) -> AttachmentRef | None:
    """A matched placeholder as the reference returns it: ``ref`` and ``desc`` trimmed (``ref.trim()``,
    ``desc?.trim()``), a blank ``desc`` None; a ``ref`` that is blank once trimmed is no reference."""
    ref = ref.strip()
    desc = None if desc is None else desc.strip()
    return AttachmentRef(kind, ref, desc or None) if ref else None


def _match_segment(text: str, begin: int, end: int) -> AttachmentRef | None:
    """The leftmost placeholder that ends at the ``]`` at ``end`` and starts at or after ``begin``.

    ``text[begin:end]`` holds no ``]`` and no line break, so a placeholder closed by the ``]`` at
    ``end`` lies entirely inside it and at most one does (regex ``finditer`` semantics). Every
    candidate ``[`` is checked in O(1) amortized: the first ``|`` after a position only moves forward.
    """
    pipe = -1  # first "|" at or after the last look-up point; `end` when there is none
    pos = text.find("[", begin, end)
    while pos != -1:
        kind = _KIND_BY_NAME.get(text[pos + 1 : pos + 1 + _KIND_LEN])
        if kind is not None:
            after = pos + 1 + _KIND_LEN
            if text.startswith(_SEPARATOR, after, end) and after + len(_SEPARATOR) < end:
                return _found(kind, text[after + len(_SEPARATOR) : end], None)
            if text.startswith(": ", after, end):
                lo = after + 2
                if pipe < lo:
                    found = text.find("|", lo, end)
                    pipe = end if found == -1 else found
                # DESC holds no "|", so it ends right before the first "|" (which must open " | ref:").
                if (
                    pipe < end
                    and pipe - 1 >= lo
                    and text.startswith(_SEPARATOR, pipe - 1, end)
                    and pipe + len(_SEPARATOR) - 1 < end
                ):
                    return _found(kind, text[pipe + len(_SEPARATOR) - 1 : end], text[lo : pipe - 1])
        pos = text.find("[", pos + 1, end)
    return None


def parse_attachment_refs(text: str) -> list[AttachmentRef]:
    """Every placeholder in ``text``, in order (see the grammar in the module docstring).

    ``desc`` and ``ref`` come back trimmed, as the reference parser returns them
    (``[图片:  猫  | ref: a.png ]`` gives desc ``猫`` and ref ``a.png``); ``desc`` is ``None`` when the
    ``: desc`` part is absent, empty or blank, and a placeholder whose ref is blank is left out. Matches
    are the same as a leftmost, non-overlapping regex scan for
    ``\\[(图片|音频|视频|文件)(?:: ([^\\]|\\n]*))? \\| ref:([^\\]\\n]+)\\]``, but found by a hand-written
    scanner that runs in linear time on any input. Never raises on a string.

    >>> [r.ref for r in parse_attachment_refs("[图片 | ref:a]b] [视频 | ref:c\\nd]")]
    ['a']
    >>> parse_attachment_refs("[图片:  一只猫  | ref: data/x.png ]")
    [AttachmentRef(kind=<AttachmentRefKind.IMAGE: '图片'>, ref='data/x.png', desc='一只猫')]
    """
    if not isinstance(text, str):
        raise UsageError(f"parse_attachment_refs: text must be a str, got {type(text).__name__}")
    if "ref:" not in text:
        return []
    found: list[AttachmentRef] = []
    begin = 0
    for delimiter in _DELIMITER.finditer(text):
        end = delimiter.start()
        if text[end] == "]" and end > begin:
            ref = _match_segment(text, begin, end)
            if ref is not None:
                found.append(ref)
        begin = end + 1
    return found


def build_attachment_ref_matcher(kind: AttachmentRefKind | str, ref: str) -> re.Pattern[str]:
    """A regex matching every placeholder of ``kind`` whose reference is exactly ``ref``.

    Used to rewrite a stored description (``pattern.sub(new_placeholder, text)``). Deliberately wider
    than the parser: the description may contain a bare ``|`` (stored placeholders written before
    sanitization stay rewritable); it excludes only ``]`` and ``\\n``. ``ref`` is matched as a literal
    (:func:`re.escape`), so a ref with ``]``, ``|`` or regex metacharacters is found too.

    Equivalent to ``\\[KIND(?:: [^\\]\\n]*)? \\| ref:REF\\]`` for every placeholder whose description
    holds at most :data:`MATCHER_NESTED_OPENERS` copies of its own opener ``[KIND:``; with more, the
    match starts at a later opener. That bound is what keeps ``search`` / ``sub`` linear: a plain
    ``[^\\]\\n]*`` would rescan the rest of the line from every ``[图片:`` and go quadratic.

    >>> m = build_attachment_ref_matcher("image", "data/x.png")
    >>> m.sub("[图片: 一只狗 | ref:data/x.png]", "看 [图片: a | b | ref:data/x.png]!")
    '看 [图片: 一只狗 | ref:data/x.png]!'
    """
    kind_value = _to_kind(kind)
    if not isinstance(ref, str) or not ref:
        raise AttachmentRefError(f"build_attachment_ref_matcher: ref must be a non-empty string, got {ref!r}")
    name = re.escape(kind_value.value)
    # A run of description characters that holds no opener "[KIND:" (unambiguous, so backtracking
    # visits each position once).
    run = rf"[^\]\n\[]*(?:\[(?!{name}:)[^\]\n\[]*)*"
    desc = rf"{run}(?:\[{name}:{run}){{0,{MATCHER_NESTED_OPENERS}}}"
    return re.compile(rf"\[{name}(?:: {desc})? \| ref:{re.escape(ref)}\]")
