"""Every grammar parser stays linear on adversarial input.

Each parser runs on 0.25 M, 0.5 M and 1 M characters of near-matches (openers that never close,
separators that almost match, ...). The script prints, side by side, the best-of-5 time per call for each size
and the ratios t(0.5M)/t(0.25M) and t(1M)/t(0.5M): about 2 means linear, about 4 quadratic.

A second table runs the seed's own regexes (AT_SELF_PATTERN.search, and the attachment matcher with an
unbounded description) on much smaller inputs, to show why the parsers above do not use them as is.

    python benchmarks/parsers_linear.py
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from promptkit.chat.attachments import build_attachment_ref_matcher, parse_attachment_refs
from promptkit.chat.mentions import (
    AT_SELF_PATTERN,
    check_immediate_mention,
    escape_markup,
    extract_mentions,
    parse_cq_segments,
    split_markup_text,
)

SIZES = (262_144, 524_288, 1_048_576)
SMALL_SIZES = (4_096, 8_192, 16_384)


def repeat(unit: str, size: int, tail: str = "") -> str:
    """``unit`` repeated to ``size`` characters (then ``tail``)."""
    return (unit * (size // len(unit) + 1))[:size] + tail


def fill(head: str, size: int, tail: str = "", filler: str = "a") -> str:
    """``head`` then ``filler`` up to ``size`` characters, then ``tail``."""
    return head + filler * max(0, size - len(head)) + tail


MATCHER = build_attachment_ref_matcher("image", "x.png")
SEED_MATCHER = re.compile(r"\[图片(?:: [^\]\n]*)? \| ref:" + re.escape("x.png") + r"\]")

# (parser name, input family, function applied to the input, input builder)
CASES: list[tuple[str, str, Callable[[str], object], Callable[[int], str]]] = [
    (
        "parse_attachment_refs",
        "[图片: aaaa… ] (desc never reaches | ref:)",
        parse_attachment_refs,
        lambda n: fill("[图片: ", n, "] ref:"),
    ),
    (
        "parse_attachment_refs",
        "[图片: [图片: … |ref:] (openers, bad separator)",
        parse_attachment_refs,
        lambda n: repeat("[图片: ", n, " |ref:]"),
    ),
    (
        "parse_attachment_refs",
        "[图片 | ref [图片 | ref … ]",
        parse_attachment_refs,
        lambda n: repeat("[图片 | ref", n, ":]"),
    ),
    (
        "parse_attachment_refs",
        "[图片: a|[图片: a| … ref:]",
        parse_attachment_refs,
        lambda n: repeat("[图片: a|", n, " ref:]"),
    ),
    ("matcher.search", "[图片: aaaa… (never closed)", MATCHER.search, lambda n: fill("[图片: ", n)),
    ("matcher.search", "[图片: [图片: [图片: … (openers)", MATCHER.search, lambda n: repeat("[图片: ", n)),
    (
        "matcher.search",
        "[图片: a | ref:y.png … (wrong ref)",
        MATCHER.search,
        lambda n: repeat("[图片: a | ref:y.png", n),
    ),
    (
        "parse_cq_segments",
        "[CQ:at,qq=[CQ:at,qq=… (unterminated)",
        parse_cq_segments,
        lambda n: repeat("[CQ:at,qq=", n),
    ),
    (
        "parse_cq_segments",
        "[CQ:at,qq=1111… (never closed)",
        parse_cq_segments,
        lambda n: fill("[CQ:at,qq=", n, filler="1"),
    ),
    (
        "parse_cq_segments",
        "[CQ:at,qq][CQ:at,qq]… (malformed)",
        parse_cq_segments,
        lambda n: repeat("[CQ:at,qq]", n),
    ),
    (
        "parse_cq_segments",
        "[CQ:face,id=1]&#91;… (well formed)",
        parse_cq_segments,
        lambda n: repeat("[CQ:face,id=1]&#91;", n),
    ),
    (
        "extract_mentions",
        '<at self id="<at self id="…',
        extract_mentions,
        lambda n: repeat('<at self id="', n),
    ),
    ("extract_mentions", "<at␣␣␣␣… (whitespace run)", extract_mentions, lambda n: fill("<at", n, filler=" ")),
    ("extract_mentions", '<at id="aaaa… (never closed)', extract_mentions, lambda n: fill('<at id="', n)),
    (
        "check_immediate_mention",
        '<at self id="1"><at self id="1">… (no </at>)',
        check_immediate_mention,
        lambda n: repeat('<at self id="1">', n),
    ),
    (
        "check_immediate_mention",
        "<at self<at self… (no boundary)",
        check_immediate_mention,
        lambda n: repeat("<at self", n),
    ),
    (
        "split_markup_text(2000)",
        '<at id="1"><at id="1">… (unclosed)',
        lambda t: split_markup_text(t, 2000),
        lambda n: repeat('<at id="1">', n),
    ),
    (
        "split_markup_text(2000)",
        '<image url="<image url="… (unclosed)',
        lambda t: split_markup_text(t, 2000),
        lambda n: repeat('<image url="', n),
    ),
    (
        "split_markup_text(2000)",
        "<at x>a…a</at> (one huge tag)",
        lambda t: split_markup_text(t, 2000),
        lambda n: fill("<at x>", n, "</at>"),
    ),
    (
        "split_markup_text(2000)",
        "a\\na\\na\\n… (tiny pieces)",
        lambda t: split_markup_text(t, 2000),
        lambda n: repeat("a\n", n),
    ),
    (
        "split_markup_text(2000)",
        '<at id="1">x</at> a … (tags and spaces)',
        lambda t: split_markup_text(t, 2000),
        lambda n: repeat('<at id="1">x</at> a ', n),
    ),
    ("escape_markup", "<at self<at self…", escape_markup, lambda n: repeat("<at self", n)),
    ("escape_markup", "<<<<… ", escape_markup, lambda n: "<" * n),
]

SEED_CASES: list[tuple[str, str, Callable[[str], object], Callable[[int], str]]] = [
    (
        "AT_SELF_PATTERN.search (seed)",
        '<at self id="1">… (no </at>)',
        AT_SELF_PATTERN.search,
        lambda n: repeat('<at self id="1">', n),
    ),
    (
        "check_immediate_mention",
        '<at self id="1">… (no </at>)',
        check_immediate_mention,
        lambda n: repeat('<at self id="1">', n),
    ),
    (
        "seed matcher regex .search",
        "[图片: [图片: … (openers)",
        SEED_MATCHER.search,
        lambda n: repeat("[图片: ", n),
    ),
    ("matcher.search", "[图片: [图片: … (openers)", MATCHER.search, lambda n: repeat("[图片: ", n)),
]


def calls_for(fn: Callable[[str], object], text: str, min_time: float) -> int:
    """How many calls make one timed round last at least ``min_time`` seconds."""
    start = time.perf_counter()
    fn(text)
    once = time.perf_counter() - start
    return max(1, int(min_time / once) if once > 0 else 1000)


def best_times(
    fn: Callable[[str], object], texts: list[str], rounds: int = 5, min_time: float = 0.02
) -> list[float]:
    """Seconds per call for each text: the best of ``rounds``.

    The sizes are measured interleaved, round by round, so a burst of load on the machine hits all of
    them alike instead of skewing one ratio.
    """
    numbers = [calls_for(fn, text, min_time) for text in texts]
    best = [float("inf")] * len(texts)
    for _ in range(rounds):
        for i, (text, number) in enumerate(zip(texts, numbers, strict=True)):
            start = time.perf_counter()
            for _ in range(number):
                fn(text)
            best[i] = min(best[i], (time.perf_counter() - start) / number)
    return best


def run(
    cases: list[tuple[str, str, Callable[[str], object], Callable[[int], str]]], sizes: tuple[int, ...]
) -> None:
    labels = [f"{s / 1_048_576:g}M" if s >= 65_536 else f"{s // 1024}K" for s in sizes]
    head = f"{'parser':<30} {'input':<48} " + " ".join(f"{'t(' + x + ')':>10}" for x in labels)
    head += f" {'ratio ' + labels[1] + '/' + labels[0]:>14} {'ratio ' + labels[2] + '/' + labels[1]:>14}"
    print(head)
    print("-" * len(head))
    for name, family, fn, build in cases:
        times = best_times(fn, [build(size) for size in sizes])
        r1 = times[1] / times[0] if times[0] else float("nan")
        r2 = times[2] / times[1] if times[1] else float("nan")
        cells = " ".join(f"{t * 1000:>8.2f}ms" for t in times)
        print(f"{name:<30} {family:<48} {cells} {r1:>14.2f} {r2:>14.2f}")


def main() -> None:
    print("Linear-time check: best of 5, sizes in characters; ratio ~2 = linear, ~4 = quadratic.\n")
    run(CASES, SIZES)
    print("\nFor comparison, the seed's regexes used directly (smaller inputs, they are quadratic here):\n")
    run(SEED_CASES, SMALL_SIZES)


if __name__ == "__main__":
    main()
