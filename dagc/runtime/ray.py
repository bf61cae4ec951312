"""Runtime of the programs the Ray backend emits: the driver, the placement, and the task wrapper.

An emitted Ray program holds its plan (`Plan`: devices, each task's demand, the executor's task
table, shared state groups) and one `@ray.remote` function per task whose body is
`job.run(body)`; `ray_main(PLAN, run, argv)` does the rest, as the one program lifecycle of every
backend (dagc.runtime.lifecycle: options, run directory, result, failures) on the `Ray` engine:

  * `Job` runs a task on a worker through dagc.runtime.executor (attempt numbers, retries of
    exceptions and `SystemExit`, `timeout=`, events, the run directory and the cache), after making
    the worker look like the plain run to user code (`sys.argv`, working directory). A worker that
    dies is retried by Ray (`max_retries`); its attempt number continues the count.
  * `Driver` submits every task up front, skips those whose output a resumed run or the cache
    already has, waits, names the first failure, and stops a run whose tasks
    wait for resources longer than `--pending-timeout`, naming them and what they lack.
  * `Placement` holds tasks to their devices (node affinity or one placement-group bundle per
    device), and warns when the cluster has fewer nodes than the plan.
  * `Rank` actors run a multi-rank task's processes in one torch process group, started by a
    launcher task once its inputs are ready and ended with it (so a gang never holds the CPUs that
    the tasks before or after it need); `State` actors hold
    objects that tasks share (dagc.ir.effects) and run those tasks in program order.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import ray

from dagc.annotations import PROGRAM_VARIABLE
from dagc.runtime.admission import AGING_SECONDS, Gate, admission_queue, unwrap
from dagc.runtime.console import replay
from dagc.runtime.costs import CostLog
from dagc.runtime.dispatch import DISPATCH_MODES, Dispatcher
from dagc.runtime.events import EventLog, EventTail, read_events
from dagc.runtime.executor import TaskFailed, TaskRow, TaskSpec
from dagc.runtime.lifecycle import Pipeline, Program
from dagc.runtime.placement import Placement, PlacementError, total_resources
from dagc.runtime.program import open_run, priority_note, user_frames
from dagc.runtime.progress import Progress
from dagc.runtime.rayworker import (
    HELD,
    Interpreter,
    Job,
    State,
    load_stored,
    run_gang,
    run_gang_of_job,
    warm_up,
)
from dagc.runtime.reuse import StoredOutputs
from dagc.runtime.store import Cache, RunStore

__all__ = ["Plan", "Job", "Driver", "Ray", "Placement", "PlacementError", "RunFailed", "ray_main", "local_resources",
           "PLACEMENTS", "HELD"]


def _every_line_shown() -> None:
    """Ray folds lines that several workers print alike into `[repeated Nx across cluster]`, which would hide a
    training's per-epoch lines: show each, as the plain run does (unless the user set RAY_DEDUP_LOGS). Ray reads
    the variable when it is imported, which the program did first, so its logging module is told too."""
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    if os.environ["RAY_DEDUP_LOGS"] == "0":
        try:
            from ray._private import ray_logging

            ray_logging.RAY_DEDUP_LOGS = False  # type: ignore[attr-defined]
        except (ImportError, AttributeError):  # another Ray: its own default stands
            pass


_every_line_shown()

PLACEMENTS = ("node", "bundles")


class RunFailed(Exception):
    """A task failed after its retries; the message names it (`task`: the task that failed first)."""

    resumable = True  # finish the run with --resume: what finished is stored

    def __init__(self, message: str, task: str | None = None) -> None:
        super().__init__(message)
        self.task = task


@dataclass(frozen=True)
class Plan:
    """What the compiler decided, as the emitted program states it."""

    pipeline: str
    source_root: Path
    search_paths: tuple[str, ...]
    script: str
    tasks: Mapping[str, TaskRow]                     # executor rows (fingerprint, retries, ...)
    demands: Mapping[str, dict[str, float]]          # what one process of each task needs
    devices: Sequence[tuple[int, dict[str, float]]] = ()  # (cluster node, bundle) per device
    state_groups: Sequence[dict[str, float]] = ()
    state: Mapping[str, int] = field(default_factory=dict)
    placement: str | None = None
    placement_timeout: float = 30.0
    code: Mapping[str, tuple] = field(default_factory=dict)  # dagc.runtime.code: what each task runs
    code_files: Mapping[str, str] = field(default_factory=dict)
    entry: str = ""  # the pipeline's script as a module
    priority: int = 0  # @dagc.pipeline(priority=N): the default of --priority
    pinned: frozenset[str] = frozenset()  # tasks declared preemptible=False
    final_state: tuple[int, ...] = ()  # state groups stored as they are at their end (dagc.runtime.executor)
    ranks: Mapping[str, float] = field(default_factory=dict)  # task -> critical-path rank (dagc.runtime.dispatch)


class Stored:
    """An output found in the run directory: loaded only if a task that runs reads it. One of a state group
    stored at its end comes loaded (`value`): its group was read on the driver as one pickle, so that the
    objects its tasks share stay shared in the pipeline's result."""

    _NOT_LOADED = object()

    def __init__(self, task: str, index: int, outputs: int, value: object = _NOT_LOADED) -> None:
        self.task, self.index, self.outputs, self.value = task, index, outputs, value

    @property
    def loaded(self) -> bool:
        return self.value is not Stored._NOT_LOADED


