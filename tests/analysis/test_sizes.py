"""Tests for promptkit/analysis/sizes.py: one binary reading of K, M, G, T, parsed and written back."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from promptkit.analysis.sizes import Size, format_bytes, format_tokens, parse_size
from promptkit.errors import UsageError


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("4096", Size("tokens", 4096)),
        ("1K", Size("tokens", 1024)),
        ("1M", Size("tokens", 2**20)),
        ("1Mi", Size("tokens", 2**20)),
        ("16mi", Size("tokens", 16 * 2**20)),
        ("0.5G", Size("tokens", 2**29)),
        ("1,500", Size("tokens", 1500)),
        ("80GB", Size("bytes", 80 * 2**30)),
        ("80GiB", Size("bytes", 80 * 2**30)),
        ("512b", Size("bytes", 512)),
        ("unbounded", Size("tokens", None)),
        ("inf", Size("tokens", None)),
    ],
)
def test_sizes_are_binary(text: str, want: Size) -> None:
    assert parse_size(text) == want


@pytest.mark.parametrize("text", ["3zz", "", "M", "1.2.3M", "1Q"])
def test_a_bad_size_names_the_text(text: str) -> None:
    with pytest.raises(UsageError, match="binary"):
        parse_size(text)


@given(st.integers(min_value=1, max_value=2**45))
def test_format_tokens_reads_back(value: int) -> None:
    assert parse_size(format_tokens(value)).value == value


def test_formats() -> None:
    assert [format_tokens(v) for v in (2**20, 1536 * 2**10, 4096, 1000, None)] == ["1M", "1.5M", "4K", "1,000", "unbounded"]
    assert [format_bytes(v) for v in (2**30, 1.5 * 2**30, 2**29)] == ["1 GiB", "1.50 GiB", "512 MiB"]
