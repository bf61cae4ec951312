"""Ray backend: one Ray program per pipeline, for an embedded local Ray or a Ray cluster.

Each task (or fused group) becomes a `@ray.remote` function whose resources and retries come from
its annotations; results travel between tasks as ObjectRefs, never through the driver, and
`transfer` nodes are no-ops (the object store moves data). A `glue` node is a small remote task
evaluating its expression; a `cond` or `loop` region is one remote task that runs its bodies with
the local backend's semantics, asking for the largest demand of any task inside it.

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

import json
from pathlib import Path
from typing import Any

from dagc.backends.emitter import CodeWriter, Names, module_search_paths, render_operand, source_root_expr
from dagc.backends.local import (
    _members,
    _module_aliases,
    _task_modules,
    emit_prologue,
    emit_task_lines,
    used_values,
)
from dagc.ir.core import REGION_OPS, Graph, Node, region_bodies
from dagc.ir.effects import state_cells, state_groups
from dagc.ir.serialize import operand_to_json
from dagc.runtime.store import fingerprint, output_fingerprint, value_fingerprint

__all__ = ["emit_ray", "placement_devices", "placement_mode", "task_demand", "task_fingerprints"]

_RESERVED = {
    "ray", "placement_group", "remove_placement_group", "PlacementGroupSchedulingStrategy",
    "NodeAffinitySchedulingStrategy", "PLACEMENT", "PLACEMENTS",
    "EventLog", "Progress", "RunStore", "new_run_id", "use_context", "traceback", "socket",
    "Job", "Driver", "Placement", "Rank", "Stored", "TaskFailed", "PlacementError", "connect",
    "local_resources", "DEVICES", "FINGERPRINTS", "DEMANDS", "PLACEMENT_TIMEOUT", "driver",
    "load_stored", "job", "body", "State", "STATE", "STATE_GROUPS", "RETRIES", "HELD",
}


# ---- what the emitter computes --------------------------------------------------------------------
def _inner(node: Node) -> list[Node]:
    """The nodes a fused group or a region runs, recursively (empty for other nodes)."""
    if node.op == "fused":
        found = _members(node)
    elif node.op in REGION_OPS:
        found = [n for body in region_bodies(node).values() for n in body]
    else:
        return []
    return [m for n in found for m in (n, *_inner(n))]


def task_demand(node: Node) -> dict[str, float]:
    """Ray resources one process of `node` needs: CPU, GPU, memory and custom resources. A region
    (or fused group) runs its tasks one after another in one process, so it needs the largest
    demand of any of them."""
    demand: dict[str, float] = {}
    for n in (node, *_inner(node)):
        if n.op == "transfer":
            continue
        opts = n.options
        mine = {"CPU": float(opts.cpus), "GPU": float(opts.gpus), "memory": float(opts.memory or 0)}
        mine.update((key, float(amount)) for key, amount in opts.resources)
        for key, amount in mine.items():
            demand[key] = max(demand.get(key, 0.0), amount)
    return {k: v for k, v in demand.items() if v or k == "CPU"}


def _retries(node: Node) -> int:
    """Retries of a node; a region (or fused group) is retried as a whole as often as its most
    retried task."""
    return max([node.options.retries, *(n.options.retries for n in _inner(node))])


def _device_list(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value]
    return [int(value)]


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
    placed = {n.name: _device_list(n.attrs.get("partition.device")) for n in graph if n.op != "transfer"}
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


def _constants(node: Node) -> str:
    """What, besides its inputs' fingerprints, determines a node's output: its operands (as JSON),
    and for a fused group its members' targets and operands."""
    def operands(n: Node) -> dict[str, Any]:
        return {"target": n.target, "op": n.op, "args": [operand_to_json(a) for a in n.args],
                "kwargs": [[k, operand_to_json(v)] for k, v in n.kwargs], "outputs": list(n.outputs)}

    data = operands(node)
    if node.op == "fused":
        data["members"] = [operands(m) for m in _members(node)]
    if node.op in REGION_OPS:  # the bodies decide the outputs too
        data["region"] = {k: v for k, v in sorted(node.attrs.items()) if k.startswith("region.")}
    return json.dumps(data, sort_keys=True, default=str)


