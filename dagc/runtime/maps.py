"""What the programs of every backend do the same way for a `map` region (docs/ir.md, "map"): turn
the iterated run-time values into the list of items, and stop a map wider than its `max_items`.

    for shard in map_items("map", "train.py:14", shards, max_items=1000): ...
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dagc.runtime.executor import TaskFailed

__all__ = ["map_items", "item_chunks"]


def map_items(region: str, where: str, *iterables: Iterable[Any], start: int | None = None,
              max_items: int | None = None) -> list[Any]:
    """The items a `for` over `iterables` takes, as plain Python binds them: the items of one iterable,
    tuples of several (`zip`), `(index, item)` pairs (`enumerate(items, start)`). More than `max_items`
    items is a failure of the region, named with its source line."""
    items: list[Any] = list(iterables[0]) if len(iterables) == 1 else list(zip(*iterables))
    if start is not None:
        items = list(enumerate(items, start))
    if max_items is not None and len(items) > max_items:
        raise TaskFailed(region, 0, None, detail=f"the loop at {where} has {len(items)} items, more than its "
                         f"max_items={max_items} (dagc.each)")
    return items


def item_chunks(count: int, parts: int, part: int) -> list[int]:
    """Indices of the items that part `part` of `parts` runs: item i goes to part i % parts."""
    return list(range(part, count, parts)) if parts > 0 else []
