"""Extracting a pipeline's task graph by symbolic interpretation of its body.

The body is walked statement by statement. Names are bound to symbolic values: a run-time value
(an IR operand referring to task outputs or parameters), a compile-time constant, or a callable
(task, pipeline, module). Task calls become IR nodes; nested pipeline calls are inlined with
hierarchical names. Nothing is executed.

Control flow:
  * `for` loops and comprehensions over compile-time iterables are unrolled; nodes made in
    iteration k get the suffix `[k]` (`train[3]`, `shard[2].tokenize`).
  * `if` on a compile-time value is folded; `if` on a task result becomes a `cond` region node.
  * a `for` loop over a compile-time iterable that leaves early (`if <task result>: break`)
    becomes a `loop` region node whose trip count is at most the iterable's length.
  * arithmetic, comparisons, indexing, attribute access and f-strings on task results become
    `glue` nodes.
  * `while` with a bounded trip count, `try`/`finally` and a `for` over a run-time list (a `map`) become
    `loop`, `try` and `map` region nodes.
A region node owns its bodies (`Node.bodies`, see dagc.ir.core and docs/ir.md).
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any

from dagc.diagnostics import DiagnosticSink, Note
from dagc.frontend.configs import ConfigClass, ConfigValue, StaticFunction
from dagc.frontend.effects import EffectAnalyzer
from dagc.frontend.exits import finally_reads_of_body, lower_continues, rename_refs
from dagc.frontend.forms import GLUE_CALLS, as_literal, kfp_chain, kfp_hint
from dagc.frontend.maps import MapBound, MapRegions
from dagc.frontend.modules import (
    ClassSteps,
    Constant,
    ImportedModule,
    ImportedName,
    ModuleInfo,
    Opaque,
    PipelineDef,
    Project,
    TaskDef,
    static_option_value,
    static_symbol,
)
from dagc.frontend.overrides import report_overrides, unknown_setting
from dagc.frontend.seeds import check_main_seeds
from dagc.frontend.source import name_span
from dagc.frontend.static import (
    BUILTIN,
    MAX_INT_BITS,
    STATIC_BUILTINS,
    NotStatic,
    StaticRange,
    eval_static,
    is_literal_value,
    iterate_static,
)
from dagc.frontend.typecheck import compatible, describe_mismatch, item_type, type_of_value
from dagc.ir.core import Graph, Node, Param, output_name
from dagc.ir.effects import order_by_effects
from dagc.ir.location import SourceSpan
from dagc.ir.regions import TRIPS_ATTR
from dagc.ir.types import Const, Map, Operand, Ref, Seq, TaskOptions, iter_refs, operand_from_python

__all__ = ["extract_pipeline", "Extractor", "MAX_UNROLL"]

MAX_UNROLL = 2_000_000  # loop iterations unrolled per pipeline, all loops together
MAX_WHILE = 100_000  # iterations of one `while` loop on a compile-time condition
MAX_REGION_DEPTH = 12  # regions inside regions (emitted programs nest one block per level)


class ExtractError(Exception):
    """Abandons the current statement after its diagnostic was reported."""


class _Break(Exception):
    """A `break` reached while unrolling a loop."""


class _Continue(Exception):
    """A `continue` reached while unrolling a loop."""


@dataclass(unsafe_hash=True, slots=True)  # (not frozen: built several times per task call, and never changed)
class Dyn:
    """A run-time value: an operand that refers to at least one task output or parameter."""

    operand: Operand


# literals the static evaluator returns as they are (bytes, complex and `...` it rejects)
_PLAIN_LITERALS = frozenset({int, float, str, bool, type(None)})


@dataclass(unsafe_hash=True, slots=True)  # (not frozen: built several times per task call, and never changed)
class Static:
    """A compile-time value (literal, or a StaticRange)."""

    value: Any


@dataclass(frozen=True)
class ParamValue:
    """A pipeline parameter: a run-time reference that also has a compile-time value."""

    name: str
    value: Any


@dataclass(unsafe_hash=True, slots=True)  # (not frozen: built several times per task call, and never changed)
class Callee:
    symbol: Any  # TaskDef | PipelineDef
    info: ModuleInfo


@dataclass(frozen=True)
class ModuleValue:
    module: str  # a user module
    info: ModuleInfo


@dataclass(frozen=True)
class ClassValue:
    """A user class holding steps (`Flow`, or `self`/`cls` in a pipeline method): reaches its steps."""

    steps: ClassSteps
    info: ModuleInfo
    instance: bool = False  # `self` in a pipeline method (an instance), rather than the class

    def static_attribute(self, name: str) -> Any:
        """A class constant (`Flow.GENRES`); through `self` only when no `__init__` could hide it."""
        if name in self.steps.constants and not (self.instance and self.steps.has_init):
            return self.steps.constants[name]
        raise KeyError(name)


@dataclass(frozen=True)
class DagcFunction:
    """A function of the dagc module used inside a pipeline body (`dagc.after`)."""

    name: str


@dataclass(frozen=True)
class External:
    """Something from a library or an opaque module-level name: usable only inside tasks."""

    description: str


Value = Any  # Dyn | Static | ParamValue | Callee | ModuleValue | External | tuple[Value, ...]


@dataclass
class LoopContext:
    """The region loop whose body is being interpreted (None while unrolling)."""

    name: str
    carried: list[str]
    break_at: int | None = None
    break_cond: Operand | None = None
    break_yield: list[Operand] | None = None
    block: list[Node] = field(default_factory=list)
    # carried names bound to a list or dict built in the pipeline where the loop exits, and to what kind
    kinds_at_exit: list[dict[str, str | None]] = field(default_factory=list)


@dataclass
class Scope:
    """One pipeline body being interpreted (the entry pipeline, or an inlined one)."""

    pipeline: PipelineDef
    prefix: str
    env: dict[str, Value] = field(default_factory=dict)
    assigned_later: set[str] = field(default_factory=set)
    suffix: str = ""
    inlined: str = ""  # hierarchical name of the inlined pipeline ("" for the entry pipeline)
    loop: LoopContext | None = None
    unrolling: int = 0  # depth of unrolled loops around the current statement


# argument expressions that build a new object at the call: a change to it is seen by nobody else
_FRESH_OBJECT_EXPRS = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp, ast.Call,
                       ast.BinOp)


def _mutable_ids(obj: Any, _seen: set[int] | None = None) -> set[int]:
    """Identities of the lists, dicts and sets reachable from a compile-time value."""
    seen: set[int] = set() if _seen is None else _seen
    if isinstance(obj, (list, dict, set)):
        if id(obj) in seen:
            return seen
        seen.add(id(obj))
        for item in (obj.items() if isinstance(obj, dict) else obj):
            _mutable_ids(item, seen)
    elif isinstance(obj, tuple):
        for item in obj:
            _mutable_ids(item, seen)
    return seen


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


def _is_task_result(value: Value) -> bool:
    if isinstance(value, Dyn):
        return True
    if isinstance(value, tuple):
        return any(_is_task_result(v) for v in value)
    return False


def _assigned_names(body: list[ast.stmt]) -> set[str]:
    """Names a block binds (assignment and loop targets, in nested blocks too). Only statements and
    targets are walked, not every expression: this runs once over bodies of 100k statements."""
    names: set[str] = set()
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Assign):
            stack.extend(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            stack.append(node.target)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store):
                names.add(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            stack.extend(node.elts)
        elif isinstance(node, ast.Starred):
            stack.append(node.value)
        elif isinstance(node, ast.Expr):
            if not isinstance(node.value, (ast.Call, ast.Constant, ast.Name)):
                stack.extend(n for n in ast.walk(node.value) if isinstance(n, ast.NamedExpr))
        elif isinstance(node, ast.NamedExpr):
            stack.append(node.target)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            stack.append(node.target)
            stack.extend(node.body)
            stack.extend(node.orelse)
        elif isinstance(node, (ast.While, ast.If)):
            stack.extend(node.body)
            stack.extend(node.orelse)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            stack.extend(item.optional_vars for item in node.items if item.optional_vars is not None)
            stack.extend(node.body)
        elif isinstance(node, ast.Try):
            stack.extend(node.body)
            stack.extend(node.orelse)
            stack.extend(node.finalbody)
            for handler in node.handlers:
                if handler.name:
                    names.add(handler.name)
                stack.extend(handler.body)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _names_in(expr: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}


def _target_names(target: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _ordered_stores(body: list[ast.stmt]) -> list[str]:
    out: dict[str, None] = {}
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                out.setdefault(node.id, None)
    return list(out)


def _grown_names(body: list[ast.stmt]) -> list[str]:
    """Names changed in place in `body`, in order: `xs` of `xs.append(v)` / `xs.extend(vs)` statements and
    `d` of `d[key] = v` assignments."""
    out: dict[str, None] = {}
    for stmt in body:
        for node in ast.walk(stmt):
            if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Attribute) and node.value.func.attr in ("append", "extend")
                    and isinstance(node.value.func.value, ast.Name)):
                out.setdefault(node.value.func.value.id, None)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                        out.setdefault(target.value.id, None)
    return list(out)


def _loop_level_breaks(body: list[ast.stmt]) -> list[tuple[ast.stmt, list[ast.expr]]]:
    """`break`/`continue` statements of this loop (not of nested loops), with the `if` tests above them."""
    found: list[tuple[ast.stmt, list[ast.expr]]] = []

    def visit(stmts: list[ast.stmt], tests: list[ast.expr]) -> None:
        for stmt in stmts:
            if isinstance(stmt, (ast.Break, ast.Continue)):
                found.append((stmt, tests))
            elif isinstance(stmt, ast.If):
                visit(stmt.body, [*tests, stmt.test])
                visit(stmt.orelse, [*tests, stmt.test])
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                visit(stmt.body, tests)
            elif isinstance(stmt, ast.Try):
                visit(stmt.body, tests)
                for handler in stmt.handlers:
                    visit(handler.body, tests)
                visit(stmt.orelse, tests)
                visit(stmt.finalbody, tests)

    visit(body, [])
    return found


_FILE_PLACEHOLDER = re.compile(r"\{(\w+)\}")


class Extractor(MapRegions):
    """Builds one `Graph` from one pipeline."""

    def __init__(self, project: Project, sink: DiagnosticSink) -> None:
        self.project = project
        self.sink = sink
        self.graph: Graph | None = None
        self._name_counts: dict[str, int] = {}
        self._used: set[str] = set()
        self._stack: list[PipelineDef] = []
        self._nodes_by_task: dict[str, list[str]] = {}
        self._blocks: list[list[Node]] = []  # open region bodies, innermost last
        self._owner: dict[str, str] = {}  # node inside a closed region -> the region node
        self._producer: dict[str, str] = {}  # value -> node that produces it
        # values known to be lists or dicts at run time although their length is not known at compile time: one
        # carried through a loop that exits early, and what growing one gives (`xs.append(v)` goes on working)
        self._runtime_kinds: dict[str, str] = {}
        self._types: dict[str, tuple[str, SourceSpan | None]] = {}  # value -> (declared type, where)
        self._writers: dict[str, tuple[str, SourceSpan]] = {}
        self._reads: list[tuple[str, str, SourceSpan]] = []
        self._readers: dict[str, list[str]] = {}  # path -> tasks that read its current version
        self._extra_deps: list[str] = []
        self._budget = MAX_UNROLL
        self._budget_reported = False
        self._factor = 1  # product of the lengths of the loops being unrolled
        self._shapes: dict[int, tuple[Any, ...]] = {}  # per task signature: binding tables
        self._return_spans: dict[int, SourceSpan | None] = {}
        self._modules_used: set[str] = set()
        self._effects = EffectAnalyzer(project)
        self._bound_exprs: dict[str, ast.expr] = {}  # parameter -> argument expression, of the last bind
        # a run-time container (operand id) -> (the operand, kept alive; the compile-time lists and dicts
        # copied into it): a task changing one of those would leave the container's copy unchanged
        self._captured: dict[int, tuple[Operand, set[int]]] = {}
        # module-level constants the pipeline reads (folded at compile time): `module.NAME` -> first read;
        # and the lists and dicts inside them (id -> (`module.NAME`, the value, kept alive))
        self._module_reads: dict[str, tuple[ast.AST, ModuleInfo]] = {}
        self._module_objects: dict[int, tuple[str, Any]] = {}
        self._last_task: Node | None = None  # node of the task call evaluated last
        self._effect_warned: set[tuple[int, str]] = set()
        self._bound_args: dict[str, dict[str, Operand]] = {}  # node -> its arguments by parameter
        self._global_writes: dict[str, tuple[str, SourceSpan]] = {}  # module-level name -> first change seen
        self._pipeline_seeds = False  # a task called so far seeds the global generator
        self._folded: dict[tuple[str, str], None] = {}  # module constants folded into the graph (ordered set)
        self._configs: dict[int, tuple[Any, Value]] = {}  # id(config instance) -> (instance, its node's value)
        self._config_nodes: dict[str, Any] = {}  # node building a config -> the instance
        self._module_configs: set[int] = set()  # ids of module-level constants (configs among them)
        self._task_summaries: dict[int, tuple[Any, dict[str, Any], list[tuple[str, bool]]]] = {}

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
        self._bind_receiver(pipeline, scope)
        for param in pipeline.sig.params:
            span = info.source.span(param.node)
            if param.kind in ("var_positional", "var_keyword"):
                self.sink.error("DAGC132", f"pipeline parameter `*{param.name}` cannot be given at compile time",
                                span, hint="declare each parameter by name with a default")
                scope.env[param.name] = POISON  # reported once here, not again at each use
                continue
            if param.name in overrides:
                value = overrides[param.name]
                given = type_of_value(value)
                if param.annotation is not None and not compatible(given, param.annotation):
                    self.sink.error("DAGC005", f"--param {param.name}={value!r} is a `{given}`, but parameter "
                                    f"`{param.name}` is annotated `{param.annotation}`", span,
                                    hint=f"give a value of type `{param.annotation}`; --param values are Python "
                                    "literals (quote a string: --param name='\"text\"')")
                    scope.env[param.name] = POISON  # reported once here, not again at each use
                    continue
            elif param.default is not None:
                try:
                    value = self._static(param.default, scope, info)
                except ExtractError:
                    scope.env[param.name] = POISON
                    continue
            else:
                self.sink.error("DAGC005", f"pipeline parameter `{param.name}` has no value",
                                span, hint=f"give it a default, or compile with --param {param.name}=VALUE")
                scope.env[param.name] = POISON
                continue
            if not (is_literal_value(value) or isinstance(value, StaticRange)):
                self.sink.error("DAGC005", f"value of parameter `{param.name}` is not a literal", span)
                scope.env[param.name] = POISON
                continue
            try:
                operand = operand_from_python(value)
            except TypeError:
                self.sink.error("DAGC005", f"value of parameter `{param.name}` is not a literal", span)
                scope.env[param.name] = POISON
                continue
            graph.params.append(Param(param.name, operand, param.annotation, span))
            self._used.add(param.name)
            scope.env[param.name] = ParamValue(param.name, value)
        unknown = sorted(set(overrides) - {p.name for p in pipeline.sig.params})
        for name in unknown:
            self.sink.error("DAGC005", f"pipeline `{pipeline.name}` has no parameter `{name}`",
                            name_span(info.source, pipeline.node),
                            hint=f"parameters: {', '.join(pipeline.sig.names()) or 'none'}")
        self._stack.append(pipeline)
        result = self._run_body(scope, info, pipeline.node.body)
        self._stack.pop()
        try:
            graph.returns = _to_operand(result) if result is not None else Const(None)
        except TypeError:
            self.sink.error("DAGC109", f"pipeline `{pipeline.name}` returns something that is not a value",
                            name_span(info.source, pipeline.node),
                            hint="return task results, parameters or literals")
            graph.returns = Const(None)
        self._check_reads()
        report_overrides(self.project, self.sink, self._folded, pipeline.name)
        order_by_effects(graph)
        self._check_state(graph)
        self._explain_shared_globals(graph)
        self._check_module_reads(graph)
        check_main_seeds(graph, info, self.sink)
        graph.modules = dict(sorted((m, f) for m, f in self.project.files.items() if self._module_used(m)))
        return graph

    def _run_time_setting(self, name: str, symbol: Opaque, info: ModuleInfo, span: SourceSpan | None = None) -> None:
        """A module value dagc cannot know (read from the command line, a config the module changes)."""
        found = unknown_setting(name, symbol, info, self.graph.name if self.graph else "p")
        if found is not None:
            message, hint, notes = found
            self.sink.error("DAGC109", message, span or info.source.span(symbol.node), hint=hint, notes=notes)
            raise ExtractError

    def _bind_receiver(self, pipeline: PipelineDef, scope: Scope) -> None:
        """`self`/`cls` of a pipeline method stands for its class: `self.train(x)` is `Flow.train(x)`."""
        if pipeline.receiver is None or pipeline.owner is None:
            return
        symbol = pipeline.info.symbols.get(pipeline.owner)
        if isinstance(symbol, Opaque) and symbol.steps is not None:
            instance = not any(isinstance(d, ast.Name) and d.id == "classmethod" for d in pipeline.node.decorator_list)
            scope.env[pipeline.receiver] = ClassValue(symbol.steps, pipeline.info, instance)

    def _module_used(self, module: str) -> bool:
        assert self.graph is not None
        return module == self.graph.module or module in self._modules_used

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
            except (_Break, _Continue):
                self.sink.error("DAGC117", "`break`/`continue` outside a loop", info.source.span(stmt))
        if not saw_return:
            self.sink.warning("DAGC115", f"pipeline `{scope.pipeline.name}` returns nothing",
                              name_span(info.source, scope.pipeline.node),
                              hint="return the results you want; tasks whose results are unused are removed "
                              "by `dce` unless marked side_effects=True")
        return returned

    def _run_block(self, stmts: list[ast.stmt], scope: Scope, info: ModuleInfo) -> None:
        """Statements nested in a loop or branch. `_Break`/`_Continue` propagate to the unroller."""
        for stmt in stmts:
            try:
                if isinstance(stmt, ast.Return):
                    self.sink.error("DAGC117", "`return` inside a loop or branch is not supported in a pipeline",
                                    info.source.span(stmt),
                                    hint="assign the result to a name and return it at the end of the pipeline")
                    raise ExtractError
                self._statement(stmt, scope, info, is_docstring=False)
            except ExtractError:
                for target in _stored_names(stmt):
                    scope.env[target] = POISON

    def _statement(self, stmt: ast.stmt, scope: Scope, info: ModuleInfo, *, is_docstring: bool) -> None:
        if isinstance(stmt, ast.Expr):
            if is_docstring and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                return
            if isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                return  # a string used as a comment
            if self._append(stmt.value, scope, info):
                return
            self._last_task = None
            self._eval(stmt.value, scope, info)
            self._check_discarded(stmt.value, info)
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
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            load = ast.Name(stmt.target.id, ast.Load())
            expr = ast.BinOp(load, stmt.op, stmt.value)
            ast.copy_location(load, stmt.target)
            ast.copy_location(expr, stmt)
            self._assign(stmt.target, self._eval(expr, scope, info), scope, info)
            return
        if isinstance(stmt, ast.Pass):
            return
        span = info.source.span(stmt)
        if isinstance(stmt, ast.For):
            self._for(stmt, scope, info)
            return
        if isinstance(stmt, ast.While):
            self._while(stmt, scope, info)
            return
        if isinstance(stmt, ast.If):
            self._if(stmt, scope, info)
            return
        if isinstance(stmt, _TRY_STATEMENTS):  # `except*` (TryStar) always has handlers: DAGC180
            self._try(stmt, scope, info)  # type: ignore[arg-type]
            return
        if isinstance(stmt, ast.Break):
            if scope.unrolling:
                raise _Break
            self.sink.error("DAGC117", "`break` is supported only as `if <condition>: break` directly in a "
                            "loop body", span, hint="write the early exit as `if <condition>: break`")
            raise ExtractError
        if isinstance(stmt, ast.Continue):
            if scope.unrolling and scope.loop is None:
                raise _Continue
            self.sink.error("DAGC117", "`continue` on a task result is not supported in a pipeline loop", span,
                            hint="put the rest of the loop body under `if not <condition>:` instead")
            raise ExtractError
        construct = _STATEMENT_NAMES.get(type(stmt), type(stmt).__name__)
        self.sink.error("DAGC108", f"{construct} is not supported in a pipeline body", span,
                        hint=_STATEMENT_HINTS.get(type(stmt), "move this logic into a @dagc.task"))
        raise ExtractError  # the names it binds are poisoned: one diagnostic, not one per later use

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
        if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                and _known_container(scope.env.get(target.value.id)) is not None
                and not self._needs_glue(target.slice, scope, info)):
            # `scores[name] = evaluate(m)` on a list or dict built in the pipeline: rebind the name
            kind, items = _known_container(scope.env[target.value.id])  # type: ignore[misc]
            key = self._static(target.slice, scope, info)
            if kind == "dict":
                pairs = dict(items)
                pairs[Static(key)] = value
                scope.env[target.value.id] = self._mapping(list(pairs.items()), target, info)
                return
            if isinstance(key, int) and not isinstance(key, bool) and -len(items) <= key < len(items):
                items = list(items)
                items[key] = value
                scope.env[target.value.id] = self._sequence(items, kind == "list", target, info)
                return
        if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                and self._container_kind(scope.env.get(target.value.id)) == "dict"):
            # a key known only at run time, or a dict of unknown length: `d = d | {key: value}` at run time
            held = "\0item"  # a name no user code can bind
            scope.env[held] = value
            try:
                merged = ast.BinOp(ast.Name(target.value.id, ast.Load()), ast.BitOr(),
                                   ast.Dict([target.slice], [ast.Name(held, ast.Load())]))
                for made in (merged, merged.left, merged.right, merged.right.values[0]):
                    ast.copy_location(made, target)
                scope.env[target.value.id] = self._grown(merged, "dict", scope, info)
            finally:
                del scope.env[held]
            return
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and isinstance(
                scope.env.get(target.value.id), ClassValue):
            receiver = target.value.id
            self.sink.error("DAGC109", f"`{receiver}.{target.attr} = …` keeps a value on the flow object "
                            "(Metaflow's artifacts); a dagc step returns its value instead",
                            info.source.span(target),
                            hint=f"bind it to a name and pass it on: `{target.attr} = {receiver}.step(...)`, "
                            f"then `{receiver}.next_step({target.attr})`")
            raise ExtractError
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

    def _append(self, call: ast.expr, scope: Scope, info: ModuleInfo) -> bool:
        """`xs.append(v)` / `xs.extend(vs)` on a list built in the pipeline rebinds `xs`."""
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr in ("append", "extend") and isinstance(call.func.value, ast.Name)
                and len(call.args) == 1 and not call.keywords):
            return False
        name = call.func.value.id
        known = _known_container(scope.env.get(name))
        if known is None and self._runtime_kind(scope.env.get(name)) == "list":
            # a list of unknown length (carried through a loop that exits early): `xs = xs + [v]` at run time
            arg = call.args[0]
            tail = ast.List([arg], ast.Load()) if call.func.attr == "append" else \
                ast.Call(ast.Name("list", ast.Load()), [arg], [])
            grown = ast.BinOp(ast.Name(name, ast.Load()), ast.Add(), tail)
            for made in (grown, grown.left, tail, *([tail.func] if isinstance(tail, ast.Call) else [])):
                ast.copy_location(made, call)
            scope.env[name] = self._grown(grown, "list", scope, info)
            return True
        if known is None or known[0] != "list":
            return False
        value = self._eval(call.args[0], scope, info)
        if call.func.attr == "append":
            items = [*known[1], value]
        else:
            more = _known_container(value)
            if more is None or more[0] == "dict":
                self.sink.error("DAGC109", "`.extend()` needs a list whose length is known at compile time",
                                info.source.span(call.args[0]), hint="append the items one by one")
                raise ExtractError
            items = [*known[1], *more[1]]
        scope.env[name] = self._sequence(items, True, call, info)
        return True

    def _runtime_kind(self, value: Value | None) -> str | None:
        if isinstance(value, Dyn) and isinstance(value.operand, Ref):
            return self._runtime_kinds.get(value.operand.name)
        return None

    def _container_kind(self, value: Value | None) -> str | None:
        """"list" or "dict" for one built in the pipeline, of known length or known only at run time."""
        if value is None or value is POISON:
            return None
        known = _known_container(value)
        if known is not None:
            return known[0] if known[0] in ("list", "dict") else None
        return self._runtime_kind(value)

    def _grown(self, expr: ast.expr, kind: str, scope: Scope, info: ModuleInfo) -> Value:
        """`expr` (`xs + [v]`, `d | {k: v}`) computed at run time: a list or dict of unknown length."""
        value = self._eval(expr, scope, info)
        if isinstance(value, Dyn) and isinstance(value.operand, Ref):
            self._runtime_kinds[value.operand.name] = kind
        return value

    # ---- loops ------------------------------------------------------------------------------------
    def _iter_values(self, expr: ast.expr, scope: Scope, info: ModuleInfo, what: str) -> list[Value] | None:
        """Items of a list/tuple/dict whose length is known at compile time even though its items are
        task results (`for m in models`, `enumerate(models)`, `zip(models, CONFIGS)`), else None."""
        if isinstance(expr, ast.Name) and _is_task_result(scope.env.get(expr.id)):
            value = scope.env[expr.id]
            if isinstance(value, tuple):
                return list(value)
            operand = value.operand
            if isinstance(operand, Seq):
                return [_value_of(i) for i in operand.items]
            if isinstance(operand, Map):
                return [_value_of(k) for k, _ in operand.items]
            return None
        if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and not expr.args
                and expr.func.attr in ("items", "keys", "values") and isinstance(expr.func.value, ast.Name)):
            value = scope.env.get(expr.func.value.id)
            if isinstance(value, Dyn) and isinstance(value.operand, Map):
                pairs = [(_value_of(k), _value_of(v)) for k, v in value.operand.items]
                if expr.func.attr == "items":
                    return [tuple(p) for p in pairs]
                return [p[0] if expr.func.attr == "keys" else p[1] for p in pairs]
            return None
        if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in ("enumerate", "zip")
                and expr.func.id not in scope.env and not expr.keywords
                and self.project.lookup(info, expr.func.id) is None and expr.args
                and not any(isinstance(a, ast.Starred) for a in expr.args)
                and self._needs_glue(expr, scope, info)):
            if expr.func.id == "enumerate":
                items = self._loop_items(expr.args[0], scope, info, what)
                start = self._static(expr.args[1], scope, info) if len(expr.args) > 1 else 0
                if len(expr.args) > 2 or not isinstance(start, int):
                    return None
                return [(Static(start + k), v) for k, v in enumerate(items)]
            columns = [self._loop_items(a, scope, info, what) for a in expr.args]
            return [tuple(row) for row in zip(*columns)]
        return None

    def _loop_items(self, expr: ast.expr, scope: Scope, info: ModuleInfo, what: str) -> list[Value]:
        found = self._iter_values(expr, scope, info, what)
        if found is not None:
            return found
        return [Static(v) for v in self._static_items(expr, scope, info, what)]

    def _static_items(self, expr: ast.expr, scope: Scope, info: ModuleInfo, what: str) -> list[Any]:
        if self._needs_glue(expr, scope, info):
            self.sink.error("DAGC116", f"{what} iterates over a task result, which is not known at compile time",
                            info.source.span(expr),
                            hint="iterate over a range, a literal list/dict, a module constant or a pipeline "
                            "parameter (or a list of task results built in the pipeline); a `for` loop, a list or a "
                            "dict comprehension over a task result runs once per item (a map)")
            raise ExtractError
        value = self._static(expr, scope, info)
        try:
            return iterate_static(expr, value)
        except NotStatic as exc:
            self.sink.error("DAGC116", f"{what} cannot iterate over this value at compile time: {exc.reason}",
                            info.source.span(expr),
                            hint="iterate over a range, a literal list/tuple/dict, enumerate() or zip() of them")
            raise ExtractError from None

    def _spend(self, span: SourceSpan) -> bool:
        self._budget -= 1
        if self._budget >= 0:
            return True
        if not self._budget_reported:
            self._budget_reported = True
            self.sink.error("DAGC119", f"loops unroll to more than {MAX_UNROLL} iterations", span,
                            hint="use fewer iterations, or move the loop inside a task")
        return False

    def _for(self, stmt: ast.For, scope: Scope, info: ModuleInfo) -> None:
        span = info.source.span(stmt)
        if stmt.orelse:
            self.sink.error("DAGC117", "`for ... else` is not supported in a pipeline", span,
                            hint="use a flag, or restructure the loop")
            raise ExtractError
        iter_expr, trips = self._trips_hint(stmt.iter, scope, info)
        spec, iter_expr = self._map_spec(iter_expr, scope, info)
        if spec is not None:  # over a run-time list: a `map` region (dagc/frontend/maps.py)
            self._map_region(stmt, spec, scope, info)
            return
        items = self._loop_items(iter_expr, scope, info, "this `for` loop")
        stmt = self._without_dynamic_continue(stmt, scope, info)
        assigned = _assigned_names(stmt.body)
        exits = [(node, tests) for node, tests in _loop_level_breaks(stmt.body)  # constant-false exits fold away
                 if not any(not (_names_in(t) & assigned) and self._known_false(t, scope, info) for t in tests)]
        if exits and self._exits_are_dynamic(exits, stmt, scope, info):
            self._loop_region(stmt, items, scope, info, trips)
            return
        self._unroll(stmt, stmt.target, items, stmt.body, scope, info)

    def _without_dynamic_continue(self, stmt: ast.For, scope: Scope, info: ModuleInfo) -> ast.For:
        """`stmt` itself, or, when a `continue` in it depends on a task result, the same loop with the
        rest of each trip under the branch that does not continue (`lower_continues`)."""
        exits = _loop_level_breaks(stmt.body)
        # lowered when a `continue` depends on a task result, or when the loop is a region anyway (a
        # `break` on a task result): a region's body has no `continue` of its own
        if not any(isinstance(node, ast.Continue) for node, _ in exits) or not self._exits_are_dynamic(
                exits, stmt, scope, info):
            return stmt
        body, _ = lower_continues(stmt.body)
        return ast.copy_location(ast.For(stmt.target, stmt.iter, body or [ast.copy_location(ast.Pass(), stmt)],
                                         stmt.orelse, stmt.type_comment), stmt)

    def _trips_hint(self, expr: ast.expr, scope: Scope, info: ModuleInfo) -> tuple[ast.expr, int | None]:
        """`dagc.trips(ITEMS, expected=N)` → (ITEMS, N); any other loop iterable → (it, None).
        The hint only plans a loop region; an unrolled loop runs every item anyway."""
        if not isinstance(expr, ast.Call):
            return expr, None
        func = expr.func
        if isinstance(func, ast.Name) and func.id not in scope.env:
            named = info.dagc_names.get(func.id) == "trips"
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            named = (func.attr == "trips" and func.value.id in info.dagc_modules
                     and func.value.id not in scope.env)
        else:
            named = False
        if not named:
            return expr, None
        expected: Any = None
        if (len(expr.args) == 1 and not isinstance(expr.args[0], ast.Starred) and len(expr.keywords) == 1
                and expr.keywords[0].arg == "expected"):
            try:
                expected = self._static(expr.keywords[0].value, scope, info)
            except ExtractError:
                expected = None
        if not isinstance(expected, int) or isinstance(expected, bool) or expected < 0:
            self.sink.error("DAGC135", "dagc.trips takes the loop's items and `expected=`, a whole number of "
                            "trips known at compile time", info.source.span(expr),
                            hint="write `for epoch in dagc.trips(range(40), expected=12):`")
            raise ExtractError
        return expr.args[0], expected

    def _exits_are_dynamic(self, exits: list[tuple[ast.stmt, list[ast.expr]]], stmt: ast.For,
                           scope: Scope, info: ModuleInfo) -> bool:
        """A `break` depends on run-time values when a test above it reads a task result or a name the
        loop body assigns (other than the loop variable)."""
        assigned = _assigned_names(stmt.body) - _target_names(stmt.target)
        for _, tests in exits:
            for test in tests:
                for node in ast.walk(test):
                    if isinstance(node, ast.Name) and (
                        node.id in assigned or _is_task_result(scope.env.get(node.id))
                    ):
                        return True
                    if isinstance(node, ast.Call) and self._is_task_callee(node.func, scope, info):
                        return True
        return False

    def _unroll(self, stmt: ast.stmt, target: ast.expr, items: list[Value], body: list[ast.stmt],
                scope: Scope, info: ModuleInfo) -> None:
        span = info.source.span(stmt)
        if self._factor * len(items) > MAX_UNROLL:
            self._budget = -1
            self._spend(span)
            raise ExtractError
        self._factor *= max(len(items), 1)
        try:
            self._unroll_items(target, items, body, scope, info, span)
        finally:
            self._factor //= max(len(items), 1)

    def _unroll_items(self, target: ast.expr, items: list[Value], body: list[ast.stmt], scope: Scope,
                      info: ModuleInfo, span: SourceSpan) -> None:
        outer_suffix = scope.suffix
        scope.unrolling += 1
        saved_loop, scope.loop = scope.loop, None
        try:
            for k, item in enumerate(items):
                if not self._spend(span):
                    break
                errors = len(self.sink.diagnostics)
                scope.suffix = f"{outer_suffix}[{k}]"
                self._assign(target, item, scope, info)
                try:
                    self._run_block(body, scope, info)
                except _Continue:
                    pass
                except _Break:
                    break
                if len(self.sink.diagnostics) > errors and self.sink.has_errors:
                    break  # report a mistake once, not once per iteration
        finally:
            scope.suffix = outer_suffix
            scope.unrolling -= 1
            scope.loop = saved_loop

    def _while(self, stmt: ast.While, scope: Scope, info: ModuleInfo) -> None:
        span = info.source.span(stmt)
        if stmt.orelse:
            self.sink.error("DAGC117", "`while ... else` is not supported in a pipeline", span,
                            hint="use a flag, or restructure the loop")
            raise ExtractError
        dynamic_exit = bool(_loop_level_breaks(stmt.body)) and self._exits_are_dynamic(
            _loop_level_breaks(stmt.body), ast.For(ast.Name("_", ast.Store()), ast.List([], ast.Load()),
                                                   stmt.body, []), scope, info)
        if dynamic_exit:
            # one early exit per loop region: the `while` test is that exit
            self.sink.error("DAGC117", "a `while` loop can exit early on a task result only through its test",
                            info.source.span(stmt),
                            hint="move the condition into the test: `while i < MAX and not <condition>: ...; "
                            "i += 1`, or write `for i in range(MAX): ...; if <condition>: break`")
            raise ExtractError
        if self._needs_glue(stmt.test, scope, info):
            bounded = self._bounded_while(stmt, scope, info)
            if bounded is not None:
                self._for(bounded, scope, info)
                return
        outer_suffix = scope.suffix
        scope.unrolling += 1
        saved_loop, scope.loop = scope.loop, None
        try:
            k = 0
            while True:
                if self._needs_glue(stmt.test, scope, info):
                    self.sink.error(
                        "DAGC117", "`while` on a task result has no bound on its number of iterations",
                        info.source.span(stmt.test),
                        hint="bound it with a counter: `while step < MAX_STEPS and <condition>: ...; step += 1`, "
                        "or write `for step in range(MAX_STEPS): ...; if <condition>: break`")
                    raise ExtractError
                if not self._static(stmt.test, scope, info):
                    break
                if k >= MAX_WHILE:
                    self.sink.error("DAGC119", f"this `while` loop did not end within {MAX_WHILE} iterations "
                                    "at compile time", span, hint="bound it with `for _ in range(N)`")
                    raise ExtractError
                if not self._spend(span):
                    break
                errors = len(self.sink.diagnostics)
                scope.suffix = f"{outer_suffix}[{k}]"
                k += 1
                try:
                    self._run_block(stmt.body, scope, info)
                except _Continue:
                    pass
                except _Break:
                    break
                if len(self.sink.diagnostics) > errors and self.sink.has_errors:
                    break
        finally:
            scope.suffix = outer_suffix
            scope.unrolling -= 1
            scope.loop = saved_loop

    def _bounded_while(self, stmt: ast.While, scope: Scope, info: ModuleInfo) -> ast.For | None:
        """A `while` whose test bounds a counter, `while i < N and <condition>:` (or `i <= N`), and whose
        body ends with `i += 1`, rewritten as the equivalent bounded `for`:

            for i in range(i0, last + 2):       # one extra trip re-checks the test, as `while` does
                if not (<the while test>): break
                <body without the increment>

        so that `i` ends where the `while` would leave it. None when the loop has no such counter."""
        tests = stmt.test.values if isinstance(stmt.test, ast.BoolOp) and isinstance(stmt.test.op, ast.And) \
            else [stmt.test]
        body = stmt.body
        last_stmt = body[-1] if body else None
        if not (isinstance(last_stmt, ast.AugAssign) and isinstance(last_stmt.target, ast.Name)
                and isinstance(last_stmt.op, ast.Add) and isinstance(last_stmt.value, ast.Constant)
                and last_stmt.value.value == 1 and not isinstance(last_stmt.value.value, bool)):
            return None
        counter = last_stmt.target.id
        if counter in _assigned_names(body[:-1]):
            return None
        start = scope.env.get(counter)
        if not (isinstance(start, Static) and isinstance(start.value, int) and not isinstance(start.value, bool)):
            return None
        last: int | None = None
        for test in tests:
            if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name)
                    and test.left.id == counter and isinstance(test.ops[0], (ast.Lt, ast.LtE))
                    and not self._needs_glue(test.comparators[0], scope, info)):
                bound = self._static(test.comparators[0], scope, info)
                if isinstance(bound, int) and not isinstance(bound, bool):
                    candidate = bound - 1 if isinstance(test.ops[0], ast.Lt) else bound
                    last = candidate if last is None else min(last, candidate)
        if last is None:
            return None
        stop = max(last + 2, start.value)
        check = ast.If(ast.UnaryOp(ast.Not(), stmt.test), [ast.Break()], [])
        loop = ast.For(
            target=ast.Name(counter, ast.Store()),
            iter=ast.Call(ast.Name("range", ast.Load()), [ast.Constant(start.value), ast.Constant(stop)], []),
            body=[check, *body[:-1]],
            orelse=[],
        )
        for node in (check, check.test, check.body[0], loop.iter, *loop.iter.args, loop.iter.func):
            ast.copy_location(node, stmt.test)
        ast.copy_location(loop.target, last_stmt.target)
        ast.copy_location(loop, stmt)
        return loop

    def _loop_region(self, stmt: ast.For, items: list[Value], scope: Scope, info: ModuleInfo,
                     trips: int | None = None) -> None:
        """`for x in STATIC: ...; if <task result>: break` → one `loop` node (see docs/ir.md)."""
        span = info.source.span(stmt)
        if not isinstance(stmt.target, ast.Name):
            self.sink.error("DAGC117", "a loop that exits early on a task result needs a single loop variable",
                            info.source.span(stmt.target),
                            hint="write `for i in ...:` and index inside the body")
            raise ExtractError
        for node, _tests in _loop_level_breaks(stmt.body):
            if isinstance(node, ast.Continue):
                self.sink.error("DAGC117", "`continue` on a task result is not supported in a pipeline loop",
                                info.source.span(node),
                                hint="put the rest of the loop body under `if not <condition>:` instead")
                raise ExtractError
        self._check_depth(span)
        try:
            iter_operand = Seq("list", tuple(_to_operand(v) for v in items))
        except TypeError:
            self.sink.error("DAGC116", "the items of a loop that exits early must be literals",
                            info.source.span(stmt.iter))
            raise ExtractError from None
        name = self._node_name(scope.prefix + "loop" + scope.suffix)
        index_var = stmt.target.id
        stores = _ordered_stores(stmt.body)
        grown = [n for n in _grown_names(stmt.body) if n not in stores and self._container_kind(scope.env.get(n))]
        carried = [n for n in [*stores, *grown] if n != index_var]
        carried = [index_var, *carried]
        kinds = {var: self._container_kind(scope.env.get(var)) for var in carried}
        inits: list[Operand] = []
        block_args: list[str] = []
        for var in carried:
            current = scope.env.get(var)
            if var == index_var or current is None or current is POISON:
                inits.append(Const(None))
            else:
                try:
                    inits.append(_to_operand(current))
                except TypeError:
                    self.sink.error("DAGC118", f"`{var}` is reassigned in a loop but holds something that is not "
                                    "a value", span, hint="bind loop variables to task results or literals")
                    raise ExtractError from None
            arg = self._reserve(f"{name}@{var}")
            block_args.append(arg)
            if kinds[var] is not None:
                self._runtime_kinds[arg] = kinds[var]  # type: ignore[assignment]
        saved_env = dict(scope.env)
        for var, arg in zip(carried, block_args):
            scope.env[var] = Dyn(Ref(arg))
        context = LoopContext(name, carried)
        saved = (scope.prefix, scope.suffix, scope.loop, scope.unrolling)
        scope.prefix, scope.suffix, scope.loop, scope.unrolling = name + ".", "", context, 0
        self._blocks.append(context.block)
        errors = len(self.sink.diagnostics)
        try:
            self._run_block(stmt.body, scope, info)
            context.kinds_at_exit.append({var: self._container_kind(scope.env.get(var)) for var in carried})
            yields = [self._yield_operand(scope.env.get(var), var, span) for var in carried]
        finally:
            self._blocks.pop()
            scope.prefix, scope.suffix, scope.loop, scope.unrolling = saved
        if len(self.sink.diagnostics) > errors and self.sink.has_errors:
            scope.env.clear()
            scope.env.update(saved_env)
            for var in carried:
                scope.env[var] = POISON
            raise ExtractError
        body = context.block
        attrs: dict[str, Any] = {
            "region.carried": block_args,
            "region.iter": _operand_json(iter_operand),
            "region.yield": [_operand_json(y) for y in yields],
            "region.break": None if context.break_at is None else {
                "at": context.break_at,
                "cond": _operand_json(context.break_cond),
                "yield": [_operand_json(y) for y in context.break_yield or []],
            },
        }
        if trips is not None:
            attrs[TRIPS_ATTR] = trips  # planning only (dagc.ir.regions.expected_trips)
        extra = [iter_operand, *yields, *(context.break_yield or [])]
        if context.break_cond is not None:
            extra.append(context.break_cond)
        captures, deps = self._captures(body, set(block_args), extra)
        outputs = tuple(output_name(name, i, len(carried)) for i in range(len(carried)))
        node = Node(name, "loop", "for", (*inits, *[Ref(c) for c in captures]), (), outputs,
                    (None,) * len(outputs), self._region_options(body), span, tuple(deps), attrs,
                    {"body": body})
        self._close_region(node, body)
        scope.env.clear()
        scope.env.update(saved_env)
        for var, out in zip(carried, outputs):
            scope.env[var] = Dyn(Ref(out))
            exits = {at_exit[var] for at_exit in context.kinds_at_exit}
            if len(exits) == 1 and kinds[var] in exits:  # the same kind of container however the loop ends
                self._runtime_kinds[out] = kinds[var]  # type: ignore[assignment]

    def _check_depth(self, span: SourceSpan) -> None:
        if len(self._blocks) >= MAX_REGION_DEPTH:
            self.sink.error("DAGC117", f"branches and loops on task results are nested more than "
                            f"{MAX_REGION_DEPTH} deep", span,
                            hint="move the innermost logic into a task, or combine conditions with `and`")
            raise ExtractError

    def _yield_operand(self, value: Value, var: str, span: SourceSpan) -> Operand:
        if value is None:
            return Const(None)
        if value is POISON:
            raise ExtractError
        try:
            return _to_operand(value)
        except TypeError:
            self.sink.error("DAGC118", f"`{var}` is bound to something that is not a value inside a loop or "
                            "branch on a task result", span,
                            hint="bind names in loops and branches to task results or literals only")
            raise ExtractError from None

    # ---- branches -----------------------------------------------------------------------------------
    def _if(self, stmt: ast.If, scope: Scope, info: ModuleInfo) -> None:
        if self._known_false(stmt.test, scope, info):  # `if DEBUG: break` with DEBUG = False: folded first
            self._run_block(stmt.orelse, scope, info)
            return
        # `if <cond>: break` directly in the body of a region loop
        if (scope.loop is not None and not scope.unrolling and len(stmt.body) == 1
                and isinstance(stmt.body[0], ast.Break) and not stmt.orelse
                and self._blocks and self._blocks[-1] is scope.loop.block):
            self._loop_break(stmt, scope, info)
            return
        # `if <cond>: <statements>; break`: the statements as a branch, then the exit, on one test
        if (scope.loop is not None and not scope.unrolling and len(stmt.body) > 1
                and isinstance(stmt.body[-1], ast.Break) and not stmt.orelse
                and not _loop_level_breaks(stmt.body[:-1])
                and self._blocks and self._blocks[-1] is scope.loop.block and self._needs_glue(stmt.test, scope, info)):
            self._branch_then_break(stmt, scope, info)
            return
        if not self._needs_glue(stmt.test, scope, info):
            taken = stmt.body if self._static(stmt.test, scope, info) else stmt.orelse
            self._run_block(taken, scope, info)
            return
        self._cond_region(stmt, scope, info)

    def _known_false(self, test: ast.expr, scope: Scope, info: ModuleInfo) -> bool:
        """True when `test` is a compile-time value that is false; never reports anything. `and`
        short-circuits as in Python: `DEBUG and converged(m)` is false when DEBUG is."""
        try:
            return not eval_static(test, self._static_lookup(scope, info))
        except (NotStatic, _RuntimeUse, RecursionError):
            return False

    def _branch_then_break(self, stmt: ast.If, scope: Scope, info: ModuleInfo) -> None:
        held = "\0exit"  # a name no user code can bind: the test, evaluated once
        scope.env[held] = self._eval(stmt.test, scope, info)
        try:
            test = ast.copy_location(ast.Name(held, ast.Load()), stmt.test)
            branch = ast.copy_location(ast.If(test, stmt.body[:-1], []), stmt)
            self._if(branch, scope, info)
            self._loop_break(ast.copy_location(ast.If(test, [stmt.body[-1]], []), stmt), scope, info)
        finally:
            scope.env.pop(held, None)

    def _loop_break(self, stmt: ast.If, scope: Scope, info: ModuleInfo) -> None:
        loop = scope.loop
        assert loop is not None
        if loop.break_at is not None:
            self.sink.error("DAGC117", "a pipeline loop may exit early at one place only",
                            info.source.span(stmt), hint="combine the conditions: `if a or b: break`")
            raise ExtractError
        value = self._eval(stmt.test, scope, info)
        cond = _to_operand(value) if not isinstance(value, Static) else Const(bool(value.value))
        loop.break_at = len(loop.block)
        loop.break_cond = cond
        loop.break_yield = [self._yield_operand(scope.env.get(var), var, info.source.span(stmt))
                            for var in loop.carried]
        loop.kinds_at_exit.append({var: self._container_kind(scope.env.get(var)) for var in loop.carried})

    def _cond_region(self, stmt: ast.If, scope: Scope, info: ModuleInfo) -> None:
        span = info.source.span(stmt)
        for node, _tests in _loop_level_breaks(stmt.body + stmt.orelse):
            self.sink.error("DAGC117", "`break`/`continue` inside a branch on a task result is not supported",
                            info.source.span(node),
                            hint="exit a loop with `if <condition>: break` directly in the loop body")
            raise ExtractError
        self._check_depth(span)
        test = self._eval(stmt.test, scope, info)
        pred = _to_operand(test)
        name = self._node_name(scope.prefix + "cond" + scope.suffix)
        before = dict(scope.env)
        errors = len(self.sink.diagnostics)
        branches = self._run_blocks(name, (("then", stmt.body), ("else", stmt.orelse)), scope, info)
        scope.env.clear()
        scope.env.update(before)
        (then_block, then_env), (else_block, else_env) = branches
        changed: list[str] = []
        for env in (then_env, else_env):
            for var, value in env.items():
                if (var not in before or before[var] != value) and var not in changed:
                    changed.append(var)
        merged: list[str] = []
        then_yield: list[Operand] = []
        else_yield: list[Operand] = []
        failed = len(self.sink.diagnostics) > errors and self.sink.has_errors
        for var in changed:
            a, b = then_env.get(var), else_env.get(var)
            if a is POISON or b is POISON:
                scope.env[var] = POISON
                continue
            if isinstance(a, Static) and isinstance(b, Static) and a == b:
                scope.env[var] = a
                continue
            try:
                then_yield.append(self._yield_operand(a, var, span))
                else_yield.append(self._yield_operand(b, var, span))
            except ExtractError:
                scope.env[var] = POISON
                failed = True
                continue
            merged.append(var)
        if failed:
            for var in merged:
                scope.env[var] = POISON
            raise ExtractError
        attrs: dict[str, Any] = {
            "region.then.yield": [_operand_json(y) for y in then_yield],
            "region.else.yield": [_operand_json(y) for y in else_yield],
        }
        captures, deps = self._captures(then_block + else_block, set(), then_yield + else_yield)
        outputs = tuple(output_name(name, i, len(merged)) for i in range(len(merged))) or (name,)
        types = tuple(_same(self._types.get(_ref_name(a), (None,))[0], self._types.get(_ref_name(b), (None,))[0])
                      for a, b in zip(then_yield, else_yield)) or (None,)
        captured = [c for c in captures if not (isinstance(pred, Ref) and pred.name == c)]
        node = Node(name, "cond", "if", (pred, *[Ref(c) for c in captured]), (), outputs, types,
                    self._region_options(then_block + else_block), span, tuple(deps), attrs,
                    {"then": then_block, "else": else_block})
        self._close_region(node, then_block + else_block)
        for var, out, t in zip(merged, outputs, types):
            scope.env[var] = Dyn(Ref(out))
            if t is not None:
                self._types[out] = (t, None)
            kind = self._container_kind(then_env.get(var))
            if kind is not None and kind == self._container_kind(else_env.get(var)):
                self._runtime_kinds[out] = kind  # a list (or dict) whichever branch ran

    # ---- exit handlers -------------------------------------------------------------------------------
    def _try(self, stmt: ast.Try, scope: Scope, info: ModuleInfo) -> None:
        """`try: BODY finally: CLEANUP` → one `try` region (docs/ir.md): CLEANUP runs whether BODY
        succeeded or failed, then BODY's failure goes on."""
        span = info.source.span(stmt)
        if stmt.handlers:
            self.sink.error("DAGC180", "`except` is not supported in a pipeline: only `try: ... finally: ...`",
                            info.source.span(stmt.handlers[0]),
                            hint="catch the error inside a task (it can return a fallback value), retry it with "
                            "the task option retries=N, or use `finally:` for cleanup that must run")
            raise ExtractError
        for exit_stmt, _tests in _loop_level_breaks(stmt.body + stmt.finalbody):
            self.sink.error("DAGC182", "`break`/`continue` inside `try`/`finally` is not supported in a pipeline",
                            info.source.span(exit_stmt),
                            hint="leave the loop after the `try` statement, or put the loop inside the `try`")
            raise ExtractError
        failed = False
        for read in finally_reads_of_body(stmt.body, stmt.finalbody):
            self.sink.error("DAGC181", f"`finally` reads `{read.id}`, which the `try` body assigns: if the body "
                            "fails it may be unbound or hold its old value", info.source.span(read),
                            hint="in `finally`, use only values defined before the `try`; read the body's "
                            "results after the `try` statement")
            failed = True
        if failed:
            raise ExtractError
        self._check_depth(span)
        name = self._node_name(scope.prefix + "try" + scope.suffix)
        before = dict(scope.env)
        count = len(self.sink.diagnostics)
        blocks, envs = self._run_try_blocks(stmt, name, scope, info)
        scope.env.clear()
        scope.env.update(before)
        errors = len(self.sink.diagnostics) > count and self.sink.has_errors
        # outputs: the values defined inside that the body's names hold (kept on success), then those
        # of the finally block's names (it runs last). A name keeps its structure (a list of results
        # stays a list, so `xs.append(...)` goes on working after the `try`); only the values made
        # inside become outputs.
        yields: list[list[Operand]] = [[], []]
        index: dict[str, int] = {}
        merged: list[tuple[str, Operand]] = []
        for k, env in enumerate(envs):
            inner = {v for n in blocks[k] for v in (*n.outputs, *_region_defined(n))}
            for var, value in env.items():
                if k == 0 and var in envs[1]:
                    continue  # assigned in both: the finally block's value is the one that stays
                if value is POISON:
                    scope.env[var] = POISON
                    continue
                if not _is_runtime(value):
                    scope.env[var] = value  # a compile-time value: the same after a successful body
                    continue
                try:
                    operand = self._yield_operand(value, var, span)
                except ExtractError:
                    scope.env[var] = POISON
                    errors = True
                    continue
                made = [r for r in iter_refs(operand) if r in inner]
                if not made:
                    scope.env[var] = value  # it holds values from before the `try` only
                    continue
                for ref in made:
                    if ref not in index:
                        index[ref] = sum(len(y) for y in yields)
                        yields[k].append(Ref(ref))
                merged.append((var, operand))
        if errors:
            for var, _ in merged:
                scope.env[var] = POISON
            raise ExtractError
        node = self._try_node(name, span, blocks, yields)
        self._close_region(node, blocks[0] + blocks[1])
        outside = {ref: node.outputs[k] for ref, k in index.items()}
        for out, type_ in zip(node.outputs, node.types):
            if type_ is not None:
                self._types[out] = (type_, None)
        for var, operand in merged:
            scope.env[var] = Dyn(rename_refs(operand, outside))

    def _run_try_blocks(self, stmt: ast.Try, name: str, scope: Scope, info: ModuleInfo,
                        ) -> tuple[list[list[Node]], list[dict[str, Value]]]:
        """The nodes of the body and of the finally block, and the names each changes. Both start from
        the names bound before the `try` (the finally block may run after any failure)."""
        before = dict(scope.env)
        ran = self._run_blocks(name, (("body", stmt.body), ("finally", stmt.finalbody)), scope, info)
        return ([block for block, _ in ran],
                [{k: v for k, v in env.items() if before.get(k, _UNSET) is not v} for _, env in ran])

    def _run_blocks(self, name: str, parts: tuple[tuple[str, list[ast.stmt]], ...], scope: Scope,
                    info: ModuleInfo) -> list[tuple[list[Node], dict[str, Value]]]:
        """Each labelled block of a region (a cond's branches, a try's body and finally block), run
        from the names bound before it into nodes named `NAME.LABEL.*`: its nodes and the names bound
        after it. The scope's prefix and loop context are restored; its names are left to the caller."""
        before = dict(scope.env)
        saved = (scope.prefix, scope.suffix, scope.loop, scope.unrolling)
        ran: list[tuple[list[Node], dict[str, Value]]] = []
        try:
            for label, stmts in parts:
                block: list[Node] = []
                scope.env.clear()
                scope.env.update(before)
                scope.prefix, scope.suffix, scope.loop, scope.unrolling = f"{name}.{label}.", "", None, 0
                self._blocks.append(block)
                try:
                    self._run_block(stmts, scope, info)
                finally:
                    self._blocks.pop()
                ran.append((block, dict(scope.env)))
        finally:
            scope.prefix, scope.suffix, scope.loop, scope.unrolling = saved
        return ran

    def _try_node(self, name: str, span: SourceSpan, blocks: list[list[Node]],
                  yields: list[list[Operand]]) -> Node:
        """The `try` region node (its bodies built here, in one place)."""
        attrs: dict[str, Any] = {
            "region.body.yield": [_operand_json(y) for y in yields[0]],
            "region.finally.yield": [_operand_json(y) for y in yields[1]],
        }
        every = yields[0] + yields[1]
        captures, deps = self._captures(blocks[0] + blocks[1], set(), every)
        outputs = tuple(output_name(name, i, len(every)) for i in range(len(every))) or (name,)
        types = tuple(self._types.get(_ref_name(y), (None,))[0] if isinstance(y, Ref) else None
                      for y in every) or (None,)
        return Node(name, "try", "try", tuple(Ref(c) for c in captures), (), outputs, types,
                    self._region_options(blocks[0] + blocks[1]), span, tuple(deps), attrs,
                    {"body": blocks[0], "finally": blocks[1]})

    # ---- regions: shared ---------------------------------------------------------------------------
    def _captures(self, body: list[Node], defined: set[str], extra: list[Operand],
                  ) -> tuple[list[str], list[str]]:
        """Outer values and outer nodes that a region body uses (in first-use order)."""
        inner_values = set(defined)
        inner_nodes: set[str] = set()
        for node in body:
            inner_values.update(node.outputs)
            inner_nodes.add(node.name)
            inner_values.update(node.attrs.get("region.carried", ()))
            inner_values.update(node.attrs.get("region.items", ()))
            inner_values.update(_region_defined(node))
            inner_nodes.update(_region_node_names(node))
        uses: dict[str, None] = {}
        deps: dict[str, None] = {}
        for node in body:
            for v in node.input_values():
                if v not in inner_values:
                    uses.setdefault(v, None)
            for d in node.deps:
                if d not in inner_nodes:
                    deps.setdefault(d, None)
        for operand in extra:
            for v in iter_refs(operand):
                if v not in inner_values:
                    uses.setdefault(v, None)
        return list(uses), list(deps)

    def _region_options(self, body: list[Node]) -> Any:

        if any(n.options.side_effects for n in body):
            return TaskOptions(side_effects=True)
        return TaskOptions()

    def _close_region(self, node: Node, body: list[Node]) -> None:
        _aggregate_effects(node, body)
        for inner in body:
            self._owner[inner.name] = node.name
        for value in node.outputs:
            self._producer[value] = node.name
        self._add_node(node)

    # ---- nodes ----------------------------------------------------------------------------------------
    def _reserve(self, name: str) -> str:
        base, count = name, 0
        while name in self._used:
            count += 1
            name = f"{base}.{count}"
        self._used.add(name)
        return name

    def _node_name(self, base: str) -> str:
        count = self._name_counts.get(base, 0)
        name = base if count == 0 else f"{base}.{count}"
        while name in self._used:
            count += 1
            name = f"{base}.{count}"
        self._name_counts[base] = count + 1
        self._used.add(name)
        return name

    def _add_node(self, node: Node) -> None:
        self._used.update(node.outputs)
        for value in node.outputs:
            self._producer.setdefault(value, node.name)
        if self._blocks:
            self._blocks[-1].append(node)
        else:
            assert self.graph is not None
            self.graph.add_node(node)

    def _visible(self, node_name: str) -> str:
        while node_name in self._owner:
            node_name = self._owner[node_name]
        return node_name

    # ---- expressions ------------------------------------------------------------------------------
    def _eval(self, expr: ast.expr, scope: Scope, info: ModuleInfo, *, n_outputs: int = 1) -> Value:
        if isinstance(expr, ast.Call):
            return self._call(expr, scope, info, n_outputs)
        if isinstance(expr, ast.Name):
            return self._name(expr, scope, info)
        if isinstance(expr, ast.Constant):
            if type(expr.value) in _PLAIN_LITERALS and not (  # (the common case, without the static evaluator)
                    type(expr.value) is int and expr.value.bit_length() > MAX_INT_BITS):
                return Static(expr.value)
            return Static(self._static(expr, scope, info))
        if isinstance(expr, (ast.List, ast.Tuple)):
            items = []
            for elt in expr.elts:
                if isinstance(elt, ast.Starred):
                    self.sink.error("DAGC109", "starred items are not supported here", info.source.span(elt),
                                    hint="list the items explicitly")
                    raise ExtractError
                items.append(self._eval(elt, scope, info))
            return self._sequence(items, isinstance(expr, ast.List), expr, info)
        if isinstance(expr, ast.Dict):
            pairs = []
            for key, val in zip(expr.keys, expr.values):
                if key is None:
                    self.sink.error("DAGC109", "`**` in a dict is not supported here", info.source.span(val),
                                    hint="list the entries explicitly")
                    raise ExtractError
                pairs.append((self._eval(key, scope, info), self._eval(val, scope, info)))
            return self._mapping(pairs, expr, info)
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp, ast.DictComp)):
            return self._comprehension(expr, scope, info)
        if isinstance(expr, _GLUE_EXPRS) and self._needs_glue(expr, scope, info):
            if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
                joined = self._concat(expr, scope, info)
                if joined is not None:
                    return joined
            return self._glue(expr, scope, info)
        # anything else must be a compile-time expression (arithmetic on constants, f-strings, …)
        return Static(self._static(expr, scope, info))

    def _concat(self, expr: ast.BinOp, scope: Scope, info: ModuleInfo) -> Value | None:
        """`xs + [y]` where both sides are lists (or both tuples) of known length: no glue needed."""
        def known(e: ast.expr) -> tuple[str, list[Value]] | None:
            if isinstance(e, (ast.List, ast.Tuple)) and not any(isinstance(x, ast.Starred) for x in e.elts):
                return ("list" if isinstance(e, ast.List) else "tuple", [])
            if isinstance(e, ast.Name):
                found = _known_container(scope.env.get(e.id))
                return found if found is not None and found[0] != "dict" else None
            if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
                return known(e.left) and known(e.right)
            return None

        left, right = known(expr.left), known(expr.right)
        if left is None or right is None or left[0] != right[0]:
            return None
        a = _known_container(self._eval(expr.left, scope, info))
        b = _known_container(self._eval(expr.right, scope, info))
        if a is None or b is None or a[0] != b[0]:
            return None
        return self._sequence([*a[1], *b[1]], a[0] == "list", expr, info)

    def _sequence(self, items: list[Value], is_list: bool, expr: ast.expr, info: ModuleInfo) -> Value:
        if any(_is_runtime(v) for v in items):
            try:
                return self._capture(Seq("list" if is_list else "tuple", tuple(_to_operand(v) for v in items)),
                                     items)
            except TypeError:
                self._not_a_value(expr, info)
        values = [v.value for v in items if isinstance(v, Static)]
        if len(values) != len(items):
            self._not_a_value(expr, info)
        return Static(values if is_list else tuple(values))

    def _capture(self, operand: Seq | Map, items: list[Value]) -> Dyn:
        """A run-time container; remember the compile-time lists and dicts copied into it."""
        ids: set[int] = set()
        for item in items:
            if isinstance(item, Static):
                _mutable_ids(item.value, ids)
        if ids:
            self._captured[id(operand)] = (operand, ids)
        return Dyn(operand)

    def _mapping(self, pairs: list[tuple[Value, Value]], expr: ast.expr, info: ModuleInfo) -> Value:
        if any(_is_runtime(k) or _is_runtime(v) for k, v in pairs):
            try:
                return self._capture(Map(tuple((_to_operand(k), _to_operand(v)) for k, v in pairs)),
                                     [v for _, v in pairs])
            except TypeError:
                self._not_a_value(expr, info)
        if not all(isinstance(k, Static) and isinstance(v, Static) for k, v in pairs):
            self._not_a_value(expr, info)
        try:
            return Static({k.value: v.value for k, v in pairs})
        except TypeError:
            self._not_a_value(expr, info)
            raise

    def _comprehension(self, expr: ast.ListComp | ast.GeneratorExp | ast.DictComp, scope: Scope,
                       info: ModuleInfo) -> Value:
        if isinstance(expr, (ast.ListComp, ast.DictComp)) and not expr.generators[0].is_async:
            spec, _ = self._map_spec(expr.generators[0].iter, scope, info)
            if spec is not None and isinstance(expr, ast.ListComp):  # over a run-time list: a `map` region
                return self._map_comprehension(expr, spec, scope, info)
            if spec is not None and "dict" not in scope.env and self.project.lookup(info, "dict") is None:
                return self._map_dict_comprehension(expr, spec, scope, info)  # a map, then dict(pairs)
        results: list[Value] = []
        pairs: list[tuple[Value, Value]] = []
        targets = set().union(*(_target_names(g.target) for g in expr.generators))
        saved = {t: scope.env[t] for t in targets if t in scope.env}
        outer_suffix = scope.suffix
        span = info.source.span(expr)

        def generate(level: int, suffix: str) -> None:
            if level == len(expr.generators):
                scope.suffix = suffix
                if isinstance(expr, ast.DictComp):
                    pairs.append((self._eval(expr.key, scope, info), self._eval(expr.value, scope, info)))
                else:
                    results.append(self._eval(expr.elt, scope, info))
                return
            gen = expr.generators[level]
            if gen.is_async:
                self.sink.error("DAGC109", "`async for` is not supported in a pipeline", info.source.span(gen.iter))
                raise ExtractError
            items = self._loop_items(gen.iter, scope, info, "this comprehension")
            for k, item in enumerate(items):
                if not self._spend(span):
                    raise ExtractError
                self._assign(gen.target, item, scope, info)
                keep = True
                for cond in gen.ifs:
                    if self._needs_glue(cond, scope, info):
                        self.sink.error("DAGC116", "a comprehension cannot filter on a task result",
                                        info.source.span(cond),
                                        hint="filter on compile-time values, or filter inside a task")
                        raise ExtractError
                    if not self._static(cond, scope, info):
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
            return self._mapping(pairs, expr, info)
        return self._sequence(results, True, expr, info)

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
            if isinstance(value, MapBound):
                self._map_bound_use(value, expr, info)
            return value
        if name in scope.assigned_later:
            self.sink.error("DAGC102", f"`{name}` is used before it is produced", info.source.span(expr),
                            hint=f"move the statement that assigns `{name}` above this use")
            raise ExtractError
        if name in info.dagc_modules:
            return ModuleValue("dagc", info)
        if info.dagc_names.get(name) in ("after", "trips", "each"):
            return DagcFunction(info.dagc_names[name])
        symbol = self.project.lookup(info, name)
        if symbol is None:
            if name == "__file__":
                return Static(self._static(expr, scope, info))
            if name in ("True", "False", "None"):
                return Static({"True": True, "False": False, "None": None}[name])
            if name in STATIC_BUILTINS or name in _PY_BUILTINS:
                return External(f"builtin `{name}`")
            self.sink.error("DAGC101", f"name `{name}` is not defined", info.source.span(expr),
                            hint=self._suggest(name, scope, info))
            raise ExtractError
        return self._symbol_value(symbol, name, info, expr)

    def _suggest(self, name: str, scope: Scope, info: ModuleInfo) -> str:
        import difflib

        candidates = list(scope.env) + list(info.symbols)
        close = difflib.get_close_matches(name, candidates, n=1)
        if close:
            return f"did you mean `{close[0]}`?"
        return "define it, import it, or pass it as a pipeline parameter"

    def _symbol_value(self, symbol: Any, name: str, info: ModuleInfo, use: ast.AST | None = None,
                      use_info: ModuleInfo | None = None) -> Value:
        """The value of module-level `symbol` of `info`; `use` is the expression that reads it, in the
        source of `use_info` (default: `info`)."""
        use_info = use_info or info
        if isinstance(symbol, (TaskDef, PipelineDef)):
            owner = self.project.module(symbol.module) or info
            return Callee(symbol, owner)
        if isinstance(symbol, Constant):
            # read at compile time: remembered so that a task changing it at run time is reported
            qualified = f"{info.name}.{name}"
            if use is not None:
                self._module_reads.setdefault(qualified, (use, use_info))
            for ident in _mutable_ids(symbol.value):
                self._module_objects.setdefault(ident, (qualified, symbol.value))
            self._folded.setdefault((info.name, name), None)
            self._module_configs.add(id(symbol.value))
            return Static(symbol.value)
        if isinstance(symbol, ImportedModule):
            user = self.project.module(symbol.module)
            if user is not None:
                return ModuleValue(symbol.module, user)
            return External(f"module `{symbol.module}`")
        if isinstance(symbol, ImportedName):
            return External(f"`{symbol.name}` from `{symbol.module}`")
        if isinstance(symbol, Opaque) and symbol.steps is not None and (symbol.steps.members or symbol.steps.constants):
            return ClassValue(symbol.steps, self.project.module(symbol.steps.module) or info)
        if isinstance(symbol, Opaque) and symbol.kind == "value":
            self._run_time_setting(name, symbol, info, use_info.source.span(use) if use is not None else None)
        if isinstance(symbol, Opaque):
            return External(f"{symbol.kind} `{name}`")
        return External(f"`{name}`")

    def _static_lookup(self, scope: Scope, info: ModuleInfo):  # type: ignore[no-untyped-def]
        def lookup(node: ast.Name) -> Any:
            if node.id in scope.env:
                value = scope.env[node.id]
                if value is POISON:
                    raise _Poisoned(node)
                if isinstance(value, MapBound):
                    self._map_bound_use(value, node, info)
                if isinstance(value, Static):
                    return value.value
                if isinstance(value, ParamValue):
                    return value.value
                if isinstance(value, ClassValue):
                    return value
                raise _RuntimeUse(node)
            if node.id in scope.assigned_later:
                raise _UsedBefore(node)
            symbol = self.project.lookup(info, node.id)
            if isinstance(symbol, Constant):
                self._folded.setdefault((info.name, node.id), None)
                self._module_configs.add(id(symbol.value))
                return symbol.value
            if symbol is None and node.id in STATIC_BUILTINS:
                return BUILTIN
            if symbol is None and node.id != "__file__":
                raise _Undefined(node)
            if isinstance(symbol, Opaque) and symbol.kind == "value":
                self._run_time_setting(node.id, symbol, info, info.source.span(node))
            return static_symbol(self.project, info, node, symbol)

        return lookup

    def _static(self, expr: ast.expr, scope: Scope, info: ModuleInfo) -> Any:
        try:
            return eval_static(expr, self._static_lookup(scope, info))
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
                "DAGC114",
                f"`{exc.node.id}` is a task result, but {_describe(expr)} here must be known at compile time",  # type: ignore[attr-defined]
                info.source.span(exc.node),
                hint="use a literal, a module constant or a pipeline parameter here; values known only at run "
                "time can be passed to tasks",
            )
        except NotStatic as exc:
            if any(scope.env.get(n) is POISON for n in _names_in(expr)):
                raise ExtractError from None  # reported where the name was bound
            self.sink.error("DAGC109", f"{_describe(exc.node)} is not supported here: {exc.reason}",
                            info.source.span(exc.node),
                            hint="pipeline bodies may use task calls, literals, constants and parameters; "
                            "do other computation inside a task")
        except RecursionError:
            self.sink.error("DAGC109", "expression nested too deeply", info.source.span(expr),
                            hint="split it into several statements")
        raise ExtractError

    # ---- glue -------------------------------------------------------------------------------------
    def _is_task_callee(self, func: ast.expr, scope: Scope, info: ModuleInfo) -> bool:
        if isinstance(func, ast.Name):
            if func.id in scope.env:
                return isinstance(scope.env[func.id], Callee)
            symbol = self.project.lookup(info, func.id)
            return isinstance(symbol, (TaskDef, PipelineDef))
        if isinstance(func, ast.Attribute):
            parts = []
            node: ast.expr = func
            while isinstance(node, ast.Attribute):
                parts.append(node.attr)
                node = node.value
            if isinstance(node, ast.Name) and isinstance(scope.env.get(node.id), ClassValue):
                return True
            if isinstance(node, ast.Name) and node.id not in scope.env:
                symbol = self.project.lookup(info, node.id)
                if isinstance(symbol, ImportedModule) and self.project.is_user_module(symbol.module):
                    return True
                if isinstance(symbol, Opaque) and symbol.steps is not None and symbol.steps.members:
                    return True
        return False

    def _needs_glue(self, expr: ast.expr, scope: Scope, info: ModuleInfo) -> bool:
        """True when `expr` reads a task result (a name bound to one, or a task call inside it)."""
        stack: list[ast.AST] = [expr]
        local: set[str] = set()
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Name):
                if node.id not in local and _is_task_result(scope.env.get(node.id)):
                    return True
            elif isinstance(node, ast.Call) and self._is_task_callee(node.func, scope, info):
                return True
            elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
                for gen in node.generators:
                    local |= _target_names(gen.target)
            elif isinstance(node, ast.Lambda):
                local |= {a.arg for a in node.args.args}
            stack.extend(ast.iter_child_nodes(node))
        return False

    def _static_subscript(self, expr: ast.expr, scope: Scope, info: ModuleInfo) -> Value | None:
        """`xs[2]` or `d["k"]` where the container is a literal list/tuple/dict of values built in the
        pipeline and the index is a compile-time constant: the item itself, so that no glue node (and
        no false dependency on the other items) is created."""
        # only a named container: evaluating any other expression here would build nodes twice
        if not isinstance(expr, ast.Subscript) or not isinstance(expr.value, ast.Name):
            return None
        if isinstance(expr.slice, ast.Slice) or self._needs_glue(expr.slice, scope, info):
            return None
        container = self._name(expr.value, scope, info)
        if isinstance(container, tuple):
            items: list[Value] | None = list(container)
        elif isinstance(container, Dyn) and isinstance(container.operand, Seq):
            items = [_value_of(i) for i in container.operand.items]
        elif isinstance(container, Dyn) and isinstance(container.operand, Map):
            key = self._static(expr.slice, scope, info)
            for k, v in container.operand.items:
                if isinstance(k, Const) and k.value == key and type(k.value) is type(key):
                    return _value_of(v)
            return None
        else:
            return None
        index = self._static(expr.slice, scope, info)
        if isinstance(index, bool) or not isinstance(index, int) or not -len(items) <= index < len(items):
            return None
        return items[index]

    def _glue(self, expr: ast.expr, scope: Scope, info: ModuleInfo) -> Value:
        direct = self._static_subscript(expr, scope, info)
        if direct is not None:
            return direct
        args: list[Operand] = []

        def placeholder(operand: Operand) -> ast.expr:
            if operand in args:
                return ast.Name(f"_{args.index(operand)}", ast.Load())
            args.append(operand)
            return ast.Name(f"_{len(args) - 1}", ast.Load())

        def conv(e: ast.expr) -> ast.expr:
            if not self._needs_glue(e, scope, info):
                if isinstance(e, ast.Slice):
                    return ast.Slice(*(conv(p) if p is not None else None for p in (e.lower, e.upper, e.step)))
                value = self._static(e, scope, info)
                if isinstance(value, (bool, int, str)) or value is None or (
                        isinstance(value, float) and value == value and abs(value) != float("inf")):
                    return ast.Constant(value)
                try:
                    return placeholder(operand_from_python(value))
                except TypeError:
                    self._not_a_value(e, info)
                    raise
            if isinstance(e, ast.Name):
                value = self._name(e, scope, info)
                try:
                    return placeholder(_to_operand(value))
                except TypeError:
                    self._not_a_value(e, info)
                    raise
            if isinstance(e, ast.Call) and self._is_glue_call(e, scope):
                literal = as_literal(e)  # `tuple([a, b])` is `(a, b)`: emitted code stays lint-clean
                if literal is not None:
                    return conv(literal)
                return ast.Call(ast.Name(e.func.id, ast.Load()),  # type: ignore[attr-defined]
                                [conv(_generator_as_list(e, a)) for a in e.args],
                                [ast.keyword(k.arg, conv(k.value)) for k in e.keywords])
            if isinstance(e, (ast.ListComp, ast.DictComp)):  # `sum([grad(w, s) for s in shards])`
                return placeholder(_to_operand(self._comprehension(e, scope, info)))
            if isinstance(e, ast.Call):
                value = self._eval(e, scope, info)
                return placeholder(_to_operand(value))
            if isinstance(e, ast.BinOp):
                return ast.BinOp(conv(e.left), e.op, conv(e.right))
            if isinstance(e, ast.UnaryOp):
                return ast.UnaryOp(e.op, conv(e.operand))
            if isinstance(e, ast.BoolOp):
                return ast.BoolOp(e.op, [conv(v) for v in e.values])
            if isinstance(e, ast.Compare):
                return ast.Compare(conv(e.left), e.ops, [conv(c) for c in e.comparators])
            if isinstance(e, ast.IfExp):
                return ast.IfExp(conv(e.test), conv(e.body), conv(e.orelse))
            if isinstance(e, ast.Subscript):
                return ast.Subscript(conv(e.value), conv(e.slice), ast.Load())
            if isinstance(e, ast.Slice):
                return ast.Slice(*(conv(p) if p is not None else None for p in (e.lower, e.upper, e.step)))
            if isinstance(e, ast.Attribute):
                if e.attr.startswith("__"):
                    self.sink.error("DAGC109", f"dunder attribute `.{e.attr}` of a task result is not supported",
                                    info.source.span(e), hint="read it inside a task")
                    raise ExtractError
                return ast.Attribute(conv(e.value), e.attr, ast.Load())
            if isinstance(e, ast.JoinedStr):
                return ast.JoinedStr([conv(v) for v in e.values])
            if isinstance(e, ast.FormattedValue):
                spec = None
                if e.format_spec is not None:
                    if self._needs_glue(e.format_spec, scope, info):
                        spec = conv(e.format_spec)
                    else:
                        spec = ast.JoinedStr([ast.Constant(str(self._static(e.format_spec, scope, info)))])
                return ast.FormattedValue(conv(e.value), e.conversion, spec)
            if isinstance(e, (ast.Tuple, ast.List)):
                if any(isinstance(x, ast.Starred) for x in e.elts):
                    self._not_a_value(e, info)
                return type(e)([conv(x) for x in e.elts], ast.Load())
            if isinstance(e, ast.Dict):
                if any(k is None for k in e.keys):
                    self._not_a_value(e, info)
                return ast.Dict([conv(k) for k in e.keys if k is not None], [conv(v) for v in e.values])
            self.sink.error("DAGC109", f"{_describe(e)} on a task result is not supported in a pipeline body",
                            info.source.span(e),
                            hint="pipeline bodies support arithmetic, comparisons, indexing, attribute access "
                            "and f-strings on task results; do anything else inside a task")
            raise ExtractError

        new = conv(expr)
        if isinstance(new, ast.Name) and new.id == "_0" and len(args) == 1:
            return Dyn(args[0]) if any(True for _ in iter_refs(args[0])) else Static(_const_value(args[0]))
        text = ast.unparse(ast.fix_missing_locations(new))
        base = _GLUE_NAMES.get(type(expr), "glue")
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
            base = expr.func.id
        if isinstance(expr, ast.BinOp):
            base = _BINOP_NAMES.get(type(expr.op), "arith")
        name = self._node_name(scope.prefix + base + scope.suffix)
        node = Node(name, "glue", text, tuple(args), (), (name,), (None,), span=info.source.span(expr),
                    deps=tuple(self._take_extra_deps()))
        self._add_node(node)
        return Dyn(Ref(name))

    # ---- calls ------------------------------------------------------------------------------------
    def _callee(self, func: ast.expr, scope: Scope, info: ModuleInfo) -> Value:
        if isinstance(func, ast.Name):
            return self._name(func, scope, info)
        if isinstance(func, ast.Attribute):
            base = self._callee(func.value, scope, info)
            if isinstance(base, ModuleValue) and base.module == "dagc":
                if func.attr in ("after", "trips", "each"):
                    return DagcFunction(func.attr)
                return External(f"`dagc.{func.attr}`")
            if isinstance(base, ModuleValue):
                symbol = self.project.lookup(base.info, func.attr)
                if symbol is None:
                    sub = self.project.module(f"{base.module}.{func.attr}")
                    if sub is not None:
                        return ModuleValue(sub.name, sub)
                    self.sink.error("DAGC131", f"user module `{base.module}` has no `{func.attr}`",
                                    info.source.span(func), hint=f"check the name in {base.info.source.display}")
                    raise ExtractError
                return self._symbol_value(symbol, func.attr, base.info, func, info)
            if isinstance(base, ClassValue):
                return self._class_member(base, func, info)
            if _is_runtime(base):
                return External(f"method `.{func.attr}()` of a task result")
            return External(f"`{ast.unparse(func)}`")
        if isinstance(func, ast.Call) and isinstance(self._callee(func.func, scope, info), ClassValue):
            return self._eval(func, scope, info)  # `Flow()` in `Flow().run()`
        return External(f"`{ast.unparse(func)}`")

    def _class_member(self, base: ClassValue, func: ast.Attribute, info: ModuleInfo) -> Value:
        steps, attr = base.steps, func.attr
        member = steps.members.get(attr)
        if member is not None:
            return Callee(member, base.info)
        if attr == "next":
            hint = ("in dagc the pipeline calls the steps in order and passes results on: "
                    "`data = self.start()` then `self.train(data)`")
            self.sink.error("DAGC111", f"`{steps.name}.next` is Metaflow's transition; dagc reads the order "
                            "from the data flow", info.source.span(func), hint=hint)
            raise ExtractError
        what = "not a task" if attr in steps.methods else "not defined"
        tasks = ", ".join(steps.members) or "none"
        self.sink.error("DAGC111" if attr in steps.methods else "DAGC131",
                        f"`{steps.name}.{attr}` is {what} in class `{steps.name}`", info.source.span(func),
                        hint=f"decorate the method with @dagc.task and @staticmethod; steps of `{steps.name}`: "
                        f"{tasks}")
        raise ExtractError

    def _call(self, call: ast.Call, scope: Scope, info: ModuleInfo, n_outputs: int) -> Value:
        callee = self._callee(call.func, scope, info)
        if isinstance(callee, Callee) and isinstance(callee.symbol, TaskDef):
            return self._task_call(call, callee.symbol, scope, info, n_outputs)
        if isinstance(callee, Callee) and isinstance(callee.symbol, PipelineDef):
            return self._inline_pipeline(call, callee.symbol, scope, info)
        if isinstance(callee, ClassValue) and not callee.instance and callee.steps.members:
            return self._flow_instance(call, callee, info)
        if isinstance(callee, DagcFunction) and callee.name == "trips":
            self.sink.error("DAGC135", "dagc.trips is a hint for the items of a `for` loop, not a value",
                            info.source.span(call), hint="write `for epoch in dagc.trips(range(40), expected=12):`")
            raise ExtractError
        if isinstance(callee, DagcFunction) and callee.name == "each":
            self.sink.error("DAGC170", "dagc.each wraps the items of a `for` loop or comprehension over a task "
                            "result, not a value", info.source.span(call),
                            hint="write `for shard in dagc.each(shards, expected=64):`")
            raise ExtractError
        if isinstance(callee, DagcFunction):
            return self._after_call(call, scope, info, n_outputs)
        if self._is_glue_call(call, scope) and self._needs_glue(call, scope, info):
            return self._glue(call, scope, info)  # `len(xs)`, `dict(n_layer=n)`, `str(loss)` on task results
        # not a task: it may still be a compile-time builtin on constants (range, len, …)
        args = [self._eval(a.value if isinstance(a, ast.Starred) else a, scope, info) for a in call.args]
        kwargs = [self._eval(k.value, scope, info) for k in call.keywords]
        runtime = [v for v in args + kwargs if _is_task_result(v)]
        what = callee.description if isinstance(callee, External) else f"`{ast.unparse(call.func)}`"
        if runtime or (isinstance(call.func, ast.Attribute) and self._needs_glue(call.func.value, scope, info)):
            chain = kfp_chain(call)
            if chain is not None:
                step = chain[0].func.value  # type: ignore[attr-defined]
                task = step.func.id if isinstance(step, ast.Call) and isinstance(step.func, ast.Name) else None
                methods = ", ".join(f"`.{c.func.attr}()`" for c in chain)  # type: ignore[attr-defined]
                self.sink.error("DAGC107", f"{methods} on a task result {'is' if len(chain) == 1 else 'are'} "
                                "Kubeflow's form; a dagc task result is the task's return value, not a step object",
                                info.source.span(call), hint=kfp_hint(chain, task))
                raise ExtractError
            self.sink.error("DAGC107", f"{what} is not a task, but receives a task result",
                            info.source.span(call),
                            hint="only tasks can run on task results: decorate the function with @dagc.task, "
                            "or call it inside a task")
            raise ExtractError
        if isinstance(callee, (External, ClassValue)):  # a builtin, os.path, a dataclass config on constants
            try:
                return Static(eval_static(call, self._static_lookup(scope, info)))
            except _Poisoned:
                raise ExtractError from None
            except NotStatic as exc:
                if self._compile_time_callable(call.func, scope, info):  # a config or os.path call that fails
                    self.sink.error("DAGC109", f"`{ast.unparse(call)}` cannot be evaluated at compile time: "
                                    f"{exc.reason}", info.source.span(exc.node),
                                    hint="fix the arguments as Python would need them")
                    raise ExtractError from None
                if "only a few pure functions" in exc.reason:  # `os.getcwd()`, `os.environ[...]`, `math.fsum`
                    self.sink.error("DAGC109", exc.reason, info.source.span(exc.node),
                                    hint="what depends on the machine, the environment or the clock is not known "
                                    "at compile time: compute it inside a task, or make it a pipeline parameter "
                                    "(os.path.join/dirname/basename and math functions of constants fold)")
                    raise ExtractError from None
            except (_RuntimeUse, RecursionError):
                pass
        if isinstance(callee, External) and callee.description.startswith("class "):
            hint = ("build the object inside the task that uses it (a task may also return it, to be passed on), "
                    "giving that task the settings it needs as arguments")
        else:
            hint = "decorate it with @dagc.task to make it a step of the graph, or call it inside a task"
        self.sink.error("DAGC111", f"{what} is not a task; a pipeline body can only call tasks and pipelines",
                        info.source.span(call), hint=hint)
        raise ExtractError

    def _flow_instance(self, call: ast.Call, flow: ClassValue, info: ModuleInfo) -> ClassValue:
        """`Flow()`: an instance of a class of steps, whose pipeline methods run as Python calls them
        (`stats = StatsFlow().run()` inside another pipeline)."""
        name = flow.steps.name
        if call.args or call.keywords or flow.steps.has_init:
            why = "arguments" if call.args or call.keywords else "an `__init__`"
            self.sink.error("DAGC111", f"`{name}` is built with {why}, which a pipeline cannot run",
                            info.source.span(call),
                            hint=f"pass its settings to its pipeline instead: `{name}().run(min_count=5)` on a class "
                            "without `__init__`, whose pipeline takes them as parameters")
            raise ExtractError
        return ClassValue(flow.steps, flow.info, instance=True)

    def _compile_time_callable(self, func: ast.expr, scope: Scope, info: ModuleInfo) -> bool:

        try:
            return isinstance(eval_static(func, self._static_lookup(scope, info)), (ConfigClass, StaticFunction))
        except (NotStatic, _RuntimeUse, RecursionError):
            return False

    def _argument(self, expr: ast.expr, scope: Scope, info: ModuleInfo) -> Value:
        """A task argument; a config instance passed whole is built at run time by its class."""
        if type(expr) is ast.Name:  # the common case: a task result bound to a name
            found = scope.env.get(expr.id)
            if type(found) is Dyn:
                return found
        value = self._eval(expr, scope, info)
        if isinstance(value, Static) and isinstance(value.value, ConfigValue):
            return self._build_config(value.value, expr, scope, info)
        if isinstance(value, Static) and isinstance(value.value, (tuple, list)) and any(
                isinstance(v, ConfigValue) for v in value.value):  # a grid of configs: each built by its class
            items = [self._build_config(v, expr, scope, info) if isinstance(v, ConfigValue) else Static(v)
                     for v in value.value]
            return self._sequence(items, isinstance(value.value, list), expr, info)
        return value

    def _build_config(self, config: Any, expr: ast.expr, scope: Scope, info: ModuleInfo) -> Value:
        """One node per instance (as in Python, every use shares the object): `module.Cls(**given)`."""

        found = self._configs.get(id(config))
        if found is not None:
            return found[1]
        if id(config) in self._module_configs and not config.cls.frozen:
            # tasks would change their own copy, while plain Python changes the module's object
            self.sink.error("DAGC109", f"a module-level `{config.cls.name}` that is not frozen cannot be passed to "
                            "a task whole: a task that changes it would change a copy", info.source.span(expr),
                            hint=f"declare it @dataclass(frozen=True), or build it in the pipeline "
                            f"(`cfg = {config.cls.name}(...)`) and pass that")
            raise ExtractError
        try:
            kwargs = tuple((k, operand_from_python(v)) for k, v in config.given)
        except TypeError:
            self.sink.error("DAGC109", f"`{config.cls.name}` is built from values that are not literals",
                            info.source.span(expr), hint="build it with literal field values")
            raise ExtractError from None
        name = self._node_name(scope.prefix + config.cls.name + scope.suffix)
        # frozen: nothing can change it, so calls may be merged; otherwise tasks that change it are ordered
        node = Node(name, "task", config.cls.target, (), kwargs, (name,), (config.cls.name,),
                    TaskOptions(pure=config.cls.frozen), info.source.span(expr))
        self._add_node(node)
        self._modules_used.add(config.cls.module)
        value = Dyn(Ref(name))
        self._configs[id(config)] = (config, value)
        self._config_nodes[name] = config
        return value

    def _is_glue_call(self, call: ast.Call, scope: Scope) -> bool:
        """A call of an unshadowed builtin that glue may compute: no `*args`/`**kwargs`."""
        func = call.func
        return (isinstance(func, ast.Name) and func.id in GLUE_CALLS and func.id not in scope.env
                and func.id not in scope.assigned_later and self.project.lookup(scope.pipeline.info, func.id) is None
                and not any(isinstance(a, ast.Starred) for a in call.args)
                and all(k.arg is not None for k in call.keywords))

    def _after_call(self, call: ast.Call, scope: Scope, info: ModuleInfo, n_outputs: int) -> Value:
        """`dagc.after(task_call(...), *prerequisites)`: run the call after the prerequisites' tasks."""
        if not call.args or call.keywords or not isinstance(call.args[0], ast.Call) or any(
                isinstance(a, ast.Starred) for a in call.args):
            self.sink.error("DAGC128", "dagc.after takes a task call and then the results it must wait for",
                            info.source.span(call), hint="write `x = dagc.after(train(data), prepared, downloaded)`")
            raise ExtractError
        deps: list[str] = []
        for arg in call.args[1:]:
            value = self._eval(arg, scope, info)
            refs = list(iter_refs(_to_operand(value))) if _is_runtime(value) else []
            producers = [self._producer[r] for r in refs if r in self._producer]
            if not producers:
                self.sink.error("DAGC128", "a prerequisite of dagc.after must be a task result",
                                info.source.span(arg), hint="pass the result of the task that must finish first")
                raise ExtractError
            deps.extend(self._visible(p) for p in producers)
        self._extra_deps = list(dict.fromkeys(deps))
        try:
            return self._eval(call.args[0], scope, info, n_outputs=n_outputs)
        finally:
            self._extra_deps = []

    def _take_extra_deps(self) -> list[str]:
        deps, self._extra_deps = self._extra_deps, []
        return deps

    def _bind(self, call: ast.Call, task: TaskDef, scope: Scope, info: ModuleInfo,
              ) -> tuple[list[Operand], list[tuple[str, Operand]], dict[str, Operand]]:
        sig = task.sig
        shape = self._shapes.get(id(sig))
        if shape is None:
            shape = self._shapes[id(sig)] = (
                [p for p in sig.params if p.kind in ("positional_only", "positional")],
                any(p.kind == "var_positional" for p in sig.params),
                any(p.kind == "var_keyword" for p in sig.params),
                {p.name for p in sig.params if p.kind in ("positional", "keyword_only")},
                {p.name: p for p in sig.params},
                [p for p in sig.params if p.kind in ("positional_only", "positional", "keyword_only")
                 and p.default is None],
            )
        positional, var_pos, var_kw, keywordable, by_name, required = shape
        self._bound_exprs = {}
        bound: set[str] = set()
        args: list[Operand] = []
        kwargs: list[tuple[str, Operand]] = []
        named: dict[str, Operand] = {}
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
                                info.source.span(arg), hint=f"signature: {task.name}({sig.display()})",
                                notes=[Note(f"`{task.name}` is defined here", name_span(task.source, task.node))])
                failed = True
                continue
            param = positional[index] if index < len(positional) else None
            if param is not None:
                bound.add(param.name)
            try:
                operand = _to_operand(self._argument(arg, scope, info))
            except ExtractError:
                failed = True
                continue
            except TypeError:
                self._not_a_value(arg, info)
                raise
            args.append(operand)
            if param is not None:
                named[param.name] = operand
                self._bound_exprs[param.name] = arg
                self._check_type(operand, param, task, arg, info)
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
                                hint=f"{hint}signature: {task.name}({sig.display()})",
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
                operand = _to_operand(self._argument(kw.value, scope, info))
            except ExtractError:
                failed = True
                continue
            except TypeError:
                self._not_a_value(kw.value, info)
                raise
            kwargs.append((kw.arg, operand))
            named[kw.arg] = operand
            self._bound_exprs[kw.arg] = kw.value
            if kw.arg in by_name:
                self._check_type(operand, by_name[kw.arg], task, kw.value, info)
        missing = [p.name for p in required if p.name not in bound]
        if missing:
            names = ", ".join(f"`{m}`" for m in missing)
            self.sink.error("DAGC104", f"task `{task.name}` is missing argument{'s' if len(missing) > 1 else ''} "
                            f"{names}", info.source.span(call),
                            hint=f"signature: {task.name}({sig.display()})",
                            notes=[Note(f"`{task.name}` is defined here", name_span(task.source, task.node))])
            failed = True
        if failed:
            raise ExtractError
        return args, kwargs, named

    def _check_type(self, operand: Operand, param: Any, task: TaskDef, arg: ast.expr, info: ModuleInfo) -> None:
        expected = param.annotation
        if expected is None:
            return
        checks: list[tuple[str, str]] = []
        if isinstance(operand, Ref) and operand.name in self._types:
            checks.append((operand.name, expected))
        elif isinstance(operand, Seq) and operand.kind == "list":
            inner = item_type(expected)
            if inner is not None:
                checks.extend((item.name, inner) for item in operand.items
                              if isinstance(item, Ref) and item.name in self._types)
        for value, want in checks:
            produced, where = self._types[value]
            if compatible(produced, want):
                continue
            ann = param.node.annotation
            notes = []
            if where is not None:
                notes.append(Note(f"`%{value}` is declared `{produced}` here", where))
            notes.append(Note(f"parameter `{param.name}` of `{task.name}` is declared `{expected}` here",
                              task.source.span(ann) if ann is not None else name_span(task.source, task.node)))
            self.sink.error("DAGC140", f"type mismatch: argument `{param.name}` of task `{task.name}` receives "
                            f"`{produced}`, but expects `{expected}`", info.source.span(arg),
                            hint=f"{describe_mismatch(produced, want)}; fix one of the annotations, "
                            "or convert the value in a task", notes=notes)
            return

    def _resolve_paths(self, templates: tuple[str, ...], task: TaskDef, named: dict[str, Operand],
                       call: ast.Call, info: ModuleInfo, option: str) -> tuple[str, ...] | None:
        out: list[str] = []
        assert self.graph is not None
        for template in templates:
            def sub(match: re.Match[str], template: str = template) -> str:
                key = match.group(1)
                operand = named.get(key)
                if operand is None:
                    param = next((p for p in task.sig.params if p.name == key), None)
                    if param is None or param.default is None:
                        raise _PathError(f"`{{{key}}}` in {option}={template!r} names no parameter of "
                                         f"`{task.name}` with a value")
                    owner = self.project.module(task.module)
                    try:
                        value = static_option_value(param.default, owner, self.project) if owner else None
                    except NotStatic:
                        raise _PathError(f"the default of `{key}` is not a constant") from None
                    return str(value)
                if isinstance(operand, Const):
                    return str(operand.value)
                if isinstance(operand, Ref) and self.graph.is_param(operand.name):
                    const = self.graph.param(operand.name).value
                    if isinstance(const, Const):
                        return str(const.value)
                raise _PathError(f"`{{{key}}}` in {option}={template!r} is bound to a value known only at run "
                                 "time")

            try:
                path = _FILE_PLACEHOLDER.sub(sub, template)
            except _PathError as exc:
                self.sink.error("DAGC125", f"cannot resolve the path of task `{task.name}`: {exc}",
                                info.source.span(call),
                                hint="paths are literal strings, or `{name}` placeholders for parameters of the "
                                "task that receive literals or pipeline parameters")
                return None
            out.append(os.path.normpath(path))
        return tuple(out)

    def _task_call(self, call: ast.Call, task: TaskDef, scope: Scope, info: ModuleInfo, n_outputs: int) -> Value:
        extra = self._take_extra_deps()
        args, kwargs, named = self._bind(call, task, scope, info)
        name = self._node_name(scope.prefix + task.name + scope.suffix)
        span = info.source.span(call)
        if n_outputs == 1:  # (the common case, without a generator)
            outputs: tuple[str, ...] = (name,)
            types: tuple[str | None, ...] = (task.returns,)
        else:
            outputs = tuple(output_name(name, i, n_outputs) for i in range(n_outputs))
            types = _split_types(task.returns, n_outputs)
        deps: dict[str, None] = {}
        for after in task.after:
            for dep in self._nodes_by_task.get(after, ()):
                deps.setdefault(self._visible(dep), None)
        for dep in extra:
            deps.setdefault(dep, None)
        options = task.options
        if options.reads or options.writes:
            reads = self._resolve_paths(options.reads, task, named, call, info, "reads")
            writes = self._resolve_paths(options.writes, task, named, call, info, "writes")
            if reads is None or writes is None:
                raise ExtractError
            options = dataclasses.replace(options, reads=reads, writes=writes)
            for path in reads:
                writer = self._writers.get(path)
                if writer is not None:
                    deps.setdefault(self._visible(writer[0]), None)
                    self._readers.setdefault(path, []).append(name)
                else:
                    self._reads.append((path, name, span))
            for path in writes:
                if path in self._writers:
                    first, where = self._writers[path]
                    if where != span:
                        self.sink.error("DAGC126", f"`{path}` is written by two tasks: `{first}` and `{name}`",
                                        span, notes=[Note(f"`{first}` writes it here", where)],
                                        hint="give each task its own output path; one call in a loop "
                                        "(a checkpoint saved every epoch) may overwrite its own file")
                        continue
                    # the same call again, in an unrolled loop: a checkpoint overwritten in program order,
                    # after the previous write and after every task that read that version
                    deps.setdefault(self._visible(first), None)
                    for reader in self._readers.pop(path, []):
                        if reader != name:
                            deps.setdefault(self._visible(reader), None)
                self._writers[path] = (name, span)
        node = Node(name, "task", task.target, tuple(args), tuple(kwargs), outputs, types, options,
                    span, tuple(deps))
        self._record_effects(node, task, named, scope, info)
        self._last_task = node
        if scope.inlined:
            node.attrs["frontend.scope"] = scope.inlined
        self._add_node(node)
        self._modules_used.add(task.module)
        self._nodes_by_task.setdefault(task.name, []).append(name)
        if task.returns is not None:
            key = id(task)
            if key not in self._return_spans:
                self._return_spans[key] = (task.source.span(task.node.returns)
                                           if task.node.returns is not None else None)
            where = self._return_spans[key]
            for value, t in zip(outputs, types):
                if t is not None:
                    self._types[value] = (t, where)
        if n_outputs == 1:
            return Dyn(Ref(outputs[0]))
        return tuple(Dyn(Ref(o)) for o in outputs)

    # ---- effects ----------------------------------------------------------------------------------
    def _record_effects(self, node: Node, task: TaskDef, named: dict[str, Operand], scope: Scope,
                        info: ModuleInfo) -> None:
        """Write what the call may do into `node.attrs` (see dagc.ir.effects), after the task's
        declarations; a list or dict built in the pipeline that the task changes becomes a value."""
        options = task.options
        summary = self._task_summaries.get(id(task))
        if summary is None:
            summary = self._task_summaries[id(task)] = self._summarize_effects(task)
        effects, attrs, mutable = summary
        if "code.reaches" in attrs:  # their files, in graph.modules
            self._modules_used.update(name.partition(":")[0] for name in attrs["code.reaches"])
        self._bound_args[node.name] = named  # for hints that name the parameters (`readonly=[...]`)
        # (a copy per node: passes may edit one node's attributes)
        for key, value in attrs.items():
            node.attrs[key] = list(value) if isinstance(value, list) else value
            if key == "effects.files":
                paths = self._static_paths(task, effects, named)
                if paths is not None:  # every file it touches is named at this call: ordered by path
                    node.attrs["effects.paths"] = paths
        if options.pure:
            return
        if effects.rng is not None:
            self._warn_rng(task, effects, node)
            self._pipeline_seeds = self._pipeline_seeds or effects.seeds
        if effects.globals_written:
            where = task.source.display
            for gname, evidence in effects.globals_written.items():
                self._global_writes.setdefault(gname, (evidence.reason, SourceSpan(where, evidence.line,
                                                                                   evidence.col + 1)))
        mutated: dict[str, None] = {}
        for param, spread in mutable:
            if spread:  # *args / **kwargs: any argument not bound to a named parameter
                bound = set(named.values())
                operands = [o for o in node.operands() if o not in bound]
            elif param in named:
                operands = [self._materialize(param, named[param], node, scope, info)]
            else:
                continue  # a default value: the task's own object
            for operand in operands:
                mutated.update(dict.fromkeys(iter_refs(operand)))
        if mutated:
            node.attrs["effects.mutates"] = list(mutated)
            self._config_changed(mutated, scope)

    def _summarize_effects(self, task: TaskDef) -> tuple[Any, dict[str, Any], list[tuple[str, bool]]]:
        """What every call of `task` shares: its effects, the node attributes they give, and the
        parameters it may change (with whether each is `*args`/`**kwargs`). Checks its declarations once."""
        options = task.options
        effects = self._effects.of_task(task)
        self._check_declarations(task, effects)
        attrs: dict[str, Any] = {}
        reaches = sorted(effects.reaches - {task.target})
        if reaches:  # the code its run-time fingerprint covers besides its own (backends/fingerprint.py)
            attrs["code.reaches"] = reaches
        if options.pure:
            return effects, attrs, []
        where = task.source.display
        if options.side_effects:
            attrs["effects.io"] = "declared side_effects=True"
        elif effects.world is not None:
            attrs["effects.io"] = f"{effects.world.reason} ({where}:{effects.world.line})"
        if effects.output is not None:
            attrs["effects.output"] = f"{effects.output.reason} ({where}:{effects.output.line})"
        if effects.rng is not None:
            attrs["effects.rng"] = f"{effects.rng.reason} ({where}:{effects.rng.line})"
            if effects.seeds:
                attrs["effects.seeded"] = True
        if effects.file_write is not None or effects.file_read is not None:
            attrs["effects.files"] = "write" if effects.file_write is not None else "read"
        if effects.globals_written:
            attrs["effects.writes"] = sorted(effects.globals_written)
        if effects.globals_read:
            attrs["effects.reads"] = sorted(effects.globals_read)
        spread = {p.name for p in task.sig.params if p.kind in ("var_positional", "var_keyword")}
        mutable = [(param, param in spread)
                   for param in dict.fromkeys([*effects.mutates, *options.mutates])  # read in the body, and declared
                   if param not in options.readonly]
        return effects, attrs, mutable

    @staticmethod
    def _static_paths(task: TaskDef, effects: Any, named: dict[str, Operand]) -> dict[str, list[str]] | None:
        """The files a call reads and writes, when its body names each by a literal or a parameter that
        this call binds to a literal string (a default included); None when any is unknown."""
        from dagc.ir.types import Const

        if not effects.file_paths_known:
            return None
        defaults = {p.name: p.default for p in task.sig.params}
        out: dict[str, list[str]] = {}
        for mode in ("read", "write"):
            found: list[str] = []
            for term in sorted(effects.file_paths[mode]):
                kind, _, value = term.partition(":")
                if kind == "param":
                    operand = named.get(value)
                    default = defaults.get(value)
                    if isinstance(operand, Const) and isinstance(operand.value, str):
                        value = operand.value
                    elif operand is None and isinstance(default, ast.Constant) and isinstance(default.value, str):
                        value = default.value
                    else:
                        return None
                found.append(os.path.normpath(value))
            if found:
                out[mode] = sorted(set(found))
        return out

    def _config_changed(self, refs: dict[str, None], scope: Scope) -> None:
        """A task may change a config instance: from now on its fields are read from the object at
        run time (glue), not folded from the values it was built with."""
        for ref in refs:
            config = self._config_nodes.get(self._producer.get(ref, ref))
            if config is None:
                continue
            built = self._configs[id(config)][1]
            for key, bound in list(scope.env.items()):
                if isinstance(bound, Static) and bound.value is config:
                    scope.env[key] = built
    def _check_declarations(self, task: TaskDef, effects: Any) -> None:
        """`pure=True` and `readonly=[...]` against what the body shows (once per task)."""
        key = (id(task), "declared")
        if key in self._effect_warned:
            return
        self._effect_warned.add(key)
        options = task.options
        display = task.source.display

        def at(evidence: Any) -> SourceSpan:
            return SourceSpan(display, evidence.line, evidence.col + 1)

        task_span = name_span(task.source, task.node)
        if options.pure and options.side_effects:
            self.sink.error("DAGC155", f"task `{task.name}` is declared both pure=True and side_effects=True",
                            task_span, hint="a pure task has no effects; keep one of the two")
        params = set(task.sig.names()) | {p.name for p in task.sig.params}
        for name in options.mutates:
            if name not in params:
                self.sink.error("DAGC121", f"mutates names `{name}`, which is not a parameter of `{task.name}`",
                                task_span, hint=f"parameters: {', '.join(task.sig.names()) or 'none'}")
        for name in options.readonly:
            if name not in params:
                self.sink.error("DAGC121", f"readonly names `{name}`, which is not a parameter of `{task.name}`",
                                task_span, hint=f"parameters: {', '.join(task.sig.names()) or 'none'}")
            elif name in effects.definite:
                evidence = effects.definite[name]
                self.sink.warning("DAGC155", f"`{name}` is declared readonly, but `{task.name}` {evidence.reason}",
                                  at(evidence), hint=f"if this changes `{name}`, remove it from readonly=[...]; "
                                  "dagc trusts the declaration and may run this task on a copy")
        if options.pure:
            found = next(iter(effects.definite.items()), None)
            if found is not None:
                self.sink.warning("DAGC155", f"task `{task.name}` is declared pure=True, but it {found[1].reason} "
                                  f"(parameter `{found[0]}`)", at(found[1]),
                                  hint="a pure task may be merged, removed or run on a copy; drop pure=True "
                                  "(or list the parameters it only reads in readonly=[...])")
            elif effects.globals_written:
                name, evidence = next(iter(effects.globals_written.items()))
                self.sink.warning("DAGC155", f"task `{task.name}` is declared pure=True, but it {evidence.reason}",
                                  at(evidence), hint="a pure task may be merged or removed; drop pure=True")

    def _materialize(self, param: str, operand: Operand, node: Node, scope: Scope, info: ModuleInfo) -> Operand:
        """A list or dict bound to a name in the pipeline and changed by a task is one object in plain
        Python, shared by every later use: make it a value (a glue node) so that it is one here too."""
        expr = self._bound_exprs.get(param)
        if isinstance(operand, Ref) or not isinstance(operand, (Seq, Map)):
            return operand
        if isinstance(operand, Seq) and operand.kind == "tuple":
            return operand  # a tuple cannot change; its items are marked one by one
        if not isinstance(expr, ast.Name):
            if expr is not None and not isinstance(expr, _FRESH_OBJECT_EXPRS):
                self._shared_pipeline_object(expr, node, info, "is part of an object built in the pipeline")
            return operand  # a list or dict written at the call: nobody else sees the change
        value = scope.env.get(expr.id, self._name(expr, scope, info))
        if isinstance(value, Static):
            module_object = next((self._module_objects[i][0] for i in _mutable_ids(value.value)
                                  if i in self._module_objects), None)
            if module_object is not None:
                self.sink.error("DAGC154", f"`{expr.id}` is module-level `{module_object}`, and `{node.name}` changes "
                                "it in place: the pipeline passes module-level values as copies made at compile time",
                                info.source.span(expr),
                                hint="have the task change the module-level name itself (the task reads it and dagc "
                                "keeps every task that touches it in one process), or build the object in a task "
                                "and pass that task's result")
                raise ExtractError
        holder = self._other_holder(value, scope)
        if holder is not None:
            self._shared_pipeline_object(expr, node, info, f"shares a list or dict with {holder}")
        if self._blocks:
            self.sink.error("DAGC154", f"`{expr.id}` is built in the pipeline and changed in place by "
                            f"`{node.name}` inside a run-time loop or branch", info.source.span(expr),
                            hint=f"build `{expr.id}` in a task (e.g. `{expr.id} = new_list()`), or have the task "
                            "return the new value")
            raise ExtractError
        name = self._node_name(scope.prefix + expr.id + scope.suffix)
        glue = Node(name, "glue", "_0", (operand,), (), (name,), ("list" if isinstance(operand, Seq) else "dict",),
                    span=info.source.span(expr))
        self._add_node(glue)
        for key, bound in list(scope.env.items()):
            if bound is value:
                scope.env[key] = Dyn(Ref(name))
        node.args = tuple(Ref(name) if a == operand and a is operand else a for a in node.args)
        node.kwargs = tuple((k, Ref(name) if v is operand else v) for k, v in node.kwargs)
        return Ref(name)

    def _shared_pipeline_object(self, expr: ast.expr, node: Node, info: ModuleInfo, how: str) -> None:
        """A task changes a list or dict that other pipeline names reach too: dagc tracks a changed
        object as one value, so the other holders would keep the unchanged copy. Refuse it."""
        text = ast.unparse(expr)
        self.sink.error("DAGC154", f"`{text}` {how}, and `{node.name}` changes it in place",
                        info.source.span(expr),
                        hint="build the object in a task (e.g. `state = new_state()` returning the dict) and pass "
                        "that task's result, so that every use sees the change; or pass a name bound to a list "
                        "or dict that no other list or dict of the pipeline holds")
        raise ExtractError

    def _other_holder(self, value: Value | None, scope: Scope) -> str | None:
        """The name of another pipeline binding that shares a list, dict or set with `value` (by identity:
        compile-time containers are real Python objects here), or None."""
        if not isinstance(value, Static):
            return None
        mine = _mutable_ids(value.value)
        if not mine:
            return None
        for key, bound in scope.env.items():
            if bound is value:
                continue
            if isinstance(bound, Static) and mine & _mutable_ids(bound.value):
                return f"`{key}`"
            if isinstance(bound, Dyn) and mine & self._captured.get(id(bound.operand), (None, set()))[1]:
                return f"`{key}`"
        return None

    def _warn_rng(self, task: TaskDef, effects: Any, node: Node) -> None:
        key = (id(task), "rng")
        if effects.seeds or key in self._effect_warned or self._pipeline_seeds:
            # (a task of the pipeline seeded the generator earlier: the draws follow it, in order, as in plain
            # Python; the seed is the user's, and nothing here would make the numbers differ)
            return
        self._effect_warned.add(key)
        evidence = effects.rng
        self.sink.warning(
            "DAGC150", f"task `{task.name}` draws from the global random number generator without seeding it",
            node.span,
            notes=[Note(evidence.reason, SourceSpan(task.source.display, evidence.line, evidence.col + 1))],
            hint="its result depends on the draws made before it in the same process; dagc keeps plain "
            "Python's order by running every such task in one process, one after another. To make it "
            "independent and free to run anywhere, seed inside the task (`torch.manual_seed(seed)`) or "
            "use a generator (`torch.Generator().manual_seed(seed)`, `random.Random(seed)`); "
            "declare `pure=True` if the draws do not affect the result")

    def _check_discarded(self, call: ast.expr, info: ModuleInfo) -> None:
        """A task call used as a statement: kept when it has effects (the common case: it updates its
        arguments), else it computes a value nobody reads, which `dce` removes; say so."""
        from dagc.ir.effects import has_effects

        node = self._last_task
        if node is None or not isinstance(call, ast.Call) or has_effects(node):
            return  # (the common case, checked before the span: computing it costs more)
        if node.attrs.get("effects.seeded"):
            return  # it seeds the generator: kept when a later task draws from it (dce says DAGC152 if not)
        if node.span != info.source.span(call) or (id(call), "discarded") in self._effect_warned:
            return
        self._effect_warned.add((id(call), "discarded"))  # once per call site, however often it unrolls
        why = "it is declared pure=True" if node.options.pure else "it changes none of its arguments and " \
              "has no other effect"
        self.sink.warning("DAGC151", f"the result of `{node.name}` is discarded and {why}: `dce` removes this call",
                          node.span, hint="use its result, or mark the task side_effects=True to run it anyway")

    def _check_module_reads(self, graph: Graph) -> None:
        """The pipeline body reads module-level values at compile time; a task that changes one at run
        time would make plain Python see a different value (or a changed object) there."""
        if not self._module_reads:
            return
        from dagc.ir.core import region_bodies

        writers: dict[str, str] = {}
        pending = list(graph)
        while pending:
            node = pending.pop(0)
            for name in node.attrs.get("effects.writes") or ():
                writers.setdefault(name, node.name)
            for body in region_bodies(node).values():
                pending.extend(body)
        reads = {name: use_info.source.span(use) for name, (use, use_info) in self._module_reads.items()
                 if name in writers}
        for name, span in sorted(reads.items(), key=lambda item: (item[1].line, item[1].col)):
            if name in writers:
                short = name.rpartition(".")[2]
                self.sink.error("DAGC154", f"the pipeline reads module-level `{short}`, which task `{writers[name]}` "
                                "changes at run time; dagc reads it when compiling", span,
                                hint=f"read it in a task and use that task's result (e.g. `def current() -> list: "
                                f"return list({short})` decorated with @dagc.task)")

    def _explain_shared_globals(self, graph: Graph) -> None:
        """Say, once per module-level object, that tasks touching it run in one process and in order
        (the data flow alone would leave them free), at the task that changes it, with the fix."""
        from dagc.ir.effects import state_groups

        if not self._global_writes:
            return  # no task changes a module-level object (the common case: no state analysis to run)

        for group in state_groups(graph):
            names = [c[len("global:"):] for c in group.cells if c.startswith("global:")]
            calls = list(dict.fromkeys(graph.node(n).target.rpartition(":")[2] for n in group.nodes
                                       if graph.node(n).op == "task" and graph.node(n).target))
            if not names or len(calls) < 2 and len(group.nodes) < 2:
                continue
            short = names[0].rpartition(".")[2]
            writer = next((graph.node(n) for n in group.nodes if names[0] in (graph.node(n).attrs.get(
                "effects.writes") or ())), graph.node(group.nodes[0]))
            shown = ", ".join(f"`{c}`" for c in calls[:4]) + (f" and {len(calls) - 4} more" if len(calls) > 4 else "")
            self.sink.warning(
                "DAGC157", f"{shown} touch module-level `{short}`, which `{writer.name}` may change: dagc runs "
                f"every task touching it in one process, in program order", writer.span,
                notes=[Note(f"it {self._global_writes[names[0]][0]}", self._global_writes[names[0]][1])]
                if names[0] in self._global_writes else [],
                hint=f"if `{short}` is only read, make the change explicit and local: build it in a task and pass it "
                f"as an argument (a task's `readonly=[...]` then frees its readers), or move the change out of "
                f"`{writer.target.rpartition(':')[2] if writer.target else writer.name}`; printing and logging "
                "through it never count")

    def _check_state(self, graph: Graph) -> None:
        """Each rank of a multi-rank task is its own process: it cannot share objects with other tasks."""
        from dagc.ir.effects import state_groups

        if all(node.options.ranks == 1 for node in graph):
            return
        for group in state_groups(graph):
            for name in group.nodes:
                node = graph.node(name)
                if node.options.ranks > 1:
                    task = node.target.rpartition(":")[2] if node.target else name
                    if group.name == "rng:global":
                        hint = (f"each rank is its own process with its own generator: seed inside `{task}` (e.g. "
                                "`torch.manual_seed(seed)` as its first line) so that every rank starts from the "
                                "same state, or draw from a generator you make there")
                    else:
                        params = [p for p, operand in (self._bound_args.get(name) or {}).items()
                                  if any(True for _ in iter_refs(operand))]
                        readonly = f"`@dagc.task(readonly={params!r})`" if params else "`readonly=[...]`"
                        hint = (f"if `{task}` only reads {', '.join(f'`{p}`' for p in params) or 'its arguments'}, "
                                f"declare it: {readonly}; otherwise each rank is its own process: give it a copy "
                                "taken by a task declared pure=True (e.g. `weights = snapshot(model)` returning "
                                "`copy.deepcopy(model.state_dict())`), and have it return its result (rank 0's "
                                "value) instead of changing an argument")
                    self.sink.error(
                        "DAGC304", f"multi-rank task `{name}` touches state shared with other tasks "
                        f"(`{group.name}`: {group.why})", node.span, hint=hint)

    def _check_reads(self) -> None:
        produced_dirs = {os.path.dirname(p) for p in self._writers}
        for path, reader, span in self._reads:
            writer = self._writers.get(path)
            if writer is not None:
                self.sink.error("DAGC127", f"task `{reader}` reads `{path}` before `{writer[0]}` writes it",
                                span, notes=[Note(f"`{writer[0]}` writes it here", writer[1])],
                                hint="call the writing task first")
            elif os.path.dirname(path) in produced_dirs:
                close = sorted(p for p in self._writers if os.path.dirname(p) == os.path.dirname(path))
                self.sink.error("DAGC127", f"task `{reader}` reads `{path}`, which no task writes",
                                span, hint=f"the pipeline writes into this directory: {', '.join(close[:5])}; "
                                "declare the writer with writes=[...] or fix the path")

    def _inline_pipeline(self, call: ast.Call, pipeline: PipelineDef, scope: Scope, info: ModuleInfo) -> Value:
        if pipeline in self._stack:
            chain = " → ".join(p.name for p in self._stack[self._stack.index(pipeline):] + [pipeline])
            self.sink.error("DAGC113", f"pipeline `{pipeline.name}` calls itself ({chain})", info.source.span(call),
                            hint="pipelines are inlined at compile time and cannot recurse; use a static loop",
                            notes=[Note(f"`{p.name}` is defined here", name_span(p.source, p.node)) for p in self._stack])
            raise ExtractError
        inner_name = self._node_name(scope.prefix + pipeline.name + scope.suffix)
        inner = Scope(pipeline, prefix=inner_name + ".", inlined=inner_name)
        self._bind_receiver(pipeline, inner)
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


