"""An Airflow task's options dagc has an equivalent for (`retries=`, `execution_timeout=timedelta(...)`, a
timeout), written on the task or in a DAG's `default_args={...}`: the options every task of the DAG takes unless
it sets its own, as Airflow gives them to each operator made in the DAG.

    @dag(default_args={"retries": 2, "execution_timeout": timedelta(minutes=5), "owner": "ml"})
        → each task without its own `retries=`/`execution_timeout=` runs with retries=2, a timeout of 300 s

A task defined for this DAG (in its `@dag` function, or a `PythonOperator`) gets the options in its
definition; a task of the module (at its top level, in a `with DAG(...)` block, or in another module), which
other DAGs may call too, gets them at the call: `t(x)` becomes dagc's per-call form `t.options(retries=2)(x)`. Keys that do not change what a run computes
(`owner`, `email*`, `retry_delay`, `depends_on_past`, `start_date`) are read and ignored; any other key is
named in one warning at its line.
"""

from __future__ import annotations

import ast
import dataclasses

from dagc.frontend.dialects import decorator_form, dotted_name
from dagc.frontend.modules import ModuleInfo, Project, TaskDef, static_option_value
from dagc.frontend.static import NotStatic
from dagc.ir.types import TaskOptions

__all__ = ["task_options", "duration", "dag_defaults", "written_options", "operator_options", "with_defaults", "apply_at_calls",
           "configured_call"]

_HINT = "docs/dialects.md (Airflow) lists the forms dagc compiles"
_TIMEDELTA = {"datetime.timedelta", "pendulum.duration"}
_SECONDS = {"weeks": 604800, "days": 86400, "hours": 3600, "minutes": 60, "seconds": 1, "milliseconds": 1e-3,
            "microseconds": 1e-6}
# default_args keys that change nothing in what a run computes (who owns it, whom to mail, when to start)
_IGNORED = frozenset({"owner", "retry_delay", "depends_on_past", "start_date", "end_date",
                      "retry_exponential_backoff", "max_retry_delay"})
# Airflow's option name -> the TaskOptions field it fills
_APPLIED = {"retries": "retries", "execution_timeout": "timeout"}


def duration(project: Project, info: ModuleInfo, expr: ast.expr) -> float | None:
    """Seconds of `timedelta(minutes=5)` / `pendulum.duration(hours=1)` (keywords of literals), else None."""
    if not isinstance(expr, ast.Call) or dotted_name(info, expr.func) not in _TIMEDELTA or expr.args:
        return None
    total = 0.0
    for keyword in expr.keywords:
        try:
            value = static_option_value(keyword.value, info, project)
        except NotStatic:
            return None
        if keyword.arg not in _SECONDS or not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        total += value * _SECONDS[keyword.arg]
    return total


def task_options(project: Project, info: ModuleInfo, call: ast.Call | None) -> tuple[TaskOptions, tuple[str, ...]]:
    """The dagc options of `@task(...)` (or of an operator, or `.override(...)`): `retries=` and
    `execution_timeout=`; the others (task ids, pools, queues, retry delays, `multiple_outputs=`) change nothing
    in what the task computes."""
    given: dict[str, object] = {}
    for keyword in call.keywords if call is not None else ():
        if keyword.arg in _APPLIED:
            found = _read_option(project, info, keyword.arg, keyword.value, in_defaults=False)
            if found is not None:
                given[found[0]] = found[1]
    return TaskOptions(**given), ()  # type: ignore[arg-type]


def _read_option(project: Project, info: ModuleInfo, key: str, value: ast.expr,
                 in_defaults: bool) -> tuple[str, object] | None:
    """The TaskOptions field and value of Airflow option `key` (`retries` or `execution_timeout`) written as
    `value` on a task or (`in_defaults`) in `default_args`; None for a timeout of zero (none) and, reported at
    its line, for a value not known at compile time."""
    if key == "retries":
        try:
            number = static_option_value(value, info, project)
        except NotStatic:
            number = None
        if isinstance(number, int) and not isinstance(number, bool) and number >= 0:
            return "retries", number
        what, example = ("`retries` of `default_args`", '`"retries": 3`') if in_defaults \
            else ("`retries=` of an Airflow task", "`@task(retries=3)`")
        project.sink.error("DAGC109", f"{what} must be a whole number known at compile time",
                           info.source.span(value), hint=f"write a literal: {example}")
        return None
    seconds = duration(project, info, value)
    if seconds is None:
        what, example = ("`execution_timeout` of `default_args`", '`"execution_timeout": timedelta(minutes=10)`') \
            if in_defaults else ("`execution_timeout=`", "`execution_timeout=timedelta(minutes=10)`")
        project.sink.error("DAGC109", f"{what} must be a `timedelta(...)` of literals", info.source.span(value),
                           hint=f"write {example}")
        return None
    return ("timeout", seconds) if seconds > 0 else None


