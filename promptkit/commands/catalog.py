"""``promptkit formats`` and ``promptkit providers`` as functions: the text listing the log formats
promptkit reads (:func:`formats_text`) and the provider profiles with their priced models
(:func:`providers_text`).

>>> formats_text().splitlines()[0].endswith("log formats (detected per file; --format NAME reads every file as one):")
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

__all__ = ["formats_text", "provider_rows", "providers_text"]


def formats_text() -> str:
    """One line per registered log format: its name and what it reads."""
    from promptkit.formats import available_formats

    formats = available_formats()
    width = max(len(n) for n in formats)
    lines = [f"{len(formats)} log formats (detected per file; --format NAME reads every file as one):", ""]
    lines += [f"  {name.ljust(width)}  {fmt.description}" for name, fmt in formats.items()]
    return "\n".join(lines) + "\n"


#: A cache model's mechanism in words, by its name (:mod:`promptkit.tokens.cache_models`).
_MECHANISMS: Final[dict[str, str]] = {
    "breakpoint": "exact entries written at cache_control breakpoints, read whole",
    "unit-prefix": "any shared prefix, rounded down to whole units",
    "prefix": "any shared prefix",
    "stepped-prefix": "a shared prefix, rounded down to whole steps",
    "paged-block": "shared prefix blocks (paged KV cache)",
    "exact": "any shared prefix, token-exact (no provider rule)",
}


def _spec_name(spec: Any) -> str:
    """A tokenizer or render spec by name, without loading it: a name as given, an object's ``name``,
    a loader function's docstring (its first word: what it loads)."""
    if isinstance(spec, str):
        return spec
    if getattr(spec, "name", None):
        return str(spec.name)
    doc = (getattr(spec, "__doc__", None) or "").strip()
    return doc.split()[0] if doc else str(getattr(spec, "__name__", type(spec).__name__)).strip("_")


def _seconds(value: float) -> str:
    if value % 3600 == 0:
        return f"{value / 3600:g}h"
    return f"{value / 60:g}m" if value % 60 == 0 else f"{value:g}s"


def provider_rows() -> list[dict[str, Any]]:
    """One dict per provider profile, JSON-ready (what ``promptkit providers --json`` prints): ``name,
    description, tokenizer, exact_tokenizer, render, cache_model, cache_rules`` (in words),
    ``minimum_tokens`` (the smallest prompt cached, for the default model), ``ttl`` (seconds, None: not
    modelled), ``ttl_options`` (longer TTLs a request may ask for: ``{name: seconds}``),
    ``best_effort``, ``default_model`` and ``priced_models`` (``model, cache_hit, cache_miss, output,
    cache_write, cache_write_1h``, USD per million tokens, ``as_of``: the date the price was read,
    ``source``, and the band above a prompt length: ``above_tokens`` and ``above_*``, None without one)."""
    from promptkit.providers.registry import available_providers
    from promptkit.report.pricing import resolve_prices

    prices = resolve_prices()
    rows = []
    for name, p in available_providers().items():
        model = p.new_cache_model()
        unit = getattr(model, "cache_unit", None)
        rules = _MECHANISMS.get(str(model.name), str(model.name))
        if unit:
            rules += f" of {int(unit)} tokens"
        if p.needs_explicit_breakpoints:
            rules += "; nothing is cached without a breakpoint"
        if p.best_effort:
            rules += "; best effort (a hit is not guaranteed)"
        priced = sorted((m for m in prices.values() if m.provider == name), key=lambda m: m.model)
        rows.append(
            {
                "name": name,
                "description": p.description,
                "tokenizer": _spec_name(p.tokenizer),
                "exact_tokenizer": bool(p.exact_tokenizer),
                "render": _spec_name(p.render),
                "cache_model": str(model.name),
                "cache_rules": rules,
                "minimum_tokens": int(p.min_cacheable_tokens(p.default_model)),
                "ttl": model.ttl,
                "ttl_options": {k: v for k, v in (*p.extended_ttl_options, *p.retention_options)},
                "best_effort": bool(p.best_effort),
                "default_model": p.default_model,
                "priced_models": [_price_row(m) for m in priced],
            }
        )
    return rows


def _price_row(price: Any) -> dict[str, Any]:
    """A :class:`~promptkit.providers.prices.ModelPrice` as JSON values (USD per million tokens)."""
    fields = (
        "model",
        "cache_hit",
        "cache_miss",
        "output",
        "cache_write",
        "cache_write_1h",
        "as_of",
        "source",
        "above_tokens",  # a band above a prompt length: the prices of longer prompts (None: no band)
        "above_cache_hit",
        "above_cache_miss",
        "above_output",
        "above_cache_write",
        "above_cache_write_1h",
    )
    return {name: getattr(price, name, None) for name in fields}


def _ttl_text(row: dict[str, Any]) -> str:
    ttl = "not modelled" if row["ttl"] is None else _seconds(float(row["ttl"]))
    longer = ", ".join(f"{k} on request" for k in row["ttl_options"])
    return f"{ttl} ({longer})" if longer else ttl


def _priced_text(row: dict[str, Any]) -> str:
    models = row["priced_models"]
    if not models:
        return "(none)"
    dates = sorted({str(m["as_of"]) for m in models if m["as_of"]})
    return f"{', '.join(m['model'] for m in models)} (prices as of {', '.join(dates) or 'an unknown date'})"


def providers_text(as_json: bool = False, width: int = 160) -> str:
    """The provider profiles as a table ``width`` characters wide: name, tokenizer, cache rules in
    words, minimum cached prompt, TTLs and the priced models with the date their prices were read
    (the last column wraps); with ``as_json``, :func:`provider_rows` as JSON.

    >>> providers_text().splitlines()[2].split()[:3]
    ['provider', 'tokenizer', 'cache']
    """
    import json
    import textwrap

    rows = provider_rows()
    if as_json:
        return json.dumps(rows, indent=2, ensure_ascii=False) + "\n"
    header = ("provider", "tokenizer", "cache rules", "minimum", "TTL", "priced models")
    cells = [
        (r["name"], r["tokenizer"] + ("" if r["exact_tokenizer"] else " (estimate)"), r["cache_rules"],
         f"{r['minimum_tokens']:,}", _ttl_text(r), _priced_text(r))
        for r in rows
    ]  # fmt: skip
    widths = [max(len(header[k]), *(len(c[k]) for c in cells)) for k in range(5)]
    widths[2] = min(widths[2], 44)
    last = max(30, width - sum(widths) - 2 * 5)

    def line(values: Sequence[str]) -> list[str]:
        columns = [
            textwrap.wrap(v, w, break_on_hyphens=False) or [""]
            for v, w in zip(values, [*widths, last], strict=True)
        ]
        depth = max(len(c) for c in columns)
        return [
            "  ".join(
                (c[i] if i < len(c) else "").ljust(w) for c, w in zip(columns, [*widths, last], strict=True)
            ).rstrip()
            for i in range(depth)
        ]

    out = [f"{len(rows)} provider profiles (what --provider takes; --json for every field):", ""]
    out += line(header)
    out.append("  ".join("-" * w for w in [*widths, last]))
    for c in cells:
        out += line(c)
    out += [
        "",
        "(estimate): promptkit counts with a stand-in tokenizer; the provider's reported counts are the ruler",
    ]
    return "\n".join(out) + "\n"
