"""Turn requests into token arrays, incrementally, with each token mapped back to its message.

:class:`RequestTokenizer` pairs a render model (:mod:`promptkit.tokens.render`) with a tokenizer
(:mod:`promptkit.tokens.tokenizers`). Its fast path never tokenizes the same text twice: the rendering
is cut into *segments* — the maximal runs of text between two special pieces — and each distinct
segment is tokenized once and remembered, so a growing conversation only tokenizes its new messages.
Special pieces map to ids directly. The result equals :meth:`RequestTokenizer.tokenize_naive` (render
the whole text, tokenize it in one go splitting only at special tokens) exactly; a property test
checks it.

Exactness: a BPE tokenizer never merges across a special token, so cutting at special pieces changes
nothing. Where a template has no special token between two messages (DeepSeek's hoisted system
prompts joined by a blank line, a template without special tokens), the segment simply spans both
messages and is tokenized as one text: the fast path falls back to full tokenization there. A token
that straddles two messages' text belongs to the message where its first character lies.

Memory: the segment cache is keyed by a 128-bit BLAKE2b digest of the segment text (texts of at most
64 characters — separators, role headers — are their own key) and holds only token ids (int32) and,
for segments that span several messages, token start offsets; it keeps no long strings, so a
session's text is not held twice. It is an LRU bounded by ``cache_tokens`` stored token ids.

Example::

    >>> rt = RequestTokenizer("chatml", "cl100k_base")
    >>> t = rt.tokenize({"messages": [{"role": "user", "content": "hello"}]})
    >>> t.message_starts, t.message_at(t.message_starts[0]), len(t.tokens) == t.prompt_len
    ((0,), 0, True)
"""

from __future__ import annotations

import bisect
import hashlib
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import attrs
import numpy as np

from promptkit.errors import LONE_SURROGATE, LoneSurrogateError, UsageError
from promptkit.tokens.render import (
    IncrementalRenderModel,
    RenderedPiece,
    RenderError,
    RenderModel,
    get_render_model,
)
from promptkit.tokens.tokenizers import (
    Tokenizer,
    encode_ids,
    encode_with_offsets,
    get_tokenizer,
    is_cut,
    vocab_size,
)

__all__ = ["RequestTokenizer", "TokenBuffer", "TokenizedRequest"]


def _int_tuple(value: Iterable[int]) -> tuple[int, ...]:
    if isinstance(value, np.ndarray):  # perf: phase 1's int32 offsets: one C call, Python ints
        return tuple(value.tolist())
    return tuple(map(int, value))


def _optional_int_tuple(value: Iterable[int] | None) -> tuple[int, ...] | None:
    return None if value is None else _int_tuple(value)


def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _to_token_array(value: Any) -> np.ndarray:
    arr = np.asarray(value, dtype=np.int64)
    if arr.ndim != 1:
        raise UsageError(f"tokens must be 1-D, got shape {arr.shape}")
    if arr.flags.writeable:
        arr = _readonly(arr.copy() if arr is value else arr)
    return arr


