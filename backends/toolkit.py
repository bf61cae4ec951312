"""What every backend's emitted program shares: the statements that run a task or a region (`cond`, `loop`,
`map`, `try`) in plain Python, which the local program is made of and which Ray and torch programs use inside
a task (a region's body, a fused group); the prologue, the tables (`TASKS` of typed rows, `CODE`); and
what those need to know of a graph (the values used, a fused group's members, the modules tasks come from).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from dagc.backends.emitter import (
    CodeWriter,
    Names,
    call_source,
    module_search_paths,
    prose,
    render_operand,
    source_root_expr,
    task_function,
)
from dagc.ir.core import SCRIPT_ARGUMENTS_ATTR, Graph, Node, region_bodies
from dagc.ir.regions import max_trips, members

__all__ = ["emit_task_lines", "emit_argument_table", "emit_argument_check", "emit_prologue", "emit_tables", "emit_code_table", "emit_task_table", "task_row_source",
           "emit_map", "emit_map_collect", "map_items_call", "map_target", "uses_map", "used_values",
           "with_outputs_used", "fused_members", "module_aliases", "task_modules", "loaded_modules", "region_body",
           "region_yields", "region_inits", "script_path"]


def fused_members(node: Node) -> list[Node]:
    """The tasks a fused node runs, in order."""
    return members(node)


def emit_task_lines(w: CodeWriter, node: Node, names: Names, module_alias: dict[str, str]) -> None:
    """Statements that compute `node`'s outputs from its inputs, in the current scope."""
    if node.op == "fused":
        w.line(f"# fused group {node.name}: {', '.join(m.name for m in fused_members(node))}")
        with _inner_calls(names):
            for member in fused_members(node):
                emit_task_lines(w, member, names, module_alias)
        return
    if node.op == "transfer":
        w.line(f"{names[node.outputs[0]]} = {render_operand(node.args[0], names)}  # transfer {node.name}")
        return
    if node.op == "glue":
        from dagc.backends.glue import glue_source

        used = getattr(names, "used_values", None)
        target = "" if used is not None and node.outputs[0] not in used else f"{names[node.outputs[0]]} = "
        w.line(f"{target}{glue_source(node, names)}  # {node.span}")  # (no target: a pipeline's own print)
        return
    if node.op == "cond":
        with _inner_calls(names):
            _emit_cond(w, node, names, module_alias)
        return
    if node.op == "loop":
        with _inner_calls(names):
            _emit_loop(w, node, names, module_alias)
        return
    if node.op == "try":  # its body's tasks are stored like top-level ones (backends/fingerprint.py)
        _emit_try(w, node, names, module_alias)
        return
    if node.op == "map":
        with _inner_calls(names):
            emit_map(w, node, names, module_alias)
        return
    function = task_function(node, module_alias[node.module])
    call = call_source(node, function, names)
    verb = getattr(names, "task_verb", None)
    if verb:  # through the executor: `rt.task("name", fn, args...)` (retries, timeout, events, store)
        inner = call[len(function) + 1 : -1]
        call = f"rt.{verb}({node.name!r}, {function}{', ' + inner if inner else ''})"
    w.line(f"# {node.name}  ({node.span})")
    used = getattr(names, "used_values", None)
    if used is not None and not any(o in used for o in node.outputs):
        w.line(call)  # result unused (ordered by file or `after` edges)
        return
    # an output nobody reads is unpacked into `_`, which says so and keeps linters quiet
    targets = ", ".join(names[o] if used is None or o in used else "_" for o in node.outputs)
    w.line(f"{targets} = {call}")


@contextlib.contextmanager
def _inner_calls(names: Names) -> Iterator[None]:
    """Tasks inside a fused group or a region run through the executor without being stored
    (`rt.call`): a loop runs them anew on each trip."""
    verb = getattr(names, "task_verb", None)
    if verb:
        names.task_verb = "call"  # type: ignore[attr-defined]
    try:
        yield
    finally:
        if verb:
            names.task_verb = verb  # type: ignore[attr-defined]


def region_body(node: Node, key: str) -> list[Node]:
    return region_bodies(node).get(key, [])


def region_yields(node: Node, body: str) -> list:
    """What body `body` of region `node` yields ([] when it yields nothing)."""
    return list(node.region.yields.get(body, ())) if node.region is not None else []


