"""What the programs of every backend do the same way for a `map` region (docs/ir.md, "map"): turn
the iterated run-time values into the list of items, stop a map wider than its `max_items`, and
record its measured width in the run's event log (a `width` event, read by `dagc report` and
`dagc timeline`).

    for shard in map_items("map", "train.py:14", shards, max_items=1000): ...
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable
from typing import Any

from dagc.runtime.executor import TaskFailed

__all__ = ["map_items", "record_width", "item_chunks", "spread_map", "MapItemFailed"]

# True while a rank runs its share of a spread map's items: a map nested in an item then runs on
# that rank alone, so that rank records its width (elsewhere only rank 0 of a task does)
_OWN_ITEMS: contextvars.ContextVar[bool] = contextvars.ContextVar("dagc_own_items", default=False)


def map_items(region: str, where: str, *iterables: Iterable[Any], start: int | None = None,
              max_items: int | None = None, record: bool = True, method: str | None = None) -> list[Any]:
    """The items a `for` over `iterables` takes, as plain Python binds them: the items of one iterable
    (of its `method()` view: `d.items()`, `d.keys()`, `d.values()`), tuples of several (`zip`),
    `(index, item)` pairs (`enumerate(items, start)`). More than `max_items`
    items is a failure of the region, named with its source line. `record`: write the width to the
    run's event log here (the Ray and torch runners that spread the items write it themselves)."""
    if method is not None:
        iterables = (getattr(iterables[0], method)(),)
    items: list[Any] = list(iterables[0]) if len(iterables) == 1 else list(zip(*iterables))
    if start is not None:
        items = list(enumerate(items, start))
    if record:
        record_width(region, len(items))
    if max_items is not None and len(items) > max_items:
        raise TaskFailed(region, 0, None, detail=f"the loop at {where} has {len(items)} items, more than its "
                         f"max_items={max_items} (dagc.each)")
    return items


def record_width(region: str, items: int, resumed: int = 0, ranks: int = 1) -> None:
    """A `width` event: map `region` listed `items` items, `resumed` of them found finished in the run
    directory, spread over `ranks` ranks. Written once per listing (by rank 0 of a multi-rank task),
    into the event log of the running task's context; nothing when the run keeps no log."""
    from dagc.runtime.context import context
    from dagc.runtime.costs import record_width as record_learned_width

    ctx = context()
    if ctx.rank != 0 and not _OWN_ITEMS.get():
        return
    record_learned_width(region, items)  # (for the next compile's plan: dagc.learned)
    if ctx.events is None:
        return
    fields: dict[str, Any] = {"items": items}
    if resumed:
        fields["resumed"] = resumed
    if ranks > 1:
        fields["ranks"] = ranks
    ctx.events.write("width", region, **fields)


def item_chunks(count: int, parts: int, part: int) -> list[int]:
    """Indices of the items that part `part` of `parts` runs: item i goes to part i % parts."""
    return list(range(part, count, parts)) if parts > 0 else []


def spread_map(items: list[Any], body: Any, inits: tuple[list, ...], region: str | None = None) -> object:
    """Run the items of a map over the ranks of the running task (dagc.context(): item i on rank
    i % world_size) and gather what they append, in item order, on every rank. A failing item does
    not leave the other ranks waiting: every rank takes part in the gather, then all raise the
    failure of the first failing item. `region`: the map's name, for its `width` event."""
    from dagc.runtime.context import context

    ctx = context()
    if region is not None:
        record_width(region, len(items), ranks=ctx.world_size)
    mine: dict[int, tuple] = {}
    error: tuple[int, str] | None = None
    token = _OWN_ITEMS.set(True)
    try:
        for i in item_chunks(len(items), ctx.world_size, ctx.rank):
            try:
                mine[i] = body(items[i])
            except Exception as exc:  # noqa: BLE001 - reported below, on every rank
                error = (i, f"{type(exc).__name__}: {exc}")
                break
    finally:
        _OWN_ITEMS.reset(token)
    gathered: list[Any] = [(mine, error)]
    if ctx.world_size > 1:
        import torch.distributed as dist

        gathered = [None] * ctx.world_size
        dist.all_gather_object(gathered, (mine, error), group=ctx.group)
    errors = sorted(e for _, e in gathered if e is not None)
    if errors:
        raise MapItemFailed(f"item {errors[0][0]} of the map failed: {errors[0][1]}")
    results: dict[int, tuple] = {}
    for part, _ in gathered:
        results.update(part)
    outputs = [list(init) for init in inits]
    for i in range(len(items)):
        for k, appended in enumerate(results[i]):
            outputs[k].extend(appended)
    if not outputs:
        return None
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


class MapItemFailed(Exception):
    """An item of a map spread over ranks failed (the message names it and its error)."""
