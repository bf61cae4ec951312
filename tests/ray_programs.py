"""Running emitted Ray programs on a simulated two-node Ray cluster and reading what they ran: what the Ray
backend test modules (tests/test_backend_ray*.py) share."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

from dagc.backends import emit
from dagc.runtime import read_events
from tests.interpreters import run_python

__all__ = ["MB", "two_node_cluster", "_write", "_run", "_ran"]

MB = 1024 * 1024


def two_node_cluster() -> Iterator[object]:
    """Two nodes of 2 CPUs and 2 (simulated) GPUs each: placement across nodes. A generator for a module's
    fixture (each module that runs programs on it starts its own)."""
    from ray.cluster_utils import Cluster

    from tests.rayfork import forked_workers

    with forked_workers():
        c = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 2, "num_gpus": 2, "include_dashboard": False, "object_store_memory": 200 * MB})
        c.add_node(num_cpus=2, num_gpus=2, object_store_memory=200 * MB)
    c.wait_for_nodes()
    yield c
    c.shutdown()


def _write(tmp: Path, graph, name: str = "prog_ray.py", text: str | None = None) -> Path:
    program = tmp / "prog" / name
    program.parent.mkdir(parents=True, exist_ok=True)
    program.write_text(text if text is not None else emit(graph, "ray", program))
    return program


def _run(program: Path, cluster, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return run_python([str(program), "--address", cluster.address, *args],
                          capture_output=True, text=True, timeout=timeout, cwd=program.parent)


def _ran(run_dir: Path, run: str | None = None) -> set[str]:
    return {e["task"] for e in read_events(run_dir / "events.jsonl", event="end", run=run)}
