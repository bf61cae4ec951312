"""An independent schedule checker: it recomputes every time from the problem's raw fields and
shares no code with the schedulers.

Checks: each task placed on the number of devices it needs, all of one node, all eligible
(GPUs, memory); finish − start equals the task's duration there; every predecessor's data has
arrived (its finish plus the transfer time from the nearest of its devices) before the start;
no two tasks overlap on a device.
"""

from __future__ import annotations

import math

from .problem import Problem, Schedule

__all__ = ["validate"]


def _tol(x: float) -> float:
    return 1e-6 * max(1.0, abs(x))


def _transfer(p: Problem, nbytes: float, a: int, b: int) -> float:
    if a == b:
        return 0.0
    lat, bw = p.intra if p.node_of[a] == p.node_of[b] else p.inter
    return lat + (nbytes / bw if bw != math.inf else 0.0)


def validate(p: Problem, s: Schedule) -> list[str]:
    """Problems found (empty when the schedule is valid)."""
    out: list[str] = []
    n, D = len(p.names), len(p.speed)
    if not (len(s.devices) == len(s.start) == len(s.finish) == n):
        return [f"schedule covers {len(s.start)} tasks, problem has {n}"]
    infeasible = {t for t, _ in p.infeasible}
    for i in range(n):
        name = p.names[i]
        devs = list(s.devices[i])
        if not devs or len(set(devs)) != len(devs) or any(not (0 <= d < D) for d in devs):
            out.append(f"{name}: bad device list {devs}")
            continue
        if len({p.node_of[d] for d in devs}) > 1:
            out.append(f"{name}: runs on devices of different nodes {devs}")
        if p.enforce:
            g = p.gpus[i]
            if g > 0:
                want = max(math.ceil(g - 1e-9), p.ranks[i], 1)
            else:  # CPU ranks: one device each, as many as the largest node has
                want = min(max(p.ranks[i], 1), max(sum(1 for e in range(D) if p.node_of[e] == v)
                                                    for v in set(p.node_of)))
            if i not in infeasible and len(devs) != want:
                out.append(f"{name}: needs {want} device(s), got {len(devs)}")
            for d in devs:
                if g > 0 and p.dev_gpus[d] < 1:
                    out.append(f"{name}: needs a GPU, device {d} has none")
                mem, cap = p.memory[i], p.dev_memory[d]
                if mem is not None and cap is not None and mem > cap:
                    out.append(f"{name}: needs {mem} bytes, device {d} has {cap}")
                if i not in infeasible and not p._offers(i, d):
                    out.append(f"{name}: needs CPUs or custom resources the node of device {d} does not have")
        want_dur = max(
            p.work[i] / p.speed[d] + p.flops[i] / p.flops_rate[d] + p.overhead for d in devs
        )
        if abs((s.finish[i] - s.start[i]) - want_dur) > _tol(want_dur) or s.start[i] < -_tol(0):
            out.append(f"{name}: runs {s.finish[i] - s.start[i]:g}s from {s.start[i]:g}, expected {want_dur:g}s")
        for j, nbytes in p.preds[i]:
            for d in devs:
                arrival = s.finish[j] + min(_transfer(p, nbytes, e, d) for e in s.devices[j])
                if s.start[i] < arrival - _tol(arrival):
                    out.append(
                        f"{name}: starts at {s.start[i]:g} on device {d} before data of "
                        f"{p.names[j]} arrives at {arrival:g}"
                    )
    per_device: list[list[tuple[float, float, int]]] = [[] for _ in range(D)]
    for i in range(n):
        for d in set(s.devices[i]):
            if 0 <= d < D:
                per_device[d].append((s.start[i], s.finish[i], i))
    for d, items in enumerate(per_device):
        items.sort()
        for (s1, f1, a), (s2, f2, b) in zip(items, items[1:]):
            if s2 < f1 - _tol(f1) and f2 > s2 and f1 > s1:
                out.append(f"device {d}: {p.names[a]} [{s1:g}, {f1:g}) overlaps {p.names[b]} [{s2:g}, {f2:g})")
    return out
