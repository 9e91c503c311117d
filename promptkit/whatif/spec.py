"""The transform spec grammar of ``promptkit whatif --transform SPEC``: one parser, one formatter.

A spec is ``NAME`` or ``NAME:ARGS``; ARGS are comma-separated ``key=value`` items or bare words, and an
item ``regex=...`` takes the rest of the spec (so it comes last and may contain commas).

====================================  =====================================================================
``move:SELECTOR[,to=ANCHOR]``         move head messages matching SELECTOR (``role=``, ``kind=``, ``slot=``,
                                      ``key=``, ``regex=``) to ANCHOR (default ``turn-context``);
                                      ``role=`` after ``to=`` is not a selector: use ``as=ROLE`` for the
                                      moved message's role
``normalize[:NAMES][,scope=all]``     replace volatile values: built-in NAMES (``timestamps``, ``dates``,
                                      ``times``, ``uuids``, ``hex-ids``, ``counters``; default all) and/or
                                      ``regex=PATTERN``; scope ``head`` (default) or ``all``
``sort-tools``                        sort tool definitions and JSON keys
``pin-model:MODEL``                   send every request to MODEL
``provider:NAME[,model=MODEL]``       send to another provider
``cache-model:NAME``                  analyze the replay with another cache model
``ttl:5m|1h``                         Anthropic breakpoint TTL
``retention:24h|in_memory``           OpenAI ``prompt_cache_retention``
``cache-key[:KEY]``                   OpenAI ``prompt_cache_key`` (default ``{session}``)
``breakpoints:auto|POSITIONS``        Anthropic breakpoints at ``auto`` or some of ``tools``, ``head``,
                                      ``history``, ``last`` (``+``- or comma-separated); ``ttl=1h``
``elide[:KEEP][,polling=N,role=R]``   elide all but the last KEEP (5) tool outputs, as SWE-agent does
                                      (window moved every N outputs; outputs of role R, default ``tool``)
====================================  =====================================================================

>>> parse_transform("move:key=file-list").describe()
'move key=file-list to turn-context'
>>> format_transform(parse_transform("move:to=turn-hint,regex=Current time: .*"))
'move:to=turn-hint,regex=Current time: .*'
>>> format_transform(parse_transform("breakpoints:auto,ttl=1h"))
'breakpoints:auto,ttl=1h'
"""

from __future__ import annotations

from typing import Final

from promptkit.errors import UsageError
from promptkit.whatif.transforms import (
    BUILTIN_PATTERNS,
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
    Transform,
    UseCacheModel,
)

__all__ = ["SPEC_NAMES", "format_transform", "parse_transform"]

#: The transform names a spec starts with.
SPEC_NAMES: Final[tuple[str, ...]] = (
    "move",
    "normalize",
    "sort-tools",
    "pin-model",
    "provider",
    "cache-model",
    "ttl",
    "retention",
    "cache-key",
    "breakpoints",
    "elide",
)
_AUTO: Final[tuple[str, ...]] = ("tools", "head", "last")


def _items(spec: str, args: str) -> list[tuple[str | None, str]]:
    """``(key, value)`` items of ``args`` (key None for a bare word); ``regex=`` takes the rest."""
    out: list[tuple[str | None, str]] = []
    rest = args
    while rest:
        rest = rest.lstrip()
        if rest.startswith("regex="):  # the rest of the spec, spaces included, is the pattern
            out.append(("regex", rest[len("regex=") :]))
            break
        item, _, rest = rest.partition(",")
        item = item.strip()
        if not item:
            continue
        key, eq, value = item.partition("=")
        if eq:
            out.append((key.strip(), value.strip()))
        else:
            out.append((None, item))
    return out


def _fail(spec: str, why: str) -> UsageError:
    return UsageError(f"--transform {spec!r}: {why}")


def parse_transform(spec: str) -> Transform:
    """The transform a spec describes (see the module docstring); raises
    :class:`~promptkit.errors.UsageError` naming the spec and what is wrong with it.

    >>> parse_transform("normalize:timestamps,uuids")
    Normalize(patterns=('timestamps', 'uuids'), scope='head', placeholder=None)
    """
    if not isinstance(spec, str) or not spec.strip():
        raise UsageError("--transform: empty spec")
    name, _, args = spec.lstrip().partition(":")  # a pattern may end in spaces: keep the tail
    name = name.strip()
    items = _items(spec, args)
    try:
        return _build(spec, name, args.strip(), items)
    except UsageError as exc:
        if str(exc).startswith("--transform"):
            raise
        raise _fail(spec, str(exc)) from None
    except (TypeError, ValueError) as exc:
        raise _fail(spec, str(exc)) from None


def _only(spec: str, items: list[tuple[str | None, str]], allowed: set[str | None]) -> dict[str | None, str]:
    out: dict[str | None, str] = {}
    for key, value in items:
        if key not in allowed:
            known = ", ".join(sorted(k for k in allowed if k)) or "none"
            raise _fail(spec, f"unknown argument {key or value!r} (arguments: {known})")
        out[key] = value
    return out


