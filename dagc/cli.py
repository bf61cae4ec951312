"""`dagc` command line: compile | check | ir | emit | viz | plan | run.

Exit status: 0 success, 1 errors in the input (diagnostics printed), 2 bad usage,
70 internal compiler error (a bug in dagc: reported with its traceback).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from dagc import __version__
from dagc.backend_warnings import backend_warnings
from dagc.diagnostics import CompileError, Diagnostic, render_json, render_text
from dagc.usage import UsageError, parse_params

EXIT_OK, EXIT_ERRORS, EXIT_USAGE, EXIT_INTERNAL, EXIT_IO = 0, 1, 2, 70, 74


# ---- shared options -------------------------------------------------------------------------------
def _add_input(p: argparse.ArgumentParser, what: str = "SCRIPT|IR.json") -> None:
    p.add_argument("input", metavar=what, help="an annotated Python script (never imported or run), "
                   "or an IR JSON file written by `dagc compile`")
    p.add_argument("--pipeline", metavar="NAME", help="which @dagc.pipeline to compile when the file has several")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="set a pipeline parameter at compile time (a Python literal, else a string); repeatable")
    p.add_argument("--script-args", metavar="ARGS", default=None,
                   help="the script's own arguments (`sys.argv[1:]` of `python SCRIPT ARGS`), for a pipeline that "
                   "parses them with argparse; default: none (`dagc run` takes them after `-- --`)")


def _add_passes(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("passes")
    g.add_argument("-p", "--passes", metavar="PIPELINE",
                   help="pass pipeline, e.g. 'verify,dce,cse,partition{algo=heft}' "
                   "(default: verify,dce,cse, plus partition,schedule with --cluster)")
    g.add_argument("--print-ir-after", action="append", default=[], metavar="PASS",
                   help="print the IR (to stderr) after each run of PASS; repeatable")
    g.add_argument("--print-ir-after-all", action="store_true", help="print the IR after every pass")
    g.add_argument("--time-passes", action="store_true", help="report the time each pass took (to stderr)")
    g.add_argument("--remarks", action="store_true", help="explain the decisions passes made (to stderr)")


def _add_cluster(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cluster")
    g.add_argument("--cluster", metavar="SPEC",
                   help="P (one node, P devices), NxG (N nodes of G devices) or a cluster .toml file; "
                   "default: [tool.dagc] in the project's pyproject.toml, else one local device")
    g.add_argument("--link-bandwidth", metavar="BW",
                   help="bandwidth of every link: bytes per second (1.25e9) or with a unit (10Gbit/s, 25GB/s)")
    g.add_argument("--link-latency", metavar="T", help="latency of every link, e.g. 20us")


def _add_profile(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", metavar="RUN_DIR",
                   help="use the task durations and output sizes measured in this run directory's event log "
                   "instead of the annotations (and of the learned costs)")
    p.add_argument("--cost-store", metavar="DIR",
                   help="the cost store every run records its tasks' figures in and compiles plan with "
                   "(default: $DAGC_COST_STORE, else .dagc/costs)")
    p.add_argument("--no-learned-costs", action="store_true",
                   help="plan with the annotations (and defaults) only, not with what earlier runs measured")


def _add_format(p: argparse.ArgumentParser) -> None:
    p.add_argument("--diagnostics-format", "--format-diagnostics", dest="diag_format", choices=("text", "json"),
                   default="text", help="how to print errors and warnings (default: text)")


def _cluster(args: argparse.Namespace) -> Any:
    from dagc.cluster import resolve_cluster

    return resolve_cluster(getattr(args, "cluster", None), link_bandwidth=getattr(args, "link_bandwidth", None),
                           link_latency=getattr(args, "link_latency", None), near=getattr(args, "input", None))


def _compile(args: argparse.Namespace, *, passes: str | None = None, backend: str = "local") -> Any:
    import shlex

    from dagc.driver import compile_file
    from dagc.frontend.arguments import SCRIPT_ARGS

    cluster = _cluster(args) if hasattr(args, "cluster") else None
    given = getattr(args, "script_args", None)
    if given is None and "--" in getattr(args, "program_args", []):  # `dagc run SCRIPT -- PROGRAM ARGS -- ARGS`
        given = shlex.join(args.program_args[args.program_args.index("--") + 1:])
    SCRIPT_ARGS.set(tuple(shlex.split(given or "")))
    return compile_file(
        args.input,
        pipeline_name=args.pipeline,
        passes=passes if passes is not None else getattr(args, "passes", None),
        params=parse_params(args.param),
        cluster=cluster,
        backend=backend,
        print_after=tuple(getattr(args, "print_ir_after", ()) or ()),
        print_after_all=getattr(args, "print_ir_after_all", False),
        time_passes=getattr(args, "time_passes", False),
        stream=sys.stderr,
        details=True,
        profile=getattr(args, "profile", None),
    )


def _report(args: argparse.Namespace, compilation: Any) -> None:
    from dagc.console import verbosity

    if verbosity() >= 0:  # -q: errors only
        _print_diagnostics(args, compilation.warnings, compilation.sources)
    if getattr(args, "remarks", False):
        for remark in compilation.remarks:
            sys.stderr.write(f"remark[{remark.pass_name}]: {remark.message}\n")


# commands whose standard output carries nothing else: their JSON diagnostics go there (`| jq` works);
# the others print a product (IR, code, a plan) or a program's output on it, and say JSON on stderr
_JSON_ON_STDOUT = ("check", "compile")


def _print_diagnostics(args: argparse.Namespace, diagnostics: list[Diagnostic], sources: dict[str, str]) -> None:
    if getattr(args, "diag_format", "text") == "json":
        if getattr(args, "command", None) in _JSON_ON_STDOUT:
            sys.stdout.write(render_json(diagnostics) + "\n")  # `[]` when there are none
        elif diagnostics:
            sys.stderr.write(render_json(diagnostics) + "\n")
        return
    if diagnostics:
        sys.stderr.write(render_text(diagnostics, sources or _read_sources(diagnostics)))


def _read_sources(diagnostics: list[Diagnostic]) -> dict[str, str]:
    sources: dict[str, str] = {}
    for diag in diagnostics:
        for span in [diag.span, *(n.span for n in diag.notes)]:
            if span is not None and span.file not in sources:
                try:
                    sources[span.file] = Path(span.file).read_text(encoding="utf-8", errors="replace")
                except OSError:
                    pass
    return sources


# ---- commands -------------------------------------------------------------------------------------
def _every_pipeline(args: argparse.Namespace) -> list[str]:
    """The pipelines `dagc check FILE` checks: the one named by --pipeline, else all of a script's."""
    if args.pipeline is not None or not str(args.input).endswith(".py"):
        return []
    from dagc.frontend import list_pipelines

    return list_pipelines(args.input)


