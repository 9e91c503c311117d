# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 · Build per-turn prompts that keep the prefix cache hitting
#
# A provider's prefix cache (DeepSeek, OpenAI, Anthropic, vLLM…) compares a new request with what it
# has cached **from the first token**, and stops at the first difference: everything after it is billed
# as a cache miss. In a chat agent the largest part of every request that stays the same from one turn
# to the next is the **history**. So the rule is simple, and easy to break: *anything that changes every
# turn must come after the history.*
#
# promptkit's assembler makes that layout the default. Prompt material comes from **contributors**:
# functions registered under a key at one of five **anchors**. The assembler builds them every turn and
# places their blocks:
#
# ```
# [tools][persona][identity][knowledge][context] [history …] [turn-context][volatile][focus][turn-hint][current]
# └──────────── before the history: stable per session ─────┘ └──────── after the history: per turn ───────┘
# ```
#
# The test for choosing an anchor is one question: **are two adjacent turns' outputs byte-identical?**
# If not, the contributor belongs in `turn-context`.
#
# This notebook registers one contributor per anchor, assembles a turn of a group chat, shows the layout
# and the request body for each provider, and checks that two consecutive turns share every byte up to
# the end of the history while the per-turn material changes.

# %%
import json

import numpy as np
import polars as pl

from promptkit import (
    Anchor,
    Message,
    PromptRegistry,
    PromptView,
    anthropic_request,
    deepseek_request,
    ollama_request,
    openai_request,
)
from promptkit.assembly import turn_frame
from promptkit.chat import get_message_name, prefix_sender
from promptkit.tokens.render import get_render_model
from promptkit.tokens.tokenize import RequestTokenizer

table_config = pl.Config(tbl_rows=40, tbl_width_chars=140, fmt_str_lengths=64)

# %% [markdown]
# ## 1. Register contributors, one per anchor
#
# A build receives a read-only `PromptView` (session, speaker, platform, the messages so far) and returns
# a string, a list of strings, or `None` (nothing this turn). Async builds work too. Blocks of one anchor
# are ordered by key, so the output never depends on registration order.
#
# | anchor | this example | changes… |
# |---|---|---|
# | `identity` | behaviour guidelines | never |
# | `knowledge` | the skills list | when a skill is activated (rarely) |
# | `context` | the session summary | when the summary is recomputed (rarely) |
# | `turn-context` | vector-retrieved memories, the speaker's profile | every turn / with the speaker |
# | `turn-hint` | a platform hint that must stay next to the message | never, but belongs to the turn |

# %%
registry = PromptRegistry()

MEMORIES = {
    "咖啡": "小明上周说过他只喝美式",
    "跑步": "小明在准备 11 月的半程马拉松",
    "部署": "阿杰负责公司的 k8s 集群，上周刚迁移完",
}
PROFILES = {
    "42": "小明(42)：群内角色 member，常聊跑步和咖啡",
    "7": "阿杰(7)：群内角色 admin，常聊部署和监控",
}


@registry.contributor("behavior-guidelines", Anchor.IDENTITY)
def guidelines(view: PromptView) -> str:
    return "行为准则：先给结论再给理由；不确定就说不确定；不要 @全体成员。"


@registry.contributor("skills", Anchor.KNOWLEDGE)
def skills(view: PromptView) -> str:
    return "可用技能：web_search（联网搜索）、remember（写入长期记忆）"


@registry.contributor("session-summary", Anchor.CONTEXT)
def summary(view: PromptView) -> str:
    return "会话摘要：群里最近在聊跑步训练、咖啡和服务部署。"


@registry.contributor("memory-vector", Anchor.TURN_CONTEXT)
def memories(view: PromptView) -> list[str]:
    # stands in for a vector search over long-term memory: what matches the current message
    current = (view.messages[-1].content or "") if view.messages else ""
    return [f"相关记忆：{text}" for word, text in MEMORIES.items() if word in current]


@registry.contributor("speaker-profile", Anchor.TURN_CONTEXT)
def speaker_profile(view: PromptView) -> str | None:
    return f"当前发言者档案：{PROFILES[view.user_id]}" if view.user_id in PROFILES else None


registry.register(
    "platform-hint", Anchor.TURN_HINT, lambda view: f"（平台提示：{view.platform} 群聊，回复简短）"
)

pl.DataFrame(
    {
        "key": [c.key for c in registry.contributors()],
        "anchor": [c.anchor.value for c in registry.contributors()],
        "before_history": [c.anchor.before_history for c in registry.contributors()],
    }
)

