"""Ray backend: one Ray program per pipeline, for an embedded local Ray or a Ray cluster.

Each task (or fused group) becomes a `@ray.remote` function whose resources and retries come from
its annotations; results travel between tasks as ObjectRefs, never through the driver, and
`transfer` nodes are no-ops (the object store moves data). A `glue` node is a small remote task
evaluating its expression; a `cond`, `loop` or `try` region is one remote task that runs its bodies
with the local backend's semantics, asking for the largest demand of any task inside it (a `try`
region's finally tasks run in that task whether its body succeeds or fails).

A placed graph (`partition.device`) holds every task to its device. Two ways, chosen per program
(`PLACEMENT`, overridable with `--placement`):
  * `node` (the default when the devices of each cluster node are interchangeable): hard node
    affinity to the Ray node that stands for the device's node. A task may use any free one of its
    node's devices, so a node's devices share its queue, as a Ray program written by hand would.
  * `bundles` (the default when one node holds different devices): one placement group with a
    bundle per device, each pinned to its Ray node; every task runs in its device's bundle. The
    whole plan is reserved before anything runs.
Tasks that share state (dagc.ir.effects: an object one of them changes in place, a module-level
name, the global random generator) run in one actor per piece of state, in program order, so they
change the same objects as in plain Python; the objects stay in the actor, and only values that
cannot share objects (annotated int, float, str, …) leave it before the end of the run.
Multi-rank tasks run as a gang of actors joined by a torch process group. Every task's outputs are
stored in a run directory by input fingerprint (dagc.runtime.store), so `--resume` skips what
already finished. docs/ray_backend.md describes running on a cluster.

The program depends on Ray, the user's modules and `dagc.runtime`, never on the compiler.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dagc.backends.emitter import (
    CodeWriter,
    Names,
    dialect_imports,
    import_line,
    module_search_paths,
    prose,
    render_operand,
    source_root_expr,
    task_function,
)
from dagc.backends.fingerprint import (
    final_state_groups,
    key_values,
    task_fingerprints,
    task_rows,
    try_body_rows,
)
from dagc.backends.toolkit import (
    emit_code_table,
    emit_main,
    emit_prologue,
    emit_task_lines,
    emit_task_table,
    fused_members,
    module_aliases,
    script_path,
    task_modules,
    used_values,
    uses_map,
    with_outputs_used,
)
from dagc.ir import regions
from dagc.ir.core import MODULE_VALUE_ATTR, Graph, Node
from dagc.ir.effects import state_cell_groups, state_groups
from dagc.ir.regions import independent_items, walk

__all__ = ["emit_ray", "placement_devices", "placement_mode", "task_demand", "task_fingerprints"]

_RESERVED = {
    "ray", "Driver", "Job", "Plan", "ray_main", "TaskRow", "PLAN", "PIPELINE", "SOURCE_ROOT", "SEARCH_PATHS", "SCRIPT",
    "DEVICES", "DEMANDS", "TASKS", "STATE", "STATE_GROUPS", "PLACEMENT", "driver", "job", "body",
    "INNER_TASKS", "rt", "CODE", "CODE_FILES",
}


# ---- what the emitter computes --------------------------------------------------------------------
def task_demand(node: Node) -> dict[str, float]:
    """Ray resources one process of `node` needs: CPU, GPU, memory and custom resources. A region
    (or fused group) runs its tasks one after another in one process, so it asks for the most any
    of them needs (`dagc.ir.regions.demand`, as partition and the scheduler do)."""
    if node.op == "transfer":
        return {}
    need = regions.demand(node)
    wanted = {"CPU": need.cpus, "GPU": need.gpus, "memory": float(need.memory or 0), **dict(need.resources)}
    return {key: float(amount) for key, amount in wanted.items() if amount or key == "CPU"}


def _retries(node: Node) -> int:
    """Retries of a node; a region (or fused group) is retried as a whole as often as its most
    retried task."""
    return max([node.options.retries, *(n.options.retries for n in walk(node))])


def _cluster_nodes(graph: Graph, n_devices: int, cluster: Any = None) -> list[int]:
    """The cluster node of each device: from `cluster` (a dagc.cluster.Cluster), else the cluster the
    partition pass records in `graph.attrs["partition.cluster"]` ({"devices": [{"node": n}, …]}, or a
    spec such as "2x4" under `graph.attrs["cluster"]`),
    else one node holding every device."""
    recorded = cluster if cluster is not None else graph.attrs.get("partition.cluster", graph.attrs.get("cluster"))
    if isinstance(recorded, str):
        from dagc.cluster import parse_cluster_spec

        recorded = parse_cluster_spec(recorded)
    if isinstance(recorded, dict):
        nodes = [int(d.get("node", 0)) for d in recorded.get("devices", [])]
    elif recorded is not None and hasattr(recorded, "devices"):
        nodes = [d.node for d in recorded.devices]
    else:
        nodes = []
    if len(nodes) < n_devices:
        nodes += [nodes[-1] if nodes else 0] * (n_devices - len(nodes))
    return nodes


def _device_records(graph: Graph, n_devices: int, cluster: Any = None) -> list[dict[str, Any]]:
    """What the cluster model says of each device (node, kind, gpus, memory, speed), as dicts."""
    recorded = cluster if cluster is not None else graph.attrs.get("partition.cluster", graph.attrs.get("cluster"))
    if isinstance(recorded, str):
        from dagc.cluster import parse_cluster_spec

        recorded = parse_cluster_spec(recorded)
    if isinstance(recorded, dict):
        records = [dict(d) for d in recorded.get("devices", [])]
    elif recorded is not None and hasattr(recorded, "devices"):
        records = [{k: getattr(d, k, None) for k in ("node", "kind", "gpus", "memory", "speed")}
                   for d in recorded.devices]
    else:
        records = []
    nodes = _cluster_nodes(graph, n_devices, cluster)
    records += [{} for _ in range(n_devices - len(records))]
    for record, node in zip(records, nodes):
        record["node"] = node
    return records[:n_devices]


def placement_mode(graph: Graph, cluster: Any = None) -> str | None:
    """How the program holds tasks to their devices: "node" (node affinity) when the devices of
    each cluster node are interchangeable (same kind, GPUs, memory and speed), else "bundles" (one
    placement-group bundle per device). None when the graph is not placed."""
    devices = placement_devices(graph, cluster)
    if not devices:
        return None
    records = _device_records(graph, len(devices), cluster)
    by_node: dict[int, set[tuple[Any, ...]]] = {}
    for record in records:
        key = tuple(record.get(k) for k in ("kind", "gpus", "memory", "speed"))
        by_node.setdefault(int(record["node"]), set()).add(key)
    return "node" if all(len(kinds) == 1 for kinds in by_node.values()) else "bundles"


def placement_devices(graph: Graph, cluster: Any = None) -> list[tuple[int, dict[str, float], list[str]]]:
    """One entry per device of a placed graph: (cluster node, bundle resources, names of the tasks
    placed there). A bundle holds the largest demand of any one task on the device, so the tasks of
    a device run one at a time, as the schedule assumes. Empty when the graph is not placed."""
    placed = {n.name: list(n.devices) for n in graph if n.op != "transfer"}
    if not any(placed.values()):
        return []
    n_devices = max(max(d) for d in placed.values() if d) + 1
    nodes = _cluster_nodes(graph, n_devices, cluster)
    bundles: list[dict[str, float]] = [{} for _ in range(n_devices)]
    tasks: list[list[str]] = [[] for _ in range(n_devices)]
    for node in graph:
        devices = placed.get(node.name) or []
        if not devices:
            continue
        # a multi-rank task takes one device per rank; a single process the first of its devices
        for device in devices[: max(node.options.ranks, 1)]:
            for key, amount in task_demand(node).items():
                bundles[device][key] = max(bundles[device].get(key, 0.0), amount)
            tasks[device].append(node.name)
    for bundle in bundles:
        if not any(bundle.values()):
            bundle.clear()
            bundle["CPU"] = 0.01  # Ray needs something in every bundle
        for key in [k for k, v in bundle.items() if not v]:
            del bundle[key]
    return [(nodes[i], bundles[i], tasks[i]) for i in range(n_devices)]


# ---- the program ----------------------------------------------------------------------------------
def emit_ray(graph: Graph, out_path: Path | None = None, cluster: Any = None) -> str:
    """The Ray program's source text for `graph`. `cluster` (a dagc.cluster.Cluster) says which node
    each device of the placement is on, when the graph does not record it."""
    names = Names(_RESERVED)
    used = used_values(graph)
    # inside a task's function every output of the task is used: the function returns it
    names.used_values = with_outputs_used(graph.nodes, used)  # type: ignore[attr-defined]
    aliases = module_aliases(graph, names)
    order = graph.topological_order()
    if all(graph.node(n).placement.start is not None for n in order):
        # submit in the schedule's order, so that each device's queue runs its tasks in that order
        rank = {n: i for i, n in enumerate(order)}
        order.sort(key=lambda n: (float(graph.node(n).placement.start), rank[n]))  # type: ignore[arg-type]
    devices = placement_devices(graph, cluster)
    mode = placement_mode(graph, cluster)
    rows = task_rows(graph, final_state=True)
    names.rows = rows  # type: ignore[attr-defined]  # (for the units keyed on what they read)
    final = final_state_groups(graph)
    functions = {n: names.claim(f"task:{n}", f"{n}_task") for n in order if graph.node(n).op != "transfer"}
    n_tasks = len(functions)
    groups = state_groups(graph)
    state = {task: k for k, group in enumerate(groups) for task in group.nodes}
    cells = state_cell_groups(graph)
    w = CodeWriter()
    placed = {"node": "on the nodes of the compiler's placement (node affinity)",
              "bundles": "following the compiler's placement (one placement-group bundle per device)",
              None: "wherever Ray schedules them (the graph is not placed)"}[mode]
    emit_prologue(w, graph, out_path, "ray", (
        f"Runs the pipeline's {n_tasks} tasks as Ray tasks, {placed};\n"
        "results travel from task to task as object refs. Outputs are stored in a run directory, so\n"
        "`--resume RUN_DIR` finishes an interrupted run. Without --address (or RAY_ADDRESS) a local\n"
        "Ray is started.\n"
        "Usage: python THIS_FILE [--address ADDR] [--placement node|bundles] [--run-dir DIR | --resume RUN_DIR]\n"
        "                        [--cache DIR] [--result PATH] [-- SCRIPT_ARGS...]"))
    # tasks of a state actor or a multi-rank gang are plain functions: `ray` only for remote ones
    remote = any(graph.node(n).options.ranks <= 1 and n not in state for n in functions)
    by_path = any(import_line(m, a).startswith(f"{a} = ") for m, a in aliases.items())  # `my-pipe.py`
    for line in (*(("import importlib",) if by_path else ()), "import sys", "from pathlib import Path", "",
                 *(("import ray", "") if remote else ()),
                 *dialect_imports(graph.nodes),
                 *(("from dagc.runtime.maps import map_items",) if uses_map(graph.nodes) else ()),
                 "from dagc.runtime.ray import Driver, Job, Plan, ray_main",
                 *(("from dagc.runtime.raymap import run_items, run_map",)
                   if any(fans_out(graph.node(n)) and n not in state for n in functions) else ()),
                 "from dagc.runtime.rows import TaskRow", ""):
        w.line(line)
    w.line(f"PIPELINE = {graph.name!r}")
    w.line(f"SOURCE_ROOT = {source_root_expr(graph, out_path)}")
    w.line(f"SEARCH_PATHS = {tuple(module_search_paths(graph))!r}  # where workers import the pipeline's modules")
    w.line(f"SCRIPT = {script_path(graph)!r}  # sys.argv[0] of the user's code, relative to SOURCE_ROOT")
    w.line(f"ENTRY = {graph.module!r}  # the script as a module: imported first by every worker, as it runs first "
           "under python")
    w.line()
    _emit_tables(w, graph, devices, mode, rows, order)
    inner_rows = try_body_rows(graph)
    if inner_rows:  # the tasks of a try region's body, run inside its task, each stored on its own
        w.line("# Tasks in the body of a try region: stored one by one, so --resume reruns only what did not finish")
        emit_task_table(w, inner_rows, "INNER_TASKS")
    _emit_state_tables(w, graph, groups, order)
    emit_code_table(w, graph)
    # a shared cluster's queue reads these (dagc.runtime.admission); written only when they say something
    priority = int(graph.attrs.get("pipeline.priority", 0))
    pinned = sorted(n.name for n in graph if n.op == "task" and not n.options.preemptible)
    if final:
        w.line(f"FINAL_STATE = {final!r}  # state groups stored as they are at their end (dagc.runtime.executor)")
    ranks = critical_path_ranks(graph, order) if len(devices) > 1 else {}
    if ranks:
        w.line("# Each task's critical-path rank: the estimated seconds from its start to the pipeline's end along its")
        w.line("# longest path. Ready tasks take free devices in this order (--dispatch priority; dagc.runtime.dispatch).")
        w.line("RANKS = {")
        with w.indent():
            for name, rank in ranks.items():
                w.line(f"{name!r}: {rank!r},")
        w.line("}")
    extra = ", ".join([*([f"priority={priority}"] if priority else []),
                       *([f"pinned=frozenset({pinned!r})"] if pinned else []),
                       *(["final_state=FINAL_STATE"] if final else []),
                       *(["ranks=RANKS"] if ranks else [])])
    w.line("PLAN = Plan(PIPELINE, SOURCE_ROOT, SEARCH_PATHS, SCRIPT, TASKS, DEMANDS, DEVICES, STATE_GROUPS, STATE, "
           "PLACEMENT, code=CODE, code_files=CODE_FILES, entry=ENTRY" + ("," if extra else ")"))
    if extra:
        w.line(f"            {extra})")
    for name in order:
        node = graph.node(name)
        if node.op == "transfer":
            continue
        w.line()
        w.line()
        _emit_task(w, node, functions[name], names, aliases, in_actor=name in state)
    w.line()
    w.line()
    _emit_run(w, graph, order, functions, names, devices, used, state, cells)
    w.line()
    w.line()
    emit_main(w, graph, "ray_main(PLAN, run, argv)")
    return w.text()


def _emit_tables(w: CodeWriter, graph: Graph, devices: list, mode: str | None, rows: dict[str, tuple],
                 order: list[str]) -> None:
    w.line("# Devices of the plan: the cluster node each is on, the resources it needs (its bundle), its tasks.")
    if devices:
        w.line("DEVICES = [")
        with w.indent():
            for i, (node, bundle, tasks) in enumerate(devices):
                w.line(f"({node}, {_dict(bundle)}),  # device {i}: {', '.join(tasks) or '(idle)'}")
        w.line("]")
    else:
        w.line("DEVICES: list[tuple[int, dict[str, float]]] = []  # not placed: Ray schedules every task")
    w.line("# What one process of each task needs (to size a local Ray and to fail fast when nothing fits).")
    w.line("DEMANDS = {")
    with w.indent():
        for name in order:
            node = graph.node(name)
            if node.op != "transfer":
                ranks = f"  # x{node.options.ranks} ranks" if node.options.ranks > 1 else ""
                w.line(f"{name!r}: {_dict(task_demand(node))},{ranks}")
    w.line("}")
    emit_task_table(w, rows)
    w.line("# How tasks are held to their devices: node affinity (a node's devices are interchangeable and")
    w.line("# share its queue) or a placement group with one bundle per device (None: not placed).")
    w.line(f"PLACEMENT = {mode!r}")


def critical_path_ranks(graph: Graph, order: list[str]) -> dict[str, float]:
    """Each top-level task's critical-path rank (its scheduled duration plus the largest rank among the tasks
    that wait for it), in `order`; {} when the graph was not scheduled."""
    ranks: dict[str, float] = {}
    for name in reversed(order):
        node = graph.node(name)
        start, finish = node.placement.start, node.placement.finish
        if start is None or finish is None:
            if node.op == "transfer":
                start = finish = 0.0
            else:
                return {}
        after = max((ranks[s] for s in graph.successors(name) if s in ranks), default=0.0)
        ranks[name] = round(max(0.0, finish - start) + after, 6)
    return {name: ranks[name] for name in order if graph.node(name).op != "transfer"}


def _dict(d: dict[str, float]) -> str:
    return "{" + ", ".join(f"{k!r}: {int(v) if v == int(v) else v!r}" for k, v in d.items()) + "}"


def _ray_options(node: Node) -> str:
    demand = dict(task_demand(node))
    parts = [f"num_cpus={demand.pop('CPU', 1.0):g}"]
    if "GPU" in demand:
        parts.append(f"num_gpus={demand.pop('GPU'):g}")
    if "memory" in demand:
        parts.append(f"memory={int(demand.pop('memory'))}")
    if demand:
        parts.append("resources={" + ", ".join(f"{k!r}: {v:g}" for k, v in demand.items()) + "}")
    parts.append(f"num_returns={node.n_outputs + 1}")
    # a worker that dies is retried by Ray; exceptions (and sys.exit) by the executor inside the task
    parts.append(f"max_retries={_retries(node)}")
    return ", ".join(parts)


def _emit_state_tables(w: CodeWriter, graph: Graph, groups: list, order: list[str]) -> None:
    w.line("# Shared state: each piece lives in one actor that runs every task touching it, in program order")
    w.line("# (what those tasks need of one process: the largest demand among them).")
    if not groups:
        w.line("STATE_GROUPS: list[dict[str, float]] = []")
        w.line("STATE: dict[str, int] = {}")
        return
    w.line("STATE_GROUPS = [")
    with w.indent():
        for k, group in enumerate(groups):
            demand: dict[str, float] = {}
            for task in group.nodes:
                for key, amount in task_demand(graph.node(task)).items():
                    demand[key] = max(demand.get(key, 0.0), amount)
            w.line(f"{_dict(demand)},  # {k}: `{group.name}`, {len(group.nodes)} task(s)")
    w.line("]")
    w.line("STATE = {")
    with w.indent():
        for k, group in enumerate(groups):
            for task in group.nodes:
                w.line(f"{task!r}: {k},")
    w.line("}")


def fans_out(node: Node) -> bool:
    """Whether the items of map region `node` run as separate Ray tasks (dagc.ir.regions.independent_items):
    otherwise they run one after another, in the region's one task, as in the plain run."""
    return independent_items(node)


