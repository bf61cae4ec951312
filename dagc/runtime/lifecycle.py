"""The one lifecycle of every emitted program (local, Ray, torch.distributed): `Program`.

    python PROGRAM.py [options] -- SCRIPT_ARGS...

`Program.main` parses the options (dagc.runtime.program's run options and the engine's own), opens the run
directory (and its lock) and the cache, makes the process look like `python SCRIPT ARGS` to user code,
refreshes the fingerprints of edited code (dagc.runtime.code: said on the console and as a `code_changed`
event), has the engine execute the tasks, then stores, records and delivers the result (printed, or
`--result PATH`). A failure ends the program with one line naming it, the frames of the user's code, and
`finish the run with: --resume DIR` where the run can be finished; Ctrl-C ends it with status 130.

An engine (`Engine`: dagc.runtime.local, dagc.runtime.ray, dagc.runtime.torchengine) supplies only how the
tasks are executed, and the few things its processes do their own way (its options, where its run
directory is opened, how it says a failure).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from dagc.runtime.code import current_digests, describe_changes, refresh
from dagc.runtime.costs import CostLog, cost_store_dir
from dagc.runtime.events import EventLog, new_run_id
from dagc.runtime.executor import TaskFailed
from dagc.runtime.filetrace import before_reuse
from dagc.runtime.program import (
    INTERRUPTED,
    ResultError,
    add_run_options,
    deliver_result,
    open_cache,
    prepare_interpreter,
    split_argv,
    store_result,
    unusable_ray_dirs,
    user_traceback,
)
from dagc.runtime.rows import TaskRow
from dagc.runtime.store import Cache, RunStore, StorageError

__all__ = ["Pipeline", "Engine", "Program", "FINISHED", "SaidElsewhere", "load_modules"]


@dataclass(frozen=True)
class Pipeline:
    """What an emitted program states about its pipeline, whatever runs it."""

    name: str
    source_root: Path
    search_paths: tuple[str, ...]
    modules: tuple[str, ...]  # imported by the driver (the script's module first); () where only workers do
    script: str  # sys.argv[0] of the user's code, relative to the source root
    tasks: Mapping[str, TaskRow]
    code: Mapping[str, tuple] = field(default_factory=dict)  # dagc.runtime.code: what each task runs
    code_files: Mapping[str, str] = field(default_factory=dict)
    final_state: tuple[int, ...] = ()  # state groups stored as they are at their end (dagc.runtime.executor)
    priority: int = 0  # @dagc.pipeline(priority=N): the default of --priority


class Engine(Protocol):
    """How a program's tasks are executed: all a backend's runtime supplies to `Program`."""

    backend: str  # "local", "ray", "torch"
    # the exceptions (besides TaskFailed, StorageError, ResultError) that end a run with status 1
    failures: tuple[type[BaseException], ...]
    announces: bool  # the program names its run and run directory as it starts (one it made itself)

    def describe(self, pipeline: Pipeline) -> str:
        """The options parser's description."""
        ...

    def add_options(self, parser: argparse.ArgumentParser, run_options: bool) -> None:
        """Add the engine's own options: before dagc's run options (`run_options` False), or after them."""
        ...

    def begin(self, program: Program) -> int | None:
        """After the options are parsed, before anything is opened: a status ends the program there."""
        ...

    def open_store(self, program: Program) -> RunStore | None:
        """The run directory, opened and locked here (None: none, or its processes open it themselves)."""
        ...

    def execute(self, program: Program) -> object:
        """Run the pipeline's tasks; the pipeline's result, or FINISHED once the engine had the program
        finish the run itself (`Program.finish`)."""
        ...

    def frames(self, program: Program, error: BaseException) -> str:
        """The frames of the user's code behind a failure ("" when there are none)."""
        ...

    def say(self, program: Program, text: str) -> None:
        """Say why the run failed (the last lines of the output)."""
        ...


FINISHED = object()  # what `Engine.execute` returns when the run's result was finished inside it


class SaidElsewhere(Exception):
    """The run failed, and another process says why (a torch rank whose peer failed): status 1, nothing said."""


