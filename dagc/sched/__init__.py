"""Scheduling algorithms on a plain problem form (no IR): HEFT, the default `dagc` search,
lower bounds, an independent validator, and benchmark loaders.

    from dagc.sched import Problem, schedule, validate, lower_bound
    s = schedule(problem, algo="dagc", seed=0, budget=0.3)
"""

from __future__ import annotations

from .bounds import lower_bound
from .heft import heft
from .listsched import decode
from .problem import Problem, Schedule
from .search import DEFAULT_BUDGET, dagc_schedule
from .validate import validate

__all__ = [
    "ALGORITHMS",
    "DEFAULT_BUDGET",
    "Problem",
    "Schedule",
    "dagc_schedule",
    "decode",
    "heft",
    "lower_bound",
    "schedule",
    "validate",
]

ALGORITHMS = ("dagc", "heft")


def schedule(p: Problem, algo: str = "dagc", *, seed: int = 0, budget: float = DEFAULT_BUDGET) -> Schedule:
    """Schedule `p` with the named algorithm (`dagc` or `heft`)."""
    if algo == "heft":
        return heft(p)
    if algo == "dagc":
        return dagc_schedule(p, seed=seed, budget=budget)
    raise ValueError(f"unknown scheduling algorithm {algo!r}; known: {', '.join(ALGORITHMS)}")
