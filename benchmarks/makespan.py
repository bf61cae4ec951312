"""Estimated against measured makespan of emitted programs.

1. A synthetic pipeline whose tasks do known work (`time.sleep` of their annotated cost, so that a
   2-core machine still runs parallel branches in parallel): 4 layers of 4 branches, each task
   reading two tasks of the layer before, costs 50-250 ms. Compiled for one device and run by the
   local program; compiled for 4 devices and run by the Ray program (when the Ray backend is
   registered), which starts its own local Ray. The estimate is the scheduler's makespan from the
   annotations; the measurement is the run's makespan from its event log (first task start to
   last task end), so interpreter and Ray start-up are not counted.
2. The samples, profile-guided: each sample's local program runs once with `--run-dir`; the sample
   is compiled again with that run as its profile (`dagc plan --profile RUN_DIR`), which gives the
   estimate; a second run gives the measurement. This is how well the cost model predicts a run
   once it has seen the machine.

Run: `python -m benchmarks.makespan [--quick]`.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

__all__ = ["run"]

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
LAYERS, WIDTH = 4, 4
COSTS_MS = (50, 150, 250, 100)


def synthetic_source() -> str:
    """A layered pipeline of sleeping tasks (costs annotated exactly)."""
    lines = [
        "import time", "", "import dagc", "", "",
    ]
    for c in COSTS_MS:
        lines += [f'@dagc.task(cost="{c}ms", out_size="1KiB")', f"def work_{c}(a: int, b: int) -> int:",
                  f"    time.sleep({c / 1000})", "    return (a * 31 + b) % 1000003", "", ""]
    lines += ['@dagc.task(cost="1ms", out_size="1KiB")', "def total(parts: list) -> int:",
              "    return sum(parts)", "", "", "@dagc.pipeline", "def layered():"]
    prev = [f"{w}" for w in range(WIDTH)]
    for layer in range(LAYERS):
        cur = []
        for w in range(WIDTH):
            cost = COSTS_MS[(layer + w) % len(COSTS_MS)]
            a, b = prev[w], prev[(w + 1) % WIDTH]
            lines.append(f"    t{layer}_{w} = work_{cost}({a}, {b})")
            cur.append(f"t{layer}_{w}")
        prev = cur
    lines.append(f"    return total([{', '.join(prev)}])")
    return "\n".join(lines) + "\n"


def _run_program(program: Path, run_dir: Path, *extra: str, timeout: float = 600) -> float:
    from dagc.profile import load_run

    proc = subprocess.run([sys.executable, str(program), "--run-dir", str(run_dir), "--result",
                           str(run_dir.parent / f"{run_dir.name}.pkl"), *extra],
                          capture_output=True, text=True, timeout=timeout, cwd=program.parent)
    if proc.returncode != 0:
        raise RuntimeError(f"{program.name} failed:\n{proc.stderr[-2000:]}")
    return load_run(run_dir).makespan


def _compile(script: Path, devices: int, backend: str, profile: Path | None = None):  # noqa: ANN202
    from dagc.cluster import parse_cluster_spec
    from dagc.driver import compile_file

    passes = "verify,dce,cse,partition,schedule"
    params = {"out_dir": str(script.parent / "files")} if script.stem == "file_pipeline" else None
    return compile_file(script, passes=passes, cluster=parse_cluster_spec(str(devices)), backend=backend,
                        profile=profile, params=params)


def _emit(graph, backend: str, path: Path) -> Path:  # noqa: ANN001
    from dagc.backends import emit

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(emit(graph, backend, path))
    return path


def synthetic_rows(tmp: Path, reps: int) -> list[str]:
    from dagc.backends import BACKENDS

    script = tmp / "layered.py"
    script.write_text(synthetic_source())
    rows = []
    cases = [("local", 1)] + ([("ray", 4)] if "ray" in BACKENDS else [])
    for backend, devices in cases:
        graph = _compile(script, devices, backend)
        estimate = float(graph.attrs["schedule.makespan"])
        program = _emit(graph, backend, tmp / f"layered_{backend}.py")
        if backend == "ray":
            # one Ray for all repetitions: the program's own run in a driver that keeps Ray warm
            measured = _ray_runs(program, tmp, reps)
        else:
            measured = [_run_program(program, tmp / f"run_{backend}_{i}") for i in range(reps)]
        med = statistics.median(measured)
        rows.append(f"| layered, 17 tasks | {backend} | {devices} | {estimate:.3f} s | {med:.3f} s | "
                    f"{med / estimate:.3f} |")
    return rows


def _ray_runs(program: Path, tmp: Path, reps: int) -> list[float]:
    """Run the Ray program `reps + 1` times against one local Ray (the first run warms the workers)."""
    driver = tmp / "ray_driver.py"
    driver.write_text(textwrap.dedent(f"""
        import runpy, sys
        import ray
        sys.path.insert(0, {str(tmp)!r})
        ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False,
                 runtime_env={{"env_vars": {{"PYTHONPATH": {str(tmp)!r}}}}})
        ns = runpy.run_path({str(program)!r}, run_name="dagc_program")
        for i in range({reps + 1}):
            assert ns["main"](["--run-dir", {str(tmp)!r} + f"/run_ray_{{i}}",
                               "--result", {str(tmp)!r} + f"/run_ray_{{i}}.pkl"]) == 0
        ray.shutdown()
    """))
    proc = subprocess.run([sys.executable, str(driver)], capture_output=True, text=True, timeout=900,
                          cwd=program.parent)
    if proc.returncode != 0:
        raise RuntimeError(f"Ray run failed:\n{proc.stderr[-2000:]}")
    from dagc.profile import load_run

    return [load_run(tmp / f"run_ray_{i}").makespan for i in range(1, reps + 1)]


def sample_rows(tmp: Path, samples: list[str], reps: int) -> list[str]:
    rows = []
    for name in samples:
        script = SAMPLES / f"{name}.py"
        work = tmp / name
        graph = _compile(script, 1, "local")
        program = _emit(graph, "local", work / f"{name}_local.py")
        profile_dir = work / "profile"
        _run_program(program, profile_dir)
        estimate = float(_compile(script, 1, "local", profile=profile_dir).attrs["schedule.makespan"])
        measured = statistics.median(_run_program(program, work / f"measured{i}") for i in range(reps))
        rows.append(f"| {name}, {len(graph)} tasks | local, profile-guided | 1 | {estimate:.3f} s | "
                    f"{measured:.3f} s | {measured / estimate:.3f} |")
    return rows


def run(quick: bool = False) -> str:
    """The benchmark as a markdown section (`quick`: fewer repetitions and samples)."""
    reps = 2 if quick else 5
    samples = ["mixed_precision_step", "gpt_pretrain"] if quick else [
        "quickstart", "mixed_precision_step", "gpt_pretrain", "hparam_sweep"]
    samples = [s for s in samples if (SAMPLES / f"{s}.py").exists()]
    lines = [
        "### Estimated vs measured makespan",
        "",
        "Estimate: the `schedule` pass's makespan. Measured: first task start to last task end in the run's "
        f"event log (median of {reps} runs for the synthetic pipeline; for the samples, median of "
        f"{1 if quick else 3} run(s) after one profiling run). Tasks of a few milliseconds measure mostly "
        "the per-task overhead (checkpoint, event log) that the cost model does not see.",
        "",
        "| pipeline | backend | devices | estimated | measured | measured / estimated |",
        "|---|---|---:|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        lines += synthetic_rows(Path(tmp), reps)
        lines += sample_rows(Path(tmp), samples, 1 if quick else 3)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv[1:]))