class _PathError(Exception):
    pass


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
_UNSET = object()  # a name not bound at all


def _stored_names(stmt: ast.stmt) -> list[str]:
    """Every name `stmt` binds: assignment targets, and the names of nested defs, classes and imports."""
    names: list[str] = []
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.append(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.extend((a.asname or a.name).split(".")[0] for a in n.names if a.name != "*")
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.append(n.name)
    return names


def _const_value(operand: Operand) -> Any:
    from dagc.ir.types import operand_to_python

    return operand_to_python(operand)


def _operand_json(operand: Operand | None) -> Any:
    from dagc.ir.serialize import operand_to_json

    return None if operand is None else operand_to_json(operand)


def _value_of(operand: Operand) -> Value:
    return Dyn(operand) if any(True for _ in iter_refs(operand)) else Static(_const_value(operand))


# builtins that consume a generator argument whole, in order: given the list of its items instead,
# they return the same (`sum(g(k) for k in ks)` is `sum([g(k) for k in ks])`)
_CONSUME_ITERABLE = frozenset({"sum", "min", "max", "sorted", "list", "tuple"})


def _generator_as_list(call: ast.Call, arg: ast.expr) -> ast.expr:
    """`arg` of a glue builtin `call`, a generator expression that it consumes whole made a list
    comprehension (which the pipeline unrolls); any other argument as it is."""
    if isinstance(arg, ast.GeneratorExp) and isinstance(call.func, ast.Name) and call.func.id in _CONSUME_ITERABLE:
        return ast.copy_location(ast.ListComp(arg.elt, arg.generators), arg)
    return arg


def _known_container(value: Value) -> tuple[str, list[Value]] | None:
    """("list"|"tuple"|"dict", items) for a container whose length is known at compile time (dict items
    are (key, value) pairs of Values); None otherwise."""
    if isinstance(value, Static):
        if isinstance(value.value, list):
            return "list", [Static(v) for v in value.value]
        if isinstance(value.value, tuple):
            return "tuple", [Static(v) for v in value.value]
        if isinstance(value.value, dict):
            return "dict", [(Static(k), Static(v)) for k, v in value.value.items()]
        return None
    if isinstance(value, tuple):
        return "tuple", list(value)
    if isinstance(value, Dyn):
        op = value.operand
        if isinstance(op, Seq):
            return op.kind, [_value_of(i) for i in op.items]
        if isinstance(op, Map):
            return "dict", [(_value_of(k), _value_of(v)) for k, v in op.items]
    return None


def _ref_name(operand: Operand) -> str:
    return operand.name if isinstance(operand, Ref) else ""


def _same(a: str | None, b: str | None) -> str | None:
    return a if a == b else None


def _aggregate_effects(node: Node, body: list[Node]) -> None:
    """A region's effects: those of its bodies, on the values it reads from outside (a value carried
    into a loop stands for the outer value it starts from)."""
    from dagc.ir.effects import node_effects

    inner = _region_defined(node) | {o for n in body for o in n.outputs}
    carried = list(node.attrs.get("region.carried") or ())
    start = {c: list(iter_refs(node.args[i])) for i, c in enumerate(carried) if i < len(node.args)}
    if node.op == "map":  # changing an item changes the list it came from
        over = [v for operand in node.args[: node.attrs.get("region.over", 1)] for v in iter_refs(operand)]
        start.update({item: over for item in node.attrs.get("region.items") or ()})
    mutates: dict[str, None] = {}
    writes: dict[str, None] = {}
    reads: dict[str, None] = {}
    io = rng = files = output = None
    seeded = True
    for n in body:
        eff = node_effects(n)
        output = output or eff.output
        files = "write" if "write" in (files, eff.files) else files or eff.files
        seeded = seeded and (eff.seeded or not eff.rng)
        for value in eff.mutates:
            for outer in start.get(value, [value]):
                if outer not in inner:
                    mutates.setdefault(outer, None)
        writes.update(dict.fromkeys(eff.writes))
        reads.update(dict.fromkeys(eff.reads))
        io = io or eff.io
        rng = rng or eff.rng
    for key, value in (("effects.mutates", list(mutates)), ("effects.io", io), ("effects.rng", rng),
                       ("effects.writes", sorted(writes)), ("effects.reads", sorted(reads)),
                       ("effects.seeded", bool(rng) and seeded), ("effects.files", files),
                       ("effects.output", output)):
        if value:
            node.attrs[key] = value


_TRY_STATEMENTS = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)


