"""Tests for promptkit/assembly/anchors.py: anchors, frame slots, layout entries, UTF-16 key order."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from promptkit.assembly.anchors import (
    ANCHOR_ORDER,
    BEFORE_HISTORY,
    RESERVED_KEYS,
    VOLATILE_INJECTOR,
    Anchor,
    FrameSlot,
    LayoutEntry,
    LayoutFormatError,
    utf16_key,
)
from promptkit.chat.message import DIRECTIVE_KINDS


def test_anchor_values_are_the_five_of_the_seed() -> None:
    assert [a.value for a in Anchor] == ["identity", "knowledge", "context", "turn-context", "turn-hint"]
    assert Anchor("turn-hint") is Anchor.TURN_HINT
    assert isinstance(Anchor.CONTEXT, str) and Anchor.CONTEXT == "context"
    assert ANCHOR_ORDER == tuple(Anchor)


def test_only_identity_knowledge_context_sit_before_the_history() -> None:
    assert {a for a in Anchor if a.before_history} == set(BEFORE_HISTORY)
    assert BEFORE_HISTORY == {Anchor.IDENTITY, Anchor.KNOWLEDGE, Anchor.CONTEXT}


def test_volatile_injector_and_reserved_keys() -> None:
    assert VOLATILE_INJECTOR == "persona-volatile"
    assert VOLATILE_INJECTOR in RESERVED_KEYS
    assert set(DIRECTIVE_KINDS) <= RESERVED_KEYS


def test_layout_entry_json_shape_is_exactly_slot_and_key() -> None:
    assert LayoutEntry(slot=Anchor.TURN_CONTEXT, key="memories").to_dict() == {
        "slot": "turn-context",
        "key": "memories",
    }
    assert LayoutEntry(slot=FrameSlot.HISTORY).to_dict() == {"slot": "history", "key": None}
    assert json.dumps(LayoutEntry(slot="persona").to_dict()) == '{"slot": "persona", "key": null}'


@given(slot=st.text(min_size=1), key=st.none() | st.text())
@settings(max_examples=100, deadline=None)
def test_layout_entry_round_trips_through_json(slot: str, key: str | None) -> None:
    entry = LayoutEntry(slot=slot, key=key)
    assert LayoutEntry.from_dict(json.loads(json.dumps(entry.to_dict()))) == entry


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"key": "k"}, "slot"),
        ({"slot": "", "key": None}, "slot"),
        ({"slot": 3, "key": None}, "slot"),
        ({"slot": "history", "key": 5}, "key"),
    ],
)
def test_layout_entry_from_dict_names_the_bad_field(raw: dict[str, object], field: str) -> None:
    with pytest.raises(LayoutFormatError, match=rf"request 7(\.{field}: expected|: missing '{field}')"):
        LayoutEntry.from_dict(raw, where="request 7")


def test_layout_entry_from_dict_rejects_non_objects() -> None:
    with pytest.raises(LayoutFormatError, match="must be an object"):
        LayoutEntry.from_dict(["history", None])  # type: ignore[arg-type]


def _js_code_units(s: str) -> list[int]:
    """UTF-16 code units computed by hand, as JavaScript stores a string."""
    units: list[int] = []
    for ch in s:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    return units


def test_utf16_order_differs_from_python_order_above_u_ffff() -> None:
    keys = ["ｚ", "𝒜", "a"]
    assert sorted(keys) == ["a", "ｚ", "𝒜"]  # Python: code points
    assert sorted(keys, key=utf16_key) == ["a", "𝒜", "ｚ"]  # JavaScript: code units


@given(st.lists(st.text(alphabet=st.characters(exclude_categories=("Cs",))), max_size=8))
@settings(max_examples=200, deadline=None)
def test_utf16_key_orders_like_javascript_default_sort(keys: list[str]) -> None:
    assert sorted(keys, key=utf16_key) == sorted(keys, key=_js_code_units)
