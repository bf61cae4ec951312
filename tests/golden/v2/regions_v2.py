"""Every kind of region and a fused group: compiled by dagc 0.2 (IR version 2) into regions_v2.ir.*"""

import dagc


@dagc.task
def load(i: int) -> int:
    return i * 10


@dagc.task(cost="1s")
def step(x: int, k: int = 1) -> int:
    return x + k


@dagc.task
def shards(x: int) -> list:
    return [x, x + 1, x + 2]


@dagc.task
def square(s: int) -> int:
    return s * s


@dagc.task
def total(xs: list) -> int:
    return sum(xs)


@dagc.task
def tidy(x: int) -> int:
    return -x


@dagc.task(cost="1ms")
def small(x: int) -> int:
    return x + 1


@dagc.task(cost="1ms")
def smaller(x: int) -> int:
    return x - 1


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
    squares = [square(s) for s in dagc.each(shards(x), expected=3)]
    try:
        t = total(squares)
    finally:
        done = tidy(x)
    return smaller(small(t)), done
