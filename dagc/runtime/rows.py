"""The row every emitted program's `TASKS` table holds for a task, on every backend:

    TASKS = {
        'train': TaskRow('0aefdbddda648cd07acaf1a17ebabb28', retries=1, effects=(...)),
        ...
    }

`fingerprint` is what the task's stored output is kept under (dagc.backends.fingerprint); the policy its
options set (`retries`, `timeout` in seconds, `cache`: True or why the task is never taken from the cache,
`threads` its `cpus=` declares); `state`, the group of tasks sharing objects (reused only together);
`effects`, what the compiler assumes it may change (dagc.runtime.effectcheck's `Assumed`). A torch
program's rows also say where the task runs: its `ranks`, and the values it reads and defines there.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["TaskRow"]


class TaskRow(NamedTuple):
    fingerprint: str | None
    retries: int = 0
    timeout: float | None = None
    cache: bool | str = True
    state: int | None = None
    effects: tuple | None = None
    threads: int | None = None
    ranks: tuple[int, ...] = ()
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    memory: int | None = None  # the bytes the call's `memory=` declares (a warning when the task takes more)

    @classmethod
    def of(cls, row: Any) -> TaskRow:
        """`row` as a TaskRow: a plain tuple is read in the fields' order."""
        return row if isinstance(row, TaskRow) else cls(*row)
