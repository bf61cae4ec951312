"""`dagc` command line: compile | check | fix | ir | emit | viz | plan | run.

Exit status: 0 success, 1 errors in the input (diagnostics printed), 2 bad usage,
70 internal compiler error (a bug in dagc: reported with its traceback).

This module builds the parser and turns each command's outcome into an exit status; the commands themselves
are in `dagc.commands`.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Any

from dagc import __version__
from dagc.commands.common import (
    EXIT_ERRORS,
    EXIT_INTERNAL,
    EXIT_IO,
    EXIT_OK,
    EXIT_USAGE,
    file_stem,
    print_diagnostics,
    read_sources,
)
from dagc.commands.compiling import cmd_check, cmd_compile, cmd_emit, cmd_ir
from dagc.commands.fixing import cmd_fix
from dagc.commands.running import cmd_gc, cmd_run, cmd_runs
from dagc.commands.views import cmd_report, cmd_timeline, cmd_viz
from dagc.diagnostics import CompileError, Diagnostic
from dagc.usage import UsageError

__all__ = ["EXIT_ERRORS", "EXIT_INTERNAL", "EXIT_IO", "EXIT_OK", "EXIT_USAGE", "build_parser", "console_main",
           "file_stem", "main"]


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

    p = sub.add_parser("fix", help="make the edits diagnostics propose; --diff to preview",
                       description="Make the edits that diagnostics propose (those shown with `= fix:`), keeping "
                       "the rest of the file, its formatting and comments as they are; compile again until no fix "
                       "is left, then report the diagnostics left to fix by hand. Exit 1 if errors are left.")
    _add_input(p, "SCRIPT")
    p.add_argument("--diff", action="store_true",
                   help="print the changes as a unified diff instead of writing them (exit 0)")
    p.add_argument("--profile", metavar="RUN_DIR",
                   help="also declare readonly=[...] the parameters no task call of this run directory changed "
                   "(DAGC158; without it, the script's own recent runs under .dagc/runs/ when there are enough)")
    _add_format(p)
    p.set_defaults(func=cmd_fix)

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
                       usage="%(prog)s SCRIPT|IR.json [options] [-- PROGRAM ARGS [-- SCRIPT ARGS]]",
                       description="Compile a pipeline, emit the backend's program and run it. Arguments after "
                       "`--` go to the emitted program (--run-dir DIR, --resume RUN_DIR, --cache DIR, ...); "
                       "arguments after a second `--` are the script's own sys.argv[1:].")
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
_COMPILE_ONLY = frozenset({"check", "fix", "plan", "ir", "emit", "compile", "viz"})


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
        print_diagnostics(args, exc.diagnostics, read_sources(exc.diagnostics))
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
            print_diagnostics(args, [diag], {})
            return EXIT_ERRORS
        from dagc.passes.base import PassFailure

        if isinstance(exc, PassFailure) and exc.diagnostics:
            sys.stderr.write(f"dagc: internal error: {exc}\n")
            print_diagnostics(args, exc.diagnostics, {})
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
