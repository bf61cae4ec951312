"""What a module-level name holds, read from the expression that builds it (never run).

The effect analysis (dagc/frontend/effects/) asks it whether a module-level object could be state:
numbers, strings, tuples, devices, dtypes, paths, frozen configs are immutable; loggers, progress bars and
metric writers are output channels; a `torch.nn` layer holding no parameters or buffers cannot change;
argparse's namespace holds command-line values; anything else may change.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from dagc.frontend import library as lib
from dagc.frontend.modules import Constant, ImportedModule, ImportedName, ModuleInfo, Opaque, Project

__all__ = ["GlobalValue", "IMMUTABLE", "value_kind", "is_frozen_class", "module_qualified", "is_immutable_constant"]


@dataclass(frozen=True)
class GlobalValue:
    """What a module-level name holds, read from the expression that builds it.

    kind: "immutable" (numbers, strings, tuples, devices, dtypes, paths, frozen configs), "output" (a
    logger, progress bar or metric writer), "layer" (a `torch.nn` layer built at module level),
    "namespace" (argparse's result: reading an attribute yields a value, assigning one changes it),
    "container" (a literal list, dict or set), "mutable" (anything else)."""

    kind: str
    constructor: str | None = None
    layer: lib.LayerFacts | None = None
    device: bool = False  # a `torch.device` or a device string

    @property
    def is_state(self) -> bool:
        """Whether a task could change the object (it is state when one does)."""
        if self.kind == "layer":
            return not (self.layer is not None and self.layer.stateless)
        return self.kind in ("container", "mutable", "namespace")


IMMUTABLE = GlobalValue("immutable")
IMMUTABLE_TYPES = (int, float, complex, str, bytes, bool, type(None), range, frozenset)


def is_immutable_constant(value: object) -> bool:
    if isinstance(value, tuple):
        return all(is_immutable_constant(v) for v in value)
    return isinstance(value, IMMUTABLE_TYPES)


def module_qualified(expr: ast.expr, info: ModuleInfo) -> str | None:
    """`nn.MSELoss` → `torch.nn.MSELoss` at module level, following the module's imports."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    symbol = info.symbols.get(expr.id)
    if isinstance(symbol, ImportedModule):
        head = symbol.module
    elif isinstance(symbol, ImportedName):
        head = f"{symbol.module}.{symbol.name}"
    elif symbol is None:
        head = expr.id  # a builtin (`frozenset(...)`, `tuple(...)`)
    else:
        return None
    if head == "np":
        head = "numpy"
    return ".".join([head, *reversed(parts)])


def value_kind(analyzer: Any, expr: ast.AST, info: ModuleInfo, depth: int) -> GlobalValue:
    if depth > 20:
        return GlobalValue("mutable")
    if isinstance(expr, ast.Constant):
        return GlobalValue("immutable", device=isinstance(expr.value, str)
                           and expr.value.split(":")[0] in lib.DEVICE_TYPES)
    if isinstance(expr, (ast.JoinedStr, ast.Compare, ast.BoolOp)):
        return IMMUTABLE
    if isinstance(expr, ast.IfExp):
        sides = [analyzer.value_kind(e, info, depth + 1) for e in (expr.body, expr.orelse)]
        if all(v.kind == "immutable" for v in sides):
            return GlobalValue("immutable", device=all(v.device for v in sides))
        return GlobalValue("mutable")
    if isinstance(expr, ast.Tuple):
        parts = [analyzer.value_kind(e, info, depth + 1) for e in expr.elts]
        return IMMUTABLE if all(v.kind == "immutable" for v in parts) else GlobalValue("mutable")
    if isinstance(expr, ast.BinOp):  # `ROOT / "data"`, `BASE_LR * 2`
        parts = [analyzer.value_kind(e, info, depth + 1) for e in (expr.left, expr.right)]
        return IMMUTABLE if all(v.kind == "immutable" for v in parts) else GlobalValue("mutable")
    if isinstance(expr, ast.Name):
        symbol = info.symbols.get(expr.id)
        if isinstance(symbol, Constant):
            return IMMUTABLE if is_immutable_constant(symbol.value) else GlobalValue("container")
        if isinstance(symbol, Opaque) and symbol.kind == "value":
            return analyzer.value_kind(symbol.node, info, depth + 1)
        return GlobalValue("mutable")
    if isinstance(expr, ast.Attribute):  # `torch.float32`, `math.pi`: an attribute of a library module
        symbol = info.symbols.get(expr.value.id) if isinstance(expr.value, ast.Name) else None
        if isinstance(symbol, (ImportedModule, ImportedName)) and expr.attr[:1].islower():
            return IMMUTABLE
        return GlobalValue("mutable")
    if isinstance(expr, ast.Call):
        if isinstance(expr.func, ast.Attribute) and expr.func.attr in ("parse_args", "parse_known_args"):
            # argparse's namespace: its attributes are the strings and numbers of the command line
            return GlobalValue("namespace", "argparse.Namespace")
        name = module_qualified(expr.func, info)
        if name is None:  # `Net()` of the user's own class: its name, for calls of the object (a forward pass)
            return GlobalValue("mutable", expr.func.id if isinstance(expr.func, ast.Name) else None)
        if lib.is_output_constructor(name):
            return GlobalValue("output", name)
        if lib.is_immutable_constructor(name):
            return GlobalValue("immutable", name, device=name == "torch.device")
        if name.startswith("torch.nn."):
            return GlobalValue("layer", name, lib.catalogue().layer(name))
        if is_frozen_class(analyzer.project, info, expr.func):
            return GlobalValue("immutable", name)
        return GlobalValue("mutable", name)
    return GlobalValue("mutable")


def is_frozen_class(project: Project, info: ModuleInfo, func: ast.expr) -> bool:
    """A class of the user's whose instances cannot change: `@dataclass(frozen=True)` or a NamedTuple."""
    if not isinstance(func, ast.Name):
        return False
    symbol = project.lookup(info, func.id)
    node = getattr(symbol, "node", None)
    if not isinstance(node, ast.ClassDef):
        return False
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Call) and any(k.arg == "frozen" and isinstance(k.value, ast.Constant)
                                                   and k.value.value is True for k in decorator.keywords):
            return True
    return any(isinstance(b, (ast.Name, ast.Attribute)) and ast.unparse(b).endswith("NamedTuple") for b in node.bases)
