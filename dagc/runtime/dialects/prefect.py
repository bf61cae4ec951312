"""Calling a Prefect 3 task as a plain function.

A `@task` is a `prefect.Task` whose `fn` is the user's function; Prefect's own way to call it without a flow
run (its testing guide) is `task.fn(...)` with the run logger disabled, so that `get_run_logger()` in the
task's body gives a logger that drops its records instead of failing for want of a run context. An async task's
coroutine is run to completion in its own event loop, as Prefect's engine awaits it, so every program gets the
task's value.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
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
            if inspect.iscoroutinefunction(inner):
                return asyncio.run(inner(*args, **kwargs))
            return inner(*args, **kwargs)

    return call
