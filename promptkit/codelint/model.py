"""What ``promptkit lint-code`` reports and the values its analysis tracks.

A :class:`Finding` is one changing value that lands before content that repeats: where the value is made
(``path:line``, its rule), the path it takes (:attr:`Finding.flow`, one :class:`Location` per step, the
last one the request that sends it), the slot it lands in and a fix. A :class:`Note` says where the
analysis gave up instead of guessing (a dynamic call whose result reaches the head of a request).

The other classes are the analysis' own: a :class:`Val` is what the analysis knows of one Python value
(which changing values it carries, as :class:`Trace` objects, and its shape: list items, dict keys, a
set's missing order); a :class:`Marker` stands for a function's parameter until a call site says what
was passed.

>>> step = Location("app.py", 3, 4, "assigned to `now`")
>>> step.to_json()
{'path': 'app.py', 'line': 3, 'column': 4, 'message': 'assigned to `now`'}
"""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["Finding", "LintResult", "Location", "Marker", "Note", "Source", "Trace", "Val"]

#: A trace keeps at most this many steps (a long chain of helpers keeps its first and last steps).
MAX_STEPS = 40
#: A value keeps at most this many traces (distinct sources); more are rarely useful and cost time.
MAX_TRACES = 12


@attrs.frozen(cache_hash=True)
class Location:
    """One place in the code and what happens to the value there (1-based line, 0-based column)."""

    path: str
    line: int
    column: int
    message: str

    def to_json(self) -> dict[str, Any]:
        """The location as a JSON-ready dict."""
        return {"path": self.path, "line": self.line, "column": self.column, "message": self.message}


@attrs.frozen(cache_hash=True)
class Source:
    """Where a value that changes between calls is made: its rule (``clock``, ``random-id``,
    ``process``, ``set-order``, ``json-order``, ``per-turn``) or ``dynamic`` (a call the analysis cannot
    follow), and the expression, e.g. ``datetime.now()``. ``param_of``: the function whose parameter
    this is (a parameter named like the user's message), reported only where no call in the project
    says what is passed."""

    rule: str
    path: str
    line: int
    column: int
    what: str
    param_of: str | None = None


@attrs.frozen(cache_hash=True)
class Marker:
    """Parameter ``index`` of function ``func`` (and the attribute first read from it, with where),
    standing for whatever a call site passes."""

    func: str
    index: int
    attr: str | None = None
    at: Location | None = None


@attrs.frozen(cache_hash=True)
class Trace:
    """One changing value inside a :class:`Val`: its origin and the steps it took to get here.
    ``order_only``: only its order changes (an element of a set taken in hash order), so sorting fixes it."""

    origin: Source | Marker
    steps: tuple[Location, ...] = ()
    order_only: bool = False

    def then(self, step: Location) -> Trace:
        """This trace with one more step (a repeat of the last step is kept once)."""
        steps = self.steps
        if steps and steps[-1] == step:
            return self
        if len(steps) >= MAX_STEPS:
            steps = steps[: MAX_STEPS // 2] + steps[-(MAX_STEPS // 2) + 1 :]
        return Trace(self.origin, (*steps, step), self.order_only)


@attrs.frozen
class Val:
    """What the analysis knows of a value: its traces and, where known, its shape.

    ``items``: the elements of a list or tuple in order (an element with ``spread`` set is ``*x``: any
    number of elements; one with ``appended`` set was added by ``append``/``extend``/``+=``); ``keys``: a dict's constant keys; ``unordered``: where a set (or a dict or view
    built from one) was made; ``const``: a string constant; ``func``: the key of the function this value
    is; ``param``: this value is parameter ``param`` itself; ``view``: the ``PromptView`` a contributor
    receives; ``self_of``: the ``self`` of this class.
    """

    traces: tuple[Trace, ...] = ()
    items: tuple[Val, ...] | None = None
    keys: tuple[tuple[str, Val], ...] | None = None
    unordered: Location | None = None
    const: str | None = None
    func: str | None = None
    param: int | None = None
    spread: bool = False
    appended: bool = False
    view: bool = False
    self_of: str | None = None

    def key(self, name: str) -> Val | None:
        """The value under constant key ``name`` of a dict whose keys are known."""
        for k, v in self.keys or ():
            if k == name:
                return v
        return None

    def stepped(self, step: Location) -> Val:
        """A plain value carrying these traces, each with ``step`` added (the shape is dropped)."""
        return Val(traces=tuple(t.then(step) for t in self.traces), unordered=self.unordered)


EMPTY = Val()


def merge_traces(*groups: tuple[Trace, ...]) -> tuple[Trace, ...]:
    """The traces of ``groups``, one per origin (the first seen), at most :data:`MAX_TRACES`."""
    seen: dict[tuple[Source | Marker, bool], Trace] = {}
    for group in groups:
        for trace in group:
            key = (trace.origin, trace.order_only)
            if key not in seen and len(seen) < MAX_TRACES:
                seen[key] = trace
    return tuple(seen.values())


def union(*values: Val, step: Location | None = None) -> Val:
    """A plain value carrying every trace of ``values`` (with ``step`` added when given); a set's
    missing order carries over."""
    traces = merge_traces(*(v.traces for v in values))
    if step is not None:
        traces = tuple(t.then(step) for t in traces)
    unordered = next((v.unordered for v in values if v.unordered is not None), None)
    return Val(traces=traces, unordered=unordered)


def all_traces(value: Val) -> tuple[Trace, ...]:
    """Every trace of ``value``, its items' and its keys' included."""
    groups = [value.traces]
    for item in value.items or ():
        groups.append(all_traces(item))
    for _, item in value.keys or ():
        groups.append(all_traces(item))
    return merge_traces(*groups)


def flat(value: Val) -> Val:
    """``value`` as a plain value carrying all its traces (its items' and keys' included)."""
    if value.items is None and value.keys is None:
        return (
            value
            if value.func is None and value.param is None
            else Val(value.traces, unordered=value.unordered)
        )
    return Val(traces=all_traces(value), unordered=value.unordered)


@attrs.frozen
class Finding:
    """A value that changes between calls, placed before content that repeats.

    ``path``/``line``/``column``: where the value is made; ``flow``: the path it takes, from that line to
    the request (the last location); ``slot``: where in the request it lands (``system``, ``tools``,
    ``messages[0] (system)``, a contributor's anchor ...); ``fix``: what to do.
    """

    rule: str
    path: str
    line: int
    column: int
    source: str
    slot: str
    api: str
    message: str
    fix: str
    flow: tuple[Location, ...]

    @property
    def sink(self) -> Location:
        """The request that sends the value (the last step of the flow)."""
        return self.flow[-1]

    def to_json(self) -> dict[str, Any]:
        """The finding as a JSON-ready dict."""
        return {
            "rule": self.rule,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "source": self.source,
            "slot": self.slot,
            "api": self.api,
            "message": self.message,
            "fix": self.fix,
            "flow": [step.to_json() for step in self.flow],
        }


@attrs.frozen
class Note:
    """Where the analysis gave up rather than guess (a dynamic call, a request of unknown shape)."""

    path: str
    line: int
    column: int
    message: str

    def to_json(self) -> dict[str, Any]:
        """The note as a JSON-ready dict."""
        return {"path": self.path, "line": self.line, "column": self.column, "message": self.message}


@attrs.frozen
class LintResult:
    """What :func:`~promptkit.codelint.lint_code_result` returns: the findings, the notes, the number
    of files read and of findings silenced by ``# promptkit: ignore[...]`` comments."""

    findings: tuple[Finding, ...]
    notes: tuple[Note, ...]
    files: int
    ignored: int
