"""The contributor registry: contributors declare an anchor and a build; the registry builds and places them.

>>> registry = PromptRegistry()
>>> @registry.contributor("skills", Anchor.KNOWLEDGE)
... def skills(view):
...     return "Skills: search, calendar"
>>> registry.register("memories", "turn-context", lambda view: f"Memories for {view.user_id}: likes tea")
>>> prompt = registry.assemble(
...     [Message(role="system", content="You are Aalis."), Message(role="user", content="hi")],
...     PromptView(user_id="u42"),
... )
>>> [(m.content, e.slot) for m, e in zip(prompt.messages, prompt.layout)]  # doctest: +NORMALIZE_WHITESPACE
[('You are Aalis.', 'persona'), ('Skills: search, calendar', 'knowledge'),
 ('Memories for u42: likes tea', 'turn-context'), ('hi', 'current')]

**Building.** Every contributor not yet materialized in the messages is built once per call, all at the
same time: ``async def`` builds (and awaitables returned by any build) run as tasks on the event loop;
plain functions run in worker threads (one per build, a fresh pool per call), so a slow one delays
nobody else. With ``build_timeout`` (seconds) a build still running after that long is absent this turn:
a coroutine is cancelled; a thread cannot be interrupted, so it runs to its end in the background and
its result is discarded. Builds therefore must be thread-safe with respect to each other. A build that
raises, times out or returns something other than ``str``, a sequence of ``str`` or ``None`` is absent
this turn, with a warning on the ``promptkit.assembly`` logger naming its key, and is listed in
:attr:`AssembledPrompt.absent`; the others are placed as usual. Its key is not materialized, so the next
call tries again.

**Sync and async.** :meth:`PromptRegistry.assemble_async` is the native form. :meth:`PromptRegistry.assemble`
runs it with :func:`asyncio.run` when the calling thread has no running event loop; when it has one (a
Jupyter cell, a coroutine), it runs it on a fresh event loop in a helper thread and blocks until done.
That works for self-contained async builds but blocks the caller's loop meanwhile, and an async build that
needs an object bound to the caller's loop (a client session, a future) fails there (and is absent): in
async code, ``await registry.assemble_async(...)``.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import attrs

from promptkit.assembly.anchors import RESERVED_KEYS, Anchor, LayoutEntry, utf16_key
from promptkit.assembly.placement import (
    AbsentContributor,
    AssembledPrompt,
    analyze_frame,
    place_blocks,
)
from promptkit.chat.message import Message
from promptkit.errors import ContributorOutputError

__all__ = [
    "BuildOutput",
    "BuildResult",
    "Contributor",
    "ContributorOutputError",
    "PromptRegistry",
    "PromptView",
    "build_contributors",
]

logger = logging.getLogger("promptkit.assembly")

#: What a build may return (or an awaitable may resolve to).
BuildOutput = str | Sequence[str] | None
#: A build: ``view -> str | Sequence[str] | None``, or an awaitable of one of those.
BuildFn = Callable[["PromptView"], BuildOutput | Awaitable[BuildOutput]]
F = TypeVar("F", bound=Callable[..., Any])


def _messages_tuple(value: Sequence[Message]) -> tuple[Message, ...]:
    return tuple(value)


def message_tuple(messages: Iterable[Message], where: str) -> tuple[Message, ...]:
    """``messages`` as a tuple; ``TypeError`` naming ``where`` and the index of anything not a Message."""
    if isinstance(messages, (Message, str, bytes, Mapping)):
        raise TypeError(f"{where}: expected a sequence of Message, got {type(messages).__name__}")
    out = tuple(messages)
    for i, m in enumerate(out):
        if not isinstance(m, Message):
            raise TypeError(f"{where}: messages[{i}] is {type(m).__name__}, expected promptkit.Message")
    return out


@attrs.frozen
class PromptView:
    """What a build sees: read-only facts about the turn and the messages so far.

    ``trigger_type`` is the inbound message's trigger (``direct``, ``immediate``, ``interval``, ``idle``,
    ``proactive``); ``dry_run`` is true when the prompt is being previewed, not sent (a build with side
    effects should skip them). :meth:`PromptRegistry.assemble` sets ``messages`` to the list it assembles.
    The view and the messages are frozen, but a message's ``metadata`` is a plain dict shared with the
    caller (nothing is deep-copied): a build must not modify it.
    """

    session_id: str | None = None
    user_id: str | None = None
    platform: str | None = None
    trigger_type: str | None = None
    messages: tuple[Message, ...] = attrs.field(default=(), converter=_messages_tuple)
    dry_run: bool = False


def _anchor_of(key: str, anchor: Anchor | str) -> Anchor:
    if isinstance(anchor, Anchor):
        return anchor
    if isinstance(anchor, str):
        try:
            return Anchor(anchor)
        except ValueError:
            pass
    allowed = ", ".join(a.value for a in Anchor)
    raise ValueError(f"contributor {key!r}: anchor {anchor!r} is not one of {allowed}")


@attrs.frozen
class Contributor:
    """One registered contributor: its global ``key``, its ``anchor`` and its ``build``."""

    key: str
    anchor: Anchor
    build: BuildFn = attrs.field(eq=False)


@attrs.frozen
class BuildResult:
    """The outcome of one build: its blocks (empty when it contributed nothing) or why it is absent."""

    contributor: Contributor
    blocks: tuple[str, ...] = ()
    absent: AbsentContributor | None = None


def normalize_output(key: str, output: Any) -> tuple[str, ...]:
    """The non-empty blocks of a build's output; raises :class:`ContributorOutputError` naming ``key``.

    >>> normalize_output("k", ["a", "", "b"]), normalize_output("k", None), normalize_output("k", "")
    (('a', 'b'), (), ())
    """
    if output is None:
        return ()
    if isinstance(output, str):
        return (output,) if output else ()
    if isinstance(output, Sequence) and not isinstance(output, (bytes, bytearray)):
        blocks = []
        for i, block in enumerate(output):
            if not isinstance(block, str):
                raise ContributorOutputError(
                    f"contributor {key!r}: block {i} is {type(block).__name__}, expected str"
                )
            if block:
                blocks.append(block)
        return tuple(blocks)
    raise ContributorOutputError(
        f"contributor {key!r}: build returned {type(output).__name__}, expected str, a sequence of str or None"
    )


async def _build_one(
    contributor: Contributor,
    view: PromptView,
    timeout: float | None,
    executor: ThreadPoolExecutor | None,
) -> BuildResult:
    key, anchor = contributor.key, contributor.anchor
    deadline = asyncio.timeout(timeout)
    try:
        async with deadline:
            if inspect.iscoroutinefunction(contributor.build) or executor is None:
                output: Any = contributor.build(view)
            else:
                context = contextvars.copy_context()
                loop = asyncio.get_running_loop()
                output = await loop.run_in_executor(executor, context.run, contributor.build, view)
            if inspect.isawaitable(output):
                output = await output
        return BuildResult(contributor, normalize_output(key, output))
    except TimeoutError as exc:
        if not deadline.expired():  # the build's own TimeoutError: it raised
            return _raised(contributor, exc)
        detail = f"build exceeded build_timeout={timeout}s"
        logger.warning("prompt contributor %r (%s): %s; absent this turn", key, anchor.value, detail)
        return BuildResult(contributor, absent=AbsentContributor(key, anchor, "timeout", detail))
    except ContributorOutputError as exc:
        logger.warning("prompt contributor %r (%s): %s; absent this turn", key, anchor.value, exc)
        return BuildResult(contributor, absent=AbsentContributor(key, anchor, "invalid", str(exc)))
    except Exception as exc:
        return _raised(contributor, exc)


def _raised(contributor: Contributor, exc: BaseException) -> BuildResult:
    key, anchor = contributor.key, contributor.anchor
    detail = f"build raised {type(exc).__name__}: {exc}"
    logger.warning(
        "prompt contributor %r (%s): %s; absent this turn", key, anchor.value, detail, exc_info=exc
    )
    return BuildResult(contributor, absent=AbsentContributor(key, anchor, "raised", detail))


async def build_contributors(
    contributors: Sequence[Contributor], view: PromptView, *, build_timeout: float | None = None
) -> list[BuildResult]:
    """Build ``contributors`` concurrently (see the module docstring); one result each, in the same order.

    Never raises for a failing build: it comes back with ``absent`` set (and a logged warning).
    """
    _check_timeout(build_timeout)
    sync = [c for c in contributors if not inspect.iscoroutinefunction(c.build)]
    executor = (
        ThreadPoolExecutor(max_workers=min(32, len(sync)), thread_name_prefix="promptkit-build")
        if sync
        else None
    )
    try:
        return list(
            await asyncio.gather(*(_build_one(c, view, build_timeout, executor) for c in contributors))
        )
    finally:
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


def _check_timeout(build_timeout: float | None) -> None:
    if build_timeout is not None and not build_timeout > 0:
        raise ValueError(
            f"build_timeout must be None (no limit) or a positive number of seconds, got {build_timeout!r}"
        )


T = TypeVar("T")


def run_sync(make: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine ``make()`` to completion from synchronous code (see the module docstring)."""
    box: list[T] = []
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(_into(box, make))
        return box[0]
    context = contextvars.copy_context()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="promptkit-assemble") as helper:
        helper.submit(context.run, asyncio.run, _into(box, make)).result()
    return box[0]