# ---- the driver ---------------------------------------------------------------------------------------
class Driver:
    """Submits tasks, skips those a resumed run or the cache already has, and waits."""

    def __init__(self, plan: Plan, store: RunStore, log: EventLog, resume: bool, placement: Placement | None,
                 cache: Cache | None = None, interpreter: Interpreter = Interpreter("", (), "."),
                 pending_timeout: float = 600.0, check: bool = False, admission: dict[str, Any] | None = None,
                 threads_mode: str = "plain", costs: CostLog | None = None,
                 dispatcher: Dispatcher | None = None) -> None:
        self.dispatcher = dispatcher  # hands ready tasks their devices by priority (None: Ray's own order)
        self.costs = costs  # where the workers record what each task measured (dagc.runtime.costs)
        self.threads_mode = threads_mode  # --threads: plain (the plain run's count) or share (dagc.runtime.threads)
        self.plan, self.store, self.log, self.placement, self.cache = plan, store, log, placement, cache
        # on a shared cluster: the program's priority and the queue's aging (dagc.runtime.admission); None: off
        self.admission = admission
        self.gatekeeper: Any = None
        self.gated: set[ray.ObjectRef] = set()  # outputs of gates: each holds the ref of its task's output
        self.check_effects = check  # --check-effects: the workers compare what each task did with the assumed
        self.interpreter, self.pending_timeout = interpreter, pending_timeout
        self.resume = resume
        # what a resumed run or the cache already has (dagc.runtime.reuse)
        self.reuse = StoredOutputs({name: TaskSpec.from_row(name, row) for name, row in plan.tasks.items()}, store,
                                   cache, resume, plan.final_state)
        self.put: dict[tuple[str, int], ray.ObjectRef] = {}  # loaded outputs put in the object store
        self.run_dir = str(store.root.resolve())
        self.pending: dict[ray.ObjectRef, str] = {}
        self.submitted: dict[str, ray.ObjectRef] = {}  # task -> the ref that says it finished
        self.since: dict[str, float] = {}
        self.inputs: dict[str, list[ray.ObjectRef]] = {}
        self.last: dict[int, ray.ObjectRef] = {}  # device -> its task submitted last (bundles: run in order)
        self.loaded: dict[str, list[ray.ObjectRef]] = {}
        self.actors: dict[int, Any] = {}
        self.state_devices: dict[int, int | None] = {}  # state group -> its device (groups behind the gate)
        self.state_calls: dict[int, int] = {}  # state group -> the number of its last call through the gate
        self.held: dict[ray.ObjectRef, tuple[int, str]] = {}  # output refs that stand for a value an actor holds
        self.progress = Progress(len(plan.tasks))
        self.nodes: list[dict[str, float]] | None = None
        self.warm: ray.ObjectRef | None = None
        if admission is not None and not resume:  # its process starts while a worker for the first tasks does
            self.gate()
            if any(task not in plan.state for task in plan.tasks):  # (a state group's tasks run in its actor)
                self.warm = self.warm_up()

    def warm_up(self) -> ray.ObjectRef:
        """A worker of this program, started and loaded with the pipeline's modules on the node of the first
        device while the gatekeeper starts. The tasks on that node wait for it (`warmed`), so that Ray leases
        them the ready worker rather than starting one per task at once: on 2 cores, 4 parallel first tasks
        that each started a worker (each importing torch) began 6.5-7.8 s after the run did; behind the
        warm worker, 2.3-2.7 s."""
        options = {}
        if self.placement is not None and self.plan.devices:
            options["scheduling_strategy"] = self.placement.strategy(0)
        return warm_up.options(**options).remote(self.interpreter)

    def warmed(self, device: int | None) -> list[ray.ObjectRef]:
        """The warm-up a task on `device` waits for (none when the device is on another node)."""
        if self.warm is None:
            return []
        if device is not None and self.plan.devices and self.plan.devices[device][0] != self.plan.devices[0][0]:
            return []
        return [self.warm]

    def fingerprint(self, task: str) -> str:
        return self.plan.tasks[task].fingerprint

    def check(self, task: str, ranks: int = 1) -> None:
        """Fail now, naming the task, when no live Ray node has what one of its processes needs."""
        need = self.plan.demands[task]
        if self.nodes is None:  # asked once per run: the cluster's nodes, not what they have free
            self.nodes = [n["Resources"] for n in ray.nodes() if n["Alive"]]
        if not any(all(r.get(k, 0.0) >= v for k, v in need.items()) for r in self.nodes):
            have = "; ".join(str({k: v for k, v in r.items() if not k.startswith("node:")}) for r in self.nodes)
            raise PlacementError(f"task `{task}` needs {need}{f' per rank ({ranks} ranks)' if ranks > 1 else ''},"
                                 f" but no node of the Ray cluster has it (nodes: {have})")

    def stored(self, task: str, outputs: int) -> object:
        """Placeholders for the outputs of a task finished earlier (run directory or cache), or None."""
        spec = self.reuse.specs[task]
        source = self.reuse.source(spec)
        if source is None:
            return None
        if self.reuse.final(spec):  # stored with its group, at its end: read here, with the group
            value, chunks = self.reuse.output(spec, source)
            values = tuple(Stored(task, i, outputs, value[i] if outputs > 1 else value) for i in range(outputs))
        else:  # loaded on a worker, if a task that runs reads it
            chunks = self.reuse.console(spec, source)
            values = tuple(Stored(task, i, outputs) for i in range(outputs))
        self.log.skip(task, spec.fingerprint, source=source)
        # what the task printed when it ran, on the driver's console
        replay(chunks, task, "the run directory" if source == "run" else "the cache")
        self.progress.advance(name=task)
        return values if outputs > 1 else values[0]

    def resolve(self, value: object, group: int | None = None) -> object:
        """An argument as a task (of state `group`) receives it: stored outputs are loaded on a worker
        first; a value another state's actor holds is fetched from it, after the tasks before."""
        if not isinstance(value, Stored):
            held = self.held.get(value) if isinstance(value, ray.ObjectRef) else None
            if held is not None and held[0] != group:
                if self.admission is not None:  # its actor lives behind the gate
                    ref = self.gate().state_value.remote(self.state_admit(held[0], self.state_devices[held[0]]),
                                                         held[1], f"state {held[0]}")
                    self.gated.add(ref)
                    return ref
                return self.actors[held[0]].value.remote(held[1])
            return value
        if value.loaded:  # read on the driver with its group: put in the object store once
            key = (value.task, value.index)
            if key not in self.put:
                self.put[key] = ray.put(value.value)
            return self.put[key]
        if value.task not in self.loaded:
            refs = load_stored.options(num_returns=value.outputs).remote(
                self.run_dir, value.task, self.fingerprint(value.task), value.outputs)
            self.loaded[value.task] = refs if value.outputs > 1 else [refs]
        return self.loaded[value.task][value.index]

    def ungated(self, value: object) -> object:
        """A gate's output as a reader that does not go through a gate receives it: the value itself."""
        if isinstance(value, ray.ObjectRef) and value in self.gated:
            return unwrap.remote(value)
        return value

    def job(self, task: str, device: object, outputs: int) -> Job:
        group = self.reuse.specs[task].state
        final = None  # a task of a group stored at its end: the state actor holds its output until then
        if group is not None and group in self.plan.final_state:
            final = {m.name: self.plan.tasks[m.name] for m in self.reuse.groups[group]}
        return Job(task, self.plan.tasks[task], self.run_dir, self.log.run_id,
                   str(self.cache.root.resolve()) if self.cache is not None else None, device, outputs,
                   self.interpreter, resume=self.resume, check=self.check_effects, share_of=self.share_of(device),
                   threads_mode=self.threads_mode, final_group=final, costs=self.costs)

    def share_of(self, device: object) -> int | None:
        """How many devices of the plan share the node `device` is on (None: not placed)."""
        if not isinstance(device, int) or not self.plan.devices or self.placement is None:
            return None
        node = self.plan.devices[device][0]
        return sum(1 for n, _ in self.plan.devices if n == node)

    def waits(self, after: tuple[str, ...], devices: list[int]) -> list[ray.ObjectRef]:
        """Refs a task must wait for besides its inputs (passed as trailing arguments, which Ray
        resolves first): tasks it is ordered after, and with one bundle per device the task
        submitted before it on its device, so that a device runs its tasks in the schedule's order."""
        refs = [self.submitted[t] for t in after if t in self.submitted]  # a stored task has finished
        if self.placement is not None and self.placement.mode == "bundles":
            refs += [self.last[d] for d in devices if d in self.last]
        return refs

    def _track(self, task: str, refs: list, values: list, devices: list[int]) -> None:
        self.pending[refs[-1]] = task
        self.submitted[task] = refs[-1]
        self.since[task] = time.monotonic()
        self.inputs[task] = [v for v in values if isinstance(v, ray.ObjectRef)]
        self.last.update((d, refs[-1]) for d in devices)

    def submit(self, function: Any, task: str, *args: object, device: int | None = None, outputs: int = 1,
               after: tuple[str, ...] = ()) -> object:
        """Submit one task (unless its output is already stored); returns its output ref(s)."""
        found = self.stored(task, outputs)
        if found is not None:
            return found
        self.check(task)
        options = {}
        gated = self.dispatcher is not None and self.admission is None and self.dispatcher.gates(task)
        if self.placement is not None and device is not None:  # (by priority: the plan's node is preferred)
            options["scheduling_strategy"] = self.placement.strategy(device, soft=gated)
        devices = [device] if device is not None else []
        values = [*(self.resolve(a) for a in args), *self.waits(after, devices), *self.warmed(device)]
        needs = [v for v in values if isinstance(v, ray.ObjectRef)]
        if gated:
            assert self.dispatcher is not None
            values.append(self.dispatcher.slot(task))  # (a trailing argument: Ray starts it once granted)
        job = self.job(task, device, outputs)
        if self.admission is not None:  # through the cluster's queue: admitted by priority, maybe preempted
            admit = {**self.admission, "demand": dict(self.plan.demands[task]),
                     "preemptible": task not in self.plan.pinned,
                     "indirect": [i for i, v in enumerate(values) if isinstance(v, ray.ObjectRef) and v in self.gated]}
            refs = self.gate().run.options(num_returns=outputs + 1).remote(function, options, job, admit, values)
            self.gated.update(refs)
        else:
            refs = function.options(**options).remote(job, *values)
        if gated:
            assert self.dispatcher is not None
            self.dispatcher.add(task, needs, refs[-1])
        self._track(task, refs, values, devices)
        return refs[0] if outputs == 1 else tuple(refs[:-1])

    def gate(self) -> Any:
        """The program's gatekeeper (dagc.runtime.admission), started on first use."""
        if self.gatekeeper is None:
            assert self.admission is not None
            self.gatekeeper = Gate.remote(self.run_dir, self.log.run_id, self.admission["aging"])
        return self.gatekeeper

    def state_options(self, group: int, device: int | None) -> dict[str, object]:
        """The Ray options of the actor holding state `group` (on its device when placed)."""
        need = dict(self.plan.state_groups[group])
        need.pop("CPU", None)  # it runs one task at a time: it takes the GPUs they need, no CPU slot
        need.pop("memory", None)
        options: dict[str, object] = {"num_gpus": need.pop("GPU", 0.0), "resources": need}
        if self.placement is not None and device is not None:
            options["scheduling_strategy"] = self.placement.strategy(device)
        return options

    def state_actor(self, group: int, device: int | None) -> Any:
        """The actor holding state `group`, started on first use."""
        if group not in self.actors:
            self.actors[group] = State.options(**self.state_options(group, device)).remote(group)
        return self.actors[group]

    def state_admit(self, group: int, device: int | None, values: list[Any] = (), task: str | None = None
                    ) -> dict[str, Any]:
        """What the gate needs to run a call of state group `group` (task `task`, or a read) through the
        cluster's queue; a preemption restarts the whole group (dagc.runtime.admission)."""
        assert self.admission is not None
        tasks = [t for t, g in self.plan.state.items() if g == group]
        seq = self.state_calls[group] = self.state_calls.get(group, -1) + 1  # the gate keeps this order
        demand = self.plan.demands[task] if task is not None else self.plan.state_groups[group]
        return {**self.admission, "group": group, "seq": seq, "demand": dict(demand),
                "preemptible": not any(t in self.plan.pinned for t in tasks),
                "options": self.state_options(group, device),
                "indirect": [i for i, v in enumerate(values) if isinstance(v, ray.ObjectRef) and v in self.gated]}

    def submit_state(self, function: Any, task: str, *args: object, held: tuple, keep: tuple,
                     device: int | None = None, outputs: int = 1, after: tuple[str, ...] = ()) -> object:
        """Submit a task that touches shared state to the actor holding it. Such a task is reused only
        when every task of its state is (the state is rebuilt from the start otherwise)."""
        found = self.stored(task, outputs)
        if found is not None:
            return found
        self.check(task)
        group = self.plan.state[task]
        devices = [device] if device is not None else []
        if self.admission is not None:  # the group is admitted through the cluster's queue, maybe preempted
            values = [*(self.resolve(a, group) for a in args), *self.waits(after, devices)]
            refs = self.gate().run_state.options(num_returns=outputs + 1).remote(
                function, self.job(task, device, outputs), held, keep, self.state_admit(group, device, values, task),
                values)
            self.gated.update(refs)
            self.state_devices.setdefault(group, device)
        else:
            actor = self.state_actor(group, device)
            values = [*(self.ungated(self.resolve(a, group)) for a in args), *self.waits(after, devices)]
            refs = actor.run.options(num_returns=outputs + 1).remote(function, self.job(task, device, outputs), held,
                                                                     keep, *values)
        self.held.update((ref, (group, name)) for ref, name in zip(refs, keep) if name is not None)
        self._track(task, refs, values, devices)
        return refs[0] if outputs == 1 else tuple(refs[:-1])

    def submit_gang(self, function: Any, task: str, *args: object, ranks: int, device: list[int] | None = None,
                    outputs: int = 1, after: tuple[str, ...] = ()) -> object:
        """Submit a multi-rank task: `ranks` actors, one per device, in one process group. The actors
        are started by a launcher task once the inputs are ready and end with the task, so they never
        hold resources that the tasks before or after it need."""
        found = self.stored(task, outputs)
        if found is not None:
            return found
        self.check(task, ranks)
        need = dict(self.plan.demands[task])
        options: dict[str, Any] = {"num_cpus": need.pop("CPU", 1.0), "num_gpus": need.pop("GPU", 0.0)}
        if "memory" in need:
            options["memory"] = need.pop("memory")
        options["resources"] = need
        per_rank = []
        for rank in range(ranks):
            mine = dict(options)
            if self.placement is not None and device is not None:
                mine["scheduling_strategy"] = self.placement.strategy(device[rank])
            per_rank.append(mine)
        devices = list(device or [])
        if self.admission is not None:  # admitted as one task that needs every rank's resources
            values = [function, per_rank, *(self.resolve(a) for a in args), *self.waits(after, devices)]
            admit = {**self.admission, "demand": {k: v * ranks for k, v in self.plan.demands[task].items()},
                     "preemptible": task not in self.plan.pinned, "graceful": True,
                     "indirect": [i for i, v in enumerate(values) if isinstance(v, ray.ObjectRef) and v in self.gated]}
            refs = self.gate().run.options(num_returns=outputs + 1).remote(
                run_gang_of_job, {}, self.job(task, device, outputs), admit, values)
            self.gated.update(refs)
        else:
            values = [*(self.ungated(self.resolve(a)) for a in args), *self.waits(after, devices)]
            refs = run_gang.options(num_returns=outputs + 1).remote(function, self.job(task, device, outputs),
                                                                   per_rank, *values)
        self._track(task, refs, values, devices)
        return refs[0] if outputs == 1 else tuple(refs[:-1])

    def wait(self) -> None:
        """Wait for every submitted task; raise RunFailed, naming the task, on the first failure."""
        order = {task: i for i, task in enumerate(self.submitted)}
        if self.dispatcher is not None:  # (every top-level task is submitted by now)
            self.dispatcher.start()
        next_check = time.monotonic() + min(5.0, self.pending_timeout)
        # the display names the tasks running now: the workers record when each starts
        tail = EventTail(self.store.events_path, self.log.run_id) if self.progress.enabled else None
        while self.pending:
            ready, _ = ray.wait(list(self.pending), num_returns=len(self.pending), timeout=0.1, fetch_local=False)
            for record in tail.new() if tail is not None else ():
                if record.get("event") == "start" and record.get("task") in self.since:
                    self.progress.begin(str(record["task"]))
            failed: list[tuple[int, str, Exception]] = []
            for ref in ready:
                task = self.pending.pop(ref)
                try:
                    ray.get(ref)
                except ray.exceptions.RayError as exc:  # the task, or one it waited for, failed
                    failed.append((order.get(task, 0), task, exc))
                    continue
                if task not in self.pending.values():
                    self.progress.advance(name=task)
            if failed:  # name the first in submission order: what fails after it may fail because of it
                _, task, exc = min(failed, key=lambda f: f[0])
                cause = getattr(exc, "cause", None)
                message = _failure_message(task, exc)
                if isinstance(exc, ray.exceptions.WorkerCrashedError):  # why its process ended, if it said so
                    said = [e for e in _events(self.store, self.log.run_id, "failure") if e.get("task") == task]
                    if said:
                        message = f"task `{task}` failed (attempt {said[-1].get('attempt', 1)}): {said[-1]['error']}"
                raise RunFailed(message, cause.task if isinstance(cause, TaskFailed) else task) from exc
            if time.monotonic() >= next_check:
                self.watch()
                next_check = time.monotonic() + min(5.0, self.pending_timeout)
        self.progress.close()

    def watch(self) -> None:
        """Stop the run when a task whose inputs are all ready has not started for `pending_timeout`
        seconds: it is waiting for resources it may never get. The message names it, its demand, and
        what the cluster has free."""
        now = time.monotonic()
        waiting = set(self.pending.values())
        stuck = [t for t in waiting if now - self.since[t] > self.pending_timeout]
        if not stuck:
            return
        started = {e.get("task") for e in _events(self.store, self.log.run_id, "start")}
        stuck = [t for t in stuck if t not in started and _ready(self.inputs.get(t, []))]
        if stuck:
            free = {k: v for k, v in ray.available_resources().items() if not k.startswith("node:")}
            lines = [f"task `{t}` has waited {now - self.since[t]:.0f}s for {self.plan.demands[t]}" for t in stuck]
            raise PlacementError("; ".join(lines) + f" (free in the cluster now: {free}); tasks never started "
                                 f"within --pending-timeout {self.pending_timeout:g}s")

    def cancel(self) -> None:
        """Stop every task submitted and not finished (Ctrl-C)."""
        for ref in list(self.pending):
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - finished meanwhile, or an actor's call: the actors go in close()
                pass

    def close(self) -> None:
        if self.dispatcher is not None:
            self.dispatcher.close()
            ray.kill(self.dispatcher.slots)
        for actor in self.actors.values():
            ray.kill(actor)
        if self.gatekeeper is not None:
            ray.kill(self.gatekeeper)

    def fetch(self, *values: object) -> tuple:
        """The pipeline's result values, brought to the driver. The objects a state's actor holds are read
        from it in one call per state, so that objects they share (a model and its optimizer's parameters)
        are shared in the result as they are in the plain run's."""
        if self.dispatcher is not None:  # (a program that fetches without waiting first)
            self.dispatcher.start()
        out: list[object] = []
        held: dict[int, list[tuple[int, str]]] = {}  # state group -> (place in `out`, name of a value it holds)
        for value in values:
            if isinstance(value, Stored) and value.loaded:
                out.append(value.value)
            elif isinstance(value, Stored):
                stored = self.reuse.value(value.task, self.fingerprint(value.task))
                out.append(stored if value.outputs == 1 else stored[value.index])
            else:
                got = ray.get(value)
                if isinstance(got, ray.ObjectRef):  # a gate's output: the ref of its task's output
                    got = ray.get(got)
                if isinstance(got, tuple) and len(got) == 3 and got[0] == HELD:  # its state's final object
                    held.setdefault(got[1], []).append((len(out), got[2]))
                out.append(got)
        for group, places in held.items():
            names = tuple(name for _, name in places)
            if self.admission is not None:  # the actor lives behind the gate
                admit = self.state_admit(group, self.state_devices[group])
                got = ray.get(ray.get(self.gate().state_values.remote(admit, names, "result")))
            else:
                got = ray.get(self.actors[group].values_of.remote(names))
            for (place, _), item in zip(places, got):
                out[place] = item
        return tuple(out)


