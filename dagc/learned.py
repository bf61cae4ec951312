"""Learned costs: the compiler plans with what earlier runs measured (dagc.runtime.costs), by default.

For each task of the graph (a top-level task, fused group or region, as the programs run and record them),
the records of the same pipeline and task whose code digest is the code compiled now (a task whose code
changed has no figures until it runs again) give its cost: the median wall time of its most recent
`RECENT` runs, and the median size of its stored output. Failed attempts are never recorded. The
annotations stay the prior: a task without records keeps its `cost=` (or the default), and keeps its
annotations in `profile.annotated` when measured ones replace them, as `--profile RUN_DIR` does.

The tasks inside a fused group or region (a loop's body, a map's items) take the median of their own most
recent runs under the unit's code, and a map the median width its recent listings had (as `--profile` gives
it): the plan spreads it over that many devices (dagc.sched.problem).

The graph gets `costs.learned = {"store": DIR, "tasks": {task: runs}}` and each measured node
`costs.runs` (how many runs its figure is the median of), for `dagc plan` to say which costs were learned
and which are still guesses.
"""

from __future__ import annotations

import contextvars
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dagc.ir.core import REGION_OPS, Graph, Node
from dagc.ir.regions import WIDTH_ATTR, walk
from dagc.profile import _measure
from dagc.runtime.costs import read_costs

__all__ = ["RECENT", "LEARNED_ATTR", "RUNS_ATTR", "DEFAULT_STORE", "apply_learned_costs"]

# the store a compile uses when its caller names none: the command line sets it (every `dagc` command that
# plans, unless --no-learned-costs or --profile); a compile from Python uses none unless it names one, so that
# its output depends on its input only
DEFAULT_STORE: contextvars.ContextVar[Path | None] = contextvars.ContextVar("dagc_cost_store", default=None)

RECENT = 5  # runs a figure is the median of: recent enough to follow the machine, enough to ignore one outlier
RECENT_INSIDE = 25  # runs of a task inside a unit (one per item or trip)
LEARNED_ATTR = "costs.learned"
RUNS_ATTR = "costs.runs"


def apply_learned_costs(graph: Graph, store: Path) -> tuple[list[str], int]:
    """Put the learned figures of `store` in `graph`'s nodes; returns (the nodes that got one, in program order,
    the number of damaged lines skipped in the store)."""
    records, skipped = read_costs(store)
    if not records:
        return [], skipped
    from dagc.backends.fingerprint import code_table

    digests = {task: row[2] for task, row in code_table(graph)[0].items()}
    # (a task inside a unit is recorded with the unit's code)
    inside = {inner.name: digests[node.name] for node in graph if node.name in digests for inner in walk(node)}
    runs: dict[str, list[Mapping[str, Any]]] = {}
    widths: dict[str, list[int]] = {}
    for record in records:
        task = record["task"]
        if record["pipeline"] != graph.name:
            continue
        code = digests.get(task) or inside.get(task)
        if code is None or record.get("code") != code:
            continue
        if "width" in record:
            widths.setdefault(task, []).append(int(record["width"]))
        elif "wall" in record:
            runs.setdefault(task, []).append(record)
    measured: dict[str, int] = {}  # node -> the runs its figures are the median of
    for node in graph:
        for each in (node, *walk(node)):
            if _learn(each, runs.get(each.name), widths.get(each.name), top=each is node):
                measured[each.name] = each.attrs[RUNS_ATTR]
    if measured:
        graph.attrs[LEARNED_ATTR] = {"store": str(store), "tasks": measured}
    return list(measured), skipped


def _learn(node: Node, found: list[Mapping[str, Any]] | None, widths: list[int] | None, top: bool) -> bool:
    """Put the median of `found` (its recent runs) in `node`, and a map's median width; whether it got one."""
    learned = False
    if widths and node.op == "map":
        recent_widths = widths[-RECENT:]
        width = statistics.median(recent_widths)
        if WIDTH_ATTR in node.attrs:
            node.attrs["profile.annotated"] = {"width": node.attrs[WIDTH_ATTR]}
        node.attrs[WIDTH_ATTR] = node.attrs["profile.width"] = int(width) if width == int(width) else width
        node.attrs[RUNS_ATTR] = len(recent_widths)
        learned = True
    if found and node.op not in REGION_OPS:  # (a region is planned from its bodies)
        recent = found[-(RECENT if top else RECENT_INSIDE):]
        duration = statistics.median(float(r["wall"]) for r in recent)
        sizes = [int(r["bytes"]) for r in recent if isinstance(r.get("bytes"), int) and not isinstance(r["bytes"], bool)]
        _measure(node, duration, int(statistics.median(sizes)) if sizes else None)
        node.attrs[RUNS_ATTR] = len(recent)
        learned = True
    elif found:  # a region: what it took as a whole, said by `dagc plan` (its plan comes from its bodies)
        recent = found[-RECENT:]
        node.attrs["profile.duration"] = round(statistics.median(float(r["wall"]) for r in recent), 6)
        node.attrs[RUNS_ATTR] = len(recent)
        learned = True
    return learned
