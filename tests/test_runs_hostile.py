"""The run commands and programs in damaged or hostile directories: one line naming the path and what to do,
never a traceback, nothing lost.

- `dagc runs` / `dagc gc` skip a run directory they cannot read (run.json of the wrong shape, its event log a
  directory) with one warning naming it, and list the others; `gc` reports only the space it freed, names what
  it could not remove, and removes the temporary files killed writers left;
- deleting `.lock` does not release a run directory: a second run is refused and `gc` keeps it;
- event records of the wrong JSON types are skipped by `dagc report` and `dagc timeline` with one warning each;
- a store key that is empty, short or writable by others, a home where none can be made, and a TMPDIR a Ray of
  the program's own cannot use, are each one line naming the path and the fix;
- a script with a dot in its stem (`train.v2.py`) is refused at compile time for every backend (DAGC009).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.cli import main as dagc_main
from dagc.driver import compile_file
from dagc.runtime.events import EventLog
from dagc.runtime.runs import list_runs
from dagc.runtime.store import RunStore
from tests.conftest import run_dagc
from tests.interpreters import run_python
from tests.plain import plain_result
from tests.scratch import outside_base
from tests.test_store_hostile import PIPELINE, as_unprivileged_user

HOLD = """
import sys
from dagc.runtime.store import RunStore
assert RunStore(sys.argv[1], "numbers").lock("live-run") is None
print("held", flush=True)
sys.stdin.read()  # held until the test closes this process's input
"""


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> str:
    """What the emitted programs print: the pipeline's result, as plain Python computes it."""
    script = tmp_path_factory.mktemp("plain") / "pipe.py"
    script.write_text(PIPELINE, encoding="utf-8")
    return repr(plain_result(script, "numbers", script.parent))


def _run_dir(root: Path, name: str, status: str = "finished", created: str = "2026-01-01T00:00:00+0000") -> Path:
    store = RunStore(root / name, "numbers")
    meta = json.loads((store.root / "run.json").read_text())
    (store.root / "run.json").write_text(json.dumps({**meta, "created": created}))
    log = EventLog(store.events_path, f"run-{name}")
    log.write("run_start", pipeline="numbers")
    if status == "finished":
        log.write("run_end", duration=1.0)
    store.save("make", "fp", b"\0" * 4000)
    return store.root


def _program(directory: Path, backend: str = "local", name: str = "pipe.py") -> Path:
    script = directory / name
    script.write_text(PIPELINE, encoding="utf-8")
    program = directory / f"pipe_{backend}.py"
    program.write_text(emit(compile_file(script, pipeline_name="numbers", backend=backend), backend, program))
    return program


def _no_traceback(proc) -> None:  # type: ignore[no-untyped-def]
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


# ---- dagc runs / dagc gc --------------------------------------------------------------------------------------
def test_runs_and_gc_skip_an_unreadable_run_directory_and_use_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    good = _run_dir(root, "good")
    listed = _run_dir(root, "list", created="2026-02-01T00:00:00+0000")
    (listed / "run.json").write_text("[]", encoding="utf-8")
    events = _run_dir(root, "events", created="2026-03-01T00:00:00+0000")
    (events / "events.jsonl").unlink()
    (events / "events.jsonl").mkdir()
    proc = run_dagc("runs", str(root))
    _no_traceback(proc)
    assert proc.returncode == 0 and "1 run directories" in proc.stdout and str(good) in proc.stdout
    assert proc.stderr.splitlines() == [
        f"dagc: warning: skipped the run directory {events}, which cannot be read: {events / 'events.jsonl'} is "
        "not a file; remove it, or the whole run directory",
        f"dagc: warning: skipped the run directory {listed}, which cannot be read: {listed / 'run.json'} is not "
        "a dagc run record (JSON list, not an object); remove the directory, or fix its run.json"]
    proc = run_dagc("gc", str(root), "--keep", "0")
    _no_traceback(proc)
    (removed,) = proc.stdout.splitlines()
    assert proc.returncode == 0 and removed.startswith(f"remove {good}  (numbers, ") and removed.endswith("finished)")
    assert not good.exists() and listed.is_dir() and events.is_dir()  # what it cannot read, it never removes


