"""Prefect's own integration test of concurrent async subflows (integration-tests/test_concurrent_subflows.py):
an async flow gathers async subflows, each renamed per call with `.with_options(name=...)`, and each gathers
async tasks renamed the same way.

Kept as Prefect writes it: the async tasks and flows, `asyncio.gather(*[... for ...])` of `.with_options(...)`
calls, the random pause in each task. Changed: the pause is a hundredth of Prefect's (0 to 20 ms, not 0 to 2 s),
and each flow returns what it gathers instead of nothing, so that runs can be compared; the pytest function that
calls `asyncio.run(parent_flow(10, 10))` is the `__main__` block.
"""

import asyncio
import random

from prefect import flow, task


@task
async def dummy_task(j: int):
    await asyncio.sleep(random.randint(0, 2) / 100)
    return j


@flow
async def child_flow(i: int, n_tasks: int):
    return await asyncio.gather(
        *[
            dummy_task.with_options(name=f"dummy-task-{i}-{j}")(j)
            for j in range(n_tasks)
        ]
    )


@flow
async def parent_flow(n_subflows: int, n_tasks_per_subflow: int):
    return await asyncio.gather(
        *[
            child_flow.with_options(name=f"child_flow-{i}")(i, n_tasks_per_subflow)
            for i in range(n_subflows)
        ]
    )


if __name__ == "__main__":
    print(asyncio.run(parent_flow(10, 10)))
