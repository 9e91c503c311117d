"""The record contract: the slot vocabulary, the layout, and the request record.

A prompt sent to a model has one **layout**, from its first message to its last::

    [tools][persona][identity][knowledge][context] [history …] [turn-context][volatile][focus][turn-hint][current]
    └──────────── before the history: stable per session ──────────┘ └────── after the history: per turn ──────┘

Contributors declare one of five **anchors** (:class:`Anchor`); the assembler places their blocks. Every
other message has a **frame slot** (:class:`FrameSlot`). A :class:`LayoutEntry` says, for one message,
which slot it sits in and which contributor key (or injector) put it there. The assembler writes it, the
provider body builders carry it, request logs store it as ``[{"slot": ..., "key": ...}, ...]`` and the
cache analyzer reads it back to say which block broke the cache.

A :class:`RequestRecord` is one logged call: the request body, its session, time and layout, the answer
and the provider's usage, and the file and line it came from. Every log format reads into it.

>>> Anchor("turn-context") is Anchor.TURN_CONTEXT
True
>>> LayoutEntry(slot="knowledge", key="skills").to_dict()
{'slot': 'knowledge', 'key': 'skills'}
>>> layout = [LayoutEntry("persona"), LayoutEntry("identity", "card"), LayoutEntry("history"),
...           LayoutEntry("history"), LayoutEntry("turn-context", "memories"), LayoutEntry("current")]
>>> head_end(layout), history_end(layout)
(2, 4)
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

import attrs

from promptkit.errors import LayoutFormatError, RecordFormatError

__all__ = [
    "ANCHORS",
    "ANCHOR_ORDER",
    "BEFORE_HISTORY",
    "FOCUS_INJECTOR",
    "FRAME_SLOTS",
    "HEAD_ROLES",
    "HEAD_SLOTS",
    "SLOTS",
    "SUMMARY_INJECTOR",
    "VOLATILE_INJECTOR",
    "Anchor",
    "FrameSlot",
    "LayoutEntry",
    "LoadProblem",
    "LoadResult",
    "RequestRecord",
    "Usage",
    "head_end",
    "history_end",
    "last_history_index",
    "role_head_end",
    "role_history_end",
    "token_count",
    "type_name",
]


class Anchor(enum.StrEnum):
    """Where a contributor's blocks go. The criterion is *does the text change every turn*, not its topic.

    - ``IDENTITY``: right after the persona card (the first system message), or first when there is none.
    - ``KNOWLEDGE``, ``CONTEXT``: at the end of the leading system region, knowledge first. Session-stable
      material (rules, skill lists, the session summary): a change breaks the cache once.
    - ``TURN_CONTEXT``: after the history, before the turn's blocks (retrieved memories, speaker profiles,
      file lists: anything whose bytes differ between adjacent turns).
    - ``TURN_HINT``: immediately before the directive block, else before the current user message.
    """

    IDENTITY = "identity"
    KNOWLEDGE = "knowledge"
    CONTEXT = "context"
    TURN_CONTEXT = "turn-context"
    TURN_HINT = "turn-hint"

    @property
    def before_history(self) -> bool:
        """True for the three anchors placed before the history (their changes break the cache)."""
        return self in BEFORE_HISTORY


#: The order anchors are placed in when two of them share one insertion point.
ANCHOR_ORDER: Final[tuple[Anchor, ...]] = (
    Anchor.IDENTITY,
    Anchor.KNOWLEDGE,
    Anchor.CONTEXT,
    Anchor.TURN_CONTEXT,
    Anchor.TURN_HINT,
)

#: Anchors that sit before the history: a contributor there must be byte-identical between turns.
BEFORE_HISTORY: Final[frozenset[Anchor]] = frozenset({Anchor.IDENTITY, Anchor.KNOWLEDGE, Anchor.CONTEXT})

#: ``metadata["injector"]`` of the volatile block (time, session environment, last turn's state): the
#: boundary between the history and the per-turn blocks.
VOLATILE_INJECTOR: Final[str] = "persona-volatile"

#: ``metadata["injector"]`` of the focus guidance block (it sits between the volatile block and the
#: turn-hint blocks and keeps its adjacency to the current message).
FOCUS_INJECTOR: Final[str] = "focus-guidance"

#: ``metadata["injector"]`` (and layout key, slot ``context``) of the compaction summary that
#: :func:`promptkit.assembly.trim.trim_to_budget` puts at the end of the stable head in place of the
#: history chunks it dropped.
SUMMARY_INJECTOR: Final[str] = "history-summary"


class FrameSlot(enum.StrEnum):
    """The slot of a message that no contributor placed (its role in the frame of the request).

    - ``PERSONA``: the persona card, the first message when it is a system message of the leading region;
    - ``SYSTEM``: any other system message nobody registered (in the leading region, or an injected block
      among the per-turn blocks);
    - ``HISTORY``: the conversation so far;
    - ``VOLATILE``: the volatile block (injector :data:`VOLATILE_INJECTOR`);
    - ``FOCUS``: the focus guidance (injector :data:`FOCUS_INJECTOR`);
    - ``DIRECTIVE``: the directive block (kind or injector in ``DIRECTIVE_KINDS``) of this turn;
    - ``CURRENT``: the current user message;
    - ``TOOL_LOOP``: this turn's tool loop after the current message (assistant tool calls and results).
    """

    PERSONA = "persona"
    SYSTEM = "system"
    HISTORY = "history"
    VOLATILE = "volatile"
    FOCUS = "focus"
    DIRECTIVE = "directive"
    CURRENT = "current"
    TOOL_LOOP = "tool-loop"


#: The five anchor values, in placement order.
ANCHORS: Final[tuple[str, ...]] = tuple(a.value for a in ANCHOR_ORDER)
#: The frame slot values.
FRAME_SLOTS: Final[tuple[str, ...]] = tuple(s.value for s in FrameSlot)
#: Every slot value promptkit's assembler writes. Other non-empty strings are accepted as they are (a
#: newer assembler may add slots); they show up under their own name in the analysis.
SLOTS: Final[tuple[str, ...]] = ANCHORS + FRAME_SLOTS
#: The slots of the stable head: the leading region before the history.
HEAD_SLOTS: Final[frozenset[str]] = frozenset({"persona", "system", "identity", "knowledge", "context"})


def _slot_converter(value: str) -> str:
    return value.value if isinstance(value, enum.Enum) else value


@attrs.frozen(slots=True)
class LayoutEntry:
    """What placed one message: its ``slot`` (an :class:`Anchor` or :class:`FrameSlot` value) and ``key``.

    ``key`` is the contributor key for an anchored block, otherwise the message's ``metadata["injector"]``
    (``None`` when it has none). The JSON shape ``{"slot": ..., "key": ...}`` is what request logs carry.

    >>> LayoutEntry.from_dict({"slot": "history", "key": None})
    LayoutEntry(slot='history', key=None)
    >>> LayoutEntry.coerce(("identity", "card"))
    LayoutEntry(slot='identity', key='card')
    """

    slot: str = attrs.field(converter=_slot_converter)
    key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"slot": slot, "key": key}`` (``key`` is always present, ``None`` when absent)."""
        return {"slot": self.slot, "key": self.key}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, where: str = "layout entry") -> LayoutEntry:
        """Parse :meth:`to_dict`'s output; raises :class:`LayoutFormatError` naming ``where`` and the field."""
        if not isinstance(d, Mapping):
            raise LayoutFormatError(f"{where}: must be an object, got {type_name(d)}")
        if "slot" not in d:
            raise LayoutFormatError(f"{where}: missing 'slot'")
        slot = d.get("slot")
        if not isinstance(slot, str) or not slot:
            raise LayoutFormatError(f"{where}.slot: expected a non-empty string, got {slot!r}")
        key = d.get("key")
        if key is not None and not isinstance(key, str):
            raise LayoutFormatError(f"{where}.key: expected a string or null, got {type_name(key)}")
        return cls(slot=slot, key=key)

    @classmethod
    def coerce(cls, item: object, *, where: str = "layout entry") -> LayoutEntry:
        """A layout entry from any of its forms: a :class:`LayoutEntry`, a ``{"slot", "key"}`` mapping,
        a ``(slot, key)`` pair, a bare slot name, or an object with ``slot`` / ``key`` attributes. Raises
        :class:`LayoutFormatError` naming ``where``."""
        if isinstance(item, LayoutEntry):
            return item
        if isinstance(item, Mapping):
            return cls.from_dict(item, where=where)
        if isinstance(item, str | enum.Enum):
            return cls.from_dict({"slot": _slot_converter(item), "key": None}, where=where)  # type: ignore[arg-type]
        if isinstance(item, tuple | list):
            if len(item) != 2:
                raise LayoutFormatError(f"{where}: expected a (slot, key) pair, got {len(item)} items")
            return cls.from_dict({"slot": _slot_converter(item[0]), "key": item[1]}, where=where)
        if hasattr(item, "slot"):
            return cls.from_dict(
                {"slot": _slot_converter(item.slot), "key": getattr(item, "key", None)}, where=where
            )
        raise LayoutFormatError(
            f"{where}: expected {{'slot', 'key'}}, a (slot, key) pair or a LayoutEntry, got {type_name(item)}"
        )


