"""promptkit.providers.anthropic: Messages bodies and cache breakpoints, checked against anthropic's types."""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError

from promptkit.assembly import layout_of
from promptkit.chat.message import Message, ToolCall
from promptkit.providers import (
    ANTHROPIC_DEFAULT_MAX_TOKENS,
    ContentNotSentWarning,
    MediaFormatError,
    RequestBuildError,
    ToolArgumentsError,
    ToolDefinitionError,
    anthropic_request,
)

from .sdk import validate_anthropic
from .strategies import HTTP_IMAGE, JPEG, PNG, WAV, Entry, Prompt, conversations

EPHEMERAL = {"type": "ephemeral"}
TOOL = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "天气",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every cacheable unit in prompt order: tools, system blocks, message blocks."""
    return [
        *body.get("tools", []),
        *body.get("system", []),
        *(b for m in body["messages"] for b in m["content"]),
    ]


def _breakpoints(body: dict[str, Any]) -> list[int]:
    return [i for i, b in enumerate(_blocks(body)) if "cache_control" in b]


def _check_invariants(body: dict[str, Any]) -> None:
    validate_anthropic(body)
    roles = [m["role"] for m in body["messages"]]
    assert "system" not in roles
    assert all(a != b for a, b in itertools.pairwise(roles)), roles  # alternation
    assert len(_breakpoints(body)) <= 4
    for b in _blocks(body):
        if b.get("type") == "text":
            assert b["text"].strip()
    for m in body["messages"]:
        types = [b["type"] for b in m["content"]]
        assert m["content"], "no empty turn"
        k = types.count("tool_result")
        assert types[:k] == ["tool_result"] * k  # tool results first in their user turn


# ---------------------------------------------------------------- conversion


def test_head_becomes_system_and_later_system_user_text() -> None:
    msgs = [
        Message(role="system", content="persona"),
        Message(role="system", content="  "),
        Message(role="notice", content="公告"),
        Message(role="user", content="hi", name="u_1"),
        Message(role="assistant", content="hello", reasoning_content="secret"),
        Message(role="system", content="检索记忆"),
        Message(role="notice", kind="cross-session-delegation", content="去查天气"),
        Message(role="user", content="今天呢"),
    ]
    body = anthropic_request(msgs, model="claude-sonnet-4-5", cache_breakpoints=False)
    assert body["system"] == [
        {"type": "text", "text": "persona"},
        {"type": "text", "text": "[系统通知] 公告"},
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "[系统提示]\n检索记忆"},
                {"type": "text", "text": "[跨会话委派] 去查天气"},
                {"type": "text", "text": "今天呢"},
            ],
        },
    ]
    assert body["max_tokens"] == ANTHROPIC_DEFAULT_MAX_TOKENS
    assert "u_1" not in json.dumps(body) and "secret" not in json.dumps(body)
    _check_invariants(body)


def test_tool_round_trip_results_merged_into_one_user_turn_with_images() -> None:
    msgs = [
        Message(role="user", content="截图并查天气"),
        Message(
            role="assistant",
            content="好的",
            tool_calls=(
                ToolCall(id="c1", name="shot", arguments=""),
                ToolCall(id="c2", name="weather", arguments='{"city": "北京"}'),
            ),
        ),
        Message(role="tool", content="截图完成", tool_call_id="c1", images=(PNG,)),
        Message(role="tool", content="", tool_call_id="c2"),
        Message(role="assistant", content="晴"),
    ]
    body = anthropic_request(msgs, model="m", tools=[TOOL], tool_choice="required", cache_breakpoints=False)
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "好的"},
        {"type": "tool_use", "id": "c1", "name": "shot", "input": {}},
        {"type": "tool_use", "id": "c2", "name": "weather", "input": {"city": "北京"}},
    ]
    results = body["messages"][2]
    assert results["role"] == "user"
    assert results["content"][:2] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "截图完成"},
        {"type": "tool_result", "tool_use_id": "c2"},
    ]
    assert results["content"][2]["type"] == "text" and "c1" in results["content"][2]["text"]
    assert results["content"][3] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
    }
    assert body["tools"] == [
        {"name": "weather", "description": "天气", "input_schema": TOOL["function"]["parameters"]}  # type: ignore[index]
    ]
    assert body["tool_choice"] == {"type": "any"}
    _check_invariants(body)


def test_tool_results_come_first_in_a_merged_user_turn() -> None:
    msgs = [
        Message(role="user", content="q"),
        Message(role="assistant", tool_calls=(ToolCall(id="c1", name="f", arguments="{}"),)),
        Message(role="system", content="插进来的提示"),
        Message(role="tool", content="r", tool_call_id="c1"),
    ]
    body = anthropic_request(msgs, model="m", cache_breakpoints=False)
    assert [b["type"] for b in body["messages"][2]["content"]] == ["tool_result", "text"]


@pytest.mark.parametrize(
    ("url", "source"),
    [
        (PNG, {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}),
        (JPEG, {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQSkZJRg=="}),
        ("data:image/jpg;base64,/9j/", {"type": "base64", "media_type": "image/jpeg", "data": "/9j/"}),
        (HTTP_IMAGE, {"type": "url", "url": HTTP_IMAGE}),
    ],
)
def test_image_sources(url: str, source: dict[str, str]) -> None:
    body = anthropic_request([Message(role="user", content="看", images=(url,))], model="m")
    assert body["messages"][0]["content"][1]["source"] == source
    _check_invariants(body)


@pytest.mark.parametrize(
    "url",
    ["data:image/bmp;base64,Qk0=", "data:image/png,raw", "file:///tmp/a.png", "/tmp/a.png", "data:/x/a.png"],
)
def test_unsupported_image_references_are_errors(url: str) -> None:
    with pytest.raises(MediaFormatError, match=r"messages\[1\]\.images\[0\]"):
        anthropic_request(
            [Message(role="assistant", content="a"), Message(role="user", content="看", images=(url,))],
            model="m",
        )


def test_images_and_audio_that_cannot_be_carried_warn() -> None:
    msgs = [
        Message(role="system", content="p", images=(PNG,)),
        Message(role="user", content="q", audios=(WAV,)),
        Message(role="assistant", content="a", images=(PNG,)),
    ]
    with pytest.warns(ContentNotSentWarning) as record:
        body = anthropic_request(msgs, model="m")
    texts = [str(r.message) for r in record]
    assert len(texts) == 3
    assert "stable head" in texts[0] and "audio" in texts[1] and "messages[2]" in texts[2]
    assert all(b["type"] == "text" for b in _blocks(body))


def test_malformed_tool_arguments_are_errors() -> None:
    msgs = [
        Message(role="user", content="q"),
        Message(role="assistant", tool_calls=(ToolCall(id="x1", name="f", arguments="{bad"),)),
    ]
    with pytest.raises(ToolArgumentsError, match=r"messages\[1\] tool call 'x1'"):
        anthropic_request(msgs, model="m")


def test_no_conversation_after_the_head_is_an_error() -> None:
    with pytest.raises(RequestBuildError, match="at least one"):
        anthropic_request(
            [Message(role="system", content="p"), Message(role="user", content="  ")], model="m"
        )


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        ({"type": "function", "function": {"name": "weather"}}, {"type": "tool", "name": "weather"}),
        ({"type": "tool", "name": "weather"}, {"type": "tool", "name": "weather"}),
    ],
)
def test_tool_choice_spellings(choice: Any, expected: dict[str, str]) -> None:
    body = anthropic_request([Message(role="user", content="q")], model="m", tools=[TOOL], tool_choice=choice)
    assert body["tool_choice"] == expected
    validate_anthropic(body)


def test_parameters_and_native_tools() -> None:
    native = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    body = anthropic_request(
        [Message(role="user", content="q")],
        model="m",
        tools=[native, TOOL],
        temperature=0.2,
        top_p=0.9,
        max_tokens=99,
        stop="END",
        stream=True,
        metadata={"user_id": "u1"},
    )
    assert (
        body["temperature"],
        body["top_p"],
        body["max_tokens"],
        body["stop_sequences"],
        body["stream"],
    ) == (0.2, 0.9, 99, ["END"], True)
    assert body["tools"][0] == native and body["metadata"] == {"user_id": "u1"}
    # the SDK's current request types no longer have sampling parameters (newer models reject them):
    # they are the only fields it refuses
    with pytest.raises(ValidationError) as info:
        validate_anthropic(body)
    assert {e["loc"][1] for e in info.value.errors()} == {"temperature", "top_p"}
    validate_anthropic({k: v for k, v in body.items() if k not in ("temperature", "top_p")})
    with pytest.raises(ToolDefinitionError, match=r"tools\[0\]"):
        anthropic_request([Message(role="user", content="q")], model="m", tools=[{"type": "web_search"}])
    with pytest.raises(RequestBuildError, match="'system'"):
        anthropic_request([Message(role="user", content="q")], model="m", system="x")
    with pytest.raises(RequestBuildError, match="tool_choice"):
        anthropic_request([Message(role="user", content="q")], model="m", tool_choice="sometimes")


def test_the_sdk_check_itself_rejects_a_wrong_body() -> None:
    with pytest.raises(ValidationError):
        validate_anthropic(
            {
                "model": "m",
                "max_tokens": 1,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "source": {"type": "base64", "media_type": "image/bmp", "data": "x"},
                            }
                        ],
                    }
                ],
            }
        )
    with pytest.raises(ValidationError):
        validate_anthropic(
            {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        )  # max_tokens is required


# ---------------------------------------------------------------- cache breakpoints


def _turn(n: int) -> list[Message]:
    return [Message(role="user", content=f"问题{n}"), Message(role="assistant", content=f"回答{n}")]


def _assembled(turn_context: str, *, history_turns: int = 2) -> Prompt:
    msgs: list[Message] = [
        Message(role="system", content="persona"),
        Message(role="system", content="knowledge"),
    ]
    layout = [Entry("persona"), Entry("knowledge", "skills")]
    for n in range(history_turns):
        msgs += _turn(n)
        layout += [Entry("history"), Entry("history")]
    msgs += [
        Message(role="system", content=turn_context, metadata={"injector": "memory"}),
        Message(role="user", content="现在"),
    ]
    layout += [Entry("turn-context", "memory"), Entry("current")]
    return Prompt(msgs, layout)


def test_breakpoints_at_end_of_head_and_end_of_history_with_layout() -> None:
    body = anthropic_request(_assembled("记忆A"), model="m")
    assert body["system"][-1]["cache_control"] == EPHEMERAL
    assert "cache_control" not in body["system"][0]
    history_last = body["messages"][3]  # assistant 回答1
    assert history_last["content"][-1] == {"type": "text", "text": "回答1", "cache_control": EPHEMERAL}
    assert all("cache_control" not in b for b in body["messages"][4]["content"])
    assert len(_breakpoints(body)) == 2
    _check_invariants(body)


def test_prefix_up_to_the_history_breakpoint_is_byte_identical_when_turn_material_changes() -> None:
    def cached_prefix(body: dict[str, Any]) -> str:
        blocks = _blocks(body)
        return json.dumps(blocks[: _breakpoints(body)[-1] + 1], ensure_ascii=False)

    a = anthropic_request(_assembled("记忆A"), model="m")
    b = anthropic_request(_assembled("完全不同的记忆B"), model="m")
    assert cached_prefix(a) == cached_prefix(b)
    assert json.dumps(a, ensure_ascii=False) != json.dumps(b, ensure_ascii=False)


def test_next_turn_reads_the_previous_history_breakpoint_prefix() -> None:
    # turn N+1's history is turn N's history plus turn N's exchange: turn N's cached prefix is a prefix of it
    n = anthropic_request(_assembled("x", history_turns=2), model="m")
    n1 = anthropic_request(_assembled("y", history_turns=3), model="m")
    blocks_n = _blocks(n)
    prefix_n = blocks_n[: _breakpoints(n)[-1] + 1]
    strip = [{k: v for k, v in b.items() if k != "cache_control"} for b in prefix_n]
    strip_n1 = [{k: v for k, v in b.items() if k != "cache_control"} for b in _blocks(n1)[: len(prefix_n)]]
    assert strip == strip_n1


def test_without_layout_the_assemblers_reading_of_the_messages_is_used() -> None:
    prompt = _assembled("记忆")
    with_layout = anthropic_request(prompt, model="m")
    without = anthropic_request(list(prompt.messages), model="m")
    assert without == with_layout
    assert _breakpoints(without) == [1, 5]  # end of the head, end of the history (回答1)


@settings(max_examples=60, deadline=None)
@given(conversations())
def test_without_layout_equals_with_the_layout_the_assembler_reads(
    conv: tuple[list[Message], list[Entry]],
) -> None:
    msgs, _ = conv
    try:
        without = anthropic_request(msgs, model="m")
    except RequestBuildError:
        return
    assert without == anthropic_request(Prompt(msgs, layout_of(msgs)), model="m")


def test_delegation_turn_history_holding_old_user_messages() -> None:
    msgs = [
        Message(role="system", content="p"),
        Message(role="user", content="旧问题"),
        Message(role="assistant", content="旧回答"),
        Message(role="system", content="材料", metadata={"injector": "memory"}),
        # this turn's directive block: a request-time message carries its injector (the pipeline contract)
        Message(
            role="notice",
            kind="cross-session-delegation",
            content="委派",
            metadata={"injector": "cross-session-delegation"},
        ),
    ]
    body = anthropic_request(msgs, model="m")
    marked = [b for b in _blocks(body) if "cache_control" in b]
    assert marked == [body["system"][-1], body["messages"][1]["content"][-1]]
    assert marked[1]["text"] == "旧回答"
    assert body["messages"][2]["content"] == [
        {"type": "text", "text": "[系统提示]\n材料"},
        {"type": "text", "text": "[跨会话委派] 委派"},
    ]


def test_tool_loop_end_gets_a_breakpoint_after_head_and_history() -> None:
    msgs = [
        Message(role="system", content="p"),
        *_turn(0),
        Message(role="system", content="材料", metadata={"injector": "memory"}),
        Message(role="user", content="查一下"),
        Message(role="assistant", tool_calls=(ToolCall(id="c", name="f", arguments="{}"),)),
        Message(role="tool", content="结果", tool_call_id="c"),
    ]
    layout = [
        Entry("persona"),
        Entry("history"),
        Entry("history"),
        Entry("turn-context", "memory"),
        Entry("current"),
    ]
    layout += [Entry("tool-loop"), Entry("tool-loop")]
    for body in (anthropic_request(Prompt(msgs, layout), model="m"), anthropic_request(msgs, model="m")):
        marked = [b for b in _blocks(body) if "cache_control" in b]
        assert marked == [
            body["system"][-1],
            body["messages"][1]["content"][-1],
            body["messages"][-1]["content"][-1],
        ]
        assert marked[1]["text"] == "回答0" and marked[2]["type"] == "tool_result"
    tools = [dict(copy.deepcopy(TOOL), cache_control=EPHEMERAL) for _ in range(2)]
    limited = anthropic_request(Prompt(msgs, layout), model="m", tools=tools)
    assert _breakpoints(limited) == [0, 1, 2, 4]  # the caller's two, the head, the history; no loop end


def test_no_history_means_only_the_head_breakpoint() -> None:
    body = anthropic_request(
        [Message(role="system", content="p"), Message(role="user", content="q")], model="m"
    )
    assert _breakpoints(body) == [0]
    bare = anthropic_request([Message(role="user", content="q")], model="m")
    assert _breakpoints(bare) == []


def test_without_system_the_head_breakpoint_goes_on_the_last_tool() -> None:
    tools = [copy.deepcopy(TOOL), copy.deepcopy(TOOL)]
    body = anthropic_request([Message(role="user", content="q")], model="m", tools=tools)
    assert body["tools"][1]["cache_control"] == EPHEMERAL and "cache_control" not in body["tools"][0]
    assert tools == [TOOL, TOOL]  # the caller's tool dicts are untouched


def test_disabled_and_one_hour_ttl() -> None:
    assert _breakpoints(anthropic_request(_assembled("x"), model="m", cache_breakpoints=False)) == []
    body = anthropic_request(_assembled("x"), model="m", ttl="1h")
    assert [_blocks(body)[i]["cache_control"] for i in _breakpoints(body)] == [
        {"type": "ephemeral", "ttl": "1h"}
    ] * 2
    validate_anthropic(body)
    with pytest.raises(RequestBuildError, match="ttl"):
        anthropic_request(_assembled("x"), model="m", ttl="10m")  # type: ignore[arg-type]


@pytest.mark.parametrize(("existing", "automatic"), [(0, 2), (1, 2), (2, 2), (3, 1), (4, 0)])
def test_caller_breakpoints_count_toward_the_limit(existing: int, automatic: int) -> None:
    tools = []
    for i in range(4):
        t = copy.deepcopy(TOOL)
        t["function"]["name"] = f"t{i}"  # type: ignore[index]
        if i < existing:
            t["cache_control"] = EPHEMERAL
        tools.append(t)
    body = anthropic_request(_assembled("x"), model="m", tools=tools)
    assert len(_breakpoints(body)) == existing + automatic
    if automatic == 1:  # the history breakpoint wins
        assert body["messages"][3]["content"][-1]["cache_control"] == EPHEMERAL
    _check_invariants(body)


def test_top_level_cache_control_counts_and_too_many_is_an_error() -> None:
    tools = [dict(copy.deepcopy(TOOL), cache_control=EPHEMERAL) for _ in range(3)]
    for i, t in enumerate(tools):
        t["function"]["name"] = f"t{i}"
    body = anthropic_request(_assembled("x"), model="m", tools=tools, cache_control=EPHEMERAL)
    assert len(_breakpoints(body)) == 3  # plus the top-level one: 4
    with pytest.raises(RequestBuildError, match="5 cache breakpoints are already"):
        anthropic_request(_assembled("x"), model="m", tools=[*tools, *tools[:2]])


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(conversations(), st.integers(0, 4), st.sampled_from(["5m", "1h"]), st.booleans())
def test_every_assembled_conversation_gives_a_valid_body(
    conv: tuple[list[Message], list[Entry]], existing: int, ttl: str, use_layout: bool
) -> None:
    msgs, layout = conv
    before = copy.deepcopy(msgs)
    tools = []
    for i in range(existing + 1):
        t = copy.deepcopy(TOOL)
        t["function"]["name"] = f"t{i}"  # type: ignore[index]
        if i < existing:
            t["cache_control"] = EPHEMERAL
        tools.append(t)
    tools_before = copy.deepcopy(tools)
    try:
        body = anthropic_request(
            Prompt(msgs, layout if use_layout else None), model="m", tools=tools, ttl=ttl
        )  # type: ignore[arg-type]
    except RequestBuildError as exc:  # only when nothing at all follows the head
        assert "at least one" in str(exc)
        return
    assert msgs == before and tools == tools_before
    _check_invariants(body)
    marks = _breakpoints(body)
    assert existing <= len(marks) <= 4
    if not use_layout:
        return
    # exact placement: the history mark ends the blocks of the messages up to the last history message
    head = len(body["tools"]) + len(body.get("system", []))
    wanted = []
    history = [i for i, e in enumerate(layout) if e.slot == "history"]
    if history:
        upto = anthropic_request(msgs[: history[-1] + 1], model="m", tools=tools, cache_breakpoints=False)
        wanted.append(head + sum(len(m["content"]) for m in upto["messages"]) - 1)
    wanted.append(head - 1 if body.get("system") else len(body["tools"]) - 1)
    assert marks == sorted([*range(existing), *wanted[: 4 - existing]])


def test_with_the_real_assembler_turn_material_never_enters_the_cached_prefix() -> None:
    from promptkit.assembly import PromptRegistry

    def request(turn: int) -> dict[str, Any]:
        registry = PromptRegistry()
        registry.register("skills", "knowledge", lambda view: "技能: 搜索")
        registry.register("memories", "turn-context", lambda view: f"第{turn}轮的记忆")
        history = [m for n in range(turn) for m in _turn(n)]
        prompt = registry.assemble(
            [Message(role="system", content="persona"), *history, Message(role="user", content=f"问{turn}")]
        )
        return anthropic_request(prompt, model="m")

    def cached(body: dict[str, Any]) -> list[dict[str, Any]]:
        blocks = _blocks(body)
        return [
            {k: v for k, v in b.items() if k != "cache_control"} for b in blocks[: _breakpoints(body)[-1] + 1]
        ]

    b2, b3 = request(2), request(3)
    assert "第2轮的记忆" not in json.dumps(cached(b2), ensure_ascii=False)
    assert cached(b2) == cached(b3)[: len(cached(b2))]  # turn 3 extends what turn 2 cached
    assert body_texts(b2)[:2] == ["persona", "技能: 搜索"]


def body_texts(body: dict[str, Any]) -> list[str]:
    return [b["text"] for b in _blocks(body) if b.get("type") == "text"]


# ---------------------------------------------------------------- breakpoints and trimming cut points


def _trimmed_turns(turns: int) -> list[Any]:
    """TrimResults of a growing conversation, chunked with a compaction summary at the end of the head."""
    from promptkit.assembly import trim_to_budget

    results = []
    history: list[Message] = []
    for t in range(turns):
        msgs = [
            Message(role="system", content="persona " * 5),
            *history,
            Message(role="user", content=f"问题{t}"),
        ]
        results.append(
            trim_to_budget(
                msgs,
                600,
                count=len,
                low_water=0.5,
                compaction=lambda chunk, previous: f"{previous or ''}[{len(chunk)}]",
            )
        )
        history += [
            Message(role="user", content=f"问题{t}"),
            Message(role="assistant", content=f"回答{t} " * 12),
        ]
    return results


def _upto_first_breakpoint(body: dict[str, Any]) -> str:
    blocks = _blocks(body)
    return json.dumps(blocks[: _breakpoints(body)[0] + 1], ensure_ascii=False)


def test_head_breakpoint_before_the_compaction_summary_survives_a_cut() -> None:
    results = _trimmed_turns(30)
    cuts = [
        (a, b)
        for a, b in itertools.pairwise(results)
        if a.summary_at is not None and a.cut_points != b.cut_points
    ]
    cuts = [(a, b) for a, b in cuts if a.chunks_dropped != b.chunks_dropped]
    assert cuts, "the conversation must cut at least twice"
    for a, b in cuts:
        body_a, body_b = (anthropic_request(r, model="m") for r in (a, b))
        _check_invariants(body_a)
        assert "cache_control" in body_a["system"][0] and "cache_control" not in body_a["system"][1]
        assert body_a["system"][1]["text"] != body_b["system"][1]["text"]  # the summary changed ...
        assert _upto_first_breakpoint(body_a) == _upto_first_breakpoint(body_b)  # ... the head entry did not
        # without the cut points the head breakpoint covers the summary: a cut rewrites it
        old_a, old_b = (anthropic_request(r, model="m", cut_points=[]) for r in (a, b))
        assert _upto_first_breakpoint(old_a) != _upto_first_breakpoint(old_b)


def test_chunk_breakpoint_marks_the_end_of_the_last_closed_chunk() -> None:
    r = next(r for r in reversed(_trimmed_turns(30)) if len(r.chunk_starts) >= 2)
    assert r.fits and r.summary_at == 1
    body = anthropic_request(r, model="m")
    _check_invariants(body)
    marked = [b for b in _blocks(body) if "cache_control" in b]
    assert len(marked) == 3  # head, chunk end, history end
    before_last_chunk = r.messages[r.chunk_starts[-1] - 1]
    assert marked[1]["text"] == before_last_chunk.content
    assert marked[2]["text"] == r.messages[-2].content  # the end of the history
    # explicit cut points win over the input's
    assert _breakpoints(anthropic_request(r, model="m", cut_points=[])) != _breakpoints(body)


@pytest.mark.parametrize("points", [[-1], [99], ["1"], [True], "12"])
def test_cut_points_must_be_message_indices(points: Any) -> None:
    with pytest.raises(RequestBuildError, match="cut_points"):
        anthropic_request(_assembled("x"), model="m", cut_points=points)
