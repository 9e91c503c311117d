"""Tests for promptkit/assembly/registry.py: registration, building, isolation, idempotence, sync/async."""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import logging
import pathlib
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import example, given, settings, strategies as st

from promptkit.assembly import (
    VOLATILE_INJECTOR,
    Anchor,
    AssembledPrompt,
    LayoutEntry,
    PromptRegistry,
    PromptView,
)
from promptkit.assembly.registry import DEFAULT_BUILD_TIMEOUT, SLOW_STEP_SECONDS, build_contributors
from promptkit.chat.message import Message, ToolCall, to_openai_dict

LOGGER = "promptkit.assembly"


def system(content: str, injector: str | None = None) -> Message:
    return Message(role="system", content=content, metadata={"injector": injector} if injector else None)


def user(content: str) -> Message:
    return Message(role="user", content=content)


def assistant(content: str) -> Message:
    return Message(role="assistant", content=content)


def base() -> list[Message]:
    return [system("persona"), user("u1"), assistant("a1"), user("u2")]


def contents(prompt: AssembledPrompt) -> list[str | None]:
    return [m.content for m in prompt.messages]


def wire(messages: Sequence[Message]) -> bytes:
    """The request bytes a provider sees for ``messages``."""
    return b"".join(json.dumps(to_openai_dict(m), ensure_ascii=False).encode() + b"\n" for m in messages)


def const(text: str | list[str] | None):  # type: ignore[no-untyped-def]
    return lambda view: text


# --- registration ----------------------------------------------------------------------------------------


def test_register_and_decorator() -> None:
    registry = PromptRegistry()
    registry.register("rules", Anchor.CONTEXT, const("R"))

    @registry.contributor("memories", "turn-context")
    def memories(view: PromptView) -> str:
        return "M"

    assert memories(PromptView()) == "M"  # the decorator returns the function itself
    assert registry.anchor_of("memories") is Anchor.TURN_CONTEXT
    assert registry.anchor_of("rules") is Anchor.CONTEXT
    assert "rules" in registry and len(registry) == 2
    assert list(registry) == ["memories", "rules"]
    with pytest.raises(KeyError, match="'nope'"):
        registry.anchor_of("nope")


def test_duplicate_key_is_a_value_error_naming_the_key() -> None:
    registry = PromptRegistry()
    registry.register("skills", "knowledge", const("a"))
    with pytest.raises(ValueError, match="'skills'"):
        registry.register("skills", "context", const("b"))
    with pytest.raises(ValueError, match="'skills'"):
        registry.contributor("skills", "identity")(const("c"))


@pytest.mark.parametrize("anchor", ["bogus-anchor", "Identity", "turn_context", 3, None])
def test_bad_anchor_is_a_value_error_naming_the_key(anchor: object) -> None:
    registry = PromptRegistry()
    with pytest.raises(ValueError, match="contributor 'probe'"):
        registry.register("probe", anchor, const("x"))  # type: ignore[arg-type]
    assert "probe" not in registry


@pytest.mark.parametrize(
    "key", [VOLATILE_INJECTOR, "focus-guidance", "cross-session-delegation", "host-notice"]
)
def test_frame_injectors_are_reserved_keys(key: str) -> None:
    with pytest.raises(ValueError, match=repr(key)):
        PromptRegistry().register(key, "context", const("x"))


def test_bad_key_and_uncallable_build() -> None:
    registry = PromptRegistry()
    with pytest.raises(ValueError, match="non-empty"):
        registry.register("", "context", const("x"))
    with pytest.raises(TypeError, match="'k'"):
        registry.register("k", "context", "not callable")  # type: ignore[arg-type]


# --- assembly ----------------------------------------------------------------------------------------------


def five() -> PromptRegistry:
    registry = PromptRegistry()
    registry.register("idn", "identity", const("IDN"))
    registry.register("kn", "knowledge", const("KN"))
    registry.register("cx", "context", const("CX"))
    registry.register("tc", "turn-context", const("TC"))
    registry.register("th", "turn-hint", const("TH"))
    return registry


def test_assemble_places_the_five_anchors_and_reports_the_layout() -> None:
    prompt = five().assemble(base())
    assert contents(prompt) == ["persona", "IDN", "KN", "CX", "u1", "a1", "TC", "TH", "u2"]
    assert prompt.layout[1] == LayoutEntry(slot="identity", key="idn")
    assert prompt.messages[1] == Message(role="system", content="IDN", metadata={"injector": "idn"})
    assert prompt.built == ("cx", "idn", "kn", "tc", "th")
    assert prompt.absent == ()


