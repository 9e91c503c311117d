"""The per-request composition rows, written plainly: the reference the engine's batched
:class:`promptkit.analysis.composition.CompositionRows` is checked against (tests/analysis/test_composition.py).

Spans of one request: the header (``tools`` when the body has tools, else ``header``) when it has
tokens; each message with tokens (its layout ``slot`` and ``key``, else its role), sorted by start; a
``template`` span for every gap between them; the trailing ``generation`` prompt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from promptkit.analysis.composition import COMPOSITION_COLUMNS
from promptkit.tokens.tokenize import TokenizedRequest


def composition_part(
    session: str,
    index: int,
    body: Mapping[str, Any],
    tok: TokenizedRequest,
    *,
    layout: Sequence[Any] | None = None,
    shifted: bool = False,
    opaque: tuple[int, str] | None = None,
) -> dict[str, np.ndarray]:
    """The composition rows of one request, as column arrays (see :func:`composition_frame`).

    Spans: the header (``tools`` when the body has tools, else ``header``) when it has tokens; each
    message with tokens (its layout ``slot`` and ``key``, else its role), sorted by start; a
    ``template`` span for every gap between them; the trailing ``generation`` prompt. ``shifted``: the
    body's first message was prepended (an Anthropic top-level system), so message indices shift by one.
    ``opaque``: ``(tokens, key)`` of an opaque head the log omits (:mod:`promptkit.formats.opaque_head`), the
    first ``tokens`` of the header: it becomes its own ``opaque-head`` span with that key.

    >>> from promptkit.tokens.tokenize import TokenizedRequest
    >>> tok = TokenizedRequest(tokens=list(range(10)), message_starts=(2, 6), header_len=2, prompt_len=10,
    ...                        message_ends=(5, 8))
    >>> part = composition_part("s", 0, {"messages": [{"role": "user"}, {"role": "assistant"}]}, tok)
    >>> list(part["slot"]), part["start"].tolist(), part["tokens"].tolist()
    (['header', 'user', 'template', 'assistant', 'generation'], [0, 2, 5, 6, 8], [2, 3, 1, 2, 2])
    """
    messages = body["messages"]
    n = len(tok.message_starts)
    all_codes, all_start, all_size, message_of = _spans(tok, shifted, opaque)
    roles = [msg["role"] for msg in messages]  # strings: the render model checked them
    if layout is not None:
        slots = [entry.slot for entry in layout]
        keys: list[str | None] = [entry.key for entry in layout]
    else:
        slots = roles
        keys = [None] * n
    header_slot = "tools" if body.get("tools") else "header"
    opaque_key = opaque[1] if opaque is not None else None
    slot_of = np.array([*slots[:n], header_slot, "template", "generation", "opaque-head"], dtype=object)
    key_of = np.array([*keys[:n], None, None, None, opaque_key], dtype=object)
    role_of = np.array([*roles[:n], None, None, None, None], dtype=object)
    rows = all_codes.shape[0]
    return {
        "session": np.full(rows, session, dtype=object),
        "index": np.full(rows, index, dtype=np.int64),
        "slot": slot_of[all_codes],
        "key": key_of[all_codes],
        "start": all_start,
        "tokens": all_size,
        "message": message_of,
        "role": role_of[all_codes],
    }


def _spans(
    tok: TokenizedRequest, shifted: bool, opaque: tuple[int, str] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The spans of one request in token order, as int64 arrays: (code, start, size, message). Code
    ``i < n``: message ``i``; ``n``: the header; ``n + 1``: a template gap; ``n + 2``: the generation
    prompt; ``n + 3``: the opaque head. ``message`` is the span's message index (-1 for none)."""
    n = len(tok.message_starts)
    st = np.asarray(tok.message_starts, dtype=np.int64)
    if tok.message_ends is not None:
        en = np.asarray(tok.message_ends, dtype=np.int64)
    else:  # each message ends where the next one in token order starts
        by_start = np.lexsort((np.arange(n), st))
        nxt = np.empty(n, dtype=np.int64)
        nxt[by_start[:-1]] = st[by_start[1:]]
        if n:
            nxt[by_start[-1]] = tok.prompt_len
        en = nxt
    keep = np.flatnonzero(en > st)
    order = keep[np.lexsort((keep, st[keep]))]
    header_len = int(tok.header_len)
    codes = order  # code i < n: message i; n: header; n + 1: template; n + 2: generation
    s = st[order]
    e = en[order]
    if header_len > 0:  # the header span comes first (it starts at 0, before every message)
        codes = np.concatenate(([n], codes))
        s = np.concatenate(([0], s))
        e = np.concatenate(([header_len], e))
    covered = np.maximum.accumulate(np.concatenate(([header_len], e)))
    before = covered[:-1]
    gap = np.flatnonzero(s > before)
    if gap.shape[0]:
        m = s.shape[0]
        rank = np.concatenate((2 * np.arange(m) + 1, 2 * gap))
        arrange = np.argsort(rank, kind="stable")
        all_codes = np.concatenate((codes, np.full(gap.shape[0], n + 1)))[arrange]
        all_start = np.concatenate((s, before[gap]))[arrange]
        all_size = np.concatenate((e - s, s[gap] - before[gap]))[arrange]
    else:  # perf: no gap (the usual case): the spans are the messages' own
        all_codes, all_start, all_size = codes, s, e - s
    final = int(covered[-1])
    if final < tok.prompt_len:
        all_codes = np.append(all_codes, n + 2)
        all_start = np.append(all_start, final)
        all_size = np.append(all_size, tok.prompt_len - final)
    if opaque is not None and opaque[0] > 0 and all_codes.shape[0] and all_codes[0] == n:
        # the header span [0, header_len) starts with the opaque head: split it in two (code n + 3)
        size = min(opaque[0], int(all_size[0]))
        rest = int(all_size[0]) - size
        if rest > 0:
            all_codes = np.concatenate(([n + 3], all_codes))
            all_start = np.concatenate(([0, size], all_start[1:]))
            all_size = np.concatenate(([size, rest], all_size[1:]))
        else:
            all_codes = np.concatenate(([n + 3], all_codes[1:]))
    message = all_codes - (1 if shifted else 0)
    message_of = np.where((all_codes < n) & (message >= 0), message, -1)
    return (
        all_codes.astype(np.int64, copy=False),
        all_start.astype(np.int64, copy=False),
        all_size.astype(np.int64, copy=False),
        message_of.astype(np.int64, copy=False),
    )


def composition_frame(
    parts: Sequence[Mapping[str, np.ndarray]], schema: Mapping[str, Any] | None = None
) -> pl.DataFrame:
    """Join :func:`composition_part` outputs into one frame with :data:`COMPOSITION_COLUMNS`
    (``message`` is null for the header, gaps and generation prompt).

    >>> composition_frame([]).columns == list(COMPOSITION_COLUMNS)
    True
    """
    import polars as pl

    s, i = pl.String, pl.Int64
    dtypes = (
        dict(schema)
        if schema is not None
        else dict(zip(COMPOSITION_COLUMNS, (s, i, s, s, i, i, i, s), strict=True))
    )
    columns: dict[str, pl.Series] = {}
    for name in COMPOSITION_COLUMNS:
        if parts:
            values = np.concatenate([p[name] for p in parts])
        else:
            values = np.zeros(0, dtype=object if dtypes[name] == s else np.int64)
        if values.dtype == object:
            columns[name] = pl.Series(name, values.tolist(), dtype=dtypes[name])
        else:
            series = pl.Series(name, values, dtype=dtypes[name])
            if name == "message":
                series = pl.select(pl.when(series >= 0).then(series)).to_series().alias(name)
            columns[name] = series
    return pl.DataFrame(columns)
