"""`dagc plan FILE... --cluster SPEC`: place and schedule task graphs, and print the plan.

FILE may be a pipeline script (`.py`, compiled through `dagc.driver.compile_file`), a saved dagc IR
(`.json` with `"dagc_ir"`), an STG task graph (`.stg`) or a WfCommons workflow (`.json`, wfformat).
Text output is one table row per file, then notes (tasks that used default costs or sizes).
`--json` prints JSON Lines: one object per file, each on its own line, in the order given (the
fields are described in docs/cli.md). Besides the totals, an object carries the plan itself:
`schedule`, one `{task, device, start, end}` per task (and `devices` when a task spans several),
and `transfers`, one `{src, dst, bytes, from_device, to_device, start, end}` per piece of data that
crosses devices: it leaves when its producer ends and must arrive before its consumer starts.
For a pipeline script the plan also gives its makespan once the `comm` pass has chosen the
transfers (`dagc.commtime`): with point-to-point messages only, and with the collectives the cost
model prefers (broadcast, reduce, all-reduce, gather).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from dagc.cluster import (
    Cluster,
    ClusterError,
    resolve_cluster,
)
from dagc.cost import CostModel
from dagc.diagnostics import CompileError, Diagnostic, Severity, render_text
from dagc.sched import ALGORITHMS, DEFAULT_BUDGET, Problem, Schedule, lower_bound, schedule, validate
from dagc.sched.loaders import TaskGraph, read_stg, read_wfcommons
from dagc.units import format_duration, format_size
from dagc.usage import parse_params

__all__ = ["add_plan_arguments", "run_plan", "run_plan_command", "plan_file", "PlanResult"]


def add_plan_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="pipeline script (.py), saved IR (.json), STG graph (.stg) or WfCommons workflow (.json)")
    parser.add_argument("--pipeline", metavar="NAME", help="which @dagc.pipeline to plan when a script has several")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="set a pipeline parameter (a Python literal, else a string); repeatable")
    parser.add_argument("--cluster", metavar="SPEC",
                        help='"N" (one node, N devices), "MxN" (M nodes of N devices) or a cluster .toml file '
                        "(default: [tool.dagc] in pyproject.toml, else one local device)")
    parser.add_argument("--link-bandwidth", metavar="BW",
                        help='bandwidth of every link: bytes per second (1e9, 1.25e10) or with a unit ("10Gbit/s")')
    parser.add_argument("--link-latency", metavar="T", help='latency of every link, e.g. "20us"')
    parser.add_argument("--algo", choices=ALGORITHMS, default="dagc", help="scheduling algorithm (default: dagc)")
    parser.add_argument("--objective", choices=("time", "energy", "edp"), default="time",
                        help="what the plan minimises: the makespan (default), the estimated energy, or energy × "
                        "makespan (edp); energy and edp may use fewer of the cluster's devices (its first N)")
    parser.add_argument("--backend", choices=("ray", "torch", "local"), default="ray",
                        help="the program the plan is for: its launch overhead, and on torch maps spread over "
                        "ranks (default: ray); the devices it prints are those that program runs each task on")
    parser.add_argument("--seed", type=int, default=0, help="search seed (default: 0)")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET,
                        help=f"search effort per file, in seconds (default: {DEFAULT_BUDGET})")
    parser.add_argument("--json", action="store_true",
                        help="print JSON Lines: one object per file (totals, schedule, transfers) per line")
    parser.add_argument("--together", action="store_true",
                        help="plan the files as pipelines sharing the cluster: highest @dagc.pipeline(priority=) "
                        "first, as if alone, the others in the time it leaves free")


def _cluster_from_args(args: argparse.Namespace) -> Cluster:
    cluster = resolve_cluster(getattr(args, "cluster", None), link_bandwidth=getattr(args, "link_bandwidth", None),
                              link_latency=getattr(args, "link_latency", None), near=args.files[0])
    return cluster if cluster is not None else Cluster.local()


def run_plan_command(args: argparse.Namespace) -> int:
    """Entry point for the `plan` subcommand (argparse namespace from `add_plan_arguments`)."""
    try:
        cluster = _cluster_from_args(args)
    except ClusterError as exc:
        sys.stderr.write(render_text([Diagnostic("DAGC301", Severity.ERROR, exc.message, hint=exc.hint)]))
        return 2
    if getattr(args, "together", False):
        from dagc.plan_together import run_plan_together

        return run_plan_together(args.files, cluster, args.algo, args.json, sys.stdout,
                                 seed=getattr(args, "seed", 0), budget=getattr(args, "budget", DEFAULT_BUDGET),
                                 profile=getattr(args, "profile", None), pipeline=getattr(args, "pipeline", None),
                                 params=parse_params(getattr(args, "param", None) or []))
    return run_plan(args.files, cluster, args.algo, args.json, sys.stdout,
                    seed=getattr(args, "seed", 0), budget=getattr(args, "budget", DEFAULT_BUDGET),
                    profile=getattr(args, "profile", None), pipeline=getattr(args, "pipeline", None),
                    params=parse_params(getattr(args, "param", None) or []), backend=getattr(args, "backend", "ray"),
                    objective=getattr(args, "objective", "time"))


@dataclass
class PlanResult:
    file: str
    tasks: int = 0
    devices: int = 0
    algo: str = ""
    makespan: float = 0.0
    lower_bound: float = 0.0
    utilization: list[float] = field(default_factory=list)
    cut_edges: int = 0
    cut_bytes: float = 0.0
    valid: bool = False
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    defaults: dict[str, list[str]] = field(default_factory=lambda: {"cost": [], "out_size": []})
    profiled: str | None = None  # which costs came from a profile (dagc.profile.describe_profile)
    shared: list[str] = field(default_factory=list)  # why tasks are kept in one process (pieces of state)
    errors: list[Diagnostic] = field(default_factory=list)
    schedule: list[dict[str, Any]] = field(default_factory=list)  # per task: task, device, start, end
    transfers: list[dict[str, Any]] = field(default_factory=list)  # per cross-device datum, with its times
    # a pipeline script's makespan with its transfers as `comm` emits them (None for other inputs)
    p2p_makespan: float | None = None
    comm_makespan: float | None = None
    collectives: int = 0
    pipeline: str | None = None  # a script's or IR's pipeline name
    priority: int = 0  # its `@dagc.pipeline(priority=N)`
    problem: Problem | None = field(default=None, repr=False)  # what was scheduled (not in the JSON)
    graph: Any = field(default=None, repr=False)  # a pipeline's graph, when the input is one (not in the JSON)
    objective: str = "time"
    energy: float = 0.0  # estimated joules (dagc.energy): the devices' busy and idle power
    devices_used: int = 0  # devices the chosen schedule uses
    solo: Schedule | None = field(default=None, repr=False)

    @property
    def ratio(self) -> float:
        return self.makespan / self.lower_bound if self.lower_bound > 0 else 1.0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.file}
        if self.errors:
            out["errors"] = [d.to_json() for d in self.errors]
            out["valid"] = False
            return out
        out.update(
            tasks=self.tasks, devices=self.devices, algo=self.algo, makespan=self.makespan,
            lower_bound=self.lower_bound, ratio=self.ratio, utilization=self.utilization,
            cut_edges=self.cut_edges, cut_bytes=self.cut_bytes, valid=self.valid, problems=self.problems,
            seconds=round(self.seconds, 6), defaults=self.defaults, objective=self.objective,
            energy=round(self.energy, 3), devices_used=self.devices_used,
        )
        if self.profiled:
            out["profile"] = self.profiled
        if self.shared:
            out["shared_state"] = self.shared
        out.update(schedule=self.schedule, transfers=self.transfers)
        if self.comm_makespan is not None:
            out.update(p2p_makespan=self.p2p_makespan, comm_makespan=self.comm_makespan,
                       collectives=self.collectives)
        return out


def _problem_from_task_graph(tg: TaskGraph, cluster: Cluster) -> Problem:
    devs = cluster.devices
    return Problem(
        names=list(tg.names), work=list(tg.work), preds=[list(ps) for ps in tg.preds],
        speed=[d.speed for d in devs], node_of=[d.node for d in devs], flops_rate=[d.flops_rate for d in devs],
        dev_memory=[d.memory for d in devs], dev_gpus=[d.gpus for d in devs],
        intra=(cluster.intra.latency, cluster.intra.bandwidth),
        inter=(cluster.inter.latency, cluster.inter.bandwidth),
    )


def _load(path: str, cluster: Cluster, cost: CostModel, profile: str | None = None,
          result: PlanResult | None = None, pipeline: str | None = None,
          params: dict[str, Any] | None = None) -> tuple[Problem, dict[str, list[str]]]:
    backend = cost.backend
    """The file as a scheduling problem, with the tasks that used default estimates."""
    none: dict[str, list[str]] = {"cost": [], "out_size": []}
    if path.endswith(".stg"):
        return _problem_from_task_graph(read_stg(path), cluster), none
    graph = None
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if isinstance(data, dict) and "workflow" in data:
            return _problem_from_task_graph(read_wfcommons(path), cluster), none
        from dagc.ir.serialize import graph_from_json

        graph = graph_from_json(data)
    elif path.endswith(".py"):
        from dagc.driver import compile_file

        # the passes before placement of the backend's own pipeline (torch spreads maps over ranks first)
        graph = compile_file(path, passes="verify,dce,cse" + (",spread" if backend == "torch" else ""),
                             profile=profile, pipeline_name=pipeline, params=params, cluster=cluster,
                             backend=backend)
    else:
        raise CompileError([Diagnostic(
            "DAGC006", Severity.ERROR, f"cannot plan {path!r}: unknown kind of file",
            hint="give a pipeline script (.py), a saved IR (.json), an STG graph (.stg) or a WfCommons "
            "workflow (.json)")])
    from dagc.passes.base import PassContext
    from dagc.passes.partition import build_problem

    if profile is not None and not graph.attrs.get("profile.run"):
        from dagc.profile import apply_profile, load_run

        apply_profile(graph, load_run(profile))
    if result is not None:
        from dagc.profile import describe_profile

        result.pipeline = graph.name
        result.priority = int(graph.attrs.get("pipeline.priority", 0))
        result.profiled = describe_profile(graph)
        result.shared = _shared_state(graph)
        result.graph = graph
    p = build_problem(PassContext(cluster=cluster, cost_model=cost), graph)
    return p, cost.defaulted(graph)


def _shared_state(graph: Any) -> list[str]:
    """One line per piece of state that keeps several tasks in one process, largest first."""
    from dagc.ir.effects import state_groups

    groups = sorted((g for g in state_groups(graph) if len(g.nodes) > 1), key=lambda g: -len(g.nodes))
    lines = []
    for group in groups:
        what = group.name.removeprefix("global:").removeprefix("drawn:").replace("rng:global", "the global random generator")
        shown = ", ".join(group.nodes[:4]) + (f" and {len(group.nodes) - 4} more" if len(group.nodes) > 4 else "")
        lines.append(f"{len(group.nodes)} tasks share `{what}` and run in one process, in order ({shown}): "
                     f"{group.why}")
    return lines


def plan_file(path: str, cluster: Cluster, algo: str = "dagc", *, seed: int = 0,
              budget: float = DEFAULT_BUDGET, cost: CostModel | None = None, profile: str | None = None,
              pipeline: str | None = None, params: dict[str, Any] | None = None,
              with_transfers: bool = True, backend: str = "ray", objective: str = "time") -> PlanResult:
    """Plan one file for `backend`'s program (its launch overhead; torch spreads maps over ranks), as its
    compile places it; `with_transfers`: also a pipeline script's makespan once `comm` has chosen the
    transfers (two more compilations). `objective` (dagc.energy): "time", or "energy"/"edp", which may plan on
    the cluster's first N devices only."""
    cost = cost or CostModel(backend=backend)
    result = PlanResult(file=path, devices=cluster.n_devices, algo=algo, objective=objective)
    try:
        p, result.defaults = _load(path, cluster, cost, profile, result, pipeline, params)
    except CompileError as exc:
        result.errors = exc.diagnostics
        return result
    except (OSError, ValueError, KeyError, TypeError) as exc:
        result.errors = [Diagnostic("DAGC006", Severity.ERROR, f"cannot read {path!r}: {exc}",
                                    hint="check the file's format (see `dagc plan --help`)")]
        return result
    start = time.perf_counter()
    try:
        s = _pinned_schedule(p, result.graph, cluster, cost, algo, seed, budget)
        if objective != "time":
            p, s, cluster = _fewest_devices(path, p, s, result, cluster, cost, algo, seed, budget, profile,
                                            pipeline, params)
    except CompileError as exc:
        result.errors = exc.diagnostics
        return result
    result.seconds = time.perf_counter() - start
    from dagc.energy import schedule_energy

    result.energy = schedule_energy(p, s, cluster)
    result.devices_used = len({d for devices in s.devices for d in devices})
    result.tasks = p.n
    result.makespan = s.makespan
    result.lower_bound = lower_bound(p)
    result.utilization = [round(u, 6) for u in s.utilization(p.D)]
    cut = s.cut_edges(p)
    result.cut_edges = len(cut)
    result.cut_bytes = sum(b for _, _, b in cut)
    result.problems = validate(p, s)
    result.valid = not result.problems
    result.schedule, result.transfers = timeline_records(p, s)
    result.problem, result.solo = p, s
    if with_transfers and path.endswith(".py") and profile is None:
        _comm_estimates(result, path, cluster, cost, algo, seed, budget, pipeline, params)
    result.devices = cluster.n_devices
    return result


