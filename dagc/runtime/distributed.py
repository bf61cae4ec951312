"""Runtime of the programs the torch.distributed backend emits: process group, transfers, tasks.

An emitted program holds a static plan — `TASKS` (each task's typed row, dagc.runtime.rows: its
fingerprint and policy, its ranks, the values it reads and defines), `MOVES` (each point-to-point
message: value, source, destination, and the static tensor shape when the compiler knows it) — and
one straight-line function per rank. `Runner` gives those functions three verbs:

    value = rt.task("train", module.train, features, data, epochs=80)   # run, or load, or skip
    rt.send(value, 3)                                                   # message with tag 3
    value = rt.recv(3)

The messages and collectives themselves, and their wire formats, are in `dagc.runtime.transfers`;
pipeline-parallel training in `dagc.runtime.stages`. This module re-exports both for the programs.

The program's lifecycle (options, run directory, result, failures) is dagc.runtime.lifecycle's, on the
torch engine (dagc.runtime.torchengine); the launcher, dagc.runtime.launcher.

Restarts: with a run directory, every task's output is stored under its fingerprint
(`dagc.runtime.store`). At start, rank 0 lists the tasks already stored (dagc.runtime.reuse, as every
program decides) and broadcasts the list;
every rank then prunes the same steps from its sequence (completed tasks not needed downstream,
and messages nobody still needs). Dropping whole steps keeps the compiler's deadlock-freedom proof
valid (see `dagc.passes.commcheck`).

Only rank 0 writes the result, the event log and the progress display: the other ranks hand their
event records to rank 0 at the end of the run. A run that fails never gets there: a rank whose task
fails writes its `failure` record itself, and every other rank writes the records it holds when the
failure reaches it (an error from a lost peer, or torchrun's SIGTERM), so a failed run's log still
lists every task any rank finished.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

# Large CPU buffers on transparent huge pages: a received tensor then costs one page fault per
# 2 MiB instead of one per 4 KiB (read by torch's CPU allocator; set before torch is imported).
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from dagc.runtime.console import replay
from dagc.runtime.costs import CostLog
from dagc.runtime.events import EventLog, new_run_id
from dagc.runtime.executor import NOT_STORABLE, Executor, TaskFailed, TaskSpec, unpicklable_type
from dagc.runtime.filetrace import before_reuse
from dagc.runtime.launcher import (
    another_rank_failed,
    launch_main,
    take_launcher_environment,
)
from dagc.runtime.progress import Progress
from dagc.runtime.reuse import StoredOutputs
from dagc.runtime.rows import TaskRow
from dagc.runtime.stages import current_stages, train_layers, train_pipeline, use_stages
from dagc.runtime.store import Cache, RunStore
from dagc.runtime.threads import current_threads, task_threads
from dagc.runtime.transfers import (
    COMPRESS_DTYPES,
    DTYPES,
    broadcast_value,
    compress_value,
    decompress_value,
    gather_value,
    recv_value,
    reduce_value,
    send_value,
    static_buffer,
    wire_static,
)

__all__ = ["Runner", "take_launcher_environment", "MoveInfo", "CollectiveInfo", "plan_steps", "send_value", "recv_value",
           "broadcast_value", "reduce_value", "gather_value", "compress_value", "decompress_value", "COMPRESS_DTYPES", "DTYPES",
           "launch_main", "another_rank_failed", "TaskFailed", "train_pipeline", "train_layers",
           "current_stages", "use_stages"]

# MOVES[tag] = (value on src, value on dst, src, dst, static tensor (dtype, shape) or None)
MoveInfo = tuple[str, str, int, int, "tuple[str, tuple[int, ...]] | None"]
# COLLECTIVES[tag] = (kind, value(s), value defined, root, group, static, divisor, start):
#   ("broadcast", value on the root, value on every rank of the group, root, group, static tensor, None, None)
#   ("reduce", ((operand, its rank), … in Python's order of addition), sum on the root, root, group, None,
#    the number the sum is divided by (a mean) or None, the value the operands are added to (0 for
#    Python's `sum(xs)`) or None)
#   ("all_reduce", …)  the same, and every rank of the group gets the sum
#   ("gather", ((value, its rank), … in the reader's order), (its name on the root, …), root, group,
#    static tensor every value is (or None), None, None)
CollectiveInfo = tuple[str, Any, str, int, tuple[int, ...], "tuple[str, tuple[int, ...]] | None", "float | None",
                       "int | None"]

# ---- which steps a (re)started run still has to do -------------------------------------------------
def plan_steps(
    tasks: Mapping[str, TaskRow], moves: Mapping[int, MoveInfo], returns: Sequence[str], done: set[str],
    collectives: Mapping[int, CollectiveInfo] | None = None,
) -> tuple[set[str], set[str], set[int]]:
    """(tasks to run, completed tasks to load, message and collective tags to exchange) when `done`
    are stored.

    Every rank computes this from the same inputs, so all of them drop the same steps (a collective
    is kept or dropped as a whole, on every rank of its group)."""
    collectives = collectives or {}
    run = {name for name in tasks if name not in done}
    needed: set[tuple[str, int]] = {(value, 0) for value in returns}
    for name in run:
        ranks, inputs = tasks[name].ranks, tasks[name].inputs
        needed.update((value, rank) for value in inputs for rank in ranks)
    active: set[int] = set()
    for tag in sorted({*moves, *collectives}, reverse=True):
        if tag in collectives:
            kind, value, out, root, group = collectives[tag][:5]
            gets = group if kind == "all_reduce" else (root,)
            if kind in ("reduce", "all_reduce") and any((out, r) in needed for r in gets):
                active.add(tag)
                needed.update((operand, rank) for operand, rank in value)
            elif kind == "broadcast" and any((out, r) in needed for r in group):
                active.add(tag)
                needed.add((value, root))
            elif kind == "gather" and any((o, root) in needed for o in out):
                active.add(tag)  # the whole gather: every sender takes part
                needed.update((operand, rank) for operand, rank in value)
            continue
        value, out, src, dst, _ = moves[tag]
        if (out, dst) in needed:
            active.add(tag)
            needed.add((value, src))
    load = {name for name in tasks if name in done
            and any((value, tasks[name].ranks[0]) in needed for value in tasks[name].outputs)}
    return run, load, active


# ---- the runner --------------------------------------------------------------------------------------
class Runner:
    """One rank of an emitted program."""

    def __init__(
        self,
        pipeline: str,
        tasks: Mapping[str, TaskRow],
        moves: Mapping[int, MoveInfo],
        returns: Sequence[str],
        ranks: int,
        *,
        run_dir: Path | None = None,
        timeout: float = 1800.0,
        backend: str | None = None,
        stages: Mapping[str, Sequence[int]] | None = None,
        collectives: Mapping[int, CollectiveInfo] | None = None,
        compress: Mapping[int, str] | None = None,
        cache: Cache | Path | None = None,
        check: bool = False,
        launcher: Mapping[str, str] | None = None,
        threads_mode: str = "plain",
        costs: CostLog | None = None,
        final_state: Sequence[int] = (),
        code: Mapping[str, tuple] | None = None,
        changed: Sequence[str] = (),
        resume: bool = False,
    ) -> None:
        self.resume = resume  # --resume was given (a restarted attempt resumes too)
        self.pipeline = pipeline
        self.changed = list(changed)  # tasks whose code changed since the program was emitted (a `code_changed`)
        self.costs = costs  # where each task's owner records what it measured (dagc.runtime.costs)
        self.code = dict(code or {})  # task -> (code names, upstream tasks, digest): dagc.runtime.code
        # state groups stored as they are at their end, in one pickle (dagc.runtime.executor's final_state)
        self.final_state = frozenset(final_state)
        self.held: dict[int, list[Any]] = {}  # such a group's outputs, until its last task has run
        # the launcher's variables (take_launcher_environment), else the environment's own
        self.launcher = dict(launcher if launcher is not None else os.environ)
        self.check = check  # --check-effects: what each task changes is compared with what was assumed
        self.collectives = dict(collectives or {})
        self.compress = dict(compress or {})  # tag -> "bf16" | "fp16": sent narrowed
        self.cache = Cache(cache) if isinstance(cache, (str, Path)) else cache
        self.stages = {name: tuple(s) for name, s in (stages or {}).items()}
        self.tasks = {name: TaskRow.of(row) for name, row in tasks.items()}
        self.specs = {name: TaskSpec.from_row(name, row) for name, row in self.tasks.items()}
        self.stored = StoredOutputs(self.specs, None, self.cache, resume=True, final_state=self.final_state)
        self.moves = dict(moves)
        self.returns = tuple(returns)
        self.ranks = ranks
        self.run_dir = run_dir
        self.timeout = timeout
        self.backend = backend
        self.rank = int(self.launcher.get("RANK", "0"))
        self.world = int(self.launcher.get("WORLD_SIZE", "1"))
        self.local_rank = int(self.launcher.get("LOCAL_RANK", "0"))
        self.attempt = int(self.launcher.get("TORCHELASTIC_RESTART_COUNT", "0"))
        # threads: those a task's cpus= declares, else the process's own (the user's modules are loaded by
        # now, and may have set it); under --threads share at most this machine's cores / its ranks
        # (dagc.runtime.threads)
        baseline = current_threads()
        self.default_threads = task_threads(baseline, int(self.launcher.get("LOCAL_WORLD_SIZE", "1")),
                                            threads_mode) if baseline is not None else None
        self.store: RunStore | None = None
        self.groups: dict[tuple[int, ...], Any] = {}
        self.records: list[dict[str, Any]] = []
        self.log: EventLog | None = None
        self.progress: Progress | None = None
        self.kv: Any = None  # the rendezvous store (this attempt's keys): counts finished tasks
        self._follower: threading.Thread | None = None  # rank 0's progress thread (on a terminal)
        self._stop_follower = threading.Event()
        self._running_here: dict[str, float] = {}  # (ranks but 0) the tasks this rank runs: name -> wall start
        self.run: set[str] = set()
        self.load: set[str] = set()
        self.active: set[int] = set()
        self.device = torch.device("cpu")
        self.comm_device = torch.device("cpu")
        self.moved_bytes = 0
        self.sending: list[tuple[Any, Any]] = []  # sends of small values not completed yet (dagc.runtime.transfers)
        self.buffers: dict[int, Any] = {}  # tag -> a receive buffer (a list of them for a gather)

    # ---- setup -----------------------------------------------------------------------------------
    def setup(self) -> None:
        if self.world < self.ranks:
            raise SystemExit(f"pipeline {self.pipeline!r} was compiled for {self.ranks} ranks but runs on "
                             f"{self.world}; launch it with torchrun --nproc-per-node {self.ranks} "
                             "(or --nnodes × --nproc-per-node = at least that)")
        use_cuda = torch.cuda.is_available() and self.backend != "gloo"
        backend = self.backend or ("nccl" if use_cuda else "gloo")
        if use_cuda:
            self.device = torch.device("cuda", self.local_rank % torch.cuda.device_count())
            torch.cuda.set_device(self.device)
        if backend == "nccl":
            self.comm_device = self.device
        if "MASTER_ADDR" not in self.launcher:  # a single process started without a launcher
            self.launcher.setdefault("MASTER_ADDR", "127.0.0.1")
            self.launcher.setdefault("MASTER_PORT", str(_free_port()))
        self.kv = self._store()
        dist.init_process_group(backend, store=self.kv, rank=self.rank, world_size=self.world,
                                timeout=timedelta(seconds=self.timeout))
        self._keep_default_group()
        # every group is created once, up front, by every rank in the same (sorted) order
        groups = {row.ranks for row in self.tasks.values() if len(row.ranks) > 1}
        groups |= {info[4] for info in self.collectives.values()}
        for group in sorted(groups):
            self.groups[group] = dist.new_group(list(group))
        run_id = new_run_id()
        if self.run_dir is not None:
            self.store = RunStore(self.run_dir, pipeline=self.pipeline) if self.rank == 0 else None
            busy = [self.store.lock(run_id) if self.store is not None else None]
            dist.broadcast_object_list(busy, src=0)  # one run at a time: every rank stops, not only rank 0
            if busy[0] is not None:
                raise SystemExit(f"error: {busy[0]}")
            if self.store is None:
                self.store = RunStore(self.run_dir)
        self.stored.store = self.store  # a restarted run reuses what its earlier attempts stored
        sources: dict[str, str] = {}  # reused task -> where its output was found: "run" or "cache"
        if self.rank == 0 and (self.store is not None or self.cache is not None):
            # a file a stored output was computed from changed: that task and everything after it run again
            before_reuse(self.tasks, self.code, self.store, self.cache)
            sources = {name: found for name in self.tasks if (found := self._reusable(name)) is not None}
        shared: list[Any] = [run_id, sorted(sources.items())]
        dist.broadcast_object_list(shared, src=0)
        run_id, sources = shared[0], dict(shared[1])
        done = set(sources)
        self.run, self.load, self.active = plan_steps(self.tasks, self.moves, self.returns, done,
                                                      self.collectives)
        for tag in sorted(self.active):  # preallocate the receive buffers of statically shaped tensors
            if tag in self.collectives and self.collectives[tag][0] == "gather":
                _, parts, _, root, _, static = self.collectives[tag][:6]
                if root == self.rank and static is not None:
                    wire = wire_static(static, self.compress[tag]) if tag in self.compress else static
                    self.buffers[tag] = [static_buffer(wire, self.comm_device) for _ in parts]  # type: ignore[assignment]
                continue
            if tag in self.collectives:
                kind, _, _, root, group, static = self.collectives[tag][:6]
                src, dst = root, (self.rank if self.rank in group and kind == "broadcast" else -1)
            else:
                _, _, src, dst, static = self.moves[tag]
            if tag in self.compress and static is not None:
                static = wire_static(static, self.compress[tag])
            if dst == self.rank and src != dst and static is not None:
                self.buffers[tag] = static_buffer(static, self.comm_device)
        if self.store is not None:
            self.log = EventLog(self.store.events_path, run_id)
            if self.rank == 0 and self.changed:
                self.log.write("code_changed", tasks=self.changed)
        if self.rank == 0:  # the whole run's progress: every rank counts its tasks in the store
            self.progress = Progress(len(self.run))
            if self.progress.enabled:  # (redrawn as other ranks start and finish theirs)
                self._follower = threading.Thread(target=self._follow_progress, args=(self.progress,), daemon=True,
                                                  name="dagc-progress")
                self._follower.start()
            self._event("run_start", pipeline=self.pipeline, tasks=len(self.tasks),
                        resume=self.resume or self.attempt > 0,
                        run_dir=str(self.run_dir) if self.run_dir else None, world_size=self.world,
                        backend=backend, restart=self.attempt)
        for name in sorted(done):
            if self.tasks[name].ranks[0] == self.rank:
                self._event("skip", name, fingerprint=self.tasks[name].fingerprint, source=sources[name],
                            rank=self.rank)
        for name, row in self.tasks.items():  # what reused tasks printed, in program order, by their owner
            if name in done and row.ranks[0] == self.rank:
                spec = self.specs[name]
                held = self.stored.held_here(spec)
                replay(self.stored.console(spec, held), name,
                       "the run directory or the cache" if held == "run" else "the cache")

    def _reusable(self, name: str) -> str | None:
        """Where task `name`'s output can be had (dagc.runtime.reuse): "run" (the run directory), "cache" (a
        cached output is taken into the run directory, so every rank finds it there), or None."""
        spec = self.specs[name]
        source = self.stored.source(spec)
        if source is not None:
            self.stored.take(spec, source)
        return source

    def _store(self) -> Any:
        """The rendezvous store, with keys private to this attempt: a restarted group must not read
        the addresses its dead predecessors published (torchelastic's agent store outlives them)."""
        agent = self.launcher.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
        store = dist.TCPStore(self.launcher["MASTER_ADDR"], int(self.launcher["MASTER_PORT"]), self.world,
                              is_master=not agent and self.rank == 0, timeout=timedelta(seconds=self.timeout),
                              multi_tenant=not agent)
        return dist.PrefixStore(f"dagc/attempt_{self.attempt}", store)

    # ---- events ----------------------------------------------------------------------------------
    def _event(self, event: str, task: str | None = None, **fields: Any) -> None:
        if self.log is None:
            return
        if self.rank == 0:
            self.log.write(event, task, **fields)
            return
        record: dict[str, Any] = {"ts": time.time(), "run": self.log.run_id, "event": event}
        if task is not None:
            record["task"] = task
        record.update(fields, pid=os.getpid(), host=socket.gethostname())
        self.records.append(record)

    def _write_own_records(self) -> None:
        """A rank other than 0 writes the records it holds itself, when the run fails before handing them to
        rank 0 (the tasks it finished belong in the failed run's log too)."""
        records, self.records = self.records, []
        if self.rank != 0 and self.log is not None and records:
            _write_records(EventLog(self.log.path, self.log.run_id), records)

    def _keep_records_on_termination(self) -> None:
        """torchrun's agent ends the other ranks with SIGTERM when one fails: their records are written first."""
        if self.rank == 0 or threading.current_thread() is not threading.main_thread():
            return

        def on_term(signum: int, frame: Any) -> None:
            self._write_own_records()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

        signal.signal(signal.SIGTERM, on_term)

    # ---- the verbs -----------------------------------------------------------------------------
    def task(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run task `name` on this rank (with the others of its group), load its stored output, or
        skip it; returns its value, or placeholders where this rank does not hold it. Attempts,
        retries (a multi-rank task's ranks retry together), timeouts and events are the executor's
        (dagc.runtime.executor); a task that fails for good raises TaskFailed naming it and this rank.
        Every argument after `fn` is the task's own, whatever its name."""
        return self._task(name, fn, args, kwargs, None)

    def keyed(self, name: str, fn: Callable[[], Any], /, key_values: tuple) -> Any:
        """`task` for a glue node, fused group or region that takes no arguments and is keyed on the content of
        `key_values`, the values it reads from outside (dagc.runtime.executor)."""
        return self._task(name, fn, (), {}, key_values)

    def _task(self, name: str, fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any],
              key_values: tuple | None) -> Any:
        ranks, outputs, spec = self.tasks[name].ranks, self.tasks[name].outputs, self.specs[name]
        placeholder: Any = tuple(None for _ in outputs) if len(outputs) > 1 else None
        owner = ranks[0] == self.rank
        if name in self.load:
            return self.stored.output(spec, self.stored.held_here(spec))[0] if owner else placeholder
        if name not in self.run:
            return placeholder
        group = self.groups.get(ranks)
        executor = Executor(
            store=self.store, log=_RankLog(self) if self.log is not None else None, cache=self.cache,
            context={"rank": ranks.index(self.rank), "world_size": len(ranks), "group": group,
                     "device": self.device, "run_dir": self.run_dir},
            where={"rank": self.rank, "device": str(self.device), "node": socket.gethostname()},
            attempt_offset=self.attempt, process_rank=self.rank, check=self.check,
            threads=self.default_threads, final_state=self.final_state, held=self.held, costs=self.costs,
            stored=self.stored)  # (a group stored at its end: its outputs wait in `held` until its last task)
        agree = (lambda failed: self._any_failed(failed, group)) if group is not None else None
        if owner and self.progress is not None:
            self.progress.begin(name)
        elif owner:
            self._say_running(name, time.time())
        with use_stages(self.stages.get(name)):
            value = executor.run_call(spec, fn, args, kwargs, owner=owner, agree=agree, key_values=key_values)
        if owner:
            if self.progress is None:
                self._say_running(name, None)
            done = self.kv.add("progress", 1) if self.kv is not None else 0
            if self.progress is not None:
                self.progress.reach(done)
                self.progress.advance(0, name=name)
        return value if owner else placeholder

    def _say_running(self, name: str, began: float | None) -> None:
        """A rank other than 0 tells rank 0's display, through the rendezvous store, which tasks it runs now
        (`began`: when `name` started by the wall clock; None once it ended)."""
        if began is None:
            self._running_here.pop(name, None)
        else:
            self._running_here[name] = began
        if self.kv is None:
            return
        try:
            self.kv.set(f"running/{self.rank}", json.dumps(self._running_here))
        except Exception:  # noqa: BLE001 - the store is gone: the run is ending, and the display with it
            pass

    def _follow_progress(self, progress: Progress) -> None:
        """Rank 0's display follows the tasks every rank finished (counted in the rendezvous store) and the tasks
        the other ranks run now (`_say_running`), until the run ends (`_stop_following`)."""
        interval = 0.2 if progress.mode == "live" else 1.0
        keys = [f"running/{rank}" for rank in range(1, self.world)]
        while progress.enabled and not self._stop_follower.is_set():
            try:
                progress.reach(int(self.kv.add("progress", 0)))
                for rank, key in enumerate(keys, start=1):
                    if self.kv.check([key]):
                        progress.elsewhere(f"rank {rank}", json.loads(self.kv.get(key)))
            except Exception:  # noqa: BLE001 - the store is gone: the run is ending
                return
            self._stop_follower.wait(interval)

    def _stop_following(self) -> None:
        """Stop the progress thread and wait for it, before the store and the process group go: a thread still
        inside a call of the C++ store while the interpreter exits aborts the process (`terminate called without
        an active exception`) after a correct run."""
        self._stop_follower.set()
        if self._follower is not None:
            self._follower.join(timeout=10)
            self._follower = None

    def _any_failed(self, failed: bool, group: Any) -> bool:
        """Whether an attempt of a multi-rank task failed on any of its ranks (all of them ask)."""
        flag = torch.tensor([int(failed)], dtype=torch.int64, device=self.comm_device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group)
        return bool(flag.item())

    def send(self, value: Any, tag: int) -> None:
        if tag not in self.active:
            return
        name, _, _, dst, static = self.moves[tag]
        try:
            self.moved_bytes += send_value(value, dst, tag, self.comm_device, static, self.compress.get(tag),
                                           pending=self.sending)
            self.sending[:] = [(work, held) for work, held in self.sending if not work.is_completed()]
        except NOT_STORABLE as exc:  # it must leave this rank, so it must pickle: say whose value it is
            producer = next((t for t, row in self.tasks.items() if name in row.outputs), name)
            raise TaskFailed(producer, self.attempt, None, self.rank, detail=(
                f"its output %{name} ({unpicklable_type(value)}) goes to rank {dst} but cannot be pickled "
                f"({type(exc).__name__}: {exc}); define the type at module level, or place the tasks that "
                "read it on the same device")) from exc

    def recv(self, tag: int) -> Any:
        if tag not in self.active:
            return None
        _, _, src, _, static = self.moves[tag]
        value = recv_value(src, tag, self.comm_device, static, self.buffers.pop(tag, None), self.compress.get(tag))
        if isinstance(value, torch.Tensor) and value.device != self.device and value.device.type != "cpu":
            value = value.to(self.device)
        return value

    def broadcast(self, value: Any, tag: int) -> Any:
        """The broadcast collective `tag`: the root passes its value, the other ranks of the group
        None; every rank of the group gets the value."""
        if tag not in self.active:
            return None
        _, _, _, root, group, static = self.collectives[tag][:6]
        value = broadcast_value(value, root, self.groups[group], self.comm_device, static, self.compress.get(tag),
                                self.buffers.pop(tag, None))
        if isinstance(value, torch.Tensor) and value.device != self.device and value.device.type != "cpu":
            value = value.to(self.device)
        return value

    def reduce(self, value: Any, tag: int) -> Any:
        """The sum collective `tag`: every rank of the group passes its operand; the root (every
        rank, for an all-reduce) gets the sum (divided by the declared divisor, for a mean), the
        other ranks None."""
        if tag not in self.active:
            return None
        kind, operands, _, root, group, _, divisor, start = self.collectives[tag]
        total = reduce_value(value, root, self.groups[group], self.comm_device, [rank for _, rank in operands],
                             divisor, everywhere=kind == "all_reduce", start=start)
        if isinstance(total, torch.Tensor) and total.device != self.device and total.device.type != "cpu":
            total = total.to(self.device)
        return total

    def gather(self, value: Any, tag: int) -> Any:
        """The gather collective `tag`: every sender passes its value, the root None; the root gets
        the senders' values as a list (in the reader's order), the other ranks None."""
        if tag not in self.active:
            return None if self.rank != self.collectives[tag][3] else [None] * len(self.collectives[tag][1])
        _, parts, _, root, group, static = self.collectives[tag][:6]
        values = gather_value(value, root, self.groups[group], self.comm_device, [rank for _, rank in parts],
                              static, self.compress.get(tag), tag, self.buffers.pop(tag, None))
        if values is None:
            return None
        return [v.to(self.device) if isinstance(v, torch.Tensor) and v.device != self.device
                and v.device.type != "cpu" else v for v in values]

    # ---- the whole run ---------------------------------------------------------------------------
    def execute(self, program: Callable[[Runner], Any],
                finish: Callable[[Any, RunStore | None, EventLog | None], None] | None = None) -> Any:
        """Set up, run this rank's `program`, and on rank 0 gather the other ranks' events and `finish` the
        run with its result (dagc.runtime.lifecycle: stored, `run_end`, delivered); returns the result."""
        self.setup()
        self._keep_records_on_termination()
        try:
            result = program(self)
            for work, _ in self.sending:  # every value this rank sent has arrived
                work.wait()
            self.sending.clear()
            records: list[Any] = [None] * self.world if self.rank == 0 else []
            dist.gather_object(self.records, records if self.rank == 0 else None, dst=0)
            self.records = []  # handed over: rank 0 writes them
            if self.rank == 0:
                if self.log is not None:
                    _write_records(self.log, [r for rs in records[1:] if rs for r in rs])
                if self.progress is not None:  # (before the result is printed)
                    self.progress.close()
                if finish is not None:
                    finish(result, self.store, self.log)
            dist.barrier()
            return result
        except BaseException as exc:
            self._write_own_records()  # what this rank did stays in the failed run's log
            if self.rank == 0:
                from dagc.runtime.program import INTERRUPTED

                self._event("run_failed", error=INTERRUPTED if isinstance(exc, KeyboardInterrupt)
                            else f"{type(exc).__name__}: {exc}")
            raise
        finally:
            self._stop_following()
            if self.progress is not None:  # a failed run's display is taken down before its error is said
                self.progress.close()
            dist.destroy_process_group = self._destroy  # (the user's code may call it again from here on)
            if dist.is_initialized():
                dist.destroy_process_group()

    def _keep_default_group(self) -> None:
        """User code that ends with `dist.destroy_process_group()` (accelerate's `end_training()`, most DDP
        scripts' last line) would destroy the group this runner gathers results and moves values through:
        while the run lasts, destroying the default group is deferred to the run's end (said once); a group
        the user made is destroyed as asked."""
        original = dist.destroy_process_group
        self._destroy = original
        said: list[bool] = []

        def destroy_process_group(group: Any = None) -> None:
            if group is not None and group is not dist.GroupMember.WORLD:
                return original(group)
            if not said:
                said.append(True)
                sys.stderr.write(f"dagc: rank {self.rank}: a task destroyed the default process group; dagc keeps it "
                                 "until the run ends, since it moves values and results through it\n")
            return None

        dist.destroy_process_group = destroy_process_group
        for module in list(sys.modules.values()):  # `from torch.distributed import destroy_process_group` too
            if module is None or getattr(module, "__name__", "").startswith("torch"):
                continue
            names = getattr(module, "__dict__", {})
            for name, value in list(names.items()):
                if value is original:
                    names[name] = destroy_process_group


class _RankLog(EventLog):
    """The event log as a rank writes it: rank 0 appends, the others hand their records to rank 0
    at the end of the run, except a failure, which a rank about to stop writes itself."""

    def __init__(self, runner: Runner) -> None:
        assert runner.log is not None
        super().__init__(runner.log.path, runner.log.run_id)
        self.runner = runner

    def write(self, event: str, task: str | None = None, **fields: Any) -> dict[str, Any]:
        if self.runner.rank == 0 or event == "failure":
            return super().write(event, task, **fields)
        self.runner._event(event, task, **fields)
        return {}


def _write_records(log: EventLog, records: Sequence[dict[str, Any]]) -> None:
    """Append records another process (or this one, earlier) made, in time order, keeping when they happened."""
    for record in sorted(records, key=lambda r: r["ts"]):
        fields = {k: v for k, v in record.items() if k not in ("run", "event", "task")}
        fields["time"] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record["ts"])) + \
            f".{int(record['ts'] % 1 * 1e3):03d}Z"
        log.write(record["event"], record.get("task"), **fields)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
