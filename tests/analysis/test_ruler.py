"""Tests for promptkit.analysis.ruler: anchors, provider units, usage that contradicts itself."""

from __future__ import annotations

import bisect
import doctest
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, strategies as st

from promptkit.analysis import ruler as ruler_module
from promptkit.analysis.api import analyze, analyze_requests
from promptkit.analysis.ruler import Ruler, own_anchors, usage_contradictions
from promptkit.layout import RequestRecord, Usage


def test_module_doctests() -> None:
    result = doctest.testmod(ruler_module)
    assert result.failed == 0 and result.attempted > 0


def test_on_an_anchor_exact_between_interpolated_past_the_last_local() -> None:
    r = Ruler.start().extended([(100, 120), (200, 260)])
    assert r.to_provider(100) == (120, "exact")
    assert r.to_provider(150) == (190, "interpolated")
    assert r.to_provider(250)[0] == 310  # past the last anchor: local units from there
    assert Ruler.start().to_provider(50) == (50, "local")


def test_a_newer_count_drops_the_anchors_it_contradicts() -> None:
    r = Ruler.start().extended([(100, 120), (200, 260)]).extended([(150, 110)])
    assert list(zip(r.local, r.provider, strict=True)) == [(0, 0), (150, 110), (200, 260)]


@given(
    st.lists(st.tuples(st.integers(1, 10_000), st.integers(1, 10_000)), max_size=12), st.integers(0, 12_000)
)
def test_anchors_stay_increasing_and_the_map_monotone(points: list[tuple[int, int]], x: int) -> None:
    r = Ruler.start().extended(points)
    assert all(a < b for a, b in zip(r.local, r.local[1:], strict=False))
    assert all(a < b for a, b in zip(r.provider, r.provider[1:], strict=False))
    assert r.to_provider(x)[0] <= r.to_provider(x + 1)[0]


def _merged_one_by_one(ruler: Ruler, points: list[tuple[int, int]]) -> Ruler:
    """The general merge of ``points`` into ``ruler`` (what ``Ruler.extended`` does without its shortcut)."""
    local, provider = list(ruler.local), list(ruler.provider)
    for x, y in sorted(set(points)):
        if x <= 0 or y <= 0:
            continue
        keep = [i for i in range(len(local)) if (local[i] < x and provider[i] < y) or local[i] > x]
        local, provider = [local[i] for i in keep], [provider[i] for i in keep]
        i = bisect.bisect_left(local, x)
        local.insert(i, x)
        provider.insert(i, y)
        while i + 1 < len(local) and provider[i + 1] <= y:
            del local[i + 1], provider[i + 1]
    return Ruler(tuple(local), tuple(provider))


@given(
    st.lists(st.tuples(st.integers(-2, 60), st.integers(-2, 60)), max_size=6),
    st.lists(st.tuples(st.integers(-2, 90), st.integers(-2, 90)), max_size=4),
)
def test_appending_past_the_last_anchor_equals_the_general_merge(
    before: list[tuple[int, int]], points: list[tuple[int, int]]
) -> None:
    """A session's next prompt end lies past every anchor in both units: appended without a pass over
    the anchors, it gives the ruler the general merge gives (and so does every other case)."""
    ruler = Ruler.start().extended(before)
    beyond = [(ruler.local[-1] + 1 + abs(x), ruler.provider[-1] + 1 + abs(y)) for x, y in points]
    for new in (points, beyond, sorted(set(beyond))[:1]):
        assert ruler.extended(new) == _merged_one_by_one(ruler, new)


def test_own_anchors_are_the_prompt_end_and_the_last_breakpoint() -> None:
    usage = Usage(prompt_tokens=1000, cached_tokens=600, cache_write_tokens=396)
    assert own_anchors(950, 947, usage) == [(950, 1000), (947, 996)]
    assert own_anchors(950, 947, Usage(prompt_tokens=1000, cached_tokens=600, cache_write_tokens=400)) == [
        (947, 1000)
    ]
    # reads and writes above the prompt: no breakpoint anchor from them
    assert own_anchors(950, 947, Usage(prompt_tokens=1000, cached_tokens=900, cache_write_tokens=400)) == [
        (950, 1000)
    ]
    assert own_anchors(950, 947, None) == []


