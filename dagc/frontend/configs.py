"""Compile-time values beyond literals: dataclass configs and side-effect-free standard library calls.

Training scripts keep their settings in a dataclass (`cfg = TrainConfig(lr=3e-4)`, then `cfg.lr`)
and build paths from the script's location (`os.path.join(os.path.dirname(__file__), "data")`).
Both are folded here without running anything of the user's:

  * a `@dataclass` of the user's is read from its class body: annotated fields with literal defaults
    (or `field(default=…)`, `field(default_factory=list|dict|tuple)`); a class with `__post_init__`,
    `__init__`, other decorators or a base class is not a config (its constructor may do anything);
  * a few pure functions of `os.path`, `posixpath` and `math`, and `__file__`, are evaluated with
    the values the script would see when run from its own file (`__file__` is its absolute path).

A config instance is an ordinary compile-time value: its fields fold like constants; passed whole
to a task, it is built at run time by the class itself (`module.TrainConfig(lr=0.0003)`).
"""

from __future__ import annotations

import ast
import itertools
import math
import posixpath
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["ConfigClass", "ConfigValue", "StaticNamespace", "StaticFunction", "config_class", "stdlib_value",
           "STDLIB_MODULES", "call_config"]


@dataclass(frozen=True)
class ConfigClass:
    """A user dataclass usable at compile time: its module, name, fields (in order) and defaults."""

    module: str
    name: str
    fields: tuple[str, ...]
    defaults: tuple[tuple[str, Any], ...]  # field -> default value (a literal) or a factory's result
    frozen: bool
    node: ast.ClassDef

    @property
    def target(self) -> str:
        return f"{self.module}:{self.name}"


@dataclass(frozen=True)
class ConfigValue:
    """An instance of a ConfigClass built at compile time; `given` are the arguments of the call."""

    cls: ConfigClass
    values: tuple[tuple[str, Any], ...]
    given: tuple[tuple[str, Any], ...]

    def get(self, name: str) -> Any:
        for key, value in self.values:
            if key == name:
                return value
        raise KeyError(name)

    def __repr__(self) -> str:
        return f"{self.cls.name}({', '.join(f'{k}={v!r}' for k, v in self.values)})"


@dataclass(frozen=True)
class StaticNamespace:
    """A standard library module whose pure parts may be evaluated (`os`, `os.path`, `math`)."""

    name: str


@dataclass(frozen=True)
class StaticFunction:
    name: str
    fn: Callable[..., Any]


def _bounded(items: Iterable[Any]) -> Any:
    """An iterator of the standard library, as a compile-time iterator (its items are handed out once, as plain
    Python's are), as long as a compile-time list may be."""
    from dagc.frontend.static import MAX_STATIC_ITEMS, StaticIterator

    out = list(itertools.islice(items, MAX_STATIC_ITEMS + 1))
    if len(out) > MAX_STATIC_ITEMS:
        raise ValueError("too many items to build at compile time")
    return StaticIterator(out)


def _abspath(path: str) -> str:
    if not isinstance(path, str) or not posixpath.isabs(path):
        raise ValueError("abspath of a relative path depends on the working directory at run time")
    return posixpath.normpath(path)


# Everything here is a function of its arguments alone (no file system, environment or clock).
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "os.path.join": posixpath.join, "os.path.dirname": posixpath.dirname, "os.path.basename": posixpath.basename,
    "os.path.splitext": posixpath.splitext, "os.path.split": posixpath.split, "os.path.normpath": posixpath.normpath,
    "os.path.isabs": posixpath.isabs, "os.path.abspath": _abspath,
    "math.sqrt": math.sqrt, "math.log": math.log, "math.log2": math.log2, "math.log10": math.log10,
    "math.exp": math.exp, "math.ceil": math.ceil, "math.floor": math.floor,
    # a grid of settings: an iterator, used up by the first loop over it
    "itertools.product": lambda *iterables, repeat=1: _bounded(itertools.product(*iterables, repeat=repeat)),
    "itertools.combinations": lambda iterable, r: _bounded(itertools.combinations(iterable, r)),
    "itertools.permutations": lambda iterable, r=None: _bounded(itertools.permutations(iterable, r)),
    "itertools.chain": lambda *iterables: _bounded(itertools.chain(*iterables)),
}
_CONSTANTS: dict[str, Any] = {"os.sep": "/", "os.path.sep": "/", "os.pathsep": ":", "math.pi": math.pi,
                              "math.e": math.e, "math.inf": math.inf}
# argparse (dagc.frontend.arguments): a parser built in a pipeline body is read at compile time; its help
# formatters only change the help text
_CONSTANTS.update({f"argparse.{name}": f"argparse.{name}" for name in (
    "HelpFormatter", "ArgumentDefaultsHelpFormatter", "RawDescriptionHelpFormatter", "RawTextHelpFormatter",
    "MetavarTypeHelpFormatter")})
STDLIB_MODULES = frozenset({"os", "os.path", "posixpath", "math", "argparse", "itertools"})


