"""The driver of the local backend's programs: options, run directory, executor, result.

An emitted local program holds its tables and a `run(rt, modules)` function that calls every task
through `rt` (a dagc.runtime.executor.Executor), in a topological order; `run_local` does the rest.
A task that fails after its retries ends the program with status 1 and one line naming it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dagc.runtime.code import current_digests, describe_changes, refresh
from dagc.runtime.context import reset_context, set_context
from dagc.runtime.costs import CostLog, cost_store_dir
from dagc.runtime.events import EventLog, new_run_id
from dagc.runtime.executor import Executor, TaskFailed, TaskRow
from dagc.runtime.filetrace import before_reuse
from dagc.runtime.program import (
    INTERRUPTED,
    KEEP_RUN_VARIABLE,
    ResultError,
    add_run_options,
    deliver_result,
    open_cache,
    open_run,
    prepare_interpreter,
    priority_note,
    split_argv,
    store_result,
    user_traceback,
)
from dagc.runtime.progress import Progress
from dagc.runtime.store import StorageError

__all__ = ["run_local", "load_modules"]


def load_modules(source_root: Path, search_paths: Sequence[str], modules: Sequence[str]) -> dict[str, Any]:
    """Import the pipeline's own modules from their source tree."""
    for entry in reversed(search_paths):
        path = str((source_root / entry).resolve())
        if path not in sys.path:
            sys.path.insert(0, path)
    return {name: importlib.import_module(name) for name in modules}


def run_local(pipeline: str, run: Callable[[Executor, dict[str, Any]], Any], tasks: Mapping[str, TaskRow],
              source_root: Path, search_paths: Sequence[str], modules: Sequence[str], script: str,
              argv: Sequence[str] | None = None, code: Mapping[str, tuple] | None = None,
              code_files: Mapping[str, str] | None = None, final_state: Sequence[int] = ()) -> int:
    ours, user_args = split_argv(argv)
    parser = argparse.ArgumentParser(description=f"Run pipeline {pipeline!r} locally. Arguments after `--` "
                                     "are the script's own (its sys.argv[1:]).")
    add_run_options(parser, source_root)
    args = parser.parse_args(ours)
    priority_note(args.priority, "the local program runs every task in its one process")
    run_id = new_run_id()
    store = open_run(parser, args, pipeline, run_id, always=bool(os.environ.get(KEEP_RUN_VARIABLE)))
    cache = open_cache(args, parser)
    prepare_interpreter(str((args.source_root / script).resolve()), user_args)
    loaded = load_modules(args.source_root, search_paths, modules)
    log = EventLog(store.events_path, run_id) if store is not None else None
    if code:  # fingerprints that cover the code as it is now: edited code is recomputed (dagc.runtime.code)
        tasks, changed = refresh(tasks, code, args.source_root, code_files or {})
        if changed and (args.resume is not None or args.cache is not None):
            print(describe_changes(changed), file=sys.stderr)
            if log is not None:
                log.write("code_changed", tasks=sorted(changed))
    # a file a stored output was computed from changed: that task and everything after it run again
    stale = before_reuse(tasks, code or {}, store if args.resume is not None else None, cache)
    if stale and log is not None:
        log.write("stale_inputs", tasks=sorted(stale))
    progress = Progress(len(tasks))  # drawn on a terminal only
    rt = Executor(tasks, store=store, log=log, cache=cache, reuse=args.resume is not None,
                  check=args.check_effects is not False, modules=list(modules), progress=progress,
                  write_behind=True, recompute=not args.store_all, final_state=final_state,
                  costs=CostLog(cost_store_dir(args.cost_store), pipeline,
                                current_digests(code or {}, args.source_root, code_files or {})))
    started = time.perf_counter()
    if log is not None and store is not None:
        log.write("run_start", pipeline=pipeline, tasks=len(tasks), resume=args.resume is not None,
                  run_dir=str(store.root), backend="local")
    token = set_context(events=log)  # the maps run here, outside any task, record their widths in it
    try:
        result = run(rt, loaded)
        rt.flush()  # every output written behind is on disk before the run says it ended
        nbytes = store_result(store, result)
    except TaskFailed as exc:
        if log is not None:
            log.write("run_failed", error=str(exc))
        # the error, the user's own frames, then what to do: the last lines of the output
        print(f"error: {exc}", file=sys.stderr)
        sys.stderr.write(user_traceback(exc.error))
        if store is not None:
            print(f"finish the run with: --resume {store.root}", file=sys.stderr)
        return 1
    except StorageError as exc:  # the run directory cannot be written: one line, and what to do
        if log is not None:
            log.write("run_failed", error=str(exc))
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C: said once, recorded, and resumable (what finished is stored)
        if log is not None:
            log.write("run_failed", error=INTERRUPTED)
        print(f"error: {INTERRUPTED}", file=sys.stderr)
        if store is not None:
            print(f"finish the run with: --resume {store.root}", file=sys.stderr)
        return 130
    finally:
        reset_context(token)
        progress.close()
    if log is not None:
        log.write("run_end", duration=round(time.perf_counter() - started, 6), bytes=nbytes)
    try:
        deliver_result(result, args.result)
    except ResultError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