def type_name(value: object) -> str:
    """The JSON-ish name of a value's type, for error messages (``null`` for None)."""
    return "null" if value is None else type(value).__name__


#: The largest token count a log field may hold: 2**40 (about 1.1 trillion), far past any model's context and
#: any session's total, and small enough that a million of them add up inside a 64-bit integer (a count of
#: ``2**64`` or ``1e308`` would otherwise overflow the frames' integer columns).
MAX_TOKEN_COUNT: Final[int] = 2**40


def token_count(value: object, where: str) -> int | None:
    """A token count from a log field: a non-negative whole number up to :data:`MAX_TOKEN_COUNT`, or
    None; raises :class:`~promptkit.errors.RecordFormatError` naming ``where`` otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordFormatError(f"{where}: expected a token count, got {type_name(value)}")
    if isinstance(value, float) and not value.is_integer():
        raise RecordFormatError(f"{where}: expected a whole token count, got {value!r}")
    if value < 0:
        raise RecordFormatError(f"{where}: negative token count {value!r}")
    if value > MAX_TOKEN_COUNT:
        raise RecordFormatError(f"{where}: {value!r} tokens is not a count any model reports (at most 2**40)")
    return int(value)


def _slot(entry: object) -> str:
    if isinstance(entry, Mapping):
        value = entry.get("slot")
    else:
        value = getattr(entry, "slot", None)
    return "" if value is None else str(_slot_converter(value))


def head_end(layout: Sequence[Any]) -> int:
    """How many leading entries of ``layout`` belong to the stable head (slots in :data:`HEAD_SLOTS`).

    >>> head_end([LayoutEntry("persona"), LayoutEntry("history"), LayoutEntry("current")])
    1
    """
    n = 0
    for entry in layout:
        if _slot(entry) not in HEAD_SLOTS:
            break
        n += 1
    return n


def history_end(layout: Sequence[Any], start: int | None = None) -> int:
    """Index after the last ``history`` entry of ``layout`` (``start``, default :func:`head_end`, when
    there is no history after ``start``): where the per-turn tail begins.

    >>> history_end([LayoutEntry("persona"), LayoutEntry("current")])
    1
    >>> history_end([LayoutEntry("persona"), LayoutEntry("history"), LayoutEntry("current")])
    2
    """
    first = head_end(layout) if start is None else start
    for i in range(len(layout) - 1, first - 1, -1):
        if _slot(layout[i]) == FrameSlot.HISTORY:
            return i + 1
    return first


def last_history_index(layout: Sequence[Any], start: int = 0) -> int | None:
    """Index of the last ``history`` entry of ``layout`` at or after ``start`` (None when there is none):
    the message a cache breakpoint on the history goes on.

    >>> last_history_index([LayoutEntry("persona"), LayoutEntry("history"), LayoutEntry("current")])
    1
    >>> last_history_index([LayoutEntry("persona"), LayoutEntry("current")]) is None
    True
    """
    end = history_end(layout, start)
    return end - 1 if end > start else None


#: The roles of the stable head of a request that carries no layout: its leading system and developer
#: messages.
HEAD_ROLES: Final[frozenset[str]] = frozenset({"system", "developer"})


def role_head_end(roles: Sequence[str | None], head_roles: Iterable[str] = HEAD_ROLES) -> int:
    """The head/history boundary of a request without a layout, from its messages' ``roles``: how many
    leading messages have a role of ``head_roles`` (the stable head).

    >>> role_head_end(["system", "developer", "user", "system"])
    2
    >>> role_head_end(["system", "user"], head_roles={"system"})
    1
    """
    wanted = frozenset(head_roles)
    n = 0
    while n < len(roles) and roles[n] in wanted:
        n += 1
    return n


def role_history_end(roles: Sequence[str | None], head_roles: Iterable[str] = HEAD_ROLES) -> int:
    """Where the history of a request without a layout ends, from its messages' ``roles``: at the last
    user message (the current turn), less the head-role blocks injected just before it; the whole
    request when no user message follows the head.

    >>> role_history_end(["system", "user", "assistant", "system", "user"])
    3
    >>> role_history_end(["system", "assistant"])
    2
    """
    wanted = frozenset(head_roles)
    head = role_head_end(roles, wanted)
    last_user = next((i for i in range(len(roles) - 1, head - 1, -1) if roles[i] == "user"), None)
    end = last_user if last_user is not None else len(roles)
    while end > head and roles[end - 1] in wanted:  # blocks injected for this turn
        end -= 1
    return end


# ---------------------------------------------------------------------------------------------------
# the request record


@attrs.frozen(slots=True)
class Usage:
    """A provider's token usage, normalized.

    ``prompt_tokens`` counts every input token (cached or not; for Anthropic ``input_tokens`` +
    ``cache_read_input_tokens`` + ``cache_creation_input_tokens``), ``cached_tokens`` the ones read
    from the cache, ``cache_write_tokens`` the ones written to it (Anthropic, OpenAI when reported), of
    which ``cache_write_1h_tokens`` were written with Anthropic's 1-hour TTL (the rest with 5 minutes).
    None means the provider did not say.
    """

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    cache_write_1h_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The counts in the OpenAI usage shape, which every reader of promptkit logs normalizes back.

        >>> Usage(100, 5, 64, 30).to_json()
        {'prompt_tokens': 100, 'completion_tokens': 5, 'prompt_tokens_details': {'cached_tokens': 64, 'cache_write_tokens': 30}}
        """
        out: dict[str, Any] = {}
        if self.prompt_tokens is not None:
            out["prompt_tokens"] = self.prompt_tokens
        if self.completion_tokens is not None:
            out["completion_tokens"] = self.completion_tokens
        details = {
            k: v
            for k, v in (
                ("cached_tokens", self.cached_tokens),
                ("cache_write_tokens", self.cache_write_tokens),
                ("cache_write_1h_tokens", self.cache_write_1h_tokens),
            )
            if v is not None
        }
        if details:
            out["prompt_tokens_details"] = details
        return out

    @property
    def uncached_tokens(self) -> int | None:
        """Prompt tokens not read from the cache (None when either count is unknown)."""
        if self.prompt_tokens is None or self.cached_tokens is None:
            return None
        return self.prompt_tokens - self.cached_tokens