def load_modules(source_root: Path, search_paths: Sequence[str], modules: Sequence[str]) -> dict[str, Any]:
    """Import the pipeline's own modules from their source tree (a pipeline they call at their top level
    does nothing in this process: the program runs it)."""
    import importlib

    from dagc.annotations import PROGRAM_VARIABLE

    for entry in reversed(search_paths):
        path = str((source_root / entry).resolve())
        if path not in sys.path:
            sys.path.insert(0, path)
    # set while the modules are imported (their pipelines are decorated then), and only then: a process that
    # calls a program's main() and goes on (a notebook, a test) must not pass it to what it starts later, whose
    # own pipeline calls would then do nothing
    previous = os.environ.get(PROGRAM_VARIABLE)
    os.environ[PROGRAM_VARIABLE] = "1"
    try:
        return {name: importlib.import_module(name) for name in modules}
    finally:
        if previous is None:
            os.environ.pop(PROGRAM_VARIABLE, None)
        else:
            os.environ[PROGRAM_VARIABLE] = previous


class Program:
    """One run of an emitted program (see the module docstring). The engine reads what it needs from it:
    `args`, `user_args`, `run_id`, `store`, `cache`, `log`, `tasks` (fingerprints of the code as it is now),
    `changed`, `modules`, `costs()`."""

    def __init__(self, pipeline: Pipeline, engine: Engine, path: str = "") -> None:
        self.pipeline, self.engine = pipeline, engine
        self.path = path  # the emitted program's file (a launcher starts it again)
        self.parser = argparse.ArgumentParser(description=engine.describe(pipeline))
        self.args = argparse.Namespace()
        self.user_args: list[str] = []
        self.argv: list[str] = []
        self.run_id = ""
        self.store: RunStore | None = None
        self.run_dir: Path | None = None  # the run directory (torch: its ranks open it themselves)
        self.cache: Cache | None = None
        self.log: EventLog | None = None
        self.tasks: Mapping[str, TaskRow] = {name: TaskRow.of(row) for name, row in pipeline.tasks.items()}
        self.changed: list[str] = []  # tasks whose code changed since the program was emitted
        self.modules: dict[str, Any] = {}
        self.speaks = True  # this process says what the run says once (torch: rank 0)
        self.started = time.perf_counter()

    @property
    def resume(self) -> bool:
        return self.args.resume is not None

    @property
    def priority(self) -> int | None:
        return self.pipeline.priority if self.args.priority is None else self.args.priority

    # ---- the lifecycle -----------------------------------------------------------------------------------
    def main(self, argv: Sequence[str] | None = None) -> int:
        self.argv = list(sys.argv[1:] if argv is None else argv)
        ours, self.user_args = split_argv(self.argv)
        self.engine.add_options(self.parser, run_options=False)
        add_run_options(self.parser, self.pipeline.source_root)
        self.engine.add_options(self.parser, run_options=True)
        self.args = self.parser.parse_args(ours)
        status = self.engine.begin(self)
        if status is not None:
            return status
        if self.engine.backend == "ray" and not getattr(self.args, "address", None):
            unusable = unusable_ray_dirs()  # a Ray of its own keeps its files there, with no fallback
            if unusable is not None:
                self.parser.exit(2, f"error: {unusable}\n")
        self.run_id = new_run_id()
        self.store = self.engine.open_store(self)
        self.cache = open_cache(self.args, self.parser)
        if self.store is not None:
            self.run_dir = self.store.root
            self.log = EventLog(self.store.events_path, self.run_id)
        prepare_interpreter(str((self.args.source_root / self.pipeline.script).resolve()), self.user_args)
        if self.engine.announces and self.store is not None:
            print(f"run {self.run_id}: run directory {self.store.root}", file=sys.stderr)
        if self.pipeline.modules:
            try:
                self.modules = load_modules(self.args.source_root, self.pipeline.search_paths, self.pipeline.modules)
            except ModuleNotFoundError as exc:  # a library the user's code imports (a framework of a dialect)
                if exc.name is None or exc.name.partition(".")[0] in {m.partition(".")[0] for m in self.pipeline.modules}:
                    raise
                self.parser.exit(2, f"error: the pipeline's code imports `{exc.name}`, which is not installed for "
                                 f"{sys.executable}: install it there (a pipeline written for another framework "
                                 "needs that framework where its program runs)\n")
        self.refresh_code()
        try:
            result = self.engine.execute(self)
        except KeyboardInterrupt as exc:  # Ctrl-C: said once, recorded, and resumable (what finished is stored)
            self.record_failure(INTERRUPTED)
            self.report(exc)
            return 130
        except (TaskFailed, StorageError, ResultError, *self.engine.failures) as exc:
            self.record_failure(str(exc))
            self.report(exc)
            return 1
        except SaidElsewhere:
            return 1
        if result is FINISHED:
            return 0
        try:
            self.finish(result, self.store, self.log)
        except StorageError as exc:
            self.record_failure(str(exc))
            self.report(exc)
            return 1
        except ResultError as exc:
            self.report(exc)
            return 1
        return 0

    def refresh_code(self) -> None:
        """Fingerprints that cover the code as it is now: edited code is recomputed (dagc.runtime.code)."""
        p = self.pipeline
        if not p.code:
            return
        self.tasks, changed = refresh(p.tasks, p.code, self.args.source_root, p.code_files)
        self.changed = sorted(changed)
        if changed and (self.resume or self.args.cache is not None):
            if self.speaks:
                print(describe_changes(changed), file=sys.stderr)
            self.record_changes(self.log)

    def record_changes(self, log: EventLog | None) -> None:
        """The `code_changed` event, when a run that reuses outputs found edited code."""
        if log is not None and self.changed and (self.resume or self.args.cache is not None):
            log.write("code_changed", tasks=self.changed)

    def stale_inputs(self, store: RunStore | None, log: EventLog | None) -> dict[str, str]:
        """Outputs computed from a file that changed since: their tasks and every task after them run again."""
        stale = before_reuse(self.tasks, self.pipeline.code or {}, store, self.cache)
        if stale and log is not None:
            log.write("stale_inputs", tasks=sorted(stale))
        return stale

    def run_start(self, log: EventLog | None, **fields: Any) -> None:
        """The `run_start` event, with the engine's own `fields`; the run's duration counts from here."""
        self.started = time.perf_counter()
        if log is not None:
            log.write("run_start", pipeline=self.pipeline.name, tasks=len(self.tasks), resume=self.resume,
                      run_dir=str(self.run_dir) if self.run_dir is not None else None, **fields,
                      backend=self.engine.backend)

    def costs(self) -> CostLog:
        """Where each finished task's time and sizes go, for the next compile to plan with (dagc.runtime.costs)."""
        p = self.pipeline
        return CostLog(cost_store_dir(self.args.cost_store).resolve(), p.name,
                       current_digests(p.code or {}, self.args.source_root, p.code_files or {}))

    def finish(self, result: object, store: RunStore | None, log: EventLog | None) -> None:
        """The run succeeded: its result kept in the run directory, `run_end`, then printed or written to
        `--result` (raises StorageError, ResultError)."""
        nbytes = store_result(store, result)
        if log is not None:
            log.write("run_end", duration=round(time.perf_counter() - self.started, 6), bytes=nbytes)
        if self.speaks:
            deliver_result(result, self.args.result)

    # ---- failures ----------------------------------------------------------------------------------------
    def record_failure(self, error: str) -> None:
        if self.log is not None:
            self.log.write("run_failed", error=error)

    def report(self, exc: BaseException) -> None:
        """The error, the user's own frames, then what to do: the last lines of the output. Ctrl-C reaches
        every process of the run: said once."""
        if isinstance(exc, KeyboardInterrupt):
            if not self.speaks:
                return
            text = f"error: {INTERRUPTED}\n"
        else:
            text = f"error: {exc}\n" + self.engine.frames(self, exc)
        if self.run_dir is not None and resumable(exc):
            text += f"finish the run with: --resume {self.run_dir}\n"
        self.engine.say(self, text)

    def user_frames(self, exc: BaseException) -> str:
        """The frames of the user's code in the traceback of the task's error, when it failed here."""
        return user_traceback(getattr(exc, "error", None)) if isinstance(exc, TaskFailed) else ""


def resumable(exc: BaseException) -> bool:
    """A run ended by a task's failure or by Ctrl-C can be finished with --resume (not one whose run
    directory cannot be written, or whose result cannot be delivered)."""
    return isinstance(exc, KeyboardInterrupt) or getattr(exc, "resumable", isinstance(exc, TaskFailed))

