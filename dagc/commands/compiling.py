"""`dagc check`, `compile`, `ir` and `emit`: a pipeline compiled, then checked, saved, printed or emitted."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dagc.backend_warnings import backend_warnings
from dagc.commands.common import (
    EXIT_OK,
    cluster_of,
    compile_input,
    file_stem,
    passes_until,
    print_diagnostics,
    read_sources,
    report_compilation,
    write_or_print,
)
from dagc.diagnostics import CompileError, Diagnostic
from dagc.usage import UsageError, parse_params


def _every_pipeline(args: argparse.Namespace) -> list[str]:
    """The pipelines `dagc check FILE` checks: the one named by --pipeline, else all of a script's."""
    if args.pipeline is not None or not str(args.input).endswith(".py"):
        return []
    from dagc.frontend import list_pipelines

    return list_pipelines(args.input, given=frozenset(parse_params(getattr(args, "param", None) or [])))


def cmd_check(args: argparse.Namespace) -> int:
    names = _every_pipeline(args)
    if len(names) > 1:
        return _check_each(args, names)
    if names:  # the file's one pipeline that stands on its own (the others are its sub-pipelines)
        args.pipeline = names[0]
    # dce and cse too: a call they would remove or merge is reported at the call
    compilation = compile_input(args, passes="verify,dce,cse")
    compilation.warnings.extend(backend_warnings(compilation.graph, args.backend))
    from dagc.unseen import RUNS_FOR_HINT, unseen_effects

    if getattr(args, "profile", None):  # effects assumed but never seen in a run (DAGC158)
        compilation.warnings.extend(unseen_effects(compilation.graph, args.profile))
    elif compilation.graph is not None and Path(args.input).suffix == ".py":  # the script's own runs, by itself
        from dagc.frontend.observed import recent_runs

        runs = recent_runs(Path(args.input), compilation.graph.name)
        if len(runs) >= RUNS_FOR_HINT:
            compilation.warnings.extend(unseen_effects(compilation.graph, runs))
    report_compilation(args, compilation)
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
            compilation = compile_input(args, passes="verify,dce,cse")
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
        print_diagnostics(args, diagnostics, read_sources(diagnostics))
    if args.diag_format == "text" and verbosity() >= 0:
        sys.stderr.write(f"{args.input}: ok — {len(names)} pipelines ({'; '.join(summaries)}), "
                         f"{len(diagnostics)} warning(s)\n")
    return EXIT_OK


def cmd_compile(args: argparse.Namespace) -> int:
    from dagc.backends import emit
    from dagc.backends.graphviz import RenderError, render, to_dot
    from dagc.ir.printer import print_graph
    from dagc.ir.serialize import dumps

    compilation = compile_input(args, backend=args.backend)
    report_compilation(args, compilation)
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
    dot = to_dot(graph, cluster=cluster_of(args))
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

    passes = passes_until(args, args.after) if args.after is not None else args.passes
    compilation = compile_input(args, passes=passes)
    report_compilation(args, compilation)
    text = dumps(compilation.graph) if args.format == "json" else print_graph(compilation.graph)
    write_or_print(text, args.output)
    return EXIT_OK


def cmd_emit(args: argparse.Namespace) -> int:
    from dagc.backends import emit

    compilation = compile_input(args, backend=args.backend)
    report_compilation(args, compilation)
    out = Path(args.output) if args.output else None
    write_or_print(emit(compilation.graph, args.backend, out), args.output)
    from dagc.console import verbosity

    if out is not None and verbosity() >= 0:
        sys.stderr.write(f"wrote {out} ({args.backend} program for pipeline `{compilation.graph.name}`)\n")
    return EXIT_OK
