"""A run store that survives damage and cannot be turned against its user.

- every stored output is sealed with a keyed digest: a flipped byte, a truncated or empty file, a
  pickle planted in the cache are never unpickled; the run names the file, computes the task again and
  equals an undamaged run;
- files are the owner's only (0600): outputs, the event log, the result;
- the event log reader skips and counts lines it cannot read, and a torn last line does not swallow the
  next run's first record;
- a piece of state the pipeline returns, changed after the task that made it, is stored as it is at its
  group's end and reused from there, on every backend; one that nothing changes after it was made is stored
  as each task ends.
"""

from __future__ import annotations

import os
import pickle
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.driver import compile_file
from dagc.runtime.events import EventLog, read_events
from dagc.runtime.store import Cache, DamagedOutput, RunStore
from tests.interpreters import run_python
from tests.test_backend_local import _plain_result

PIPELINE = '''\
import dagc


@dagc.task
def make(n: int) -> list:
    return list(range(n))


@dagc.task
def total(xs: list) -> int:
    return sum(xs)


@dagc.task
def new_log() -> list:
    return []


@dagc.task
def add(log: list, x: int) -> None:
    log.append(x)


@dagc.pipeline
def numbers(n: int = 5):
    xs = make(n)
    return total(xs), xs


@dagc.task
def summary(log: list) -> list:
    return [len(log), *log]


@dagc.pipeline
def history():
    log = new_log()
    add(log, 3)
    add(log, 4)
    return log


@dagc.pipeline
def summarized():
    log = new_log()
    add(log, 3)
    add(log, 4)
    return summary(log)
'''


@pytest.fixture()
def program(tmp_path: Path):  # type: ignore[no-untyped-def]
    script = tmp_path / "store_pipe.py"
    script.write_text(PIPELINE, encoding="utf-8")

    def make(name: str) -> Path:
        out = tmp_path / f"{name}_local.py"
        out.write_text(emit(compile_file(script, pipeline_name=name), "local", out))
        return out

    return script, make


def _run(program: Path, *args: str) -> tuple[object, str]:
    out = program.parent / "result.pkl"
    proc = run_python([str(program), "--result", str(out), *args], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return pickle.loads(out.read_bytes()), proc.stderr


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "unsealed"])
def test_a_damaged_output_is_named_and_computed_again(tmp_path: Path, program, damage: str) -> None:
    script, make = program
    local = make("numbers")
    plain = _plain_result(script, "numbers", tmp_path)
    run_dir = tmp_path / "run"
    assert _run(local, "--run-dir", str(run_dir))[0] == plain
    (stored,) = (run_dir / "outputs" / "make").glob("*.pkl")
    data = stored.read_bytes()
    if damage == "flip":
        data = data[:-5] + bytes([data[-5] ^ 0x01]) + data[-4:]
    elif damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "empty":
        data = b""
    else:  # a pickle of the right value, written without the key
        data = pickle.dumps([0, 1, 2, 3, 4])
    stored.write_bytes(data)
    result, stderr = _run(local, "--resume", str(run_dir))
    assert result == plain
    assert "the stored output of task `make` is not used" in stderr and str(stored.name) in stderr
    assert "Traceback" not in stderr
    # computed again and stored again: the next resume reuses it without a word
    result, stderr = _run(local, "--resume", str(run_dir))
    assert result == plain and "not used" not in stderr


def test_a_planted_cache_entry_never_runs(tmp_path: Path, program) -> None:
    script, make = program
    local = make("numbers")
    cache = tmp_path / "cache"
    plain, _ = _run(local, "--cache", str(cache))
    marker = tmp_path / "planted-ran"

    class Planted:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (os.system, (f"touch {marker}",))

    for entry in cache.rglob("*.pkl"):
        entry.write_bytes(pickle.dumps(Planted()))
    result, stderr = _run(local, "--cache", str(cache))
    assert result == plain and not marker.exists()
    assert "is not used" in stderr


