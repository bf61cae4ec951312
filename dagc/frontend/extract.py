"""Extracting a pipeline's task graph by symbolic interpretation of its body.

The body is walked statement by statement. Names are bound to symbolic values: a run-time value
(an IR operand referring to task outputs or parameters), a compile-time constant, or a callable
(task, pipeline, module). Task calls become IR nodes; nested pipeline calls are inlined with
hierarchical names. Nothing is executed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from dagc.diagnostics import DiagnosticSink, Note
from dagc.frontend.modules import (
    Constant,
    ImportedModule,
    ImportedName,
    ModuleInfo,
    Opaque,
    PipelineDef,
    Project,
    TaskDef,
)
from dagc.frontend.source import name_span
from dagc.frontend.static import (
    BUILTIN,
    STATIC_BUILTINS,
    NotStatic,
    StaticRange,
    eval_static,
    is_literal_value,
)
from dagc.ir.core import Graph, Node, Param, output_name
from dagc.ir.types import Const, Map, Operand, Ref, Seq, iter_refs, operand_from_python

__all__ = ["extract_pipeline", "Extractor"]


class ExtractError(Exception):
    """Abandons the current statement after its diagnostic was reported."""


@dataclass(frozen=True)
class Dyn:
    """A run-time value: an operand that refers to at least one task output or parameter."""

    operand: Operand


@dataclass(frozen=True)
class Static:
    """A compile-time value (literal, or a StaticRange)."""

    value: Any


@dataclass(frozen=True)
class ParamValue:
    """A pipeline parameter: a run-time reference that also has a compile-time value."""

    name: str
    value: Any


@dataclass(frozen=True)
class Callee:
    symbol: Any  # TaskDef | PipelineDef
    info: ModuleInfo


@dataclass(frozen=True)
class ModuleValue:
    module: str  # a user module
    info: ModuleInfo


@dataclass(frozen=True)
class External:
    """Something from a library or an opaque module-level name: usable only inside tasks."""

    description: str


Value = Any  # Dyn | Static | ParamValue | Callee | ModuleValue | External | tuple[Value, ...]


@dataclass
class Scope:
    """One pipeline body being interpreted (the entry pipeline, or an inlined one)."""

    pipeline: PipelineDef
    prefix: str
    env: dict[str, Value] = field(default_factory=dict)
    assigned_later: set[str] = field(default_factory=set)


def _to_operand(value: Value) -> Operand:
    if isinstance(value, Dyn):
        return value.operand
    if isinstance(value, ParamValue):
        return Ref(value.name)
    if isinstance(value, Static):
        return operand_from_python(value.value)
    if isinstance(value, tuple):
        return Seq("tuple", tuple(_to_operand(v) for v in value))
    raise TypeError(value)


def _is_runtime(value: Value) -> bool:
    if isinstance(value, (Dyn, ParamValue)):
        return True
    if isinstance(value, tuple):
        return any(_is_runtime(v) for v in value)
    return False


def _assigned_names(body: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return names


class Extractor:
    """Builds one `Graph` from one pipeline."""

    def __init__(self, project: Project, sink: DiagnosticSink) -> None:
        self.project = project
        self.sink = sink
        self.graph: Graph | None = None
        self._name_counts: dict[str, int] = {}
        self._stack: list[PipelineDef] = []
        self._nodes_by_task: dict[str, list[str]] = {}

    # ---- entry ------------------------------------------------------------------------------------
    def extract(self, pipeline: PipelineDef, overrides: dict[str, Any]) -> Graph:
        info = pipeline.info
        graph = Graph(
            pipeline.name,
            root=self.project.root_display,
            module=info.name,
            span=info.source.span(pipeline.node),
        )
        self.graph = graph
        scope = Scope(pipeline, prefix="")
        for param in pipeline.sig.params:
            span = info.source.span(param.node)
            if param.kind in ("var_positional", "var_keyword"):
                self.sink.error("DAGC132", f"pipeline parameter `*{param.name}` cannot be given at compile time",
                                span, hint="declare each parameter by name with a default")
                continue
            if param.name in overrides:
                value = overrides[param.name]
            elif param.default is not None:
                try:
                    value = self._static(param.default, scope, info)
                except ExtractError:
                    continue
            else:
                self.sink.error("DAGC005", f"pipeline parameter `{param.name}` has no value",
                                span, hint=f"give it a default, or compile with --param {param.name}=VALUE")
                continue
            if not (is_literal_value(value) or isinstance(value, StaticRange)):
                self.sink.error("DAGC005", f"value of parameter `{param.name}` is not a literal", span)
                continue
            graph.params.append(Param(param.name, operand_from_python(value), param.annotation, span))
            scope.env[param.name] = ParamValue(param.name, value)
        unknown = sorted(set(overrides) - {p.name for p in pipeline.sig.params})
        for name in unknown:
            self.sink.error("DAGC005", f"pipeline `{pipeline.name}` has no parameter `{name}`",
                            name_span(info.source, pipeline.node),
                            hint=f"parameters: {', '.join(pipeline.sig.names()) or 'none'}")
        self._stack.append(pipeline)
        result = self._run_body(scope, info, pipeline.node.body)
        self._stack.pop()
        graph.returns = _to_operand(result) if result is not None else Const(None)
        graph.modules = dict(sorted((m, f) for m, f in self.project.files.items() if self._module_used(m)))
        return graph

    def _module_used(self, module: str) -> bool:
        assert self.graph is not None
        return module == self.graph.module or any(n.module == module for n in self.graph)

    # ---- statements -------------------------------------------------------------------------------
    def _run_body(self, scope: Scope, info: ModuleInfo, body: list[ast.stmt]) -> Value | None:
        scope.assigned_later = _assigned_names(body)
        returned: Value | None = None
        saw_return = False
        for index, stmt in enumerate(body):
            if saw_return:
                self.sink.warning("DAGC108", "code after `return` is never part of the pipeline",
                                  info.source.span(stmt), hint="remove it, or move it before the return")
                break
            try:
                if isinstance(stmt, ast.Return):
                    saw_return = True
                    returned = self._eval(stmt.value, scope, info) if stmt.value is not None else Static(None)
                else:
                    self._statement(stmt, scope, info, is_docstring=index == 0)
            except ExtractError:
                # names this statement would have bound are poisoned: their uses fail silently,
                # so one mistake is reported once, not again at every later use
                for target in _stored_names(stmt):
                    scope.env[target] = POISON
                continue
        if not saw_return:
            self.sink.warning("DAGC115", f"pipeline `{scope.pipeline.name}` returns nothing",
                              name_span(info.source, scope.pipeline.node),
                              hint="return the results you want; tasks whose results are unused are removed "
                              "by `dce` unless marked side_effects=True")
        return returned

    def _statement(self, stmt: ast.stmt, scope: Scope, info: ModuleInfo, *, is_docstring: bool) -> None:
        span = info.source.span(stmt)
        if isinstance(stmt, ast.Expr):
            if is_docstring and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                return
            self._eval(stmt.value, scope, info)
            return
        if isinstance(stmt, ast.Assign):
            if isinstance(stmt.value, ast.Call) and len(stmt.targets) == 1:
                count = self._unpack_count(stmt.targets[0])
                value = self._eval(stmt.value, scope, info, n_outputs=count)
            else:
                value = self._eval(stmt.value, scope, info)
            for target in stmt.targets:
                self._assign(target, value, scope, info)
            return
        if isinstance(stmt, ast.AnnAssign):
            if stmt.value is None:
                return
            self._assign(stmt.target, self._eval(stmt.value, scope, info), scope, info)
            return
        if isinstance(stmt, ast.Pass):
            return
        construct = _STATEMENT_NAMES.get(type(stmt), type(stmt).__name__)
        self.sink.error("DAGC108", f"{construct} is not supported in a pipeline body", span,
                        hint=_STATEMENT_HINTS.get(type(stmt), "move this logic into a @dagc.task"))

    def _unpack_count(self, target: ast.expr) -> int:
        if isinstance(target, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in target.elts):
            return len(target.elts)
        return 1

    def _assign(self, target: ast.expr, value: Value, scope: Scope, info: ModuleInfo) -> None:
        if isinstance(target, ast.Name):
            scope.env[target.id] = value
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            if any(isinstance(e, ast.Starred) for e in target.elts):
                self.sink.error("DAGC112", "starred unpacking is not supported in a pipeline",
                                info.source.span(target), hint="unpack into a fixed number of names")
                raise ExtractError
            items = self._unpack(value, len(target.elts), target, info)
            for elt, item in zip(target.elts, items):
                self._assign(elt, item, scope, info)
            return
        self.sink.error("DAGC109", "assigning into an attribute or item mutates a value; pipelines "
                        "are dataflow and cannot", info.source.span(target),
                        hint="have a task return the updated value and bind it to a new name")
        raise ExtractError

    def _unpack(self, value: Value, count: int, target: ast.expr, info: ModuleInfo) -> list[Value]:
        if isinstance(value, tuple):
            items = list(value)
        elif isinstance(value, Static) and isinstance(value.value, (list, tuple)):
            items = [Static(v) for v in value.value]
        elif isinstance(value, Dyn) and isinstance(value.operand, Seq):
            items = [Dyn(i) if any(True for _ in iter_refs(i)) else Static(_const_value(i))
                     for i in value.operand.items]
        else:
            self.sink.error("DAGC112", f"cannot unpack this value into {count} names",
                            info.source.span(target),
                            hint="unpack the call of a task directly: `a, b = task(...)`")
            raise ExtractError
        if len(items) != count:
            self.sink.error("DAGC112", f"unpacking {len(items)} values into {count} names",
                            info.source.span(target), hint="make both sides the same length")
            raise ExtractError
        return items

    # ---- expressions ------------------------------------------------------------------------------
    def _eval(self, expr: ast.expr, scope: Scope, info: ModuleInfo, *, n_outputs: int = 1) -> Value:
        if isinstance(expr, ast.Call):
            return self._call(expr, scope, info, n_outputs)
        if isinstance(expr, ast.Name):
            return self._name(expr, scope, info)
        if isinstance(expr, ast.Constant):
            return Static(self._static(expr, scope, info))
        if isinstance(expr, (ast.List, ast.Tuple)):
            items = []
            for elt in expr.elts:
                if isinstance(elt, ast.Starred):
                    self.sink.error("DAGC109", "starred items are not supported here", info.source.span(elt),
                                    hint="list the items explicitly")
                    raise ExtractError
                items.append(self._eval(elt, scope, info))
            if any(_is_runtime(v) for v in items):
                kind = "list" if isinstance(expr, ast.List) else "tuple"
                return Dyn(Seq(kind, tuple(_to_operand(v) for v in items)))
            values = [v.value for v in items if isinstance(v, Static)]
            if len(values) != len(items):
                self._not_a_value(expr, info)
            return Static(values if isinstance(expr, ast.List) else tuple(values))
        if isinstance(expr, ast.Dict):
            pairs = []
            for key, val in zip(expr.keys, expr.values):
                if key is None:
                    self.sink.error("DAGC109", "`**` in a dict is not supported here", info.source.span(val),
                                    hint="list the entries explicitly")
                    raise ExtractError
                pairs.append((self._eval(key, scope, info), self._eval(val, scope, info)))
            if any(_is_runtime(k) or _is_runtime(v) for k, v in pairs):
                return Dyn(Map(tuple((_to_operand(k), _to_operand(v)) for k, v in pairs)))
            return Static({k.value: v.value for k, v in pairs})
        # anything else must be a compile-time expression (arithmetic on constants, f-strings, …)
        return Static(self._static(expr, scope, info))

    def _not_a_value(self, expr: ast.expr, info: ModuleInfo) -> None:
        self.sink.error("DAGC109", "this is not a value a task can receive", info.source.span(expr),
                        hint="pass task results, parameters or literals")
        raise ExtractError

    def _name(self, expr: ast.Name, scope: Scope, info: ModuleInfo) -> Value:
        name = expr.id
        if name in scope.env:
            value = scope.env[name]
            if value is POISON:
                raise ExtractError
            return value
        if name in scope.assigned_later:
            self.sink.error("DAGC102", f"`{name}` is used before it is produced", info.source.span(expr),
                            hint=f"move the statement that assigns `{name}` above this use")
            raise ExtractError
        symbol = self.project.lookup(info, name)
        if symbol is None:
            if name in ("True", "False", "None"):
                return Static({"True": True, "False": False, "None": None}[name])
            if name in STATIC_BUILTINS:
                return External(f"builtin `{name}`")
            self.sink.error("DAGC101", f"name `{name}` is not defined", info.source.span(expr),
                            hint=self._suggest(name, scope, info))
            raise ExtractError
        return self._symbol_value(symbol, name, info)

    def _suggest(self, name: str, scope: Scope, info: ModuleInfo) -> str:
        import difflib

        candidates = list(scope.env) + list(info.symbols)
        close = difflib.get_close_matches(name, candidates, n=1)
        if close:
            return f"did you mean `{close[0]}`?"
        return "define it, import it, or pass it as a pipeline parameter"

    def _symbol_value(self, symbol: Any, name: str, info: ModuleInfo) -> Value:
        if isinstance(symbol, (TaskDef, PipelineDef)):
            owner = self.project.module(symbol.module) or info
            return Callee(symbol, owner)
        if isinstance(symbol, Constant):
            return Static(symbol.value)
        if isinstance(symbol, ImportedModule):
            user = self.project.module(symbol.module)
            if user is not None:
                return ModuleValue(symbol.module, user)
            return External(f"module `{symbol.module}`")
        if isinstance(symbol, ImportedName):
            return External(f"`{symbol.name}` from `{symbol.module}`")
        if isinstance(symbol, Opaque):
            return External(f"{symbol.kind} `{name}`")
        return External(f"`{name}`")

    def _static(self, expr: ast.expr, scope: Scope, info: ModuleInfo) -> Any:
        def lookup(node: ast.Name) -> Any:
            if node.id in scope.env:
                value = scope.env[node.id]
                if value is POISON:
                    raise _Poisoned(node)
                if isinstance(value, Static):
                    return value.value
                if isinstance(value, ParamValue):
                    return value.value
                raise _RuntimeUse(node)
            if node.id in scope.assigned_later:
                raise _UsedBefore(node)
            symbol = self.project.lookup(info, node.id)
            if isinstance(symbol, Constant):
                return symbol.value
            if symbol is None and node.id in STATIC_BUILTINS:
                return BUILTIN
            if symbol is None:
                raise _Undefined(node)
            raise NotStatic(node, f"`{node.id}` is not known at compile time")

        try:
            return eval_static(expr, lookup)
        except _Poisoned:
            pass
        except _UsedBefore as exc:
            name = exc.node.id  # type: ignore[attr-defined]
            self.sink.error("DAGC102", f"`{name}` is used before it is produced", info.source.span(exc.node),
                            hint=f"move the statement that assigns `{name}` above this use")
        except _Undefined as exc:
            name = exc.node.id  # type: ignore[attr-defined]
            self.sink.error("DAGC101", f"name `{name}` is not defined", info.source.span(exc.node),
                            hint=self._suggest(name, scope, info))
        except _RuntimeUse as exc:
            self.sink.error(
                "DAGC109",
                f"{_describe(expr)} on a task result is not supported in a pipeline body",
                info.source.span(expr),
                hint=f"compute it inside a task that receives `{exc.node.id}`",  # type: ignore[attr-defined]
            )
        except NotStatic as exc:
            self.sink.error("DAGC109", f"{_describe(exc.node)} is not supported here: {exc.reason}",
                            info.source.span(exc.node),
                            hint="pipeline bodies may use task calls, literals, constants and parameters; "
                            "do other computation inside a task")
        raise ExtractError

    # ---- calls ------------------------------------------------------------------------------------
    def _callee(self, func: ast.expr, scope: Scope, info: ModuleInfo) -> Value:
        if isinstance(func, ast.Name):
            return self._name(func, scope, info)
        if isinstance(func, ast.Attribute):
            base = self._callee(func.value, scope, info)
            if isinstance(base, ModuleValue):
                symbol = self.project.lookup(base.info, func.attr)
                if symbol is None:
                    sub = self.project.module(f"{base.module}.{func.attr}")
                    if sub is not None:
                        return ModuleValue(sub.name, sub)
                    self.sink.error("DAGC131", f"user module `{base.module}` has no `{func.attr}`",
                                    info.source.span(func), hint=f"check the name in {base.info.source.display}")
                    raise ExtractError
                return self._symbol_value(symbol, func.attr, base.info)
            if _is_runtime(base):
                return External(f"method `.{func.attr}` of a task result")
            if isinstance(base, External):
                return External(f"`{ast.unparse(func)}`")
            return External(f"`{ast.unparse(func)}`")
        return External(f"`{ast.unparse(func)}`")

    def _call(self, call: ast.Call, scope: Scope, info: ModuleInfo, n_outputs: int) -> Value:
        callee = self._callee(call.func, scope, info)
        if isinstance(callee, Callee) and isinstance(callee.symbol, TaskDef):
            return self._task_call(call, callee.symbol, scope, info, n_outputs)
        if isinstance(callee, Callee) and isinstance(callee.symbol, PipelineDef):
            return self._inline_pipeline(call, callee.symbol, scope, info)
        # not a task: it may still be a compile-time builtin on constants (range, len, …)
        args = [self._eval(a.value if isinstance(a, ast.Starred) else a, scope, info) for a in call.args]
        kwargs = [self._eval(k.value, scope, info) for k in call.keywords]
        runtime = [v for v in args + kwargs if _is_runtime(v)]
        what = callee.description if isinstance(callee, External) else f"`{ast.unparse(call.func)}`"
        if runtime:
            self.sink.error("DAGC107", f"{what} is not a task, but receives a task result",
                            info.source.span(call),
                            hint="only tasks can run on task results: decorate the function with @dagc.task, "
                            "or call it inside a task")
            raise ExtractError
        if isinstance(call.func, ast.Name) and isinstance(callee, External) and call.func.id in STATIC_BUILTINS:
            return Static(self._static(call, scope, info))
        self.sink.error("DAGC111", f"{what} is not a task; a pipeline body can only call tasks and pipelines",
                        info.source.span(call),
                        hint="decorate it with @dagc.task to make it a step of the graph, or call it inside a task")
        raise ExtractError

    def _bind(self, call: ast.Call, task: TaskDef, scope: Scope, info: ModuleInfo,
              ) -> tuple[list[Operand], list[tuple[str, Operand]]]:
        sig = task.sig
        positional = [p for p in sig.params if p.kind in ("positional_only", "positional")]
        var_pos = any(p.kind == "var_positional" for p in sig.params)
        var_kw = any(p.kind == "var_keyword" for p in sig.params)
        keywordable = {p.name for p in sig.params if p.kind in ("positional", "keyword_only")}
        bound: set[str] = set()
        args: list[Operand] = []
        kwargs: list[tuple[str, Operand]] = []
        failed = False
        for index, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                self.sink.error("DAGC109", "`*args` in a task call is not supported", info.source.span(arg),
                                hint="pass each argument explicitly")
                failed = True
                continue
            if index >= len(positional) and not var_pos:
                self.sink.error("DAGC105", f"task `{task.name}` takes {len(positional)} positional "
                                f"argument{'s' if len(positional) != 1 else ''} but {len(call.args)} were given",
                                info.source.span(arg), hint=f"signature: {task.name}({', '.join(sig.names())})",
                                notes=[Note(f"`{task.name}` is defined here", name_span(task.source, task.node))])
                failed = True
                continue
            if index < len(positional):
                bound.add(positional[index].name)
            try:
                args.append(_to_operand(self._eval(arg, scope, info)))
            except ExtractError:
                failed = True
            except TypeError:
                self._not_a_value(arg, info)
        for kw in call.keywords:
            if kw.arg is None:
                self.sink.error("DAGC109", "`**kwargs` in a task call is not supported", info.source.span(kw),
                                hint="pass each argument by name")
                failed = True
                continue
            if kw.arg not in keywordable and not var_kw:
                import difflib

                close = difflib.get_close_matches(kw.arg, sorted(keywordable), n=1, cutoff=0.5)
                hint = f"did you mean `{close[0]}`? " if close else ""
                self.sink.error("DAGC103", f"task `{task.name}` has no parameter `{kw.arg}`",
                                info.source.span(kw),
                                hint=f"{hint}`{task.name}` accepts: {', '.join(sig.names()) or 'no arguments'}",
                                notes=[Note(f"`{task.name}` is defined here", name_span(task.source, task.node))])
                failed = True
                continue
            if kw.arg in bound:
                self.sink.error("DAGC106", f"argument `{kw.arg}` of task `{task.name}` is given twice",
                                info.source.span(kw), hint="pass it either by position or by name")
                failed = True
                continue
            bound.add(kw.arg)
            try:
                kwargs.append((kw.arg, _to_operand(self._eval(kw.value, scope, info))))
            except ExtractError:
                failed = True
            except TypeError:
                self._not_a_value(kw.value, info)
        missing = [p.name for p in sig.params
                   if p.kind in ("positional_only", "positional", "keyword_only")
                   and p.default is None and p.name not in bound]
        if missing:
            names = ", ".join(f"`{m}`" for m in missing)
            self.sink.error("DAGC104", f"task `{task.name}` is missing argument{'s' if len(missing) > 1 else ''} "
                            f"{names}", info.source.span(call),
                            hint=f"signature: {task.name}({', '.join(sig.names())})",
                            notes=[Note(f"`{task.name}` is defined here", name_span(task.source, task.node))])
            failed = True
        if failed:
            raise ExtractError
        return args, kwargs

    def _node_name(self, base: str) -> str:
        count = self._name_counts.get(base, 0)
        self._name_counts[base] = count + 1
        name = base if count == 0 else f"{base}.{count}"
        assert self.graph is not None
        while name in self.graph or self.graph_has_param(name):
            count += 1
            self._name_counts[base] = count + 1
            name = f"{base}.{count}"
        return name

    def graph_has_param(self, name: str) -> bool:
        assert self.graph is not None
        return any(p.name == name for p in self.graph.params)

    def _task_call(self, call: ast.Call, task: TaskDef, scope: Scope, info: ModuleInfo, n_outputs: int) -> Value:
        args, kwargs = self._bind(call, task, scope, info)
        assert self.graph is not None
        name = self._node_name(scope.prefix + task.name)
        outputs = tuple(output_name(name, i, n_outputs) for i in range(n_outputs))
        types = _split_types(task.returns, n_outputs)
        deps = tuple(dep for after in task.after for dep in self._nodes_by_task.get(after, ()))
        node = Node(name, "task", task.target, tuple(args), tuple(kwargs), outputs, types, task.options,
                    info.source.span(call), deps)
        if scope.prefix:
            node.attrs["frontend.scope"] = scope.prefix.rstrip(".")
        self.graph.add_node(node)
        self._nodes_by_task.setdefault(task.name, []).append(name)
        if n_outputs == 1:
            return Dyn(Ref(outputs[0]))
        return tuple(Dyn(Ref(o)) for o in outputs)

    def _inline_pipeline(self, call: ast.Call, pipeline: PipelineDef, scope: Scope, info: ModuleInfo) -> Value:
        if pipeline in self._stack:
            chain = " → ".join(p.name for p in self._stack[self._stack.index(pipeline):] + [pipeline])
            self.sink.error("DAGC113", f"pipeline `{pipeline.name}` calls itself ({chain})", info.source.span(call),
                            hint="pipelines are inlined at compile time and cannot recurse; use a static loop",
                            notes=[Note(f"`{p.name}` is defined here", name_span(p.source, p.node)) for p in self._stack])
            raise ExtractError
        inner = Scope(pipeline, prefix=self._node_name(scope.prefix + pipeline.name) + ".")
        params = pipeline.sig.params
        positional = [p for p in params if p.kind in ("positional_only", "positional")]
        if len(call.args) > len(positional):
            self.sink.error("DAGC105", f"pipeline `{pipeline.name}` takes {len(positional)} positional arguments "
                            f"but {len(call.args)} were given", info.source.span(call))
            raise ExtractError
        given: dict[str, Value] = {}
        for param, arg in zip(positional, call.args):
            given[param.name] = self._eval(arg, scope, info)
        names = {p.name for p in params}
        for kw in call.keywords:
            if kw.arg is None or kw.arg not in names:
                self.sink.error("DAGC103", f"pipeline `{pipeline.name}` has no parameter `{kw.arg}`",
                                info.source.span(kw), hint=f"parameters: {', '.join(sorted(names))}")
                raise ExtractError
            given[kw.arg] = self._eval(kw.value, scope, info)
        for param in params:
            if param.name in given:
                inner.env[param.name] = given[param.name]
            elif param.default is not None:
                inner.env[param.name] = Static(self._static(param.default, Scope(pipeline, ""), pipeline.info))
            else:
                self.sink.error("DAGC104", f"pipeline `{pipeline.name}` is missing argument `{param.name}`",
                                info.source.span(call))
                raise ExtractError
        self._stack.append(pipeline)
        try:
            result = self._run_body(inner, pipeline.info, pipeline.node.body)
        finally:
            self._stack.pop()
        return result if result is not None else Static(None)


class _RuntimeUse(Exception):
    def __init__(self, node: ast.Name) -> None:
        self.node = node


class _UsedBefore(_RuntimeUse):
    pass


class _Undefined(_RuntimeUse):
    pass


class _Poisoned(_RuntimeUse):
    pass


POISON = object()  # bound to names whose defining statement failed


def _stored_names(stmt: ast.stmt) -> list[str]:
    return [n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]


def _const_value(operand: Operand) -> Any:
    from dagc.ir.types import operand_to_python

    return operand_to_python(operand)


def _split_types(returns: str | None, n_outputs: int) -> tuple[str | None, ...]:
    if n_outputs == 1:
        return (returns,)
    if returns is not None:
        try:
            expr = ast.parse(returns, mode="eval").body
        except SyntaxError:
            expr = None
        if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name) and expr.value.id in ("tuple", "Tuple"):
            elts = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
            if len(elts) == n_outputs and not any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elts):
                return tuple(ast.unparse(e) for e in elts)
    return (None,) * n_outputs


def _describe(expr: ast.AST) -> str:
    return {
        ast.BinOp: "arithmetic",
        ast.UnaryOp: "arithmetic",
        ast.BoolOp: "a boolean operation",
        ast.Compare: "a comparison",
        ast.Subscript: "indexing",
        ast.Attribute: "attribute access",
        ast.JoinedStr: "an f-string",
        ast.IfExp: "a conditional expression",
        ast.Lambda: "a lambda",
        ast.ListComp: "a list comprehension",
        ast.DictComp: "a dict comprehension",
        ast.SetComp: "a set comprehension",
        ast.GeneratorExp: "a generator expression",
        ast.Await: "`await`",
        ast.Yield: "`yield`",
        ast.YieldFrom: "`yield from`",
        ast.NamedExpr: "`:=`",
        ast.Set: "a set literal",
        ast.Call: "a call",
        ast.Name: "a name",
        ast.Starred: "starred expression",
    }.get(type(expr), type(expr).__name__)


_STATEMENT_NAMES = {
    ast.If: "`if`",
    ast.For: "`for`",
    ast.AsyncFor: "`async for`",
    ast.While: "`while`",
    ast.With: "`with`",
    ast.AsyncWith: "`async with`",
    ast.Try: "`try`",
    ast.Raise: "`raise`",
    ast.Global: "`global`",
    ast.Nonlocal: "`nonlocal`",
    ast.Delete: "`del`",
    ast.Import: "`import`",
    ast.ImportFrom: "`import`",
    ast.FunctionDef: "a nested function",
    ast.AsyncFunctionDef: "a nested function",
    ast.ClassDef: "a class definition",
    ast.AugAssign: "augmented assignment",
    ast.Assert: "`assert`",
}
_STATEMENT_HINTS = {
    ast.Try: "handle errors inside a task, or use the task option retries=N",
    ast.With: "open resources inside the task that uses them",
    ast.Global: "pass the value as a pipeline parameter or return it from a task",
    ast.Nonlocal: "pass the value as a pipeline parameter or return it from a task",
    ast.AugAssign: "bind the new value to a name: `x = add(x, 1)` with a task `add`",
    ast.Import: "import at module level",
    ast.ImportFrom: "import at module level",
}


def extract_pipeline(project: Project, pipeline: PipelineDef, sink: DiagnosticSink,
                     overrides: dict[str, Any] | None = None) -> Graph:
    return Extractor(project, sink).extract(pipeline, overrides or {})
