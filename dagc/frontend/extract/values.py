"""The symbolic values a pipeline body's names are bound to (run-time `Dyn`, compile-time `Static`,
callables, modules, classes), conversions between them and IR operands, and the signals the walk raises."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from dagc.frontend.modules import ClassSteps, ModuleInfo, PipelineDef
from dagc.ir.core import Node
from dagc.ir.types import Map, Operand, Ref, Seq, iter_refs, operand_from_python


class ExtractError(Exception):
    """Abandons the current statement after its diagnostic was reported."""


class BreakSignal(Exception):
    """A `break` reached while unrolling a loop."""


class ContinueSignal(Exception):
    """A `continue` reached while unrolling a loop."""


@dataclass(unsafe_hash=True, slots=True)  # (not frozen: built several times per task call, and never changed)
class Dyn:
    """A run-time value: an operand that refers to at least one task output or parameter."""

    operand: Operand


class GrowingList(Dyn):
    """A run-time list built by appends in the pipeline (`out.append(task(i))` in an unrolled loop): its items'
    operands are kept in a list shared with the values before it, and its `Seq` operand is made when something
    reads it, so that n appends cost n steps (a new tuple per append would cost n²/2 copies)."""

    __slots__ = ("ops", "length", "ids", "captured", "_seq")

    def __init__(self, ops: list[Operand], length: int, ids: frozenset[int], captured: dict[int, Any]) -> None:
        self.ops, self.length, self.ids, self.captured, self._seq = ops, length, ids, captured, None

    @property  # type: ignore[override]
    def operand(self) -> Operand:
        if self._seq is None:
            self._seq = Seq("list", tuple(self.ops[: self.length]))
            if self.ids:  # the compile-time lists and dicts copied into it (see Expressions._capture)
                self.captured[id(self._seq)] = (self._seq, set(self.ids))
        return self._seq

    def grown(self, added: Operand, ids: frozenset[int]) -> GrowingList:
        ops = self.ops if len(self.ops) == self.length else self.ops[: self.length]  # (a branch: its own list)
        ops.append(added)
        return GrowingList(ops, self.length + 1, self.ids | ids, self.captured)


# literals the static evaluator returns as they are (bytes, complex and `...` it rejects)
PLAIN_LITERALS = frozenset({int, float, str, bool, type(None)})


@dataclass(unsafe_hash=True, slots=True)  # (not frozen: built several times per task call, and never changed)
class Static:
    """A compile-time value (literal, or a StaticRange)."""

    value: Any


@dataclass(frozen=True)
class ParamValue:
    """A pipeline parameter: a run-time reference that also has a compile-time value."""

    name: str
    value: Any


@dataclass(unsafe_hash=True, slots=True)  # (not frozen: built several times per task call, and never changed)
class Callee:
    symbol: Any  # TaskDef | PipelineDef
    info: ModuleInfo


@dataclass(frozen=True)
class ModuleValue:
    module: str  # a user module
    info: ModuleInfo


@dataclass(frozen=True)
class ClassValue:
    """A user class holding steps (`Flow`, or `self`/`cls` in a pipeline method): reaches its steps."""

    steps: ClassSteps
    info: ModuleInfo
    instance: bool = False  # `self` in a pipeline method (an instance), rather than the class

    def static_attribute(self, name: str) -> Any:
        """A class constant (`Flow.GENRES`); through `self` only when no `__init__` could hide it."""
        if name in self.steps.constants and not (self.instance and self.steps.has_init):
            return self.steps.constants[name]
        raise KeyError(name)


@dataclass(frozen=True)
class DagcFunction:
    """A function of the dagc module used inside a pipeline body (`dagc.after`)."""

    name: str


@dataclass(frozen=True)
class External:
    """Something from a library or an opaque module-level name: usable only inside tasks."""

    description: str


Value = Any  # Dyn | Static | ParamValue | Callee | ModuleValue | External | tuple[Value, ...]


@dataclass
class LoopContext:
    """The region loop whose body is being interpreted (None while unrolling)."""

    name: str
    carried: list[str]
    break_at: int | None = None
    break_cond: Operand | None = None
    break_yield: list[Operand] | None = None
    block: list[Node] = field(default_factory=list)
    # carried names bound to a list or dict built in the pipeline where the loop exits, and to what kind
    kinds_at_exit: list[dict[str, str | None]] = field(default_factory=list)


@dataclass
class Scope:
    """One pipeline body being interpreted (the entry pipeline, or an inlined one)."""

    pipeline: PipelineDef
    prefix: str
    env: dict[str, Value] = field(default_factory=dict)
    assigned_later: set[str] = field(default_factory=set)
    suffix: str = ""
    inlined: str = ""  # hierarchical name of the inlined pipeline ("" for the entry pipeline)
    loop: LoopContext | None = None
    unrolling: int = 0  # depth of unrolled loops around the current statement


def mutable_ids(obj: Any, _seen: set[int] | None = None) -> set[int]:
    """Identities of the lists, dicts and sets reachable from a compile-time value."""
    seen: set[int] = set() if _seen is None else _seen
    if isinstance(obj, (list, dict, set)):
        if id(obj) in seen:
            return seen
        seen.add(id(obj))
        for item in (obj.items() if isinstance(obj, dict) else obj):
            mutable_ids(item, seen)
    elif isinstance(obj, tuple):
        for item in obj:
            mutable_ids(item, seen)
    return seen


def to_operand(value: Value) -> Operand:
    if isinstance(value, Dyn):
        return value.operand
    if isinstance(value, ParamValue):
        return Ref(value.name)
    if isinstance(value, Static):
        return operand_from_python(value.value)
    if isinstance(value, tuple):
        return Seq("tuple", tuple(to_operand(v) for v in value))
    raise TypeError(value)


def is_runtime(value: Value) -> bool:
    if isinstance(value, (Dyn, ParamValue)):
        return True
    if isinstance(value, tuple):
        return any(is_runtime(v) for v in value)
    return False


def is_task_result(value: Value) -> bool:
    if isinstance(value, Dyn):
        return True
    if isinstance(value, tuple):
        return any(is_task_result(v) for v in value)
    return False


class PathError(Exception):
    pass


class RuntimeUse(Exception):
    def __init__(self, node: ast.Name) -> None:
        self.node = node


class UsedBefore(RuntimeUse):
    pass


class Undefined(RuntimeUse):
    pass


class Poisoned(RuntimeUse):
    pass


POISON = object()  # bound to names whose defining statement failed


UNSET = object()  # a name not bound at all


def const_value(operand: Operand) -> Any:
    from dagc.ir.types import operand_to_python

    return operand_to_python(operand)


def value_of(operand: Operand) -> Value:
    return Dyn(operand) if any(True for _ in iter_refs(operand)) else Static(const_value(operand))


def known_container(value: Value) -> tuple[str, list[Value]] | None:
    """("list"|"tuple"|"dict", items) for a container whose length is known at compile time (dict items
    are (key, value) pairs of Values); None otherwise."""
    if isinstance(value, Static):
        if isinstance(value.value, list):
            return "list", [Static(v) for v in value.value]
        if isinstance(value.value, tuple):
            return "tuple", [Static(v) for v in value.value]
        if isinstance(value.value, dict):
            return "dict", [(Static(k), Static(v)) for k, v in value.value.items()]
        return None
    if isinstance(value, tuple):
        return "tuple", list(value)
    if isinstance(value, Dyn):
        op = value.operand
        if isinstance(op, Seq):
            return op.kind, [value_of(i) for i in op.items]
        if isinstance(op, Map):
            return "dict", [(value_of(k), value_of(v)) for k, v in op.items]
    return None


def ref_name(operand: Operand) -> str:
    return operand.name if isinstance(operand, Ref) else ""


def same(a: str | None, b: str | None) -> str | None:
    return a if a == b else None
