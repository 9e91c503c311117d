"""Check the line-break cut rule of ``promptkit.tokens.tokenizers.is_cut`` on every Unicode code point.

For each of twelve kinds of line break (after a letter, punctuation, spaces, a digit, CJK, ``\\r\\n``
...) and every code point ``c`` the rule cuts before (every non-whitespace character but ``/``), it
encodes ``left + c + "b"`` whole and in two parts and counts the pairs whose tokens differ. The test
suite checks the Basic Multilingual Plane after three kinds of line break on every run; this script is
the exhaustive version (about 4 minutes for the two tiktoken encodings, 14 for DeepSeek's tokenizer).

    python benchmarks/check_cut_points.py [cl100k_base o200k_base deepseek]
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from promptkit.tokens.tokenizers import HFTokenizer, TiktokenTokenizer, get_tokenizer, is_cut

LEFTS = ["a\n", ":\n", " \n", "\n\n", "a \n", "x\r\n", "a\r", ".\n\n", "1\n", "中\n", "\t\n", "-\n"]


def _batch_encoder(name: str) -> Callable[[Sequence[str]], list[list[int]]]:
    tok = get_tokenizer(name)
    if isinstance(tok, HFTokenizer):
        hf = tok._tok
        return lambda texts: [e.ids for e in hf.encode_batch(list(texts), add_special_tokens=False)]
    assert isinstance(tok, TiktokenTokenizer)
    core = tok.encoding._core_bpe  # one call per text: tiktoken's threaded batch is slower here
    return lambda texts: [core.encode_ordinary(t) for t in texts]


def check(name: str, block: int = 0x4000) -> tuple[int, list[tuple[str, str]]]:
    """(pairs checked, pairs whose tokens differ) for tokenizer ``name``."""
    encode = _batch_encoder(name)
    checked, bad = 0, []
    for base in range(0, 0x110000, block):
        pairs = [
            (left, chr(cp) + "b")
            for cp in range(base, min(base + block, 0x110000))
            if not 0xD800 <= cp < 0xE000
            for left in LEFTS
            if is_cut(left, chr(cp) + "b")
        ]
        whole = encode([a + b for a, b in pairs])
        lefts = encode([a for a, _ in pairs])
        rights = encode([b for _, b in pairs])
        bad += [p for p, w, a, b in zip(pairs, whole, lefts, rights, strict=True) if list(w) != [*a, *b]]
        checked += len(pairs)
    return checked, bad


def main(argv: list[str] | None = None) -> None:
    names = (argv if argv is not None else sys.argv[1:]) or ["cl100k_base", "o200k_base", "deepseek"]
    for name in names:
        checked, bad = check(name)
        print(
            f"{name}: {checked:,} pairs, {len(bad)} differ{': ' + repr(bad[:5]) if bad else ''}", flush=True
        )


if __name__ == "__main__":
    main()