def task_fingerprints(graph: Graph) -> dict[str, str]:
    """Fingerprint of every node that runs (transfers are skipped: their output is their input)."""
    value_fp: dict[str, str] = {p.name: value_fingerprint(p.name, repr(p.value)) for p in graph.params}
    out: dict[str, str] = {}
    for name in graph.topological_order():
        node = graph.node(name)
        inputs = [value_fp.get(v, f"unbound:{v}") for v in node.input_values()]
        if node.op == "transfer":
            for value in node.outputs:
                value_fp[value] = inputs[0] if inputs else fingerprint("transfer", _constants(node))
            continue
        fp = fingerprint(node.target or node.op, _constants(node), inputs)
        out[name] = fp
        for i, value in enumerate(node.outputs):
            value_fp[value] = output_fingerprint(fp, i)
    return out


# ---- the program ----------------------------------------------------------------------------------
def emit_ray(graph: Graph, out_path: Path | None = None, cluster: Any = None) -> str:
    """The Ray program's source text for `graph`. `cluster` (a dagc.cluster.Cluster) says which node
    each device of the placement is on, when the graph does not record it."""
    names = Names(_RESERVED)
    used = used_values(graph)
    # inside a task's function every output of the task is used: the function returns it
    names.used_values = used | {v for n in graph for v in n.outputs}  # type: ignore[attr-defined]
    aliases = _module_aliases(graph, names)
    order = graph.topological_order()
    if all("schedule.start" in graph.node(n).attrs for n in order):
        # submit in the schedule's order, so that each device's queue runs its tasks in that order
        rank = {n: i for i, n in enumerate(order)}
        order.sort(key=lambda n: (float(graph.node(n).attrs["schedule.start"]), rank[n]))
    devices = placement_devices(graph, cluster)
    mode = placement_mode(graph, cluster)
    fps = task_fingerprints(graph)
    functions = {n: names.claim(f"task:{n}", f"{n}_task") for n in order if graph.node(n).op != "transfer"}
    n_tasks = len(functions)
    groups = state_groups(graph)
    state = {task: k for k, group in enumerate(groups) for task in group.nodes}
    cells = state_cells(graph)
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
        "                        [--result PATH]"))
    w.block(_IMPORTS)
    w.line()
    w.line(f"PIPELINE = {graph.name!r}")
    w.line(f"SOURCE_ROOT = {source_root_expr(graph, out_path)}")
    w.line(f"SEARCH_PATHS = {tuple(module_search_paths(graph))!r}  # where workers import the pipeline's modules")
    w.line()
    _emit_tables(w, graph, devices, mode, fps, order)
    _emit_state_tables(w, graph, groups, order)
    w.line()
    w.line()
    w.block(_SUPPORT)
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
    w.block(_MAIN)
    return w.text()