def test_reversed_registration_order_gives_identical_bytes() -> None:
    specs = [
        ("𝒜-rules", "context", ["r1", "r2"]),
        ("ｚ-rules", "context", "z"),
        ("persona-id", "identity", "I"),
        ("skills", "knowledge", "S"),
        ("memories", "turn-context", "M"),
        ("files", "turn-context", ["F1", "F2"]),
        ("hint", "turn-hint", "H"),
    ]
    prompts = []
    for order in (specs, specs[::-1]):
        registry = PromptRegistry()
        for key, anchor, out in order:
            registry.register(key, anchor, const(out))
        prompts.append(registry.assemble([system("persona"), user("u1"), assistant("a1"), user("u2")]))
    assert wire(prompts[0].messages) == wire(prompts[1].messages)
    assert prompts[0].layout == prompts[1].layout
    assert contents(prompts[0]) == [
        "persona",
        "I",
        "S",
        "r1",
        "r2",
        "z",
        "u1",
        "a1",
        "F1",
        "F2",
        "M",
        "H",
        "u2",
    ]


def test_keys_above_u_ffff_sort_in_utf16_code_unit_order() -> None:
    registry = PromptRegistry()
    registry.register("ｚ", "turn-context", const("from U+FF5A"))
    registry.register("𝒜", "turn-context", const("from U+1D49C"))
    prompt = registry.assemble([user("now")])
    # Python's str order puts 'ｚ' (U+FF5A) first; JavaScript's puts '𝒜' (D835 DC9C) first
    assert sorted(["ｚ", "𝒜"]) == ["ｚ", "𝒜"]
    assert contents(prompt) == ["from U+1D49C", "from U+FF5A", "now"]
    assert [e.key for e in prompt.layout[:2]] == ["𝒜", "ｚ"]


def test_none_and_empty_strings_contribute_nothing() -> None:
    registry = PromptRegistry()
    registry.register("none", "context", const(None))
    registry.register("empty", "context", const(""))
    registry.register("empty-list", "context", const([]))
    registry.register("mixed", "context", const(["", "B1", "", "B2"]))
    prompt = registry.assemble(base())
    assert contents(prompt) == ["persona", "B1", "B2", "u1", "a1", "u2"]
    assert prompt.built == ("mixed",)
    assert prompt.absent == ()


def test_messages_may_be_any_iterable_but_must_be_messages() -> None:
    prompt = five().assemble(m for m in base())  # a generator is read once
    assert contents(prompt) == contents(five().assemble(base()))
    with pytest.raises(TypeError, match=r"messages\[1\] is dict"):
        five().assemble([user("a"), {"role": "user", "content": "b"}])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="got Message"):
        five().assemble(user("a"))  # type: ignore[arg-type]


def test_view_carries_the_turn_and_the_messages_so_far() -> None:
    seen: list[PromptView] = []
    registry = PromptRegistry()
    registry.register("probe", "context", lambda view: seen.append(view))
    messages = base()
    view = PromptView(
        session_id="s1", user_id="u42", platform="onebot", trigger_type="immediate", dry_run=True
    )
    registry.assemble(messages, view)
    (got,) = seen
    assert (got.session_id, got.user_id, got.platform, got.trigger_type, got.dry_run) == (
        "s1",
        "u42",
        "onebot",
        "immediate",
        True,
    )
    assert got.messages == tuple(messages) and isinstance(got.messages, tuple)
    registry.assemble(messages)
    assert seen[1].dry_run is False and seen[1].session_id is None


# --- isolation -------------------------------------------------------------------------------------------


def test_raising_contributor_is_absent_with_a_warning_naming_its_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def boom(view: PromptView) -> str:
        raise RuntimeError("vector store down")

    registry = PromptRegistry()
    registry.register("memories", "turn-context", boom)
    registry.register("rules", "context", const("R"))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        prompt = registry.assemble(base())
    assert contents(prompt) == ["persona", "R", "u1", "a1", "u2"]
    (absent,) = prompt.absent
    assert (absent.key, absent.anchor, absent.reason) == ("memories", Anchor.TURN_CONTEXT, "raised")
    assert "vector store down" in absent.detail
    records = [r for r in caplog.records if r.name == LOGGER]
    assert len(records) == 1 and "'memories'" in records[0].getMessage()
    assert records[0].levelno == logging.WARNING


