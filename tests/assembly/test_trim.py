"""Tests for promptkit/assembly/trim.py: dropping the oldest history units to fit a token budget."""

from __future__ import annotations

import copy
import itertools
import json
import math

import pytest
from hypothesis import event, given, settings, strategies as st

from promptkit.assembly import VOLATILE_INJECTOR, PromptRegistry, layout_of, trim_to_budget
from promptkit.assembly.anchors import SUMMARY_INJECTOR
from promptkit.assembly.token_counts import message_tokens
from promptkit.assembly.trim import DEFAULT_SUMMARY_HEADER, Compaction, TrimPolicy, TrimResult
from promptkit.chat.message import Message, ToolCall, to_openai_dict


def system(content: str, injector: str | None = None) -> Message:
    return Message(role="system", content=content, metadata={"injector": injector} if injector else None)


def user(content: str) -> Message:
    return Message(role="user", content=content)


def assistant(content: str | None, *calls: str) -> Message:
    return Message(
        role="assistant", content=content, tool_calls=[ToolCall(id=c, name="f") for c in calls] or None
    )


def tool(call_id: str, content: str) -> Message:
    return Message(role="tool", tool_call_id=call_id, content=content)


def cost(messages: list[Message] | tuple[Message, ...]) -> int:
    return sum(message_tokens(m, len) for m in messages)


def conversation() -> list[Message]:
    return [
        system("persona"),
        user("old question"),  # 1
        assistant(None, "c1"),  # 2  } one tool group
        tool("c1", "a long tool result"),  # 3  }
        assistant("old answer"),  # 4
        user("recent question"),  # 5
        assistant("recent answer"),  # 6
        system("VOLATILE", VOLATILE_INJECTOR),
        Message(role="system", content="委派", metadata={"injector": "cross-session-delegation"}),
    ]


def test_nothing_is_dropped_when_it_fits() -> None:
    msgs = conversation()
    r = trim_to_budget(msgs, cost(msgs), count=len)
    assert r.messages == tuple(msgs) and r.dropped == () and r.fits
    assert r.tokens_before == r.tokens_after == cost(msgs)


def test_oldest_units_go_first_and_a_tool_group_is_one_unit() -> None:
    msgs = conversation()
    total = cost(msgs)
    need = total - message_tokens(msgs[1], len) - 1  # dropping the first unit is not enough
    r = trim_to_budget(msgs, need, count=len, policy="sliding")
    assert [u.at for u in r.dropped] == [(1,), (2, 3)]
    assert [u.shape for u in r.dropped] == ["single", "complete"]
    assert r.dropped[1].messages == (msgs[2], msgs[3])
    assert r.dropped[1].tokens == message_tokens(msgs[2], len) + message_tokens(msgs[3], len)
    assert r.tokens_after == total - r.dropped_tokens == cost(r.messages)
    assert [m.content for m in r.messages] == [
        "persona",
        "old answer",
        "recent question",
        "recent answer",
        "VOLATILE",
        "委派",
    ]
    assert r.fits


@pytest.mark.parametrize("policy", ["sliding", "chunked"])
def test_never_drops_head_directive_or_current_message_even_when_it_cannot_fit(policy: TrimPolicy) -> None:
    msgs = [*conversation()[:-1], user("now")]
    r = trim_to_budget(msgs, 0, count=len, policy=policy)
    assert [m.content for m in r.messages] == ["persona", "VOLATILE", "now"]
    assert not r.fits
    assert len(r.dropped) == 5
    msgs = conversation()
    r = trim_to_budget(msgs, 0, count=len, policy=policy)
    assert [m.content for m in r.messages] == ["persona", "VOLATILE", "委派"]


def test_trims_an_assembled_prompt_by_its_layout() -> None:
    registry = PromptRegistry()
    registry.register("skills", "knowledge", lambda view: "skills " * 10)
    registry.register("memories", "turn-context", lambda view: "memories " * 10)
    prompt = registry.assemble(
        [system("persona"), user("q1"), assistant("a1"), user("q2"), assistant("a2"), user("now")]
    )
    r = trim_to_budget(prompt, cost(prompt.messages) - 1, count=len, policy="sliding")
    assert [u.at for u in r.dropped] == [(2,)]
    assert [e.slot for e in r.layout] == [
        "persona",
        "knowledge",
        "history",
        "history",
        "history",
        "turn-context",
        "current",
    ]
    assert r.to_prompt().messages == r.messages


