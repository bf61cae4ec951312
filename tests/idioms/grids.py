"""Hyperparameter grids built at module level by comprehensions and itertools, as sweeps write them."""

import itertools
from itertools import product

import dagc

GRID = [(lr, bs) for lr in (0.1, 0.2) for bs in (8, 16) if lr * bs != 1.6]
PAIRS = list(itertools.product([1, 2], ["a", "b"]))
RUNS = {f"run{i}": i for i in range(3)}
SEEDS = list(seed * 7 for seed in range(3))
CELLS = itertools.product([1, 2], "xy")  # a bare iterator, looped over once
SPREAD = itertools.combinations(range(4), 2)  # a bare iterator, given to a task


@dagc.task
def score(lr: float, bs: int) -> float:
    return round(lr * bs, 6)


@dagc.task
def tag(n: int, s: str) -> str:
    return s * n


@dagc.task
def size(items: object) -> int:
    return len(list(items))


@dagc.pipeline
def main() -> list:
    scores = [score(lr, bs) for lr, bs in GRID]
    tags = [tag(n, s) for n, s in PAIRS]
    runs = [tag(i + 1, name) for name, i in RUNS.items()]
    squares = [score(a, b) for a, b in product(range(2), repeat=2)]
    cells = [tag(n, s) for n, s in CELLS]
    return [scores, tags, runs, SEEDS, squares, cells, size(SPREAD)]
