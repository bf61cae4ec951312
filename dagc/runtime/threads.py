"""How many threads a task computes on.

Float reductions (a sum, a layer norm, a matrix product) give results that depend on how many threads
share the work, so a task must compute on the same number of threads wherever it runs. Ray workers and
torchrun's ranks start on one thread (both set `OMP_NUM_THREADS=1`); `python script.py` uses torch's
default, one per physical core, or what the script's module-level code set (`torch.set_num_threads`).

The rule, the same on every backend (docs/runtime.md, "Threads"):

- a task that declares `cpus=N` (above the default of 1) computes on ceil(N) threads;
- any other task computes on what the plain run uses in that process, so that its float results are
  the plain run's to the last bit. Devices that share a machine then oversubscribe its cores; processes
  dagc starts wait for work passively (`OMP_WAIT_POLICY=PASSIVE`, unless the user set it): OpenMP's
  default spinning made two 2-thread trainings on 2 cores 11x slower, passive waiting 1.3x.
- with the run option `--threads share`, such a task computes on at most its device's share of the
  machine's cores (cores / devices on the node; on torch, cores / ranks on the node): faster where every
  device computes on the CPU, at the price of the last bits. The local backend runs one task at a time:
  no cap.

Only torch's intra-op pool is set, and only once torch is imported: code that does not use torch is
left alone.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["THREAD_MODES", "capped", "passive_waiting", "task_threads", "current_threads", "declared_threads", "physical_cores", "plain_threads", "set_threads"]

_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")  # what torch reads at start-up, in this order


def declared_threads(cpus: float, default: float = 1.0) -> int | None:
    """The thread count a task's `cpus=` declares; None when it declares none (the default)."""
    if cpus == default or not cpus:
        return None
    return max(1, math.ceil(cpus))


def physical_cores() -> int:
    """Physical cores of this machine: torch's default thread count (c10's `defaultNumThreads`)."""
    try:
        import psutil  # type: ignore[import-untyped]

        found = psutil.cpu_count(logical=False)
        if found:
            return int(found)
    except ImportError:
        pass
    cores: set[tuple[str, str]] = set()
    for cpu in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology"):
        try:
            cores.add(((cpu / "physical_package_id").read_text().strip(), (cpu / "core_id").read_text().strip()))
        except OSError:
            continue
    return len(cores) or os.cpu_count() or 1


def plain_threads(environ: Mapping[str, str | None]) -> int:
    """What torch starts with under `python script.py` in an environment like `environ`."""
    for name in _THREAD_VARIABLES:
        value = environ.get(name)
        if value and value.strip().isdigit() and int(value) > 0:
            return int(value)
    return physical_cores()


def capped(baseline: int, share_of: int | None) -> int:
    """`baseline` threads, at most the cores of one of `share_of` devices on this machine."""
    if not share_of:
        return baseline
    return max(1, min(baseline, physical_cores() // share_of))


THREAD_MODES = ("plain", "share")  # the run option --threads


def task_threads(baseline: int, share_of: int | None, mode: str = "plain") -> int:
    """The threads a task without `cpus=` computes on: the plain run's `baseline`; under `--threads share`,
    at most one of `share_of` devices' share of this machine's cores."""
    return capped(baseline, share_of) if mode == "share" else baseline


def passive_waiting(environ: dict[str, str] | None = None) -> None:
    """Let OpenMP threads sleep, not spin, while they wait for work, in a process that torch has not loaded
    yet (libgomp reads it once, when torch loads): devices sharing a machine's cores then do not slow each
    other down by an order of magnitude. The user's own setting stands."""
    env = os.environ if environ is None else environ
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def set_threads(n: int) -> int | None:
    """Compute on `n` threads from now on; returns the count before, None when torch is not imported."""
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "set_num_threads"):
        return None
    before = int(torch.get_num_threads())
    if before != n:
        torch.set_num_threads(n)
    return before


def current_threads() -> int | None:
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "get_num_threads"):
        return None
    return int(torch.get_num_threads())
