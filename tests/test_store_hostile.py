"""A run directory or cache in a hostile state gives one line naming the path and what to do, never a traceback:

- a read-only run directory is a StorageError (an OSError too, so a program's handling of the file system's
  errors covers it); a read-only cache is said once and the run goes on without adding to it;
- the temporary file a killed writer left is never read, and the next write of that entry removes it (one a
  live writer holds is left alone);
- a `run.json` that is JSON of the wrong shape, or not JSON, is refused in one line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.driver import compile_file
from dagc.runtime.store import Cache, RunStore, StorageError
from dagc.runtime.store.files import atomically
from tests.interpreters import run_python
from tests.scratch import outside_base

NOBODY = 65534

PIPELINE = '''\
import dagc


@dagc.task
def make(n: int) -> list:
    return list(range(n))


@dagc.pipeline
def numbers(n: int = 4):
    return make(n)
'''


# ---- a read-only run directory or cache -----------------------------------------------------------------
@pytest.fixture()
def read_only_base() -> Iterator[Path]:
    """A directory outside pytest's own (which only its owner may enter), for a process of another user."""
    with outside_base("dagc-read-only-") as base:
        yield base


@contextmanager
def as_unprivileged_user() -> Iterator[None]:
    """Root writes anywhere: in this block the process acts as an unprivileged user (its effective id only, so
    that it can become root again); as any other user, as itself."""
    if os.geteuid() != 0:
        yield
        return
    os.seteuid(NOBODY)
    try:
        yield
    finally:
        os.seteuid(0)


def _refused(call: Callable[[], object]) -> StorageError:
    with pytest.raises(StorageError) as refused:
        call()
    return refused.value