@pytest.fixture()
def shared_base() -> Iterator[Path]:
    """A directory outside pytest's own, which an unprivileged user may enter."""
    with outside_base("dagc-gc-") as base:
        yield base


def test_gc_on_a_read_only_directory_frees_nothing_and_says_what_it_could_not_remove(shared_base: Path,
                                                                                   capsys) -> None:
    root = shared_base / "runs"
    run = _run_dir(root, "old")
    for path in [root, *root.rglob("*")]:  # (readable by all: what a read-only mount of another's runs shows)
        path.chmod(0o555 if path.is_dir() else 0o444)
    time.strptime("2026", "%Y")  # (imports the module it needs while Python's own files may still be read)
    with as_unprivileged_user():
        status = dagc_main(["gc", str(root), "--keep", "0"])
    err = capsys.readouterr().err.splitlines()
    assert status == 74 and run.is_dir() and (run / "outputs" / "make" / "fp.pkl").is_file()
    assert err[-2].startswith(f"dagc: warning: cannot remove {run} (") and "Permission denied" in err[-2]
    assert err[-2].endswith("; fix its permissions, then run dagc gc again")
    assert err[-1] == "freed 0B; 1 run directory kept"  # nothing said freed that was not


def test_gc_removes_the_temporary_files_killed_writers_left(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run = _run_dir(root, "kept")
    orphan = run / "outputs" / "make" / ".fp.pkl.ab12CD_9.tmp"
    orphan.write_bytes(b"\0" * 2048)
    other = run / "outputs" / "make" / "notes.tmp"  # not a temporary file of dagc's: left alone
    other.write_bytes(b"mine")
    proc = run_dagc("gc", str(root), "--keep", "5")
    _no_traceback(proc)
    assert proc.returncode == 0 and proc.stderr.splitlines() == ["freed 2KiB; 1 run directory kept"]
    assert not orphan.exists() and other.exists() and RunStore.open(run).load("make", "fp") == b"\0" * 4000


# ---- the lock is not a file to delete -------------------------------------------------------------------------
def test_deleting_the_lock_file_neither_lets_a_second_run_in_nor_gc_remove_the_live_directory(
        tmp_path: Path, plain: str) -> None:
    program = _program(tmp_path)
    run = tmp_path / "runs" / "live"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)  # a live run holds it
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        (run / ".lock").unlink()
        second = run_python([str(program), "--resume", str(run)], capture_output=True, text=True, timeout=120)
        _no_traceback(second)
        assert second.returncode == 2
        assert second.stderr.strip().splitlines()[-1] == (f"error: {run} is in use by run ? (pid ? on ?, since ?); "
                                                          "wait for it to end, or give another --run-dir")
        assert [r.status for r in list_runs(run.parent)] == ["running"]
        proc = run_dagc("gc", str(run.parent), "--keep", "0")
        assert proc.returncode == 0 and run.is_dir() and proc.stdout == ""
    finally:
        holder.communicate(timeout=60)  # the run ends: the next one finishes it
    resumed = run_python([str(program), "--resume", str(run)], capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0 and resumed.stdout.strip() == plain, resumed.stderr


# ---- event records of the wrong types ---------------------------------------------------------------------------
def test_report_and_timeline_skip_event_records_of_the_wrong_types(tmp_path: Path, plain: str) -> None:
    program = _program(tmp_path)
    run = tmp_path / "run"
    done = run_python([str(program), "--run-dir", str(run)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == plain, done.stderr
    log = run / "events.jsonl"
    run_id = json.loads(log.read_text().splitlines()[0])["run"]
    lines = len(log.read_text().splitlines())
    with log.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"event": "width", "task": "m", "items": "lots", "run": run_id, "ts": 1.0}) + "\n")
        f.write(json.dumps({"event": "end", "task": "make", "duration": "slow", "run": run_id, "ts": 2.0}) + "\n")
        f.write('["end"]\n')
    warnings = [f"dagc: warning: {log} line {lines + 1}: `items` is \"lots\", not an integer; the record is skipped",
                f"dagc: warning: {log} line {lines + 2}: `duration` is \"slow\", not a number; the record is skipped",
                f"dagc: warning: 1 line(s) of {log} could not be read and were skipped (line {lines + 3})"]
    report = run_dagc("report", str(run), "-o", str(tmp_path / "report.html"))
    _no_traceback(report)
    assert report.returncode == 0 and report.stderr.splitlines()[:3] == warnings
    assert "make" in (tmp_path / "report.html").read_text(encoding="utf-8")
    timeline = run_dagc("timeline", "--run-dir", str(run), "-o", str(tmp_path / "timeline.svg"))
    _no_traceback(timeline)
    assert timeline.returncode == 0 and timeline.stderr.splitlines()[:3] == warnings
    assert (tmp_path / "timeline.svg").is_file()


