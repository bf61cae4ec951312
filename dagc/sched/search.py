"""The default scheduler, `dagc`: HEFT-class list scheduling improved by search.

1. Start from HEFT's schedule (upward rank, insertion EFT), so the result is never worse than HEFT.
2. Try other priority vectors through the same list scheduler: upward + downward rank, upward rank
   without transfers, upward rank on fastest durations.
3. Forward–backward improvement ("justification"): schedule the reversed graph with tasks taken
   by decreasing finish time, then the forward graph with tasks taken by how early they start in
   that backward schedule; repeat while the makespan shrinks.
4. Iterated local search on the priority vector: perturb the best one with seeded noise, decode,
   justify, keep the better (equal makespans are accepted to cross plateaus).

The search stops at the lower bound. Its effort is a number of list-scheduler runs derived from
`budget` (seconds) and the problem size through a fixed cost estimate, so the output depends only
on the problem, the seed and the budget, not on the machine's speed; big graphs get fewer runs
(a 10k-task graph gets only the HEFT-class steps). A wall-clock guard of 3 × budget + 1 s stops a
run on a machine far slower than the estimate.
"""

from __future__ import annotations

import random
import time

from .bounds import lower_bound
from .heft import downward_rank, mean_durations, upward_rank
from .listsched import decode
from .problem import Problem, Schedule

__all__ = ["dagc_schedule", "decode_cost", "DEFAULT_BUDGET"]

DEFAULT_BUDGET = 0.3  # seconds of search per graph (the plan command and the partition pass)

# Estimated seconds of one list-scheduler run per (task × candidate device) and per (edge × device).
_TASK_DEVICE_COST = 1.2e-6
_EDGE_DEVICE_COST = 0.6e-6


def decode_cost(p: Problem) -> float:
    """Estimated seconds of one `decode` of `p` (fixed constants, so the search is deterministic)."""
    cand = sum(len(e) for e in p.eligible)
    edge_dev = sum(len(ps) * len(p.eligible[i]) for i, ps in enumerate(p.preds))
    return 2e-5 + _TASK_DEVICE_COST * cand + _EDGE_DEVICE_COST * edge_dev


class _Search:
    def __init__(self, p: Problem, budget: float, seed: int) -> None:
        self.p = p
        self.rng = random.Random(seed)
        self.lb = lower_bound(p)
        self.tol = 1e-9 * max(1.0, self.lb)
        self.runs_left = int(budget / decode_cost(p))
        self.deadline = time.perf_counter() + 3 * budget + 1.0
        self.rev: Problem | None = None
        self.best: Schedule | None = None
        self.best_keys: list[float] = []

    def out_of_effort(self) -> bool:
        return self.runs_left <= 0 or time.perf_counter() > self.deadline or self.at_bound()

    def at_bound(self) -> bool:
        return self.best is not None and self.best.makespan <= self.lb + self.tol

    def run(self, keys: list[float], problem: Problem | None = None) -> Schedule:
        self.runs_left -= 1
        return decode(problem or self.p, keys)

    def offer(self, s: Schedule, keys: list[float]) -> bool:
        if self.best is None or s.makespan < self.best.makespan - self.tol:
            self.best, self.best_keys = s, keys
            return True
        return False

    def justify(self, s: Schedule, keys: list[float], rounds: int = 4) -> tuple[Schedule, list[float]]:
        """Forward–backward improvement; returns the best (schedule, keys) seen."""
        if self.rev is None:
            self.rev = self.p.reversed()
        for _ in range(rounds):
            if self.runs_left < 2 or time.perf_counter() > self.deadline:
                break
            back = self.run(list(s.finish), self.rev)
            fkeys = list(back.finish)
            fwd = self.run(fkeys)
            if fwd.makespan < s.makespan - self.tol:
                s, keys = fwd, fkeys
            else:
                if fwd.makespan <= s.makespan + self.tol:
                    s, keys = fwd, fkeys
                break
        return s, keys


def dagc_schedule(p: Problem, seed: int = 0, budget: float = DEFAULT_BUDGET) -> Schedule:
    """Schedule `p`; deterministic for a given (problem, seed, budget)."""
    search = _Search(p, budget, seed)
    w = mean_durations(p)
    ru = upward_rank(p, w)
    search.runs_left += 1  # HEFT's own run is always made
    heft_s = search.run(ru)
    search.offer(heft_s, ru)
    if p.n == 0 or search.out_of_effort():
        return _named(search.best)
    # other priority vectors through the same list scheduler
    rd = downward_rank(p, w)
    wmin = [p.min_duration(i) for i in range(p.n)]
    seeds = [ru, [a + b for a, b in zip(ru, rd)], upward_rank(p, w, comm=False), upward_rank(p, wmin)]
    pool: list[tuple[Schedule, list[float]]] = []
    for k, keys in enumerate(seeds):
        if search.out_of_effort():
            break
        s = heft_s if k == 0 else search.run(keys)
        s, keys = search.justify(s, keys)
        search.offer(s, keys)
        pool.append((s, keys))
    # iterated local search on the priority vector
    scale = (sum(w) / len(w)) if w else 1.0
    cur_s, cur_keys = search.best, search.best_keys
    rng = search.rng
    stall = 0
    while not search.out_of_effort():
        sigma = scale * (0.3 + 0.7 * rng.random()) * (2.0 if stall > 20 else 1.0)
        base = cur_keys
        if stall > 40 and pool:
            base = pool[rng.randrange(len(pool))][1]
            stall = 0
        keys = [k + rng.gauss(0.0, sigma) for k in base]
        s = search.run(keys)
        s, keys = search.justify(s, keys, rounds=2)
        if search.offer(s, keys):
            stall = 0
            cur_s, cur_keys = s, keys
        elif s.makespan <= cur_s.makespan + search.tol:
            cur_s, cur_keys = s, keys
            stall += 1
        else:
            stall += 1
    return _named(search.best)


def _named(s: Schedule | None) -> Schedule:
    assert s is not None
    s.algo = "dagc"
    return s
