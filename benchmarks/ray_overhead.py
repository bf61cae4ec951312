"""The Ray backend's overhead, side by side in one Ray instance.

1. Fine-grained: 1,000 tasks of ~5 µs each (10 independent chains of 100 steps, then a sum), emitted
   unfused and after the `fuse` pass. Target: fused at least 10x faster.
2. Coarse: 50 tasks of 100 ms (`time.sleep`, so that a 2-core machine still runs branches in
   parallel) in 5 layers of 10 parallel branches, each task reading two tasks of the layer before.
   Compiled twice: placed on 4 devices by `partition` and ordered by `schedule`, and not placed.
   The placed program runs with its default placement (node affinity: the 4 devices are
   interchangeable devices of one node) and with `--placement bundles` (a placement group with one
   bundle per device, reserved and released inside the program's wall time; also started right
   after another run, before Ray has given that run's resources back). Each against a
   hand-written Ray program for the same graph (target: within 10%) and against the compiler's
   makespan estimate (target: within 15%).

Every program runs in this process, connected to one local Ray of its own (4 logical CPUs, started
with `address="local"`, so never another Ray running on the machine). Each program runs once to
warm the workers up; then, `reps` times, every program runs once, in rotating order, each after the
cluster has settled (all CPUs free again: an earlier run's leases and placement group returned), so
that all see the same conditions. Each figure is the median of its repetitions. The emitted
programs keep their checkpoints and event logs (that cost is part of what is measured).
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


def _settle(cpus: float, limit: float = 3.0) -> None:
    """Wait until every CPU of the local Ray is free again (leases and placement groups returned)."""
    import ray

    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and ray.available_resources().get("CPU", 0.0) < cpus - 1e-9:
        time.sleep(0.01)


class _Program:
    """One program to time: an emitted one (its `main`, with arguments) or a hand-written `run()`."""

    def __init__(self, module, tmp: Path, *args: str, hand: bool = False) -> None:
        self.module, self.tmp, self.args, self.hand = module, tmp, list(args), hand
        self.times: list[float] = []
        self.result: object = None
        self.runs = 0

    def once(self) -> float:
        import pickle

        self.runs += 1
        if self.hand:
            start = time.perf_counter()
            self.result = self.module.run()
            return time.perf_counter() - start
        tag = f"{self.module.__name__}{''.join(self.args)}-{self.runs}".replace("-", "_")
        out = self.tmp / f"{tag}.pkl"
        argv = [*self.args, "--run-dir", str(self.tmp / "runs" / tag), "--result", str(out)]
        start = time.perf_counter()
        code = self.module.main(argv)
        elapsed = time.perf_counter() - start
        assert code == 0, f"{self.module.__name__} {self.args} failed"
        self.result = pickle.loads(out.read_bytes())
        return elapsed

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def _measure(programs: dict[str, _Program], reps: int, cpus: float) -> None:
    """Warm every program up once, then run each `reps` times, interleaved in rotating order."""
    names = list(programs)
    for name in names:
        _settle(cpus)
        programs[name].once()
    for rep in range(reps):
        for name in names[rep % len(names):] + names[: rep % len(names)]:
            _settle(cpus)
            programs[name].times.append(programs[name].once())


def _placement_group_costs(module, reps: int, cpus: float) -> tuple[float, float]:
    """Median seconds to reserve the plan's placement group (ready) and to release it."""
    from dagc.runtime.ray import Placement

    reserve, release = [], []
    for _ in range(reps):
        _settle(cpus)
        start = time.perf_counter()
        placement = Placement(module.DEVICES, "bundles", module.PLAN.placement_timeout)
        reserve.append(time.perf_counter() - start)
        start = time.perf_counter()
        placement.release()
        release.append(time.perf_counter() - start)
    return statistics.median(reserve), statistics.median(release)