def _emit_map_tasks(w: CodeWriter, node: Node, function: str, names: Names, aliases: dict[str, str]) -> None:
    """A map whose items fan out: one remote function for an item (its body), and the region's task,
    which submits an item task per item and gathers their results (dagc.runtime.raymap.run_map)."""
    from dagc.backends.toolkit import map_items_call, map_target, region_body, region_inits, region_yields
    from dagc.ir.types import iter_refs

    item_fn = names.claim(f"item:{node.name}", f"{node.name}_item")
    over = node.attrs.get("region.over", 1)
    captured = list(dict.fromkeys(v for operand in node.args[over:] for v in iter_refs(operand)))
    params = ", ".join(["job: Job", "chunk: list", *(names[v] for v in captured)])
    options = _ray_options(node).rsplit(", num_returns=", 1)[0]
    w.line(f"@ray.remote({options}, num_returns=1, max_retries={_retries(node)})")
    w.line(f"def {item_fn}({params}) -> tuple:")
    with w.indent():
        w.line(f'"""Map region `{node.name}`, a chunk of its items: the lists each appends  ({prose(node.span)})."""')
        w.line("def body(item: object) -> tuple:")
        with w.indent():
            for module in sorted(task_modules([node])):
                w.line(import_line(module, aliases[module]))
            w.line(f"{map_target(node, names)} = item")
            for inner in region_body(node, "body"):
                emit_task_lines(w, inner, names, aliases)
            yields = [render_operand(y, names) for y in region_yields(node, "body")]
            w.line(f"return ({', '.join(yields)}{',' if len(yields) == 1 else ''})")
        w.line()
        w.line("return run_items(job, chunk, body)")
    w.line()
    w.line()
    inputs = [names[v] for v in node.input_values()]
    w.line(f"@ray.remote(num_cpus=0, num_returns={node.n_outputs + 1}, max_retries=0)")
    w.line(f"def {function}({', '.join(['job: Job', *inputs, '*after: object'])}) -> tuple:")
    with w.indent():
        w.line(f'"""Map region `{node.name}`: one Ray task per item, results in item order  ({prose(node.span)})."""')
        w.line("def body() -> object:")
        with w.indent():
            args = "".join(f"{names[v]}, " for v in captured)
            inits = "".join(f"{render_operand(o, names)}, " for o in region_inits(node))
            concurrency = node.attrs.get("region.concurrency")
            w.line(f"return run_map(job, {item_fn}, {map_items_call(node, names, record=False)}, ({args.rstrip(' ')}), "
                   f"({inits.rstrip(' ')}), concurrency={concurrency!r})")
        w.line()
        w.line(f"return {_job_run(key_values(node, names.rows, names))}")  # type: ignore[attr-defined]