def dag_defaults(project: Project, info: ModuleInfo, call: ast.Call | None) -> dict[str, object]:
    """The TaskOptions fields `default_args=` of the DAG call `call` gives every task (`{"retries": 2}`)."""
    given = next((k.value for k in call.keywords if k.arg == "default_args"), None) if call is not None else None
    if given is None:
        return {}
    entries = _entries(info, given)
    if entries is None:
        project.sink.warning("DAGC124", "`default_args=` that dagc cannot read at compile time is ignored",
                             info.source.span(given), hint="write a dict literal (or a module-level dict constant "
                             f"of literals): `default_args={{\"retries\": 2}}`; {_HINT}")
        return {}
    out: dict[str, object] = {}
    for key, value, at in entries:
        if key in _IGNORED or key.startswith("email"):
            continue
        if key in _APPLIED:
            found = _read_option(project, info, key, value, in_defaults=True)
            if found is not None:
                out[found[0]] = found[1]
        else:
            project.sink.warning("DAGC124", f"`default_args` key `{key}` is ignored by dagc", info.source.span(at),
                                 hint="dagc applies `retries` and `execution_timeout` to every task, and reads the "
                                 f"keys that change nothing in what a run computes (`owner`, `email`, ...); {_HINT}")
    return out


def _entries(info: ModuleInfo, expr: ast.expr) -> list[tuple[str, ast.expr, ast.AST]] | None:
    """(key, value, where the key is written) of a dict literal, a `dict(k=v)` call, or a name bound to one
    at the module's top level; None for anything else."""
    if isinstance(expr, ast.Name):
        bound = [s.value for s in info.source.tree.body if isinstance(s, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == expr.id for t in s.targets)]
        if len(bound) != 1:
            return None
        expr = bound[0]
    if isinstance(expr, ast.Dict):
        if not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in expr.keys):
            return None
        return [(k.value, v, k) for k, v in zip(expr.keys, expr.values)]  # type: ignore[union-attr]
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "dict" and not expr.args \
            and info.symbols.get("dict") is None and all(k.arg is not None for k in expr.keywords):
        return [(k.arg, k.value, k) for k in expr.keywords]  # type: ignore[misc]
    return None


def written_options(info: ModuleInfo, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The TaskOptions fields a `@task(...)` function's decorator sets itself."""
    for decorator in fn.decorator_list:
        found = decorator_form(info, decorator)
        if found is not None and found[0].dialect == "airflow" and found[1] is not None:
            return {_APPLIED[k.arg] for k in found[1].keywords if k.arg in _APPLIED}
    return set()


def operator_options(call: ast.Call) -> set[str]:
    """The TaskOptions fields an operator call (`PythonOperator(retries=3)`) or `.override(...)` sets itself."""
    return {_APPLIED[k.arg] for k in call.keywords if k.arg in _APPLIED}


def with_defaults(options: TaskOptions, written: set[str], defaults: dict[str, object]) -> TaskOptions:
    """`options` with each default the task does not set itself."""
    missing = {k: v for k, v in defaults.items() if k not in written}
    return dataclasses.replace(options, **missing) if missing else options  # type: ignore[arg-type]


def _option_keywords(fields: dict[str, object], where: ast.AST) -> list[ast.keyword]:
    return [ast.keyword(arg=k, value=ast.copy_location(ast.Constant(v), where)) for k, v in sorted(fields.items())]


def apply_at_calls(project: Project, info: ModuleInfo, body: list[ast.stmt], defaults: dict[str, object],
                   own: set[str]) -> None:
    """Give each call in `body` of an Airflow task defined outside this DAG (its symbol not in `own`) the
    defaults its decorator does not set, as dagc's per-call options: `t(x)` → `t.options(retries=2)(x)`."""
    if not defaults:
        return
    for node in (n for stmt in body for n in ast.walk(stmt)):
        if not isinstance(node, ast.Call):
            continue
        configured = node.func if isinstance(node.func, ast.Call) and isinstance(node.func.func, ast.Attribute) \
            and node.func.func.attr == "options" else None  # `t.options(...)(x)` from `t.override(retries=1)(x)`
        named = configured.func.value if configured is not None else node.func  # type: ignore[union-attr]
        if not isinstance(named, ast.Name) or named.id in own or "·" in named.id:
            continue
        task = project.lookup(info, named.id)
        if not isinstance(task, TaskDef) or task.dialect != "airflow":
            continue
        written = written_options(project.module(task.module) or info, task.node)  # (read where it is defined)
        if configured is not None:
            written |= {k.arg for k in configured.keywords if k.arg is not None}
        fields = {k: v for k, v in defaults.items() if k not in written}
        if not fields:
            continue
        if configured is not None:
            configured.keywords.extend(_option_keywords(fields, node))
        else:
            options = ast.copy_location(ast.Attribute(node.func, "options", ast.Load()), node.func)
            node.func = ast.copy_location(ast.Call(options, [], _option_keywords(fields, node)), node.func)


def configured_call(func: ast.expr, fields: dict[str, object], where: ast.AST) -> ast.expr:
    """`func.options(**fields)` (dagc's per-call options), or `func` itself without fields."""
    if not fields:
        return func
    options = ast.copy_location(ast.Attribute(func, "options", ast.Load()), func)
    return ast.copy_location(ast.Call(options, [], _option_keywords(fields, where)), func)