def test_budget_must_be_a_non_negative_int() -> None:
    with pytest.raises(ValueError, match="budget"):
        trim_to_budget([user("x")], -1)
    with pytest.raises(ValueError, match="budget"):
        trim_to_budget([user("x")], 1.5)  # type: ignore[arg-type]


def test_rejects_what_is_not_a_message() -> None:
    with pytest.raises(TypeError, match=r"trim_to_budget: messages\[0\]"):
        trim_to_budget([{"role": "user"}], 10)  # type: ignore[list-item]


def test_default_count_is_the_estimate_and_tokenizer_is_accepted() -> None:
    class Chars:
        def encode(self, text: str) -> list[str]:
            return list(text)

    msgs = conversation()
    assert trim_to_budget(msgs, 10**6, tokenizer=Chars()).tokens_before == cost(msgs)
    assert trim_to_budget(msgs, 10**6).tokens_before < cost(msgs)


ROLES = st.sampled_from(["user", "assistant", "assistant-call", "tool", "system"])


@given(st.lists(ROLES, max_size=12), st.integers(0, 300), st.sampled_from(["sliding", "chunked"]))
@settings(max_examples=200, deadline=None)
def test_trim_properties(roles: list[str], budget: int, policy: TrimPolicy) -> None:
    msgs: list[Message] = [system("persona")]
    for i, role in enumerate(roles):
        if role == "assistant-call":
            msgs.append(assistant(None, f"c{i}"))
        elif role == "tool":
            msgs.append(tool(f"c{i - 1}", "result " * (i % 3)))
        else:
            msgs.append(Message(role=role, content="text " * i))
    msgs.append(user("now"))
    snapshot = copy.deepcopy(msgs)
    r = trim_to_budget(msgs, budget, count=len, policy=policy)
    assert msgs == snapshot
    kept_ids = {id(m) for m in r.messages}
    dropped_ids = {id(m) for u in r.dropped for m in u.messages}
    assert kept_ids.isdisjoint(dropped_ids) and kept_ids | dropped_ids == {id(m) for m in msgs}
    assert [id(m) for m in msgs if id(m) in kept_ids] == [id(m) for m in r.messages]  # order kept
    assert r.messages[0].content == "persona" and r.messages[-1].content == "now"
    layout = layout_of(msgs)
    assert all(layout[i].slot == "history" for u in r.dropped for i in u.at)  # only history is dropped
    assert r.tokens_after == cost(r.messages) and r.tokens_before == cost(msgs)
    assert r.fits or all(e.slot != "history" for e in r.layout)
    if r.dropped and policy == "sliding":  # it stopped as soon as it fit
        assert r.tokens_after + r.dropped[-1].tokens > budget
    # a tool call goes together with its results: no kept tool result answers a dropped call
    dropped_calls = {c.id for u in r.dropped for m in u.messages for c in m.tool_calls or ()}
    assert not any(m.role == "tool" and m.tool_call_id in dropped_calls for m in r.messages)


@pytest.mark.parametrize("policy", ["sliding", "chunked"])
def test_a_directive_block_inside_the_history_is_never_dropped_but_an_archived_notice_is(
    policy: TrimPolicy,
) -> None:
    idle = Message(role="system", content="空闲提示", metadata={"injector": "idle-prompt"})
    archived = Message(role="notice", content="后台任务完成", kind="host-notice")
    msgs = [system("persona"), user("q1"), idle, archived, assistant("a1"), user("now")]
    r = trim_to_budget(msgs, 0, count=len, policy=policy)
    assert [m.content for m in r.messages] == ["persona", "空闲提示", "now"]
    assert [u.at for u in r.dropped] == [(1,), (3,), (4,)]


# ------------------------------------------------------------------------------------------------
# the chunked policy and compaction


