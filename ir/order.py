"""One topological order for every part of dagc that orders a DAG: the IR graph, the communication
checker, the scheduler's problems and the verifier.

Kahn's algorithm over the standard library's `graphlib`, which also finds a cycle when there is one,
with a deterministic choice among ready items: the smallest `priority` first (by default, the position
in the order the items were given, so that a valid program order comes back unchanged).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable, Sequence
from graphlib import CycleError as _GraphlibCycle
from graphlib import TopologicalSorter
from typing import Any, TypeVar

__all__ = ["topological_order", "CycleError"]

T = TypeVar("T", bound=Hashable)


class CycleError(ValueError):
    """The items do not form a DAG; `cycle` lists the items along one cycle, each read by the next, starting at
    the one given first (the first not repeated)."""

    def __init__(self, cycle: list[Any]) -> None:
        super().__init__("cycle: " + " -> ".join(map(str, [*cycle, *cycle[:1]])))
        self.cycle = cycle


def topological_order(items: Sequence[T], predecessors: Callable[[T], Iterable[T]],
                      priority: Callable[[T], Any] | None = None) -> list[T]:
    """`items` ordered so that each comes after its `predecessors` (which must be among `items`); among the
    items ready at once, the one with the smallest `priority` (default: the earliest in `items`) goes first.
    Raises CycleError when there is a cycle."""
    index = {item: i for i, item in enumerate(items)}
    rank = (lambda item: index[item]) if priority is None else priority
    sorter: TopologicalSorter[T] = TopologicalSorter()
    for item in items:
        sorter.add(item, *predecessors(item))
    try:
        sorter.prepare()
    except _GraphlibCycle as exc:
        # graphlib gives the cycle in edge order, its first item repeated at the end: start it at the item
        # given first, so that the same graph always names the same cycle the same way
        cycle = list(exc.args[1])[:-1]
        first = min(range(len(cycle)), key=lambda k: index.get(cycle[k], len(index)))
        raise CycleError(cycle[first:] + cycle[:first]) from None
    ready: list[tuple[Any, int, T]] = []
    order: list[T] = []
    while sorter.is_active():
        for item in sorter.get_ready():
            heapq.heappush(ready, (rank(item), index.get(item, len(index)), item))
        item = heapq.heappop(ready)[2]
        order.append(item)
        sorter.done(item)
    return order
