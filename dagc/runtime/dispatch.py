"""Dispatch by priority: a Ray program's driver hands ready tasks to free devices, most critical first.

Ray runs a ready task as soon as a CPU or GPU is free, in an order of its own: a long training whose input arrives
a moment after a row of short tasks were queued may wait for all of them, and the run takes longer than its plan.
With dispatch by priority, every top-level task is submitted as before (its output refs flow to its readers), but
with one more argument: a slot, granted by a small async actor (`Slots`, no resources). Ray starts the task only
once the slot is granted, and a `Dispatcher` thread in the driver grants as many slots as the plan has devices, to
the tasks whose inputs are ready, in the order of their critical-path rank: the longest path of estimated (learned)
costs from the task to the end of the pipeline (`RANKS` in the program). A slot is free again when its task ends.
The static plan is then a prior: a task keeps a soft affinity to its planned node, and Ray may start it elsewhere.

Tasks of a state group (run in their actor), multi-rank gangs, map items and regions' inner tasks are not gated;
`--dispatch static` (and a shared cluster's admission queue, which orders tasks itself) turns gating off.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping

import ray

__all__ = ["Dispatcher", "Slots", "DISPATCH_MODES"]

DISPATCH_MODES = ("priority", "static")
POLL_S = 0.5  # the longest the dispatcher sleeps between looks (it wakes as soon as a watched ref is ready)
# while the driver is still submitting (a slot free, tasks waiting): the next look comes this soon, so that a task
# submitted during the wait is seen; once submission is over, only what is watched wakes the thread
EAGER_POLL_S = 0.02


@ray.remote(num_cpus=0)
class Slots:
    """Hands each gated task its slot when the driver grants it: `acquire(task)` returns then."""

    def __init__(self) -> None:
        self.granted: set[str] = set()
        self.events: dict[str, asyncio.Event] = {}

    async def acquire(self, task: str) -> None:
        if task not in self.granted:
            await self.events.setdefault(task, asyncio.Event()).wait()

    async def grant(self, tasks: list[str]) -> None:
        for task in tasks:
            self.granted.add(task)
            event = self.events.get(task)
            if event is not None:
                event.set()


class Dispatcher:
    """The driver's side: which gated tasks wait for which inputs, which hold a slot, and the thread that grants.

    Readiness is kept as it changes: each step asks Ray only about the inputs not yet seen ready (an input, once
    ready, stays so), and a task becomes startable when its last one is, so that a step costs what is still
    awaited, not every input of every waiting task again. No ref is held longer than a waiting task needs it (a
    held ref keeps its object in Ray's object store)."""

    def __init__(self, ranks: Mapping[str, float], capacity: int) -> None:
        self.ranks, self.capacity = dict(ranks), max(1, capacity)
        self.slots = Slots.remote()
        self.done: dict[str, ray.ObjectRef] = {}  # waiting task -> the ref that says it ended
        self.missing: dict[str, set[ray.ObjectRef]] = {}  # waiting task -> its inputs not yet seen ready
        self.readers: dict[ray.ObjectRef, list[str]] = {}  # input not yet seen ready -> the waiting tasks it feeds
        self.startable: set[str] = set()  # waiting tasks whose inputs are all ready
        self.holding: dict[ray.ObjectRef, str] = {}  # done ref -> its task, granted and not yet ended
        self.failed_open = False  # the granting thread stopped while Ray runs on: every task is granted at once
        self.added = False  # a task was submitted since the last step (while the thread may sleep in `ray.wait`)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def gates(self, task: str) -> bool:
        return task in self.ranks

    def slot(self, task: str) -> ray.ObjectRef:
        """The ref a gated task waits for besides its inputs (a trailing argument, which Ray resolves first)."""
        return self.slots.acquire.remote(task)

    def add(self, task: str, needs: list[ray.ObjectRef], done: ray.ObjectRef) -> None:
        """Task `task` was submitted: it may start once `needs` are ready and a slot is free; `done` says it ended."""
        with self._lock:
            if self.failed_open:
                self.slots.grant.remote([task])
                return
            missing = set(needs)  # (one ready already is found so at the next step)
            self.done[task], self.missing[task] = done, missing
            for ref in missing:
                self.readers.setdefault(ref, []).append(task)
            if not missing:
                self.startable.add(task)
            self.added = True
        self._wake.set()

    def start(self) -> None:
        """Begin granting, once the driver has submitted what it submits up front: the first grants then go to
        the most critical of all the tasks ready at the start, not to the first ones submitted."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="dagc-dispatch", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    # ---- the granting thread -----------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                watched, eager = self._step()
                self._wake.clear()
                if watched:
                    ray.wait(watched, num_returns=1, timeout=EAGER_POLL_S if eager else POLL_S, fetch_local=False)
                else:
                    self._wake.wait(POLL_S)
            except Exception:  # noqa: BLE001 - Ray is shutting down (the run is ending), or the thread is broken
                self._fail_open()
                return

    def _fail_open(self) -> None:
        """Grant every task still waiting, and each one submitted later: Ray's own order, never a task held
        for a slot that nothing will grant."""
        with self._lock:
            self.failed_open = True
            waiting = sorted(self.done)
            self.done.clear()
        if waiting and not self._stop.is_set():
            try:
                self.slots.grant.remote(waiting)
            except Exception:  # noqa: BLE001 - Ray is gone: its tasks went with it
                pass

    def _step(self) -> tuple[list[ray.ObjectRef], bool]:
        """Free the slots of ended tasks, grant free slots to the ready tasks of highest rank; returns the refs
        whose readiness may change what to grant next, and whether a slot is free for a task still waiting."""
        with self._lock:
            holding = list(self.holding)
            awaited = list(self.readers)
            self.added = False
        ended = ray.wait(holding, num_returns=len(holding), timeout=0, fetch_local=False)[0] if holding else []
        found = ray.wait(awaited, num_returns=len(awaited), timeout=0, fetch_local=False)[0] if awaited else []
        with self._lock:
            for ref in ended:
                self.holding.pop(ref, None)
            for ref in found:
                for task in self.readers.pop(ref, ()):
                    missing = self.missing[task]
                    missing.discard(ref)
                    if not missing:
                        self.startable.add(task)
            free = self.capacity - len(self.holding)
            chosen = sorted(self.startable, key=lambda task: (-self.ranks.get(task, 0.0), task))[:max(0, free)]
            for task in chosen:
                self.startable.discard(task)
                del self.missing[task]
                self.holding[self.done.pop(task)] = task
            watched = [*self.holding, *self.readers]
            # look again soon only while tasks may still be submitted: what is watched wakes the thread otherwise
            eager = self.added and bool(self.done) and len(self.holding) < self.capacity
        if chosen:
            self.slots.grant.remote(chosen)
        return watched, eager