def _build(spec: str, name: str, args: str, items: list[tuple[str | None, str]]) -> Transform:
    if name == "move":
        kw = _only(spec, items, {"role", "kind", "slot", "key", "regex", "to", "as"})
        selector = Selector(
            role=kw.get("role"),
            kind=kw.get("kind"),
            slot=kw.get("slot"),
            key=kw.get("key"),
            regex=kw.get("regex"),
        )
        return Move(selector, to=kw.get("to", "turn-context"), role=kw.get("as"))
    if name == "normalize":
        patterns: list[str] = []
        scope = "head"
        for key, value in items:
            if key is None:
                if value not in BUILTIN_PATTERNS:
                    raise _fail(
                        spec,
                        f"unknown pattern {value!r}; built-in: {', '.join(BUILTIN_PATTERNS)} (or regex=...)",
                    )
                patterns.append(value)
            elif key == "regex":
                patterns.append(value)
            elif key == "scope":
                scope = value
            else:
                raise _fail(spec, f"unknown argument {key!r} (arguments: pattern names, regex, scope)")
        return Normalize(tuple(patterns) or tuple(BUILTIN_PATTERNS), scope=scope)
    if name == "sort-tools":
        _only(spec, items, set())
        return SortTools()
    if name in ("pin-model", "cache-model"):
        if not args:
            raise _fail(spec, f"expected {name}:NAME")
        return PinModel(args) if name == "pin-model" else UseCacheModel(args)
    if name == "provider":
        if not items or items[0][0] is not None:
            raise _fail(spec, "expected provider:NAME[,model=MODEL]")
        kw = _only(spec, items[1:], {"model"})
        return ChangeProvider(items[0][1], model=kw.get("model"))
    if name == "ttl":
        return SetTTL(args or "1h")
    if name == "retention":
        return SetRetention(args or "24h")
    if name == "cache-key":
        return SetCacheKey(args or "{session}")
    if name == "breakpoints":
        positions: list[str] = []
        ttl = None
        for key, value in items:
            if key == "ttl":
                ttl = value
            elif key is None:
                positions.extend(_AUTO if value == "auto" else value.split("+"))
            else:
                raise _fail(spec, f"unknown argument {key!r} (arguments: positions, auto, ttl)")
        if ttl is not None and ttl not in ("5m", "1h"):
            raise _fail(spec, f"ttl: expected 5m or 1h, got {ttl!r}")
        return Breakpoints(tuple(dict.fromkeys(positions)) or _AUTO, ttl=ttl)
    if name == "elide":
        numbers = {"keep": 5, "polling": 1}
        role = "tool"
        for key, value in items:
            if key in (None, "keep", "polling"):
                name = key or "keep"
                if not value.isdigit():
                    raise _fail(spec, f"{name}: expected a whole number, got {value!r}")
                numbers[name] = int(value)
            elif key == "role":
                role = value
            else:
                raise _fail(spec, f"unknown argument {key!r} (arguments: keep, polling, role)")
        return ElideToolOutputs(keep=numbers["keep"], role=role, polling=numbers["polling"])
    raise _fail(spec, f"unknown transform {name!r}; known: {', '.join(SPEC_NAMES)}")


def format_transform(transform: Transform) -> str:
    """The spec of ``transform`` (what :func:`parse_transform` reads back); a :class:`Chain` gives its
    specs joined by `` ; ``; a transform of another class its :meth:`~Transform.describe`.

    >>> format_transform(Normalize(("timestamps",), scope="all"))
    'normalize:timestamps,scope=all'
    """
    t = transform
    if isinstance(t, Chain):
        return " ; ".join(format_transform(x) for x in t.transforms)
    if isinstance(t, Move):
        s = t.selector
        parts = [
            f"{k}={v}" for k, v in (("role", s.role), ("kind", s.kind), ("slot", s.slot), ("key", s.key)) if v
        ]
        if t.to != "turn-context":
            parts.append(f"to={t.to}")
        if t.role:
            parts.append(f"as={t.role}")
        if s.regex is not None:
            parts.append(f"regex={s.regex}")
        return "move:" + ",".join(parts)
    if isinstance(t, Normalize):
        names = [p if p in BUILTIN_PATTERNS else f"regex={p}" for p in t.patterns]
        names.sort(key=lambda p: p.startswith("regex="))  # regex= last: it takes the rest
        if t.scope != "head":
            names.insert(len([n for n in names if not n.startswith("regex=")]), f"scope={t.scope}")
        if tuple(t.patterns) == tuple(BUILTIN_PATTERNS) and t.scope == "head":
            return "normalize"
        return "normalize:" + ",".join(names)
    if isinstance(t, SortTools):
        return "sort-tools"
    if isinstance(t, PinModel):
        return f"pin-model:{t.model}"
    if isinstance(t, UseCacheModel):
        return f"cache-model:{t.name}"
    if isinstance(t, ChangeProvider):
        return f"provider:{t.provider}" + (f",model={t.model}" if t.model else "")
    if isinstance(t, SetTTL):
        return f"ttl:{t.ttl}"
    if isinstance(t, SetRetention):
        return f"retention:{t.retention}"
    if isinstance(t, SetCacheKey):
        return f"cache-key:{t.key}"
    if isinstance(t, Breakpoints):
        where = "auto" if t.at == _AUTO else "+".join(t.at)
        return f"breakpoints:{where}" + (f",ttl={t.ttl}" if t.ttl else "")
    if isinstance(t, ElideToolOutputs):
        return (
            f"elide:{t.keep}"
            + (f",polling={t.polling}" if t.polling != 1 else "")
            + (f",role={t.role}" if t.role != "tool" else "")
        )
    return t.describe()