def region_inits(node: Node) -> list:
    """A map's initial lists, one per output."""
    return list(node.region.init) if node.region is not None else []


def _block_args(node: Node) -> list[str]:
    """The block arguments of a loop's or a map's body: its carried values, its item names."""
    return list(node.region.args.get("body", ())) if node.region is not None else []


def _assign_line(w: CodeWriter, targets: list[str], operands: list, names: Names) -> None:
    pairs = [(t, render_operand(o, names)) for t, o in zip(targets, operands)]
    pairs = [(t, v) for t, v in pairs if t != v]
    if pairs:
        w.line(f"{', '.join(t for t, _ in pairs)} = {', '.join(v for _, v in pairs)}")


def used_values(graph: Graph) -> set[str]:
    """Every value name read anywhere: by a node, inside a region or fused group, or returned."""
    from dagc.ir.regions import payload_operands
    from dagc.ir.types import iter_refs

    used: set[str] = set(graph.output_values())
    tries: list[Node] = []  # outer before inner

    def visit(nodes: list[Node]) -> None:
        for n in nodes:
            used.update(n.input_values())
            if n.op == "fused":
                visit(fused_members(n))
            if n.op == "try":
                tries.append(n)
            for body in region_bodies(n).values():
                visit(body)
            if n.op in ("cond", "loop", "map"):  # (a try's yields count only where its output is read, below)
                for o in payload_operands(n):
                    used.update(iter_refs(o))

    visit(graph.nodes)
    _add_try_yields(tries, used)
    return used


def _add_try_yields(tries: list[Node], used: set[str]) -> None:
    """A try assigns only the outputs something reads (`_emit_try`): what those read is used too.
    `tries` lists outer regions before inner ones."""
    from dagc.ir.types import iter_refs

    for n in tries:
        yields = region_yields(n, "body") + region_yields(n, "finally")
        for output, operand in zip(n.outputs, yields):
            if output in used:
                used.update(iter_refs(operand))


def with_outputs_used(nodes: list[Node], used: set[str]) -> set[str]:
    """`used` plus every output of `nodes` and what computing them reads (a node run as one task, a
    region or a fused group, returns all its outputs)."""
    from dagc.ir.regions import walk

    out = used | {v for n in nodes for v in n.outputs}
    _add_try_yields([m for n in nodes for m in (n, *walk(n)) if m.op == "try"], out)
    return out


def _output_targets(node: Node, names: Names) -> list[str]:
    """Identifiers for a region's outputs; `_` for outputs nothing reads (keeps the program lint-clean)."""
    used = getattr(names, "used_values", None)
    return [names[o] if used is None or o in used else "_" for o in node.outputs]


def _emit_cond(w: CodeWriter, node: Node, names: Names, module_alias: dict[str, str]) -> None:
    """A `cond` region: `if pred:` then-body, else-body, each assigning the region's outputs."""
    pred = render_operand(node.args[0], names)
    outputs = _output_targets(node, names)
    w.line(f"# {node.name}  ({node.span})")
    w.line(f"if {pred}:")
    for label in ("then", "else"):
        if label == "else":
            w.line("else:")
        with w.indent():
            start = len(w.lines)
            for inner in region_body(node, label):
                emit_task_lines(w, inner, names, module_alias)
            yields = region_yields(node, label)
            if yields and any(o != "_" for o in outputs):
                kept = [(t, y) for t, y in zip(outputs, yields) if t != "_"]
                _assign_line(w, [t for t, _ in kept], [y for _, y in kept], names)
            elif outputs[0] != "_":
                w.line(f"{outputs[0]} = None")
            elif all(not line.strip() or line.lstrip().startswith("#") for line in w.lines[start:]):
                w.line("pass")  # (only where the branch has no statement of its own: a print needs none)