def _pinned_schedule(p: Problem, graph: Any, cluster: Cluster, cost: CostModel, algo: str, seed: int,
                     budget: float) -> Schedule:
    """`p` scheduled as the `partition` pass does for the programs: the tasks of one piece of state on one
    device (a pipeline's `graph`; None for other inputs)."""
    s = schedule(p, algo, seed=seed, budget=budget)
    if graph is not None and p.D > 1:
        from dagc.passes.base import PassContext
        from dagc.passes.partition import pin_state

        if pin_state(PassContext(cluster=cluster, cost_model=cost), graph, p, s):
            s = schedule(p, algo, seed=seed, budget=budget)
    return s


def _fewest_devices(path: str, p: Problem, s: Schedule, result: PlanResult, cluster: Cluster, cost: CostModel,
                    algo: str, seed: int, budget: float, profile: str | None, pipeline: str | None,
                    params: dict[str, Any] | None) -> tuple[Problem, Schedule, Cluster]:
    """The plan on the cluster's first N devices (N = 1 .. all) that minimises `result.objective`: fewer
    devices idle less, more finish sooner (dagc.energy)."""
    from dagc.energy import objective_value, schedule_energy
    from dagc.passes.base import PassContext
    from dagc.passes.partition import build_problem

    best = (objective_value(result.objective, s.makespan, schedule_energy(p, s, cluster)), cluster.n_devices)
    chosen = (p, s, cluster)
    for count in range(1, cluster.n_devices):
        fewer = cluster.first(count)
        try:
            if result.graph is not None:
                q = build_problem(PassContext(cluster=fewer, cost_model=cost), result.graph)
            else:
                q, _ = _load(path, fewer, cost, profile, None, pipeline, params)
            t = _pinned_schedule(q, result.graph, fewer, cost, algo, seed, budget)
        except CompileError:  # its tasks do not fit so few devices
            continue
        if q.infeasible:
            continue
        value = (objective_value(result.objective, t.makespan, schedule_energy(q, t, fewer)), count)
        if value < best:
            best, chosen = value, (q, t, fewer)
    return chosen