def run(quick: bool = False) -> str:
    """The benchmark as a markdown section (`quick`: fewer repetitions)."""
    import ray

    from dagc.backends.ray import emit_ray
    from dagc.cluster import parse_cluster_spec
    from dagc.driver import compile_file

    reps = 3 if quick else 7
    tmp = Path(tempfile.mkdtemp(prefix="dagc-ray-bench-"))
    (tmp / "fine.py").write_text(_fine_source())
    (tmp / "coarse.py").write_text(_coarse_source())
    (tmp / "coarse_hand.py").write_text(HANDWRITTEN)
    texts: dict[str, str] = {}
    unfused = compile_file(tmp / "fine.py", passes="verify,dce,cse", backend="ray")
    fused = compile_file(tmp / "fine.py", passes="verify,dce,cse,fuse", backend="ray")
    texts["fine_unfused"] = emit_ray(unfused, tmp / "fine_unfused.py")
    texts["fine_fused"] = emit_ray(fused, tmp / "fine_fused.py")
    cluster = parse_cluster_spec(str(DEVICES))
    coarse = compile_file(tmp / "coarse.py", passes="verify,dce,cse,partition,schedule", cluster=cluster,
                          backend="ray")
    texts["coarse_placed"] = emit_ray(coarse, tmp / "coarse_placed.py", cluster=cluster)
    free = compile_file(tmp / "coarse.py", passes="verify,dce,cse", backend="ray")
    texts["coarse_free"] = emit_ray(free, tmp / "coarse_free.py")
    for name, text in texts.items():
        (tmp / f"{name}.py").write_text(text)
    estimate = float(coarse.attrs["schedule.makespan"])

    ray.init(address="local", num_cpus=DEVICES, num_gpus=0, include_dashboard=False, log_to_driver=False,
             object_store_memory=200 * 2**20, runtime_env={"env_vars": {"PYTHONPATH": str(tmp)}})
    sys.path.insert(0, str(tmp))
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        fine = {"unfused": _Program(_load(tmp / "fine_unfused.py", "fine_unfused"), tmp),
                "fused": _Program(_load(tmp / "fine_fused.py", "fine_fused"), tmp)}
        _measure(fine, reps, DEVICES)
        placed = _load(tmp / "coarse_placed.py", "coarse_placed")
        mode = placed.PLACEMENT
        coarse_runs = {"hand": _Program(_load(tmp / "coarse_hand.py", "coarse_hand"), tmp, hand=True),
                       "placed": _Program(placed, tmp),
                       "bundles": _Program(placed, tmp, "--placement", "bundles"),
                       "free": _Program(_load(tmp / "coarse_free.py", "coarse_free"), tmp)}
        _measure(coarse_runs, reps, DEVICES)
        # back to back: each bundles run starts as soon as a placed run ends (its leases not yet returned)
        back = _Program(placed, tmp, "--placement", "bundles")
        for _ in range(reps):
            _settle(DEVICES)
            coarse_runs["placed"].once()
            back.times.append(back.once())
        pg_reserve, pg_release = _placement_group_costs(placed, max(reps, 5), DEVICES)
    finally:
        os.chdir(cwd)
        ray.shutdown()
    assert fine["unfused"].result == fine["fused"].result, "fused and unfused programs disagree"
    assert len({repr(p.result) for p in coarse_runs.values()}) == 1, "coarse programs disagree"
    t_unfused, t_fused = fine["unfused"].median, fine["fused"].median
    speedup = t_unfused / t_fused
    t_hand = coarse_runs["hand"].median

    def met(ok: bool) -> str:
        return "(met)" if ok else "(missed)"

    def row(label: str, key: str) -> str:
        t = coarse_runs[key].median
        vs_hand, vs_est = t / t_hand - 1, t / estimate - 1
        return (f"| {label} | {t:.3f} s | {vs_hand:+.1%} {met(vs_hand <= 0.10)} | "
                f"{vs_est:+.1%} {met(abs(vs_est) <= 0.15)} |")

    spread = "; ".join(f"{k} {min(p.times):.3f}–{max(p.times):.3f} s" for k, p in coarse_runs.items())
    return "\n".join([
        "## Ray backend overhead",
        "",
        f"One local Ray with {DEVICES} logical CPUs on a {os.cpu_count()}-core machine; every program warmed "
        f"up once, then run {reps} times interleaved (rotating order, each after the cluster settled); "
        "medians. Emitted programs keep checkpoints and an event log.",
        "",
        "| fine-grained | measured | target |",
        "|---|---|---|",
        f"| {CHAINS * STEPS + 1} tasks, unfused | {t_unfused:.3f} s | |",
        f"| after `fuse` ({len(fused)} tasks) | {t_fused:.3f} s | |",
        f"| speed-up from fusion | **{speedup:.1f}x** | >= 10x {met(speedup >= 10)} |",
        "",
        f"Coarse: {LAYERS * WIDTH} tasks of {TASK_SECONDS * 1e3:g} ms, {WIDTH} parallel branches, "
        f"{DEVICES} devices. Hand-written Ray: **{t_hand:.3f} s**; compiler's makespan estimate: "
        f"**{estimate:.3f} s**.",
        "",
        "| emitted program | wall time | vs hand-written (target within 10%) | vs estimate (target within 15%) |",
        "|---|---|---|---|",
        row(f"placed, default placement (`{mode}`)", "placed"),
        row("placed, `--placement bundles` (placement group, one bundle per device)", "bundles"),
        row("not placed (Ray schedules)", "free"),
        f"| placed, `--placement bundles`, started right after another run | {back.median:.3f} s | "
        f"{back.median / t_hand - 1:+.1%} | {back.median / estimate - 1:+.1%} |",
        "",
        f"Placement group of the {DEVICES} bundles on a settled cluster: reserved (ready) in "
        f"{pg_reserve * 1e3:.1f} ms, released in {pg_release * 1e3:.1f} ms (medians). Spread of the coarse "
        f"runs: {spread}.",
        "",
    ])


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
