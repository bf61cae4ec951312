"""torch.distributed backend: one program, launched by torchrun, in which each rank runs its share.

The partitioned, scheduled graph is turned into a communication plan
(`dagc.passes.commcheck.plan_communication`): a global order of task steps and point-to-point
moves, projected onto the ranks. The plan is checked for deadlocks (`check_plan`) before anything
is written; an order that could block is a compiler error, never a hung job. The program holds:

    TASKS   task → TaskRow(fingerprint, retries, ..., ranks, inputs, outputs)  (dagc.runtime.rows)
    MOVES   tag  → (value, value on the receiver, src, dst, static tensor (dtype, shape) or None)
    STAGES  task → stage of each layer, for pipeline-parallel training steps (see `pipeline_steps`)
    rank_0(rt, modules), rank_1(rt, modules), …   straight-line code, one function per rank

and ends with `torch_main(PIPELINE_SPEC, PLAN, argv, __file__)` (dagc.runtime.torchengine): the one program
lifecycle of dagc.runtime.lifecycle, each rank's function run by `dagc.runtime.distributed.Runner` (process
group, transfers, checkpoints, events).
A `cond`/`loop`/`try` region, a fused group and a glue node are each one task of their rank; a region's
body is the local backend's code for it (the reference semantics): a `try` region's finally tasks run
on its rank whether its body succeeds or fails, then the failure ends the job as any task's does.
`python PROGRAM.py` starts torchrun itself with the compiled number of ranks; `torchrun
--nproc-per-node N PROGRAM.py` (and `--nnodes`, `--max-restarts`) works as usual.
"""

from __future__ import annotations

import re
from pathlib import Path

from dagc.backends import REGISTRY as _REGISTRY
from dagc.backends.emitter import (
    CodeWriter,
    Names,
    call_source,
    dialect_imports,
    module_search_paths,
    render_operand,
    source_root_expr,
    task_function,
)
from dagc.backends.fingerprint import key_values
from dagc.backends.glue import glue_source
from dagc.backends.toolkit import (
    emit_code_table,
    emit_main,
    emit_prologue,
    emit_task_lines,
    emit_task_table,
    fused_members,
    loaded_modules,
    module_aliases,
    script_path,
    task_modules,
    used_values,
    uses_map,
    with_outputs_used,
)
from dagc.ir.core import REGION_OPS, Graph, Node
from dagc.ir.facts import reduction_of
from dagc.ir.types import Ref, Seq
from dagc.passes.commcheck import (
    CommPlan,
    Op,
    Step,
    check_plan,
    is_order_token,
    node_ranks,
    plan_communication,
    problems_to_diagnostics,
)
from dagc.runtime.rows import TaskRow

__all__ = ["emit_torch", "REQUIRED_PASSES", "PIPELINE_PASSES", "static_tensor", "fingerprints", "pipeline_steps",
           "CommunicationError"]

# The pass pipeline `dagc emit/run --backend torch` should run (with a cluster: placement first).
REQUIRED_PASSES: str = _REGISTRY["torch"].required_passes or ""
# For a pipeline-parallel model: `stages` places the layers instead of `partition` (K = 2 here).
PIPELINE_PASSES = "verify,dce,cse,stages{k=2},comm,commcheck"

_STATIC = re.compile(r"^(?:torch\.)?Tensor\[\s*(\w+)\s*((?:,\s*\d+\s*)*)\]$")
_DTYPE_NAMES = {"float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
                "complex64", "complex128", "float", "double", "half", "long", "int"}
_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "long": "int64", "int": "int32"}


class CommunicationError(ValueError):
    """The graph's communication plan could block; carries the diagnostics."""

    def __init__(self, diagnostics: list) -> None:
        self.diagnostics = diagnostics
        super().__init__("; ".join(d.message for d in diagnostics))


def static_tensor(type_text: str | None) -> tuple[str, tuple[int, ...]] | None:
    """`"Tensor[float32, 1024, 64]"` → `("float32", (1024, 64))`; None when shape/dtype are not static."""
    if not type_text:
        return None
    match = _STATIC.match(type_text.strip().strip("'\""))
    if not match or match.group(1) not in _DTYPE_NAMES:
        return None
    dims = tuple(int(d) for d in re.findall(r"\d+", match.group(2)))
    return _ALIASES.get(match.group(1), match.group(1)), dims


