"""The opaque head in front of a chain's tokens, held once (promptkit/formats/head_buffer.py)."""

from __future__ import annotations

import numpy as np

from promptkit.formats.head_buffer import HeadBuffers
from promptkit.formats.opaque_head import placeholder_ids, shift_tokenized, with_opaque_head
from promptkit.layout import RequestRecord
from promptkit.tokens.tokenize import RequestTokenizer, TokenBuffer


def _chain(n: int) -> list[dict[str, object]]:
    messages: list[dict[str, str]] = []
    bodies = []
    for i in range(n):
        messages = [*messages, {"role": "user", "content": f"question {i} about item {i}"}]
        bodies.append({"messages": messages})
        messages = [*messages, {"role": "assistant", "content": f"answer {i}"}]
    return bodies


def test_a_chains_shifted_tokens_equal_the_copies_and_share_one_buffer() -> None:
    rt = RequestTokenizer("chatml", "cl100k_base")
    heads = HeadBuffers()
    head = placeholder_ids("claude-code:s:m", 40)
    shifted = []
    for body in _chain(6):
        tok = rt.tokenize(body)
        got = with_opaque_head(tok, RequestRecord(body, "s", meta={"opaque_head_tokens": 40,
                                                                  "opaque_head_key": "claude-code:s:m"}), heads)  # fmt: skip
        assert got == shift_tokenized(tok, head)  # tokens, offsets, header and prompt length
        assert not got.tokens.flags.writeable
        shifted.append(got.tokens)
    assert all(np.shares_memory(shifted[0], t) for t in shifted[1:])
    assert len(heads) == 1


def test_tokens_that_are_not_a_read_only_buffers_view_are_copied() -> None:
    heads = HeadBuffers()
    head = placeholder_ids("k", 3)
    assert heads.tokens(np.array([1, 2, 3]), head, "k") is None  # owns its memory
    writable = np.arange(10, dtype=np.int64)
    assert heads.tokens(writable[:4], head, "k") is None  # its memory can still be written
    assert heads.tokens(np.arange(10)[2:5], head, "k") is None  # not from the start of its buffer
    view, _, _ = TokenBuffer.extend(None, 0, np.array([5, 6]))
    assert heads.tokens(view, head[:0], "k") is None  # no head: nothing to put in front
    assert heads.tokens(view, head, "k").tolist() == [*head.tolist(), 5, 6]


def test_each_head_has_its_own_buffer_and_a_dropped_one_leaves_its_views_valid() -> None:
    a, buf, _ = TokenBuffer.extend(None, 0, np.array([7, 8, 9]))
    heads = HeadBuffers(size=1)
    x = heads.tokens(a, placeholder_ids("one", 2), "one")
    y = heads.tokens(a, placeholder_ids("two", 2), "two")  # drops the first mirror
    b, _, _ = TokenBuffer.extend(buf, 3, np.array([10]))
    z = heads.tokens(b, placeholder_ids("one", 2), "one")  # a new mirror of the same source
    assert x is not None and y is not None and z is not None
    assert not np.shares_memory(x, y) and len(heads) == 1
    assert x.tolist() == [*placeholder_ids("one", 2).tolist(), 7, 8, 9]
    assert z.tolist() == [*placeholder_ids("one", 2).tolist(), 7, 8, 9, 10]


def test_a_branch_of_the_chain_gets_the_tokens_of_its_own_prompt() -> None:
    # a rewind: the tokenizer hands out a new buffer for a prompt that leaves the chain
    rt = RequestTokenizer("chatml", "cl100k_base")
    heads = HeadBuffers()
    head = placeholder_ids("k", 5)
    first, second = _chain(3)[1:]
    branch = {"messages": [*first["messages"][:1], {"role": "user", "content": "something else entirely"}]}  # type: ignore[index]
    for body in (first, second, branch, second):
        tok = rt.tokenize(body)
        got = heads.tokens(tok.tokens, head, "k")
        expected = np.concatenate([head, tok.tokens])
        assert got is not None and got.tolist() == expected.tolist()


def test_a_request_one_token_longer_gets_that_token_after_the_head() -> None:
    a, buf, _ = TokenBuffer.extend(None, 0, np.array([7, 8, 9]))
    b, _, _ = TokenBuffer.extend(buf, 3, np.array([10]))
    heads = HeadBuffers()
    head = placeholder_ids("k", 2)
    x, y = heads.tokens(a, head, "k"), heads.tokens(b, head, "k")
    assert x is not None and y is not None and np.shares_memory(x, y)
    assert y.tolist() == [*head.tolist(), 7, 8, 9, 10]
    assert heads.tokens(a, head, "k").tolist() == [*head.tolist(), 7, 8, 9]  # type: ignore[union-attr]
