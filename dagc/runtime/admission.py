"""Priorities and preemption across the programs that share one Ray cluster.

Programs that run on a shared cluster (`--address`) admit their tasks through one small queue that lives
on the cluster itself: a named, detached actor (`dagc-admission`, namespace `dagc`), started by the first
program that needs it and gone once nothing has used it for `IDLE_SECONDS`.

A task is submitted behind a gate: a call into its program's `Gatekeeper` (an async actor of no
resources) that, once the task's inputs are ready, asks the queue for the task's resources, and only then
submits the task itself. The queue
hands free resources to the waiting task of highest priority (its program's `--priority`, or
`@dagc.pipeline(priority=N)`), the longest waiting first among equals. When the task of highest priority
cannot be placed, the queue preempts running tasks of lower priority, the lowest and latest started
first, until it fits: their gates stop them (`ray.cancel(force=True)`), write `preempted` to their
program's event log, and ask again; the task runs again from its inputs when resources free up, its
attempt count unchanged. A task declared `preemptible=False` is never stopped.

Aging: a waiting task gains one priority level per `aging` seconds waited, so a low priority still
progresses under a stream of higher ones. A task admitted that way is preempted only by a task whose own
priority is above the level it was admitted at.

Tasks that share state (a model trained in place, its optimizer) run one after another in one actor
that holds the state (`dagc.runtime.rayworker.State`); the gate starts it and submits the group's tasks to
it in program order. Each of those tasks is admitted as any task is (a group that waits between two of its
tasks holds nothing in the queue). A preempted one restarts its group: its gate stops the actor, asks the
queue again, starts a new actor and runs the group's tasks again from the first, in order, on the inputs
they had (the state lived only in the stopped actor), each with its attempt count unchanged. A group is
preemptible unless one of its tasks is declared `preemptible=False`. A multi-rank task (a gang of rank
actors, started by a launcher task) is admitted as one task needing every rank's resources; preempting it
stops the launcher, and the rank actors it owns end with it.

Tickets are leases: a gate renews its task's lease while it runs; a lease not renewed for
`LEASE_SECONDS` (its program was killed) is dropped and its resources handed on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray

__all__ = ["ACTOR_NAME", "NAMESPACE", "Admission", "AdmissionQueue", "Ticket", "admission_queue", "Gate",
           "Gatekeeper", "AGING_SECONDS"]

ACTOR_NAME = "dagc-admission"
NAMESPACE = "dagc"
# True in a gatekeeper's process: it passes jobs on without importing the user's code (and torch) itself
IN_GATE = False
AGING_SECONDS = 30.0  # a waiting task gains a priority level per this many seconds waited
IDLE_SECONDS = 60.0  # the queue exits when nothing has used it for this long
LEASE_SECONDS = 15.0  # a running task's lease expires when its gate has not renewed it for this long
RENEW_SECONDS = 2.0  # how often a gate renews its task's lease
GRACE_SECONDS = 10.0  # how long a preempted gang's launcher has to end its rank actors
_IGNORED = ("memory", "object_store_memory")


@dataclass
class Ticket:
    """One task's request: what it needs, for which program, at which priority."""

    key: str
    program: str
    task: str
    priority: int
    demand: dict[str, float]
    preemptible: bool
    since: float  # when it started waiting
    granted: asyncio.Event = field(default_factory=asyncio.Event)
    stopped: asyncio.Event = field(default_factory=asyncio.Event)  # preempted, or released
    level: float = 0.0  # the priority it was admitted at (its own, or more after aging)
    started: float = 0.0
    renewed: float = 0.0
    preempted: bool = False

    def effective(self, now: float, aging: float) -> float:
        return self.priority + (now - self.since) / aging if aging > 0 else float(self.priority)