def cmd_check(args: argparse.Namespace) -> int:
    names = _every_pipeline(args)
    if len(names) > 1:
        return _check_each(args, names)
    # dce and cse too: a call they would remove or merge is reported at the call
    compilation = _compile(args, passes="verify,dce,cse")
    compilation.warnings.extend(backend_warnings(compilation.graph, args.backend))
    from dagc.unseen import RUNS_FOR_HINT, unseen_effects

    if getattr(args, "profile", None):  # effects assumed but never seen in a run (DAGC158)
        compilation.warnings.extend(unseen_effects(compilation.graph, args.profile))
    elif compilation.graph is not None and Path(args.input).suffix == ".py":  # the script's own runs, by itself
        from dagc.frontend.observed import recent_runs

        runs = recent_runs(Path(args.input), compilation.graph.name)
        if len(runs) >= RUNS_FOR_HINT:
            compilation.warnings.extend(unseen_effects(compilation.graph, runs))
    _report(args, compilation)
    graph = compilation.graph
    from dagc.console import verbosity

    if args.diag_format == "text" and verbosity() >= 0:
        sys.stderr.write(f"{args.input}: ok — pipeline `{graph.name}`, {len(graph)} tasks, "
                         f"{len(compilation.warnings)} warning(s)\n")
    return EXIT_OK


