"""Holding each task of a Ray run to its planned device: a Ray node per cluster node of the plan, and
optionally one placement group with a bundle per device."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy, PlacementGroupSchedulingStrategy

__all__ = ["Placement", "PlacementError", "total_resources"]


class PlacementError(Exception):
    """The resources a task or the placement needs cannot be had; the message says which."""


class Placement:
    """Holds every task to its device. "node": hard node affinity to the Ray node chosen to stand for
    the device's cluster node (its devices are interchangeable, so a task may take any free one).
    "bundles": one placement group, a bundle per device pinned to that Ray node; a task runs in its
    device's bundle. Fails within `timeout`, never hangs."""

    def __init__(self, devices: Sequence[tuple[int, dict[str, float]]], mode: str, timeout: float) -> None:
        self.devices, self.mode, self.group = list(devices), mode, None
        self.nodes = self.choose_nodes(self.devices)
        if mode != "bundles":
            return
        self.await_free(self.devices, min(timeout, 2.0))
        selectors = [{"ray.io/node-id": self.nodes[node]} for node, _ in self.devices]
        self.group = placement_group([bundle for _, bundle in self.devices], strategy="PACK",
                                     bundle_label_selector=selectors)
        ready, _ = ray.wait([self.group.ready()], timeout=timeout)
        if not ready:
            remove_placement_group(self.group)
            raise PlacementError(f"could not reserve the plan's devices within {timeout:g}s: "
                                 + "; ".join(f"device {i} (node {n}) needs {b}"
                                             for i, (n, b) in enumerate(self.devices)))

    @staticmethod
    def await_free(devices: Sequence[tuple[int, dict[str, float]]], limit: float) -> None:
        """Wait, at most `limit` seconds, until the cluster has the bundles' resources free (those of
        a group removed a moment ago take about 0.1 s to come back)."""
        need = total_resources(bundle for _, bundle in devices)
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            free = ray.available_resources()
            if all(free.get(key, 0.0) >= amount - 1e-9 for key, amount in need.items()):
                return
            time.sleep(0.01)

    @staticmethod
    def choose_nodes(devices: Sequence[tuple[int, dict[str, float]]]) -> dict[int, str]:
        """Map each cluster node of the plan to a live Ray node that can hold its devices' bundles:
        distinct Ray nodes while there are enough, the head node first. Warns when plan nodes have to
        share a Ray node."""
        alive = sorted((n for n in ray.nodes() if n["Alive"]),
                       key=lambda n: ("node:__internal_head__" not in n["Resources"], n["NodeID"]))
        free = {n["NodeID"]: dict(n["Resources"]) for n in alive}
        chosen: dict[int, str] = {}
        for node in sorted({node for node, _ in devices}):
            need = total_resources(bundle for owner, bundle in devices if owner == node)
            fits = [i for i, n in free.items() if all(n.get(k, 0.0) >= v - 1e-9 for k, v in need.items())]
            fresh = [i for i in fits if i not in chosen.values()]
            if not fits:
                tasks = ", ".join(str(i) for i, (owner, _) in enumerate(devices) if owner == node)
                raise PlacementError(f"no Ray node can hold node {node} of the plan (devices {tasks}), "
                                     f"which needs {need}; the cluster has "
                                     + "; ".join(f"{i[:8]}: {r}" for i, r in free.items()))
            chosen[node] = (fresh or fits)[0]
            for key, amount in need.items():
                free[chosen[node]][key] = free[chosen[node]].get(key, 0.0) - amount
        planned, used = len(chosen), len(set(chosen.values()))
        if used < planned:
            print(f"dagc: warning: the plan has {planned} nodes but the Ray cluster gives it {used} "
                  f"({len(alive)} alive); plan nodes share Ray nodes, so tasks placed apart run together",
                  file=sys.stderr)
        return chosen

    def release(self) -> None:
        """Give the placement group back (asynchronously: Ray returns its resources shortly after)."""
        if self.group is not None:
            remove_placement_group(self.group)
            self.group = None

    def strategy(self, device: int, soft: bool = False) -> NodeAffinitySchedulingStrategy | PlacementGroupSchedulingStrategy:
        """How a task on `device` is held there (`soft`: the planned node is preferred, another may take it)."""
        if self.group is None:
            return NodeAffinitySchedulingStrategy(self.nodes[self.devices[device][0]], soft=soft)
        return PlacementGroupSchedulingStrategy(self.group, placement_group_bundle_index=device)


def total_resources(bundles: Any) -> dict[str, float]:
    """The sum of resource bundles."""
    need: dict[str, float] = {}
    for bundle in bundles:
        for key, amount in bundle.items():
            need[key] = need.get(key, 0.0) + amount
    return need
