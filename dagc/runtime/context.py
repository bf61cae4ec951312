"""The task context: what a running task may ask about where and how it runs.

    import dagc

    @dagc.task(ranks=4, gpus=1)
    def train(data):
        ctx = dagc.context()
        model = torch.nn.parallel.DistributedDataParallel(build().to(ctx.device), process_group=ctx.group)
        ...
        return result if ctx.rank == 0 else None

Runtimes (the emitted torch.distributed and Ray programs) set the context around each task call
with `use_context(...)`; everywhere else `context()` answers the single-process default: rank 0 of
a world of 1, no process group, the CPU. So a task written against the context also runs as plain
Python. The module imports nothing heavy: torch is imported only when a device or a checkpoint is
asked for.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

__all__ = ["TaskContext", "context", "use_context", "set_context", "reset_context"]


@dataclass(frozen=True)
class TaskContext:
    """Where a task runs.

    rank        this process's rank within the task's group (0 … world_size-1)
    world_size  how many processes run the task (the task's `ranks` option; 1 for ordinary tasks)
    group       the torch.distributed process group of the task's ranks, or None (single process);
                pass it to collectives and to DDP (`process_group=ctx.group`)
    device      the device this rank should compute on: `torch.device("cuda", i)` on a GPU rank,
                else the CPU (a `torch.device` when the program has imported torch, else the
                string "cpu", which torch accepts wherever it takes a device)
    task        the IR name of the running task (None outside a pipeline run)
    run_dir     the run directory of the pipeline run (None when the run keeps no state)
    attempt     0 for the first run of the task, n for its n-th restart or retry
    events      the run's event log (dagc.runtime.events.EventLog), where the runtime records what
                the task's map regions did (their measured widths); None when the run keeps no log
    """

    rank: int = 0
    world_size: int = 1
    group: Any = None
    device: Any = field(default="cpu")
    task: str | None = None
    run_dir: Path | None = None
    attempt: int = 0
    events: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (isinstance(self.world_size, int) and self.world_size >= 1):
            raise ValueError(f"world_size must be a positive integer, got {self.world_size!r}")
        if not (isinstance(self.rank, int) and 0 <= self.rank < self.world_size):
            raise ValueError(f"rank must be in 0..{self.world_size - 1}, got {self.rank!r}")
        if isinstance(self.device, str):
            object.__setattr__(self, "device", _as_device(self.device))
        if self.run_dir is not None and not isinstance(self.run_dir, Path):
            object.__setattr__(self, "run_dir", Path(self.run_dir))

    @property
    def is_main(self) -> bool:
        """True on rank 0, the rank whose return value is the task's result."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """True when the task runs as several processes (world_size > 1)."""
        return self.world_size > 1

    @property
    def state_dir(self) -> Path | None:
        """`run_dir/state/<task>`: where the task's own state (e.g. training checkpoints) lives, kept
        across restarts of the run. None when the run keeps no state."""
        if self.run_dir is None or self.task is None:
            return None
        return self.run_dir / "state" / _safe(self.task)

    def barrier(self) -> None:
        """Wait for every rank of the task (nothing to do in a single process)."""
        if self.group is not None:
            import torch.distributed as dist

            dist.barrier(group=self.group)

    # ---- task state (torch.distributed.checkpoint) ------------------------------------------------
    def save_state(self, state: Mapping[str, Any], *, name: str = "latest", replicated: bool = True) -> Path:
        """Save `state` (a dict of tensors, modules' state_dicts, numbers) under `state_dir/name` with
        torch.distributed.checkpoint; every rank of the task calls it.

        `replicated=True` (e.g. DDP model and optimizer state): one copy is written. Otherwise each
        rank's state is kept under its own keys (`rank<r>/...`), e.g. a pipeline stage's layers.

        Each save goes to a new version directory (`v<n>`); once every rank has written it, rank 0 seals it
        with this user's store key (`.complete`: its files and their digests) and removes the older ones, so a
        save stopped half-way (a rank that died) leaves the last complete one in place.
        """
        import shutil

        import torch.distributed.checkpoint as dcp

        from dagc.runtime.store import atomic_write, directory_digests, seal_manifest

        path = self._state_path(name)
        path.mkdir(parents=True, exist_ok=True)
        serials = [int(p.name[1:]) for p in path.iterdir() if p.name[:1] == "v" and p.name[1:].isdigit()]
        target = path / f"v{max(serials, default=0) + 1}"
        self.barrier()  # every rank has listed the directory before any creates the new version in it
        dcp.save(self._keyed(state, replicated), checkpoint_id=str(target), process_group=self.group)
        self.barrier()
        if self.rank == 0:
            manifest = seal_manifest({"version": target.name, "files": directory_digests(target)})
            atomic_write(path / _MARKER, [json.dumps(manifest, sort_keys=True).encode("utf-8")])
            for old in path.iterdir():
                if old != target and old.name[:1] == "v" and old.name[1:].isdigit():
                    shutil.rmtree(old, ignore_errors=True)
        self.barrier()  # (before any rank lists the directory again)
        return target

    def load_state(self, state: dict[str, Any], *, name: str = "latest", replicated: bool = True) -> bool:
        """Load a state saved by `save_state` into `state` (in place, tensors keep their storage).
        Returns False, leaving `state` untouched, when no complete checkpoint exists, or when the one there does
        not carry this user's seal (torch unpickles a checkpoint's metadata: a file planted in the run
        directory would run code), which is said once."""
        import torch.distributed.checkpoint as dcp

        from dagc.runtime.store import check_directory

        path = self._state_path(name)
        marker = path / _MARKER
        if not marker.exists():
            return False
        try:
            manifest = json.loads(marker.read_bytes())
        except (OSError, ValueError):
            manifest = None
        version = manifest.get("version") if isinstance(manifest, dict) else None
        if not (isinstance(version, str) and version[:1] == "v" and version[1:].isdigit()):
            why: str | None = "it carries no seal (written by an older dagc, or by something else)"
        else:
            why = check_directory(path / version, manifest)
        if why is not None:
            if self.rank == 0:
                sys.stderr.write(f"dagc: the task state {path} is not loaded: {why}; the task starts from the "
                                 "beginning (remove the directory to silence this)\n")
            return False
        keyed = self._keyed(state, replicated)
        dcp.load(keyed, checkpoint_id=str(path / version), process_group=self.group)
        if not replicated:
            state.update(keyed[f"rank{self.rank}"])
        return True

    def _state_path(self, name: str) -> Path:
        base = self.state_dir
        if base is None:
            raise RuntimeError("this run keeps no state (no run directory); "
                               "run the program with --run-dir to save task state")
        return base / _safe(name)

    def _keyed(self, state: Mapping[str, Any], replicated: bool) -> dict[str, Any]:
        return dict(state) if replicated else {f"rank{self.rank}": dict(state)}


_MARKER = ".complete"  # a checkpoint's seal, written last: the manifest of its files (dagc.runtime.store)


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) or "_"