@pytest.mark.parametrize("output", [42, ["ok", 3], b"bytes", {"a": "b"}])
def test_invalid_output_is_absent(output: object, caplog: pytest.LogCaptureFixture) -> None:
    registry = PromptRegistry()
    registry.register("weird", "context", const(output))  # type: ignore[arg-type]
    registry.register("fine", "context", const("F"))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        prompt = registry.assemble(base())
    assert contents(prompt) == ["persona", "F", "u1", "a1", "u2"]
    assert [(a.key, a.reason) for a in prompt.absent] == [("weird", "invalid")]
    assert any("'weird'" in r.getMessage() for r in caplog.records)


def test_slow_sync_contributor_is_absent_and_retried_next_call(caplog: pytest.LogCaptureFixture) -> None:
    release = threading.Event()
    calls = []

    def slow(view: PromptView) -> str:
        calls.append(1)
        if not release.is_set():
            release.wait(30)  # blocks until the test releases it
        return "SLOW-DONE"

    registry = PromptRegistry()
    registry.register("slow", "context", slow)
    registry.register("fast", "context", const("FAST"))
    try:
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            prompt = registry.assemble(base(), build_timeout=0.05)
        assert contents(prompt) == ["persona", "FAST", "u1", "a1", "u2"]
        assert [(a.key, a.reason) for a in prompt.absent] == [("slow", "timeout")]
        assert any("'slow'" in r.getMessage() and "build_timeout" in r.getMessage() for r in caplog.records)
    finally:
        release.set()
    _wait_for_build_threads("slow")  # the abandoned build returns; until then it is not started again
    again = registry.assemble(prompt.messages, build_timeout=5)
    assert contents(again) == ["persona", "FAST", "SLOW-DONE", "u1", "a1", "u2"]
    assert again.built == ("slow",)  # FAST was already there: not built again
    assert len(calls) == 2


def test_an_async_contributor_that_swallows_its_cancellation_cannot_hold_the_turn() -> None:
    # mutation checked: without the swallowed-cancellation close in _Timed, assemble waits for the
    # build's sleep to end ("resumed" is set)
    events: list[str] = []

    async def swallower(view: PromptView) -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            events.append("caught")
        try:
            await asyncio.sleep(5)  # keeps going after its cancellation
            events.append("resumed")
        finally:
            events.append("closed")
        return "late"

    registry = PromptRegistry()
    registry.register("swallower", "turn-context", swallower)
    registry.register("fast", "turn-context", const("FAST"))
    prompt = registry.assemble(base(), build_timeout=0.05)
    assert contents(prompt) == ["persona", "u1", "a1", "FAST", "u2"]
    [absent] = prompt.absent
    assert (absent.key, absent.reason) == ("swallower", "timeout")
    assert "caught its cancellation" in absent.detail
    assert events == ["caught", "closed"]  # closed at its await: never resumed


def test_slow_async_contributor_is_cancelled_and_absent() -> None:
    cancelled = threading.Event()

    async def stuck(view: PromptView) -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    registry = PromptRegistry()
    registry.register("stuck", "turn-context", stuck)
    registry.register("fast", "turn-context", const("FAST"))
    prompt = registry.assemble(base(), build_timeout=0.05)
    assert contents(prompt) == ["persona", "u1", "a1", "FAST", "u2"]
    assert [(a.key, a.reason) for a in prompt.absent] == [("stuck", "timeout")]
    assert cancelled.is_set()


def test_a_build_raising_its_own_timeout_error_is_reported_as_raised() -> None:
    def flaky(view: PromptView) -> str:
        raise TimeoutError("upstream timed out")

    registry = PromptRegistry()
    registry.register("flaky", "context", flaky)
    prompt = registry.assemble(base(), build_timeout=10)
    assert [(a.key, a.reason) for a in prompt.absent] == [("flaky", "raised")]


@pytest.mark.parametrize("timeout", [0, -1, float("nan")])
def test_build_timeout_must_be_positive(timeout: float) -> None:
    with pytest.raises(ValueError, match="build_timeout"):
        five().assemble(base(), build_timeout=timeout)


