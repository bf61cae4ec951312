"""Forms users bring from other tools, and the builtins a glue node may call.

Kubeflow Pipelines configures a step by calling methods on it (`.after()`, `.set_memory_limit()`);
dagc reads the same from the task's options, and its diagnostics name them. Glue nodes may call a
few builtins on task results; a call that only spells a display (`tuple([a, b])`, `dict(k=v)`) is
written as the display, so that emitted code stays lint-clean.
"""

from __future__ import annotations

import ast

__all__ = ["KFP_METHOD_HINTS", "GLUE_CALLS", "as_literal"]

# Kubeflow Pipelines configures a step by calling methods on it; dagc reads the same from the task.
KFP_METHOD_HINTS: dict[str, str] = {
    "after": "order a call without a data dependency with `x = dagc.after(train(data), prepared)`, "
    "or `@dagc.task(after=[\"prepare\"])`",
    "set_memory_limit": "declare it on the task: `@dagc.task(memory=\"4Gi\")`",
    "set_memory_request": "declare it on the task: `@dagc.task(memory=\"4Gi\")`",
    "set_cpu_limit": "declare it on the task: `@dagc.task(cpus=\"500m\")`",
    "set_cpu_request": "declare it on the task: `@dagc.task(cpus=\"500m\")`",
    "set_gpu_limit": "declare it on the task: `@dagc.task(gpus=1)`",
    "set_accelerator_limit": "declare it on the task: `@dagc.task(gpus=1)`",
    "set_retry": "declare it on the task: `@dagc.task(retries=3)`",
    "set_caching_options": "dagc caches every task by fingerprint in the run directory (docs/runtime.md); "
    "mark a task that acts on the world with `@dagc.task(side_effects=True)`",
    "set_display_name": "the node is named after the task; rename the function or the pipeline",
}


# builtins a glue node may call on task results: they build or read values and call no user code
# beyond the values' own protocols (`str(x)` calls `x.__str__`, as plain Python would)
GLUE_CALLS = frozenset({"len", "str", "int", "float", "bool", "list", "tuple", "dict", "sorted", "min", "max",
                        "sum", "abs", "round"})


def as_literal(call: ast.Call) -> ast.expr | None:
    """The display a builtin call means: `tuple([a, b])` → `(a, b)`, `dict(k=v)` → `{'k': v}`."""
    name = call.func.id if isinstance(call.func, ast.Name) else None
    if name in ("tuple", "list") and len(call.args) == 1 and not call.keywords and isinstance(
            call.args[0], (ast.List, ast.Tuple)) and not any(isinstance(x, ast.Starred) for x in call.args[0].elts):
        return (ast.Tuple if name == "tuple" else ast.List)(list(call.args[0].elts), ast.Load())
    if name == "dict" and not call.args and all(k.arg is not None for k in call.keywords):
        return ast.Dict([ast.Constant(k.arg) for k in call.keywords], [k.value for k in call.keywords])
    return None