@pytest.mark.parametrize(
    ("usage", "field"),
    [
        (Usage(prompt_tokens=-1), "usage.prompt_tokens: -1 is negative"),
        (Usage(prompt_tokens=100, cached_tokens=-5), "usage.cached_tokens: -5 is negative"),
        (Usage(prompt_tokens=100, cached_tokens=90, cache_write_tokens=20), "90 + 20 = 110 exceed"),
        (Usage(prompt_tokens=100, cached_tokens=101), "usage.cached_tokens: 101 exceed"),
    ],
)
def test_contradictions_are_named(usage: Usage, field: str) -> None:
    [reason] = usage_contradictions(usage)
    assert field in reason


def test_consistent_usage_is_no_problem() -> None:
    assert usage_contradictions(Usage(prompt_tokens=900, cached_tokens=520, cache_write_tokens=370)) == []
    assert usage_contradictions(Usage(prompt_tokens=900, cached_tokens=530, cache_write_tokens=370)) == []
    # reads larger than the previous call could store are no contradiction of the usage itself
    assert usage_contradictions(Usage(prompt_tokens=900, cached_tokens=700)) == []


def test_the_analysis_counts_a_contradiction_with_file_and_line_and_keeps_the_figures() -> None:
    body = {"messages": [{"role": "user", "content": "hello there " * 50}]}
    longer = {
        "messages": [
            *body["messages"],
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "more"},
        ]
    }
    records = [
        RequestRecord(
            body, "s", index=0, usage=Usage(prompt_tokens=300, completion_tokens=5), file="log.jsonl", line=1
        ),
        RequestRecord(
            longer, "s", index=1, usage=Usage(prompt_tokens=320, cached_tokens=400), file="log.jsonl", line=2
        ),
    ]
    result = analyze_requests(records, provider="exact")
    assert result.requests.height == 2  # kept
    assert result.requests["reported_cached_tokens"][1] == 400  # never corrected
    problems = result.problems.filter(result.problems["line"] == 2)
    reasons = problems["reason"].to_list()
    assert problems["file"].to_list() == ["log.jsonl"] * len(reasons)
    assert any("usage.cached_tokens: 400 exceed usage.prompt_tokens 320" in r for r in reasons)
    # the read is larger than the first call could store: a read from outside the log, not a problem
    assert not any("could store" in r or "outside" in r for r in reasons)
    [note] = [n for n in result.notes if "outside the log" in n]
    assert note.startswith("1 call(s) read more") and "s#1 read 400 tokens" in note and "305 at most" in note


def _openai_counted_longer() -> tuple[list[RequestRecord], int]:
    """Two OpenAI calls whose reported prompts are 150 tokens longer than the local counts; returns them
    and the first one's reported length."""
    # OpenAI: 1024 tokens, then steps of 128, counted by OpenAI; the local count differs by 150 tokens
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Rules of the house. " * 400},
            {"role": "user", "content": "hi"},
        ],
    }
    longer = {
        "model": "gpt-4o",
        "messages": [
            *body["messages"],
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "more"},
        ],
    }
    local = int(
        analyze_requests([RequestRecord(body, "s", index=0)], provider="openai").requests["prompt_tokens"][0]
    )
    reported = local + 150
    records = [
        RequestRecord(
            body, "s", index=0, timestamp=0.0, usage=Usage(prompt_tokens=reported, cached_tokens=0)
        ),
        RequestRecord(longer, "s", index=1, timestamp=5.0, usage=Usage(prompt_tokens=reported + 20)),
    ]
    return records, reported


def test_an_any_prefix_caches_rule_applies_in_provider_units() -> None:
    records, reported = _openai_counted_longer()
    q = analyze_requests(records, provider="openai").requests
    # the whole first prompt is shared: its reported length is the prefix, and the rule rounds that
    assert q["prefix_tokens"][1] == reported
    assert q["predicted_cached_tokens"][1] == 1024 + (reported - 1024) // 128 * 128
    assert q["hit_ratio"][1] == q["predicted_cached_tokens"][1] / q["prompt_tokens"][1]  # the provider's
    assert q["position_basis"][1] == "exact"