def _check_each(args: argparse.Namespace, names: list[str]) -> int:
    """Check every pipeline of a file; a diagnostic of shared code (a task, a constant) is shown once."""
    from dagc.console import verbosity

    found: dict[Diagnostic, None] = {}
    summaries: list[str] = []
    for name in names:
        args.pipeline = name
        try:
            compilation = _compile(args, passes="verify,dce,cse")
        except CompileError as exc:
            found.update(dict.fromkeys(exc.diagnostics))
            summaries.append(f"pipeline `{name}`: {sum(d.is_error for d in exc.diagnostics)} error(s)")
            continue
        found.update(dict.fromkeys([*compilation.warnings, *backend_warnings(compilation.graph, args.backend)]))
        summaries.append(f"pipeline `{name}`: ok, {len(compilation.graph)} tasks")
    args.pipeline = None
    diagnostics = list(found)
    errors = [d for d in diagnostics if d.is_error]
    if errors:
        raise CompileError(diagnostics)
    if verbosity() >= 0:
        _print_diagnostics(args, diagnostics, _read_sources(diagnostics))
    if args.diag_format == "text" and verbosity() >= 0:
        sys.stderr.write(f"{args.input}: ok — {len(names)} pipelines ({'; '.join(summaries)}), "
                         f"{len(diagnostics)} warning(s)\n")
    return EXIT_OK


def cmd_compile(args: argparse.Namespace) -> int:
    from dagc.backends import emit
    from dagc.backends.graphviz import RenderError, render, to_dot
    from dagc.ir.printer import print_graph
    from dagc.ir.serialize import dumps

    compilation = _compile(args, backend=args.backend)
    _report(args, compilation)
    graph = compilation.graph
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise UsageError(f"-o {out} is a file, but compile writes several files (IR, program, picture) into a "
                         "directory: give a directory, or write one program with `dagc emit -o FILE`")
    out.mkdir(parents=True, exist_ok=True)
    stem = file_stem(graph.name)
    written: list[tuple[Path, str]] = []

    def write(path: Path, text: str, what: str) -> None:
        path.write_text(text, encoding="utf-8")
        written.append((path, what))

    write(out / f"{stem}.ir.json", dumps(graph), "IR (JSON)")
    write(out / f"{stem}.ir.txt", print_graph(graph), "IR (text)")
    program = out / f"{stem}_{args.backend}.py"
    write(program, emit(graph, args.backend, program), f"{args.backend} program")
    dot = to_dot(graph, cluster=_cluster(args))
    write(out / f"{stem}.dot", dot, "graph (DOT)")
    try:
        render(dot, out / f"{stem}.svg")
        written.append((out / f"{stem}.svg", "graph (SVG)"))
    except RenderError as exc:
        sys.stderr.write(f"note: {exc}\n")
    from dagc.console import verbosity

    if verbosity() < 0:
        return EXIT_OK
    width = max(len(str(p)) for p, _ in written)
    print(f"compiled pipeline `{graph.name}` ({len(graph)} tasks) from {args.input} "
          f"[passes: {compilation.passes}]")
    for path, what in written:
        print(f"  wrote {str(path):<{width}}  {what}")
    return EXIT_OK


def cmd_ir(args: argparse.Namespace) -> int:
    from dagc.ir.printer import print_graph
    from dagc.ir.serialize import dumps

    passes = _passes_until(args, args.after) if args.after is not None else args.passes
    compilation = _compile(args, passes=passes)
    _report(args, compilation)
    text = dumps(compilation.graph) if args.format == "json" else print_graph(compilation.graph)
    _write_or_print(text, args.output)
    return EXIT_OK


