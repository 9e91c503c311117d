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
plain functions run in threads (a daemon thread per build), so a slow one delays nobody else. Builds
therefore must be thread-safe with respect to each other.

**Timeouts.** ``build_timeout`` (seconds, default :data:`DEFAULT_BUILD_TIMEOUT` = 5; ``None`` for no
limit) is enforced for every build. A coroutine still running after that long is cancelled. A sync build
cannot be interrupted: it is abandoned (its thread runs to its end in the background, its result is
discarded, and it does not keep the process from exiting); until that thread returns the same build is not
started again (absent with reason ``"timeout"``, the detail saying so), so a build that never returns holds
one thread, not one a turn. An async build that *blocks the event loop*
(a step between two awaits that calls ``time.sleep``, a blocking client or heavy CPU work) keeps the
deadline from firing at all; every step of an async build is therefore timed, and a build whose own
blocking steps took it past the timeout is absent with reason ``"blocked"`` and the seconds it blocked.
A step of :data:`SLOW_STEP_SECONDS` or longer is logged even within the timeout, and a watchdog thread
logs a warning naming the key while a step is still blocking past the timeout (a build that never
returns would otherwise hang the turn in silence). A build that the blocked loop kept from finishing in
time is absent with reason ``"timeout"`` and a detail naming the blocking build.

**Failures.** A build that raises, times out, blocks past the timeout or returns something other than
``str``, a sequence of ``str`` or ``None`` is absent this turn, with a warning on the
``promptkit.assembly`` logger naming its key, and is listed in :attr:`AssembledPrompt.absent`; the
others are placed as usual. Its key is not materialized, so the next call tries again.

**Concurrency.** One registry may be used from many threads and many asyncio tasks at once:
:meth:`PromptRegistry.assemble` keeps no state between calls (each call snapshots the registered
contributors), so concurrent calls give the results serial calls give.

**Sync and async.** :meth:`PromptRegistry.assemble_async` is the native form. :meth:`PromptRegistry.assemble`
runs it with :func:`asyncio.run` when the calling thread has no running event loop; when it has one (a
Jupyter cell, a coroutine), it runs it on a fresh event loop in a helper thread and blocks until done.
That works for self-contained async builds but blocks the caller's loop meanwhile, and an async build that
needs an object bound to the caller's loop (a client session, a future) fails there (and is absent): in
async code, ``await registry.assemble_async(...)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, TypeVar

import attrs

from promptkit.assembly.anchors import RESERVED_KEYS, Anchor, LayoutEntry, utf16_key
from promptkit.assembly.placement import (
    AbsentContributor,
    AssembledPrompt,
    analyze_frame,
    place_blocks,
)
from promptkit.chat.message import Message
from promptkit.errors import ContributorOutputError, NotRegisteredError, UsageError

