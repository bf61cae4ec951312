"""The list scheduler every algorithm here is built on.

`decode(problem, keys)` repeatedly takes the ready task with the largest key (ties: larger task
`priority`, then earlier topological position) and places it where it finishes earliest, using
insertion into idle gaps between tasks already placed on a device (HEFT's insertion policy). With
`assign` given, each task goes on its given device(s) instead. Multi-device tasks take the k
devices of one node on which they can start together earliest.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Sequence

from .problem import EPS, Problem, Schedule

__all__ = ["decode", "Timelines", "SCAN_LIMIT"]

# Insertion looks at most this many busy intervals past the ready time; beyond that a task is
# appended after the device's last one (keeps very long timelines linear; no effect below it).
SCAN_LIMIT = 64


class Timelines:
    """Busy intervals per device, sorted (starts and ends in parallel lists)."""

    __slots__ = ("starts", "ends")

    def __init__(self, n_devices: int) -> None:
        self.starts: list[list[float]] = [[] for _ in range(n_devices)]
        self.ends: list[list[float]] = [[] for _ in range(n_devices)]

    def earliest(self, d: int, ready: float, dur: float) -> float:
        """Earliest start ≥ ready of a gap of length `dur` on device d."""
        ends = self.ends[d]
        if not ends or ends[-1] <= ready:
            return ready
        starts = self.starts[d]
        k = bisect_right(ends, ready)
        t = ready
        m = len(ends)
        limited = m - k > SCAN_LIMIT  # long timeline: look at SCAN_LIMIT gaps, else append at the end
        if limited:
            if ends[k + SCAN_LIMIT] <= ready:
                return ready
            m = k + SCAN_LIMIT
        while k < m:
            if starts[k] - t >= dur - EPS and starts[k] >= t:
                return t
            if ends[k] > t:
                t = ends[k]
            k += 1
        return ends[-1] if limited else t

    def copy(self) -> Timelines:
        twin = Timelines(0)
        twin.starts = [list(s) for s in self.starts]
        twin.ends = [list(e) for e in self.ends]
        return twin

    def add(self, d: int, start: float, finish: float) -> None:
        starts, ends = self.starts[d], self.ends[d]
        if not ends or start >= ends[-1]:
            starts.append(start)
            ends.append(finish)
            return
        k = bisect_right(ends, start)  # after every interval ending by `start`: keeps both sorted
        starts.insert(k, start)
        ends.insert(k, finish)


def _ready_times(p: Problem, i: int, finish: list[float], devices: list, cands: Sequence[int]) -> list[float]:
    """Data-ready time of task i on each candidate device."""
    preds = p.preds[i]
    if p.comm_free:
        r = 0.0
        for j, _ in preds:
            f = finish[j]
            if f > r:
                r = f
        return [r] * len(cands)
    node_of = p.node_of
    ilat, ibw = p.intra
    xlat, xbw = p.inter
    out = [0.0] * len(cands)
    for j, b in preds:
        f = finish[j]
        devs = devices[j]
        same = f
        intra = f + ilat + b / ibw
        inter = f + xlat + b / xbw
        if len(devs) == 1:
            dj = devs[0]
            nj = node_of[dj]
            for c, d in enumerate(cands):
                a = same if d == dj else (intra if node_of[d] == nj else inter)
                if a > out[c]:
                    out[c] = a
        else:
            nodes = {node_of[x] for x in devs}
            for c, d in enumerate(cands):
                a = same if d in devs else (intra if node_of[d] in nodes else inter)
                if a > out[c]:
                    out[c] = a
    return out


def _common_start(tl: Timelines, devs: Sequence[int], readies: Sequence[float], dur: float) -> float:
    t = max(readies)
    while True:
        moved = False
        for d, r in zip(devs, readies):
            s = tl.earliest(d, t if t > r else r, dur)
            if s > t + EPS:
                t = s
                moved = True
        if not moved:
            return t


def decode(
    p: Problem,
    keys: Sequence[float],
    assign: Sequence[Sequence[int]] | None = None,
    algo: str = "",
    busy: Timelines | None = None,
) -> Schedule:
    """List-schedule `p`, highest key first among ready tasks; see the module docstring. `busy`: time
    already taken on the devices (by other pipelines); the tasks go into its gaps, and it is updated."""
    n = p.n
    finish = [0.0] * n
    start = [0.0] * n
    devices: list = [()] * n
    tl = busy if busy is not None else Timelines(p.D)
    indeg = [len(ps) for ps in p.preds]
    prio, pos = p.priority, p.pos
    heap = [(-keys[i], -prio[i], pos[i], i) for i in range(n) if indeg[i] == 0]
    heapq.heapify(heap)
    dur_tab, cls_of, eligible, need = p.dur, p.cls_of, p.eligible, p.need
    uniform = p.uniform
    succs = p.succs
    while heap:
        i = heapq.heappop(heap)[3]
        row = dur_tab[i]
        k = need[i]
        if assign is not None:
            cands = tuple(assign[i])
            readies = _ready_times(p, i, finish, devices, cands)
            dur = row[0] if uniform else max(row[cls_of[d]] for d in cands)
            if len(cands) == 1:
                s = tl.earliest(cands[0], readies[0], dur)
            else:
                s = _common_start(tl, cands, readies, dur)
            best_devs, best_s, best_f = cands, s, s + dur
        elif k == 1:
            cands = eligible[i]
            readies = _ready_times(p, i, finish, devices, cands)
            best_f = float("inf")
            best_s = 0.0
            best_d = cands[0]
            if uniform:
                dur = row[0]
                for c, d in enumerate(cands):
                    s = tl.earliest(d, readies[c], dur)
                    if s + dur < best_f - EPS:
                        best_f, best_s, best_d = s + dur, s, d
            else:
                for c, d in enumerate(cands):
                    dur = row[cls_of[d]]
                    s = tl.earliest(d, readies[c], dur)
                    if s + dur < best_f - EPS:
                        best_f, best_s, best_d = s + dur, s, d
            best_devs = (best_d,)
        else:
            cands = eligible[i]
            readies = _ready_times(p, i, finish, devices, cands)
            ready_of = dict(zip(cands, readies))
            best_f = float("inf")
            best_devs, best_s = cands[:k], 0.0
            for v in p.nodes:
                local = [d for d in cands if p.node_of[d] == v]
                if len(local) < k:
                    continue
                est = sorted((tl.earliest(d, ready_of[d], row[cls_of[d]]), d) for d in local)
                chosen = tuple(sorted(d for _, d in est[:k]))
                dur = max(row[cls_of[d]] for d in chosen)
                s = _common_start(tl, chosen, [ready_of[d] for d in chosen], dur)
                if s + dur < best_f - EPS:
                    best_f, best_s, best_devs = s + dur, s, chosen
        start[i], finish[i], devices[i] = best_s, best_f, best_devs
        for d in best_devs:
            tl.add(d, best_s, best_f)
        for s_, _ in succs[i]:
            indeg[s_] -= 1
            if indeg[s_] == 0:
                heapq.heappush(heap, (-keys[s_], -prio[s_], pos[s_], s_))
    return Schedule(devices, start, finish, algo)