def cmd_emit(args: argparse.Namespace) -> int:
    from dagc.backends import emit

    compilation = _compile(args, backend=args.backend)
    _report(args, compilation)
    out = Path(args.output) if args.output else None
    _write_or_print(emit(compilation.graph, args.backend, out), args.output)
    from dagc.console import verbosity

    if out is not None and verbosity() >= 0:
        sys.stderr.write(f"wrote {out} ({args.backend} program for pipeline `{compilation.graph.name}`)\n")
    return EXIT_OK


def cmd_viz(args: argparse.Namespace) -> int:
    from dagc.backends.graphviz import FocusError, RenderError, render, to_dot

    out = Path(args.output)
    if args.together:
        return _viz_together(args, out)
    passes = _passes_until(args, args.after) if args.after is not None else args.passes
    compilation = _compile(args, passes=passes)
    _report(args, compilation)
    collapse = {"auto": "auto", "yes": True, "no": False}[args.collapse]
    try:
        dot = to_dot(compilation.graph, cluster=_cluster(args), collapse=collapse, focus=args.focus,
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
    cluster = _cluster(args) or Cluster.local()
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
        cluster = _cluster(args)
        compilation = _compile(args)
        _report(args, compilation)
        graph = compilation.graph
    else:
        graph = find_run_graph(run.run_dir)
        if graph is not None and (args.cluster or args.link_bandwidth or args.link_latency):
            cluster = _cluster(args)
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
        cluster = _cluster(args)
        if cluster is None:  # nothing said: the schedule on one device, which every machine has
            args.cluster = "1"
            cluster = _cluster(args)
        compilation = _compile(args)
        _report(args, compilation)
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


def cmd_runs(args: argparse.Namespace) -> int:
    from dagc.runtime.runs import list_runs
    from dagc.units import format_size

    runs = list_runs(Path(args.dir))
    if not runs:
        sys.stderr.write(f"no run directories in {args.dir}\n")
        return EXIT_OK
    width = max(len(str(r.path)) for r in runs)
    print(f"{'run directory':<{width}}  {'pipeline':<16} {'created':<19}  {'size':>9}  status")
    for r in runs:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.created))
        print(f"{str(r.path):<{width}}  {r.pipeline[:16]:<16} {created}  {format_size(r.size):>9}  {r.status}")
    print(f"{len(runs)} run directories, {format_size(sum(r.size for r in runs))}")
    return EXIT_OK


def cmd_gc(args: argparse.Namespace) -> int:
    from dagc.runtime.runs import list_runs, remove_runs, select_for_removal
    from dagc.units import format_size, parse_duration, parse_size

    if args.older_than is None and args.keep is None and args.max_size is None:
        raise UsageError("say what to remove: --older-than AGE, --keep N or --max-size SIZE")
    try:
        older = parse_duration(args.older_than) if args.older_than is not None else None
        size = parse_size(args.max_size) if args.max_size is not None else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    runs = list_runs(Path(args.dir))
    chosen = select_for_removal(runs, older_than=older, keep=args.keep, max_size=size)
    for r in chosen:
        print(f"{'would remove' if args.dry_run else 'remove'} {r.path}  ({r.pipeline}, {format_size(r.size)}, "
              f"{r.status})")
    freed = sum(r.size for r in chosen) if args.dry_run else remove_runs(chosen)
    kept = len(runs) - len(chosen)
    sys.stderr.write(f"{'would free' if args.dry_run else 'freed'} {format_size(freed)}; {kept} run "
                     f"director{'y' if kept == 1 else 'ies'} kept\n")
    return EXIT_OK


def _passes_until(args: argparse.Namespace, after: str) -> str:
    from dagc.driver import default_pipeline
    from dagc.passes.base import _split_top_level

    items = _split_top_level(args.passes or default_pipeline(_cluster(args), getattr(args, "backend", "local")))
    names = [item.partition("{")[0].strip() for item in items]
    if after not in names:
        raise UsageError(f"--after {after}: no such pass in the pipeline ({', '.join(names)})")
    return ",".join(items[: len(names) - names[::-1].index(after)])