def test_the_end_of_a_cached_answer_is_an_anchor_at_the_reported_prompt_plus_output() -> None:
    # OpenAI caches the answer too: the entry's end (local prompt + local answer) is the reported
    # prompt + the reported output (its hidden reasoning included), so the next call's read into the
    # answer is placed exactly there, not by proportions, and the 128-token steps apply to it
    body, longer, local = _rules_and_reply()
    answer = {"role": "assistant", "content": "hello"}
    records = [
        RequestRecord(body, "s", index=0, timestamp=0.0, completion=answer,
                      usage=Usage(prompt_tokens=local[0] + 7, completion_tokens=400)),
        RequestRecord({**longer, "messages": [*longer["messages"], {"role": "user", "content": "more"}]},
                      "s", index=1, timestamp=5.0, usage=Usage(prompt_tokens=local[0] + 7 + 400 + 30)),
    ]  # fmt: skip
    q = analyze_requests(records, provider="openai").requests
    end = local[0] + 7 + 400
    assert q["prefix_tokens"][1] == end
    assert q["predicted_cached_tokens"][1] == 1024 + (end - 1024) // 128 * 128
    assert q["position_basis"][1] == "exact"
    # without the completion in the entry (the mechanism's default) the read stops at the prompt
    bare = analyze_requests(records, provider="openai", cache_model="stepped-prefix").requests
    assert bare["prefix_tokens"][1] == local[0] + 7


def test_own_anchors_give_the_answers_end_only_with_a_reported_output() -> None:
    usage = Usage(prompt_tokens=1000, completion_tokens=300)
    assert own_anchors(950, None, usage, answer_end=990) == [(950, 1000), (990, 1300)]
    assert own_anchors(950, None, Usage(prompt_tokens=1000), answer_end=990) == [(950, 1000)]
    assert own_anchors(950, None, usage, answer_end=950) == [(950, 1000)]  # no answer past the prompt


def _rules_and_reply() -> tuple[dict[str, Any], dict[str, Any], list[int]]:
    """An OpenAI prompt past the 1024-token minimum, the same prompt with the answer appended, and
    each one's local prompt tokens."""
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Rules of the house. " * 400},
            {"role": "user", "content": "hi"},
        ],
    }
    longer = {"model": "gpt-4o", "messages": [*body["messages"], {"role": "assistant", "content": "hello"}]}
    local = [
        int(
            analyze_requests([RequestRecord(b, "s", index=0)], provider="openai").requests["prompt_tokens"][0]
        )
        for b in (body, longer)
    ]
    return body, longer, local


def test_without_an_anchor_the_positions_stay_local() -> None:
    """Calls without usage, read from none with one: no anchor past the start, so every position is the
    local tokenizer's, unchanged (the prompt is its local count, the rule applies to the local prefix),
    and the basis says how it was placed: ``local`` where something is read, ``exact`` at 0."""
    body, longer, local = _rules_and_reply()
    records = [RequestRecord(b, "s", index=i, timestamp=float(i)) for i, b in enumerate((body, longer))]
    q = analyze_requests(records, provider="openai").requests
    assert q["prompt_tokens"].to_list() == local
    assert q["prefix_tokens"][1] == local[0]
    assert q["predicted_cached_tokens"].to_list() == [0, 1024 + (local[0] - 1024) // 128 * 128]
    assert q["hit_ratio"][1] == q["predicted_cached_tokens"][1] / local[1]
    assert q["position_basis"].to_list() == ["exact", "local"]


def test_a_call_without_usage_keeps_the_anchors_it_inherits() -> None:
    """A call without usage after one with usage: the positions it shares with that call are placed
    by the anchor its usage gave (the shared prompt's end is the reported count), not left local."""
    body, longer, (local, _) = _rules_and_reply()
    records = [
        RequestRecord(body, "s", index=0, timestamp=0.0, usage=Usage(prompt_tokens=local + 150)),
        RequestRecord(longer, "s", index=1, timestamp=5.0),
    ]
    q = analyze_requests(records, provider="openai").requests
    assert q["prefix_tokens"][1] == local + 150
    assert q["predicted_cached_tokens"][1] == 1024 + (local + 150 - 1024) // 128 * 128
    assert q["position_basis"][1] == "exact"


def test_a_reported_prompt_of_no_tokens_gives_no_anchor_and_is_kept_as_reported() -> None:
    """A usage that reports a prompt of 0 tokens places nothing (no anchor: there is no prompt end to
    map), yet the row's prompt is the reported count, as for every call with usage, and no hit ratio is
    made of it."""
    body, _, (local, _) = _rules_and_reply()
    record = RequestRecord(body, "s", index=0, timestamp=0.0, usage=Usage(prompt_tokens=0))
    assert own_anchors(local, None, record.usage) == []
    q = analyze_requests([record], provider="openai").requests
    assert q["prompt_tokens"][0] == 0 and q["reported_prompt_tokens"][0] == 0
    assert q["hit_ratio"][0] is None


def test_the_consecutive_view_keeps_a_ruler_per_session_not_per_request() -> None:
    """Memory: in the consecutive view a request reads only its session's previous one, so once a
    request has its ruler the previous one's is dropped: a run keeps one ruler per session."""
    from promptkit.analysis.plans.local import LocalRun
    from promptkit.analysis.spec import AnalysisSpec, context_for

    body, _, _ = _rules_and_reply()
    records = []
    for s in ("a", "b"):
        messages = list(body["messages"])
        for i in range(4):
            messages = [*messages, {"role": "user", "content": f"question {s}{i}"}]
            usage = Usage(prompt_tokens=1500 + 40 * i)
            records.append(RequestRecord({**body, "messages": messages}, s, index=i, usage=usage))
            messages = [*messages, {"role": "assistant", "content": f"answer {s}{i}"}]
    state = LocalRun(context_for(AnalysisSpec("openai", None, None, None, "consecutive", False)))
    for pos, record in enumerate(records):
        state.add(pos, record)
    assert not state.stage1.problems
    rulers = state.replay.rulers
    assert rulers is not None and set(rulers) == {"a#3", "b#3"}
    assert all(ruler.anchored for ruler in rulers.values())


def _two_calls(model: str, content: str, scale: float) -> tuple[list[RequestRecord], int]:
    """Two calls of one session, the second appending a turn, whose reported prompts are ``scale`` ×
    the local counts (the provider's tokenizer is not the local one); returns them and the first
    call's local count."""
    body = {"model": model, "messages": [{"role": "user", "content": content}]}
    longer = {
        "model": model,
        "messages": [
            *body["messages"],
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "go"},
        ],
    }
    local = [
        int(
            analyze_requests([RequestRecord(b, "s", index=0)], provider="gemini").requests["prompt_tokens"][0]
        )
        for b in (body, longer)
    ]
    records = [
        RequestRecord(b, "s", index=i, timestamp=float(i), usage=Usage(prompt_tokens=round(n * scale)))
        for i, (b, n) in enumerate(zip((body, longer), local, strict=True))
    ]
    return records, local[0]


