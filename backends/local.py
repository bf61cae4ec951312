"""Local backend: the reference semantics. One process, tasks in a topological order.

The emitted program imports the user's modules by path and calls the task functions directly, so
its result is by definition what the pipeline computes; every other backend is compared with it.
It depends on nothing but the standard library and the user's code.
"""

from __future__ import annotations

from pathlib import Path

from dagc.backends.emitter import CodeWriter, Names, dialect_imports, render_operand
from dagc.backends.fingerprint import key_values
from dagc.backends.toolkit import (
    emit_code_table,
    emit_main,
    emit_prologue,
    emit_tables,
    emit_task_lines,
    module_aliases,
    used_values,
    uses_map,
    with_outputs_used,
)
from dagc.ir.core import Graph, Node

__all__ = ["emit_local"]


def emit_local(graph: Graph, out_path: Path | None = None) -> str:
    """The local program's source text for `graph`."""
    from dagc.backends.fingerprint import final_state_groups, task_rows, try_body_rows

    names = Names({"rt", "Executor", "Pipeline", "TaskRow", "run_local", "TASKS", "SCRIPT", "CODE", "CODE_FILES",
                   "FINAL_STATE", "PIPELINE_SPEC"})
    read = used_values(graph)
    # a unit (below) computes every output, as a Ray or torch task does: its stored outputs are the same file
    names.used_values = with_outputs_used([n for n in graph.nodes if n.op in UNITS], read)  # type: ignore[attr-defined]
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
    for line in dialect_imports(graph.nodes):
        w.line(line)
    w.line("from dagc.runtime.executor import Executor")
    w.line("from dagc.runtime.lifecycle import Pipeline")
    w.line("from dagc.runtime.local import run_local")
    if uses_map(graph.nodes):
        w.line("from dagc.runtime.maps import map_items")
    w.line("from dagc.runtime.rows import TaskRow")
    w.line()
    rows = task_rows(graph, final_state=True)
    names.rows = rows  # type: ignore[attr-defined]  # (for the units keyed on what they read)
    emit_tables(w, graph, out_path, aliases, {**rows, **try_body_rows(graph)})
    emit_code_table(w, graph)
    final = final_state_groups(graph)
    if final:  # the pipeline returns objects of these groups that tasks change after they were made
        w.line(f"FINAL_STATE = {final!r}  # state groups stored as they are at their end (dagc.runtime.executor)")
    w.line("PIPELINE_SPEC = Pipeline(PIPELINE, SOURCE_ROOT, SEARCH_PATHS, MODULES, SCRIPT, TASKS, CODE, CODE_FILES"
           + (", FINAL_STATE)" if final else ")"))
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
            node = graph.node(name)
            if node.op in UNITS:
                _emit_unit(w, node, names, aliases, read)
            else:
                emit_task_lines(w, node, names, aliases)
        returns = render_operand(graph.returns, names) if graph.returns is not None else "None"
        w.line(f"return {returns}")
    w.line()
    w.line()
    emit_main(w, graph, "run_local(PIPELINE_SPEC, run, argv)")
    return w.text()


# fused groups and regions other than `try` (whose body's tasks are stored one by one): run as one task
UNITS = ("fused", "cond", "loop", "map")


def _emit_unit(w: CodeWriter, node: Node, names: Names, aliases: dict[str, str], read: set[str]) -> None:
    """A fused group or region as one task, `rt.region(name, function)`: its tasks run inside through
    `rt.call`, and the unit is stored and reused as a whole, like the task Ray and torch programs run.
    It returns every output; those nothing `read`s after it are unpacked into `_`."""
    function = names.claim(f"unit:{node.name}", f"{node.name}_unit")
    outputs = [names[o] for o in node.outputs]
    targets = [names[o] if o in read else "_" for o in node.outputs]
    w.line(f"# {node.name}: one task, stored and reused as a whole (its tasks run inside)")
    w.line(f"def {function}() -> object:")
    with w.indent():
        emit_task_lines(w, node, names, aliases)
        w.line(f"return {', '.join(outputs) or 'None'}")
    key = key_values(node, names.rows, names)  # type: ignore[attr-defined]
    if any(t != "_" for t in targets):
        w.line(f"{', '.join(targets)} = rt.region({node.name!r}, {function}{key})")
    else:
        w.line(f"rt.region({node.name!r}, {function}{key})")