__all__ = [
    "DEFAULT_BUILD_TIMEOUT",
    "SLOW_STEP_SECONDS",
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
    """``messages`` as a tuple; :class:`~promptkit.errors.UsageError` (a ``TypeError``) naming ``where``
    and the index of anything not a Message."""
    if isinstance(messages, (Message, str, bytes, Mapping)) or not isinstance(messages, Iterable):
        raise UsageError(f"{where}: messages: expected a sequence of Message, got {type(messages).__name__}")
    out = tuple(messages)
    for i, m in enumerate(out):
        if not isinstance(m, Message):
            raise UsageError(f"{where}: messages[{i}] is {type(m).__name__}, expected promptkit.Message")
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
    raise UsageError(f"contributor {key!r}: anchor {anchor!r} is not one of {allowed}")


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


#: The default ``build_timeout`` (seconds) of :meth:`PromptRegistry.assemble`, :meth:`~PromptRegistry.assemble_async`
#: and :func:`build_contributors`. A build is on the path of every turn: a vector-store lookup or an
#: embedding call answers well within it, and a model call's own latency budget does not leave room for
#: more. A contributor that needs longer should prefetch or cache; pass ``build_timeout=None`` for no limit.
DEFAULT_BUILD_TIMEOUT: Final[float] = 5.0
#: A step of an async build (the code between two awaits) that runs longer than this many seconds blocks
#: the event loop noticeably: it is logged (asyncio's debug mode uses the same 0.1 s).
SLOW_STEP_SECONDS: Final[float] = 0.1


class _LoopWatch:
    """Times every step of the async builds of one :func:`build_contributors` call on its event loop.

    A step is the code a build runs between two awaits; while it runs, the event loop runs nothing else.
    Each step is timed as it returns (so the report names the build that blocked and for how long), and a
    watchdog thread, started with the first step, logs a warning while a step is still running past
    ``threshold`` seconds (a build stuck in a blocking call would otherwise hang the turn in silence).
    """

    def __init__(self, threshold: float, enforced: bool = True) -> None:
        self.threshold = threshold
        self.enforced = enforced  # past the threshold the build will be absent (a build_timeout is set)
        self.blocked: list[tuple[str, float]] = []  # (key, seconds) of every step >= SLOW_STEP_SECONDS
        self._cond = threading.Condition()
        self._step: tuple[str, float, int] | None = None
        self._serial = 0
        self._stopped = False
        self._thread: threading.Thread | None = None

    def enter(self, key: str) -> float:
        start = time.monotonic()
        with self._cond:
            self._serial += 1
            self._step = (key, start, self._serial)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="promptkit-build-watchdog", daemon=True
                )
                self._thread.start()
            self._cond.notify()
        return start

    def leave(self, key: str, start: float) -> float:
        end = time.monotonic()
        with self._cond:
            self._step = None
        if end - start >= SLOW_STEP_SECONDS:
            self.blocked.append((key, end - start))
        return end

    def blockers(self, key: str) -> str:
        """``'; the event loop was blocked meanwhile by ...'`` naming the other builds' slow steps, or ''."""
        longest: dict[str, float] = {}
        for other, seconds in self.blocked:
            if other != key:
                longest[other] = max(seconds, longest.get(other, 0.0))
        if not longest:
            return ""
        shown = ", ".join(f"{k!r} ({s:.2f}s)" for k, s in sorted(longest.items(), key=lambda kv: -kv[1]))
        return f"; the event loop was blocked meanwhile by {shown}"

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _watch(self) -> None:
        warned = 0
        with self._cond:
            while not self._stopped:
                step = self._step
                if step is None or step[2] == warned:
                    self._cond.wait()
                    continue
                key, start, serial = step
                remaining = start + self.threshold - time.monotonic()
                if remaining > 0:
                    self._cond.wait(remaining)
                    continue
                warned = serial
                logger.warning(
                    "prompt contributor %r has been blocking the event loop for %.2fs (a step of its async "
                    "build that does not await); %s",
                    key,
                    time.monotonic() - start,
                    "it will be absent this turn" if self.enforced else "no build_timeout: the turn waits for it",
                )


class _Probe:
    """The steps of one build's awaitable: how long they ran in all, the longest, when the last ended."""

    __slots__ = ("done_at", "key", "longest", "steps", "swallowed", "total", "watch")

    def __init__(self, key: str, watch: _LoopWatch) -> None:
        self.key, self.watch = key, watch
        self.total = self.longest = 0.0
        self.steps = 0
        self.done_at: float | None = None
        self.swallowed = False  # the build caught its cancellation and awaited on: it was closed


