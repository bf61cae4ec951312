"""`dagc viz`, `timeline` and `report`: pictures and pages of a pipeline, of a run, or of both."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dagc.commands.common import (
    EXIT_ERRORS,
    EXIT_OK,
    cluster_of,
    compile_input,
    passes_until,
    report_compilation,
)
from dagc.diagnostics import CompileError
from dagc.usage import UsageError, parse_params


def cmd_viz(args: argparse.Namespace) -> int:
    from dagc.backends.graphviz import FocusError, RenderError, render, to_dot

    out = Path(args.output)
    if args.together:
        return _viz_together(args, out)
    passes = passes_until(args, args.after) if args.after is not None else args.passes
    compilation = compile_input(args, passes=passes)
    report_compilation(args, compilation)
    collapse = {"auto": "auto", "yes": True, "no": False}[args.collapse]
    try:
        dot = to_dot(compilation.graph, cluster=cluster_of(args), collapse=collapse, focus=args.focus,
                     depth=args.depth)
    except FocusError as exc:
        raise UsageError(f"--focus: {exc}") from None
    try:
        render(dot, out)
    except RenderError as exc:
        fallback = out.with_suffix(".dot")
        fallback.write_text(dot, encoding="utf-8")
        sys.stderr.write(f"error: {exc}\nwrote the DOT source to {fallback} instead\n")
        return EXIT_ERRORS
    from dagc.console import note

    note("wrote %s", out)
    return EXIT_OK


def _viz_together(args: argparse.Namespace, out: Path) -> int:
    """The shared schedule of the input and the --together pipelines, one colour per pipeline."""
    from dagc.backends import timeline
    from dagc.backends.graphviz import RenderError
    from dagc.cluster import Cluster
    from dagc.console import note
    from dagc.plan_together import chart, plan_together

    if out.suffix.lower() not in (".svg", ".png", ".pdf"):
        raise UsageError(f"--together draws a timeline: give -o FILE.svg, FILE.png or FILE.pdf, not {out.name}")
    cluster = cluster_of(args) or Cluster.local()
    result = plan_together([args.input, *args.together], cluster, pipeline=args.pipeline,
                           params=parse_params(args.param))
    if result.errors:
        raise CompileError(result.errors)
    try:
        timeline.render([chart(result, cluster)], out)
    except RenderError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_ERRORS
    note("wrote %s", out)
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from dagc.console import note
    from dagc.profile import ProfileError, load_run
    from dagc.report import build_report, find_run_graph

    try:
        run = load_run(args.run_dir, args.run)
    except (ProfileError, OSError) as exc:
        raise UsageError(f"{args.run_dir}: {exc}") from None
    graph, cluster = None, None
    if args.ir is not None:
        args.input = args.ir
        cluster = cluster_of(args)
        compilation = compile_input(args)
        report_compilation(args, compilation)
        graph = compilation.graph
    else:
        graph = find_run_graph(run.run_dir)
        if graph is not None and (args.cluster or args.link_bandwidth or args.link_latency):
            cluster = cluster_of(args)
    out = Path(args.output) if args.output else run.run_dir / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    from dagc.cost import CostModel

    out.write_text(build_report(run, graph, cluster, CostModel(backend=args.backend)), encoding="utf-8")
    note("wrote %s (%d tasks%s)", out, len(run.tasks),
         "" if graph is not None else "; no IR: give --ir SCRIPT|IR.json for the graph and estimates")
    return EXIT_OK


def cmd_timeline(args: argparse.Namespace) -> int:
    from dagc.backends import timeline
    from dagc.backends.graphviz import RenderError
    from dagc.console import note

    charts = []
    graph, cluster = None, None
    if args.input is not None:
        cluster = cluster_of(args)
        if cluster is None:  # nothing said: the schedule on one device, which every machine has
            args.cluster = "1"
            cluster = cluster_of(args)
        compilation = compile_input(args)
        report_compilation(args, compilation)
        graph = compilation.graph
    if args.run_dir is not None:
        from dagc.profile import ProfileError, load_run

        try:
            charts.append(timeline.measured(load_run(args.run_dir), graph))
        except (ProfileError, OSError) as exc:
            raise UsageError(f"--run-dir {args.run_dir}: {exc}") from None
    if graph is not None:
        try:
            charts.append(timeline.estimated(graph, cluster))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if not charts:
        raise UsageError("give a SCRIPT|IR.json (the estimated schedule), --run-dir RUN_DIR (a run), or both")
    try:
        timeline.render(charts, Path(args.output))
    except RenderError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_ERRORS
    note("wrote %s", args.output)
    return EXIT_OK
