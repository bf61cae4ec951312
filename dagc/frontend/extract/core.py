"""The interpreter's core: the entry point, statements, assignment and unpacking, growing lists and dicts,
and inlining a nested pipeline."""

from __future__ import annotations

import ast
from typing import Any

from dagc.diagnostics import Note
from dagc.frontend.arguments import StaticArgs, parsed
from dagc.frontend.extract.context import Component
from dagc.frontend.extract.messages import STATEMENT_HINTS, STATEMENT_NAMES
from dagc.frontend.extract.paths import built_path, path_argument
from dagc.frontend.extract.queries import TRY_STATEMENTS, assigned_names, stored_names
from dagc.frontend.extract.records import Record
from dagc.frontend.extract.returns import lift_returns
from dagc.frontend.extract.values import (
    POISON,
    BreakSignal,
    ClassValue,
    ContinueSignal,
    Dyn,
    ExtractError,
    ParamValue,
    Scope,
    Static,
    Value,
    const_value,
    known_container,
    to_operand,
)
from dagc.frontend.fix_nested import free_names, nested_definition_fix
from dagc.frontend.modules import ModuleInfo, Opaque, PipelineDef
from dagc.frontend.overrides import report_overrides, unknown_setting
from dagc.frontend.seeds import check_main_seeds
from dagc.frontend.source import name_span
from dagc.frontend.static import StaticRange, is_literal_value
from dagc.frontend.typecheck import compatible, type_of_value
from dagc.ir.core import SCRIPT_ARGUMENTS_ATTR, Graph, Param
from dagc.ir.effects import order_by_effects
from dagc.ir.location import SourceSpan
from dagc.ir.types import Const, Ref, Seq, iter_refs, operand_from_python


