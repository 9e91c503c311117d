"""Estimate the opaque head of records whose log omits the start of the prompt.

Agent logs such as Claude Code transcripts (no system prompt, no tool definitions) and Codex rollouts (no
tool definitions) show the conversation but not everything before it. The provider's usage still counts
it. :func:`estimate_opaque_heads` gives each group of records (one session and model: one key) the
size of that hidden head::

    N = reported prompt tokens − our count of the visible request

taken on the group's **first call with reported usage**, where the visible part is smallest, so the
error of our own tokenizer (a model of the provider's, not a copy) weighs least; N is floored at 0. Every
record of the group gets ``meta["opaque_head_tokens"] = N`` and ``meta["opaque_head_key"] = key``;
:mod:`promptkit.analysis.opaque` turns them into placeholder tokens at analysis time. The count uses the
provider profile's render and tokenizer, exactly what the analysis uses, so the shifted prompt of the
first call equals its reported prompt tokens.

>>> from promptkit.layout import RequestRecord, Usage
>>> body = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}
>>> [r] = estimate_opaque_heads([RequestRecord(body, "s", usage=Usage(prompt_tokens=5000), provider="anthropic")],
...                             key_of=lambda r: "claude-code:s")
>>> r.meta["opaque_head_key"], r.meta["opaque_head_tokens"] < 5000
('claude-code:s', True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from promptkit.layout import RequestRecord

__all__ = ["estimate_opaque_heads", "visible_prompt_tokens"]


def visible_prompt_tokens(record: RequestRecord, cache: dict[tuple[str, str], Any] | None = None) -> int:
    """Prompt tokens of the record's request as promptkit renders and tokenizes it for its provider
    (the profile it names or is recognised as; the generic profile when none is). ``cache`` keeps
    request tokenizers between calls.

    >>> from promptkit.layout import RequestRecord
    >>> visible_prompt_tokens(RequestRecord({"messages": [{"role": "user", "content": "hi"}]}, "s", provider="openai"))
    9
    """
    from promptkit.providers.registry import GENERIC_PROVIDER, get_provider, infer_record_provider
    from promptkit.tokens.tokenize import RequestTokenizer

    profile = get_provider(infer_record_provider(record) or GENERIC_PROVIDER)
    key = (profile.name, "")
    tokenizers = cache if cache is not None else {}
    rt = tokenizers.get(key)
    if rt is None:
        rt = tokenizers[key] = RequestTokenizer(profile.load_render(), profile.load_tokenizer())
    return int(rt.tokenize(record.request).prompt_len)


def estimate_opaque_heads(
    records: Sequence[RequestRecord], *, key_of: Callable[[RequestRecord], str]
) -> list[RequestRecord]:
    """``records`` with ``meta["opaque_head_tokens"]`` / ``meta["opaque_head_key"]`` set per key group
    (see the module docstring); a group with no reported prompt tokens gets only the key. The records
    are returned in the given order; ``meta["opaque_head_basis"]`` names the file and line of the call
    the estimate comes from."""
    by_key: dict[str, list[int]] = {}
    for k, r in enumerate(records):
        by_key.setdefault(key_of(r), []).append(k)
    out = list(records)
    tokenizers: dict[tuple[str, str], Any] = {}
    for key, members in by_key.items():
        meta: dict[str, Any] = {"opaque_head_key": key}
        for k in members:
            r = records[k]
            if r.usage is None or r.usage.prompt_tokens is None:
                continue
            visible = visible_prompt_tokens(r, tokenizers)
            meta["opaque_head_tokens"] = max(0, r.usage.prompt_tokens - visible)
            meta["opaque_head_basis"] = f"{r.file}:{r.line}" if r.file is not None else f"{r.session}#{k}"
            break
        for k in members:
            out[k] = attrs.evolve(records[k], meta={**records[k].meta, **meta})
    return out
