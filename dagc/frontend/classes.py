"""Tasks and pipelines written as methods of a class (Metaflow's FlowSpec style).

A class body is read like a module's top level, never executed. A method decorated with
`@dagc.task` or `@dagc.pipeline` must not need an instance: dagc calls a task as `Flow.step(...)`,
so a task is a `@staticmethod` or a `@classmethod` (whose `cls` is the class, as in Python).
A pipeline method may take `self` or `cls`: in its body that name stands for the class and is
used only to reach the class's steps (`self.train(data)`); nothing is ever set on it.
"""

from __future__ import annotations

import ast
import weakref

from dagc.frontend.fix_edits import static_method_fix
from dagc.frontend.modules import ClassSteps, FunctionSig, ModuleInfo, Opaque, PipelineDef, Project, TaskDef

__all__ = ["scan_class", "method_kind"]


def method_kind(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """"static" | "class" | "instance", from the builtin decorators (however they are stacked)."""
    for decorator in fn.decorator_list:
        if isinstance(decorator, ast.Name) and decorator.id == "staticmethod":
            return "static"
        if isinstance(decorator, ast.Name) and decorator.id == "classmethod":
            return "class"
    return "instance"


def _without_receiver(sig: FunctionSig) -> FunctionSig:
    """A class or instance method's signature as its callers see it: without `cls`/`self`."""
    params = list(sig.params)
    if params and params[0].kind in ("positional_only", "positional"):
        params.pop(0)
    return FunctionSig(tuple(params))


def _class_constant(project: Project, info: ModuleInfo, steps: ClassSteps, name: str, value: ast.expr | None,
                    single: bool) -> None:
    """`GENRES = ("a", "b")` in a class body: `Flow.GENRES` / `self.GENRES` fold like a module constant."""
    from dagc.frontend.modules import static_value
    from dagc.frontend.static import NotStatic, is_literal_value

    steps.constants.pop(name, None)
    if value is None or not single:
        return
    try:
        found = static_value(value, info, project)
    except (NotStatic, RecursionError):
        return
    if is_literal_value(found):
        steps.constants[name] = found


def scan_class(project: Project, info: ModuleInfo, node: ast.ClassDef) -> Opaque:
    from dagc.frontend.scan import dagc_decorator_error, decorator_kind, pipeline_priority, task_options

    steps = ClassSteps(node.name, info.name)
    for stmt in node.body:
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
            value = getattr(stmt, "value", None)
            for target in targets:
                if isinstance(target, ast.Name):
                    steps.methods.add(target.id)
                    _class_constant(project, info, steps, target.id, value, len(targets) == 1)
            continue
        if stmt.name == "__init__":
            steps.has_init = True
        found = [(d, k) for d in stmt.decorator_list if (k := decorator_kind(info, d)) is not None]
        if not found:
            steps.methods.add(stmt.name)
            continue
        if len(found) > 1:
            dagc_decorator_error(project, info, stmt, found[1][0])
        _, (kind, call) = found[0]
        qualname = f"{node.name}.{stmt.name}"
        how = method_kind(stmt)
        sig = FunctionSig.of(stmt)
        if how != "static":
            receiver = sig.params[0].name if sig.params and sig.params[0].kind != "keyword_only" else None
            if receiver is None:
                project.sink.error("DAGC133", f"method `{qualname}` has no `self` or `cls` parameter",
                                   info.source.span(stmt.args) if stmt.args.args else info.source.span(stmt),
                                   hint="add @staticmethod if it needs no instance",
                                   fix=static_method_fix(info.source, stmt))
                steps.methods.add(stmt.name)
                continue
            sig = _without_receiver(sig)
        if kind == "task":
            if how == "instance":
                project.sink.error(
                    "DAGC133", f"task `{qualname}` is an instance method: dagc calls a task as "
                    f"`{qualname}(...)`, without an instance, so `{receiver}` would have no value",
                    info.source.span(stmt.args.args[0]),
                    hint="add @staticmethod under @dagc.task (or @classmethod), take what the step needs as "
                    f"arguments and return what it produces instead of setting it on `{receiver}`")
            options, after = task_options(project, info, call)
            returns = ast.unparse(stmt.returns) if stmt.returns is not None else None
            task = TaskDef(stmt.name, info.name, qualname, sig, options, returns, stmt, info.source, after)
            steps.members[stmt.name] = task
            info.tasks[qualname] = task
        else:
            name = qualname
            priority = 0
            for kw in call.keywords if call is not None else ():
                if kw.arg == "name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    name = kw.value.value
                elif kw.arg == "priority":
                    priority = pipeline_priority(project, info, kw.value)
            pipeline = PipelineDef(name, info.name, sig, stmt, info.source, weakref.ref(info), owner=node.name,
                                   receiver=None if how == "static" else receiver, priority=priority)
            steps.members[stmt.name] = pipeline
            info.pipelines[name] = pipeline
    return Opaque("class", node, steps)