def cmd_run(args: argparse.Namespace) -> int:
    import subprocess
    import tempfile

    from dagc.backends import emit

    _require_engine(args.backend)
    compilation = _compile(args, backend=args.backend)
    _report(args, compilation)
    with tempfile.TemporaryDirectory(prefix="dagc-run-") as tmp:
        program = Path(args.keep) if args.keep else Path(tmp) / f"{file_stem(compilation.graph.name)}_{args.backend}.py"
        program.parent.mkdir(parents=True, exist_ok=True)
        program.write_text(emit(compilation.graph, args.backend, program), encoding="utf-8")
        # our options first: after a `--` among the program's arguments they would go to the user's script
        result = ["--result", str(Path(args.result).resolve())] if args.result else []
        if args.priority is not None:
            result += ["--priority", str(args.priority)]
        result += ["--threads", args.threads] if args.threads != "plain" else []
        result += ["--cost-store", str(Path(args.cost_store).resolve())] if args.cost_store else []
        command = [sys.executable, str(program), *result, *args.program_args]
        # the local and torch programs keep a run directory too, as Ray programs do (dagc.runtime.program)
        env = {**os.environ, "DAGC_KEEP_RUN_DIR": "1"}
        return subprocess.call(command, env=env)


def file_stem(pipeline: str) -> str:
    """A pipeline's name as the stem of the files written for it: `MovieStatsFlow.run` → `MovieStatsFlow_run`
    (a program whose name is a Python identifier can be imported)."""
    return re.sub(r"\W", "_", pipeline)


_ENGINES = {"ray": ("ray", "ray"), "torch": ("torch", "torch")}  # backend -> (module it needs, dagc's extra)


def _require_engine(backend: str) -> None:
    """Say in one line what to install when the backend's engine is missing (before compiling)."""
    import importlib.util

    if backend not in _ENGINES:
        return
    module, extra = _ENGINES[backend]
    if importlib.util.find_spec(module) is None:
        raise UsageError(f"the {backend} backend needs {module}, which is not installed in this Python "
                         f"({sys.executable}): pip install 'dagc[{extra}]'")


def _write_or_print(text: str, output: str | None) -> None:
    if output:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


# ---- parser ---------------------------------------------------------------------------------------
def _add_verbosity(p: argparse.ArgumentParser, default: Any) -> None:
    p.add_argument("-v", "--verbose", action="count", default=default,
                   help="say more: what each step did and took (-vv: debugging detail)")
    p.add_argument("-q", "--quiet", action="count", default=default, help="errors only")