def test_turn_hint_without_a_place_is_dropped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    registry = PromptRegistry()
    registry.register("hint", "turn-hint", const("H"))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        prompt = registry.assemble([system("persona"), user("old"), assistant("reply")])
    assert contents(prompt) == ["persona", "old", "reply"]
    assert [(a.key, a.reason) for a in prompt.absent] == [("hint", "no-place")]
    assert prompt.built == ()
    assert any("'hint'" in r.getMessage() for r in caplog.records if r.name == LOGGER)


# --- async and concurrency -------------------------------------------------------------------------------


def test_async_contributors_and_awaitables_returned_by_sync_builds() -> None:
    async def fetch(view: PromptView) -> list[str]:
        await asyncio.sleep(0)
        return ["A1", "A2"]

    async def later() -> str:
        return "L"

    registry = PromptRegistry()
    registry.register("async", "knowledge", fetch)
    registry.register("returns-awaitable", "knowledge", lambda view: later())
    prompt = registry.assemble(base())
    assert contents(prompt) == ["persona", "A1", "A2", "L", "u1", "a1", "u2"]


def test_sync_builds_run_concurrently() -> None:
    barrier = threading.Barrier(2, timeout=10)  # one build alone would wait until the barrier breaks

    def meet(view: PromptView) -> str:
        barrier.wait()
        return "met"

    registry = PromptRegistry()
    registry.register("a", "context", meet)
    registry.register("b", "context", meet)
    prompt = registry.assemble(base())
    assert prompt.absent == ()
    assert contents(prompt).count("met") == 2


def test_async_builds_run_concurrently() -> None:
    async def pair(mine: asyncio.Event, other: asyncio.Event, text: str) -> str:
        mine.set()
        await other.wait()
        return text

    registry = PromptRegistry()
    events: dict[str, asyncio.Event] = {}

    async def a(view: PromptView) -> str:
        events.setdefault("a", asyncio.Event())
        events.setdefault("b", asyncio.Event())
        return await pair(events["a"], events["b"], "A")

    async def b(view: PromptView) -> str:
        events.setdefault("a", asyncio.Event())
        events.setdefault("b", asyncio.Event())
        return await pair(events["b"], events["a"], "B")

    registry.register("a", "context", a)
    registry.register("b", "context", b)
    prompt = registry.assemble(base(), build_timeout=10)
    assert contents(prompt)[1:3] == ["A", "B"]


async def _async_build(view: PromptView) -> str:
    await asyncio.sleep(0)
    return "ASYNC"


def test_assemble_async_and_sync_inside_a_running_loop_agree() -> None:
    registry = five()
    registry.register("async", "context", _async_build)

    async def main() -> tuple[AssembledPrompt, AssembledPrompt]:
        awaited = await registry.assemble_async(base())
        blocking = registry.assemble(base())  # inside a running loop: runs on a helper thread
        return awaited, blocking

    awaited, blocking = asyncio.run(main())
    assert awaited == blocking
    assert "ASYNC" in contents(awaited)


def test_assemble_from_a_thread_without_an_event_loop() -> None:
    registry = five()
    registry.register("async", "context", _async_build)
    out: list[AssembledPrompt] = []
    worker = threading.Thread(target=lambda: out.append(registry.assemble(base())))
    worker.start()
    worker.join(30)
    assert out and out[0] == registry.assemble(base())


# --- idempotence -------------------------------------------------------------------------------------------


def test_materialized_keys_are_not_built_again_and_keep_their_position() -> None:
    calls: dict[str, int] = {}

    def counted(key: str, text: str):  # type: ignore[no-untyped-def]
        def build(view: PromptView) -> str:
            calls[key] = calls.get(key, 0) + 1
            return text

        return build

    registry = PromptRegistry()
    for key, anchor in [("kn", "knowledge"), ("tc", "turn-context"), ("th", "turn-hint")]:
        registry.register(key, anchor, counted(key, key.upper()))
    first = registry.assemble(base())
    # a tool loop: the assistant calls a tool, assemble runs again on the grown list
    grown = [
        *first.messages,
        Message(role="assistant", tool_calls=[ToolCall("c1", "f")]),
        Message(role="tool", tool_call_id="c1", content="r"),
    ]
    second = registry.assemble(grown)
    assert calls == {"kn": 1, "tc": 1, "th": 1}
    assert second.messages == tuple(grown)
    assert all(a is b for a, b in zip(second.messages, grown, strict=True))
    assert [e.slot for e in second.layout][-4:] == ["turn-hint", "current", "tool-loop", "tool-loop"]
    assert second.built == ()


