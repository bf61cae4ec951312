"""The progress display of a local program: on a terminal (a pseudo-terminal here) it names the running task
with its elapsed time and redraws it while the task runs, with what the task prints above it; on a pipe it
writes plain lines and never an escape code. The task waits for the test's word, so nothing here depends on
how fast the machine is."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.driver import compile_file
from dagc.runtime.progress import Progress, format_elapsed

SCRIPT = """
import os
import time

import dagc


@dagc.task
def wait_for_go(n: int) -> int:
    print("epoch 1 of 2 done", flush=True)
    while not os.path.exists(os.environ["DAGC_TEST_GO"]):
        time.sleep(0.05)
    print("epoch 2 of 2 done", flush=True)
    return n + 1


@dagc.task
def double(n: int) -> int:
    return 2 * n


@dagc.pipeline
def p(n: int = 1):
    return double(wait_for_go(n))
"""

DEADLINE_S = 120.0
ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _plain(text: str) -> str:
    """`text` without its terminal escape codes."""
    return ESCAPE.sub("", text)


class _Reader:
    """Collects what a file descriptor yields, on a thread, until it closes."""

    def __init__(self, fd: int) -> None:
        self.fd, self.data, self.lock = fd, bytearray(), threading.Lock()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # a pty's reading end reports EIO once the other end is closed
                return
            if not chunk:
                return
            with self.lock:
                self.data.extend(chunk)

    def text(self) -> str:
        with self.lock:
            return self.data.decode("utf-8", "replace")

    def wait_for(self, found, what: str) -> str:  # type: ignore[no-untyped-def]
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end:
            text = self.text()
            if found(text):
                return text
            time.sleep(0.05)
        raise AssertionError(f"no {what} within {DEADLINE_S:g}s; output so far:\n{self.text()[-3000:]}")


def _program(tmp_path: Path) -> Path:
    (tmp_path / "job.py").write_text(textwrap.dedent(SCRIPT), encoding="utf-8")
    program = tmp_path / "out" / "prog_local.py"
    program.parent.mkdir(parents=True, exist_ok=True)
    program.write_text(emit(compile_file(tmp_path / "job.py", backend="local"), "local", program))
    return program


def _start(program: Path, tmp_path: Path, out: int, err: int, **env: str) -> subprocess.Popen:
    full = {k: v for k, v in os.environ.items() if k != "DAGC_PROGRESS"}
    full.update(DAGC_TEST_GO=str(tmp_path / "go"), COLUMNS="100", TERM="xterm-256color", **env)
    return subprocess.Popen([sys.executable, str(program)], cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=out,
                            stderr=err, env=full)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux pseudo-terminal")
def test_a_terminal_shows_the_running_task_redrawn_while_it_runs(tmp_path: Path) -> None:
    import pty

    program = _program(tmp_path)
    master, slave = pty.openpty()
    proc = _start(program, tmp_path, slave, slave)
    os.close(slave)
    reader = _Reader(master)
    try:
        running = re.compile(r"wait_for_go\s+(\d+\.\d)s")
        # two different elapsed times drawn for the task while it is still waiting: redrawn as it runs
        text = reader.wait_for(lambda t: len(set(running.findall(_plain(t)))) >= 2, "redraw of the running task")
        assert "0/2 tasks" in _plain(text) and "\x1b[" in text
        assert "epoch 1 of 2 done" in text  # printed above the display, while it is up
        (tmp_path / "go").touch()
        assert proc.wait(timeout=DEADLINE_S) == 0
        text = _plain(reader.wait_for(lambda t: "2/2 tasks" in _plain(t) and "\n4" in _plain(t).replace("\r", ""),
                                      "end of the run"))
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.thread.join(timeout=10)
        os.close(master)
    assert "epoch 2 of 2 done" in text


def test_a_pipe_gets_plain_lines_and_no_escape_codes(tmp_path: Path) -> None:
    program = _program(tmp_path)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    proc = _start(program, tmp_path, out_w, err_w, DAGC_PROGRESS_INTERVAL="0.2")
    os.close(out_w)
    os.close(err_w)
    out, err = _Reader(out_r), _Reader(err_r)
    try:
        err.wait_for(lambda t: "running: wait_for_go (" in t, "plain line naming the running task")
        (tmp_path / "go").touch()
        assert proc.wait(timeout=DEADLINE_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        out.thread.join(timeout=10)
        err.thread.join(timeout=10)
        os.close(out_r)
        os.close(err_r)
    assert out.text() == "epoch 1 of 2 done\nepoch 2 of 2 done\n4\n"
    assert "\x1b" not in err.text() and "\r" not in err.text()
    lines = err.text().splitlines()
    assert lines and all(re.fullmatch(r"dagc: 0/2 tasks done after \S+; running: wait_for_go \(\S+\)", line)
                         for line in lines), lines


def test_a_short_run_on_a_pipe_writes_nothing_and_the_plain_line_says_what_runs() -> None:
    stream = io.StringIO()
    progress = Progress(3, stream=stream)
    assert progress.mode == "plain"
    progress.begin("load")
    progress.advance(name="load")
    progress.begin("train")
    assert re.fullmatch(r"dagc: 1/3 tasks done after \S+; running: train \(\S+\)", progress.line())
    progress.close()
    assert stream.getvalue() == ""  # no heartbeat came due: nothing written


@pytest.mark.parametrize(("seconds", "text"), [(4.25, "4.2s"), (52.9, "52s"), (185, "3m05s"), (7380, "2h03m")])
def test_elapsed_times_read_as_people_write_them(seconds: float, text: str) -> None:
    assert format_elapsed(seconds) == text


def test_a_driver_follows_the_starts_its_workers_record(tmp_path) -> None:
    """A Ray driver names the running tasks from the event log its workers append to: each call gives the new
    records of its run, a line still being written waits for the next call."""
    from dagc.runtime.events import EventLog, EventTail

    path = tmp_path / "events.jsonl"
    tail = EventTail(path, "run-1")
    assert tail.new() == []  # no log yet
    EventLog(path, "run-1").write("start", task="a")
    EventLog(path, "run-2").write("start", task="other")
    assert [(r["event"], r["task"]) for r in tail.new()] == [("start", "a")]
    with path.open("ab") as f:
        f.write(b'{"event": "start", "run": "run-1", "ta')
    assert tail.new() == []
    with path.open("ab") as f:
        f.write(b'sk": "b"}\n')
    assert [r["task"] for r in tail.new()] == ["b"] and tail.new() == []


TWO_RANKS = """
import os
import time

