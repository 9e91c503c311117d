"""promptkit.providers.deepseek: normalize_system_placement (pipeline seed §9) and deepseek_request."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings, strategies as st

from promptkit.chat.egress import prepare_llm_messages
from promptkit.chat.message import DIRECTIVE_KINDS, Message, ToolCall, is_directive_block
from promptkit.providers import (
    RequestBuildError,
    deepseek_request,
    normalize_system_placement,
    openai_request,
)

from .sdk import validate_openai
from .strategies import PNG, Prompt, any_message, conversations

SETTINGS = settings(max_examples=150, deadline=None)


def _head_length(messages: list[Message]) -> int:
    n = 0
    for m in messages:
        if m.role != "system":
            break
        n += 1
    return n


# ---------------------------------------------------------------- normalize_system_placement: examples


def test_later_system_becomes_user_with_marker_and_keeps_fields() -> None:
    later = Message(
        role="system", content="检索到的记忆", kind="memory", name="mem", metadata={"injector": "memory"}
    )
    msgs = [Message(role="system", content="persona"), Message(role="user", content="hi"), later]
    out = normalize_system_placement(msgs)
    assert out[2].role == "user"
    assert out[2].content == "[系统提示]\n检索到的记忆"
    assert (out[2].kind, out[2].name, out[2].metadata) == ("memory", "mem", {"injector": "memory"})
    assert out[0] is msgs[0] and out[1] is msgs[1]


def test_content_already_starting_with_bracket_is_not_prefixed() -> None:
    msgs = [Message(role="user", content="q"), Message(role="system", content="[系统通知] 服务重启")]
    out = normalize_system_placement(msgs)
    assert (out[1].role, out[1].content) == ("user", "[系统通知] 服务重启")


@pytest.mark.parametrize("content", [None, "", "   ", "\n\t"])
def test_blank_later_system_stays_system(content: str | None) -> None:
    msgs = [Message(role="user", content="q"), Message(role="system", content=content)]
    out = normalize_system_placement(msgs)
    assert out[1] is msgs[1]


@pytest.mark.parametrize("kind", DIRECTIVE_KINDS)
def test_only_the_request_time_injector_exempts_a_directive_block(kind: str) -> None:
    # 002: "请求期消息的 metadata.injector 属于它时……DeepSeek 提供者不把它改成 user".
    by_injector = Message(role="system", content="开个话题", metadata={"injector": kind})
    msgs = [Message(role="user", content="q"), by_injector]
    out = normalize_system_placement(msgs)
    assert out[1] is by_injector


@pytest.mark.parametrize("kind", DIRECTIVE_KINDS)
def test_an_archived_directive_kind_in_the_history_becomes_user(kind: str) -> None:
    # An archived host notice / delegation kept in the history has the kind but no injector: it is
    # history, and kept as system it would be hoisted in front of the whole history.
    archived = Message(role="notice", content="任务 t1 完成", kind=kind)
    msgs = prepare_llm_messages([Message(role="user", content="q"), archived, Message(role="user", content="next")])
    out = normalize_system_placement(msgs)
    assert out[1].role == "user"
    assert out[1].content == msgs[1].content  # already says what it is: "[宿主通知] ..." / "[系统通知] ..."
    assert out[1].kind == kind


def test_an_archived_notice_does_not_move_in_front_of_the_history_in_the_body() -> None:
    history = [
        Message(role="system", content="persona"),
        Message(role="user", content="[A(1)]: 跑个任务"),
        Message(role="assistant", content="好"),
        Message(role="notice", kind="host-notice", content="任务 t1 完成"),
        Message(role="user", content="[A(1)]: 结果呢"),
    ]
    body = deepseek_request(history, model="deepseek-chat")
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "user", "user"]
    assert body["messages"][3]["content"] == "[宿主通知] 任务 t1 完成"


def test_leading_run_untouched_even_when_it_is_the_whole_request() -> None:
    msgs = [Message(role="system", content="a"), Message(role="system", content="b")]
    out = normalize_system_placement(msgs)
    assert all(o is m for o, m in zip(out, msgs, strict=True))


def test_system_after_assistant_only_conversation_start_is_converted() -> None:
    msgs = [Message(role="assistant", content="hello"), Message(role="system", content="hint")]
    assert normalize_system_placement(msgs)[1].role == "user"


def test_raw_custom_role_counts_as_system() -> None:
    # a raw notice ahead of the persona is part of the leading system run: the persona stays system
    msgs = [
        Message(role="notice", content="n"),
        Message(role="system", content="persona"),
        Message(role="user", content="q"),
    ]
    out = normalize_system_placement(msgs)
    assert all(o is m for o, m in zip(out, msgs, strict=True))


def test_input_list_and_messages_are_not_mutated() -> None:
    meta = {"injector": "memory", "deep": {"x": [1]}}
    msgs = [Message(role="user", content="q"), Message(role="system", content="m", metadata=meta)]
    before = copy.deepcopy(msgs)
    out = normalize_system_placement(msgs)
    assert msgs == before and out is not msgs
    assert msgs[1].role == "system"


# ---------------------------------------------------------------- normalize_system_placement: properties


@pytest.mark.slow
@SETTINGS
@given(st.lists(any_message(), max_size=10))
def test_normalization_rules_hold_for_any_messages(msgs: list[Message]) -> None:
    before = list(msgs)
    out = normalize_system_placement(msgs)
    assert msgs == before  # never mutates
    assert len(out) == len(msgs)
    head = _head_length(prepare_llm_messages(msgs))
    for i, (o, m) in enumerate(zip(out, msgs, strict=True)):
        if i < head:
            assert o is m  # leading system run untouched
        if is_directive_block(m):
            assert o is m  # a request-time directive block is never changed
        if o is not m:  # the only change: a later non-blank system message moved to the user role
            assert o.role == "user"
            assert m.content is not None and m.content.strip()
            expected = m.content if m.content.startswith("[") else "[系统提示]\n" + m.content
            assert o.content == expected
            assert (o.kind, o.name, o.metadata, o.images) == (m.kind, m.name, m.metadata, m.images)


@pytest.mark.slow
@SETTINGS
@given(st.lists(any_message(), max_size=10))
def test_normalization_is_idempotent(msgs: list[Message]) -> None:
    once = normalize_system_placement(prepare_llm_messages(msgs))
    twice = normalize_system_placement(once)
    assert all(a is b for a, b in zip(once, twice, strict=True))


@pytest.mark.slow
@SETTINGS
@given(st.lists(any_message(), max_size=10))
def test_no_system_after_history_except_blank_and_directive(msgs: list[Message]) -> None:
    out = normalize_system_placement(prepare_llm_messages(msgs))
    seen_other = False
    for m in out:
        if m.role != "system":
            seen_other = True
        elif seen_other:
            assert (m.content is None or not m.content.strip()) or is_directive_block(m)


# ---------------------------------------------------------------- deepseek_request


def test_deepseek_body_is_openai_shape_after_normalization() -> None:
    msgs = [
        Message(role="system", content="persona"),
        Message(role="user", content="hi", name="u_1"),
        Message(role="assistant", content="hello"),
        Message(role="system", content="记忆片段", metadata={"injector": "memory"}),
        Message(role="notice", content="服务重启"),
        Message(
            role="notice",
            kind="cross-session-delegation",
            content="去查一下天气",
            metadata={"injector": "cross-session-delegation"},
        ),
        Message(role="user", content="今天呢"),
    ]
    body = deepseek_request(msgs, model="deepseek-chat", temperature=0.3, max_tokens=512, stop="END")
    assert body["messages"] == [
        {"role": "system", "content": "persona"},
        {"role": "user", "content": "hi", "name": "u_1"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "[系统提示]\n记忆片段"},
        {"role": "user", "content": "[系统通知] 服务重启"},
        {"role": "system", "content": "[跨会话委派] 去查一下天气"},
        {"role": "user", "content": "今天呢"},
    ]
    assert (body["model"], body["temperature"], body["max_tokens"], body["stop"]) == (
        "deepseek-chat",
        0.3,
        512,
        ["END"],
    )
    assert "max_completion_tokens" not in body
    validate_openai(body)


def _tool_loop() -> list[Message]:
    return [
        Message(role="user", content="查天气"),
        Message(
            role="assistant",
            content=None,
            reasoning_content="需要调用工具",
            tool_calls=(ToolCall(id="c1", name="weather", arguments='{"city": "北京"}'),),
        ),
        Message(role="tool", content="晴", tool_call_id="c1"),
        Message(role="assistant", content="晴天", reasoning_content="整理答案"),
    ]


def test_reasoning_content_is_not_sent_by_default() -> None:
    body = deepseek_request(_tool_loop(), model="deepseek-reasoner")
    assert all("reasoning_content" not in m for m in body["messages"])


def test_reasoning_content_for_tool_call_turns_only() -> None:
    body = deepseek_request(_tool_loop(), model="deepseek-reasoner", reasoning_content="tool-calls")
    assert body["messages"][1]["reasoning_content"] == "需要调用工具"
    assert "reasoning_content" not in body["messages"][3]
    everything = deepseek_request(_tool_loop(), model="deepseek-reasoner", reasoning_content="all")
    assert everything["messages"][3]["reasoning_content"] == "整理答案"
    # apart from reasoning_content, the body is a valid chat-completions body
    for m in everything["messages"]:
        m.pop("reasoning_content", None)
    validate_openai(everything)


def test_unknown_reasoning_mode_is_an_error() -> None:
    with pytest.raises(RequestBuildError, match="reasoning_content"):
        deepseek_request(_tool_loop(), model="deepseek-chat", reasoning_content="some")  # type: ignore[arg-type]


def test_deepseek_images_follow_the_openai_shape() -> None:
    body = deepseek_request([Message(role="user", content="看", images=(PNG,))], model="deepseek-chat")
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "看"},
        {"type": "image_url", "image_url": {"url": PNG}},
    ]


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(conversations())
def test_deepseek_bodies_validate_and_keep_the_leading_head(conv: tuple[list[Message], list]) -> None:
    msgs, layout = conv
    before = copy.deepcopy(msgs)
    body = deepseek_request(Prompt(msgs, layout), model="deepseek-chat", max_tokens=100)
    assert msgs == before
    validate_openai(body)
    plain = openai_request(msgs, model="deepseek-chat")
    head = _head_length(prepare_llm_messages(msgs))
    assert body["messages"][:head] == plain["messages"][:head]
    prepared = prepare_llm_messages(msgs)
    assert len(prepared) == len(body["messages"])
    seen_other = False
    for m, source in zip(body["messages"], prepared, strict=True):
        seen_other = seen_other or m["role"] != "system"
        if seen_other and m["role"] == "system":  # only blank or directive system messages after the head
            assert not (m["content"] or "").strip() or is_directive_block(source)