def _emit_tables(w: CodeWriter, graph: Graph, devices: list, mode: str | None, fps: dict[str, str],
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
    w.line("# Input fingerprints (dagc.runtime.store): equal fingerprint, same output, so --resume reuses it.")
    w.line("FINGERPRINTS = {")
    with w.indent():
        for name, fp in fps.items():
            w.line(f"{name!r}: {fp!r},")
    w.line("}")
    w.line("PLACEMENT_TIMEOUT = 30.0  # seconds to wait for resources before naming what could not be had")
    w.line("# How tasks are held to their devices: node affinity (a node's devices are interchangeable and")
    w.line("# share its queue) or a placement group with one bundle per device (None: not placed).")
    w.line("PLACEMENTS = (\"node\", \"bundles\")")
    w.line(f"PLACEMENT = {mode!r}")


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
    retries = _retries(node)
    parts.append(f"max_retries={retries}")
    if retries:
        parts.append("retry_exceptions=True")
    return ", ".join(parts)


def _emit_state_tables(w: CodeWriter, graph: Graph, groups: list, order: list[str]) -> None:
    w.line("# Shared state: each piece lives in one actor that runs every task touching it, in program order")
    w.line("# (what those tasks need of one process: the largest demand among them).")
    if not groups:
        w.line("STATE_GROUPS: list[dict[str, float]] = []")
        w.line("STATE: dict[str, int] = {}")
        w.line("RETRIES: dict[str, int] = {}")
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
    w.line("RETRIES = {" + ", ".join(f"{t!r}: {_retries(graph.node(t))}" for g in groups for t in g.nodes
                                    if _retries(graph.node(t))) + "}")


def _emit_task(w: CodeWriter, node: Node, function: str, names: Names, aliases: dict[str, str],
               in_actor: bool = False) -> None:
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
                "loop": "Loop region"}.get(node.op, "Task") + f" `{node.name}`"
    with w.indent():
        members = _members(node) if node.op == "fused" else [node]
        targets = ", ".join(m.target for m in members if m.op == "task")
        w.line(f'"""{what}: {targets}  ({node.span})."""' if targets else f'"""{what}  ({node.span})."""')
        modules = sorted(_task_modules([node]))
        for module in modules:
            alias = aliases[module]
            w.line(f"import {module}" if alias == module else f"import {module} as {alias}")
        if modules:
            w.line()
        if node.op == "task":
            args = ", ".join(
                [render_operand(a, names) for a in node.args]
                + [f"{k}={render_operand(v, names)}" for k, v in node.kwargs])
            w.line(f"return job.run(lambda: {aliases[node.module]}.{node.function}({args}))")
            return
        w.line("def body() -> object:")
        with w.indent():
            emit_task_lines(w, node, names, aliases)
            outs = [names[o] for o in node.outputs]
            w.line(f"return {outs[0]}" if len(outs) == 1 else f"return {', '.join(outs)}")
        w.line()
        w.line("return job.run(body)")


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
              devices: list, used: set[str], state: dict[str, int], cells: set[str]) -> None:
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
            placed = _device_list(node.attrs.get("partition.device")) if devices else []
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
                held_in = tuple(v if v in cells else None for v in node.input_values())
                held_out = tuple(v if v in cells else None for v in node.outputs)
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


_IMPORTS = '''\
import argparse
import os
import pickle
import socket
import sys
import time
import traceback
from pathlib import Path

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import (
    NodeAffinitySchedulingStrategy,
    PlacementGroupSchedulingStrategy,
)

from dagc.runtime import EventLog, Progress, RunStore, new_run_id, use_context
'''

