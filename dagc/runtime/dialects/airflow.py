"""Calling an Airflow 3 TaskFlow task as a plain function.

A module-level `@task` is a task decorator object whose `function` is the user's function. A `@task` defined
inside a `@dag` function exists only once that function has run: calling the DAG factory builds the DAG (as
the module's own `my_dag()` does on import, running no task), and its operator for the task holds the
function, closures over the DAG function's names included. The DAG is built, and each function found, once per
process.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["adapt", "adapt_local"]

_built: dict[int, Any] = {}  # id(DAG factory) -> the DAG it built in this process
_found: dict[tuple[int, str], Callable[..., Any]] = {}  # (id(factory or group), name) -> the function found
_lock = threading.Lock()


def adapt(fn: Any) -> Callable[..., Any]:
    """The user's function behind a TaskFlow task (a plain function is returned as it is)."""
    inner = getattr(fn, "function", None)
    return inner if callable(inner) else fn  # type: ignore[no-any-return]


def adapt_local(factory: Any, name: str) -> Callable[..., Any]:
    """The function `name` that the `@dag` function behind `factory` decorates with `@task` in its body (or in a
    `@task_group` function there: `name` is then `group.<locals>.task`). For a `@task_group` defined in a
    module-level `with DAG(...) as dag:` block, `factory` is the group and the DAG is the module's `dag`."""
    key = (id(factory), name)
    found = _found.get(key)  # (called at each task call: the DAGs are searched once)
    if found is None:
        group = getattr(factory, "function", None)
        found = _in_module_dag(group, name) if callable(group) else _in_built_dag(factory, name)
        _found[key] = found
    return found


def _in_built_dag(factory: Any, name: str) -> Callable[..., Any]:
    """The function `name` (its qualified name below the DAG function) of the DAG `factory` builds."""
    with _lock:
        dag = _built.get(id(factory))
        if dag is None:
            dag = _built[id(factory)] = factory()  # builds the DAG object; runs no task
    function = _task_function([dag], lambda qualname: qualname.partition(".<locals>.")[2] == name)
    if function is None:
        raise LookupError(f"DAG `{dag.dag_id}` has no @task function `{name}`: was the file changed since the "
                          "program was emitted? Emit it again.")
    return function


def _in_module_dag(group: Any, name: str) -> Callable[..., Any]:
    """The function `name` defined in task group function `group`, found in the DAGs its module bound when
    imported (a `with DAG(...) as dag:` block builds its DAG then, running no task)."""
    from airflow.sdk import DAG

    wanted = f"{group.__qualname__}.<locals>.{name}"
    dags = [v for v in vars(sys.modules[group.__module__]).values() if isinstance(v, DAG)]
    function = _task_function(dags, lambda qualname: qualname == wanted)
    if function is None:
        raise LookupError(f"no DAG of module `{group.__module__}` has the @task function `{wanted}`: was the file "
                          "changed since the program was emitted? Emit it again.")
    return function


def _task_function(dags: Iterable[Any], matches: Callable[[str], bool]) -> Callable[..., Any] | None:
    """The first task function of `dags` whose qualified name `matches`."""
    for dag in dags:
        for operator in dag.tasks:
            function = getattr(operator, "python_callable", None)
            if function is None:  # a mapped task (`.expand`) keeps it with its partial arguments
                function = (getattr(operator, "partial_kwargs", None) or {}).get("python_callable")
            if callable(function) and matches(function.__qualname__):
                return function  # type: ignore[no-any-return]
    return None
