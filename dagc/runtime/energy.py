"""Energy measured while tasks run, where the machine exposes counters: NVIDIA or AMD GPUs (NVML, AMD SMI) and
Intel CPU packages (RAPL), read through Zeus (`pip install "dagc[energy]"`), never by hand.

A task's energy is what the counters of the devices its process sees rose by while it ran: every GPU the
process may use (on Ray and torch, the task's own: `CUDA_VISIBLE_DEVICES`) and every CPU package with its
DRAM. Tasks that run at once on one device or package share its reading, so their figures add up to more than
the device drew; a figure is an upper bound for the task and exact for the machine. Where no counter is
readable (no Zeus, no GPU, RAPL not exposed, as in containers and this project's CI), nothing is recorded:
`dagc report` says so once, and no figure is ever estimated in a measurement's place.
"""

from __future__ import annotations

import os
import threading
from typing import Any

__all__ = ["EnergyMeter", "meter", "unavailable"]

_lock = threading.Lock()
_meter: list[EnergyMeter | None] = []
_why: list[str] = []


class EnergyMeter:
    """Reads the total energy (joules) of the devices this process sees, through Zeus."""

    def __init__(self, gpus: Any, gpu_indices: list[int], cpus: Any, cpu_indices: list[int]) -> None:
        self.gpus, self.gpu_indices, self.cpus, self.cpu_indices = gpus, gpu_indices, cpus, cpu_indices

    def read(self) -> float:
        """Joules since the counters started (a reading: subtract two to get what a task drew)."""
        total_mj = 0.0
        for i in self.gpu_indices:
            total_mj += float(self.gpus.get_total_energy_consumption(i))
        for i in self.cpu_indices:
            measurement = self.cpus.get_total_energy_consumption(i)
            total_mj += float(measurement.cpu_mj) + float(measurement.dram_mj or 0.0)
        return total_mj / 1000.0

    def describe(self) -> str:
        parts = []
        if self.gpu_indices:
            parts.append(f"{len(self.gpu_indices)} GPU(s)")
        if self.cpu_indices:
            parts.append(f"{len(self.cpu_indices)} CPU package(s)")
        return " and ".join(parts)


def meter() -> EnergyMeter | None:
    """This process's meter (made once), or None where no counter is readable (`unavailable()` says why)."""
    with _lock:
        if not _meter:
            found, why = _open()
            _meter.append(found)
            _why.append(why)
        return _meter[0]


def unavailable() -> str:
    """Why no energy is measured here ("" when it is)."""
    meter()
    return _why[0]


def _open() -> tuple[EnergyMeter | None, str]:
    if os.environ.get("DAGC_NO_ENERGY"):
        return None, "turned off ($DAGC_NO_ENERGY)"
    try:
        from zeus.device import get_cpus, get_gpus
    except ImportError:
        return None, 'Zeus is not installed (pip install "dagc[energy]")'
    except Exception as exc:  # noqa: BLE001 - a broken optional library must never stop a run
        return None, f"Zeus cannot be loaded ({type(exc).__name__}: {exc})"
    gpus = cpus = None
    gpu_indices: list[int] = []
    cpu_indices: list[int] = []
    try:
        gpus = get_gpus()
        gpu_indices = [i for i in range(len(gpus)) if gpus.supports_get_total_energy_consumption(i)]
    except Exception:  # noqa: BLE001 - no GPU, no NVML/AMD SMI, no permission: no GPU counter
        gpu_indices = []
    try:
        cpus = get_cpus()
        cpu_indices = list(range(len(cpus)))
        for i in cpu_indices:  # (RAPL exposed but unreadable, e.g. without permission: fail here, not per task)
            cpus.get_total_energy_consumption(i)
    except Exception:  # noqa: BLE001 - not an Intel CPU, RAPL not exposed (containers), no permission
        cpu_indices = []
    if not gpu_indices and not cpu_indices:
        return None, "no energy counter is readable on this machine (no NVML/AMD SMI GPU, RAPL not exposed)"
    return EnergyMeter(gpus, gpu_indices, cpus, cpu_indices), ""
