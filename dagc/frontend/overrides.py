"""Module-level code that changes settings when the script runs: command-line overrides.

nanoGPT-style scripts set defaults as module constants, then let the command line replace them:
`exec(open("configurator.py").read())` or `globals().update(...)` rewrite the module's globals,
and `argparse` / `sys.argv` / `os.environ` give values only a run can know. dagc folds constants at
compile time, so it says which of them such code may change, and how to make each a pipeline
parameter (set at compile time with `--param`, or when calling the pipeline).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from dagc.frontend.modules import ModuleInfo, Opaque

__all__ = ["Override", "rewrites_globals", "run_time_source"]


@dataclass(frozen=True)
class Override:
    node: ast.AST
    what: str  # how the script reads its run-time settings, in words


def _is_main_guard(stmt: ast.stmt) -> bool:
    from dagc.frontend.scan import is_main_guard

    return is_main_guard(stmt)


def _top_level(info: ModuleInfo) -> list[ast.AST]:
    """Nodes of the module's top-level code (not function or class bodies, not the main guard)."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = [s for s in info.source.tree.body if not _is_main_guard(s)]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


def rewrites_globals(info: ModuleInfo) -> list[Override]:
    """`exec(...)` and `globals()` at the top level of a module: they may replace any constant."""
    found: list[Override] = []
    for node in _top_level(info):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("exec", "globals"):
            if node.func.id == "globals" and info.symbols.get("globals") is not None:
                continue
            found.append(Override(node, f"`{ast.unparse(node)}`"))
    found.sort(key=lambda o: (o.node.lineno, o.node.col_offset))  # type: ignore[attr-defined]
    return [o for o in found if not (o.what.startswith("`globals()") and any(
        f.what.startswith("`exec(") for f in found))] or found


def run_time_source(info: ModuleInfo, expr: ast.AST, depth: int = 0) -> str | None:
    """How a module-level value depends on the run (`sys.argv`, argparse, the environment), if it does."""
    if depth > 20:
        return None
    for node in ast.walk(expr):
        if isinstance(node, ast.Attribute) and node.attr == "argv":
            return "the command line (`sys.argv`)"
        if isinstance(node, ast.Attribute) and node.attr in ("parse_args", "parse_known_args"):
            return "the command line (argparse)"
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv"):
            return "the environment (`os.environ`)"
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            symbol = info.symbols.get(node.id)
            if isinstance(symbol, Opaque) and symbol.kind == "value" and symbol.node is not expr:
                found = run_time_source(info, symbol.node, depth + 1)
                if found is not None:
                    return found
    return None
