"""Lowering a KFP v2 pipeline body into dagc's own pipeline forms, keeping every source location.

A KFP pipeline body builds task objects; dagc's values are the tasks' results. The lowering is syntactic:

    t = comp(x=a).set_retry(2).after(s)      t = dagc·after(comp·L·C(x=a), s)  (a TaskDef with retries=2)
    t.output / t.outputs["m"]                 t / t["m"]   (a component with several outputs returns a dict)
    with dsl.ParallelFor(xs, parallelism=2)   for x in kfp·each(xs, concurrency=2):   (plain `for` on a literal)
        as x:                                     ... ; kfp·collected·N.append(<collected value>)
    dsl.Collected(t.output)                   kfp·collected·N   (the list the loop appends to; of nested loops,
                                                                 a list per item of the outer loop)
    dsl.OneOf(a.output, b.output)             kfp·oneof·N   (each branch sets it after the task it names)
    dsl.importer(artifact_uri=u, ...)         kfp·importer(artifact_uri=u, artifact_class="Dataset", ...)
    with dsl.If(c): / dsl.Elif / dsl.Else     if c: / elif: / else:
    e = cleanup(); with dsl.ExitHandler(e):   try: ... finally: e = cleanup()

The names it introduces (`dagc·after`, `comp·12·8`, ...) are not Python identifiers, so no user name clashes
with them. Constructs dagc cannot run say so at their line (DAGC196) and settings it does not honour are
warned about (DAGC197).
"""

from __future__ import annotations

import ast
import copy
import dataclasses
from typing import TYPE_CHECKING, Any

from dagc.frontend.dialects.kfp import component_outputs, is_container_component, kfp_name
from dagc.frontend.dialects.rewrite import AFTER, enable_after

if TYPE_CHECKING:
    from dagc.frontend.modules import ModuleInfo, Project

__all__ = ["lower_pipeline"]

EACH = "kfp·each"  # bound to dagc.each in the module (`ModuleInfo.dagc_names`)

# task methods that set an option dagc plans or runs with: method -> (option, the argument holding it)
OPTION_METHODS: dict[str, tuple[str, str]] = {
    "set_retry": ("retries", "num_retries"),
    "set_cpu_limit": ("cpus", "cpu"),
    "set_cpu_request": ("cpus", "cpu"),
    "set_memory_limit": ("memory", "memory"),
    "set_memory_request": ("memory", "memory"),
    "set_accelerator_limit": ("gpus", "limit"),
    "set_gpu_limit": ("gpus", "gpu"),
    "set_caching_options": ("cache", "enable_caching"),
}
# settings for a cluster's scheduler or the KFP UI, which a dagc program has no use for
QUIET_METHODS = {"set_display_name"}
IGNORED_METHODS = {"set_accelerator_type", "add_node_selector_constraint", "set_container_image",
                   "add_toleration", "add_affinity", "set_pod_metadata", "set_cpu_request_and_limit"}
UNSUPPORTED_METHODS = {
    "set_env_variable": "set the variable in the environment the program runs in (`FOO=1 python prog.py`), "
                        "or pass the value to the component as a parameter",
    "ignore_upstream_failure": "a dagc run stops at a failed task; put the step that must always run in a "
                               "`with dsl.ExitHandler(...)`",
}
UNSUPPORTED_CALLS = {
    "kfp.dsl.ContainerSpec": "dagc runs Python components only; call the program from a @dsl.component",
}
TASK_METHODS = {"after", *OPTION_METHODS, *QUIET_METHODS, *IGNORED_METHODS, *UNSUPPORTED_METHODS}
# the methods KFP refuses on a pipeline called as a component ("can only be used on single-step components")
CONTAINER_METHODS = {"set_cpu_limit", "set_cpu_request", "set_memory_limit", "set_memory_request",
                     "set_accelerator_limit", "set_gpu_limit", "set_accelerator_type", "set_container_image",
                     "set_env_variable", "add_node_selector_constraint"}