# ---- the store key, HOME and TMPDIR -------------------------------------------------------------------------------
def _key_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DAGC_STORE_KEY", "DAGC_HOME")}
    return {**env, "DAGC_HOME": str(home)}


@pytest.mark.parametrize("case", ["empty", "short", "file writable by others", "directory writable by others"])
def test_a_store_key_that_cannot_be_trusted_is_one_line_and_the_run_finishes_once_fixed(tmp_path: Path, case: str,
                                                                                        plain: str) -> None:
    program = _program(tmp_path)
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    key = home / "store.key"
    key.write_bytes({"empty": b"", "short": b"0123456789"}.get(case, os.urandom(32)))
    key.chmod(0o666 if case == "file writable by others" else 0o600)
    if case == "directory writable by others":
        home.chmod(0o777)
    run = tmp_path / "run"
    proc = run_python([str(program), "--run-dir", str(run)], env=_key_env(home), capture_output=True, text=True,
                      timeout=120)
    _no_traceback(proc)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    if case in ("empty", "short"):
        assert last == (f"error: the store key {key} is {'empty (0' if case == 'empty' else 'too short (10'} bytes); "
                        "remove it and dagc makes a new one (outputs sealed with the old key are then made again)")
        key.unlink()
    else:
        where = key if case.startswith("file") else home
        assert last.startswith(f"error: the store key {key} can be changed by other users ({where} is writable by "
                               f"others); run `chmod 600 {key}` and `chmod 700 {home}`")
        key.chmod(0o600)
        home.chmod(0o700)
    resumed = run_python([str(program), "--resume", str(run)], env=_key_env(home), capture_output=True, text=True,
                         timeout=120)
    assert resumed.returncode == 0 and resumed.stdout.strip() == plain, resumed.stderr


def test_a_home_where_no_store_key_can_be_made_is_one_line(tmp_path: Path, plain: str) -> None:
    program = _program(tmp_path)
    (tmp_path / "file").write_text("", encoding="utf-8")
    home = tmp_path / "file" / "home"  # (under a file: no user may make it, root included)
    env = {k: v for k, v in os.environ.items() if k not in ("DAGC_STORE_KEY", "DAGC_HOME")}
    proc = run_python([str(program), "--run-dir", str(tmp_path / "run")], env={**env, "HOME": str(home)},
                      capture_output=True, text=True, timeout=120)
    _no_traceback(proc)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == (
        f"error: cannot make the store key {home / '.dagc' / 'store.key'}: Not a directory; make {home / '.dagc'} "
        "writable, or set DAGC_HOME to a directory only you may write (or DAGC_STORE_KEY to a secret)")
    bare = run_python([str(program)], env={**env, "HOME": str(home)}, capture_output=True, text=True, timeout=120)
    assert bare.returncode == 0 and bare.stdout.strip() == plain, bare.stderr  # no run directory: no key


def test_a_ray_program_with_an_unusable_tmpdir_or_home_says_so_before_starting_ray(tmp_path: Path) -> None:
    program = _program(tmp_path, "ray")
    (tmp_path / "file").write_text("", encoding="utf-8")
    missing = tmp_path / "file" / "missing"  # (under a file: no user may make it, root included)
    cases = {"TMPDIR": (f"TMPDIR={missing} cannot hold temporary files (it does not exist); set TMPDIR to a "
                        "writable directory, or unset it to use the system's"),
             "HOME": (f"HOME={missing} cannot hold Ray's token, kept in {missing / '.ray'} ({missing}: it does not "
                      "exist); set HOME to a writable directory")}
    for variable, said in cases.items():
        env = {**os.environ, variable: str(missing), "DAGC_STORE_KEY": "a secret"}  # (the key is not in HOME)
        proc = run_python([str(program), "--run-dir", str(tmp_path / "run")], env=env, capture_output=True,
                          text=True, timeout=120)
        _no_traceback(proc)
        assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == f"error: {said}"
        assert not (tmp_path / "run").exists()  # nothing was opened


