"""Airflow's classic operators in a DAG body, and what a task's code may not ask of Airflow.

    t = PythonOperator(task_id="t", python_callable=fn, op_args=[a], op_kwargs={"k": v}, retries=2)
                                    →  t = fn(a, k=v)      (a task of its own, with the operator's options)
    t.output                        →  t                   (the callable's return value is its XCom)
    e = EmptyOperator(task_id="e")  →  (nothing: `e` only orders, `a >> e >> b` makes b wait for a)

A callable or `@task` function that takes Airflow's run context (`**context`, a `ti`/`ds`/... parameter), calls
`get_current_context()` or pulls another task's XCom through it is reported at its line: dagc calls the
function with its arguments only.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from dagc.frontend.dialects import dotted_name
from dagc.frontend.dialects.rewrite import unsupported
from dagc.frontend.modules import (
    FunctionSig,
    ImportedModule,
    ImportedName,
    ModuleInfo,
    Opaque,
    Project,
    TaskDef,
)
from dagc.ir.types import TaskOptions

__all__ = ["PlainFunction", "PYTHON_OPERATORS", "BRANCH_OPERATORS", "EMPTY_OPERATORS", "python_operator", "context_params",
           "check_task_code"]

_HINT = "docs/dialects.md (Airflow) lists the forms dagc compiles"
_PROVIDERS = ("airflow.providers.standard.operators", "airflow.operators")
PYTHON_OPERATORS = {f"{m}.python.PythonOperator" for m in _PROVIDERS}
BRANCH_OPERATORS = {f"{m}.python.BranchPythonOperator" for m in _PROVIDERS}  # a PythonOperator that branches
EMPTY_OPERATORS = {f"{m}.empty.EmptyOperator" for m in _PROVIDERS} | {"airflow.operators.dummy.DummyOperator"}
_CURRENT_CONTEXT = {f"{m}.python.get_current_context" for m in _PROVIDERS} | {
    "airflow.sdk.get_current_context", "airflow.sdk.definitions.context.get_current_context"}
# the names Airflow fills from a run's context when a task's function declares them (KNOWN_CONTEXT_KEYS)
_CONTEXT_KEYS = frozenset({
    "asset_state_store", "conn", "dag", "dag_run", "data_interval_end", "data_interval_start", "ds", "ds_nodash",
    "exception", "expanded_ti_count", "inlet_events", "inlets", "logical_date", "macros", "map_index_template",
    "outlet_events", "outlets", "params", "partition_date", "partition_key", "prev_data_interval_end_success",
    "prev_data_interval_start_success", "prev_end_date_success", "prev_start_date_success", "reason", "run_id",
    "task", "task_instance", "task_instance_key_str", "task_reschedule_count", "task_state_store",
    "templates_dict", "test_mode", "ti", "triggering_asset_events", "try_number", "ts", "ts_nodash",
    "ts_nodash_with_tz", "var"})
# PythonOperator keywords that change what the callable receives or how it runs, which dagc does not give
_OPERATOR_UNSUPPORTED = ("templates_dict", "templates_exts", "show_return_value_in_logs", "op_args_template")


@dataclass(frozen=True)
class PlainFunction:
    """A function a DAG body may hand to an operator: its definition and its Python qualified name."""

    node: ast.FunctionDef
    qualname: str
    module: str | None = None  # the user module defining it, when not the DAG's own (`from helpers import fn`)


def context_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The parameters of `fn` Airflow fills from the run's context: `**context`, and those named `ti`, `ds`, ..."""
    args = fn.args
    named = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.arg in _CONTEXT_KEYS]
    return named + ([f"**{args.kwarg.arg}"] if args.kwarg is not None else [])


def check_task_code(project: Project, info: ModuleInfo, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                    what: str) -> bool:
    """Report what in `fn` (a `@task` function or an operator's callable, `what` names it) needs Airflow's run
    context: context parameters at the definition, `get_current_context()` and `.xcom_pull/.xcom_push` calls at
    their lines. True when something was reported."""
    reported = False
    taken = context_params(fn)
    if taken:
        args = fn.args
        kept = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.arg not in _CONTEXT_KEYS]
        listed = ", ".join(f"`{p}`" for p in taken)
        project.sink.error("DAGC108", f"{what} `{fn.name}` takes Airflow's run context ({listed}), which dagc does "
                           "not give", info.source.span(fn),
                           hint=f"remove {listed} from the signature (`def {fn.name}({', '.join(kept)})`) and pass "
                           f"the values the task needs as arguments; {_HINT}")
        reported = True
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        if dotted_name(info, node.func) in _CURRENT_CONTEXT:
            project.sink.error("DAGC108", f"`get_current_context()` in {what} `{fn.name}`: dagc runs the task "
                               "without Airflow's run context", info.source.span(node),
                               hint=f"pass the values the task reads from the context as arguments; {_HINT}")
            reported = True
        elif isinstance(node.func, ast.Attribute) and node.func.attr in ("xcom_pull", "xcom_push"):
            project.sink.error("DAGC108", f"`.{node.func.attr}(...)` in {what} `{fn.name}` goes through Airflow's "
                               "run context, which dagc does not give", info.source.span(node),
                               hint="return the value instead, and give it to the tasks that read it as an argument "
                               f"(`op_args=[upstream.output]`, or a `@task` called with it); {_HINT}")
            reported = True
    return reported