def _emit_try(w: CodeWriter, node: Node, names: Names, module_alias: dict[str, str]) -> None:
    """A `try` region: `try:` body, `finally:` finally body, each assigning the outputs it yields (the
    body's first, then the finally body's). A failure in the body runs the finally body, then goes on."""
    outputs = _output_targets(node, names)
    from dagc.ir.regions import bodies

    found = bodies(node)
    n_body = len(region_yields(node, "body"))
    w.line(f"# {node.name}  ({node.span})")
    if outputs[0] != "_" and not region_yields(node, "body") and not region_yields(node, "finally"):
        w.line(f"{outputs[0]} = None")
    for label, targets in (("body", outputs[:n_body]), ("finally", outputs[n_body:])):
        w.line("try:" if label == "body" else "finally:")
        with w.indent(), (_inner_calls(names) if label == "finally" else contextlib.nullcontext()):
            lines = len(w.lines)
            for inner in found.get(label, []):
                once = _acts_once(inner, names) if label == "finally" else None
                if once is None:
                    emit_task_lines(w, inner, names, module_alias)
                    continue
                w.line(f"if rt.rank == {once}:  # {inner.name} acts on the world: once, on the region's first rank")
                with w.indent():
                    emit_task_lines(w, inner, names, module_alias)
                unset = [names[o] for o in inner.outputs if getattr(names, "used_values", None) is None
                         or o in names.used_values]  # type: ignore[attr-defined]
                if unset:
                    w.line("else:")
                    with w.indent():
                        w.line(f"{' = '.join(unset)} = None")
            yields = region_yields(node, label)
            kept = [(t, y) for t, y in zip(targets, yields) if t != "_"]
            if kept:
                _assign_line(w, [t for t, _ in kept], [y for _, y in kept], names)
            if len(w.lines) == lines:
                w.line("pass")


def _acts_once(node: Node, names: Names) -> int | None:
    """In a try region that runs on several ranks (torch: it holds a multi-rank task), a single-rank
    finally task that acts on the world (a notice, a cleanup) runs once, on the region's first rank,
    as it does in plain Python: that rank (`names.once_rank`), or None where the task runs as usual."""
    from dagc.ir.effects import has_effects

    once_rank = getattr(names, "once_rank", None)
    if once_rank is None or node.op != "task" or node.options.ranks > 1 or not has_effects(node):
        return None
    return int(once_rank)


def _emit_loop(w: CodeWriter, node: Node, names: Names, module_alias: dict[str, str]) -> None:
    """A `loop` region: at most len(iter) trips of the body, leaving early when the break value is true."""
    carried_ir = _block_args(node)
    used = getattr(names, "used_values", None)
    # a carried value nothing reads (inside the body or after the loop) need not be carried
    keep = [k for k, c in enumerate(carried_ir)
            if used is None or k == 0 or c in used or node.outputs[k] in used]
    carried = [names[carried_ir[k]] for k in keep]
    inits = [node.args[k] for k in keep]
    body = region_body(node, "body")
    assert node.region is not None and node.region.iter is not None  # verified
    brk = node.region.exit
    at = brk.at if brk else len(body)
    w.line(f"# {node.name}: at most {max_trips(node)} trips  ({node.span})")
    _assign_line(w, carried, inits, names)
    index = carried[0] if carried else "_"
    w.line(f"for {index} in {render_operand(node.region.iter, names)}:")
    with w.indent():
        for inner in body[:at]:
            emit_task_lines(w, inner, names, module_alias)
        if brk:
            w.line(f"if {render_operand(brk.cond, names)}:")
            with w.indent():
                _assign_line(w, carried, [brk.values[k] for k in keep], names)
                w.line("break")
        for inner in body[at:]:
            emit_task_lines(w, inner, names, module_alias)
        yields = region_yields(node, "body")
        _assign_line(w, carried, [yields[k] for k in keep], names)
    outputs = [_output_targets(node, names)[k] for k in keep] if carried_ir else _output_targets(node, names)
    kept = [(o, c) for o, c in zip(outputs, carried) if o != "_"]
    if kept:
        w.line(f"{', '.join(o for o, _ in kept)} = {', '.join(c for _, c in kept)}")
    elif not carried and outputs[0] != "_":
        w.line(f"{outputs[0]} = None")