def _full_filesystem(where: Path) -> Path | None:
    """A 2 MiB tmpfs mounted at `where` and filled (None where this machine lets no test mount one)."""
    where.mkdir()
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)],
                                 capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if mounted.returncode != 0:
        return None
    with open(where / "fill", "wb") as out:  # until the disk is full
        try:
            while True:
                out.write(b"\0" * 65536)
        except OSError:
            pass
    return where


def test_a_ray_program_whose_tmpdir_is_on_a_full_disk_says_so_before_starting_ray(tmp_path: Path) -> None:
    """Ray cannot keep its session on a full disk; the program says so in one line instead of Ray's traceback
    after a minute of waiting for its own servers."""
    full = _full_filesystem(tmp_path / "full")
    if full is None:
        pytest.skip("this machine lets no test mount a small file system to fill")
    try:
        program = _program(tmp_path, "ray")
        env = {**os.environ, "TMPDIR": str(full), "DAGC_STORE_KEY": "a secret"}
        proc = run_python([str(program), "--run-dir", str(tmp_path / "run")], env=env, capture_output=True,
                          text=True, timeout=120)
        _no_traceback(proc)
        assert proc.returncode == 2, proc.stderr
        assert re.fullmatch(rf"error: TMPDIR={re.escape(str(full))} is on a disk too full for Ray \(\S+ free of "
                            r"2MiB, \d+% used\); free some space there, or set TMPDIR to a directory on a disk with "
                            r"room", proc.stderr.strip().splitlines()[-1]), proc.stderr
        assert not (tmp_path / "run").exists()  # nothing was opened
    finally:
        subprocess.run(["umount", str(full)], capture_output=True, timeout=30)


# ---- a script with a dot in its stem ----------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["local", "ray", "torch"])
def test_a_script_with_a_dot_in_its_stem_is_refused_at_compile_time(tmp_path: Path, backend: str,
                                                                    plain: str) -> None:
    script = tmp_path / "train.v2.py"
    script.write_text(PIPELINE, encoding="utf-8")
    for command in (["check", str(script)], ["emit", str(script), "--backend", backend, "-o",
                                             str(tmp_path / "program.py")]):
        proc = run_dagc(*command)
        _no_traceback(proc)
        assert proc.returncode == 1 and not (tmp_path / "program.py").exists()
        assert proc.stderr.splitlines()[0] == (
            f"{script}:1:1: error[DAGC009]: the script's name `train.v2.py` is not a module name: dagc's programs "
            "import it as `train.v2`, which Python reads as a module of a package `train`")
        assert "= hint: rename it without the dot, e.g. `train_v2.py`" in proc.stderr
    renamed = _program(tmp_path, "local", "train_v2.py")  # the fix the hint names
    done = run_python([str(renamed)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == plain, done.stderr


def test_a_refused_torch_run_exits_2_saying_it_once(tmp_path: Path) -> None:
    """`--resume` of a directory that is no run directory: the torch program refuses it as local and Ray do (exit
    status 2, the usage and the reason once), before its launcher starts any rank, with no torchrun report."""
    from dagc.cluster import parse_cluster_spec

    script = tmp_path / "pipe.py"
    script.write_text(PIPELINE, encoding="utf-8")
    program = tmp_path / "pipe_torch.py"
    graph = compile_file(script, pipeline_name="numbers", backend="torch", cluster=parse_cluster_spec("2"))
    program.write_text(emit(graph, "torch", program))
    proc = run_python([str(program), "--nproc", "2", "--resume", str(tmp_path / "nothing")], capture_output=True, text=True,
                      timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("is not a dagc run directory (no run.json)") == 1, proc.stderr
    assert "ChildFailedError" not in proc.stderr and "Traceback" not in proc.stderr
