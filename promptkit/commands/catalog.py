"""``promptkit formats`` and ``promptkit providers`` as functions: the text listing the log formats
promptkit reads (:func:`formats_text`) and the provider profiles with their priced models
(:func:`providers_text`).

>>> formats_text().splitlines()[0].endswith("log formats (detected per file; --format NAME reads every file as one):")
True
"""

from __future__ import annotations

__all__ = ["formats_text", "providers_text"]


def formats_text() -> str:
    """One line per registered log format: its name and what it reads."""
    from promptkit.formats import available_formats

    formats = available_formats()
    width = max(len(n) for n in formats)
    lines = [f"{len(formats)} log formats (detected per file; --format NAME reads every file as one):", ""]
    lines += [f"  {name.ljust(width)}  {fmt.description}" for name, fmt in formats.items()]
    return "\n".join(lines) + "\n"


def providers_text() -> str:
    """Each provider profile: its description, tokenizer, render, cache model, default model and the
    models priced for it."""
    from promptkit.providers.registry import available_providers
    from promptkit.report.pricing import resolve_prices

    providers = available_providers()
    prices = resolve_prices()
    lines = [f"{len(providers)} provider profiles (what --provider takes):", ""]
    for name, p in providers.items():
        priced = sorted(m for m, price in prices.items() if price.provider == name)
        lines.append(f"  {name}: {p.description}")
        lines.append(
            f"    tokenizer {p.tokenizer}, render {p.render}, cache model {p.cache_model}; "
            f"default model {p.default_model or '(none)'}"
        )
        if priced:
            lines.append(f"    priced models: {', '.join(priced)}")
    return "\n".join(lines) + "\n"