def build_parser() -> argparse.ArgumentParser:
    from dagc.backends import BACKENDS

    parser = argparse.ArgumentParser(
        prog="dagc",
        description="Static DAG compiler for ML training pipelines: reads annotated Python without running it, "
        "and emits IR, local/Ray/torch.distributed programs and graph pictures.",
    )
    parser.add_argument("--version", action="version", version=f"dagc {__version__}")
    _add_verbosity(parser, 0)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("compile", help="write IR (JSON and text), a program and a picture to a directory",
                       description="Compile a pipeline and write its IR (JSON and text), the emitted program, "
                       "and its graph (DOT, and SVG: by Graphviz's `dot` when installed, else by graphviz-pure) "
                       "into DIR.")
    _add_input(p, "SCRIPT|IR.json")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="directory for the artefacts")
    p.add_argument("--backend", default="local", choices=sorted(BACKENDS), help="program to emit (default: local)")
    _add_passes(p)
    _add_cluster(p)
    _add_profile(p)
    _add_format(p)
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("check", help="report diagnostics; exit non-zero on errors",
                       description="Check a script: report every error and warning, exit 1 if there are errors.")
    _add_input(p, "SCRIPT")
    _add_format(p)
    p.add_argument("--backend", choices=sorted(BACKENDS),
                   help="also warn (DAGC160) about task options this backend ignores")
    p.add_argument("--profile", metavar="RUN_DIR",
                   help="also warn (DAGC158) about effects dagc assumes that this run directory's tasks never had")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("ir", help="print the IR, optionally after a given pass",
                       description="Print the IR of a script or IR file after the pass pipeline (or --after PASS).")
    _add_input(p)
    p.add_argument("--after", metavar="PASS", help="stop after this pass of the pipeline")
    p.add_argument("--format", choices=("text", "json"), default="text", help="IR form (default: text)")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    _add_passes(p)
    _add_cluster(p)
    _add_profile(p)
    _add_format(p)
    p.set_defaults(func=cmd_ir)

    p = sub.add_parser("emit", help="emit a runnable program for a backend",
                       description="Emit the program a backend generates for a script or saved IR.")
    _add_input(p)
    p.add_argument("--backend", default="local", choices=sorted(BACKENDS), help="target (default: local)")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    _add_passes(p)
    _add_cluster(p)
    _add_profile(p)
    _add_format(p)
    p.set_defaults(func=cmd_emit)

    p = sub.add_parser("viz", help="draw the graph (svg, png, pdf or dot)",
                       description="Draw the graph with Graphviz. The output format follows the file suffix.")
    _add_input(p)
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="FILE.svg, FILE.png, FILE.pdf or FILE.dot")
    p.add_argument("--after", metavar="PASS", help="draw the graph as it is after this pass")
    p.add_argument("--focus", metavar="TASK", help="draw only TASK and the tasks within --depth edges of it")
    p.add_argument("--depth", type=int, default=2, metavar="N", help="edges around --focus TASK (default: 2)")
    p.add_argument("--collapse", choices=("auto", "yes", "no"), default="auto",
                   help="draw the instances of an unrolled loop (train[0], train[1], …) on one device as one box "
                   "(default: auto, when the graph has more than 60 tasks)")
    p.add_argument("--together", action="append", default=[], metavar="FILE",
                   help="draw instead the shared schedule of the input and FILE planned together on --cluster "
                   "(as `dagc plan --together`), one colour per pipeline; repeatable")
    _add_passes(p)
    _add_cluster(p)
    _add_profile(p)
    _add_format(p)
    p.set_defaults(func=cmd_viz)

    p = sub.add_parser("run", help="compile, emit and run a pipeline",
                       description="Compile a pipeline, emit the backend's program and run it.")
    _add_input(p)
    p.add_argument("--backend", default="local", choices=sorted(BACKENDS), help="engine (default: local)")
    p.add_argument("--result", metavar="PATH", help="write the pipeline's return value to PATH (pickle)")
    p.add_argument("--keep", metavar="FILE", help="keep the emitted program at FILE")
    p.add_argument("--priority", type=int, metavar="N",
                   help="the run's priority on a shared Ray cluster (higher first; may preempt lower ones); "
                   "default: the pipeline's @dagc.pipeline(priority=N)")
    p.add_argument("--threads", choices=("plain", "share"), default="plain",
                   help="threads of a task without cpus=: the plain run's (exact), or its device's share of "
                   "the cores (faster, last bits may differ); default: %(default)s")
    p.set_defaults(program_args=[])  # what follows `--` on the command line goes to the program
    _add_passes(p)
    _add_cluster(p)
    _add_profile(p)
    _add_format(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("runs", help="list run directories: pipeline, date, size, finished or not",
                       description="List the run directories under DIR: pipeline, creation time, size and the "
                       "state of their last run (finished, failed, running, unfinished).")
    p.add_argument("dir", nargs="?", default=".dagc/runs", metavar="DIR", help="default: %(default)s")
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("gc", help="remove old run directories by age, count or total size",
                       description="Remove run directories under DIR, oldest first: older than AGE, beyond the "
                       "newest N, or until the rest take at most SIZE. A directory a run holds is never removed.")
    p.add_argument("dir", nargs="?", default=".dagc/runs", metavar="DIR", help="default: %(default)s")
    p.add_argument("--older-than", metavar="AGE", help='e.g. "7d", "12h"')
    p.add_argument("--keep", type=int, metavar="N", help="keep the newest N")
    p.add_argument("--max-size", metavar="SIZE", help='e.g. "10GiB"')
    p.add_argument("--dry-run", action="store_true", help="say what would be removed, remove nothing")
    p.set_defaults(func=cmd_gc)

    p = sub.add_parser("report", help="write an HTML report of a run (graph, timelines, tasks, failures)",
                       description="Write one self-contained HTML page about a run: the partitioned graph, the "
                       "measured timeline beside the estimated one, a sortable task table and the failures.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="the run directory (it holds events.jsonl)")
    p.add_argument("-o", "--output", metavar="FILE", help="the page to write (default: RUN_DIR/report.html)")
    p.add_argument("--ir", metavar="SCRIPT|IR.json", help="the compiled pipeline, for the graph and the estimates "
                   "(default: RUN_DIR/ir.json or RUN_DIR/*.ir.json when present)")
    p.add_argument("--run", metavar="ID", help="which run of the event log (default: the latest)")
    p.add_argument("--pipeline", metavar="NAME", help="which @dagc.pipeline of --ir to compile")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="as for compile")
    p.add_argument("--backend", default="local", choices=sorted(BACKENDS), help="backend of the run (cost model)")
    _add_passes(p)
    _add_cluster(p)
    _add_profile(p)
    _add_format(p)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("timeline", help="draw the estimated schedule and/or a run as a Gantt chart",
                       description="Draw a Gantt chart (svg, png or pdf): the estimated schedule of a script "
                       "(needs --cluster), a run's measured timeline (--run-dir), or both on one time axis.")
    p.add_argument("input", nargs="?", metavar="SCRIPT|IR.json", help="the pipeline, for the estimated schedule")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="FILE.svg, FILE.png or FILE.pdf")
    p.add_argument("--run-dir", metavar="RUN_DIR", help="also draw this run's measured timeline")
    p.add_argument("--pipeline", metavar="NAME", help="which @dagc.pipeline to compile when the file has several")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="as for compile")
    _add_passes(p)
    _add_cluster(p)
    _add_profile(p)
    _add_format(p)
    p.set_defaults(func=cmd_timeline)

    from dagc.plan import add_plan_arguments, run_plan_command  # (an import error is a bug to see, not hide)

    p = sub.add_parser("plan", help="place and schedule tasks on a cluster; print the plan",
                       description="Partition and schedule a script, a saved IR, STG task graphs (.stg) or "
                       "WfCommons workflows (.json) on a cluster, and print the plan.")
    add_plan_arguments(p)
    if not any("--profile" in a.option_strings for a in p._actions):
        _add_profile(p)
    p.set_defaults(func=run_plan_command)
    for command in sub.choices.values():  # -v / -q also after the command
        _add_verbosity(command, argparse.SUPPRESS)
        command.set_defaults(command_parser=command)  # its own usage, for its errors
    return parser


