"""Seeding and drawing from the global generators (random's and numpy's) in the pipeline body itself, and printing
what was drawn."""

import random

import numpy as np

import dagc


@dagc.task
def double(x: int) -> int:
    return 2 * x


@dagc.task
def noisy(x: int) -> float:
    return x + random.random()


@dagc.task
def spread(x: int) -> float:
    return float(x + np.random.rand())


@dagc.pipeline
def main(seed: int = 3) -> list:
    random.seed(seed)
    np.random.seed(seed)
    k = random.randint(1, 100)
    print("drew", k)
    d = noisy(k)
    j = random.randint(1, k)
    m = np.random.randint(0, 1000)
    return [double(k), k, d, j, double(j), spread(m), m]