class AdmissionQueue:
    """The queue's decisions; run as the async actor `Admission` (a waiting request does not block the
    others). `capacity` gives the cluster's resources (default: Ray's, asked at each decision)."""

    def __init__(self, aging: float = AGING_SECONDS, idle: float = IDLE_SECONDS,
                 capacity: Callable[[], dict[str, float]] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.aging, self.idle, self.clock = aging, idle, clock
        self.resources = capacity or ray.cluster_resources
        self.waiting: dict[str, Ticket] = {}
        self.running: dict[str, Ticket] = {}
        self.preemptions = 0
        self.ended: dict[str, bool] = {}  # ticket -> preempted (True) or released (False), until forgotten
        self.used = clock()
        self.watching = False
        self.capacity: dict[str, float] = {}
        self.capacity_at = float("-inf")  # when the cluster's resources were last asked for

    # ---- what gates call ------------------------------------------------------------------------------
    async def request(self, key: str, program: str, task: str, priority: int, demand: dict[str, float],
                      preemptible: bool = True, waited: float = 0.0) -> float:
        """Wait until `demand` is granted to this ticket; returns the seconds waited. `waited`: what the task
        waited before, when a preemption sent it back (it keeps the aging it had earned)."""
        self._watch()
        now = self.clock()
        ticket = Ticket(key, program, task, int(priority), {k: float(v) for k, v in demand.items()
                                                           if k not in _IGNORED and v > 0},
                        bool(preemptible), now - max(0.0, waited))
        self.waiting[key] = ticket
        self._schedule()
        await ticket.granted.wait()
        return ticket.started - ticket.since  # (earlier waits included)

    async def until_stopped(self, key: str) -> bool:
        """Resolves when the ticket is preempted (True) or released (False)."""
        ticket = self.running.get(key) or self.waiting.get(key)
        if ticket is None:
            return self.ended.get(key, False)
        await ticket.stopped.wait()
        return ticket.preempted

    def renew(self, key: str) -> bool:
        ticket = self.running.get(key)
        if ticket is not None:
            ticket.renewed = self.clock()
        self.used = self.clock()
        return ticket is not None

    def release(self, key: str) -> None:
        ticket = self.running.pop(key, None) or self.waiting.pop(key, None)
        if ticket is not None:
            self.ended[key] = False
            ticket.stopped.set()
            if not ticket.granted.is_set():  # released while waiting (its program ended): end its request too
                ticket.started = self.clock()
                ticket.granted.set()
        self.used = self.clock()
        self._schedule()

    def forget(self, program: str) -> int:
        """Release every ticket of `program` (it ended); returns how many."""
        keys = [k for k, t in [*self.running.items(), *self.waiting.items()] if t.program == program]
        for key in keys:
            self.release(key)
        for key in [k for k in self.ended if k.startswith(f"{program}/")]:
            del self.ended[key]
        return len(keys)

    def snapshot(self) -> dict[str, Any]:
        """What the queue holds now (for `dagc` tests and for looking at a cluster)."""
        now = self.clock()
        return {"running": {k: (t.program, t.task, t.priority, t.demand) for k, t in self.running.items()},
                "waiting": {k: (t.program, t.task, round(t.effective(now, self.aging), 3))
                            for k, t in self.waiting.items()},
                "capacity": dict(self.capacity), "preemptions": self.preemptions}

    # ---- deciding -------------------------------------------------------------------------------------
    def _free(self) -> dict[str, float]:
        now = self.clock()
        if now - self.capacity_at > 1.0:  # nodes come and go; asking on every decision would cost a round trip
            self.capacity = {k: v for k, v in self.resources().items()
                             if not k.startswith("node:") and k not in _IGNORED}
            self.capacity_at = now
        free = dict(self.capacity)
        for ticket in self.running.values():
            for key, amount in ticket.demand.items():
                free[key] = free.get(key, 0.0) - amount
        return free

    @staticmethod
    def _fits(demand: dict[str, float], free: dict[str, float]) -> bool:
        return all(free.get(k, 0.0) >= v - 1e-9 for k, v in demand.items())

    def _grant(self, ticket: Ticket, now: float, free: dict[str, float]) -> None:
        del self.waiting[ticket.key]
        ticket.level, ticket.started, ticket.renewed = ticket.effective(now, self.aging), now, now
        self.running[ticket.key] = ticket
        for key, amount in ticket.demand.items():
            free[key] = free.get(key, 0.0) - amount
        ticket.granted.set()

    def _schedule(self) -> None:
        """Grant waiting tickets, highest effective priority first; preempt for the first that does not
        fit. No ticket passes one of higher priority that is waiting (no backfilling): aging bounds the
        wait of every ticket."""
        now = self.clock()
        free = self._free()
        order = sorted(self.waiting.values(), key=lambda t: (-t.effective(now, self.aging), t.since, t.key))
        for ticket in order:
            if not self._fits(ticket.demand, self.capacity):
                continue  # more than the whole cluster has: its program's own check names it
            if self._fits(ticket.demand, free):
                self._grant(ticket, now, free)
                continue
            victims = self._victims(ticket, free)
            if victims is None:
                break
            for victim in victims:
                self._preempt(victim, free)
            self._grant(ticket, now, free)

    def _victims(self, ticket: Ticket, free: dict[str, float]) -> list[Ticket] | None:
        """Running tickets to stop so that `ticket` fits: of lower priority than its own, the lowest and
        latest started first; None when no such set frees enough."""
        candidates = sorted((t for t in self.running.values() if t.preemptible and t.level < ticket.priority),
                            key=lambda t: (t.level, -t.started, t.key))
        chosen: list[Ticket] = []
        trial = dict(free)
        for victim in candidates:
            if self._fits(ticket.demand, trial):
                break
            if not any(victim.demand.get(k, 0.0) > 0 and trial.get(k, 0.0) < v - 1e-9
                       for k, v in ticket.demand.items()):
                continue  # frees nothing the ticket lacks
            chosen.append(victim)
            for key, amount in victim.demand.items():
                trial[key] = trial.get(key, 0.0) + amount
        return chosen if self._fits(ticket.demand, trial) else None

    def _preempt(self, victim: Ticket, free: dict[str, float]) -> None:
        del self.running[victim.key]
        self.ended[victim.key] = True
        victim.preempted = True
        victim.stopped.set()
        self.preemptions += 1
        for key, amount in victim.demand.items():
            free[key] = free.get(key, 0.0) + amount

    # ---- housekeeping ---------------------------------------------------------------------------------
    def _watch(self) -> None:
        self.used = self.clock()
        if not self.watching:
            self.watching = True
            asyncio.get_event_loop().create_task(self._housekeeping())

    async def _housekeeping(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, self.idle / 4))
            if self.tick():
                ray.actor.exit_actor()

    def tick(self) -> bool:
        """Drop expired leases, let aging reorder the queue; True when the queue has been idle long enough
        to exit."""
        now = self.clock()
        expired = [k for k, t in self.running.items() if now - t.renewed > LEASE_SECONDS]
        for key in expired:  # its program is gone: hand its resources on
            self.release(key)
        if self.waiting:
            self._schedule()
        return not self.running and not self.waiting and now - self.used > self.idle


