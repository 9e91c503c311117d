"""Deterministic synthetic text for the benchmarks: English sentences, Chinese runs and Python-like
code, drawn from a seeded ``random.Random`` (the same seed gives the same text)."""

from __future__ import annotations

import random

WORDS = (
    "the cache prefix request token model provider message system user assistant tool output error file "
    "function value because before after should could would every never always small large first last "
    "test fix bug change update read write parse render split join count check return build install run"
).split()
HANZI = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严"
IDENTS = "cache token prefix render split segment message request offset tokenizer model count index".split()


def english(rng: random.Random, n: int) -> str:
    sentences = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(6, 16))]
        sentences.append(" ".join(words).capitalize() + rng.choice([".", ".", "?", "!"]))
    return " ".join(sentences)


def chinese(rng: random.Random, n: int) -> str:
    return "".join("".join(rng.choice(HANZI) for _ in range(rng.randint(8, 24))) + "。" for _ in range(n))


def code(rng: random.Random, n: int, *, docstrings: bool = True) -> str:
    """``n`` functions, each with a one-sentence docstring when ``docstrings``."""
    lines = []
    for _ in range(n):
        name = "_".join(rng.sample(IDENTS, 2))
        args = ", ".join(rng.sample(IDENTS, rng.randint(1, 3)))
        lines.append(f"def {name}({args}):")
        if docstrings:
            lines.append(f'    """{english(rng, 1)}"""')
        for _ in range(rng.randint(2, 5)):
            lines.append(f"    {rng.choice(IDENTS)} = {rng.choice(IDENTS)}.get({rng.randint(0, 999)!r}, [])")
        lines.append(f"    return {rng.choice(IDENTS)}\n")
    return "\n".join(lines)