async def _into(box: list[T], make: Callable[[], Awaitable[T]]) -> None:
    # The task returns None, not the result: on the way out asyncio.run restores the SIGINT handler and
    # Python 3.11 formats the repr of the main task (and so of its result) while doing it, which costs
    # time proportional to the size of the prompt.
    box.append(await make())


class PromptRegistry:
    """Contributors of prompt blocks, each with a global key and one of the five anchors.

    Extension by registration: any part of an application registers its contributor; the registry owns
    how builds run and where their blocks go. Registering is thread-safe; a call to :meth:`assemble`
    works on the contributors registered when it starts (one registered meanwhile is placed next call).
    """

    def __init__(self) -> None:
        self._contributors: dict[str, Contributor] = {}
        self._lock = threading.Lock()

    # --- registration ---------------------------------------------------------------------------------

    def register(self, key: str, anchor: Anchor | str, build: BuildFn) -> None:
        """Register ``build`` under ``key`` at ``anchor``.

        ``build(view)`` returns a ``str``, a sequence of ``str``, ``None``, or an awaitable of one of those.
        Raises ``ValueError`` naming the key for an empty, reserved (a frame injector such as
        ``persona-volatile`` or a directive kind) or duplicate key and for an anchor that is not one of
        the five; ``TypeError`` when ``build`` is not callable.
        """
        if not isinstance(key, str) or not key:
            raise ValueError(f"contributor key must be a non-empty string, got {key!r}")
        if key in RESERVED_KEYS:
            raise ValueError(f"contributor {key!r}: the key is reserved for a frame block injector")
        resolved = _anchor_of(key, anchor)
        if not callable(build):
            raise TypeError(f"contributor {key!r}: build must be callable, got {type(build).__name__}")
        with self._lock:
            if key in self._contributors:
                raise ValueError(f"contributor {key!r} is already registered")
            self._contributors[key] = Contributor(key=key, anchor=resolved, build=build)

    def contributor(self, key: str, anchor: Anchor | str) -> Callable[[F], F]:
        """Decorator form of :meth:`register`; returns the function unchanged.

        >>> registry = PromptRegistry()
        >>> @registry.contributor("rules", "context")
        ... def rules(view):
        ...     return "Be brief."
        >>> registry.anchor_of("rules")
        <Anchor.CONTEXT: 'context'>
        """

        def decorate(build: F) -> F:
            self.register(key, anchor, build)
            return build

        return decorate

    def contributors(self) -> tuple[Contributor, ...]:
        """The registered contributors, in key order (UTF-16 code units)."""
        with self._lock:
            snapshot = list(self._contributors.values())
        return tuple(sorted(snapshot, key=lambda c: utf16_key(c.key)))

    def anchors(self) -> dict[str, Anchor]:
        """``{key: anchor}`` of every registered contributor."""
        with self._lock:
            return {key: c.anchor for key, c in self._contributors.items()}

    def anchor_of(self, key: str) -> Anchor:
        """The anchor of ``key``; ``KeyError`` naming it when it is not registered."""
        with self._lock:
            contributor = self._contributors.get(key)
        if contributor is None:
            raise KeyError(f"no contributor {key!r} is registered")
        return contributor.anchor

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._contributors

    def __len__(self) -> int:
        with self._lock:
            return len(self._contributors)

    def __iter__(self) -> Iterator[str]:
        return iter(c.key for c in self.contributors())

    def __repr__(self) -> str:
        return f"PromptRegistry({', '.join(f'{c.key}@{c.anchor.value}' for c in self.contributors())})"

    # --- assembly -------------------------------------------------------------------------------------

    def layout_of(self, messages: Sequence[Message]) -> tuple[LayoutEntry, ...]:
        """The layout of ``messages`` with this registry's blocks recognised (nothing is built)."""
        return analyze_frame(messages, self.anchors()).layout

    async def assemble_async(
        self,
        messages: Sequence[Message],
        view: PromptView | None = None,
        *,
        build_timeout: float | None = None,
    ) -> AssembledPrompt:
        """Build the pending contributors and place their blocks; never mutates ``messages``.

        A contributor is pending unless a message of ``messages`` already carries its key as
        ``metadata["injector"]`` (a tool loop calls assemble again: nothing is built twice, and the
        blocks already there keep their positions). ``view`` carries the turn's facts; its ``messages``
        are replaced by ``messages``. Placement: see :mod:`promptkit.assembly.placement`.
        """
        job = self._job(messages, view, build_timeout)
        results = (
            await build_contributors(job.pending, job.view, build_timeout=build_timeout)
            if job.pending
            else []
        )
        return _assemble_from(job.view.messages, results, job.anchors)

    def assemble(
        self,
        messages: Sequence[Message],
        view: PromptView | None = None,
        *,
        build_timeout: float | None = None,
    ) -> AssembledPrompt:
        """Synchronous :meth:`assemble_async` (see the module docstring for threads and event loops).

        >>> registry = PromptRegistry()
        >>> registry.register("hint", "turn-hint", lambda view: "Reply in one line.")
        >>> [m.content for m in registry.assemble([Message(role="user", content="hi")]).messages]
        ['Reply in one line.', 'hi']
        """
        job = self._job(messages, view, build_timeout)
        if not job.pending:  # a tool loop's later calls: nothing to build, no event loop needed
            return _assemble_from(job.view.messages, [], job.anchors)
        results = run_sync(lambda: build_contributors(job.pending, job.view, build_timeout=build_timeout))
        return _assemble_from(job.view.messages, results, job.anchors)

    def _job(self, messages: Sequence[Message], view: PromptView | None, build_timeout: float | None) -> _Job:
        _check_timeout(build_timeout)
        snapshot = message_tuple(messages, "assemble")
        contributors = self.contributors()
        present = {m.injector for m in snapshot if m.injector is not None}
        return _Job(
            anchors={c.key: c.anchor for c in contributors},
            pending=tuple(c for c in contributors if c.key not in present),
            view=attrs.evolve(view, messages=snapshot) if view is not None else PromptView(messages=snapshot),
        )


@attrs.frozen
class _Job:
    anchors: dict[str, Anchor]
    pending: tuple[Contributor, ...]
    view: PromptView


def _assemble_from(
    messages: tuple[Message, ...], results: Sequence[BuildResult], anchors: Mapping[str, Anchor]
) -> AssembledPrompt:
    blocks = {r.contributor.key: r.blocks for r in results if r.absent is None and r.blocks}
    placement = place_blocks(messages, blocks, anchors)
    absent = [r.absent for r in results if r.absent is not None]
    if placement.unplaced:
        logger.warning(
            "turn-hint contributor(s) %s dropped this turn: no directive block and no current user message",
            ", ".join(repr(k) for k in placement.unplaced),
        )
        absent.extend(
            AbsentContributor(k, anchors[k], "no-place", "no directive block and no current user message")
            for k in placement.unplaced
        )
    absent.sort(key=lambda a: utf16_key(a.key))
    built = tuple(k for k in sorted(blocks, key=utf16_key) if k not in placement.unplaced)
    return AssembledPrompt(messages=placement.messages, layout=placement.layout, built=built, absent=absent)
