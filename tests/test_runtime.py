"""The task executor (dagc.runtime.executor) alone, and through the local backend's programs: retries
and attempt numbers, sys.exit, timeouts, argv, resume after an edit, the cache, unpicklable outputs."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.backends.fingerprint import task_fingerprints
from dagc.driver import compile_file
from dagc.runtime import EventLog, RunStore, context, read_events
from dagc.runtime.executor import Executor, TaskFailed
from dagc.runtime.program import default_run_dir, split_argv
from dagc.runtime.store import Cache
from tests import runtime_projects as projects
from tests.deadlines import scaled
from tests.interpreters import run_python


# ---- the executor on its own ----------------------------------------------------------------------
def test_retries_number_attempts_and_sys_exit_is_a_failure(tmp_path: Path) -> None:
    seen: list[int] = []

    def task() -> int:
        seen.append(context().attempt)
        if len(seen) < 3:
            sys.exit(0)
        return 5

    store = RunStore(tmp_path / "run")
    log = EventLog(store.events_path)
    rt = Executor({"t": ("f" * 32, 2, None, True, None)}, store=store, log=log)
    assert rt.task("t", task) == 5
    assert seen == [0, 1, 2]
    failures = read_events(store.events_path, event="failure")
    assert [f["attempt"] for f in failures] == [1, 2]
    assert all("SystemExit" in f["error"] for f in failures)
    with pytest.raises(TaskFailed, match=r"task `u` failed \(attempt 1\): it called sys.exit\(3\)"):
        Executor({"u": ("e" * 32, 0, None, True, None)}).task("u", lambda: sys.exit(3))


def test_timeout_stops_a_hung_task() -> None:
    rt = Executor({"hang": ("a" * 32, 1, 0.2, True, None)})
    started: list[int] = []
    finished: list[int] = []

    def hang() -> None:
        started.append(1)
        time.sleep(30)
        finished.append(1)

    with pytest.raises(TaskFailed, match="ran longer than its timeout of 0.2s"):
        rt.task("hang", hang)
    # both attempts began and neither was waited for: each was stopped at its timeout, not after 30 s
    assert started == [1, 1] and finished == []


def test_cache_is_shared_and_cache_false_is_always_run(tmp_path: Path) -> None:
    calls: list[str] = []
    tasks = {"a": ("1" * 32, 0, None, True, None), "b": ("2" * 32, 0, None, False, None)}
    for _ in range(2):
        rt = Executor(tasks, cache=Cache(tmp_path / "cache"))
        assert rt.task("a", lambda: calls.append("a") or 1) == 1
        assert rt.task("b", lambda: calls.append("b") or 2) == 2
    assert calls == ["a", "b", "b"]


def test_unpicklable_output_is_not_stored_but_the_run_goes_on(tmp_path: Path, capsys) -> None:
    def measure() -> object:
        from collections import namedtuple

        shape = namedtuple("Shape", "rows cols")
        return shape(2, 3)

    store = RunStore(tmp_path / "run")
    rt = Executor({"measure": ("3" * 32, 0, None, True, None)}, store=store, log=EventLog(store.events_path))
    assert rt.task("measure", measure).rows == 2
    err = capsys.readouterr().err
    assert "task `measure`: its output (`" in err and "Shape`) cannot be pickled" in err
    assert "define" in err and "at module level" in err
    assert not store.has("measure", "3" * 32)


def test_split_argv_and_default_run_dir(tmp_path: Path) -> None:
    assert split_argv(["--result", "r", "--", "--lr", "3", "--"]) == (["--result", "r"], ["--lr", "3", "--"])
    run_dir = default_run_dir("p", "id", tmp_path)
    assert run_dir == tmp_path / ".dagc" / "runs" / "p-id"
    assert (tmp_path / ".dagc" / ".gitignore").read_text().splitlines()[-1] == "*"


def test_fingerprint_covers_the_task_source(tmp_path: Path, write_project) -> None:
    root = write_project(projects.CHAIN)
    before = task_fingerprints(compile_file(root / "chain.py"))
    (root / "chain.py").write_text((root / "chain.py").read_text().replace("x + 1", "x + 5"))
    after = task_fingerprints(compile_file(root / "chain.py"))
    assert [t for t in before if before[t] != after[t]] == ["middle", "last", "fresh"]


# ---- local programs ---------------------------------------------------------------------------------
def emit_local(root: Path, script: str, out: Path) -> Path:
    program = out / "prog_local.py"
    program.parent.mkdir(parents=True, exist_ok=True)
    program.write_text(emit(compile_file(root / script), "local", program))
    return program


def run_program(program: Path, *args: str, cwd: Path | None = None, timeout: float = 120
                ) -> subprocess.CompletedProcess:
    return run_python([str(program), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or program.parent)


def _result(path: Path) -> object:
    return pickle.loads(path.read_bytes())


def test_local_retries_and_attempts(tmp_path: Path, write_project) -> None:
    program = emit_local(write_project(projects.RETRY), "retry.py", tmp_path / "out")
    proc = run_program(program, "--run-dir", str(tmp_path / "run"), "--result", str(tmp_path / "r.pkl"))
    assert proc.returncode == 0, proc.stderr
    assert _result(tmp_path / "r.pkl") == projects.RETRY_RESULT
    retries = read_events(tmp_path / "run" / "events.jsonl", event="retry")
    assert [(e["task"], e["attempt"]) for e in retries] == [("flaky", 2), ("flaky", 3), ("exits", 2)]


def test_local_sys_exit_is_a_named_failure(tmp_path: Path, write_project) -> None:
    program = emit_local(write_project(projects.EXIT), "quits.py", tmp_path / "out")
    proc = run_program(program, "--result", str(tmp_path / "r.pkl"))
    assert proc.returncode == 1
    assert "task `quits` failed (attempt 1): it called sys.exit(0)" in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "r.pkl").exists()


def test_local_module_reads_argv_at_import(tmp_path: Path, write_project) -> None:
    program = emit_local(write_project(projects.ARGV), "job.py", tmp_path / "out")
    workdir = tmp_path / "work"
    workdir.mkdir()
    proc = run_program(program, "--result", str(tmp_path / "r.pkl"), "--", "--scale", "3", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert _result(tmp_path / "r.pkl") == (21, "job.py", str(workdir))


def test_local_timeout_stops_the_task(tmp_path: Path, write_project) -> None:
    program = emit_local(write_project(projects.HANG), "hang.py", tmp_path / "out")
    proc = run_program(program, timeout=60)  # (the task sleeps 120 s: only its timeout ends the run in time)
    assert proc.returncode == 1
    assert "task `hang` failed (attempt 1)" in proc.stderr and "timeout of 1s" in proc.stderr


def _ended(run_dir: Path) -> list[str]:
    events = read_events(run_dir / "events.jsonl")
    last = events[-1]["run"]
    return [e["task"] for e in events if e["run"] == last and e["event"] == "end"]


def test_local_resume_after_an_edit_reruns_the_edited_task(tmp_path: Path, write_project) -> None:
    root = write_project(projects.CHAIN)
    program = emit_local(root, "chain.py", tmp_path / "out")
    run_dir = tmp_path / "run"
    assert run_program(program, "--run-dir", str(run_dir), "--result", str(tmp_path / "a.pkl")).returncode == 0
    assert _result(tmp_path / "a.pkl") == projects.CHAIN_RESULT
    (root / "chain.py").write_text((root / "chain.py").read_text().replace("x + 1", "x + 5"))
    program = emit_local(root, "chain.py", tmp_path / "out")
    proc = run_program(program, "--resume", str(run_dir), "--result", str(tmp_path / "b.pkl"))
    assert proc.returncode == 0, proc.stderr
    assert _result(tmp_path / "b.pkl") == projects.CHAIN_EDITED_RESULT
    assert _ended(run_dir) == ["middle", "last", "fresh"]


def test_local_cache_reuses_every_cacheable_task(tmp_path: Path, write_project) -> None:
    program = emit_local(write_project(projects.CHAIN), "chain.py", tmp_path / "out")
    cache = tmp_path / "cache"
    for run in ("a", "b"):
        proc = run_program(program, "--cache", str(cache), "--run-dir", str(tmp_path / run),
                           "--result", str(tmp_path / f"{run}.pkl"))
        assert proc.returncode == 0, proc.stderr
        assert _result(tmp_path / f"{run}.pkl") == projects.CHAIN_RESULT
    skipped = read_events(tmp_path / "b" / "events.jsonl", event="skip")
    assert {(e["task"], e["source"]) for e in skipped} == {(t, "cache") for t in ("first", "middle", "last")}
    assert _ended(tmp_path / "b") == ["fresh"]  # cache=False


def test_local_unpicklable_output_with_a_run_dir(tmp_path: Path, write_project) -> None:
    program = emit_local(write_project(projects.LOCAL_CLASS), "shapes.py", tmp_path / "out")
    proc = run_program(program, "--run-dir", str(tmp_path / "run"), "--result", str(tmp_path / "r.pkl"))
    assert proc.returncode == 0, proc.stderr
    assert _result(tmp_path / "r.pkl") == 12
    assert "task `measure`: its output" in proc.stderr


def test_resume_of_a_missing_run_dir_is_an_error(tmp_path: Path, write_project) -> None:
    program = emit_local(write_project(projects.CHAIN), "chain.py", tmp_path / "out")
    proc = run_program(program, "--resume", str(tmp_path / "nowhere"))
    assert proc.returncode == 2 and "is not a dagc run directory" in proc.stderr
    assert not os.path.exists(tmp_path / "out" / ".dagc")


def test_check_backend_warns_about_options_it_ignores(tmp_path: Path, write_project) -> None:
    from tests.conftest import run_dagc

    root = write_project({"opts.py": """
        import dagc

        @dagc.task(gpus=1, memory="2GiB")
        def train(x: int) -> int:
            return x + 1

        @dagc.task(ranks=2)
        def fit(x: int) -> int:
            return x

        @dagc.pipeline
        def p(x: int = 1):
            return fit(train(x))
    """})
    warned = {}
    for backend in ("local", "ray", "torch"):
        proc = run_dagc("check", str(root / "opts.py"), "--backend", backend)
        assert proc.returncode == 0, proc.stderr
        warned[backend] = [line.split("`")[3] for line in proc.stderr.splitlines() if "warning[DAGC160]" in line]
    assert warned == {"local": ["gpus", "memory", "ranks"], "ray": [], "torch": ["memory"]}


def test_a_task_hung_outside_python_is_recorded_before_its_process_ends(tmp_path: Path) -> None:
    """A task that cannot be interrupted past its timeout (stuck in C code; here, off the main thread, which no
    SIGALRM reaches) ends its process; the failure event says why first, so that an engine that sees only a dead
    worker (Ray) reports the timeout."""
    script = tmp_path / "hung.py"
    script.write_text(textwrap.dedent(f"""
        import threading
        import time
        from dagc.runtime import executor
        from dagc.runtime.events import EventLog
        executor.HARD_STOP_GRACE = 0.2
        log = EventLog({str(tmp_path / "events.jsonl")!r}, "run-1")
        rt = executor.Executor({{"hung": ("h" * 32, 0, 0.3, True, None)}}, log=log)
        worker = threading.Thread(target=rt.task, args=("hung", time.sleep, 60))
        worker.start()
        worker.join()
    """), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=scaled(60))
    assert proc.returncode == 124, proc.stderr[-2000:]
    (failure,) = read_events(tmp_path / "events.jsonl", event="failure")
    assert failure["task"] == "hung" and "timeout of 0.3s" in failure["error"]
    assert "did not return to Python" in failure["error"] and failure["attempt"] == 1
