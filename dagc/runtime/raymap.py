"""A `map` region on Ray: its items run as Ray tasks (docs/ray_backend.md, "Maps").

The region's own task (`run_map`, on a worker) lists the items, splits those not finished yet into
chunks, submits one Ray task per chunk (at most `concurrency` chunks at once, so at most that many
items run at once), and gathers the results in item order: each item returns, per output of the
region, the list of values it appends. Chunks of several items keep Ray's per-task cost off small
items; there are a few chunks per parallel slot, so that the slots stay busy to the end. Each item
still runs through the executor on its own (`run_items`: events, retries, timeout) and its result is
stored in the run directory under `REGION[i]` and a fingerprint of the region, the index and the
item's value, so a resumed run reruns only the items that had not finished. The first item that
fails (after its retries) fails the region; the chunks still running are cancelled.
"""

from __future__ import annotations

import hashlib
import math
import pickle
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import ray

from dagc.runtime.events import EventLog
from dagc.runtime.executor import Executor, TaskFailed
from dagc.runtime.maps import record_width
from dagc.runtime.reuse import StoredOutputs
from dagc.runtime.store import RunStore, fingerprint

__all__ = ["run_map", "run_items", "item_fingerprint", "CHUNKS_PER_SLOT"]

CHUNKS_PER_SLOT = 4  # chunks per item that may run at once: enough to balance uneven items


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
    """Chunks run in the placement group their region runs in, when it runs in one."""
    from ray.util import get_current_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    group = get_current_placement_group()
    return {"scheduling_strategy": PlacementGroupSchedulingStrategy(group)} if group is not None else {}


def _chunks(todo: list, slots: int) -> list[list]:
    size = max(1, math.ceil(len(todo) / max(1, slots * CHUNKS_PER_SLOT)))
    return [todo[k:k + size] for k in range(0, len(todo), size)]


def run_map(job: Any, item_fn: Any, items: Sequence[object], args: tuple, inits: tuple[list, ...],
            concurrency: int | None = None) -> object:
    """Run `item_fn(job, chunk, *args)` over chunks of the items as Ray tasks; the region's outputs:
    each output's initial list followed by what every item appended, in item order."""
    store = RunStore(job.run_dir)
    stored = StoredOutputs({}, store, resume=True)  # items finished by an earlier attempt (dagc.runtime.reuse)
    base = job.row.fingerprint
    results: list[tuple | None] = [None] * len(items)
    todo: list[tuple[int, str, str | None, object]] = []
    log = EventLog(store.events_path, job.run_id)
    for i, item in enumerate(items):
        name = f"{job.task}[{i}]"
        fp = item_fingerprint(base, i, item) if base else None
        if fp is not None and stored.in_run(name, fp):
            results[i] = stored.value(name, fp)
            log.skip(name, fp, source="run")
        else:
            todo.append((i, name, fp, item))
    record_width(job.task, len(items), resumed=len(items) - len(todo))
    slots = concurrency or max(1, int(ray.cluster_resources().get("CPU", 1)))
    chunks = iter(_chunks(todo, slots))
    shared = tuple(ray.put(a) for a in args)  # once, not once per chunk
    options = _strategy()
    remote = item_fn.options(**options) if options else item_fn
    pending: dict[ray.ObjectRef, list] = {}

    def submit() -> None:
        for chunk in chunks:
            pending[remote.remote(job, chunk, *shared)] = chunk
            if concurrency is not None and len(pending) >= concurrency:
                return

    submit()
    while pending:
        # every chunk that is ready, in one call (one `ray.wait` per chunk would cost O(chunks^2))
        ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0.05, fetch_local=False)
        for ref in ready:
            chunk = pending.pop(ref)
            try:
                values = ray.get(ref)
            except Exception as exc:
                for other in pending:  # fail fast: the region has failed, its other items are not needed
                    ray.cancel(other, force=False)
                cause = exc.cause if isinstance(exc, ray.exceptions.RayTaskError) and exc.cause else exc
                if isinstance(cause, TaskFailed):
                    raise cause from None
                raise TaskFailed(chunk[0][1], 0, cause) from None
            for (i, *_), value in zip(chunk, values):
                results[i] = value
        submit()
    outputs = [list(init) for init in inits]
    for value in results:
        for k, appended in enumerate(value or ()):
            outputs[k].extend(appended)
    if not outputs:
        return None
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def run_items(job: Any, chunk: list[tuple[int, str, str | None, object]], body: Callable[[object], tuple]) -> list:
    """Run `body(item)` for each item of a chunk, in order, each as its own task of the executor
    (named `REGION[i]`, stored under its item fingerprint); returns their values."""
    job.prepare()
    store = RunStore(job.run_dir)
    where: dict[str, Any] = {"node": ray.get_runtime_context().get_node_id(), "device": job.device,
                             "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}
    context: dict[str, Any] = {"rank": 0, "world_size": 1, "group": None, "run_dir": Path(job.run_dir)}
    if "torch" in sys.modules:
        context["device"] = job.torch_device()
    rows = {name: (fp, *job.row[1:]) for _, name, fp, _ in chunk}
    executor = Executor(rows, store=store, log=EventLog(store.events_path, job.run_id), context=context,
                        where=where, claim=True, threads=job.threads())
    return [executor.run(executor.spec(name), body, item) for _, name, _, item in chunk]
