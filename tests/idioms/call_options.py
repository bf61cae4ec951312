"""Options given at the call, as Ray users write them: `train.options(...)(x)`, and `dagc.task(...)(fn)(x)`."""

import dagc


def triple(x: int) -> int:
    return x * 3


@dagc.task(cpus=1)
def train(x: int) -> int:
    return x + 1


@dagc.pipeline
def main() -> list:
    a = dagc.task(retries=5)(triple)(2)
    b = train.options(retries=3, gpus=0)(a)
    c = dagc.task(retries=2, cache=False)(train)(b)
    return [a, b, c, train(c)]
