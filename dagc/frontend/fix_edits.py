"""The fixes frontend diagnostics attach (dagc.fixes): built here from the syntax tree, so that each
diagnostic's call site only says which fix it proposes.

Every builder returns None when the edit would not be exact (a dialect's task, a seed that reads names of
the main block, a Kubeflow setter with no dagc option): the diagnostic then keeps its hint only.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable
from pathlib import Path

from dagc.diagnostics import DiagnosticSink
from dagc.fixes import (
    AddDecorator,
    DropAsync,
    Fix,
    GuardStatement,
    InsertStatement,
    MoveStatement,
    ReplaceExpression,
    SetOption,
)
from dagc.frontend.forms import kfp_options
from dagc.frontend.modules import ModuleInfo, TaskDef
from dagc.frontend.source import SourceFile, read_source
from dagc.ir.location import SourceSpan

__all__ = ["bare_decorator_fix", "declare_readonly_fix", "guard_call_fix", "import_dagc_fix", "kfp_fix",
           "move_seed_fix", "pipeline_decorator_fix", "plain_def_fix", "readonly_without", "rename_name_fix",
           "rename_option_fix", "static_method_fix", "task_option_fix"]


def _import_dagc(source: SourceFile) -> InsertStatement:
    """`import dagc` after the imports at the top of the file (after its docstring when it has none)."""
    after = 0
    for index, stmt in enumerate(source.tree.body):
        docstring = index == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
            and isinstance(stmt.value.value, str)
        if not (docstring or isinstance(stmt, (ast.Import, ast.ImportFrom))):
            break
        after = stmt.lineno
    return InsertStatement(SourceSpan(source.display, after, 1), "import dagc")


def import_dagc_fix(source: SourceFile) -> Fix:
    return Fix("add `import dagc`", (_import_dagc(source),))


def pipeline_decorator_fix(info: ModuleInfo, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Fix:
    """`@dagc.pipeline` on `fn` (spelled as the module imports dagc; `import dagc` added when it does not)."""
    local = sorted(name for name, kind in info.dagc_names.items() if kind == "pipeline")
    edits: list[AddDecorator | InsertStatement] = []
    if local:
        text = local[0]
    elif info.dagc_modules:
        text = f"{sorted(info.dagc_modules)[0]}.pipeline"
    else:
        text = "dagc.pipeline"
        edits.append(_import_dagc(info.source))
    edits.insert(0, AddDecorator(info.source.span(fn), text))
    return Fix(f"decorate `{fn.name}` with @{text}", tuple(edits))


def _task_decorator(task: TaskDef) -> ast.expr | None:
    """The `@dagc.task` decorator of a task written for dagc (`task`, `dagc.task`, with or without options)."""
    return None if task.dialect is not None else _dagc_task_decorator(task.node)


def _dagc_task_decorator(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.expr | None:
    for decorator in fn.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) \
            else None
        if name == "task":
            return decorator
    return None


def _option_edits(task: TaskDef, options: Iterable[tuple[str, str | None]]) -> tuple[SetOption, ...] | None:
    decorator = _task_decorator(task)
    if decorator is None:
        return None
    at = task.source.span(decorator)
    return tuple(SetOption(at, option, value) for option, value in options)


def task_option_fix(task: TaskDef, option: str, value: str | None) -> Fix | None:
    """Set (or, with None, remove) one option of `task`'s decorator: `readonly=['model']`, `pure=True`."""
    edits = _option_edits(task, [(option, value)])
    if edits is None:
        return None
    summary = f"remove `{option}=` from `{task.name}`" if value is None else \
        f"declare `{option}={value}` on `{task.name}`"
    return Fix(summary, edits)


def readonly_without(task: TaskDef, name: str) -> Fix | None:
    """Take `name` out of `task`'s `readonly=[...]`, the other names written as the user wrote them (the option
    goes when nothing is left in it)."""
    decorator = _task_decorator(task)
    given = next((k.value for k in decorator.keywords if k.arg == "readonly"), None) \
        if isinstance(decorator, ast.Call) else None
    if not isinstance(given, (ast.List, ast.Tuple, ast.Constant)):
        return None
    items = given.elts if isinstance(given, (ast.List, ast.Tuple)) else [given]
    rest = [ast.get_source_segment(task.source.text, item) or repr(item) for item in items
            if not (isinstance(item, ast.Constant) and item.value == name)]
    fix = task_option_fix(task, "readonly", f"[{', '.join(rest)}]" if rest else None)
    return None if fix is None else Fix(f"remove `{name}` from `readonly=` of `{task.name}`", fix.edits)


