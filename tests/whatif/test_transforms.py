"""Each transform on a constructed record whose result is known exactly."""

from __future__ import annotations

import copy
import json

import pytest

from promptkit.errors import UsageError
from promptkit.layout import LayoutEntry, RequestRecord
from promptkit.whatif.transforms import (
    Breakpoints,
    Chain,
    ChangeProvider,
    ElideToolOutputs,
    Move,
    Normalize,
    PinModel,
    Selector,
    SetCacheKey,
    SetRetention,
    SetTTL,
    SortTools,
    UseCacheModel,
    apply_transforms,
    regions,
)
from tests.whatif.logs import layout_record


def _contents(record: RequestRecord) -> list[str]:
    return [m["content"] for m in record.request["messages"]]


def test_move_by_key_goes_after_history_with_its_layout_entry() -> None:
    record = layout_record(2)
    frozen = copy.deepcopy(record.request)
    moved = Move(Selector(key="files")).apply(record)
    assert record.request == frozen  # never mutated
    slots = [(e.slot, e.key) for e in moved.layout or ()]
    assert slots == [
        ("persona", None),
        ("context", "rules"),
        ("history", None),
        ("history", None),
        ("turn-context", "files"),
        ("current", None),
    ]
    assert _contents(moved)[4] == "Open files: file_2.py"
    assert _contents(moved)[-1] == "question 2"
    assert sorted(_contents(moved)) == sorted(_contents(record))


@pytest.mark.parametrize(
    ("to", "position"),
    [("identity", 1), ("knowledge", 1), ("context", 2), ("turn-context", 4), ("turn-hint", 4)],
)
def test_move_into_each_anchor(to: str, position: int) -> None:
    moved = Move(Selector(key="files"), to=to).apply(layout_record(2))
    assert moved.layout is not None
    assert moved.layout[position] == LayoutEntry(to, "files")
    assert _contents(moved)[position] == "Open files: file_2.py"
    assert len(moved.layout) == len(moved.request["messages"])


def test_move_regex_cuts_only_the_matching_line_without_layout() -> None:
    record = RequestRecord(
        {
            "messages": [
                {"role": "system", "content": "Be terse.\nCurrent time: 10:42\nCite sources."},
                {"role": "user", "content": "q1"},
                {"role": "assistant", "content": "a1"},
                {"role": "user", "content": "q2"},
            ]
        },
        session="s",
    )
    moved = Move(Selector(regex=r"Current time: \S+")).apply(record)
    assert moved.request["messages"] == [
        {"role": "system", "content": "Be terse.\nCite sources."},
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"},
        {"role": "system", "content": "Current time: 10:42"},
        {"role": "user", "content": "q2"},
    ]
    assert moved.layout is None


def test_move_from_anthropic_system_becomes_a_user_message() -> None:
    record = RequestRecord(
        {"system": "Rules.\nNow: 10:42", "messages": [{"role": "user", "content": "q"}]}, session="s"
    )
    moved = Move(Selector(regex="Now: .*")).apply(record)
    assert moved.request["system"] == "Rules."
    assert moved.request["messages"] == [
        {"role": "user", "content": "Now: 10:42"},
        {"role": "user", "content": "q"},
    ]


def test_move_leaves_history_and_unmatched_records_alone() -> None:
    record = layout_record(4)
    assert Move(Selector(regex="message 1 ")).apply(record) is record  # a history message: not moved
    assert Move(Selector(key="nobody")).apply(record) is record


def test_move_whole_message_by_role_and_kind() -> None:
    record = layout_record(0)
    moved = Move(Selector(role="system", kind="text", slot="context")).apply(record)
    assert [e.slot for e in moved.layout or ()] == ["persona", "turn-context", "turn-context", "current"]