Admission = ray.remote(num_cpus=0, max_concurrency=10_000)(AdmissionQueue)


def admission_queue(aging: float = AGING_SECONDS, idle: float = IDLE_SECONDS) -> Any:
    """The cluster's queue: the running one, or a new one (the first program to ask starts it)."""
    return Admission.options(name=ACTOR_NAME, namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
                             max_concurrency=10_000).remote(aging, idle)


class Gatekeeper:
    """A program's gates: one async actor (no resources) in which each task of the program waits for its
    inputs and its admission, then runs; so a waiting task holds no worker process of its own."""

    def __init__(self, run_dir: str, run_id: str, aging: float = AGING_SECONDS) -> None:
        from dagc.runtime.events import EventLog
        from dagc.runtime.store import RunStore

        self.log = EventLog(RunStore(run_dir).events_path, run_id)
        global IN_GATE
        IN_GATE = True  # the jobs it hands on are not prepared here: this process runs no user code
        self.aging = aging
        # the cluster's queue, looked up now (its start overlaps the program's), again if it exited
        self.queue: Any = admission_queue(aging)
        self.state = _StateGroups(self)

    async def run_state(self, function: Any, job: Any, held: tuple, keep: tuple, admit: dict[str, Any],
                        values: list[Any]) -> tuple:
        """Run a task of a state group (admitted as a whole, see the module docstring) on its actor; returns
        the refs of what the task returns. `admit` holds the group's number, demand, actor class and
        options besides what `run` takes."""
        call = _Call("run", (function, job, held, keep), job.outputs + 1, job.task, job)
        return await self.state.call(admit, call, list(values))

    async def state_value(self, admit: dict[str, Any], name: str, task: str) -> Any:
        """The ref of value `name` that state group `admit["group"]`'s actor holds, read after the calls before."""
        (ref,) = await self.state.call(admit, _Call("value", (name,), 1, task), [])
        return ref

    async def state_values(self, admit: dict[str, Any], names: tuple[str, ...], task: str) -> Any:
        """`state_value` of several values, read in one call (objects they share stay shared)."""
        (ref,) = await self.state.call(admit, _Call("values_of", (names,), 1, task), [])
        return ref

    async def admitted(self, key: str, admit: dict[str, Any], task: str, waited: float) -> float:
        """Wait until the queue admits ticket `key` (task `task` of program `admit["program"]`, needing
        `admit["demand"]`); returns the seconds waited in the queue so far, `waited` (earlier requests of the
        same task, sent back by preemptions: it keeps the aging it earned) included."""
        while True:
            if self.queue is None:
                self.queue = admission_queue(self.aging)
            try:
                total = await self.queue.request.remote(key, admit["program"], task, admit["priority"],
                                                        admit["demand"], admit["preemptible"], waited)
            except ray.exceptions.RayActorError:  # the queue exited just then (idle): start a new one
                self.queue = None
                continue
            if total - waited > 0.05:
                self.log.write("admitted", task=task, waited=round(total - waited, 6), priority=admit["priority"])
            return total

    async def run(self, function: Any, options: dict[str, Any], job: Any, admit: dict[str, Any],
                  values: list[Any]) -> tuple:
        """Run `function` (an emitted task) on `values` once its inputs are ready and the queue admits it,
        again after each preemption; returns the refs of what the task returns. `values` hold the task's
        inputs as refs (in a list, so that Ray hands them to the task itself, not through the gate).
        `admit`: program, priority, demand, preemptible, and `indirect`: the positions of values that are
        other gates' outputs (each the ref of a task's output, handed to this task in its place)."""
        inputs = [v for v in values if isinstance(v, ray.ObjectRef)]
        if inputs:  # admitted only once it can start: a task waiting for its inputs holds nothing
            ready = [asyncio.ensure_future(_future(ref)) for ref in inputs]
            await asyncio.wait(ready)
            _retrieved(ready)  # (an input that failed fails this task when it runs; nothing to log here)
        values = list(values)
        for i in admit.get("indirect", ()):  # another gate's output: the ref of its task's own output
            values[i] = await _future(values[i])
        outputs = job.outputs + 1
        preempted = 0
        waited = 0.0  # in the queue, all requests together: a task sent back keeps the aging it earned
        while True:
            key = f"{admit['program']}/{job.task}/{preempted}"
            waited = await self.admitted(key, admit, job.task, waited)
            queue = self.queue
            job.preempted = preempted  # a run stopped by preemption is no failed attempt: the count stays
            refs = function.options(num_returns=outputs, **options).remote(job, *values)
            done = asyncio.ensure_future(_future(refs[-1]))
            stopped = asyncio.ensure_future(_future(queue.until_stopped.remote(key)))
            while not (done.done() or stopped.done()):
                await asyncio.wait([done, stopped], timeout=RENEW_SECONDS, return_when=asyncio.FIRST_COMPLETED)
                queue.renew.remote(key)
            if done.done() or not stopped.result():
                queue.release.remote(key)
                _retrieved([done])
                try:
                    await _future(refs[-1])
                except ray.exceptions.RayTaskError as exc:  # the task's own failure, as if it ran ungated
                    cause = getattr(exc, "cause", None)
                    raise (cause if isinstance(cause, BaseException) else exc) from None
                # the task's own output refs, not their values: readers fetch the data from where it lies
                # (the gate never copies it); the driver hands these on to the readers' gates
                return tuple(refs)
            done.cancel()
            await _stop(refs[-1], graceful=bool(admit.get("graceful")))
            try:  # it may have ended just as it was stopped: then it stands, and runs no second time
                await _future(refs[-1])
            except Exception:  # noqa: BLE001 - stopped (the usual case) or failed: it runs again
                pass
            else:
                return tuple(refs)
            preempted += 1
            self.log.write("preempted", task=job.task, priority=admit["priority"], times=preempted)


