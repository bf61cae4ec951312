"""dagc: a static DAG compiler for machine-learning training pipelines.

Users import only the decorators (`dagc.task`, `dagc.pipeline`) and, inside multi-rank tasks,
`dagc.context()`. The compiler lives in `dagc.frontend`, `dagc.passes` and `dagc.backends`, and is
imported lazily so that annotated scripts pay nothing for it at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dagc.annotations import after, each, pipeline, task, trips

__all__ = ["task", "pipeline", "after", "trips", "each", "compile", "context", "__version__"]
__version__ = "0.1.0"

if TYPE_CHECKING:
    from dagc.ir.core import Graph
    from dagc.runtime.context import TaskContext


def context() -> TaskContext:
    """The running task's context: rank, world size, process group, device (see docs/context.md).

    Outside a multi-rank task: rank 0 of a world of 1, no group, the CPU."""
    from dagc.runtime.context import context as current

    return current()


def compile(path: str, *, pipeline: str | None = None, passes: str | None = None, **params: Any) -> Graph:
    """Compile `path` (never importing it) and return the IR graph after `passes`."""
    from dagc.driver import compile_file

    return compile_file(path, pipeline_name=pipeline, passes=passes, params=params)
