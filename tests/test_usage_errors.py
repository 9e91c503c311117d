"""API misuse: an argument of the wrong type to a public entry point raises UsageError naming it.

``UsageError`` is a :class:`~promptkit.errors.PromptkitError` and also a ``TypeError`` and a
``ValueError``, so code written against the built-in exceptions keeps working; the message names the
argument (and the function, where the argument's name alone would be ambiguous).
"""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Callable
from typing import Any

import pytest

from promptkit import Message
from promptkit.analysis import analyze, analyze_requests
from promptkit.assembly import PromptRegistry, PromptView
from promptkit.chat.attachments import parse_attachment_refs
from promptkit.chat.identity import strip_sender_prefix
from promptkit.chat.mentions import extract_mentions, parse_cq_segments, split_markup_text
from promptkit.errors import PromptkitError, UsageError
from promptkit.formats import read_logs
from promptkit.providers.anthropic import anthropic_request
from promptkit.providers.deepseek import deepseek_request
from promptkit.providers.ollama import ollama_request
from promptkit.providers.openai import openai_request
from promptkit.report import request_costs, summarize

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOG = str(ROOT / "fixtures" / "logs" / "session-after.jsonl")
BODY = {"messages": [{"role": "user", "content": "hi"}]}
HI = [Message(role="user", content="hi")]


def _result() -> Any:
    return analyze_requests([BODY], provider="exact")


def _registry() -> PromptRegistry:
    registry = PromptRegistry()
    registry.register("k", "context", lambda view: "K")
    return registry


BUILDERS = {
    "openai_request": openai_request,
    "deepseek_request": deepseek_request,
    "anthropic_request": anthropic_request,
    "ollama_request": ollama_request,
}

