"""promptkit.formats.opaque_head: placeholder tokens for a head the log omits, and the engine's use of them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from promptkit.analysis import RequestTokenizer, analyze_requests
from promptkit.errors import RecordFormatError
from promptkit.formats.opaque_head import (
    NO_OPAQUE_HEAD,
    OPAQUE_HEAD_SLOT,
    OpaqueHead,
    is_placeholder,
    opaque_decoder,
    opaque_head_breakpoint,
    opaque_head_facts,
    opaque_head_of,
    placeholder_ids,
    with_opaque_head,
)
from promptkit.layout import RequestRecord


def record(n: int | None, key: str = "k", content: str = "hello there", **kw: object) -> RequestRecord:
    meta = {} if n is None else {"opaque_head_tokens": n, "opaque_head_key": key}
    body = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": content}]}
    return RequestRecord(body, "s", meta=meta, **kw)  # type: ignore[arg-type]


RT = RequestTokenizer("chatml", "cl100k_base")


@settings(deadline=None, max_examples=60)
@given(st.integers(0, 5000), st.text(max_size=20))
def test_shift_moves_every_offset_by_n(n: int, key: str) -> None:
    rt = RT
    rec = record(n, key)
    tok = rt.tokenize(rec.request)
    shifted = with_opaque_head(tok, rec)
    assert len(shifted) == len(tok) + n
    assert shifted.tokens[n:].tolist() == tok.tokens.tolist()
    assert all(is_placeholder(int(t)) for t in shifted.tokens[:n])
    assert shifted.message_starts == tuple(s + n for s in tok.message_starts)
    assert shifted.message_ends == tuple(e + n for e in tok.message_ends or ())
    assert (shifted.header_len, shifted.prompt_len) == (tok.header_len + n, tok.prompt_len + n)
    assert shifted.message_at(n) == tok.message_at(0)


def test_no_head_leaves_the_tokens_alone() -> None:
    rt = RequestTokenizer("chatml", "cl100k_base")
    tok = rt.tokenize(record(None).request)
    assert with_opaque_head(tok, record(None)) is tok
    assert with_opaque_head(tok, record(0)) is tok


def test_ids_depend_on_key_and_position_only() -> None:
    assert placeholder_ids("a", 10)[:4].tolist() == placeholder_ids("a", 4).tolist()
    assert not np.intersect1d(placeholder_ids("a", 1000), placeholder_ids("b", 1000)).size


@pytest.mark.parametrize(
    ("meta", "field"),
    [({"opaque_head_tokens": -1}, "meta.opaque_head_tokens"), ({"opaque_head_tokens": "9"}, "meta.opaque_head_tokens"),
     ({"opaque_head_tokens": 9, "opaque_head_key": 4}, "meta.opaque_head_key")],
)  # fmt: skip
def test_malformed_meta_names_the_field(meta: dict[str, object], field: str) -> None:
    with pytest.raises(RecordFormatError, match=field):
        opaque_head_of(RequestRecord({"messages": []}, "s", meta=meta))


def test_decoder_names_the_head() -> None:
    rt = RequestTokenizer("chatml", "cl100k_base")
    ids = [*placeholder_ids("k", 3).tolist(), *rt.tokenizer.encode("hi")]
    assert opaque_decoder(rt.decode)(ids) == f"<{OPAQUE_HEAD_SLOT}>hi"


def test_engine_shares_equal_heads_and_breaks_at_token_zero_on_a_new_one() -> None:
    t0 = 1_700_000_000.0
    records = [
        record(3000, "head-a", "first", index=0, timestamp=t0),
        record(3000, "head-a", "first", index=1, timestamp=t0 + 10),
        record(3000, "head-b", "first", index=2, timestamp=t0 + 20),
    ]
    result = analyze_requests(records, provider="exact")
    rows = result.requests.to_dicts()
    assert rows[0]["prompt_tokens"] == rows[1]["prompt_tokens"] > 3000
    assert rows[1]["predicted_cached_tokens"] == rows[1]["prompt_tokens"]
    assert rows[2]["predicted_cached_tokens"] == 0
    assert rows[2]["divergence_token"] == 0
    assert rows[2]["divergence_role"] == OPAQUE_HEAD_SLOT
    head = result.composition.filter(result.composition["slot"] == OPAQUE_HEAD_SLOT)
    assert head["tokens"].to_list() == [3000, 3000, 3000]
    assert head["key"].to_list() == ["head-a", "head-a", "head-b"]


def test_a_malformed_head_is_a_problem_not_a_crash() -> None:
    bad = RequestRecord(
        {"messages": [{"role": "user", "content": "x"}]}, "s", meta={"opaque_head_tokens": -5}
    )
    result = analyze_requests([bad], provider="exact")
    assert result.requests.height == 0
    assert "meta.opaque_head_tokens" in result.problems["reason"][0]


CC = {"type": "ephemeral", "ttl": "1h"}


def test_the_facts_of_a_head_are_read_at_once() -> None:
    # what the analysis needs of a head the log omits, in one value: its span, its blocks, its mark
    assert opaque_head_facts(record(None)) is NO_OPAQUE_HEAD
    assert (
        opaque_head_facts(RequestRecord({"messages": []}, "s", meta={"log_events": ["x"]})) is NO_OPAQUE_HEAD
    )
    marked = RequestRecord({"messages": []}, "s", meta={**record(40).meta, "opaque_head_cache_control": CC})
    facts = opaque_head_facts(marked)
    assert (facts.blocks, facts.head) == ((), OpaqueHead(40, "k"))
    assert facts.breakpoint == {"tokens": 40, "cache_control": CC} == opaque_head_breakpoint(marked)
    assert facts.breakpoint["cache_control"] is not CC  # a copy: the record's meta is not shared
    # a head of blocks carries no breakpoint of its own; a head of 0 tokens is no head
    blocks = RequestRecord(
        {"messages": []}, "s", meta={**marked.meta, "opaque_head_blocks": [["b1", 5], ["b2", 3]]}
    )
    facts = opaque_head_facts(blocks)
    assert (facts.blocks, facts.head, facts.breakpoint) == ((("b1", 5), ("b2", 3)), OpaqueHead(40, "k"), None)
    zero = RequestRecord({"messages": []}, "s", meta={**record(0).meta, "opaque_head_cache_control": CC})
    assert opaque_head_facts(zero) == NO_OPAQUE_HEAD
    only_blocks = RequestRecord({"messages": []}, "s", meta={"opaque_head_blocks": [["b1", 2]]})
    assert opaque_head_facts(only_blocks).blocks == (("b1", 2),)


def test_the_facts_shift_by_the_blocks_else_by_the_span() -> None:
    tok = RT.tokenize(record(None).request)
    blocks = RequestRecord(
        {"messages": []}, "s", meta={**record(40).meta, "opaque_head_blocks": [["b1", 5], ["b2", 3]]}
    )
    shifted = opaque_head_facts(blocks).shift(tok)
    want = [*placeholder_ids("b1", 5).tolist(), *placeholder_ids("b2", 3).tolist(), *tok.tokens.tolist()]
    assert shifted.tokens.tolist() == want
    assert (
        opaque_head_facts(record(7, "h")).shift(tok).tokens[:7].tolist() == placeholder_ids("h", 7).tolist()
    )
    assert NO_OPAQUE_HEAD.shift(tok) is tok


@pytest.mark.parametrize(
    ("meta", "field"),
    [({"opaque_head_tokens": 9, "opaque_head_cache_control": "ephemeral"}, "meta.opaque_head_cache_control"),
     ({"opaque_head_cache_control": ["x"]}, "meta.opaque_head_cache_control"),
     ({"opaque_head_blocks": "b1", "opaque_head_tokens": -1, "opaque_head_cache_control": 3}, "meta.opaque_head_blocks"),
     ({"opaque_head_tokens": -1, "opaque_head_cache_control": 3}, "meta.opaque_head_tokens")],
)  # fmt: skip
def test_malformed_facts_name_the_first_field(meta: dict[str, object], field: str) -> None:
    # the blocks are checked first, then the span, then the mark
    with pytest.raises(RecordFormatError, match=field):
        opaque_head_facts(RequestRecord({"messages": []}, "s", meta=meta))


def test_a_malformed_mark_is_a_problem_of_its_record() -> None:
    # the mark is read with the rest of the head, where the record is tokenized: its record is a
    # problem naming the field, and the other records are analyzed
    good = record(30, index=0)
    bad = RequestRecord(
        good.request, "s", index=1, meta={**good.meta, "opaque_head_cache_control": "ephemeral"}
    )
    result = analyze_requests([good, bad], provider="exact")
    assert result.requests["index"].to_list() == [0]
    [reason] = result.problems["reason"].to_list()
    assert "s#1: cannot tokenize" in reason and "meta.opaque_head_cache_control" in reason


def test_docstring_examples() -> None:
    import doctest

    from promptkit.formats import opaque_head as opaque

    result = doctest.testmod(opaque, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