def growing(n: int, size: int = 6) -> list[list[Message]]:
    """The prompts of ``n`` turns: persona, the history so far, the volatile block, the current message."""
    prompts = []
    history: list[Message] = []
    for t in range(n):
        current = user(f"q{t} " + "w " * size)
        prompts.append([system("persona"), *history, system(f"time {t:03d}", VOLATILE_INJECTOR), current])
        history += [current, assistant(f"a{t} " + "w " * size)]
    return prompts


def test_chunked_is_the_default_and_a_cut_goes_down_to_the_low_water_mark() -> None:
    budget, low_water = 200, 0.5
    before = None
    for msgs in growing(20):
        default = trim_to_budget(msgs, budget, count=len, low_water=low_water)
        assert default == trim_to_budget(msgs, budget, count=len, low_water=low_water, policy="chunked")
        assert default.policy == "chunked" and default.fits
        if before is not None and default.chunks_dropped > before.chunks_dropped:
            grown = cost(msgs) - before.tokens_before  # what this turn added
            assert default.tokens_after <= low_water * budget + grown
            assert default.dropped_tokens - before.dropped_tokens >= (1 - low_water) * budget
        before = default
    assert before is not None and before.chunks_dropped >= 2  # the 20 turns overflowed more than once


def test_over_a_large_head_the_growing_chunk_goes_unit_by_unit_and_the_newest_units_stay() -> None:
    # the head (67 tokens) is over low_water * budget (50): dropping whole chunks cannot reach the mark,
    # and the chunk still being filled (4 units of 12, under the step of 50) is not closed, so it loses
    # only as many of its oldest units as the budget needs
    msgs = [system("persona " * 8), *[user(f"u{i} " + "w " * 3) for i in range(4)], user("now")]
    assert [message_tokens(m, len) for m in msgs] == [67, 12, 12, 12, 12, 6]
    r = trim_to_budget(msgs, 100, count=len, low_water=0.5)
    assert r.fits and r.tokens_after == 97
    assert [u.at for u in r.dropped] == [(1,), (2,)]
    assert r.chunks_dropped == 0  # no whole chunk went: the growing one was cut, not dropped
    assert [m.content for m in r.messages[1:3]] == ["u2 w w w ", "u3 w w w "]


def test_each_chunk_is_summarized_once_at_the_cut_that_drops_it() -> None:
    calls: list[tuple[Message, ...]] = []

    def summarize(chunk: tuple[Message, ...], previous: str | None) -> str:
        calls.append(chunk)
        return summarize_by_first_words(chunk, previous)

    compaction = Compaction(summarize)
    results = [trim_to_budget(m, 400, count=len, compaction=compaction) for m in growing(60)]
    assert len(calls) == results[-1].chunks_dropped >= 3
    assert len(compaction.cache) == len(calls)
    for a, b in itertools.pairwise(results):  # the summary message changes exactly at the cuts
        summary_a = a.messages[a.summary_at] if a.summary_at is not None else None
        summary_b = b.messages[b.summary_at] if b.summary_at is not None else None
        assert (summary_a == summary_b) == (a.chunks_dropped == b.chunks_dropped)


def test_sliding_drops_one_more_unit_every_turn_chunked_only_at_cuts() -> None:
    prompts = growing(30)
    sliding = [trim_to_budget(m, 200, count=len, policy="sliding") for m in prompts]
    chunked = [trim_to_budget(m, 200, count=len, low_water=0.5) for m in prompts]

    def changes(rs: list[TrimResult]) -> int:
        return sum(len(b.dropped) != len(a.dropped) for a, b in itertools.pairwise(rs))

    first = next(t for t, r in enumerate(sliding) if r.dropped)
    assert changes(sliding) == len(prompts) - first  # every turn from the one that reached the budget
    history_tokens = chunked[-1].tokens_before - cost([prompts[-1][0], *prompts[-1][-2:]])
    assert 1 <= changes(chunked) <= history_tokens / 100  # at most one cut per step of 100 tokens
    assert changes(chunked) < changes(sliding) / 2


