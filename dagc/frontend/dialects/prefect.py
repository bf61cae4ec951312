"""Prefect 3 flows: `@flow` functions are pipelines, `@task` functions are tasks.

A flow body calls its tasks directly, or through futures and fan-outs, which the body is rewritten from
(dagc.frontend.dialects.rewrite):

    y = square.submit(x)            →  y = square(x)                      (a future is its value)
    y.result(), y.wait()            →  y, (nothing)
    ys = square.map(xs, unmapped(k))→  ys = [square(_item, k) for _item in xs]   (a map region)
    [f.result() for f in ys]        →  ys
    wait(futures)                   →  (nothing: the programs wait for every task)
    load(x, wait_for=[y])           →  dagc.after(load(x), y)

    t.with_options(retries=2)(x)    →  t.options(retries=2)(x)           (dagc.frontend.dialects.prefect_options)
    await t(x), asyncio.gather(...)  →  t(x), [...]                      (dagc.frontend.dialects.prefect_async)

Task options dagc has an equivalent for: `retries=`, `timeout_seconds=` (a timeout), `cache_policy=`
(`NO_CACHE` turns the run store's reuse off; a policy keyed on the inputs marks the task pure).
"""

from __future__ import annotations

import ast
import copy

from dagc.frontend.dialects import DECORATORS, DecoratorForm, decorator_form, dotted_name
from dagc.frontend.dialects.prefect_async import AsyncForms, check_async_generator
from dagc.frontend.dialects.prefect_options import bound_configurations, is_with_options, options_callee
from dagc.frontend.dialects.rewrite import (
    Mapped,
    after,
    bound_names,
    call_of,
    copy_function,
    enable_after,
    fan_out,
    is_function_ref,
    is_scalar,
    scalar_names,
    unsupported,
)
from dagc.frontend.fix_edits import guard_call_fix
from dagc.frontend.modules import ModuleInfo, Project, TaskDef, static_option_value
from dagc.frontend.static import NotStatic
from dagc.ir.types import TaskOptions

__all__ = ["task_options", "refine_task", "pipeline_node"]

for _module in ("prefect", "prefect.tasks", "prefect.flows"):
    DECORATORS[f"{_module}.task"] = DecoratorForm("prefect", "task")
    DECORATORS[f"{_module}.flow"] = DecoratorForm("prefect", "pipeline")

_UNMAPPED = {"prefect.unmapped", "prefect.utilities.annotations.unmapped", "prefect.quote",
             "prefect.utilities.annotations.quote", "prefect.utilities.annotations.allow_failure",
             "prefect.allow_failure"}
_WAIT = {"prefect.futures.wait", "prefect.wait"}
_NO_CACHE = {"prefect.cache_policies.NO_CACHE"}
_INPUT_POLICIES = {"prefect.cache_policies.INPUTS"}
_INPUT_KEYS = {"prefect.tasks.task_input_hash"}  # `cache_key_fn=task_input_hash`: Prefect 2's form of INPUTS
_HINT = "docs/dialects.md (Prefect) lists the forms dagc compiles"


def task_options(project: Project, info: ModuleInfo, call: ast.Call | None) -> tuple[TaskOptions, tuple[str, ...]]:
    """The dagc options of `@task(...)`: `retries=`, `timeout_seconds=`, `cache_policy=` (`cache_key_fn=`); the
    others (names, tags, retry delays, result persistence) change nothing in what the task computes."""
    given: dict[str, object] = {}
    for keyword in call.keywords if call is not None else ():
        if keyword.arg in ("retries", "timeout_seconds"):
            try:
                value = static_option_value(keyword.value, info, project)
            except NotStatic:
                value = None
            if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0):
                value = None
            if value is None:
                project.sink.error("DAGC109", f"`{keyword.arg}=` of a Prefect task must be a number known at "
                                   "compile time", info.source.span(keyword.value),
                                   hint=f"write a literal or a module constant: `@task({keyword.arg}=3)`")
                continue
            if keyword.arg == "retries":
                given["retries"] = int(value)
            elif value:
                given["timeout"] = float(value)
        elif keyword.arg == "cache_key_fn" and dotted_name(info, keyword.value) in _INPUT_KEYS:
            given["pure"] = True
        elif keyword.arg == "cache_policy":
            names = {dotted_name(info, e) for e in ast.walk(keyword.value) if isinstance(e, (ast.Name, ast.Attribute))}
            if names & _NO_CACHE:
                given["cache"] = False
            elif names & _INPUT_POLICIES:
                given["pure"] = True
    return TaskOptions(**given), ()  # type: ignore[arg-type]


