"""The --transform grammar: every spec parses to the transform it names and formats back to itself."""

from __future__ import annotations

import pytest
from hypothesis import example, given, strategies as st

from promptkit.errors import UsageError
from promptkit.whatif.spec import format_transform, parse_transform
from promptkit.whatif.transforms import (
    BUILTIN_PATTERNS,
    Breakpoints,
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
)

CASES = [
    ("move:key=file-list", Move(Selector(key="file-list"))),
    ("move:slot=context,to=turn-hint", Move(Selector(slot="context"), to="turn-hint")),
    (
        "move:role=system,as=user,regex=Current time:.*, UTC",
        Move(Selector(role="system", regex="Current time:.*, UTC"), role="user"),
    ),
    ("normalize", Normalize()),
    ("normalize:timestamps,uuids", Normalize(("timestamps", "uuids"))),
    ("normalize:dates,scope=all,regex=id=\\d+", Normalize(("dates", "id=\\d+"), scope="all")),
    ("sort-tools", SortTools()),
    ("pin-model:gpt-4.1", PinModel("gpt-4.1")),
    ("provider:anthropic", ChangeProvider("anthropic")),
    ("provider:openai,model=gpt-4o", ChangeProvider("openai", model="gpt-4o")),
    ("cache-model:vllm", UseCacheModel("vllm")),
    ("ttl:1h", SetTTL("1h")),
    ("retention:24h", SetRetention("24h")),
    ("cache-key:{session}", SetCacheKey("{session}")),
    ("breakpoints:auto", Breakpoints()),
    ("breakpoints:head+history,ttl=1h", Breakpoints(("head", "history"), ttl="1h")),
    ("elide:3,role=user", ElideToolOutputs(3, role="user")),
    ("elide:5,polling=10", ElideToolOutputs(5, polling=10)),
]


@pytest.mark.parametrize(("spec", "expected"), CASES)
def test_parse_and_format(spec: str, expected: object) -> None:
    parsed = parse_transform(spec)
    assert parsed == expected
    assert parse_transform(format_transform(parsed)) == parsed


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty spec"),
        ("bogus", "unknown transform 'bogus'"),
        ("move", "at least one of"),
        ("move:key=a,to=nowhere", "Move.to"),
        ("move:colour=red", "unknown argument 'colour'"),
        ("normalize:weekdays", "unknown pattern 'weekdays'"),
        ("normalize:regex=(", "bad regular expression"),
        ("pin-model", "expected pin-model:NAME"),
        ("ttl:2h", "'5m' or '1h'"),
        ("breakpoints:middle", "Breakpoints.at"),
        ("elide:many", "whole number"),
        ("sort-tools:now", "unknown argument"),
    ],
)
def test_bad_specs_name_the_spec(spec: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_transform(spec)
    assert message in str(info.value)
    assert str(info.value).startswith("--transform")


@pytest.mark.slow
@given(
    names=st.lists(st.sampled_from(list(BUILTIN_PATTERNS)), min_size=1, unique=True),
    scope=st.sampled_from(["head", "all"]),
    regex=st.none() | st.from_regex(r"[A-Za-z ,:=]{1,12}", fullmatch=True),
)
@example(names=["timestamps"], scope="head", regex=" ")  # a pattern of spaces keeps its spaces
def test_normalize_specs_round_trip(names: list[str], scope: str, regex: str | None) -> None:
    t = Normalize((*names, *([regex] if regex else [])), scope=scope)
    assert parse_transform(format_transform(t)) == t
