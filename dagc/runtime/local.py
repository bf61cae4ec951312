"""How the local backend's programs execute their tasks, for the one program lifecycle (dagc.runtime.lifecycle).

An emitted local program holds its tables and a `run(rt, modules)` function that calls every task through
`rt` (a dagc.runtime.executor.Executor), in a topological order; its `main` is
`run_local(PIPELINE_SPEC, run, argv)`. A task that fails after its retries ends the program with status 1
and one line naming it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from dagc.runtime.context import reset_context, set_context
from dagc.runtime.executor import Executor
from dagc.runtime.lifecycle import Pipeline, Program, load_modules
from dagc.runtime.program import KEEP_RUN_VARIABLE, open_run, priority_note
from dagc.runtime.progress import Progress
from dagc.runtime.store import RunStore

__all__ = ["Local", "run_local", "load_modules"]


class Local:
    """The local engine: every task in this one process, through the executor, in the program's order."""

    backend = "local"
    failures: tuple[type[BaseException], ...] = ()
    announces = False

    def __init__(self, run: Callable[[Executor, dict[str, Any]], Any]) -> None:
        self.run = run

    def describe(self, pipeline: Pipeline) -> str:
        return f"Run pipeline {pipeline.name!r} locally. Arguments after `--` are the script's own (its sys.argv[1:])."

    def add_options(self, parser: argparse.ArgumentParser, run_options: bool) -> None:
        return None  # the run options are all it takes

    def begin(self, program: Program) -> int | None:
        priority_note(program.args.priority, "the local program runs every task in its one process")
        return None

    def open_store(self, program: Program) -> RunStore | None:
        # `dagc run` asks for one (KEEP_RUN_VARIABLE), as Ray and torch programs always keep one
        return open_run(program.parser, program.args, program.pipeline.name, program.run_id,
                        always=bool(os.environ.get(KEEP_RUN_VARIABLE)))

    def execute(self, program: Program) -> object:
        args, store, log = program.args, program.store, program.log
        program.stale_inputs(store if program.resume else None, log)
        progress = Progress(len(program.tasks))  # drawn on a terminal only
        rt = Executor(program.tasks, store=store, log=log, cache=program.cache, reuse=program.resume,
                      check=args.check_effects is not False, modules=list(program.pipeline.modules),
                      progress=progress, write_behind=True, recompute=not args.store_all,
                      final_state=program.pipeline.final_state, costs=program.costs(),
                      context={"run_dir": store.root} if store is not None else None)  # (dagc.context().run_dir)
        program.run_start(log)
        token = set_context(events=log)  # the maps run here, outside any task, record their widths in it
        try:
            result = self.run(rt, program.modules)
            rt.flush()  # every output written behind is on disk before the run says it ended
        finally:
            reset_context(token)
            progress.close()
        return result

    def frames(self, program: Program, error: BaseException) -> str:
        return program.user_frames(error)

    def say(self, program: Program, text: str) -> None:
        sys.stderr.write(text)


def run_local(pipeline: Pipeline, run: Callable[[Executor, dict[str, Any]], Any],
              argv: Sequence[str] | None = None) -> int:
    """The emitted local program's `main`."""
    return Program(pipeline, Local(run)).main(argv)