def test_contributor_registered_later_is_placed_on_the_next_call() -> None:
    registry = PromptRegistry()
    registry.register("cx", "context", const("CX"))
    first = registry.assemble(base())
    registry.register("kn", "knowledge", const("KN"))
    registry.register("idn", "identity", const("IDN"))
    second = registry.assemble(first.messages)
    assert contents(second) == ["persona", "IDN", "KN", "CX", "u1", "a1", "u2"]
    fresh = PromptRegistry()
    for key, anchor, text in [("cx", "context", "CX"), ("kn", "knowledge", "KN"), ("idn", "identity", "IDN")]:
        fresh.register(key, anchor, const(text))
    assert wire(second.messages) == wire(fresh.assemble(base()).messages)


def test_turn_context_material_changes_while_the_prefix_up_to_the_history_end_is_byte_identical() -> None:
    def build_registry(memory_anchor: str) -> PromptRegistry:
        registry = PromptRegistry()
        registry.register("skills", "knowledge", const("技能清单: search"))
        registry.register("summary", "context", const("会话摘要: 出游计划"))
        registry.register(
            "memories", memory_anchor, lambda view: f"检索片段: 关于 {view.messages[-1].content} 的记忆"
        )
        registry.register("hint", "turn-hint", const("简短回复"))
        return registry

    history_n = [user("u1"), assistant("a1")]
    turn_n = [system("persona"), *history_n, system("时间 10:00", VOLATILE_INJECTOR), user("出游")]
    turn_n1 = [
        system("persona"),
        *history_n,
        user("出游"),
        assistant("好的"),
        system("时间 10:05", VOLATILE_INJECTOR),
        user("记账"),
    ]

    registry = build_registry("turn-context")
    prompt_n, prompt_n1 = registry.assemble(turn_n), registry.assemble(turn_n1)
    memories_n = [m.content for m in prompt_n.messages if m.injector == "memories"]
    memories_n1 = [m.content for m in prompt_n1.messages if m.injector == "memories"]
    assert memories_n != memories_n1  # the turn-context material changed
    # the material sits after the history of turn N (a mislabelled anchor would move the cut point)
    end_n = prompt_n.history_end
    assert prompt_n.messages[end_n - 1].content == "a1"
    assert all(i >= end_n for i, m in enumerate(prompt_n.messages) if m.injector == "memories")
    prefix = wire(prompt_n.messages[:end_n])
    assert wire(prompt_n1.messages).startswith(prefix)
    assert prompt_n1.history_end > end_n

    # control: the same material anchored before the history breaks the prefix
    bad = build_registry("context")
    bad_n, bad_n1 = bad.assemble(turn_n), bad.assemble(turn_n1)
    assert not wire(bad_n1.messages).startswith(wire(bad_n.messages[: bad_n.history_end]))


# --- properties ----------------------------------------------------------------------------------------------

ROLES = ["system", "user", "user", "assistant", "tool", "notice"]
INJECTORS = [None, None, None, VOLATILE_INJECTOR, "focus-guidance", "cross-session-delegation", "k1", "k3"]


@st.composite
def turns(draw: st.DrawFn) -> tuple[list[Message], dict[str, tuple[str, object]]]:
    specs = draw(st.lists(st.tuples(st.sampled_from(ROLES), st.sampled_from(INJECTORS)), max_size=10))
    messages = [
        Message(
            role=role,
            content=f"m{i}",
            metadata={"injector": inj, "n": [i]}
            if inj and (role == "system" or not inj.startswith("k"))
            else None,
        )
        for i, (role, inj) in enumerate(specs)
    ]
    outputs = st.one_of(
        st.none(), st.just(""), st.text(max_size=3), st.lists(st.text(max_size=3), max_size=3)
    )
    contributors = draw(
        st.dictionaries(
            st.sampled_from(["k1", "k2", "k3", "𝒜", "ｚ", "a"]),
            st.tuples(st.sampled_from([a.value for a in Anchor]), outputs),
            max_size=5,
        )
    )
    return messages, contributors


def _js_code_units(s: str) -> list[int]:
    """``s`` as JavaScript sees it: UTF-16 code units (what the registry's block order follows)."""
    data = s.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