# the methods KFP records on a pipeline called as a component, but neither its local run nor a cluster uses
# there: a pipeline's own tasks keep their own retries and caching
PIPELINE_UNUSED_METHODS = {"set_retry", "set_caching_options"}


@dataclasses.dataclass(frozen=True)
class _Outputs:
    """What a task object's `.output` and `.outputs[...]` stand for."""

    names: tuple[str, ...]
    plain: bool  # the call's result is the return value itself


class _Unsupported(Exception):
    """A construct reported at its line; the statement holding it is dropped."""


def lower_pipeline(project: Project, info: ModuleInfo, fn: ast.FunctionDef | ast.AsyncFunctionDef
                   ) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """A copy of pipeline `fn` whose body is in dagc's own forms (the module docstring lists them)."""
    enable_after(info)
    info.dagc_names.setdefault(EACH, "each")
    lowered = copy.deepcopy(fn)
    lowering = _Lowering(project, info, lowered)
    lowered.body = lowering.block(lowered.body)
    ast.fix_missing_locations(lowered)
    return lowered


def _located(node: ast.AST, where: ast.AST) -> Any:
    for inner in ast.walk(node):
        if not hasattr(inner, "lineno") or getattr(inner, "lineno", None) is None:
            ast.copy_location(inner, where)
    return node


def _root_name(expr: ast.expr) -> str | None:
    while isinstance(expr, (ast.Attribute, ast.Subscript, ast.Call)):
        expr = expr.func if isinstance(expr, ast.Call) else expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _task_object(expr: ast.expr) -> ast.expr:
    """The task object an output is read from: `t` of `t.outputs["m"]`, the call of `comp(...).output`."""
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        expr = expr.value
    return expr


def _method_chain(expr: ast.expr) -> tuple[ast.expr, list[ast.Call]]:
    """`comp(...).set_retry(2).after(t)` → (`comp(...)`, [the method calls, innermost first])."""
    methods: list[ast.Call] = []
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in TASK_METHODS:
        methods.append(expr)
        expr = expr.func.value
    return expr, methods[::-1]


