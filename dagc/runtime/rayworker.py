"""What runs on a Ray program's workers: the job a task knows its run by (`Job`), the actor that holds a
piece of shared state (`State`), the ranks of a multi-rank task (`Rank`, `run_gang`), and the loading of a
stored output. The driver's side is dagc.runtime.ray."""

from __future__ import annotations

import importlib
import os
import socket
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import ray

from dagc.annotations import enter_program_worker
from dagc.runtime import admission
from dagc.runtime.costs import CostLog
from dagc.runtime.events import EventLog
from dagc.runtime.executor import Executor, TaskRow, TaskSpec
from dagc.runtime.program import prepare_interpreter
from dagc.runtime.reuse import StoredOutputs
from dagc.runtime.store import Cache, RunStore
from dagc.runtime.threads import capped, current_threads, passive_waiting

__all__ = ["Interpreter", "Job", "State", "Rank", "run_gang", "run_gang_of_job", "load_stored", "warm_up", "HELD"]

HELD = "__dagc_held__"  # (HELD, group, value): a value that stays in the actor of its state


class Interpreter(NamedTuple):
    """What makes a worker look like `python SCRIPT ARGS` to user code."""

    script: str
    args: tuple[str, ...]
    cwd: str
    entry: str = ""  # the script as a module: imported first
    omp_threads: str | None = None  # the driver's OMP_NUM_THREADS (Ray sets it to 1 in its workers)


# ---- on the workers ---------------------------------------------------------------------------------
_process_threads: list[int] = []  # the threads this worker computes on once user code is loaded (set once)
# run id -> the outputs of a state group stored at its end, held by the group's actor (Executor.held)
_held: dict[str, dict[int, list[Any]]] = {}


def prepare_worker(interpreter: Interpreter) -> None:
    """Make this worker look like `python SCRIPT ARGS` and load the script's module, as before any task."""
    script, args, cwd, entry, omp_threads = interpreter
    enter_program_worker()  # (a pipeline the user's modules call at their top level does not run here)
    prepare_interpreter(script, args, cwd)
    if "torch" not in sys.modules:  # torch starts on the threads the plain run starts with
        if omp_threads is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = omp_threads
        passive_waiting()  # tasks on the plain run's threads share this node's cores (dagc.runtime.threads)
    if entry:  # its module-level code (a seed, settings) runs before any task, as under `python script.py`
        importlib.import_module(entry)
    if not _process_threads and current_threads() is not None:
        _process_threads.append(current_threads())  # type: ignore[arg-type]


@ray.remote(num_cpus=0)
def warm_up(interpreter: Interpreter) -> None:
    """Start a worker of this program and load the pipeline's modules there (torch with them) while the
    program's gatekeeper starts: the first task the gate submits is then leased to a worker that is ready,
    instead of one that starts only then. It is what that worker would do before its first task anyway.
    It never fails: a script whose module-level code raises fails in the task that loads it next, which
    reports it as that task's failure."""
    try:
        prepare_worker(interpreter)
    except BaseException:  # noqa: BLE001 - SystemExit too: the first task meets it again and says so
        pass