_SUPPORT = '''\
class TaskFailed(Exception):
    """A task failed after its retries; the message names it."""


class PlacementError(Exception):
    """The resources a task or the placement needs cannot be had; the message says which."""


class Job:
    """What a running task knows about its run: where its outputs go and where it logs events."""

    def __init__(self, run_dir: str, run_id: str, task: str, fingerprint: str, device: object = None,
                 outputs: int = 1) -> None:
        self.run_dir, self.run_id, self.task, self.fingerprint = run_dir, run_id, task, fingerprint
        self.device, self.outputs = device, outputs
        self.rank, self.world_size, self.group = 0, 1, None

    def run(self, body) -> tuple:
        """Run the task's body; store its outputs and log it. Returns (*outputs, info)."""
        store = RunStore(self.run_dir)
        log = EventLog(store.events_path, self.run_id)
        where = {"node": ray.get_runtime_context().get_node_id(), "device": self.device,
                 "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}
        if self.world_size > 1:
            where["rank"] = self.rank
        attempt = store.next_attempt(self.run_id, f"{self.task}.rank{self.rank}") if self.world_size > 1 \\
            else store.next_attempt(self.run_id, self.task)
        log.start(self.task, attempt, **where)
        start = time.perf_counter()
        try:
            if self.world_size > 1 or "torch" in sys.modules:
                with use_context(rank=self.rank, world_size=self.world_size, group=self.group,
                                 device=self.torch_device(), task=self.task, run_dir=Path(self.run_dir),
                                 attempt=attempt - 1):
                    value = body()
            else:
                value = body()
            nbytes = store.save(self.task, self.fingerprint, value) if self.rank == 0 else None
        except BaseException as exc:
            log.failure(self.task, time.perf_counter() - start, exc, traceback.format_exc(), **where)
            raise
        log.end(self.task, time.perf_counter() - start, nbytes, **where)
        info = {"task": self.task, "bytes": nbytes, **where}
        return (*value, info) if self.outputs > 1 else (value, info)

    def torch_device(self) -> str:
        import torch

        gpus = ray.get_gpu_ids()
        return "cuda:0" if gpus and torch.cuda.is_available() else "cpu"


@ray.remote(num_cpus=0)
def load_stored(run_dir: str, task: str, fingerprint: str, outputs: int) -> object:
    """The stored outputs of a task that finished in an earlier run (read where they are needed)."""
    return RunStore(run_dir).load(task, fingerprint)


@ray.remote(num_cpus=0)
class Rank:
    """One process of a multi-rank task: joins the task's torch process group and runs the body."""

    def address(self) -> str:
        with socket.socket() as s:
            s.bind(("", 0))
            return f"tcp://{ray.util.get_node_ip_address()}:{s.getsockname()[1]}"

    def run(self, function, job: Job, rank: int, world_size: int, address: str, *args: object) -> tuple:
        import torch
        import torch.distributed as dist

        backend = "nccl" if torch.cuda.is_available() and ray.get_gpu_ids() else "gloo"
        dist.init_process_group(backend, init_method=address, rank=rank, world_size=world_size)
        job.rank, job.world_size, job.group = rank, world_size, dist.group.WORLD
        try:
            return function(job, *args)
        finally:
            dist.destroy_process_group()


HELD = "__dagc_held__"  # (HELD, group, value): a value that stays in the actor of its state


@ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)
class State:
    """Holds one piece of shared state: runs every task that touches it, one at a time, in the order
    the driver submits them (Ray keeps one submitter's order), on the objects themselves."""

    def __init__(self, group: int) -> None:
        self.group = group
        self.values: dict[str, object] = {}

    def run(self, function, job: Job, held: tuple, keep: tuple, retries: int, *args: object) -> tuple:
        inputs = [self.resolve(name, arg) for name, arg in zip(held, args)]
        for attempt in range(retries + 1):
            try:
                *values, info = function(job, *inputs, *args[len(held):])
                break
            except Exception:
                if attempt == retries:
                    raise
        out = []
        for name, value in zip(keep, values):
            if name is None:
                out.append(value)
            else:
                self.values[name] = value
                out.append((HELD, self.group, name))
        return (*out, info)

    def resolve(self, name: str | None, arg: object) -> object:
        """A held value by name; an argument that is state but new here (a parameter, a stored output)
        becomes held on first sight, so every later task shares the one object."""
        if isinstance(arg, tuple) and len(arg) == 3 and arg[0] == HELD:
            return self.values[arg[2]]
        if name is not None:
            return self.values.setdefault(name, arg)
        return arg

    def value(self, name: str) -> object:
        return self.values[name]


class Stored:
    """An output found in the run directory: loaded only if a task that runs reads it."""

    def __init__(self, task: str, index: int, outputs: int) -> None:
        self.task, self.index, self.outputs = task, index, outputs


class Placement:
    """Holds every task to its device. "node": hard node affinity to the Ray node chosen to stand for
    the device's cluster node (its devices are interchangeable, so a task may take any free one).
    "bundles": one placement group, a bundle per device pinned to that Ray node; a task runs in its
    device's bundle. Fails within PLACEMENT_TIMEOUT, never hangs."""

    def __init__(self, devices: list[tuple[int, dict[str, float]]], mode: str, timeout: float) -> None:
        self.devices, self.mode, self.group = devices, mode, None
        self.nodes = self.choose_nodes(devices)
        if mode != "bundles":
            return
        self.await_free(devices, min(timeout, 2.0))
        selectors = [{"ray.io/node-id": self.nodes[node]} for node, _ in devices]
        self.group = placement_group([bundle for _, bundle in devices], strategy="PACK",
                                     bundle_label_selector=selectors)
        ready, _ = ray.wait([self.group.ready()], timeout=timeout)
        if not ready:
            remove_placement_group(self.group)
            raise PlacementError(f"could not reserve the plan's devices within {timeout:g}s: "
                                 + "; ".join(f"device {i} (node {n}) needs {b}" for i, (n, b) in enumerate(devices)))

    @staticmethod
    def await_free(devices: list[tuple[int, dict[str, float]]], limit: float) -> None:
        """Wait, at most `limit` seconds, until the cluster has the bundles' resources free. The
        resources of a group removed a moment ago (an earlier run's) take about 0.1 s to come back;
        a group asked for before that waits for Ray's next retry, about a second later."""
        need: dict[str, float] = {}
        for _, bundle in devices:
            for key, amount in bundle.items():
                need[key] = need.get(key, 0.0) + amount
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            free = ray.available_resources()
            if all(free.get(key, 0.0) >= amount - 1e-9 for key, amount in need.items()):
                return
            time.sleep(0.01)

    @staticmethod
    def choose_nodes(devices: list[tuple[int, dict[str, float]]]) -> dict[int, str]:
        """Map each cluster node of the plan to a live Ray node that can hold its devices' bundles:
        distinct Ray nodes while there are enough, the head node first."""
        alive = sorted((n for n in ray.nodes() if n["Alive"]),
                       key=lambda n: ("node:__internal_head__" not in n["Resources"], n["NodeID"]))
        free = {n["NodeID"]: dict(n["Resources"]) for n in alive}
        chosen: dict[int, str] = {}
        for node in sorted({node for node, _ in devices}):
            need: dict[str, float] = {}
            for owner, bundle in devices:
                if owner == node:
                    for key, amount in bundle.items():
                        need[key] = need.get(key, 0.0) + amount
            fits = [i for i, n in free.items() if all(n.get(k, 0.0) >= v - 1e-9 for k, v in need.items())]
            fresh = [i for i in fits if i not in chosen.values()]
            if not fits:
                tasks = ", ".join(str(i) for i, (owner, _) in enumerate(devices) if owner == node)
                raise PlacementError(f"no Ray node can hold node {node} of the plan (devices {tasks}), "
                                     f"which needs {need}; the cluster has "
                                     + "; ".join(f"{i[:8]}: {r}" for i, r in free.items()))
            pick = (fresh or fits)[0]
            chosen[node] = pick
            for key, amount in need.items():
                free[pick][key] = free[pick].get(key, 0.0) - amount
        return chosen

    def release(self) -> None:
        """Give the placement group back (asynchronously: Ray returns its resources shortly after)."""
        if self.group is not None:
            remove_placement_group(self.group)
            self.group = None

    def strategy(self, device: int) -> NodeAffinitySchedulingStrategy | PlacementGroupSchedulingStrategy:
        if self.group is None:
            return NodeAffinitySchedulingStrategy(self.nodes[self.devices[device][0]], soft=False)
        return PlacementGroupSchedulingStrategy(self.group, placement_group_bundle_index=device)


class Driver:
    """Submits tasks, skips those a resumed run already finished, and waits with a progress bar."""

    def __init__(self, store: RunStore, log: EventLog, resume: bool, placement: Placement | None) -> None:
        self.store, self.log, self.resume, self.placement = store, log, resume, placement
        self.run_dir = str(store.root.resolve())
        self.pending: dict[ray.ObjectRef, str] = {}
        self.submitted: dict[str, ray.ObjectRef] = {}  # task -> the ref that says it finished
        self.last: dict[int, ray.ObjectRef] = {}  # device -> its task submitted last (bundles: run in order)
        self.loaded: dict[str, list[ray.ObjectRef]] = {}
        self.progress = Progress(len(FINGERPRINTS))
        self.nodes: list[dict[str, float]] | None = None

    def check(self, task: str, ranks: int = 1) -> None:
        """Fail now, naming the task, when no live Ray node has what one of its processes needs."""
        need = DEMANDS[task]
        if self.nodes is None:  # asked once per run: the cluster's nodes, not what they have free
            self.nodes = [n["Resources"] for n in ray.nodes() if n["Alive"]]
        nodes = self.nodes
        if not any(all(r.get(k, 0.0) >= v for k, v in need.items()) for r in nodes):
            have = "; ".join(str({k: v for k, v in r.items() if not k.startswith("node:")}) for r in nodes)
            raise PlacementError(f"task `{task}` needs {need}{f' per rank ({ranks} ranks)' if ranks > 1 else ''},"
                                 f" but no node of the Ray cluster has it (nodes: {have})")

    def stored(self, task: str, outputs: int) -> object:
        """Placeholders for the outputs of a task finished in an earlier run, or None."""
        fingerprint = FINGERPRINTS[task]
        if not (self.resume and self.store.has(task, fingerprint)):
            return None
        self.log.skip(task, fingerprint)
        self.progress.advance(name=task)
        values = tuple(Stored(task, i, outputs) for i in range(outputs))
        return values if outputs > 1 else values[0]

    def resolve(self, value: object) -> object:
        """An argument as a task receives it: stored outputs are loaded on a worker first."""
        if not isinstance(value, Stored):
            return value
        if value.task not in self.loaded:
            refs = load_stored.options(num_returns=value.outputs).remote(
                self.run_dir, value.task, FINGERPRINTS[value.task], value.outputs)
            self.loaded[value.task] = refs if value.outputs > 1 else [refs]
        return self.loaded[value.task][value.index]

    def job(self, task: str, device: object, outputs: int) -> Job:
        return Job(self.run_dir, self.log.run_id, task, FINGERPRINTS[task], device, outputs)

    def waits(self, after: tuple[str, ...], devices: list[int]) -> list[ray.ObjectRef]:
        """Refs a task must wait for besides its inputs (passed as trailing arguments, which Ray
        resolves first): tasks it is ordered after, and with one bundle per device the task
        submitted before it on its device, so that a device runs its tasks in the schedule's order."""
        refs = [self.submitted[t] for t in after if t in self.submitted]  # a stored task has finished
        if self.placement is not None and self.placement.mode == "bundles":
            refs += [self.last[d] for d in devices if d in self.last]
        return refs

    def submit(self, function, task: str, *args: object, device: int | None = None, outputs: int = 1,
               after: tuple[str, ...] = ()) -> object:
        """Submit one task (unless a resumed run finished it); returns its output ref(s)."""
        found = self.stored(task, outputs)
        if found is not None:
            return found
        self.check(task)
        options = {}
        if self.placement is not None and device is not None:
            options["scheduling_strategy"] = self.placement.strategy(device)
        devices = [device] if device is not None else []
        refs = function.options(**options).remote(self.job(task, device, outputs),
                                                  *(self.resolve(a) for a in args), *self.waits(after, devices))
        self.pending[refs[-1]] = task
        self.submitted[task] = refs[-1]
        self.last.update((d, refs[-1]) for d in devices)
        return refs[0] if outputs == 1 else tuple(refs[:-1])

    def state_actor(self, group: int, device: int | None) -> object:
        """The actor holding state `group`, started on first use (on its device when placed)."""
        actors = self.__dict__.setdefault("actors", {})
        if group not in actors:
            need = dict(STATE_GROUPS[group])
            need.pop("CPU", None)  # it runs one task at a time: it takes the GPUs they need, no CPU slot
            need.pop("memory", None)
            options: dict[str, object] = {"num_gpus": need.pop("GPU", 0.0), "resources": need}
            if self.placement is not None and device is not None:
                options["scheduling_strategy"] = self.placement.strategy(device)
            actors[group] = State.options(**options).remote(group)
        return actors[group]

    def submit_state(self, function, task: str, *args: object, held: tuple, keep: tuple, device: int | None = None,
                     outputs: int = 1, after: tuple[str, ...] = ()) -> object:
        """Submit a task that touches shared state to the actor holding it. A resumed run skips such
        tasks only when every task of their state finished (the state is rebuilt from the start)."""
        group = STATE[task]
        if all(self.resume and self.store.has(t, FINGERPRINTS[t]) for t, g in STATE.items() if g == group):
            found = self.stored(task, outputs)
            if found is not None:
                return found
        self.check(task)
        actor = self.state_actor(group, device)
        devices = [device] if device is not None else []
        refs = actor.run.options(num_returns=outputs + 1).remote(
            function, self.job(task, device, outputs), held, keep, RETRIES.get(task, 0),
            *(self.resolve(a) for a in args), *self.waits(after, devices))
        self.pending[refs[-1]] = task
        self.submitted[task] = refs[-1]
        self.last.update((d, refs[-1]) for d in devices)
        return refs[0] if outputs == 1 else tuple(refs[:-1])

    def submit_gang(self, function, task: str, *args: object, ranks: int, device: list[int] | None = None,
                    outputs: int = 1, after: tuple[str, ...] = ()) -> object:
        """Submit a multi-rank task: `ranks` actors, one per device, in one process group."""
        found = self.stored(task, outputs)
        if found is not None:
            return found
        self.check(task, ranks)
        need = dict(DEMANDS[task])
        options = {"num_cpus": need.pop("CPU", 1.0), "num_gpus": need.pop("GPU", 0.0)}
        if "memory" in need:
            options["memory"] = need.pop("memory")
        options["resources"] = need
        actors = []
        for rank in range(ranks):
            if self.placement is not None and device is not None:
                options["scheduling_strategy"] = self.placement.strategy(device[rank])
            actors.append(Rank.options(**options).remote())
        address = ray.get(actors[0].address.remote(), timeout=PLACEMENT_TIMEOUT * 4)
        values = [self.resolve(a) for a in args] + self.waits(after, list(device or []))
        job = self.job(task, device, outputs)
        results = [actor.run.options(num_returns=outputs + 1).remote(function, job, rank, ranks, address, *values)
                   for rank, actor in enumerate(actors)]
        for refs in results:
            self.pending[refs[-1]] = task
        self.submitted[task] = results[0][-1]
        self.last.update((d, results[0][-1]) for d in device or [])
        self.gangs = [*getattr(self, "gangs", []), actors]
        return results[0][0] if outputs == 1 else tuple(results[0][:-1])

    def wait(self) -> None:
        """Wait for every submitted task; raise TaskFailed, naming the task, on the first failure."""
        order = {task: i for i, task in enumerate(self.submitted)}
        while self.pending:
            ready, _ = ray.wait(list(self.pending), num_returns=len(self.pending), timeout=0.1, fetch_local=False)
            failed: list[tuple[int, str, Exception]] = []
            for ref in ready:
                task = self.pending.pop(ref)
                try:
                    ray.get(ref)
                except ray.exceptions.RayError as exc:  # the task, or one it waited for, failed
                    failed.append((order.get(task, 0), task, exc))
                    continue
                if task not in self.pending.values():
                    self.progress.advance(name=task)
            if failed:  # name the first in submission order: what fails after it may fail because of it
                _, task, exc = min(failed, key=lambda f: f[0])
                raise TaskFailed(f"task `{task}` failed: {exc}") from exc
        self.progress.close()
        for actors in getattr(self, "gangs", []):
            for actor in actors:
                ray.kill(actor)

    def close(self) -> None:
        for actor in self.__dict__.get("actors", {}).values():
            ray.kill(actor)

    def fetch(self, *values: object) -> tuple:
        """The pipeline's result values, brought to the driver."""
        out = []
        for value in values:
            if isinstance(value, Stored):
                stored = self.store.load(value.task, FINGERPRINTS[value.task])
                out.append(stored if value.outputs == 1 else stored[value.index])
            else:
                got = ray.get(value)
                if isinstance(got, tuple) and len(got) == 3 and got[0] == HELD:  # its state's final object
                    got = ray.get(self.__dict__["actors"][got[1]].value.remote(got[2]))
                out.append(got)
        return tuple(out)


def local_resources() -> dict[str, object]:
    """Size a local Ray for the plan: enough CPUs, GPUs (fake ones on a CPU-only machine) and custom
    resources for every device's bundle and every task."""
    total: dict[str, float] = {}
    for _, bundle in DEVICES:
        for key, amount in bundle.items():
            total[key] = total.get(key, 0.0) + amount
    for need in DEMANDS.values():
        for key, amount in need.items():
            total[key] = max(total.get(key, 0.0), amount)
    cpus = max(os.cpu_count() or 1, int(-(-total.pop("CPU", 1.0) // 1)))
    gpus = int(-(-total.pop("GPU", 0.0) // 1))
    total.pop("memory", None)
    return {"num_cpus": cpus, "num_gpus": gpus, "resources": total}


def connect(address: str | None, source_root: Path) -> None:
    """Connect to the Ray cluster at `address`, or start a local one sized for the plan. Workers find the
    pipeline's modules through PYTHONPATH."""
    paths = [str((source_root / entry).resolve()) for entry in SEARCH_PATHS]
    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)
    inherited = os.environ.get("PYTHONPATH")
    runtime_env = {"env_vars": {"PYTHONPATH": os.pathsep.join([*paths, *([inherited] if inherited else [])])}}
    if ray.is_initialized():  # main() called from a process that is already a Ray driver
        return
    if address:
        ray.init(address=address, runtime_env=runtime_env, log_to_driver=True)
    else:  # "local": a Ray of our own, even when another one runs on this machine
        ray.init(address="local", runtime_env=runtime_env, include_dashboard=False, **local_resources())
'''

