"""The analysis' expressions and calls: what a Python expression may carry, and where a call sends it.

:class:`CallEvaluator` evaluates an expression to a :class:`~promptkit.codelint.model.Val`: a source
call (``datetime.now()``) makes a trace; an f-string, ``+``, ``%``, ``str.format`` and ``str.join``
carry their parts' traces on; a list, tuple or dict keeps its shape; a set keeps where it was made,
and iterating, listing or joining it makes a ``set-order`` trace (``sorted`` removes it); a call to a
function of the project replaces its parameters with the arguments. A call the analysis cannot follow
(``getattr(obj, name)()``, a callback passed in) makes a ``dynamic`` trace: reported as a note, never
as a finding. A request call (:mod:`~promptkit.codelint.sinks`) hands its parts to ``record``.
"""

from __future__ import annotations

import abc
import ast
from typing import Final

import attrs

from promptkit.codelint.index import ClassInfo, FuncInfo, ModuleIndex
from promptkit.codelint.model import EMPTY, Location, Source, Trace, Val, all_traces, flat, union
from promptkit.codelint.sinks import anchor_before_history, anchor_of, request_api, request_slots
from promptkit.codelint.sources import is_retrieval, source_rule
from promptkit.codelint.values import Binding, add_step, sorted_copy, spread_of, substitute

__all__ = ["CallEvaluator", "Frame", "Hit", "Summary"]


@attrs.frozen
class Hit:
    """What reaches a request inside a function through its parameters: the ``traces`` (markers) that
    land in ``slot``, or (``param``) the parameter that is the whole list of messages."""

    slot: str
    traces: tuple[Trace, ...]
    api: str
    sink: Location
    param: int | None = None


@attrs.frozen
class Summary:
    """A function seen from its callers: the value it returns and its :class:`Hit` list."""

    ret: Val
    hits: tuple[Hit, ...]


@attrs.define
class Frame:
    """The state of one body being evaluated: the module, the names' values, the function (``None``
    for a module's top level), its returns, its hits, the ``self`` attributes it assigned, and how many
    loops enclose the statement being evaluated."""

    module: ModuleIndex
    env: dict[str, Val]
    func: FuncInfo | None = None
    returns: list[Val] = attrs.field(factory=list)
    hits: list[Hit] = attrs.field(factory=list)
    self_attrs: dict[str, Val] = attrs.field(factory=dict)
    loops: int = 0


#: builtins whose result carries nothing that changes (a length, a truth value, a type)
_STABLE: Final[frozenset[str]] = frozenset({
    "len", "bool", "isinstance", "issubclass", "hasattr", "callable", "type", "any", "all", "print", "open",
    "range", "id", "object", "super", "property", "staticmethod", "classmethod", "setattr", "delattr",
})  # fmt: skip
_ORDERING: Final[frozenset[str]] = frozenset({"list", "tuple", "str", "repr", "ascii", "format"})
_PASS: Final[frozenset[str]] = frozenset({
    "enumerate", "reversed", "zip", "iter", "map", "filter", "next", "int", "float", "round", "abs", "min", "max",
    "sum", "dict", "chr", "ord", "bytes", "hex", "divmod",
})  # fmt: skip
_DYNAMIC: Final[frozenset[str]] = frozenset({"eval", "exec", "getattr", "__import__"})
_BUILTINS: Final[frozenset[str]] = _STABLE | _ORDERING | _PASS | _DYNAMIC | {"sorted", "set", "frozenset"}
_MUTATORS: Final[frozenset[str]] = frozenset(
    {"append", "extend", "insert", "update", "add", "sort", "setdefault"}
)


def dotted(node: ast.expr) -> str:
    """``a.b.c`` for an attribute chain (a call in the chain is skipped: ``a().b`` is ``a.b``)."""
    parts = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Name):
            parts.append(node.id)
            break
        else:
            break
    return ".".join(reversed(parts))