def test_a_read_only_run_directory_is_one_line_naming_the_path(read_only_base: Path, capsys) -> None:
    base, run = read_only_base, read_only_base / "run"
    RunStore(run, "numbers").save("make", "e" * 32, [0, 1])  # (and the store key is read, while it may be)
    (base / "cache").mkdir()
    for path in [base, *base.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    with as_unprivileged_user():
        new = _refused(lambda: RunStore(base / "new"))
        store = RunStore.open(run)
        lock = _refused(lambda: store.lock("r1"))
        save = _refused(lambda: store.save("make", "f" * 32, [1, 2]))
        attempt = _refused(lambda: store.next_attempt("r1", "make"))
        loaded = store.load("make", "e" * 32)
        cache = Cache(base / "cache")
        cached = [cache.save_bytes("ab" * 16, b"x" * 10), cache.save_bytes("cd" * 16, b"y" * 3)]
        Cache(base / "new-cache").save_bytes("ab" * 16, b"x")
    assert str(new) == f"cannot write {base / 'new'}: Permission denied; fix the directory's permissions"
    # an OSError too, naming the directory: a program says "cannot use DIR for the run directory: ..."
    assert isinstance(new, OSError) and new.filename == str(base / "new") and new.strerror == "Permission denied"
    assert str(lock) == f"cannot write {run / '.lock'}: Permission denied; fix the directory's permissions"
    output = run / "outputs" / "make" / ("f" * 32 + ".pkl")
    assert str(save) == (f"cannot write {output}: Permission denied; fix the directory's permissions, then "
                         f"finish the run with --resume {run}")
    assert str(attempt).startswith(f"cannot write {run / 'attempts' / 'r1'}")
    assert loaded == [0, 1]  # what is there is still read
    # the cache only saves time: said once, in one line, and the run goes on
    assert cached == [10, 3]
    assert capsys.readouterr().err.splitlines() == [
        f"dagc: warning: cannot write {base / 'cache' / 'ab' / ('ab' * 16 + '.pkl')}: Permission denied; fix the "
        f"directory's permissions; outputs are no longer added to the cache {base / 'cache'}",
        f"dagc: warning: cannot write {base / 'new-cache'}: Permission denied; fix the directory's permissions; "
        f"outputs are no longer added to the cache {base / 'new-cache'}"]


READ_ONLY_FILE_SYSTEM = '''
real_open, real_mkdir = os.open, os.mkdir
RUN = {run!r}
def read_only_open(path, flags, *args, **kwargs):
    if str(path).startswith(RUN) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
    return real_open(path, flags, *args, **kwargs)
def read_only_mkdir(path, *args, **kwargs):
    if str(path).startswith(RUN):
        if os.path.isdir(path):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
    return real_mkdir(path, *args, **kwargs)
os.open, os.mkdir = read_only_open, read_only_mkdir
'''


def _local_program(tmp_path: Path) -> Path:
    script = tmp_path / "pipe.py"
    script.write_text(PIPELINE, encoding="utf-8")
    program = tmp_path / "pipe_local.py"
    program.write_text(emit(compile_file(script, pipeline_name="numbers"), "local", program))
    return program


def _run_on_read_only(program: Path, run: Path, *args: str) -> subprocess.CompletedProcess:
    code = (f"import errno, os, runpy, sys\n{READ_ONLY_FILE_SYSTEM.format(run=str(run))}\n"
            f"sys.argv = [{str(program)!r}, *{list(args)!r}]\n"
            f"runpy.run_path({str(program)!r}, run_name='__main__')\n")
    return run_python(["-c", code], capture_output=True, text=True, timeout=120)


def test_a_program_on_a_read_only_file_system_says_so_in_one_line(tmp_path: Path) -> None:
    program = _local_program(tmp_path)
    run = tmp_path / "run"
    done = run_python([str(program), "--run-dir", str(run)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    resumed = _run_on_read_only(program, run, "--resume", str(run))
    assert resumed.returncode == 2 and "Traceback" not in resumed.stderr, resumed.stderr
    assert resumed.stderr.strip().splitlines()[-1] == (
        f"error: cannot write {run / '.lock'}: Read-only file system; the file system is read-only: give a "
        "writable directory")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    new = _run_on_read_only(program, fresh, "--run-dir", str(fresh))
    assert new.returncode == 2 and "Traceback" not in new.stderr, new.stderr
    assert new.stderr.strip().splitlines()[-1] == (
        f"error: cannot use {fresh} for the run directory: Read-only file system; give a writable --run-dir")


# ---- a killed writer's temporary file -----------------------------------------------------------------------
KILLED_WRITER = '''
import os, signal, sys
from pathlib import Path
from dagc.runtime.store.files import atomically

def write(f):
    f.write(b"half of an output")
    f.flush()
    os.kill(os.getpid(), signal.SIGKILL)

atomically(Path(sys.argv[1]), write)
'''


def _temporaries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_a_killed_writers_temporary_file_is_ignored_then_removed(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    store.save("make", "a" * 32, "first")
    output = store.path("make", "a" * 32)
    killed = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(output)], timeout=120)
    assert killed.returncode == -signal.SIGKILL
    (orphan,) = _temporaries(output.parent)
    assert orphan.startswith(f".{output.name}.")
    other = output.parent / f".{'b' * 32}.pkl.x1y2z3ab.tmp"  # other entries': not this entry's to remove
    other.write_bytes(b"")
    longer = output.parent / f".{output.name}.trace.x1y2z3ab.tmp"  # (the entry `….pkl.trace`)
    longer.write_bytes(b"")
    planted = output.parent / f".{output.name}.link0000.tmp"
    planted.symlink_to(tmp_path / "victim")
    (tmp_path / "victim").write_text("kept", encoding="utf-8")
    # ignored on read: the stored output is the whole old one, and nothing else is listed
    assert store.completed() == {"make": ["a" * 32]}
    assert store.usable("make", "a" * 32) and store.load("make", "a" * 32) == "first"
    assert RunStore.open(store.root).load("make", "a" * 32) == "first"
    # removed by the next write of that entry
    store.save("make", "a" * 32, "second")
    assert _temporaries(output.parent) == sorted([other.name, longer.name, planted.name])
    assert (tmp_path / "victim").read_text(encoding="utf-8") == "kept"
    assert RunStore.open(store.root).load("make", "a" * 32) == "second"


def test_a_live_writers_temporary_file_is_left_alone(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    target = cache.path("ab" * 16)
    writing, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def slow(f) -> None:  # type: ignore[no-untyped-def]
        f.write(b"slow")
        writing.set()
        release.wait(30)

    def write_slowly() -> None:
        try:
            atomically(target, slow)
        except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
            errors.append(exc)

    writer = threading.Thread(target=write_slowly)
    writer.start()
    assert writing.wait(30)
    (live,) = _temporaries(target.parent)
    cache.save_bytes("cd" * 16, b"other entry")  # another entry: its own temporaries only
    atomically(target, lambda f: f.write(b"fast"))  # the same entry, written meanwhile
    assert _temporaries(target.parent) == [live]  # held by its writer: kept
    release.set()
    writer.join(30)
    assert not errors and _temporaries(target.parent) == []
    assert target.read_bytes() == b"slow"  # the last to finish wins, whole


# ---- run.json of the wrong shape ----------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "found"), [("[]", "JSON list, not an object"), ('"run"', "JSON str, not an object"),
                                             ("{not json", "not JSON")])
def test_a_run_json_of_the_wrong_shape_is_refused_in_one_line(tmp_path: Path, text: str, found: str) -> None:
    store = RunStore(tmp_path / "run", "numbers")
    meta = store.root / "run.json"
    meta.write_text(text, encoding="utf-8")
    expected = (f"{meta} is not a dagc run record ({found}); give --resume the directory of a dagc run, or start "
                "a new run with another --run-dir")
    with pytest.raises(StorageError) as opened:
        RunStore.open(store.root)
    assert str(opened.value) == expected and isinstance(opened.value, OSError)
    with pytest.raises(StorageError, match="is not a dagc run record"):
        store.info()


def test_resuming_a_run_json_of_the_wrong_shape_is_one_line(tmp_path: Path) -> None:
    program = _local_program(tmp_path)
    run = tmp_path / "run"
    RunStore(run, "numbers")
    (run / "run.json").write_text("[]", encoding="utf-8")
    proc = run_python([str(program), "--resume", str(run)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].endswith(
        f"error: --resume: {run / 'run.json'} is not a dagc run record (JSON list, not an object); give --resume "
        "the directory of a dagc run, or start a new run with another --run-dir")


def test_a_lock_record_of_the_wrong_shape_still_names_the_holder_in_one_line(tmp_path: Path) -> None:
    holder = RunStore(tmp_path / "run")
    assert holder.lock("r1") is None
    (holder.root / ".lock").write_text("[]", encoding="utf-8")  # (what a foreign writer left in it)
    busy = RunStore.open(holder.root).lock("r2")
    assert busy == (f"{holder.root} is in use by run ? (pid ? on ?, since ?); wait for it to end, or give another "
                    "--run-dir")