@pytest.mark.slow
@given(turns())
@example(([user("now")], {"ｚ": ("turn-context", "Z"), "𝒜": ("turn-context", "A")}))  # U+FF5A vs U+1D49C
@example(([system("p"), user("u")], {"ｚ": ("context", ["z1", "z2"]), "𝒜": ("context", "A"), "a": ("context", "a")}))
@settings(max_examples=150, deadline=None)
def test_assemble_properties(case: tuple[list[Message], dict[str, tuple[str, object]]]) -> None:
    messages, contributors = case
    registry = PromptRegistry()
    for key, (anchor, output) in contributors.items():
        registry.register(key, anchor, const(output))  # type: ignore[arg-type]
    snapshot = copy.deepcopy(messages)
    ids = [id(m) for m in messages]

    prompt = registry.assemble(messages)

    assert messages == snapshot and [id(m) for m in messages] == ids  # never mutates its input
    assert len(prompt.layout) == len(prompt.messages)
    # every input message exactly once, in its order
    assert [id(m) for m in prompt.messages if id(m) in set(ids)] == ids
    assert sum(1 for m in prompt.messages if id(m) in set(ids)) == len(ids)
    # idempotent: assembling the result again changes nothing
    again = registry.assemble(prompt.messages)
    assert again.messages == prompt.messages and again.layout == prompt.layout
    # registration order is irrelevant, byte for byte
    reverse = PromptRegistry()
    for key, (anchor, output) in reversed(list(contributors.items())):
        reverse.register(key, anchor, const(output))  # type: ignore[arg-type]
    assert wire(reverse.assemble(messages).messages) == wire(prompt.messages)
    # blocks built this call of one anchor follow their keys in UTF-16 code-unit order (JavaScript's),
    # not code points (blocks already in the input keep the positions they had)
    for anchor in Anchor:
        keys = [e.key for e in prompt.layout if e.slot == anchor.value and e.key in prompt.built]
        firsts = list(dict.fromkeys(keys))
        assert firsts == sorted(firsts, key=_js_code_units), (anchor, firsts)
        assert keys == [k for k in firsts for _ in range(keys.count(k))]  # one contributor's blocks together


# --- timeouts, a blocked event loop, concurrency -------------------------------------------------------------


def test_the_default_build_timeout_applies_to_every_entry_point() -> None:
    for fn in (PromptRegistry.assemble, PromptRegistry.assemble_async, build_contributors):
        assert inspect.signature(fn).parameters["build_timeout"].default == DEFAULT_BUILD_TIMEOUT
    assert 0 < DEFAULT_BUILD_TIMEOUT <= 30


def test_an_async_build_that_blocks_the_event_loop_is_absent_as_blocked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def blocker(view: PromptView) -> str:
        time.sleep(0.3)  # a blocking call without await: the deadline cannot fire meanwhile
        return "BLOCKER"

    registry = PromptRegistry()
    registry.register("b-blocker", "turn-context", blocker)
    registry.register("a-sync", "turn-context", const("SYNC"))  # a thread that finishes in time
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        prompt = registry.assemble(base(), build_timeout=0.1)
    assert "BLOCKER" not in contents(prompt) and "SYNC" in contents(prompt)
    (absent,) = prompt.absent
    assert (absent.key, absent.reason) == ("b-blocker", "blocked")
    seconds = float(re.search(r"blocked the event loop for ([0-9.]+)s", absent.detail).group(1))  # type: ignore[union-attr]
    assert seconds >= 0.3 - 0.005  # printed with two decimals
    assert "build_timeout=0.1s" in absent.detail
    assert any("'b-blocker'" in r.getMessage() and "blocked" in r.getMessage() for r in caplog.records)


def test_a_blocking_step_within_the_timeout_is_kept_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def heavy(view: PromptView) -> str:
        await asyncio.sleep(0)
        time.sleep(SLOW_STEP_SECONDS * 1.5)
        return "HEAVY"

    registry = PromptRegistry()
    registry.register("heavy", "context", heavy)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        prompt = registry.assemble(base(), build_timeout=30)
    assert "HEAVY" in contents(prompt) and prompt.absent == ()
    (record,) = [r for r in caplog.records if r.name == LOGGER]
    assert "'heavy'" in record.getMessage() and "blocked the event loop" in record.getMessage()


