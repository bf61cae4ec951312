"""Thin helpers that emitted programs import: the task executor, task context, run store and cache,
event log, progress.

    from dagc.runtime import Executor, RunStore, Cache, EventLog, Progress, fingerprint, context

Every program runs one lifecycle (`dagc.runtime.lifecycle.Program`); the engines that execute its tasks
(`dagc.runtime.local`, `dagc.runtime.ray`, `dagc.runtime.torchengine` with `dagc.runtime.distributed`) are
imported by the programs of their backend only.

Nothing here imports the compiler, an engine or torch at import time; see docs/runtime.md for
the run directory and event log formats and docs/context.md for the task context.
"""

from __future__ import annotations

from dagc.runtime.context import TaskContext, context, reset_context, set_context, use_context
from dagc.runtime.events import EventLog, new_run_id, read_events
from dagc.runtime.executor import Executor, TaskFailed, TaskTimeout
from dagc.runtime.progress import Progress
from dagc.runtime.store import (
    Cache,
    RunStore,
    atomic_write,
    fingerprint,
    output_fingerprint,
    value_fingerprint,
)

__all__ = [
    "Executor",
    "TaskFailed",
    "TaskTimeout",
    "Cache",
    "TaskContext",
    "context",
    "set_context",
    "reset_context",
    "use_context",
    "RunStore",
    "fingerprint",
    "value_fingerprint",
    "output_fingerprint",
    "atomic_write",
    "EventLog",
    "read_events",
    "new_run_id",
    "Progress",
]
