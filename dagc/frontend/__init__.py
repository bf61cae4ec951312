"""Source → IR. Reads the entry script and the user modules it imports; never imports or runs them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dagc.diagnostics import DiagnosticSink
from dagc.frontend.extract import extract_pipeline
from dagc.frontend.modules import PipelineDef, Project
from dagc.frontend.source import name_span
from dagc.ir.core import Graph

__all__ = ["FrontendResult", "compile_source", "list_pipelines"]


class FrontendResult:
    """A graph (or None on errors), every diagnostic, and the sources needed to render them."""

    def __init__(self, graph: Graph | None, sink: DiagnosticSink, sources: dict[str, str]) -> None:
        self.graph = graph
        self.sink = sink
        self.sources = sources



def _all_pipelines(project: Project) -> list[PipelineDef]:
    info = project.load_entry()
    return list(info.pipelines.values()) if info is not None else []


def list_pipelines(path: str | Path) -> list[str]:
    sink = DiagnosticSink()
    project = Project(Path(path), sink, str(path))
    return [p.name for p in _all_pipelines(project)]


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
        pipelines = list(info.pipelines.values())
        chosen: PipelineDef | None = None
        if pipeline_name is not None:
            chosen = info.pipelines.get(pipeline_name)
            if chosen is None:
                sink.error("DAGC004", f"no pipeline named `{pipeline_name}` in {project.entry_display}",
                           None, hint=f"pipelines here: {', '.join(info.pipelines) or 'none'}")
        elif len(pipelines) == 1:
            chosen = pipelines[0]
        elif not pipelines:
            sink.error("DAGC003", f"{project.entry_display} defines no @dagc.pipeline", None,
                       hint="decorate the function that calls your tasks with @dagc.pipeline")
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
