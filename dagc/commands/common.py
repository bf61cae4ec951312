"""What the commands share: exit statuses, compiling the input as the options say, printing diagnostics."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from dagc.diagnostics import Diagnostic, render_json, render_text
from dagc.usage import UsageError, parse_params

EXIT_OK, EXIT_ERRORS, EXIT_USAGE, EXIT_INTERNAL, EXIT_IO = 0, 1, 2, 70, 74


def cluster_of(args: argparse.Namespace) -> Any:
    """The cluster the options name (--cluster, --link-*), else the project's, else None."""
    from dagc.cluster import resolve_cluster

    return resolve_cluster(getattr(args, "cluster", None), link_bandwidth=getattr(args, "link_bandwidth", None),
                           link_latency=getattr(args, "link_latency", None), near=getattr(args, "input", None))


def compile_input(args: argparse.Namespace, *, passes: str | None = None, backend: str = "local") -> Any:
    """Compile `args.input` with the command's options (pipeline, parameters, passes, cluster, profile)."""
    import shlex

    from dagc.driver import compile_file
    from dagc.frontend.arguments import SCRIPT_ARGS

    cluster = cluster_of(args) if hasattr(args, "cluster") else None
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


def report_compilation(args: argparse.Namespace, compilation: Any) -> None:
    """A compilation's warnings, and its remarks under --remarks."""
    from dagc.console import verbosity

    if verbosity() >= 0:  # -q: errors only
        print_diagnostics(args, compilation.warnings, compilation.sources)
    if getattr(args, "remarks", False):
        for remark in compilation.remarks:
            sys.stderr.write(f"remark[{remark.pass_name}]: {remark.message}\n")


# commands whose standard output carries nothing else: their JSON diagnostics go there (`| jq` works);
# the others print a product (IR, code, a plan) or a program's output on it, and say JSON on stderr
_JSON_ON_STDOUT = ("check", "compile")


def print_diagnostics(args: argparse.Namespace, diagnostics: list[Diagnostic], sources: dict[str, str]) -> None:
    if getattr(args, "diag_format", "text") == "json":
        if getattr(args, "command", None) in _JSON_ON_STDOUT:
            sys.stdout.write(render_json(diagnostics) + "\n")  # `[]` when there are none
        elif diagnostics:
            sys.stderr.write(render_json(diagnostics) + "\n")
        return
    if diagnostics:
        sys.stderr.write(render_text(diagnostics, sources or read_sources(diagnostics)))


def read_sources(diagnostics: list[Diagnostic]) -> dict[str, str]:
    """The text of every file the diagnostics point into, for their source lines (unreadable ones left out)."""
    sources: dict[str, str] = {}
    for diag in diagnostics:
        for span in [diag.span, *(n.span for n in diag.notes)]:
            if span is not None and span.file not in sources:
                try:
                    sources[span.file] = Path(span.file).read_text(encoding="utf-8", errors="replace")
                except OSError:
                    pass
    return sources


def passes_until(args: argparse.Namespace, after: str) -> str:
    """The pass pipeline up to and including the last run of pass `after` (--after PASS)."""
    from dagc.driver import default_pipeline
    from dagc.passes.base import _split_top_level

    items = _split_top_level(args.passes or default_pipeline(cluster_of(args), getattr(args, "backend", "local")))
    names = [item.partition("{")[0].strip() for item in items]
    if after not in names:
        raise UsageError(f"--after {after}: no such pass in the pipeline ({', '.join(names)})")
    return ",".join(items[: len(names) - names[::-1].index(after)])


def file_stem(pipeline: str) -> str:
    """A pipeline's name as the stem of the files written for it: `MovieStatsFlow.run` → `MovieStatsFlow_run`
    (a program whose name is a Python identifier can be imported)."""
    return re.sub(r"\W", "_", pipeline)


def write_or_print(text: str, output: str | None) -> None:
    if output:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