def map_items_call(node: Node, names: Names, record: bool = True) -> str:
    """`map_items(...)`: the items of a map region, checked against its `max_items`; `record=False`
    where the runner that spreads the items records the map's width itself."""
    over = [render_operand(o, names) for o in node.args[: node.attrs.get("region.over", 1)]]
    extra = []
    if node.attrs.get("region.method") is not None:
        extra.append(f"method={node.attrs['region.method']!r}")
    if node.attrs.get("region.enumerate") is not None:
        extra.append(f"start={node.attrs['region.enumerate']!r}")
    if node.attrs.get("region.max_items") is not None:
        extra.append(f"max_items={node.attrs['region.max_items']!r}")
    if not record:
        extra.append("record=False")
    where = f"{node.span.file}:{node.span.line}"
    return f"map_items({', '.join([repr(node.name), repr(where), *over, *extra])})"


def map_target(node: Node, names: Names) -> str:
    """The loop variable(s) of a map: one name takes the item, several unpack it."""
    return ", ".join(names[a] for a in _block_args(node))


def emit_map_collect(w: CodeWriter, node: Node, names: Names, targets: list[str]) -> int:
    """After one item's body: append what the item yields to each output that is read. Returns the
    number of lines written."""
    from dagc.ir.types import Seq

    written = 0
    for target, y in zip(targets, region_yields(node, "body")):
        if target == "_" or not isinstance(y, Seq) or not y.items:
            continue
        if len(y.items) == 1:
            w.line(f"{target}.append({render_operand(y.items[0], names)})")
        else:
            w.line(f"{target}.extend({render_operand(y, names)})")
        written += 1
    return written


def emit_map(w: CodeWriter, node: Node, names: Names, module_alias: dict[str, str]) -> None:
    """A `map` region run in this process: its body once per item, in item order (plain Python's loop)."""
    targets = _output_targets(node, names) if region_yields(node, "body") else []
    w.line(f"# {node.name}: one trip per item  ({node.span})")
    from dagc.ir.types import Seq

    for target, init in zip(targets, region_inits(node)):
        if target != "_":  # a list literal is a new list already
            start = render_operand(init, names)
            w.line(f"{target} = {start if isinstance(init, Seq) and init.kind == 'list' else f'list({start})'}")
    w.line(f"for {map_target(node, names)} in {map_items_call(node, names)}:")
    with w.indent():
        body = region_body(node, "body")
        for inner in body:
            emit_task_lines(w, inner, names, module_alias)
        if not emit_map_collect(w, node, names, targets) and not body:
            w.line("pass")
    if not targets:
        out = _output_targets(node, names)[0]
        if out != "_":
            w.line(f"{out} = None")


def uses_map(nodes: list[Node]) -> bool:
    """True when a `map` region is among `nodes` or inside them (the program imports map_items)."""
    from dagc.ir.regions import walk

    return any(n.op == "map" or any(inner.op == "map" for inner in walk(n)) for n in nodes)


def task_modules(nodes: list[Node]) -> set[str]:
    """Modules of every task, looking inside fused groups and regions."""
    out: set[str] = set()
    for n in nodes:
        if n.op == "task" and n.module:
            out.add(n.module)
        elif n.op == "fused":
            out |= task_modules(fused_members(n))
        else:
            for body in region_bodies(n).values():
                out |= task_modules(body)
    return out


def emit_prologue(w: CodeWriter, graph: Graph, out_path: Path | None, backend: str, summary: str) -> None:
    """Docstring, imports and the module-loading helper shared by every backend's program."""
    w.line('"""' + f"Pipeline `{prose(graph.name)}`, compiled by dagc from {prose(graph.span.file)} ({backend} backend).")
    w.line()
    w.block(summary)
    w.line('"""')
    w.line()
    w.line("from __future__ import annotations")
    w.line()


def loaded_modules(graph: Graph, aliases: dict[str, str]) -> tuple[str, ...]:
    """The modules a program imports, the pipeline's own script first: its module-level code (a seed,
    `torch.set_num_threads`, settings) runs before anything else, as under `python script.py`, even when
    it defines no task."""
    entry = (graph.module,) if graph.module else ()
    return (*entry, *sorted(m for m in aliases if m != graph.module))


def module_aliases(graph: Graph, names: Names) -> dict[str, str]:
    modules = sorted(task_modules(graph.nodes))
    return {m: names.claim(f"module:{m}", m.replace(".", "_")) for m in modules if m}


