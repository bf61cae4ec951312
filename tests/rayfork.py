"""Ray workers forked from a process that has already imported torch, for the tests' clusters.

A Ray worker is a new `python default_worker.py ...` per job: it imports Ray (0.6 s of CPU) and, at its
first task, the pipeline's modules and torch (1.8 s). The emitted programs the tests run start three to
five such workers each, so the workers' imports were the largest share of the suite's CPU time.

    with forked_workers():
        cluster = Cluster(...)        # and cluster.add_node(...)

makes the raylets that start inside the block launch their Python workers through a small launcher
(written here, used as the cluster's `sys.executable`). The launcher hands its argv, environment,
working directory and standard streams to a server that has imported torch and numpy; the server forks,
and the child sets itself up as a new interpreter would (argv, `sys.path` with the `PYTHONPATH` the
raylet gives, environment, streams, random seeds, torch's thread count from `OMP_NUM_THREADS`) and runs
Ray's own `setup_worker.py` / `default_worker.py` as `__main__` (the exec at the end of the first becomes
a run of the second in the same process). Everything else is Ray's: the raylet, the worker's
registration and its task loop. Ray itself is not preloaded: importing its extension reads the worker's
own environment (its job, its raylet) into Ray's configuration, so each worker imports it; nor are the
pipeline's modules, which each worker imports as a fresh one does.

Measured on 2 cores, one program at a time against a 3-CPU cluster: quickstart 7.5 -> 4.0 s of CPU
(wall 6.2 -> 3.6 s), mnist 9.0 -> 5.0 s, sgd_allreduce 13.1 -> 7.0 s.

The launcher stays alive while its worker runs and forwards signals to it; the worker ends itself when its
launcher is gone, and the launcher exits with the worker's status. Any other command (Ray's agents), or a
launch while the server is down, is passed to the real interpreter with `exec`, unchanged. Set
`DAGC_TEST_RAY_SUBPROCESS=1` to run Ray's workers as Ray starts them.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["forked_workers"]

# Not Ray: importing its extension reads the worker's environment (its job, its raylet) into its configuration.
# But what Ray imports from other packages, and dagc's runtime short of its Ray modules, are preloaded.
PRELOAD = ["torch", "torch.distributed", "numpy", "google.protobuf", "grpc", "requests", "jsonschema", "yaml",
           "filelock", "msgpack", "attr", "packaging", "pdb", "decimal", "tracemalloc",
           "dagc", "dagc.runtime.executor", "dagc.runtime.store", "dagc.runtime.events", "dagc.runtime.program",
           "dagc.runtime.console", "dagc.runtime.context", "dagc.runtime.effectcheck", "dagc.runtime.threads"]

# the launcher: started by a raylet as `LAUNCHER default_worker.py ARGS...`
LAUNCHER = r'''#!{python} -IS
import json, os, signal, socket, sys

REAL, SERVER = {python!r}, {server!r}
args = sys.argv[1:]
if not (args and args[0].endswith(("default_worker.py", "setup_worker.py"))):
    os.execv(REAL, [REAL, *args])
try:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(SERVER)
except OSError:
    os.execv(REAL, [REAL, *args])
request = (json.dumps({{"argv": args, "env": dict(os.environ), "cwd": os.getcwd()}}) + "\n").encode()
sent = socket.send_fds(sock, [request], [0, 1, 2])
sock.sendall(request[sent:])
replies = sock.makefile("rb")
pid = json.loads(replies.readline())["pid"]
for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(number, lambda n, _frame: os.kill(pid, n))
line = replies.readline()
status = json.loads(line)["status"] if line else 1
if status < 0:
    signal.signal(-status, signal.SIG_DFL)
    os.kill(os.getpid(), -status)
os._exit(status)
'''

# the server: imports PRELOAD, forks a worker per connection, reaps them and tells each launcher the status
SERVER = r'''
import importlib, io, json, os, runpy, select, shlex, signal, socket, sys, threading, traceback

base_path = sys.path[1:]
for name in json.loads(sys.argv[2]):
    importlib.import_module(name)
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(sys.argv[1] + ".tmp")
listener.listen(128)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])  # launchers connect once the preloads are in
launchers = {}  # worker pid -> its launcher's connection


def serve():
    while True:
        if select.select([listener], [], [], 0.05)[0]:
            conn, _ = listener.accept()
            try:
                start(conn)
            except Exception:
                traceback.print_exc()
                conn.close()
        reap()


def start(conn):
    data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    while not data.endswith(b"\n"):
        chunk = conn.recv(1 << 20)
        if not chunk:
            raise EOFError("the launcher left before its request was complete")
        data += chunk
    request = json.loads(data)
    pid = os.fork()
    if pid == 0:
        listener.close()
        for other in launchers.values():
            other.close()
        worker(request, fds, conn)
    for fd in fds:
        os.close(fd)
    conn.sendall((json.dumps({"pid": pid}) + "\n").encode())
    launchers[pid] = conn


def reap():
    while launchers:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = launchers.pop(pid, None)
        if conn is not None:
            try:
                conn.sendall((json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n").encode())
            except OSError:
                pass
            conn.close()


def worker(request, fds, conn):
    code = 1
    try:
        setup(request, fds, conn)
        code = run(request["argv"])
    finally:
        try:
            threading._shutdown()
        except Exception:
            pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def setup(request, fds, conn):
    os.setpgid(0, 0)
    for fd, received in zip((0, 1, 2), fds):
        os.dup2(received, fd)
        os.close(received)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8",
                                  line_buffering=True, write_through=unbuffered)
    sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True, write_through=True)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [os.path.dirname(os.path.realpath(request["argv"][0])), *extra, *base_path]
    import random
    random.seed()
    import numpy
    numpy.random.seed()
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        import torch
        torch.set_num_threads(int(threads))  # a new interpreter reads it when it imports torch
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # the launcher is the process the raylet started: when it is gone, so is this worker
    threading.Thread(target=follow, args=(conn,), daemon=True).start()


def follow(conn):
    try:
        while conn.recv(1 << 10):
            pass
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGKILL)


class Exec(Exception):
    """Ray's worker setup would now exec `python default_worker.py ARGS`: this process runs it instead."""


