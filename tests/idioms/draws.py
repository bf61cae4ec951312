"""Seeding and drawing from the global generator in the pipeline body itself, and printing what was drawn."""

import random

import dagc


@dagc.task
def double(x: int) -> int:
    return 2 * x


@dagc.task
def noisy(x: int) -> float:
    return x + random.random()


@dagc.pipeline
def main(seed: int = 3) -> list:
    random.seed(seed)
    k = random.randint(1, 100)
    print("drew", k)
    d = noisy(k)
    j = random.randint(1, k)
    return [double(k), k, d, j, double(j)]