def test_regions_without_layout() -> None:
    body = {
        "messages": [
            {"role": "system", "content": "a"},
            {"role": "developer", "content": "b"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "x"},
            {"role": "user", "content": "now"},
            {"role": "assistant", "content": None, "tool_calls": []},
            {"role": "tool", "content": "out"},
        ]
    }
    assert regions(RequestRecord(body, session="s")) == (2, 4)
    injected = {
        "messages": [
            *body["messages"][:4],
            {"role": "system", "content": "Now: 10:42"},
            *body["messages"][4:],
        ]
    }
    assert regions(RequestRecord(injected, session="s")) == (
        2,
        4,
    )  # a block injected for this turn is not history


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("timestamps", "at 2026-01-02T03:04:05Z ok", "at <timestamp> ok"),
        ("timestamps", "at 2026-01-02 03:04 ok", "at <timestamp> ok"),
        ("dates", "on 2026-01-02 and Jan 2, 2026", "on <date> and <date>"),
        ("times", "at 10:42 PM", "at <time>"),
        ("uuids", "id 123e4567-e89b-12d3-a456-426614174000.", "id <uuid>."),
        ("hex-ids", "req 9f86d081884c7d65 done", "req <id> done"),
        ("counters", "Turn 17, step #3", "Turn <n>, step #<n>"),
    ],
)
def test_normalize_builtin_patterns(name: str, text: str, expected: str) -> None:
    record = RequestRecord({"messages": [{"role": "system", "content": text}]}, session="s")
    assert Normalize((name,)).apply(record).request["messages"][0]["content"] == expected


def test_normalize_scope_and_user_regex_with_value_group() -> None:
    body = {
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "build 4411"}]},
            {"role": "user", "content": "build 4412"},
            {"role": "user", "content": "now"},
        ]
    }
    record = RequestRecord(body, session="s")
    head = Normalize((r"build (?P<value>\d+)",)).apply(record)
    assert head.request["messages"][0]["content"] == [{"type": "text", "text": "build <volatile>"}]
    assert head.request["messages"][1]["content"] == "build 4412"
    every = Normalize((r"build \d+",), scope="all", placeholder="X").apply(record)
    assert [m["content"] for m in every.request["messages"][1:]] == ["X", "now"]
    system = RequestRecord({"system": "at 10:42", "messages": []}, session="s")
    assert Normalize(("times",)).apply(system).request["system"] == "at <time>"


def test_normalize_rejects_bad_patterns() -> None:
    with pytest.raises(UsageError, match="bad regular expression"):
        Normalize(("(unclosed",))
    with pytest.raises(UsageError):
        Normalize(())


def test_sort_tools_sorts_definitions_keys_and_arguments() -> None:
    body = {
        "tools": [
            {"type": "function", "function": {"name": "zeta", "parameters": {"b": 1, "a": 2}}},
            {"type": "function", "function": {"name": "alpha"}, "cache_control": {"type": "ephemeral"}},
        ],
        "messages": [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "1",
                        "type": "function",
                        "function": {"name": "zeta", "arguments": '{"y": 1, "x": [{"d": 0, "c": 1}]}'},
                    },
                    {"id": "2", "type": "function", "function": {"name": "zeta", "arguments": "not json"}},
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "3", "name": "z", "input": {"b": 1, "a": 0}}],
            },
        ],
    }
    out = SortTools().apply(RequestRecord(body, session="s")).request
    assert [t["function"]["name"] for t in out["tools"]] == ["alpha", "zeta"]
    assert list(out["tools"][1]["function"]["parameters"]) == ["a", "b"]
    assert "cache_control" not in out["tools"][0] and out["tools"][1]["cache_control"] == {
        "type": "ephemeral"
    }
    args = out["messages"][0]["tool_calls"][0]["function"]["arguments"]
    assert args == json.dumps({"x": [{"c": 1, "d": 0}], "y": 1})
    assert out["messages"][0]["tool_calls"][1]["function"]["arguments"] == "not json"
    assert list(out["messages"][1]["content"][0]["input"]) == ["a", "b"]


def test_sort_tools_reorders_keys_alone_and_keeps_sorted_records() -> None:
    record = RequestRecord({"tools": [{"name": "a", "description": "d"}], "messages": []}, session="s")
    out = SortTools().apply(record)
    assert list(out.request["tools"][0]) == ["description", "name"]
    assert list(record.request["tools"][0]) == ["name", "description"]
    assert SortTools().apply(out) is out


def test_pin_model_and_change_provider() -> None:
    record = RequestRecord({"model": "deepseek-chat", "messages": []}, session="s", provider="deepseek")
    assert PinModel("deepseek-reasoner").apply(record).request["model"] == "deepseek-reasoner"
    assert PinModel("deepseek-chat").apply(record) is record
    to_openai = ChangeProvider("openai").apply(record)
    assert (to_openai.provider, to_openai.request["model"]) == ("openai", "gpt-4.1")
    kept = ChangeProvider("openai").apply(PinModel("gpt-4o-mini").apply(record))
    assert kept.request["model"] == "gpt-4o-mini"
    assert (
        ChangeProvider("anthropic", model="claude-opus-4-1").apply(record).request["model"]
        == "claude-opus-4-1"
    )


