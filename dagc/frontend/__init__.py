"""Source → IR. Reads the entry script and the user modules it imports; never imports or runs them."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from dagc.diagnostics import DiagnosticSink
from dagc.fixes import Fix
from dagc.frontend.extract import extract_pipeline
from dagc.frontend.fix_edits import import_dagc_fix, pipeline_decorator_fix
from dagc.frontend.modules import ModuleInfo, PipelineDef, Project
from dagc.frontend.source import name_span
from dagc.ir.core import Graph
from dagc.ir.location import SourceSpan

__all__ = ["FrontendResult", "compile_source", "list_pipelines"]


class FrontendResult:
    """A graph (or None on errors), every diagnostic, and the sources needed to render them."""

    def __init__(self, graph: Graph | None, sink: DiagnosticSink, sources: dict[str, str]) -> None:
        self.graph = graph
        self.sink = sink
        self.sources = sources



def _all_pipelines(project: Project) -> list[PipelineDef]:
    info = project.load_entry()
    return _entry_pipelines(info) if info is not None else []


def _entry_pipelines(info: ModuleInfo) -> list[PipelineDef]:
    """The module's pipelines, less another framework's sub-pipelines (a Prefect subflow, a KFP graph component)
    that one of them calls: those run inside their caller, as in their framework, and often take arguments
    without defaults (so the one pipeline no other calls is compiled by default)."""
    if all(p.dialect is None for p in info.pipelines.values()):  # (dagc's own: no walk of the bodies)
        return list(info.pipelines.values())
    called = {n.func.id for p in info.pipelines.values() for n in ast.walk(p.node)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id != p.name}
    return [p for p in info.pipelines.values() if p.dialect is None or p.name not in called]


def _decorator_without_import(info: ModuleInfo) -> SourceSpan | None:
    """Where the first `@dagc.task`/`@dagc.pipeline` decorator is when the module never binds `dagc`."""
    import ast

    tree = info.source.tree
    for node in ast.walk(tree):  # `import dagc`, `import dagc.x`, `import something as dagc`, `dagc = ...`
        if isinstance(node, ast.Import) and any((a.asname or a.name.split(".")[0]) == "dagc" for a in node.names):
            return None
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "dagc" for t in node.targets):
            return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                        and target.value.id == "dagc":
                    return info.source.span(decorator)
    return None


def _where_a_pipeline_belongs(info: ModuleInfo) -> tuple[SourceSpan | None, str, Fix | None]:
    """Point DAGC003 at the first task (or the first flow class), with the form that is missing (and the fix
    that adds it, when one function calls the tasks)."""
    import ast

    for stmt in info.source.tree.body:
        if isinstance(stmt, ast.ClassDef) and any(
                isinstance(d, ast.Name) and d.id == "step" or isinstance(d, ast.Attribute) and d.attr == "step"
                for f in stmt.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                for d in f.decorator_list):
            if stmt.bases:  # (a flow class of the user's own modules would have made it a flow)
                return name_span(info.source, stmt), (
                    f"a Metaflow flow derives from metaflow.FlowSpec, directly or through flow classes of your own "
                    f"modules; dagc does not find `{ast.unparse(stmt.bases[0])}` among them: derive it from "
                    "metaflow.FlowSpec (`from metaflow import FlowSpec`), or keep the base in a module next to the "
                    "script"), None
            return name_span(info.source, stmt), (
                f"a Metaflow flow derives from metaflow.FlowSpec: write `class {stmt.name}(FlowSpec):` after "
                "`from metaflow import FlowSpec, step`, and dagc compiles it as it is; or, without Metaflow, "
                "decorate each step with @dagc.task and @staticmethod (taking its inputs as arguments, returning its "
                "outputs), and the method that calls the steps in order with @dagc.pipeline"), None
    caller = _calls_the_tasks(info)
    if caller is not None:
        return name_span(info.source, caller), (
            f"decorate `{caller.name}`, which calls the tasks, with @dagc.pipeline (write `@dagc.pipeline` on the "
            f"line above `def {caller.name}(`)"), pipeline_decorator_fix(info, caller)
    first = next(iter(info.tasks.values()), None)
    if first is not None:
        return name_span(first.source, first.node), (
            "decorate the function that calls your tasks with @dagc.pipeline (a module-level function, or a "
            "method of a class)"), None
    return None, "decorate the function that calls your tasks with @dagc.pipeline", None


def _calls_the_tasks(info: ModuleInfo) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The undecorated function (module-level, or a method) that calls the most of the module's tasks: the
    one that looks like the pipeline; the first such on a tie, None when no function calls a task."""
    tasks = set(info.tasks)
    candidates = [s for s in info.source.tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    candidates += [f for c in info.source.tree.body if isinstance(c, ast.ClassDef) for f in c.body
                   if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    best, best_count = None, 0
    for fn in sorted(candidates, key=lambda f: f.lineno):
        if fn.name in tasks:
            continue
        called = {_called_name(n.func) for n in ast.walk(fn) if isinstance(n, ast.Call)} & tasks
        if len(called) > best_count:
            best, best_count = fn, len(called)
    return best


def _called_name(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def list_pipelines(path: str | Path, *, given: frozenset[str] | None = None) -> list[str]:
    """The pipelines of `path`; with `given` (the names of --param), only those that can be compiled on their
    own: a sub-pipeline that another pipeline of the file calls, with a parameter that has no default and is not
    given, receives its arguments from its caller and is checked there."""
    from dagc.ir.serialize import no_gc

    sink = DiagnosticSink()
    project = Project(Path(path), sink, str(path))
    with no_gc():  # the parse is kept for the compile that follows (see compile_source)
        pipelines = _all_pipelines(project)
        if given is None or len(pipelines) < 2:  # (one pipeline is called by no other)
            return [p.name for p in pipelines]
        called = {_called_name(n.func) for p in pipelines for n in ast.walk(p.node) if isinstance(n, ast.Call)}
        return [p.name for p in pipelines if p.node.name not in called or all(
            q.default is not None or q.name in given or q.kind in ("var_positional", "var_keyword")
            for q in p.sig.params)]


def compile_source(
    path: str | Path,
    *,
    pipeline_name: str | None = None,
    params: dict[str, Any] | None = None,
    sink: DiagnosticSink | None = None,
) -> FrontendResult:
    """Extract one pipeline of `path` into an IR graph. Errors are collected, not raised."""
    from dagc.ir.serialize import no_gc

    # parsing and extraction build millions of acyclic objects for a large pipeline; the cyclic
    # collector only costs time here (a third of it at 100k tasks)
    with no_gc():
        return _compile_source(path, pipeline_name, params, sink)


def _compile_source(path: str | Path, pipeline_name: str | None, params: dict[str, Any] | None,
                    sink: DiagnosticSink | None) -> FrontendResult:
    sink = sink or DiagnosticSink()
    project = Project(Path(path), sink, str(path))
    info = project.load_entry()
    graph: Graph | None = None
    if info is not None:
        pipelines = _entry_pipelines(info)
        chosen: PipelineDef | None = None
        if pipeline_name is not None:
            chosen = info.pipelines.get(pipeline_name)
            if chosen is None:
                sink.error("DAGC004", f"no pipeline named `{pipeline_name}` in {project.entry_display}",
                           None, hint=f"pipelines here: {', '.join(info.pipelines) or 'none'}")
        elif len(pipelines) == 1:
            chosen = pipelines[0]
        elif not pipelines:
            unimported = _decorator_without_import(info)
            if unimported is not None:  # the decorators are there, but `dagc` names nothing in the module
                sink.error("DAGC003", f"{project.entry_display} uses `@dagc...` decorators but does not import dagc",
                           unimported, hint="add `import dagc` at the top of the file (the script then also runs as "
                           "plain Python)", fix=import_dagc_fix(info.source))
            else:
                where, hint, fix = _where_a_pipeline_belongs(info)
                sink.error("DAGC003", f"{project.entry_display} defines no @dagc.pipeline", where, hint=hint, fix=fix)
        else:
            sink.error("DAGC004", f"{project.entry_display} defines {len(pipelines)} pipelines; choose one",
                       name_span(info.source, pipelines[1].node),
                       hint=f"pass --pipeline NAME, one of: {', '.join(info.pipelines)}")
        if chosen is not None:
            try:
                graph = extract_pipeline(project, chosen, sink, params)
            except RecursionError:
                graph = None
                sink.error("DAGC001", f"{project.entry_display}: pipeline `{chosen.name}` is nested too deeply "
                           "to compile", name_span(info.source, chosen.node),
                           hint="flatten the deepest expression or block")
            except Exception:  # a bug in dagc: say so, with the traceback, instead of crashing
                import traceback

                graph = None
                sink.error("DAGC900", "internal compiler error while extracting pipeline "
                           f"`{chosen.name}`; this is a bug in dagc",
                           name_span(info.source, chosen.node),
                           hint="please report it with this input\n" + traceback.format_exc())
    return FrontendResult(graph, sink, dict(project.sources))
