"""JSON form of the IR: versioned, canonical, exact.

    {"dagc_ir": 4, "name": ..., "root": ..., "module": ..., "modules": {...}, "span": [...],
     "attrs": {...}, "params": [...], "returns": <operand> | null, "nodes": [...]}

A node is {"name", "op", "target", "args", "kwargs", "outputs", "types", "options", "span", "deps",
"attrs"}, and the typed records it carries (dagc.ir.facts), each only when set, by field name:
"effects" ({"mutates": [name, ...], "rng": "why", "seeded": true, ...}), "placement" ({"device": 0 or
[0, 1], "start", "finish", "order"}), and "transfer" ({"kind", "src", "dst", "bytes", "gather", "group"}) or
"reduction" ({"reduce", "operands": [name, ...], "sources", "bytes", "divisor", "start", "holders"}).
A node that holds bodies (a region; a `fused` group, whose body is `members`) also has
"bodies": {"then": [node, ...], ...}, its nested nodes written the same way, and a region node has
"region", its payload (dagc.ir.payload):

    {"yields": {"then": [operand, ...], ...}, "args": {"body": [name, ...]}, "iter": operand | null,
     "init": [operand, ...], "exit": null | {"at": int, "cond": operand, "values": [operand, ...]}}

Older versions are upgraded on load. Version 3 kept the typed records as attributes (`effects.rng`,
`partition.device`, `schedule.start`, `transfer.src`, `comm.reduce`, ...), the spelling the text form
still prints them in. Version 2 kept the payload as JSON in the attributes
(`region.yield`, `region.then.yield`, `region.carried`, `region.items`, `region.iter`, `region.init`,
`region.break`, ...) and a fused group's members in `fuse.members`; version 1 also kept the bodies there
(`region.then`, `region.else`, `region.body`).

`ir/schema.json` describes the document. Operands are tagged objects so that every kind stays
distinct after a round trip:

    {"ref": "x"}                  a use of value %x
    {"const": 3}                  a scalar literal: null, true/false, integer, float, string
    {"float": "inf"}              a float JSON cannot write: "inf", "-inf" or "nan"
    {"list": [...]}, {"tuple": [...]}
    {"map": [[key, value], ...]}  keys and values are operands; order is kept

Spans are `[file, line, col, end_line, end_col]`. Task options list only the fields that differ
from `TaskOptions()`; non-finite floats among them are written `{"float": ...}` too. Attributes
are plain JSON values. `dumps` is canonical: sorted keys, two-space indent, UTF-8 text, so equal
graphs give equal text and diffs stay small.
"""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from typing import Any

from .core import REGION_BODIES, REGION_OPS, Graph, Node, Param, body_names
from .facts import Effects, FactError, Placement, Reduction, Transfer
from .location import SourceSpan
from .payload import Exit, Region
from .types import Const, Map, Operand, Ref, Seq, TaskOptions

__all__ = [
    "FORMAT_VERSION",
    "READABLE_VERSIONS",
    "IRFormatError",
    "graph_to_json",
    "graph_from_json",
    "node_to_json",
    "node_from_json",
    "upgrade_v1_node",
    "upgrade_payload",
    "region_to_json",
    "region_from_json",
    "operand_to_json",
    "operand_from_json",
    "options_to_json",
    "options_from_json",
    "dumps",
    "loads",
]

FORMAT_VERSION = 4
# Versions `graph_from_json` reads; older ones are upgraded on load (`_upgrade_v1`, `upgrade_payload`).
READABLE_VERSIONS = (1, 2, 3, 4)

_OPTION_FIELDS = tuple(f.name for f in fields(TaskOptions))
_OPTION_SET = frozenset(_OPTION_FIELDS)
_NODE_KEYS = ("name", "op", "target", "args", "kwargs", "outputs", "types", "options", "span", "deps", "attrs")
_NODE_KEY_SET = frozenset(_NODE_KEYS)
_REGION_NODE_KEY_SET = _NODE_KEY_SET | {"bodies"}
_PAYLOAD_KEY_SET = frozenset(("yields", "args", "iter", "init", "exit"))
_GRAPH_KEYS = ("dagc_ir", "name", "root", "module", "modules", "span", "attrs", "params", "returns", "nodes")
_GRAPH_KEY_SET = frozenset(_GRAPH_KEYS)
_PARAM_KEY_SET = frozenset(("name", "value", "type", "span"))
_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


