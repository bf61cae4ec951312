"""Where a called name is defined: the function a symbol names, in the user's modules loaded so far."""

from __future__ import annotations

import ast

from dagc.frontend.modules import ModuleInfo, Opaque, Project, TaskDef


def function_of(symbol: object, project: Project, info: ModuleInfo,
                 ) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, ModuleInfo] | None:
    if isinstance(symbol, TaskDef):
        module = project.module(symbol.module)
        return (symbol.node, module) if module is not None else None
    if isinstance(symbol, Opaque) and symbol.kind == "function" and isinstance(
            symbol.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        # the symbol's module: the one whose tree holds the node
        for module in loaded_modules(project):
            if module.symbols.get(symbol.node.name) is symbol:
                return symbol.node, module
        return symbol.node, info
    if isinstance(symbol, Opaque) and symbol.kind == "class" and isinstance(symbol.node, ast.ClassDef):
        # constructing one of the user's classes runs its __init__ (no __init__: effects of object())
        init = next((s for s in symbol.node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and s.name == "__init__"), None)
        if init is None:
            init = ast.FunctionDef("__init__", ast.arguments([], [ast.arg("self")], None, [], [], None, []),
                                   [ast.Pass()], [], None, lineno=symbol.node.lineno,
                                   col_offset=symbol.node.col_offset)
        owner = next((m for m in loaded_modules(project) if m.symbols.get(symbol.node.name) is symbol), info)
        return init, owner
    return None


def loaded_modules(project: Project) -> list[ModuleInfo]:
    modules = getattr(project, "_modules", None) or getattr(project, "modules", None) or {}
    return [m for m in (modules.values() if isinstance(modules, dict) else modules) if m is not None]
