"""Compile-time evaluation of constant expressions (literals, arithmetic, a few pure builtins).

Nothing here runs user code: only literal values and whitelisted operations on them. Sizes are
bounded so that `10**10**10` or `[0] * 10**12` in a source file cannot hang the compiler.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from dagc.frontend.arguments import TYPES, ArgumentsError, StaticArgParser
from dagc.frontend.configs import (
    ConfigClass,
    ConfigValue,
    NotConstant,
    StaticFunction,
    StaticNamespace,
    call_config,
    stdlib_value,
)

__all__ = ["NotStatic", "StaticIterator", "StaticRange", "eval_static", "MAX_STATIC_ITEMS", "is_literal_value", "iterate_static"]

MAX_STATIC_ITEMS = 1_000_000
MAX_INT_BITS = 12_000  # about 3,600 decimal digits: below the 4,300 digits Python converts to text


class NotStatic(NotConstant):
    """The expression is not a compile-time constant. `node` is the offending sub-expression."""

    def __init__(self, node: ast.AST, reason: str) -> None:
        super().__init__(reason)
        self.node = node
        self.reason = reason


class ParserMisuse(NotStatic):
    """An argparse call in a pipeline body that dagc cannot read, or script arguments its parser rejects."""


class StaticRange:
    """A `range(...)` known at compile time, kept lazy (it may be iterated by loop unrolling)."""

    def __init__(self, *bounds: int) -> None:
        self.range = range(*bounds)

    def __repr__(self) -> str:
        r = self.range
        return f"range({r.start}, {r.stop}, {r.step})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StaticRange) and other.range == self.range

    def __hash__(self) -> int:
        return hash(self.range)


class StaticIterator:
    """An iterator known at compile time (`itertools.product(...)`, a generator expression): its items, which
    plain Python hands out once. It has no len(), as an iterator has none."""

    def __init__(self, items: Iterable[Any]) -> None:
        self.items = tuple(items)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.items)

    def __repr__(self) -> str:
        return f"iter({list(self.items)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StaticIterator) and other.items == self.items

    def __hash__(self) -> int:
        return hash(self.items)


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
    ast.Not: operator.not_,
    ast.Invert: operator.invert,
}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}


def _size(value: Any) -> int:
    return len(value) if isinstance(value, (str, bytes, list, tuple, dict, set)) else 1


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_binop(node: ast.BinOp, left: Any, right: Any) -> None:
    """Refuse, before computing it, a result too large to fold: an integer of more than MAX_INT_BITS bits
    (Python prints at most 4,300 digits) or a sequence of more than MAX_STATIC_ITEMS items."""
    if isinstance(node.op, ast.Pow) and isinstance(right, (int, float)) and abs(right) > 4096:
        raise NotStatic(node, "exponent too large to evaluate at compile time")
    if isinstance(node.op, ast.LShift) and isinstance(right, int) and right > 4096:
        raise NotStatic(node, "shift too large to evaluate at compile time")
    if _is_int(left) and _is_int(right):
        bits = {ast.Pow: lambda: left.bit_length() * right if right > 0 and abs(left) > 1 else 0,
                ast.Mult: lambda: left.bit_length() + right.bit_length(),
                ast.LShift: lambda: left.bit_length() + right}.get(type(node.op))
        if bits is not None and bits() > MAX_INT_BITS:
            raise NotStatic(node, f"the result has more than {MAX_INT_BITS} bits: too large to fold at compile time")
    if isinstance(node.op, ast.Mult):
        for seq, count in ((left, right), (right, left)):
            if isinstance(seq, (str, list, tuple)) and isinstance(count, int):
                if _size(seq) * max(count, 0) > MAX_STATIC_ITEMS:
                    raise NotStatic(node, "sequence too large to build at compile time")
    if isinstance(node.op, ast.Add) and isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)):
        if _size(left) + _size(right) > MAX_STATIC_ITEMS:
            raise NotStatic(node, "sequence too large to build at compile time")


def check_folded(node: ast.AST, value: Any) -> Any:
    """`value`, when it is small enough to be a compile-time constant (an integer Python can print)."""
    if _is_int(value) and value.bit_length() > MAX_INT_BITS:
        raise NotStatic(node, f"an integer of more than {MAX_INT_BITS} bits is too large to fold at compile time")
    return value


def _as_int(node: ast.AST, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise NotStatic(node, "range() bounds must be integers")
    return value


def is_literal_value(value: Any) -> bool:
    """True for values that can appear as IR constants (scalars, lists, tuples, dicts of them)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(is_literal_value(v) for v in value)
    if isinstance(value, dict):
        return all(is_literal_value(k) and is_literal_value(v) for k, v in value.items())
    return False


