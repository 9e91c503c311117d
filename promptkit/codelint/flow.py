"""The analysis' statements and functions: environments, branches, summaries, what reaches a request.

Every function of the project is evaluated once with its parameters as :class:`Marker` values; its
:class:`Summary` is what it returns and what reaches a request inside it. A call replaces the markers
with the arguments (:func:`~promptkit.codelint.values.substitute`), so a value made in one module and
sent by a helper in another keeps its path. Expressions and calls are
:class:`~promptkit.codelint.calls.CallEvaluator`'s; this module holds the statements and the findings.
"""

from __future__ import annotations

import ast

import attrs

from promptkit.codelint.calls import CallEvaluator, Frame, Hit, Summary
from promptkit.codelint.index import ClassInfo, FuncInfo, ModuleIndex, build_indexes
from promptkit.codelint.model import (
    EMPTY,
    Finding,
    LintResult,
    Location,
    Marker,
    Note,
    Source,
    Trace,
    Val,
    all_traces,
    flat,
    union,
)
from promptkit.codelint.project import Module, Project
from promptkit.codelint.sinks import message_slots
from promptkit.codelint.sources import RULES, is_per_turn_parameter
from promptkit.codelint.values import add_step, join, without_markers

__all__ = ["Analyzer", "analyze_project"]


