"""Expressions: names and their symbolic values, compile-time evaluation, sequences, mappings and
comprehensions."""

from __future__ import annotations

import ast
from typing import Any

from dagc.fixes import Fix
from dagc.frontend.arguments import StaticArgs
from dagc.frontend.configs import ConfigValue
from dagc.frontend.extract.context import Component
from dagc.frontend.extract.glue import GLUE_EXPRS, PY_BUILTINS
from dagc.frontend.extract.maps import MapBound
from dagc.frontend.extract.messages import describe
from dagc.frontend.extract.queries import names_in, target_names
from dagc.frontend.extract.records import Record, record_field
from dagc.frontend.extract.values import (
    PLAIN_LITERALS,
    POISON,
    Callee,
    ClassValue,
    DagcFunction,
    Dyn,
    External,
    ExtractError,
    GrowingList,
    ModuleValue,
    ParamValue,
    Poisoned,
    RuntimeUse,
    Scope,
    Static,
    Undefined,
    UsedBefore,
    Value,
    is_runtime,
    known_container,
    mutable_ids,
    to_operand,
)
from dagc.frontend.fix_edits import rename_name_fix
from dagc.frontend.modules import (
    Constant,
    ImportedModule,
    ImportedName,
    ModuleInfo,
    Opaque,
    PipelineDef,
    TaskDef,
    static_symbol,
)
from dagc.frontend.static import (
    BUILTIN,
    MAX_INT_BITS,
    STATIC_BUILTINS,
    NotStatic,
    StaticIterator,
    eval_static,
)
from dagc.ir.core import MODULE_VALUE_ATTR, Node
from dagc.ir.facts import Effects
from dagc.ir.types import Map, Ref, Seq, TaskOptions, operand_from_python

_SURE_SLIP = 0.8  # the similarity (difflib) from which `dagc fix` writes the close name for an undefined one


