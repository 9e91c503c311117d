"""Anthropic breakpoints the log does not show, placed from the reported counts
(promptkit.analysis.breakpoints), checked on a real Claude Code log with its cache_control stripped."""

from __future__ import annotations

from typing import Any

import attrs
import polars as pl

from benchmarks.inferred_breakpoints_accuracy import stripped  # the log without cache_control
from promptkit.analysis.api import analyze, analyze_requests
from promptkit.analysis.breakpoints import infer_breakpoints, shows_cache_control
from promptkit.formats import read_logs
from promptkit.layout import Usage
from promptkit.tokens.tokenize import RequestTokenizer

LONG = "a line of the project's code, repeated so that the prompt is long enough to cache. " * 60


def _body(turns: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": LONG}]
    for k in range(turns):
        messages += [
            {"role": "user", "content": f"question {k} " + LONG},
            {"role": "assistant", "content": f"A{k}"},
        ]
    messages.append({"role": "user", "content": "last"})
    return {"messages": messages}


def _tok(body: dict[str, Any]) -> Any:
    return RequestTokenizer("chatml", "cl100k_base").tokenize(body)


def test_the_breakpoint_lands_on_the_message_nearest_to_reads_plus_writes() -> None:
    body = _body(3)
    tok = _tok(body)
    ends = list(tok.message_ends)
    # the provider counts 10% more than the local tokenizer; reads + writes end at messages[3]
    scale = 1.1
    reported = round(tok.prompt_len * scale)
    usage = Usage(
        prompt_tokens=reported,
        cached_tokens=round(ends[1] * scale),
        cache_write_tokens=round((ends[3] - ends[1]) * scale) + 2,
    )
    found = infer_breakpoints(tok, body, usage)
    assert found is not None and found.messages == (0, 3)
    assert [i for i, m in enumerate(found.body["messages"]) if "cache_control" in m] == [0, 3]
    assert found.control == {"type": "ephemeral"}
    assert "cache_control" not in body["messages"][3]  # the input is left as it was
    # with the local tokenizer the provider's, no proportions: the same point
    exact = Usage(prompt_tokens=tok.prompt_len, cached_tokens=0, cache_write_tokens=ends[5])
    assert infer_breakpoints(tok, body, exact, exact_units=True).messages == (0, 5)  # type: ignore[union-attr]


def test_nothing_is_inferred_where_the_log_shows_a_breakpoint_or_nothing_was_cached() -> None:
    body = _body(2)
    tok = _tok(body)
    cached = Usage(prompt_tokens=tok.prompt_len, cached_tokens=100, cache_write_tokens=50)
    marked = {**body, "messages": [*body["messages"][:-1], {"role": "user", "content": [
        {"type": "text", "text": "last", "cache_control": {"type": "ephemeral"}}]}]}  # fmt: skip
    assert shows_cache_control(marked) and infer_breakpoints(tok, marked, cached) is None
    assert shows_cache_control({**body, "cache_control": {"type": "ephemeral"}})
    assert shows_cache_control({**body, "tools": [{"name": "t", "cache_control": {"type": "ephemeral"}}]})
    assert not shows_cache_control(body)
    assert (
        infer_breakpoints(
            tok, body, Usage(prompt_tokens=tok.prompt_len, cached_tokens=0, cache_write_tokens=0)
        )
        is None
    )
    # an OpenAI-shaped usage (no write count): not Anthropic's, nothing inferred
    assert infer_breakpoints(tok, body, Usage(prompt_tokens=tok.prompt_len, cached_tokens=500)) is None
    assert infer_breakpoints(tok, body, None) is None


def test_an_hour_ttl_where_most_writes_were_reported_with_it() -> None:
    body = _body(1)
    tok = _tok(body)
    one_hour = Usage(
        prompt_tokens=tok.prompt_len, cached_tokens=0, cache_write_tokens=900, cache_write_1h_tokens=900
    )
    found = infer_breakpoints(tok, body, one_hour)
    assert found is not None and found.control == {"type": "ephemeral", "ttl": "1h"}
    assert infer_breakpoints(tok, body, attrs.evolve(one_hour, cache_write_1h_tokens=100)).control == {
        "type": "ephemeral"
    }  # type: ignore[union-attr]


def _hit(requests: pl.DataFrame, column: str) -> float:
    return int(requests[column].sum()) / int(requests["reported_prompt_tokens"].sum())


def test_a_real_claude_code_log_without_cache_control_is_predicted_as_with_it() -> None:
    load = read_logs("fixtures/claude-code")
    blind = [stripped(r) for r in load.records]
    assert not any(shows_cache_control(r.request) for r in blind)
    got = analyze_requests(blind, provider="anthropic")
    shown = analyze_requests(load.records, provider="anthropic")
    q = got.requests
    reported = _hit(q, "reported_cached_tokens")
    assert reported > 0.5  # the provider read most of it
    # not 0%: the breakpoints placed from the counts predict what the log's own breakpoints do
    assert q["predicted_cached_tokens"].to_list() == shown.requests["predicted_cached_tokens"].to_list()
    assert _hit(q, "predicted_cached_tokens") > 0.35
    # the whole difference is the first call's read of what another session wrote (from outside the log)
    assert int(q["reported_cached_tokens"].sum()) - int(q["predicted_cached_tokens"].sum()) == 11442
    assert any("outside the log" in n and "11,442 tokens" in n for n in got.notes)
    # the call that read what its session's first call wrote is predicted exactly
    assert q.filter(pl.col("reported_cached_tokens") == 26447)["predicted_cached_tokens"].to_list() == [26447]
    assert q["inferred_breakpoints"].to_list()[0].startswith("head,messages[")
    assert shown.requests["inferred_breakpoints"].null_count() == shown.requests.height
    [note] = [n for n in got.notes if "inferred" in n]
    assert note.startswith(f"{q.height} of {q.height} requests show no cache_control")
    # without the write counts nothing proves a breakpoint: nothing cached, the old answer
    blind = [
        attrs.evolve(r, usage=attrs.evolve(r.usage, cache_write_tokens=None)) for r in blind if r.usage
    ]
    assert int(analyze_requests(blind, provider="anthropic").requests["predicted_cached_tokens"].sum()) == 0


def test_bundled_logs_without_cache_control_are_predicted_as_reported() -> None:
    for path in ("fixtures/opencode", "fixtures/litellm", "fixtures/atif"):
        q = analyze(path).requests.filter(pl.col("inferred_breakpoints").is_not_null())
        assert q.height >= 2, path
        assert q["predicted_cached_tokens"].to_list() == q["reported_cached_tokens"].to_list(), path
        assert q["position_basis"].to_list() == ["exact"] * q.height, path


def test_every_plan_infers_the_same_breakpoints_and_says_so() -> None:
    one = analyze("fixtures/atif")
    for other in (analyze("fixtures/atif", jobs=2), analyze("fixtures/atif", view="simulated", jobs=2)):
        assert (
            other.requests["inferred_breakpoints"].to_list() == one.requests["inferred_breakpoints"].to_list()
        )
        assert [n for n in other.notes if "inferred" in n] == [n for n in one.notes if "inferred" in n]
    assert one.requests["inferred_breakpoints"].to_list()[:3] == [
        "messages[0],messages[1]",
        "messages[0],messages[3]",
        "messages[0],messages[5]",
    ]