class IRFormatError(ValueError):
    """A JSON document is not a dagc IR graph of a version this dagc reads; the message says why."""


@contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many acyclic objects (a large graph).

    Reading a 100k-node graph allocates millions of containers, none of them in a reference
    cycle; collections triggered along the way only cost time (about a third of it).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# ---- scalars and operands ----------------------------------------------------------------------
def _float_to_json(value: float) -> object:
    if math.isfinite(value):
        return float(value)
    return {"float": "nan" if value != value else ("inf" if value > 0 else "-inf")}


def _scalar_ok(value: object) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def operand_to_json(operand: Operand) -> dict[str, Any]:
    """Tagged JSON object for an operand (see the module docstring)."""
    if isinstance(operand, Ref):
        return {"ref": operand.name}
    if isinstance(operand, Const):
        value = operand.value
        if isinstance(value, float) and not math.isfinite(value):
            return _float_to_json(value)  # type: ignore[return-value]
        if not _scalar_ok(value):
            raise IRFormatError(f"constant of type {type(value).__name__} cannot be written: {value!r}")
        return {"const": value}
    if isinstance(operand, Seq):
        if operand.kind not in ("list", "tuple"):
            raise IRFormatError(f"sequence kind must be 'list' or 'tuple', got {operand.kind!r}")
        return {operand.kind: [operand_to_json(item) for item in operand.items]}
    if isinstance(operand, Map):
        return {"map": [[operand_to_json(k), operand_to_json(v)] for k, v in operand.items]}
    raise IRFormatError(f"not an operand: {operand!r}")


def operand_from_json(data: object) -> Operand:
    """Inverse of `operand_to_json`."""
    if not isinstance(data, dict) or len(data) != 1:
        raise IRFormatError(
            f"operand must be an object with one key (ref, const, float, list, tuple, map), got {data!r}"
        )
    ((tag, value),) = data.items()
    if tag == "ref":
        if not isinstance(value, str):
            raise IRFormatError(f"'ref' operand needs a string, got {value!r}")
        return Ref(value)
    if tag == "const":
        if not _scalar_ok(value):
            raise IRFormatError(f"'const' operand needs null, a boolean, a number or a string, got {value!r}")
        return Const(value)
    if tag == "float":
        if value not in _NONFINITE:
            raise IRFormatError(f"'float' operand must be \"inf\", \"-inf\" or \"nan\", got {value!r}")
        return Const(_NONFINITE[value])
    if tag in ("list", "tuple"):
        if not isinstance(value, list):
            raise IRFormatError(f"{tag!r} operand needs an array, got {value!r}")
        return Seq(tag, tuple(operand_from_json(item) for item in value))  # type: ignore[arg-type]
    if tag == "map":
        if not isinstance(value, list) or not all(isinstance(p, list) and len(p) == 2 for p in value):
            raise IRFormatError(f"'map' operand needs an array of [key, value] pairs, got {value!r}")
        return Map(tuple((operand_from_json(k), operand_from_json(v)) for k, v in value))
    raise IRFormatError(f"unknown operand tag {tag!r}; expected ref, const, float, list, tuple or map")


# ---- spans and options ---------------------------------------------------------------------------
def _span_to_json(span: SourceSpan) -> list[object]:
    return [span.file, span.line, span.col, span.end_line, span.end_col]


def _span_from_json(data: object) -> SourceSpan:
    if (
        not isinstance(data, list)
        or len(data) != 5
        or not isinstance(data[0], str)
        or not all(type(x) is int for x in data[1:])
    ):
        raise IRFormatError(f"span must be [file, line, col, end_line, end_col], got {data!r}")
    return SourceSpan(data[0], data[1], data[2], data[3], data[4])


def _value_to_json(value: object) -> object:
    if isinstance(value, float):
        return _float_to_json(value)
    if isinstance(value, (tuple, list)):
        return [_value_to_json(item) for item in value]
    return value


def _value_from_json(value: object) -> object:
    if isinstance(value, dict) and len(value) == 1 and value.get("float") in _NONFINITE:
        return _NONFINITE[value["float"]]
    if isinstance(value, list):
        return tuple(_value_from_json(item) for item in value)
    return value


def options_to_json(options: TaskOptions) -> dict[str, object]:
    """The fields that differ from `TaskOptions()`; tuples become arrays."""
    return {key: _value_to_json(value) for key, value in options.non_default().items()}


