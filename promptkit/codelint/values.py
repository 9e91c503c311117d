"""Operations on :class:`~promptkit.codelint.model.Val` that keep or change its shape: steps added
through a list or dict, values joined at a branch, parameters replaced by what a call passes.

>>> from promptkit.codelint.model import Location, Marker, Trace, Val
>>> param = Val(traces=(Trace(Marker("f", 0)),), param=0)
>>> clock = Val(traces=(Trace(Source("clock", "a.py", 1, 0, "time.time()")),))
>>> called = substitute(param, Binding("f", {0: clock}, Location("a.py", 2, 0, "passed to `f()`")))
>>> called.traces[0].origin.what, [s.line for s in called.traces[0].steps]
('time.time()', [2])
"""

from __future__ import annotations

import attrs

from promptkit.codelint.model import EMPTY, Location, Marker, Source, Trace, Val, all_traces, merge_traces
from promptkit.codelint.sources import PER_TURN_VIEW_ATTRIBUTES

__all__ = ["Binding", "add_step", "join", "sorted_copy", "spread_of", "substitute", "without_markers"]


def add_step(value: Val, step: Location) -> Val:
    """``value`` with ``step`` added to every trace, its items' and keys' included (shape kept)."""
    if not value.traces and value.items is None and value.keys is None:
        return value
    items = tuple(add_step(v, step) for v in value.items) if value.items is not None else None
    keys = tuple((k, add_step(v, step)) for k, v in value.keys) if value.keys is not None else None
    return attrs.evolve(value, traces=tuple(t.then(step) for t in value.traces), items=items, keys=keys)


def spread_of(value: Val) -> Val:
    """``value`` as the ``*value`` element of a list (any number of elements)."""
    return attrs.evolve(value, spread=True)


def _join_items(values: list[Val]) -> tuple[Val, ...] | None:
    """The items of lists joined position by position; a list longer than another (appends in one
    branch, or in a loop's second pass) keeps its extra items."""
    shapes = [v.items for v in values if v.items is not None or v.traces or v.param is not None]
    if not shapes or any(s is None for s in shapes):
        return None
    longest = max(len(s) for s in shapes if s is not None)
    return tuple(join([s[i] for s in shapes if s is not None and i < len(s)]) for i in range(longest))


def join(values: list[Val]) -> Val:
    """One value for what ``values`` may be (branches of an ``if``, several ``return``s): traces merged;
    a list keeps its items when every branch has the same number of them."""
    present = [v for v in values if v is not EMPTY]
    if not present:
        return EMPTY
    if len(present) == 1 or all(v == present[0] for v in present):
        return present[0]
    items = _join_items(present)
    keys = None
    if all(v.keys is not None for v in present):
        names = dict.fromkeys(k for v in present for k, _ in v.keys or ())
        keys = tuple((k, join([v.key(k) or EMPTY for v in present])) for k in names)
    traces = merge_traces(*(v.traces for v in present)) if items is not None or keys is not None else \
        merge_traces(*(all_traces(v) for v in present))  # fmt: skip
    return Val(
        traces=traces,
        items=items,
        keys=keys,
        unordered=next((v.unordered for v in present if v.unordered), None),
        const=present[0].const if all(v.const == present[0].const for v in present) else None,
        func=present[0].func if all(v.func == present[0].func for v in present) else None,
        spread=any(v.spread for v in present),
        self_of=present[0].self_of,
    )


def sorted_copy(value: Val) -> Val:
    """``value`` once sorted: its order no longer depends on a set's hash order."""
    traces = tuple(t for t in all_traces(value) if not t.order_only)
    return Val(traces=traces)


@attrs.frozen
class Binding:
    """What one call passes to ``func``: the argument of each parameter index, and the call's step."""

    func: str
    args: dict[int, Val]
    step: Location | None


def _view_trace(marker: Marker, trace: Trace) -> Trace | None:
    """The ``PromptView`` attribute a contributor reads, as a per-turn source when it changes per turn."""
    if marker.attr not in PER_TURN_VIEW_ATTRIBUTES or marker.at is None:
        return None
    at = marker.at
    source = Source("per-turn", at.path, at.line, at.column, f"view.{marker.attr} (changes every turn)")
    return Trace(source, trace.steps, trace.order_only)


def _substitute_trace(trace: Trace, binding: Binding) -> list[Trace]:
    marker = trace.origin
    if not isinstance(marker, Marker) or marker.func != binding.func:
        return [trace]
    arg = binding.args.get(marker.index)
    if arg is None:
        return []
    if arg.view:
        viewed = _view_trace(marker, trace)
        return [viewed] if viewed is not None else []
    out = []
    for outer in all_traces(arg):
        origin = outer.origin
        if isinstance(origin, Marker) and origin.attr is None and marker.attr is not None:
            origin = Marker(origin.func, origin.index, marker.attr, marker.at)
        middle = (binding.step,) if binding.step is not None else ()
        steps = (*outer.steps, *middle, *trace.steps)
        out.append(Trace(origin, steps, outer.order_only or trace.order_only))
    return out


def substitute(value: Val, binding: Binding) -> Val:
    """``value`` (a callee's return value or what reaches its request) with the callee's parameters
    replaced by the call's arguments, each trace through the call's step; a parameter passed on
    whole keeps the argument's shape."""
    if value.param is not None and not value.traces[1:] and value.traces:
        marker = value.traces[0].origin
        if isinstance(marker, Marker) and marker.func == binding.func and marker.attr is None:
            arg = binding.args.get(value.param)
            if arg is None:
                return EMPTY
            passed = add_step(arg, binding.step) if binding.step is not None else arg
            if value.spread or value.appended:  # *param in a list keeps its place as a spread
                passed = attrs.evolve(passed, spread=value.spread, appended=value.appended)
            return passed
    traces: list[Trace] = []
    for trace in value.traces:
        traces += _substitute_trace(trace, binding)
    items = tuple(substitute(v, binding) for v in value.items) if value.items is not None else None
    keys = tuple((k, substitute(v, binding)) for k, v in value.keys) if value.keys is not None else None
    return attrs.evolve(value, traces=merge_traces(tuple(traces)), items=items, keys=keys, param=None)


def without_markers(value: Val, func: str, defaults: dict[int, Val]) -> Val:
    """``value`` as seen outside ``func`` (an attribute it stores on ``self``): its parameters become
    their defaults where they have one, and are dropped otherwise."""
    return substitute(value, Binding(func, defaults, None))
