"""`dagc check --profile RUN_DIR`: effects the compiler assumed that a run never saw.

A run with the run-time check of effects (on by default on every backend) records, per task call, the parameters it was allowed to change but left alone and whether it was
allowed to draw from the global generator but did not (`effects_unseen` events). Where every recorded
call of a task left a parameter alone, the assumption may be too wide: it costs parallelism (the task is
ordered and placed with what it might change) and caching. DAGC158 says so at the call, with the
declaration that relaxes it; a run is evidence, not proof, so it is a warning for the user to weigh.
`dagc check` without `--profile` does the same over the script's own runs under `.dagc/runs/` once there
are RUNS_FOR_HINT of them since the script last changed.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from dagc.diagnostics import Diagnostic, DiagnosticSink

__all__ = ["unseen_effects", "RUNS_FOR_HINT"]

RUNS_FOR_HINT = 3


def unseen_effects(graph: Any, run_dir: str | Path | list[Path]) -> list[Diagnostic]:
    """DAGC158 for each task parameter (and random draw) assumed but never seen in `run_dir`'s log (or in
    each of several run directories': what `dagc check` reads under `.dagc/runs/` by itself)."""
    from dagc.runtime.events import read_events

    dirs = run_dir if isinstance(run_dir, list) else [Path(run_dir)]
    where = str(run_dir) if not isinstance(run_dir, list) else f"{len(dirs)} runs under .dagc/runs"
    ends: Counter[str] = Counter()
    unseen_params: Counter[tuple[str, str]] = Counter()
    unseen_rng: Counter[str] = Counter()
    for directory in dirs:
        path = Path(directory) / "events.jsonl"
        ends.update(e.get("task") for e in read_events(path, event="end"))
        for event in read_events(path, event="effects_unseen"):
            for param in event.get("params") or ():
                unseen_params[(event.get("task"), param)] += 1
            if event.get("rng"):
                unseen_rng[event.get("task")] += 1
    run_dir = where
    sink = DiagnosticSink()
    by_function: dict[str, list[Any]] = {}
    for node in graph:
        if node.op == "task" and node.target and ends.get(node.name):
            by_function.setdefault(node.target, []).append(node)
    for target, nodes in sorted(by_function.items()):
        calls = sum(ends[n.name] for n in nodes)
        function = target.rpartition(":")[2]
        first = nodes[0]
        params = sorted({p for n in nodes for (t, p) in unseen_params if t == n.name
                         and p not in n.options.readonly})  # (declared since the run: nothing to say)
        never = [p for p in params if sum(unseen_params[(n.name, p)] for n in nodes) >= calls]
        if never:
            sink.warning("DAGC158", f"task `{function}` never changed {', '.join(f'`{p}`' for p in never)} in the "
                         f"{calls} call(s) recorded in {run_dir}, though dagc assumes it may",
                         first.span, hint=f"if it only reads them, declare it: `@dagc.task(readonly={never!r})`; "
                         "the calls then stay free to run in parallel and be cached",
                         fix=_readonly_fix(graph, target, never))
        if first.effects.rng and sum(unseen_rng[n.name] for n in nodes) >= calls:
            sink.warning("DAGC158", f"task `{function}` never drew from the global random generator in the {calls} "
                         f"call(s) recorded in {run_dir}, though dagc assumes it may ({first.effects.rng})",
                         first.span, hint="if its draws never matter, declare it `pure=True`; if it draws only "
                         "sometimes, seed inside it to make it independent")
    return sink.diagnostics


def _readonly_fix(graph: Any, target: str, names: list[str]) -> Any:
    """The fix declaring `names` readonly on the task `target` (`module:qualname`) names, in its module's file."""
    from dagc.frontend.fix_edits import declare_readonly_fix

    module, _, qualname = target.partition(":")
    file = graph.modules.get(module)
    return declare_readonly_fix(Path(graph.root or ".") / file, qualname, names) if file else None
