"""Schedule quality and speed: plain HEFT against the default `dagc` scheduler.

1. STG-50 (180 graphs, no communication) at P = 2, 4, 8, 16: mean gap to the best known schedule
   length (`best_UB`), graphs at (or below) the best known value.
2. WfCommons workflows with the link bandwidth scaled to CCR 0.1 / 1 / 5, at P = 2 / 4 / 8:
   makespan relative to HEFT (never worse; mean improvement).
3. Time of partition + schedule (the IR passes) for 1k / 10k / 100k-task random DAGs on 16 devices.

    python -m benchmarks.schedule_quality [--quick]

`run(quick)` returns the markdown section. Data: $DAGC_DATA, default benchmarks/data in the
repository root.
"""

from __future__ import annotations

import argparse
import csv
import os
import time
from pathlib import Path

from dagc.sched import dagc_schedule, heft, validate
from dagc.sched.loaders import make_problem, read_stg, read_wfcommons, scale_to_ccr
from dagc.sched.random_dag import random_task_graph

__all__ = ["run", "data_dir"]

ROOT = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    return Path(os.environ.get("DAGC_DATA", ROOT / "benchmarks" / "data")).resolve()


def _best_known(data: Path) -> dict[tuple[str, int], float]:
    with open(data / "stg" / "optima" / "best_known_50.csv", encoding="utf-8") as f:
        return {(r["graph"].split("/")[-1], int(r["P"])): float(r["best_UB"]) for r in csv.DictReader(f)}


def stg_section(data: Path, quick: bool) -> list[str]:
    files = sorted((data / "stg" / "50").glob("*.stg"))
    if quick:
        files = files[::6]
    best = _best_known(data)
    graphs = [(f.name, read_stg(str(f))) for f in files]
    lines = [
        f"### STG-50 ({len(graphs)} graphs, no communication): gap to best known",
        "",
        "| P | HEFT gap | HEFT at best | dagc gap | dagc at best | dagc below best known | dagc s/graph |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for P in (2, 4, 8, 16):
        gh = gd = 0.0
        at_h = at_d = below = 0
        seconds = 0.0
        for name, g in graphs:
            p = make_problem(g, P)
            b = best[(name, P)]
            h = heft(p)
            start = time.perf_counter()
            s = dagc_schedule(p)
            seconds += time.perf_counter() - start
            assert not validate(p, s), (name, P)
            gh += h.makespan / b - 1
            gd += s.makespan / b - 1
            at_h += h.makespan <= b + 1e-9
            at_d += s.makespan <= b + 1e-9
            below += s.makespan < b - 1e-9
        n = len(graphs)
        lines.append(
            f"| {P} | {100 * gh / n:.2f} % | {at_h} | {100 * gd / n:.3f} % | {at_d} | {below} | {seconds / n:.3f} |"
        )
    return lines


def wfcommons_section(data: Path, quick: bool) -> list[str]:
    files = sorted((data / "wfcommons").glob("*.json"))
    lines = [
        f"### WfCommons ({len(files)} workflows), bandwidth scaled to a CCR: dagc makespan vs HEFT",
        "",
        "| CCR | P | mean change | best | worst (≤ 0 = never worse) |",
        "|---:|---:|---:|---:|---:|",
    ]
    graphs = [read_wfcommons(str(f)) for f in files]
    for target in (0.1, 1.0, 5.0):
        for P in (2, 4, 8):
            changes = []
            for g in graphs:
                p = scale_to_ccr(g, P, target)
                h, s = heft(p), dagc_schedule(p)
                assert not validate(p, s)
                changes.append(s.makespan / h.makespan - 1)
            mean = sum(changes) / len(changes)
            lines.append(
                f"| {target:g} | {P} | {100 * mean:+.2f} % | {100 * min(changes):+.2f} % | {100 * max(changes):+.2f} % |"
            )
    return lines


def _ir_graph(n: int, seed: int = 0):  # noqa: ANN202
    from dagc.ir.core import Graph, Node
    from dagc.ir.location import SourceSpan
    from dagc.ir.types import Ref, TaskOptions

    tg = random_task_graph(n, seed=seed)
    g = Graph("random", span=SourceSpan("random.py", 1, 1))
    for i, name in enumerate(tg.names):
        args = tuple(Ref(tg.names[j]) for j, _ in tg.preds[i])
        size = int(tg.preds[i][0][1]) if tg.preds[i] else 10**6
        g.add_node(Node(name, "task", "random:f", args=args, span=SourceSpan("random.py", i + 1, 1),
                        options=TaskOptions(cost=tg.work[i], out_size=size)))
    return g


def timing_section(quick: bool) -> list[str]:
    from dagc.cluster import parse_cluster_spec
    from dagc.cost import CostModel
    from dagc.passes import PassContext, PassManager, parse_pipeline

    sizes = (1000, 10000) if quick else (1000, 10000, 100000)
    lines = [
        "### partition + schedule passes, random DAGs on 16 devices (2 nodes × 8)",
        "",
        "| tasks | edges | seconds | makespan / lower bound |",
        "|---:|---:|---:|---:|",
    ]
    cluster = parse_cluster_spec("2x8")
    for n in sizes:
        g = _ir_graph(n)
        edges = len(g.edges())
        ctx = PassContext(cluster=cluster, cost_model=CostModel())
        start = time.perf_counter()
        PassManager(parse_pipeline("partition,schedule"), verify_each=False).run(ctx, g)
        seconds = time.perf_counter() - start
        lines.append(f"| {n} | {edges} | {seconds:.2f} | {g.attrs['schedule.ratio']:.3f} |")
    return lines


def run(quick: bool = False) -> str:
    """The benchmark as a markdown section (`quick`: a sixth of STG-50, no 100k-task DAG)."""
    data = data_dir()
    out = ["## Schedule quality: HEFT vs dagc", ""]
    if (data / "stg" / "50").is_dir():
        out += stg_section(data, quick) + [""]
    else:
        out += [f"(STG data not found at {data})", ""]
    if (data / "wfcommons").is_dir():
        out += wfcommons_section(data, quick) + [""]
    out += timing_section(quick) + [""]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    print(run(parser.parse_args().quick))


if __name__ == "__main__":
    main()