def fingerprints(graph: Graph) -> dict[str, str]:
    """Fingerprint of every task: the same for every backend (dagc.backends.fingerprint)."""
    from dagc.backends.fingerprint import task_fingerprints

    return task_fingerprints(graph)


def _value_types(graph: Graph) -> dict[str, str | None]:
    types: dict[str, str | None] = {}
    for node in graph:
        for value, type_text in zip(node.outputs, node.types):
            types[value] = type_text
    for param in graph.params:
        types[param.name] = param.type
    return types


def _used_on(plan: CommPlan, ops: list[Op], rank: int) -> set[str]:
    used: set[str] = set()
    for op in ops:
        if op.kind in ("run", "coll"):
            used.update(plan.inputs.get(op.node, ()))
        elif op.kind in ("send", "alias") and op.value is not None:
            used.add(op.value)
        elif op.kind == "bcast" and op.peer == rank and op.value is not None:
            used.add(op.value)
        elif op.kind in ("reduce", "allreduce", "gather") and op.value is not None:
            used.add(op.value)
    if rank == 0:
        used.update(plan.returns)
    return used


def _task_lines(w: CodeWriter, node: Node, names: Names, aliases: dict[str, str], assign: list[bool],
                used: set[str]) -> None:
    """`x = rt.task("name", fn, args...)` for a task, glue node, fused group or region.

    A fused group or a `cond`/`loop` region becomes a nested function whose body is the local
    backend's code for the node (`emit_task_lines`: the reference semantics), run as one task on
    its rank; its inputs were received before it and its outputs are sent after it like any task's.
    """
    outputs = [names[o] for o in node.outputs]
    if len(outputs) == 1:
        target = f"{outputs[0]} = " if assign[0] else ""
    else:
        target = ", ".join(o if a else "_" for o, a in zip(outputs, assign)) + " = " if any(assign) else ""
    if node.op in ("fused", *REGION_OPS):
        fn = names.claim(f"{node.op}:{node.name}", f"run_{node.name}")
        w.line(f"def {fn}() -> object:")
        with w.indent():
            if node.op == "fused":
                what = f"Fused group `{node.name}`: {', '.join(m.name for m in fused_members(node))}."
            else:
                kind = {"cond": "Conditional", "loop": "Loop", "map": "Map", "try": "Try/finally"}[node.op]
                what = f"{kind} region `{node.name}`, as one task" + (
                    " (its items one after another)." if node.op == "map" else ".")
            w.line(f'"""{what}"""')
            # every output is returned, so the body assigns each of them (never `_`)
            saved = getattr(names, "used_values", None)
            names.used_values = with_outputs_used([node], used)  # type: ignore[attr-defined]
            try:
                if node.op == "map" and node.options.ranks > 1:
                    _spread_map_lines(w, node, names, aliases)
                else:
                    emit_task_lines(w, node, names, aliases)
            finally:
                names.used_values = saved  # type: ignore[attr-defined]
            w.line(f"return {', '.join(outputs)}")
        key = key_values(node, names.rows, names)  # type: ignore[attr-defined]
        w.line(f"{target}rt.{'keyed' if key else 'task'}({node.name!r}, {fn}{key})  # {node.span}")
        return
    if node.op == "glue":
        source = glue_source(node, names)
        function = {"[]": "list", "{}": "dict"}.get(source, f"lambda: {source}")  # a new, empty container
        key = key_values(node, names.rows, names)  # type: ignore[attr-defined]
        w.line(f"{target}rt.{'keyed' if key else 'task'}({node.name!r}, {function}{key})  # {node.span}")
        return
    function = task_function(node, aliases[node.module])
    call = call_source(node, function, names)
    inner = call[len(function) + 1 : -1]
    w.line(f"{target}rt.task({node.name!r}, {function}{', ' + inner if inner else ''})  # {node.span}")


