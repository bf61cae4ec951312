"""The task executor in the Ray backend's programs on a real Ray: a killed worker retried, a killed driver
resumed, retries and sys.exit, argv read at import and timeouts, a local run resumed and its cache shared, a
gang of ranks retried together, and the watchdog that names a task waiting for resources.

One simulated two-node Ray cluster (`ray.cluster_utils.Cluster`, 2 CPUs and 2 fake GPUs per node,
tests/ray_programs.py) serves the module; each emitted program runs as a subprocess connected to it with
--address.
"""

from __future__ import annotations

import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.runtime import read_events
from tests.deadlines import scaled
from tests.interpreters import run_python
from tests.ray_programs import _ran, _run, _write, two_node_cluster

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    """Two nodes of 2 CPUs and 2 (simulated) GPUs each: placement across nodes."""
    yield from two_node_cluster()


def test_killed_worker_is_retried(tmp_path: Path, cluster, write_project) -> None:
    root = write_project({"m.py": """
        import os

        import dagc

        @dagc.task
        def inc(x: int) -> int:
            return x + 1

        @dagc.task(retries=1)
        def fragile(x: int, marker: str) -> int:
            if not os.path.exists(marker):
                open(marker, "w").close()
                os._exit(1)  # the worker process dies mid-task
            return x * 2

        @dagc.pipeline
        def p(marker: str = "unset"):
            return inc(fragile(inc(1), marker))
    """})
    graph = compile_file(root / "m.py", params={"marker": str(tmp_path / "marker")})
    program = _write(tmp_path, graph)
    proc = _run(program, cluster, "--run-dir", str(tmp_path / "run"), "--result", str(tmp_path / "r.pkl"))
    assert proc.returncode == 0, proc.stderr
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == 5
    retries = read_events(tmp_path / "run" / "events.jsonl", event="retry")
    assert [(e["task"], e["attempt"]) for e in retries] == [("fragile", 2)]


RESUME_PROJECT = {"chain.py": """
    import time

    import dagc

    @dagc.task
    def step(x: int, k: int) -> int:
        return x * 3 + k

    @dagc.task
    def slow(x: int, seconds: float) -> int:
        time.sleep(seconds)
        return x + 100

    @dagc.pipeline
    def chain(seconds: float = 0.0):
        a = step(1, 1)
        side = step(a, 2)
        b = slow(a, seconds)
        c = step(b, 3)
        return step(c, side)
"""}