class _Lowering(ast.NodeTransformer):
    def __init__(self, project: Project, info: ModuleInfo, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.project, self.info = project, info
        self.tasks: dict[str, _Outputs] = {}  # task-object names -> what their outputs are
        self.loop_items: set[str] = set()  # names bound by `with dsl.ParallelFor(...) as item`
        self.later_methods = self._statement_methods(fn)
        self.collected, self.loop_lists = self._collected(fn)
        self.oneofs, self.branch_values = self._oneofs(fn)
        self.branch_forms = self._branch_forms(fn)
        self.dropped: set[str] = set()  # names bound by statements reported and left out

    # ---- diagnostics -------------------------------------------------------------------------------------
    def unsupported(self, node: ast.AST, message: str, hint: str) -> _Unsupported:
        self.project.sink.error("DAGC196", message, self.info.source.span(node), hint=hint)
        return _Unsupported()

    def ignored(self, node: ast.AST, message: str, hint: str) -> None:
        self.project.sink.warning("DAGC197", message, self.info.source.span(node), hint=hint)

    def dotted(self, expr: ast.expr) -> str | None:
        return kfp_name(self.info, expr)

    # ---- what the body says before it is lowered ---------------------------------------------------------
    def _statement_methods(self, fn: ast.AST) -> dict[str, list[ast.Call]]:
        """`t.set_caching_options(False)` as a statement: the settings of the call that made `t`."""
        found: dict[str, list[ast.Call]] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Expr):
                base, methods = _method_chain(node.value)
                if methods and isinstance(base, ast.Name):
                    found.setdefault(base.id, []).extend(methods)
        return found

    def _collected(self, fn: ast.AST) -> tuple[dict[int, str], dict[int, list[tuple[str, ast.expr]]]]:
        """Each `dsl.Collected(value)` → the list its loop appends `value` to; per loop, (list, value)s."""
        loops = [w for w in ast.walk(fn) if isinstance(w, ast.With) and self._with_form(w) == "kfp.dsl.ParallelFor"]
        assigned = {id(loop): {n.id for n in ast.walk(loop) if isinstance(n, ast.Name)
                               and isinstance(n.ctx, ast.Store)} for loop in loops}
        within = {id(loop): {id(n) for n in ast.walk(loop)} for loop in loops}
        by_value: dict[tuple[int, str], str] = {}
        collected: dict[int, str] = {}
        per_loop: dict[int, list[tuple[str, ast.expr]]] = {}
        for node, value in self._gathered(fn):
            root = _root_name(value)
            # the loops that make `value` and do not hold this use of it, outermost first (walk is outer-first)
            owners = [loop for loop in loops if root in assigned[id(loop)] and id(node) not in within[id(loop)]]
            if not owners:
                continue
            # nested loops give a list of lists, as KFP does: each loop appends what the loop inside it made
            collecting: ast.expr = value
            for loop in reversed(owners):
                key = (id(loop), ast.dump(collecting))
                if key not in by_value:
                    by_value[key] = f"kfp·collected·{len(by_value)}"
                    per_loop.setdefault(id(loop), []).append((by_value[key], collecting))
                collecting = ast.copy_location(ast.Name(by_value[key], ast.Load()), value)
            collected[id(node)] = collecting.id  # type: ignore[attr-defined]
        return collected, per_loop

    def _oneofs(self, fn: ast.AST) -> tuple[dict[int, str], dict[str, list[tuple[str, ast.expr]]]]:
        """Each `dsl.OneOf(a.output, b.output)` → the name every branch sets; per task name, the (name, value)s
        to set right after the statement that makes that task."""
        oneofs: dict[int, str] = {}
        values: dict[str, list[tuple[str, ast.expr]]] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and self.dotted(node.func) == "kfp.dsl.OneOf":
                name = oneofs[id(node)] = f"kfp·oneof·{len(oneofs)}"
                for value in node.args:
                    root = _root_name(value)
                    if root is not None:
                        values.setdefault(root, []).append((name, value))
        return oneofs, values

    def _branch_forms(self, fn: ast.AST) -> dict[str, set[str]]:
        """Per name, the condition forms (`kfp.dsl.If`, `...Elif`, `...Else`, `...Condition`) of the blocks
        whose bodies assign it."""
        forms: dict[str, set[str]] = {}
        for node in ast.walk(fn):
            form = self._with_form(node) if isinstance(node, ast.With) else None
            if form in ("kfp.dsl.If", "kfp.dsl.Elif", "kfp.dsl.Else", "kfp.dsl.Condition"):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                        forms.setdefault(inner.id, set()).add(form)  # type: ignore[arg-type]
        return forms

    def _check_oneof(self, node: ast.Call) -> None:
        """What KFP checks of a `dsl.OneOf`: outputs of named tasks made in condition branches, one of them in
        a `dsl.Else` (so that a value is there whichever branch runs)."""
        if not node.args or node.keywords:
            raise self.unsupported(node, "`dsl.OneOf` takes the outputs of the branches' tasks",
                                   "write `dsl.OneOf(a.output, b.output)` after the `dsl.If`/`dsl.Else` blocks")
        for arg in node.args:
            task = _task_object(arg)
            if not isinstance(task, ast.Name):
                raise self.unsupported(arg, "`dsl.OneOf` of a task made in its own argument list",
                                       "give each branch's task a name (`a = comp(...)` inside `with dsl.If(...)`) "
                                       "and write `dsl.OneOf(a.output, ...)`")
            if task.id not in self.branch_forms:
                raise self.unsupported(arg, f"`dsl.OneOf` of `{task.id}`, which no `dsl.If`/`dsl.Elif`/`dsl.Else` "
                                       "branch makes", "pass the outputs of tasks made inside the branches of one "
                                       "condition")
        if not any("kfp.dsl.Else" in self.branch_forms[_task_object(a).id]  # type: ignore[attr-defined]
                   for a in node.args):
            raise self.unsupported(node, "`dsl.OneOf` must include an output from a task in a `dsl.Else` group "
                                   "(as KFP requires), so that a value is there whichever branch runs",
                                   "add a `with dsl.Else():` block making a task, and pass its output too")

    def _gathered(self, fn: ast.AST) -> list[tuple[ast.expr, ast.expr]]:
        """The values that stand for every item of a loop when used after it, with the node that uses them:
        `dsl.Collected(value)`, and a task of the loop named in `.after(task)` (KFP waits for all of them)."""
        found: list[tuple[ast.expr, ast.expr]] = []
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and self.dotted(node.func) == "kfp.dsl.Collected" and len(node.args) == 1:
                found.append((node, node.args[0]))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "after":
                found.extend((arg, arg) for arg in node.args if isinstance(arg, ast.Name))
        return found

    def _with_form(self, stmt: ast.stmt) -> str | None:
        """`kfp.dsl.If` for `with dsl.If(...):`, None for a statement that is no KFP `with`."""
        if not isinstance(stmt, ast.With) or len(stmt.items) != 1 or not isinstance(stmt.items[0].context_expr,
                                                                                     ast.Call):
            return None
        name = self.dotted(stmt.items[0].context_expr.func)
        return name if name is not None and name.startswith("kfp.") else None

    # ---- statements --------------------------------------------------------------------------------------
    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        rest = list(stmts)
        while rest:
            stmt = rest.pop(0)
            try:
                out.extend(self._statement(stmt, rest, out))
            except _Unsupported:  # reported: the names it binds are left unbound, and not reported again
                self.dropped.update(n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)
                                    and isinstance(n.ctx, ast.Store))
        return out

    def _statement(self, stmt: ast.stmt, rest: list[ast.stmt], done: list[ast.stmt]) -> list[ast.stmt]:
        """`stmt` lowered (`rest`: the statements after it, of which an `if` chain takes its `elif`s; `done`:
        the lowered ones before it, of which an exit handler takes its exit task)."""
        form = self._with_form(stmt)
        if form is not None:
            return self._with(stmt, form, rest, done)  # type: ignore[arg-type]
        if isinstance(stmt, ast.Expr):
            base, methods = _method_chain(stmt.value)
            if methods and isinstance(base, ast.Name):
                return []  # `t.set_retry(3)`: folded into the call that made `t`
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            outputs = self._outputs_of(stmt.value)
            stmt.value = self.task_call(stmt.value, self.later_methods.get(name, []))
            self.dropped.discard(name)
            if outputs is not None:
                self.tasks[name] = outputs
            else:
                self.tasks.pop(name, None)
            chosen = [_located(ast.Assign([ast.Name(oneof, ast.Store())], self.visit(copy.deepcopy(value))), value)
                      for oneof, value in self.branch_values.get(name, [])]
            return [stmt, *chosen]
        return [self.visit(stmt)]

    def _with(self, stmt: ast.With, form: str, rest: list[ast.stmt], done: list[ast.stmt]) -> list[ast.stmt]:
        if form in ("kfp.dsl.If", "kfp.dsl.Condition"):
            chain = [stmt]
            while form == "kfp.dsl.If" and rest and self._with_form(rest[0]) in ("kfp.dsl.Elif", "kfp.dsl.Else"):
                chain.append(rest.pop(0))  # type: ignore[arg-type]
                if self._with_form(chain[-1]) == "kfp.dsl.Else":
                    break
            return [self._conditions(chain)]
        if form == "kfp.dsl.ParallelFor":
            return self._parallel_for(stmt)
        if form == "kfp.dsl.ExitHandler":
            return self._exit_handler(stmt, done)
        if form in ("kfp.dsl.Elif", "kfp.dsl.Else"):
            raise self.unsupported(stmt, f"`{form.rsplit('.', 1)[1]}` without a `dsl.If` just before it",
                                   "put `with dsl.Elif(...)`/`with dsl.Else():` right after the `with dsl.If(...)` "
                                   "block")
        raise self.unsupported(stmt.items[0].context_expr, f"`with {form}(...)` is not supported by dagc",
                               "use dsl.If/Elif/Else, dsl.ParallelFor or dsl.ExitHandler")

    def _conditions(self, chain: list[ast.With]) -> ast.If:
        """`with dsl.If(a): ... with dsl.Elif(b): ... with dsl.Else(): ...` → one `if`/`elif`/`else`."""
        head, *rest = chain
        test = self.visit(head.items[0].context_expr.args[0]) if head.items[0].context_expr.args else None  # type: ignore[attr-defined]
        if test is None:
            raise self.unsupported(head, "`dsl.If` needs a condition", "write `with dsl.If(task.output == 'x'):`")
        orelse: list[ast.stmt] = []
        if rest:
            if self._with_form(rest[0]) == "kfp.dsl.Else":
                orelse = self.block(rest[0].body)
            else:
                orelse = [self._conditions(rest)]
        return _located(ast.If(test, self.block(head.body), orelse), head)

    def _parallel_for(self, stmt: ast.With) -> list[ast.stmt]:
        call: ast.Call = stmt.items[0].context_expr  # type: ignore[assignment]
        items = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "items"), None)
        if items is None:
            raise self.unsupported(call, "`dsl.ParallelFor` needs its items", "write `with dsl.ParallelFor(items) as item:`")
        parallelism = next((k.value for k in call.keywords if k.arg == "parallelism"), None)
        if parallelism is None and len(call.args) > 1:
            parallelism = call.args[1]
        items = self.visit(items)
        if parallelism is not None and not isinstance(items, (ast.List, ast.Tuple)) and not (
                isinstance(parallelism, ast.Constant) and parallelism.value in (0, None)):
            items = _located(ast.Call(ast.Name(EACH, ast.Load()), [items],
                                      [ast.keyword("concurrency", parallelism)]), call)
        target = stmt.items[0].optional_vars or ast.Name("_", ast.Store())
        if isinstance(target, ast.Name):
            self.loop_items.add(target.id)
        body = self.block(stmt.body)
        before: list[ast.stmt] = []
        for list_name, value in self.loop_lists.get(id(stmt), []):
            before.append(_located(ast.Assign([ast.Name(list_name, ast.Store())], ast.List([], ast.Load())), stmt))
            append = ast.Attribute(ast.Name(list_name, ast.Load()), "append", ast.Load())
            body.append(_located(ast.Expr(ast.Call(append, [self.visit(copy.deepcopy(value))], [])), value))
        return [*before, _located(ast.For(target, items, body or [ast.Pass()], []), stmt)]

    def _exit_handler(self, stmt: ast.With, done: list[ast.stmt]) -> list[ast.stmt]:
        """`exit_task = cleanup(...)` then `with dsl.ExitHandler(exit_task):` → the body under `try:`, the exit
        task's statement under `finally:` (it runs whether the body succeeded or failed)."""
        call: ast.Call = stmt.items[0].context_expr  # type: ignore[assignment]
        exit_task = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "exit_task"), None)
        final: list[ast.stmt] = []
        if isinstance(exit_task, ast.Name) and exit_task.id in self.dropped:
            return self.block(stmt.body)  # (the exit task was reported already: the body is still checked)
        if isinstance(exit_task, ast.Name):
            index = next((k for k in range(len(done) - 1, -1, -1) if isinstance(done[k], ast.Assign)
                          and any(isinstance(t, ast.Name) and t.id == exit_task.id
                                  for t in done[k].targets)), None)  # type: ignore[attr-defined]
            if index is None:
                raise self.unsupported(exit_task, "the exit task of `dsl.ExitHandler` must be made just before it",
                                       "write `exit_task = cleanup(...)` and then `with dsl.ExitHandler(exit_task):`")
            final.append(done.pop(index))
        elif isinstance(exit_task, ast.Call):
            final.append(_located(ast.Expr(self.task_call(exit_task, [])), exit_task))
        else:
            raise self.unsupported(call, "`dsl.ExitHandler` needs the exit task",
                                   "write `with dsl.ExitHandler(exit_task):`")
        return [_located(ast.Try(self.block(stmt.body), [], [], final), stmt)]

    # ---- expressions -------------------------------------------------------------------------------------
    def _outputs_of(self, expr: ast.expr) -> _Outputs | None:
        """What the task object `expr` (a name bound to one, or a component call) gives as outputs."""
        from dagc.frontend.modules import PipelineDef, TaskDef

        expr = _method_chain(expr)[0]  # `comp(...).set_retry(2)` is the task `comp(...)`
        if isinstance(expr, ast.Name):
            return self.tasks.get(expr.id)
        if isinstance(expr, ast.Call) and self.dotted(expr.func) == "kfp.dsl.importer":
            return _Outputs(("artifact",), True)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
            symbol = self.project.lookup(self.info, expr.func.id)
            if isinstance(symbol, TaskDef) and symbol.dialect == "kfp":
                return _Outputs(*component_outputs(symbol.node))
            if isinstance(symbol, PipelineDef):
                return _Outputs(("Output",), True)
        return None

    def task_call(self, expr: ast.expr, later: list[ast.Call]) -> ast.expr:
        """A component call with its task methods (chained or as later statements): the call of a task
        carrying those options, after the tasks `.after()` names."""
        base, methods = _method_chain(expr)
        methods = [*methods, *later]
        if methods and self._calls_pipeline(base):
            methods = self._pipeline_methods(methods)
        base = self.visit(base)
        if not methods or not isinstance(base, ast.Call):
            return base
        options: dict[str, Any] = {}
        after: list[ast.expr] = []
        for method in methods:
            name = method.func.attr  # type: ignore[attr-defined]
            if name == "after":  # a task of a loop before this call: every item of it
                after.extend(ast.copy_location(ast.Name(self.collected[id(a)], ast.Load()), a)
                             if id(a) in self.collected else self.visit(a) for a in method.args)
            elif name in OPTION_METHODS:
                option, value = self._option(method)
                if value is not None:
                    options[option] = value
            elif name in UNSUPPORTED_METHODS:  # reported; the call itself is still read
                self.unsupported(method.func, f"`.{name}()` is not supported by dagc", UNSUPPORTED_METHODS[name])
            elif name in IGNORED_METHODS:
                self.ignored(method.func, f"`.{name}()` is a setting for a Kubernetes cluster; a dagc program "
                             "does not use it", "dagc places tasks by the resources they ask for "
                             "(`.set_cpu_limit`, `.set_memory_limit`, `.set_accelerator_limit`)")
        call = self._with_options(base, options) if options else base
        if after:
            call = _located(ast.Call(ast.Name(AFTER, ast.Load()), [call, *after], []), base)
        return call

    def _importer(self, node: ast.Call) -> ast.Call:
        """`dsl.importer(uri, dsl.Dataset, ...)` → the importer task's call, the class passed by its name."""
        from dagc.frontend.dialects.kfp_importer import IMPORTER, PARAMETERS, importer_task

        importer_task(self.info)
        given = dict(zip(PARAMETERS, node.args))
        for keyword in node.keywords:
            if keyword.arg not in PARAMETERS:
                raise self.unsupported(keyword.value if keyword.arg else node, f"`dsl.importer` takes no "
                                       f"`{keyword.arg or '**'}` argument", "pass " + ", ".join(PARAMETERS))
            given[keyword.arg] = keyword.value
        if "artifact_uri" not in given or "artifact_class" not in given:
            raise self.unsupported(node, "`dsl.importer` needs `artifact_uri` and `artifact_class`",
                                   "write `dsl.importer(artifact_uri=..., artifact_class=dsl.Dataset)`")
        cls = self.dotted(given["artifact_class"]) or ""
        given["artifact_class"] = ast.copy_location(ast.Constant(
            cls.removeprefix("kfp.dsl.") if cls.startswith("kfp.dsl.") else "Artifact"), given["artifact_class"])
        download = given.get("download_to_workspace")
        if download is not None and not (isinstance(download, ast.Constant) and download.value is False):
            self.ignored(download, "`download_to_workspace` copies the artifact into a KFP workspace, which a dagc "
                         "run has none of", "the artifact's `.path` names the file in place; a component that "
                         "must not change it copies it first")
        keywords = [ast.keyword(k, self.visit(v)) for k, v in given.items() if k != "artifact_class"]
        keywords.insert(1, ast.keyword("artifact_class", given["artifact_class"]))
        return _located(ast.Call(ast.Name(IMPORTER, ast.Load()), [], keywords), node)

    def _calls_pipeline(self, expr: ast.expr) -> bool:
        from dagc.frontend.modules import PipelineDef

        return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and isinstance(
            self.project.lookup(self.info, expr.func.id), PipelineDef)

    def _pipeline_methods(self, methods: list[ast.Call]) -> list[ast.Call]:
        """The settings of a pipeline called as a component that KFP applies: `.after(...)` (every task of the
        inlined pipeline waits); the others are reported at their line."""
        kept: list[ast.Call] = []
        for method in methods:
            name = method.func.attr  # type: ignore[attr-defined]
            if name in CONTAINER_METHODS:
                self.unsupported(method.func, f"`.{name}()` on a pipeline called as a component: KFP allows it on "
                                 "single-step components only", "set it on the components inside the pipeline")
            elif name in PIPELINE_UNUSED_METHODS:
                self.ignored(method.func, f"`.{name}()` on a pipeline called as a component is not used by KFP's "
                             "runs (it retries and caches single-step components only), nor by dagc",
                             "set it on the components inside the pipeline")
            elif name in IGNORED_METHODS or name in UNSUPPORTED_METHODS:
                kept.append(method)  # reported as on any task
            elif name in ("after", *QUIET_METHODS):
                kept.append(method)
        return kept

    def _option(self, method: ast.Call) -> tuple[str, Any]:
        from dagc.frontend.modules import static_option_value
        from dagc.frontend.static import NotStatic

        name = method.func.attr  # type: ignore[attr-defined]
        option, keyword = OPTION_METHODS[name]
        arg = method.args[0] if method.args else next((k.value for k in method.keywords if k.arg == keyword), None)
        if arg is None:
            raise self.unsupported(method, f"`.{name}()` needs its value", f"write `.{name}(...)` with a value")
        try:
            value = static_option_value(arg, self.info, self.project)
        except NotStatic as exc:
            raise self.unsupported(arg, f"`.{name}()` needs a value known at compile time: {exc.reason}",
                                   "use a literal or a module-level constant") from None
        if option == "gpus" and isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                pass
        from dagc.frontend.scan import _convert_option

        try:
            return option, _convert_option(self.project, self.info, option, value, arg)
        except ValueError:
            return option, None

    def _with_options(self, call: ast.Call, options: dict[str, Any]) -> ast.Call:
        """The call made through a copy of its component's TaskDef that carries `options` (per call)."""
        from dagc.frontend.modules import TaskDef

        if not isinstance(call.func, ast.Name):
            return call
        symbol = self.project.lookup(self.info, call.func.id)
        if not isinstance(symbol, TaskDef):
            return call  # a pipeline's settings: its own components carry theirs
        variant = dataclasses.replace(symbol, options=dataclasses.replace(symbol.options, **options))
        key = f"{call.func.id}·{call.lineno}·{call.col_offset}"
        self.info.symbols[key] = variant
        return ast.Call(ast.copy_location(ast.Name(key, ast.Load()), call.func), call.args, call.keywords,
                        lineno=call.lineno, col_offset=call.col_offset, end_lineno=call.end_lineno,
                        end_col_offset=call.end_col_offset)

    def visit_For(self, node: ast.For) -> ast.AST:  # a Python loop the pipeline function runs as KFP compiles it
        node.iter = self.visit(node.iter)
        node.body, node.orelse = self.block(node.body), self.block(node.orelse)
        return node

    def visit_If(self, node: ast.If) -> ast.AST:
        node.test = self.visit(node.test)
        node.body, node.orelse = self.block(node.body), self.block(node.orelse)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        name = self.dotted(node.func)
        if name == "kfp.dsl.Collected":
            if id(node) not in self.collected:
                raise self.unsupported(node, "`dsl.Collected` of a value no `dsl.ParallelFor` before it makes",
                                       "collect a task's output made inside a `with dsl.ParallelFor(...)` block, "
                                       "after that block")
            return ast.copy_location(ast.Name(self.collected[id(node)], ast.Load()), node)
        if name == "kfp.dsl.OneOf":
            self._check_oneof(node)
            return ast.copy_location(ast.Name(self.oneofs[id(node)], ast.Load()), node)
        if name == "kfp.dsl.importer":
            return self._importer(node)
        if name in UNSUPPORTED_CALLS:
            raise self.unsupported(node, f"`{name.removeprefix('kfp.')}` is not supported by dagc",
                                   UNSUPPORTED_CALLS[name])
        if name is not None and name.startswith("kfp.kubernetes."):
            raise self.unsupported(node, f"`{name}` configures a Kubernetes pod; dagc runs no pods",
                                   "remove it: dagc places tasks by the resources they ask for")
        if isinstance(node.func, ast.Name):
            symbol = self.project.lookup(self.info, node.func.id)
            if is_container_component(self.info, getattr(symbol, "node", None)):
                raise self.unsupported(node, f"`{node.func.id}` is a container component (`@dsl.container_component`"
                                       "), whose container image dagc cannot run",
                                       f"write `{node.func.id}` as a Python `@dsl.component` that runs the same "
                                       "command with `subprocess.run([...], check=True)`")
            status = next((p.name for p in getattr(getattr(symbol, "sig", None), "params", ())
                           if (p.annotation or "").endswith("PipelineTaskFinalStatus")), None)
            if status is not None:
                raise self.unsupported(node, f"`{node.func.id}` takes the pipeline's final status (`{status}`), "
                                       "which a dagc run does not give its tasks", "a failed dagc run stops with the "
                                       "failing task's error; give the exit task what it reports as parameters")
        base, methods = _method_chain(node)
        if methods:
            return self.task_call(node, [])
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.dropped:
            raise _Unsupported  # a statement reported already made it: not reported again here
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if node.attr == "output" and isinstance(node.ctx, ast.Load):
            outputs = self._outputs_of(node.value)
            base = self.visit(node.value)
            if outputs is None or outputs.plain:
                return base
            if len(outputs.names) == 1:
                return _located(ast.Subscript(base, ast.Constant(outputs.names[0]), ast.Load()), node)
            raise self.unsupported(node, f"`.output` of a task with {len(outputs.names) or 'no'} outputs",
                                   f"name the output: `.outputs[{(outputs.names or ('name',))[0]!r}]`")
        if isinstance(node.value, ast.Name) and node.value.id in self.loop_items and isinstance(node.ctx, ast.Load):
            return _located(ast.Subscript(node.value, ast.Constant(node.attr), ast.Load()), node)  # `item.a`
        name = self.dotted(node)
        if name is not None and name.startswith("kfp.dsl.") and name.endswith("_PLACEHOLDER"):
            raise self.unsupported(node, f"`{name.removeprefix('kfp.')}` is filled in by a KFP cluster",
                                   "pass the value as a pipeline parameter")
        return self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        if isinstance(node.value, ast.Attribute) and node.value.attr == "outputs":
            outputs = self._outputs_of(node.value.value)
            base = self.visit(node.value.value)
            key = node.slice
            if outputs is not None and outputs.plain:
                return base
            return _located(ast.Subscript(base, key, ast.Load()), node)
        return self.generic_visit(node)