CASES: list[tuple[str, Callable[[], object], str]] = [
    # cache analysis
    ("analyze(paths=int)", lambda: analyze(123), "paths"),
    ("analyze(paths=[int])", lambda: analyze([LOG, 3]), "paths[1]"),
    # a misspelt keyword of analyze() is Python's own TypeError naming it: its keywords are explicit
    # (tests/analysis/test_engine.py::test_analyze_takes_analyze_requests_keywords_each_by_name)
    ("analyze(format=int)", lambda: analyze(LOG, format=3), "format"),
    ("analyze(view=int)", lambda: analyze(LOG, view=3), "view"),
    ("analyze_requests(records=str)", lambda: analyze_requests("calls.jsonl"), "records"),
    ("analyze_requests(records=int)", lambda: analyze_requests(42), "records"),
    ("analyze_requests(provider=int)", lambda: analyze_requests([BODY], provider=3), "provider"),
    ("analyze_requests(cache_model=int)", lambda: analyze_requests([BODY], cache_model=3), "cache_model"),
    ("analyze_requests(cache_model=unknown)", lambda: analyze_requests([BODY], cache_model="lru"), "cache_model"),
    ("analyze_requests(tokenizer=int)", lambda: analyze_requests([BODY], tokenizer=3), "tokenizer"),
    ("analyze_requests(tokenizer=unknown)", lambda: analyze_requests([BODY], tokenizer="gpt9"), "tokenizer"),
    ("analyze_requests(render=int)", lambda: analyze_requests([BODY], render=3), "render"),
    ("analyze_requests(progress=str)", lambda: analyze_requests([BODY], progress="yes"), "progress"),
    # log reading
    ("read_logs(paths=int)", lambda: read_logs(3), "paths"),
    ("read_logs(paths=bytes)", lambda: read_logs(b"calls.jsonl"), "paths"),
    ("read_logs(format=int)", lambda: read_logs(LOG, format=3), "format"),
    ("read_logs(on_file=int)", lambda: read_logs(LOG, on_file=3), "on_file"),
    # reports
    ("summarize(prices=int)", lambda: summarize(_result(), prices=3), "prices"),
    ("summarize(model=int)", lambda: summarize(_result(), model=3), "model"),
    ("summarize(provider=int)", lambda: summarize(_result(), provider=3), "provider"),
    ("request_costs(prices={m: int})", lambda: request_costs(_result(), prices={"m": 1}), "prices['m']"),
    ("request_costs(model=int)", lambda: request_costs(_result(), model=3), "model"),
    # assembly
    ("register(key=int)", lambda: PromptRegistry().register(3, "context", str), "key"),
    ("register(anchor=unknown)", lambda: PromptRegistry().register("k", "middle", str), "anchor"),
    ("register(build=str)", lambda: PromptRegistry().register("k", "context", "text"), "build"),
    ("assemble(messages=str)", lambda: _registry().assemble("hi"), "messages"),
    ("assemble(messages=[dict])", lambda: _registry().assemble([{"role": "user"}]), "messages[0]"),
    ("assemble(view=dict)", lambda: _registry().assemble(HI, {"user_id": "u"}), "view"),
    ("assemble(build_timeout=str)", lambda: _registry().assemble(HI, build_timeout="5"), "build_timeout"),
    ("assemble(build_timeout=0)", lambda: _registry().assemble(HI, build_timeout=0), "build_timeout"),
    (
        "assemble_async(messages=int)",
        lambda: asyncio.run(_registry().assemble_async(3)),  # type: ignore[arg-type]
        "messages",
    ),
    # grammars
    ("parse_attachment_refs(text=None)", lambda: parse_attachment_refs(None), "text"),
    ("parse_cq_segments(text=bytes)", lambda: parse_cq_segments(b"[CQ:at,qq=1]"), "text"),
    ("extract_mentions(text=int)", lambda: extract_mentions(1), "text"),
    ("split_markup_text(text=None)", lambda: split_markup_text(None, 5), "text"),
    ("strip_sender_prefix(content=None)", lambda: strip_sender_prefix(None, "x"), "content"),
]
# the provider body builders, each with every call parameter of the wrong type
for _name, _build in BUILDERS.items():
    CASES += [
        (f"{_name}(prompt_or_messages=int)", lambda b=_build: b(42, model="m"), "prompt_or_messages"),
        (f"{_name}(messages=[int])", lambda b=_build: b([42], model="m"), "messages[0]"),
        (f"{_name}(temperature=str)", lambda b=_build: b(HI, model="m", temperature="hot"), "temperature"),
        (f"{_name}(max_tokens=str)", lambda b=_build: b(HI, model="m", max_tokens="many"), "max_tokens"),
        (f"{_name}(top_p=str)", lambda b=_build: b(HI, model="m", top_p="most"), "top_p"),
        (f"{_name}(stop=int)", lambda b=_build: b(HI, model="m", stop=3), "stop"),
        (f"{_name}(stop=[int])", lambda b=_build: b(HI, model="m", stop=["x", 3]), "stop[1]"),
        (f"{_name}(stream=str)", lambda b=_build: b(HI, model="m", stream="yes"), "stream"),
    ]


@pytest.mark.parametrize(("label", "call", "argument"), CASES, ids=[c[0] for c in CASES])
def test_wrong_argument_type_is_a_usage_error_naming_it(
    label: str, call: Callable[[], object], argument: str
) -> None:
    with pytest.raises(UsageError) as info:
        call()
    message = str(info.value)
    assert argument in message, message
    assert "\n" not in message
    assert isinstance(info.value, PromptkitError | TypeError | ValueError)


def test_the_right_types_still_work() -> None:
    """The checks reject only wrong types: the same calls with right arguments succeed."""
    assert read_logs(LOG, format="promptkit", on_file=lambda path: None).records
    assert summarize(_result(), model="deepseek-chat", provider="deepseek")["cost"].height >= 0
    for build in BUILDERS.values():
        body = build(HI, model="m", temperature=0, max_tokens=5, top_p=1, stop=["x"], stream=False)
        assert body["model"] == "m"
    prompt = _registry().assemble(HI, PromptView(user_id="u"), build_timeout=1)
    assert [m.content for m in prompt.messages] == ["K", "hi"]