def test_killed_driver_resumes_only_unfinished_tasks(tmp_path: Path, cluster, write_project) -> None:
    root = write_project(RESUME_PROJECT)
    graph = compile_file(root / "chain.py", params={"seconds": 6.0})
    program = _write(tmp_path, graph)
    run_dir = tmp_path / "run"
    driver = subprocess.Popen([sys.executable, str(program), "--address", cluster.address, "--run-dir",
                               str(run_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              cwd=program.parent)
    deadline = time.monotonic() + scaled(120)  # (as long as the machine needs: it waits on an event)
    while "slow" not in {e["task"] for e in read_events(run_dir / "events.jsonl", event="start")}:
        assert driver.poll() is None and time.monotonic() < deadline, "the program never started `slow`"
        time.sleep(0.2)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    finished = _ran(run_dir)
    assert "step" in finished and "step.3" not in finished
    proc = _run(program, cluster, "--resume", str(run_dir), "--result", str(tmp_path / "resumed.pkl"))
    assert proc.returncode == 0, proc.stderr
    (second,) = {e["run"] for e in read_events(run_dir / "events.jsonl", event="run_start", run=None)
                 if e.get("resume")}
    assert _ran(run_dir, second) == {n.name for n in graph} - finished
    assert {e["task"] for e in read_events(run_dir / "events.jsonl", event="skip", run=second)} == finished
    expected = ((((1 * 3 + 1) + 100) * 3 + 3) * 3 + ((1 * 3 + 1) * 3 + 2))
    assert pickle.loads((tmp_path / "resumed.pkl").read_bytes()) == expected


# ---- the task executor on Ray (tests/runtime_projects.py) ------------------------------------------------
def _project_program(tmp_path: Path, write_project, files: dict[str, str], script: str, **compile_args):
    from tests.test_runtime import emit_local

    root = write_project(files)
    graph = compile_file(root / script, **compile_args)
    return root, _write(tmp_path, graph), emit_local(root, script, tmp_path / "local")


def test_ray_retries_attempts_and_sys_exit(tmp_path: Path, cluster, write_project) -> None:
    from tests import runtime_projects as projects

    _, program, _ = _project_program(tmp_path, write_project, projects.RETRY, "retry.py")
    proc = _run(program, cluster, "--run-dir", str(tmp_path / "run"), "--result", str(tmp_path / "r.pkl"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == projects.RETRY_RESULT
    retries = read_events(tmp_path / "run" / "events.jsonl", event="retry")
    assert [(e["task"], e["attempt"]) for e in retries] == [("flaky", 2), ("flaky", 3), ("exits", 2)]
    _, program, _ = _project_program(tmp_path / "exit", write_project, projects.EXIT, "quits.py")
    proc = _run(program, cluster, "--run-dir", str(tmp_path / "exit_run"))
    assert proc.returncode == 1
    assert "error: task `quits` failed (attempt 1): it called sys.exit(0)" in proc.stderr


def test_ray_module_reads_argv_at_import_and_timeout(tmp_path: Path, cluster, write_project) -> None:
    from tests import runtime_projects as projects

    _, program, _ = _project_program(tmp_path, write_project, projects.ARGV, "job.py")
    proc = _run(program, cluster, "--run-dir", str(tmp_path / "run"), "--result", str(tmp_path / "r.pkl"), "--",
                "--scale", "3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == (21, "job.py", str(program.parent))
    _, program, _ = _project_program(tmp_path / "hang", write_project, projects.HANG, "hang.py")
    proc = _run(program, cluster, "--run-dir", str(tmp_path / "hang_run"))
    assert proc.returncode == 1
    assert "task `hang` failed (attempt 1)" in proc.stderr and "timeout of 1s" in proc.stderr
    # stopped by its own timeout: `hang` (120 s of sleep) never ended, and the run failed for that reason
    events = tmp_path / "hang_run" / "events.jsonl"
    assert _ran(tmp_path / "hang_run") == {"start"}
    (failed,) = read_events(events, event="run_failed")
    assert "timeout of 1s" in failed["error"], failed


def test_ray_resumes_a_local_run_and_shares_its_cache(tmp_path: Path, cluster, write_project) -> None:
    """One fingerprint everywhere: a run directory the local program wrote is resumed on Ray (nothing
    runs again), and a cache the local program filled serves the Ray program; an unpicklable output
    still travels between Ray tasks."""
    from tests import runtime_projects as projects
    from tests.test_runtime import run_program

    _, program, local = _project_program(tmp_path, write_project, projects.CHAIN, "chain.py")
    run_dir, cache = tmp_path / "run", tmp_path / "cache"
    assert run_program(local, "--run-dir", str(run_dir), "--cache", str(cache)).returncode == 0
    proc = _run(program, cluster, "--resume", str(run_dir), "--result", str(tmp_path / "a.pkl"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert pickle.loads((tmp_path / "a.pkl").read_bytes()) == projects.CHAIN_RESULT
    last = read_events(run_dir / "events.jsonl")[-1]["run"]
    assert not _ran(run_dir, last) and len(read_events(run_dir / "events.jsonl", event="skip", run=last)) == 4
    proc = _run(program, cluster, "--cache", str(cache), "--run-dir", str(tmp_path / "b"),
                "--result", str(tmp_path / "b.pkl"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _ran(tmp_path / "b") == {"fresh"}  # cache=False
    _, program, _ = _project_program(tmp_path / "shapes", write_project, projects.LOCAL_CLASS, "shapes.py")
    proc = _run(program, cluster, "--run-dir", str(tmp_path / "c"), "--result", str(tmp_path / "c.pkl"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert pickle.loads((tmp_path / "c.pkl").read_bytes()) == 12
    assert "task `measure`: its output" in proc.stderr and "at module level" in proc.stderr


def test_two_rank_task_then_downstream_on_a_local_two_device_ray(tmp_path: Path, write_project) -> None:
    """`--cluster 2` on a Ray the program starts itself: the two ranks of `gang` take both devices,
    `start` before and `after` after it still run (the gang's actors exist only while it runs), and a
    rank that fails its first attempt is retried with its partner."""
    from tests import runtime_projects as projects

    _, program, _ = _project_program(tmp_path, write_project, projects.GANG, "gang.py",
                                     cluster=parse_cluster_spec("2"))
    assert "ranks=2" in program.read_text() and "DEVICES = [" in program.read_text()
    proc = run_python([str(program), "--run-dir", str(tmp_path / "run"),
                           "--result", str(tmp_path / "r.pkl")], capture_output=True, text=True, timeout=240,
                          cwd=program.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert pickle.loads((tmp_path / "r.pkl").read_bytes()) == projects.GANG_RESULT
    failures = read_events(tmp_path / "run" / "events.jsonl", event="failure")
    assert [(e["task"], e["rank"], e["attempt"]) for e in failures] == [("gang", 1, 1)]


def test_watchdog_names_a_task_waiting_for_resources(tmp_path: Path, cluster, write_project) -> None:
    """Three tasks that each need a whole node's two GPUs, on two nodes: one must wait; past
    --pending-timeout the run stops, naming a waiting task and what it needs, instead of hanging."""
    root = write_project({"greedy.py": """
        import time

        import dagc

        @dagc.task(gpus=2)
        def hold(k: int) -> int:
            time.sleep(60)
            return k

        @dagc.task
        def total(a: int, b: int, c: int) -> int:
            return a + b + c

        @dagc.pipeline
        def p():
            return total(hold(1), hold(2), hold(3))
    """})
    program = _write(tmp_path, compile_file(root / "greedy.py"))
    proc = _run(program, cluster, "--run-dir", str(tmp_path / "run"), "--pending-timeout", "3", timeout=180)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "has waited" in proc.stderr and "{'CPU': 1, 'GPU': 2}" in proc.stderr
    # the watchdog stopped the run while the first two `hold`s still slept (their 60 s): none of them ended
    assert not _ran(tmp_path / "run")
    (failed,) = read_events(tmp_path / "run" / "events.jsonl", event="run_failed")
    assert "has waited" in failed["error"] and "`hold" in failed["error"], failed