def _emit_task(w: CodeWriter, node: Node, function: str, names: Names, aliases: dict[str, str],
               in_actor: bool = False) -> None:
    if not in_actor and node.options.ranks <= 1 and fans_out(node):
        _emit_map_tasks(w, node, function, names, aliases)
        return
    inputs = [names[v] for v in node.input_values()]
    params = ", ".join(["job: Job", *inputs, "*after: object"])
    ranks = node.options.ranks
    if in_actor:
        w.line(f"def {function}({params}) -> tuple:")
        what = f"Task `{node.name}`, run by the actor holding its state"
    elif ranks > 1:
        w.line(f"def {function}({params}) -> tuple:")
        what = f"Multi-rank task `{node.name}` ({ranks} ranks; rank 0's value is the result)"
    else:
        w.line(f"@ray.remote({_ray_options(node)})")
        w.line(f"def {function}({params}) -> tuple:")
        what = {"fused": "Fused group", "glue": "Glue", "cond": "Conditional region",
                "loop": "Loop region", "map": "Map region", "try": "Try/finally region"}.get(node.op, "Task") + f" `{node.name}`"
    with w.indent():
        members = fused_members(node) if node.op == "fused" else [node]
        targets = ", ".join(m.target for m in members if m.op == "task")
        where = prose(node.span)
        w.line(f'"""{what}: {prose(targets)}  ({where})."""' if targets else f'"""{what}  ({where})."""')
        task_args = ", ".join([render_operand(a, names) for a in node.args]
                              + [f"{k}={render_operand(v, names)}" for k, v in node.kwargs])
        # a task's arguments go through the job, so that the executor sees them (--check-effects)
        w.line("def body(*args: object, **kwargs: object) -> object:" if node.op == "task" else "def body() -> object:")
        with w.indent():
            # imported here, after the job has made the worker look like the plain run (sys.argv, cwd)
            for module in sorted(task_modules([node])):
                w.line(import_line(module, aliases[module]))
            if node.op == "task":
                if node.attrs.get(MODULE_VALUE_ATTR):  # a module-level object, read here (it takes no arguments)
                    w.line(f"return {aliases[node.module]}.{node.function}")
                else:
                    w.line(f"return {task_function(node, aliases[node.module])}(*args, **kwargs)")
            else:
                if node.op == "try" and not in_actor and ranks <= 1:
                    # its body's tasks go through an executor of their own: stored one by one (INNER_TASKS)
                    w.line("rt = job.executor(INNER_TASKS)")
                    names.task_verb = "task"  # type: ignore[attr-defined]
                try:
                    emit_task_lines(w, node, names, aliases)
                finally:
                    names.task_verb = None  # type: ignore[attr-defined]
                outs = [names[o] for o in node.outputs]
                w.line(f"return {outs[0]}" if len(outs) == 1 else f"return {', '.join(outs)}")
        w.line()
        key = key_values(node, names.rows, names)  # type: ignore[attr-defined]
        w.line(f"return {_job_run(key, task_args if node.op == 'task' else '')}")