# commands that only read and write files: their process may end without freeing its objects one by one
_COMPILE_ONLY = frozenset({"check", "plan", "ir", "emit", "compile", "viz"})


def console_main() -> None:
    """The `dagc` command. After a compile-only command, the process ends at once: freeing a large pipeline's
    graph and syntax tree object by object took a fifth of a 30,000-task `dagc check`."""
    argv = sys.argv[1:]
    command = next((a for a in argv if not a.startswith("-")), None)
    if command in _COMPILE_ONLY:
        # a compile builds millions of objects in no reference cycle: the cyclic collector's passes over them
        # cost a sixth of a large compile and free almost nothing (4 MB of 220 at 30,000 tasks)
        import gc

        gc.disable()
    code = main()
    if command in _COMPILE_ONLY:
        import logging

        logging.shutdown()
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BrokenPipeError:  # `dagc plan | head`
            pass
        os._exit(code)
    sys.exit(code)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    program_args: list[str] = []
    if "run" in argv and "--" in argv[argv.index("run"):]:  # `dagc run … -- PROGRAM ARGS`
        cut = argv.index("--", argv.index("run"))
        argv, program_args = argv[:cut], argv[cut + 1:]
    args, unknown = parser.parse_known_args(argv)
    command_parser = getattr(args, "command_parser", parser)
    if unknown:  # reported with the command's usage, not dagc's, with the option meant where one is close
        import difflib

        options = sorted(o for a in command_parser._actions for o in a.option_strings if o.startswith("--"))
        close = [difflib.get_close_matches(u.split("=")[0], options, n=1, cutoff=0.75) for u in unknown
                 if u.startswith("--")]
        meant = next((c[0] for c in close if c), None)
        command_parser.error(f"unrecognized arguments: {' '.join(unknown)}"
                             + (f" (did you mean {meant}?)" if meant else ""))
    if args.command == "run":
        args.program_args = program_args
    from dagc.console import setup_logging

    setup_logging(getattr(args, "verbose", 0) or 0, getattr(args, "quiet", 0) or 0)
    if hasattr(args, "no_learned_costs") and not args.no_learned_costs and not getattr(args, "profile", None) \
            and (args.cost_store or not os.environ.get("DAGC_NO_LEARNED_COSTS")):
        from dagc.learned import DEFAULT_STORE
        from dagc.runtime.costs import cost_store_dir

        DEFAULT_STORE.set(cost_store_dir(args.cost_store))  # every compile of this command plans with it
    try:
        return int(args.func(args) or 0)
    except CompileError as exc:
        _print_diagnostics(args, exc.diagnostics, _read_sources(exc.diagnostics))
        errors = sum(1 for d in exc.diagnostics if d.is_error)
        if getattr(args, "diag_format", "text") == "text":
            sys.stderr.write(f"dagc: {errors} error{'s' if errors != 1 else ''} in {getattr(args, 'input', '')}\n")
        return EXIT_ERRORS
    except UsageError as exc:
        command_parser.print_usage(sys.stderr)
        sys.stderr.write(f"{command_parser.prog}: error: {exc}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("dagc: interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - the one place internal errors are turned into a report
        if isinstance(exc, OSError) and exc.filename is not None:  # a file that could not be read or written
            sys.stderr.write(f"{command_parser.prog}: error: {exc.filename}: {exc.strerror or exc}\n"
                             f"hint: {_io_hint(exc)}\n")
            return EXIT_IO
        from dagc.cluster import ClusterError

        if isinstance(exc, ClusterError):
            from dagc.diagnostics import Severity

            diag = Diagnostic("DAGC301", Severity.ERROR, str(exc), None, getattr(exc, "hint", None))
            _print_diagnostics(args, [diag], {})
            return EXIT_ERRORS
        from dagc.passes.base import PassFailure

        if isinstance(exc, PassFailure) and exc.diagnostics:
            sys.stderr.write(f"dagc: internal error: {exc}\n")
            _print_diagnostics(args, exc.diagnostics, {})
            return EXIT_INTERNAL
        sys.stderr.write("dagc: internal error (a bug in dagc, not in your code). Traceback:\n")
        traceback.print_exc()
        return EXIT_INTERNAL


def _io_hint(exc: OSError) -> str:
    """What to do about a file that could not be read or written."""
    import errno

    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "choose a place you may write to (-o), or change the permissions"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free some space there, or choose another place (-o)"
    if exc.errno in (errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
        return "a file and a directory are in each other's way there: choose another path"
    return "check that the path exists and can be used"


if __name__ == "__main__":
    sys.exit(main())