def test_cuts_fall_on_chunk_boundaries_fixed_from_the_start_of_the_history() -> None:
    prompts = growing(40)
    longest = prompts[-1][1:-2]  # every message of it is one unit
    boundaries, filled = {0}, 0
    for n, m in enumerate(longest, start=1):  # chunks of (1 - 0.5) * 150 = 75 tokens, counted here
        filled += message_tokens(m, len)
        if filled >= 75:
            boundaries.add(n)
            filled = 0
    cuts = set()
    for msgs in prompts:
        for size in (0, 4, 8):  # whatever follows the history: the cut falls on the same boundaries
            r = trim_to_budget([*msgs[:-1], user("now " * size)], 150, count=len, low_water=0.5)
            assert len(r.dropped) in boundaries and r.fits
            if len(r.messages) > 3:
                assert r.chunk_starts[0] == 1  # the first kept message starts a chunk
            cuts.add(len(r.dropped))
    assert len(cuts) >= 5


def summarize_by_first_words(chunk: tuple[Message, ...], previous: str | None) -> str:
    """A deterministic rolling summary of bounded size: the last chunk, and the start of the previous."""
    latest = f"{len(chunk)} messages from {(chunk[0].content or '')[:6]!r}"
    return latest if previous is None else f"{latest}; before: {previous[:20]}"


def test_compaction_puts_one_summary_at_the_end_of_the_head() -> None:
    registry = PromptRegistry()
    registry.register("skills", "knowledge", lambda view: "skills " * 4)
    registry.register("memories", "turn-context", lambda view: "memories " * 4)
    prompt = registry.assemble(growing(12)[-1])
    calls: list[tuple[Message, ...]] = []

    def summarize(chunk: tuple[Message, ...], previous: str | None) -> str:
        calls.append(chunk)
        return summarize_by_first_words(chunk, previous)

    r = trim_to_budget(prompt, 400, count=len, compaction=summarize)
    # one chunk: the twelve messages dropped, summarized in one call
    assert r.chunks_dropped == len(calls) == 1 and len(calls[0]) == len(r.dropped) == 12
    assert r.summary_at == 2 and [e.slot for e in r.layout[:4]] == [
        "persona",
        "knowledge",
        "context",
        "history",
    ]
    assert r.layout[2].key == SUMMARY_INJECTOR and r.messages[2].injector == SUMMARY_INJECTOR
    folded = None
    for chunk in calls:
        folded = summarize_by_first_words(chunk, folded)
    assert r.messages[2].content == f"{DEFAULT_SUMMARY_HEADER}\n\n{folded}"
    dropped = [m for u in r.dropped for m in u.messages]
    assert sorted(map(id, dropped)) == sorted(id(m) for c in calls for m in c)  # every dropped message once
    assert r.tokens_after == cost(r.messages) <= 400
    assert r.cut_points == (2, *r.chunk_starts) and r.chunk_starts[0] == 3
    assert r.to_prompt().messages == r.messages


def test_a_summarizer_must_return_text_and_compaction_needs_chunked() -> None:
    msgs = growing(12)[-1]
    with pytest.raises(TypeError, match="summarize returned int"):
        trim_to_budget(msgs, 100, count=len, compaction=lambda chunk, previous: 3)  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError, match="compaction needs policy='chunked'"):
        trim_to_budget(msgs, 100, policy="sliding", compaction=summarize_by_first_words)
    with pytest.raises(TypeError, match="compaction must be"):
        trim_to_budget(msgs, 100, compaction="summary")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="summarize must be a callable"):
        Compaction("summary")  # type: ignore[arg-type]


@pytest.mark.parametrize("low_water", [0, 1, 1.5, -0.1, float("nan"), True, "0.5"])
def test_low_water_must_be_strictly_between_0_and_1(low_water: object) -> None:
    with pytest.raises(ValueError, match="low_water"):
        trim_to_budget([user("x")], 10, low_water=low_water)  # type: ignore[arg-type]


def test_policy_must_be_known() -> None:
    with pytest.raises(ValueError, match="policy must be one of"):
        trim_to_budget([user("x")], 10, policy="fifo")  # type: ignore[arg-type]


