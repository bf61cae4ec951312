"""The decorators users write. At run time they return the function unchanged.

`@dagc.task` and `@dagc.pipeline` may be written bare or with options. The compiler reads the
options statically (it never runs this code); `TASK_OPTIONS` is the single description of what
each option accepts, used both here and by the frontend's validation.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from dagc import units

__all__ = ["task", "pipeline", "after", "TASK_OPTIONS", "OptionSpec", "PIPELINE_OPTIONS"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class OptionSpec:
    """What one task option accepts. `kind` drives both validation and the IR field it fills."""

    kind: str  # "cpus" | "count" | "number" | "int" | "bool" | "duration" | "size" | "names" | "paths" | "resources" | "compress" | "reduce"
    doc: str

    @property
    def accepted(self) -> str:
        return {
            "count": "a non-negative number (e.g. 1, 0.5)",
            "cpus": units.CPU_FORMS,
            "number": "a non-negative number",
            "int": "an integer",
            "posint": "a positive integer",
            "bool": "True or False",
            "duration": units.DURATION_FORMS,
            "size": units.SIZE_FORMS,
            "names": "a list of task names, e.g. ['prepare', 'download']",
            "paths": "a list of path strings or pipeline parameters",
            "resources": 'a dict of custom resource names to amounts, e.g. {"tpu": 1}',
            "compress": "'bf16' or 'fp16'",
            "reduce": "'sum' or 'mean'",
        }[self.kind]


TASK_OPTIONS: dict[str, OptionSpec] = {
    "cpus": OptionSpec("cpus", "CPU cores the task needs (default 1; \"500m\" is half a core)"),
    "gpus": OptionSpec("count", "GPUs the task needs per rank (default 0)"),
    "memory": OptionSpec("size", "memory the task needs, e.g. '16GiB'"),
    "cost": OptionSpec("duration", "estimated duration, e.g. '2m30s' or seconds"),
    "flops": OptionSpec("number", "estimated floating-point operations (used with device speed)"),
    "out_size": OptionSpec("size", "estimated size of the output, e.g. '512MiB'"),
    "retries": OptionSpec("int", "how many times a failed task is retried (default 0)"),
    "timeout": OptionSpec("duration", "stop the task after this long, e.g. '10m' (a failure: retried if retries allow)"),
    "cache": OptionSpec("bool", "let --cache reuse the task's output (default True; False: always run it)"),
    "priority": OptionSpec("int", "scheduling priority; higher runs first among equals"),
    "preemptible": OptionSpec("bool", "on a shared Ray cluster, a task of higher priority may stop it and run first "
                              "(it runs again later; default True; False: never stopped)"),
    "side_effects": OptionSpec("bool", "the task acts on the world: never removed or merged"),
    "pure": OptionSpec("bool", "no effects: the result depends only on the arguments and is a new object "
                       "(calls may be merged or removed, and their result may go anywhere)"),
    "readonly": OptionSpec("names", "parameters the task never changes in place, e.g. ['model']"),
    "mutates": OptionSpec("names", "parameters the task changes in place where dagc cannot see it, e.g. ['model'] "
                          "(the run-time check of effects names them)"),
    "compress": OptionSpec("compress", "send the output's floating tensors (also inside lists, tuples and "
                           "dicts) to other devices in 16 bits: 'bf16' or 'fp16' (docs/annotations.md)"),
    "reduce": OptionSpec("reduce", "the task adds up ('sum') or averages ('mean') the tensors of its one list "
                         "argument; the torch backend may compute it with a reduce collective (docs/annotations.md)"),
    "ranks": OptionSpec("posint", "number of processes the task runs as (e.g. DDP), default 1"),
    "resources": OptionSpec("resources", "custom resources (Ray custom resources)"),
    "after": OptionSpec("names", "tasks that must finish before this one starts"),
    "reads": OptionSpec("paths", "files this task reads"),
    "writes": OptionSpec("paths", "files this task writes"),
}

PIPELINE_OPTIONS: dict[str, OptionSpec] = {
    "name": OptionSpec("names", "name of the pipeline in the IR (default: the function name)"),
    "priority": OptionSpec("int", "which pipeline goes first on a shared Ray cluster (higher first; default 0)"),
}


@overload
def task(fn: F, /) -> F: ...
@overload
def task(fn: None = None, /, **options: Any) -> Callable[[F], F]: ...
def task(fn: F | None = None, /, **options: Any) -> F | Callable[[F], F]:
    """Mark a function as a pipeline task. Returns the function itself: calling it runs it.

    Options are not checked here, so that an annotated script runs exactly as plain Python;
    `dagc check` validates them statically with source locations.
    """
    if fn is not None:
        return _with_options(fn)

    def decorate(func: F) -> F:
        try:  # the options as written, for the run-time checks of what was declared (dagc.runtime.costs)
            func.__dagc_task__ = dict(options)  # type: ignore[attr-defined]
        except (AttributeError, TypeError):  # a callable that keeps no attributes
            pass
        return _with_options(func)

    return decorate


def _with_options(func: F) -> F:
    """`func` with Ray's per-call form `func.options(retries=5)(x)`, which calls `func` itself (the options are
    read by the compiler)."""
    if not hasattr(func, "options"):
        try:
            func.options = lambda **options: func  # type: ignore[attr-defined]
        except (AttributeError, TypeError):  # a callable that keeps no attributes
            pass
    return func


@overload
def pipeline(fn: F, /) -> F: ...
@overload
def pipeline(fn: None = None, /, **options: Any) -> Callable[[F], F]: ...
def pipeline(fn: F | None = None, /, **options: Any) -> F | Callable[[F], F]:
    """Mark a function as a pipeline. Returns the function itself: calling it runs the tasks eagerly
    (but in a process of a dagc program: see `_outside_programs`)."""
    if fn is not None:
        return _outside_programs(fn)

    def decorate(func: F) -> F:
        return _outside_programs(func)

    return decorate


# Set while a dagc program (dagc.runtime) imports the user's modules to call their tasks.
PROGRAM_VARIABLE = "DAGC_PROGRAM"
# Whether this whole process is a worker of a dagc program, which may import a user's module at any time (Ray
# imports a task's module when it unpickles the task). A Ray worker starts with the variable set: it is read
# once, when dagc is first imported there, and taken out of the environment, so that a process a task starts
# (another dagc script, say) does not inherit it and find its own pipeline calls doing nothing.
_program_worker = os.environ.pop(PROGRAM_VARIABLE, "") == "1"


def enter_program_worker() -> None:
    """Mark this process as a worker of a dagc program for the rest of its life, and take the variable out of
    its environment (see `_program_worker`)."""
    global _program_worker
    _program_worker = True
    os.environ.pop(PROGRAM_VARIABLE, None)


def _outside_programs(func: F) -> F:
    """The pipeline function itself, except in a process of a dagc program: there a call of it does nothing
    and returns None. A module that calls its pipeline at its top level (as an Airflow DAG file does) would
    otherwise run the whole pipeline again in every process that imports it; the program runs it once."""
    if not (_program_worker or os.environ.get(PROGRAM_VARIABLE)):
        return func

    @functools.wraps(func)
    def run_by_the_program(*args: Any, **kwargs: Any) -> None:
        return None

    return run_by_the_program  # type: ignore[return-value]


T = TypeVar("T")


def trips(items: Iterable[T], /, *, expected: int) -> Iterable[T]:
    """Planning hint for a loop that may leave early: `for epoch in dagc.trips(range(40), expected=12):`
    plans the loop as 12 trips of its body instead of 40. Returns `items` unchanged when run."""
    return items


def each(items: Iterable[T], /, *, expected: int | None = None, max_items: int | None = None,
         concurrency: int | None = None) -> Iterable[T]:
    """Options of a `map` over a run-time list: `for shard in dagc.each(shards, expected=64,
    max_items=1000, concurrency=8):`. `expected` is the width to plan for, `max_items` a guardrail
    (more items stop the run with an error naming the loop), `concurrency` the most items that run at
    once. Returns `items` unchanged when run as plain Python."""
    return items


def after(value: T, /, *prerequisites: Any) -> T:
    """Call-site ordering: `m = dagc.after(train(data), prepared)` runs `train` after the task that
    produced `prepared`, without passing it. Returns `value` unchanged when run as plain Python."""
    return value