def test_files_are_the_owners_only(tmp_path: Path, program) -> None:
    _, make = program
    local = make("numbers")
    run_dir = tmp_path / "run"
    _run(local, "--run-dir", str(run_dir))
    files = [run_dir / "events.jsonl", run_dir / "result.pkl", tmp_path / "result.pkl",
             *(run_dir / "outputs").rglob("*.pkl")]
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_store_and_cache_refuse_what_they_did_not_seal(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    store.save("t", "fp", {"a": 1})
    assert store.load("t", "fp") == {"a": 1} and store.check("t", "fp") is None
    store.path("t", "fp").write_bytes(pickle.dumps({"a": 2}))
    with pytest.raises(DamagedOutput):
        store.load("t", "fp")
    assert store.check("t", "fp") is not None and not store.usable("t", "fp")
    assert not store.path("t", "fp").exists()  # removed: the task runs again
    cache = Cache(tmp_path / "cache")
    cache.save_bytes("ab12", pickle.dumps(3))
    assert cache.usable("ab12") and cache.load("ab12") == 3


def test_event_log_skips_and_counts_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    EventLog(path, "r1").write("run_start", pipeline="p")
    with path.open("ab") as f:
        f.write(b"\xff\xfe not utf-8\n")
        f.write(b'{"ts": 1, "run": "r1", "event": "st')  # torn: the writer was killed mid-line
    EventLog(path, "r2").write("run_start", pipeline="p")  # the next run's first record survives
    skipped: list[int] = []
    records = read_events(path, skipped=skipped)
    assert [r["run"] for r in records] == ["r1", "r2"] and skipped == [2, 3]


def test_report_on_a_damaged_event_log(tmp_path: Path, program) -> None:
    from tests.conftest import run_dagc

    _, make = program
    local = make("numbers")
    run_dir = tmp_path / "run"
    _run(local, "--run-dir", str(run_dir))
    with (run_dir / "events.jsonl").open("ab") as f:
        f.write(b"\xff\xfe\x00 garbage\n")
    proc = run_dagc("report", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    assert "1 line(s) of" in proc.stderr and "could not be read" in proc.stderr


@pytest.mark.parametrize("reuse", ["--resume", "--cache"])
def test_returned_state_changed_after_made_is_stored_at_its_groups_end(tmp_path: Path, program, reuse: str) -> None:
    """The pipeline returns a list that tasks append to after the task that made it: the local program
    stores the group's outputs once its last task has run, as the list is then, and reuses them (never
    the list's first state)."""
    from dagc.runtime.events import read_events

    script, make = program
    local = make("history")
    assert "FINAL_STATE = (0,)" in local.read_text() and "never reused" not in local.read_text()
    plain = _plain_result(script, "history", tmp_path)
    assert plain == [3, 4]
    where = tmp_path / ("run" if reuse == "--resume" else "cache")
    first, _ = _run(local, "--run-dir" if reuse == "--resume" else "--cache", str(where))
    run_dir = where if reuse == "--resume" else tmp_path / "second"
    again, stderr = _run(local, reuse, str(where), *(("--run-dir", str(run_dir)) if reuse == "--cache" else ()))
    assert first == again == plain, stderr
    last_run = read_events(run_dir / "events.jsonl")[-1]["run"]
    skipped = {e["task"] for e in read_events(run_dir / "events.jsonl", run=last_run, event="skip")}
    assert skipped == {"new_log", "add", "add.1"}, stderr


@pytest.mark.parametrize("reuse", ["--resume", "--cache"])
def test_returned_state_made_after_every_change_is_reused(tmp_path: Path, program, reuse: str) -> None:
    """The pipeline returns what the state group's last task built: nothing changes it after that task,
    so its stored output is what the pipeline ends with, and the whole group is reused."""
    from dagc.runtime.events import read_events

    script, make = program
    local = make("summarized")
    assert "never reused" not in local.read_text()
    plain = _plain_result(script, "summarized", tmp_path)
    assert plain == [2, 3, 4]
    where = tmp_path / ("run" if reuse == "--resume" else "cache")
    first, _ = _run(local, "--run-dir" if reuse == "--resume" else "--cache", str(where))
    run_dir = where if reuse == "--resume" else tmp_path / "second"
    again, stderr = _run(local, reuse, str(where), *(("--run-dir", str(run_dir)) if reuse == "--cache" else ()))
    assert first == again == plain, stderr
    last_run = read_events(run_dir / "events.jsonl")[-1]["run"]
    skipped = {e["task"] for e in read_events(run_dir / "events.jsonl", run=last_run, event="skip")}
    assert skipped == {"new_log", "add", "add.1", "summary"}, stderr


@pytest.mark.slow
def test_ray_and_torch_reuse_returned_state_only_as_the_pipeline_ends_with_it(tmp_path: Path, program,
                                                                              ray_cluster) -> None:
    """Ray and torch reuse a state group whose returned object nothing changes after it was made
    (`summarized`), and one whose returned object tasks change later (`history`), stored at the group's end
    as the local program does, from a run directory they filled or the local program did."""
    from dagc.backends.torch import REQUIRED_PASSES
    from dagc.cluster import parse_cluster_spec
    from dagc.runtime.events import read_events
    from tests.test_backend_torch import launch

    script, make = program
    group = {"new_log", "add", "add.1"}
    for pipeline, reused in (("summarized", {*group, "summary"}), ("history", group)):
        plain = _plain_result(script, pipeline, tmp_path)
        ray_program = tmp_path / f"{pipeline}_ray.py"
        ray_program.write_text(emit(compile_file(script, pipeline_name=pipeline), "ray", ray_program))
        torch_program = tmp_path / f"{pipeline}_torch.py"
        torch_program.write_text(emit(compile_file(script, pipeline_name=pipeline, passes=REQUIRED_PASSES,
                                                   cluster=parse_cluster_spec("2"), backend="torch"), "torch",
                                      torch_program))
        for name, run in (
            ("ray", lambda argv, p=ray_program: run_python([str(p), "--address", ray_cluster.address, *argv],
                                                           capture_output=True, text=True, timeout=300, cwd=tmp_path)),
            ("torch", lambda argv, p=torch_program: launch(p, 2, argv)),
        ):
            run_dir = tmp_path / f"run_{pipeline}_{name}"
            for filled_by_local in (False, True) if pipeline == "history" else (False,):
                if filled_by_local:  # outputs stored by the local program, the group's at its end
                    run_dir = tmp_path / f"run_{pipeline}_{name}_by_local"
                    _run(make(pipeline), "--run-dir", str(run_dir))
                for reuse, result in (("--run-dir", "a"), ("--resume", "b")):
                    if reuse == "--run-dir" and run_dir.exists():
                        continue
                    proc = run([reuse, str(run_dir), "--result", str(tmp_path / f"{name}_{result}.pkl")])
                    assert getattr(proc, "returncode", 0) == 0, getattr(proc, "stderr", "")[-3000:]
                    assert pickle.loads((tmp_path / f"{name}_{result}.pkl").read_bytes()) == plain, (pipeline, name)
                last_run = read_events(run_dir / "events.jsonl")[-1]["run"]
                skipped = {e["task"] for e in read_events(run_dir / "events.jsonl", run=last_run, event="skip")}
                assert skipped == reused, (pipeline, name, filled_by_local)


def test_torch_recomputes_a_damaged_output(tmp_path: Path, program) -> None:
    from dagc.backends.torch import REQUIRED_PASSES
    from dagc.cluster import parse_cluster_spec
    from tests.test_backend_torch import launch

    script, _ = program
    prog = tmp_path / "numbers_torch.py"
    prog.write_text(emit(compile_file(script, pipeline_name="numbers", passes=REQUIRED_PASSES,
                                      cluster=parse_cluster_spec("2"), backend="torch"), "torch", prog))
    run_dir = tmp_path / "run"
    launch(prog, 2, ["--run-dir", str(run_dir), "--result", str(tmp_path / "a.pkl")])
    plain = _plain_result(script, "numbers", tmp_path)
    assert pickle.loads((tmp_path / "a.pkl").read_bytes()) == plain
    (stored,) = (run_dir / "outputs" / "make").glob("*.pkl")
    stored.write_bytes(stored.read_bytes()[:-3])
    launch(prog, 2, ["--resume", str(run_dir), "--result", str(tmp_path / "b.pkl")])
    assert pickle.loads((tmp_path / "b.pkl").read_bytes()) == plain
    assert RunStore(run_dir).check("make", stored.stem) is None  # stored again, sealed


HOLDS = '''\
import time
from pathlib import Path

import dagc


@dagc.task(cache=False)
def hold(gate: str) -> str:
    Path(gate, "started").touch()
    while not Path(gate, "release").exists():  # (an event, not a duration: the test releases it)
        time.sleep(0.05)
    return "held"


@dagc.pipeline
def p(gate: str = "."):
    return hold(gate)
'''


def test_one_run_at_a_time_per_run_directory(tmp_path: Path) -> None:
    import json
    import time

    script = tmp_path / "holds.py"
    script.write_text(HOLDS, encoding="utf-8")
    gate = tmp_path / "gate"
    gate.mkdir()
    program = tmp_path / "holds_local.py"
    program.write_text(emit(compile_file(script, params={"gate": str(gate)}), "local", program))
    run_dir = tmp_path / "run"
    first = subprocess.Popen([sys.executable, str(program), "--run-dir", str(run_dir)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (gate / "started").exists():  # the first run holds the directory from here on
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.05)
        second = run_python([str(program), "--run-dir", str(run_dir)], capture_output=True,
                                text=True, timeout=120)
        holder = json.loads((run_dir / ".lock").read_text())
        assert second.returncode == 2, second.stderr
        assert f"is in use by run {holder['run']} (pid {first.pid}" in second.stderr
    finally:
        (gate / "release").touch()
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0 and out.strip() == "'held'", err
    # released with its process: the next run goes ahead
    done = run_python([str(program), "--resume", str(run_dir)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "'held'", done.stderr


# ---- environment errors: one line naming the path and what to do, never a traceback ------------------------
def _run_injected(program: Path, fault: str, *args: str) -> subprocess.CompletedProcess:
    """Run `program` with `fault` (Python source) applied first: an OSError the machine cannot make for a
    root user (a full disk, a read-only file system)."""
    code = (f"import errno, os, runpy, sys\n{fault}\n"
            f"sys.argv = [{str(program)!r}, *{list(args)!r}]\n"
            f"runpy.run_path({str(program)!r}, run_name='__main__')\n")
    return run_python(["-c", code], capture_output=True, text=True, timeout=120)


FULL_DISK = '''
real = os.replace
def full(source, target, *args, **kwargs):
    if "outputs" in str(target):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))
    return real(source, target, *args, **kwargs)
os.replace = full
'''


def test_a_full_disk_ends_the_run_in_one_line_and_resume_finishes_it(tmp_path: Path, program) -> None:
    script, make = program
    local = make("numbers")
    run_dir = tmp_path / "run"
    proc = _run_injected(local, FULL_DISK, "--run-dir", str(run_dir))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"error: cannot write {run_dir}/outputs/make/" in proc.stderr
    assert f"No space left on device; free some space, then finish the run with --resume {run_dir}" in proc.stderr
    failed = read_events(run_dir / "events.jsonl", event="run_failed")
    assert failed and "No space left on device" in failed[-1]["error"]
    result, _ = _run(local, "--resume", str(run_dir))
    assert result == _plain_result(script, "numbers", tmp_path)


def test_an_unwritable_run_directory_or_result_path(tmp_path: Path, program) -> None:
    _, make = program
    local = make("numbers")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    proc = run_python([str(local), "--run-dir", str(blocker / "run")], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "for the run directory: Not a directory; give a writable --run-dir" in proc.stderr
    proc = run_python([str(local), "--result", str(blocker / "r.pkl")], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"error: cannot write the result to {blocker / 'r.pkl'}: " in proc.stderr
    assert "give a writable --result path" in proc.stderr


def test_an_unpicklable_result_with_result_path(tmp_path: Path) -> None:
    script = tmp_path / "lam.py"
    script.write_text("import dagc\n\n\n@dagc.task\ndef make() -> object:\n    class Local:\n        pass\n"
                      "    return Local()\n\n\n@dagc.pipeline\ndef p():\n    return make()\n", encoding="utf-8")
    program = tmp_path / "lam_local.py"
    program.write_text(emit(compile_file(script), "local", program))
    proc = run_python([str(program), "--result", str(tmp_path / "r.pkl")], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "the pipeline's result holds `lam.make.<locals>.Local`, which cannot be pickled" in proc.stderr


def test_a_log_that_cannot_be_written_is_said_once(tmp_path: Path, program) -> None:
    script, make = program
    local = make("numbers")
    fault = ('import dagc.runtime.events as events\n'
             'def full(self, line):\n'
             '    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n'
             'events.EventLog._append = full\n')
    proc = _run_injected(local, fault, "--run-dir", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("cannot write the event log") == 1


def test_a_directory_others_may_write_is_refused_unless_trusted(tmp_path: Path, program) -> None:
    _, make = program
    local = make("numbers")
    shared = tmp_path / "shared-cache"
    shared.mkdir()
    shared.chmod(0o777)
    proc = run_python([str(local), "--cache", str(shared)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert f"error: {shared} may be written by other users (mode 777); make it yours alone (chmod go-w {shared})" \
        in proc.stderr and "--trust-shared" in proc.stderr
    result, _ = _run(local, "--cache", str(shared), "--trust-shared")
    assert result == (10, [0, 1, 2, 3, 4])
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)  # like /tmp: others may add files, not replace ours
    assert _run(local, "--cache", str(sticky))[0] == (10, [0, 1, 2, 3, 4])


def test_write_behind_is_bounded_and_says_its_errors() -> None:
    import threading

    from dagc.runtime.store import StorageError, WriteBehind

    writer = WriteBehind(limit=100)
    gate, done = threading.Event(), []
    writer.submit(80, lambda: (gate.wait(30), done.append("a")))
    third = threading.Thread(target=lambda: writer.submit(80, lambda: done.append("b")))
    third.start()  # 80 + 80 > 100: waits for the first write
    third.join(timeout=0.5)
    assert third.is_alive() and done == []
    gate.set()
    third.join(timeout=30)
    writer.flush()
    assert done == ["a", "b"] and writer.pending == 0

    def fails() -> None:
        raise StorageError("cannot write X: No space left on device")

    writer.submit(10, fails)
    with pytest.raises(StorageError, match="No space left"):
        writer.flush()
    writer.flush()  # said once


TRAINED = '''\
import torch

import dagc


@dagc.task
def build(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Linear(4, 1)


@dagc.task
def make_optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.1)


@dagc.task
def train(model: torch.nn.Module, optimizer: torch.optim.Optimizer, steps: int) -> None:
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        optimizer.zero_grad()
        model(torch.randn(8, 4, generator=g)).pow(2).mean().backward()
        optimizer.step()


@dagc.pipeline
def trained(seed: int = 0):
    model = build(seed)
    optimizer = make_optimizer(model)
    train(model, optimizer, 5)
    return model, optimizer
'''


def test_a_model_trained_in_place_and_returned_is_reused_trained(tmp_path: Path) -> None:
    """`model = build(); train(model, optimizer); return model, optimizer`: the local program stores the
    group once training is done, the model and its optimizer in one pickle, so that a resumed run returns
    the trained model, whose parameters the optimizer still holds (its next step trains that model)."""
    import torch

    from dagc.runtime.events import read_events

    script = tmp_path / "trained.py"
    script.write_text(TRAINED, encoding="utf-8")
    program = tmp_path / "trained_local.py"
    program.write_text(emit(compile_file(script), "local", program))
    plain_model, _ = _plain_result(script, "trained", tmp_path)
    run_dir = tmp_path / "run"
    _run(program, "--run-dir", str(run_dir))
    (model, optimizer), stderr = _run(program, "--resume", str(run_dir))
    last_run = read_events(run_dir / "events.jsonl")[-1]["run"]
    assert {e["task"] for e in read_events(run_dir / "events.jsonl", run=last_run, event="skip")} == \
        {"build", "make_optimizer", "train"}, stderr
    assert torch.equal(model.weight, plain_model.weight) and torch.equal(model.bias, plain_model.bias)
    assert optimizer.param_groups[0]["params"][0] is model.weight


@pytest.mark.slow
def test_ray_and_torch_return_the_trained_model_shared_with_its_optimizer_and_reuse_it(tmp_path: Path,
                                                                                       ray_cluster) -> None:
    """The same idiom on Ray and torch: the run returns the trained model, still the one its optimizer
    holds (`is`), as the plain run does; a resumed run reuses the group, stored at its end, and returns the
    same."""
    import torch

    from dagc.backends.torch import REQUIRED_PASSES
    from dagc.cluster import parse_cluster_spec
    from dagc.runtime.events import read_events
    from tests.test_backend_torch import launch

    script = tmp_path / "trained.py"
    script.write_text(TRAINED, encoding="utf-8")
    plain_model, _ = _plain_result(script, "trained", tmp_path)
    ray_program = tmp_path / "trained_ray.py"
    ray_program.write_text(emit(compile_file(script), "ray", ray_program))
    torch_program = tmp_path / "trained_torch.py"
    torch_program.write_text(emit(compile_file(script, passes=REQUIRED_PASSES, cluster=parse_cluster_spec("2"),
                                               backend="torch"), "torch", torch_program))

    def ray(argv: list[str]) -> None:
        proc = run_python([str(ray_program), "--address", ray_cluster.address, *argv], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]

    for name, run in (("ray", ray), ("torch", lambda argv: launch(torch_program, 2, argv))):
        run_dir = tmp_path / f"run_{name}"
        for reuse, skipped in (("--run-dir", set()), ("--resume", {"build", "make_optimizer", "train"})):
            result = tmp_path / f"{name}{reuse}.pkl"
            run([reuse, str(run_dir), "--result", str(result)])
            model, optimizer = pickle.loads(result.read_bytes())
            assert torch.equal(model.weight, plain_model.weight) and torch.equal(model.bias, plain_model.bias)
            assert optimizer.param_groups[0]["params"][0] is model.weight, (name, reuse)
            last_run = read_events(run_dir / "events.jsonl")[-1]["run"]
            assert {e["task"] for e in read_events(run_dir / "events.jsonl", run=last_run, event="skip")} == \
                skipped, (name, reuse)