def _spread_map_lines(w: CodeWriter, node: Node, names: Names, aliases: dict[str, str]) -> None:
    """A map made multi-rank by the `spread` pass: each rank runs its share of the items (item i on
    rank i % ranks) and every rank gathers the results (dagc.runtime.maps.spread_map)."""
    from dagc.backends.toolkit import map_items_call, map_target, region_body, region_inits, region_yields

    outputs = [names[o] for o in node.outputs]
    item_fn = names.claim(f"item:{node.name}", f"{node.name}_item")
    w.line(f"def {item_fn}(item: object) -> tuple:")
    with w.indent():
        w.line(f"{map_target(node, names)} = item")
        for inner in region_body(node, "body"):
            emit_task_lines(w, inner, names, aliases)
        yields = [render_operand(y, names) for y in region_yields(node, "body")]
        w.line(f"return ({', '.join(yields)}{',' if len(yields) == 1 else ''})")
    inits = "".join(f"{render_operand(o, names)}, " for o in region_inits(node))
    target = ", ".join(outputs)
    w.line(f"{target} = spread_map({map_items_call(node, names, record=False)}, {item_fn}, "
           f"({inits.rstrip(' ')}), region={node.name!r})"
           f"  # items over the task's {node.options.ranks} ranks")


def _spreads(graph: Graph) -> bool:
    return any(n.op == "map" and n.options.ranks > 1 for n in graph)


def _module_uses(node: Node) -> set[str]:
    return task_modules([node])


def _emit_rank(w: CodeWriter, graph: Graph, plan: CommPlan, rank: int, ops: list[Op], names: Names,
               aliases: dict[str, str], inner_used: set[str]) -> str:
    fn = f"rank_{rank}"
    used = _used_on(plan, ops, rank)
    w.line(f"def {fn}(rt: Runner, modules: dict[str, object]) -> object:")
    with w.indent():
        n_tasks = sum(1 for op in ops if op.kind in ("run", "coll"))
        n_msgs = sum(1 for op in ops if op.kind in ("send", "recv"))
        n_coll = sum(1 for op in ops if op.kind in ("bcast", "reduce", "allreduce", "gather"))
        colls = f", {n_coll} collective(s)" if n_coll else ""
        w.line(f'"""Rank {rank}: {n_tasks} task(s), {n_msgs} message(s){colls}, in schedule order."""')
        modules_used = sorted({m for op in ops if op.kind in ("run", "coll")
                               for m in _module_uses(graph.node(op.node))})
        for module in modules_used:
            w.line(f"{aliases[module]} = modules[{module!r}]")
        for param in graph.params:
            if param.name in used:
                w.line(f"{names[param.name]} = {render_operand(param.value, names)}  # parameter")
        for op in ops:
            if op.kind in ("run", "coll"):
                node = graph.node(op.node)
                owner = plan.home[node.name][0] == rank
                assign = [owner and o in used for o in node.outputs]
                # a try region on several ranks runs its finally tasks that act on the world once
                home = plan.home[node.name]
                names.once_rank = home[0] if len(home) > 1 else None  # type: ignore[attr-defined]
                _task_lines(w, node, names, aliases, assign, inner_used)
                names.once_rank = None  # type: ignore[attr-defined]
            elif op.kind == "send" and is_order_token(op.value):
                w.line(f"rt.send(None, {op.tag})  # `{op.value[:-5]}` has finished: tell rank {op.peer}")  # type: ignore[index]
            elif op.kind == "recv" and is_order_token(op.out):
                w.line(f"rt.recv({op.tag})  # wait until `{op.out[:-5]}` has finished on rank {op.peer}")  # type: ignore[index]
            elif op.kind == "send":
                w.line(f"rt.send({names[op.value]}, {op.tag})  # %{op.value} to rank {op.peer}")  # type: ignore[index]
            elif op.kind == "recv":
                w.line(f"{names[op.out]} = rt.recv({op.tag})  # %{op.out} from rank {op.peer}")  # type: ignore[index]
            elif op.kind == "bcast":
                others = [r for r in op.group if r != op.peer]
                if op.peer == rank:  # the root keeps its own value; it names the copy only if it reads it
                    target = f"{names[op.out]} = " if op.out in used else ""  # type: ignore[index]
                    w.line(f"{target}rt.broadcast({names[op.value]}, {op.tag})  "  # type: ignore[index]
                           f"# %{op.value} to ranks {others}")
                else:
                    w.line(f"{names[op.out]} = rt.broadcast(None, {op.tag})  "  # type: ignore[index]
                           f"# %{op.out} from rank {op.peer}")
            elif op.kind == "allreduce":
                target = f"{names[op.out]} = " if op.out in used else ""  # type: ignore[index]
                w.line(f"{target}rt.reduce({names[op.value]}, {op.tag})  "  # type: ignore[index]
                       f"# %{op.node} = the sum over ranks {list(op.group)}, on each of them")
            elif op.kind == "reduce":
                what = f"%{op.node} = the sum over ranks {list(op.group)}"
                if op.peer == rank:
                    target = f"{names[op.out]} = " if op.out in used else ""  # type: ignore[index]
                    w.line(f"{target}rt.reduce({names[op.value]}, {op.tag})  # {what}, here")  # type: ignore[index]
                else:
                    w.line(f"rt.reduce({names[op.value]}, {op.tag})  # {what}, onto rank {op.peer}")  # type: ignore[index]
            elif op.kind == "gather" and op.peer == rank:
                senders = [src for _, _, src in plan.gathers[op.node]]
                targets = [names[o] if o in used else "_" for o in op.outs]
                target = f"{', '.join(targets)} = " if any(t != "_" for t in targets) else ""
                w.line(f"{target}rt.gather(None, {op.tag})  # %{', %'.join(op.outs)} from ranks {senders}")
            elif op.kind == "gather":
                w.line(f"rt.gather({names[op.value]}, {op.tag})  # %{op.value} to rank {op.peer}")  # type: ignore[index]
            elif op.kind == "alias":
                w.line(f"{names[op.out]} = {names[op.value]}  # %{op.out}: already here as %{op.value}")  # type: ignore[index]
        if rank == 0:
            w.line(f"return {render_operand(graph.returns, names) if graph.returns is not None else 'None'}")
        else:
            w.line("return None")
    w.line()
    w.line()
    return fn