def python_operator(project: Project, info: ModuleInfo, call: ast.Call, callables: dict[str, PlainFunction],
                    options_of: Callable[[ast.Call], tuple[TaskOptions, tuple[str, ...]]]) -> ast.expr:
    """`PythonOperator(task_id=..., python_callable=fn, op_args=[...], op_kwargs={...})` as a call of a task of
    its own (named after a literal `task_id`, its options the operator's `retries=`/`execution_timeout=`).
    `callables`: the functions the DAG body defines, by name; `options_of(call)`: the dagc options of the call."""
    given = {k.arg: k.value for k in call.keywords if k.arg is not None}
    if call.args or any(k.arg is None for k in call.keywords) or "python_callable" not in given:
        return unsupported(project, info, call, "`PythonOperator(...)` of this form is not supported",
                           "give its arguments by keyword: `PythonOperator(task_id=\"t\", python_callable=fn, "
                           f"op_args=[...], op_kwargs={{...}})`; {_HINT}")
    for name in _OPERATOR_UNSUPPORTED:
        if name in given:
            return unsupported(project, info, given[name], f"`{name}=` of `PythonOperator` is not supported: "
                               "dagc gives the callable its `op_args` and `op_kwargs` only",
                               f"pass the values the callable needs in `op_kwargs={{...}}`; {_HINT}")
    found = _callable(project, info, given["python_callable"], callables)
    if found is None:
        return unsupported(project, info, given["python_callable"], "`python_callable=` must name a function "
                           "defined in this file or imported from a module of the project",
                           f"define the function in the DAG file, or import it (`from helpers.etl import extract`), "
                           f"and pass it by name; {_HINT}")
    owner = project.module(found.module) if found.module is not None else info
    assert owner is not None
    if check_task_code(project, owner, found.node, "callable"):
        return ast.copy_location(ast.Constant(None), call)
    args: list[ast.expr] = []
    keywords: list[ast.keyword] = []
    op_args, op_kwargs = given.get("op_args"), given.get("op_kwargs")
    if op_args is not None:
        if not isinstance(op_args, (ast.List, ast.Tuple)):
            return unsupported(project, info, op_args, "`op_args=` must be a list written in the call",
                               f"write `op_args=[a, b]`; {_HINT}")
        args = list(op_args.elts)
    if op_kwargs is not None:
        if not isinstance(op_kwargs, ast.Dict) or not all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                                          for k in op_kwargs.keys):
            return unsupported(project, info, op_kwargs, "`op_kwargs=` must be a dict of string keys written in "
                               "the call", f"write `op_kwargs={{\"key\": value}}`; {_HINT}")
        keywords = [ast.keyword(arg=k.value, value=v)  # type: ignore[union-attr]
                    for k, v in zip(op_kwargs.keys, op_kwargs.values)]
    for value in (*args, *(k.value for k in keywords)):
        template = next((n for n in ast.walk(value) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                         and "{{" in n.value), None)
        if template is not None:
            return unsupported(project, info, template, "a Jinja template in an operator's arguments: Airflow "
                               "renders it from the run's context, which dagc does not give",
                               f"pass the value itself; {_HINT}")
    task_id = given.get("task_id")
    name = task_id.value if isinstance(task_id, ast.Constant) and isinstance(task_id.value, str) \
        and task_id.value.isidentifier() else found.node.name
    options, _ = options_of(call)
    returns = ast.unparse(found.node.returns) if found.node.returns is not None else None
    task = TaskDef(name, owner.name, found.qualname, FunctionSig.of(found.node), options, returns, found.node,
                   owner.source, dialect="airflow")
    where = f"{owner.name}." if owner is not info else ""
    symbol = f"{where}{found.qualname}·{call.lineno}:{call.col_offset}"  # one task per operator: its own options
    info.tasks[symbol] = task
    info.symbols[symbol] = task
    func = ast.copy_location(ast.Name(symbol, ast.Load()), call)
    return ast.copy_location(ast.Call(func=func, args=args, keywords=keywords), call)


def _callable(project: Project, info: ModuleInfo, expr: ast.expr,
              callables: dict[str, PlainFunction]) -> PlainFunction | None:
    """The function `python_callable=` names: defined in the DAG body, at the module's top level, or in another
    module of the user's that the file imports it from (`from helpers.etl import extract`, `etl.extract`)."""
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        module = project.lookup(info, expr.value.id)  # (`from helpers import etl` names a module too)
        if isinstance(module, ImportedModule):
            return _imported(project, module.module, expr.attr)
        return None
    if not isinstance(expr, ast.Name):
        return None
    if expr.id in callables:
        return callables[expr.id]
    return _top_level(project, info, expr.id, own=True)


def _imported(project: Project, module: str, name: str) -> PlainFunction | None:
    """The function `name` defined at the top level of user module `module` (followed through its imports)."""
    owner = project.module(module)
    return _top_level(project, owner, name, own=False) if owner is not None else None


def _top_level(project: Project, owner: ModuleInfo, name: str, own: bool) -> PlainFunction | None:
    """The function `name` of module `owner` (followed through its imports); `own`: `owner` is the DAG's file."""
    symbol = owner.symbols.get(name)
    module = None if own else owner.name
    if isinstance(symbol, ImportedName):
        return _imported(project, symbol.module, symbol.name)
    if isinstance(symbol, Opaque) and isinstance(symbol.node, ast.FunctionDef):
        return PlainFunction(symbol.node, symbol.node.name, module)
    if isinstance(symbol, TaskDef) and symbol.module == owner.name and isinstance(symbol.node, ast.FunctionDef):
        return PlainFunction(symbol.node, symbol.qualname, module)  # (a `@task`'s own: Airflow calls it undecorated)
    return None
