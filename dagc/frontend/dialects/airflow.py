"""Airflow 3 TaskFlow DAGs: a `@dag` function is a pipeline, a `@task` function (at module level, or defined
inside the `@dag` function, as Airflow's tutorials write them) is a task.

The DAG function's body is rewritten into dagc's forms (dagc.frontend.dialects.rewrite):

    @task def extract(): ...        →  a task `dag_fn.<locals>.extract` (the programs find the function in the
                                       DAG that calling `dag_fn()` builds, closures included)
    double.expand(x=xs)             →  [double(x=_item) for _item in xs]           (a map region)
    add.partial(y=1).expand(x=xs)   →  [add(y=1, x=_item) for _item in xs]
    load.override(task_id="l")(x)   →  load(x)
    a >> b, b << a, chain(a, b)     →  b's call becomes dagc.after(<call>, a)        (an order without data:
                                       dagc.frontend.dialects.airflow_order)

    @task.branch / BranchPythonOperator  →  `if` on what the branch chose, around each task it may skip
                                            (dagc.frontend.dialects.airflow_branch)

Task options dagc has an equivalent for: `retries=`, `execution_timeout=timedelta(...)` (a timeout), also from
the DAG's `default_args` (dagc.frontend.dialects.airflow_defaults). A file's
`my_dag()` at module level builds a DAG object when the programs import the module: Airflow must be installed
where they run, and nothing runs then.
"""

from __future__ import annotations

import ast
import weakref

from dagc.frontend.dialects import (
    CONTEXTS,
    DECORATORS,
    RUNS_EVERY_TASK,
    DecoratorForm,
    decorator_form,
    dotted_name,
)
from dagc.frontend.dialects.airflow_branch import TaskMeta, lower_branches, trigger_rule
from dagc.frontend.dialects.airflow_defaults import (
    apply_at_calls,
    configured_call,
    dag_defaults,
    operator_options,
    task_options,
    with_defaults,
    written_options,
)
from dagc.frontend.dialects.airflow_operators import (
    BRANCH_OPERATORS,
    EMPTY_OPERATORS,
    PYTHON_OPERATORS,
    PlainFunction,
    check_task_code,
    python_operator,
)
from dagc.frontend.dialects.airflow_order import LABELS, Ordering
from dagc.frontend.dialects.rewrite import (
    Mapped,
    bound_names,
    call_of,
    copy_function,
    enable_after,
    fan_out,
    is_function_ref,
    unsupported,
)
from dagc.frontend.fix_edits import plain_def_fix
from dagc.frontend.fix_nested import free_names
from dagc.frontend.modules import FunctionSig, ModuleInfo, PipelineDef, Project, TaskDef
from dagc.ir.types import TaskOptions

__all__ = ["task_options", "pipeline_node", "scan_with"]

for _module in ("airflow.sdk", "airflow.decorators"):
    DECORATORS[f"{_module}.task"] = DecoratorForm("airflow", "task")
    DECORATORS[f"{_module}.task.python"] = DecoratorForm("airflow", "task")
    DECORATORS[f"{_module}.task.branch"] = DecoratorForm("airflow", "task")  # (dagc.frontend.dialects.airflow_branch)
    DECORATORS[f"{_module}.dag"] = DecoratorForm("airflow", "pipeline")
RUNS_EVERY_TASK.add("airflow")  # a DAG run runs each of its tasks, whether its result is used or not
for _dag_class in ("airflow.DAG", "airflow.sdk.DAG", "airflow.models.DAG", "airflow.models.dag.DAG",
                   "airflow.sdk.definitions.dag.DAG"):
    CONTEXTS[_dag_class] = "airflow"

_HINT = "docs/dialects.md (Airflow) lists the forms dagc compiles"
_DOCS = {"doc", "doc_md", "doc_rst", "doc_json", "doc_yaml"}  # what `dag.doc_md = ...` sets: shown, not computed
_GROUP = {"airflow.sdk.task_group", "airflow.decorators.task_group"}


