"""A `map` region on Ray: its items run as separate Ray tasks (docs/ray_backend.md, "Maps").

The region's own task (`run_map`, on a worker) lists the items, submits one task per item (at most
`concurrency` at once), and gathers their results in item order: each item returns, per output of
the region, the list of values it appends. Each item's result is stored in the run directory under
`REGION[i]` and a fingerprint of the region, the index and the item's value, so a resumed run
reruns only the items that had not finished. The first item that fails (after its retries) fails
the region; the items still running are cancelled.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Sequence
from typing import Any

import ray

from dagc.runtime.events import EventLog
from dagc.runtime.executor import TaskFailed
from dagc.runtime.store import RunStore, fingerprint

__all__ = ["run_map", "item_fingerprint"]


def item_fingerprint(region_fingerprint: str, index: int, item: object) -> str:
    """The fingerprint of item `index` of a map: its region's, its index and its value (pickled; a
    value that does not pickle is fingerprinted by its repr, which may differ between runs: such an
    item is then simply run again)."""
    try:
        digest = hashlib.sha256(pickle.dumps(item, protocol=4)).hexdigest()
    except Exception:  # noqa: BLE001 - any pickling failure: fall back to repr
        digest = "repr:" + hashlib.sha256(repr(item).encode("utf-8")).hexdigest()
    return fingerprint(f"map-item:{index}", None, (region_fingerprint, digest))


def _strategy() -> dict[str, Any]:
    """Items run in the placement group their region runs in, when it runs in one."""
    from ray.util import get_current_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    group = get_current_placement_group()
    return {"scheduling_strategy": PlacementGroupSchedulingStrategy(group)} if group is not None else {}


def run_map(job: Any, item_fn: Any, items: Sequence[object], args: tuple, inits: tuple[list, ...],
            concurrency: int | None = None) -> object:
    """Run `item_fn(item_job, item, *args)` for every item as a Ray task; the region's outputs: each
    output's initial list followed by what every item appended, in item order."""
    from dagc.runtime.ray import Job

    store = RunStore(job.run_dir)
    base = job.row[0]
    results: list[tuple | None] = [None] * len(items)
    todo: list[tuple[int, str, str | None]] = []
    log = EventLog(store.events_path, job.run_id)
    for i, item in enumerate(items):
        name = f"{job.task}[{i}]"
        fp = item_fingerprint(base, i, item) if base else None
        if fp is not None and store.has(name, fp):
            results[i] = store.load(name, fp)
            log.skip(name, fp, source="run")
        else:
            todo.append((i, name, fp))
    shared = tuple(ray.put(a) for a in args)  # once, not once per item
    options = _strategy()
    limit = max(1, concurrency or len(todo) or 1)
    pending: dict[ray.ObjectRef, tuple[int, str]] = {}
    queue = iter(todo)

    def submit() -> None:
        for i, name, fp in queue:
            item_job = Job(name, (fp, *job.row[1:]), job.run_dir, job.run_id, job.cache, job.device, 1,
                           job.interpreter)
            pending[item_fn.options(**options).remote(item_job, items[i], *shared)] = (i, name)
            if len(pending) >= limit:
                return

    submit()
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            i, name = pending.pop(ref)
            try:
                value, _info = ray.get(ref)
            except Exception as exc:
                for other in pending:  # fail fast: the region has failed, its other items are not needed
                    ray.cancel(other, force=False)
                cause = exc.cause if isinstance(exc, ray.exceptions.RayTaskError) and exc.cause else exc
                if isinstance(cause, TaskFailed):
                    raise cause from None
                raise TaskFailed(name, 0, cause) from None
            results[i] = value
        submit()
    outputs = [list(init) for init in inits]
    for value in results:
        for k, appended in enumerate(value or ()):
            outputs[k].extend(appended)
    if not outputs:
        return None
    return outputs[0] if len(outputs) == 1 else tuple(outputs)