class Job:
    """What a running task knows about its run; `run(body)` runs it through the executor."""

    def __init__(self, task: str, row: TaskRow, run_dir: str, run_id: str, cache: str | None, device: object,
                 outputs: int, interpreter: Interpreter, resume: bool = False,
                 check: bool = False, share_of: int | None = None, threads_mode: str = "plain",
                 final_group: Mapping[str, TaskRow] | None = None, costs: CostLog | None = None) -> None:
        self.costs = costs
        self.task, self.row, self.run_dir, self.run_id, self.cache = task, row, run_dir, run_id, cache
        # the rows of the task's state group when the group is stored at its end (Executor's final_state)
        self.final_group = dict(final_group) if final_group else None
        self.check = check
        self.share_of = share_of  # devices placed on this task's node (None: not placed)
        self.threads_mode = threads_mode  # the run option --threads
        self.device, self.outputs, self.interpreter, self.resume = device, outputs, interpreter, resume
        self.rank, self.world_size, self.group = 0, 1, None
        self.inner_args: dict[str, Any] = {}
        self.preempted = 0  # times the admission queue stopped this task (dagc.runtime.admission)

    def __setstate__(self, state: dict[str, Any]) -> None:
        # unpickled on the worker before the task's other arguments, some of which may import user code
        self.__dict__.update(state)
        if not admission.IN_GATE:  # a gatekeeper hands the job on: no user code runs there
            self.prepare()

    def prepare(self) -> None:
        prepare_worker(self.interpreter)

    def threads(self) -> int | None:
        """The threads a task that declares no `cpus=` computes on here (dagc.runtime.threads)."""
        if not _process_threads:
            return None
        if self.threads_mode != "share":  # the plain run's count: its float results to the last bit
            return _process_threads[0]
        share_of = self.share_of
        if share_of is None:  # not placed: Ray runs as many tasks on a node as it has CPUs for
            cpus = ray.get_runtime_context().get_assigned_resources().get("CPU") or 1.0
            return max(1, min(_process_threads[0], int(cpus)))
        return capped(_process_threads[0], share_of)

    def run(self, body: Callable[..., Any], /, *args: Any, **kwargs: Any) -> tuple:
        """Run the task's body on its arguments (every one the task's own, whatever its name); returns
        (*outputs, info)."""
        return self._run(body, args, kwargs, None)

    def run_keyed(self, body: Callable[[], Any], /, key_values: tuple) -> tuple:
        """`run` for a glue node, fused group or region that takes no arguments and is keyed on the content of
        `key_values`, the values it reads from outside (dagc.runtime.executor)."""
        return self._run(body, (), {}, key_values)

    def _run(self, body: Callable[..., Any], args: tuple, kwargs: dict[str, Any], key_values: tuple | None) -> tuple:
        self.prepare()
        store = RunStore(self.run_dir)
        where: dict[str, Any] = {"node": ray.get_runtime_context().get_node_id(), "device": self.device,
                                 "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}
        if self.world_size > 1:
            where["rank"] = self.rank
        context: dict[str, Any] = {"rank": self.rank, "world_size": self.world_size, "group": self.group,
                                   "run_dir": Path(self.run_dir)}
        if self.world_size > 1 or "torch" in sys.modules:
            context["device"] = self.torch_device()
        log = EventLog(store.events_path, self.run_id)
        cache = Cache(self.cache) if self.cache else None
        self.inner_args = {"store": store, "log": log, "cache": cache, "context": context, "where": where}
        # a run stopped by preemption was no failed attempt: the count goes on from where it stood
        offset = -store.attempts_made(self.run_id, self.task) if getattr(self, "preempted", 0) else 0
        group = getattr(self, "final_group", None)
        final = (TaskSpec.from_row(self.task, self.row).state,) if group else ()
        executor = Executor(group or {self.task: self.row}, store=store, log=log, cache=cache, context=context,
                            where=where, claim=self.world_size == 1, check=getattr(self, "check", False),
                            threads=self.threads(), attempt_offset=offset, final_state=final,
                            # the group's outputs wait in its actor's process until its last task has run
                            held=_held.setdefault(self.run_id, {}) if final else None,
                            costs=getattr(self, "costs", None))
        spec = executor.spec(self.task)
        if spec.state is None:  # returned as stored: pickled once for the run directory and Ray's object store
            executor.carry = self.outputs  # (a state actor keeps the objects themselves)
        agree = self.agree if self.world_size > 1 else None
        value = executor.run_call(spec, body, args, kwargs, owner=self.rank == 0, agree=agree, key_values=key_values)
        info = {"task": self.task, **where}
        if executor.carried is not None:
            return (*executor.carried, info)
        return (*value, info) if self.outputs > 1 else (value, info)

    def executor(self, tasks: Mapping[str, TaskRow]) -> Executor:
        """An executor for the tasks this task runs inside it (the body of a `try` region), sharing its
        run directory, event log and cache: each of them is stored by its fingerprint, and taken from
        the run directory on `--resume`. Call it from the body `run` is running."""
        return Executor(tasks, reuse=self.resume, **self.inner_args)

    def agree(self, failed: bool) -> bool:
        """Whether this attempt failed on any rank of the task (its ranks retry together)."""
        import torch
        import torch.distributed as dist

        flag = torch.tensor([int(failed)], dtype=torch.int64)
        if dist.get_backend() == "nccl":
            flag = flag.cuda()
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def torch_device(self) -> str:
        import torch

        gpus = ray.get_gpu_ids()
        return "cuda:0" if gpus and torch.cuda.is_available() else "cpu"


@ray.remote(num_cpus=0)
def load_stored(run_dir: str, task: str, fingerprint: str, outputs: int) -> object:
    """The stored outputs of a task that finished earlier (read where they are needed)."""
    return StoredOutputs({}, RunStore(run_dir)).value(task, fingerprint)


@ray.remote(num_cpus=0)
class Rank:
    """One process of a multi-rank task: joins the task's torch process group and runs the body."""

    def address(self) -> str:
        with socket.socket() as s:
            s.bind(("", 0))
            return f"tcp://{ray.util.get_node_ip_address()}:{s.getsockname()[1]}"

    def run(self, function: Callable[..., tuple], job: Job, rank: int, world_size: int, address: str,
            *args: object) -> tuple:
        import torch
        import torch.distributed as dist

        backend = "nccl" if torch.cuda.is_available() and ray.get_gpu_ids() else "gloo"
        dist.init_process_group(backend, init_method=address, rank=rank, world_size=world_size)
        job.rank, job.world_size, job.group = rank, world_size, dist.group.WORLD
        try:
            return function(job, *args)
        finally:
            dist.destroy_process_group()


@ray.remote(num_cpus=0, max_retries=0)
def run_gang(function: Callable[..., tuple], job: Job, per_rank: list[dict[str, Any]], *args: object) -> tuple:
    """Run a multi-rank task: start one `Rank` actor per rank (with that rank's resources and
    placement), run the task on all of them, return rank 0's outputs, and end the actors."""
    return _gang(function, job, per_rank, *args)


@ray.remote(num_cpus=0, max_retries=0)
def run_gang_of_job(job: Job, function: Callable[..., tuple], per_rank: list[dict[str, Any]], *args: object) -> tuple:
    """`run_gang` with the job first, as a gate submits a task (dagc.runtime.admission). A preempted gang's
    launcher is stopped, and its rank actors, which it owns, end with it."""
    return _gang(function, job, per_rank, *args)


def _gang(function: Callable[..., tuple], job: Job, per_rank: list[dict[str, Any]], *args: object) -> tuple:
    actors = [Rank.options(**options).remote() for options in per_rank]
    try:
        address = ray.get(actors[0].address.remote())
        results = [actor.run.options(num_returns=job.outputs + 1).remote(function, job, rank, len(actors), address,
                                                                         *args)
                   for rank, actor in enumerate(actors)]
        values = [ray.get(list(refs)) for refs in results]  # every rank's, so that a failure anywhere shows
        return tuple(values[0])
    finally:
        for actor in actors:
            ray.kill(actor)


@ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)
class State:
    """Holds one piece of shared state: runs every task that touches it, one at a time, in the order
    the driver submits them (Ray keeps one submitter's order), on the objects themselves."""

    def __init__(self, group: int) -> None:
        self.group = group
        self.values: dict[str, object] = {}

    def run(self, function: Callable[..., tuple], job: Job, held: tuple, keep: tuple, *args: object) -> tuple:
        inputs = [self.resolve(name, arg) for name, arg in zip(held, args)]
        *values, info = function(job, *inputs, *args[len(held):])  # the executor retries inside
        out = []
        for name, value in zip(keep, values):
            if name is None:
                out.append(value)
            else:
                self.values[name] = value
                out.append((HELD, self.group, name))
        return (*out, info)

    def resolve(self, name: str | None, arg: object) -> object:
        """A held value by name; an argument that is state but new here (a parameter, a stored output)
        becomes held on first sight, so every later task shares the one object."""
        if isinstance(arg, tuple) and len(arg) == 3 and arg[0] == HELD:
            return self.values[arg[2]]
        if name is not None:
            return self.values.setdefault(name, arg)
        return arg

    def value(self, name: str) -> object:
        return self.values[name]

    def values_of(self, names: tuple[str, ...]) -> tuple:
        """Several held values, pickled together: objects they share stay shared where they arrive."""
        return tuple(self.values[name] for name in names)