_MAIN = '''\
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=f"Run pipeline {PIPELINE!r} on Ray.")
    parser.add_argument("--address", default=os.environ.get("RAY_ADDRESS"), metavar="ADDR",
                        help="Ray cluster to connect to (default: $RAY_ADDRESS, else start a local Ray)")
    parser.add_argument("--placement", choices=PLACEMENTS, default=PLACEMENT,
                        help="hold tasks to their devices by node affinity or by one placement-group bundle "
                             "per device (default: %(default)s)")
    parser.add_argument("--run-dir", type=Path, metavar="DIR",
                        help="directory for task outputs and the event log (default: dagc-runs/PIPELINE-RUN_ID)")
    parser.add_argument("--resume", type=Path, metavar="RUN_DIR",
                        help="finish an earlier run: reuse its stored outputs, run only what did not finish")
    parser.add_argument("--result", type=Path, metavar="PATH",
                        help="write the pipeline's return value to PATH (pickle)")
    parser.add_argument("--source-root", type=Path, default=SOURCE_ROOT, metavar="DIR",
                        help="directory of the pipeline's source files (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.resume and args.run_dir:
        parser.error("--resume RUN_DIR already names the run directory; drop --run-dir")
    run_id = new_run_id()
    if args.resume:
        try:
            store = RunStore.open(args.resume)
        except (OSError, ValueError) as exc:
            parser.error(f"--resume: {exc}")
    else:
        store = RunStore(args.run_dir or Path("dagc-runs") / f"{PIPELINE}-{run_id}", PIPELINE)
    log = EventLog(store.events_path, run_id)
    print(f"run {run_id}: run directory {store.root}", file=sys.stderr)
    connect(args.address, args.source_root)
    start = time.perf_counter()
    placement = None
    try:
        placement = Placement(DEVICES, args.placement, PLACEMENT_TIMEOUT) if DEVICES else None
        log.write("run_start", pipeline=PIPELINE, tasks=len(FINGERPRINTS), resume=bool(args.resume),
                  run_dir=str(store.root), nodes=placement.nodes if placement else None,
                  placement=placement.mode if placement else None)
        driver = Driver(store, log, bool(args.resume), placement)
        try:
            result = run(driver)
        finally:
            driver.close()
    except (TaskFailed, PlacementError) as exc:
        log.write("run_failed", error=str(exc))
        print(f"error: {exc}", file=sys.stderr)
        if isinstance(exc, TaskFailed):
            print(f"finish the run with: --resume {store.root}", file=sys.stderr)
        return 1
    finally:
        if placement is not None:
            placement.release()
    nbytes = store.save_result(result)
    log.write("run_end", duration=round(time.perf_counter() - start, 6), bytes=nbytes)
    if args.result is not None:
        args.result.parent.mkdir(parents=True, exist_ok=True)
        args.result.write_bytes(pickle.dumps(result))
    else:
        print(repr(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''
