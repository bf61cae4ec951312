"""HEFT (Topcuoglu, Hariri, Wu 2002), as published: upward rank, insertion-based EFT.

    rank_u(i) = w̄(i) + max over successors s of (c̄(i, s) + rank_u(s))

w̄ is the task's mean duration over its eligible devices, c̄ the mean transfer time of the edge
over ordered pairs of distinct devices. Tasks are taken by decreasing rank_u (ties: larger
`priority`, then topological order) and each goes on the device that gives the earliest finish
time, inserting into idle gaps.
"""

from __future__ import annotations

from .listsched import decode
from .problem import Problem, Schedule

__all__ = ["heft", "upward_rank", "downward_rank", "mean_durations"]


def mean_durations(p: Problem) -> list[float]:
    out = []
    for i in range(p.n):
        row, elig = p.dur[i], p.eligible[i]
        out.append(row[0] if p.uniform else sum(row[p.cls_of[d]] for d in elig) / len(elig))
    return out


def upward_rank(p: Problem, w: list[float] | None = None, comm: bool = True) -> list[float]:
    w = w if w is not None else mean_durations(p)
    lat, inv = p.mean_comm_factors() if comm else (0.0, 0.0)
    rank = [0.0] * p.n
    for i in reversed(p.topo):
        best = 0.0
        for s, b in p.succs[i]:
            c = (lat + b * inv) if (lat or inv) else 0.0
            v = c + rank[s]
            if v > best:
                best = v
        rank[i] = w[i] + best
    return rank


def downward_rank(p: Problem, w: list[float] | None = None, comm: bool = True) -> list[float]:
    w = w if w is not None else mean_durations(p)
    lat, inv = p.mean_comm_factors() if comm else (0.0, 0.0)
    rank = [0.0] * p.n
    for i in p.topo:
        best = 0.0
        for j, b in p.preds[i]:
            c = (lat + b * inv) if (lat or inv) else 0.0
            v = rank[j] + w[j] + c
            if v > best:
                best = v
        rank[i] = best
    return rank


def heft(p: Problem) -> Schedule:
    return decode(p, upward_rank(p), algo="heft")