def _region_defined(node: Node) -> set[str]:
    """Every value defined inside a region node's bodies (recursively), inner block arguments included."""
    from dagc.ir.regions import walk

    out: set[str] = set()
    for inner in walk(node):
        out.update(inner.outputs)
        out.update(inner.attrs.get("region.carried", ()) or ())
        out.update(inner.attrs.get("region.items", ()) or ())
    return out


def _region_node_names(node: Node) -> set[str]:
    from dagc.ir.regions import walk

    return {inner.name for inner in walk(node)}


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


_GLUE_EXPRS = (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Subscript, ast.Attribute, ast.JoinedStr,
               ast.IfExp, ast.Set, ast.SetComp, ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom,
               ast.Starred)
_PY_BUILTINS = frozenset(dir(builtins))
_GLUE_NAMES = {
    ast.UnaryOp: "unary",
    ast.BoolOp: "boolop",
    ast.Compare: "compare",
    ast.Subscript: "getitem",
    ast.Attribute: "getattr",
    ast.JoinedStr: "format",
    ast.IfExp: "select",
}
_BINOP_NAMES = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.Pow: "pow", ast.MatMult: "matmul", ast.BitAnd: "and", ast.BitOr: "or",
    ast.BitXor: "xor", ast.LShift: "lshift", ast.RShift: "rshift",
}


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


