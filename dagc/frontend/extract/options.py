"""A task called with options for that one call: `dagc.task(retries=5)(fn)(x)`, and Ray's form
`train.options(retries=5, gpus=1)(x)`. The options given replace the decorator's for that call; at run time
both forms call the function itself (dagc.annotations)."""

from __future__ import annotations

import ast
import dataclasses
from typing import TYPE_CHECKING

from dagc.annotations import TASK_OPTIONS
from dagc.frontend.extract.values import Callee, Scope
from dagc.frontend.modules import ModuleInfo, TaskDef

if TYPE_CHECKING:
    from dagc.frontend.extract.calls import Calls

__all__ = ["configured_callee", "configured_task"]


def configured_callee(func: ast.expr, info: ModuleInfo) -> tuple[ast.Call, ast.expr] | None:
    """For the callee of a call in one of these forms, (the call writing the options, the expression naming the
    task); None otherwise. Only the form is read, so that asking has no effect."""
    if not isinstance(func, ast.Call):
        return None
    if isinstance(func.func, ast.Attribute) and func.func.attr == "options" and not func.args:
        return func, func.func.value  # `train.options(...)(x)`
    if (isinstance(func.func, ast.Call) and len(func.args) == 1 and not func.keywords
            and _is_dagc_task(func.func.func, info)):
        return func.func, func.args[0]  # `dagc.task(...)(fn)(x)`
    return None


def configured_task(calls: Calls, call: ast.Call, scope: Scope, info: ModuleInfo) -> TaskDef | None:
    """The task `call` calls, with the options written at the call; None when `call` is not of these forms."""
    form = configured_callee(call.func, info)
    if form is None:
        return None
    written, named = form
    base = _task(calls, named, scope, info)
    if base is None:
        return None
    from dagc.frontend.scan import task_options

    given, after = task_options(calls.cx.project, info, written)
    names = [k.arg for k in written.keywords if k.arg in TASK_OPTIONS and k.arg != "after"]
    options = dataclasses.replace(base.options, **{name: getattr(given, name) for name in names})
    key = (id(base), options, base.after + after)
    made = calls.cx.configured_tasks.get(key)
    if made is None:  # (a new object per call could take the id of one freed before, and its effects)
        made = calls.cx.configured_tasks[key] = dataclasses.replace(base, options=options, after=key[2])
    return made


def _task(calls: Calls, expr: ast.expr, scope: Scope, info: ModuleInfo) -> TaskDef | None:
    """The task (or plain function of the user's, which a pipeline calls as a task) `expr` names."""
    if isinstance(expr, (ast.Name, ast.Attribute)):
        callee = calls._callee(expr, scope, info)
        if isinstance(callee, Callee) and isinstance(callee.symbol, TaskDef):
            return callee.symbol
        return calls._plain_function(expr, scope, info)
    return None


def _is_dagc_task(func: ast.expr, info: ModuleInfo) -> bool:
    """`dagc.task` (however dagc was imported) or `task` imported from dagc."""
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return func.attr == "task" and func.value.id in info.dagc_modules
    return isinstance(func, ast.Name) and info.dagc_names.get(func.id) == "task"