import dagc


def _wait(name: str) -> None:
    while not os.path.exists(os.path.join(os.environ["DAGC_TEST_DIR"], "go")):
        time.sleep(0.05)


@dagc.task(cost="10s")
def left(n: int) -> int:
    _wait("left")
    return n + 1


@dagc.task(cost="10s")
def right(n: int) -> int:
    _wait("right")
    return n + 2


@dagc.pipeline
def p(n: int = 1):
    return left(n), right(n)
"""


def test_a_torch_run_shows_the_tasks_every_rank_runs(tmp_path: Path) -> None:
    """Rank 0 draws the display; the task rank 1 runs is named there while it runs, beside rank 0's own."""
    from dagc.cluster import parse_cluster_spec

    (tmp_path / "job.py").write_text(textwrap.dedent(TWO_RANKS), encoding="utf-8")
    graph = compile_file(tmp_path / "job.py", backend="torch", cluster=parse_cluster_spec("2"))
    placed = {n.name: n.devices for n in graph.nodes if n.op == "task"}
    assert placed["left"] != placed["right"], placed  # one task on each rank
    program = tmp_path / "prog_torch.py"
    program.write_text(emit(graph, "torch", program))
    err_r, err_w = os.pipe()
    env = {k: v for k, v in os.environ.items() if k != "DAGC_PROGRESS"}
    env.update(DAGC_TEST_DIR=str(tmp_path), DAGC_PROGRESS_INTERVAL="0.2")
    proc = subprocess.Popen([sys.executable, str(program), "--nproc", "2"], cwd=tmp_path, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=err_w, env=env)
    os.close(err_w)
    err = _Reader(err_r)
    try:
        both = re.compile(r"running: (left|right) \(\S+\), (left|right) \(\S+\)")
        err.wait_for(lambda t: any(len(set(m)) == 2 for m in both.findall(t)), "line naming both ranks' tasks")
        (tmp_path / "go").touch()
        out, _ = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
        err.thread.join(timeout=10)
        os.close(err_r)
    assert proc.returncode == 0, err.text()[-3000:]
    assert out.decode().strip().splitlines()[-1] == "(2, 3)"