def _as_device(spec: str) -> Any:
    # a torch.device once the program uses torch; a run whose code never imports torch should not
    # pay for importing it (seconds) to describe its device
    torch = sys.modules.get("torch")
    return torch.device(spec) if torch is not None else spec


_DEFAULT: TaskContext | None = None

_CURRENT: contextvars.ContextVar[TaskContext | None] = contextvars.ContextVar("dagc_task_context", default=None)


def context() -> TaskContext:
    """The context of the running task; outside a multi-rank task, the single-process default
    (rank 0, world size 1, no group, the CPU)."""
    global _DEFAULT
    current = _CURRENT.get()
    if current is not None:
        return current
    if _DEFAULT is None:
        _DEFAULT = TaskContext()
    return _DEFAULT


def set_context(ctx: TaskContext | None = None, /, **fields: Any) -> contextvars.Token:
    """Set the context (for runtimes). `set_context(rank=1, world_size=2, ...)` builds one.
    Returns a token for `reset_context`."""
    if ctx is None:
        ctx = TaskContext(**fields)
    elif fields:
        ctx = replace(ctx, **fields)
    return _CURRENT.set(ctx)


def reset_context(token: contextvars.Token) -> None:
    """Undo a `set_context`."""
    _CURRENT.reset(token)


@contextlib.contextmanager
def use_context(ctx: TaskContext | None = None, /, **fields: Any) -> Iterator[TaskContext]:
    """`with use_context(rank=r, world_size=n, group=g, task="train"): call_the_task()`"""
    token = set_context(ctx, **fields)
    try:
        yield context()
    finally:
        reset_context(token)