_PURE_BUILTINS: dict[str, Callable[..., Any]] = {
    "int": int,
    "float": float,
    "str": str,
    "bool": bool,
    "len": len,
    "min": min,
    "max": max,
    "abs": abs,
    "round": round,
    "sum": sum,
    "sorted": sorted,
    "tuple": tuple,
    "list": list,
    "dict": dict,
}


def eval_static(node: ast.expr, lookup: Callable[[ast.Name], Any]) -> Any:
    """Evaluate `node` at compile time. `lookup` resolves names (raising NotStatic if it can't)."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (bytes, complex)) or node.value is Ellipsis:
            raise NotStatic(node, f"{type(node.value).__name__} literals are not supported")
        return check_folded(node, node.value)  # (a hexadecimal literal may be of any size)
    if isinstance(node, ast.Name):
        return lookup(node)
    if isinstance(node, (ast.List, ast.Tuple)):
        items: list[Any] = []
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                items.extend(_iterate(elt, eval_static(elt.value, lookup)))
            else:
                items.append(eval_static(elt, lookup))
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.Dict):
        out: dict[Any, Any] = {}
        for key, value in zip(node.keys, node.values):
            if key is None:
                raise NotStatic(node, "`**` in a dict literal is not supported")
            k = eval_static(key, lookup)
            try:
                out[k] = eval_static(value, lookup)
            except TypeError:
                raise NotStatic(key, "dict key is not hashable") from None
        return out
    if isinstance(node, ast.BinOp):
        left = eval_static(node.left, lookup)
        right = eval_static(node.right, lookup)
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise NotStatic(node, "operator not supported at compile time")
        _check_binop(node, left, right)
        try:
            result = op(left, right)
        except Exception as exc:  # the user's arithmetic failing is a user error, reported by the caller
            raise NotStatic(node, f"cannot evaluate: {type(exc).__name__}: {exc}") from None
        return check_folded(node, result)
    if isinstance(node, ast.UnaryOp):
        operand = eval_static(node.operand, lookup)
        try:
            return _UNARY[type(node.op)](operand)
        except Exception as exc:
            raise NotStatic(node, f"cannot evaluate: {type(exc).__name__}: {exc}") from None
    if isinstance(node, ast.BoolOp):
        result: Any = None
        for value_node in node.values:
            result = eval_static(value_node, lookup)
            if isinstance(node.op, ast.And) and not result:
                return result
            if isinstance(node.op, ast.Or) and result:
                return result
        return result
    if isinstance(node, ast.Compare):
        left = eval_static(node.left, lookup)
        for op_node, comparator in zip(node.ops, node.comparators):
            right = eval_static(comparator, lookup)
            try:
                if not _COMPARE[type(op_node)](left, right):
                    return False
            except Exception as exc:
                raise NotStatic(node, f"cannot evaluate: {type(exc).__name__}: {exc}") from None
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return eval_static(node.body if eval_static(node.test, lookup) else node.orelse, lookup)
    if isinstance(node, ast.Subscript):
        container = eval_static(node.value, lookup)
        index = eval_static(node.slice, lookup)
        try:
            return container[index]
        except Exception as exc:
            raise NotStatic(node, f"cannot evaluate: {type(exc).__name__}: {exc}") from None
    if isinstance(node, ast.Slice):
        parts = [eval_static(p, lookup) if p is not None else None for p in (node.lower, node.upper, node.step)]
        return slice(*parts)
    if isinstance(node, ast.JoinedStr):
        pieces: list[str] = []
        for value_node in node.values:
            if isinstance(value_node, ast.Constant):
                pieces.append(str(value_node.value))
            elif isinstance(value_node, ast.FormattedValue):
                value = eval_static(value_node.value, lookup)
                spec = eval_static(value_node.format_spec, lookup) if value_node.format_spec else ""
                if any(len(digits) > 5 for digits in re.findall(r"\d+", str(spec))):
                    raise NotStatic(value_node, "format width too large to evaluate at compile time")
                conv = {-1: None, 115: str, 114: repr, 97: ascii}[value_node.conversion]
                if conv is not None:
                    value = conv(value)
                try:
                    pieces.append(format(value, spec))
                except Exception as exc:
                    raise NotStatic(value_node, f"cannot format: {exc}") from None
        return "".join(pieces)
    if isinstance(node, ast.Attribute):
        return _eval_attribute(node, lookup)
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        return _eval_comprehension(node, lookup)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return _eval_builtin_call(node, lookup)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return _eval_method_call(node, lookup)
    raise NotStatic(node, f"{type(node).__name__} is not a compile-time constant")


def _eval_comprehension(node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp,
                        lookup: Callable[[ast.Name], Any]) -> Any:
    """`[(lr, bs) for lr in LRS for bs in SIZES]` (a generator expression gives an iterator, used up once)."""
    bound: dict[str, Any] = {}

    def inner(name: ast.Name) -> Any:
        return bound[name.id] if name.id in bound else lookup(name)

    items: list[Any] = []

    def generate(level: int) -> None:
        if level == len(node.generators):
            if isinstance(node, ast.DictComp):
                items.append((eval_static(node.key, inner), eval_static(node.value, inner)))
            else:
                items.append(eval_static(node.elt, inner))
            if len(items) > MAX_STATIC_ITEMS:
                raise NotStatic(node, "comprehension too large to evaluate at compile time")
            return
        gen = node.generators[level]
        if gen.is_async:
            raise NotStatic(node, "`async for` is not a compile-time constant")
        for item in _iterate(gen.iter, eval_static(gen.iter, inner)):
            _bind(gen.target, item, bound)
            if all(eval_static(cond, inner) for cond in gen.ifs):
                generate(level + 1)

    generate(0)
    try:
        if isinstance(node, ast.DictComp):
            return dict(items)
        if isinstance(node, ast.GeneratorExp):
            return StaticIterator(items)
        return set(items) if isinstance(node, ast.SetComp) else items
    except TypeError:
        raise NotStatic(node, "an item is not hashable") from None


def _bind(target: ast.expr, value: Any, bound: dict[str, Any]) -> None:
    if isinstance(target, ast.Name):
        bound[target.id] = value
        return
    if isinstance(target, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in target.elts):
        items = _iterate(target, value)
        if len(items) != len(target.elts):
            raise NotStatic(target, f"cannot unpack {len(items)} values into {len(target.elts)} names")
        for elt, item in zip(target.elts, items):
            _bind(elt, item, bound)
        return
    raise NotStatic(target, "this loop target is not supported at compile time")


def iterate_static(node: ast.AST, value: Any) -> list[Any]:
    """The items of a compile-time iterable (a range, list, tuple, string or dict's keys)."""
    return _iterate(node, value)


# Pure methods of literal values that may be called at compile time: (type, name) -> arity bounds.
_METHODS: dict[tuple[type, str], tuple[int, int]] = {
    (dict, "items"): (0, 0), (dict, "keys"): (0, 0), (dict, "values"): (0, 0), (dict, "get"): (1, 2),
    (str, "join"): (1, 1), (str, "upper"): (0, 0), (str, "lower"): (0, 0),
    (str, "strip"): (0, 1), (str, "split"): (0, 2), (str, "startswith"): (1, 1),
    (str, "endswith"): (1, 1), (list, "index"): (1, 1), (list, "count"): (1, 1), (tuple, "index"): (1, 1),
    (tuple, "count"): (1, 1),
}


def _eval_attribute(node: ast.Attribute, lookup: Callable[[ast.Name], Any]) -> Any:
    """`cfg.lr` on a dataclass config, `os.sep` / `math.pi` / `os.path` on the standard library."""

    base = eval_static(node.value, lookup)
    if isinstance(base, ConfigValue):
        try:
            return base.get(node.attr)
        except KeyError:
            raise NotStatic(node, f"`{base.cls.name}` has no field `{node.attr}`") from None
    if isinstance(base, StaticNamespace):
        value = stdlib_value(f"{base.name}.{node.attr}")
        if value is None:
            raise NotStatic(node, f"`{base.name}.{node.attr}` cannot be evaluated at compile time (only a few pure "
                            "functions of os.path and math can)")
        return value
    getter = getattr(base, "static_attribute", None)  # a user class's constants (`Flow.GENRES`)
    if getter is not None:
        try:
            return getter(node.attr)
        except KeyError:
            raise NotStatic(node, f"`{ast.unparse(node)}` is not a class constant dagc can fold") from None
    raise NotStatic(node, "attribute access is not a compile-time constant")


def _call_function(node: ast.Call, fn: Any, lookup: Callable[[ast.Name], Any]) -> Any:
    """A call of a dataclass config or of a pure standard library function, at compile time."""

    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        raise NotStatic(node, "`*args`/`**kwargs` cannot be evaluated at compile time")
    args = [eval_static(a, lookup) for a in node.args]
    kwargs = {k.arg: eval_static(k.value, lookup) for k in node.keywords if k.arg is not None}
    try:
        if isinstance(fn, ConfigClass):
            return call_config(fn, args, kwargs)
        result = fn.fn(*(_iterate(node, a) if isinstance(a, StaticRange) else a for a in args), **kwargs)
    except Exception as exc:
        raise NotStatic(node, f"cannot evaluate: {type(exc).__name__}: {exc}") from None
    if isinstance(result, str) and len(result) > MAX_STATIC_ITEMS:
        raise NotStatic(node, "string too large to build at compile time")
    return result


def _eval_method_call(node: ast.Call, lookup: Callable[[ast.Name], Any]) -> Any:

    assert isinstance(node.func, ast.Attribute)
    base = eval_static(node.func.value, lookup)
    name = node.func.attr

    if isinstance(base, StaticArgParser):
        return _parser_call(node, base, lookup)
    if isinstance(base, StaticNamespace):
        fn = _eval_attribute(node.func, lambda n: lookup(n))
        if not isinstance(fn, StaticFunction):
            raise NotStatic(node, f"`{base.name}.{name}` is not a function")
        return _call_function(node, fn, lookup)
    bounds = _METHODS.get((type(base), name))
    if bounds is None or node.keywords:
        raise NotStatic(node, f"method `.{name}()` cannot be evaluated at compile time")
    args = [eval_static(a, lookup) for a in node.args]
    if not bounds[0] <= len(args) <= bounds[1]:
        raise NotStatic(node, f"wrong number of arguments to `.{name}()`")
    if name == "join":
        args = [_iterate(node, args[0])]
        if sum(len(x) if isinstance(x, str) else 1 for x in args[0]) * max(len(base), 1) > MAX_STATIC_ITEMS:
            raise NotStatic(node, "string too large to build at compile time")
    try:
        result = getattr(base, name)(*args)
    except Exception as exc:
        raise NotStatic(node, f"cannot evaluate .{name}(): {type(exc).__name__}: {exc}") from None
    if name in ("items", "keys", "values"):
        return [tuple(i) if isinstance(i, tuple) else i for i in result]
    if isinstance(result, str) and len(result) > MAX_STATIC_ITEMS:
        raise NotStatic(node, "string too large to build at compile time")
    return result


def _parser_call(node: ast.Call, parser: StaticArgParser, lookup: Callable[[ast.Name], Any]) -> Any:
    """`parser.add_argument(...)`, `parser.set_defaults(...)`, `parser.parse_args()` at compile time
    (dagc.frontend.arguments)."""
    assert isinstance(node.func, ast.Attribute)
    name = node.func.attr
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        raise NotStatic(node, "`*args`/`**kwargs` cannot be evaluated at compile time")
    options: dict[str, Any] = {}
    for keyword in node.keywords:
        assert keyword.arg is not None
        if keyword.arg == "type" and isinstance(keyword.value, ast.Name) and keyword.value.id in TYPES:
            options["type"] = keyword.value.id  # the builtin, by name (what the IR keeps)
        else:
            options[keyword.arg] = eval_static(keyword.value, lookup)
    args = [eval_static(a, lookup) for a in node.args]
    try:
        if name == "add_argument":
            return parser.add_argument(tuple(args), options)
        if name == "set_defaults" and not args:
            return parser.set_defaults(options)
        if name == "parse_args" and not options and len(args) <= 1:
            argv = args[0] if args else None
            if argv is not None and not (isinstance(argv, (list, tuple)) and all(isinstance(a, str) for a in argv)):
                raise ParserMisuse(node, "parse_args() takes a literal list of strings at compile time")
            return parser.parse_args(None if argv is None else list(argv))
    except ArgumentsError as exc:
        raise ParserMisuse(node, str(exc)) from None
    raise ParserMisuse(node, f"`.{name}()` of an argument parser cannot be evaluated at compile time (add_argument, "
                    "set_defaults and parse_args can)")


def _iterate(node: ast.AST, value: Any) -> list[Any]:
    if isinstance(value, StaticRange):
        if len(value.range) > MAX_STATIC_ITEMS:
            raise NotStatic(node, "range too large to unroll")
        return list(value.range)
    if isinstance(value, (list, tuple, str)):
        return list(value)
    if isinstance(value, StaticIterator):
        return list(value.items)
    if isinstance(value, dict):
        return list(value)
    raise NotStatic(node, "not iterable at compile time")


def _eval_builtin_call(node: ast.Call, lookup: Callable[[ast.Name], Any]) -> Any:
    assert isinstance(node.func, ast.Name)
    name = node.func.id
    try:
        shadow = lookup(node.func)
    except NotStatic:
        shadow = None

    if isinstance(shadow, (ConfigClass, StaticFunction)):
        return _call_function(node, shadow, lookup)
    if shadow is not None and not isinstance(shadow, _BuiltinMarker):
        raise NotStatic(node, f"`{name}` is not a compile-time function")
    if node.keywords and name not in ("round", "dict"):
        raise NotStatic(node, f"keyword arguments to {name}() are not supported at compile time")
    args = [eval_static(a, lookup) for a in node.args]
    if name == "dict":  # `dict(n_layer=12, n_head=12)`, the way nanoGPT writes its model arguments
        if any(k.arg is None for k in node.keywords) or len(args) > 1:
            raise NotStatic(node, "dict() with `**` or several arguments cannot be evaluated at compile time")
        try:
            out = dict(*args)
        except Exception as exc:
            raise NotStatic(node, f"cannot evaluate dict(): {type(exc).__name__}: {exc}") from None
        out.update({k.arg: eval_static(k.value, lookup) for k in node.keywords if k.arg is not None})
        return out
    if name == "range":
        if not 1 <= len(args) <= 3:
            raise NotStatic(node, "range() takes 1 to 3 arguments")
        return StaticRange(*(_as_int(node, a) for a in args))
    if name in ("enumerate", "zip"):
        if name == "enumerate":
            return list(enumerate(_iterate(node, args[0]), *(args[1:2])))
        return list(zip(*(_iterate(node, a) for a in args)))
    fn = _PURE_BUILTINS.get(name)
    if fn is None:
        raise NotStatic(node, f"`{name}` is not a compile-time function")
    if name == "len" and any(isinstance(a, StaticIterator) for a in args):
        raise NotStatic(node, "an iterator has no len(); build a list of it (`list(...)`) to count its items")
    args = [_iterate(node, a) if isinstance(a, (StaticRange, StaticIterator)) else a for a in args]
    try:
        return fn(*args)
    except Exception as exc:
        raise NotStatic(node, f"cannot evaluate {name}(): {type(exc).__name__}: {exc}") from None


class _BuiltinMarker:
    """Returned by lookups for names that are unshadowed builtins."""


BUILTIN = _BuiltinMarker()
STATIC_BUILTINS = frozenset(_PURE_BUILTINS) | {"range", "enumerate", "zip"}
