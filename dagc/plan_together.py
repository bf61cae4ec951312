"""`dagc plan A.py B.py ... --cluster SPEC --together`: pipelines that share one cluster, planned together.

Each file is planned alone first (`dagc.plan.plan_file`); then `dagc.sched.shared` places them together:
the highest `@dagc.pipeline(priority=N)` as if it were alone, the next ones in the time it leaves free
(ties: the order given). The table gives each pipeline's makespan alone and together and the delay
sharing costs it, and the cluster's makespan and utilization; `--json` prints one object with the same
and each pipeline's shared schedule. `dagc viz A.py B.py --together` draws the shared schedule, one colour
per pipeline (`chart`).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

from dagc.cluster import Cluster
from dagc.diagnostics import Diagnostic, render_text
from dagc.plan import PlanResult, plan_file, timeline_records
from dagc.sched import DEFAULT_BUDGET, validate
from dagc.sched.shared import Shared, overlaps, priority_order, schedule_together

__all__ = ["TogetherResult", "plan_together", "run_plan_together", "chart"]


@dataclass
class TogetherResult:
    algo: str
    devices: int
    plans: list[PlanResult]  # each file alone, in the order given (errors included)
    shared: list[Shared] = field(default_factory=list)  # the files without errors, in the order given
    problems: list[str] = field(default_factory=list)

    @property
    def planned(self) -> list[PlanResult]:
        return [r for r in self.plans if not r.errors]

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for r in self.plans for d in r.errors]

    @property
    def makespan(self) -> float:
        return max((s.together.makespan for s in self.shared), default=0.0)

    @property
    def utilization(self) -> list[float]:
        """Busy fraction of each device over the shared makespan."""
        busy = [0.0] * self.devices
        for s in self.shared:
            for i, devs in enumerate(s.together.devices):
                for d in devs:
                    busy[d] += s.together.finish[i] - s.together.start[i]
        span = self.makespan
        return [b / span if span > 0 else 0.0 for b in busy]

    @property
    def valid(self) -> bool:
        return not self.errors and not self.problems

    def to_json(self) -> dict[str, Any]:
        util = self.utilization
        pipelines = []
        for r, s in zip(self.planned, self.shared):
            tasks, transfers = timeline_records(s.problem, s.together)
            pipelines.append({"file": r.file, "pipeline": r.pipeline, "priority": s.priority, "tasks": r.tasks,
                              "alone_makespan": s.alone.makespan, "makespan": s.together.makespan,
                              "delay": s.delay, "schedule": tasks, "transfers": transfers})
        out: dict[str, Any] = {"together": True, "algo": self.algo, "devices": self.devices,
                               "makespan": self.makespan, "utilization": [round(u, 6) for u in util],
                               "mean_utilization": round(sum(util) / len(util), 6) if util else 0.0,
                               "valid": self.valid, "problems": self.problems, "pipelines": pipelines}
        if self.errors:
            out["errors"] = [d.to_json() for d in self.errors]
        return out


def plan_together(files: list[str], cluster: Cluster, algo: str = "dagc", *, seed: int = 0,
                  budget: float = DEFAULT_BUDGET, profile: str | None = None, pipeline: str | None = None,
                  params: dict[str, Any] | None = None, order: list[int] | None = None) -> TogetherResult:
    """Plan `files` together on `cluster`. `order` (indices into the files planned without error) replaces
    the priority order, e.g. to compare with first come, first served."""
    # (without the makespans with transfers, which the shared plan does not show)
    plans = [plan_file(f, cluster, algo, seed=seed, budget=budget, profile=profile, pipeline=pipeline,
                       params=params, with_transfers=False) for f in files]
    result = TogetherResult(algo, cluster.n_devices, plans)
    ok = result.planned
    if not ok:
        return result
    problems = [r.problem for r in ok]
    solos = [r.solo for r in ok]
    assert all(p is not None for p in problems) and all(s is not None for s in solos)
    result.shared = schedule_together(problems, [r.priority for r in ok], solos, order=order)  # type: ignore[arg-type]
    for r, s in zip(ok, result.shared):
        result.problems += [f"{r.file}: {problem}" for problem in validate(s.problem, s.together)]
    result.problems += overlaps(result.shared)
    return result


def run_plan_together(files: list[str], cluster: Cluster, algo: str, as_json: bool, out: TextIO, *,
                      seed: int = 0, budget: float = DEFAULT_BUDGET, profile: str | None = None,
                      pipeline: str | None = None, params: dict[str, Any] | None = None) -> int:
    """Plan the files together; print a table (or one JSON object). 0 when the shared plan is valid."""
    result = plan_together(files, cluster, algo, seed=seed, budget=budget, profile=profile, pipeline=pipeline,
                           params=params)
    if as_json:
        out.write(json.dumps(result.to_json()) + "\n")
    else:
        out.write(_table(result, cluster))
    if result.errors:
        sys.stderr.write(render_text(result.errors))
    return 0 if result.valid else 1


def _table(result: TogetherResult, cluster: Cluster) -> str:
    header = ["priority", "file", "pipeline", "tasks", "alone (s)", "together (s)", "delay (s)"]
    rows = []
    order = priority_order([s.priority for s in result.shared])
    for k in order:
        r, s = result.planned[k], result.shared[k]
        rows.append([str(s.priority), r.file, r.pipeline or "-", str(r.tasks), f"{s.alone.makespan:.6g}",
                     f"{s.together.makespan:.6g}", f"{s.delay:.6g}"])
    for r in result.plans:
        if r.errors:
            rows.append(["-", r.file, "-", "-", "error", "", ""])
    widths = [max(len(h), *(len(row[k]) for row in rows)) for k, h in enumerate(header)]
    text_cols = (1, 2)
    lines = [f"plan together: {result.algo} on {cluster.describe()}, highest priority first"]
    lines.append("  ".join(h.ljust(w) if k in text_cols else h.rjust(w) for k, (h, w) in enumerate(zip(header, widths))))
    for row in rows:
        lines.append("  ".join(c.ljust(w) if k in text_cols else c.rjust(w) for k, (c, w) in enumerate(zip(row, widths))))
    util = result.utilization
    if result.shared:
        lines.append(f"cluster: makespan {result.makespan:.6g} s, utilization "
                     f"{100 * sum(util) / len(util):.0f}% (" + ", ".join(
                         f"device {d}: {100 * u:.0f}%" for d, u in enumerate(util)) + ")")
    lines.extend(f"invalid: {problem}" for problem in result.problems)
    return "\n".join(lines) + "\n"


def chart(result: TogetherResult, cluster: Cluster) -> Any:
    """The shared schedule as a timeline chart (`dagc.backends.timeline`): a lane per device, a bar per
    task, one colour per pipeline, and a legend naming each pipeline with its priority."""
    from dagc.backends.graphviz import device_colour
    from dagc.backends.timeline import Bar, Chart

    lanes = [f"device {d}" for d in range(result.devices)]
    out = Chart(f"{len(result.shared)} pipelines together on {cluster.describe()}", lanes,
                note=f"makespan {result.makespan:.6g} s")
    for k, (r, s) in enumerate(zip(result.planned, result.shared)):
        colour = device_colour(k)
        label = f"{r.pipeline or r.file} (priority {s.priority})"
        out.legend.append((colour, label))
        sched = s.together
        for i, devs in enumerate(sched.devices):
            for d in devs:
                out.bars.append(Bar(lanes[d], s.problem.names[i], sched.start[i], sched.finish[i], colour,
                                    tooltip=f"{label}: {s.problem.names[i]}\n{sched.start[i]:.6g} s → "
                                    f"{sched.finish[i]:.6g} s"))
    return out