def _ready(refs: list) -> bool:
    if not refs:
        return True
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=False)
    return len(ready) == len(refs)


def _events(store: RunStore, run_id: str, event: str) -> list[dict[str, Any]]:
    return read_events(store.events_path, run=run_id, event=event)


def _failure_message(task: str, exc: Exception) -> str:
    """One line naming the failed task: the executor's own message when the task failed in it."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, TaskFailed):
        return str(cause)
    if isinstance(exc, ray.exceptions.RayTaskError):
        return f"task `{task}` failed: {getattr(cause, '__class__', type(exc)).__name__}: {cause}"
    return f"task `{task}` failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


# ---- starting Ray -------------------------------------------------------------------------------------
def local_resources(plan: Plan) -> dict[str, object]:
    """Size a local Ray for the plan: enough CPUs, GPUs (fake ones on a CPU-only machine) and custom
    resources for every device's bundle and every task."""
    total = total_resources(bundle for _, bundle in plan.devices)
    for need in plan.demands.values():
        for key, amount in need.items():
            total[key] = max(total.get(key, 0.0), amount)
    cpus = max(os.cpu_count() or 1, int(-(-total.pop("CPU", 1.0) // 1)))
    gpus = int(-(-total.pop("GPU", 0.0) // 1))
    total.pop("memory", None)
    return {"num_cpus": cpus, "num_gpus": gpus, "resources": total}


def unreachable(address: str, timeout: float) -> str | None:
    """Why nothing answers at Ray address `address` (`HOST:PORT`, `ray://HOST:PORT`) within `timeout` seconds;
    None when something accepts a connection there, or for `auto`/`local`, which Ray resolves itself."""
    import socket

    target = address.removeprefix("ray://")
    if target in ("auto", "local") or ":" not in target:
        return None
    host, _, port = target.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        return f"`{port}` is not a port number"
    deadline = time.monotonic() + timeout
    last = "no answer"
    while True:
        try:
            with socket.create_connection((host.strip("[]"), number), timeout=max(0.1, min(2.0, timeout))):
                return None
        except OSError as exc:
            last = exc.strerror or str(exc) or type(exc).__name__
        if time.monotonic() + 0.5 >= deadline:
            return f"{last} (tried for {timeout:g}s; --connect-timeout)"
        time.sleep(0.5)


def connect(plan: Plan, address: str | None, source_root: Path) -> None:
    """Connect to the Ray cluster at `address`, or start a local one sized for the plan. Workers find the
    pipeline's modules through PYTHONPATH."""
    paths = [str((source_root / entry).resolve()) for entry in plan.search_paths]
    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)
    inherited = os.environ.get("PYTHONPATH")
    runtime_env = {"env_vars": {"PYTHONPATH": os.pathsep.join([*paths, *([inherited] if inherited else [])]),
                                PROGRAM_VARIABLE: "1"}}  # (a pipeline called at a module's top level: not again)
    if ray.is_initialized():  # main() called from a process that is already a Ray driver
        return
    # a failed task's outputs that nothing fetched (its readers were never run) would each print Ray's
    # "Unhandled error" dump at exit; the failure is said once, by the run (error, the user's frames, resume)
    os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")
    if address:
        ray.init(address=address, runtime_env=runtime_env, log_to_driver=True)
    else:  # "local": a Ray of our own, even when another one runs on this machine
        # Ray's notice that this new private cluster uses token authentication (its default) is not ours to print
        logging.getLogger("ray._private.authentication.authentication_token_setup").addFilter(_TokenNotice())
        ray.init(address="local", runtime_env=runtime_env, include_dashboard=False, logging_level=logging.WARNING,
                 **local_resources(plan))


class _TokenNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Token authentication is enabled for this Ray cluster")


class Ray:
    """The Ray engine: the driver submits every task to Ray (dagc.runtime.lifecycle runs the program)."""

    backend = "ray"
    failures: tuple[type[BaseException], ...] = (RunFailed, PlacementError)
    announces = True

    def __init__(self, plan: Plan, run: Callable[[Driver], object]) -> None:
        self.plan, self.run = plan, run
        self.shared = False  # through a shared cluster's priority queue (dagc.runtime.admission)

    def describe(self, pipeline: Pipeline) -> str:
        return f"Run pipeline {pipeline.name!r} on Ray. Arguments after `--` are the script's own (its sys.argv[1:])."

    def add_options(self, parser: argparse.ArgumentParser, run_options: bool) -> None:
        if run_options:
            return
        parser.add_argument("--address", default=os.environ.get("RAY_ADDRESS"), metavar="ADDR",
                            help="Ray cluster to connect to (default: $RAY_ADDRESS, else start a local Ray)")
        parser.add_argument("--placement", choices=PLACEMENTS, default=self.plan.placement,
                            help="hold tasks to their devices by node affinity or by one placement-group bundle "
                                 "per device (default: %(default)s)")
        parser.add_argument("--dispatch", choices=DISPATCH_MODES, default="priority",
                            help="`priority`: start ready tasks on free devices most critical first (the plan's "
                                 "critical-path ranks), the plan's node preferred; `static`: every task held to its "
                                 "planned node, started in Ray's own order (default: %(default)s)")
        parser.add_argument("--pending-timeout", type=float, default=600.0, metavar="SECONDS",
                            help="stop the run when a task whose inputs are ready has not started for this long "
                                 "(default: %(default)s)")
        parser.add_argument("--admission", action=argparse.BooleanOptionalAction, default=None,
                            help="admit tasks through the shared cluster's priority queue, which may preempt tasks "
                                 "of lower priority (default: on with --address)")
        parser.add_argument("--aging", type=float, default=AGING_SECONDS, metavar="SECONDS",
                            help="a waiting task gains one priority level per SECONDS waited (default: %(default)s; "
                                 "the queue's first program sets it)")
        parser.add_argument("--connect-timeout", type=float, default=30.0, metavar="SECONDS",
                            help="give up on an --address that does not answer within this long "
                                 "(default: %(default)s)")

    def begin(self, program: Program) -> int | None:
        args = program.args
        if args.address:
            why = unreachable(args.address, args.connect_timeout)
            if why is not None:  # Ray itself would retry for minutes, then print its own traceback
                program.parser.exit(2, f"error: no Ray cluster answers at {args.address}: {why}; start one there "
                                       "(`ray start --head`), give the address `ray start` printed, or drop "
                                       "--address to run on a local Ray\n")
        self.shared = args.admission if args.admission is not None else bool(args.address)
        if not self.shared:
            priority_note(program.priority, "this program runs on a Ray of its own, or without --admission")
        return None

    def open_store(self, program: Program) -> RunStore | None:
        return open_run(program.parser, program.args, program.pipeline.name, program.run_id, always=True)

    def execute(self, program: Program) -> object:
        args, store, log = program.args, program.store, program.log
        assert store is not None and log is not None
        plan = replace(self.plan, tasks=program.tasks)  # fingerprints of the code as it is now
        interpreter = Interpreter(str((args.source_root / plan.script).resolve()), tuple(program.user_args),
                                  os.getcwd(), plan.entry, os.environ.get("OMP_NUM_THREADS"))
        program.stale_inputs(store if program.resume else None, log)
        connect(plan, args.address, args.source_root)
        placement = None
        try:
            placement = Placement(plan.devices, args.placement, plan.placement_timeout) if plan.devices else None
            admission = {"program": program.run_id, "priority": program.priority, "aging": args.aging} \
                if self.shared else None
            # (a shared cluster's queue orders tasks itself; bundles hold each device to the plan's order)
            by_priority = args.dispatch == "priority" and bool(plan.ranks) and admission is None and (
                placement is None or placement.mode == "node")
            program.run_start(log, nodes=placement.nodes if placement else None,
                              placement=placement.mode if placement else None,
                              dispatch="priority" if by_priority else "static")
            driver = Driver(plan, store, log, program.resume, placement, program.cache, interpreter,
                            args.pending_timeout, check=args.check_effects is not False, admission=admission,
                            threads_mode=args.threads, costs=program.costs(),
                            dispatcher=Dispatcher(plan.ranks, len(plan.devices) or 1) if by_priority else None)
            try:
                return self.run(driver)
            except KeyboardInterrupt:
                driver.cancel()  # (on a shared cluster they would run on after the driver has gone)
                raise
            finally:
                driver.close()
                if driver.gated:  # its tickets go now, not when their leases run out
                    admission_queue(args.aging).forget.remote(program.run_id)
        finally:
            if placement is not None:
                placement.release()

    def frames(self, program: Program, error: BaseException) -> str:
        """The user's own frames, as the worker that ran the failed task recorded them."""
        if not isinstance(error, RunFailed) or program.store is None or program.log is None:
            return ""
        recorded = [e for e in read_events(program.store.events_path, event="failure", run=program.log.run_id)
                    if e.get("task") == error.task and isinstance(e.get("traceback"), str)]
        if not recorded:
            return ""
        main = getattr(sys.modules.get("__main__"), "__file__", None)
        return user_frames(recorded[-1]["traceback"], os.path.abspath(main) if main else "")

    def say(self, program: Program, text: str) -> None:
        sys.stderr.write(text)


def ray_main(plan: Plan, run: Callable[[Driver], object], argv: Sequence[str] | None = None) -> int:
    """The emitted program's `main`: the one program lifecycle (dagc.runtime.lifecycle) on the Ray engine."""
    pipeline = Pipeline(plan.pipeline, plan.source_root, plan.search_paths, (), plan.script, plan.tasks, plan.code,
                        plan.code_files, plan.final_state, plan.priority)
    return Program(pipeline, Ray(plan, run)).main(argv)