def test_the_watchdog_names_a_build_while_it_blocks(caplog: pytest.LogCaptureFixture) -> None:
    seen_while_blocked: list[str] = []

    async def stuck(view: PromptView) -> str:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # blocks until the watchdog has spoken (or 20 s)
            if any("has been blocking" in r.getMessage() for r in caplog.records):
                seen_while_blocked.append("yes")
                break
            time.sleep(0.01)
        return "STUCK"

    registry = PromptRegistry()
    registry.register("stuck", "context", stuck)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        prompt = registry.assemble(base(), build_timeout=0.05)
    assert seen_while_blocked == ["yes"]  # reported while the loop was still blocked
    warning = next(r for r in caplog.records if "has been blocking" in r.getMessage())
    assert "'stuck'" in warning.getMessage() and warning.threadName == "promptkit-build-watchdog"
    assert [(a.key, a.reason) for a in prompt.absent] == [("stuck", "blocked")]


def test_an_abandoned_sync_build_does_not_keep_the_process_alive() -> None:
    script = (
        "import time\n"
        "from promptkit import Message, PromptRegistry\n"
        "r = PromptRegistry()\n"
        "r.register('sleepy', 'context', lambda view: time.sleep(600))\n"
        "p = r.assemble([Message(role='user', content='hi')], build_timeout=0.05)\n"
        "print([(a.key, a.reason) for a in p.absent])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=_env(), check=True
    )
    assert out.stdout.strip() == "[('sleepy', 'timeout')]"


def _env() -> dict[str, str]:
    import os

    root = str(pathlib.Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}


BUILD_KINDS = ["sync", "async", "awaitable", "raises", "invalid", "none", "list"]


def _kind_build(kind: str, key: str):  # type: ignore[no-untyped-def]
    """A build whose output depends on the view, so crossed wires between concurrent calls would show."""

    def text(view: PromptView) -> str:
        last = view.messages[-1].content if view.messages else None
        return f"{key}|{view.user_id}|{len(view.messages)}|{last}"

    if kind == "sync":

        def sync(view: PromptView) -> str:
            time.sleep(0.0005)  # let other threads in
            return text(view)

        return sync
    if kind == "async":

        async def build(view: PromptView) -> str:
            await asyncio.sleep(0)
            return text(view)

        return build
    if kind == "awaitable":

        async def later(view: PromptView) -> list[str]:
            await asyncio.sleep(0)
            return [text(view), "tail"]

        return lambda view: later(view)
    if kind == "raises":

        def boom(view: PromptView) -> str:
            raise RuntimeError(f"{key} failed for {view.user_id}")

        return boom
    if kind == "invalid":
        return lambda view: len(view.messages)
    if kind == "none":
        return lambda view: None
    return lambda view: [text(view), "", text(view) + "!"]


@st.composite
def concurrent_cases(draw: st.DrawFn) -> tuple[PromptRegistry, list[tuple[list[Message], PromptView]]]:
    registry = PromptRegistry()
    specs = draw(
        st.dictionaries(
            st.sampled_from(["k1", "k2", "k3", "𝒜", "ｚ"]),
            st.tuples(st.sampled_from([a.value for a in Anchor]), st.sampled_from(BUILD_KINDS)),
            max_size=5,
        )
    )
    for key, (anchor, kind) in specs.items():
        registry.register(key, anchor, _kind_build(kind, key))
    jobs = []
    for _ in range(draw(st.integers(1, 4))):
        messages, _contributors = draw(turns())
        jobs.append((messages, PromptView(user_id=draw(st.sampled_from(["u1", "u2", None])))))
    return registry, jobs


