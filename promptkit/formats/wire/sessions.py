"""How the proxy decides which session a request belongs to.

1. The request names it: the ``x-promptkit-session`` header, or the session id Claude Code puts into
   ``metadata.user_id`` (:func:`~promptkit.formats.wire.urls.session_hint`).
2. Otherwise **prefix affinity**: a request joins the session whose last request had the same *head*
   (model, tools and top-level ``system``) and whose message list is a prefix of this request's
   messages (a conversation grows by appending). ``cache_control`` markers are ignored in the
   comparison (clients move their breakpoints from turn to turn). When several sessions match, the one
   with the longest matching list wins (then the most recent).
3. Otherwise a new session ``session-N``.

Only digests of the messages are kept, for at most ``max_sessions`` sessions (least recently used first
out).

>>> tracker = SessionTracker()
>>> first = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
>>> second = {"model": "m", "messages": first["messages"] + [{"role": "assistant", "content": "hello"},
...                                                          {"role": "user", "content": "bye"}]}
>>> tracker.assign(first), tracker.assign(second), tracker.assign({"model": "m", "messages": [{"role": "user", "content": "new"}]})
('session-1', 'session-1', 'session-2')
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["HEAD_FIELDS", "SessionTracker"]

#: The request fields that make a session's head (besides the messages).
HEAD_FIELDS: Final[tuple[str, ...]] = ("model", "system", "tools")


def _strip(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _digest(value: Any) -> bytes:
    text = json.dumps(_strip(value), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class SessionTracker:
    """Assigns requests to sessions (see the module docs); not thread-safe (the proxy's event loop
    calls it)."""

    def __init__(self, *, max_sessions: int = 4096) -> None:
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, tuple[bytes, tuple[bytes, ...]]] = OrderedDict()
        self._count = 0

    def assign(self, body: Mapping[str, Any], hint: str | None = None) -> str:
        """The session of a request ``body`` (chat-completions or Anthropic shape); ``hint`` is the
        session the request names (it wins)."""
        head = _digest({k: body.get(k) for k in HEAD_FIELDS})
        raw = body.get("messages")
        messages = tuple(_digest(m) for m in raw) if isinstance(raw, list) else ()
        name = hint
        if name is None:
            best: tuple[int, str] | None = None
            for candidate, (chead, cmessages) in reversed(self._sessions.items()):
                n = len(cmessages)
                if chead == head and n <= len(messages) and messages[:n] == cmessages:
                    if best is None or n > best[0]:
                        best = (n, candidate)
            if best is not None:
                name = best[1]
        if name is None:
            self._count += 1
            name = f"session-{self._count}"
            while name in self._sessions:
                self._count += 1
                name = f"session-{self._count}"
        self._sessions[name] = (head, messages)
        self._sessions.move_to_end(name)
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        return name
