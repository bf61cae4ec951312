"""Compatibility of type annotations, read as text (nothing is imported or evaluated).

A producer's return annotation and a consumer's parameter annotation are compared when both are
present. Only types the compiler knows are judged — builtins (`int`, `float`, `str`, `bool`,
`bytes`, `None`, `list`, `dict`, `tuple`, `set`) and `torch.Tensor` (by name) — combined with
`Optional[...]`, `Union[...]`/`X | Y` and the `list[...]`/`dict[...]`/`tuple[...]` generics
(`typing.List` and friends too). Anything else (a user class, `Any`, a protocol, a string that
does not parse) is accepted: an unannotated or unknown type never causes an error.
"""

from __future__ import annotations

import ast
from functools import lru_cache

__all__ = ["compatible", "describe_mismatch", "type_of_value"]

_ALIASES = {
    "List": "list", "Dict": "dict", "Tuple": "tuple", "Set": "set", "FrozenSet": "frozenset",
    "Text": "str", "NoneType": "None", "Tensor": "torch.Tensor",
}
_KNOWN = {"int", "float", "str", "bool", "bytes", "None", "list", "dict", "tuple", "set", "frozenset",
          "torch.Tensor", "complex"}
# a value of the key type is accepted where the value type is expected (numeric tower)
_WIDENS = {("bool", "int"), ("bool", "float"), ("int", "float"), ("bool", "complex"), ("int", "complex"),
           ("float", "complex")}

Type = tuple  # ("unknown",) | ("name", str, tuple[Type, ...] | None) | ("union", tuple[Type, ...])
UNKNOWN: Type = ("unknown",)


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _convert(node: ast.expr, depth: int = 0) -> Type:
    if depth > 20:
        return UNKNOWN
    if isinstance(node, ast.Constant):
        if node.value is None:
            return ("name", "None", None)
        if isinstance(node.value, str):
            try:
                return _convert(ast.parse(node.value, mode="eval").body, depth + 1)
            except SyntaxError:
                return UNKNOWN
        return UNKNOWN
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union([_convert(node.left, depth + 1), _convert(node.right, depth + 1)])
    if isinstance(node, ast.Subscript):
        head = _dotted(node.value)
        if head is None:
            return UNKNOWN
        head = head.rpartition(".")[2] if head.startswith(("typing.", "t.")) else head
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head == "Optional":
            return _union([_convert(items[0], depth + 1), ("name", "None", None)])
        if head == "Union":
            return _union([_convert(i, depth + 1) for i in items])
        if head in ("Annotated",):
            return _convert(items[0], depth + 1)
        name = _ALIASES.get(head, head)
        if name not in _KNOWN:
            return UNKNOWN
        if name == "tuple" and any(isinstance(i, ast.Constant) and i.value is Ellipsis for i in items):
            return ("name", "tuple", None)
        return ("name", name, tuple(_convert(i, depth + 1) for i in items))
    name = _dotted(node)
    if name is None:
        return UNKNOWN
    if name.startswith("typing."):
        name = name[7:]
    if name in ("Any", "object"):
        return UNKNOWN
    name = _ALIASES.get(name, name)
    return ("name", name, None) if name in _KNOWN else UNKNOWN


def _union(members: list[Type]) -> Type:
    flat: list[Type] = []
    for m in members:
        if m == UNKNOWN:
            return UNKNOWN
        flat.extend(m[1] if m[0] == "union" else [m])
    return flat[0] if len(flat) == 1 else ("union", tuple(flat))


@lru_cache(maxsize=4096)
def parse_type(text: str) -> Type:
    try:
        return _convert(ast.parse(text, mode="eval").body)
    except (SyntaxError, ValueError, RecursionError):
        return UNKNOWN


def _accepts(expected: Type, given: Type) -> bool:
    if expected == UNKNOWN or given == UNKNOWN:
        return True
    if given[0] == "union":
        return all(_accepts(expected, g) for g in given[1])
    if expected[0] == "union":
        return any(_accepts(e, given) for e in expected[1])
    _, e_name, e_args = expected
    _, g_name, g_args = given
    if e_name != g_name:
        return (g_name, e_name) in _WIDENS
    if e_args is None or g_args is None:
        return True
    if e_name == "tuple":
        return len(e_args) == len(g_args) and all(_accepts(e, g) for e, g in zip(e_args, g_args))
    return len(e_args) == len(g_args) and all(_accepts(e, g) for e, g in zip(e_args, g_args))


def compatible(produced: str | None, expected: str | None) -> bool:
    """False only when both annotations are known and a produced value can never be accepted."""
    if produced is None or expected is None or produced == expected:
        return True
    return _compatible_annotations(produced, expected)


@lru_cache(maxsize=4096)  # a pipeline repeats a handful of annotation pairs at every call
def _compatible_annotations(produced: str, expected: str) -> bool:
    return _accepts(parse_type(expected), parse_type(produced))


def item_type(container: str | None) -> str | None:
    """The element type of a `list[X]`/`set[X]` annotation (as text), else None."""
    if container is None:
        return None
    t = parse_type(container)
    if t != UNKNOWN and t[0] == "name" and t[1] in ("list", "set", "frozenset") and t[2] and len(t[2]) == 1:
        return _text(t[2][0])
    return None


def _text(t: Type) -> str | None:
    if t == UNKNOWN:
        return None
    if t[0] == "union":
        parts = [_text(m) for m in t[1]]
        return None if any(p is None for p in parts) else " | ".join(parts)  # type: ignore[arg-type]
    _, name, args = t
    if args is None:
        return name
    inner = [_text(a) for a in args]
    if any(i is None for i in inner):
        return None
    return f"{name}[{', '.join(inner)}]"  # type: ignore[arg-type]


def describe_mismatch(produced: str, expected: str) -> str:
    return f"`{produced}` is not accepted where `{expected}` is expected"


def type_of_value(value: object) -> str:
    """The annotation a literal value satisfies (`3` → `int`), for checking `--param` values."""
    if value is None:
        return "None"
    for t in (bool, int, float, str, list, dict, tuple):
        if isinstance(value, t):
            return t.__name__
    return "object"