def as_bytes(messages: tuple[Message, ...] | list[Message]) -> bytes:
    return b"".join(json.dumps(to_openai_dict(m), ensure_ascii=False).encode() for m in messages)


TURN = st.tuples(
    st.integers(0, 30),  # words of the current message
    st.lists(st.integers(0, 60), max_size=3),  # the turn's tool calls: words of each result
    st.integers(0, 30),  # words of the answer
    st.booleans(),  # an idle prompt (a directive block, never trimmed) is archived after the answer
)


@pytest.mark.slow
@given(
    st.lists(TURN, min_size=6, max_size=24),
    st.integers(150, 900),
    st.floats(0.1, 0.9),
    st.booleans(),
)
@settings(max_examples=100, deadline=None)
def test_between_overflows_each_prompt_extends_the_previous_one_byte_for_byte(
    turns: list[tuple[int, list[int], int, bool]], budget: int, low_water: float, compact: bool
) -> None:
    calls: list[tuple[Message, ...]] = []

    def summarize(chunk: tuple[Message, ...], previous: str | None) -> str:
        calls.append(chunk)
        return summarize_by_first_words(chunk, previous)

    compaction = Compaction(summarize) if compact else None
    step = math.ceil((1 - low_water) * budget)
    head = [system("persona " * 5), system("knowledge " * 8)]
    history: list[Message] = []
    before: TrimResult | None = None
    before_regular = False
    msgs: list[Message] = []
    for t, (question, tools, answer, idle) in enumerate(turns):
        current = user(f"q{t} " + "w " * question)
        tail = [system(f"time {t:04d}", VOLATILE_INJECTOR), current]
        msgs = [*head, *history, *tail]
        calls_before = len(calls)
        r = trim_to_budget(msgs, budget, count=len, low_water=low_water, compaction=compaction)
        assert r.messages[: len(head)] == tuple(head) and r.messages[-2:] == tuple(tail)
        dropped = {id(m) for u in r.dropped for m in u.messages}
        droppable_left = any(
            e.slot == "history" and m.injector != "idle-prompt"
            for m, e in zip(r.messages, r.layout, strict=True)
        )
        assert r.fits or not droppable_left
        # The promise holds when what is never dropped (head, directive blocks, summary, this turn's
        # blocks) fits under the low-water mark; above it the chunk being filled is trimmed unit by unit.
        never_dropped = [m for m in r.messages if m.injector is not None or m in head or m is current]
        regular = cost(never_dropped) <= low_water * budget
        if before is not None:
            # the previous turn's cut applied to this turn's prompt: does it still fit?
            then_dropped = {id(m) for u in before.dropped for m in u.messages}
            summary = [] if before.summary_at is None else [before.messages[before.summary_at]]
            overflow = cost([m for m in msgs if id(m) not in then_dropped]) + cost(summary) > budget
            assert then_dropped <= dropped  # nothing dropped ever comes back
            previous_stable = before.messages[: len(before.messages) - 2]
            if not overflow and regular and before_regular:
                assert as_bytes(r.messages).startswith(as_bytes(previous_stable))
                assert r.chunks_dropped == before.chunks_dropped and dropped == then_dropped
                assert len(calls) == calls_before  # the summary is recomputed only at a cut
                event("prefix-extension checked")
            elif regular and before_regular:  # a cut: in one large step, unless the history ran out
                event("cut checked")
                assert (
                    r.chunks_dropped > before.chunks_dropped
                    and r.dropped_tokens - before.dropped_tokens >= step
                ) or not droppable_left
        before, before_regular = r, regular
        history.append(current)
        for k, words in enumerate(tools):
            history += [assistant(None, f"c{t}.{k}"), tool(f"c{t}.{k}", "r " * words)]
        history.append(assistant(f"a{t} " + "w " * answer))
        if idle:
            history.append(system("空闲提示", "idle-prompt"))
    if compaction is not None:
        restarted = trim_to_budget(msgs, budget, count=len, low_water=low_water, compaction=summarize)
        assert restarted == before  # a fresh process with an empty cache builds the same prompt
