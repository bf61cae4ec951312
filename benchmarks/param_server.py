"""Parameter server against all-reduce: the plan's estimates and measured runs, side by side.

`samples/sgd_param_server.py` and `samples/sgd_allreduce.py` train the same data-parallel SGD (4
workers, 8 MiB of float64 weights). For a 5-device cluster with 1 GB/s links this benchmark

1. asks `dagc plan` for each form's makespan once `comm` has chosen the transfers (the estimate);
2. measures one step's communication as each emitted program does it, on 4 gloo ranks with the same
   runtime helpers, interleaved: the server's rank receiving three 8 MiB gradients and broadcasting
   the new weights, against one all-reduce of the gradients;
3. runs both emitted torch programs end to end (5 gloo ranks, started by the program itself),
   alternately, and takes each one's median wall time.

Each row says which form is faster; the plan and the measurements agree when the same form wins.
Run: `python -m benchmarks.param_server [--quick]`.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

__all__ = ["run"]

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
FORMS = ("sgd_param_server", "sgd_allreduce")
NBYTES = 8 * 2**20  # the samples' weights and gradients


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _step_worker(out: str, reps: int) -> None:
    import torch
    import torch.distributed as dist

    from dagc.runtime.distributed import broadcast_value, recv_value, reduce_value, send_value

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    group = dist.new_group(list(range(world)))
    cpu = torch.device("cpu")
    grad = torch.full((NBYTES // 8,), float(rank + 1), dtype=torch.float64)
    times: dict[str, list[float]] = {"sgd_param_server": [], "sgd_allreduce": []}
    for rep in range(reps + 1):
        for form in times:
            dist.barrier()
            start = time.perf_counter()
            if form == "sgd_param_server":  # gradients into the server's rank, new weights out by broadcast
                if rank == 0:
                    total = grad
                    for src in range(1, world):
                        total = total + recv_value(src, 1, cpu)
                    weights = total / world
                else:
                    send_value(grad, 0, 1, cpu)
                    weights = None
                broadcast_value(weights, 0, group, cpu)
            else:
                reduce_value(grad, 0, group, cpu, list(range(world)), float(world), everywhere=True)
            dist.barrier()
            if rep:
                times[form].append(time.perf_counter() - start)
    if rank == 0:
        Path(out).write_text(json.dumps(times))
    dist.barrier()
    dist.destroy_process_group()


def measure_steps(reps: int) -> dict[str, list[float]]:
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "times.json")
        config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=4, run_id=uuid.uuid4().hex,
                              rdzv_backend="c10d", rdzv_endpoint=f"127.0.0.1:{_free_port()}",
                              max_restarts=0, monitor_interval=0.05, start_method="spawn")
        elastic_launch(config, _step_worker)(out, reps)
        return json.loads(Path(out).read_text())


def estimates(cluster: object) -> dict[str, tuple[float, float]]:
    """Per form: (makespan with messages only, makespan with the collectives comm chooses)."""
    from dagc.plan import plan_file

    out = {}
    for form in FORMS:
        result = plan_file(str(SAMPLES / f"{form}.py"), cluster)  # type: ignore[arg-type]
        out[form] = (float(result.p2p_makespan or 0.0), float(result.comm_makespan or 0.0))
    return out


def run_programs(cluster: object, reps: int) -> dict[str, list[float]]:
    """Wall seconds of each emitted torch program (startup included), run alternately."""
    from dagc.backends import emit
    from dagc.backends.torch import REQUIRED_PASSES
    from dagc.driver import compile_file

    times: dict[str, list[float]] = {form: [] for form in FORMS}
    with tempfile.TemporaryDirectory() as tmp:
        programs = {}
        for form in FORMS:
            graph = compile_file(SAMPLES / f"{form}.py", passes=REQUIRED_PASSES, cluster=cluster, backend="torch")
            programs[form] = Path(tmp) / f"{form}_torch.py"
            programs[form].write_text(emit(graph, "torch", programs[form]))
        results = {}
        for _ in range(reps):
            for form in FORMS:
                result = Path(tmp) / f"{form}.json"
                start = time.perf_counter()
                subprocess.run([sys.executable, str(programs[form]), "--result", str(result)], check=True,
                               capture_output=True, timeout=900)
                times[form].append(time.perf_counter() - start)
                results[form] = result.read_bytes()
        import pickle

        values = {form: pickle.loads(data) for form, data in results.items()}
        assert values["sgd_param_server"]["loss"] == values["sgd_allreduce"]["loss"], values
    return times


def _faster(times: dict[str, float]) -> str:
    return "all-reduce" if times["sgd_allreduce"] < times["sgd_param_server"] else "parameter server"


def run(quick: bool = False) -> str:
    from dagc.cluster import parse_cluster_spec

    cluster = parse_cluster_spec("5", link_bandwidth="1GB/s")
    reps = 5 if quick else 15
    runs = 2 if quick else 3
    plan = estimates(cluster)
    steps = {form: statistics.median(ts) for form, ts in measure_steps(reps).items()}
    walls = {form: statistics.median(ts) for form, ts in run_programs(cluster, runs).items()}
    est = {form: plan[form][1] for form in FORMS}
    lines = [
        "### Parameter server vs all-reduce (samples/sgd_param_server.py, samples/sgd_allreduce.py)",
        "",
        "4 workers, 8 MiB float64 weights, 3 steps; plan for 5 devices with 1 GB/s links; measured on this "
        f"machine with gloo ({os.cpu_count()} CPUs): one step's communication as the programs do it (median of "
        f"{reps}, 4 ranks), and both whole programs (median of {runs} alternating runs, 5 ranks, startup included).",
        "",
        "| | parameter server | all-reduce | faster |",
        "|---|---:|---:|---|",
        f"| `dagc plan` makespan, messages only | {plan['sgd_param_server'][0]:.4f} s | "
        f"{plan['sgd_allreduce'][0]:.4f} s | {_faster({f: plan[f][0] for f in FORMS})} |",
        f"| `dagc plan` makespan, with the collectives `comm` chooses | {est['sgd_param_server']:.4f} s | "
        f"{est['sgd_allreduce']:.4f} s | {_faster(est)} |",
        f"| measured: one step's communication | {steps['sgd_param_server'] * 1e3:.1f} ms | "
        f"{steps['sgd_allreduce'] * 1e3:.1f} ms | {_faster(steps)} |",
        f"| measured: whole program | {walls['sgd_param_server']:.2f} s | {walls['sgd_allreduce']:.2f} s | "
        f"{_faster(walls)} |",
    ]
    rankings = {"the plan": _faster(est), "the measured step": _faster(steps), "the whole programs": _faster(walls)}
    if len(set(rankings.values())) == 1:
        lines += ["", f"All three rank the {_faster(est)} form first."]
    else:
        said = "; ".join(f"{who}: {what}" for who, what in rankings.items())
        lines += ["", f"Faster according to {said}. The plan's model gives every device its own link; on one "
                  f"machine with {os.cpu_count()} CPUs the ranks' copies all go through the same cores and "
                  "memory, and a ring all-reduce over 4 ranks moves as many bytes in total as the server's "
                  "messages and broadcast, so the links the model counts on are not there. The ranking the "
                  "plan gives is for a cluster whose devices have their own links."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv[1:]))
