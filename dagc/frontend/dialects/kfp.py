"""Kubeflow Pipelines v2 (`kfp.dsl`): components are tasks, pipelines are pipelines.

A component keeps the parameters a pipeline passes (its `Output[...]`/`OutputPath(...)` parameters are made
by the runtime, `dagc.runtime.dialects.kfp`, and come back among its outputs); a pipeline's body is lowered
into dagc's own forms by `dagc.frontend.dialects.kfp_lower` (`with dsl.ParallelFor` → `for`, `dsl.If` →
`if`, `.output` → the value, `.set_retry(3)` → the call's options, ...). What each form becomes is listed
in docs/dialects.md.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import TYPE_CHECKING

from dagc.frontend.dialects import DECORATORS, RUNS_EVERY_TASK, DecoratorForm, dotted_name

if TYPE_CHECKING:
    from dagc.frontend.modules import ModuleInfo, Project, TaskDef

__all__ = ["refine_task", "pipeline_node", "task_options", "component_outputs", "SINGLE_OUTPUT", "artifact_kind"]

DECORATORS.update({
    f"{package}.{name}": DecoratorForm("kfp", kind)
    for package in ("kfp.dsl", "kfp.v2.dsl")  # (kfp.v2: the 1.8 name, still importable)
    for name, kind in (("component", "task"), ("pipeline", "pipeline"))
})
RUNS_EVERY_TASK.add("kfp")

SINGLE_OUTPUT = "Output"  # what KFP names the return value of a component that returns one value


def artifact_kind(annotation: ast.expr | None) -> str | None:
    """How KFP passes a parameter with this annotation: "output" (`Output[Model]`), "output_path"
    (`OutputPath(str)`), "input_path" (`InputPath("Dataset")`), "input" (`Input[Dataset]`), None (a value)."""
    if isinstance(annotation, ast.Subscript):
        head = _last_name(annotation.value)
        return {"Output": "output", "Input": "input"}.get(head or "")
    if isinstance(annotation, ast.Call):
        head = _last_name(annotation.func)
        return {"OutputPath": "output_path", "InputPath": "input_path"}.get(head or "")
    return None


def _last_name(expr: ast.expr) -> str | None:
    return expr.id if isinstance(expr, ast.Name) else expr.attr if isinstance(expr, ast.Attribute) else None


def _named_tuple_fields(returns: ast.expr | None) -> tuple[str, ...] | None:
    """The fields of `-> NamedTuple("Outputs", [("a", int), ("b", str)])`, else None."""
    if not (isinstance(returns, ast.Call) and _last_name(returns.func) == "NamedTuple" and len(returns.args) == 2):
        return None
    fields = returns.args[1]
    if not isinstance(fields, (ast.List, ast.Tuple)):
        return None
    names = [f.elts[0].value for f in fields.elts
             if isinstance(f, ast.Tuple) and f.elts and isinstance(f.elts[0], ast.Constant)]
    return tuple(n for n in names if isinstance(n, str)) if len(names) == len(fields.elts) else None


def component_outputs(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[tuple[str, ...], bool]:
    """(the names of a component's outputs as KFP names them, whether a call's result is the return value
    itself). A component returning one value and writing no output artifact gives that value; any other
    gives a dict of its outputs by name (the runtime builds it the same way: `component_result`)."""
    returned = _named_tuple_fields(fn.returns)
    names: list[str] = list(returned or ())
    plain = returned is None and fn.returns is not None and not (
        isinstance(fn.returns, ast.Constant) and fn.returns.value is None)
    if plain:
        names.append(SINGLE_OUTPUT)
    args = fn.args
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
        if artifact_kind(arg.annotation) in ("output", "output_path"):
            names.append(arg.arg)
    return tuple(names), plain and len(names) == 1


def refine_task(project: Project, info: ModuleInfo, task: TaskDef) -> TaskDef:
    """A component as a pipeline calls it: without its output parameters, which the runtime makes."""
    from dagc.frontend.modules import FunctionSig

    del project, info
    sig = FunctionSig(tuple(p for p in task.sig.params
                            if artifact_kind(p.node.annotation) not in ("output", "output_path")))
    _, plain = component_outputs(task.node)
    returns = task.returns if plain else None  # a dict of outputs, typed by the component's fields
    options = task.options
    if len(sig.params) < len(task.sig.params):
        # its artifacts' files lie in the run directory that made them, which may be gone when `--cache`
        # would reuse them in a later run: such a component runs anew (`.set_caching_options(True)` reuses)
        options = dataclasses.replace(options, cache=False)
    return dataclasses.replace(task, sig=sig, returns=returns, options=options)


def pipeline_node(project: Project, info: ModuleInfo,
                  fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The pipeline's body lowered into dagc's forms (dagc.frontend.dialects.kfp_lower)."""
    from dagc.frontend.dialects.kfp_lower import lower_pipeline

    try:
        return lower_pipeline(project, info, fn)
    except Exception:  # a bug in dagc: say so, with the traceback, instead of crashing
        import traceback

        from dagc.frontend.source import name_span

        project.sink.error("DAGC900", f"internal compiler error while reading KFP pipeline `{fn.name}`; "
                           "this is a bug in dagc", name_span(info.source, fn),
                           hint="please report it with this input\n" + traceback.format_exc())
        return fn


def task_options(project: Project, info: ModuleInfo, call: ast.Call | None) -> tuple[object, tuple[str, ...]]:
    """`@dsl.component(base_image=..., packages_to_install=[...])`: nothing dagc plans with (the component
    runs in the program's own environment). KFP runs every task of a pipeline, once: none is removed, whether
    or not its result is used (`RUNS_EVERY_TASK`), and as a component is no `pure=True` task, none is merged."""
    from dagc.ir.types import TaskOptions

    del project, info, call
    return TaskOptions(), ()


def kfp_name(info: ModuleInfo, expr: ast.expr) -> str | None:
    """The dotted name `expr` stands for, with `kfp.v2.dsl` read as `kfp.dsl`."""
    name = dotted_name(info, expr)
    return "kfp.dsl." + name.removeprefix("kfp.v2.dsl.") if name and name.startswith("kfp.v2.dsl.") else name


def is_container_component(info: ModuleInfo, fn: ast.AST) -> bool:
    """`@dsl.container_component`: a component that runs a container image, which dagc cannot run."""
    return isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        kfp_name(info, d.func if isinstance(d, ast.Call) else d) == "kfp.dsl.container_component"
        for d in fn.decorator_list)
