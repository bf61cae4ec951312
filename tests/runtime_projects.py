"""Small pipelines written the way users write them, shared by the executor tests of every backend."""

from __future__ import annotations

# retries: `flaky` fails on its first two attempts, `exits` calls sys.exit(0) on its first
RETRY = {"retry.py": """
    import sys

    import dagc

    @dagc.task(retries=2)
    def flaky(x: int) -> int:
        attempt = dagc.context().attempt
        if attempt < 2:
            raise ValueError(f"not yet (attempt {attempt})")
        return x * 10 + attempt

    @dagc.task(retries=1)
    def exits(x: int) -> int:
        if dagc.context().attempt == 0:
            sys.exit(0)
        return x + 1

    @dagc.pipeline
    def p(x: int = 1):
        return exits(flaky(x))
"""}
RETRY_RESULT = 13  # (1 * 10 + 2) + 1

# a task that calls sys.exit with no retries left: a failure naming the task
EXIT = {"quits.py": """
    import sys

    import dagc

    @dagc.task
    def prepare(x: int) -> int:
        return x + 1

    @dagc.task
    def quits(x: int) -> int:
        sys.exit(0)

    @dagc.pipeline
    def p(x: int = 1):
        return quits(prepare(x))
"""}

# a configuration module that parses sys.argv when imported (nanoGPT's configurator does this)
ARGV = {
    "config.py": """
        import argparse
        import os
        import sys

        parser = argparse.ArgumentParser()
        parser.add_argument("--scale", type=int, default=1)
        ARGS = parser.parse_args()
        SEEN = (os.path.basename(sys.argv[0]), os.getcwd())
    """,
    "job.py": """
        import dagc

        import config

        @dagc.task
        def load(x: int) -> int:
            return x * config.ARGS.scale

        @dagc.task
        def where(v: int) -> tuple:
            return (v, *config.SEEN)

        @dagc.pipeline
        def p(x: int = 7):
            return where(load(x))
    """,
}

# a task that never returns, stopped by its timeout
HANG = {"hang.py": """
    import time

    import dagc

    @dagc.task
    def start(x: int) -> int:
        return x

    @dagc.task(timeout=1)
    def hang(x: int) -> int:
        time.sleep(120)
        return x

    @dagc.pipeline
    def p(x: int = 1):
        return hang(start(x))
"""}

# a chain to edit between runs (EDITED replaces `+ 1` in `middle`)
CHAIN = {"chain.py": """
    import dagc

    @dagc.task
    def first(x: int) -> int:
        return x * 3

    @dagc.task
    def middle(x: int) -> int:
        return x + 1

    @dagc.task
    def last(x: int) -> int:
        return x * 100

    @dagc.task(cache=False)
    def fresh(x: int) -> int:
        return x - 1

    @dagc.pipeline
    def p(x: int = 2):
        return fresh(last(middle(first(x))))
"""}
CHAIN_RESULT = ((2 * 3 + 1) * 100) - 1
CHAIN_EDITED_RESULT = ((2 * 3 + 5) * 100) - 1

# a task whose result is an instance of a class defined inside it (pickle cannot name the class)
LOCAL_CLASS = {"shapes.py": """
    from collections import namedtuple

    import dagc

    @dagc.task
    def measure(n: int):
        Shape = namedtuple("Shape", "rows cols")
        return Shape(n, n + 1)

    @dagc.task
    def area(shape) -> int:
        return shape.rows * shape.cols

    @dagc.pipeline
    def p(n: int = 3):
        return area(measure(n))
"""}

# a two-rank task whose rank 1 fails on the first attempt: both ranks retry together
GANG = {"gang.py": """
    import dagc

    @dagc.task
    def start(x: int) -> int:
        return x + 1

    @dagc.task(ranks=2, retries=1)
    def gang(x: int) -> int:
        ctx = dagc.context()
        if ctx.attempt == 0 and ctx.rank == 1:
            raise RuntimeError("rank 1 fails its first attempt")
        return x + 100 * ctx.attempt + ctx.world_size

    @dagc.task
    def after(x: int) -> int:
        return x * 2

    @dagc.pipeline
    def p(x: int = 1):
        return after(gang(start(x)))
"""}
GANG_RESULT = ((1 + 1) + 100 + 2) * 2

# the instance of a local class goes to two tasks worth placing apart: on torch it must cross ranks
LOCAL_CLASS_FANOUT = {"fanout.py": """
    from collections import namedtuple

    import dagc

    @dagc.task
    def measure(n: int):
        Shape = namedtuple("Shape", "rows cols")
        return Shape(n, n + 1)

    @dagc.task(cost="10s")
    def area(shape) -> int:
        return shape.rows * shape.cols

    @dagc.task(cost="10s")
    def perimeter(shape) -> int:
        return 2 * (shape.rows + shape.cols)

    @dagc.task
    def both(a: int, p: int) -> tuple:
        return (a, p)

    @dagc.pipeline
    def p(n: int = 3):
        s = measure(n)
        return both(area(s), perimeter(s))
"""}