class Analyzer(CallEvaluator):
    """One run of the analysis over a project (see the module docstring)."""

    def __init__(self, project: Project) -> None:
        super().__init__(build_indexes(project))
        self.by_path: dict[str, Module] = {m.path: m for m in project.modules}
        self.project = project
        self.summaries: dict[str, Summary] = {}
        self.in_progress: set[str] = set()
        self.module_envs: dict[str, dict[str, Val]] = {}
        self.attr_values: dict[tuple[str, str], Val] = {}
        self.findings: dict[tuple[object, ...], Finding] = {}
        self.notes: dict[tuple[object, ...], Note] = {}
        self.ignored: set[tuple[object, ...]] = set()
        #: findings of a parameter named like the user's message, by function: kept for a function no
        #: call of the project reaches (an entry point); a call says what is passed instead
        self.pending: dict[str, dict[tuple[object, ...], Finding]] = {}

    # --- the run --------------------------------------------------------------------------------------

    def run(self) -> LintResult:
        """Evaluate every module and every function; the findings sorted by file and line."""
        for index in self.indexes:
            self.module_env(index)
        done: set[str] = set()
        while len(done) < len(self.functions):
            for key in [k for k in self.functions if k not in done]:
                done.add(key)
                self.summary(self.functions[key])
        for func, found in self.pending.items():
            if func not in self.called:
                for where, finding in found.items():
                    self.findings.setdefault(where, finding)
        findings = sorted(
            self.findings.values(), key=lambda f: (f.path, f.line, f.column, f.sink.line, f.slot)
        )
        notes = sorted(self.notes.values(), key=lambda n: (n.path, n.line, n.column, n.message))
        return LintResult(tuple(findings), tuple(notes), len(self.indexes), len(self.ignored))

    def module_env(self, index: ModuleIndex) -> dict[str, Val]:
        """The module's global values, from running its top level once (a cycle sees what is there)."""
        path = index.module.path
        env = self.module_envs.get(path)
        if env is None:
            env = self.module_envs[path] = {}
            frame = Frame(index, env)
            self.block(index.module.tree.body, frame)
        return env

    def global_value(self, index: ModuleIndex, name: str, depth: int = 0) -> Val | None:
        env = self.module_env(index)
        if name in env:
            return env[name]
        if name in index.funcs:
            return Val(func=index.funcs[name].key)
        if name in index.classes:
            return Val(func="class:" + index.classes[name].key)
        if name in index.imports and depth < 8:
            module, attr = index.imports[name]
            target = self.by_module[id(module)]
            if attr is None:
                return Val(func="module:" + module.path)
            return self.global_value(target, attr, depth + 1)
        return None

    # --- summaries ------------------------------------------------------------------------------------

    def summary(self, func: FuncInfo) -> Summary:
        """What ``func`` returns and what reaches a request inside it (a recursive call sees nothing)."""
        found = self.summaries.get(func.key)
        if found is not None:
            return found
        if func.key in self.in_progress:
            return Summary(EMPTY, ())
        self.in_progress.add(func.key)
        try:
            frame = Frame(func.module, self.parameters(func), func)
            if isinstance(func.node, ast.Lambda):
                frame.returns.append(self.expr(func.node.body, frame))
            else:
                self.block(func.node.body, frame)
            ret = join(frame.returns)
            summary = Summary(ret, tuple(frame.hits))
        finally:
            self.in_progress.discard(func.key)
        self.summaries[func.key] = summary
        return summary

    def parameters(self, func: FuncInfo) -> dict[str, Val]:
        """The environment a function starts with: each parameter a marker (``self`` the instance), a
        parameter named like the user's message also per-turn input, a default's value included."""
        env: dict[str, Val] = dict(func.outer or {})
        path = func.module.module.path
        args = func.node.args
        nodes = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        for index, (name, node) in enumerate(zip(func.params, nodes, strict=True)):
            if index == 0 and func.is_method and func.klass is not None:
                env[name] = Val(self_of=func.klass.key)
                continue
            traces = [Trace(Marker(func.key, index))]
            if is_per_turn_parameter(name):
                what = f"parameter `{name}` of `{func.name}()` (the turn's input)"
                traces.append(Trace(Source("per-turn", path, node.lineno, node.col_offset, what, func.key)))
            default = self.default_value(func, index)
            traces += all_traces(default)
            env[name] = Val(traces=tuple(traces), param=index, self_of=self.annotated_class(func, node))
        for extra in (args.vararg, args.kwarg):
            if extra is not None:
                env[extra.arg] = EMPTY
        return env

    def annotated_class(self, func: FuncInfo, node: ast.arg) -> str | None:
        """The project class a parameter is annotated with (``settings: Settings``), if any: its
        attributes are then what the class stores."""
        annotation = node.annotation
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            name = annotation.value
        elif isinstance(annotation, ast.Name):
            name = annotation.id
        else:
            return None
        found = self.global_value(func.module, name)
        if found is None or found.func is None or not found.func.startswith("class:"):
            return None
        return found.func.partition(":")[2]

    def default_value(self, func: FuncInfo, index: int) -> Val:
        node = func.defaults.get(index)
        if node is None:
            return EMPTY
        frame = Frame(func.module, dict(func.outer or {}))
        step = Location(func.module.module.path, node.lineno, node.col_offset,
                        f"default of parameter `{func.params[index]}`")  # fmt: skip
        return add_step(self.expr(node, frame), step)

    def self_attribute(
        self, klass: ClassInfo, name: str, frame: Frame, node: ast.expr, own: bool = True
    ) -> Val:
        """``self.<name>`` read in a method: what the class's methods (``__init__`` first) store there
        (``own``: read from this method's own ``self``, which sees what the method stored so far)."""
        if own and name in frame.self_attrs:
            return frame.self_attrs[name]
        for setter in klass.setters.get(name, ()):
            if frame.func is not setter:
                self.summary(setter)
        value = self.attr_values.get((klass.key, name))
        if value is None:
            method = klass.methods.get(name)
            return Val(func=method.key) if method is not None else EMPTY
        step = self.loc(frame, node, f"read from `self.{name}`")
        return add_step(value, step)

    def store_self(self, frame: Frame, name: str, value: Val, node: ast.AST) -> None:
        """``self.<name> = value`` in a method: the value the rest of the method reads, and (its
        parameters replaced by their defaults) what the class's other methods read."""
        value = add_step(value, self.loc(frame, node, f"stored in `self.{name}`"))
        frame.self_attrs[name] = value
        func, klass = frame.func, frame.func.klass if frame.func is not None else None
        if func is None or klass is None:
            return
        defaults = {i: self.default_value(func, i) for i in func.defaults}
        seen = without_markers(value, func.key, defaults)
        old = self.attr_values.get((klass.key, name))
        self.attr_values[(klass.key, name)] = seen if old is None else join([old, seen])

    # --- statements -----------------------------------------------------------------------------------

    def block(self, body: list[ast.stmt], frame: Frame) -> None:
        for statement in body:
            self.statement(statement, frame)

    def statement(self, node: ast.stmt, frame: Frame) -> None:
        if isinstance(node, ast.Assign):
            value = self.expr(node.value, frame)
            for target in node.targets:
                self.assign(target, value, frame)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.assign(node.target, self.expr(node.value, frame), frame)
        elif isinstance(node, ast.AugAssign):
            self.augmented(node, frame)
        elif isinstance(node, ast.Expr):
            self.expr(node.value, frame)
        elif isinstance(node, ast.Return):
            if node.value is not None:
                name = frame.func.name if frame.func is not None else "<module>"
                value = self.expr(node.value, frame)
                frame.returns.append(add_step(value, self.loc(frame, node, f"returned by `{name}()`")))
        elif isinstance(node, ast.If):
            self.expr(node.test, frame)
            self.branches([node.body, node.orelse], frame)
        elif isinstance(node, ast.While | ast.For | ast.AsyncFor):
            self.loop(node, frame)
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                value = self.expr(item.context_expr, frame)
                if item.optional_vars is not None:
                    self.assign(item.optional_vars, flat(value), frame, step=False)
            self.block(node.body, frame)
        elif isinstance(node, ast.Try | ast.TryStar):
            self.block(node.body, frame)
            self.branches([h.body for h in node.handlers] + [node.orelse], frame)
            self.block(node.finalbody, frame)
        elif isinstance(node, ast.Match):
            self.expr(node.subject, frame)
            self.branches([case.body for case in node.cases] + [[]], frame)
        else:
            self.definition(node, frame)

    def loop(self, node: ast.While | ast.For | ast.AsyncFor, frame: Frame) -> None:
        """A loop's body runs twice (once in a loop nested deeper than two): a request in the loop sees
        what the first pass appended, as the second iteration does."""
        for _ in range(2 if frame.loops < 2 else 1):
            if isinstance(node, ast.While):
                self.expr(node.test, frame)
            else:
                element = self.element_of(self.expr(node.iter, frame), frame, node.iter)
                self.assign(node.target, element, frame, step=False)
            frame.loops += 1
            try:
                self.branches([node.body, node.orelse], frame)
            finally:
                frame.loops -= 1

    def definition(self, node: ast.stmt, frame: Frame) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            func = self.function_of(node, frame)
            frame.env[node.name] = Val(func=func.key)
            for decorator in node.decorator_list:
                self.decorator(decorator, func, frame)
        elif isinstance(node, ast.ClassDef) and frame.func is None:
            klass = frame.module.classes.get(node.name)
            for item in node.body:
                if isinstance(item, ast.Assign | ast.AnnAssign):
                    inner = Frame(frame.module, dict(frame.env))
                    self.statement(item, inner)
                    if klass is not None:
                        for name, value in inner.env.items():
                            if frame.env.get(name) is not value:
                                self.attr_values.setdefault((klass.key, name), value)
                elif isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and klass is not None:
                    method = klass.methods.get(item.name)
                    for decorator in item.decorator_list:
                        if method is not None:
                            self.decorator(decorator, method, frame)

    def function_of(self, node: ast.FunctionDef | ast.AsyncFunctionDef, frame: Frame) -> FuncInfo:
        """The :class:`FuncInfo` of a ``def`` met while running a body (a nested one is made here)."""
        if frame.func is None and frame.module.funcs.get(node.name) is not None:
            known = frame.module.funcs[node.name]
            if known.node is node:
                return known
        outer = frame.func
        key = f"{frame.module.module.path}:{outer.name if outer else ''}.<locals>.{node.name}@{node.lineno}"
        func = self.functions.get(key)
        if func is None:
            func = FuncInfo(key, node.name, node, frame.module, outer.klass if outer else None, frame.env)
            self.functions[key] = func
        return func

    def branches(self, bodies: list[list[ast.stmt]], frame: Frame) -> None:
        """Run each body on its own copy of the environment, then join what each name may hold."""
        if len(bodies) == 2 and not bodies[1]:
            before = dict(frame.env)
            self.block(bodies[0], frame)
            envs = [dict(frame.env), before]
        else:
            envs = []
            for body in bodies:
                branch = attrs.evolve(frame, env=dict(frame.env))
                self.block(body, branch)
                envs.append(branch.env)
        names = dict.fromkeys(name for env in envs for name in env)
        frame.env.clear()
        frame.env.update({name: join([env.get(name, EMPTY) for env in envs]) for name in names})

    def assign(self, target: ast.expr, value: Val, frame: Frame, step: bool = True) -> None:
        if isinstance(target, ast.Name):
            if step and (value.traces or value.items or value.keys):
                value = add_step(value, self.loc(frame, target, f"assigned to `{target.id}`"))
            frame.env[target.id] = value
        elif isinstance(target, ast.Tuple | ast.List):
            items = value.items
            for i, element in enumerate(target.elts):
                part = items[i] if items is not None and len(items) == len(target.elts) else flat(value)
                if isinstance(element, ast.Starred):
                    self.assign(element.value, flat(value), frame, step)
                else:
                    self.assign(element, part, frame, step)
        elif isinstance(target, ast.Attribute):
            if self.is_self(target.value, frame):
                self.store_self(frame, target.attr, value, target)
        elif isinstance(target, ast.Subscript):
            self.set_target(target, value, frame)

    def augmented(self, node: ast.AugAssign, frame: Frame) -> None:
        old = self.expr(node.target, frame)
        value = self.expr(node.value, frame)
        if isinstance(node.op, ast.Add) and (old.items is not None or value.items is not None):
            added = value.items if value.items is not None else (attrs.evolve(value, spread=True),)
            new = self.concatenated(old, Val(items=tuple(attrs.evolve(v, appended=True) for v in added)))
        else:
            new = union(old, value, step=self.loc(frame, node, "concatenated"))
        self.set_target(node.target, new, frame)

    # --- what reaches a request -----------------------------------------------------------------------

    def record(self, frame: Frame, slot: str, traces: tuple[Trace, ...], api: str, sink: Location) -> None:
        """``traces`` land in ``slot``: a finding per source, a note per dynamic call, and a parameter
        kept in the function's summary for its callers."""
        markers = tuple(t for t in traces if isinstance(t.origin, Marker))
        if markers and frame.func is not None:
            frame.hits.append(Hit(slot, markers, api, sink))
        for trace in traces:
            origin = trace.origin
            if isinstance(origin, Source) and origin.rule == "dynamic":
                self.note(origin.path, origin.line, origin.column,
                          f"gave up on {origin.what}: its result reaches {slot} of `{api}` "
                          f"({sink.path}:{sink.line}); not reported")  # fmt: skip
            elif isinstance(origin, Source):
                self.finding(origin, trace, slot, api, sink)

    def record_messages(self, frame: Frame, keyword: str, value: Val, api: str, sink: Location) -> None:
        """A list of messages: every entry before the last one is part of the repeated prefix."""
        if value.items is not None:
            for slot, item in message_slots(value, keyword):
                self.record(frame, slot, all_traces(item), api, sink)
        elif value.param is not None and frame.func is not None:
            frame.hits.append(Hit(keyword, (), api, sink, value.param))
        elif any(isinstance(t.origin, Source) for t in value.traces):
            self.note(sink.path, sink.line, sink.column,
                      f"`{keyword}=` of `{api}` carries a changing value but the list's order is not known "
                      "here (built dynamically); not reported")  # fmt: skip

    def replay_hits(self, summary: Summary, binding_args: dict[int, Val], func: FuncInfo, frame: Frame,
                    substituted: list[tuple[Hit, tuple[Trace, ...]]]) -> None:  # fmt: skip
        """What reaches a request inside a callee through its parameters, for this call's arguments."""
        for hit, traces in substituted:
            self.record(frame, hit.slot, traces, hit.api, hit.sink)
        for hit in summary.hits:
            if hit.param is not None:
                arg = binding_args.get(hit.param)
                if arg is not None:
                    self.record_messages(frame, hit.slot, arg, hit.api, hit.sink)

    def finding(self, origin: Source, trace: Trace, slot: str, api: str, sink: Location) -> None:
        rule = RULES[origin.rule]
        start = Location(origin.path, origin.line, origin.column, f"{rule.name}: {origin.what}")
        flow = (start, *trace.steps, sink)
        key = (origin, sink.path, sink.line, slot)
        if self.is_ignored(origin.rule, flow):
            self.ignored.add(key)
            return
        if key in self.findings:
            return
        message = (f"{rule.description}: `{origin.what}` (line {origin.line}) lands in {slot} of `{api}` "
                   f"({sink.path}:{sink.line}), before content that repeats")  # fmt: skip
        finding = Finding(
            rule.id, origin.path, origin.line, origin.column, origin.what, slot, api, message, rule.fix, flow
        )
        if origin.param_of is not None:  # decided at the end: is the function called in the project?
            self.pending.setdefault(origin.param_of, {}).setdefault(key, finding)
        else:
            self.findings[key] = finding

    def is_ignored(self, rule: str, flow: tuple[Location, ...]) -> bool:
        for step in flow:
            module = self.by_path.get(step.path)
            rules = module.ignores.get(step.line) if module is not None else None
            if rules and ("*" in rules or rule in rules):
                return True
        return False

    def note(self, path: str, line: int, column: int, message: str) -> None:
        module = self.by_path.get(path)
        rules = module.ignores.get(line) if module is not None else None
        if rules and ("*" in rules or "dynamic" in rules):
            return
        self.notes.setdefault((path, line, column, message), Note(path, line, column, message))


def analyze_project(project: Project) -> LintResult:
    """Run the analysis over ``project``."""
    return Analyzer(project).run()