def _retrieved(futures: list[asyncio.Future]) -> None:
    """Mark the failures of finished `futures` as seen: the run reports a task's failure once, from the task,
    and asyncio would otherwise log each as "Future exception was never retrieved"."""
    for future in futures:
        if future.done() and not future.cancelled():
            future.exception()


def _future(ref: Any) -> Any:
    return asyncio.wrap_future(ref.future())


async def _stop(ref: Any, graceful: bool) -> None:
    """Stop the task behind `ref`: its worker is killed; a `graceful` one (a gang's launcher) is interrupted
    first, so that it kills the rank actors it owns at once instead of their ending with it as if they
    failed, and killed only if it has not ended after `GRACE_SECONDS`."""
    if graceful:
        ray.cancel(ref)
        try:
            await asyncio.wait_for(_future(ref), GRACE_SECONDS)
        except Exception:  # noqa: BLE001 - cancelled (as asked), failed or still running: it ends below
            pass
    ray.cancel(ref, force=True)


@dataclass
class _Call:
    """One call into a state group's actor: a task (`run`) or the read of a value it holds (`value`)."""

    method: str
    args: tuple
    returns: int
    task: str
    job: Any = None
    refs: list = field(default_factory=list)  # of its latest submission
    generation: int = 0  # the actor (counted from 0) it was last submitted to
    key: str = ""  # its ticket in the queue (a task's)
    waited: float = 0.0  # in the queue, all its requests together


