"""Sizes of caches, written and read one way everywhere: ``K``, ``M``, ``G``, ``T`` are **binary**.

One grammar, one parser (:func:`parse_size`) and its formatters (:func:`format_tokens`,
:func:`format_bytes`): ``1M`` tokens is 2**20 = 1,048,576 tokens (2,048 blocks of 512), ``1G`` is 2**30;
the ``i`` spelling means the same (``1Mi`` = ``1M``), and so does a byte suffix: ``80GB`` = ``80GiB`` =
80 × 2**30 bytes. Binary, because KV-cache memory is sized in GiB (a GPU's memory, a vLLM
``--kv-cache-memory``) and caches in blocks of powers of two; one reading avoids "1M" meaning 10**6 on the
command line and 2**20 in a table. A size is tokens unless it ends in ``B``; ``unbounded`` (or ``none``,
``inf``) is no limit.

>>> parse_size("1M"), parse_size("16Mi"), parse_size("80GB"), parse_size("unbounded")
(Size(kind='tokens', value=1048576), Size(kind='tokens', value=16777216), Size(kind='bytes', value=85899345920), Size(kind='tokens', value=None))
>>> format_tokens(4 * 2**20), format_tokens(1500), format_bytes(85899345920)
('4M', '1,500', '80 GiB')
"""

from __future__ import annotations

from typing import Final, Literal

import attrs

from promptkit.errors import UsageError

__all__ = ["UNITS", "Size", "format_bytes", "format_tokens", "parse_size"]

#: Multipliers of the unit letters (binary; ``k`` and ``ki`` alike).
UNITS: Final[dict[str, int]] = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


@attrs.frozen(slots=True)
class Size:
    """A parsed size: ``kind`` ``"tokens"`` or ``"bytes"``, ``value`` (None: unbounded tokens)."""

    kind: Literal["tokens", "bytes"]
    value: int | None


def parse_size(text: str) -> Size:
    """``4096``, ``1M``, ``16Mi``, ``0.5G`` tokens; ``80GB``, ``64GiB`` bytes; ``unbounded``.

    >>> parse_size("3zz")
    Traceback (most recent call last):
    ...
    promptkit.errors.UsageError: '3zz': a size is tokens (4096, 1M, 16Mi), bytes (80GB, 64GiB) or 'unbounded'; K, M, G, T are binary (1M = 1,048,576)
    """
    raw = text.strip().lower().replace("_", "").replace(",", "")
    if raw in ("unbounded", "none", "inf"):
        return Size("tokens", None)
    kind: Literal["tokens", "bytes"] = "bytes" if raw.endswith("b") else "tokens"
    number = raw.removesuffix("b").removesuffix("i")
    unit = number.lstrip("0123456789.")
    digits = number[: len(number) - len(unit)]
    try:
        value = float(digits) * UNITS[unit]
    except (KeyError, ValueError):
        raise UsageError(
            f"{text!r}: a size is tokens (4096, 1M, 16Mi), bytes (80GB, 64GiB) or 'unbounded'; "
            "K, M, G, T are binary (1M = 1,048,576)"
        ) from None
    return Size(kind, int(value))


def _scaled(value: int, suffix: str) -> str | None:
    for letter in ("T", "G", "M", "K"):
        unit = UNITS[letter.lower()]
        if value >= unit and value % (unit // 16) == 0:
            return f"{value / unit:.4f}".rstrip("0").rstrip(".") + letter + suffix
    return None


def format_tokens(value: int | None) -> str:
    """Tokens as :func:`parse_size` reads them back: ``4M``, ``512K``, ``1.5M``, ``1,500``, ``unbounded``.

    >>> [format_tokens(v) for v in (2**20, 3 * 2**19, 2**30, 1000, None)]
    ['1M', '1.5M', '1G', '1,000', 'unbounded']
    >>> all(parse_size(format_tokens(v)).value == v for v in (2**20, 3 * 2**19, 1000, 5 * 2**30))
    True
    """
    if value is None:
        return "unbounded"
    return _scaled(int(value), "") or f"{int(value):,}"


def format_bytes(value: float | None) -> str:
    """Bytes in GiB (two decimals when not whole), or MiB below one GiB.

    >>> format_bytes(80 * 2**30), format_bytes(10e9), format_bytes(3 * 2**20), format_bytes(None)
    ('80 GiB', '9.31 GiB', '3 MiB', '–')
    """
    if value is None:
        return "–"
    gib = float(value) / 2**30
    if gib >= 1:
        return f"{gib:.0f} GiB" if gib.is_integer() else f"{gib:.2f} GiB"
    mib = float(value) / 2**20
    return f"{mib:.0f} MiB" if mib.is_integer() else f"{mib:.2f} MiB"