def timeline_records(p: Problem, s: Schedule) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The schedule as records: tasks by start time, and every transfer between devices. Data leaves
    its producer's nearest device when the producer ends (the schedulers' model, `dagc.sched.problem`)."""
    order = sorted(range(p.n), key=lambda i: (s.start[i], s.devices[i][0], i))
    tasks: list[dict[str, Any]] = []
    for i in order:
        record: dict[str, Any] = {"task": p.names[i], "device": s.devices[i][0], "start": s.start[i],
                                  "end": s.finish[i]}
        if len(s.devices[i]) > 1:
            record["devices"] = list(s.devices[i])
        tasks.append(record)
    transfers: list[dict[str, Any]] = []
    for i in order:
        for j, nbytes in sorted(p.preds[i]):
            for d in s.devices[i]:
                if d in s.devices[j]:
                    continue
                source = min(s.devices[j], key=lambda e: (p.comm(nbytes, e, d), e))
                transfers.append({"src": p.names[j], "dst": p.names[i], "bytes": nbytes, "from_device": source,
                                  "to_device": d, "start": s.finish[j],
                                  "end": s.finish[j] + p.comm(nbytes, source, d)})
    return tasks, transfers


def _comm_estimates(result: PlanResult, path: str, cluster: Cluster, cost: CostModel, algo: str, seed: int,
                    budget: float, pipeline: str | None = None, params: dict[str, Any] | None = None) -> None:
    """The makespan with the transfers `comm` emits, point-to-point only and with collectives."""
    from dagc.commtime import timed_makespan
    from dagc.driver import compile_file
    from dagc.ir.facts import reduction_of, transfer_of

    for collectives in (False, True):
        passes = (f"verify,dce,cse,partition{{algo={algo},seed={seed},budget={budget}}},schedule,"
                  f"comm{{collectives={str(collectives).lower()}}}")
        try:
            graph = compile_file(path, passes=passes, cluster=cluster, pipeline_name=pipeline, params=params,
                                 backend=cost.backend)
        except CompileError:
            return
        makespan = timed_makespan(graph, cluster, cost)
        if collectives:
            result.comm_makespan = makespan
            result.collectives = sum(1 for n in graph if transfer_of(n).kind == "broadcast"
                                     or reduction_of(n) is not None) \
                + len({transfer_of(n).gather for n in graph if transfer_of(n).kind == "gather"})
        else:
            result.p2p_makespan = makespan


def run_plan(files: list[str], cluster: Cluster, algo: str, as_json: bool, out: TextIO, *,
             seed: int = 0, budget: float = DEFAULT_BUDGET, profile: str | None = None,
             pipeline: str | None = None, params: dict[str, Any] | None = None, backend: str = "ray",
             objective: str = "time") -> int:
    """Plan every file; print a table (or JSON). Returns 0 when every file got a valid plan."""
    results = [plan_file(f, cluster, algo, seed=seed, budget=budget, profile=profile, pipeline=pipeline,
                         params=params, backend=backend, objective=objective)
               for f in files]
    if as_json:
        out.write("".join(json.dumps(r.to_json()) + "\n" for r in results))
    else:
        out.write(_table(results, cluster, algo))
        errors = [d for r in results for d in r.errors]
        if errors:
            sys.stderr.write(render_text(errors))
    return 0 if all(r.valid for r in results) else 1


def _placement_lines(r: PlanResult, cluster: Cluster, shown: int = 12) -> list[str]:
    """Per device, the tasks it runs in the order it runs them (what the program does:
    tests/test_plan_is_the_run), with start, end and why the device waits before a task when it does."""
    from dagc.plan_table import device_tables

    return device_tables(r.schedule, r.transfers, _waits(r), cluster, shown, _state_of(r.graph))


def _state_of(graph: Any) -> dict[str, str]:
    """Task → the piece of state it shares with other tasks (they run in one process, in order)."""
    if graph is None:
        return {}
    from dagc.ir.effects import state_groups

    named: dict[str, str] = {}
    for group in state_groups(graph):
        if len(group.nodes) > 1:
            what = group.name.removeprefix("global:").removeprefix("drawn:").replace(
                "rng:global", "the global random generator")
            for name in group.nodes:
                named.setdefault(name, what)
    return named


def _waits(r: PlanResult) -> dict[str, list[str]]:
    """Task → the tasks it waits for: its inputs (the scheduled problem's predecessors)."""
    if r.problem is None:
        return {}
    names = r.problem.names
    return {names[i]: [names[j] for j, _ in preds] for i, preds in enumerate(r.problem.preds)}


def _fmt_time(x: float) -> str:
    return f"{x:.6g}"


def _table(results: list[PlanResult], cluster: Cluster, algo: str) -> str:
    header = ["file", "tasks", "devices", "makespan (s)", "lower bound", "ratio", "utilization", "cut bytes",
              "valid", "seconds"]
    rows = []
    for r in results:
        if r.errors:
            rows.append([r.file, "-", str(r.devices), "error", "", "", "", "", "no", ""])
            continue
        util = sum(r.utilization) / len(r.utilization) if r.utilization else 0.0
        rows.append([r.file, str(r.tasks), str(r.devices), _fmt_time(r.makespan), _fmt_time(r.lower_bound),
                     f"{r.ratio:.3f}", f"{100 * util:.0f}%", format_size(r.cut_bytes),
                     "yes" if r.valid else "NO", f"{r.seconds:.2f}"])
    widths = [max(len(h), *(len(row[k]) for row in rows)) for k, h in enumerate(header)]
    lines = [f"plan: {algo} on {cluster.describe()}"]
    lines.append("  ".join(h.ljust(w) if k == 0 else h.rjust(w) for k, (h, w) in enumerate(zip(header, widths))))
    for row in rows:
        lines.append("  ".join(c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(row, widths))))
    if len(results) > 1:
        ok = [r for r in results if not r.errors]
        if ok:
            mean_ratio = sum(r.ratio for r in ok) / len(ok)
            lines.append(f"{len(ok)} file(s), mean ratio to lower bound {mean_ratio:.4f}, "
                         f"{sum(r.seconds for r in ok):.2f}s scheduling")
    for r in results:
        if len(results) == 1 and r.utilization:
            lines.append("utilization per device: " + ", ".join(
                f"{d}: {100 * u:.0f}%" for d, u in enumerate(r.utilization)))
            lines.extend(_placement_lines(r, cluster))
        if r.tasks and not r.errors:
            fewer = f" on {r.devices} of the cluster's {cluster.n_devices} devices" if r.devices < cluster.n_devices \
                else ""
            lines.append(f"energy: {r.file}: about {r.energy:,.0f} J estimated{fewer} (objective: {r.objective}; "
                         "devices' idle and busy watts, docs/cluster.md)")
        if r.profiled:
            lines.append(f"note: {r.file}: {r.profiled}")
        idle = [str(d) for d, u in enumerate(r.utilization) if u == 0]
        if idle and r.shared:  # say why the data flow's parallelism is not used
            lines.append(f"note: {r.file}: device(s) {', '.join(idle)} idle; " + r.shared[0]
                         + " (`dagc check` says how to free them)")
            lines.extend(f"note: {r.file}: {line}" for line in r.shared[1:3])
        if r.comm_makespan is not None and r.p2p_makespan is not None:
            lines.append(f"with transfers: {r.file}: makespan {_fmt_time(r.p2p_makespan)} s with point-to-point "
                         f"messages, {_fmt_time(r.comm_makespan)} s with {r.collectives} collective(s) "
                         f"({r.p2p_makespan / r.comm_makespan:.2f}×)" if r.comm_makespan > 0 else "")
        if r.defaults["cost"]:
            lines.append(f"note: {r.file}: {len(r.defaults['cost'])} task(s) give no cost or flops and are "
                         f"assumed to take {format_duration(CostModel().default_cost)}: "
                         + ", ".join(r.defaults["cost"]))
        if r.defaults["out_size"]:
            lines.append(f"note: {r.file}: {len(r.defaults['out_size'])} task(s) give no out_size and are "
                         f"assumed to produce {format_size(CostModel().default_out_size)}: "
                         + ", ".join(r.defaults["out_size"]))
        for problem in r.problems:
            lines.append(f"invalid: {r.file}: {problem}")
    return "\n".join(lines) + "\n"
