"""Early returns in a pipeline, as training scripts write them: a branch on a task result that returns,
an `elif`/`else` chain, and a sub-pipeline that returns early."""

import dagc


@dagc.task
def double(x: int) -> int:
    return 2 * x


@dagc.task
def inc(x: int) -> int:
    return x + 1


@dagc.pipeline
def pick(y: int) -> int:
    if y > 5:
        return inc(y)
    return 0


@dagc.pipeline
def main(n: int = 3) -> list:
    y = double(n)
    if y > 100:
        return [y]
    elif y > 4:
        z = inc(y)
        if z > 6:
            return [z, pick(z)]
    else:
        print("small", y)
    return [double(y), pick(y)]


@dagc.pipeline
def either(flag: bool = True) -> int:
    y = double(3)
    if flag:
        return inc(y)
    else:
        return double(y)