def stdlib_value(dotted: str) -> Any:
    """`os.path` → a namespace, `os.path.join` → a function, `math.pi` → a value; None if not known."""
    dotted = dotted.replace("posixpath.", "os.path.") if dotted.startswith("posixpath.") else dotted
    if dotted == "posixpath":
        dotted = "os.path"
    if dotted in _CONSTANTS:
        return _CONSTANTS[dotted]
    if dotted in _FUNCTIONS:
        return StaticFunction(dotted, _FUNCTIONS[dotted])
    if dotted == "argparse.ArgumentParser":
        from dagc.frontend.arguments import StaticArgParser

        return StaticFunction(dotted, lambda **options: StaticArgParser(options))
    if dotted in STDLIB_MODULES:
        return StaticNamespace(dotted)
    return None


# ---- dataclass configs ----------------------------------------------------------------------------
def _is_dataclass_decorator(expr: ast.expr, resolve: Callable[[str], str | None]) -> tuple[bool, bool] | None:
    """(is a dataclass decorator, frozen) for `@dataclass`, `@dataclasses.dataclass(frozen=True)`."""
    call = expr if isinstance(expr, ast.Call) else None
    target = call.func if call is not None else expr
    name = None
    if isinstance(target, ast.Name):
        name = resolve(target.id)
    elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        module = resolve(target.value.id)
        name = f"{module}.{target.attr}" if module else None
    if name != "dataclasses.dataclass":
        return None
    frozen = False
    for kw in call.keywords if call is not None else ():
        if kw.arg == "frozen" and isinstance(kw.value, ast.Constant):
            frozen = bool(kw.value.value)
        elif kw.arg not in ("frozen", "eq", "repr", "order", "kw_only", "slots") or not isinstance(
                kw.value, ast.Constant):
            return None
    return True, frozen


class NotConstant(Exception):
    """A default that is not a compile-time constant (the base of the evaluator's NotStatic)."""


def config_class(node: ast.ClassDef, module: str, resolve: Callable[[str], str | None],
                 constant: Callable[[ast.expr], Any]) -> ConfigClass | None:
    """The config a `@dataclass` class body describes, or None when its constructor cannot be
    followed at compile time. `resolve` maps a local name to what it imports (`dataclass` →
    `dataclasses.dataclass`); `constant` evaluates a default (raising NotConstant, or the evaluator's
    NotStatic, on anything not constant)."""
    if node.bases or node.keywords or len(node.decorator_list) != 1:
        return None
    found = _is_dataclass_decorator(node.decorator_list[0], resolve)
    if found is None:
        return None
    fields: list[str] = []
    defaults: list[tuple[str, Any]] = []
    for stmt in node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if stmt.name in ("__init__", "__post_init__", "__new__", "__setattr__", "__getattribute__",
                             "__getattr__"):
                return None
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # docstring
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            if isinstance(stmt, ast.Pass):
                continue
            return None
        annotation = ast.unparse(stmt.annotation)
        if "ClassVar" in annotation or "InitVar" in annotation:
            return None
        fields.append(stmt.target.id)
        if stmt.value is None:
            continue
        try:
            defaults.append((stmt.target.id, _default(stmt.value, resolve, constant)))
        except NotConstant:  # a default dagc cannot know: the class is not a config it can build
            return None
    return ConfigClass(module, node.name, tuple(fields), tuple(defaults), found[1], node)


def _default(value: ast.expr, resolve: Callable[[str], str | None], constant: Callable[[ast.expr], Any]) -> Any:
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and resolve(value.func.id) == \
            "dataclasses.field":
        if value.args or len(value.keywords) != 1:
            raise NotConstant("field() with more than a default")
        kw = value.keywords[0]
        if kw.arg == "default":
            return constant(kw.value)
        if kw.arg == "default_factory" and isinstance(kw.value, ast.Name) and kw.value.id in ("list", "dict",
                                                                                              "tuple"):
            return {"list": [], "dict": {}, "tuple": ()}[kw.value.id]
        raise NotConstant("field() form")
    result = constant(value)
    if isinstance(result, (list, dict, set)):
        raise NotConstant("a mutable default is an error in a dataclass")
    return result


def call_config(cls: ConfigClass, args: list[Any], kwargs: dict[str, Any]) -> ConfigValue:
    """`Cls(*args, **kwargs)` at compile time, with Python's binding errors (raised as TypeError)."""
    if len(args) > len(cls.fields):
        raise TypeError(f"{cls.name}() takes {len(cls.fields)} positional arguments but {len(args)} were given")
    values: dict[str, Any] = dict(zip(cls.fields, args))
    for key, value in kwargs.items():
        if key not in cls.fields:
            raise TypeError(f"{cls.name}() got an unexpected keyword argument {key!r}")
        if key in values:
            raise TypeError(f"{cls.name}() got multiple values for argument {key!r}")
        values[key] = value
    given = tuple(values.items())
    defaults = dict(cls.defaults)
    for name in cls.fields:
        if name not in values:
            if name not in defaults:
                raise TypeError(f"{cls.name}() missing required argument {name!r}")
            values[name] = defaults[name]
    return ConfigValue(cls, tuple((f, values[f]) for f in cls.fields), given)
