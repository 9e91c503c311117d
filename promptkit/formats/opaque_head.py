"""The opaque head: prompt tokens a log does not show, modelled as placeholder tokens.

Some logs hold the conversation but not what the client put before it: Claude Code transcripts have
neither the system prompt nor the tool definitions, Codex rollouts have no tool definitions. The provider
still tokenized and cached them, and its reported usage counts them. A log format that knows this puts
``meta={"opaque_head_tokens": N, "opaque_head_key": K}`` on each record (N estimated from the reported
usage, K naming the head: the same K means the same head). The analysis reads all a record says of its
head at once (:func:`opaque_head_facts`), and right after tokenization :meth:`OpaqueHeadFacts.shift`
(:func:`with_opaque_head` for one record) puts N **placeholder tokens** in front of the rendered tokens: ids above
any vocabulary, derived from K and the position only, so two requests with the same K share their first
``min(N, N')`` tokens, in one session or across sessions, and a different K breaks the prefix at token 0.
Every offset of the :class:`~promptkit.tokens.tokenize.TokenizedRequest` (message starts and ends, header
and prompt length) moves by N. The composition names the span :data:`OPAQUE_HEAD_SLOT`.

What this cannot attribute: the head's content is unknown, so a change inside the system prompt or the
tool definitions (a new tool, an edited ``CLAUDE.md``, the date line) shows only as a break at token 0
that nothing in the log explains, or as a gap between predicted and reported cached tokens.

>>> import numpy as np
>>> from promptkit.tokens.tokenize import TokenizedRequest
>>> tok = TokenizedRequest(np.array([7, 8, 9]), message_starts=(0,), header_len=0, prompt_len=3)
>>> shifted = shift_tokenized(tok, placeholder_ids("claude-code:s1:claude-opus-4-6", 2))
>>> len(shifted), shifted.message_starts, shifted.header_len, shifted.prompt_len
(5, (2,), 2, 5)
>>> is_placeholder(int(shifted.tokens[0])), shifted.tokens[2:].tolist()
(True, [7, 8, 9])

**Estimating N.**
Agent logs such as Claude Code transcripts (no system prompt, no tool definitions) and Codex rollouts (no
tool definitions) show the conversation but not everything before it. The provider's usage still counts
it. :func:`estimate_opaque_heads` gives each group of records (one session and model: one key) the
size of that hidden head::

    N = reported prompt tokens − our count of the visible request

taken on the group's **first call with reported usage**, where the visible part is smallest, so the
error of our own tokenizer (a model of the provider's, not a copy) weighs least; N is floored at 0. Every
record of the group gets ``meta["opaque_head_tokens"] = N`` and ``meta["opaque_head_key"] = key``;
:func:`with_opaque_head` turns them into placeholder tokens at analysis time. The count uses the
provider profile's render and tokenizer, exactly what the analysis uses, so the shifted prompt of the
first call equals its reported prompt tokens.

>>> from promptkit.layout import RequestRecord, Usage
>>> body = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}
>>> [r] = estimate_opaque_heads([RequestRecord(body, "s", usage=Usage(prompt_tokens=5000), provider="anthropic")],
...                             key_of=lambda r: "claude-code:s")
>>> r.meta["opaque_head_key"], r.meta["opaque_head_tokens"] < 5000
('claude-code:s', True)
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

from promptkit.errors import RecordFormatError
from promptkit.layout import RequestRecord, type_name

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from promptkit.formats.head_buffer import HeadBuffers
    from promptkit.tokens.tokenize import TokenizedRequest

__all__ = [
    "NO_OPAQUE_HEAD",
    "OPAQUE_HEAD_SLOT",
    "PLACEHOLDER_BASE",
    "OpaqueHead",
    "OpaqueHeadFacts",
    "estimate_opaque_heads",
    "is_placeholder",
    "opaque_blocks_of",
    "opaque_decoder",
    "opaque_head_breakpoint",
    "opaque_head_facts",
    "opaque_head_of",
    "placeholder_ids",
    "shift_tokenized",
    "visible_prompt_tokens",
    "with_opaque_head",
]

#: The composition slot (and divergence role) of the placeholder span.
OPAQUE_HEAD_SLOT: Final[str] = "opaque-head"
#: Placeholder ids start here: far above any vocabulary (and above the request tokenizer's reserved ids).
PLACEHOLDER_BASE: Final[int] = 1 << 40
_POSITION_BITS: Final[int] = 24  # up to 16.7M placeholder tokens per head
_KEY_BITS: Final[int] = 32  # 2**32 distinct heads before two keys may share ids


@attrs.frozen(slots=True)
class OpaqueHead:
    """A record's opaque head: ``tokens`` placeholder tokens named ``key``."""

    tokens: int
    key: str


