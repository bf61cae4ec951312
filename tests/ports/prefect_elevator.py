"""The asyncio example of Prefect's guide "How to run work concurrently" (docs/v3/how-to-guides/workflows/
run-work-concurrently.mdx, "Using asyncio"): an async task per floor, gathered by an async flow.

Kept as Prefect writes it: the async task that prints and sleeps, `await asyncio.gather(*[... for ...])` over
the floors, `asyncio.run(elevator())` under the main guard. Changed: a floor takes a hundredth of a second, not a
second, and the task returns its floor and the flow what it gathers, so that runs can be compared;
two blank lines between definitions, not one.
"""

import asyncio

from prefect import flow, task


@task
async def stop_at_floor(floor: int):
    print(f"elevator moving to floor {floor}")
    await asyncio.sleep(floor / 100)
    print(f"elevator stops on floor {floor}")
    return floor

@flow
async def elevator():
    floors = list(range(10, 0, -1))
    return await asyncio.gather(*[stop_at_floor(floor) for floor in floors])


if __name__ == "__main__":
    asyncio.run(elevator())
