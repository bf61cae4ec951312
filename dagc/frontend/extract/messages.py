"""How diagnostics name the constructs a pipeline body does not support, and what they suggest instead."""

from __future__ import annotations

import ast


def describe(expr: ast.AST) -> str:
    return {
        ast.BinOp: "arithmetic",
        ast.UnaryOp: "arithmetic",
        ast.BoolOp: "a boolean operation",
        ast.Compare: "a comparison",
        ast.Subscript: "indexing",
        ast.Attribute: "attribute access",
        ast.JoinedStr: "an f-string",
        ast.IfExp: "a conditional expression",
        ast.Lambda: "a lambda",
        ast.ListComp: "a list comprehension",
        ast.DictComp: "a dict comprehension",
        ast.SetComp: "a set comprehension",
        ast.GeneratorExp: "a generator expression",
        ast.Await: "`await`",
        ast.Yield: "`yield`",
        ast.YieldFrom: "`yield from`",
        ast.NamedExpr: "`:=`",
        ast.Set: "a set literal",
        ast.Call: "a call",
        ast.Name: "a name",
        ast.Starred: "starred expression",
    }.get(type(expr), type(expr).__name__)


# statements a pipeline body does not support (`if`, `for`, `while` and `try` have their own handling)
STATEMENT_NAMES = {
    ast.AsyncFor: "`async for`",
    ast.With: "`with`",
    ast.AsyncWith: "`async with`",
    ast.Raise: "`raise`",
    ast.Global: "`global`",
    ast.Nonlocal: "`nonlocal`",
    ast.Delete: "`del`",
    ast.Import: "`import`",
    ast.ImportFrom: "`import`",
    ast.FunctionDef: "a nested function",
    ast.AsyncFunctionDef: "a nested function",
    ast.ClassDef: "a class definition",
    ast.AugAssign: "augmented assignment to an attribute or item",
    ast.Assert: "`assert`",
}


STATEMENT_HINTS = {
    ast.With: "open resources inside the task that uses them",
    ast.Global: "pass the value as a pipeline parameter or return it from a task",
    ast.Nonlocal: "pass the value as a pipeline parameter or return it from a task",
    ast.AugAssign: "bind the new value to a name: `x = add(x, 1)` with a task `add`",
    ast.Import: "import at module level",
    ast.ImportFrom: "import at module level",
    ast.FunctionDef: "define the function at module level (decorate it with @dagc.task to make it a step)",
    ast.AsyncFunctionDef: "define the function at module level (decorate it with @dagc.task to make it a step)",
    ast.ClassDef: "define the class at module level",
    ast.Raise: "raise inside a task; a pipeline body only wires tasks together",
    ast.Delete: "just stop using the name",
    ast.Assert: "check the condition inside a task",
    ast.AsyncFor: "use a plain `for` over a compile-time iterable",
}
