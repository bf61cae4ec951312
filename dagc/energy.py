"""Energy of a schedule, from the cluster's device power (dagc.cluster: `idle_watts`, `busy_watts`).

    energy = Σ over tasks  busy_watts(d) × its time on d        (each device of a multi-rank task)
           + Σ over devices the schedule uses  idle_watts(d) × (makespan − its busy time)

A device no task uses draws nothing: the plan gives it back (a Ray placement group or a torchrun world of
fewer devices). Transfers are not charged (their devices idle meanwhile, which the second line counts).

`choose_devices` is `dagc plan --objective`: the number of devices to use (the cluster's first k) that gives
the shortest makespan (`time`), the least energy (`energy`) or the least energy × makespan (`edp`).
"""

from __future__ import annotations

from dagc.cluster import Cluster
from dagc.sched.problem import Problem, Schedule

__all__ = ["OBJECTIVES", "schedule_energy", "objective_value"]

OBJECTIVES = ("time", "energy", "edp")


def schedule_energy(p: Problem, s: Schedule, cluster: Cluster) -> float:
    """Estimated joules of schedule `s` of `p` on `cluster` (see the module docstring)."""
    busy = [0.0] * p.D
    joules = 0.0
    for i in range(p.n):
        took = s.finish[i] - s.start[i]
        for d in s.devices[i]:
            busy[d] += took
            joules += cluster.devices[d].busy_power * took
    makespan = s.makespan
    for d, time in enumerate(busy):
        if time > 0:
            joules += cluster.devices[d].idle_power * max(0.0, makespan - time)
    return joules


def objective_value(objective: str, makespan: float, joules: float) -> float:
    if objective == "energy":
        return joules
    if objective == "edp":
        return joules * makespan
    return makespan
