"""The task executor every emitted program runs its tasks through (local, Ray workers, torch ranks).

    rt = Executor(TASKS, store=RunStore(run_dir), log=EventLog(...), cache=Cache(dir), reuse=True)
    value = rt.task("train", module.train, features, data, epochs=80)

For one task it: reuses a stored output (the run directory on `--resume`, then the `--cache`
directory, both addressed by the task's fingerprint); otherwise runs the function with the task
context set (`dagc.context().attempt` is 0 for the first attempt, n for the n-th retry), under the
task's `timeout=`, retrying up to `retries=` times; `SystemExit` raised in a task is a failure of
that task like any exception, never the end of the program. Each attempt writes `start` (and
`retry`), then `end` or `failure` to the event log; a finished task's output is saved in the run
directory and the cache. An output that cannot be pickled is not stored (a warning says so and
`--resume` recomputes it): a value that never leaves its process need not pickle.

`TASKS` is the program's table: task → TaskRow (dagc.runtime.rows: fingerprint, retries, timeout in
seconds or None, cache, state group or None, ...). Whether a stored output may be reused, and loading it,
is dagc.runtime.reuse's, as for every program. A task in a state group (it shares objects with other tasks, see
dagc.ir.effects) is reused only when every task of its group is: its outputs alone would not
rebuild the shared objects.

Nothing here imports torch, Ray or the compiler.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from dagc.runtime import filetrace
from dagc.runtime.console import Recording, replay, save_console
from dagc.runtime.context import TaskContext, reset_context, set_context
from dagc.runtime.costs import RUNNING_UNIT, CostLog, TaskMemory, declared_memory
from dagc.runtime.effectcheck import Assumed, EffectViolation, watch
from dagc.runtime.energy import meter
from dagc.runtime.events import EventLog
from dagc.runtime.progress import Progress
from dagc.runtime.reuse import FINAL, NEVER_REUSED, StoredOutputs
from dagc.runtime.rows import TaskRow
from dagc.runtime.store import Cache, Part, RunStore, dumps_outputs, flush_writes, write_behind
from dagc.runtime.threads import set_threads
from dagc.units import format_size

__all__ = ["Executor", "TaskSpec", "TaskFailed", "TaskTimeout", "deadline", "NOT_STORABLE", "TaskRow", "NEVER_REUSED",
           "FINAL"]

NOT_STORABLE = (pickle.PicklingError, TypeError, AttributeError, RecursionError)
# how long after its timeout a task that did not stop (stuck outside Python code) ends its process
HARD_STOP_GRACE = 10.0
# `recompute`: an output of at least RECOMPUTE_MIN_BYTES whose task took less time than storing it costs
# (sealing and writing run at about STORE_BYTES_PER_S on one core; `$DAGC_STORE_RATE` bytes/s where the
# disk is slower or faster) is computed again rather than stored
RECOMPUTE_MIN_BYTES = 32 * 2**20
STORE_BYTES_PER_S = 2**30


def store_rate() -> float:
    """Bytes per second that storing an output is taken to cost (`$DAGC_STORE_RATE`, else STORE_BYTES_PER_S)."""
    try:
        rate = float(os.environ.get("DAGC_STORE_RATE", STORE_BYTES_PER_S))
    except ValueError:
        return STORE_BYTES_PER_S
    return rate if rate > 0 else STORE_BYTES_PER_S


# task functions (module, qualified name) said to have taken more memory than declared, once per process
OVER_MEMORY_SAID: set[tuple[str | None, str, int]] = set()

# the start of a cache column's reason when a task reads what a task that acts on the world made (or runs after
# it): its output is stored and reused by its fingerprint and the content of its arguments, taken when it is
# about to run (backends/fingerprint.py); the rest of the reason says why the fingerprint alone cannot tell
CONTENT_KEYED = "keyed on its inputs: "
@dataclass(frozen=True)
class TaskSpec:
    """How one task runs: its fingerprint and the run policy its options set."""

    name: str
    fingerprint: str | None = None
    retries: int = 0
    timeout: float | None = None
    cache: bool = True
    state: int | None = None
    uncached: str | None = None  # why the task is never taken from the cache
    assumed: Assumed | None = None  # what the compiler assumed it may change (None: not checked)
    threads: int | None = None  # the threads its `cpus=` declares (dagc.runtime.threads)
    memory: int | None = None  # the bytes its `memory=` declares, where the call or a framework's option says

    @classmethod
    def from_row(cls, name: str, row: TaskRow | tuple | None) -> TaskSpec:
        if row is None:
            return cls(name)
        row = TaskRow.of(row)
        # the cache column is True, or the reason the task is not cacheable
        return cls(name, row.fingerprint, int(row.retries), row.timeout, row.cache is True, row.state,
                   None if row.cache is True else (row.cache or "declared cache=False"),
                   Assumed.from_row(row.effects) if row.effects is not None else None, row.threads, row.memory)


class TaskFailed(Exception):
    """A task failed on its last attempt; the message names the task, rank and attempt."""

    def __init__(self, task: str, attempt: int, error: BaseException | None, rank: int | None = None,
                 detail: str | None = None) -> None:
        self.task, self.attempt, self.rank, self.error = task, attempt, rank, error
        where = f" on rank {rank}" if rank is not None else ""
        self.detail = detail or (_describe(error) if error is not None else "another rank of the task failed")
        super().__init__(f"task `{task}` failed{where} (attempt {attempt + 1}): {self.detail}")

    def __reduce__(self) -> tuple:
        # travels between processes (a Ray worker to its driver) without the original error, which
        # may not pickle: the message keeps what it said
        return (TaskFailed, (self.task, self.attempt, None, self.rank, self.detail))


class TaskTimeout(Exception):
    """Raised inside a task that ran longer than its `timeout=`."""


def _describe(error: BaseException) -> str:
    if isinstance(error, SystemExit):
        return f"it called sys.exit({error.code!r})"
    return f"{type(error).__name__}: {error}"


@contextmanager
def deadline(seconds: float | None, task: str,
             on_hard_stop: Callable[[TaskTimeout], object] | None = None) -> Iterator[None]:
    """Stop the block after `seconds`: TaskTimeout is raised in it (SIGALRM, on the main thread);
    a block that does not return to Python within HARD_STOP_GRACE more seconds ends its process,
    naming the task (a hung task never hangs the run), after `on_hard_stop` recorded why (the engine
    then sees only a process that died)."""
    if not seconds:
        yield
        return
    message = f"task `{task}` ran longer than its timeout of {seconds:g}s and was stopped"
    use_alarm = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    previous: Any = None
    if use_alarm:
        def on_alarm(signum: int, frame: Any) -> None:
            raise TaskTimeout(message)

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    done = threading.Event()

    def hard_stop() -> None:
        if not done.wait(seconds + (HARD_STOP_GRACE if use_alarm else 0.0)):
            stopped = f"{message} (its process was ended: it did not return to Python)"
            sys.stderr.write(f"dagc: {stopped}\n")
            sys.stderr.flush()
            if on_hard_stop is not None:
                try:
                    on_hard_stop(TaskTimeout(stopped))
                except Exception:  # noqa: BLE001 - the process ends either way; stderr said why
                    pass
            os._exit(124)

    watchdog = threading.Thread(target=hard_stop, name=f"dagc-timeout-{task}", daemon=True)
    watchdog.start()
    try:
        yield
    finally:
        done.set()
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


class Executor:
    """Runs the tasks of one process of a pipeline run (see the module docstring).

    store     the run directory (None: outputs are not kept)
    log       the event log (None: no events)
    cache     a content-addressed cache shared across runs (None: no cache)
    reuse     reuse outputs found in the run directory (`--resume`)
    context   the TaskContext fields of this process (rank, world_size, group, device, run_dir)
    where     fields every event of this process carries (node, device, rank)
    attempt_offset  attempts already used by earlier processes (torchrun restarts)
    claim     number attempts with marker files in the run directory, so that an attempt in a new
              process (a Ray worker that died) continues the count
    process_rank  the rank a failure names (torch: this process's global rank)
    check     compare what each task did with what the compiler assumed (dagc.runtime.effectcheck)
    modules   the user's modules, whose globals the check watches
    threads   the threads a task that declares no `cpus=` computes on (None: as the process does;
              dagc.runtime.threads)
    progress  the progress display (dagc.runtime.progress): told as tasks start and finish (the local
              program's)
    write_behind  outputs of tasks outside state groups are written on a background thread
    recompute  a large output its task computes the same way again, faster than the output could be stored,
              is not stored: `--resume` and `--cache` compute it again (the local program; see `save`)
    final_state  state groups whose tasks' outputs are stored together when the group's last task has run
              (`held` keeps them until then),
              as the objects are then (the pipeline returns one that a task changes after it was made), in one
              pickle (objects the tasks share stay shared) under a fingerprint ending in FINAL; reused from
              there only
    carry     the outputs of the task this executor runs (a Ray task's): see `carried`
    """

    def __init__(self, tasks: Mapping[str, TaskRow] | None = None, *, store: RunStore | None = None,
                 log: EventLog | None = None, cache: Cache | None = None, reuse: bool = False,
                 context: Mapping[str, Any] | None = None, where: Mapping[str, Any] | None = None,
                 attempt_offset: int = 0, claim: bool = False, process_rank: int | None = None,
                 check: bool = False, modules: list[str] | None = None, threads: int | None = None,
                 progress: Progress | None = None, write_behind: bool = False, recompute: bool = False,
                 final_state: Iterable[int] = (), carry: int = 0,
                 held: dict[int, list[tuple[TaskSpec, Any, list[tuple[str, str]]]]] | None = None,
                 costs: CostLog | None = None, stored: StoredOutputs | None = None) -> None:
        self.costs = costs  # the cost store every finished task's figures go to (dagc.runtime.costs)
        self.final_state = frozenset(final_state)
        # state group -> (task, output, what it printed) of its tasks run so far, stored at the group's end
        # (shared by the executors of one process that each run one task of a group: `held`)
        self.held = held if held is not None else {}
        self.recompute = recompute
        self.store_rate = store_rate() if recompute else STORE_BYTES_PER_S
        # carry=N: the task has N outputs, and `carried` keeps the Parts of the last one stored, so that the
        # process hands the stored pickle on (a Ray worker returns it) instead of pickling the value again
        self.carry = carry
        self.carried: list[Part] | None = None
        self.write_behind = write_behind  # outputs written on a background thread; flush() before the end
        self.progress = progress  # advanced by each task this process runs or reuses
        self.threads = threads
        self.check = check
        self.modules = list(modules or ())
        self.store, self.log, self.cache = store, log, cache
        self.context = dict(context or {})
        self.where = dict(where or {})
        self.attempt_offset = attempt_offset
        self.process_rank = process_rank
        self.claim = claim and store is not None and log is not None
        self.warned: set[str] = set()
        self.not_cached: set[str] = set()
        # what may be reused, and loading it (dagc.runtime.reuse); shared by a process's executors when given
        self.stored = stored if stored is not None else StoredOutputs(
            {name: TaskSpec.from_row(name, row) for name, row in (tasks or {}).items()}, store, cache, reuse,
            self.final_state)
        self.specs, self.groups = self.stored.specs, self.stored.groups

    def spec(self, name: str) -> TaskSpec:
        found = self.specs.get(name)
        return found if found is not None else TaskSpec(name)

    def group_key(self, group: int) -> tuple[str, str] | None:
        return self.stored.group_key(group)

    # ---- reuse -----------------------------------------------------------------------------------
    def source(self, spec: TaskSpec) -> str | None:
        """Where a finished output of `spec` can be had: "run", "cache" or None (dagc.runtime.reuse)."""
        return self.stored.source(spec)

    def load(self, spec: TaskSpec, source: str) -> Any:
        """The stored output of a finished task, its `skip` event, and what it printed, replayed."""
        value, chunks = self.stored.output(spec, source)
        if self.log is not None:
            self.log.skip(spec.name, spec.fingerprint, source=source, **self.where)
        replay(chunks, spec.name, "the run directory" if source == "run" else "the cache")
        return value

    # ---- running ---------------------------------------------------------------------------------
    # (`name`, `fn` and `spec` are positional-only: a task's own keyword arguments may bear those names)
    def task(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Task `name`: its stored output when one may be reused, else the value of running it."""
        spec = self.spec(name)
        source = self.source(spec)
        if source is not None:
            return self._reused(spec, source)
        return self.run(spec, fn, *args, **kwargs)

    def _reused(self, spec: TaskSpec, source: str) -> Any:
        value = self.load(spec, source)
        if self.progress is not None:
            self.progress.advance(name=spec.name)
        return value

    def region(self, name: str, fn: Callable[[], Any], key_values: tuple | None = None) -> Any:
        """A fused group or a region (a loop, a branch, a map) that the local program runs here as one task,
        as Ray and torch programs do: reused and stored as a unit, so that a resumed run does not run a
        finished training loop again (nor, in a state group, every other task of the group). Its tasks run
        inside through `call`, with their own retries, timeouts and events; the unit is tried once, and
        its failure is the failure of the task inside that failed. `key_values`: the values it reads from
        outside, for a unit keyed on their content (CONTENT_KEYED)."""
        spec = replace(self.spec(name), retries=0, timeout=None)
        source = self.source(spec)
        if source is not None:
            return self._reused(spec, source)
        try:
            return self.run_call(spec, fn, (), {}, key_values=key_values)
        except TaskFailed as exc:
            if isinstance(exc.__cause__, TaskFailed):
                raise exc.__cause__ from None
            raise

    def call(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run task `name` with retries, timeout and events, never storing its output (a task inside a
        loop or branch runs anew each time)."""
        return self.run(replace(self.spec(name), fingerprint=None), fn, *args, **kwargs)

    def run(self, spec: TaskSpec, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run `fn(*args, **kwargs)` as task `spec` (see `run_call`)."""
        return self.run_call(spec, fn, args, kwargs)

    def run_call(self, spec: TaskSpec, fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any], *,
                 owner: bool = True, agree: Callable[[bool], bool] | None = None,
                 key_values: tuple | None = None) -> Any:
        """Run `fn(*args, **kwargs)` as task `spec`: attempts, events, storing (the task's own arguments are
        passed as a tuple and a dict, so that they may have any names). `owner`: this process
        holds the task's value (rank 0 of a multi-rank task). `agree(failed)`: for a multi-rank task,
        tells the other ranks whether this attempt failed here and returns whether it failed anywhere,
        so that every rank retries together. `key_values`: what a fused group or region reads from outside
        (it takes no arguments), for keying it on their content."""
        if owner and agree is None and spec.uncached and spec.uncached.startswith(CONTENT_KEYED):
            keyed = self._content_keyed(spec, args, kwargs) if key_values is None else \
                self._content_keyed(spec, key_values, {})
            if keyed is not None:
                spec = keyed
                source = self.source(spec)
                if source is not None:  # its arguments are what they were: the output stored then is this one's
                    return self._reused(spec, source)
        threads = spec.threads or self.threads
        before = set_threads(threads) if threads else None
        # a unit of the program's code table: what runs inside it is recorded with its code (dagc.runtime.costs)
        unit = self.costs.code.get(spec.name) if self.costs is not None else None
        running = RUNNING_UNIT.set((self.costs, unit)) if unit is not None else None
        if self.progress is not None:
            self.progress.begin(spec.name)
        try:
            value = self._run(spec, fn, args, kwargs, owner, agree)
        finally:
            if running is not None:
                RUNNING_UNIT.reset(running)
            if before is not None and before != threads:
                set_threads(before)  # the next task starts from the process's own count
        if self.progress is not None:
            self.progress.advance(name=spec.name)
        return value

    def _content_keyed(self, spec: TaskSpec, args: tuple, kwargs: dict[str, Any]) -> TaskSpec | None:
        """`spec` keyed on the content of its arguments as well as its fingerprint (CONTENT_KEYED), stored and
        reused like any cacheable task's; None where that cannot be (arguments that do not pickle, a state group,
        nowhere to store)."""
        if spec.fingerprint is None or spec.state is not None or (self.store is None and self.cache is None):
            return None
        from dagc.runtime.store import content_digest

        digest = content_digest((args, sorted(kwargs.items())))
        if digest is None:
            return None
        fingerprint = hashlib.sha256(f"{spec.fingerprint}|{digest}".encode()).hexdigest()[:32]
        return replace(spec, fingerprint=fingerprint, cache=True, uncached=None)

    def _run(self, spec: TaskSpec, fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any], owner: bool,
             agree: Callable[[bool], bool] | None) -> Any:
        rank = self.context.get("rank") if self.context.get("world_size", 1) > 1 else None
        named_rank = self.process_rank if self.process_rank is not None else rank
        # what the task prints is kept with its stored output, to be replayed when that is reused
        recording = Recording() if owner and spec.fingerprint is not None and (
            self.store is not None or (self.cache is not None and spec.cache)) else None
        traced = owner and spec.fingerprint is not None and (self.store is not None or self.cache is not None)
        found: list[tuple[str, str]] | None = None
        # the energy counters of the devices this process sees, where the machine has any (dagc.runtime.energy)
        energy = meter() if owner and (self.log is not None or self.costs is not None) else None
        # its memory= (the call's, else its decorator's), said when the task took more (dagc.runtime.costs)
        declared = spec.memory if spec.memory is not None else declared_memory(fn)
        measure = owner and (self.costs is not None or declared is not None)
        tries = 0
        while True:
            attempt = self._next_attempt(spec.name, rank, tries)
            tries += 1
            ctx = self._task_context(spec.name, attempt)
            if self.log is not None:  # every rank says it started; only the owner says it ended
                self.log.start(spec.name, attempt + 1, **self.where)
            start = time.perf_counter()
            cpu_start = time.process_time()
            joules_start = energy.read() if energy is not None else None
            memory = TaskMemory() if measure else None
            error: BaseException | None = None
            token = set_context(ctx)
            if recording is not None:
                recording.chunks.clear()  # only the attempt that succeeds is replayed
                recording.__enter__()
            watcher = watch(spec.name, spec.assumed, args, kwargs, self.modules or [getattr(fn, "__module__", "")]) \
                if self.check and spec.assumed is not None else None
            tracer = filetrace.recording() if traced else None  # the files it reads, checked before its output is reused
            found = tracer.__enter__() if tracer is not None else None
            try:
                if spec.timeout:
                    def recorded(error: TaskTimeout, began: float = start, number: int = attempt + 1) -> object:
                        if self.log is None:
                            return None
                        return self.log.failure(spec.name, time.perf_counter() - began, error, "",
                                                attempt=number, **self.where)

                    with deadline(spec.timeout, spec.name, recorded):
                        value = fn(*args, **kwargs)
                else:  # the common case, kept free of context managers: it runs once per task
                    value = fn(*args, **kwargs)
                if watcher is not None:
                    watcher.finish()
                    if self.log is not None and (watcher.unseen_params or watcher.unseen_rng):
                        self.log.write("effects_unseen", spec.name, params=watcher.unseen_params,
                                       rng=watcher.unseen_rng, **self.where)
                    if self.log is not None and watcher.drawn:  # what the compiler did not see, for next time
                        self.log.write("effects_observed", spec.name, rng=watcher.drawn, **self.where)
            except KeyboardInterrupt:
                raise
            except EffectViolation as exc:  # not the task's failure: the compiler's assumption was wrong
                if self.log is not None:
                    self.log.failure(spec.name, time.perf_counter() - start, exc, "", attempt=attempt + 1,
                                     **self.where)
                    # what it did, for the next compile of the script to assume (dagc.frontend.observed)
                    self.log.write("effects_violated", spec.name, params=exc.params, rng=exc.drawn, **self.where)
                raise TaskFailed(spec.name, attempt, exc, named_rank, detail=str(exc)) from exc
            except BaseException as exc:  # noqa: BLE001 - SystemExit too: a failure of this task
                error = exc
                if self.log is not None:
                    self.log.failure(spec.name, time.perf_counter() - start, exc, traceback.format_exc(),
                                     attempt=attempt + 1, **self.where)
            finally:
                if tracer is not None:
                    tracer.__exit__(None, None, None)
                reset_context(token)
                if recording is not None:
                    recording.__exit__()
                if watcher is not None:
                    watcher.stop()
            failed = error is not None
            if agree is not None:
                failed = agree(failed)
            if not failed:
                break
            if attempt >= spec.retries:
                raise TaskFailed(spec.name, attempt, error, named_rank) from error
        duration = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
        joules = round(energy.read() - joules_start, 3) if energy is not None and joules_start is not None else None
        measured = {"energy": joules} if joules is not None else {}
        peak = memory.peak() if memory is not None else None
        grown = memory.grown(peak) if memory is not None else None
        if declared is not None and grown is not None and grown > declared:
            self._over_memory(spec.name, fn, declared, grown)
        if found is not None:
            self._save_trace(spec, found)
        nbytes = self.save(spec, value, recording.chunks if recording is not None else [], duration) if owner else None
        if owner and self.log is not None:
            self.log.end(spec.name, duration, nbytes, attempt=attempt + 1, **measured, **self.where)
        if owner and self.costs is not None:
            inside = RUNNING_UNIT.get()  # (a task inside a unit: the unit's code)
            self.costs.record(spec.name, duration, cpu, nbytes,
                              code=None if spec.name in self.costs.code or inside is None else inside[1],
                              rss=peak, memory=grown, **measured)
        return value

    def _base_context(self) -> TaskContext:
        """This process's context, built once (again if torch was imported since: its device then
        becomes a torch.device)."""
        base = getattr(self, "_base", None)
        if base is None or (isinstance(base.device, str) and "torch" in sys.modules):
            # the event log travels in the context so that a map region's listing can record its width
            base = self._base = TaskContext(**{"events": self.log, **self.context})
        return base

    def _task_context(self, task: str, attempt: int) -> TaskContext:
        """The base context with the task's name and attempt. Copied field by field rather than with
        dataclasses.replace (which validates again): this runs once per task."""
        ctx = object.__new__(TaskContext)
        ctx.__dict__.update(self._base_context().__dict__, task=task, attempt=attempt)
        return ctx

    def _next_attempt(self, task: str, rank: int | None, tries: int) -> int:
        """The number of the attempt about to start: `tries` made in this call so far, or with `claim`
        the next marker in the run directory (a task a dead worker was running continues its count)."""
        if self.claim:
            assert self.store is not None and self.log is not None
            key = task if rank is None else f"{task}.rank{rank}"
            return self.attempt_offset + self.store.next_attempt(self.log.run_id, key) - 1
        return self.attempt_offset + tries

    # ---- storing ---------------------------------------------------------------------------------
    def _save_trace(self, spec: TaskSpec, found: list[tuple[str, str]]) -> None:
        """Keep what the files a finished task read are now beside its output, in the run directory and the
        cache (dagc.runtime.filetrace), whether or not the output itself is stored: a task downstream of it
        is then computed again when one of them changes."""
        assert spec.fingerprint is not None
        places = [p for p in (self.store.root if self.store is not None else None,
                              self.cache.root if self.cache is not None else None) if p is not None]
        entries = filetrace.snapshot(found, ignore=places)
        if self.store is not None:
            filetrace.save_trace(self.store.path(spec.name, spec.fingerprint), entries)
        if self.cache is not None and spec.cache:
            filetrace.save_trace(self.cache.path(spec.fingerprint), entries)

    def save(self, spec: TaskSpec, value: Any, console: list[tuple[str, str]] | None = None,
             duration: float | None = None) -> int | None:
        """Store a finished task's output (and what it printed) in the run directory and the cache; the
        pickled size, or None when it could not be pickled. With `recompute`, an output that took its task
        `duration` seconds, less than storing it would cost, is not stored when the task computes the same
        output again (see `recomputed_rather_than_stored`)."""
        if self.cache is not None and not spec.cache and spec.fingerprint is not None \
                and spec.name not in self.not_cached:
            self.not_cached.add(spec.name)  # said once per task: --cache was asked for and this one is never cached
            print(f"dagc: task `{spec.name}` is not cached: {spec.uncached or 'it is not cacheable'}", file=sys.stderr)
            # (a CONTENT_KEYED task is stored by `run` under its key, with cache=True: never said to be uncached)
        if spec.fingerprint is None or (self.store is None and (self.cache is None or not spec.cache)):
            return None
        if spec.state is not None and spec.state in self.final_state:
            return self._hold(spec, value, console or [])
        return self._store(spec, value, console, duration)

    def _store(self, spec: TaskSpec, value: Any, console: list[tuple[str, str]] | None,
               duration: float | None = None) -> int | None:
        """Pickle and store `value` under `spec`'s fingerprint (see `save`)."""
        assert spec.fingerprint is not None
        try:  # tensor and array data out of band: written from where it lies, not copied
            data, parts = dumps_outputs(value, self.carry)
        except NOT_STORABLE as exc:
            self._not_storable(spec, value, exc)
            return None
        store, cache = self.store, self.cache if spec.cache else None
        fp = spec.fingerprint
        if self.carry:
            self.carried = parts
        if self.recompute and duration is not None and self.recomputed_rather_than_stored(spec, data.size, duration):
            if self.log is not None:
                self.log.write("recomputable", spec.name, seconds=round(duration, 6), bytes=data.size, **self.where)
            return data.size

        def write() -> None:
            if store is not None:
                store.save_bytes(spec.name, fp, data)
                save_console(store.path(spec.name, fp), console or [])
            if cache is not None:
                cache.save_bytes(fp, data)
                save_console(cache.path(fp), console or [])

        # behind the run when nothing changes the value later (no state group: the effects say so), since
        # the pickle reads tensors where they lie; a shared object is written before the next task runs
        if self.write_behind and spec.state is None:
            write_behind().submit(data.size, write)
        else:
            write()
        return data.size

    def _hold(self, spec: TaskSpec, value: Any, console: list[tuple[str, str]]) -> int | None:
        """Keep the output of a task of a `final_state` group until the group's last task has run, then
        store the outputs of all of them in one pickle, as the objects are at that point (its size, on the
        last task)."""
        assert spec.state is not None
        held = self.held.setdefault(spec.state, [])
        held.append((spec, value, list(console)))
        key = self.group_key(spec.state)
        if len(held) < len(self.groups[spec.state]) or key is None:
            return None
        del self.held[spec.state]
        name, fp = key
        together = replace(spec, name=name, fingerprint=fp, cache=all(m.cache for m, _, _ in held))
        self._group_trace(together, [m for m, _, _ in held])
        return self._store(together, {m.name: (output, printed) for m, output, printed in held}, [])

    def _group_trace(self, together: TaskSpec, members: list[TaskSpec]) -> None:
        """The files the group's tasks read (each kept at its own output's place), beside the group's output:
        the group is reused only while they are as they were."""
        assert together.fingerprint is not None
        places = []
        if self.store is not None:
            places.append((self.store.path(together.name, together.fingerprint),
                           [self.store.path(m.name, m.fingerprint) for m in members if m.fingerprint]))
        if self.cache is not None and together.cache:
            places.append((self.cache.path(together.fingerprint),
                           [self.cache.path(m.fingerprint) for m in members if m.fingerprint]))
        for target, sources in places:
            entries = {f"{e.get('kind')}:{e.get('path')}": e for source in sources for e in filetrace.load_trace(source)}
            filetrace.save_trace(target, [entries[k] for k in sorted(entries)])

    def recomputed_rather_than_stored(self, spec: TaskSpec, nbytes: int, duration: float) -> bool:
        """Whether a finished task's output is cheaper to compute again than to store: it is large, its
        task took less time than sealing and writing it would, and running the task again on the same
        inputs gives the same output (no random draws it does not seed, no files, no state, nothing done
        to the world: the compiler's `again`). A resumed run then computes it again in less time than
        it would have taken to store, and about what loading it would take."""
        return (nbytes >= RECOMPUTE_MIN_BYTES and duration * self.store_rate < nbytes and spec.state is None
                and spec.cache and spec.assumed is not None and spec.assumed.again)

    def flush(self) -> None:
        """Wait for the outputs written behind (before the run ends); raises a StorageError of theirs."""
        if self.write_behind:
            flush_writes()

    def _over_memory(self, task: str, fn: Callable[..., Any], declared: int, grown: int) -> None:
        """A task took more memory than its `memory=` declares: said once per task function in this process (a
        loop's body runs many times, unrolled as `big[0]`, `big[1]`, ...), as a warning and a `memory_exceeded`
        event; the cost store keeps the measured figure."""
        key = (getattr(fn, "__module__", None), getattr(fn, "__qualname__", task), declared)
        if key in OVER_MEMORY_SAID:
            return
        OVER_MEMORY_SAID.add(key)
        if self.log is not None:
            self.log.write("memory_exceeded", task, declared=declared, peak=grown, **self.where)
        print(f"dagc: warning: task `{task}` took {format_size(grown)} of memory at its peak, more than the "
              f"{format_size(declared)} its memory= declares (the cost store keeps the measured figure)",
              file=sys.stderr)

    def _not_storable(self, spec: TaskSpec, value: Any, exc: BaseException) -> None:
        kind = unpicklable_type(value)
        message = (f"task `{spec.name}`: its output ({kind}) cannot be pickled ({type(exc).__name__}: {exc}), "
                   "so it is not stored and --resume or --cache will run the task again; "
                   f"define {kind} at module level to make it storable")
        if self.log is not None:
            self.log.write("not_stored", spec.name, error=message, **self.where)
        if spec.name not in self.warned:
            self.warned.add(spec.name)
            print(f"dagc: warning: {message}", file=sys.stderr)


def unpicklable_type(value: Any, depth: int = 0) -> str:
    """The type that keeps `value` from pickling, as `module.Qualified.Name` (best effort: looks
    into tuples, lists and dict values)."""
    if depth < 3 and isinstance(value, (tuple, list, dict)):
        items = value.values() if isinstance(value, dict) else value
        for item in items:
            try:
                pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # noqa: BLE001
                return unpicklable_type(item, depth + 1)
    kind = type(value)
    return f"`{kind.__module__}.{kind.__qualname__}`"
