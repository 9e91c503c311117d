"""Stage 3: a divergence attributed — the message a prompt left the cached content in, its role and
layout slot (anchor) and contributor key, the excerpts' text on both sides and the class of the change.

The replay (:class:`~promptkit.analysis.replay.Replayer`) names each request whose prompt diverged as a
:class:`~promptkit.analysis.wire.Divergent`; :func:`attribute` reads the messages of that request and of
the requests it is compared with and returns the :data:`ATTRIBUTED` columns. The local plan calls it
as each request is replayed, the coordinator of a parallel simulated view after the replay, on a worker
that holds the records (:func:`attribute_records`): one function either way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from promptkit.analysis.causes import classify_change
from promptkit.analysis.prepare import PreparedRequest, prepare_request
from promptkit.analysis.runtime import gc_paused
from promptkit.analysis.spec import AnalysisSpec, context_for
from promptkit.formats.opaque_head import OPAQUE_HEAD_SLOT, opaque_decoder, opaque_head_of

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.analysis.wire import Divergent
    from promptkit.layout import RequestRecord
    from promptkit.tokens.tokenize import TokenizedRequest

__all__ = ["ATTRIBUTED", "attribute", "attribute_records", "changed_message", "locate_divergence", "read_by"]

#: The columns :func:`attribute` returns for each :class:`~promptkit.analysis.wire.Divergent`, in order
#: (the last two, the change's class and detail, only where it has a request to compare with).
ATTRIBUTED: Final = (
    "divergence_message", "divergence_role", "divergence_anchor", "divergence_key", "divergence_cached_text",
    "divergence_prompt_text", "divergence_context_text", "change_class", "change_detail",
)  # fmt: skip


def changed_message(
    tok: TokenizedRequest, pos: int, messages: Sequence[Any], source: Sequence[Any] | None
) -> int | None:
    """The message that made the prompt diverge at token ``pos``.

    That is the message of the token at ``pos``, unless that message is identical in the request whose
    entry was read (``source``): then the token differs only because it straddles into what follows (BPE
    merges across a message boundary, e.g. system prompts joined by a blank line), and the cause is the
    next message in token order that is not identical.
    """
    i = tok.message_at(pos)
    if source is None or tok.message_ends is None:
        return i
    seen = set()
    while i is not None and i not in seen and i < len(source) and source[i] == messages[i]:
        seen.add(i)
        nxt = tok.message_at(tok.message_ends[i])
        if nxt is None:
            break
        i = nxt
    return i


def locate_divergence(
    p: PreparedRequest, tok: TokenizedRequest, pos: int, source: Sequence[Any] | None = None
) -> tuple[int | None, str | None, str | None, str | None]:
    """(message index, role, slot, key) of the message that made the prompt diverge at token ``pos``."""
    i = changed_message(tok, pos, p.body["messages"], source)
    if i is None:
        head = opaque_head_of(p.record)
        if head is not None and pos < head.tokens:
            return None, OPAQUE_HEAD_SLOT, None, None
        if pos < tok.header_len:
            return None, ("tools" if p.body.get("tools") else "header"), None, None
        return None, "generation", None, None
    role = p.body["messages"][i].get("role")
    slot = key = None
    if p.layout is not None and i < len(p.layout):
        slot, key = p.layout[i].slot, p.layout[i].key
    original = i - 1 if p.shifted else i
    return (original if original >= 0 else None), (str(role) if role is not None else None), slot, key


def attribute(
    d: Divergent,
    prepared: Mapping[int, PreparedRequest],
    decode: Callable[[Sequence[int]], str],
    tok: TokenizedRequest | None = None,
) -> tuple[Any, ...]:
    """The :data:`ATTRIBUTED` columns of the divergent request ``d``: ``prepared`` holds its request,
    its source's and the one its change is classified against, by position (those of :func:`read_by`);
    ``decode`` is its tokenizer's (placeholder ids decode as an opaque head); ``tok``: its tokens, where
    they are at hand (else rebuilt from ``d``'s message offsets).

    >>> from promptkit.analysis.wire import Divergent
    >>> from promptkit.layout import RequestRecord
    >>> a = RequestRecord({"messages": [{"role": "user", "content": "hi"}]}, "s", index=0)
    >>> d = Divergent(0, 0, -1, -1, 3, (0,), (5,), 0, 5, None, None, [7], [])
    >>> attribute(d, {0: prepare_request(a)}, lambda ids: "x" * len(ids))[:2]
    (0, 'user')
    """
    import numpy as np

    from promptkit.tokens.tokenize import TokenizedRequest

    p = prepared[d.pos]
    if tok is None:
        tok = TokenizedRequest.trusted(np.zeros(0, np.int64), d.starts, d.header_len, d.prompt_len, d.ends)
    source = prepared[d.source].body["messages"] if d.source >= 0 else None
    message, role, anchor, key = locate_divergence(p, tok, d.token, source)
    change: tuple[str | None, str | None] = (None, None)
    if d.against >= 0:
        change = classify_change(prepared[d.against].body, p.body, message, shifted=p.shifted)
    return (
        message,
        role,
        anchor,
        key,
        decode(d.cached_ids) if d.cached_ids is not None else None,
        decode(d.prompt_ids),
        decode(d.context_ids),
        *change,
    )


def read_by(divergent: Sequence[Divergent]) -> set[int]:
    """The positions of the records :func:`attribute` reads for ``divergent``: each request's own, its
    source's and the one its change is classified against."""
    return {p for d in divergent for p in (d.pos, d.source, d.against) if p >= 0}


@gc_paused()  # perf: a worker's task (see promptkit.analysis.runtime)
def attribute_records(
    spec: AnalysisSpec, records: Mapping[int, RequestRecord], divergent: Sequence[Divergent]
) -> list[tuple[Any, ...]]:
    """:func:`attribute` of each request of ``divergent`` with the records at hand (``records``: position
    -> record, those of :func:`read_by`), the excerpts decoded by the tokenizer of ``spec`` (runs on a
    worker: the coordinator of a parallel simulated view loads no tokenizer)."""
    ctx = context_for(spec)
    prepared = {pos: prepare_request(record) for pos, record in records.items()}
    decoders: dict[str | None, Callable[[Sequence[int]], str]] = {}
    out = []
    for d in divergent:
        decode = decoders.get(d.think)
        if decode is None:
            rt = ctx.request_tokenizer(d.think)
            assert rt is not None  # a worker tokenizes where it runs
            decode = decoders[d.think] = opaque_decoder(rt.decode)
        out.append(attribute(d, prepared, decode))
    return out
