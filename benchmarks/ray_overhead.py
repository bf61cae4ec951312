"""The Ray backend's overhead, side by side in one Ray instance.

1. Fine-grained: 1,000 tasks of ~5 µs each (10 independent chains of 100 steps, then a sum), emitted
   unfused and after the `fuse` pass. Target: fused at least 10x faster.
2. Coarse: 50 tasks of 100 ms (`time.sleep`, so that a 2-core machine still runs branches in
   parallel) in 5 layers of 10 parallel branches, each task reading two tasks of the layer before;
   placed on 4 devices by `partition` and ordered by `schedule`. The emitted program's wall time
   against a hand-written Ray program for the same graph (target: within 10%) and against the
   compiler's makespan estimate (target: within 15%).

Every program runs in this process, connected to one local Ray (4 logical CPUs), after a warm-up
run, so all see warm workers; each figure is the median of the repetitions. The emitted programs
keep their checkpoints and event logs (that cost is part of what is measured).
Run: `python -m benchmarks.ray_overhead [--quick]`.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

__all__ = ["run"]

CHAINS, STEPS = 10, 100
LAYERS, WIDTH, TASK_SECONDS, DEVICES = 5, 10, 0.1, 4


def _fine_source() -> str:
    lines = ["import dagc", "", "", '@dagc.task(cost="5us", out_size="8B")', "def step(x: int, k: int) -> int:",
             "    return (x * 31 + k) % 1000003", "", "",
             '@dagc.task(cost="5us", out_size="8B")', "def total(parts: list) -> int:", "    return sum(parts)",
             "", "", "@dagc.pipeline", "def fine():"]
    for c in range(CHAINS):
        lines.append(f"    c{c} = step({c}, 0)")
        lines += [f"    c{c} = step(c{c}, {s})" for s in range(1, STEPS)]
    lines.append(f"    return total([{', '.join(f'c{c}' for c in range(CHAINS))}])")
    return "\n".join(lines) + "\n"


def _coarse_source() -> str:
    lines = ["import time", "", "import dagc", "", "",
             '@dagc.task(cost="100ms", out_size="8B")', "def work(a: int, b: int, k: int) -> int:",
             f"    time.sleep({TASK_SECONDS})", "    return (a * 7 + b * 13 + k) % 1000003", "", "",
             "@dagc.pipeline", "def coarse():"]
    lines += [f"    v0_{i} = work({i}, {i + 1}, {i})" for i in range(WIDTH)]
    for layer in range(1, LAYERS):
        lines += [f"    v{layer}_{i} = work(v{layer - 1}_{i}, v{layer - 1}_{(i + 1) % WIDTH}, {layer * WIDTH + i})"
                  for i in range(WIDTH)]
    lines.append(f"    return [{', '.join(f'v{LAYERS - 1}_{i}' for i in range(WIDTH))}]")
    return "\n".join(lines) + "\n"


HANDWRITTEN = textwrap.dedent(f"""
    import time

    import ray


    @ray.remote(num_cpus=1)
    def work(a, b, k):
        time.sleep({TASK_SECONDS})
        return (a * 7 + b * 13 + k) % 1000003


    def run():
        layer = [work.remote(i, i + 1, i) for i in range({WIDTH})]
        for n in range(1, {LAYERS}):
            layer = [work.remote(layer[i], layer[(i + 1) % {WIDTH}], n * {WIDTH} + i) for i in range({WIDTH})]
        return ray.get(layer)