@attrs.frozen(slots=True)
class TokenizedRequest:
    """A request as the provider's model sees it: token ids plus where each message starts.

    - ``tokens``: int64, 1-D, read-only.
    - ``message_starts[i]``: token offset where ``request["messages"][i]`` starts (a message that
      renders to nothing gets the offset of the next token). With a template that hoists system
      messages the offsets are not sorted by message index.
    - ``header_len``: tokens before the first message (BOS + tool definitions).
    - ``prompt_len``: tokens of the prompt including the generation prompt; ``len(tokens)`` without
      a completion, else the completion follows.
    - ``message_ends[i]``: offset just past message ``i``'s tokens (None when built by hand: then each
      message is assumed to end where the next one in token order starts).
    """

    tokens: np.ndarray = attrs.field(converter=_to_token_array, eq=attrs.cmp_using(eq=np.array_equal))
    message_starts: tuple[int, ...] = attrs.field(converter=_int_tuple)
    header_len: int
    prompt_len: int
    message_ends: tuple[int, ...] | None = attrs.field(default=None, converter=_optional_int_tuple)
    # (starts, message indices, ends) of the messages with tokens, in token order, for message_at;
    # perf: built on its first call (most requests never need it)
    _by_token: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None = attrs.field(
        init=False, default=None, eq=False, repr=False
    )

    def __attrs_post_init__(self) -> None:
        if self.message_ends is not None and len(self.message_ends) != len(self.message_starts):
            raise UsageError(
                f"message_ends has {len(self.message_ends)} entries, message_starts {len(self.message_starts)}"
            )

    def _in_token_order(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        if self._by_token is not None:
            return self._by_token
        starts = self.message_starts
        n = len(starts)
        if self.message_ends is not None:
            ends = self.message_ends
        else:
            order = sorted(range(n), key=lambda i: (starts[i], i))
            nxt = [starts[j] for j in order[1:]] + [self.prompt_len]
            by_order = dict(zip(order, nxt, strict=True))
            ends = tuple(max(starts[i], by_order[i]) for i in range(n))
        keep = [i for i in sorted(range(n), key=starts.__getitem__) if ends[i] > starts[i]]
        by_token = tuple([starts[i] for i in keep]), tuple(keep), tuple([ends[i] for i in keep])
        object.__setattr__(self, "_by_token", by_token)
        return by_token

    @classmethod
    def trusted(
        cls,
        tokens: np.ndarray,
        message_starts: tuple[int, ...],
        header_len: int,
        prompt_len: int,
        message_ends: tuple[int, ...] | None,
    ) -> TokenizedRequest:
        """perf: an instance from values already in their converted form (a read-only int64 array,
        tuples of Python ints of the same length), without running the converters again."""
        self = object.__new__(cls)
        setters = _TRUSTED_SETTERS
        setters[0](self, tokens)
        setters[1](self, message_starts)
        setters[2](self, header_len)
        setters[3](self, prompt_len)
        setters[4](self, message_ends)
        setters[5](self, None)
        return self

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def message_at(self, pos: int) -> int | None:
        """Index of the message whose rendering produced the token at ``pos``; None for the header,
        the generation prompt and the completion (and for ``pos`` out of range).
        """
        order_starts, order_index, order_ends = self._in_token_order()
        k = bisect.bisect_right(order_starts, pos) - 1
        if k < 0 or pos >= order_ends[k] or pos < 0:
            return None
        return order_index[k]


#: perf: the slot setters of TokenizedRequest's fields, in trusted's order (a frozen class refuses
#: setattr; its slots' own descriptors write directly)
_TRUSTED_SETTERS: Final = tuple(
    getattr(TokenizedRequest, name).__set__
    for name in ("tokens", "message_starts", "header_len", "prompt_len", "message_ends", "_by_token")
)


@attrs.frozen(slots=True)
class _Segment:
    ids: np.ndarray  # int32
    offsets: np.ndarray | None  # int32 char offset where each token starts, when computed


#: Texts up to this many characters key the segment cache themselves; longer ones by their digest.
_SHORT_KEY: Final[int] = 64


def _same_tokens(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two integer arrays of the same length hold the same tokens (perf: a short run's bytes
    compared when both have one dtype, cheaper than np.array_equal; else without copying them)."""
    if a.shape[0] <= 4096 and a.dtype == b.dtype:
        return a.tobytes() == b.tobytes()
    return bool(np.array_equal(a, b))


class TokenBuffer:
    """perf: memory: a growing int64 array whose read-only views are the tokens of a chain of requests
    (a session's requests, each extending the previous one): a request that resumes from an earlier
    one's first ``pos`` tokens is ``buffer[:pos]`` followed by its new tokens, written once after
    what the buffer holds, instead of a copy of the whole prefix (see :meth:`extend`).

    The buffer's own array is read-only, so no view handed out can be made writable; it is written
    through a private view. What was written is never changed: a request whose new tokens differ from
    those already written past its ``pos`` gets a new buffer."""

    __slots__ = ("_data", "_write", "used")

    def __init__(self, capacity: int) -> None:
        self._data = np.empty(capacity, dtype=np.int64)
        self._write = self._data[:]
        self._data.flags.writeable = False
        self.used = 0  # tokens written (and possibly handed out): never rewritten

    @staticmethod
    def extend(
        buffer: TokenBuffer | None, pos: int, tail: np.ndarray, room: int = 0
    ) -> tuple[np.ndarray, TokenBuffer, bool]:
        """``buffer[:pos]`` followed by ``tail`` (no buffer: ``tail``) as a read-only view of a buffer:
        ``buffer`` itself when ``tail`` equals what it holds past ``pos`` and fits, else a new one, of
        ``room`` tokens when the caller knows that the chain grows to that many (perf: no copy of the
        prefix into a larger buffer later), else of half as much again.
        Returns (tokens, their buffer, whether it is ``buffer``)."""
        n = pos + int(tail.shape[0])
        if buffer is not None and n <= buffer._data.shape[0]:
            k = min(buffer.used, n) - pos  # tokens of ``tail`` the buffer holds already
            if k <= 0 or _same_tokens(buffer._data[pos : pos + k], tail[:k]):
                if n > buffer.used:
                    buffer._write[buffer.used : n] = tail[buffer.used - pos :]
                    buffer.used = n
                return buffer._data[:n], buffer, True
        new = TokenBuffer(room if room >= n else n + n // 2 + 1024)
        if pos:
            new._write[:pos] = buffer._data[:pos]  # type: ignore[union-attr]
        new._write[pos:n] = tail
        new.used = n
        return new._data[:n], new, False


#: The former private name (``promptkit.analysis`` still uses it until its split lands).
_TokenBuffer = TokenBuffer


@attrs.define(slots=True, eq=False)
class _Snapshot:
    """What resuming after a request's first messages needs: its rendering, where every special piece
    cuts the token stream, where each message's pieces start, and its tokens."""

    request: Mapping[str, Any]
    messages: list[Any]
    pieces: list[RenderedPiece]
    cut_pieces: list[int]  # index of every special piece (a cut: no token spans it), ascending
    cut_tokens: list[int]  # tokens before that piece
    first_piece: list[int]  # per message: index of its first piece (-1: none)
    end_of_messages: int  # index just past the last message piece
    starts: list[int | None]  # per message: first token (raw, before _finish fills gaps)
    ends: list[int]
    first_message_piece: int
    first_message_pos: int | None
    tokens: np.ndarray
    buffer: TokenBuffer  # the buffer ``tokens`` is a view of

    def message_piece(self, start: int) -> int:
        """Index of the first piece of message ``start`` (past the messages when ``start`` is their count)."""
        if start < len(self.first_piece) and self.first_piece[start] >= 0:
            return self.first_piece[start]
        return self.end_of_messages


class RequestTokenizer:
    """Tokenize requests with a render model and a tokenizer, never re-tokenizing a seen segment.

    ``render_model`` and ``tokenizer`` are objects or names (:func:`get_render_model`,
    :func:`get_tokenizer`), both required: a provider's pair comes from its profile
    (``profile.load_render()``, ``profile.load_tokenizer()``), never from a default here. Special pieces whose token is not in the vocabulary (ChatML's
    ``<|im_start|>`` with cl100k_base) get *reserved ids* just above the vocabulary, in the order of
    the render model's ``special_tokens``: they are exact cut points and never collide with a real
    token. ``cache_tokens`` bounds the segment cache (token ids stored, LRU). With
    ``reject_surrogates=True`` a rendered text holding a lone UTF-16 surrogate raises
    :class:`~promptkit.errors.LoneSurrogateError` instead of reaching the tokenizer (tiktoken would
    replace it quietly, DeepSeek's tokenizer rejects it): the analysis engine then replaces it, the same
    way for every tokenizer, and says so.

    The completion (``completion=``) is tokenized separately from the prompt, as a provider does (the
    prompt is tokenized, then the model generates tokens): ``tokens[:prompt_len]`` is always the
    tokenization of the request alone.
    """

    def __init__(
        self,
        render_model: RenderModel | str,
        tokenizer: Tokenizer | str | Any,
        *,
        cache_tokens: int = 32_000_000,
        snapshots: int = 64,
        reject_surrogates: bool = False,
    ) -> None:
        self.render_model: RenderModel = get_render_model(render_model)
        self.tokenizer: Tokenizer = get_tokenizer(tokenizer)
        if cache_tokens < 0:
            raise UsageError(f"cache_tokens must be >= 0, got {cache_tokens}")
        self.cache_tokens = cache_tokens
        self._cache: OrderedDict[str | bytes, _Segment] = OrderedDict()
        self._cached_tokens = 0
        self._special: dict[str, int] = {}
        self._id_arrays: dict[tuple[int, ...], np.ndarray] = {}
        self.reject_surrogates = reject_surrogates
        n = vocab_size(self.tokenizer)
        self._reserved_base = n if n is not None else 1 << 30
        self._reserved: dict[str, int] = {}
        for tok in getattr(self.render_model, "special_tokens", ()):
            self.special_id(tok)
        self.hits = 0
        self.misses = 0
        self.resumed = 0
        #: After :meth:`tokenize`: ``(tokens, k)`` when the result's first ``k`` tokens are known to equal
        #: those of ``tokens`` (an earlier result's array, which it resumed from), else None. A caller
        #: comparing the two arrays can skip those ``k`` tokens.
        self.shared_prefix: tuple[np.ndarray, int] | None = None
        if snapshots < 0:
            raise UsageError(f"snapshots must be >= 0, got {snapshots}")
        self.snapshots = snapshots
        self._snapshots: list[_Snapshot] = []
        self._incremental = isinstance(self.render_model, IncrementalRenderModel)
        # perf: a tokenizer whose pre-tokenizer always splits at tokenizers.is_cut points encodes the
        # text pieces on either side of one as separate segments: a text is then encoded once wherever
        # it recurs (an answer as the completion, then as the next request's message after its role
        # header), and the owners of the tokens are known without offsets
        self._cut_pieces = bool(getattr(self.tokenizer, "cuttable", False))

    def __repr__(self) -> str:
        return f"RequestTokenizer({self.render_model.name!r}, {self.tokenizer.name!r})"

    # -- special tokens ---------------------------------------------------------------------------

    def special_id(self, token: str) -> int:
        """The id of special piece ``token``: the vocabulary's own, or a reserved id above it."""
        sid = self._special.get(token)
        if sid is None:
            sid = self.tokenizer.special_token_id(token)
            if sid is None:
                sid = self._reserved_base + len(self._reserved)
                self._reserved[token] = sid
            self._special[token] = sid
        return sid

    @property
    def reserved_ids(self) -> Mapping[str, int]:
        """Special pieces that are not in the vocabulary, and the reserved ids given to them."""
        return dict(self._reserved)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``, reserved ids included (they decode to their special token's name)."""
        inverse = {v: k for k, v in self._reserved.items()}
        out: list[str] = []
        run: list[int] = []
        for i in (int(x) for x in ids):
            if i in inverse:
                if run:
                    out.append(self.tokenizer.decode(run))
                    run = []
                out.append(inverse[i])
            else:
                run.append(i)
        if run:
            out.append(self.tokenizer.decode(run))
        return "".join(out)

    # -- rendering ----------------------------------------------------------------------------------

    def _render(
        self, request: Mapping[str, Any], completion: Mapping[str, Any] | None
    ) -> tuple[list[RenderedPiece], int]:
        """The pieces and how many of them are the prompt."""
        pieces = self.render_model.render(request, completion=completion)
        if completion is None:
            return pieces, len(pieces)
        prompt = self.render_model.render(request)
        if pieces[: len(prompt)] != prompt:
            raise RenderError(
                f"render model {self.render_model.name!r}: the rendering with a completion does not start "
                "with the prompt's rendering"
            )
        return pieces, len(prompt)

    def _ids_array(self, ids: list[int]) -> np.ndarray:
        """perf: ``ids`` (special ids between two text segments, a few recurring sequences) as a
        read-only int64 array, made once per sequence."""
        key = tuple(ids)
        array = self._id_arrays.get(key)
        if array is None:
            array = _readonly(np.array(ids, dtype=np.int64))
            if len(self._id_arrays) < 4096:
                self._id_arrays[key] = array
        return array

    # -- the segment cache --------------------------------------------------------------------------

    def _segment(self, text: str, need_offsets: bool) -> _Segment:
        # short texts (separators, role headers) are their own key; longer ones are keyed by a digest
        key: str | bytes = (
            text
            if len(text) <= _SHORT_KEY
            else hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        )
        seg = self._cache.get(key)
        if seg is not None and (seg.offsets is not None or not need_offsets):
            self._cache.move_to_end(key)
            self.hits += 1
            return seg
        self.misses += 1
        if self.reject_surrogates and not text.isascii():
            found = LONE_SURROGATE.search(text)
            if found is not None:
                raise LoneSurrogateError(
                    f"a rendered text holds the lone UTF-16 surrogate U+{ord(found.group()):04X} at "
                    f"character {found.start()}: {text[max(0, found.start() - 20) : found.start()]!r}"
                )
        # memory: a long text is encoded in chunks straight into int32 arrays (tokenizers.encode_ids)
        seg = _Segment(*encode_ids(self.tokenizer, text, offsets=need_offsets))
        old = self._cache.pop(key, None)
        if old is not None:
            self._cached_tokens -= len(old.ids)
        size = len(seg.ids)
        if size <= self.cache_tokens:
            self._cache[key] = seg
            self._cached_tokens += size
            while self._cached_tokens > self.cache_tokens:
                _, dropped = self._cache.popitem(last=False)
                self._cached_tokens -= len(dropped.ids)
        return seg

    def cache_info(self) -> dict[str, int]:
        """Segment cache statistics: ``segments``, ``tokens`` stored, ``hits``, ``misses``."""
        return {
            "segments": len(self._cache),
            "tokens": self._cached_tokens,
            "hits": self.hits,
            "misses": self.misses,
            "snapshots": len(self._snapshots),
            "resumed": self.resumed,
        }

    def clear_cache(self) -> None:
        """Forget every cached segment and every snapshot."""
        self._cache.clear()
        self._id_arrays.clear()
        self._snapshots.clear()
        self._cached_tokens = 0

    # -- the fast path ------------------------------------------------------------------------------

    def tokenize(
        self, request: Mapping[str, Any], *, completion: Mapping[str, Any] | None = None
    ) -> TokenizedRequest:
        """Tokenize ``request`` (and ``completion``), reusing every segment seen before and, when an
        earlier request shares its first messages, that request's rendering and tokens.

        Equals :meth:`tokenize_naive` exactly.

        >>> rt = RequestTokenizer("chatml", "cl100k_base")
        >>> first = {"messages": [{"role": "user", "content": "hello"}]}
        >>> second = {"messages": [*first["messages"], {"role": "assistant", "content": "hi"}]}
        >>> _ = rt.tokenize(first)
        >>> rt.tokenize(second) == rt.tokenize_naive(second), rt.cache_info()["resumed"]
        (True, 1)
        """
        self.shared_prefix = None
        resume = self._find_resume(request) if self._incremental else None
        # perf: a model that renders the prompt and the completion in one go (render_split) is not asked
        # for the prompt twice
        split = getattr(self.render_model, "render_split", None) if completion is not None else None
        if resume is None:
            if split is not None:
                pieces, n_prompt = split(request, 0, completion)
            else:
                pieces, n_prompt = self._render(request, completion)
            return self._run(request, pieces, n_prompt, None, 0, [])
        snap, start, j, t = resume
        model: IncrementalRenderModel = self.render_model  # type: ignore[assignment]
        if split is not None:
            tail, n_tail = split(request, start, completion)
        else:
            tail = model.render_from(request, start, completion=completion)
            n_tail = len(tail)
        if completion is not None and split is None:
            prompt_tail = model.render_from(request, start)
            if tail[: len(prompt_tail)] != prompt_tail:
                raise RenderError(
                    f"render model {model.name!r}: the rendering with a completion does not start "
                    "with the prompt's rendering"
                )
            n_tail = len(prompt_tail)
        q = snap.message_piece(start)
        self.resumed += 1
        result = self._run(
            request, snap.pieces[j:q] + tail, q - j + n_tail, (snap, start, j, t), j, snap.pieces[:j]
        )
        return result

    def _find_resume(self, request: Mapping[str, Any]) -> tuple[_Snapshot, int, int, int] | None:
        """The snapshot sharing the most leading messages with ``request`` and where to resume in it:
        (snapshot, first new message, piece index of the last special piece before it, its cut index)."""
        messages = request.get("messages") if isinstance(request, Mapping) else None
        if not isinstance(messages, list) or not messages:
            return None
        best: _Snapshot | None = None
        best_lcp = 0
        n = len(messages)
        first = messages[0]
        # perf: the latest snapshot, when the request extends all of it (a conversation's next call),
        # is taken without reading the others (which snapshot is resumed from changes no token)
        latest = self._snapshots[-1].messages if self._snapshots else None
        if (
            latest is not None
            and 1 < len(latest) <= n
            # perf: the last message first (where a breakpoint was placed), before a pass over all
            and (latest[-1] is messages[len(latest) - 1] or latest[-1] == messages[len(latest) - 1])
            and latest == messages[: len(latest)]
        ):
            best, best_lcp = self._snapshots[-1], len(latest)
        for snap in reversed(self._snapshots if best is None else ()):
            old = snap.messages
            m = min(len(old), n)
            # perf: a snapshot that cannot share more than the best one is skipped unread; messages are
            # compared by identity first (the loaders intern a session's repeated messages), and a
            # snapshot of another conversation is told apart by its second message before any slicing
            if m <= best_lcp:
                continue
            if m > 1 and old[1] is not messages[1] and old[1] != messages[1]:
                if best_lcp >= 1 or (old[0] is not first and old[0] != first):
                    continue  # shares at most the first message: no better than the best
                lcp = 1
            elif old[0] is not first and old[0] != first:
                continue
            elif (old[m - 1] is messages[m - 1] or old[m - 1] == messages[m - 1]) and old[:m] == messages[:m]:
                lcp = m
            elif m > 2 and old[: m - 1] == messages[: m - 1]:
                # perf: all but the last (the breakpoint the analysis placed on the snapshot's last
                # message), compared in one C pass; the last differs, or the branch above had taken it
                lcp = m - 1
            else:
                lcp = 2 if m > 1 else 1
                while lcp < m and (old[lcp] is messages[lcp] or old[lcp] == messages[lcp]):
                    lcp += 1
            if lcp > best_lcp:
                best, best_lcp = snap, lcp
                if lcp == n:
                    break
        if best is None:
            return None
        model: IncrementalRenderModel = self.render_model  # type: ignore[assignment]
        start = best_lcp
        if model.prefix_context(request, start) != model.prefix_context(best.request, start):
            return None
        # the last special piece *before* message ``start``'s first piece: the piece at that index in
        # the snapshot may be special while the new request's is text that merges with what precedes it
        t = bisect.bisect_left(best.cut_pieces, best.message_piece(start)) - 1
        if t < 0:
            return None
        return best, start, best.cut_pieces[t], t

    def _run(
        self,
        request: Mapping[str, Any],
        pieces: list[RenderedPiece],
        n_prompt: int,
        resume: tuple[_Snapshot, int, int, int] | None,
        offset: int,
        head: list[RenderedPiece],
    ) -> TokenizedRequest:
        """Tokenize ``pieces`` (the rendering from piece ``offset`` on), starting from the state of
        ``resume`` (a snapshot's state before its piece ``offset``) or from scratch."""
        state = _Run.begin(self, len(request["messages"]), resume)
        state.feed(pieces, n_prompt, offset)
        chunks = state.chunks
        if state.pending:
            chunks.append(self._ids_array(state.pending))
        tail = np.concatenate(chunks, dtype=np.int64) if chunks else np.zeros(0, np.int64)
        # perf: the tokens before ``pos`` are the snapshot's: the result is a view of its buffer, extended
        # by the new tokens (a new buffer when they differ from what the buffer holds past ``pos``)
        tokens, buffer, same = TokenBuffer.extend(
            resume[0].buffer if resume is not None else None, state.head_len, tail
        )
        if resume is not None:
            # the first tokens equal the snapshot's: all it holds when they are the same memory
            known = min(len(tokens), len(resume[0].tokens)) if same else state.head_len
            self.shared_prefix = (resume[0].tokens, known)
        result = _finish(tokens, state.starts, state.ends, state.first_message_pos, state.prompt_len)
        if self._incremental and self.snapshots > 0:
            last_message_piece = state.last_message_piece
            if resume is not None:
                last_message_piece = max(last_message_piece, resume[0].message_piece(resume[1]) - 1)
            self._remember(
                _Snapshot(
                    request=request,
                    messages=list(request["messages"]),
                    pieces=head + pieces,
                    cut_pieces=state.cut_pieces,
                    cut_tokens=state.cut_tokens,
                    first_piece=state.first_piece,
                    end_of_messages=last_message_piece + 1,
                    starts=state.starts,
                    ends=state.ends,
                    first_message_piece=state.first_message_piece,
                    first_message_pos=state.first_message_pos,
                    tokens=result.tokens,
                    buffer=buffer,
                ),
                resume[0] if resume is not None else None,
            )
        return result

    def _remember(self, snap: _Snapshot, replaces: _Snapshot | None) -> None:
        """Keep ``snap`` as the most recent snapshot; drop ``replaces`` when ``snap`` extends all of it."""
        if replaces is not None and len(snap.messages) >= len(replaces.messages):
            try:
                self._snapshots.remove(replaces)
            except ValueError:
                pass
        self._snapshots.append(snap)
        while len(self._snapshots) > self.snapshots:
            self._snapshots.pop(0)

    # -- the reference ------------------------------------------------------------------------------

    def tokenize_naive(
        self, request: Mapping[str, Any], *, completion: Mapping[str, Any] | None = None
    ) -> TokenizedRequest:
        """Reference tokenization: render the whole text and tokenize it in one go, splitting only at
        special tokens (and at the prompt's end), with no cache; map characters to tokens globally.
        """
        pieces, n_prompt = self._render(request, completion)
        full = "".join(p.text for p in pieces)
        # global char offset of every piece
        piece_char: list[int] = []
        c = 0
        for p in pieces:
            piece_char.append(c)
            c += len(p.text)
        prompt_chars = piece_char[n_prompt] if n_prompt < len(pieces) else c
        # cut points: special pieces and the prompt end
        ids: list[int] = []
        token_char: list[int] = []
        text_start: int | None = None
        for k in range(len(pieces) + 1):
            at = piece_char[k] if k < len(pieces) else len(full)
            cut = k == len(pieces) or pieces[k].special or k == n_prompt
            if cut and text_start is not None and at > text_start:
                seg_ids, seg_offsets = encode_with_offsets(self.tokenizer, full[text_start:at])
                ids += seg_ids
                token_char += [text_start + o for o in seg_offsets]
            if k == len(pieces):
                break
            if pieces[k].special:
                ids.append(self.special_id(pieces[k].text))
                token_char.append(at)
                text_start = None
            elif text_start is None or k == n_prompt:
                text_start = at
        n_messages = len(request["messages"])
        starts: list[int | None] = [None] * n_messages
        ends: list[int] = [0] * n_messages
        first_message_pos: int | None = None
        for k, p in enumerate(pieces):
            mi = p.message_index
            if mi is None:
                continue
            s = bisect.bisect_left(token_char, piece_char[k])
            e = s + 1 if p.special else bisect.bisect_left(token_char, piece_char[k] + len(p.text))
            if starts[mi] is None:
                starts[mi] = s
            ends[mi] = max(e, s)
            if first_message_pos is None:
                first_message_pos = s
        prompt_len = bisect.bisect_left(token_char, prompt_chars)
        return _finish(np.array(ids, dtype=np.int64), starts, ends, first_message_pos, prompt_len)


@attrs.define(slots=True, eq=False)
class _Run:
    """The state of one pass of :meth:`RequestTokenizer._run` over a request's pieces: the tokens so far
    (``chunks`` of ids, then the ``pending`` special ids), where each message starts and ends, where
    every special piece cuts the stream, and the text pieces of the segment being gathered (``run``;
    ``multi`` when they belong to more than one owner)."""

    owner: RequestTokenizer
    starts: list[int | None]  # per message: first token (raw, before _finish fills gaps)
    ends: list[int]
    first_piece: list[int]  # per message: index of its first piece (-1: none)
    cut_pieces: list[int]
    cut_tokens: list[int]
    pos: int = 0  # tokens so far
    head_len: int = 0  # tokens taken from the snapshot resumed from
    first_message_pos: int | None = None
    first_message_piece: int = -1
    last_message_piece: int = -1
    prompt_len: int = -1
    chunks: list[np.ndarray] = attrs.Factory(list)
    pending: list[int] = attrs.Factory(list)  # special ids not yet in chunks
    run: list[RenderedPiece] = attrs.Factory(list)  # text pieces of the current segment
    multi: bool = False  # does the run hold pieces of more than one owner?

    @classmethod
    def begin(
        cls, owner: RequestTokenizer, n_messages: int, resume: tuple[_Snapshot, int, int, int] | None
    ) -> _Run:
        """The state before the first piece: empty, or that of ``resume``'s snapshot before its piece ``j``."""
        state = cls(owner, [None] * n_messages, [0] * n_messages, [-1] * n_messages, [], [])
        if resume is not None:
            snap, start, j, t = resume
            state.pos = state.head_len = snap.cut_tokens[t]
            state.cut_pieces = snap.cut_pieces[:t]
            state.cut_tokens = snap.cut_tokens[:t]
            # messages come in order (IncrementalRenderModel): those before m0 were done before piece j
            m0 = bisect.bisect_left(snap.first_piece, j, 0, start)
            state.starts[:m0] = snap.starts[:m0]
            state.ends[:m0] = snap.ends[:m0]
            state.first_piece[:start] = snap.first_piece[:start]
            if 0 <= snap.first_message_piece < j:
                state.first_message_pos = snap.first_message_pos
                state.first_message_piece = snap.first_message_piece
        return state

    def feed(self, pieces: list[RenderedPiece], n_prompt: int, offset: int) -> None:
        """Take ``pieces`` (the rendering from piece ``offset`` on, the first ``n_prompt`` the prompt's)
        and flush the last segment; ``prompt_len`` is then known."""
        # perf: the per-piece loop reads locals (the containers never change identity); the scalars it
        # alone writes are written back at the end
        starts, ends, first_piece, run = self.starts, self.ends, self.first_piece, self.run
        cut_pieces, cut_tokens, pending = self.cut_pieces, self.cut_tokens, self.pending
        special_ids = self.owner._special
        special_id = self.owner.special_id
        cut = self.owner._cut_pieces
        flush = self.flush
        first_message_piece = self.first_message_piece
        last_message_piece = self.last_message_piece
        prompt_len = -1
        for k, piece in enumerate(pieces):
            g = offset + k  # index in the whole rendering
            mi = piece.message_index
            if mi is not None and k < n_prompt:
                if first_piece[mi] < 0:
                    first_piece[mi] = g
                if first_message_piece < 0:
                    first_message_piece = g
                last_message_piece = g
            if k == n_prompt:
                flush()
                prompt_len = self.pos
            if piece.special:
                if run:
                    flush()
                pos = self.pos
                cut_pieces.append(g)
                cut_tokens.append(pos)
                sid = special_ids.get(piece.text)
                pending.append(special_id(piece.text) if sid is None else sid)
                if mi is not None:
                    if starts[mi] is None:
                        starts[mi] = pos
                    ends[mi] = pos + 1
                    if self.first_message_pos is None:
                        self.first_message_pos = pos
                self.pos = pos + 1
            else:
                if run and cut and piece.text and run[-1].text and is_cut(run[-1].text, piece.text):
                    flush()
                if run and not self.multi and mi != run[0].message_index:
                    self.multi = True
                run.append(piece)
        flush()
        self.prompt_len = self.pos if prompt_len < 0 else prompt_len
        self.first_message_piece = first_message_piece
        self.last_message_piece = last_message_piece

    def flush(self) -> None:
        """Tokenize the text pieces gathered (one segment) and credit its tokens to their messages."""
        run = self.run
        if not run:
            return
        first = run[0]
        pos = self.pos
        count, offsets = self._encode(first.text if len(run) == 1 else "".join([p.text for p in run]))
        if not self.multi:  # one owner: the whole run is its
            mi = first.message_index
            if mi is not None:
                if self.starts[mi] is None:
                    self.starts[mi] = pos
                self.ends[mi] = pos + count
                if self.first_message_pos is None:
                    self.first_message_pos = pos
            self.pos = pos + count
            run.clear()
            return
        starts, ends = self.starts, self.ends
        for mi, s, e in _owner_spans(run, pos, offsets):
            if mi is not None:
                if starts[mi] is None:
                    starts[mi] = s
                ends[mi] = e
                if self.first_message_pos is None:
                    self.first_message_pos = s
        self.pos = pos + count
        run.clear()
        self.multi = False

    def _encode(self, text: str) -> tuple[int, np.ndarray | None]:
        """Add the tokens of ``text`` (after the pending special ids) to the chunks; returns how many
        there are and, for a run of several owners, the character offset where each token starts."""
        if not text:
            return 0, None
        owner, multi = self.owner, self.multi
        # perf: a short text recurs (separators, role headers): it is its own key, looked up here
        # without the call; the rest goes through _segment
        seg = owner._cache.get(text) if len(text) <= _SHORT_KEY and not multi else None
        if seg is not None:
            owner._cache.move_to_end(text)
            owner.hits += 1
        else:
            try:
                seg = owner._segment(text, need_offsets=multi)
            except LoneSurrogateError as exc:  # name the message the text comes from
                mi = next((p.message_index for p in self.run if LONE_SURROGATE.search(p.text)), None)
                where = "the completion or the template" if mi is None else f"messages[{mi}]"
                raise LoneSurrogateError(f"{where}: {exc}") from None
        if self.pending:
            self.chunks.append(owner._ids_array(self.pending))
            self.pending.clear()
        self.chunks.append(seg.ids)
        return len(seg.ids), seg.offsets


def _owner_spans(
    run: list[RenderedPiece], pos: int, offsets: np.ndarray | None
) -> list[tuple[int | None, int, int]]:
    """(message, first token, end token) of each piece of a segment of several owners starting at token
    ``pos``: a token belongs to the piece under its first character (``offsets``: where each token
    starts; None: no text, all at ``pos``)."""
    if offsets is None:
        return [(p.message_index, pos, pos) for p in run]
    spans: list[tuple[int | None, int, int]] = []
    char = 0
    for p in run:
        end_char = char + len(p.text)
        if p.message_index is not None:
            s = pos + (0 if char <= 0 else int(np.searchsorted(offsets, char)))
            e = pos + int(np.searchsorted(offsets, end_char))
            spans.append((p.message_index, s, max(e, s)))
        char = end_char
    return spans


def _finish(
    tokens: np.ndarray,
    starts: list[int | None],
    ends: list[int],
    first_message_pos: int | None,
    prompt_len: int,
) -> TokenizedRequest:
    n = len(starts)
    fixed: list[int]
    if None not in starts:  # perf: every message has a piece (the usual case): nothing to fill
        fixed = starts  # type: ignore[assignment]
    else:  # a message with no piece at all starts where the next message (by index) starts
        fixed = [0] * n
        ends = list(ends)  # the caller's list stays as it was (a snapshot keeps it raw)
        nxt = prompt_len
        for i in range(n - 1, -1, -1):
            s = starts[i]
            if s is None:
                fixed[i] = nxt
                ends[i] = nxt
            else:
                fixed[i] = s
                nxt = s
    header_len = prompt_len if first_message_pos is None else first_message_pos
    # every offset is a Python int (token counts and positions), the tokens an int64 array
    if tokens.dtype != np.int64 or tokens.flags.writeable:
        tokens = _readonly(np.asarray(tokens, dtype=np.int64))
    return TokenizedRequest.trusted(
        tokens,
        tuple(fixed),
        int(header_len),
        int(prompt_len),
        tuple(ends),
    )
