"""Typed node data that passes write and read: effects, placement, communication (docs/ir.md).

A node's effects (what its task may do besides computing its result), its placement (the device `partition`
chose, the times `schedule` gave it) and its communication (what a `transfer` node moves, what a reduction sums
across ranks) are frozen records on the node (`Node.effects`, `Node.placement`, `Node.comm`), not string-keyed
attributes. Values they name (`Effects.mutates`, `Reduction.operands`) are `Ref` operands, renamed by the same
`substitute` as a node's arguments.

Each record declares its fields once (`FIELDS`: field, attribute key, kind). The key is the name the field has in
the text form (`[effects.rng="…", partition.device=0]`, the same spelling as IR version 3, where these were
attributes) and the kind says how a value is checked and converted, for the text form, JSON and older files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, Protocol

from .types import Operand, Ref

__all__ = ["Effects", "FilePaths", "Placement", "Transfer", "Reduction", "Comm", "NO_EFFECTS", "UNPLACED",
           "FactError", "split_attrs", "record_attrs", "device_tuple", "FACT_PREFIXES", "transfer_of",
           "reduction_of"]


class FactError(ValueError):
    """A typed field given a value of the wrong shape (the IR readers turn it into IRFormatError)."""


# ---- kinds: how one field's value is checked, and written as JSON ---------------------------------------------
def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _names(value: object, key: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise FactError(f"`{key}` must be an array of strings, got {value!r}")
    return tuple(value)


def _ints(value: object, key: str) -> tuple[int, ...]:
    if not isinstance(value, (list, tuple)) or not all(_is_int(v) for v in value):
        raise FactError(f"`{key}` must be an array of integers, got {value!r}")
    return tuple(value)


def device_tuple(value: object) -> tuple[int, ...]:
    """The devices a placement or transfer end names: `3` → (3,), `[0, 1]` → (0, 1), None → ()."""
    if value is None:
        return ()
    return (value,) if isinstance(value, int) else tuple(value)  # type: ignore[arg-type]


def _decode(kind: str, value: object, key: str) -> Any:
    """The typed value of a field from its JSON form (raises FactError naming `key` when the shape is wrong)."""
    if kind == "str":
        if not isinstance(value, str):
            raise FactError(f"`{key}` must be a string, got {value!r}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise FactError(f"`{key}` must be true or false, got {value!r}")
        return value
    if kind == "int":
        if not _is_int(value):
            raise FactError(f"`{key}` must be an integer, got {value!r}")
        return value
    if kind == "number":
        if not _is_number(value):
            raise FactError(f"`{key}` must be a number, got {value!r}")
        return value
    if kind == "names":
        return _names(value, key)
    if kind == "refs":
        return tuple(Ref(name) for name in _names(value, key))
    if kind == "ints":
        return _ints(value, key)
    if kind == "bools":
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, bool) for v in value):
            raise FactError(f"`{key}` must be an array of true/false, got {value!r}")
        return tuple(value)
    if kind == "device":  # one device, or the ranks of a task that runs on several
        if _is_int(value):
            return value
        return _ints(value, key)
    if kind == "paths":
        if not isinstance(value, dict) or not set(value) <= {"read", "write"}:
            raise FactError(f"`{key}` must be an object with `read` and `write` arrays, got {value!r}")
        return FilePaths(*(None if mode not in value else _names(value[mode], f"{key}.{mode}")
                           for mode in ("read", "write")))
    if kind == "json":
        return value
    raise AssertionError(kind)


def _encode(kind: str, value: Any) -> object:
    """The JSON form of a typed field value."""
    if kind == "refs":
        return [ref.name for ref in value]
    if kind in ("names", "ints", "bools"):
        return list(value)
    if kind == "device":
        return value if isinstance(value, int) else list(value)
    if kind == "paths":
        return {mode: list(files) for mode, files in (("read", value.given_read), ("write", value.given_write))
                if files is not None}
    return value


@dataclass(frozen=True)
class FilePaths:
    """Every file a task reads and writes, when all are named at its call (a mode given as None names no file,
    as an empty tuple does; it is kept apart only so that the record prints as it was written)."""

    given_read: tuple[str, ...] | None = None
    given_write: tuple[str, ...] | None = None

    @property
    def read(self) -> tuple[str, ...]:
        return self.given_read or ()

    @property
    def write(self) -> tuple[str, ...]:
        return self.given_write or ()


class _Record:
    """Field table and conversions shared by the records (a mixin of frozen dataclasses)."""

    # (field, attribute key, kind); a field at its default is not written
    FIELDS: ClassVar[tuple[tuple[str, str, str], ...]] = ()
    NAME: ClassVar[str] = ""

    def __post_init__(self) -> None:
        # whether any field differs from its default, asked of every node by several passes: computed once
        defaults = _DEFAULTS[type(self)]
        is_set = any(getattr(self, name) != default for name, default in defaults.items())
        object.__setattr__(self, "_set", is_set)

    def __bool__(self) -> bool:
        return self._set  # type: ignore[attr-defined,no-any-return]

    def attrs(self) -> dict[str, object]:
        """The record as attribute keys and JSON values (the text form's spelling)."""
        return self._encoded(by_key=True)

    def to_json(self) -> dict[str, object]:
        """The record as JSON, by field name (IR version 4)."""
        return self._encoded(by_key=False)

    def _encoded(self, *, by_key: bool) -> dict[str, object]:
        """The fields not at their default, as JSON values, named by attribute key or by field name."""
        defaults = _DEFAULTS[type(self)]
        return {key if by_key else name: _encode(kind, getattr(self, name))
                for name, key, kind in self.FIELDS if getattr(self, name) != defaults[name]}

    @classmethod
    def from_json(cls, data: object) -> Any:
        if not isinstance(data, dict):
            raise FactError(f"`{cls.NAME}` must be an object, got {data!r}")
        kinds = {name: kind for name, _, kind in cls.FIELDS}
        unknown = sorted(set(data) - kinds.keys())
        if unknown:
            raise FactError(f"`{cls.NAME}` has unknown field {unknown[0]!r}")
        return cls(**{name: _decode(kinds[name], value, f"{cls.NAME}.{name}") for name, value in data.items()})

    def value_refs(self) -> Iterator[Operand]:
        """The values the record names (as `Ref` operands)."""
        for name, _, kind in self.FIELDS:
            if kind == "refs":
                yield from getattr(self, name)

    def mapped(self, rewrite: Callable[[Operand], Operand]) -> Any:
        """The record with `rewrite` applied to each value it names."""
        changes = {name: tuple(rewrite(ref) for ref in getattr(self, name))
                   for name, _, kind in self.FIELDS if kind == "refs" and getattr(self, name)}
        return replace(self, **changes) if changes else self  # type: ignore[type-var]


@dataclass(frozen=True)
class Effects(_Record):
    """What a node's task may do besides computing its result (dagc.ir.effects says what follows from it)."""

    mutates: tuple[Ref, ...] = ()  # values it may change in place (its arguments, as in plain Python)
    io: str | None = None  # why it may act on the world (prints to files, calls unknown code)
    rng: str | None = None  # why it draws from (or seeds) a global random number generator
    seeded: bool = False  # it seeds that generator itself, so its draws do not depend on earlier tasks
    rng_advances: bool = False  # its draws advance the generator, but what it computes does not depend on them
    writes: tuple[str, ...] = ()  # module-level names it may change (`module.NAME`)
    reads: tuple[str, ...] = ()  # module-level names it reads that some task may change
    drawn: tuple[str, ...] = ()  # module-level values drawn at import unseeded that it reads (`module.NAME: why`)
    files: str | None = None  # "read" or "write": it reads or writes files
    paths: FilePaths | None = None  # every file it touches, when all are named at its call
    output: str | None = None  # why it prints or logs: an output channel, never state
    fresh: bool = False  # every `return` gives a new object, sharing nothing with its arguments
    fresh_items: tuple[bool, ...] | None = None  # per item of the tuple it returns: whether the item is new
    varies: str | None = None  # why its output may differ on the same inputs (the clock, a UUID)

    NAME = "effects"
    FIELDS = (("mutates", "effects.mutates", "refs"), ("io", "effects.io", "str"), ("rng", "effects.rng", "str"),
              ("seeded", "effects.seeded", "bool"), ("rng_advances", "effects.rng_advances", "bool"),
              ("writes", "effects.writes", "names"), ("reads", "effects.reads", "names"),
              ("drawn", "effects.drawn", "names"), ("files", "effects.files", "str"),
              ("paths", "effects.paths", "paths"), ("output", "effects.output", "str"),
              ("fresh", "effects.fresh", "bool"), ("fresh_items", "effects.fresh_items", "bools"),
              ("varies", "effects.varies", "str"))

    @property
    def mutated(self) -> tuple[str, ...]:
        """The names of the values it may change."""
        return tuple(ref.name for ref in self.mutates)


@dataclass(frozen=True)
class Placement(_Record):
    """Where `partition` put a node and when `schedule` runs it."""

    device: int | tuple[int, ...] | None = None  # one device, or the ranks of a task on several
    start: float | None = None
    finish: float | None = None
    order: int | None = None  # its place in its device's order

    NAME: ClassVar[str] = "placement"
    FIELDS: ClassVar[tuple[tuple[str, str, str], ...]] = (
        ("device", "partition.device", "device"), ("start", "schedule.start", "number"),
        ("finish", "schedule.finish", "number"), ("order", "schedule.order", "int"))

    @property
    def devices(self) -> tuple[int, ...]:
        """The device(s) it is placed on; () before `partition`."""
        return device_tuple(self.device)

    @property
    def placed(self) -> bool:
        return self.device is not None

    def on(self, devices: tuple[int, ...] | list[int]) -> Placement:
        """This placement moved to `devices` (an int for one device, as `partition` writes it)."""
        devs = tuple(devices)
        return replace(self, device=devs[0] if len(devs) == 1 else devs)


@dataclass(frozen=True)
class Transfer(_Record):
    """What a `transfer` node moves: from `src` to `dst`; a broadcast sends one value to several devices; the
    transfers of one `gather` (named by the node that reads them) send to one rank together."""

    kind: str | None = None  # None (point to point), "broadcast" or "gather"
    src: int | tuple[int, ...] | None = None
    dst: int | tuple[int, ...] | None = None
    bytes: int | float | None = None
    gather: str | None = None
    group: tuple[int, ...] | None = None

    NAME: ClassVar[str] = "transfer"
    FIELDS: ClassVar[tuple[tuple[str, str, str], ...]] = (
        ("kind", "transfer.kind", "str"), ("src", "transfer.src", "device"), ("dst", "transfer.dst", "device"),
        ("bytes", "transfer.bytes", "number"), ("gather", "transfer.gather", "str"), ("group", "transfer.group", "ints"))


@dataclass(frozen=True)
class Reduction(_Record):
    """A sum of values made on several ranks, computed by a collective: `reduce` is "sum" (one rank gets it) or
    "all" (every rank of `holders` gets it)."""

    reduce: str  # (always written: a reduction is no reduction without it)
    operands: tuple[Ref, ...] = ()
    sources: tuple[int, ...] = ()
    bytes: int | float | None = None
    divisor: Any = None  # `sum(xs) / n`: divided after the sum
    start: Any = None  # `sum(xs)`: Python adds the operands to 0
    holders: tuple[int, ...] | None = None

    NAME: ClassVar[str] = "reduction"
    FIELDS: ClassVar[tuple[tuple[str, str, str], ...]] = (
        ("reduce", "comm.reduce", "str"), ("operands", "comm.operands", "refs"), ("sources", "comm.sources", "ints"),
        ("bytes", "comm.bytes", "number"), ("divisor", "comm.divisor", "json"), ("start", "comm.start", "json"),
        ("holders", "comm.holders", "ints"))

    @property
    def everywhere(self) -> bool:
        return self.reduce == "all"


Comm = Transfer | Reduction
_DEFAULTS: dict[type, dict[str, Any]] = {
    cls: {f.name: f.default for f in fields(cls)} for cls in (Effects, Placement, Transfer, Reduction)}
NO_EFFECTS = Effects()
UNPLACED = Placement()
_NO_TRANSFER = Transfer()
_BY_KEY: dict[str, tuple[type, str, str]] = {
    key: (cls, name, kind) for cls in (Effects, Placement, Transfer, Reduction) for name, key, kind in cls.FIELDS}
# attribute keys that may name a typed field (the text form and files of IR version 3 and older)
FACT_PREFIXES = ("effects.", "partition.device", "schedule.", "transfer.", "comm.")


class _HasComm(Protocol):
    comm: Comm | None


def transfer_of(node: _HasComm) -> Transfer:
    """What a transfer node moves (an empty record for other nodes)."""
    return node.comm if isinstance(node.comm, Transfer) else _NO_TRANSFER


def reduction_of(node: _HasComm) -> Reduction | None:
    """The reduce collective that computes a node's sum, if the comm pass made one."""
    return node.comm if isinstance(node.comm, Reduction) else None


def split_attrs(attrs: Mapping[str, Any]) -> tuple[dict[str, Any], Effects, Placement, Comm | None]:
    """Attributes as written in the text form (or stored by IR version 3) → (the other attributes, effects,
    placement, communication). Raises FactError for a typed field of the wrong shape."""
    rest: dict[str, Any] = {}
    found: dict[type, dict[str, Any]] = {}
    for key, value in attrs.items():
        entry = _BY_KEY.get(key)
        if entry is None:
            rest[key] = value
            continue
        cls, name, kind = entry
        if value is None or (kind == "bool" and value is False):
            continue  # at its default
        found.setdefault(cls, {})[name] = _decode(kind, value, key)
    comm: Comm | None = None
    if Transfer in found and Reduction in found:
        raise FactError("a node is either a transfer (`transfer.*`) or a reduction (`comm.*`), not both")
    if Transfer in found:
        comm = Transfer(**found[Transfer])
    elif Reduction in found:
        comm = Reduction(**found[Reduction])
    return (rest, Effects(**found.get(Effects, {})), Placement(**found.get(Placement, {})), comm)


def record_attrs(effects: Effects, placement: Placement, comm: Comm | None) -> dict[str, object]:
    """The typed fields as attribute keys (the text form's spelling); empty when none is set."""
    out: dict[str, object] = {}
    if effects is not NO_EFFECTS and effects:
        out.update(effects.attrs())
    if placement is not UNPLACED and placement:
        out.update(placement.attrs())
    if comm:
        out.update(comm.attrs())
    return out
