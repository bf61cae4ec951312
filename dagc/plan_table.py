"""`dagc plan`'s per-device table: the tasks each device runs, in order, with their start and end, and why
the device is idle before a task when it is (an input still coming from another device, a task sharing
state with it), read from the plan's schedule and transfers (what `--json` prints)."""

from __future__ import annotations

from typing import Any

__all__ = ["device_tables", "idle_reasons"]

# a gap shorter than this (relative to the makespan) is rounding, not idleness
_IDLE_EPSILON = 1e-9


def idle_reasons(schedule: list[dict[str, Any]], transfers: list[dict[str, Any]], waits: dict[str, list[str]],
                 shared: dict[str, str], cluster: Any) -> dict[tuple[str, int], tuple[float, str]]:
    """(task, device) → (seconds idle before it, why), for every task its device waits before."""
    device_of = {row["task"]: row.get("devices", [row["device"]]) for row in schedule}
    end_of = {row["task"]: float(row["end"]) for row in schedule}
    arrives = {(t["src"], t["dst"], t["to_device"]): float(t["end"]) for t in transfers}
    makespan = max(end_of.values(), default=0.0)
    free_at: dict[int, float] = {}
    reasons: dict[tuple[str, int], tuple[float, str]] = {}
    for row in schedule:  # (by start time)
        task, start = row["task"], float(row["start"])
        for device in row.get("devices", [row["device"]]):
            idle = start - free_at.get(device, 0.0)
            free_at[device] = float(row["end"])
            if idle <= _IDLE_EPSILON * max(1.0, makespan):
                continue
            reasons[(task, device)] = (idle, _why(task, device, free_at, start - idle, waits, device_of, end_of,
                                                  arrives, shared, cluster))
    return reasons


def _why(task: str, device: int, free_at: dict[int, float], was_free: float, waits: dict[str, list[str]],
         device_of: dict[str, list[int]], end_of: dict[str, float], arrives: dict[tuple[str, str, int], float],
         shared: dict[str, str], cluster: Any) -> str:
    ready = {q: arrives.get((q, task, device), end_of[q]) for q in waits.get(task, []) if q in end_of}
    latest = max(ready, key=lambda q: (ready[q], q), default=None)
    if latest is None or ready[latest] <= was_free:
        state = shared.get(task)
        if state is not None:
            return f"waiting for the tasks sharing `{state}` with it (one process, in program order)"
        return "the schedule's choice (no input is waited for)"
    where = [d for d in device_of[latest] if d != device]
    state = shared.get(task)
    if state is not None and state != shared.get(latest):
        state = None  # (only a task sharing the same state explains the wait by it)
    text = f"waiting for `{latest}`"
    if where:
        text += f" from {_name(where[0], cluster)}"
    if state is not None:
        text += f" (they share `{state}`)"
    return text


def device_tables(schedule: list[dict[str, Any]], transfers: list[dict[str, Any]], waits: dict[str, list[str]],
                  cluster: Any, shown: int = 12, shared: dict[str, str] | None = None) -> list[str]:
    """The table's lines: a heading, then per device its name and one row per task (the first `shown`)."""
    if not schedule:
        return []
    reasons = idle_reasons(schedule, transfers, waits, shared or {}, cluster)
    by_device: dict[int, list[dict[str, Any]]] = {}
    for row in schedule:
        for device in row.get("devices", [row["device"]]):
            by_device.setdefault(device, []).append(row)
    lines = ["per device (tasks in the order each device runs them; times in seconds):"]
    for device in sorted(by_device):
        rows = by_device[device]
        cells = [["task", "start", "end", "idle before"]]
        for row in rows[:shown]:
            idle = reasons.get((row["task"], device))
            cells.append([row["task"], f"{float(row['start']):.6g}", f"{float(row['end']):.6g}",
                          f"{idle[0]:.3g}: {idle[1]}" if idle else ""])
        widths = [max(len(c[k]) for c in cells) for k in range(3)]
        lines.append(f"  {_name(device, cluster, with_node=True)}")
        for c in cells:
            lines.append(("    " + "  ".join([c[0].ljust(widths[0]), c[1].rjust(widths[1]), c[2].rjust(widths[2]),
                                             c[3]])).rstrip())
        if len(rows) > shown:
            lines.append(f"    … and {len(rows) - shown} more")
    return lines


def _name(device: int, cluster: Any, with_node: bool = False) -> str:
    if cluster is None or device >= cluster.n_devices:
        return f"device {device}"
    name = str(cluster.device_name(device))
    return f"{name} ({cluster.node_names[cluster.devices[device].node]})" if with_node else name
