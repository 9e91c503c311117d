"""Sender labels and message names (pipeline contract §6; platform message contract "工具函数").

In a group chat several people share the ``user`` role. :func:`prefix_sender` marks who spoke inside
the content (``[小明(42)]: 在吗``), :func:`get_message_name` gives the protocol-level identity for
``Message.name`` from the stable user id (never the nickname, which can change), and
:func:`strip_sender_prefix` removes a prefix baked into archived text.

Empty strings count as absent everywhere, like the TypeScript framework's falsy checks.

>>> label = get_sender_label("小明", "42")
>>> label
'小明(42)'
>>> prefix_sender("在吗", "小明", "42")
'[小明(42)]: 在吗'
>>> strip_sender_prefix("[小明(42)]: 在吗", label)
'在吗'
>>> get_message_name("42"), get_message_name("wx:o6_bm")
('42', 'wx_o6_bm')
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

from promptkit.errors import UsageError

__all__ = [
    "MESSAGE_NAME_MAX_LEN",
    "get_message_name",
    "get_sender_label",
    "prefix_sender",
    "strip_sender_prefix",
]

#: OpenAI's limit on ``name``: ``^[a-zA-Z0-9_-]{1,64}$``.
MESSAGE_NAME_MAX_LEN: Final[int] = 64
_INVALID_NAME_CHAR: Final[re.Pattern[str]] = re.compile(r"[^A-Za-z0-9_-]")
_HASH_LEN: Final[int] = 16


def get_sender_label(nickname: str | None = None, user_id: str | None = None) -> str | None:
    """``昵称(ID)`` when both are given, the one given otherwise, ``None`` when neither is.

    The nickname is trimmed first, as the reference does (``nickname?.trim()``): a blank nickname is
    none. The user id is used as given.

    >>> get_sender_label("小明", "42"), get_sender_label(None, "42"), get_sender_label("", None)
    ('小明(42)', '42', None)
    >>> get_sender_label(" 小明 ", "42"), get_sender_label("  ", "42")
    ('小明(42)', '42')
    """
    name = nickname.strip() if isinstance(nickname, str) else nickname
    if name and user_id:
        return f"{name}({user_id})"
    return name or user_id or None


def prefix_sender(content: str, nickname: str | None = None, user_id: str | None = None) -> str:
    """``[label]: content`` when there is a label (:func:`get_sender_label`), ``content`` otherwise.

    >>> prefix_sender("hi", user_id="42"), prefix_sender("hi")
    ('[42]: hi', 'hi')
    """
    label = get_sender_label(nickname, user_id)
    return f"[{label}]: {content}" if label else content


def strip_sender_prefix(content: str, label: str | None) -> str:
    """``content`` without the ``[label]: `` prefix :func:`prefix_sender` wrote.

    Only the exact prefix for ``label`` is removed, once, and only at the very start. Without a
    label (``None`` or empty: the archive recorded none) the content comes back unchanged, and so
    does content that merely starts with some other ``[..]:``.

    >>> strip_sender_prefix("[小明(42)]: [注意]: 别走", "小明(42)")
    '[注意]: 别走'
    >>> strip_sender_prefix("[注意]: 别走", "小明(42)"), strip_sender_prefix("[42]: x", None)
    ('[注意]: 别走', '[42]: x')
    """
    if not isinstance(content, str):
        raise UsageError(f"strip_sender_prefix: content must be a str, got {type(content).__name__}")
    if not label:
        return content
    prefix = f"[{label}]: "
    return content[len(prefix) :] if content.startswith(prefix) else content


def get_message_name(user_id: str | None = None) -> str | None:
    """A valid OpenAI ``name`` for ``user_id``, or ``None`` without an id.

    Letters and digits (ASCII), ``_`` and ``-`` are kept; every other character (one code point) becomes
    ``_``. An id that is already valid comes back unchanged. An id whose result would be longer than
    64 characters is shortened to its first 47 characters, ``-`` and the first 16 hex digits of the
    SHA-256 of the original id (UTF-8): 64 characters, the same in every run, and two different long
    ids keep different names (up to a 64-bit hash collision).

    Replacing characters can make two ids share a name (``a.b`` and ``a:b`` both give ``a_b``); the
    name is a hint for the model, the id stays the identity.

    >>> get_message_name("user@example.com"), get_message_name(""), get_message_name(None)
    ('user_example_com', None, None)
    >>> len(get_message_name("x" * 100))
    64
    """
    if not user_id:
        return None
    name = _INVALID_NAME_CHAR.sub("_", user_id)
    if len(name) <= MESSAGE_NAME_MAX_LEN:
        return name
    digest = hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LEN]
    return f"{name[: MESSAGE_NAME_MAX_LEN - _HASH_LEN - 1]}-{digest}"
