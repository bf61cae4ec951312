"""Learned costs: the compiler plans with what earlier runs measured (dagc.runtime.costs), by default.

For each task of the graph (a top-level task, fused group or region, as the programs run and record them),
the records of the same pipeline and task whose code digest is the code compiled now (a task whose code
changed has no figures until it runs again) give its cost: the median wall time of its most recent
`RECENT` runs, and the median size of its stored output. Failed attempts are never recorded. The
annotations stay the prior: a task without records keeps its `cost=` (or the default), and keeps its
annotations in `profile.annotated` when measured ones replace them, as `--profile RUN_DIR` does.

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

from dagc.ir.core import Graph
from dagc.profile import _measure
from dagc.runtime.costs import read_costs

__all__ = ["RECENT", "LEARNED_ATTR", "RUNS_ATTR", "DEFAULT_STORE", "apply_learned_costs"]

# the store a compile uses when its caller names none: the command line sets it (every `dagc` command that
# plans, unless --no-learned-costs or --profile); a compile from Python uses none unless it names one, so that
# its output depends on its input only
DEFAULT_STORE: contextvars.ContextVar[Path | None] = contextvars.ContextVar("dagc_cost_store", default=None)

RECENT = 5  # runs a figure is the median of: recent enough to follow the machine, enough to ignore one outlier
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
    runs: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        task = record["task"]
        if record["pipeline"] == graph.name and task in digests and record.get("code") == digests[task]:
            runs.setdefault(task, []).append(record)
    measured: list[str] = []
    for node in graph:
        found = runs.get(node.name)
        if not found:
            continue
        recent = found[-RECENT:]
        duration = statistics.median(float(r["wall"]) for r in recent)
        sizes = [int(r["bytes"]) for r in recent if isinstance(r.get("bytes"), int) and not isinstance(r["bytes"], bool)]
        _measure(node, duration, int(statistics.median(sizes)) if sizes else None)
        node.attrs[RUNS_ATTR] = len(recent)
        measured.append(node.name)
    if measured:
        graph.attrs[LEARNED_ATTR] = {"store": str(store), "tasks": {n: graph.node(n).attrs[RUNS_ATTR] for n in measured}}
    return measured, skipped
