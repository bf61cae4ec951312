"""The fix of a function defined inside a pipeline (DAGC108): the `def` moved, with its decorators and the
comments above it, to module level just above the pipeline; the names it read from the pipeline (its
parameters, its variables) become parameters, passed by keyword at each call in the pipeline.

Built only when the move keeps what the script computes: the function's name is free at module level and
bound by this `def` only in the pipeline, what its decorators, defaults and annotations read is not the
pipeline's, it does not call itself or change the pipeline's names (`nonlocal`), what it reads from the
pipeline (as Python resolves names: `symtable`) is a value (not a function, class or module the pipeline
defines or imports), and, when it needs such names, the pipeline only calls it, and not where another scope
(a nested function, a lambda, a comprehension) binds one of them.
"""

from __future__ import annotations

import ast
import builtins
import symtable
from dataclasses import dataclass, field

from dagc.fixes import AddArguments, Edit, Fix, MoveDefinition
from dagc.frontend.source import SourceFile

__all__ = ["free_names", "nested_definition_fix"]

_Function = ast.FunctionDef | ast.AsyncFunctionDef
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclass
class _Bound:
    """The names a block of code binds in its own scope, by how."""

    values: set[str] = field(default_factory=set)  # assigned, loop or `as` targets
    definitions: set[str] = field(default_factory=set)  # functions, classes, imports
    declared: set[str] = field(default_factory=set)  # `global` / `nonlocal`

    @property
    def all(self) -> set[str]:
        return (self.values | self.definitions) - self.declared


def _bound(stmts: list[ast.stmt], leaving: ast.AST | None = None) -> _Bound:
    """What `stmts` bind in their own scope (nested functions, classes, lambdas and comprehensions are scopes of
    their own: only the names of functions and classes are counted), but for the statement `leaving`."""
    found = _Bound()
    todo: list[ast.AST] = list(stmts)
    while todo:
        node = todo.pop()
        if node is leaving:
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.definitions.add(node.name)
            todo.extend([*node.decorator_list, *_evaluated_outside(node)])
            continue
        if isinstance(node, (ast.Lambda, *_COMPREHENSIONS)):
            continue
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            found.values.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found.definitions.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            found.values.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            found.declared.update(node.names)
        todo.extend(ast.iter_child_nodes(node))
    return found


def _evaluated_outside(fn: ast.AST) -> list[ast.AST]:
    """The parts of a definition that run where it is defined: defaults, annotations, base classes."""
    if isinstance(fn, ast.ClassDef):
        return [*fn.bases, *fn.keywords]
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = fn.args
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, *(a for a in (args.vararg, args.kwarg) if a)]
        return [*args.defaults, *(d for d in args.kw_defaults if d is not None),
                *(a.annotation for a in every if a.annotation is not None),
                *([fn.returns] if fn.returns is not None else [])]
    return []


def _loads(nodes: list[ast.AST]) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _parameters(fn: _Function) -> set[str]:
    args = fn.args
    return {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}


def _enclosing(tree: ast.Module, fn: _Function) -> tuple[ast.stmt, _Function, list[ast.stmt]] | None:
    """The top-level statement, the function that defines `fn` and the block `fn` is a statement of."""
    for top in tree.body:
        for outer in ast.walk(top):
            if not isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)) or outer is fn:
                continue
            todo: list[ast.AST] = list(outer.body)
            while todo:
                node = todo.pop()
                for name in ("body", "orelse", "finalbody", "handlers"):
                    block = getattr(node, name, None)
                    if isinstance(block, list) and any(_same(s, fn) for s in block):
                        return top, outer, block
                if not isinstance(node, _SCOPES):
                    todo.extend(ast.iter_child_nodes(node))
            if any(_same(s, fn) for s in outer.body):
                return top, outer, outer.body
    return None


def free_names(source: SourceFile, fn: _Function) -> set[str] | None:
    """The names `fn` reads from the functions around it, as Python resolves them: a comprehension's or a
    lambda's own variables, the locals of a function `fn` defines and its `global` names are not among them
    (None when the module's scopes cannot be built)."""
    try:
        table: symtable.SymbolTable = symtable.symtable(source.text, str(source.path), "exec")
    except (SyntaxError, ValueError):
        return None
    todo = [table]
    while todo:
        table = todo.pop()
        if isinstance(table, symtable.Function) and table.get_name() == fn.name \
                and table.get_lineno() == fn.lineno:
            return set(table.get_frees())
        todo.extend(table.get_children())
    return None