def test_a_prompt_minimum_applies_to_the_providers_count_of_the_prompt() -> None:
    # Gemini 3 Pro: 2,048 tokens at least (PrefixCache, minimum on the prompt). Locally the first
    # prompt is under it; Google counted it over: it is stored, and the next call reads all of it
    records, local = _two_calls("gemini-3-pro-preview", "word " * 1800, 1.25)
    assert local < 2048 <= round(local * 1.25)
    q = analyze_requests(records, provider="gemini").requests
    assert q["predicted_cached_tokens"][1] == round(local * 1.25)
    assert q["position_basis"][1] == "exact"
    # and the other way round: over the minimum locally, under it in Google's count: nothing stored
    records, local = _two_calls("gemini-3-pro-preview", "word " * 2200, 0.85)
    assert round(local * 0.85) < 2048 <= local
    assert analyze_requests(records, provider="gemini").requests["predicted_cached_tokens"][1] == 0


def test_a_breakpoint_minimum_applies_in_provider_units() -> None:
    # Anthropic: a breakpoint writes only if its prefix has the model's minimum (1,024 for Claude
    # Sonnet 4). Locally the system prompt is under it; in Anthropic's count (the prompt's reported
    # end, proportions before it) it is over: it is written, and the next call reads it
    system = [{"type": "text", "text": "Rules of the house. " * 190, "cache_control": {"type": "ephemeral"}}]

    def body(question: str) -> dict[str, object]:
        return {
            "model": "claude-sonnet-4",
            "system": system,
            "messages": [{"role": "user", "content": question}],
        }

    def local(b: dict[str, object]) -> int:
        return int(
            analyze_requests([RequestRecord(b, "s", index=0)], provider="anthropic").requests[
                "prompt_tokens"
            ][0]
        )

    first, second = body("what is the first rule?"), body("and the second one?")
    n1, n2 = local(first), local(second)
    assert n1 < 1024

    def run(scale: float) -> int:
        records = [
            RequestRecord(b, "s", index=i, timestamp=float(i), usage=Usage(prompt_tokens=round(n * scale)))
            for i, (b, n) in enumerate(((first, n1), (second, n2)))
        ]
        return int(analyze_requests(records, provider="anthropic").requests["predicted_cached_tokens"][1])

    assert run(1.0) == 0  # the local count is the provider's: under the minimum, nothing written
    assert run(1.3) > 1024  # counted as Anthropic counts, the system prompt is cacheable


