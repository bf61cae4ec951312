"""A 1,000-item `map` on Ray against a hand-written `ray.remote` loop over the same items.

The pipeline lists its items in a task (so the width is known only at run time), runs `work` on
each (a `map` region: its items in chunks of Ray tasks, gathered in item order; see
dagc/runtime/raymap.py) and sums the results. The
hand-written program does the same with `ray.remote` functions: one task lists the items, one task
per item, one sums. Each `work` sleeps 10 ms (so that a 2-core machine still runs items side by
side) and both run in one local Ray of 4 logical CPUs, interleaved, after a warm-up run each; the
figures are medians. The emitted program keeps what the executor keeps for every task (events, and
each item's result in the run directory, which a resumed run reuses): that cost is part of what is
measured. Target: within 1.2x of the hand-written loop.
Run: `python -m benchmarks.map_fanout [--quick]`.
"""

from __future__ import annotations

import os
import sys
import tempfile
import textwrap
from pathlib import Path

__all__ = ["run"]

ITEMS, ITEM_SECONDS, CPUS = 1000, 0.01, 4

PIPELINE = textwrap.dedent(f"""
    import time

    import dagc


    @dagc.task(cost="1ms")
    def list_items(n: int) -> list:
        return list(range(n))


    @dagc.task(cost="10ms")
    def work(i: int) -> int:
        time.sleep({ITEM_SECONDS})
        return i * i


    @dagc.task(cost="1ms")
    def total(xs: list) -> int:
        return sum(xs)


    @dagc.pipeline
    def fanout(n: int = {ITEMS}) -> int:
        return total([work(i) for i in list_items(n)])
""")

HANDWRITTEN = textwrap.dedent(f"""
    import time

    import ray


    @ray.remote(num_cpus=1)
    def list_items(n):
        return list(range(n))


    @ray.remote(num_cpus=1)
    def work(i):
        time.sleep({ITEM_SECONDS})
        return i * i


    @ray.remote(num_cpus=1)
    def total(xs):
        return sum(xs)


    def run(n={ITEMS}):
        items = ray.get(list_items.remote(n))
        return ray.get(total.remote(ray.get([work.remote(i) for i in items])))
""")


def run(quick: bool = False) -> str:
    """The benchmark as a markdown section (`quick`: fewer repetitions)."""
    import ray

    from benchmarks.ray_overhead import _load, _measure, _Program
    from dagc.backends.ray import emit_ray
    from dagc.driver import compile_file

    reps = 3 if quick else 5
    load = os.getloadavg()[0]  # the machine may be shared: say how busy it was
    tmp = Path(tempfile.mkdtemp(prefix="dagc-map-bench-"))
    (tmp / "fanout.py").write_text(PIPELINE)
    (tmp / "fanout_hand.py").write_text(HANDWRITTEN)
    graph = compile_file(tmp / "fanout.py", backend="ray")
    assert [n.op for n in graph if n.op == "map"] == ["map"]
    (tmp / "fanout_ray.py").write_text(emit_ray(graph, tmp / "fanout_ray.py"))
    ray.init(address="local", num_cpus=CPUS, num_gpus=0, include_dashboard=False, log_to_driver=False,
             object_store_memory=200 * 2**20, runtime_env={"env_vars": {"PYTHONPATH": str(tmp)}})
    sys.path.insert(0, str(tmp))
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        programs = {"dagc map": _Program(_load(tmp / "fanout_ray.py", "fanout_ray"), tmp),
                    "hand-written": _Program(_load(tmp / "fanout_hand.py", "fanout_hand"), tmp, hand=True)}
        _measure(programs, reps, CPUS)
    finally:
        os.chdir(cwd)
        ray.shutdown()
    expected = sum(i * i for i in range(ITEMS))
    assert all(p.result == expected for p in programs.values()), {k: p.result for k, p in programs.items()}
    dagc_s, hand_s = programs["dagc map"].median, programs["hand-written"].median
    ideal = ITEMS * ITEM_SECONDS / CPUS
    lines = [
        "## Data-dependent fan-out on Ray (`map`)",
        "",
        f"A {ITEMS:,}-item map (items listed by a task; each item sleeps {ITEM_SECONDS * 1000:g} ms) against a "
        f"hand-written `ray.remote` loop over the same items, in one local Ray of {CPUS} CPUs; medians of {reps} "
        f"interleaved runs after a warm-up (benchmarks/map_fanout.py). Ideal: {ideal:.2f} s. Load average "
        f"when it started: {load:.1f} on {os.cpu_count()} cores.",
        "",
        "| program | wall time | ratio to hand-written |",
        "|---|---|---|",
        f"| dagc `map` (items in chunks of Ray tasks, each item stored) | {dagc_s:.2f} s | {dagc_s / hand_s:.2f}x |",
        f"| hand-written `ray.remote` loop | {hand_s:.2f} s | 1.00x |",
        "",
        f"Target: within 1.2x of the hand-written loop: **{'met' if dagc_s <= 1.2 * hand_s else 'not met'}** "
        f"({dagc_s / hand_s:.2f}x).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