""")


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _time_emitted(module, tmp: Path, reps: int) -> tuple[float, object]:
    times, result = [], None
    for i in range(reps + 1):  # the first run warms the workers up
        out = tmp / f"{module.__name__}-{i}.pkl"
        start = time.perf_counter()
        code = module.main(["--run-dir", str(tmp / "runs" / f"{module.__name__}-{i}"), "--result", str(out)])
        elapsed = time.perf_counter() - start
        assert code == 0, f"{module.__name__} failed"
        if i:
            times.append(elapsed)
        import pickle

        result = pickle.loads(out.read_bytes())
    return statistics.median(times), result


def _time_hand(module, reps: int) -> tuple[float, object]:
    times, result = [], None
    for i in range(reps + 1):
        start = time.perf_counter()
        result = module.run()
        if i:
            times.append(time.perf_counter() - start)
    return statistics.median(times), result


def run(quick: bool = False) -> str:
    """The benchmark as a markdown section (`quick`: fewer repetitions)."""
    import ray
    from dagc.backends.ray import emit_ray

    from dagc.cluster import parse_cluster_spec
    from dagc.driver import compile_file

    reps = 1 if quick else 3
    tmp = Path(tempfile.mkdtemp(prefix="dagc-ray-bench-"))
    (tmp / "fine.py").write_text(_fine_source())
    (tmp / "coarse.py").write_text(_coarse_source())
    (tmp / "coarse_hand.py").write_text(HANDWRITTEN)
    programs: dict[str, str] = {}
    unfused = compile_file(tmp / "fine.py", passes="verify,dce,cse", backend="ray")
    fused = compile_file(tmp / "fine.py", passes="verify,dce,cse,fuse", backend="ray")
    programs["fine_unfused"] = emit_ray(unfused, tmp / "fine_unfused.py")
    programs["fine_fused"] = emit_ray(fused, tmp / "fine_fused.py")
    cluster = parse_cluster_spec(str(DEVICES))
    coarse = compile_file(tmp / "coarse.py", passes="verify,dce,cse,partition,schedule", cluster=cluster,
                          backend="ray")
    programs["coarse_emitted"] = emit_ray(coarse, tmp / "coarse_emitted.py", cluster=cluster)
    free = compile_file(tmp / "coarse.py", passes="verify,dce,cse", backend="ray")
    programs["coarse_free"] = emit_ray(free, tmp / "coarse_free.py")
    for name, text in programs.items():
        (tmp / f"{name}.py").write_text(text)
    estimate = float(coarse.attrs["schedule.makespan"])

    ray.init(num_cpus=DEVICES, num_gpus=0, include_dashboard=False, log_to_driver=False,
             object_store_memory=200 * 2**20, runtime_env={"env_vars": {"PYTHONPATH": str(tmp)}})
    sys.path.insert(0, str(tmp))
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        t_unfused, r_unfused = _time_emitted(_load(tmp / "fine_unfused.py", "fine_unfused"), tmp, reps)
        t_fused, r_fused = _time_emitted(_load(tmp / "fine_fused.py", "fine_fused"), tmp, reps)
        t_emitted, r_emitted = _time_emitted(_load(tmp / "coarse_emitted.py", "coarse_emitted"), tmp, reps)
        t_free, _ = _time_emitted(_load(tmp / "coarse_free.py", "coarse_free"), tmp, reps)
        t_hand, r_hand = _time_hand(_load(tmp / "coarse_hand.py", "coarse_hand"), reps)
    finally:
        os.chdir(cwd)
        ray.shutdown()
    assert r_unfused == r_fused and r_emitted == r_hand, "programs disagree"
    speedup = t_unfused / t_fused
    vs_hand = t_emitted / t_hand - 1
    vs_estimate = t_emitted / estimate - 1
    n_fused = len(fused)
    return "\n".join([
        "## Ray backend overhead",
        "",
        f"One local Ray with {DEVICES} logical CPUs on a {os.cpu_count()}-core machine; median of {reps} "
        "run(s) after a warm-up; emitted programs keep checkpoints and an event log.",
        "",
        "| case | measured | target |",
        "|---|---|---|",
        f"| fine-grained, {CHAINS * STEPS + 1} tasks unfused | {t_unfused:.3f} s | |",
        f"| fine-grained after `fuse` ({n_fused} tasks) | {t_fused:.3f} s | |",
        f"| speed-up from fusion | **{speedup:.1f}x** | >= 10x {'(met)' if speedup >= 10 else '(missed)'} |",
        f"| coarse, {LAYERS * WIDTH} x {TASK_SECONDS * 1e3:g} ms, emitted (placed on {DEVICES} devices) "
        f"| {t_emitted:.3f} s | |",
        f"| coarse, emitted without placement (Ray schedules) | {t_free:.3f} s ({t_free / t_hand - 1:+.1%}) | |",
        f"| coarse, hand-written Ray | {t_hand:.3f} s | |",
        f"| emitted vs hand-written | {vs_hand:+.1%} | within 10% {'(met)' if abs(vs_hand) <= 0.10 else '(missed)'} |",
        f"| compiler's makespan estimate | {estimate:.3f} s | |",
        f"| emitted vs estimate | {vs_estimate:+.1%} | within 15% "
        f"{'(met)' if abs(vs_estimate) <= 0.15 else '(missed)'} |",
        "",
    ])


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