def rename_option_fix(source: SourceFile, call: ast.Call, keyword: ast.keyword, meant: str) -> Fix | None:
    """`@dagc.task(gpu=1)` → `@dagc.task(gpus=1)`: the option a misspelt keyword was close to."""
    if keyword.arg is None or any(k.arg == meant for k in call.keywords):
        return None
    value = ast.get_source_segment(source.text, keyword.value)
    if value is None or "\n" in value:
        return None
    at = source.span(call)
    return Fix(f"write `{meant}=` for `{keyword.arg}=`", (SetOption(at, keyword.arg, None), SetOption(at, meant, value)))


def rename_name_fix(source: SourceFile, name: ast.Name, meant: str) -> Fix:
    """An undefined name written as the defined one it is close to: `lod(n)` → `load(n)`."""
    return Fix(f"write `{meant}` for `{name.id}`", (ReplaceExpression(source.span(name), meant),))


def kfp_fix(source: SourceFile, call: ast.Call, chain: list[ast.Call], task: object) -> Fix | None:
    """Kubeflow's `train(x).set_cpu_limit("2")` → `train(x)`, with `cpus="2"` on the decorator of `task` (the
    step's callee), when every setter of the chain is a dagc option."""
    options = kfp_options(chain)
    step = chain[0].func.value  # type: ignore[attr-defined]
    base = ast.get_source_segment(source.text, step)
    if not isinstance(task, TaskDef) or not options or base is None:
        return None
    edits = _option_edits(task, sorted(options.items()))
    if edits is None:
        return None
    declared = ", ".join(f"{k}={v}" for k, v in sorted(options.items()))
    return Fix(f"declare `{declared}` on `{task.name}` and call it plainly",
               (ReplaceExpression(source.span(call), base), *edits))


def _bound_in(stmts: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
    return names


def move_seed_fix(source: SourceFile, guard: ast.If, call: ast.Call) -> Fix | None:
    """A seed of the main block moved to module level, just above `if __name__ == "__main__":` (so it runs in
    every process, before any task, as in the plain run): when it is a statement of its own there and reads no
    name the block binds, and what it calls is defined above the block."""
    stmt = next((s for s in guard.body if isinstance(s, ast.Expr) and s.value is call), None)
    if stmt is None or len(guard.body) < 2:
        return None
    used = {n.id for n in ast.walk(call) if isinstance(n, ast.Name)}
    if used & _bound_in(guard.body):
        return None
    later = _bound_in([s for s in source.tree.body if s.lineno > guard.lineno])
    if used & later:
        return None
    segment = ast.get_source_segment(source.text, call) or "the seed"
    return Fix(f"move `{segment}` above `if __name__ == \"__main__\":`",
               (MoveStatement(source.span(stmt), guard.lineno),))


def _function(tree: ast.Module, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    body: list[ast.stmt] = tree.body
    found: ast.AST | None = None
    for part in qualname.split("."):
        found = next((s for s in body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and s.name == part), None)
        if found is None:
            return None
        body = found.body
    return found if isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


# methods that change their object in place, on the builtin containers
_CHANGING_METHODS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault",
                               "popitem", "add", "discard", "sort", "reverse"})


def _changes_visibly(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """Whether `fn`'s body assigns into, deletes from or calls a changing method of its parameter `name`."""
    def root(expr: ast.expr) -> str | None:
        while isinstance(expr, (ast.Subscript, ast.Attribute)):
            expr = expr.value
        return expr.id if isinstance(expr, ast.Name) else None

    for node in ast.walk(fn):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in _CHANGING_METHODS:
            targets = [ast.Subscript(node.func.value)]
        if any(isinstance(t, (ast.Subscript, ast.Attribute)) and root(t) == name for t in targets):
            return True
    return False


def declare_readonly_fix(path: Path, qualname: str, names: list[str]) -> Fix | None:
    """`readonly=[...]` with `names` added, on task `qualname` of the file at `path` (read and parsed here: what
    a run recorded is compared with the compiled graph, which keeps no syntax)."""
    source = read_source(path, str(path), DiagnosticSink())  # (what it cannot read or parse, compiling says)
    if source is None:
        return None
    text = source.text
    fn = _function(source.tree, qualname)
    decorator = _dagc_task_decorator(fn) if fn is not None else None
    if fn is None or decorator is None or any(_changes_visibly(fn, name) for name in names):
        return None  # (a change the body shows but the runs never made: the declaration would be wrong)
    declared = next((k.value for k in decorator.keywords if k.arg == "readonly"), None) \
        if isinstance(decorator, ast.Call) else None
    if declared is not None and not isinstance(declared, (ast.List, ast.Tuple)):
        return None
    items = [ast.get_source_segment(text, e) or "" for e in declared.elts] if declared is not None else []
    items += [json.dumps(name) for name in names]
    value = f"[{', '.join(items)}]"
    return Fix(f"declare `readonly={value}` on `{fn.name}`", (SetOption(source.span(decorator), "readonly", value),))


def guard_call_fix(source: SourceFile, stmt: ast.stmt) -> Fix | None:
    """A top-level call (`main()`, `result = main()`) put under `if __name__ == "__main__":`, with the statements
    right after it that read what it binds (`print(result)`), so that importing the module no longer runs it:
    when nothing else at module level reads those names."""
    from dagc.frontend.scan import is_main_guard  # (scan builds its own fixes here)

    body = source.tree.body
    if stmt not in body:
        return None
    group = [stmt]
    bound = _stored(stmt)
    for after in body[body.index(stmt) + 1:]:
        if not (isinstance(after, _SIMPLE) and bound & _read(after)):
            break
        group.append(after)
        bound |= _stored(after)
    readers = [s for s in body if s not in group and not is_main_guard(s)]
    if any(bound & _read(s) for s in readers):
        return None
    segment = ast.get_source_segment(source.text, stmt) or "the call"
    return Fix(f"call `{segment}` under `if __name__ == \"__main__\":`",
               tuple(GuardStatement(source.span(s)) for s in group))


_SIMPLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign)