# %% [markdown]
# ## 2. Assemble a turn
#
# `turn_frame` lays out what the agent itself provides for a turn: the persona card, the stored history
# (control messages dropped, tool calls regrouped with their results), the **volatile block** (time and
# state), the **focus guidance** and the **current message**. `registry.assemble` then builds every
# contributor and places its blocks. User messages carry the sender prefix `[昵称(账号)]:` and a message
# name, as the platform archives them.

# %%
PERSONA = "你是「小莉」，技术交流群里的 AI 群友。说话轻松、直接，不编造。"
WEB_SEARCH = {
    "type": "function",
    "function": {
        "name": "web_search",
        "description": "联网搜索，返回前五条结果的标题和摘要",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}


def user(uid: str, nickname: str, text: str) -> Message:
    return Message(role="user", content=prefix_sender(text, nickname, uid), name=get_message_name(uid))


def assemble_turn(history: list[Message], speaker: tuple[str, str], text: str, clock: str, using=registry):
    # one turn: the frame, the view the contributors see, the prompt assembled with the registry `using`
    uid, nickname = speaker
    current = user(uid, nickname, text)
    frame = turn_frame(
        history,
        persona=PERSONA,
        volatile=f"当前时间 {clock}；状态：专注",
        focus=f"焦点指引：本轮主要回复 {nickname}({uid}) 的最后一条消息",
        current=current,
    )
    view = PromptView(session_id="group:123", user_id=uid, platform="onebot", messages=tuple(frame))
    return using.assemble(frame, view), current


history = [
    user("7", "阿杰", "昨晚的部署又挂了，日志里全是 connection reset"),
    Message(role="assistant", content="先看日志里第一条报错，多半是 readiness probe 探测得太早。"),
    user("42", "小明", "周末有人一起去跑步吗"),
    Message(role="assistant", content="我只能云跑步，不过可以帮你查天气。"),
]
turn1, current1 = assemble_turn(history, ("42", "小明"), "跑完步喝什么咖啡比较好？", "08:01")
print(f"{len(turn1.messages)} messages; built: {', '.join(turn1.built)}")


# %% [markdown]
# ### The layout
#
# Every message of an `AssembledPrompt` has a layout entry: the **slot** that placed it (an anchor, or its
# role in the frame: `persona`, `history`, `volatile`, `focus`, `directive`, `current`, `tool-loop`) and the
# contributor **key**. Request logs carry this layout, and the cache analyzer (notebook 02) uses it to say
# which block broke the cache. `head_end` and `history_end` are where the stable head and the history end.

# %%
def layout_table(prompt) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "i": list(range(len(prompt.messages))),
            "slot": [entry.slot for entry in prompt.layout],
            "key": [entry.key for entry in prompt.layout],
            "role": [m.role for m in prompt.messages],
            "content": [(m.content or "").replace("\n", " ") for m in prompt.messages],
        }
    )


print(f"stable head: messages [0, {turn1.head_end}); history ends at {turn1.history_end}")
layout_table(turn1)


# %% [markdown]
# ## 3. The request body for each provider
#
# Four builders turn the same prompt into each API's JSON body. Each one calls `prepare_llm_messages`
# first (the pipeline contract's mandatory exit: custom roles become `system`, notices get their prefixes). The bodies
# are plain dicts: `json.dumps` them or splat them into the official SDK
# (`client.chat.completions.create(**body)`). Long strings are shortened below so the structure stays
# readable.

# %%
def short(value, width: int = 44):
    if isinstance(value, str):
        value = value.replace("\n", "⏎")
        return value if len(value) <= width else value[: width - 1] + "…"
    if isinstance(value, list):
        return [short(v, width) for v in value]
    if isinstance(value, dict):
        return {k: short(v, width) for k, v in value.items()}
    return value


def show(body: dict, messages_key: str = "messages") -> None:
    # the top-level fields, then one line per message
    top = {k: v for k, v in body.items() if k not in (messages_key, "tools")}
    print(json.dumps(short(top), ensure_ascii=False))
    for tool in body.get("tools", ()):
        print("tool:", json.dumps(short(tool, 24), ensure_ascii=False))
    for i, message in enumerate(body[messages_key]):
        print(f"{i:2} {json.dumps(short(message), ensure_ascii=False)}")


show(openai_request(turn1, model="gpt-4.1-mini", tools=[WEB_SEARCH], max_tokens=512))

# %% [markdown]
# **OpenAI** (above): one body message per message, in order; the assembled blocks are `system` messages
# wherever they sit; `name` passes through; `max_tokens` is sent as `max_completion_tokens`.
#
# **DeepSeek** (below): the OpenAI shape after `normalize_system_placement`. Every system message after the
# leading run becomes a `user` message prefixed with `[系统提示]` (unless it already starts with `[`);
# directive blocks (a cross-session delegation, a host notice) stay `system`. Why that matters is the next
# section. `normalize=False` sends the messages as they are.

