"""The composition rows of a tokenized request, built with numpy: one span per header, message, gap and
generation prompt, in token order.

The engine's ``composition`` frame has one row per span of every request, so its size grows with
requests × messages; :class:`CompositionRows` records each request's message offsets as it comes and
computes every request's spans at once with numpy (no Python loop over the messages beyond reading
their slot and role). Its example shows the rows of one request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any, Final

import attrs
import numpy as np

from promptkit.errors import LayoutMismatchError
from promptkit.tokens.tokenize import TokenBuffer

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from promptkit.tokens.tokenize import TokenizedRequest

__all__ = ["COMPOSITION_COLUMNS", "CompositionRows"]

#: Columns of the composition frame, in order.
COMPOSITION_COLUMNS: Final[tuple[str, ...]] = (
    "session",
    "index",
    "slot",
    "key",
    "start",
    "tokens",
    "message",
    "role",
)
_STRING_COLUMNS: Final[frozenset[str]] = frozenset({"session", "slot", "key", "role"})


class CompositionRows:
    """The composition rows of many requests, built for the engine's hot path.

    A request's spans, in token order: the header (``tools`` when the body has tools, else ``header``)
    when it has tokens, split off an ``opaque-head`` span first when the log omits one; each message
    with tokens (its layout ``slot`` and ``key``, else its role), sorted by start, after a ``template``
    span where it starts past what came before; the trailing ``generation`` prompt. :meth:`add` only records each
    request's message offsets and string codes (its messages' roles are read only for the messages the
    session's previous request did not have: the lists are compared in C, by identity first, as the
    loaders intern a session's repeated messages); :meth:`frame` computes every request's spans at once
    with numpy and makes each string column with one gather from a vocabulary.

    >>> from promptkit.tokens.tokenize import RequestTokenizer
    >>> rt = RequestTokenizer("chatml", "cl100k_base")
    >>> body = {"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}]}
    >>> rows = CompositionRows()
    >>> rows.add("s", 0, body, rt.tokenize(body))
    >>> frame = rows.frame()
    >>> frame["slot"].to_list(), frame["start"].to_list(), frame["message"].to_list()
    (['system', 'user', 'generation'], [0, 8, 14], [0, 1, None])
    """

    __slots__ = (
        "_bad", "_chains", "_codes", "_ends", "_heads", "_last", "_messages", "_names", "_requests", "_starts",
    )  # fmt: skip

    def __init__(self) -> None:
        self._names: list[str | None] = [None]  # code 0 is null
        self._codes: dict[str, int] = {}
        self._last: dict[str, tuple[list[Any], np.ndarray]] = {}  # session -> messages, role codes
        # memory: (session, what) -> the buffer whose views are the session's requests' role codes, message
        # starts and ends: a request repeating its predecessor's first messages holds a view, not a copy
        self._chains: dict[tuple[str, str], tuple[TokenBuffer, np.ndarray]] = {}
        # per request: session code, index, position, message count, header_len, prompt_len, shifted,
        # and the slot and key codes of its template and generation spans (-1: none, an error if used)
        self._requests: list[tuple[int, ...]] = []
        # every request's message starts and ends, one int64 array per request (a view of its session's
        # chain: memory linear in a conversation's length); numpy reads them all at once in _columns
        self._starts: list[np.ndarray] = []
        self._ends: list[np.ndarray] = []
        # slot, key and role codes of each message, one array per request each
        self._messages: tuple[list[np.ndarray], list[np.ndarray | None], list[np.ndarray | None]] = (
            [],
            [],
            [],
        )
        # (request, start, size, slot, key) of each header span
        self._heads: list[tuple[int, int, int, int, int]] = []
        self._bad: list[tuple[int, int]] = []  # (request, first message) whose slot lies past the table

    def __getstate__(self) -> dict[str, Any]:
        """The rows as pickled (a streamed plan spills them to disk): what :meth:`frame` reads, not the
        sessions' last messages and chains that only :meth:`add` continues (memory, disk: the messages'
        content would travel with them). Unpickled rows make the same frame (they take no more rows)."""
        return {name: getattr(self, name) for name in self.__slots__ if name not in ("_chains", "_last")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)

    def _code(self, value: str | None) -> int:
        if value is None:
            return 0
        code = self._codes.get(value)
        if code is None:
            code = self._codes[value] = len(self._names)
            self._names.append(value)
        return code

    def _chained(self, session: str, what: str, values: np.ndarray, known: int | None = None) -> np.ndarray:
        """``values`` (int64) as a read-only view of the buffer of ``session``'s ``what``: its previous
        values' first ``known`` are this request's (None: compared), written once (memory: a session's
        requests repeat their predecessors' messages, so their per-message arrays are one chain; a
        request that differs from its predecessor gets a new buffer, its old views stay valid). With
        ``known``, ``values`` are the values past those ``known``."""
        key = (session, what)
        held = self._chains.get(key)
        buffer = held[0] if held is not None else None
        if known is None:
            known = 0
            if held is not None:  # its previous request's values: how many of them this one repeats
                m = min(int(held[1].shape[0]), int(values.shape[0]))
                differ = np.flatnonzero(held[1][:m] != values[:m])
                known = int(differ[0]) if differ.shape[0] else m
            values = values[known:]
        # memory: a chain grows by a few messages per request, and every session keeps its chains to
        # the end: half again plus 16 of room, not the token buffers' 1,024 (per session and field)
        n = known + int(values.shape[0])
        view, buffer, _ = TokenBuffer.extend(buffer, known, values, room=n + n // 2 + 16)
        self._chains[key] = (buffer, view)
        return view

    def _role_codes(self, session: str, messages: Sequence[Any]) -> np.ndarray:
        last = self._last.get(session)
        if last is not None and isinstance(messages, list) and len(messages) >= len(last[0]):
            k = len(last[0])
            try:
                same = bool(messages[:k] == last[0])
                if not same and k > 1 and messages[: k - 1] == last[0][: k - 1]:
                    # perf: the previous call's last message marked (a breakpoint the analysis placed
                    # there, Claude Code's way): its role is read again with the new ones
                    k, same = k - 1, True
            except (ValueError, TypeError):  # no truth value (an array inside): read every role
                same = False
            if same:
                new = np.array([self._code(m["role"]) for m in messages[k:]], dtype=np.int64)
                codes = self._chained(session, "roles", new, k) if new.shape[0] else last[1]
                self._last[session] = (messages, codes)
                return codes
        codes = self._chained(
            session, "roles", np.fromiter((self._code(m["role"]) for m in messages), np.int64)
        )
        if isinstance(messages, list):
            self._last[session] = (messages, codes)
        return codes

    def add(
        self,
        session: str,
        index: int,
        body: Mapping[str, Any],
        tok: TokenizedRequest,
        *,
        layout: Sequence[Any] | None = None,
        shifted: bool = False,
        opaque: tuple[int, str] | None = None,
        position: int = 0,
    ) -> None:
        """Add the rows of request ``index`` of ``session``: ``body`` tokenized as ``tok``; ``layout``,
        one entry per message, names the slots and keys (else the roles do); ``shifted``: the body's
        first message was prepended (an Anthropic top-level system), so message indices shift by one;
        ``opaque``: ``(tokens, key)`` of an opaque head the log omits (:mod:`promptkit.formats.opaque_head`),
        the first ``tokens`` of the header. ``position`` fills the ``_position`` column of
        :meth:`frame` (``position=True``)."""
        r = len(self._requests)
        n = len(tok.message_starts)
        code = self._code
        roles = self._role_codes(session, body["messages"])[:n]
        # a row's slot and key: entry `code` of these tables, where code i < n is
        # message i, then come the header, template, generation and opaque-head spans
        header = code("tools" if body.get("tools") else "header")
        spans = [header, code("template"), code("generation"), code("opaque-head")]
        span_keys = [0, 0, 0, code(opaque[1] if opaque is not None else None)]
        if layout is None:
            # the roles are the slots and there are no keys: marked, and made in _columns (perf)
            self._messages[0].append(roles)
            self._messages[1].append(None)
            self._messages[2].append(None)
            slots, keys = spans, span_keys
        else:
            slots = [code(entry.slot) for entry in layout[:n]] + spans
            keys = [code(entry.key) for entry in layout[:n]] + span_keys
            if len(slots) < n + 4:  # a layout shorter than the messages: the tables shift
                if len(slots) < n:  # messages past the tables: an error if one of them has tokens
                    self._bad.append((r, len(slots)))
                pad = [-1] * (n + 4 - len(slots))
                slots, keys = slots + pad, keys + pad
            self._messages[0].append(np.array(slots[:n], dtype=np.int64))
            self._messages[1].append(np.array(keys[:n], dtype=np.int64))
            self._messages[2].append(roles)
            slots, keys = slots[n:], keys[n:]
        self._starts.append(self._chained(session, "starts", np.asarray(tok.message_starts, dtype=np.int64)))
        if tok.message_ends is not None:
            self._ends.append(self._chained(session, "ends", np.asarray(tok.message_ends, dtype=np.int64)))
        else:  # each message ends where the next one in token order starts
            st = np.asarray(tok.message_starts, dtype=np.int64)
            by_start = np.lexsort((np.arange(n), st))
            nxt = np.empty(n, dtype=np.int64)
            nxt[by_start[:-1]] = st[by_start[1:]]
            if n:
                nxt[by_start[-1]] = tok.prompt_len
            self._ends.append(nxt)
        header_len = int(tok.header_len)
        self._requests.append(
            (
                code(session),
                index,
                position,
                n,
                header_len,
                int(tok.prompt_len),
                1 if shifted else 0,
                slots[1],  # template
                keys[1],
                slots[2],  # generation
                keys[2],
            )
        )
        if header_len > 0:  # the header span comes first, split when it starts with an opaque head
            heads = [(0, header_len, 0)]
            if opaque is not None and opaque[0] > 0:
                size = min(opaque[0], header_len)
                heads = [(0, size, 3)] + ([(size, header_len - size, 0)] if header_len > size else [])
            for start, size, which in heads:
                if slots[which] < 0:
                    raise LayoutMismatchError(f"composition: request {r} has no layout entry for its header")
                self._heads.append((r, start, size, slots[which], keys[which]))

    def frame(self, schema: Mapping[str, Any] | None = None, *, position: bool = False) -> pl.DataFrame:
        """The rows added so far as a frame with :data:`COMPOSITION_COLUMNS` (``message`` null for the header, gaps and generation prompt),
        and a ``_position`` column after them when ``position``."""
        import polars as pl

        s_, i_ = pl.String, pl.Int64
        dtypes = (
            dict(schema)
            if schema is not None
            else dict(zip(COMPOSITION_COLUMNS, (s_, i_, s_, s_, i_, i_, i_, s_), strict=True))
        )
        columns = self._columns()
        names = pl.Series(self._names, dtype=pl.String)
        out: list[pl.Series] = []
        for name in (*COMPOSITION_COLUMNS, "_position") if position else COMPOSITION_COLUMNS:
            values = columns[name]
            if name in _STRING_COLUMNS:
                series = names.gather(values).alias(name)
                if dtypes[name] != pl.String:
                    series = series.cast(dtypes[name])
            else:
                series = pl.Series(name, values, dtype=dtypes.get(name, pl.Int64))
                if name == "message":
                    series = pl.select(pl.when(series >= 0).then(series)).to_series().alias(name)
            out.append(series)
        return pl.DataFrame(out)

    def _message_codes(self) -> list[np.ndarray]:
        """The slot, key and role codes of every message, requests in the order added. A request
        without a layout (marked None) has its roles as slots and no keys."""
        slots, keys, roles = self._messages
        if not slots:
            return [np.zeros(0, np.int64)] * 3
        slot = np.concatenate(slots)
        if all(k is None for k in keys):  # perf: no request has a layout
            return [slot, np.zeros(slot.shape[0], np.int64), slot]
        key = np.concatenate(
            [np.zeros(s.shape[0], np.int64) if k is None else k for s, k in zip(slots, keys, strict=True)]
        )
        role = np.concatenate([s if r is None else r for s, r in zip(slots, roles, strict=True)])
        return [slot, key, role]

    def _kept_messages(self, count: np.ndarray) -> tuple[_KeptMessages, int]:
        """The messages with tokens of requests holding ``count`` messages each, by request, then
        start, then index; and the largest end of any message."""
        i64 = np.int64
        rid = np.repeat(np.arange(count.shape[0], dtype=i64), count)
        first = np.concatenate(([0], np.cumsum(count)[:-1])).astype(i64)
        msg = np.arange(rid.shape[0], dtype=i64) - first[rid] if rid.shape[0] else np.zeros(0, i64)
        total_messages = int(count.sum())
        st = np.concatenate(self._starts) if self._starts else np.zeros(0, i64)
        en = np.concatenate(self._ends) if self._ends else np.zeros(0, i64)
        assert st.shape[0] == en.shape[0] == total_messages
        codes = self._message_codes()
        kept = np.flatnonzero(en > st)
        every = kept.shape[0] == st.shape[0]  # perf: every message has tokens (the usual case)

        def take(values: np.ndarray) -> np.ndarray:  # the kept messages' values
            return values if every else values[kept]

        r, s, e = take(rid), take(st), take(en)
        if kept.shape[0] > 1 and not np.all((np.diff(r) > 0) | (np.diff(s) >= 0)):
            again = np.lexsort((take(msg), s, r))
            kept, r, s, e = kept[again], r[again], s[again], e[again]
            every = False
        kept_msg = take(msg)
        for req_id, past in self._bad:
            if np.any((r == req_id) & (kept_msg >= past)):
                raise LayoutMismatchError(f"composition: a message of request {req_id} has no layout entry")
        return _KeptMessages(r, s, e, kept_msg, [take(c) for c in codes]), int(en.max(initial=0))

    def _columns(self) -> dict[str, np.ndarray]:
        """Every row's columns (strings as codes), requests in the order added; in each request the
        header span(s), then each message with tokens in token order, preceded by a ``template`` span
        where it starts past what came before, then the ``generation`` span."""
        i64 = np.int64
        req = np.fromiter(chain.from_iterable(self._requests), i64, count=11 * len(self._requests)).reshape(
            -1, 11
        )
        n_req = req.shape[0]
        count, header_len, prompt_len = req[:, 3], req[:, 4], req[:, 5]
        m, end_max = self._kept_messages(count)
        r, k = m.r, m.r.shape[0]
        big = int(max(end_max, header_len.max(initial=0), prompt_len.max(initial=0))) + 1
        before = _covered_before(m, header_len, big)
        gap = m.s > before
        final = header_len.copy()
        if k:
            np.maximum.at(final, r, m.e)
        generation = final < prompt_len
        # row counts per request: header spans, messages, gaps, generation
        heads = np.fromiter(chain.from_iterable(self._heads), i64, count=5 * len(self._heads)).reshape(-1, 5)
        n_heads = np.bincount(heads[:, 0], minlength=n_req) if heads.shape[0] else np.zeros(n_req, i64)
        n_msgs = np.bincount(r, minlength=n_req) if k else np.zeros(n_req, i64)
        n_gaps = np.bincount(r, weights=gap, minlength=n_req).astype(i64) if k else np.zeros(n_req, i64)
        rows = n_heads + n_msgs + n_gaps + generation
        base = np.concatenate(([0], np.cumsum(rows)[:-1])).astype(i64)
        out = {name: np.zeros(int(rows.sum()), i64) for name in (*COMPOSITION_COLUMNS, "_position")}
        out["message"][:] = -1
        request_of = np.repeat(np.arange(n_req, dtype=i64), rows)
        out["session"] = req[:, 0][request_of]
        out["index"] = req[:, 1][request_of]
        out["_position"] = req[:, 2][request_of]
        if heads.shape[0]:  # a request's header spans come first, in the order added
            h_req = heads[:, 0]
            h_first = np.concatenate(([0], np.cumsum(n_heads)[:-1]))
            at = base[h_req] + np.arange(heads.shape[0]) - h_first[h_req]
            out["start"][at], out["tokens"][at] = heads[:, 1], heads[:, 2]
            out["slot"][at], out["key"][at] = heads[:, 3], heads[:, 4]
        if k:  # each message, after its gap when it has one
            rank = np.arange(k, dtype=i64) - np.concatenate(([0], np.cumsum(n_msgs)[:-1]))[r]
            gaps_so_far = np.cumsum(gap) - np.concatenate(([0], np.cumsum(n_gaps)[:-1]))[r]
            _put_messages(out, m, req, base[r] + n_heads[r] + rank + gaps_so_far, before, gap)
        _put_generation(out, req, generation, base + rows - 1, final)
        return out


@attrs.frozen(slots=True)
class _KeptMessages:
    """The messages with tokens, by request, then start, then index: each one's request ``r``, token
    span ``s`` to ``e``, index ``msg`` in its request and slot, key and role ``codes``."""

    r: np.ndarray
    s: np.ndarray
    e: np.ndarray
    msg: np.ndarray
    codes: list[np.ndarray]


def _covered_before(m: _KeptMessages, header_len: np.ndarray, big: int) -> np.ndarray:
    """What the spans before each kept message cover: the header, then the furthest end so far in its
    request (``big``: more than any offset)."""
    r = m.r
    k = r.shape[0]
    reach = np.maximum.accumulate(m.e + r * big)  # offset by request: one running maximum for all
    before = np.zeros(k, dtype=np.int64)
    if k > 1:
        before[1:] = reach[:-1] - r[1:] * big
        before[1:][r[1:] != r[:-1]] = 0  # a request's first message: nothing before it
    covered: np.ndarray = np.maximum(before, header_len[r])
    return covered


def _put_messages(
    out: dict[str, np.ndarray],
    m: _KeptMessages,
    req: np.ndarray,
    at: np.ndarray,
    before: np.ndarray,
    gap: np.ndarray,
) -> None:
    """Write each kept message's row at ``at``, and a ``template`` span in the row before it where
    there is a ``gap`` (what came before covers up to ``before``)."""
    r, s = m.r, m.s
    out["start"][at], out["tokens"][at] = s, m.e - s
    out["slot"][at], out["key"][at], out["role"][at] = m.codes[0], m.codes[1], m.codes[2]
    number = m.msg - req[:, 6][r]
    out["message"][at] = np.where(number >= 0, number, -1)
    g = np.flatnonzero(gap)
    template_slot, template_key = req[:, 7], req[:, 8]
    if np.any(template_slot[r[g]] < 0):
        raise LayoutMismatchError("composition: a request has no layout entry for a template span")
    out["start"][at[g] - 1], out["tokens"][at[g] - 1] = before[g], s[g] - before[g]
    out["slot"][at[g] - 1], out["key"][at[g] - 1] = template_slot[r[g]], template_key[r[g]]


def _put_generation(
    out: dict[str, np.ndarray],
    req: np.ndarray,
    generation: np.ndarray,
    row_end: np.ndarray,
    final: np.ndarray,
) -> None:
    """Write the ``generation`` span of each request where ``generation`` holds, in its last row
    (``row_end``), from ``final`` to its prompt's end."""
    last = np.flatnonzero(generation)
    if last.shape[0]:
        prompt_len, generation_slot, generation_key = req[:, 5], req[:, 9], req[:, 10]
        if np.any(generation_slot[last] < 0):
            raise LayoutMismatchError("composition: a request has no layout entry for its generation span")
        at = row_end[last]
        out["start"][at], out["tokens"][at] = final[last], prompt_len[last] - final[last]
        out["slot"][at], out["key"][at] = generation_slot[last], generation_key[last]
