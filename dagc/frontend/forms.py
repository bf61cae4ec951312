"""Forms users bring from other tools, and the builtins a glue node may call.

Kubeflow Pipelines configures a step by calling methods on it (`.after()`, `.set_memory_limit()`);
dagc reads the same from the task's options, and its diagnostics name them. Glue nodes may call a
few builtins on task results; a call that only spells a display (`tuple([a, b])`, `dict(k=v)`) is
written as the display, so that emitted code stays lint-clean.
"""

from __future__ import annotations

import ast

__all__ = ["KFP_METHOD_HINTS", "GLUE_CALLS", "as_literal", "kfp_chain", "kfp_hint", "kfp_options"]

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

# the KFP setters that are a task option, and that option's name
_KFP_OPTIONS = {"set_memory_limit": "memory", "set_memory_request": "memory", "set_cpu_limit": "cpus",
                "set_cpu_request": "cpus", "set_gpu_limit": "gpus", "set_accelerator_limit": "gpus",
                "set_retry": "retries"}


def kfp_chain(call: ast.Call) -> list[ast.Call] | None:
    """The Kubeflow setter calls chained on a step, innermost first (`train(x).set_cpu_limit("2")
    .set_memory_limit("650M")`); None when `call` is not one."""
    chain: list[ast.Call] = []
    node: ast.expr = call
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in KFP_METHOD_HINTS:
        chain.append(node)
        node = node.func.value
    return chain[::-1] or None


def _kfp_options(chain: list[ast.Call]) -> tuple[dict[str, str], list[str]]:
    """The dagc options a chain of Kubeflow setters sets ({option: Python literal}), and the hints for the
    setters that are no option."""
    options: dict[str, str] = {}
    others: list[str] = []
    for call in chain:
        attr = call.func.attr  # type: ignore[attr-defined]
        option = _KFP_OPTIONS.get(attr)
        value = call.args[0] if len(call.args) == 1 and not call.keywords else None
        if option is not None and isinstance(value, ast.Constant) and isinstance(value.value, (str, int, float)):
            given = value.value
            if option in ("gpus", "retries") and isinstance(given, str) and given.strip().isdigit():
                given = int(given)
            options[option] = repr(given).replace("'", '"')
        else:
            others.append(KFP_METHOD_HINTS[attr])
    return options, others


def kfp_options(chain: list[ast.Call]) -> dict[str, str] | None:
    """{option: Python literal} for a chain whose every setter is a dagc option; None otherwise."""
    options, others = _kfp_options(chain)
    return None if others else options


def kfp_hint(chain: list[ast.Call], task: str | None) -> str:
    """What to write instead of a chain of Kubeflow setters, with the values the user gave."""
    options, others = _kfp_options(chain)
    parts = []
    if options:
        declared = ", ".join(f"{k}={v}" for k, v in options.items())
        parts.append(f"declare {'them' if len(options) > 1 else 'it'} on the task: `@dagc.task({declared})`"
                     + (f" on `{task}`" if task else ""))
    parts.extend(dict.fromkeys(others))
    return "; ".join(parts)


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