class Interpreter(Component):
    """Walks a pipeline body statement by statement; the entry point of the extraction."""

    def extract(self, pipeline: PipelineDef, overrides: dict[str, Any]) -> Graph:
        info = pipeline.info
        graph = Graph(
            pipeline.name,
            root=self.cx.project.root_display,
            module=info.name,
            span=info.source.span(pipeline.node),
        )
        if pipeline.priority:  # planning several pipelines together (`dagc plan --together`) reads it
            graph.attrs["pipeline.priority"] = pipeline.priority
        self.cx.graph = graph
        scope = Scope(pipeline, prefix="")
        self._bind_receiver(pipeline, scope)
        for param in pipeline.sig.params:
            span = info.source.span(param.node)
            if param.kind in ("var_positional", "var_keyword"):
                self.cx.sink.error("DAGC132", f"pipeline parameter `*{param.name}` cannot be given at compile time",
                                   span, hint="declare each parameter by name with a default")
                scope.env[param.name] = POISON  # reported once here, not again at each use
                continue
            path_text = path_argument(param.default, info)  # `root: Path = Path("data")`: a path, given as text
            if param.name in overrides:
                value = overrides[param.name]
                given = type_of_value(value)
                as_text = path_text is not None and isinstance(value, str)  # `--param root=data/x.csv`: a path
                if param.annotation is not None and not as_text and not compatible(given, param.annotation):
                    self.cx.sink.error("DAGC005", f"--param {param.name}={value!r} is a `{given}`, but parameter "
                                       f"`{param.name}` is annotated `{param.annotation}`", span,
                                       hint=f"give a value of type `{param.annotation}`; --param values are Python "
                                       "literals (quote a string: --param name='\"text\"')")
                    scope.env[param.name] = POISON  # reported once here, not again at each use
                    continue
            elif param.default is not None:
                try:
                    value = self.cx.exprs.static_value(path_text or param.default, scope, info)
                except ExtractError:
                    scope.env[param.name] = POISON
                    continue
            else:
                self.cx.sink.error("DAGC005", f"pipeline parameter `{param.name}` has no value",
                                   span, hint=f"give it a default, or compile with --param {param.name}=VALUE")
                scope.env[param.name] = POISON
                continue
            if not (is_literal_value(value) or isinstance(value, StaticRange)):
                self.cx.sink.error("DAGC005", f"value of parameter `{param.name}` is not a literal", span)
                scope.env[param.name] = POISON
                continue
            try:
                operand = operand_from_python(value)
            except TypeError:
                self.cx.sink.error("DAGC005", f"value of parameter `{param.name}` is not a literal", span)
                scope.env[param.name] = POISON
                continue
            graph.params.append(Param(param.name, operand, param.annotation, span))
            self.cx.used.add(param.name)
            scope.env[param.name] = ParamValue(param.name, value)
            if path_text is not None and isinstance(value, str):
                scope.env[param.name] = Dyn(built_path(self.cx, param.name, Ref(param.name), span))
        unknown = sorted(set(overrides) - {p.name for p in pipeline.sig.params})
        for name in unknown:
            self.cx.sink.error("DAGC005", f"pipeline `{pipeline.name}` has no parameter `{name}`",
                               name_span(info.source, pipeline.node),
                               hint=f"parameters: {', '.join(pipeline.sig.names()) or 'none'}")
        self.cx.stack.append(pipeline)
        parsers: list = []
        token = parsed.set(parsers)
        try:
            result = self._run_body(scope, info, pipeline.node.body)
        finally:
            parsed.reset(token)
        self.cx.stack.pop()
        if not parsers:  # parsed at a module's top level: only when the pipeline was built from its values
            parsers = self._module_parsers_read()
        if parsers:  # the script's own arguments, parsed at compile time: the program parses them again
            graph.attrs[SCRIPT_ARGUMENTS_ATTR] = parsers[0].spec()
        try:
            graph.returns = to_operand(result) if result is not None else Const(None)
        except TypeError:
            self.cx.sink.error("DAGC109", f"pipeline `{pipeline.name}` returns something that is not a value",
                               name_span(info.source, pipeline.node),
                               hint="return task results, parameters or literals")
            graph.returns = Const(None)
        self.cx.state.check_reads()
        report_overrides(self.cx.project, self.cx.sink, self.cx.folded, pipeline.name)
        order_by_effects(graph)
        self.cx.state.check_state(graph)
        self.cx.state.explain_shared_globals(graph)
        self.cx.state.explain_drawn_globals(graph)
        self.cx.state.explain_joined_state(graph)
        self.cx.state.explain_file_order(graph)
        self.cx.state.check_module_reads(graph)
        check_main_seeds(graph, info, self.cx.sink)
        graph.modules = dict(sorted((m, f) for m, f in self.cx.project.files.items() if self.cx.module_used(m)))
        return graph

    def _module_parsers_read(self) -> list:
        """The argparse parsers whose module-level `args = parser.parse_args()` the pipeline read at compile time
        (a task that reads `args` itself reads it where it runs, from the script's arguments there)."""
        found = []
        for module, name in self.cx.folded:
            info = self.cx.project.module(module)
            symbol = info.symbols.get(name) if info is not None else None
            value = getattr(symbol, "value", None)
            if isinstance(value, StaticArgs) and value.parser not in found:
                found.append(value.parser)
        return found

    def run_time_setting(self, name: str, symbol: Opaque, info: ModuleInfo, span: SourceSpan | None = None) -> None:
        """A module value dagc cannot know (read from the command line, a config the module changes)."""
        found = unknown_setting(name, symbol, info, self.cx.graph.name if self.cx.graph else "p")
        if found is not None:
            message, hint, notes = found
            self.cx.sink.error("DAGC109", message, span or info.source.span(symbol.node), hint=hint, notes=notes)
            raise ExtractError

    def _bind_receiver(self, pipeline: PipelineDef, scope: Scope) -> None:
        """`self`/`cls` of a pipeline method stands for its class: `self.train(x)` is `Flow.train(x)`."""
        if pipeline.receiver is None or pipeline.owner is None:
            return
        symbol = pipeline.info.symbols.get(pipeline.owner)
        if isinstance(symbol, Opaque) and symbol.steps is not None:
            instance = not any(isinstance(d, ast.Name) and d.id == "classmethod" for d in pipeline.node.decorator_list)
            scope.env[pipeline.receiver] = ClassValue(symbol.steps, pipeline.info, instance)

    def _run_body(self, scope: Scope, info: ModuleInfo, body: list[ast.stmt]) -> Value | None:
        lifted = self.cx.lifted_bodies.get(id(body))  # (a sub-pipeline called again: rewritten once)
        if lifted is None:  # `if c: return a` / `else: return b`: one return, at the end
            lifted = self.cx.lifted_bodies[id(body)] = (body, lift_returns(body) or body)
        body = lifted[1]
        scope.assigned_later = assigned_names(body)
        returned: Value | None = None
        saw_return = False
        for index, stmt in enumerate(body):
            if saw_return:
                self.cx.sink.warning("DAGC108", "code after `return` is never part of the pipeline",
                                     info.source.span(stmt), hint="remove it, or move it before the return")
                break
            try:
                if isinstance(stmt, ast.Return):
                    saw_return = True
                    returned = self.cx.exprs.eval(stmt.value, scope, info) if stmt.value is not None else Static(None)
                else:
                    self._statement(stmt, scope, info, is_docstring=index == 0)
            except ExtractError:
                # names this statement would have bound are poisoned: their uses fail silently,
                # so one mistake is reported once, not again at every later use
                for target in stored_names(stmt):
                    scope.env[target] = POISON
                continue
            except (BreakSignal, ContinueSignal):
                self.cx.sink.error("DAGC117", "`break`/`continue` outside a loop", info.source.span(stmt))
        if not saw_return and scope.pipeline.dialect is None:  # (a KFP pipeline runs every task it calls)
            self.cx.sink.warning("DAGC115", f"pipeline `{scope.pipeline.name}` returns nothing",
                                 name_span(info.source, scope.pipeline.node),
                                 hint="return the results you want; tasks whose results are unused are removed "
                                 "by `dce` unless marked side_effects=True")
        return returned

    def run_block(self, stmts: list[ast.stmt], scope: Scope, info: ModuleInfo) -> None:
        """Statements nested in a loop or branch. `BreakSignal`/`ContinueSignal` propagate to the unroller."""
        for stmt in stmts:
            try:
                if isinstance(stmt, ast.Return):
                    self.cx.sink.error("DAGC117", "`return` inside a loop or branch is not supported in a pipeline",
                                       info.source.span(stmt),
                                       hint="assign the result to a name and return it at the end of the pipeline")
                    raise ExtractError
                self._statement(stmt, scope, info, is_docstring=False)
            except ExtractError:
                for target in stored_names(stmt):
                    scope.env[target] = POISON

    def _statement(self, stmt: ast.stmt, scope: Scope, info: ModuleInfo, *, is_docstring: bool) -> None:
        if isinstance(stmt, ast.Expr):
            if is_docstring and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                return
            if isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                return  # a string used as a comment
            if self._append(stmt.value, scope, info):
                return
            self.cx.last_task = None
            self.cx.exprs.eval(stmt.value, scope, info)
            self.cx.state.check_discarded(stmt.value, info)
            return
        if isinstance(stmt, ast.Assign):
            if isinstance(stmt.value, ast.Call) and len(stmt.targets) == 1:
                count = self._unpack_count(stmt.targets[0])
                value = self.cx.exprs.eval(stmt.value, scope, info, n_outputs=count)
            else:
                value = self.cx.exprs.eval(stmt.value, scope, info)
            for target in stmt.targets:
                self.assign(target, value, scope, info)
            return
        if isinstance(stmt, ast.AnnAssign):
            if stmt.value is None:
                return
            self.assign(stmt.target, self.cx.exprs.eval(stmt.value, scope, info), scope, info)
            return
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            load = ast.Name(stmt.target.id, ast.Load())
            expr = ast.BinOp(load, stmt.op, stmt.value)
            ast.copy_location(load, stmt.target)
            ast.copy_location(expr, stmt)
            self.assign(stmt.target, self.cx.exprs.eval(expr, scope, info), scope, info)
            return
        if isinstance(stmt, ast.Pass):
            return
        span = info.source.span(stmt)
        if isinstance(stmt, ast.For):
            self.cx.loops.for_loop(stmt, scope, info)
            return
        if isinstance(stmt, ast.While):
            self.cx.loops.while_loop(stmt, scope, info)
            return
        if isinstance(stmt, ast.If):
            self.cx.regions.if_statement(stmt, scope, info)
            return
        if isinstance(stmt, TRY_STATEMENTS):  # `except*` (TryStar) always has handlers: DAGC180
            self.cx.regions.try_statement(stmt, scope, info)  # type: ignore[arg-type]
            return
        if isinstance(stmt, ast.Break):
            if scope.unrolling:
                raise BreakSignal
            self.cx.sink.error("DAGC117", "`break` is supported only as `if <condition>: break` directly in a "
                               "loop body", span, hint="write the early exit as `if <condition>: break`")
            raise ExtractError
        if isinstance(stmt, ast.Continue):
            if scope.unrolling and scope.loop is None:
                raise ContinueSignal
            self.cx.sink.error("DAGC117", "`continue` on a task result is not supported in a pipeline loop", span,
                               hint="put the rest of the loop body under `if not <condition>:` instead")
            raise ExtractError
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self._nested_function(stmt, scope, info)
        construct = STATEMENT_NAMES.get(type(stmt), type(stmt).__name__)
        self.cx.sink.error("DAGC108", f"{construct} is not supported in a pipeline body", span,
                           hint=STATEMENT_HINTS.get(type(stmt), "move this logic into a @dagc.task"))
        raise ExtractError  # the names it binds are poisoned: one diagnostic, not one per later use

    def _nested_function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, scope: Scope, info: ModuleInfo) -> None:
        """A task (or helper) defined inside the pipeline: programs import the user's module and call each task
        by its module-level name, which a function made by running the pipeline's body does not have."""
        from dagc.frontend.scan import decorator_kind

        kind = next((found[0] for d in fn.decorator_list if (found := decorator_kind(info, d))), None)
        what = f"{kind} `{fn.name}`" if kind else f"function `{fn.name}`"
        local = sorted(n for n in free_names(info.source, fn) or () if n in scope.env)  # (as Python resolves them)
        uses = (f"; pass what it uses from `{scope.pipeline.name}` ({', '.join(f'`{n}`' for n in local)}) as "
                "arguments") if local else ""
        decorated = " with its decorator" if fn.decorator_list else ""
        self.cx.sink.error("DAGC108", f"{what} is defined inside pipeline `{scope.pipeline.name}`: dagc's programs "
                           "import your module and call each task by its module-level name, which a function "
                           "defined inside another one does not have", info.source.span(fn),
                           hint=f"move `def {fn.name}`{decorated} to the top level of the module{uses}; the "
                           f"pipeline calls it as before{'' if kind else ' (a plain function called there runs as a task)'}",
                           fix=nested_definition_fix(info.source, fn))
        raise ExtractError

    def _unpack_count(self, target: ast.expr) -> int:
        if isinstance(target, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in target.elts):
            return len(target.elts)
        return 1

    def assign(self, target: ast.expr, value: Value, scope: Scope, info: ModuleInfo) -> None:
        if isinstance(target, ast.Name):
            scope.env[target.id] = value
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            if any(isinstance(e, ast.Starred) for e in target.elts):
                self.cx.sink.error("DAGC112", "starred unpacking is not supported in a pipeline",
                                   info.source.span(target), hint="unpack into a fixed number of names")
                raise ExtractError
            items = self._unpack(value, len(target.elts), target, info)
            for elt, item in zip(target.elts, items):
                self.assign(elt, item, scope, info)
            return
        if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                and known_container(scope.env.get(target.value.id)) is not None
                and not self.cx.glue.needs_glue(target.slice, scope, info)):
            # `scores[name] = evaluate(m)` on a list or dict built in the pipeline: rebind the name
            kind, items = known_container(scope.env[target.value.id])  # type: ignore[misc]
            key = self.cx.exprs.static_value(target.slice, scope, info)
            if kind == "dict":
                pairs = dict(items)
                pairs[Static(key)] = value
                scope.env[target.value.id] = self.cx.exprs.mapping(list(pairs.items()), target, info)
                return
            if isinstance(key, int) and not isinstance(key, bool) and -len(items) <= key < len(items):
                items = list(items)
                items[key] = value
                scope.env[target.value.id] = self.cx.exprs.sequence(items, kind == "list", target, info)
                return
        if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                and self.cx.container_kind(scope.env.get(target.value.id)) == "dict"):
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
            self.cx.sink.error("DAGC109", f"`{receiver}.{target.attr} = …` keeps a value on the flow object "
                               "(Metaflow's artifacts); a dagc step returns its value instead",
                               info.source.span(target),
                               hint=f"bind it to a name and pass it on: `{target.attr} = {receiver}.step(...)`, "
                               f"then `{receiver}.next_step({target.attr})`")
            raise ExtractError
        self.cx.sink.error("DAGC109", f"`{ast.unparse(target)} = …` changes a value in place in a pipeline body, "
                           "where values flow between tasks and are never changed", info.source.span(target),
                           hint="have a task return the updated value and bind it to a new name")
        raise ExtractError

    def _unpack(self, value: Value, count: int, target: ast.expr, info: ModuleInfo) -> list[Value]:
        if isinstance(value, Record):  # a NamedTuple built in a (sub-)pipeline: its fields
            items = list(value.values)
        elif isinstance(value, tuple):
            items = list(value)
        elif isinstance(value, Static) and isinstance(value.value, (list, tuple)):
            items = [Static(v) for v in value.value]
        elif isinstance(value, Dyn) and isinstance(value.operand, Seq):
            items = [Dyn(i) if any(True for _ in iter_refs(i)) else Static(const_value(i))
                     for i in value.operand.items]
        else:
            self.cx.sink.error("DAGC112", f"cannot unpack this value into {count} names",
                               info.source.span(target),
                               hint="unpack the call of a task directly: `a, b = task(...)`")
            raise ExtractError
        if len(items) != count:
            self.cx.sink.error("DAGC112", f"unpacking {len(items)} values into {count} names",
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
        if call.func.attr == "append":  # a run-time list grows by one operand (linear in the appends)
            grown = self.cx.exprs.appended(scope.env.get(name), call.args[0], scope, info)
            if grown is not None:
                scope.env[name] = grown
                return True
        known = known_container(scope.env.get(name))
        if known is None and self.cx.runtime_kind(scope.env.get(name)) == "list":
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
        value = self.cx.exprs.eval(call.args[0], scope, info)
        if call.func.attr == "append":
            items = [*known[1], value]
        else:
            more = known_container(value)
            if more is None or more[0] == "dict":
                self.cx.sink.error("DAGC109", "`.extend()` needs a list whose length is known at compile time",
                                   info.source.span(call.args[0]), hint="append the items one by one")
                raise ExtractError
            items = [*known[1], *more[1]]
        scope.env[name] = self.cx.exprs.sequence(items, True, call, info)
        return True

    def _grown(self, expr: ast.expr, kind: str, scope: Scope, info: ModuleInfo) -> Value:
        """`expr` (`xs + [v]`, `d | {k: v}`) computed at run time: a list or dict of unknown length."""
        value = self.cx.exprs.eval(expr, scope, info)
        if isinstance(value, Dyn) and isinstance(value.operand, Ref):
            self.cx.runtime_kinds[value.operand.name] = kind
        return value

    def inline_pipeline(self, call: ast.Call, pipeline: PipelineDef, scope: Scope, info: ModuleInfo,
                        after: tuple[str, ...] = ()) -> Value:
        """The pipeline's body, inlined; `after`: the tasks every task of the body waits for (`dagc.after`; the
        tasks of its arguments are the caller's and do not wait)."""
        if pipeline in self.cx.stack:
            chain = " → ".join(p.name for p in self.cx.stack[self.cx.stack.index(pipeline):] + [pipeline])
            self.cx.sink.error("DAGC113", f"pipeline `{pipeline.name}` calls itself ({chain})", info.source.span(call),
                               hint="pipelines are inlined at compile time and cannot recurse; use a static loop",
                               notes=[Note(f"`{p.name}` is defined here", name_span(p.source, p.node)) for p in self.cx.stack])
            raise ExtractError
        inner_name = self.cx.node_name(scope.prefix + pipeline.name + scope.suffix)
        inner = Scope(pipeline, prefix=inner_name + ".", inlined=inner_name)
        self._bind_receiver(pipeline, inner)
        params = pipeline.sig.params
        positional = [p for p in params if p.kind in ("positional_only", "positional")]
        if len(call.args) > len(positional):
            self.cx.sink.error("DAGC105", f"pipeline `{pipeline.name}` takes {len(positional)} positional arguments "
                               f"but {len(call.args)} were given", info.source.span(call))
            raise ExtractError
        given: dict[str, Value] = {}
        for param, arg in zip(positional, call.args):
            given[param.name] = self.cx.exprs.eval(arg, scope, info)
        names = {p.name for p in params}
        for kw in call.keywords:
            if kw.arg is None or kw.arg not in names:
                self.cx.sink.error("DAGC103", f"pipeline `{pipeline.name}` has no parameter `{kw.arg}`",
                                   info.source.span(kw), hint=f"parameters: {', '.join(sorted(names))}")
                raise ExtractError
            given[kw.arg] = self.cx.exprs.eval(kw.value, scope, info)
        for param in params:
            path_text = None if param.name in given else path_argument(param.default, pipeline.info)
            if param.name in given:
                inner.env[param.name] = given[param.name]
            elif path_text is not None:  # `Path("data")`: built where the program runs
                text = self.cx.exprs.static_value(path_text, Scope(pipeline, ""), pipeline.info)
                inner.env[param.name] = Dyn(built_path(self.cx, inner_name + "." + param.name,
                                                       operand_from_python(text), pipeline.info.source.span(param.node)))
            elif param.default is not None:
                inner.env[param.name] = Static(self.cx.exprs.static_value(param.default, Scope(pipeline, ""), pipeline.info))
            else:
                self.cx.sink.error("DAGC104", f"pipeline `{pipeline.name}` is missing argument `{param.name}`",
                                   info.source.span(call))
                raise ExtractError
        self.cx.stack.append(pipeline)
        waiting = self.cx.extra_deps, self.cx.extra_deps_for_all
        if after:
            self.cx.extra_deps, self.cx.extra_deps_for_all = list(after), True
        try:
            result = self._run_body(inner, pipeline.info, pipeline.node.body)
        finally:
            self.cx.stack.pop()
            if after:
                self.cx.extra_deps, self.cx.extra_deps_for_all = waiting
        return result if result is not None else Static(None)
