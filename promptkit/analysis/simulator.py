"""A provider-side prefix cache, simulated: a radix tree of token runs with TTL and LRU capacity.

:class:`RadixCache` stores token sequences in a compressed trie: each edge holds a *run* of tokens
(a numpy array), so a conversation of hundreds of calls is a handful of nodes, and matching a prompt
costs one vectorized comparison per edge. Every node knows when it expires (the latest
``last use + ttl`` of the entries through it), when it was last used (for LRU eviction) and which
call stored it last (perf: held by the node a refresh ends in, :mod:`promptkit.analysis._radix_node`);
an *exact* entry (Anthropic's breakpoints) is a mark at a node's end.

:class:`CacheSimulator` runs one cache model (:mod:`promptkit.tokens.cache_models`) over calls in time
order: look the call's prompt up, then store the call's entries (after the model's ``delay``), and
evict least-recently-used tokens beyond the model's ``capacity``. A call given its ``session`` and
the tokens it ``shared`` with that session's previous call resumes on the path that call stored:
it compares only its new tokens (perf: the ordered simulation costs the new tokens, not the prompts). The engine's *simulated* view uses
one simulator for all sessions, so a static head shared across sessions is credited as a real
provider credits it; the *consecutive* view uses a fresh one holding only the previous call.

Example::

    >>> import numpy as np
    >>> cache = RadixCache()
    >>> cache.insert(np.array([1, 2, 3, 4]), now=0.0, ttl=None, source="a#0")
    >>> m = cache.match(np.array([1, 2, 9]), now=1.0)
    >>> m.prefix_tokens, m.source, m.diverged
    (2, 'a#0', True)
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import operator
from collections.abc import Collection, Hashable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from promptkit.analysis._one_call import _stored_path
from promptkit.analysis._radix_node import _Node, absorb, alive, mark_used, settle, stamp, subtree
from promptkit.errors import UsageError
from promptkit.tokens.cache_models import CacheEntry, CacheModel, CachePlan

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.layout import LayoutEntry
    from promptkit.tokens.tokenize import TokenizedRequest

__all__ = ["CacheLookup", "CacheOutcome", "CacheSimulator", "RadixCache", "consecutive_outcome"]

_INF = math.inf
_NO_TOKENS = np.zeros(0, np.int64)  # the root's edge (read-only: shared by every cache)
_NO_TOKENS.flags.writeable = False
_DEPTH = operator.attrgetter("depth")


@attrs.frozen(slots=True)
class CacheLookup:
    """The result of matching a prompt against a :class:`RadixCache`.

    ``prefix_tokens``: the longest prefix of the prompt found in live cached content; ``source``: the
    call that last stored the deepest matched run (None when nothing matched); ``diverged``: whether
    the cached content continues past the match with a different token (the prompt *changed* there,
    as opposed to simply extending what was cached); ``exact_entries``: (length, source, ttl) of every
    live exact entry that is a prefix of the prompt (of those at the match's ``points``, given them)."""

    prefix_tokens: int = 0
    source: str | None = None
    diverged: bool = False
    exact_entries: tuple[tuple[int, str | None, float | None], ...] = ()


def _shared(a: np.ndarray, b: np.ndarray) -> int:
    """How many leading elements two arrays of the same length share (perf: the first mismatch by
    ``argmax`` of the comparison, which stops at the first True, rather than ``flatnonzero``)."""
    if not a.shape[0]:
        return 0
    differ = a != b
    k = int(differ.argmax())
    return k if differ[k] else int(a.shape[0])


def _known_equal(edge: np.ndarray, pos: int, known: tuple[np.ndarray, int] | None, m: int) -> int:
    """How many of ``edge``'s first ``m`` tokens are known to equal the prompt's from ``pos`` on: those
    before ``known[1]`` when ``edge`` is the memory of ``known[0]`` from ``pos`` on (0 otherwise)."""
    if known is None or pos >= known[1]:
        return 0
    array = known[0]
    owner = array if array.base is None else array.base
    if edge.base is not owner and edge is not array:  # not a view of the same memory: nothing known
        return 0
    # the edge starts at the array's element ``pos`` (perf: two one-element views overlap only there,
    # a cheaper test than reading both data pointers)
    if (
        array.dtype != edge.dtype
        or edge.strides != array.strides
        or not np.may_share_memory(edge[:1], array[pos : pos + 1])
    ):
        return 0
    return min(known[1] - pos, m, int(array.shape[0]) - pos)


class RadixCache:
    """A radix tree of token runs with per-node expiry, LRU ticks and a capacity in tokens.

    ``now`` arguments are seconds (any origin) or None when the time is unknown: then nothing
    expires. ``capacity`` (tokens) bounds the stored tokens; inserting beyond it evicts expired runs
    first, then the least recently used leaves (a leaf is trimmed token-exactly when only part of it
    must go).

    ``share_tokens``: keep read-only token arrays by reference instead of copying them (for a
    short-lived cache: a view keeps the whole array it comes from alive)."""

    def __init__(self, *, capacity: int | None = None, share_tokens: bool = False) -> None:
        if capacity is not None and capacity < 0:
            raise UsageError(f"capacity must be >= 0 or None, got {capacity}")
        self.capacity = capacity
        self.share_tokens = share_tokens
        self._root = _Node(_NO_TOKENS, None, 0)
        self._root.expires = _INF
        self._tokens = 0
        self._clock = itertools.count(1)
        # whether the last match stopped at, or passed, expired content (a run or an exact entry), and
        # whether any run was ever removed (evicted or expired away)
        self._blocked = False
        self._pruned = False
        self._marked = False  # whether an exact entry was ever marked
        # key -> the node where the last insert given that ``cursor`` key ended (see ``resume``)
        self._cursors: dict[Hashable, _Node] = {}
        # perf: key -> the nodes from the root to where that cursor ended (:meth:`_continued`), emptied
        # whenever a node's parent changes (a split, a run removed)
        self._paths: dict[Hashable, list[_Node]] = {}

    # -- inspection -----------------------------------------------------------------------------

    @property
    def stored_tokens(self) -> int:
        """Tokens held by the tree (live or expired but not yet evicted)."""
        return self._tokens

    def __len__(self) -> int:
        """Number of nodes (the root excluded)."""
        return sum(1 for _ in self._nodes()) - 1

    def _nodes(self) -> Iterator[_Node]:
        stack = [self._root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())

    def clear(self) -> None:
        """Drop every stored run. perf: memory: the nodes' links to their parents are cut, so the
        dropped nodes are freed by reference counting, with no cyclic collection."""
        for node in list(self._nodes()):
            node.children = {}
            node.parent = None
        self._root.parent = None
        self._tokens = 0
        self._cursors.clear()
        self._paths.clear()

    def _settled_nodes(self) -> Iterator[_Node]:
        """Every node, each with its exact values (the refreshes held below stale nodes taken)."""
        for child in self._root.children.values():
            settle(child)
        return self._nodes()

    def _path(self, key: Hashable) -> list[_Node] | None:
        """perf: the nodes from the root down to where the last insert with cursor ``key`` ended (None
        when that node was removed since). The path is kept per cursor, and the walk up stops where it
        ends (a session's next call adds a node or two to it); it is dropped whenever a node's parent
        changes. The caller reads the list, never changes it."""
        node = self._cursors.get(key)
        if node is None:
            return None
        kept = self._paths.get(key)
        stop = kept[-1] if kept else self._root
        path: list[_Node] = []
        while node is not None and node is not stop and node is not self._root:
            path.append(node)
            node = node.parent
        if node is None:
            return None
        path.reverse()
        if kept and node is stop:  # below the kept path
            kept.extend(path)
            path = kept
        self._paths[key] = path
        return path

    def _resume_path(self, resume: tuple[Hashable, int] | None) -> tuple[list[_Node], int] | None:
        """The nodes from the root to where the last insert with cursor ``resume[0]`` ended (none when
        it was removed since), and ``resume[1]``: its first tokens that the caller's tokens equal. A
        walk from the root is on that path while its ``i``-th node is the path's ``i``-th."""
        if resume is None or resume[1] <= 0:
            return None
        path = self._path(resume[0])
        return None if path is None else (path, resume[1])

    def _continued(self, resume: tuple[Hashable, int] | None, n: int) -> list[_Node] | None:
        """perf: the nodes from the root down to the leaf where the last insert with cursor ``resume[0]``
        ended, when a prompt of ``n`` tokens whose first ``resume[1]`` are that insert's covers that whole
        path (a session's next prompt, continuing its previous one): then a match or an insert walks it
        without comparing a token (a match reads the exact entries marked on it). None otherwise.

        The path holds the prompt's first ``depth`` tokens: ``resume[1]`` is at most what the insert
        stored, and a node's run only changes by being split (its lower part keeps its depth), trimmed
        from its end, or extended in place (its depth grows past what the insert stored)."""
        node = self._cursors.get(resume[0]) if resume is not None else None
        if resume is None or node is None or node.children or resume[1] < node.depth or n < node.depth:
            return None
        return self._path(resume[0])

    # -- matching -------------------------------------------------------------------------------

    def match(
        self,
        tokens: np.ndarray,
        now: float | None = None,
        *,
        touch: bool = True,
        known: tuple[np.ndarray, int] | None = None,
        resume: tuple[Hashable, int] | None = None,
        points: Collection[int] | None = None,
    ) -> CacheLookup:
        """Match ``tokens`` against live content; mark the matched runs used (LRU) when ``touch``.

        ``known=(array, k)``: the caller knows that ``tokens[:k]`` equals ``array[:k]``; a stored run
        that is that very memory (a cache with ``share_tokens``) is then compared from ``k`` on only.
        ``resume=(key, k)``: the caller knows that ``tokens[:k]`` equals the first ``k`` tokens of what
        the last :meth:`insert` with ``cursor=key`` stored; the runs on that insert's path are then
        compared from ``k`` on only (perf: a session's next prompt costs its new tokens).
        ``points``: list only the exact entries of these lengths (a plan's lookup points; perf: a
        continuing prompt reads the entries there, not every one on its path)."""
        tokens = np.asarray(tokens, dtype=np.int64)
        n = int(tokens.shape[0])
        continued = self._continued(resume, n)
        # a parent's expiry is at least its child's: the path is alive where its leaf is
        if continued is not None and (now is None or continued[-1].expires >= now):
            # the prompt continues past a live leaf: it reads that path and stops there (no child to go
            # on to, nothing diverges), and the exact entries marked on it, root first
            return self._continue_match(continued, now, touch, points)
        on_path = self._resume_path(resume)
        wanted = None if points is None else frozenset(points)
        node = self._root
        pos = 0
        diverged = False
        exact: list[tuple[int, str | None, float | None]] = []
        path: list[_Node] = []
        blocked = False
        while pos < n:
            child = node.children.get(int(tokens[pos]))
            if child is None or not alive(child, now):
                # an expired run stops the match here; an expired exact entry met before still counts
                blocked = blocked or child is not None
                diverged = any(alive(c, now) for c in node.children.values())
                break
            edge = child.edge
            m = min(edge.shape[0], n - pos)
            skip = _known_equal(edge, pos, known, m)
            if on_path is not None and len(path) < len(on_path[0]) and on_path[0][len(path)] is child:
                skip = max(skip, min(on_path[1] - pos, m))
            k = skip + _shared(edge[skip:m], tokens[pos + skip : pos + m])
            pos += k
            path.append(child)
            if k < edge.shape[0]:
                diverged = k < m
                break
            if child.mark_expires > -_INF:
                if now is not None and child.mark_expires < now:
                    blocked = True
                elif wanted is None or child.depth in wanted:
                    exact.append((child.depth, child.mark_source, child.mark_ttl))
            node = child
        self._blocked = blocked
        if touch and path:
            mark_used(path[-1], next(self._clock))
        # the call that last stored the deepest run matched
        source = settle(path[-1]).source if path else None
        return CacheLookup(pos, source, diverged, tuple(exact))

    def _continue_match(
        self, path: list[_Node], now: float | None, touch: bool, points: Collection[int] | None
    ) -> CacheLookup:
        """The match of a prompt that continues past the live leaf of ``path`` (:meth:`_continued`):
        what the walk of :meth:`match` finds there, without comparing a token. perf: with ``points``,
        only the nodes at those depths are read (found by bisection: depths grow down the path), and
        the match is taken as having passed an expired exact entry wherever it may have (then a
        caller that needs to know asks the cache read with nothing expired)."""
        leaf = path[-1]
        exact: list[tuple[int, str | None, float | None]] = []
        blocked = False
        if points is None:
            for p in path:  # root first, as the walk meets them
                if p.mark_expires > -_INF:
                    if now is None or p.mark_expires >= now:
                        exact.append((p.depth, p.mark_source, p.mark_ttl))
                    else:  # an expired exact entry: the match passed it
                        blocked = True
        else:
            blocked = now is not None and self._marked
            for depth in sorted({d for d in points if d > 0}):
                if depth > leaf.depth:
                    break
                p = path[bisect.bisect_left(path, depth, key=_DEPTH)]
                if p.depth == depth and p.mark_expires > -_INF and (now is None or p.mark_expires >= now):
                    exact.append((depth, p.mark_source, p.mark_ttl))
        self._blocked = blocked
        if touch:
            mark_used(leaf, next(self._clock))
        return CacheLookup(leaf.depth, leaf.source, False, tuple(exact))

    # -- inserting ------------------------------------------------------------------------------

    def _split(self, child: _Node, k: int) -> _Node:
        """Split ``child``'s edge after ``k`` tokens; return the new upper node."""
        parent = child.parent
        assert parent is not None
        self._paths.clear()  # the paths through ``child`` gain ``upper``
        upper = _Node(child.edge[:k].copy(), parent, child.depth - child.edge.shape[0] + k)
        # what was held for ``child`` was held for the run's upper part (the same refreshes passed it)
        upper.expires, upper.tick, upper.source, upper.written = child.expires, child.tick, child.source, child.written
        upper.stale = child.stale
        child.edge = child.edge[k:].copy()
        child.buffer = None
        child.parent = upper
        upper.children[int(child.edge[0])] = child
        parent.children[int(upper.edge[0])] = upper
        return upper

    def insert(
        self,
        tokens: np.ndarray,
        now: float | None = None,
        *,
        ttl: float | None = None,
        source: str | None = None,
        exact: bool = False,
        resume: tuple[Hashable, int] | None = None,
        cursor: Hashable | None = None,
        relabel: bool = True,
    ) -> None:
        """Store ``tokens`` (alive until ``now + ttl``; forever when ``ttl`` or ``now`` is None).

        With ``exact``, also mark an exact entry of length ``len(tokens)``. Runs already stored are
        refreshed (expiry, LRU, and the source unless not ``relabel``: a read's refresh); then the
        capacity is enforced. ``cursor``: a key under which the cache remembers where this insert ended
        (for a later ``resume``, see :meth:`match`).

        perf: a run that ends in a leaf the insert refreshed, with nothing marked there, is extended
        in place (into spare room: a session's growing prompt is one run, not one node per call) when
        that is indistinguishable from a new child: the same expiry and source, and no capacity (whose
        LRU order would tell a partly used run from two runs)."""
        tokens = np.asarray(tokens, dtype=np.int64)
        n = int(tokens.shape[0])
        if n == 0:
            return
        expires = _INF if ttl is None or now is None else now + ttl
        tick = next(self._clock)
        node = self._root
        pos = 0
        continued = self._continued(resume, n)
        if continued is not None:  # the walk below would refresh that path and grow its leaf
            node, pos = self._extend(continued, tokens, expires, tick, source, relabel), n
        on_path = self._resume_path(resume) if continued is None else None
        walked = 0
        while pos < n:
            first = int(tokens[pos])
            child = node.children.get(first)
            if child is None:
                if node is not self._root:  # the walk refreshed the path to ``node``, then grows past it
                    stamp(node, expires, tick, source, relabel)
                node = self._grow(node, tokens, pos, expires, tick, source)
                break
            edge = child.edge
            m = min(edge.shape[0], n - pos)
            on = on_path is not None and walked < len(on_path[0]) and on_path[0][walked] is child
            skip = max(min(on_path[1] - pos, m), 0) if on and on_path is not None else 0
            k = skip + _shared(edge[skip:m], tokens[pos + skip : pos + m])
            if k < edge.shape[0]:
                child = self._split(child, k)
            node = child
            pos += k
            walked += 1
        else:
            if continued is None:  # the walk refreshed the path to the node it ends in
                stamp(node, expires, tick, source, relabel)
        if exact:
            self._marked = True
            node.mark_source, node.mark_ttl = source, ttl
            node.mark_expires = max(node.mark_expires, expires)
        if cursor is not None:
            self._cursors[cursor] = node
        if self.capacity is not None and self._tokens > self.capacity:
            self._evict(self._tokens - self.capacity, now)

    def _extend(
        self, path: list[_Node], tokens: np.ndarray, expires: float, tick: int, source: str | None,
        relabel: bool = True
    ) -> _Node:
        """Store ``tokens`` (int64) along a continuation's ``path`` (:meth:`_continued`, which they
        cover): refresh the path (held by its leaf), grow its leaf by the tokens past it; the node
        they end in."""
        leaf = path[-1]
        stamp(leaf, expires, tick, source, relabel)
        if tokens.shape[0] > leaf.depth:
            return self._grow(leaf, tokens, leaf.depth, expires, tick, source)
        return leaf

    def _grow(
        self, node: _Node, tokens: np.ndarray, pos: int, expires: float, tick: int, source: str | None
    ) -> _Node:
        """Store ``tokens[pos:]`` below ``node``, which the write refreshed (a new leaf, or ``node``'s
        run extended); the node they end in."""
        n = int(tokens.shape[0])
        self._tokens += n - pos
        tail = tokens[pos:]
        if (
            node is not self._root
            and not node.children
            and node.mark_expires == -_INF
            and node.expires == expires
            and node.source == source
            and self.capacity is None
        ):
            size, extra = int(node.edge.shape[0]), n - pos
            if self.share_tokens and not tokens.flags.writeable:
                # the walk matched the whole run: it equals tokens[pos - size : pos], so the run extended
                # is a view of the caller's read-only tokens (perf: memory: a session's growing prompt,
                # a view of its token buffer, is held once, and nothing is copied)
                node.edge, node.buffer, node.depth = tokens[pos - size : n], None, n
                return node
            buffer = node.buffer
            if buffer is None or buffer.shape[0] < size + extra:
                buffer = np.empty(max(2 * (size + extra), 64), np.int64)
                buffer[:size] = node.edge
            buffer[size : size + extra] = tail
            node.edge, node.buffer, node.depth = buffer[: size + extra], buffer, n
            return node
        leaf = _Node(tail if self.share_tokens and not tokens.flags.writeable else tail.copy(), node, n)
        node.children[int(tail[0])] = leaf
        leaf.expires, leaf.tick, leaf.source, leaf.written = expires, tick, source, tick
        return leaf

    # -- eviction -------------------------------------------------------------------------------

    def _evict(self, excess: int, now: float | None) -> None:
        """Drop ``excess`` tokens: expired leaves first, then least recently used ones."""

        def key(node: _Node) -> tuple[int, int, int]:
            return (0 if not alive(node, now) else 1, node.tick, id(node))  # a leaf: its values exact

        self._pruned = True
        self._paths.clear()  # runs are removed
        heap = [(key(n), n) for n in self._nodes() if n is not self._root and not n.children]
        heapq.heapify(heap)
        while excess > 0 and heap:
            _, leaf = heapq.heappop(heap)
            size = int(leaf.edge.shape[0])
            parent = leaf.parent
            assert parent is not None
            if size > excess:  # trim the leaf's tail
                leaf.edge, leaf.buffer = leaf.edge[: size - excess].copy(), None
                leaf.depth -= excess
                leaf.mark_expires, leaf.mark_source, leaf.mark_ttl = -_INF, None, None
                self._tokens -= excess
                return
            absorb(parent, leaf)  # the refreshes held by the leaf passed its parent
            del parent.children[int(leaf.edge[0])]
            leaf.parent = None  # removed: no cursor resumes from it
            self._tokens -= size
            excess -= size
            if parent is not self._root and not parent.children:
                heapq.heappush(heap, (key(parent), parent))

    def expire(self, now: float) -> int:
        """Remove every run expired at ``now``; return the tokens freed."""
        freed = 0
        stack = [self._root]
        while stack:
            node = stack.pop()
            for first, child in list(node.children.items()):
                if not alive(child, now):  # settled: what it held passed ``node``
                    absorb(node, child)
                    freed += sum(int(d.edge.shape[0]) for d in subtree(child))
                    del node.children[first]
                    child.parent = None
                else:
                    stack.append(child)
        self._tokens -= freed
        self._pruned = self._pruned or freed > 0
        self._paths = self._paths if not freed else {}  # runs were removed
        return freed

    def forget_expired(self, before: float) -> int:
        """Remove every run whose entries all expired before ``before``, as if it had never been stored
        (unlike :meth:`expire`, a later read does not count it as lost); return the tokens freed. The
        removed nodes' links are cut, so reference counting frees them (memory: no cyclic collection)."""
        freed = 0
        stack = [self._root]
        while stack:
            node = stack.pop()
            for first, child in list(node.children.items()):
                if not alive(child, before):  # settled: what it held passed ``node``
                    absorb(node, child)
                    del node.children[first]
                    for gone in list(subtree(child)):
                        freed += int(gone.edge.shape[0])
                        gone.children, gone.parent = {}, None
                else:
                    stack.append(child)
        self._tokens -= freed
        self._paths = self._paths if not freed else {}  # runs were removed
        return freed


# ---------------------------------------------------------------------------------------------------
# a cache model over a radix cache


@attrs.frozen(slots=True)
class CacheOutcome:
    """What the cache did for one call: the shared prefix, the predicted cached tokens, the tokens
    written (None when the model does not report writes), where the hit came from and whether the
    prompt diverged from cached content (at ``prefix_tokens``)."""

    prefix_tokens: int
    cached_tokens: int
    write_tokens: int | None
    source: str | None
    diverged: bool
    # what the call would have read had nothing expired (TTL) / been evicted (capacity): None when the
    # model has no TTL / no capacity (nothing can expire / be evicted); ``lost_source`` is the call that
    # stored the expired or evicted content (for the idle gap)
    unexpired_cached_tokens: int | None = None
    unevicted_cached_tokens: int | None = None
    lost_source: str | None = None


@attrs.frozen(slots=True)
class _Pending:
    available: float
    order: int
    tokens: np.ndarray = attrs.field(eq=False)
    plan: CachePlan = attrs.field(eq=False)
    stored_at: float | None = attrs.field(eq=False)
    source: str | None = attrs.field(eq=False)
    resume: tuple[Hashable, int, int | None, int] | None = attrs.field(eq=False, default=None)


def _longest_first(entry: CacheEntry) -> int:
    return -entry.length


def _keeps_all(model: CacheModel) -> bool:
    """Whether a simulator of ``model`` needs the shadow of everything stored (to tell an expiry or an
    eviction apart from "never stored"): a tree of its own, or, without a capacity, the cache itself
    read with nothing expired (see :class:`CacheSimulator`)."""
    return model.ttl is not None or model.capacity is not None or model.exact_entries


class CacheSimulator:
    """One cache model applied over a :class:`RadixCache`, call after call, in time order.

    :meth:`lookup` then :meth:`store` for each call (or :meth:`step`). Entries become readable
    ``model.delay`` seconds after the call (immediately when the delay is 0 or the time unknown).
    Calls must come in non-decreasing time; times may be None (unknown: nothing expires).
    ``share_tokens`` is passed to the :class:`RadixCache`. The simulator only lets content expire in
    its ``cache`` (a capacity evicts): without a capacity, the expired content it still holds is what
    tells an expiry from "never stored" (``unexpired_cached_tokens``), so a caller that prunes it
    (:meth:`RadixCache.expire`) loses that figure's expired part.

    Example::

        >>> import numpy as np
        >>> from promptkit.tokens.cache_models import get_cache_model, CachePlan, CacheEntry
        >>> sim = CacheSimulator(get_cache_model("unit-prefix"))
        >>> tokens = np.arange(200)
        >>> sim.store(tokens, CachePlan(130, (CacheEntry(200),)), now=0.0, source="s#0")
        >>> sim.lookup(np.arange(300), CachePlan(300), now=5.0).cached_tokens
        192
    """

    def __init__(self, model: CacheModel, *, share_tokens: bool = False) -> None:
        self.model = model
        self.cache = RadixCache(capacity=model.capacity, share_tokens=share_tokens)
        # shadow caches that tell an expiry or an eviction apart from "never stored": one that keeps
        # everything (no TTL, no capacity), one with the TTL but no capacity; made only when needed.
        # perf: memory: a cache without capacity never drops a run or an exact entry (this simulator lets
        # them expire, it never removes them), and every write reaches it as it reaches the shadow: the
        # cache itself, read with nothing expired (``now=None``), is the shadow that keeps everything,
        # and none is kept beside it. What only the cache gets, a read's refresh of the exact entry it
        # read, stores nothing new and relabels no run (``relabel=False``): a later call that finds
        # that entry expired names the call that stored it, as the shadow would.
        self._all_in_cache = _keeps_all(model) and model.capacity is None
        keep_all = _keeps_all(model) and not self._all_in_cache
        self._keep_all = RadixCache(share_tokens=share_tokens) if keep_all else None
        self._keep_ttl = RadixCache(share_tokens=share_tokens) if model.capacity is not None else None
        self._pending: list[tuple[float, int, _Pending]] = []
        self._order = itertools.count()
        # per session: the order number of its latest store, and (order number, tokens) of its latest
        # written one (a prompt resumes from the runs its session's previous call wrote, see lookup)
        self._latest: dict[Hashable, int] = {}
        self._written: dict[Hashable, tuple[int, int]] = {}
        # perf: the cache and its shadows, listed once (:meth:`_caches`), and whether :meth:`step` may take
        # its continuation's shortcut: every write is immediate and nothing is evicted (no shadow)
        self._all_caches = tuple(self._caches())
        self._continues = model.delay == 0 and model.capacity is None

    def _caches(self) -> Iterator[tuple[RadixCache, bool]]:
        """The cache and its shadows, each with whether it keeps the entries' TTLs."""
        yield self.cache, True
        if self._keep_all is not None:
            yield self._keep_all, False
        if self._keep_ttl is not None:
            yield self._keep_ttl, True

    def _release(self, now: float | None) -> None:
        while self._pending and (now is None or self._pending[0][0] <= now):
            _, _, p = heapq.heappop(self._pending)
            self._write(p.tokens, p.plan, p.stored_at, p.source, p.resume)

    def _resume(
        self, session: Hashable | None, shared: int, after: int | None
    ) -> tuple[Hashable, int] | None:
        """``(session, k)`` for :meth:`RadixCache.match`/``insert`` when the session's latest written
        call is the one numbered ``after`` (the prompt's first ``shared`` tokens are that call's)."""
        written = self._written.get(session) if session is not None else None
        if written is None or written[0] != after or min(shared, written[1]) <= 0:
            return None
        return session, min(shared, written[1])

    def _write(
        self,
        tokens: np.ndarray,
        plan: CachePlan,
        now: float | None,
        source: str | None,
        resume: tuple[Hashable, int, int | None, int] | None = None,
    ) -> None:
        """Insert the plan's entries, longest first (``resume``: session, shared tokens, the number of
        the session's previous store and of this one)."""
        hint = self._resume(resume[0], resume[1], resume[2]) if resume is not None else None
        longest = 0
        entries = plan.entries
        for entry in sorted(entries, key=_longest_first) if len(entries) > 1 else entries:
            if entry.length > 0:
                cursor = resume[0] if resume is not None and not longest else None
                run = tokens[: entry.length]
                longest = longest or int(run.shape[0])
                for cache, keeps_ttl in self._all_caches:
                    cache.insert(
                        run,
                        now,
                        ttl=entry.ttl if keeps_ttl else None,
                        source=source,
                        exact=entry.exact,
                        resume=hint,
                        cursor=cursor,
                    )
        if resume is not None:
            self._written[resume[0]] = (resume[3], longest)

    def _shadow(
        self,
        cache: RadixCache | None,
        prompt: np.ndarray,
        plan: CachePlan,
        now: float | None,
        known: tuple[np.ndarray, int] | None = None,
        resume: tuple[Hashable, int] | None = None,
    ) -> tuple[int | None, str | None]:
        """(cached tokens, source) of ``prompt`` in a shadow cache (None without one)."""
        if cache is None:
            return None, None
        found = cache.match(prompt, now, touch=False, known=known, resume=resume, points=plan.lookup_points)
        cached = self.model.cached_tokens(plan, found.prefix_tokens, [n for n, _, _ in found.exact_entries])
        return cached, found.source

    def lookup(
        self,
        tokens: np.ndarray,
        plan: CachePlan,
        now: float | None = None,
        *,
        known: tuple[np.ndarray, int] | None = None,
        session: Hashable | None = None,
        shared: int = 0,
    ) -> CacheOutcome:
        """Match the prompt ``tokens[:plan.prompt_len]`` and apply the model's rules (``known``: see
        :meth:`RadixCache.match`). ``session``: the call's session, whose previous call's tokens the
        prompt's first ``shared`` tokens are (perf: the match then compares the new tokens only; the
        outcome is the same)."""
        self._release(now)
        prompt = np.asarray(tokens)[: plan.prompt_len]
        resume = self._resume(session, shared, self._latest.get(session)) if session is not None else None
        # the model reads an exact entry only at a lookup point (where it has them)
        found = self.cache.match(prompt, now, known=known, resume=resume, points=plan.lookup_points)
        blocked = self.cache._blocked
        exact = [length for length, _, _ in found.exact_entries]
        cached = self.model.cached_tokens(plan, found.prefix_tokens, exact)
        source = found.source
        if plan.lookup_points is not None:  # exact entries: the source is the entry read
            read = next(((s, ttl) for length, s, ttl in found.exact_entries if length == cached), None)
            source = None if read is None else read[0]
            if read is not None and cached > 0:  # a read refreshes the entry's TTL
                # the runs keep the call that stored them (the cache is also the shadow, see __init__)
                self.cache.insert(prompt[:cached], now, ttl=read[1], source=read[0], exact=True,
                                  resume=resume, relabel=False)  # fmt: skip
        write = self.model.write_tokens(plan, cached)
        unevicted, evicted_source = self._shadow(self._keep_ttl, prompt, plan, now, known, resume)
        unexpired: int | None
        expired_source: str | None
        if (self._keep_all is not None or self._all_in_cache) and not blocked and not self.cache._pruned:
            # perf: while nothing was ever removed from the cache, the cache that keeps everything holds
            # the same runs and exact entries: when nothing expired was met, it reads what was read
            unexpired, expired_source = cached, None
        elif self._all_in_cache:
            unexpired, expired_source = self._shadow(self.cache, prompt, plan, None, known, resume)
        else:
            unexpired, expired_source = self._shadow(self._keep_all, prompt, plan, now, known, resume)
        lost = None
        if unevicted is not None and unevicted > cached:
            lost = evicted_source
        elif unexpired is not None and unexpired > cached:
            lost = expired_source
        return CacheOutcome(
            found.prefix_tokens,
            cached,
            write,
            source if cached > 0 else None,
            found.diverged,
            unexpired,
            unevicted,
            lost,
        )

    def clear(self) -> None:
        """Drop everything stored, written or pending (see :meth:`RadixCache.clear`)."""
        for cache, _ in self._caches():
            cache.clear()
        self._pending.clear()
        self._latest.clear()
        self._written.clear()

    def sources(self) -> set[str]:
        """The calls that a stored run or exact entry names as the one that stored it last (in the cache
        and its shadows, writes still pending included): the only calls a later lookup can name, as
        ``source`` or ``lost_source``. A replay keeps what it knows of these calls and may let go of
        the others (memory: :mod:`promptkit.analysis.plans.timeline`).

        >>> from promptkit.tokens.cache_models import get_cache_model, CachePlan, CacheEntry
        >>> sim = CacheSimulator(get_cache_model("unit-prefix"))
        >>> sim.store(np.arange(200), CachePlan(200, (CacheEntry(200),)), now=0.0, source="s#0")
        >>> sim.store(np.arange(300), CachePlan(300, (CacheEntry(300),)), now=1.0, source="s#1")
        >>> sorted(sim.sources())
        ['s#1']
        """
        found: set[str] = {p.source for _, _, p in self._pending if p.source is not None}
        for cache, _ in self._caches():
            for node in cache._settled_nodes():
                if node.source is not None:
                    found.add(node.source)
                if node.mark_source is not None:
                    found.add(node.mark_source)
        return found

    def forget_expired(self, before: float) -> int:
        """Forget the content whose entries all expired before ``before`` (in the cache and the shadow
        with the TTL; the shadow that keeps everything without one, made where a capacity evicts, is
        kept): a later call that would have read it reads it as never stored. Return the tokens freed
        (memory: :data:`~promptkit.analysis.replay.FORGET_AFTER`)."""
        freed = 0
        for cache, keeps_ttl in self._caches():
            if keeps_ttl:
                freed += cache.forget_expired(before)
        return freed

    def end_session(self, session: Hashable) -> None:
        """Forget how ``session``'s next call would resume (its latest store and where it ended in each
        cache): call after its last call (memory: a replay over many sessions holds only those open)."""
        self._latest.pop(session, None)
        self._written.pop(session, None)
        for cache, _ in self._caches():
            cache._cursors.pop(session, None)
            cache._paths.pop(session, None)

    def store(
        self,
        tokens: np.ndarray,
        plan: CachePlan,
        now: float | None = None,
        source: str | None = None,
        *,
        session: Hashable | None = None,
        shared: int = 0,
    ) -> None:
        """Write the call's entries (readable from ``now + model.delay``); ``session`` and ``shared``:
        see :meth:`lookup`."""
        tokens = np.asarray(tokens)
        order = next(self._order)
        resume = None
        if session is not None:
            resume = (session, shared, self._latest.get(session), order)
            self._latest[session] = order
        if self.model.delay > 0 and now is not None:
            p = _Pending(now + self.model.delay, order, tokens, plan, now, source, resume)
            heapq.heappush(self._pending, (p.available, p.order, p))
        else:
            self._write(tokens, plan, now, source, resume)

    def step(
        self,
        tokens: np.ndarray,
        plan: CachePlan,
        now: float | None = None,
        source: str | None = None,
        *,
        session: Hashable | None = None,
        shared: int = 0,
    ) -> CacheOutcome:
        """:meth:`lookup` then :meth:`store` (``session``, ``shared``: see :meth:`lookup`).

        perf: a session's prompt that continues past the live end of what its previous call wrote, with
        nothing marked or expired on that path (the common step of a conversation), in a cache that
        writes at once and evicts nothing, is looked up here in a few operations: it reads that whole
        path and stops (what :meth:`lookup` finds through :meth:`RadixCache.match`'s same shortcut; the
        shadow that keeps everything reads the same live path), and is stored as :meth:`store` stores
        it: one entry that reaches past that path (not exact) refreshes it and grows its leaf
        (:meth:`RadixCache._extend`, what :meth:`RadixCache.insert` does on the same path)."""
        cache = self.cache
        if self._continues and session is not None and plan.lookup_points is None:
            tokens = np.asarray(tokens)
            latest = self._latest.get(session)
            resume = self._resume(session, shared, latest)
            path = cache._continued(resume, min(plan.prompt_len, int(tokens.shape[0])))
            if (
                path is not None
                # no exact entry to read; the path is alive where its leaf is
                and (not cache._marked or all(p.mark_expires == -_INF for p in path))
                and (now is None or path[-1].expires >= now)
            ):
                model = self.model
                cached = model.cached_tokens(plan, path[-1].depth, ())
                outcome = CacheOutcome(
                    path[-1].depth,
                    cached,
                    model.write_tokens(plan, cached),
                    path[-1].source if cached > 0 else None,
                    False,
                    cached if self._all_in_cache else None,
                )
                order = next(self._order)
                self._latest[session] = order
                entries = plan.entries
                n = entries[0].length if len(entries) == 1 and not entries[0].exact else 0
                if n < path[-1].depth:  # the store walks its own way
                    self._write(tokens, plan, now, source, (session, shared, latest, order))
                    return outcome
                ttl = entries[0].ttl
                expires = _INF if ttl is None or now is None else now + ttl
                run = np.asarray(tokens[:n], dtype=np.int64)
                cache._cursors[session] = cache._extend(path, run, expires, next(cache._clock), source)
                self._written[session] = (order, n)
                return outcome
        outcome = self.lookup(tokens, plan, now, session=session, shared=shared)
        self.store(tokens, plan, now, source, session=session, shared=shared)
        return outcome

    def plan(
        self,
        tokenized: TokenizedRequest,
        request: Mapping[str, Any],
        layout: Sequence[LayoutEntry] | None = None,
    ) -> CachePlan:
        """The model's plan for a tokenized request (a shortcut)."""
        return self.model.plan(tokenized, request, layout)


def _match_one(
    depths: Sequence[int],
    expires: Sequence[float],
    marks: Sequence[tuple[float, str | None, float | None] | None],
    source: str | None,
    prompt: np.ndarray,
    now: float | None,
    shared: int,
) -> tuple[CacheLookup, bool]:
    """What :meth:`RadixCache.match` finds in a cache whose runs are prefixes of one array: a path of
    nodes ending at ``depths`` (ascending), each alive while ``now <= expires[j]`` and with
    the exact entry ``marks[j]`` (expiry, source, ttl) or None; ``shared`` is how many leading tokens
    ``prompt`` and ``stored`` share. Returns the lookup and whether the match was blocked by expired
    content."""
    n = int(prompt.shape[0])
    pos = 0
    start = 0
    diverged = blocked = False
    found_source: str | None = None
    exact: list[tuple[int, str | None, float | None]] = []
    for depth, alive_until, mark in zip(depths, expires, marks, strict=True):
        if start >= n:
            break
        if shared <= start:  # the prompt's next token is not the run's: the run continues, unread
            diverged = now is None or alive_until >= now
            break
        if now is not None and alive_until < now:
            blocked = True
            break
        pos = min(shared, depth, n)
        found_source = source
        if pos < depth:
            diverged = pos < min(depth, n)
            break
        if mark is not None:
            if now is None or mark[0] >= now:
                exact.append((depth, mark[1], mark[2]))
            else:
                blocked = True
        start = depth
    return CacheLookup(pos, found_source, diverged, tuple(exact)), blocked


def consecutive_outcome(
    model: CacheModel,
    stored: tuple[np.ndarray, CachePlan, float | None, str | None] | None,
    tokens: np.ndarray,
    plan: CachePlan,
    now: float | None = None,
    *,
    known: tuple[np.ndarray, int] | None = None,
) -> CacheOutcome:
    """The outcome of a call against a cache that holds only what one earlier call stored (``stored``:
    its tokens, plan, time and source; None: an empty cache), as the consecutive view asks.

    Equal to ``CacheSimulator(model)``, then ``store(*stored)``, then ``lookup(tokens, plan, now,
    known=known)``. perf: the stored runs are prefixes of one array, so the match is one comparison of
    two arrays and a walk over the plan's entries, with no tree; a model with a delay, a capacity or
    exact-entry reads goes through a throw-away simulator, cleared after (no reference cycles are
    left for the cyclic garbage collector).

    >>> import numpy as np
    >>> from promptkit.tokens.cache_models import get_cache_model, CachePlan, CacheEntry
    >>> model = get_cache_model("unit-prefix")
    >>> stored = (np.arange(200), CachePlan(130, (CacheEntry(200),)), 0.0, "s#0")
    >>> consecutive_outcome(model, stored, np.arange(300), CachePlan(300), 5.0).cached_tokens
    192
    """
    if (
        stored is None
        or model.delay > 0
        or model.capacity is not None
        or plan.lookup_points is not None
        or stored[1].lookup_points is not None
    ):
        sim = CacheSimulator(model, share_tokens=True)
        if stored is not None:
            sim.store(*stored)
        try:
            return sim.lookup(tokens, plan, now, known=known)
        finally:
            sim.clear()
    array, stored_plan, stored_at, source = stored
    array = np.asarray(array)
    depths, expires, marks = _stored_path(stored_plan, int(array.shape[0]), stored_at, source)
    prompt = np.asarray(tokens)[: plan.prompt_len]
    reach = min(int(prompt.shape[0]), depths[-1]) if depths else 0
    skip = 0
    if known is not None and known[0] is array:
        skip = min(known[1], reach)
    shared = skip + _shared(array[skip:reach], prompt[skip:reach])
    found, blocked = _match_one(depths, expires, marks, source, prompt, now, shared)
    exact = [length for length, _, _ in found.exact_entries]
    cached = model.cached_tokens(plan, found.prefix_tokens, exact)
    write = model.write_tokens(plan, cached)
    unexpired: int | None = None
    expired_source: str | None = None
    if _keeps_all(model):
        if not blocked:
            unexpired = cached
        else:  # the shadow cache stores the same runs with no TTL: nothing in it expires
            everything, _ = _match_one(depths, [_INF] * len(depths),
                                       [None if m is None else (_INF, m[1], None) for m in marks],
                                       source, prompt, None, shared)  # fmt: skip
            unexpired = model.cached_tokens(
                plan, everything.prefix_tokens, [n for n, _, _ in everything.exact_entries]
            )
            expired_source = everything.source
    lost = expired_source if unexpired is not None and unexpired > cached else None
    return CacheOutcome(
        found.prefix_tokens,
        cached,
        write,
        found.source if cached > 0 else None,
        found.diverged,
        unexpired,
        None,
        lost,
    )
