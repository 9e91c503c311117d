"""The node of :class:`promptkit.analysis.simulator.RadixCache`, and its refresh kept where it ends (a
private helper of that module, kept apart to keep that module's size).

A write or a read refreshes every run on its path from the root: the latest expiry, the LRU tick
and (a write) the call that stored it. perf: a refresh is held by the node the path ends in
(:func:`stamp`, :func:`mark_used`); the nodes above it are marked ``stale`` (up to the first one already
stale: a session's next call marks one or two nodes, not its whole path) and take it when one of
them is read (:func:`settle`, :func:`alive`), or when a node below is removed (:func:`absorb`). This
is exact because a node's values are the most recent of the refreshes through it, and each of those
ended in the node or below it: its expiry is the latest of its subtree's, its tick the newest, its
source that of the newest write. Stale nodes are closed upwards (a stale node's parent is stale,
the root is never marked), so a node that is not stale holds its exact values.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

_INF = math.inf


class _Node:
    """A radix-tree node: the run of tokens on the edge into it, and its bookkeeping."""

    __slots__ = (
        "buffer", "children", "depth", "edge", "expires", "mark_expires", "mark_source", "mark_ttl", "parent",
        "source", "stale", "tick", "written",
    )  # fmt: skip

    def __init__(self, edge: np.ndarray, parent: _Node | None, depth: int) -> None:
        self.edge = edge  # tokens on the edge from the parent (int64: an owned copy, or a read-only view)
        # the owned array ``edge`` is the start of, with room to grow (a run extended in place), or None
        self.buffer: np.ndarray | None = None
        self.parent = parent
        self.depth = depth  # tokens from the root to this node's end
        self.children: dict[int, _Node] = {}
        # alive while now <= expires; the last use, for LRU; the call that stored this run last, and the
        # tick of that write. Exact unless ``stale``: then a refresh that ended below is not taken yet
        self.expires = -_INF
        self.tick = 0
        self.source: str | None = None
        self.written = 0
        self.stale = False
        self.mark_expires = -_INF  # an exact entry ends here while now <= mark_expires
        self.mark_source: str | None = None
        self.mark_ttl: float | None = None


def _mark_above(node: _Node) -> None:
    """Mark the nodes above ``node`` stale, up to the first one that is (the root never)."""
    up = node.parent
    while up is not None and up.parent is not None and not up.stale:
        up.stale = True
        up = up.parent


def stamp(node: _Node, expires: float, tick: int, source: str | None, relabel: bool = True) -> None:
    """A write's refresh of the path from the root to ``node`` (which it ends in); without ``relabel``
    (a read's refresh of the exact entry it read) the runs keep the call that stored them."""
    if node.expires < expires:
        node.expires = expires
    node.tick = tick
    if relabel:
        node.written = tick
        node.source = source
    _mark_above(node)


def mark_used(node: _Node, tick: int) -> None:
    """A read's use (LRU) of the path from the root to ``node`` (which it ends in)."""
    node.tick = tick
    _mark_above(node)


def absorb(node: _Node, child: _Node) -> None:
    """Take ``child``'s values (exact: not stale, or a leaf) into ``node``, its parent, as a refresh that
    passed ``node``: before ``child`` is removed, or when ``node`` is settled. The root (no parent)
    keeps none: no refresh passes it."""
    if node.parent is None:
        return
    if child.expires > node.expires:
        node.expires = child.expires
    if child.tick > node.tick:
        node.tick = child.tick
    if child.written > node.written:
        node.written, node.source = child.written, child.source


def settle(node: _Node) -> _Node:
    """Make ``node``'s values exact: take the refreshes held below it, through its stale descendants
    (which are settled too, children before parents); return ``node``."""
    if not node.stale:
        return node
    order = []
    stack = [node]
    while stack:  # parents before children (no recursion: a conversation's path is thousands deep)
        each = stack.pop()
        order.append(each)
        stack.extend(c for c in each.children.values() if c.stale)
    for each in reversed(order):
        for child in each.children.values():
            absorb(each, child)
        each.stale = False
    return node


def alive(node: _Node, now: float | None) -> bool:
    """Whether ``node``'s run is alive at ``now`` (settled only when its held expiry says it is not)."""
    return now is None or node.expires >= now or (node.stale and settle(node).expires >= now)


def subtree(node: _Node) -> Iterator[_Node]:
    """``node`` and every node below it."""
    stack = [node]
    while stack:
        each = stack.pop()
        yield each
        stack.extend(each.children.values())
