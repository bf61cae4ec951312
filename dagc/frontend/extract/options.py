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

__all__ = ["configured_task"]


def configured_task(calls: Calls, call: ast.Call, scope: Scope, info: ModuleInfo) -> TaskDef | None:
    """The task `call` calls, with the options written at the call; None when `call` is not of these forms."""
    made = call.func
    if not isinstance(made, ast.Call):
        return None
    if isinstance(made.func, ast.Attribute) and made.func.attr == "options" and not made.args:
        written, base = made, _task(calls, made.func.value, scope, info)  # `train.options(...)(x)`
    elif (isinstance(made.func, ast.Call) and len(made.args) == 1 and not made.keywords
          and _is_dagc_task(made.func.func, info)):
        written, base = made.func, _task(calls, made.args[0], scope, info)  # `dagc.task(...)(fn)(x)`
    else:
        return None
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
