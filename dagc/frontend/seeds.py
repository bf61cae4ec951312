"""Seeds set under `if __name__ == "__main__":`, which dagc's programs never run.

A script often seeds the global random generators in its main block and then calls the pipeline:

    if __name__ == "__main__":
        torch.manual_seed(0)
        print(train())

Plain Python then runs every task that draws from those generators after the seed. dagc's emitted
programs call the pipeline themselves, without the main block, so such a task would see different
numbers: a silent difference. When the pipeline has a task that draws from a global generator
without seeding it, each seed in the main block (directly, or through a function of the module that
seeds) is DAGC156 at its line, with the forms that keep the plain run's numbers: seed at module level
(it runs in every process before any task, as in the plain run) or inside the task.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from dagc.diagnostics import DiagnosticSink, Note
from dagc.frontend.fix_edits import move_seed_fix
from dagc.frontend.library import SEEDING
from dagc.frontend.modules import ModuleInfo
from dagc.frontend.scan import is_main_guard
from dagc.frontend.values import module_qualified
from dagc.ir.core import Graph, Node
from dagc.ir.effects import node_effects
from dagc.ir.location import SourceSpan
from dagc.ir.regions import walk

__all__ = ["check_main_seeds"]

# the last part of a seeding function's name identifies it however it was imported, and from whatever module
# (`from utils import set_seed`, `L.seed_everything`), except plain `seed`, which many objects have
_SEEDING_NAMES = frozenset(name.rpartition(".")[2] for name in SEEDING) - {"seed"}


def _dotted(expr: ast.expr) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        base = _dotted(expr.value)
        return None if base is None else f"{base}.{expr.attr}"
    return None


def _seed_calls(stmts: list[ast.stmt], helpers: dict[str, ast.FunctionDef],
                info: ModuleInfo) -> Iterator[tuple[ast.Call, str]]:
    """Calls in `stmts` that seed a global generator (dagc.frontend.library.SEEDING, following the module's
    imports): directly, or through a module function that does."""
    for stmt in stmts:
        for node in ast.walk(stmt):
            if not isinstance(node, ast.Call):
                continue
            name = _dotted(node.func)
            if name is None:
                continue
            if module_qualified(node.func, info) in SEEDING or name.rpartition(".")[2] in _SEEDING_NAMES:
                yield node, name
            elif name in helpers and any(True for _ in _seed_calls(helpers[name].body, {}, info)):
                yield node, name


def _unseeded_draws(graph: Graph) -> list[Node]:
    """Tasks drawing from a global generator that no earlier task of the pipeline seeds (program
    order): their numbers depend on the state the process starts with."""
    out: list[Node] = []
    for node in (m for n in graph for m in (n, *walk(n))):
        if node.op != "task":
            continue
        eff = node_effects(node)
        if eff.rng and eff.seeded:
            break  # the pipeline seeds the generator itself (`seed_everything(seed)` as a task)
        if eff.rng:
            out.append(node)
    return out


def _called_names(stmts: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                dotted = _dotted(node.func)
                if dotted is not None:
                    names.update(dotted.split("."))
    return names


def _runs_pipeline(stmts: list[ast.stmt], pipeline: str, functions: dict[str, ast.FunctionDef]) -> bool:
    """Whether the main block calls the pipeline (`Flow.run`: the class or the method), directly or
    through a function of the module (`main()`)."""
    wanted = set(pipeline.split("."))
    called = _called_names(stmts)
    if called & wanted:
        return True
    return any(_called_names(functions[name].body) & wanted for name in called if name in functions)


def check_main_seeds(graph: Graph, info: ModuleInfo, sink: DiagnosticSink) -> None:
    """DAGC156 at each seed of the main block when a task draws from a global generator unseeded."""
    tree = info.source.tree
    guards = [stmt for stmt in tree.body if is_main_guard(stmt)]
    if not guards:
        return
    draws = _unseeded_draws(graph)
    if not draws:
        return
    # (calling the pipeline or a task is not seeding for the plain run only: the compiled run calls them too)
    helpers = {stmt.name: stmt for stmt in tree.body if isinstance(stmt, ast.FunctionDef)
               and stmt.name not in info.pipelines and stmt.name not in info.tasks}
    first = draws[0]
    every = {stmt.name: stmt for stmt in tree.body if isinstance(stmt, ast.FunctionDef)}
    for guard in guards:
        if not _runs_pipeline(guard.body, graph.name, every):
            continue  # the plain run of this pipeline is not this main block's
        for call, name in _seed_calls(guard.body, helpers, info):
            sink.error(
                "DAGC156", f"`{name}(...)` under `if __name__ == \"__main__\":` seeds the global random generator "
                "for the plain run only: dagc's programs call the pipeline without that block, so task "
                f"`{first.function}`, which draws from the generator, would get other numbers",
                info.source.span(call),
                notes=[Note(f"`{first.function}` is called here", first.span)] if isinstance(first.span, SourceSpan) else [],
                hint="seed at module level instead (`random.seed(0)` after the imports: it runs in every process "
                "dagc starts, before any task, as in the plain run), or pass the seed to the task and seed "
                "inside it, or draw from a generator (`random.Random(seed)`, `torch.Generator().manual_seed(seed)`)",
                fix=move_seed_fix(info.source, guard, call))