def exec_worker(real):
    def execvp(file, args):
        if file == "bash" and len(args) == 3 and args[1] == "-c":
            words = shlex.split(args[2])
            if (len(words) > 2 and words[0] == "exec" and words[2].endswith("default_worker.py")
                    and os.path.realpath(words[1]) == os.path.realpath(sys.executable)):
                raise Exec(words[2:])
        real(file, args)
    return execvp


def run(argv):
    real = os.execvp
    os.execvp = exec_worker(real)  # a worker behind a runtime environment starts in setup_worker.py
    try:
        while True:
            sys.argv = list(argv)
            try:
                runpy.run_path(argv[0], run_name="__main__")
            except Exec as exc:
                os.execvp = real
                argv = exc.args[0]
                continue
            break
    except SystemExit as exc:
        if exc.code is None:
            return 0
        return exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


serve()
'''


class _Server:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="dagc-rayfork-"))
        self.socket = self.dir / "server"
        self.launcher = self.dir / "python"
        self.launcher.write_text(LAUNCHER.format(python=sys.executable, server=str(self.socket)))
        self.launcher.chmod(0o755)
        self.log = open(self.dir / "server.log", "wb")
        self.process = subprocess.Popen([sys.executable, "-c", SERVER, str(self.socket), json.dumps(PRELOAD)],
                                        stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                        start_new_session=True)
        atexit.register(self.stop)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


_servers: list[_Server] = []


@contextlib.contextmanager
def forked_workers() -> Iterator[None]:
    """Raylets started in this block launch their Python workers forked from the preloaded server."""
    if os.environ.get("DAGC_TEST_RAY_SUBPROCESS"):  # to compare with Ray's own worker processes
        yield
        return
    if not _servers or _servers[0].process.poll() is not None:
        _servers[:] = [_Server()]
    real = sys.executable
    sys.executable = str(_servers[0].launcher)
    try:
        yield
    finally:
        sys.executable = real