_MODULE_TYPE = re.compile(r"^(?:(?:torch\.)?nn\.)?Module$")


def _layer_source(graph: Graph, value: str) -> tuple[Node, int] | None:
    """The task producing `value` (through transfers) and the output's index, if it is a layer:
    a task with `stages.stage` whose output is annotated `torch.nn.Module`."""
    node = graph.producer(value)
    while node is not None and node.op == "transfer" and node.args and isinstance(node.args[0], Ref):
        value = node.args[0].name
        node = graph.producer(value)
    if node is None or node.op != "task" or "stages.stage" not in node.attrs:
        return None
    index = node.outputs.index(value)
    type_text = (node.types[index] or "").strip().strip("'\"")
    return (node, index) if _MODULE_TYPE.match(type_text) else None


def pipeline_steps(graph: Graph) -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
    """Pipeline-parallel training steps: task → (stage of each layer, ranks of the stages).

    After the `stages` pass, a task that reads a list (or tuple) of layers — outputs of tasks
    annotated `-> torch.nn.Module` that the pass placed in two or more stages — is a training
    step over those stages (docs/pipeline_parallel.md): it runs on the ranks of the stages, rank
    i of its group running stage i, and `dagc.runtime.distributed.train_layers` in its body trains
    through `PipelineStage`s and a schedule.
    """
    if "stages.k" not in graph.attrs:
        return {}
    out: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    for node in graph:
        if node.op != "task" or node.options.ranks > 1:
            continue
        for operand in [*node.args, *(v for _, v in node.kwargs)]:
            if not (isinstance(operand, Seq) and len(operand.items) >= 2
                    and all(isinstance(item, Ref) for item in operand.items)):
                continue
            sources = [_layer_source(graph, item.name) for item in operand.items]  # type: ignore[union-attr]
            if any(source is None for source in sources):
                continue
            raw = [int(src[0].attrs["stages.stage"]) for src in sources]  # type: ignore[index]
            if len(set(raw)) < 2:
                continue
            if raw != sorted(raw):
                raise ValueError(f"`{node.name}` reads its layers in an order the stages do not follow: "
                                 f"stages {raw}; pass the layers in model order")
            number = {s: i for i, s in enumerate(sorted(set(raw)))}
            devices: dict[int, int] = {}
            for src, stage in zip(sources, raw):
                device = node_ranks(src[0])  # type: ignore[index]
                devices.setdefault(number[stage], device[0])
            ranks = tuple(devices[i] for i in range(len(number)))
            if list(ranks) != sorted(set(ranks)):
                raise ValueError(f"`{node.name}`: stages {sorted(number)} are on devices {list(ranks)}; "
                                 "a pipeline needs one device per stage, in stage order (stages{k=K} "
                                 "with K at most the number of devices)")
            out[node.name] = (tuple(number[s] for s in raw), ranks)
            break
    return out