class Expressions(Component):
    """Gives each expression its symbolic value."""

    def eval(self, expr: ast.expr, scope: Scope, info: ModuleInfo, *, n_outputs: int = 1) -> Value:
        if isinstance(expr, ast.Call):
            return self.cx.calls.call(expr, scope, info, n_outputs)
        if isinstance(expr, ast.Name):
            return self.name_value(expr, scope, info)
        if isinstance(expr, ast.Constant):
            if type(expr.value) in PLAIN_LITERALS and not (  # (the common case, without the static evaluator)
                    type(expr.value) is int and expr.value.bit_length() > MAX_INT_BITS):
                return Static(expr.value)
            return Static(self.static_value(expr, scope, info))
        if isinstance(expr, (ast.List, ast.Tuple)):
            items = []
            for elt in expr.elts:
                if isinstance(elt, ast.Starred):
                    self.cx.sink.error("DAGC109", "starred items are not supported here", info.source.span(elt),
                                       hint="list the items explicitly")
                    raise ExtractError
                items.append(self.eval(elt, scope, info))
            return self.sequence(items, isinstance(expr, ast.List), expr, info)
        if isinstance(expr, ast.Dict):
            pairs = []
            for key, val in zip(expr.keys, expr.values):
                if key is None:
                    self.cx.sink.error("DAGC109", "`**` in a dict is not supported here", info.source.span(val),
                                       hint="list the entries explicitly")
                    raise ExtractError
                pairs.append((self.eval(key, scope, info), self.eval(val, scope, info)))
            return self.mapping(pairs, expr, info)
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp, ast.DictComp)):
            return self.comprehension(expr, scope, info)
        if isinstance(expr, (ast.Attribute, ast.Subscript)) and isinstance(expr.value, ast.Name) and isinstance(
                scope.env.get(expr.value.id), Record) and not (  # `parts.train`, `parts[0]` of a NamedTuple built
                isinstance(expr, ast.Subscript) and self.cx.glue.needs_glue(expr.slice, scope, info)):  # here
            key = expr.attr if isinstance(expr, ast.Attribute) else self.static_value(expr.slice, scope, info)
            field = record_field(scope.env[expr.value.id], key)
            if field is not None:
                return field
        if isinstance(expr, ast.IfExp) and not self.cx.glue.needs_glue(expr.test, scope, info):
            # `get_lr(it) if decay_lr else learning_rate`: the test is known now, only its branch is evaluated
            chosen = expr.body if self.static_value(expr.test, scope, info) else expr.orelse
            return self.eval(chosen, scope, info, n_outputs=n_outputs)
        if isinstance(expr, GLUE_EXPRS) and self.cx.glue.needs_glue(expr, scope, info):
            if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
                joined = self._concat(expr, scope, info)
                if joined is not None:
                    return joined
            return self.cx.glue.glue(expr, scope, info)
        # anything else must be a compile-time expression (arithmetic on constants, f-strings, …)
        return Static(self.static_value(expr, scope, info))

    def _concat(self, expr: ast.BinOp, scope: Scope, info: ModuleInfo) -> Value | None:
        """`xs + [y]` where both sides are lists (or both tuples) of known length: no glue needed."""
        def known(e: ast.expr) -> tuple[str, list[Value]] | None:
            if isinstance(e, (ast.List, ast.Tuple)) and not any(isinstance(x, ast.Starred) for x in e.elts):
                return ("list" if isinstance(e, ast.List) else "tuple", [])
            if isinstance(e, ast.Name):
                found = known_container(scope.env.get(e.id))
                return found if found is not None and found[0] != "dict" else None
            if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
                return known(e.left) and known(e.right)
            return None

        left, right = known(expr.left), known(expr.right)
        if left is None or right is None or left[0] != right[0]:
            return None
        a = known_container(self.eval(expr.left, scope, info))
        b = known_container(self.eval(expr.right, scope, info))
        if a is None or b is None or a[0] != b[0]:
            return None
        return self.sequence([*a[1], *b[1]], a[0] == "list", expr, info)

    def sequence(self, items: list[Value], is_list: bool, expr: ast.expr, info: ModuleInfo) -> Value:
        if any(is_runtime(v) for v in items):
            try:
                return self._capture(Seq("list" if is_list else "tuple", tuple(to_operand(v) for v in items)),
                                     items)
            except TypeError:
                self.not_a_value(expr, info)
        values = [v.value for v in items if isinstance(v, Static)]
        if len(values) != len(items):
            self.not_a_value(expr, info)
        return Static(values if is_list else tuple(values))

    def appended(self, before: Value | None, item: ast.expr, scope: Scope, info: ModuleInfo) -> GrowingList | None:
        """`xs.append(v)` on a run-time list: the list with one more operand, made from the last one's
        operands and captured lists (not from its items again: 10,000 appends cost 10,000 steps, not 50
        million); None when `xs` is not such a list (the general path then applies)."""
        if not isinstance(before, GrowingList) and not (
                isinstance(before, Dyn) and isinstance(before.operand, Seq) and before.operand.kind == "list"):
            return None
        value = self.eval(item, scope, info)
        try:
            added = to_operand(value)
        except TypeError:
            self.not_a_value(item, info)
            raise
        ids: set[int] = set()
        if isinstance(value, Static):
            mutable_ids(value.value, ids)
        if isinstance(before, GrowingList):
            return before.grown(added, frozenset(ids))
        prior = self.cx.captured.get(id(before.operand))
        return GrowingList([*before.operand.items, added], len(before.operand.items) + 1,
                           frozenset(ids | (prior[1] if prior is not None else set())), self.cx.captured)

    def _capture(self, operand: Seq | Map, items: list[Value]) -> Dyn:
        """A run-time container; remember the compile-time lists and dicts copied into it."""
        ids: set[int] = set()
        for item in items:
            if isinstance(item, Static):
                mutable_ids(item.value, ids)
        if ids:
            self.cx.captured[id(operand)] = (operand, ids)
        return Dyn(operand)

    def mapping(self, pairs: list[tuple[Value, Value]], expr: ast.expr, info: ModuleInfo) -> Value:
        if any(is_runtime(k) or is_runtime(v) for k, v in pairs):
            try:
                return self._capture(Map(tuple((to_operand(k), to_operand(v)) for k, v in pairs)),
                                     [v for _, v in pairs])
            except TypeError:
                self.not_a_value(expr, info)
        if not all(isinstance(k, Static) and isinstance(v, Static) for k, v in pairs):
            self.not_a_value(expr, info)
        try:
            return Static({k.value: v.value for k, v in pairs})
        except TypeError:
            self.not_a_value(expr, info)
            raise

    def comprehension(self, expr: ast.ListComp | ast.GeneratorExp | ast.DictComp, scope: Scope,
                      info: ModuleInfo) -> Value:
        if isinstance(expr, (ast.ListComp, ast.DictComp)) and not expr.generators[0].is_async:
            spec, _ = self.cx.maps.map_spec(expr.generators[0].iter, scope, info)
            if spec is not None and isinstance(expr, ast.ListComp):  # over a run-time list: a `map` region
                return self.cx.maps.map_comprehension(expr, spec, scope, info)
            if spec is not None and "dict" not in scope.env and self.cx.project.lookup(info, "dict") is None:
                return self.cx.maps.map_dict_comprehension(expr, spec, scope, info)  # a map, then dict(pairs)
        results: list[Value] = []
        pairs: list[tuple[Value, Value]] = []
        targets = set().union(*(target_names(g.target) for g in expr.generators))
        saved = {t: scope.env[t] for t in targets if t in scope.env}
        outer_suffix = scope.suffix
        span = info.source.span(expr)

        def generate(level: int, suffix: str) -> None:
            if level == len(expr.generators):
                scope.suffix = suffix
                if isinstance(expr, ast.DictComp):
                    pairs.append((self.eval(expr.key, scope, info), self.eval(expr.value, scope, info)))
                else:
                    results.append(self.eval(expr.elt, scope, info))
                return
            gen = expr.generators[level]
            if gen.is_async:
                self.cx.sink.error("DAGC109", "`async for` is not supported in a pipeline", info.source.span(gen.iter))
                raise ExtractError
            items = self.cx.loops.loop_items(gen.iter, scope, info, "this comprehension")
            for k, item in enumerate(items):
                if not self.cx.spend(span):
                    raise ExtractError
                self.cx.core.assign(gen.target, item, scope, info)
                keep = True
                for cond in gen.ifs:
                    if self.cx.glue.needs_glue(cond, scope, info):
                        self.cx.sink.error("DAGC116", "a comprehension cannot filter on a task result",
                                           info.source.span(cond),
                                           hint="filter on compile-time values, or filter inside a task")
                        raise ExtractError
                    if not self.static_value(cond, scope, info):
                        keep = False
                        break
                if keep:
                    generate(level + 1, f"{suffix}[{k}]")

        try:
            generate(0, outer_suffix)
        finally:
            scope.suffix = outer_suffix
            for t in targets:
                if t in saved:
                    scope.env[t] = saved[t]
                else:
                    scope.env.pop(t, None)
        if isinstance(expr, ast.DictComp):
            return self.mapping(pairs, expr, info)
        return self.sequence(results, True, expr, info)

    def not_a_value(self, expr: ast.expr, info: ModuleInfo) -> None:
        self.cx.sink.error("DAGC109", "this is not a value a task can receive", info.source.span(expr),
                           hint="pass task results, parameters or literals")
        raise ExtractError

    def name_value(self, expr: ast.Name, scope: Scope, info: ModuleInfo) -> Value:
        name = expr.id
        if name in scope.env:
            value = scope.env[name]
            if value is POISON:
                raise ExtractError
            if isinstance(value, MapBound):
                self.cx.maps.map_bound_use(value, expr, info)
            return value
        if name in scope.assigned_later:
            self.cx.sink.error("DAGC102", f"`{name}` is used before it is produced", info.source.span(expr),
                               hint=f"move the statement that assigns `{name}` above this use")
            raise ExtractError
        if name in info.dagc_modules:
            return ModuleValue("dagc", info)
        if info.dagc_names.get(name) in ("after", "trips", "each"):
            return DagcFunction(info.dagc_names[name])
        symbol = self.cx.project.lookup(info, name)
        if symbol is None:
            if name == "__file__":
                return Static(self.static_value(expr, scope, info))
            if name in ("True", "False", "None"):
                return Static({"True": True, "False": False, "None": None}[name])
            if name in STATIC_BUILTINS or name in PY_BUILTINS:
                return External(f"builtin `{name}`")
            self.cx.sink.error("DAGC101", f"name `{name}` is not defined", info.source.span(expr),
                               hint=self._suggest(name, scope, info), fix=self._rename_fix(expr, scope, info))
            raise ExtractError
        if self.is_module_object(name, info):
            self.cx.core.run_time_setting(name, symbol, info, info.source.span(expr))
            return self.module_object(expr, scope, info)
        return self.symbol_value(symbol, name, info, expr)

    def is_module_object(self, name: str, info: ModuleInfo) -> bool:
        """`name` is a module-level object of the user's that dagc cannot know at compile time
        (`DEVICE = torch.device("cpu")`, `W = torch.ones(3)`, `env = gym.make(...)`)."""
        symbol = self.cx.project.lookup(info, name)
        return isinstance(symbol, Opaque) and symbol.kind == "value" and symbol.steps is None

    def module_object(self, expr: ast.Name, scope: Scope, info: ModuleInfo) -> Value:
        """A module-level object used in a pipeline body: a node that reads it where it runs, from the module
        every process has imported (as the plain run reads the one object its import made)."""
        owner, name = self.defined_in(info, expr.id)
        target = f"{owner.name}:{name}"
        made = self.cx.module_objects_read.get(target)
        if made is None:  # one node per object, at the top level: every use is the same object, as in Python
            made = self.cx.node_name(name)
            node = Node(made, "task", target, (), (), (made,), (None,), TaskOptions(), info.source.span(expr))
            node.attrs[MODULE_VALUE_ATTR] = True
            node.attrs["code.reaches"] = [target]
            # read where it runs, after the tasks before it that change the object through its global name,
            # in their process (the state analysis keeps the readers and writers of a global together)
            # (drawn at import: read in one process with the tasks that read it by name)
            node.effects = Effects(reads=(f"{owner.name}.{name}",), drawn=tuple(self.cx.state.drawn_globals([target])))
            assert self.cx.graph is not None
            self.cx.graph.add_node(node)
            self.cx.producer.setdefault(made, made)
            self.cx.used.add(made)
            self.cx.modules_used.add(owner.name)
            self.cx.module_objects_read[target] = made
        return Dyn(Ref(made))

    def namespace(self, args: StaticArgs, expr: ast.expr, info: ModuleInfo) -> Value:
        """`args` of `args = parser.parse_args()` passed whole to a task: an `argparse.Namespace` of the values
        parsed at compile time, built where the task runs; one node for every use, as Python has one object."""
        made = self.cx.module_objects_read.get(f"argparse:{id(args)}")
        if made is None:
            try:
                kwargs = tuple((k, operand_from_python(v)) for k, v in args.values.items())
            except TypeError:
                self.not_a_value(expr, info)
                raise
            made = self.cx.node_name("args")
            node = Node(made, "task", "argparse:Namespace", (), kwargs, (made,), ("argparse.Namespace",),
                        TaskOptions(), info.source.span(expr))
            node.effects = Effects(fresh=True)
            assert self.cx.graph is not None
            self.cx.graph.add_node(node)
            self.cx.producer.setdefault(made, made)
            self.cx.used.add(made)
            self.cx.module_objects_read[f"argparse:{id(args)}"] = made
            self.cx.returned[made] = "argparse.Namespace"  # (for effects: its attributes are values)
        return Dyn(Ref(made))

    def defined_in(self, info: ModuleInfo, name: str) -> tuple[ModuleInfo, str]:
        """The module and name that define `name` as `info` sees it, following the user's own imports."""
        for _ in range(50):
            symbol = info.symbols.get(name)
            if not isinstance(symbol, ImportedName):
                break
            target = self.cx.project.module(symbol.module)
            if target is None or self.cx.project.lookup(target, symbol.name) is None:
                break
            info, name = target, symbol.name
        return info, name

    def _suggest(self, name: str, scope: Scope, info: ModuleInfo) -> str:
        close = self._close_name(name, scope, info)
        if close is not None:
            return f"did you mean `{close}`?"
        return "define it, import it, or pass it as a pipeline parameter"

    def _close_name(self, name: str, scope: Scope, info: ModuleInfo, cutoff: float = 0.6) -> str | None:
        import difflib

        close = difflib.get_close_matches(name, list(scope.env) + list(info.symbols), n=1, cutoff=cutoff)
        return close[0] if close else None

    def _rename_fix(self, node: ast.AST, scope: Scope, info: ModuleInfo) -> Fix | None:
        """The undefined name at `node` written as the defined one it is close to, when it is a slip of a letter
        or two (`lod`, `modle`), not a short name near another (`np` is not `n`)."""
        close = self._close_name(node.id, scope, info, _SURE_SLIP) if isinstance(node, ast.Name) else None
        return None if close is None else rename_name_fix(info.source, node, close)

    def symbol_value(self, symbol: Any, name: str, info: ModuleInfo, use: ast.AST | None = None,
                     use_info: ModuleInfo | None = None) -> Value:
        """The value of module-level `symbol` of `info`; `use` is the expression that reads it, in the
        source of `use_info` (default: `info`)."""
        use_info = use_info or info
        if isinstance(symbol, (TaskDef, PipelineDef)):
            owner = self.cx.project.module(symbol.module) or info
            return Callee(symbol, owner)
        if isinstance(symbol, Constant):
            # read at compile time: remembered so that a task changing it at run time is reported
            qualified = f"{info.name}.{name}"
            if use is not None:
                self.cx.module_reads.setdefault(qualified, (use, use_info))
            for ident in mutable_ids(symbol.value):
                self.cx.module_objects.setdefault(ident, (qualified, symbol.value))
            self.cx.folded.setdefault((info.name, name), None)
            self.cx.module_configs.add(id(symbol.value))
            return Static(symbol.value)
        if isinstance(symbol, ImportedModule):
            user = self.cx.project.module(symbol.module)
            if user is not None:
                return ModuleValue(symbol.module, user)
            return External(f"module `{symbol.module}`")
        if isinstance(symbol, ImportedName):
            return External(f"`{symbol.name}` from `{symbol.module}`")
        if isinstance(symbol, Opaque) and symbol.steps is not None and (symbol.steps.members or symbol.steps.constants):
            return ClassValue(symbol.steps, self.cx.project.module(symbol.steps.module) or info)
        if isinstance(symbol, Opaque) and symbol.kind == "value":
            self.cx.core.run_time_setting(name, symbol, info, use_info.source.span(use) if use is not None else None)
        if isinstance(symbol, Opaque):
            return External(f"{symbol.kind} `{name}`")
        return External(f"`{name}`")

    def static_lookup(self, scope: Scope, info: ModuleInfo):  # type: ignore[no-untyped-def]
        def lookup(node: ast.Name) -> Any:
            if node.id in scope.env:
                value = scope.env[node.id]
                if value is POISON:
                    raise Poisoned(node)
                if isinstance(value, MapBound):
                    self.cx.maps.map_bound_use(value, node, info)
                if isinstance(value, Static):
                    return value.value
                if isinstance(value, ParamValue):
                    return value.value
                if isinstance(value, ClassValue):
                    return value
                raise RuntimeUse(node)
            if node.id in scope.assigned_later:
                raise UsedBefore(node)
            symbol = self.cx.project.lookup(info, node.id)
            if isinstance(symbol, Constant):
                self.cx.folded.setdefault((info.name, node.id), None)
                self.cx.module_configs.add(id(symbol.value))
                return symbol.value
            if symbol is None and node.id in STATIC_BUILTINS:
                return BUILTIN
            if symbol is None and node.id != "__file__":
                raise Undefined(node)
            if isinstance(symbol, Opaque) and symbol.kind == "value":
                self.cx.core.run_time_setting(node.id, symbol, info, info.source.span(node))
            return static_symbol(self.cx.project, info, node, symbol)

        return lookup

    def static_value(self, expr: ast.expr, scope: Scope, info: ModuleInfo) -> Any:
        try:
            return eval_static(expr, self.static_lookup(scope, info))
        except Poisoned:
            pass
        except UsedBefore as exc:
            name = exc.node.id  # type: ignore[attr-defined]
            self.cx.sink.error("DAGC102", f"`{name}` is used before it is produced", info.source.span(exc.node),
                               hint=f"move the statement that assigns `{name}` above this use")
        except Undefined as exc:
            name = exc.node.id  # type: ignore[attr-defined]
            self.cx.sink.error("DAGC101", f"name `{name}` is not defined", info.source.span(exc.node),
                               hint=self._suggest(name, scope, info), fix=self._rename_fix(exc.node, scope, info))
        except RuntimeUse as exc:
            self.cx.sink.error(
                "DAGC114",
                f"`{exc.node.id}` is a task result, but {describe(expr)} here must be known at compile time",  # type: ignore[attr-defined]
                info.source.span(exc.node),
                hint="use a literal, a module constant or a pipeline parameter here; values known only at run "
                "time can be passed to tasks",
            )
        except NotStatic as exc:
            if any(scope.env.get(n) is POISON for n in names_in(expr)):
                raise ExtractError from None  # reported where the name was bound
            self.cx.sink.error("DAGC109", f"{describe(exc.node)} is not supported here: {exc.reason}",
                               info.source.span(exc.node),
                               hint="pipeline bodies may use task calls, literals, constants and parameters; "
                               "do other computation inside a task")
        except RecursionError:
            self.cx.sink.error("DAGC109", "expression nested too deeply", info.source.span(expr),
                               hint="split it into several statements")
        raise ExtractError

    def argument(self, expr: ast.expr, scope: Scope, info: ModuleInfo) -> Value:
        """A task argument; a config instance passed whole is built at run time by its class."""
        if type(expr) is ast.Name:  # the common case: a task result bound to a name
            found = scope.env.get(expr.id)
            if type(found) is Dyn:
                return found
        value = self.eval(expr, scope, info)
        if isinstance(value, Static) and isinstance(value.value, ConfigValue):
            return self.cx.calls.build_config(value.value, expr, scope, info)
        if isinstance(value, Static) and isinstance(value.value, StaticArgs):
            return self.namespace(value.value, expr, info)
        if isinstance(value, Static) and isinstance(value.value, (tuple, list)) and any(
                isinstance(v, ConfigValue) for v in value.value):  # a grid of configs: each built by its class
            items = [self.cx.calls.build_config(v, expr, scope, info) if isinstance(v, ConfigValue) else Static(v)
                     for v in value.value]
            return self.sequence(items, isinstance(value.value, list), expr, info)
        if isinstance(value, Static) and isinstance(value.value, StaticIterator):  # its items, to this task only
            self.cx.loops.use_up(value.value, expr, info, "this task call")
            return Static(list(value.value.items))
        return value