def _job_run(key: str, task_args: str = "") -> str:
    """The call that runs a task's body on its arguments; `job.run_keyed` with `key` (`, key_values=(...)`) for a
    unit keyed on the content of what it reads (it takes no arguments: a task's own may have any name)."""
    if key:
        return f"job.run_keyed(body{key})"
    return f"job.run(body, {task_args})" if task_args else "job.run(body)"


def _after(graph: Graph, node: Node) -> list[str]:
    """Tasks `node` must run after without reading their outputs (its ordering deps, e.g. a file one
    writes and the other reads); a transfer stands for the task whose value it moves."""
    reads = {graph.producer(v).name for v in node.input_values() if graph.producer(v) is not None}
    out: dict[str, None] = {}
    todo = list(node.deps)
    while todo:
        name = todo.pop(0)
        if name not in graph:
            continue
        dep = graph.node(name)
        if dep.op == "transfer":
            todo += [p for p in graph.predecessors(name)]
        elif name not in reads:
            out.setdefault(name, None)
    return list(out)


def _emit_run(w: CodeWriter, graph: Graph, order: list[str], functions: dict[str, str], names: Names,
              devices: list, used: set[str], state: dict[str, int], cells: dict[str, int]) -> None:
    w.line("def run(driver: Driver) -> object:")
    with w.indent():
        w.line('"""Submit every task, all up front (in the schedule\'s order when there is one), wait for all')
        w.line('of them, return the result."""')
        for param in graph.params:
            if param.name in used:
                w.line(f"{names[param.name]} = {render_operand(param.value, names)}  # parameter")
        for name in order:
            node = graph.node(name)
            bound = [names[o] if o in used else "_" for o in node.outputs]
            targets = "" if all(b == "_" for b in bound) else ", ".join(bound) + " = "
            if node.op == "transfer":
                if targets:
                    w.line(f"{targets}{render_operand(node.args[0], names)}  "
                           f"# transfer {node.name}: the object store moves the data")
                continue
            inputs = [names[v] for v in node.input_values()]
            extra = []
            placed = list(node.devices) if devices else []
            if placed and node.options.ranks <= 1:  # one process: the first of its devices (a map planned over
                placed = placed[:1]  # several runs its region task there; its items go where Ray has room)
            if placed:
                extra.append(f"device={placed[0] if len(placed) == 1 else placed}")
            if node.n_outputs > 1:
                extra.append(f"outputs={node.n_outputs}")
            if node.options.ranks > 1:
                extra.append(f"ranks={node.options.ranks}")
            after = _after(graph, node)
            if after:
                extra.append(f"after={tuple(after)!r}")
            if name in state:
                # values of its own state stay in the actor; another state's are passed in by value
                held_in = tuple(v if cells.get(v) == state[name] else None for v in node.input_values())
                held_out = tuple(v if cells.get(v) == state[name] else None for v in node.outputs)
                extra += [f"held={held_in!r}", f"keep={held_out!r}"]
            call = ", ".join([functions[name], repr(name), *inputs, *extra])
            submit = "submit_gang" if node.options.ranks > 1 else "submit_state" if name in state else "submit"
            w.line(f"{targets}driver.{submit}({call})")
        w.line("driver.wait()")
        returns = sorted(set(graph.output_values()), key=lambda v: graph.output_values().index(v))
        fetched = [names[v] for v in returns]
        if fetched:
            lhs = ", ".join(fetched) + ("," if len(fetched) == 1 else "")
            w.line(f"{lhs} = driver.fetch({', '.join(fetched)})")
        w.line(f"return {render_operand(graph.returns, names) if graph.returns is not None else 'None'}")
