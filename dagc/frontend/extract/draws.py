"""A library call that draws from (or seeds) a global random number generator, written in a pipeline body:
`random.seed(seed)`, `k = random.randint(1, 100)`, `np.random.seed(0)`. Plain Python runs it where the pipeline
runs, between the tasks around it; here it is a node of its own that draws from the same generator, which the
state analysis keeps in one process, in program order, with every task that draws from it."""

from __future__ import annotations

import ast

from dagc.frontend import library as lib
from dagc.frontend.extract.context import Context
from dagc.frontend.extract.values import Dyn, ExtractError, Scope, to_operand
from dagc.frontend.modules import ImportedModule, ImportedName, ModuleInfo
from dagc.ir.core import Node
from dagc.ir.facts import Effects
from dagc.ir.types import Ref, TaskOptions

__all__ = ["random_call"]


def random_call(cx: Context, call: ast.Call, scope: Scope, info: ModuleInfo) -> Dyn | None:
    """The node of `call` when it calls a library function that uses a global generator; None otherwise."""
    target = _library_target(call.func, scope, info)
    if target is None:
        return None
    module, function = target
    name = f"{module}.{function}"
    if name in lib.RNG_EXEMPT or not (name in lib.RNG_FUNCTIONS or name.startswith(lib.RNG_PREFIXES)):
        return None
    changed = _changed_in_place(name, call)
    if changed is not None:  # (the node would shuffle its own copy: the pipeline's value would stay as it was)
        arg = ast.unparse(changed)
        cx.sink.error("DAGC109", f"`{ast.unparse(call)}` changes `{arg}` in place: not supported in a pipeline body",
                      info.source.span(call),
                      hint=f"call it in a task that returns what it changes (`{ast.unparse(call)}`, then `return "
                      f"{arg}`) and bind the task's result to `{arg}`; the task draws in the plain run's order")
        raise ExtractError
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        cx.sink.error("DAGC109", f"`*args`/`**kwargs` in a call of `{ast.unparse(call.func)}` in a pipeline body",
                      info.source.span(call), hint="pass each argument by itself")
        raise ExtractError
    try:
        args = tuple(to_operand(cx.exprs.argument(a, scope, info)) for a in call.args)
        kwargs = tuple((k.arg, to_operand(cx.exprs.argument(k.value, scope, info))) for k in call.keywords
                       if k.arg is not None)
    except TypeError:
        cx.exprs.not_a_value(call, info)
        raise
    made = cx.node_name(scope.prefix + function.rpartition(".")[2] + scope.suffix)
    node = Node(made, "task", f"{module}:{function}", args, kwargs, (made,), (None,), TaskOptions(),
                info.source.span(call))
    node.effects = Effects(rng=f"`{ast.unparse(call.func)}` uses the global random number generator "
                           f"({info.source.display}:{call.lineno})", seeded=name in lib.SEEDING, fresh=True)
    cx.add_node(node)
    cx.last_task = node
    cx.pipeline_seeds = cx.pipeline_seeds or node.effects.seeded  # (later tasks' draws follow this seed)
    return Dyn(Ref(made))


def _changed_in_place(name: str, call: ast.Call) -> ast.expr | None:
    """The argument that `call` of library function `name` changes in place (`random.shuffle(xs)`), if any."""
    facts = lib.catalogue().library_function(name)
    if facts is None:
        return None
    return next((call.args[i] for i in facts.mutates if i < len(call.args)), None)


def _library_target(func: ast.expr, scope: Scope, info: ModuleInfo) -> tuple[str, str] | None:
    """(module, function) of `random.randint` / `np.random.seed` / `randint` imported from a library module."""
    attrs: list[str] = []
    while isinstance(func, ast.Attribute):
        attrs.insert(0, func.attr)
        func = func.value
    if not isinstance(func, ast.Name) or func.id in scope.env:
        return None
    symbol = info.symbols.get(func.id)
    if isinstance(symbol, ImportedModule) and attrs:
        return symbol.module, ".".join(attrs)
    if isinstance(symbol, ImportedName):
        return symbol.module, ".".join([symbol.name, *attrs])
    return None