# %%
deepseek_body = deepseek_request(turn1, model="deepseek-chat", tools=[WEB_SEARCH])
raw_body = deepseek_request(turn1, model="deepseek-chat", tools=[WEB_SEARCH], normalize=False)
show(deepseek_body)
pl.DataFrame(
    {
        "slot": [entry.slot for entry in turn1.layout],
        "role (normalize=False)": [m["role"] for m in raw_body["messages"]],
        "role (normalized)": [m["role"] for m in deepseek_body["messages"]],
    }
)

# %% [markdown]
# **Ollama** `/api/chat`: sampling parameters go to `options`, tool arguments are JSON objects, images
# are a base64 list on the message.

# %%
show(ollama_request(turn1, model="qwen3:8b", tools=[WEB_SEARCH], temperature=0.7, stream=False))

# %% [markdown]
# **Anthropic** Messages: the stable head becomes the top-level `system` (one text block per message),
# later system blocks become user text (the API has no system role inside `messages`), consecutive
# messages of one role are merged into one turn of content blocks, and the builder places
# **`cache_control` breakpoints** where the layout says the cache boundaries are: the end of the stable
# head and the end of the history (never more than the API's limit of 4). Anthropic caches only up to a
# breakpoint, so this is what turns the layout into cache hits there.

# %%
anthropic_body = anthropic_request(turn1, model="claude-sonnet-4-5", tools=[WEB_SEARCH])
print("system:")
for block in anthropic_body["system"]:
    print("  ", json.dumps(short(block), ensure_ascii=False))
print("messages:")
for i, message in enumerate(anthropic_body["messages"]):
    print(f"{i:2} {message['role']}")
    for block in message["content"]:
        print("     ", json.dumps(short(block, 36), ensure_ascii=False))

breakpoints = [f"system[{j}]" for j, b in enumerate(anthropic_body["system"]) if "cache_control" in b] + [
    f"messages[{i}].content[{j}]"
    for i, m in enumerate(anthropic_body["messages"])
    for j, b in enumerate(m["content"])
    if "cache_control" in b
]
print("cache_control breakpoints:", breakpoints)

# %% [markdown]
# ## 4. Why DeepSeek needs the normalization
#
# The layout above describes **array positions**, not what the model reads. DeepSeek-V3's published chat
# template (its `tokenizer_config.json`) collects *every* system message and renders them at the very
# front, joined by blank lines. So a turn-context block sent as a `system` message after the history is
# rendered *before* the history, and the history can never hit the cache again. The render models in
# `promptkit.tokens.render` reproduce that template; here is the order in which it renders our messages,
# raw and normalized:

# %%
v3 = get_render_model("deepseek-v3")


def rendered_slots(body: dict) -> list[str]:
    # the layout slot of each message in the order the template renders them
    order: list[int] = []
    for piece in v3.render(body):
        if piece.message_index is not None and piece.message_index not in order:
            order.append(piece.message_index)
    return [turn1.layout[i].slot for i in order]


print("array order:        ", " ".join(entry.slot for entry in turn1.layout))
print("V3, normalize=False:", " ".join(rendered_slots(raw_body)))
print("V3, normalized:     ", " ".join(rendered_slots(deepseek_body)))

# %% [markdown]
# Raw, the memories, the speaker profile, the volatile block, the focus guidance and the platform hint all
# land before the history. Normalized, the rendered order is the array order. (DeepSeek's API today uses
# the V3.2 encoding, which renders system messages in place; notebook 02 measures both. The normalization
# is what keeps the layout's cache benefit on a template that hoists.)
#
# ## 5. Two consecutive turns share everything up to the end of the history
#
# Turn 2: the bot answered 小明, and 阿杰 asks something else. Turn 1's current message and the answer are
# now history; the memories, the speaker profile, the volatile block and the focus guidance are new.

# %%
reply1 = Message(role="assistant", content="跑完步建议先补水，咖啡等半小时再喝，美式就挺好。")
turn2, current2 = assemble_turn([*history, current1, reply1], ("7", "阿杰"), "部署那边今天又报警了", "08:05")
body1 = deepseek_request(turn1, model="deepseek-chat", tools=[WEB_SEARCH])
body2 = deepseek_request(turn2, model="deepseek-chat", tools=[WEB_SEARCH])


def wire(message: dict) -> str:
    return json.dumps(message, ensure_ascii=False, sort_keys=True)


