"""Usage that cannot be true, in every shape: named by file, line and field, the record kept without it,
and never a figure in the headline (cached 5,000 of a 10-token prompt once read as a 500.0 hit ratio)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptkit.analysis import analyze
from promptkit.errors import RecordFormatError
from promptkit.formats import read_logs
from promptkit.layout import MAX_TOKEN_COUNT, token_count
from promptkit.providers.registry import normalize_usage

IMPOSSIBLE: list[tuple[str, dict[str, Any], str]] = [
    ("gemini cached > prompt", {"promptTokenCount": 10, "cachedContentTokenCount": 5000},
     r"usage\.cachedContentTokenCount: 5000 cached tokens of a 10-token prompt"),
    ("gemini snake_case", {"prompt_token_count": 10, "cached_content_token_count": 11},
     r"usage\.cached_content_token_count: 11 cached tokens of a 10-token prompt"),
    ("prompt_tokens beside input_tokens", {"prompt_tokens": 10, "input_tokens": 900000},
     r"usage\.prompt_tokens: 10, but input_tokens = 900000"),
    ("completion_tokens beside output_tokens", {"prompt_tokens": 10, "completion_tokens": 1, "output_tokens": 7},
     r"usage\.completion_tokens: 1, but output_tokens = 7"),
    ("deepseek hit beside cached_tokens",
     {"prompt_tokens": 100, "prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": 100,
      "prompt_tokens_details": {"cached_tokens": 100}},
     r"usage\.prompt_cache_hit_tokens: 0, but prompt_tokens_details\.cached_tokens = 100"),
    ("2**64 tokens", {"prompt_tokens": 2**64}, r"usage\.prompt_tokens: 18446744073709551616 tokens is not a count"),
    ("1e308 tokens", {"prompt_tokens": 1e308}, r"usage\.prompt_tokens: 1e\+308 tokens is not a count"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "usage", "message"), IMPOSSIBLE, ids=[c[0] for c in IMPOSSIBLE])
def test_impossible_usage_is_refused_naming_its_field(case: str, usage: dict[str, Any], message: str) -> None:
    with pytest.raises(RecordFormatError, match=message):
        normalize_usage(usage)


def test_agreeing_aliases_and_the_largest_count_pass() -> None:
    assert (
        normalize_usage({"prompt_tokens": 10, "input_tokens": 10, "completion_tokens": 2}).prompt_tokens == 10
    )
    agreeing = {"prompt_tokens": 100, "prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 36,
                "prompt_tokens_details": {"cached_tokens": 64}}  # fmt: skip
    assert normalize_usage(agreeing).cached_tokens == 64
    assert token_count(MAX_TOKEN_COUNT, "f") == MAX_TOKEN_COUNT
    with pytest.raises(RecordFormatError):
        token_count(MAX_TOKEN_COUNT + 1, "f")


def _log(tmp_path: Path) -> Path:
    rows = [usage for _, usage, _ in IMPOSSIBLE] + [{"prompt_tokens": 20, "completion_tokens": 1,
                                                      "prompt_tokens_details": {"cached_tokens": 0}}]  # fmt: skip
    path = tmp_path / "u.jsonl"
    lines = [
        {"request": {"model": "deepseek-chat", "messages": [{"role": "user", "content": f"hello {i}"}]},
         "usage": usage, "session": "s", "timestamp": 1775786375.0 + i}
        for i, usage in enumerate(rows)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return path


def test_a_log_with_impossible_usage_keeps_every_record_and_names_each_line(tmp_path: Path) -> None:
    path = _log(tmp_path)
    loaded = read_logs(path)
    assert len(loaded.records) == len(IMPOSSIBLE) + 1  # kept, without their usage
    assert [r.usage is None for r in loaded.records] == [True] * len(IMPOSSIBLE) + [False]
    assert [p.line for p in loaded.problems] == list(range(1, len(IMPOSSIBLE) + 1))
    assert all("kept without usage" in p.reason for p in loaded.problems)


def test_impossible_usage_never_reaches_the_reported_figures(tmp_path: Path) -> None:
    result = analyze(_log(tmp_path), provider="deepseek")  # no OverflowError, no 500.0
    reported = result.requests.filter(result.requests["reported_prompt_tokens"].is_not_null())
    assert reported.height == 1
    assert reported["reported_cached_tokens"].to_list() == [0]
    assert len(result.problems) == len(IMPOSSIBLE)