class _Timed:
    """An awaitable driven step by step, each step timed by ``probe`` (the values it yields, sends and
    throws pass through unchanged, so the event loop sees the awaitable itself).

    A build that catches the ``CancelledError`` thrown into it (at its timeout) and awaits on would hold
    the turn as long as it likes: it is closed instead (``GeneratorExit`` at the await it reached, so its
    ``finally`` blocks run but cannot await) and the cancellation goes on as if it had not been caught.
    """

    __slots__ = ("_awaitable", "_probe")

    def __init__(self, awaitable: Awaitable[Any], probe: _Probe) -> None:
        self._awaitable, self._probe = awaitable, probe

    def __await__(self) -> Generator[Any, Any, Any]:
        probe, watch = self._probe, self._probe.watch
        inner = self._awaitable.__await__()
        value: Any = None
        error: BaseException | None = None
        while True:
            start = watch.enter(probe.key)
            cancelled: BaseException | None = None
            try:
                if error is not None:
                    thrown, error = error, None
                    yielded = inner.throw(thrown)
                    if isinstance(thrown, asyncio.CancelledError):
                        cancelled = thrown  # caught, and the build awaits on
                else:
                    yielded = inner.send(value)
            except StopIteration as stop:
                return stop.value
            finally:
                end = watch.leave(probe.key, start)
                probe.steps += 1
                probe.total += end - start
                probe.longest = max(probe.longest, end - start)
                probe.done_at = end
            if cancelled is not None:
                probe.swallowed = True
                close = getattr(inner, "close", None)
                if close is not None:
                    with contextlib.suppress(RuntimeError):  # it ignored GeneratorExit as well
                        close()
                raise cancelled
            try:
                value = yield yielded
            except GeneratorExit:
                close = getattr(inner, "close", None)
                if close is not None:
                    close()
                raise
            except BaseException as exc:
                error = exc


@attrs.define(eq=False)
class _ThreadJob:
    """A sync build running in its thread: the build, when it started, whether its turn gave up on it."""

    build: Callable[..., Any]
    started: float
    abandoned: bool = False
    returned: bool = False


#: Sync builds abandoned at their timeout whose thread has not returned yet, by build function: while one
#: is there the build is not started again, so a build that never returns holds one thread, not one a turn
#: (see :func:`_in_thread`). Builds still within their timeout run side by side, one per concurrent turn.
_ABANDONED: dict[Callable[..., Any], _ThreadJob] = {}
_ABANDONED_LOCK = threading.Lock()


def _abandon(job: _ThreadJob) -> None:
    with _ABANDONED_LOCK:
        if not job.abandoned and not job.returned:
            job.abandoned = True
            _ABANDONED[job.build] = job


