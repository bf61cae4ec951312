"""Programs started as users start them: the installed `dagc` command (`dagc emit`, `dagc run`, `dagc runs`),
`python prog.py`, `torchrun`, and the torch program's own launcher (`python prog.py --nproc 2`).

Every process here is a real one started from its executable, not one forked from the suite's preloaded
servers (tests/interpreters.py, tests/rayfork.py), and each test checks what the run produced: the printed
result, equal to what `python script.py` prints, and the run directory's events. Only the programs' command
lines and their run directories are used, nothing of the runtime's insides."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dagc.driver import compile_file
from tests.deadlines import scaled

SCRIPT = '''\
import dagc


@dagc.task(cost="1s")
def double(x: int) -> int:
    return 2 * x


@dagc.task(cost="1s")
def describe(a: int, b: int) -> dict:
    return {"total": a + b, "parts": (a, b)}


@dagc.pipeline
def small(x: int = 3):
    return describe(double(x), double(x + 1))


if __name__ == "__main__":
    print(small())
'''

BIN = Path(sys.executable).parent  # the console scripts installed beside this interpreter


def _command(name: str) -> str:
    """An installed console script of this interpreter (`dagc`, `torchrun`), as a user's shell finds it."""
    found = BIN / name
    if found.exists():
        return str(found)
    return shutil.which(name) or pytest.fail(f"the {name} command is not installed")


def _environment() -> dict[str, str]:
    """The user's environment, without a Ray cluster to join: a Ray program starts a Ray of its own."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    return env


def _start(command: list[str], cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """`command` as from a shell, in a session of its own; whatever it leaves behind when it has ended (a local
    Ray's processes, a rank) is stopped with it. The timeout only guards against a hang."""
    proc = subprocess.Popen(command, cwd=cwd, env=_environment(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=scaled(timeout))
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # nothing of it is left
            pass
        proc.wait()
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


def _dagc(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return _start([_command("dagc"), *args], cwd, timeout)


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, str]:
    """The script in a directory of its own, and what `python script.py` prints."""
    (tmp_path / "small.py").write_text(SCRIPT, encoding="utf-8")
    plain = _start([sys.executable, "small.py"], tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.startswith("{'total': "), plain.stdout  # the result, printed (what runs compare with)
    return tmp_path, plain.stdout


def _tasks(root: Path) -> set[str]:
    return {node.name for node in compile_file(root / "small.py")}


def _events(run_dir: Path) -> list[dict]:
    lines = (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _assert_finished(run_dir: Path, tasks: set[str], world_size: int | None = None) -> list[dict]:
    """One run in `run_dir`, finished, in which every task of the pipeline ran once; its events."""
    events = _events(run_dir)
    (start,) = [e for e in events if e["event"] == "run_start"]
    assert start["pipeline"] == "small", start
    if world_size is not None:
        assert start["world_size"] == world_size, start
    ended = [e["task"] for e in events if e["event"] == "end"]
    assert sorted(ended) == sorted(tasks), events
    assert [e["event"] for e in events if e["event"].startswith("run_")] == ["run_start", "run_end"], events
    return events


def _listed_runs(root: Path) -> list[Path]:
    """The run directories `dagc runs` lists under the project, each checked to be a finished run of `small`."""
    listing = _dagc("runs", cwd=root)
    assert listing.returncode == 0, listing.stderr
    rows = [line.split() for line in listing.stdout.splitlines()[1:-1]]
    assert rows and all(row[1] == "small" and row[-1] == "finished" for row in rows), listing.stdout
    return [root / row[0] for row in rows]


# ---- the local program ----------------------------------------------------------------------------------------
def test_dagc_emit_then_python_runs_the_local_program(project: tuple[Path, str]) -> None:
    root, plain = project
    emitted = _dagc("emit", "small.py", "--backend", "local", "-o", "prog.py", cwd=root)
    assert emitted.returncode == 0, emitted.stderr
    assert emitted.stdout == "" and "wrote prog.py (local program for pipeline `small`)" in emitted.stderr
    run = _start([sys.executable, "prog.py", "--run-dir", "run"], root)
    assert run.returncode == 0, run.stderr
    assert run.stdout == plain
    _assert_finished(root / "run", _tasks(root))


# ---- `dagc run`: it emits the program and starts it with `python PROGRAM` ------------------------------------
@pytest.mark.parametrize("backend", [
    "local",
    pytest.param("ray", marks=pytest.mark.slow),  # a Ray the program starts itself: no --address, no RAY_ADDRESS
    pytest.param("torch", marks=pytest.mark.slow),  # one process, without torchrun: the plan has one device
])
def test_dagc_run_prints_what_the_script_prints(project: tuple[Path, str], backend: str) -> None:
    root, plain = project
    run = _dagc("run", "small.py", "--backend", backend, "--keep", f"prog_{backend}.py", cwd=root, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout == plain, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    (run_dir,) = _listed_runs(root)  # the run directory `dagc run` keeps, under .dagc/runs/
    _assert_finished(run_dir, _tasks(root), world_size=1 if backend == "torch" else None)
    if backend == "ray":  # the program says where its run directory is
        assert f"run directory {run_dir.relative_to(root)}" in run.stderr, run.stderr
    # the kept program, started by hand (a Ray of its own again, one torch process): the same result
    again = _start([sys.executable, f"prog_{backend}.py", "--run-dir", "again"], root, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout == plain, again.stderr[-3000:]
    _assert_finished(root / "again", _tasks(root), world_size=1 if backend == "torch" else None)


# ---- the torch program on two ranks --------------------------------------------------------------------------
@pytest.mark.slow
def test_torch_program_on_two_ranks_by_torchrun_and_by_its_own_launcher(project: tuple[Path, str]) -> None:
    """The program emitted for two devices, started by `torchrun --standalone` and by its own launcher
    (`python prog.py --nproc 2`): the same printed result, each rank running the tasks the plan gave it."""
    root, plain = project
    emitted = _dagc("emit", "small.py", "--backend", "torch", "--cluster", "2", "-o", "prog.py", cwd=root)
    assert emitted.returncode == 0, emitted.stderr
    launches = {
        "torchrun": [_command("torchrun"), "--standalone", "--nproc-per-node", "2", "prog.py", "--run-dir",
                     "torchrun"],
        "launcher": [sys.executable, "prog.py", "--nproc", "2", "--run-dir", "launcher"],
    }
    for name, command in launches.items():
        run = _start(command, root, timeout=300)
        assert run.returncode == 0, f"{name}: {run.stderr[-3000:]}"
        assert run.stdout == plain, f"{name}: {run.stdout!r}\n{run.stderr[-3000:]}"  # printed once, by rank 0
        assert "Traceback" not in run.stderr, f"{name}: {run.stderr[-3000:]}"
        events = _assert_finished(root / name, _tasks(root), world_size=2)
        ranks = {e["rank"] for e in events if e["event"] == "end"}
        assert ranks == {0, 1}, f"{name}: {events}"  # the two doublings ran side by side