def opaque_head_of(record: RequestRecord) -> OpaqueHead | None:
    """The record's opaque head from ``meta["opaque_head_tokens"]`` / ``meta["opaque_head_key"]``; None
    when it has none (or N is 0). Raises :class:`~promptkit.errors.RecordFormatError` naming the field
    when one is malformed.

    >>> from promptkit.layout import RequestRecord
    >>> opaque_head_of(RequestRecord({"messages": []}, "s", meta={"opaque_head_tokens": 12, "opaque_head_key": "k"}))
    OpaqueHead(tokens=12, key='k')
    """
    meta: Mapping[str, Any] = record.meta
    if "opaque_head_tokens" not in meta:
        return None
    n = meta["opaque_head_tokens"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise RecordFormatError(f"meta.opaque_head_tokens: expected a whole number >= 0, got {n!r}")
    if n >= 1 << _POSITION_BITS:
        raise RecordFormatError(f"meta.opaque_head_tokens: {n} is more than {(1 << _POSITION_BITS) - 1}")
    key = meta.get("opaque_head_key", "")
    if not isinstance(key, str):
        raise RecordFormatError(f"meta.opaque_head_key: expected a string, got {type_name(key)}")
    return OpaqueHead(n, key) if n else None


def opaque_head_breakpoint(record: RequestRecord) -> dict[str, Any] | None:
    """The cache breakpoint at the end of the record's opaque head, as the request key
    :data:`~promptkit.tokens.cache_models.OPAQUE_HEAD_BREAKPOINT` takes it (``{"tokens": N,
    "cache_control": {...}}``), from ``meta["opaque_head_cache_control"]``: a log format whose client
    marks the end of the head it does not show (Claude Code marks its system prompt) sets it. None when
    the record has no opaque head, a head of blocks or no such mark; raises
    :class:`~promptkit.errors.RecordFormatError` naming the field when the mark is not an object (see
    :func:`opaque_head_facts`, which reads it with the rest of the head).

    >>> from promptkit.layout import RequestRecord
    >>> meta = {"opaque_head_tokens": 12, "opaque_head_key": "k", "opaque_head_cache_control": {"type": "ephemeral"}}
    >>> opaque_head_breakpoint(RequestRecord({"messages": []}, "s", meta=meta))
    {'tokens': 12, 'cache_control': {'type': 'ephemeral'}}
    """
    return opaque_head_facts(record).breakpoint


@attrs.frozen(slots=True)
class OpaqueHeadFacts:
    """Everything a record's ``meta`` says of the head its log does not show, read and checked at once
    (:func:`opaque_head_facts`): what stage 1 of the analysis needs of it, in one value.

    - ``blocks``: the head as a chain of blocks (:func:`opaque_blocks_of`; empty: none);
    - ``head``: the head as one span of ``tokens`` named ``key`` (:func:`opaque_head_of`; None: none);
    - ``breakpoint``: the cache breakpoint at the head's end (:func:`opaque_head_breakpoint`; None: the
      record has none, or its head is made of blocks).

    :meth:`shift` puts the head's placeholder tokens in front of the rendered tokens: the blocks' when
    there are any, else the head's."""

    blocks: tuple[tuple[str, int], ...] = ()
    head: OpaqueHead | None = None
    breakpoint: dict[str, Any] | None = None

    def shift(self, tok: TokenizedRequest, buffers: HeadBuffers | None = None) -> TokenizedRequest:
        """``tok`` with the head's placeholder tokens in front (``tok`` itself without a head).
        ``buffers``: where the shifted tokens of a chain of requests are kept as views of one buffer
        (:class:`~promptkit.formats.head_buffer.HeadBuffers`; else each request's are a copy)."""
        if self.blocks:
            import numpy as np

            return shift_tokenized(tok, np.concatenate([placeholder_ids(k, n) for k, n in self.blocks]))
        head = self.head
        if head is None:
            return tok
        ids = placeholder_ids(head.key, head.tokens)
        shared = buffers.tokens(tok.tokens, ids, head.key) if buffers is not None else None
        return shift_tokenized(tok, ids, tokens=shared)


#: The facts of a record whose ``meta`` says nothing of an opaque head.
NO_OPAQUE_HEAD: Final[OpaqueHeadFacts] = OpaqueHeadFacts()
_OPAQUE_KEYS: Final = frozenset({"opaque_head_tokens", "opaque_head_blocks", "opaque_head_cache_control"})


def opaque_head_facts(record: RequestRecord) -> OpaqueHeadFacts:
    """The record's opaque head, all of it: its blocks, its span and the breakpoint at its end
    (:class:`OpaqueHeadFacts`). Raises :class:`~promptkit.errors.RecordFormatError` naming the field
    when one is malformed (the blocks are checked first, then the span, then the mark).

    >>> from promptkit.layout import RequestRecord
    >>> meta = {"opaque_head_tokens": 12, "opaque_head_key": "k", "opaque_head_cache_control": {"type": "ephemeral"}}
    >>> facts = opaque_head_facts(RequestRecord({"messages": []}, "s", meta=meta))
    >>> facts.blocks, facts.head, facts.breakpoint
    ((), OpaqueHead(tokens=12, key='k'), {'tokens': 12, 'cache_control': {'type': 'ephemeral'}})
    >>> opaque_head_facts(RequestRecord({"messages": []}, "s")) is NO_OPAQUE_HEAD
    True
    """
    meta: Mapping[str, Any] = record.meta
    if not meta or _OPAQUE_KEYS.isdisjoint(meta):  # perf: most records have no opaque head
        return NO_OPAQUE_HEAD
    blocks = tuple(opaque_blocks_of(record))
    head = opaque_head_of(record)
    cc = meta.get("opaque_head_cache_control")
    if cc is None:
        return OpaqueHeadFacts(blocks, head)
    if not isinstance(cc, Mapping):
        raise RecordFormatError(f"meta.opaque_head_cache_control: expected an object, got {type_name(cc)}")
    if head is None or blocks:  # a head of blocks is marked by its blocks' own breakpoints
        return OpaqueHeadFacts(blocks, head)
    return OpaqueHeadFacts(blocks, head, {"tokens": head.tokens, "cache_control": dict(cc)})


@functools.lru_cache(maxsize=256)
def _key_base(key: str) -> int:
    h = int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big")
    return PLACEHOLDER_BASE + ((h % (1 << _KEY_BITS)) << _POSITION_BITS)


def placeholder_ids(key: str, n: int) -> np.ndarray:
    """The ``n`` placeholder ids of the head named ``key``: ``base(key) + position``, int64, read-only.

    >>> a, b = placeholder_ids("k", 3), placeholder_ids("k", 5)
    >>> (b[:3] == a).all(), (placeholder_ids("other", 3) == a).any()
    (np.True_, np.False_)
    """
    import numpy as np

    ids = np.arange(n, dtype=np.int64) + _key_base(key)
    ids.flags.writeable = False
    return ids


def is_placeholder(token_id: int) -> bool:
    """Whether ``token_id`` is a placeholder of an opaque head."""
    return token_id >= PLACEHOLDER_BASE


def shift_tokenized(
    tok: TokenizedRequest, head: np.ndarray, *, tokens: np.ndarray | None = None
) -> TokenizedRequest:
    """``tok`` with ``head`` in front: tokens, message starts and ends, header and prompt length shifted.
    ``tokens``: the shifted tokens when the caller has them (read-only int64, equal to ``head`` then
    ``tok.tokens``: :class:`~promptkit.formats.head_buffer.HeadBuffers`)."""
    import numpy as np

    from promptkit.tokens.tokenize import TokenizedRequest

    n = len(head)
    if n == 0:
        return tok
    if tokens is None:
        tokens = np.concatenate([np.asarray(head, dtype=np.int64), tok.tokens])
        tokens.flags.writeable = False
    return TokenizedRequest.trusted(
        tokens,
        _shifted(tok.message_starts, n),
        tok.header_len + n,
        tok.prompt_len + n,
        None if tok.message_ends is None else _shifted(tok.message_ends, n),
    )


def _shifted(offsets: tuple[int, ...], n: int) -> tuple[int, ...]:
    """``offsets`` each plus ``n`` (perf: one numpy pass, not a Python loop over a long prompt's messages)."""
    import numpy as np

    return tuple((np.asarray(offsets, dtype=np.int64) + n).tolist()) if offsets else ()


def with_opaque_head(
    tok: TokenizedRequest, record: RequestRecord, buffers: HeadBuffers | None = None
) -> TokenizedRequest:
    """``tok`` with the record's opaque head in front (``tok`` itself without one): the placeholders of
    :meth:`OpaqueHeadFacts.shift`, without reading the head's breakpoint.
    ``buffers``: where the shifted tokens of a chain of requests are kept as views of one buffer
    (:class:`~promptkit.formats.head_buffer.HeadBuffers`; else each request's are a copy).

    >>> import numpy as np
    >>> from promptkit.tokens.tokenize import TokenizedRequest
    >>> from promptkit.layout import RequestRecord
    >>> tok = TokenizedRequest(np.array([1, 2]), message_starts=(0,), header_len=0, prompt_len=2)
    >>> rec = RequestRecord({"messages": [{"role": "user", "content": "hi"}]}, "s",
    ...                     meta={"opaque_head_tokens": 3, "opaque_head_key": "k"})
    >>> with_opaque_head(tok, rec).prompt_len
    5
    """
    blocks = tuple(opaque_blocks_of(record))
    return OpaqueHeadFacts(blocks, None if blocks else opaque_head_of(record)).shift(tok, buffers)


def opaque_blocks_of(record: RequestRecord) -> list[tuple[str, int]]:
    """The record's opaque head as a chain of blocks, from ``meta["opaque_head_blocks"]``: a list of
    ``[key, tokens]`` (a block trace's chained hash ids: two records share a prefix exactly as long as
    their leading blocks agree). Empty when it has none; raises
    :class:`~promptkit.errors.RecordFormatError` naming the field when malformed.

    >>> from promptkit.layout import RequestRecord
    >>> opaque_blocks_of(RequestRecord({"messages": []}, "s", meta={"opaque_head_blocks": [["b1", 512], ["b2", 40]]}))
    [('b1', 512), ('b2', 40)]
    """
    raw = record.meta.get("opaque_head_blocks")
    if raw is None:
        return []
    if not isinstance(raw, list | tuple):
        raise RecordFormatError(
            f"meta.opaque_head_blocks: expected a list of [key, tokens], got {type_name(raw)}"
        )
    blocks: list[tuple[str, int]] = []
    for i, block in enumerate(raw):
        if (
            not isinstance(block, list | tuple)
            or len(block) != 2
            or not isinstance(block[0], str)
            or isinstance(block[1], bool)
            or not isinstance(block[1], int)
            or not 0 <= block[1] < 1 << _POSITION_BITS
        ):
            raise RecordFormatError(
                f"meta.opaque_head_blocks[{i}]: expected [key, tokens >= 0], got {block!r}"
            )
        blocks.append((block[0], block[1]))
    return blocks


def opaque_decoder(decode: Callable[[Sequence[int]], str]) -> Callable[[Sequence[int]], str]:
    """Wrap a tokenizer's ``decode`` so placeholder ids decode to ``<opaque-head>`` (once per run).

    >>> dec = opaque_decoder(lambda ids: "".join(chr(96 + i) for i in ids))
    >>> dec([int(i) for i in placeholder_ids("k", 2)] + [1, 2])
    '<opaque-head>ab'
    """

    def decode_with_placeholders(ids: Sequence[int]) -> str:
        out: list[str] = []
        run: list[int] = []
        in_head = False
        for i in (int(x) for x in ids):
            if is_placeholder(i):
                if run:
                    out.append(decode(run))
                    run = []
                if not in_head:
                    out.append(f"<{OPAQUE_HEAD_SLOT}>")
                in_head = True
            else:
                in_head = False
                run.append(i)
        if run:
            out.append(decode(run))
        return "".join(out)

    return decode_with_placeholders


def visible_prompt_tokens(record: RequestRecord, cache: dict[tuple[str, str], Any] | None = None) -> int:
    """Prompt tokens of the record's request as promptkit renders and tokenizes it for its provider
    (the profile it names or is recognised as; the generic profile when none is). ``cache`` keeps
    request tokenizers between calls.

    >>> from promptkit.layout import RequestRecord
    >>> visible_prompt_tokens(RequestRecord({"messages": [{"role": "user", "content": "hi"}]}, "s", provider="openai"))
    9
    """
    from promptkit.providers.registry import GENERIC_PROVIDER, get_provider, infer_record_provider
    from promptkit.tokens.tokenize import RequestTokenizer

    profile = get_provider(infer_record_provider(record) or GENERIC_PROVIDER)
    key = (profile.name, "")
    tokenizers = cache if cache is not None else {}
    rt = tokenizers.get(key)
    if rt is None:
        rt = tokenizers[key] = RequestTokenizer(profile.load_render(), profile.load_tokenizer())
    return int(rt.tokenize(record.request).prompt_len)


def estimate_opaque_heads(
    records: Sequence[RequestRecord], *, key_of: Callable[[RequestRecord], str]
) -> list[RequestRecord]:
    """``records`` with ``meta["opaque_head_tokens"]`` / ``meta["opaque_head_key"]`` set per key group
    (see the module docstring); a group with no reported prompt tokens gets only the key. The records
    are returned in the given order; ``meta["opaque_head_basis"]`` names the file and line of the call
    the estimate comes from."""
    by_key: dict[str, list[int]] = {}
    for k, r in enumerate(records):
        by_key.setdefault(key_of(r), []).append(k)
    out = list(records)
    tokenizers: dict[tuple[str, str], Any] = {}
    for key, members in by_key.items():
        meta: dict[str, Any] = {"opaque_head_key": key}
        for k in members:
            r = records[k]
            if r.usage is None or r.usage.prompt_tokens is None:
                continue
            visible = visible_prompt_tokens(r, tokenizers)
            meta["opaque_head_tokens"] = max(0, r.usage.prompt_tokens - visible)
            meta["opaque_head_basis"] = f"{r.file}:{r.line}" if r.file is not None else f"{r.session}#{k}"
            break
        for k in members:
            out[k] = attrs.evolve(records[k], meta={**records[k].meta, **meta})
    return out