def test_cache_settings() -> None:
    body = {
        "tools": [{"name": "t", "cache_control": {"type": "ephemeral"}}],
        "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "q", "cache_control": {"type": "ephemeral"}}],
            }
        ],
    }
    out = SetTTL("1h").apply(RequestRecord(body, session="s")).request
    assert out["tools"][0]["cache_control"]["ttl"] == "1h"
    assert out["system"][0]["cache_control"]["ttl"] == "1h"
    assert out["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert "ttl" not in body["tools"][0]["cache_control"]
    plain = RequestRecord({"messages": []}, session="abc")
    assert SetRetention("24h").apply(plain).request["prompt_cache_retention"] == "24h"
    assert SetCacheKey("k-{session}").apply(plain).request["prompt_cache_key"] == "k-abc"
    assert UseCacheModel("vllm").apply(plain) is plain
    assert Chain((UseCacheModel("vllm"), SetRetention())).after_options() == {"cache_model": "vllm"}
    with pytest.raises(UsageError):
        SetTTL("2h")


def test_breakpoints_replace_existing_ones() -> None:
    body = {
        "tools": [{"name": "a"}, {"name": "b"}],
        "system": "Rules.",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "q1", "cache_control": {"type": "ephemeral"}}],
            },
            {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "q2"},
        ],
    }
    out = (
        Breakpoints(("tools", "head", "history", "last"), ttl="1h")
        .apply(RequestRecord(body, session="s"))
        .request
    )
    cc = {"type": "ephemeral", "ttl": "1h"}
    assert out["tools"] == [{"name": "a"}, {"name": "b", "cache_control": cc}]
    assert out["system"] == [{"type": "text", "text": "Rules.", "cache_control": cc}]
    assert out["messages"][0] == {"role": "user", "content": [{"type": "text", "text": "q1"}]}
    assert out["messages"][1]["content"] == [{"type": "text", "text": "a1", "cache_control": cc}]
    assert out["messages"][2]["content"] == [{"type": "text", "text": "q2", "cache_control": cc}]
    assert json.dumps(out).count("cache_control") == 4


def test_breakpoints_on_a_layout_head() -> None:
    out = Breakpoints(("head",)).apply(layout_record(2)).request["messages"]
    marked = [i for i, m in enumerate(out) if "cache_control" in json.dumps(m)]
    assert marked == [2]  # the last message of the stable head (persona, rules, files)


def test_elide_tool_outputs() -> None:
    messages = [{"role": "user", "content": "task"}]
    for i in range(4):
        messages += [{"role": "assistant", "content": f"run {i}"}, {"role": "tool", "content": "a\nb\nc"}]
    record = RequestRecord({"messages": messages}, session="s")
    out = ElideToolOutputs(keep=2).apply(record).request["messages"]
    tools = [m["content"] for m in out if m["role"] == "tool"]
    assert tools == ["Old environment output: (3 lines omitted)"] * 2 + ["a\nb\nc"] * 2
    assert ElideToolOutputs(keep=4).apply(record) is record
    batched = [
        ElideToolOutputs(keep=1, polling=2).apply(
            RequestRecord({"messages": messages[: 1 + 2 * n]}, session="s")
        )
        for n in range(1, 5)
    ]
    elided = [sum(m["content"].startswith("Old") for m in r.request["messages"]) for r in batched]
    assert elided == [0, 1, 1, 3]  # SWE-agent's rule: (outputs // polling) * polling - keep
    users = RequestRecord(
        {"messages": [{"role": "user", "content": "task"}, {"role": "user", "content": "x"}]}, session="s"
    )
    assert [m["content"] for m in ElideToolOutputs(0, role="user").apply(users).request["messages"]] == [
        "task",
        "Old environment output: (1 lines omitted)",
    ]


def test_apply_transforms_and_describe() -> None:
    records = [layout_record(0), layout_record(2)]
    chain = Chain((Move(Selector(key="files")), PinModel("m")))
    out = apply_transforms(records, [chain])
    assert [r.request["model"] for r in out] == ["m", "m"]
    assert chain.describe() == "move key=files to turn-context; then pin the model to m"
    with pytest.raises(UsageError):
        Selector()
    with pytest.raises(UsageError):
        Move(Selector(role="system"), to="nowhere")