def _collective_entry(graph: Graph, plan: CommPlan, step: Step, types: dict[str, str | None]) -> tuple:
    if step.kind == "bcast":
        return ("broadcast", step.value, step.out, step.src, tuple(step.ranks),
                static_tensor(types.get(step.value or "")), None, None)
    if step.kind == "gather":
        parts = plan.gathers[step.node]
        statics = {static_tensor(types.get(value)) for value, _, _ in parts}
        static = statics.pop() if len(statics) == 1 else None  # one buffer shape for every sender
        return ("gather", tuple((value, src) for value, _, src in parts), tuple(out for _, out, _ in parts),
                step.src, tuple(step.ranks), static, None, None)
    reduction = reduction_of(graph.node(step.node))
    divisor, start = (reduction.divisor, reduction.start) if reduction is not None else (None, None)
    kind = "all_reduce" if step.kind == "allreduce" else "reduce"
    return (kind, plan.operands[step.node], step.out, step.src, tuple(step.ranks), None,
            float(divisor) if divisor is not None else None, int(start) if start is not None else None)


def compressed_tags(graph: Graph, plan: CommPlan) -> dict[int, str]:
    """Tag → "bf16"/"fp16" for every message or broadcast of a value whose producing task (through
    transfers) was declared `compress=`."""
    out: dict[int, str] = {}
    for step in [*plan.moves, *plan.collectives]:
        if step.kind in ("reduce", "allreduce"):  # summed in full precision
            continue
        if step.kind == "gather":  # narrowed when every sender's task declares the same format
            kinds = {_compress_of(graph, value) for value, _, _ in plan.gathers[step.node]}
            if len(kinds) == 1 and None not in kinds and step.tag is not None:
                out[step.tag] = kinds.pop()  # type: ignore[assignment]
            continue
        node = graph.producer(step.value or "")
        while node is not None and node.op == "transfer" and node.args and isinstance(node.args[0], Ref):
            node = graph.producer(node.args[0].name)
        kind = getattr(node.options, "compress", None) if node is not None else None
        if kind and step.tag is not None:
            out[step.tag] = kind
    return dict(sorted(out.items()))


def _compress_of(graph: Graph, value: str) -> str | None:
    node = graph.producer(value)
    while node is not None and node.op == "transfer" and node.args and isinstance(node.args[0], Ref):
        node = graph.producer(node.args[0].name)
    return getattr(node.options, "compress", None) if node is not None else None


def build_plan(graph: Graph) -> CommPlan:
    """The communication plan of `graph`, checked; raises CommunicationError if it could block."""
    plan = plan_communication(graph)
    problems = check_plan(plan)
    if problems:
        raise CommunicationError(problems_to_diagnostics(problems, plan.spans))
    return plan


