"""Calling a Prefect 3 task as a plain function.

A `@task` is a `prefect.Task` whose `fn` is the user's function; Prefect's own way to call it without a flow
run (its testing guide) is `task.fn(...)` with the run logger disabled, so that `get_run_logger()` in the
task's body gives a logger that drops its records instead of failing for want of a run context.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["adapt"]


def adapt(fn: Any) -> Callable[..., Any]:
    """The user's function behind a Prefect task (a plain function is returned as it is)."""
    inner = getattr(fn, "fn", None)
    if not callable(inner):
        return fn  # type: ignore[no-any-return]

    @functools.wraps(inner)
    def call(*args: Any, **kwargs: Any) -> Any:
        from prefect.logging import disable_run_logger

        with disable_run_logger():
            return inner(*args, **kwargs)

    return call