@pytest.mark.slow
@given(concurrent_cases(), st.integers(2, 4), st.integers(1, 3))
@settings(max_examples=20, deadline=None)
def test_concurrent_assemble_from_threads_and_tasks_equals_serial(
    case: tuple[PromptRegistry, list[tuple[list[Message], PromptView]]], n_threads: int, repeat: int
) -> None:
    registry, jobs = case
    logging.getLogger(LOGGER).disabled = True  # the failing builds warn on every call
    try:
        serial = [registry.assemble(m, v, build_timeout=60) for m, v in jobs]
        work = [i for i in range(len(jobs)) for _ in range(repeat)]

        # many threads at once (assemble runs its own event loop in each), each in its own order
        start = threading.Barrier(n_threads, timeout=60)

        def in_thread(t: int) -> list[AssembledPrompt]:
            start.wait()
            order = work[t % len(work) :] + work[: t % len(work)]
            got = [registry.assemble(*jobs[i], build_timeout=60) for i in order]
            return [got[order.index(i)] for i in range(len(jobs))]

        with ThreadPoolExecutor(n_threads) as pool:
            for threaded in pool.map(in_thread, range(n_threads)):
                assert threaded == serial

        # many tasks on one event loop, plus the sync form called from inside the running loop
        async def tasks() -> list[AssembledPrompt]:
            return list(
                await asyncio.gather(*(registry.assemble_async(*jobs[i], build_timeout=60) for i in work))
            )

        async def mixed() -> list[AssembledPrompt]:
            awaited = asyncio.gather(*(registry.assemble_async(*jobs[i], build_timeout=60) for i in work))
            blocking = [registry.assemble(*jobs[i], build_timeout=60) for i in work]
            return [*(await awaited), *blocking]

        assert asyncio.run(tasks()) == [serial[i] for i in work]
        assert asyncio.run(mixed()) == [serial[i] for i in work] * 2

        # threads each running many tasks
        with ThreadPoolExecutor(n_threads) as pool:
            for got in pool.map(lambda _: asyncio.run(tasks()), range(n_threads)):
                assert got == [serial[i] for i in work]
    finally:
        logging.getLogger(LOGGER).disabled = False


def test_a_build_that_blocks_then_awaits_past_the_deadline_is_blocked() -> None:
    async def blocks_then_awaits(view: PromptView) -> str:
        await asyncio.sleep(0)
        time.sleep(0.3)  # the deadline passes here, but cannot fire
        await asyncio.sleep(0)  # now it fires: the build is cancelled
        return "LATE"

    registry = PromptRegistry()
    registry.register("b", "context", blocks_then_awaits)
    prompt = registry.assemble(base(), build_timeout=0.1)
    assert [(a.key, a.reason) for a in prompt.absent] == [("b", "blocked")]
    assert "LATE" not in contents(prompt)


def test_a_sync_build_returning_a_coroutine_is_awaited_on_the_loop_and_timed() -> None:
    async def later() -> str:
        time.sleep(0.3)
        return "LATER"

    registry = PromptRegistry()
    registry.register("r", "context", lambda view: later())
    prompt = registry.assemble(base(), build_timeout=0.1)
    assert [(a.key, a.reason) for a in prompt.absent] == [("r", "blocked")]


def test_a_blocking_build_is_named_in_the_timeout_of_the_build_it_delayed() -> None:
    async def a_waits(view: PromptView) -> str:
        await asyncio.sleep(0.05)  # its deadline passes while 'b-blocks' holds the loop
        return "A"

    async def b_blocks(view: PromptView) -> str:
        time.sleep(0.3)
        return "B"

    registry = PromptRegistry()
    registry.register("a-waits", "context", a_waits)
    registry.register("b-blocks", "context", b_blocks)
    prompt = registry.assemble(base(), build_timeout=0.1)
    absent = {a.key: a for a in prompt.absent}
    assert absent["b-blocks"].reason == "blocked"
    assert absent["a-waits"].reason == "timeout" and "'b-blocks'" in absent["a-waits"].detail


def _build_threads(key: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"promptkit-build:{key}"]


def _wait_for_build_threads(key: str) -> None:
    deadline = time.monotonic() + 10
    while _build_threads(key) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _build_threads(key)


def test_a_stuck_sync_contributor_holds_one_thread_however_many_turns_follow(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = threading.Event()
    calls: list[int] = []

    def stuck(view: PromptView) -> str:
        calls.append(1)
        release.wait(30)
        return "STUCK-DONE"

    registry = PromptRegistry()
    registry.register("stuck", "context", stuck)
    registry.register("fast", "context", const("FAST"))
    try:
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            for _ in range(40):
                # long enough that the fast build always ends in time on a loaded machine; only the
                # first turn waits it out (the stuck build is not started again)
                prompt = registry.assemble(base(), build_timeout=0.5)
                assert [(a.key, a.reason) for a in prompt.absent] == [("stuck", "timeout")]
                assert "FAST" in contents(prompt)
        assert len(_build_threads("stuck")) == 1 and len(calls) == 1
        assert "its build from an earlier turn has not returned" in prompt.absent[0].detail
    finally:
        release.set()
    _wait_for_build_threads("stuck")
    again = registry.assemble(base(), build_timeout=5)  # returned: built again, normally
    assert "STUCK-DONE" in contents(again) and not again.absent and len(calls) == 2
