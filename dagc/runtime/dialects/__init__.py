"""Calling functions written for other frameworks as those frameworks would.

A task node marked with a dialect (`ir.core.DIALECT_ATTR`) runs `adapt(dialect, fn)(*args, **kwargs)`: the module
`dagc.runtime.dialects.<dialect>` unwraps the framework's decorator (a KFP component's `python_func`, a Prefect
task's `fn`, ...) and gives the function the arguments and context that framework gives it. The user's module
imports the framework as usual, so it must be installed where the program runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["adapt"]


def adapt(dialect: str, fn: Any, local: str | None = None) -> Callable[..., Any]:
    """The callable that runs `fn`, a function written for `dialect`, with plain arguments; with `local`, the
    function of that name defined inside `fn` (`adapt_local(fn, local)` of the dialect's module)."""
    module = importlib.import_module(f"dagc.runtime.dialects.{dialect}")
    return module.adapt(fn) if local is None else module.adapt_local(fn, local)
