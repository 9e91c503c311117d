"""Tests for promptkit/assembly/trim.py: dropping the oldest history units to fit a token budget."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings, strategies as st

from promptkit.assembly import VOLATILE_INJECTOR, PromptRegistry, layout_of, trim_to_budget
from promptkit.assembly.tokens import message_tokens
from promptkit.schema.message import Message, ToolCall


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
    r = trim_to_budget(msgs, need, count=len)
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


def test_never_drops_head_directive_or_current_message_even_when_it_cannot_fit() -> None:
    msgs = [*conversation()[:-1], user("now")]
    r = trim_to_budget(msgs, 0, count=len)
    assert [m.content for m in r.messages] == ["persona", "VOLATILE", "now"]
    assert not r.fits
    assert len(r.dropped) == 5
    msgs = conversation()
    r = trim_to_budget(msgs, 0, count=len)
    assert [m.content for m in r.messages] == ["persona", "VOLATILE", "委派"]


def test_trims_an_assembled_prompt_by_its_layout() -> None:
    registry = PromptRegistry()
    registry.register("skills", "knowledge", lambda view: "skills " * 10)
    registry.register("memories", "turn-context", lambda view: "memories " * 10)
    prompt = registry.assemble(
        [system("persona"), user("q1"), assistant("a1"), user("q2"), assistant("a2"), user("now")]
    )
    r = trim_to_budget(prompt, cost(prompt.messages) - 1, count=len)
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


@given(st.lists(ROLES, max_size=12), st.integers(0, 300))
@settings(max_examples=200, deadline=None)
def test_trim_properties(roles: list[str], budget: int) -> None:
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
    r = trim_to_budget(msgs, budget, count=len)
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
    if r.dropped:  # it stopped as soon as it fit
        assert r.tokens_after + r.dropped[-1].tokens > budget
    # a tool call goes together with its results: no kept tool result answers a dropped call
    dropped_calls = {c.id for u in r.dropped for m in u.messages for c in m.tool_calls or ()}
    assert not any(m.role == "tool" and m.tool_call_id in dropped_calls for m in r.messages)


def test_a_directive_block_inside_the_history_is_never_dropped_but_an_archived_notice_is() -> None:
    idle = Message(role="system", content="空闲提示", metadata={"injector": "idle-prompt"})
    archived = Message(role="notice", content="后台任务完成", kind="host-notice")
    msgs = [system("persona"), user("q1"), idle, archived, assistant("a1"), user("now")]
    r = trim_to_budget(msgs, 0, count=len)
    assert [m.content for m in r.messages] == ["persona", "空闲提示", "now"]
    assert [u.at for u in r.dropped] == [(1,), (3,), (4,)]
