"""Module-level code that changes settings when the script runs: command-line overrides.

nanoGPT-style scripts set defaults as module constants, then let the command line replace them:
`exec(open("configurator.py").read())` or `globals().update(...)` rewrite the module's globals,
and `argparse` / `sys.argv` / `os.environ` give values only a run can know. dagc folds constants at
compile time, so it says which of them such code may change, and how to make each a pipeline
parameter (set at compile time with `--param`, or when calling the pipeline).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from dagc.diagnostics import DiagnosticSink, Note
from dagc.frontend.modules import Constant, ModuleInfo, Opaque, Project

__all__ = ["Override", "rewrites_globals", "run_time_source", "report_overrides", "unknown_setting"]


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


def report_overrides(project: Project, sink: DiagnosticSink, folded: Iterable[tuple[str, str]], pipeline: str) -> None:
    """DAGC134: the constants folded into a pipeline that `exec(...)`/`globals()` may replace at run time."""
    by_module: dict[str, list[str]] = {}
    for module, name in folded:
        by_module.setdefault(module, []).append(name)
    for module, names in sorted(by_module.items()):
        info = project.module(module)
        if info is None:
            continue
        for override in rewrites_globals(info):
            line = override.node.lineno  # type: ignore[attr-defined]
            constants = [n for n in sorted(names) if isinstance(info.symbols.get(n), Constant)
                         and info.symbols[n].node.lineno < line]
            if not constants:
                continue
            shown = ", ".join(f"{n}={info.symbols[n].value!r}" for n in constants[:8])
            more = f" and {len(constants) - 8} more" if len(constants) > 8 else ""
            first = constants[0]
            sink.warning(
                "DAGC134", f"{override.what} may change module settings when the script runs; dagc folded "
                f"them at compile time: {shown}{more}", info.source.span(override.node),
                hint=f"make each setting the pipeline varies a pipeline parameter, e.g. `def {pipeline}({first}=...)` "
                f"with the default `{first}={info.symbols[first].value!r}`, and set it with `--param {first}=VALUE`")


def unknown_setting(name: str, symbol: Opaque, info: ModuleInfo, pipeline: str) -> tuple[str, str, list[Note]] | None:
    """(message, hint, notes) for a module value a pipeline uses but dagc cannot know, if it can say why."""
    if symbol.why is not None:  # a config the module changes
        message, _, hint = symbol.why.partition("; ")
        return f"`{name}` {message}", hint, []
    source = run_time_source(info, symbol.node)
    if source is None:
        return None
    return (f"`{name}` is set from {source} when the script runs, so dagc cannot know it at compile time",
            f"make it a pipeline parameter: `def {pipeline}({name}=DEFAULT)` and compile with `--param {name}=VALUE`",
            [Note(f"`{name}` is assigned here", info.source.span(symbol.node))])
