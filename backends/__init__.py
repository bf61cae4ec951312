"""Backends: IR → runnable programs (local, Ray, torch.distributed) and pictures (graphviz).

`REGISTRY` is the one description of each backend — its emitter, the passes it needs, what launching a
task costs on it, and the task options it honours — read by the driver (default passes), the cost
model (launch overhead), the CLI (`--backend` choices) and `dagc check --backend B` (options B would
ignore are warnings, never silence).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the command line reads BACKENDS' names at start-up: no IR import for that
    from dagc.ir.core import Graph

__all__ = ["BACKENDS", "REGISTRY", "Backend", "emit", "ignored_options"]


@dataclass(frozen=True)
class Backend:
    """What one backend is and does."""

    name: str
    emitter: Callable[[Graph, Path | None], str]
    required_passes: str | None  # the pass pipeline its programs need; None: the driver's default
    launch_overhead: float  # seconds the engine spends starting one task (the cost model's)
    ignores: dict[str, str]  # task option → why this backend cannot honour it

    def emit(self, graph: Graph, out: Path | None = None) -> str:
        return self.emitter(graph, out)


def _local(graph: Graph, out: Path | None) -> str:
    from dagc.backends.local import emit_local

    return emit_local(graph, out)


def _torch(graph: Graph, out: Path | None) -> str:
    from dagc.backends.torch import emit_torch

    return emit_torch(graph, out)


def _ray(graph: Graph, out: Path | None) -> str:
    from dagc.backends.ray import emit_ray

    return emit_ray(graph, out)


_ONE_PROCESS = "the local program runs every task in its one process"
REGISTRY: dict[str, Backend] = {
    "local": Backend("local", _local, None, 5e-6, {
        "cpus": f"{_ONE_PROCESS}, one at a time: no CPUs are reserved (it still computes on the threads `cpus` "
                "declares)",
        "gpus": f"{_ONE_PROCESS}; no device is reserved for the task",
        "memory": f"{_ONE_PROCESS}, with no resource accounting",
        "resources": f"{_ONE_PROCESS}, with no resource accounting",
        "ranks": f"{_ONE_PROCESS}: a multi-rank task runs as rank 0 of a world of 1",
        "preemptible": "nothing preempts a task outside a shared Ray cluster",
    }),
    "ray": Backend("ray", _ray, None, 1e-3, {}),
    "torch": Backend("torch", _torch, "verify,dce,cse,spread,partition,schedule,comm,commcheck", 50e-6, {
        "cpus": "each rank is one torchrun process; CPUs are not reserved per task (it still computes on the "
                "threads `cpus` declares)",
        "memory": "each rank is one torchrun process; memory is not reserved per task",
        "resources": "torchrun has no custom resources; tasks run on the rank the plan chose",
        "preemptible": "nothing preempts a task outside a shared Ray cluster",
    }),
}

# name → emitter (kept for callers that only emit)
BACKENDS: dict[str, Callable[[Graph, Path | None], str]] = {name: b.emitter for name, b in REGISTRY.items()}


def emit(graph: Graph, backend: str, out: Path | None = None) -> str:
    """Source text of the program `backend` emits for `graph` (to be written at `out`, if known)."""
    try:
        entry = REGISTRY[backend]
    except KeyError:
        raise ValueError(f"unknown backend {backend!r}; known: {', '.join(REGISTRY)}") from None
    return entry.emit(graph, out)


def ignored_options(graph: Graph, backend: str) -> list[tuple[object, str, str]]:
    """(node, option, why) for every task option set in `graph` that `backend` does not honour."""
    from dagc.ir.types import TaskOptions

    default = TaskOptions()
    ignores = REGISTRY[backend].ignores
    found = []
    for node in graph:
        if node.op != "task":
            continue
        for option, why in ignores.items():
            if option == "cpus" and node.options.cpus == default.cpus:
                continue
            if getattr(node.options, option) != getattr(default, option):
                found.append((node, option, why))
    return found