rows = []
for i in range(max(len(body1["messages"]), len(body2["messages"]))):
    a = body1["messages"][i] if i < len(body1["messages"]) else None
    b = body2["messages"][i] if i < len(body2["messages"]) else None
    rows.append(
        {
            "i": i,
            "turn 1 slot": turn1.layout[i].slot if a else None,
            "turn 2 slot": turn2.layout[i].slot if b else None,
            "identical bytes": a is not None and b is not None and wire(a) == wire(b),
            "turn 2 content": short((b or {}).get("content") or "", 40),
        }
    )
comparison = pl.DataFrame(rows)
comparison

# %%
end = turn1.history_end
shared = [wire(m) for m in body1["messages"][:end]]
assert shared == [wire(m) for m in body2["messages"][:end]], "the prefix through the history must not change"
assert body1.get("tools") == body2.get("tools")
first_change = next(
    i
    for i, (a, b) in enumerate(zip(body1["messages"], body2["messages"], strict=False))
    if wire(a) != wire(b)
)
assert first_change == end
print(
    f"messages 0..{end - 1} (tools, persona, identity, knowledge, context, history): byte-identical, "
    f"{sum(len(s.encode()) for s in shared)} bytes"
)
for key in ("memory-vector", "speaker-profile"):
    print(f"{key:16} turn 1: {[m.content for m in turn1.messages if m.injector == key]}")
    print(f"{'':16} turn 2: {[m.content for m in turn2.messages if m.injector == key]}")

# %% [markdown]
# What does the cache see? Tokenize both requests the way DeepSeek-V3 renders them (its tokenizer, its
# template) and find the longest common token prefix:

# %%
rt = RequestTokenizer("deepseek-v3", "deepseek")


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n


def shared_tokens(p1, p2, normalize: bool = True) -> dict:
    # the common token prefix of two turns' DeepSeek requests, and where it stops in turn 2
    t1 = rt.tokenize(deepseek_request(p1, model="deepseek-chat", tools=[WEB_SEARCH], normalize=normalize))
    t2 = rt.tokenize(deepseek_request(p2, model="deepseek-chat", tools=[WEB_SEARCH], normalize=normalize))
    common = common_prefix(t1.tokens[: t1.prompt_len], t2.tokens[: t2.prompt_len])
    at = t2.message_at(common)
    return {
        "turn 2 prompt tokens": t2.prompt_len,
        "shared with turn 1": common,
        "share": round(common / t2.prompt_len, 3),
        "first difference in": p2.layout[at].slot if at is not None else "template",
    }


prefix = shared_tokens(turn1, turn2)
print(f"turn 1's history ends at token {rt.tokenize(body1).message_starts[turn1.history_end]}")
prefix


# %% [markdown]
# The common prefix runs to the end of turn 1's history (plus the few tokens both next messages start
# with, such as the `<｜User｜>` marker): the whole history is reusable, and the first difference is turn 2's
# newest history message (turn 1's current message, where turn 1 had its memories). Now the same two turns with the
# per-turn contributors declared in `context`, before the history — the mistake the Aalis chat framework measured at a
# 12.7% hit rate — and with the normalization turned off:

# %%
def reanchored(moves: dict[str, Anchor]) -> PromptRegistry:
    # the same contributors, some of them declared at another anchor
    out = PromptRegistry()
    for c in registry.contributors():
        out.register(c.key, moves.get(c.key, c.anchor), c.build)
    return out


misplaced = reanchored({"memory-vector": Anchor.CONTEXT, "speaker-profile": Anchor.CONTEXT})
rows = []
for name, reg in (("turn-context", registry), ("context (before the history)", misplaced)):
    p1, _ = assemble_turn(history, ("42", "小明"), "跑完步喝什么咖啡比较好？", "08:01", using=reg)
    p2, _ = assemble_turn(
        [*history, current1, reply1], ("7", "阿杰"), "部署那边今天又报警了", "08:05", using=reg
    )
    for normalize in (True, False):
        rows.append(
            {"per-turn material in": name, "normalized": normalize, **shared_tokens(p1, p2, normalize)}
        )
pl.DataFrame(rows)

# %% [markdown]
# Only one combination keeps the history: per-turn material after the history **and** sent so that the
# template renders it there. In every other row the shared prefix stops at a per-turn block rendered in
# front of the history. With four short messages of history the difference is small; over a long session
# the history is almost the whole request (notebook 02).
#
# **Next:** `02-measure-cache-hit-rate` measures a 64-turn session both ways; `03-audit-anchor-choices`
# finds misplaced contributors automatically.
