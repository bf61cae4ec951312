"""Lower bounds on the makespan of any valid schedule.

    critical path  — longest path with every task at its fastest eligible duration, no transfers
    work           — Σ need(i) · fastest duration(i) / D   (D devices are busy at most D · makespan)

When every duration is a whole number the bound is rounded up (makespans are then whole too).
"""

from __future__ import annotations

import math

from .problem import Problem

__all__ = ["lower_bound", "critical_path", "work_bound"]


def critical_path(p: Problem) -> float:
    w = [p.min_duration(i) for i in range(p.n)]
    longest = [0.0] * p.n
    for i in p.topo:
        best = 0.0
        for j, _ in p.preds[i]:
            if longest[j] > best:
                best = longest[j]
        longest[i] = best + w[i]
    return max(longest, default=0.0)


def work_bound(p: Problem) -> float:
    return sum(p.need[i] * p.min_duration(i) for i in range(p.n)) / p.D


def lower_bound(p: Problem) -> float:
    bound = max(critical_path(p), work_bound(p))
    integral = all(float(x).is_integer() for row in p.dur for x in row)
    if integral:
        bound = math.ceil(bound - 1e-9)
    return bound
