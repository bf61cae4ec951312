"""Several pipelines planned together on one cluster, highest priority first.

The pipeline of highest priority is scheduled as if it were alone (its makespan is its solo one). Each
next pipeline, in order of priority (ties: the order given), is list-scheduled into the time the ones
before it left free: insertion into idle gaps (`decode(..., busy=...)`), so it never delays them. Of a few
task orders (upward rank, its solo schedule's order, and its solo placement kept) the one finishing first
is kept. Every pipeline is submitted at time 0; a pipeline's `delay` is what sharing the cluster added to
its solo makespan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .heft import upward_rank
from .listsched import Timelines, decode
from .problem import EPS, Problem, Schedule

__all__ = ["Shared", "schedule_together", "overlaps"]


@dataclass
class Shared:
    """One pipeline of a shared plan: its schedule alone, and its schedule beside the others."""

    problem: Problem
    priority: int
    alone: Schedule
    together: Schedule

    @property
    def delay(self) -> float:
        return max(0.0, self.together.makespan - self.alone.makespan)


def priority_order(priorities: Sequence[int]) -> list[int]:
    """Indices by priority, highest first; ties keep the order given (first come, first served)."""
    return sorted(range(len(priorities)), key=lambda k: (-priorities[k], k))


def schedule_together(problems: Sequence[Problem], priorities: Sequence[int], alone: Sequence[Schedule],
                      order: Sequence[int] | None = None) -> list[Shared]:
    """Plan `problems` (all built for one cluster) together; `alone[k]` is problem k's solo schedule.
    `order` overrides the priority order (e.g. arrival order, to compare with first come, first served).
    Returns one `Shared` per problem, in the order given."""
    if len({p.D for p in problems}) > 1:
        raise ValueError("pipelines planned together must be built for one cluster")
    busy = Timelines(problems[0].D if problems else 0)
    out: list[Shared | None] = [None] * len(problems)
    for k in (order if order is not None else priority_order(priorities)):
        p = problems[k]
        together = _fill_gaps(p, alone[k], busy)
        for i, devs in enumerate(together.devices):
            for d in devs:
                busy.add(d, together.start[i], together.finish[i])
        out[k] = Shared(p, priorities[k], alone[k], together)
    return [s for s in out if s is not None]


def _fill_gaps(p: Problem, solo: Schedule, busy: Timelines) -> Schedule:
    """The best of a few list schedules of `p` into the gaps of `busy` (which is left unchanged)."""
    if not any(busy.ends):
        return solo
    tries = [
        decode(p, upward_rank(p), algo=solo.algo, busy=busy.copy()),
        decode(p, [-t for t in solo.start], algo=solo.algo, busy=busy.copy()),
        decode(p, [-t for t in solo.start], assign=solo.devices, algo=solo.algo, busy=busy.copy()),
    ]
    return min(tries, key=lambda s: s.makespan)


def overlaps(plans: Sequence[Shared]) -> list[str]:
    """Two tasks of different pipelines on one device at once (none in a valid shared plan)."""
    by_device: dict[int, list[tuple[float, float, str]]] = {}
    for k, plan in enumerate(plans):
        s = plan.together
        for i, devs in enumerate(s.devices):
            for d in devs:
                by_device.setdefault(d, []).append((s.start[i], s.finish[i], f"{k}:{plan.problem.names[i]}"))
    problems = []
    for d, spans in sorted(by_device.items()):
        spans.sort()
        running: list[tuple[float, float, str]] = []  # tasks still running at the current start
        for s2, f2, b in spans:
            running = [r for r in running if r[1] > s2 + EPS]
            for s1, f1, a in running:
                if a.split(":")[0] != b.split(":")[0]:
                    problems.append(f"device {d}: {a} ({s1:g}–{f1:g}) overlaps {b} (from {s2:g})")
            running.append((s2, f2, b))
    return problems
