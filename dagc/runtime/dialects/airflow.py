"""Calling an Airflow 3 TaskFlow task as a plain function.

A module-level `@task` is a task decorator object whose `function` is the user's function. A `@task` defined
inside a `@dag` function exists only once that function has run: calling the DAG factory builds the DAG (as
the module's own `my_dag()` does on import, running no task), and its operator for the task holds the
function, closures over the DAG function's names included. The DAG is built once per process.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["adapt", "adapt_local"]

_built: dict[int, Any] = {}  # id(DAG factory) -> the DAG it built in this process
_lock = threading.Lock()


def adapt(fn: Any) -> Callable[..., Any]:
    """The user's function behind a TaskFlow task (a plain function is returned as it is)."""
    inner = getattr(fn, "function", None)
    return inner if callable(inner) else fn  # type: ignore[no-any-return]


def adapt_local(factory: Any, name: str) -> Callable[..., Any]:
    """The function `name` that the `@dag` function behind `factory` decorates with `@task` in its body (or in a
    `@task_group` function there: `name` is then `group.<locals>.task`). For a `@task_group` defined in a
    module-level `with DAG(...) as dag:` block, `factory` is the group and the DAG is the module's `dag`."""
    group = getattr(factory, "function", None)
    if callable(group):
        return _in_module_dag(group, name)
    with _lock:
        dag = _built.get(id(factory))
        if dag is None:
            dag = _built[id(factory)] = factory()  # builds the DAG object; runs no task
    for operator in dag.tasks:
        function = getattr(operator, "python_callable", None)
        if function is None:  # a mapped task (`.expand`) keeps it with its partial arguments
            function = (getattr(operator, "partial_kwargs", None) or {}).get("python_callable")
        # `name` is the qualified name below the DAG function: `extract`, or `group.<locals>.extract` in a task group
        if callable(function) and function.__qualname__.partition(".<locals>.")[2] == name:
            return function  # type: ignore[no-any-return]
    raise LookupError(f"DAG `{dag.dag_id}` has no @task function `{name}`: was the file changed since the "
                      "program was emitted? Emit it again.")


def _in_module_dag(group: Any, name: str) -> Callable[..., Any]:
    """The function `name` defined in task group function `group`, found in the DAGs its module bound when
    imported (a `with DAG(...) as dag:` block builds its DAG then, running no task)."""
    from airflow.sdk import DAG

    qualname = f"{group.__qualname__}.<locals>.{name}"
    for dag in (v for v in vars(sys.modules[group.__module__]).values() if isinstance(v, DAG)):
        for operator in dag.tasks:
            function = getattr(operator, "python_callable", None)
            if function is None:
                function = (getattr(operator, "partial_kwargs", None) or {}).get("python_callable")
            if callable(function) and function.__qualname__ == qualname:
                return function  # type: ignore[no-any-return]
    raise LookupError(f"no DAG of module `{group.__module__}` has the @task function `{qualname}`: was the file "
                      "changed since the program was emitted? Emit it again.")