@dataclass
class _Group:
    """A state group run behind the gate: its actor and every call made to it, in order, to run again on a
    new actor when a preemption stopped the old one."""

    number: int
    # calls come numbered by the driver, in program order (an async actor may start them in another order)
    turn: asyncio.Condition = field(default_factory=asyncio.Condition)
    next: int = 0  # the number of the call whose turn it is
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # no call is submitted while the group restarts
    actor: Any = None
    calls: list[_Call] = field(default_factory=list)
    generation: int = 0
    restarting: bool = False
    restarted: asyncio.Event = field(default_factory=asyncio.Event)  # set when a restart has run the calls again
    preempted: int = 0


class _StateGroups:
    """The part of a gatekeeper that runs state groups (see the module docstring). Each task of a group is
    admitted on its own, as any task (a group that waits between its tasks holds nothing in the queue); a
    preempted task stops the group's actor, and the group starts again on a new one from its first task."""

    def __init__(self, gate: Gatekeeper) -> None:
        self.gate = gate
        self.groups: dict[int, _Group] = {}

    async def call(self, admit: dict[str, Any], call: _Call, values: list[Any]) -> tuple:
        group = self.groups.setdefault(admit["group"], _Group(admit["group"]))
        async with group.turn:
            await group.turn.wait_for(lambda: group.next == admit["seq"])
            try:
                for i in admit.get("indirect", ()):  # another gate's output: the ref of a task's own output
                    values[i] = await _future(values[i])
                call.args = (*call.args, *values)
                if call.method == "run":  # admitted once it can start: its inputs are ready
                    await self._admit(admit, call)
                async with group.lock:
                    if group.actor is None:
                        group.actor = self._actor(group, admit)
                    group.calls.append(call)
                    self._submit(group, call)
            finally:
                group.next += 1
                group.turn.notify_all()
        if call.method == "run":
            asyncio.get_event_loop().create_task(self._hold(group, admit, call))
        while True:
            generation = call.generation
            try:
                await _future(call.refs[-1])
            except ray.exceptions.RayActorError:
                if not (group.restarting or group.generation != generation):
                    raise  # the actor died of itself, not of a preemption
                await self._rerun(group, call, generation)
                continue
            except ray.exceptions.RayTaskError as exc:  # the task's own failure, as if it ran ungated
                cause = getattr(exc, "cause", None)
                raise (cause if isinstance(cause, BaseException) else exc) from None
            return tuple(call.refs)

    async def _admit(self, admit: dict[str, Any], call: _Call) -> None:
        """Wait until the queue admits `call` (again after a preemption, keeping the aging it earned)."""
        call.key = f"{admit['program']}/{call.task}/{call.job.preempted if call.job else 0}"
        call.waited = await self.gate.admitted(call.key, admit, call.task, call.waited)

    @staticmethod
    def _actor(group: _Group, admit: dict[str, Any]) -> Any:
        from dagc.runtime.rayworker import State  # (that module imports this one)

        return State.options(**admit["options"]).remote(group.number)

    def _submit(self, group: _Group, call: _Call) -> None:
        if call.job is not None:
            call.job.preempted = group.preempted  # a run stopped by preemption is no failed attempt
        method = getattr(group.actor, call.method)
        refs = method.options(num_returns=call.returns).remote(*call.args)
        call.refs = list(refs) if call.returns > 1 else [refs]
        call.generation = group.generation

    @staticmethod
    async def _rerun(group: _Group, call: _Call, generation: int) -> None:
        """Wait until a restart has submitted `call` again (it was on the actor a preemption stopped)."""
        while call.generation == generation:
            group.restarted.clear()
            await group.restarted.wait()

    async def _hold(self, group: _Group, admit: dict[str, Any], call: _Call) -> None:
        """Renew `call`'s lease until it ends, then release it; when the queue stops it, restart the group."""
        while True:
            generation, key, queue = call.generation, call.key, self.gate.queue
            done = asyncio.ensure_future(_future(call.refs[-1]))
            stopped = asyncio.ensure_future(_future(queue.until_stopped.remote(key)))
            while not (done.done() or stopped.done()):
                await asyncio.wait([done, stopped], timeout=RENEW_SECONDS, return_when=asyncio.FIRST_COMPLETED)
                queue.renew.remote(key)
            if not done.done() and stopped.result():  # preempted
                done.cancel()
                await self._restart(group, admit, call, generation)
                continue
            if not done.done():
                await asyncio.wait([done])
            if isinstance(done.exception(), ray.exceptions.RayActorError) and (
                    group.restarting or group.generation != generation):
                await self._rerun(group, call, generation)  # another task's preemption stopped the actor
                continue
            queue.release.remote(key)
            return

    async def _restart(self, group: _Group, admit: dict[str, Any], call: _Call, generation: int) -> None:
        """Stop the group's actor, wait for the queue to admit `call` again, and run every call of the group
        again, in order, on a new actor (the state lived in the stopped one)."""
        async with group.lock:
            if group.generation != generation:  # restarted meanwhile: `call` runs again with that restart
                return
            group.restarting = True
            ray.kill(group.actor)
            group.generation += 1
            group.preempted += 1
            self.gate.log.write("preempted", task=call.task, priority=admit["priority"], times=group.preempted,
                                group=group.number)
            if call.job is not None:
                call.job.preempted = group.preempted
            await self._admit(admit, call)
            group.actor = self._actor(group, admit)
            for each in group.calls:  # from the first: the state lived in the stopped actor only
                self._submit(group, each)
            group.restarting = False
            group.restarted.set()


Gate = ray.remote(num_cpus=0, max_concurrency=100_000)(Gatekeeper)


@ray.remote(num_cpus=0)
def unwrap(ref: Any) -> Any:
    """The value behind a gate's output, for a reader that does not go through a gate (a state's actor,
    a multi-rank task): fetched here and passed on."""
    return ray.get(ref)
