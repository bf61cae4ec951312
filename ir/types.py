"""Frozen value types of the IR: operands (what a task is called with) and task options."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Literal

__all__ = [
    "Ref",
    "Const",
    "Seq",
    "Map",
    "Operand",
    "Scalar",
    "TaskOptions",
    "iter_refs",
    "operand_from_python",
    "operand_to_python",
]

Scalar = None | bool | int | float | str


@dataclass(frozen=True, slots=True)
class Ref:
    """A use of a value: a pipeline parameter or a task output, by name (`%name`)."""

    name: str


@dataclass(frozen=True, slots=True)
class Const:
    """A literal scalar known at compile time."""

    value: Scalar


@dataclass(frozen=True, slots=True)
class Seq:
    """A list or tuple literal whose items are operands (fan-in of task results, or constants)."""

    kind: Literal["list", "tuple"]
    items: tuple[Operand, ...]


@dataclass(frozen=True, slots=True)
class Map:
    """A dict literal; keys and values are operands."""

    items: tuple[tuple[Operand, Operand], ...]


Operand = Ref | Const | Seq | Map


def iter_refs(operand: Operand) -> Iterator[str]:
    """The value names an operand uses, in order of appearance (with repeats)."""
    if isinstance(operand, Ref):
        yield operand.name
    elif isinstance(operand, Seq):
        for item in operand.items:
            yield from iter_refs(item)
    elif isinstance(operand, Map):
        for key, value in operand.items:
            yield from iter_refs(key)
            yield from iter_refs(value)


def operand_from_python(value: object) -> Operand:
    """Wrap a compile-time Python literal (scalars, lists, tuples, dicts of them) as an operand."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return Const(value)
    if isinstance(value, list):
        return Seq("list", tuple(operand_from_python(item) for item in value))
    if isinstance(value, tuple):
        return Seq("tuple", tuple(operand_from_python(item) for item in value))
    if isinstance(value, dict):
        return Map(tuple((operand_from_python(k), operand_from_python(v)) for k, v in value.items()))
    raise TypeError(f"not an IR literal: {type(value).__name__}")


def operand_to_python(operand: Operand) -> object:
    """Inverse of `operand_from_python` for operands without references."""
    if isinstance(operand, Const):
        return operand.value
    if isinstance(operand, Seq):
        items = [operand_to_python(item) for item in operand.items]
        return items if operand.kind == "list" else tuple(items)
    if isinstance(operand, Map):
        return {operand_to_python(k): operand_to_python(v) for k, v in operand.items}  # type: ignore[misc]
    raise TypeError(f"operand {operand!r} refers to a run-time value")


# What `compress=` accepts (None: values travel as they are).
COMPRESS_FORMATS = (None, "bf16", "fp16")


@dataclass(frozen=True, slots=True)
class TaskOptions:
    """What a user declared in `@dagc.task(...)`, in base units (seconds, bytes).

    `cost`, `flops` and `out_size` are estimates for the cost model; `None` means "not given"
    (the cost model then uses its documented defaults and says so).
    """

    cpus: float = 1.0
    gpus: float = 0.0
    memory: int | None = None
    cost: float | None = None
    flops: float | None = None
    out_size: int | None = None
    retries: int = 0
    priority: int = 0
    side_effects: bool = False
    ranks: int = 1
    resources: tuple[tuple[str, float], ...] = field(default=())
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    pure: bool = False
    readonly: tuple[str, ...] = ()
    mutates: tuple[str, ...] = ()  # parameters the task changes in place, beyond what dagc reads in its body
    compress: str | None = None  # "bf16" | "fp16": floating tensors of the output travel in 16 bits
    timeout: float | None = None
    cache: bool = True
    reduce: str | None = None  # "sum" | "mean": the task adds up (averages) the tensors of its list argument
    preemptible: bool = True  # on a shared Ray cluster a task of higher priority may stop it (it runs again)

    def non_default(self) -> dict[str, object]:
        """Fields whose value differs from the default, in field order (for printing)."""
        default = _DEFAULT_OPTIONS
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if getattr(self, f.name) != getattr(default, f.name)
        }

    def problems(self) -> list[str]:
        """Invariant violations, as messages (empty when valid)."""
        out: list[str] = []
        for name in ("cpus", "gpus"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                out.append(f"{name} must be a non-negative number, got {value!r}")
        if self.gpus > 1 and self.gpus != int(self.gpus):
            out.append(f"gpus above 1 must be a whole number, got {self.gpus!r}")
        for name in ("memory", "out_size"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 0):
                out.append(f"{name} must be a non-negative number of bytes, got {value!r}")
        for name in ("cost", "flops"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                out.append(f"{name} must be a finite non-negative number, got {value!r}")
        if not isinstance(self.retries, int) or self.retries < 0:
            out.append(f"retries must be a non-negative integer, got {self.retries!r}")
        if self.timeout is not None and not (math.isfinite(self.timeout) and self.timeout > 0):
            out.append(f"timeout must be a positive number of seconds, got {self.timeout!r}")
        if not isinstance(self.ranks, int) or self.ranks < 1:
            out.append(f"ranks must be a positive integer, got {self.ranks!r}")
        if self.reduce not in (None, "sum", "mean"):
            out.append(f"reduce must be 'sum' or 'mean', got {self.reduce!r}")
        if self.compress not in COMPRESS_FORMATS:
            out.append(f"compress must be one of {', '.join(repr(c) for c in COMPRESS_FORMATS)}, got {self.compress!r}")
        for key, amount in self.resources:
            if not (math.isfinite(amount) and amount >= 0):
                out.append(f"resource {key!r} must be a non-negative number, got {amount!r}")
        return out


_DEFAULT_OPTIONS = TaskOptions()
