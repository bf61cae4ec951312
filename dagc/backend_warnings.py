"""What `dagc check` says about a graph beyond compiling it: how each backend will run it differently from
plain Python (options a backend ignores, tasks run as several ranks, torchrun's variables read at import)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["backend_warnings", "ignored_option_warnings", "multi_rank_warnings"]


def backend_warnings(graph: Any, backend: str | None) -> list[Any]:
    """What `dagc check` says beyond compiling: multi-rank tasks (DAGC161), and for `--backend`, the
    options it ignores (DAGC160) and, on torch, torchrun's variables read at import (DAGC162)."""
    found = multi_rank_warnings(graph)
    if backend is not None:
        found += ignored_option_warnings(graph, backend)
    if backend == "torch":
        from dagc.frontend.launcher import launcher_reads

        found += launcher_reads(Path(graph.root or "."), graph.modules)
    return found


def ignored_option_warnings(graph: Any, backend: str) -> list[Any]:
    """DAGC160 once per call site and option that `backend` does not honour (from the backend registry),
    with the number of tasks the site unrolls to (a call in a loop of 30 is one cause, not 30)."""
    from dagc.backends import ignored_options
    from dagc.diagnostics import DiagnosticSink

    causes: dict[tuple[Any, str], list[tuple[Any, str]]] = {}
    for node, option, why in ignored_options(graph, backend):
        site = node.span if node.span is not None else node.name
        causes.setdefault((site, option), []).append((node, why))
    sink = DiagnosticSink()
    for (_, option), found in causes.items():
        node, why = found[0]
        hint = ("the result is the plain run's, which runs it once too; Ray and torch run every rank (DAGC161)"
                if option == "ranks" else
                "the result is the same; use a backend that honours the option where it matters")
        sink.warning("DAGC160", f"task `{_task_name(found)}` sets `{option}`{_unrolled(found)}, which the {backend} "
                     f"backend ignores: {why}", node.span, hint=hint)
    return sink.diagnostics


def _task_name(found: list[tuple[Any, str]]) -> str:
    """The task's name, or for a call unrolled into several tasks, the function it calls."""
    node = found[0][0]
    if len(found) == 1 or not node.target:
        return str(node.name)
    return str(node.target.rpartition(":")[2])


def _unrolled(found: list[tuple[Any, str]]) -> str:
    """For a call unrolled into several tasks: how many, and the first and last names."""
    if len(found) == 1:
        return ""
    return f" ({len(found)} tasks at this call: `{found[0][0].name}` … `{found[-1][0].name}`)"


def multi_rank_warnings(graph: Any) -> list[Any]:
    """DAGC161 at each `ranks=N` task: its result on Ray and torch is rank 0's of N, not the plain run's."""
    from dagc.diagnostics import DiagnosticSink
    from dagc.ir.regions import walk

    sink = DiagnosticSink()
    for node in graph:
        for task in (node, *walk(node)):
            ranks = task.options.ranks
            if task.op != "task" or ranks <= 1:
                continue
            sink.warning(
                "DAGC161", f"task `{task.name}` runs as {ranks} ranks on Ray and torch and returns rank 0's value; "
                "plain Python and the local backend run it once, as rank 0 of a world of 1",
                task.span, hint="the two agree only when rank 0's value does not depend on the world size: make "
                "it the whole result (all-reduce the metric, gather the shards) to compare a distributed run with "
                "the plain one; otherwise compare it with another run on the same number of ranks")
    return sink.diagnostics