def emit_tables(w: CodeWriter, graph: Graph, out_path: Path | None, aliases: dict[str, str],
                rows: dict[str, tuple]) -> None:
    """Where the pipeline's sources are, and the executor's table of tasks."""
    w.line(f"PIPELINE = {graph.name!r}")
    w.line(f"SOURCE_ROOT = {source_root_expr(graph, out_path)}")
    w.line(f"SEARCH_PATHS = {tuple(module_search_paths(graph))!r}")
    w.line(f"MODULES = {loaded_modules(graph, aliases)!r}")
    w.line(f"SCRIPT = {script_path(graph)!r}  # sys.argv[0] of the user's code, relative to SOURCE_ROOT")
    emit_task_table(w, rows)


def emit_argument_table(w: CodeWriter, graph: Graph) -> None:
    """The parser of the script's own arguments a pipeline body builds, and the values it was compiled for."""
    spec = graph.attrs.get(SCRIPT_ARGUMENTS_ATTR)
    if spec is not None:
        w.line("# the script's argparse parser and the values the pipeline was compiled for (dagc.runtime.arguments)")
        w.line(f"SCRIPT_ARGUMENTS = {spec!r}")
        w.line()
        w.line()


def emit_main(w: CodeWriter, graph: Graph, call: str) -> None:
    """The program's end: the script's argument table, `main` (which checks the script's arguments, then returns
    `call`, the runtime's entry point) and the `__main__` guard; every backend's program ends the same way."""
    emit_argument_table(w, graph)
    w.line("def main(argv: list[str] | None = None) -> int:")
    with w.indent():
        emit_argument_check(w, graph)
        w.line(f"return {call}")
    w.line()
    w.line()
    w.line('if __name__ == "__main__":')
    with w.indent():
        w.line("sys.exit(main())")


def emit_argument_check(w: CodeWriter, graph: Graph) -> None:
    """In `main`: parse the script's arguments again, as the plain script would, before anything runs."""
    if SCRIPT_ARGUMENTS_ATTR in graph.attrs:
        w.line("from dagc.runtime.arguments import check_script_arguments")
        w.line()
        w.line("check_script_arguments(SCRIPT_ARGUMENTS, argv, SCRIPT)")


def emit_code_table(w: CodeWriter, graph: Graph) -> None:
    """What the program hashes when it starts, so that edited code is recomputed (dagc.runtime.code)."""
    from dagc.backends.fingerprint import code_table

    table, files = code_table(graph)
    w.line("# task: (the code it runs, the tasks its fingerprint chains, that code's digest when emitted);")
    w.line("# hashed again when the program starts: edited code is recomputed (dagc.runtime.code)")
    w.line("CODE = {")
    with w.indent():
        for name, row in table.items():
            w.line(f"{name!r}: {row!r},")
    w.line("}")
    w.line(f"CODE_FILES = {files!r}")


def emit_task_table(w: CodeWriter, rows: dict[str, tuple], name: str = "TASKS", where: str = "") -> None:
    """The table of tasks (backends/fingerprint.py `task_rows`) as every program has it: one typed row per task
    (dagc.runtime.rows.TaskRow), each field that is not its default named."""
    w.line("# task: TaskRow(fingerprint, retries, timeout in seconds, cache (True, or why not), state group, what it")
    w.line("#        may change: (parameters, parameters it changes, random draws, files, module names), the threads its")
    w.line("#        cpus= declares, the bytes its memory= declares); see dagc.runtime.rows")
    if where:
        w.line(where)
    w.line(f"{name} = {{")
    with w.indent():
        for task, row in rows.items():
            w.line(f"{task!r}: {task_row_source(row)},")
    w.line("}")


def task_row_source(row: tuple) -> str:
    """`TaskRow('fingerprint', retries=1, ...)`: a row as the constructor call that makes it."""
    from dagc.runtime.rows import TaskRow

    typed = TaskRow.of(row)
    defaults = TaskRow._field_defaults
    named = [f"{field}={value!r}" for field, value in zip(TaskRow._fields[1:], typed[1:])
             if value != defaults[field] or type(value) is not type(defaults[field])]
    return f"TaskRow({', '.join([repr(typed.fingerprint), *named])})"


def script_path(graph: Graph) -> str:
    """The pipeline's script, relative to the source root (what `python SCRIPT` would run)."""
    file = graph.modules.get(graph.module) if graph.module else None
    return Path(file).as_posix() if file else Path(graph.span.file).name