def _ruled(case: str) -> tuple[list[RequestRecord], str]:
    """The records of a ruler-mode case above, and their provider."""
    if case == "openai counted longer":
        return _openai_counted_longer()[0], "openai"
    if case.startswith("gemini"):
        over = case.endswith("minimum")
        records, _ = _two_calls(
            "gemini-3-pro-preview", "word " * (1800 if over else 2200), 1.25 if over else 0.85
        )
        return records, "gemini"
    body, longer, (local, _) = _rules_and_reply()
    first = Usage(prompt_tokens=local + 150 if case == "openai, then no usage" else 0)
    return [
        RequestRecord(body, "s", index=0, timestamp=0.0, usage=first),
        RequestRecord(longer, "s", index=1, timestamp=5.0),
    ], "openai"


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    [
        "openai counted longer",
        "gemini over the minimum",
        "gemini under it",
        "openai, then no usage",
        "openai, 0 reported",
    ],
)
def test_the_parallel_simulated_view_places_positions_as_one_process(case: str) -> None:
    """Ruler mode in the ordered simulation of a parallel run (jobs=2: phase 1 on the workers, the cache
    and the positions in the coordinator, promptkit.analysis.plans.coordinator): the provider's units, the rule
    applied to them and the basis of each position are the single process's."""
    from polars.testing import assert_frame_equal

    records, provider = _ruled(case)
    one = analyze_requests(records, provider=provider, view="simulated")
    two = analyze_requests(records, provider=provider, view="simulated", jobs=2)
    assert_frame_equal(one.requests, two.requests)
    if case != "openai, 0 reported":
        assert one.requests["position_basis"][1] == "exact"  # placed by a reported count
    else:
        assert one.requests["prompt_tokens"][0] == 0  # kept as reported, though it places nothing


def test_reads_from_outside_the_log_are_counted_in_a_note_in_every_plan(tmp_path: Path) -> None:
    import json

    from promptkit.analysis.ruler import reads_from_outside

    # two sessions; b's second call reads more than any earlier call of the log could have written (a
    # retried request the log does not hold wrote it), a's first call reads what another session wrote
    lines = []
    for s, turn, prompt, hit, ts in (
        ("a", 0, 1200, 600, 1000.0),
        ("b", 0, 900, 0, 1001.0),
        ("a", 1, 1300, 1200, 1010.0),
        ("b", 1, 1500, 1400, 1011.0),
    ):
        messages = [{"role": "user", "content": f"{s} {k} " * 200} for k in range(turn + 1)]
        usage = {"prompt_tokens": prompt, "completion_tokens": 5, "prompt_cache_hit_tokens": hit}
        body = {"session": s, "timestamp": ts, "request": {"model": "deepseek-chat", "messages": messages}}
        lines.append(json.dumps({**body, "response": {"usage": usage}}))
    (tmp_path / "log.jsonl").write_text("\n".join(lines) + "\n")
    other = {"session": "c", "timestamp": 999.0, "request": {"model": "deepseek-chat", "messages": [
        {"role": "user", "content": "c"}]}, "response": {"usage": {"prompt_tokens": 100, "completion_tokens": 5}}}  # fmt: skip
    (tmp_path / "other.jsonl").write_text(
        json.dumps(other) + "\n"
    )  # a second file: jobs=2 runs the file plan
    notes = []
    for jobs in (1, 2):
        result = analyze(tmp_path, jobs=jobs)
        assert result.problems.height == 0
        notes.append([n for n in result.notes if "outside the log" in n])
    assert notes[0] == notes[1] and len(notes[0]) == 1
    assert notes[0][0].startswith(
        "2 call(s) read more from the cache than the log's earlier calls could have written (2,000 tokens"
    )
    # in time order: the other file's call came first, so a's first call is not the log's first
    assert "e.g. a#0 read 600 tokens, where earlier calls could write 105 at most" in notes[0][0]
    frame = analyze(tmp_path / "log.jsonl").requests.sort("timestamp")
    assert reads_from_outside(frame).select("session", "index", "written_before").rows() == [
        ("a", 0, None),
        ("b", 1, 1305),
    ]