def options_from_json(data: object) -> TaskOptions:
    if not isinstance(data, dict):
        raise IRFormatError(f"options must be an object, got {data!r}")
    unknown = sorted(set(data) - _OPTION_SET)
    if unknown:
        raise IRFormatError(f"unknown task option {unknown[0]!r}; options: {', '.join(_OPTION_FIELDS)}")
    return TaskOptions(**{key: _value_from_json(value) for key, value in data.items()})


# ---- nodes and graphs ----------------------------------------------------------------------------
def node_to_json(node: Node) -> dict[str, Any]:
    """A node as a JSON-ready dict."""
    data = _plain_node_json(node)
    if node.op in REGION_OPS or node.bodies:
        data["bodies"] = {key: [node_to_json(inner) for inner in node.bodies.get(key, [])]
                          for key in body_names(node)}
    if node.region is not None:
        data["region"] = region_to_json(node.region)
    return data


def region_to_json(region: Region) -> dict[str, Any]:
    """A region payload as JSON (see the module docstring)."""
    exit_ = region.exit
    return {
        "yields": {key: [operand_to_json(o) for o in values] for key, values in region.yields.items()},
        "args": {key: list(names) for key, names in region.args.items()},
        "iter": None if region.iter is None else operand_to_json(region.iter),
        "init": [operand_to_json(o) for o in region.init],
        "exit": None if exit_ is None else {"at": exit_.at, "cond": operand_to_json(exit_.cond),
                                            "values": [operand_to_json(o) for o in exit_.values]},
    }


def _operands_from_json(data: object, what: str) -> tuple[Operand, ...]:
    if not isinstance(data, list):
        raise IRFormatError(f"{what} must be an array of operands, got {data!r}")
    try:
        return tuple(operand_from_json(item) for item in data)
    except IRFormatError as exc:
        raise IRFormatError(f"{what}: {exc}") from None


def region_from_json(data: object) -> Region:
    """Inverse of `region_to_json`."""
    d = _check_keys(data, _PAYLOAD_KEY_SET, "'region'")
    yields, args, exit_ = d["yields"], d["args"], d["exit"]
    if not isinstance(yields, dict):
        raise IRFormatError(f"'region' 'yields' must map body names to arrays of operands, got {yields!r}")
    if not isinstance(args, dict):
        raise IRFormatError(f"'region' 'args' must map body names to arrays of value names, got {args!r}")
    if exit_ is not None:
        exit_ = _check_keys(exit_, frozenset(("at", "cond", "values")), "'region' 'exit'")
        if type(exit_["at"]) is not int:
            raise IRFormatError(f"'region' 'exit' 'at' must be an integer, got {exit_['at']!r}")
        exit_ = Exit(exit_["at"], operand_from_json(exit_["cond"]),
                     _operands_from_json(exit_["values"], "'region' 'exit' 'values'"))
    return Region({key: _operands_from_json(v, f"'region' 'yields' {key!r}") for key, v in yields.items()},
                  {key: _str_list(v, f"'region' 'args' {key!r}") for key, v in args.items()},
                  None if d["iter"] is None else operand_from_json(d["iter"]),
                  _operands_from_json(d["init"], "'region' 'init'"), exit_)


# Version 2 kept a region's payload in these attributes: what each body yields, by region kind and body
_V2_YIELD_ATTRS = {"region.then.yield": "then", "region.else.yield": "else", "region.body.yield": "body",
                   "region.finally.yield": "finally"}
_V2_ARG_ATTRS = {"loop": "region.carried", "map": "region.items"}


