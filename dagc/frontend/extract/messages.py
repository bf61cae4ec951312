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


LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log"})


def logging_call(call: ast.Call, module: ast.Module) -> bool:
    """`logging.info(...)`, `logger.info(...)` with `logger = logging.getLogger(...)` at module level,
    `logging.getLogger(...).info(...)` or loguru's `logger.info(...)`: a log record written from the body."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in LOG_METHODS:
        return False
    receiver = func.value
    if isinstance(receiver, ast.Call):  # `logging.getLogger(__name__).info(...)`
        return _makes_logger(receiver)
    if not isinstance(receiver, ast.Name):
        return False
    for stmt in module.body:
        if isinstance(stmt, ast.Import) and any((a.asname or a.name) == receiver.id and a.name == "logging"
                                                 for a in stmt.names):
            return True
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "loguru" and any(
                (a.asname or a.name) == receiver.id for a in stmt.names):
            return True
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(stmt.value, ast.Call) \
                and _makes_logger(stmt.value):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and t.id == receiver.id for t in targets):
                return True
    return False


def _makes_logger(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in ("getLogger", "get_logger")


LOGGING_HINT = ("move the logging call into a task (it then logs when that task runs, with the task's result at "
                "hand), or use `print(...)` here: a pipeline body prints task results and constants in the plain "
                "run's order")