class _StillRunning(Exception):
    """A sync build's thread from an earlier turn has not returned: no second thread is started."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.seconds = seconds


def _in_thread(
    contributor: Contributor, view: PromptView
) -> tuple[asyncio.Future[tuple[Any, float]], _ThreadJob]:
    """Run a sync build in a daemon thread of its own; the future gets ``(output, monotonic end time)``.

    A daemon thread, not a pool: a build abandoned at its timeout must not keep the process from exiting.
    While the same build function still runs in a thread an earlier turn abandoned at its timeout, no
    other thread is started for it: :class:`_StillRunning` is raised, and the build is absent this turn,
    so a build that never returns costs one thread, however many turns follow.
    """
    build = contributor.build
    with _ABANDONED_LOCK:
        stuck = _ABANDONED.get(build)
        if stuck is not None:
            raise _StillRunning(time.monotonic() - stuck.started)
    job = _ThreadJob(build, time.monotonic())
    loop = asyncio.get_running_loop()
    future: asyncio.Future[tuple[Any, float]] = loop.create_future()
    context = contextvars.copy_context()

    def settle(outcome: tuple[Any, float] | BaseException) -> None:
        if future.done():  # abandoned: cancelled at its timeout
            return
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    def target() -> None:
        outcome: tuple[Any, float] | BaseException
        try:
            outcome = (context.run(build, view), time.monotonic())
        except Exception as exc:
            outcome = exc
        finally:
            with _ABANDONED_LOCK:
                job.returned = True
                if _ABANDONED.get(build) is job:
                    del _ABANDONED[build]
        try:
            loop.call_soon_threadsafe(settle, outcome)
        except RuntimeError:  # the event loop is closed: the turn is over and the build was abandoned
            pass

    threading.Thread(target=target, name=f"promptkit-build:{contributor.key}", daemon=True).start()
    return future, job


async def _build_one(
    contributor: Contributor, view: PromptView, timeout: float | None, watch: _LoopWatch
) -> BuildResult:
    key, anchor = contributor.key, contributor.anchor
    loop = asyncio.get_running_loop()
    deadline_at = None if timeout is None else loop.time() + timeout
    deadline = asyncio.timeout_at(deadline_at)
    probe = _Probe(key, watch)
    thread_job: asyncio.Future[tuple[Any, float]] | None = None
    job: _ThreadJob | None = None
    try:
        try:
            async with deadline:
                if inspect.iscoroutinefunction(contributor.build):
                    output: Any = contributor.build(view)
                else:
                    thread_job, job = _in_thread(contributor, view)
                    output, _ = await thread_job
                if inspect.isawaitable(output):
                    output = await _Timed(output, probe)
        except TimeoutError:
            if not deadline.expired():  # the build's own TimeoutError: it raised
                raise
            # The deadline fired late when something blocked the loop: a thread that finished in time
            # still counts.
            if (
                thread_job is not None
                and deadline_at is not None
                and thread_job.done()
                and not thread_job.cancelled()
                and thread_job.exception() is None
                and thread_job.result()[1] <= deadline_at
                and not inspect.isawaitable(thread_job.result()[0])
            ):
                output = thread_job.result()[0]
            else:
                if job is not None:
                    _abandon(job)  # its thread runs on: not started again until it returns
                if thread_job is not None and thread_job.done() and not thread_job.cancelled():
                    late_output = thread_job.result()[0] if thread_job.exception() is None else None
                    if inspect.iscoroutine(late_output) and probe.steps == 0:
                        late_output.close()  # returned in time but never started: no "never awaited" warning
                if probe.total > (timeout or 0.0):
                    return _absent(contributor, "blocked", _blocked_detail(probe, timeout))
                detail = f"build exceeded build_timeout={timeout}s" + watch.blockers(key)
                if probe.swallowed:
                    detail += "; it caught its cancellation and kept awaiting, so it was closed"
                return _absent(contributor, "timeout", detail)
        late = deadline_at is not None and probe.done_at is not None and probe.done_at > deadline_at
        if late:  # finished past the deadline without the deadline firing: the event loop was blocked
            if probe.total > (timeout or 0.0):
                return _absent(contributor, "blocked", _blocked_detail(probe, timeout))
            detail = f"build finished after build_timeout={timeout}s" + watch.blockers(key)
            return _absent(contributor, "timeout", detail)
        if probe.longest >= SLOW_STEP_SECONDS:
            logger.warning(
                "prompt contributor %r (%s): async build blocked the event loop for %.2fs in one step "
                "(a blocking call without await); kept, %s",
                key,
                anchor.value,
                probe.longest,
                f"within build_timeout={timeout}s" if timeout is not None else "no build_timeout",
            )
        return BuildResult(contributor, normalize_output(key, output))
    except ContributorOutputError as exc:
        return _absent(contributor, "invalid", str(exc))
    except _StillRunning as exc:
        detail = (
            f"its build from an earlier turn has not returned after {exc.seconds:.1f}s "
            "(abandoned at build_timeout): not started again until it does"
        )
        return _absent(contributor, "timeout", detail)
    except Exception as exc:
        return _raised(contributor, exc)


def _blocked_detail(probe: _Probe, timeout: float | None) -> str:
    return (
        f"async build blocked the event loop for {probe.total:.2f}s (longest step without an await "
        f"{probe.longest:.2f}s), past build_timeout={timeout}s"
    )


def _absent(contributor: Contributor, reason: str, detail: str) -> BuildResult:
    logger.warning(
        "prompt contributor %r (%s): %s; absent this turn", contributor.key, contributor.anchor.value, detail
    )
    return BuildResult(contributor, absent=AbsentContributor(contributor.key, contributor.anchor, reason, detail))


def _raised(contributor: Contributor, exc: BaseException) -> BuildResult:
    key, anchor = contributor.key, contributor.anchor
    detail = f"build raised {type(exc).__name__}: {exc}"
    logger.warning(
        "prompt contributor %r (%s): %s; absent this turn", key, anchor.value, detail, exc_info=exc
    )
    return BuildResult(contributor, absent=AbsentContributor(key, anchor, "raised", detail))


async def build_contributors(
    contributors: Sequence[Contributor],
    view: PromptView,
    *,
    build_timeout: float | None = DEFAULT_BUILD_TIMEOUT,
) -> list[BuildResult]:
    """Build ``contributors`` concurrently (see the module docstring); one result each, in the same order.

    Never raises for a failing build: it comes back with ``absent`` set (and a logged warning).

    >>> async def fetch(view):
    ...     return "fetched"
    >>> results = asyncio.run(build_contributors(
    ...     [Contributor("a", Anchor.CONTEXT, fetch), Contributor("b", Anchor.CONTEXT, lambda view: ["x", "y"])],
    ...     PromptView(),
    ... ))
    >>> [r.blocks for r in results]
    [('fetched',), ('x', 'y')]
    """
    _check_timeout(build_timeout)
    watch = _LoopWatch(
        build_timeout if build_timeout is not None else DEFAULT_BUILD_TIMEOUT, enforced=build_timeout is not None
    )
    try:
        return list(await asyncio.gather(*(_build_one(c, view, build_timeout, watch) for c in contributors)))
    finally:
        watch.stop()


def _check_timeout(build_timeout: float | None) -> None:
    if build_timeout is None:
        return
    if isinstance(build_timeout, bool) or not isinstance(build_timeout, (int, float)):
        raise UsageError(
            "build_timeout: expected None (no limit) or a positive number of seconds, "
            f"got {type(build_timeout).__name__}"
        )
    if not build_timeout > 0:
        raise UsageError(
            f"build_timeout: expected None (no limit) or a positive number of seconds, got {build_timeout!r}"
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
        Raises :class:`~promptkit.errors.UsageError` (a ``ValueError`` and a ``TypeError``) naming the
        key for an empty, non-string or reserved key (a frame injector such as ``persona-volatile`` or a
        directive kind), for an anchor that is not one of the five and for a ``build`` that is not
        callable; ``ValueError`` naming it for a duplicate key.
        """
        if not isinstance(key, str) or not key:
            raise UsageError(f"register: key: contributor key must be a non-empty string, got {key!r}")
        if key in RESERVED_KEYS:
            raise UsageError(f"contributor {key!r}: the key is reserved for a frame block injector")
        resolved = _anchor_of(key, anchor)
        if not callable(build):
            raise UsageError(f"contributor {key!r}: build must be callable, got {type(build).__name__}")
        with self._lock:
            if key in self._contributors:
                raise UsageError(f"contributor {key!r} is already registered")
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
            raise NotRegisteredError(f"no contributor {key!r} is registered")
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
        build_timeout: float | None = DEFAULT_BUILD_TIMEOUT,
    ) -> AssembledPrompt:
        """Build the pending contributors and place their blocks; never mutates ``messages``.

        A contributor is pending unless a message of ``messages`` already carries its key as
        ``metadata["injector"]`` (a tool loop calls assemble again: nothing is built twice, and the
        blocks already there keep their positions). ``view`` carries the turn's facts; its ``messages``
        are replaced by ``messages``. Placement: see :mod:`promptkit.assembly.placement`.

        ``build_timeout`` bounds every build (seconds; ``None`` for no limit; see the module docstring
        for how sync, async and loop-blocking builds are held to it). Raises
        :class:`~promptkit.errors.UsageError` naming the argument for messages that are not a sequence
        of :class:`Message`, a ``view`` that is not a :class:`PromptView` or a timeout that is not a
        positive number.

        >>> registry = PromptRegistry()
        >>> async def tip(view):
        ...     return "Tip of the day: hydrate."
        >>> registry.register("tip", "turn-context", tip)
        >>> prompt = asyncio.run(registry.assemble_async([Message(role="user", content="hi")]))
        >>> [m.content for m in prompt.messages]
        ['Tip of the day: hydrate.', 'hi']
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
        build_timeout: float | None = DEFAULT_BUILD_TIMEOUT,
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
        if view is not None and not isinstance(view, PromptView):
            raise UsageError(f"assemble: view: expected a PromptView or None, got {type(view).__name__}")
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