@attrs.frozen(slots=True)
class RequestRecord:
    """One call: the chat-completions ``request`` body, where it belongs and what the provider said.

    ``index`` is the call's position within its ``session`` (0-based; loaders number each session's
    calls in time order). ``completion`` is the assistant message the model generated (None when
    unknown), ``usage`` the normalized usage (None when the log has none), ``layout`` one
    :class:`LayoutEntry` per request message (None without a layout), ``provider`` the provider named
    or recognised by the log format (None when it could not say), ``url`` the endpoint the request was
    sent to when the log knows it, ``file``/``line`` where the record came from (None for records built
    in code; ``line`` is None for formats that hold one JSON document per file), ``meta`` anything else
    the format knows that the analysis may use (e.g. ``{"opaque_head_tokens": 14000}`` for a log that
    omits the system prompt).

    >>> r = RequestRecord({"messages": [{"role": "user", "content": "hi"}]}, session="s", index=0)
    >>> r.to_json()
    {'request': {'messages': [{'role': 'user', 'content': 'hi'}]}, 'session': 's'}
    """

    request: Mapping[str, Any]
    session: str
    index: int = 0
    timestamp: float | None = None
    completion: Mapping[str, Any] | None = None
    usage: Usage | None = None
    layout: tuple[LayoutEntry, ...] | None = None
    file: str | None = None
    line: int | None = None
    provider: str | None = None
    url: str | None = None
    meta: Mapping[str, Any] = attrs.field(factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The record in promptkit's JSONL log form (what :func:`promptkit.formats.read` reads back).

        ``usage`` is written as the normalized counts under ``"usage"`` (the raw provider object is not
        kept), ``completion`` as ``response.choices[0].message``.
        """
        out: dict[str, Any] = {"request": self.request, "session": self.session}
        if self.timestamp is not None:
            out["timestamp"] = self.timestamp
        if self.completion is not None:
            out["response"] = {"choices": [{"message": dict(self.completion)}]}
        usage = self.usage.to_json() if self.usage is not None else {}
        if usage:
            out["usage"] = usage
        if self.layout is not None:
            out["layout"] = [e.to_dict() for e in self.layout]
        if self.provider is not None:
            out["provider"] = self.provider
        if self.url is not None:
            out["url"] = self.url
        if self.meta:
            out["meta"] = dict(self.meta)
        return out


@attrs.frozen(slots=True)
class LoadProblem:
    """A line, record or field that could not be used: ``file`` and ``line`` (1-based; None when the
    problem is not tied to a line) and the ``reason``."""

    file: str | None
    line: int | None
    reason: str


@attrs.frozen(slots=True)
class LoadResult:
    """The records loaded (each session's calls in time order) and every problem met on the way.

    ``formats`` counts the files read per format name; ``notes`` says what the loader had to assume
    (a session split across files, timestamps out of order, a default used).
    """

    records: tuple[RequestRecord, ...] = ()
    problems: tuple[LoadProblem, ...] = ()
    formats: Mapping[str, int] = attrs.field(factory=dict)
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[RequestRecord]:
        return iter(self.records)
