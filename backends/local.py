"""Local backend: the reference semantics. One process, tasks in a topological order.

The emitted program imports the user's modules by path and calls the task functions directly, so
its result is by definition what the pipeline computes; every other backend is compared with it.
It depends on nothing but the standard library and the user's code.
"""

from __future__ import annotations

from pathlib import Path

from dagc.backends.emitter import (
    CodeWriter,
    Names,
    call_source,
    module_search_paths,
    render_operand,
    source_root_expr,
)
from dagc.ir.core import Graph, Node

__all__ = ["emit_local", "emit_prologue", "emit_task_lines"]


def _members(node: Node) -> list[Node]:
    from dagc.ir.serialize import node_from_json

    return [node_from_json(m) for m in node.attrs.get("fuse.members", [])]


def emit_task_lines(w: CodeWriter, node: Node, names: Names, module_alias: dict[str, str]) -> None:
    """Statements that compute `node`'s outputs from its inputs, in the current scope."""
    if node.op == "fused":
        w.line(f"# fused group {node.name}: {', '.join(m.name for m in _members(node))}")
        for member in _members(node):
            emit_task_lines(w, member, names, module_alias)
        return
    if node.op == "transfer":
        w.line(f"{names[node.outputs[0]]} = {render_operand(node.args[0], names)}  # transfer {node.name}")
        return
    if node.op == "glue":
        from dagc.backends.glue import glue_source

        w.line(f"{names[node.outputs[0]]} = {glue_source(node, names)}  # {node.span}")
        return
    function = f"{module_alias[node.module]}.{node.function}"
    targets = ", ".join(names[o] for o in node.outputs)
    w.line(f"# {node.name}  ({node.span})")
    w.line(f"{targets} = {call_source(node, function, names)}")


def emit_prologue(w: CodeWriter, graph: Graph, out_path: Path | None, backend: str, summary: str) -> None:
    """Docstring, imports and the module-loading helper shared by every backend's program."""
    w.line('"""' + f"Pipeline `{graph.name}`, compiled by dagc from {graph.span.file} ({backend} backend).")
    w.line()
    w.block(summary)
    w.line('"""')
    w.line()
    w.line("from __future__ import annotations")
    w.line()


def _module_aliases(graph: Graph, names: Names) -> dict[str, str]:
    modules = sorted({n.module for n in graph if n.op == "task"}
                     | {m.module for n in graph if n.op == "fused" for m in _members(n)})
    return {m: names.claim(f"module:{m}", m.replace(".", "_")) for m in modules if m}


def emit_loader(w: CodeWriter, graph: Graph, out_path: Path | None, aliases: dict[str, str]) -> None:
    w.line(f"PIPELINE = {graph.name!r}")
    w.line(f"SOURCE_ROOT = {source_root_expr(graph, out_path)}")
    w.line(f"SEARCH_PATHS = {tuple(module_search_paths(graph))!r}")
    w.line(f"MODULES = {tuple(sorted(aliases))!r}")
    w.line()
    w.line()
    w.line("def load_modules(source_root: Path) -> dict[str, object]:")
    with w.indent():
        w.line('"""Import the pipeline\'s own modules from their source tree."""')
        w.line("for entry in reversed(SEARCH_PATHS):")
        with w.indent():
            w.line("path = str((source_root / entry).resolve())")
            w.line("if path not in sys.path:")
            with w.indent():
                w.line("sys.path.insert(0, path)")
        w.line("return {name: importlib.import_module(name) for name in MODULES}")


def emit_local(graph: Graph, out_path: Path | None = None) -> str:
    """The local program's source text for `graph`."""
    names = Names()
    aliases = _module_aliases(graph, names)
    order = graph.topological_order()
    w = CodeWriter()
    emit_prologue(w, graph, out_path, "local", f"Runs the pipeline's {len(order)} tasks in one process, in a "
                  "topological order.\nUsage: python THIS_FILE [--result PATH] [--source-root DIR]")
    w.line("import argparse")
    w.line("import importlib")
    w.line("import pickle")
    w.line("import sys")
    w.line("from pathlib import Path")
    w.line()
    emit_loader(w, graph, out_path, aliases)
    w.line()
    w.line()
    w.line("# the task calls run() makes, in order, as (target, task): names the events of --run-dir")
    w.line("CALLS = (")
    with w.indent():
        for target, task in _calls(graph, order):
            w.line(f"({target!r}, {task!r}),")
    w.line(")")
    w.line()
    w.line()
    w.line("def run(modules: dict[str, object]) -> object:")
    with w.indent():
        w.line('"""Run every task and return the pipeline\'s result."""')
        for module, alias in aliases.items():
            w.line(f"{alias} = modules[{module!r}]")
        for param in graph.params:
            w.line(f"{names[param.name]} = {render_operand(param.value, names)}  # parameter")
        for name in order:
            emit_task_lines(w, graph.node(name), names, aliases)
        returns = render_operand(graph.returns, names) if graph.returns is not None else "None"
        w.line(f"return {returns}")
    w.line()
    w.line()
    _emit_main(w, graph)
    return w.text()


def _calls(graph: Graph, order: list[str]) -> list[tuple[str, str]]:
    calls = []
    for name in order:
        node = graph.node(name)
        for task in _members(node) if node.op == "fused" else [node]:
            if task.op == "task":
                calls.append((task.target, task.name))
    return calls


def _emit_main(w: CodeWriter, graph: Graph) -> None:
    w.line("def main(argv: list[str] | None = None) -> int:")
    with w.indent():
        w.line("parser = argparse.ArgumentParser(description=f\"Run pipeline {PIPELINE!r} locally.\")")
        w.line('parser.add_argument("--result", type=Path, metavar="PATH",')
        w.line('                    help="write the pipeline\'s return value to PATH (pickle)")')
        w.line('parser.add_argument("--source-root", type=Path, default=SOURCE_ROOT, metavar="DIR",')
        w.line('                    help="directory of the pipeline\'s source files (default: %(default)s)")')
        w.line('parser.add_argument("--run-dir", type=Path, metavar="DIR",')
        w.line('                    help="record an event log of the run in DIR (needs dagc installed)")')
        w.line("args = parser.parse_args(argv)")
        w.line("modules = load_modules(args.source_root)")
        w.line("if args.run_dir is not None:")
        with w.indent():
            w.line("from dagc.runtime.instrument import Recorder")
            w.line()
            w.line("with Recorder(args.run_dir, PIPELINE, CALLS) as recorder:")
            with w.indent():
                w.line("result = recorder.finish(run(recorder.instrument(modules)))")
        w.line("else:")
        with w.indent():
            w.line("result = run(modules)")
        w.line("if args.result is not None:")
        with w.indent():
            w.line("args.result.parent.mkdir(parents=True, exist_ok=True)")
            w.line("args.result.write_bytes(pickle.dumps(result))")
        w.line("else:")
        with w.indent():
            w.line("print(repr(result))")
        w.line("return 0")
    w.line()
    w.line()
    w.line('if __name__ == "__main__":')
    with w.indent():
        w.line("sys.exit(main())")
