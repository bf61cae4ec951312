"""A pipeline parameter whose default is a path: `root: Path = Path("data/train.csv")`.

The IR keeps the parameter as its text (what `--param root=other.csv` gives too); the pipeline body sees a
`pathlib.Path` built from it where the program runs, by one node, as plain Python builds one object.
"""

from __future__ import annotations

import ast

from dagc.frontend.extract.context import Context
from dagc.frontend.modules import ImportedModule, ImportedName, ModuleInfo
from dagc.ir.core import Node
from dagc.ir.facts import Effects
from dagc.ir.location import SourceSpan
from dagc.ir.types import Operand, Ref, TaskOptions

__all__ = ["PATH_TARGET", "built_path", "path_argument"]

PATH_TARGET = "pathlib:Path"


def path_argument(expr: ast.expr | None, info: ModuleInfo) -> ast.expr | None:
    """The one argument of `Path(...)`/`pathlib.Path(...)` when `expr` is such a call; None otherwise."""
    if not (isinstance(expr, ast.Call) and len(expr.args) == 1 and not expr.keywords
            and not isinstance(expr.args[0], ast.Starred)):
        return None
    func = expr.func
    if isinstance(func, ast.Name):
        symbol = info.symbols.get(func.id)
        found = isinstance(symbol, ImportedName) and (symbol.module, symbol.name) == ("pathlib", "Path")
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.attr == "Path":
        symbol = info.symbols.get(func.value.id)
        found = isinstance(symbol, ImportedModule) and symbol.module == "pathlib"
    else:
        found = False
    return expr.args[0] if found else None


def built_path(cx: Context, name: str, text: Operand, span: SourceSpan) -> Ref:
    """The node that builds parameter `name`'s `Path` from its text where the program runs."""
    made = cx.node_name(name)
    node = Node(made, "task", PATH_TARGET, (text,), (), (made,), ("Path",), TaskOptions(pure=True), span)
    node.effects = Effects(fresh=True)
    cx.add_node(node)
    return Ref(made)