class CallEvaluator(abc.ABC):
    """Expressions and calls (see the module docstring); the statements are the subclass's."""

    def __init__(self, indexes: list[ModuleIndex]) -> None:
        self.indexes = indexes
        self.functions: dict[str, FuncInfo] = {}
        #: the functions some call of the project reaches (their parameters are what the calls pass)
        self.called: set[str] = set()
        self.classes: dict[str, ClassInfo] = {}
        self.by_module: dict[int, ModuleIndex] = {id(i.module): i for i in indexes}
        self.by_name: dict[str, ModuleIndex] = {i.module.name: i for i in indexes}
        self.by_file: dict[str, ModuleIndex] = {i.module.path: i for i in indexes}
        for index in indexes:
            self.functions.update((f.key, f) for f in index.funcs.values())
            for klass in index.classes.values():
                self.classes[klass.key] = klass
                self.functions.update((m.key, m) for m in klass.methods.values())

    # --- what the subclass provides -------------------------------------------------------------------

    @abc.abstractmethod
    def summary(self, func: FuncInfo) -> Summary: ...

    @abc.abstractmethod
    def global_value(self, index: ModuleIndex, name: str, depth: int = 0) -> Val | None: ...

    @abc.abstractmethod
    def self_attribute(
        self, klass: ClassInfo, name: str, frame: Frame, node: ast.expr, own: bool = True
    ) -> Val: ...

    @abc.abstractmethod
    def store_self(self, frame: Frame, name: str, value: Val, node: ast.AST) -> None: ...

    @abc.abstractmethod
    def default_value(self, func: FuncInfo, index: int) -> Val: ...

    @abc.abstractmethod
    def record(
        self, frame: Frame, slot: str, traces: tuple[Trace, ...], api: str, sink: Location
    ) -> None: ...

    @abc.abstractmethod
    def record_messages(self, frame: Frame, keyword: str, value: Val, api: str, sink: Location) -> None: ...

    @abc.abstractmethod
    def replay_hits(self, summary: Summary, binding_args: dict[int, Val], func: FuncInfo, frame: Frame,
                    substituted: list[tuple[Hit, tuple[Trace, ...]]]) -> None: ...  # fmt: skip

    @abc.abstractmethod
    def note(self, path: str, line: int, column: int, message: str) -> None: ...

    @abc.abstractmethod
    def block(self, body: list[ast.stmt], frame: Frame) -> None: ...

    @abc.abstractmethod
    def assign(self, target: ast.expr, value: Val, frame: Frame, step: bool = True) -> None: ...

    # --- small helpers --------------------------------------------------------------------------------

    @staticmethod
    def loc(frame: Frame, node: ast.AST, message: str) -> Location:
        return Location(
            frame.module.module.path, getattr(node, "lineno", 0), getattr(node, "col_offset", 0), message
        )

    def source(self, frame: Frame, node: ast.AST, rule: str, what: str, order_only: bool = False) -> Val:
        path = frame.module.module.path
        origin = Source(rule, path, getattr(node, "lineno", 0), getattr(node, "col_offset", 0), what)
        return Val(traces=(Trace(origin, (), order_only),))

    def is_self(self, node: ast.expr, frame: Frame) -> bool:
        """Whether ``node`` is the ``self`` of the method being evaluated."""
        func = frame.func
        return (
            isinstance(node, ast.Name) and func is not None and func.is_method and node.id == func.params[0]
        )

    def lookup(self, name: str, frame: Frame) -> Val | None:
        if name in frame.env:
            return frame.env[name]
        return self.global_value(frame.module, name)

    def qualified(self, node: ast.expr, frame: Frame) -> str | None:
        """The qualified name of an external callee (through the module's imports), or a builtin's."""
        chain = dotted(node)
        probe = node
        while isinstance(probe, ast.Attribute):
            probe = probe.value
        if not chain or not isinstance(probe, ast.Name):
            return None  # a chain through a call (``datetime.now().strftime``) is a method of a value
        root, _, rest = chain.partition(".")
        if root in frame.env or root in frame.module.funcs or root in frame.module.classes:
            return None
        if root in frame.module.imports:
            return None
        base = frame.module.aliases.get(root)
        if base is None:
            return chain if root in _BUILTINS or root == "dict" else None
        return f"{base}.{rest}" if rest else base

    def as_text(self, value: Val, frame: Frame, node: ast.AST, what: str) -> Val:
        """``value`` turned into text or a sequence: a set's hash order becomes a ``set-order`` trace."""
        if value.unordered is None:
            return flat(value)
        made = value.unordered
        order = self.source(frame, node, "set-order", f"{what} of the set made at line {made.line}", True)
        return union(order, Val(traces=all_traces(value)))

    def element_of(self, value: Val, frame: Frame, node: ast.AST) -> Val:
        """One element of ``value`` when iterated (a set's element comes in hash order)."""
        if value.unordered is not None:
            return self.as_text(value, frame, node, "iteration")
        if value.items is not None:
            return union(*(flat(v) for v in value.items))
        return Val(traces=all_traces(value))

    def concatenated(self, left: Val, right: Val) -> Val:
        def parts(value: Val) -> tuple[Val, ...]:
            return value.items if value.items is not None else (spread_of(value),)

        return Val(items=parts(left) + parts(right))

    def set_target(self, node: ast.expr, value: Val, frame: Frame) -> None:
        """Rebind what ``node`` names (a variable, ``self.x``) after a mutation such as ``append``."""
        if isinstance(node, ast.Name):
            frame.env[node.id] = value
        elif isinstance(node, ast.Attribute) and self.is_self(node.value, frame):
            self.store_self(frame, node.attr, value, node)
        elif isinstance(node, ast.Subscript):  # x[k] = v, self.x[0]["content"] += v
            container = self.expr(node.value, frame)
            key = self.expr(node.slice, frame)
            self.set_target(node.value, self.stored(container, key, value, node.slice), frame)

    def stored(self, base: Val, key: Val, value: Val, key_node: ast.expr) -> Val:
        """``base`` once ``base[key] = value`` ran: a constant key sets that key, a key taken from a set
        in hash order leaves the dict's order unfixed."""
        if base.keys is not None and isinstance(key_node, ast.Constant) and isinstance(key_node.value, str):
            keys = (*((k, v) for k, v in base.keys if k != key_node.value), (key_node.value, value))
            return attrs.evolve(base, keys=keys)
        items = base.items
        if items is not None and isinstance(key_node, ast.Constant) and isinstance(key_node.value, int):
            at = key_node.value
            if not any(v.spread for v in items) and -len(items) <= at < len(items):
                at %= len(items)
                return Val(items=(*items[:at], value, *items[at + 1 :]))
        order = [t for t in key.traces if t.order_only]
        merged = union(base, value, Val(traces=tuple(t for t in key.traces if not t.order_only)))
        if order:
            loc = order[0].origin
            if isinstance(loc, Source):
                merged = attrs.evolve(merged, unordered=Location(loc.path, loc.line, loc.column, loc.what))
        return merged

    # --- expressions ----------------------------------------------------------------------------------

    def expr(self, node: ast.expr, frame: Frame) -> Val:
        if isinstance(node, ast.Constant):
            return Val(const=node.value) if isinstance(node.value, str) else EMPTY
        if isinstance(node, ast.Name):
            found = self.lookup(node.id, frame)
            return found if found is not None else EMPTY
        if isinstance(node, ast.Call):
            return self.call(node, frame)
        if isinstance(node, ast.JoinedStr):
            parts = [self.expr(v.value, frame) for v in node.values if isinstance(v, ast.FormattedValue)]
            texts = [self.as_text(p, frame, node, "formatting") for p in parts]
            return union(*texts, step=self.loc(frame, node, "formatted into an f-string"))
        if isinstance(node, ast.Attribute):
            return self.attribute(node, frame)
        if isinstance(node, ast.Subscript):
            return self.subscript(node, frame)
        if isinstance(node, ast.BinOp):
            return self.binop(node, frame)
        if isinstance(node, ast.List | ast.Tuple):
            return Val(items=tuple(self.element(e, frame) for e in node.elts))
        if isinstance(node, ast.Dict):
            return self.dict_display(node, frame)
        if isinstance(node, ast.Set):
            return union(
                *(self.expr(e, frame) for e in node.elts), Val(unordered=self.loc(frame, node, "set"))
            )
        if isinstance(node, ast.ListComp | ast.GeneratorExp | ast.SetComp | ast.DictComp):
            return self.comprehension(node, frame)
        if isinstance(node, ast.BoolOp):
            return union(*(self.expr(v, frame) for v in node.values))
        if isinstance(node, ast.IfExp):
            self.expr(node.test, frame)
            return union(flat(self.expr(node.body, frame)), flat(self.expr(node.orelse, frame)))
        if isinstance(node, ast.Await | ast.Starred | ast.FormattedValue):
            value = self.expr(node.value, frame)
            return spread_of(value) if isinstance(node, ast.Starred) else value
        if isinstance(node, ast.NamedExpr):
            value = self.expr(node.value, frame)
            self.assign(node.target, value, frame)
            return value
        if isinstance(node, ast.Lambda):
            return Val(func=self.lambda_of(node, frame).key)
        if isinstance(node, ast.Compare | ast.UnaryOp):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expr(child, frame)
            return EMPTY
        return EMPTY

    def element(self, node: ast.expr, frame: Frame) -> Val:
        value = self.expr(node, frame)
        return value

    def lambda_of(self, node: ast.Lambda, frame: Frame) -> FuncInfo:
        key = f"{frame.module.module.path}:{node.lineno}:{node.col_offset}:lambda"
        func = self.functions.get(key)
        if func is None:
            outer = frame.func
            func = FuncInfo(key, "<lambda>", node, frame.module, outer.klass if outer else None, frame.env)
            self.functions[key] = func
        return func

    def dict_display(self, node: ast.Dict, frame: Frame) -> Val:
        keys: list[tuple[str, Val]] = []
        loose: list[Val] = []
        for key_node, value_node in zip(node.keys, node.values, strict=True):
            value = self.expr(value_node, frame)
            if key_node is None:  # {**other}
                if value.keys is not None:
                    keys.extend(value.keys)
                else:
                    loose.append(flat(value))
                continue
            key = self.expr(key_node, frame)
            if key.const is not None:
                step = self.loc(frame, value_node, f"put in a dict under `{key.const}`")
                keys.append((key.const, add_step(value, step)))
            else:
                loose += [flat(key), flat(value)]
        if loose:
            return union(*loose, Val(traces=all_traces(Val(keys=tuple(keys)))))
        return Val(keys=tuple(keys))

    def attribute(self, node: ast.Attribute, frame: Frame) -> Val:
        base = self.expr(node.value, frame)
        if base.self_of is not None:
            klass = self.class_by_key(base.self_of)
            if klass is None:
                return EMPTY
            return self.self_attribute(klass, node.attr, frame, node, own=self.is_self(node.value, frame))
        if base.func is not None:
            return self.member(base.func, node.attr, frame)
        if base.view:
            return EMPTY
        traces = []
        for trace in base.traces:
            origin = trace.origin
            if not isinstance(origin, Source) and origin.attr is None:
                at = self.loc(frame, node, f"read `.{node.attr}`")
                trace = Trace(attrs.evolve(origin, attr=node.attr, at=at), trace.steps, trace.order_only)
            traces.append(trace)
        return Val(
            traces=tuple(traces),
            unordered=base.unordered if node.attr in ("keys", "values", "items") else None,
        )

    def class_by_key(self, key: str) -> ClassInfo | None:
        return self.classes.get(key)

    def member(self, ref: str, name: str, frame: Frame) -> Val:
        """``module.name`` of a project module, ``Class.name`` of a project class."""
        kind, _, key = ref.partition(":")
        if kind == "module":
            index = self.by_file.get(key)
            if index is None:
                return EMPTY
            found = self.global_value(index, name)
            if found is None:
                sub = self.by_name.get(f"{index.module.name}.{name}")
                return Val(func="module:" + sub.module.path) if sub is not None else EMPTY
            return found
        if kind == "class":
            klass = self.class_by_key(key)
            if klass is not None and name in klass.methods:
                return Val(func=klass.methods[name].key)
        return EMPTY

    def subscript(self, node: ast.Subscript, frame: Frame) -> Val:
        base = self.expr(node.value, frame)
        index = node.slice
        key = self.expr(index, frame)
        if isinstance(index, ast.Constant):
            if isinstance(index.value, str) and base.keys is not None:
                found = base.key(index.value)
                if found is not None:
                    return found
            if (
                isinstance(index.value, int)
                and base.items is not None
                and not any(v.spread for v in base.items)
            ):
                if -len(base.items) <= index.value < len(base.items):
                    return base.items[index.value]
        if isinstance(index, ast.Slice):
            return (
                Val(traces=all_traces(base), unordered=None) if base.items is None else Val(items=base.items)
            )
        if base.items is not None or base.keys is not None:
            return union(flat(base), flat(key))  # a changing key picks a changing value
        traces = []
        for trace in base.traces:
            origin = trace.origin
            if not isinstance(origin, Source) and origin.attr is None:
                origin = attrs.evolve(origin, attr="[]", at=self.loc(frame, node, "indexed"))
                trace = Trace(origin, trace.steps, trace.order_only)
            traces.append(trace)
        return Val(traces=tuple(traces))

    def binop(self, node: ast.BinOp, frame: Frame) -> Val:
        left, right = self.expr(node.left, frame), self.expr(node.right, frame)
        if isinstance(node.op, ast.Add) and (left.items is not None or right.items is not None):
            return self.concatenated(left, right)
        if isinstance(node.op, ast.BitOr | ast.BitAnd | ast.Sub | ast.BitXor) and (
            left.unordered or right.unordered
        ):
            return union(left, right)
        message = {ast.Add: "concatenated", ast.Mod: "formatted with %"}.get(type(node.op), "computed")
        texts = [self.as_text(v, frame, node, "formatting") for v in (left, right)]
        return union(*texts, step=self.loc(frame, node, message))

    def comprehension(
        self, node: ast.ListComp | ast.GeneratorExp | ast.SetComp | ast.DictComp, frame: Frame
    ) -> Val:
        inner = attrs.evolve(frame, env=dict(frame.env))
        unordered = False
        for generator in node.generators:
            iterated = self.expr(generator.iter, inner)
            if isinstance(node, ast.DictComp) and iterated.unordered is not None:
                unordered = True
                element = Val(traces=all_traces(iterated))
            else:
                element = self.element_of(iterated, inner, generator.iter)
            self.assign(generator.target, element, inner, step=False)
            for condition in generator.ifs:
                self.expr(condition, inner)
        if isinstance(node, ast.DictComp):
            made = union(flat(self.expr(node.key, inner)), flat(self.expr(node.value, inner)))
            return attrs.evolve(made, unordered=self.loc(frame, node, "dict") if unordered else None)
        made = flat(self.expr(node.elt, inner))
        if isinstance(node, ast.SetComp):
            return union(made, Val(unordered=self.loc(frame, node, "set")))
        return attrs.evolve(made, unordered=None)

    # --- calls ----------------------------------------------------------------------------------------

    def call(self, node: ast.Call, frame: Frame) -> Val:
        positional = [self.expr(a, frame) for a in node.args]
        keywords: dict[str, Val] = {}
        for keyword in node.keywords:
            value = self.expr(keyword.value, frame)
            if keyword.arg is not None:
                keywords[keyword.arg] = value
            elif value.keys is not None:
                keywords.update(value.keys)
            else:
                keywords["**"] = union(keywords.get("**", EMPTY), flat(value))
        qualified = self.qualified(node.func, frame)
        api = request_api(dotted(node.func), qualified)
        if api is not None:
            self.request(api, keywords, node, frame)
            return EMPTY
        if "role" in keywords and "content" in keywords:  # Message(role=..., content=...), dict(role=...)
            return Val(keys=tuple(keywords.items()))
        self.assembler(node, positional, keywords, frame)
        if qualified is not None:
            return self.external(qualified, node, positional, keywords, frame)
        return self.callee(node, positional, keywords, frame)

    def request(self, api: str, keywords: dict[str, Val], node: ast.Call, frame: Frame) -> None:
        if "**" in keywords and any(isinstance(t.origin, Source) for t in keywords["**"].traces):
            self.note(frame.module.module.path, node.lineno, node.col_offset,
                      f"`{api}` gets a request built dynamically (**kwargs of unknown keys); not analyzed")  # fmt: skip
        for part in request_slots(api, keywords):
            sink = self.loc(frame, node, f"sent as {part.slot} by `{api}`")
            if part.positional:
                self.record_messages(frame, part.slot, part.value, api, sink)
            else:
                sink = self.loc(frame, node, f"sent as {part.slot} by `{api}`")
                self.record(frame, part.slot, all_traces(part.value), api, sink)

    def assembler(
        self, node: ast.Call, positional: list[Val], keywords: dict[str, Val], frame: Frame
    ) -> None:
        """promptkit's assembler: ``register(key, anchor, build)`` and ``turn_frame(persona=...)``."""
        name = dotted(node.func).rpartition(".")[2]
        if name == "turn_frame" and "persona" in keywords:
            slot = "the persona card (turn_frame persona=)"
            sink = self.loc(frame, node, f"placed as {slot}")
            self.record(frame, slot, all_traces(keywords["persona"]), "promptkit turn_frame", sink)
        elif name == "register" and isinstance(node.func, ast.Attribute):
            anchor_node = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "anchor"), None)  # fmt: skip
            build = positional[2] if len(positional) > 2 else keywords.get("build", EMPTY)
            key = positional[0].const if positional else None
            if anchor_node is not None and build.func is not None:
                self.contributor(build.func, key, anchor_node, node, frame)

    def decorator(self, decorator: ast.expr, func: FuncInfo, frame: Frame) -> None:
        """``@registry.contributor(key, anchor)`` on a ``def``."""
        if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)):
            self.expr(decorator, frame)
            return
        if decorator.func.attr != "contributor":
            self.expr(decorator, frame)
            return
        anchor_node = decorator.args[1] if len(decorator.args) > 1 else next(
            (k.value for k in decorator.keywords if k.arg == "anchor"), None)  # fmt: skip
        key = self.expr(decorator.args[0], frame).const if decorator.args else None
        if anchor_node is not None:
            self.contributor(func.key, key, anchor_node, decorator, frame)

    def contributor(
        self, func_key: str, key: str | None, anchor_node: ast.expr, node: ast.AST, frame: Frame
    ) -> None:
        anchor_name = anchor_node.value if isinstance(anchor_node, ast.Constant) else None
        if isinstance(anchor_node, ast.Attribute):
            anchor_name = anchor_node.attr
        anchor = anchor_of(anchor_name if isinstance(anchor_name, str) else None)
        func = self.functions.get(func_key)
        if anchor is None or func is None or not anchor_before_history(anchor):
            return
        slot = f"contributor `{key or '?'}` at anchor {anchor} (before the history)"
        step = self.loc(frame, node, f"built by contributor `{key or '?'}` at anchor {anchor}")
        ret = substitute(self.summary(func).ret, Binding(func.key, {0: Val(view=True)}, step))
        sink = self.loc(frame, node, f"placed in {slot}")
        self.record(frame, slot, all_traces(ret), "promptkit PromptRegistry", sink)

    def external(self, qualified: str, node: ast.Call, positional: list[Val], keywords: dict[str, Val],
                 frame: Frame) -> Val:  # fmt: skip
        """A call outside the project: a source, a builtin, ``json.dumps``, or a plain function whose
        result carries its arguments' traces."""
        short = qualified.rpartition(".")[2]
        rule = source_rule(qualified, len(positional))
        if rule is not None:
            return self.source(frame, node, rule, f"{dotted(node.func)}()")
        if qualified == "dataclasses.field":  # a dataclass field's default, or what its factory returns
            factory = keywords.get("default_factory", EMPTY)
            target = self.functions.get(factory.func) if factory.func is not None else None
            return self.summary(target).ret if target is not None else keywords.get("default", EMPTY)
        if qualified == "json.dumps":
            return self.json_dumps(node, positional, keywords, frame)
        if qualified in _BUILTINS or qualified == "dict.fromkeys":
            return self.builtin(qualified, node, positional, frame)
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        receiver_name = dotted(receiver) if receiver is not None else None
        if is_retrieval(short, receiver_name):
            return self.source(frame, node, "per-turn", f"{dotted(node.func)}() (a retrieval for this turn)")
        return union(*(flat(v) for v in positional), *(flat(v) for v in keywords.values()))

    def json_dumps(
        self, node: ast.Call, positional: list[Val], keywords: dict[str, Val], frame: Frame
    ) -> Val:
        value = positional[0] if positional else EMPTY
        sort_keys = next((k.value for k in node.keywords if k.arg == "sort_keys"), None)
        if isinstance(sort_keys, ast.Constant) and sort_keys.value is True:
            return sorted_copy(value)
        texts = flat(value)
        if value.unordered is not None:
            made = value.unordered.line
            order = self.source(
                frame, node, "json-order", f"json.dumps() without sort_keys of the dict made at line {made}"
            )
            texts = union(order, texts)
        return Val(traces=texts.traces)

    def builtin(self, name: str, node: ast.Call, positional: list[Val], frame: Frame) -> Val:
        first = positional[0] if positional else EMPTY
        if name in _DYNAMIC:
            if name == "getattr" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                return flat(first)
            return union(*(flat(v) for v in positional), self.dynamic(node, frame))
        if name in _STABLE:
            return EMPTY
        if name == "sorted":
            return sorted_copy(first)
        if name in ("set", "frozenset", "dict.fromkeys"):
            return union(flat(first), Val(unordered=self.loc(frame, node, name)))
        if name in _ORDERING:
            text = self.as_text(first, frame, node, f"{name}()")
            return Val(items=first.items, traces=text.traces) if first.items is not None else text
        return union(*(flat(v) for v in positional))

    def dynamic(self, node: ast.Call, frame: Frame) -> Val:
        what = f"the dynamic call `{ast.unparse(node.func)}(...)` (line {node.lineno})"
        return self.source(frame, node, "dynamic", what)

    def callee(self, node: ast.Call, positional: list[Val], keywords: dict[str, Val], frame: Frame) -> Val:
        """A call whose callee is a value: a project function or class, a method, or a dynamic call."""
        func_node = node.func
        if isinstance(func_node, ast.Attribute):
            base = self.expr(func_node.value, frame)
            if base.func is not None or base.self_of is not None:
                target = (
                    self.member(base.func, func_node.attr, frame)
                    if base.func
                    else self.attribute(func_node, frame)
                )
                if target.func is not None:
                    bound = base if base.self_of is not None else None
                    return self.project_call(target.func, node, positional, keywords, frame, bound)
            return self.method(func_node, base, positional, keywords, node, frame)
        if isinstance(func_node, ast.Name):
            named = self.lookup(func_node.id, frame)
            if named is not None and named.func is not None:
                return self.project_call(named.func, node, positional, keywords, frame, None)
            if named is not None and func_node.id in frame.env:
                return union(*(flat(v) for v in positional), self.dynamic(node, frame))
            if is_retrieval(func_node.id, None):
                return self.source(frame, node, "per-turn", f"{func_node.id}() (a retrieval for this turn)")
            return union(*(flat(v) for v in positional), *(flat(v) for v in keywords.values()))
        self.expr(func_node, frame)
        return union(*(flat(v) for v in positional), self.dynamic(node, frame))

    def project_call(self, ref: str, node: ast.Call, positional: list[Val], keywords: dict[str, Val],
                     frame: Frame, bound: Val | None) -> Val:  # fmt: skip
        kind, _, key = ref.partition(":")
        if kind == "class":
            klass = self.class_by_key(key)
            init = klass.methods.get("__init__") if klass is not None else None
            instance = Val(self_of=key)
            if init is not None:
                self.project_call(init.key, node, positional, keywords, frame, instance)
            return instance
        if kind == "module":
            return EMPTY
        func = self.functions.get(ref)
        if func is None:
            return EMPTY
        args = self.arguments(func, positional, keywords, bound)
        summary = self.summary(func)
        self.called.add(func.key)
        step = self.loc(frame, node, f"passed to `{func.name}()`")
        binding = Binding(func.key, args, step)
        substituted = [(hit, substitute(Val(traces=hit.traces), binding).traces) for hit in summary.hits]
        self.replay_hits(summary, args, func, frame, substituted)
        return substitute(summary.ret, binding)

    def arguments(self, func: FuncInfo, positional: list[Val], keywords: dict[str, Val],
                  bound: Val | None) -> dict[int, Val]:  # fmt: skip
        """Parameter index -> argument of one call (a missing one: its default)."""
        args: dict[int, Val] = {}
        offset = 0
        if func.is_method:
            if bound is not None:
                args[0] = bound
            offset = 1
        for i, value in enumerate(positional):
            if value.spread:
                break
            if i + offset < func.positional:
                args[i + offset] = value
        for name, value in keywords.items():
            if name in func.params:
                args[func.params.index(name)] = value
        for index in func.defaults:
            if index not in args:
                args[index] = self.default_value(func, index)
        return args

    def method(self, func_node: ast.Attribute, receiver: Val, positional: list[Val], keywords: dict[str, Val],
               node: ast.Call, frame: Frame) -> Val:  # fmt: skip
        """A method of a value outside the project (a string's, a list's, a client's)."""
        name = func_node.attr
        first = positional[0] if positional else EMPTY
        if name == "join":
            text = self.as_text(first, frame, node, "str.join")
            return union(flat(receiver), text, step=self.loc(frame, node, "joined into a string"))
        if name in ("format", "format_map"):
            parts = [flat(receiver), *(self.as_text(v, frame, node, "formatting") for v in positional),
                     *(self.as_text(v, frame, node, "formatting") for v in keywords.values())]  # fmt: skip
            return union(*parts, step=self.loc(frame, node, "formatted with str.format"))
        if name in _MUTATORS:
            self.set_target(func_node.value, self.mutated(name, receiver, positional, node), frame)
            return EMPTY
        if (
            name in ("get", "pop")
            and receiver.keys is not None
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found = receiver.key(str(node.args[0].value))
            return found if found is not None else union(*(flat(v) for v in positional[1:]))
        if name in ("copy", "keys", "values", "items"):
            return (
                receiver if name == "copy" else Val(traces=all_traces(receiver), unordered=receiver.unordered)
            )
        if is_retrieval(name, dotted(func_node.value)):
            return self.source(frame, node, "per-turn", f"{dotted(func_node)}() (a retrieval for this turn)")
        return union(flat(receiver), *(flat(v) for v in positional), *(flat(v) for v in keywords.values()))

    def mutated(self, name: str, receiver: Val, positional: list[Val], node: ast.Call) -> Val:
        """``receiver`` once ``append``/``extend``/``insert``/``update``/``add``/``sort`` ran on it."""
        items = receiver.items if receiver.items is not None else (
            (spread_of(receiver),) if receiver.traces or receiver.param is not None else ())  # fmt: skip
        first = positional[0] if positional else EMPTY
        if name == "append":
            return Val(items=(*items, attrs.evolve(first, appended=True)))
        if name == "extend":
            added = first.items if first.items is not None else (spread_of(first),)
            return Val(items=(*items, *(attrs.evolve(v, appended=True) for v in added)))
        if name == "insert" and len(positional) > 1:
            index_node = node.args[0]
            at = (
                index_node.value
                if isinstance(index_node, ast.Constant) and isinstance(index_node.value, int)
                else None
            )
            position = at if at is not None and at >= 0 else max(len(items) - 1, 0)
            return Val(items=(*items[:position], positional[1], *items[position:]))
        if name == "sort":
            return (
                sorted_copy(receiver)
                if receiver.items is None
                else Val(items=tuple(sorted_copy(v) for v in items))
            )
        if name == "update" and receiver.keys is not None and first.keys is not None:
            keys = tuple((k, v) for k, v in receiver.keys if first.key(k) is None) + first.keys
            return attrs.evolve(receiver, keys=keys, unordered=receiver.unordered or first.unordered)
        merged = union(receiver, *(flat(v) for v in positional))
        return attrs.evolve(merged, unordered=receiver.unordered or first.unordered)