def _stored(stmt: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}


def _read(stmt: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _awaits(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(n, (ast.Await, ast.AsyncFor, ast.AsyncWith, ast.Yield, ast.YieldFrom))
               for n in ast.walk(fn))


# what takes the coroutine an async function's call gives (`asyncio.run(main())`)
_COROUTINE_TAKERS = frozenset({"run", "gather", "create_task", "ensure_future", "wait_for", "shield",
                               "run_until_complete", "run_coroutine_threadsafe", "wait"})


def _takes_coroutine(value: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """Whether `value` is awaited or given to what runs a coroutine (`asyncio.run(value)`)."""
    outer = parents.get(id(value))
    return isinstance(outer, ast.Await) or isinstance(outer, ast.Call) and outer.func is not value and \
        ast.unparse(outer.func).rpartition(".")[2] in _COROUTINE_TAKERS


def plain_def_fix(source: SourceFile, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Fix | None:
    """`async def` → `def`, for a function that awaits nothing and that the module only calls (no `await`, no
    `asyncio.run(...)` or other use of the coroutine a call gives)."""
    if not isinstance(fn, ast.AsyncFunctionDef) or _awaits(fn):
        return None
    parents = {id(child): node for node in ast.walk(source.tree) for child in ast.iter_child_nodes(node)}
    kept: set[str] = set()  # names the coroutine of a call is stored under (`pending = main()`)
    for node in ast.walk(source.tree):
        if not (isinstance(node, ast.Name) and node.id == fn.name and isinstance(node.ctx, ast.Load)):
            continue
        use: ast.AST = node
        parent = parents.get(id(use))
        if isinstance(parent, ast.Attribute) and parent.attr in ("submit", "map"):  # Prefect's `t.submit(x)`
            use, parent = parent, parents.get(id(parent))
        if not (isinstance(parent, ast.Call) and parent.func is use) or _takes_coroutine(parent, parents):
            return None
        holder = parents.get(id(parent))
        if isinstance(holder, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
            kept |= _stored(holder)
    if any(isinstance(node, ast.Name) and node.id in kept and isinstance(node.ctx, ast.Load)
           and _takes_coroutine(node, parents) for node in ast.walk(source.tree)):
        return None  # (`asyncio.run(pending)`)
    return Fix(f"write `{fn.name}` as a plain `def` (it awaits nothing)", (DropAsync(source.span(fn)),))


def bare_decorator_fix(source: SourceFile, decorator: ast.expr) -> Fix | None:
    """`@step(...)` → `@step`: the decorator without the arguments it does not take."""
    if not isinstance(decorator, ast.Call):
        return None
    name = ast.get_source_segment(source.text, decorator.func)
    if name is None:
        return None
    return Fix(f"write a bare `@{name}`", (ReplaceExpression(source.span(decorator), name),))


def static_method_fix(source: SourceFile, method: ast.FunctionDef | ast.AsyncFunctionDef) -> Fix | None:
    """`@staticmethod` under the dagc decorator of a method that takes no parameter (so it needs no instance)."""
    if method.args.posonlyargs or method.args.args or method.args.vararg is not None or any(
            isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod") for d in method.decorator_list):
        return None
    return Fix(f"declare `{method.name}` a @staticmethod",
               (AddDecorator(source.span(method), "staticmethod", innermost=True),))