def pipeline_node(project: Project, info: ModuleInfo,
                  fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The DAG function's body in dagc's forms; its nested `@task` functions become tasks of the module."""
    if isinstance(fn, ast.AsyncFunctionDef):
        project.sink.error("DAGC108", f"async DAG function `{fn.name}` is not supported", info.source.span(fn),
                           hint="write the DAG function as a plain `def`", fix=plain_def_fix(info.source, fn))
        return fn
    enable_after(info)
    _check_module_tasks(project, info, fn)
    dag_call = next((d for d in fn.decorator_list if isinstance(d, ast.Call)
                     and (found := decorator_form(info, d)) is not None and found[0].kind == "pipeline"), None)
    return _lowered(project, info, fn, fn.name, {}, {}, defaults=dag_defaults(project, info, dag_call))


def scan_with(project: Project, info: ModuleInfo, node: ast.With) -> None:
    """`with DAG(dag_id=...) as dag:` at module level: a pipeline named after the DAG's id (or the variable),
    its body lowered as a `@dag` function's. The tasks and functions defined in the block are the module's."""
    from dagc.frontend.dialects.airflow_with import dag_function

    found = dag_function(project, info, node)
    if found is None:
        return
    fn, variable, dag_call = found
    for group in (s for s in node.body if isinstance(s, ast.FunctionDef) and _is_group(info, s)):
        if variable is None:  # (the programs find a group's tasks in the DAG the module binds)
            project.sink.error("DAGC108", f"task group `{group.name}` in a DAG block that binds no name",
                               info.source.span(group), hint=f"bind the DAG: `with DAG(...) as dag:`; {_HINT}")
    enable_after(info)
    _check_module_tasks(project, info, fn)
    body = _lowered(project, info, fn, "", {}, {}, dag_variable=variable,
                    defaults=dag_defaults(project, info, dag_call))
    info.pipelines[fn.name] = PipelineDef(fn.name, info.name, FunctionSig.of(fn), body, info.source,
                                          weakref.ref(info), dialect="airflow")


def _lowered(project: Project, info: ModuleInfo, fn: ast.FunctionDef, qualname: str, outer: dict[str, str],
             outer_callables: dict[str, PlainFunction], dag_variable: str | None = None,
             defaults: dict[str, object] | None = None, group: bool = False) -> ast.FunctionDef:
    """`fn` (a DAG function, or a task group in one, named `qualname` as Python names it; "" for a `with DAG`
    block, whose definitions are the module's) in dagc's forms; `outer`: the tasks and groups of the functions
    it is defined in, by the names its body may use for them; `outer_callables`: their plain functions;
    `dag_variable`: the name a `with DAG(...) as dag:` block binds (its `dag.add_result(x)` is the result);
    `defaults`: the TaskOptions fields the DAG's `default_args` give each task that does not set its own."""
    defaults = defaults or {}
    lowered = copy_function(fn)
    assert isinstance(lowered, ast.FunctionDef)
    tasks, callables = _nested_tasks(project, info, fn, lowered, qualname, outer, outer_callables, defaults)
    nested = {**outer, **tasks}
    local = bound_names(lowered) - set(nested)
    body = [_Renamer(nested).visit(stmt) for stmt in lowered.body]
    rewriter = _DagRewriter(project, info, local, {**outer_callables, **callables}, dag_variable, defaults)
    body = [new for stmt in body if (new := rewriter.visit(stmt)) is not None]
    ordering = Ordering(project, info, rewriter.junctions)
    body = ordering.statements(body)
    if group and any(m.branch for m in rewriter.calls.values()):
        unsupported(project, info, fn, "a branch task in a task group", f"branch in the DAG's own body; {_HINT}")
    elif not group:
        if any(m.branch for m in rewriter.calls.values()):
            _check_no_group_calls(project, info, body,
                                  {s for s in nested.values() if isinstance(info.symbols.get(s), PipelineDef)})
        body = lower_branches(project, info, body, rewriter.calls, rewriter.junction_meta, ordering.edges)
    # (a task defined in a DAG function has its DAG's defaults in its definition; one of the module, a `with DAG`
    # block's included, gets them at each call)
    apply_at_calls(project, info, body, defaults, {s for s in nested.values() if ".<locals>." in s})
    if rewriter.result is not None:
        body.append(ast.copy_location(ast.Return(ast.Name(rewriter.result, ast.Load())), body[-1] if body else fn))
    lowered.body = body or [ast.copy_location(ast.Pass(), fn)]
    return lowered


def _check_no_group_calls(project: Project, info: ModuleInfo, body: list[ast.stmt], groups: set[str]) -> None:
    """Report each call of a task group (by its symbol, one of `groups`) in the body of a DAG that branches: the
    group's tasks are not in the graph branching reads, so no branch would skip them as Airflow does."""
    for node in (n for stmt in body for n in ast.walk(stmt)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in groups:
            unsupported(project, info, node, "a task group called in a DAG that branches",
                        f"call the group's tasks in the DAG's own body; {_HINT}")


def _nested_tasks(project: Project, info: ModuleInfo, fn: ast.FunctionDef, lowered: ast.FunctionDef,
                  qualname: str, outer: dict[str, str],
                  outer_callables: dict[str, PlainFunction],
                  defaults: dict[str, object]) -> tuple[dict[str, str], dict[str, PlainFunction]]:
    """The `@task` functions and `@task_group`s `fn` defines, as tasks and (inlined) pipelines of the module named
    `qualname.<locals>.name` (their Python qualified name; `name` in a `with DAG` block), and the plain functions
    it hands to operators (`python_callable=`); removed from the rewritten body. Returns ({name in the body:
    symbol}, {name: callable})."""
    found: dict[str, str] = {}
    callables: dict[str, PlainFunction] = {}
    handed = {k.value.id for k in ast.walk(fn) if isinstance(k, ast.keyword) and k.arg == "python_callable"
              and isinstance(k.value, ast.Name)}
    kept: list[ast.stmt] = []
    for stmt, original in zip(lowered.body, fn.body):
        name = f"{qualname}.<locals>.{getattr(original, 'name', '')}" if qualname else getattr(original, "name", "")
        if isinstance(original, ast.FunctionDef) and _is_group(info, original):
            _check_group_closures(project, info, fn, original)
            group = _lowered(project, info, original, name, {**outer, **found}, {**outer_callables, **callables},
                             defaults=defaults, group=True)
            info.symbols[name] = PipelineDef(original.name, info.name, FunctionSig.of(original), group, info.source,
                                             weakref.ref(info), dialect="airflow")
            found[original.name] = name
            continue
        form = _task_decorator(project, info, original)
        if form is None:
            if isinstance(original, ast.FunctionDef) and (original.name in handed or not qualname):
                callables[original.name] = PlainFunction(original, name)
            elif not qualname and isinstance(original, (ast.ClassDef, ast.Import, ast.ImportFrom,
                                                        ast.AsyncFunctionDef)):
                pass  # a definition of the module, written in the `with DAG` block
            else:
                kept.append(stmt)
            continue
        assert isinstance(original, (ast.FunctionDef, ast.AsyncFunctionDef))
        found[original.name] = name
        if not qualname:  # already the module's task (dagc.frontend.scan read the block's definitions), which
            continue  # another DAG of the file may call: the defaults are given at each call (apply_at_calls)
        options, _ = task_options(project, info, form if isinstance(form, ast.Call) else None)
        options = with_defaults(options, written_options(info, original), defaults)
        returns = ast.unparse(original.returns) if original.returns is not None else None
        task = TaskDef(original.name, info.name, name, FunctionSig.of(original), options, returns, original,
                       info.source, dialect="airflow")
        info.tasks[name] = task
        info.symbols[name] = task
    lowered.body = kept
    return found, callables


def _is_group(info: ModuleInfo, fn: ast.FunctionDef) -> bool:
    """`@task_group` (or `@task_group(...)`): a function whose body calls tasks, run inline where it is called."""
    return any(dotted_name(info, d.func if isinstance(d, ast.Call) else d) in _GROUP for d in fn.decorator_list)


def _check_group_closures(project: Project, info: ModuleInfo, fn: ast.FunctionDef, group: ast.FunctionDef) -> None:
    """Report each task of `group` that reads the group's parameters or variables from its closure when `fn`
    calls the group more than once: Airflow makes a task per call, each closing over its call's values, while
    the programs find the task's function by its name, the first call's."""
    if _calls_of(fn, group.name) < 2:
        return
    own = bound_names(group)
    for stmt in group.body:
        if not isinstance(stmt, ast.FunctionDef) or not any(
                (found := decorator_form(info, d)) is not None and found[0].dialect == "airflow"
                and found[0].kind == "task" for d in stmt.decorator_list):
            continue
        read = sorted((free_names(info.source, stmt) or set()) & (own - {stmt.name}))
        if read:
            listed = ", ".join(f"`{r}`" for r in read)
            project.sink.error("DAGC108", f"task `{stmt.name}` reads {listed} of task group `{group.name}`, which "
                               "the DAG calls more than once: each call's task would see the first call's values",
                               info.source.span(stmt), hint=f"make {listed} parameters of the task and pass "
                               f"them where the group calls it (`{stmt.name}(..., {', '.join(read)})`); {_HINT}")


def _calls_of(fn: ast.FunctionDef, name: str) -> int:
    """How many calls of `name` the body of `fn` makes, at least (one in a loop or comprehension counts as two)."""
    count = 0

    def visit(node: ast.AST, repeated: bool) -> None:
        nonlocal count
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id == name:
                count += 2 if repeated else 1
            visit(child, repeated or isinstance(child, (ast.For, ast.AsyncFor, ast.While, ast.ListComp,
                                                        ast.SetComp, ast.DictComp, ast.GeneratorExp)))

    visit(fn, False)
    return count


def _task_decorator(project: Project, info: ModuleInfo, stmt: ast.stmt) -> ast.Call | bool | None:
    """For a nested function decorated as an Airflow task: its decorator call (or True without one); None
    for another statement. A task form dagc does not run (`@task.bash`, `@task.branch`, ...), and a task that
    needs Airflow's run context, is reported."""
    if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    for decorator in stmt.decorator_list:
        found = decorator_form(info, decorator)
        if found is not None and found[0].dialect == "airflow" and found[0].kind == "task":
            if isinstance(stmt, ast.AsyncFunctionDef):
                project.sink.error("DAGC108", f"task `{stmt.name}` is async, which dagc does not run",
                                   info.source.span(stmt), hint=f"write the task as a plain `def`; {_HINT}")
            else:
                check_task_code(project, info, stmt, "task")
            return found[1] if found[1] is not None else True  # type: ignore[return-value]
        name = dotted_name(info, decorator.func if isinstance(decorator, ast.Call) else decorator) or ""
        if name.startswith(("airflow.sdk.task.", "airflow.decorators.task.")):
            project.sink.error("DAGC108", f"`@{name.rpartition('.')[0].rpartition('.')[2]}.{name.rpartition('.')[2]}`"
                               " is not supported: dagc runs Python `@task` functions", info.source.span(decorator),
                               hint=f"write the step as a plain `@task` function; {_HINT}")
            return True
    return None


def _check_module_tasks(project: Project, info: ModuleInfo, fn: ast.FunctionDef) -> None:
    """The module-level `@task` functions the DAG function calls (of its file, or imported from the user's
    modules) that take the run context, or are not Python tasks: reported at their definition."""
    called = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    for stmt in info.source.tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name in called:
            _task_decorator(project, info, stmt)
    for name in sorted(called):
        task = project.lookup(info, name)
        if isinstance(task, TaskDef) and task.dialect == "airflow" and task.module != info.name:
            owner = project.module(task.module)
            if owner is not None:
                _task_decorator(project, owner, task.node)


class _Renamer(ast.NodeTransformer):
    """Points the body's uses of its nested tasks at the tasks' symbols."""

    def __init__(self, nested: dict[str, str]) -> None:
        self.nested = nested

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.nested:
            return ast.copy_location(ast.Name(self.nested[node.id], ast.Load()), node)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return node


class _DagRewriter(ast.NodeTransformer):
    """Rewrites TaskFlow's call forms (`.expand`, `.partial(...).expand`, `.override(...)(...)`) and the classic
    operators (`PythonOperator`, `EmptyOperator`, `op.output`); `dag.add_result(x)` of a `with DAG` block binds
    the DAG's result (`result`); `dag.doc_md = ...` is dropped (documentation, not computation)."""

    def __init__(self, project: Project, info: ModuleInfo, local: set[str], callables: dict[str, PlainFunction],
                 dag_variable: str | None, defaults: dict[str, object]) -> None:
        self.project, self.info, self.local, self.defaults = project, info, local, defaults
        self.callables, self.dag_variable = callables, dag_variable
        self.taken = set(local)
        self.junctions: set[str] = set()  # names bound to an EmptyOperator: they only order
        self.operators: set[str] = set()  # names bound to a PythonOperator's task call
        self.calls: dict[int, TaskMeta] = {}  # id(task call made) -> its Airflow id, trigger rule, whether it branches
        self.junction_meta: dict[str, TaskMeta] = {}  # the same of each junction, by name
        self.rules: dict[int, str] = {}  # id(a task's definition) -> its decorator's trigger rule
        self.uses: dict[str, int] = {}  # a TaskFlow task id -> how many calls took it (Airflow's `id__1`, ...)
        self.result: str | None = None

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return node

    def visit_Assign(self, node: ast.Assign) -> ast.AST | None:
        if all(isinstance(t, ast.Attribute) and t.attr in _DOCS for t in node.targets):
            return None
        target = node.targets[0] if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) else None
        operator = dotted_name(self.info, node.value.func) if isinstance(node.value, ast.Call) else None
        if target is not None and operator in EMPTY_OPERATORS:
            self.junctions.add(target.id)
            assert isinstance(node.value, ast.Call)
            given = next((k.value for k in node.value.keywords if k.arg == "task_id"), None)
            known = isinstance(given, ast.Constant) and isinstance(given.value, str)
            task_id = given.value if known else target.id  # type: ignore[union-attr]
            self.junction_meta[target.id] = TaskMeta(task_id, trigger_rule(self.project, self.info,
                                                                           node.value.keywords), known=known)
            return None
        result = self._add_result(node.value)
        if result is not None and target is not None:
            node.value, self.result = result, target.id
        self.generic_visit(node)
        if target is not None and operator in PYTHON_OPERATORS | BRANCH_OPERATORS:
            self.operators.add(target.id)
        return node

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        result = self._add_result(node.value)
        if result is None:
            return self.generic_visit(node)
        self.result = "_dag_result"
        while self.result in self.taken:
            self.result = "_" + self.result
        self.taken.add(self.result)
        bound = ast.Assign([ast.copy_location(ast.Name(self.result, ast.Store()), node)], result)
        return self.generic_visit(ast.copy_location(bound, node))

    def _add_result(self, expr: ast.expr) -> ast.expr | None:
        """`x` of `dag.add_result(x)` (the DAG's result, Airflow 3), for the block's own `dag`; else None."""
        if self.dag_variable is None or not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)
                                             and expr.func.attr == "add_result"
                                             and isinstance(expr.func.value, ast.Name)
                                             and expr.func.value.id == self.dag_variable):
            return None
        if len(expr.args) != 1 or expr.keywords:
            return unsupported(self.project, self.info, expr, "`add_result` takes one task's result",
                               f"write `{self.dag_variable}.add_result(task_call_or_name)`; {_HINT}")
        return expr.args[0]

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if node.attr == "output" and isinstance(node.value, ast.Name) and node.value.id in self.operators:
            return node.value  # the operator's XCom: what its callable returned
        return self.generic_visit(node)

    def visit_With(self, node: ast.With) -> ast.AST:
        names = [dotted_name(self.info, i.context_expr.func) for i in node.items if isinstance(i.context_expr, ast.Call)]
        if any(n and n.endswith("TaskGroup") for n in names):
            return ast.copy_location(ast.Expr(unsupported(
                self.project, self.info, node, "Airflow's `TaskGroup` is not supported",
                f"call the tasks in the DAG function's body (a `@task_group` function is also a plain call); "
                f"{_HINT}")), node)
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("expand", "expand_kwargs"):
            return self._expand(node, func)
        name = dotted_name(self.info, func) or ""
        if name in PYTHON_OPERATORS | BRANCH_OPERATORS:
            self.generic_visit(node)
            made = python_operator(self.project, self.info, node, self.callables, self._operator_options)
            if isinstance(made, ast.Call) and isinstance(made.func, ast.Name):
                given = next((k.value for k in node.keywords if k.arg == "task_id"), None)
                known = isinstance(given, ast.Constant) and isinstance(given.value, str)
                self.calls[id(made)] = TaskMeta(given.value if known else "",  # type: ignore[union-attr]
                                                trigger_rule(self.project, self.info, node.keywords),
                                                name in BRANCH_OPERATORS, known)
            return made
        if name in LABELS:
            return node  # (a name on an edge, `a >> Label("no") >> b`: shown, not computed)
        if name in EMPTY_OPERATORS:
            return unsupported(self.project, self.info, node, "an `EmptyOperator` that is not bound to a name",
                               f"bind it and order with it: `start = EmptyOperator(task_id=\"start\")`, then "
                               f"`start >> task`; {_HINT}")
        self.generic_visit(node)
        if isinstance(func, ast.Call) and isinstance(func.func, ast.Attribute) and func.func.attr == "override" \
                and is_function_ref(func.func.value, self.local):
            # task ids, pools: not what it computes; its retries and timeout are the call's options
            given, _ = task_options(self.project, self.info, func)
            fields = {k: getattr(given, k) for k in operator_options(func)}
            made = call_of(configured_call(func.func.value, fields, node), node.args, node.keywords, node)
            self._taskflow(made, func.func.value, func.keywords)
            return made
        if name.startswith("airflow.") and name.rpartition(".")[2][:1].isupper():
            return unsupported(self.project, self.info, node,
                               f"Airflow operator `{name.rpartition('.')[2]}` is not supported: dagc compiles "
                               "`@task` functions and `PythonOperator`", f"write the step as a `@task` function; "
                               f"{_HINT}")
        self._taskflow(node, func, [])
        return node

    def _taskflow(self, made: ast.expr, func: ast.expr, overrides: list[ast.keyword]) -> None:
        """Note the Airflow id and trigger rule of `made`, a call of TaskFlow task `func` (a `.override(...)`'s
        `overrides` taking precedence over the decorator's)."""
        task = self.project.lookup(self.info, func.id) if isinstance(func, ast.Name) else None
        if not isinstance(task, TaskDef) or task.dialect != "airflow":
            return
        owner = self.project.module(task.module) or self.info
        found = next((f for d in task.node.decorator_list if (f := decorator_form(owner, d)) is not None), None)
        written = found[1].keywords if found is not None and found[1] is not None else []
        keywords = [*written, *overrides]
        given = next((k.value for k in reversed(keywords) if k.arg == "task_id"), None)
        known = given is None or isinstance(given, ast.Constant) and isinstance(given.value, str)
        core = given.value if given is not None and known else task.node.name  # type: ignore[union-attr]
        count = self.uses.get(core, 0)
        self.uses[core] = count + 1
        branch = any((dotted_name(owner, d.func if isinstance(d, ast.Call) else d) or "").endswith(".task.branch")
                     for d in task.node.decorator_list)
        if any(k.arg == "trigger_rule" for k in overrides):  # read where it is written: the DAG's file
            rule = trigger_rule(self.project, self.info, overrides)
        elif (rule := self.rules.get(id(task.node))) is None:  # (a decorator's rule is read, and reported, once,
            rule = self.rules[id(task.node)] = trigger_rule(self.project, owner, written)  # in its own module)
        self.calls[id(made)] = TaskMeta(f"{core}__{count}" if count else core, rule, branch, known)

    def _operator_options(self, call: ast.Call) -> tuple[TaskOptions, tuple[str, ...]]:
        """An operator's own `retries=`/`execution_timeout=`, and the DAG's defaults for those it does not set."""
        options, after = task_options(self.project, self.info, call)
        return with_defaults(options, operator_options(call), self.defaults), after

    def _expand(self, node: ast.Call, func: ast.Attribute) -> ast.expr:
        """`task.expand(x=xs)`, `task.partial(k=v).expand(x=xs)`: one call per item (several mapped keywords:
        Airflow's cross product, the first keyword outermost)."""
        base, fixed = func.value, []
        if isinstance(base, ast.Call) and isinstance(base.func, ast.Attribute) and base.func.attr == "partial":
            fixed = [ast.keyword(arg=k.arg, value=self.visit(k.value)) for k in base.keywords]
            if base.args or any(k.arg is None for k in base.keywords):
                return unsupported(self.project, self.info, base, "`.partial()` takes keyword arguments only",
                                   f"write `task.partial(y=1).expand(x=items)`; {_HINT}")
            base = base.func.value
        if func.attr == "expand_kwargs" or node.args or not node.keywords or any(k.arg is None for k in node.keywords):
            return unsupported(self.project, self.info, node, f"`.{func.attr}(...)` of this form is not supported",
                               f"map over keyword arguments: `task.expand(x=items)`; {_HINT}")
        if not is_function_ref(base, self.local):
            return unsupported(self.project, self.info, node, "`.expand()` on something that is not a task",
                               f"expand a `@task` function: `task.expand(x=items)`; {_HINT}")
        mapped = [(k.arg or "", Mapped(self.visit(k.value))) for k in node.keywords]
        if len(mapped) == 1:
            made = fan_out(base, [], [(k.arg or "", k.value) for k in fixed] + mapped, node, self.taken)
            self._taskflow(made, base, [])
            return made
        # a cross product: nested generators, the first keyword outermost
        comp = fan_out(base, [], [(k.arg or "", k.value) for k in fixed] + mapped[:1], node, self.taken)
        for keyword, items in mapped[1:]:
            inner = fan_out(base, [], [(keyword, items)], node, self.taken)
            comp.generators.extend(inner.generators)
            assert isinstance(comp.elt, ast.Call)
            comp.elt.keywords.extend(k for k in inner.elt.keywords if k.arg == keyword)  # type: ignore[attr-defined]
        self._taskflow(comp, base, [])
        return comp
