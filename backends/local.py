"""Local backend: the reference semantics. One process, tasks in a topological order.

The emitted program imports the user's modules by path and calls the task functions directly, so
its result is by definition what the pipeline computes; every other backend is compared with it.
It depends on nothing but the standard library and the user's code.
"""

from __future__ import annotations

from pathlib import Path

from dagc.backends.emitter import CodeWriter, Names, render_operand
from dagc.backends.toolkit import (
    emit_code_table,
    emit_prologue,
    emit_tables,
    emit_task_lines,
    module_aliases,
    used_values,
    uses_map,
)
from dagc.ir.core import Graph

__all__ = ["emit_local"]


def emit_local(graph: Graph, out_path: Path | None = None) -> str:
    """The local program's source text for `graph`."""
    from dagc.backends.fingerprint import final_state_groups, task_rows, try_body_rows

    names = Names({"rt", "Executor", "run_local", "TASKS", "SCRIPT", "CODE", "CODE_FILES", "FINAL_STATE"})
    names.used_values = used_values(graph)  # type: ignore[attr-defined]
    aliases = module_aliases(graph, names)
    order = graph.topological_order()
    w = CodeWriter()
    emit_prologue(w, graph, out_path, "local", f"Runs the pipeline's {len(order)} tasks in one process, in a "
                  "topological order, through dagc's task executor.\n"
                  "Usage: python THIS_FILE [--run-dir DIR | --resume RUN_DIR] [--cache DIR] [--result PATH] "
                  "[-- SCRIPT_ARGS...]")
    w.line("import sys")
    w.line("from pathlib import Path")
    w.line()
    w.line("from dagc.runtime.executor import Executor")
    w.line("from dagc.runtime.local import run_local")
    if uses_map(graph.nodes):
        w.line("from dagc.runtime.maps import map_items")
    w.line()
    emit_tables(w, graph, out_path, aliases, {**task_rows(graph, final_state=True), **try_body_rows(graph)})
    emit_code_table(w, graph)
    final = final_state_groups(graph)
    if final:  # the pipeline returns objects of these groups that tasks change after they were made
        w.line(f"FINAL_STATE = {final!r}  # state groups stored as they are at their end (dagc.runtime.executor)")
    w.line()
    w.line()
    w.line("def run(rt: Executor, modules: dict[str, object]) -> object:")
    with w.indent():
        w.line('"""Run every task and return the pipeline\'s result."""')
        for module, alias in aliases.items():
            w.line(f"{alias} = modules[{module!r}]")
        for param in graph.params:
            if param.name in names.used_values:  # type: ignore[attr-defined]
                w.line(f"{names[param.name]} = {render_operand(param.value, names)}  # parameter")
        names.task_verb = "task"  # type: ignore[attr-defined]
        for name in order:
            emit_task_lines(w, graph.node(name), names, aliases)
        returns = render_operand(graph.returns, names) if graph.returns is not None else "None"
        w.line(f"return {returns}")
    w.line()
    w.line()
    w.line("def main(argv: list[str] | None = None) -> int:")
    with w.indent():
        if final:
            w.line("return run_local(PIPELINE, run, TASKS, SOURCE_ROOT, SEARCH_PATHS, MODULES, SCRIPT, argv, CODE, "
                   "CODE_FILES,")
            w.line("                 final_state=FINAL_STATE)")
        else:
            w.line("return run_local(PIPELINE, run, TASKS, SOURCE_ROOT, SEARCH_PATHS, MODULES, SCRIPT, argv, CODE, "
                   "CODE_FILES)")
    w.line()
    w.line()
    w.line('if __name__ == "__main__":')
    with w.indent():
        w.line("sys.exit(main())")
    return w.text()