def upgrade_payload(node: Node) -> None:
    """Move a version-2 node's payload out of its attributes (recursively, bodies too): a region's
    yields, block arguments, items, initial lists and `break` into `node.region`, a fused group's
    members (`fuse.members`, node JSON) into its body `members`. Raises IRFormatError, naming the
    attribute, when one is malformed."""
    for body in node.bodies.values():
        for inner in body:
            upgrade_payload(inner)
    attrs = node.attrs
    if node.op == "fused" and "fuse.members" in attrs:
        items = attrs.pop("fuse.members")
        if not isinstance(items, list):
            raise IRFormatError(f"`fuse.members` must be an array of nodes, got {items!r}")
        members = [node_from_json(item) for item in items]
        for member in members:
            upgrade_payload(member)
        node.bodies["members"] = members
        return
    if node.op not in REGION_OPS:
        return
    region = node.region if node.region is not None else Region()
    try:
        for key in [k for k in attrs if k in _V2_YIELD_ATTRS or k == "region.yield"]:
            body = "body" if key == "region.yield" else _V2_YIELD_ATTRS[key]
            if body in region.yields:
                raise IRFormatError(f"`{key}` is given both inline and in its block")
            region.yields[body] = _operands_from_json(attrs.pop(key), f"`{key}`")
        arg_key = _V2_ARG_ATTRS.get(node.op)
        if arg_key is not None and arg_key in attrs:
            region.args["body"] = _str_list(attrs.pop(arg_key), f"`{arg_key}`")
        if "region.iter" in attrs:
            if region.iter is not None:
                raise IRFormatError("`region.iter` is given both inline and in its block")
            region.iter = operand_from_json(attrs.pop("region.iter"))
        if "region.init" in attrs:
            region.init = _operands_from_json(attrs.pop("region.init"), "`region.init`")
        brk = attrs.pop("region.break", None)
        if brk is not None and region.exit is not None:
            raise IRFormatError("`region.break` is given both inline and in its block")
        if brk is not None:
            if not (isinstance(brk, dict) and set(brk) == {"at", "cond", "yield"} and type(brk["at"]) is int):
                raise IRFormatError(f"`region.break` must be null or {{at, cond, yield}}, got {brk!r}")
            region.exit = Exit(brk["at"], operand_from_json(brk["cond"]),
                               _operands_from_json(brk["yield"], "`region.break.yield`"))
    except IRFormatError as exc:
        raise IRFormatError(f"region {node.name!r}: {exc}") from None
    node.region = region


def _plain_node_json(node: Node) -> dict[str, Any]:
    return {
        "name": node.name,
        "op": node.op,
        "target": node.target,
        "args": [operand_to_json(a) for a in node.args],
        "kwargs": [[key, operand_to_json(value)] for key, value in node.kwargs],
        "outputs": list(node.outputs),
        "types": list(node.types),
        "options": options_to_json(node.options),
        "span": _span_to_json(node.span),
        "deps": list(node.deps),
        "attrs": node.attrs,
        **_facts_to_json(node),
    }


# the typed records' keys in a node's JSON (IR version 4; present only when set)
_FACT_KEYS = ("effects", "placement", "transfer", "reduction")


def _facts_to_json(node: Node) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if node.effects:
        out["effects"] = node.effects.to_json()
    if node.placement:
        out["placement"] = node.placement.to_json()
    if node.comm:
        out[node.comm.NAME] = node.comm.to_json()
    return out


def _facts_from_json(node: Node, d: dict[str, Any]) -> None:
    """Set the typed records a version-4 node's JSON carries (after any its attributes gave, which they replace)."""
    try:
        if "effects" in d:
            node.effects = Effects.from_json(d["effects"])
        if "placement" in d:
            node.placement = Placement.from_json(d["placement"])
        if "transfer" in d and "reduction" in d:
            raise IRFormatError("a node is either a transfer or a reduction, not both")
        if "transfer" in d:
            node.comm = Transfer.from_json(d["transfer"])
        if "reduction" in d:
            node.comm = Reduction.from_json(d["reduction"])
    except FactError as exc:
        raise IRFormatError(str(exc)) from None