def emit_torch(graph: Graph, out_path: Path | None = None) -> str:
    """The torch.distributed program's source text for `graph` (partitioned; see REQUIRED_PASSES)."""
    steps = pipeline_steps(graph)
    if steps:  # a training step over staged layers runs on the ranks of its stages
        graph = graph.copy()
        for name, (_, ranks) in steps.items():
            node = graph.node(name)
            node.placement = node.placement.on(tuple(ranks))
    plan = build_plan(graph)
    programs = plan.programs()
    names = Names(reserved={"Runner", "Pipeline", "TaskRow", "TorchPlan", "torch_main", "RANKS", "TASKS", "MOVES",
                            "COLLECTIVES", "COMPRESS", "RETURNS", "STAGES", "PROGRAMS", "PIPELINE_SPEC", "PLAN", "rt",
                            "CODE", "CODE_FILES", "SCRIPT", "FINAL_STATE"} | {f"rank_{r}" for r in range(plan.world)})
    aliases = module_aliases(graph, names)
    from dagc.backends.fingerprint import final_state_groups, task_rows

    rows = task_rows(graph, final_state=True)
    names.rows = rows  # type: ignore[attr-defined]  # (for the units keyed on what they read)
    final = final_state_groups(graph)
    types = _value_types(graph)
    w = CodeWriter()
    n_tasks = sum(1 for s in plan.steps if s.kind == "run")
    emit_prologue(w, graph, out_path, "torch", (
        f"Runs the pipeline's {n_tasks} tasks on {plan.world} rank(s) with torch.distributed; "
        f"{len(plan.moves)} point-to-point message(s),\nin an order the compiler checked for deadlocks.\n"
        f"Usage: torchrun --nproc-per-node {plan.world} THIS_FILE [--run-dir DIR | --resume RUN_DIR] [--cache DIR]\n"
        "                  [--result PATH] [-- SCRIPT_ARGS...]\n"
        "       python THIS_FILE [...]   (starts torchrun itself)"))
    for line in ("import sys", "from pathlib import Path", "",
                 *dialect_imports(graph.nodes),
                 "from dagc.runtime.distributed import Runner",
                 "from dagc.runtime.lifecycle import Pipeline",
                 *((f"from dagc.runtime.maps import map_items{', spread_map' if _spreads(graph) else ''}",)
                   if uses_map(graph.nodes) else ()),
                 "from dagc.runtime.rows import TaskRow",
                 "from dagc.runtime.torchengine import TorchPlan, torch_main", ""):
        w.line(line)
    w.line(f"PIPELINE = {graph.name!r}")
    w.line(f"SOURCE_ROOT = {source_root_expr(graph, out_path)}")
    w.line(f"SEARCH_PATHS = {tuple(module_search_paths(graph))!r}")
    w.line(f"MODULES = {loaded_modules(graph, aliases)!r}")
    w.line(f"SCRIPT = {script_path(graph)!r}  # sys.argv[0] of the user's code, relative to SOURCE_ROOT")
    w.line()
    w.line()
    w.line(f"RANKS = {plan.world}")
    run_rows = {}
    for step in plan.steps:
        if step.kind == "run":
            node = graph.node(step.node)
            run_rows[step.node] = TaskRow.of(rows[step.node])._replace(
                retries=int(node.options.retries), ranks=tuple(step.ranks), inputs=tuple(plan.inputs[step.node]),
                outputs=tuple(plan.outputs[step.node]))
    emit_task_table(w, run_rows, where="#        and where it runs: its ranks, the values it reads and defines there")
    w.line(f"FINAL_STATE = {final!r}  # state groups stored as they are at their end, in one pickle")
    emit_code_table(w, graph)
    w.line("# tag: (value, value on the receiver, source rank, destination rank, static tensor or None);")
    w.line("# a tag whose source and destination are the same rank is a local alias, not a message")
    w.line("MOVES = {")
    with w.indent():
        for step in plan.all_moves:
            entry = (step.value, step.out, step.src, step.dst, static_tensor(types.get(step.value or "")))
            w.line(f"{step.tag}: {entry!r},")
    w.line("}")
    w.line("# tag: (kind, value(s), value defined, root rank, group ranks, static tensor, divisor, start):")
    w.line("#   a broadcast gives the root's value to the group; a reduce sums ((operand, rank), ...) onto the root")
    w.line("#   (after `start`, 0 for Python's sum(), when it is not None); a gather brings the root ((value, rank), ...)")
    w.line("COLLECTIVES = {")
    with w.indent():
        for step in plan.collectives:
            w.line(f"{step.tag}: {_collective_entry(graph, plan, step, types)!r},")
    w.line("}")
    compress = compressed_tags(graph, plan)
    w.line('# tag: 16-bit format its floating tensors travel in (`compress=` on the producing task)')
    w.line(f"COMPRESS = {compress!r}")
    w.line(f"RETURNS = {plan.returns!r}")
    w.line("# pipeline-parallel training step: stage of each layer it reads (rank i of its group runs stage i)")
    w.line(f"STAGES = {{{', '.join(f'{name!r}: {stages!r}' for name, (stages, _) in sorted(steps.items()))}}}")
    w.line()
    w.line()
    inner_used = used_values(graph)
    functions = [_emit_rank(w, graph, plan, rank, ops, names, aliases, inner_used)
                 for rank, ops in enumerate(programs)]
    w.line(f"PROGRAMS = ({', '.join(functions)}{',' if len(functions) == 1 else ''})")
    w.line()
    w.line()
    w.line("PIPELINE_SPEC = Pipeline(PIPELINE, SOURCE_ROOT, SEARCH_PATHS, MODULES, SCRIPT, TASKS, CODE, CODE_FILES, "
           "FINAL_STATE)")
    w.line("PLAN = TorchPlan(RANKS, PROGRAMS, MOVES, COLLECTIVES, COMPRESS, RETURNS, STAGES)")
    w.line()
    w.line()
    emit_main(w, graph, "torch_main(PIPELINE_SPEC, PLAN, argv, __file__)")
    return w.text()
