"""A torch program's ranks stop within seconds when their launcher dies (`kill -9` of the process that started
them under torchrun): one line, no traceback, and the run directory's lock released."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

from dagc.runtime.store import RunStore  # noqa: E402
from tests.test_backend_torch import _emit  # noqa: E402

pytestmark = pytest.mark.slow

RESTS = """
import time

import dagc


@dagc.task
def rest(i: int) -> int:
    time.sleep(600)
    return i


@dagc.pipeline
def p():
    return [rest(1), rest(2)]
"""


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_for(condition, seconds: float, what: str) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"waited {seconds:g}s for {what}")
        time.sleep(0.2)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ranks_stop_when_their_launcher_is_killed(tmp_path: Path) -> None:
    (tmp_path / "rests.py").write_text(textwrap.dedent(RESTS), encoding="utf-8")
    program = _emit(tmp_path / "rests.py", tmp_path / "out" / "prog_torch.py", 2)
    run_dir = tmp_path / "run"
    launcher = subprocess.Popen([sys.executable, str(program), "--nproc", "2", "--dist-backend", "gloo",
                                 "--run-dir", str(run_dir)], cwd=tmp_path, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
    ranks: list[int] = []
    try:
        events = run_dir / "events.jsonl"
        _wait_for(lambda: events.exists() and '"event": "start"' in events.read_text(), 240,
                  "the tasks to start")
        ranks = [pid for pid in _children(launcher.pid) if _alive(pid)]
        assert len(ranks) == 2
        os.kill(launcher.pid, signal.SIGKILL)
        _, err = launcher.communicate(timeout=60)  # the pipes close once no rank holds them
        _wait_for(lambda: not any(_alive(pid) for pid in ranks), 30, "the ranks to stop")
    finally:
        for pid in [launcher.pid, *ranks]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert "Traceback" not in err and "Error" not in err, err[-3000:]
    said = [line for line in err.splitlines() if "launcher of this run" in line]
    assert len(said) == 1, err[-3000:]
    assert RunStore(run_dir).lock("probe") is None  # the lock died with the ranks