# statements a pipeline body does not support (`if`, `for`, `while` and `try` have their own handling)
_STATEMENT_NAMES = {
    ast.AsyncFor: "`async for`",
    ast.With: "`with`",
    ast.AsyncWith: "`async with`",
    ast.Raise: "`raise`",
    ast.Global: "`global`",
    ast.Nonlocal: "`nonlocal`",
    ast.Delete: "`del`",
    ast.Import: "`import`",
    ast.ImportFrom: "`import`",
    ast.FunctionDef: "a nested function",
    ast.AsyncFunctionDef: "a nested function",
    ast.ClassDef: "a class definition",
    ast.AugAssign: "augmented assignment to an attribute or item",
    ast.Assert: "`assert`",
}
_STATEMENT_HINTS = {
    ast.With: "open resources inside the task that uses them",
    ast.Global: "pass the value as a pipeline parameter or return it from a task",
    ast.Nonlocal: "pass the value as a pipeline parameter or return it from a task",
    ast.AugAssign: "bind the new value to a name: `x = add(x, 1)` with a task `add`",
    ast.Import: "import at module level",
    ast.ImportFrom: "import at module level",
    ast.FunctionDef: "define the function at module level (decorate it with @dagc.task to make it a step)",
    ast.AsyncFunctionDef: "define the function at module level (decorate it with @dagc.task to make it a step)",
    ast.ClassDef: "define the class at module level",
    ast.Raise: "raise inside a task; a pipeline body only wires tasks together",
    ast.Delete: "just stop using the name",
    ast.Assert: "check the condition inside a task",
    ast.AsyncFor: "use a plain `for` over a compile-time iterable",
}


def extract_pipeline(project: Project, pipeline: PipelineDef, sink: DiagnosticSink,
                     overrides: dict[str, Any] | None = None) -> Graph:
    return Extractor(project, sink).extract(pipeline, overrides or {})
