"""The compile driver: input file → IR graph → passes. Shared by the CLI and `dagc.compile()`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from dagc.diagnostics import CompileError, Diagnostic, DiagnosticSink
from dagc.ir.core import Graph
from dagc.passes.base import PassContext, PassManager, PassSpecError, Remark, parse_pipeline, registry

__all__ = ["Compilation", "compile_file", "load_input", "default_pipeline", "find_pyproject"]

BASE_PIPELINE = "verify,dce,cse"


def default_pipeline(cluster: Any, backend: str = "local") -> str:
    """`verify,dce,cse`, then placement and scheduling when a cluster is given; the torch backend
    always needs its placement, explicit transfers and the communication check."""
    from dagc.backends import REGISTRY

    required = REGISTRY[backend].required_passes if backend in REGISTRY else None
    if required:
        return required
    if cluster is None:
        return BASE_PIPELINE
    known = registry()
    extra = [name for name in ("partition", "schedule") if name in known]
    return ",".join([BASE_PIPELINE, *extra])


@dataclass
class Compilation:
    """Everything one compile produced: the graph, warnings, remarks, pass timings and sources."""

    graph: Graph
    sources: dict[str, str]
    warnings: list[Diagnostic] = field(default_factory=list)
    remarks: list[Remark] = field(default_factory=list)
    timings: list[tuple[str, float]] = field(default_factory=list)
    passes: str = ""


def find_pyproject(path: Path) -> Path | None:
    """The nearest pyproject.toml at or above `path`'s directory (the user's project settings)."""
    from dagc.cluster import find_pyproject as nearest

    found = nearest(path)
    return Path(found) if found is not None else None


def _is_ir_json(path: Path) -> bool:
    if path.suffix != ".json":
        return False
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return b'"dagc_ir"' in head


def load_input(
    path: str | Path,
    *,
    pipeline_name: str | None = None,
    params: dict[str, Any] | None = None,
    sink: DiagnosticSink,
) -> tuple[Graph | None, dict[str, str]]:
    """A Python script (compiled by the frontend) or a saved IR JSON file → graph, sources."""
    path = Path(path)
    if _is_ir_json(path):
        from dagc.ir.serialize import loads

        try:
            return loads(path.read_text(encoding="utf-8")), {}
        except (ValueError, KeyError, TypeError) as exc:
            sink.error("DAGC205", f"{path} is not a valid dagc IR file: {exc}", None,
                       hint="produce it with `dagc compile` or `dagc ir --format json`")
            return None, {}
    if path.suffix == ".json" and path.is_file():
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            pass
        sink.error("DAGC006", f"{path} is JSON but not a dagc IR file (no \"dagc_ir\" key)", None,
                   hint="give a Python script or an IR file written by `dagc compile`")
        return None, {}
    from dagc.frontend import compile_source

    result = compile_source(path, pipeline_name=pipeline_name, params=params, sink=sink)
    _check_module_name(path, sink)
    return result.graph, result.sources


def _check_module_name(path: Path, sink: DiagnosticSink) -> None:
    """A script whose name has a dot before `.py` (`train.v2.py`) cannot be imported by its name, which
    Python reads as module `v2` of a package `train`; dagc's programs import the script (and their engines
    pickle what it defines by that name), so it is refused here rather than failing in every program."""
    if path.suffix != ".py" or "." not in path.stem:
        return
    from dagc.ir.location import SourceSpan

    fixed = path.stem.replace(".", "_") + ".py"
    sink.error("DAGC009", f"the script's name `{path.name}` is not a module name: dagc's programs import it as "
               f"`{path.stem}`, which Python reads as a module of a package `{path.stem.split('.')[0]}`",
               SourceSpan(str(path), 1, 1), hint=f"rename it without the dot, e.g. `{fixed}` (`python {fixed}` "
               "runs it as before)")


def compile_file(
    path: str | Path,
    *,
    pipeline_name: str | None = None,
    passes: str | None = None,
    params: dict[str, Any] | None = None,
    cluster: Any = None,
    backend: str = "local",
    print_after: tuple[str, ...] = (),
    print_after_all: bool = False,
    time_passes: bool = False,
    stream: TextIO | None = None,
    details: bool = False,
    profile: str | Path | None = None,
    cost_store: str | Path | None = None,
) -> Any:
    """Compile `path` and run `passes` (default: `default_pipeline(cluster, backend)`).

    Returns the Graph, or the whole `Compilation` when `details=True`. Raises `CompileError` with
    every diagnostic when the input has errors. `profile`: a run directory whose measured task
    durations and output sizes replace the annotations (see `dagc.profile`). `cost_store`: a cost store whose
    figures of earlier runs replace them (see `dagc.learned`); `profile` wins where both are given.
    """
    from dagc.console import logger, status

    sink = DiagnosticSink()
    with status(lambda: f"reading {path}"):
        graph, sources = load_input(path, pipeline_name=pipeline_name, params=params, sink=sink)
    if graph is None or sink.has_errors:
        raise CompileError(sink.sorted())
    logger.info("read pipeline `%s` from %s: %d tasks", graph.name, path, len(graph))
    if profile is not None:
        from dagc.profile import ProfileError, apply_profile, load_run

        try:
            measured = apply_profile(graph, load_run(profile))
        except (ProfileError, OSError) as exc:
            sink.error("DAGC007", f"cannot use the profile {profile}: {exc}", None,
                       hint="give the run directory of a finished run (it holds events.jsonl)")
            raise CompileError(sink.sorted()) from None
        logger.info("profile %s: measured costs for %d of %d tasks", profile, len(measured), len(graph))
    elif cost_store is not None or _default_store() is not None:
        from dagc.learned import apply_learned_costs

        cost_store = cost_store if cost_store is not None else _default_store()

        learned, skipped = apply_learned_costs(graph, Path(cost_store))
        if skipped:
            sink.warning("DAGC008", f"the cost store {cost_store} has {skipped} damaged line(s); they are skipped",
                         None, hint="a run killed while writing leaves one; remove the store's costs.jsonl to "
                         "start it afresh")
        logger.info("cost store %s: learned costs for %d of %d tasks", cost_store, len(learned), len(graph))
    spec = passes if passes is not None else default_pipeline(cluster, backend)
    try:
        pipeline = parse_pipeline(spec)
    except PassSpecError as exc:
        sink.error("DAGC303", str(exc), None, hint="e.g. -p 'verify,dce,cse,partition{algo=heft}'")
        raise CompileError(sink.sorted()) from None
    from dagc.cost import CostModel

    ctx = PassContext(cluster=cluster, cost_model=CostModel(backend=backend), backend=backend, sink=sink)
    manager = PassManager(pipeline, print_after=print_after, print_after_all=print_after_all,
                          time_passes=time_passes, stream=stream)
    try:
        with status(lambda: f"compiling `{graph.name}` ({len(graph)} tasks): pass "
                    f"{min(len(manager.timings) + 1, len(pipeline))}/{len(pipeline)} "
                    f"{pipeline[min(len(manager.timings), len(pipeline) - 1)].name if pipeline else ''}"):
            manager.run(ctx, graph)
    except CompileError as exc:
        raise CompileError([*sink.sorted(), *[d for d in exc.diagnostics if d not in sink.diagnostics]]) from None
    for name, seconds in manager.timings:
        logger.info("pass %-10s %8.1f ms", name, seconds * 1000)
    compilation = Compilation(graph, sources, [d for d in sink.sorted() if not d.is_error], ctx.remarks,
                              manager.timings, spec)
    return compilation if details else graph


def _default_store() -> Path | None:
    from dagc.learned import DEFAULT_STORE

    return DEFAULT_STORE.get()
