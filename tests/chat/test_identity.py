"""Tests for promptkit/chat/identity.py: sender labels, prefixes and message names (seed §6)."""

from __future__ import annotations

import doctest
import hashlib
import os
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

import promptkit.chat.identity as identity_module
from promptkit.chat.identity import (
    MESSAGE_NAME_MAX_LEN,
    get_message_name,
    get_sender_label,
    prefix_sender,
    strip_sender_prefix,
)

OPENAI_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
OPTIONAL_STR = st.one_of(st.none(), st.just(""), st.text())


def test_docstring_examples() -> None:
    result = doctest.testmod(identity_module)
    assert result.attempted > 0 and result.failed == 0


# --- labels and prefixes --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nickname", "user_id", "label"),
    [
        ("小明", "42", "小明(42)"),
        ("小明", None, "小明"),
        (None, "42", "42"),
        ("小明", "", "小明"),  # empty counts as absent (JS falsy)
        ("", "42", "42"),
        (None, None, None),
        ("", "", None),
    ],
)
def test_get_sender_label(nickname: str | None, user_id: str | None, label: str | None) -> None:
    assert get_sender_label(nickname, user_id) == label
    assert get_sender_label(nickname=nickname, user_id=user_id) == label


def test_the_sender_label_trims_the_nickname() -> None:
    """「getSenderLabel(nickname?, userId?)：两者都有时返回 昵称(ID)；只有一个时取其一；都没有时返回 undefined。」
    The reference trims the nickname first (``nickname?.trim()``): padding a platform leaves around a
    nickname does not reach the label, and a blank nickname counts as none."""
    assert get_sender_label(" 小明 ", "42") == "小明(42)"
    assert get_sender_label("\u3000小明\t", None) == "小明"
    assert get_sender_label("   ", "42") == "42"
    assert get_sender_label(" ", None) is None
    assert prefix_sender("在吗", " 小明 ", "42") == "[小明(42)]: 在吗"


def test_prefix_sender() -> None:
    assert prefix_sender("在吗", "小明", "42") == "[小明(42)]: 在吗"
    assert prefix_sender("在吗", user_id="42") == "[42]: 在吗"
    assert prefix_sender("在吗", "小明") == "[小明]: 在吗"
    assert prefix_sender("在吗") == "在吗"
    assert prefix_sender("在吗", "", "") == "在吗"
    assert prefix_sender("", "小明", "42") == "[小明(42)]: "


def test_strip_sender_prefix_removes_only_its_own_prefix_once() -> None:
    label = "小明(42)"
    assert strip_sender_prefix("[小明(42)]: 在吗", label) == "在吗"
    assert strip_sender_prefix("[小明(42)]: [小明(42)]: 在吗", label) == "[小明(42)]: 在吗"
    assert strip_sender_prefix("[注意]: 在吗", label) == "[注意]: 在吗"  # some other [..]: stays
    assert strip_sender_prefix("[小明(42)]:在吗", label) == "[小明(42)]:在吗"  # not the exact prefix
    assert strip_sender_prefix("引用 [小明(42)]: 在吗", label) == "引用 [小明(42)]: 在吗"  # not at the start
    assert strip_sender_prefix("[小明(42)]: 在吗", None) == "[小明(42)]: 在吗"
    assert strip_sender_prefix("[]: 在吗", "") == "[]: 在吗"


@settings(max_examples=300, deadline=None)
@given(st.text(), OPTIONAL_STR, OPTIONAL_STR)
def test_strip_undoes_prefix(content: str, nickname: str | None, user_id: str | None) -> None:
    prefixed = prefix_sender(content, nickname, user_id)
    assert strip_sender_prefix(prefixed, get_sender_label(nickname, user_id)) == content


# --- message names --------------------------------------------------------------------------------


@pytest.mark.parametrize("user_id", ["42", "u_42", "A-b_9", "x" * 64])
def test_valid_ids_come_back_unchanged(user_id: str) -> None:
    assert get_message_name(user_id) == user_id


@pytest.mark.parametrize(
    ("user_id", "name"),
    [("user@example.com", "user_example_com"), ("小明", "__"), ("a b\nc", "a_b_c"), ("é", "_"), ("😀", "_")],
)
def test_invalid_characters_become_underscores(user_id: str, name: str) -> None:
    assert get_message_name(user_id) == name


@pytest.mark.parametrize("user_id", [None, ""])
def test_no_id_no_name(user_id: str | None) -> None:
    assert get_message_name(user_id) is None
    assert get_message_name() is None


def test_a_long_id_keeps_a_prefix_and_a_stable_hash() -> None:
    user_id = "wx:" + "o" * 80
    digest = hashlib.sha256(user_id.encode()).hexdigest()[:16]
    name = get_message_name(user_id)
    assert name == ("wx_" + "o" * 44) + "-" + digest
    assert name is not None and len(name) == MESSAGE_NAME_MAX_LEN


def test_long_ids_that_only_differ_in_replaced_characters_stay_distinct() -> None:
    a, b = "a.b" + "x" * 70, "a:b" + "x" * 70
    assert get_message_name(a) != get_message_name(b)


def test_the_name_is_stable_across_processes() -> None:
    user_id = "群友-" * 30
    code = f"from promptkit.chat.identity import get_message_name; print(get_message_name({user_id!r}))"
    names = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert names == {get_message_name(user_id)}


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(st.text(min_size=1))
def test_the_name_is_always_valid(user_id: str) -> None:
    name = get_message_name(user_id)
    assert name is not None and OPENAI_NAME.fullmatch(name)
    if OPENAI_NAME.fullmatch(user_id):
        assert name == user_id


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=65, max_size=120), st.text(min_size=65, max_size=120))
def test_different_long_ids_get_different_names(a: str, b: str) -> None:
    if a != b:
        assert get_message_name(a) != get_message_name(b)


def test_lone_surrogates_do_not_raise() -> None:
    name = get_message_name("\ud800" * 70)
    assert name is not None and OPENAI_NAME.fullmatch(name)