def _check_keys(data: object, required: frozenset[str], what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise IRFormatError(f"{what} must be an object, got {type(data).__name__}")
    if data.keys() != required:
        missing = sorted(required - data.keys())
        if missing:
            raise IRFormatError(f"{what} has no {missing[0]!r} key")
        raise IRFormatError(f"{what} has unknown key {sorted(data.keys() - required)[0]!r}")
    return data


def _str_list(value: object, what: str, *, allow_none: bool = False) -> tuple[Any, ...]:
    if not isinstance(value, list) or not all(
        isinstance(x, str) or (allow_none and x is None) for x in value
    ):
        kind = "strings or nulls" if allow_none else "strings"
        raise IRFormatError(f"{what} must be an array of {kind}, got {value!r}")
    return tuple(value)


def make_node(
    name: str,
    op: str,
    target: str,
    args: tuple[Operand, ...],
    kwargs: tuple[tuple[str, Operand], ...],
    outputs: tuple[str, ...],
    types: tuple[str | None, ...],
    options: TaskOptions,
    span: SourceSpan,
    deps: tuple[str, ...],
    attrs: dict[str, Any],
) -> Node:
    """A Node with exactly these fields (no defaulting of empty `outputs` or padding of `types`). Attributes
    that name a typed field (`effects.*`, `partition.device`, `schedule.*`, `transfer.*`, `comm.*`: the text
    form, and IR version 3 and older) go to the node's records (dagc.ir.facts)."""
    try:
        node = Node(name, op, target, args, kwargs, outputs, types, options, span, deps, attrs)
    except FactError as exc:
        raise IRFormatError(str(exc)) from None
    node.outputs = outputs
    node.types = types
    return node


def node_from_json(data: object) -> Node:
    """Inverse of `node_to_json`."""
    has_bodies = isinstance(data, dict) and "bodies" in data
    has_region = isinstance(data, dict) and "region" in data
    keys = _REGION_NODE_KEY_SET if has_bodies else _NODE_KEY_SET
    if has_region:
        keys = keys | {"region"}
    keys = keys | {key for key in _FACT_KEYS if key in data}  # type: ignore[operator]
    d = _check_keys(data, keys, "node")
    name = d["name"]
    where = f"node {name!r}" if isinstance(name, str) else "node"
    try:
        for key in ("name", "op", "target"):
            if not isinstance(d[key], str):
                raise IRFormatError(f"{key!r} must be a string, got {d[key]!r}")
        if not isinstance(d["args"], list):
            raise IRFormatError(f"'args' must be an array, got {d['args']!r}")
        kwargs = d["kwargs"]
        if not isinstance(kwargs, list) or not all(
            isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in kwargs
        ):
            raise IRFormatError(f"'kwargs' must be an array of [name, operand] pairs, got {kwargs!r}")
        if not isinstance(d["attrs"], dict):
            raise IRFormatError(f"'attrs' must be an object, got {d['attrs']!r}")
        bodies = _bodies_from_json(d["bodies"]) if has_bodies else {}
        node = make_node(
            name,
            d["op"],
            d["target"],
            tuple(operand_from_json(a) for a in d["args"]),
            tuple((key, operand_from_json(value)) for key, value in kwargs),
            _str_list(d["outputs"], "'outputs'"),
            _str_list(d["types"], "'types'", allow_none=True),
            options_from_json(d["options"]),
            _span_from_json(d["span"]),
            _str_list(d["deps"], "'deps'"),
            dict(d["attrs"]),
        )
        node.bodies = bodies
        _facts_from_json(node, d)
        if has_region:
            node.region = region_from_json(d["region"])
        return node
    except IRFormatError as exc:
        raise IRFormatError(f"{where}: {exc}") from None
    except (TypeError, ValueError) as exc:  # e.g. a TaskOptions field of the wrong shape
        raise IRFormatError(f"{where}: {exc}") from None


def _bodies_from_json(data: object) -> dict[str, list[Node]]:
    if not isinstance(data, dict) or not all(isinstance(body, list) for body in data.values()):
        raise IRFormatError(f"'bodies' must map body names to arrays of nodes, got {data!r}")
    bodies: dict[str, list[Node]] = {}
    for key, items in data.items():
        body = []
        for index, item in enumerate(items):
            try:
                body.append(node_from_json(item))
            except IRFormatError as exc:
                raise IRFormatError(f"bodies[{key!r}][{index}]: {exc}") from None
        bodies[key] = body
    return bodies


# Version 1 stored a region's bodies as node lists in these attributes.
_V1_BODY_ATTRS = {"region.then": "then", "region.else": "else", "region.body": "body"}


def _upgrade_v1(item: object) -> object:
    """A version-1 node's JSON in the version-2 form: region bodies move out of the attributes."""
    if not isinstance(item, dict) or not isinstance(item.get("attrs"), dict) or item.get("op") not in REGION_OPS:
        return item
    attrs = dict(item["attrs"])
    bodies: dict[str, object] = {}
    for key, name in _V1_BODY_ATTRS.items():
        if name in REGION_BODIES[item["op"]] and isinstance(attrs.get(key), list):
            bodies[name] = [_upgrade_v1(inner) for inner in attrs.pop(key)]
    return {**item, "attrs": attrs, "bodies": bodies}


def upgrade_v1_node(node: Node) -> None:
    """Move a version-1 node's region bodies (node lists in its attributes) into `node.bodies`."""
    if node.op not in REGION_OPS:
        return
    for key, name in _V1_BODY_ATTRS.items():
        items = node.attrs.get(key)
        if name in REGION_BODIES[node.op] and isinstance(items, list) and name not in node.bodies:
            del node.attrs[key]
            node.bodies[name] = [node_from_json(_upgrade_v1(item)) for item in items]


def graph_to_json(graph: Graph) -> dict[str, Any]:
    """The graph as a JSON-ready dict (see the module docstring and `ir/schema.json`)."""
    return {
        "dagc_ir": FORMAT_VERSION,
        "name": graph.name,
        "root": graph.root,
        "module": graph.module,
        "modules": dict(graph.modules),
        "span": _span_to_json(graph.span),
        "attrs": graph.attrs,
        "params": [
            {"name": p.name, "value": operand_to_json(p.value), "type": p.type, "span": _span_to_json(p.span)}
            for p in graph.params
        ],
        "returns": None if graph.returns is None else operand_to_json(graph.returns),
        "nodes": [node_to_json(node) for node in graph],
    }


def _param_from_json(data: object, index: int) -> Param:
    d = _check_keys(data, _PARAM_KEY_SET, f"params[{index}]")
    if not isinstance(d["name"], str):
        raise IRFormatError(f"params[{index}]: 'name' must be a string, got {d['name']!r}")
    if d["type"] is not None and not isinstance(d["type"], str):
        raise IRFormatError(f"params[{index}]: 'type' must be a string or null, got {d['type']!r}")
    try:
        return Param(d["name"], operand_from_json(d["value"]), d["type"], _span_from_json(d["span"]))
    except IRFormatError as exc:
        raise IRFormatError(f"param {d['name']!r}: {exc}") from None


def check_version(data: object) -> None:
    """Raise IRFormatError unless `data` is a dagc IR document of the version this dagc reads."""
    if not isinstance(data, dict) or "dagc_ir" not in data:
        raise IRFormatError("not a dagc IR document: expected a JSON object with a \"dagc_ir\" version key")
    version = data["dagc_ir"]
    if type(version) is not int or version not in READABLE_VERSIONS:
        raise IRFormatError(
            f"unsupported dagc IR version {version!r}: this dagc reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}"
        )


def graph_from_json(data: object) -> Graph:
    """Inverse of `graph_to_json`. Checks the shape, not the invariants (see `verify`)."""
    check_version(data)
    d = _check_keys(data, _GRAPH_KEY_SET, "graph")
    for key in ("name", "root", "module"):
        if not isinstance(d[key], str):
            raise IRFormatError(f"graph {key!r} must be a string, got {d[key]!r}")
    modules = d["modules"]
    if not isinstance(modules, dict) or not all(isinstance(v, str) for v in modules.values()):
        raise IRFormatError(f"graph 'modules' must map module names to file names, got {modules!r}")
    if not isinstance(d["attrs"], dict):
        raise IRFormatError(f"graph 'attrs' must be an object, got {d['attrs']!r}")
    for key in ("params", "nodes"):
        if not isinstance(d[key], list):
            raise IRFormatError(f"graph {key!r} must be an array, got {type(d[key]).__name__}")
    try:
        span = _span_from_json(d["span"])
        returns = None if d["returns"] is None else operand_from_json(d["returns"])
    except IRFormatError as exc:
        raise IRFormatError(f"graph: {exc}") from None
    graph = Graph(
        d["name"],
        root=d["root"],
        module=d["module"],
        params=[_param_from_json(p, i) for i, p in enumerate(d["params"])],
        returns=returns,
        modules=modules,
        span=span,
        attrs=d["attrs"],
    )
    upgrade = d["dagc_ir"] == 1
    for index, item in enumerate(d["nodes"]):
        try:
            node = node_from_json(_upgrade_v1(item) if upgrade else item)
            if d["dagc_ir"] < 3:
                upgrade_payload(node)
        except IRFormatError as exc:
            raise IRFormatError(f"nodes[{index}]: {exc}") from None
        if node.name in graph:
            raise IRFormatError(f"nodes[{index}]: duplicate node name {node.name!r}")
        graph.add_node(node)
    return graph


def dumps(graph: Graph) -> str:
    """Canonical JSON text of `graph`, ending in a newline."""
    try:
        with no_gc():
            data = graph_to_json(graph)
        text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise IRFormatError(
            f"attributes must be JSON values (string keys; NaN and infinite floats are not JSON): {exc}"
        ) from None
    return text + "\n"


def loads(text: str) -> Graph:
    """Read a graph written by `dumps` (any JSON layout is accepted)."""
    with no_gc():
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise IRFormatError(f"not valid JSON: {exc}") from None
        return graph_from_json(data)
