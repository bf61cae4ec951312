"""A pipeline with a loop holding a branch: compiled by dagc 0.1 (IR version 1) into regions_v1.ir.*"""

import dagc


@dagc.task
def load(i: int) -> int:
    return i * 10


@dagc.task(cost="1s")
def step(x: int, k: int = 1) -> int:
    return x + k


@dagc.pipeline
def p():
    x = load(1)
    for i in range(5):
        if x > 12:
            x = step(x, k=2)
        else:
            x = step(x)
        if x > 20:
            break
    return x