def _same(stmt: ast.AST, fn: _Function) -> bool:
    return isinstance(stmt, type(fn)) and stmt.lineno == fn.lineno and stmt.col_offset == fn.col_offset


def _scope_names(node: ast.AST) -> set[str]:
    """The names a function, lambda, class body or comprehension binds in its own scope."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return _parameters(node) | _bound(node.body).all
    if isinstance(node, ast.ClassDef):
        return _bound(node.body).all
    if isinstance(node, ast.Lambda):
        args = node.args
        return {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
    return {n.id for gen in node.generators for n in ast.walk(gen.target) if isinstance(n, ast.Name)}


def _inside(node: ast.AST) -> list[ast.AST]:
    """The parts of a scope's node that run in its own scope (a definition's decorators and defaults run in the
    scope around it)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return list(node.body)
    if isinstance(node, ast.Lambda):
        return [node.body]
    return list(ast.iter_child_nodes(node))  # (a comprehension: its first iterable too, which is no harm)


def _uses(outer: _Function, fn: _Function) -> tuple[list[tuple[ast.Call, set[str]]], bool]:
    """The calls of `fn` by name in `outer` (outside `fn`), each with the names that the scopes inside `outer`
    around the call bind (there, a name is not the pipeline's), and whether `outer` names `fn` otherwise too."""
    calls: list[tuple[ast.Call, set[str]]] = []
    callee: set[int] = set()
    names: list[ast.Name] = []
    todo: list[tuple[ast.AST, set[str]]] = [(stmt, set()) for stmt in outer.body]
    while todo:
        node, shadowed = todo.pop()
        if _same(node, fn):
            continue
        if isinstance(node, (*_SCOPES, *_COMPREHENSIONS)):
            inside = _inside(node)
            bound = shadowed | _scope_names(node)
            todo.extend((child, bound if any(child is n for n in inside) else shadowed)
                        for child in ast.iter_child_nodes(node))
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == fn.name:
            calls.append((node, shadowed))
            callee.add(id(node.func))
        elif isinstance(node, ast.Name) and node.id == fn.name:
            names.append(node)
        todo.extend((child, shadowed) for child in ast.iter_child_nodes(node))
    calls.sort(key=lambda found: (found[0].lineno, found[0].col_offset))
    return calls, any(id(n) not in callee for n in names)


def nested_definition_fix(source: SourceFile, fn: _Function) -> Fix | None:
    """`fn`, defined inside a pipeline of `source`, moved to module level above the pipeline (None when the move
    could change what the script computes)."""
    found = _enclosing(source.tree, fn)
    if found is None:
        return None
    top, outer, block = found
    module = _bound(source.tree.body)
    if len(block) < 2 or fn.name in module.all | set(dir(builtins)):
        return None  # (an empty block left behind; a name the module already has)
    here = _bound(outer.body, leaving=fn)  # (what the pipeline binds once `fn` has gone)
    local = here.all | _parameters(outer)
    free = free_names(source, fn)
    if free is None or _loads([*fn.decorator_list, *_evaluated_outside(fn)]) & local or any(
            isinstance(n, ast.Nonlocal) for n in ast.walk(fn)):
        return None
    if fn.name in local or fn.name in free:
        return None  # (the pipeline binds its name again, another `def` under `else:` say, or it calls itself)
    params = sorted(free & local)
    if set(params) & here.definitions:
        return None
    calls, named = _uses(outer, fn)
    if params and named or any((set(params) | {fn.name}) & shadowed for _, shadowed in calls):
        return None  # (passed on as a value, or called where its name or theirs is another scope's)
    edits: list[Edit] = [MoveDefinition(source.span(fn), top.lineno, tuple(params))]
    edits += [AddArguments(source.span(call), tuple(params)) for call, _ in calls] if params else []
    passing = f", passing {', '.join(f'`{p}`' for p in params)} to it" if params else ""
    return Fix(f"move `def {fn.name}` to the top level of the module{passing}", tuple(edits))
