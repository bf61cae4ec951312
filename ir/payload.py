"""A region node's payload, typed: what its bodies yield, their block arguments, a loop's items and early
exit, a map's initial lists (docs/ir.md, "Region nodes").

The way xDSL gives an operation its regions and a terminator its operands: the values a region's payload
names are `Operand`s on the node (`Node.region`), not JSON inside its attributes, so a pass that renames
a value renames it there through the same `substitute` as everywhere else, and one decoder (the IR's
readers) checks their shape. Scalar settings (a map's `region.over`, `region.concurrency`, a loop's
`region.trips`, ...) stay attributes: they name no value.

    cond   yields: {"then": [...], "else": [...]}
    loop   args: {"body": carried values}, yields: {"body": [...]}, iter: the items, exit: its `break`
    map    args: {"body": the item names}, yields: {"body": one list per output}, init: initial lists
    try    yields: {"body": [...], "finally": [...]}
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from .types import Operand

__all__ = ["Exit", "Region"]


@dataclass(frozen=True)
class Exit:
    """A loop's early exit: before node `at` of its body (`at` = len(body): after the last), when `cond`
    holds, the loop ends with `values` as its carried values."""

    at: int
    cond: Operand
    values: tuple[Operand, ...]


@dataclass
class Region:
    """The payload of a `cond`, `loop`, `map` or `try` node. A body missing from `yields` yields
    nothing the node declares (the verifier says so)."""

    yields: dict[str, tuple[Operand, ...]] = field(default_factory=dict)
    args: dict[str, tuple[str, ...]] = field(default_factory=dict)  # block arguments, by body
    iter: Operand | None = None  # loop: what it iterates over (a list or tuple operand)
    init: tuple[Operand, ...] = ()  # map: each output's initial list
    exit: Exit | None = None  # loop: its `break`

    def operands(self) -> Iterator[Operand]:
        """Every operand the payload names: yields (body by body), the initial lists, the exit's condition
        and values. (`iter` reads only the region's own operands, so it adds no use.)"""
        for values in self.yields.values():
            yield from values
        yield from self.init
        if self.exit is not None:
            yield self.exit.cond
            yield from self.exit.values

    def mapped(self, rewrite: Callable[[Operand], Operand]) -> Region:
        """The payload with `rewrite` applied to each operand it names (`iter` included)."""
        exit_ = self.exit
        if exit_ is not None:
            exit_ = replace(exit_, cond=rewrite(exit_.cond), values=tuple(rewrite(v) for v in exit_.values))
        return Region({key: tuple(rewrite(v) for v in values) for key, values in self.yields.items()},
                      dict(self.args), None if self.iter is None else rewrite(self.iter),
                      tuple(rewrite(v) for v in self.init), exit_)

    def copy(self) -> Region:
        return Region(dict(self.yields), dict(self.args), self.iter, self.init, self.exit)