def refine_task(project: Project, info: ModuleInfo, task: TaskDef) -> TaskDef:
    """An async task is compiled as any task (the programs run its coroutine); an async generator is reported."""
    check_async_generator(project, info, task.node, "task")
    return task


def pipeline_node(project: Project, info: ModuleInfo,
                  fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The flow's body in dagc's forms (the module's own tree is left as written); an async flow's body is lowered
    to a plain one (dagc.frontend.dialects.prefect_async)."""
    check_async_generator(project, info, fn, "flow")
    enable_after(info)
    _check_module_calls(project, info, fn)
    lowered = copy_function(fn)
    configured, bindings = bound_configurations(info, lowered)
    rewriter = _FlowRewriter(project, info, bound_names(fn) - set(configured), scalar_names(fn),
                             isinstance(fn, ast.AsyncFunctionDef), configured)
    lowered.body = rewriter.statements([s for s in lowered.body if s not in bindings])
    rewriter.finish_pending()
    if isinstance(lowered, ast.AsyncFunctionDef):
        plain = ast.FunctionDef(name=lowered.name, args=lowered.args, body=lowered.body,
                                decorator_list=lowered.decorator_list, returns=lowered.returns,
                                type_comment=lowered.type_comment)
        return ast.copy_location(plain, lowered)
    return lowered


def _check_module_calls(project: Project, info: ModuleInfo, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    """A flow called at the module's top level (an async one through `asyncio.run(flow())`) runs whenever the
    module is imported, in every process of a program (and starts Prefect's server there): reported, with the
    guard that keeps it to `python script.py`."""
    for stmt in info.source.tree.body:
        if not (isinstance(stmt, (ast.Expr, ast.Assign)) and isinstance(stmt.value, ast.Call)):
            continue
        call = stmt.value
        if dotted_name(info, call.func) == "asyncio.run" and len(call.args) == 1 and isinstance(call.args[0], ast.Call):
            call = call.args[0]
        if isinstance(call.func, ast.Name) and call.func.id == fn.name:
            project.sink.error("DAGC110", f"flow `{fn.name}` is called at the module's top level: it would run each "
                               "time a program imports the module", info.source.span(call),
                               hint="call it under `if __name__ == \"__main__\":`, as Prefect's examples do",
                               fix=guard_call_fix(info.source, stmt))


class _FlowRewriter(AsyncForms):
    """Rewrites Prefect's call forms in a flow body (not inside functions or classes it defines)."""

    def __init__(self, project: Project, info: ModuleInfo, local: set[str], scalars: set[str], is_async: bool,
                 configured: dict[str, ast.Call]) -> None:
        self.project, self.info, self.local, self.scalars = project, info, local, scalars
        self.taken = set(local) | set(configured)
        self.configured = configured  # names bound to `task.with_options(...)`
        self.callees: dict[int, ast.expr] = {}  # each `.with_options(...)` read once: its `task.options(...)`
        self.flows = {stmt.name for stmt in info.source.tree.body if isinstance(stmt, (
            ast.FunctionDef, ast.AsyncFunctionDef)) and any(found[0].dialect == "prefect" and found[0].kind == "pipeline"
                                                            for d in stmt.decorator_list
                                                            if (found := decorator_form(info, d)) is not None)}
        self.init_async(is_async)

    def statements(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in body:
            if isinstance(stmt, ast.Expr) and self._drops(stmt.value):
                continue
            before = set(self.pending)
            used = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            self.store_pending(stmt)
            new = self.visit(stmt)
            rewritten = new if isinstance(new, list) else [new] if new is not None else []
            self.check_pending(used, before, rewritten)
            out.extend(rewritten)
        if not out and body:  # a block that only waited: Python needs a statement there
            out.append(ast.copy_location(ast.Pass(), body[0]))
        return out

    def _drops(self, expr: ast.expr) -> bool:
        """A statement that only waits on futures it names (`wait(futures)`, `future.wait()`): dagc's programs
        wait for every task. (`task.submit(x).wait()` still calls the task.)"""
        if isinstance(expr, ast.Await) and isinstance(expr.value, ast.Call) and \
                dotted_name(self.info, expr.value.func) == "asyncio.sleep":
            return True  # (a flow's pause: the programs run each task once its inputs are ready)
        if not isinstance(expr, ast.Call):
            return False
        if isinstance(expr.func, ast.Attribute) and expr.func.attr == "wait" and isinstance(
                expr.func.value, ast.Name) and expr.func.value.id in self.local and not expr.args:
            return True
        return dotted_name(self.info, expr.func) in _WAIT and all(isinstance(a, ast.Name) for a in expr.args)

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for field, old in ast.iter_fields(node):
            if isinstance(old, list) and old and isinstance(old[0], ast.stmt):
                setattr(node, field, self.statements(old))
            elif isinstance(old, list):
                old[:] = [self.visit(v) if isinstance(v, ast.AST) else v for v in old]
            elif isinstance(old, ast.AST):
                setattr(node, field, self.visit(old))
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return node  # a helper defined in the flow: its body is not the flow's

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]
    visit_ClassDef = visit_FunctionDef  # type: ignore[assignment]
    visit_Lambda = visit_FunctionDef  # type: ignore[assignment]

    def visit_ListComp(self, node: ast.ListComp) -> ast.AST:
        self.generic_visit(node)
        # `[f.result() for f in futures]` (or `in t.map(xs)`) is now `[f for f in futures]`: the futures' values
        # are the list
        (gen,) = node.generators if len(node.generators) == 1 else (None,)
        if gen is not None and not gen.ifs and isinstance(gen.target, ast.Name) and isinstance(node.elt, ast.Name) \
                and node.elt.id == gen.target.id and isinstance(gen.iter, (ast.Name, ast.ListComp)):
            return gen.iter
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "map" and self._task_ref(func.value):
            return self._map(node, self._callee(func.value))  # its arguments are read before they are rewritten
        reported = self.asyncio_call(node)
        if reported is not None:
            return reported
        self.check_unawaited(node)
        if isinstance(func, ast.Attribute) and func.attr in ("submit", "fn") and self._task_ref(func.value):
            node = call_of(self._callee(func.value), node.args, node.keywords, node)  # a future is its value
            return self._configured_call(node)
        if self._task_ref(func) and not isinstance(func, (ast.Name, ast.Attribute)) or \
                isinstance(func, ast.Name) and func.id in self.configured:
            node.func = self._callee(func)  # `t.with_options(...)(x)`, `fast(x)`
            return self._configured_call(node)
        self.generic_visit(node)
        if isinstance(node.func, ast.Constant) and node.func.value is None:  # calls what was reported: once
            return node.func
        name = dotted_name(self.info, func)
        if name in _UNMAPPED or name in _WAIT:  # outside `.map`, `unmapped(x)` is x; `wait(fs)` waits on fs
            return node.args[0] if len(node.args) == 1 else node
        if isinstance(func, ast.Attribute):
            receiver, method = func.value, func.attr
            if method in ("result", "wait") and not self._task_ref(receiver):
                return receiver  # a future's value is the task's result
            if self._task_ref(receiver):
                if method == "with_options":
                    return unsupported(self.project, self.info, node,
                                       "a task's `.with_options(...)` is supported where the flow calls the task it "
                                       "gives (`t.with_options(retries=2)(x)`), or bound to a name the flow calls",
                                       f"call the configured task, `.submit()` or `.map()` it; {_HINT}")
                if method in ("apply_async", "delay", "serve", "deploy", "to_deployment"):
                    return unsupported(self.project, self.info, node,
                                       f"Prefect's `.{method}()` is not supported in a flow dagc compiles",
                                       "call the task directly, `.submit()` or `.map()` it; a per-call option is "
                                       f"`t.with_options(retries=2)(x)`; {_HINT}")
        return self._task_call(node)

    def _configured_call(self, node: ast.Call) -> ast.expr:
        if isinstance(node.func, ast.Constant) and node.func.value is None:  # a callee reported already
            return node.func
        self.generic_visit(node)
        return self._task_call(node)

    def _task_ref(self, expr: ast.expr) -> bool:
        """`expr` names a module-level task (`t`, `tasks.t`), one configured for the call (`t.with_options(...)`),
        or a name bound to one."""
        if isinstance(expr, ast.Name) and expr.id in self.configured:
            return True
        if is_with_options(expr):
            assert isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)
            return is_function_ref(expr.func.value, self.local)
        return is_function_ref(expr, self.local)

    def _callee(self, expr: ast.expr) -> ast.expr:
        """The callee a task reference stands for in dagc's forms: `t.options(...)` for a configured task."""
        if isinstance(expr, ast.Name) and expr.id in self.configured:
            expr = self.configured[expr.id]
        if not is_with_options(expr):
            return expr
        assert isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)
        if id(expr) not in self.callees:
            made = options_callee(self.project, self.info, expr, expr.func.value, task_options)
            name = self.task_name(expr)
            if isinstance(made, ast.Call) and name in self.flows:
                made = unsupported(self.project, self.info, expr, f"options of flow `{name}` set by `.with_options(...)` "
                                   "are not supported: a subflow is inlined into the flow that calls it",
                                   f"set `retries=` and `timeout_seconds=` on the subflow's tasks; {_HINT}")
            self.callees[id(expr)] = made
        return copy.deepcopy(self.callees[id(expr)])

    def _task_call(self, node: ast.Call) -> ast.expr:
        """A task call's Prefect-only keywords: `wait_for=` becomes an ordering; `return_state=` is refused."""
        waits: list[ast.expr] = []
        keywords = []
        for keyword in node.keywords:
            if keyword.arg == "wait_for":
                value = keyword.value
                waits.extend(value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value])
            elif keyword.arg == "return_state":
                return unsupported(self.project, self.info, keyword.value,
                                   "`return_state=` is not supported: a dagc task gives its result, not a Prefect "
                                   "state", f"use the result itself; a task that fails stops the run; {_HINT}")
            else:
                keywords.append(keyword)
        node.keywords = keywords
        return after(node, waits, node) if waits else node

    def _map(self, node: ast.Call, task: ast.expr) -> ast.expr:
        """`task.map(xs, unmapped(v), k=ys, c=2)`: one call per item of the iterables, zipped."""
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return unsupported(self.project, self.info, node, "`.map()` with `*args` or `**kwargs` is not supported",
                               f"name each argument: `task.map(xs, scale=unmapped(2))`; {_HINT}")
        args: list[ast.expr | Mapped] = [self._argument(a) for a in node.args]
        keywords: list[tuple[str, ast.expr | Mapped]] = []
        waits: list[ast.expr] = []
        for keyword in node.keywords:
            assert keyword.arg is not None
            if keyword.arg == "wait_for":
                value = keyword.value
                waits.extend(self.visit(w) for w in (value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]))
            elif keyword.arg in ("return_state", "deferred"):
                return unsupported(self.project, self.info, keyword, f"`.map({keyword.arg}=...)` is not supported",
                                   f"map the task over its items and use the results; {_HINT}")
            else:
                keywords.append((keyword.arg, self._argument(keyword.value)))
        if not any(isinstance(a, Mapped) for a in (*args, *(v for _, v in keywords))):
            return unsupported(self.project, self.info, node, "`.map()` has no argument to map over",
                               f"pass the list of items: `task.map(items)`; {_HINT}")
        return after(fan_out(task, args, keywords, node, self.taken), waits, node)

    def _argument(self, expr: ast.expr) -> ast.expr | Mapped:
        """A `.map()` argument: given whole to every call (`unmapped(x)`, a scalar), or mapped over."""
        if isinstance(expr, ast.Call) and dotted_name(self.info, expr.func) in _UNMAPPED and len(expr.args) == 1:
            return self.visit(expr.args[0])
        if is_scalar(expr, self.info, self.project, self.scalars):
            return expr
        return Mapped(self.visit(expr))
