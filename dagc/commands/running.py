"""`dagc run`, `runs` and `gc`: a pipeline's program run as `python PROGRAM` would run it, and the run
directories runs leave."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from dagc.commands.common import EXIT_IO, EXIT_OK, compile_input, file_stem, report_compilation
from dagc.usage import UsageError


def cmd_run(args: argparse.Namespace) -> int:
    import subprocess
    import tempfile

    from dagc.backends import emit

    _require_engine(args.backend)
    compilation = compile_input(args, backend=args.backend)
    report_compilation(args, compilation)
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
    from dagc.runtime.runs import list_runs, remove_orphans, remove_runs, select_for_removal
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
    if args.dry_run:
        freed, failed = sum(r.size for r in chosen), []
        kept = len(runs) - len(chosen)
    else:
        done = remove_runs(chosen)
        # the temporary files killed writers left in the directories kept
        freed = done.freed + remove_orphans([r for r in runs if r.path not in set(done.removed)])
        failed = done.failed
        kept = len(runs) - len(done.removed)
        for line in [*done.taken, *failed]:
            sys.stderr.write(f"dagc: warning: {line}\n")
    sys.stderr.write(f"{'would free' if args.dry_run else 'freed'} {format_size(freed)}; {kept} run "
                     f"director{'y' if kept == 1 else 'ies'} kept\n")
    return EXIT_IO if failed else EXIT_OK
