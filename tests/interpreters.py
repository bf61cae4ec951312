"""Fresh-interpreter runs without paying for the interpreter's start each time.

`run_python(args, ...)` stands for `subprocess.run([sys.executable, *args], ...)`: `args` is `[script, ...]`,
`["-c", code, ...]` or `["-m", module, ...]`. The process is forked from a server that has already imported
torch, numpy and dagc (its start costs 1-2 s a run otherwise), then set up as `python` would set up a new
one: its own argv, `sys.path`, working directory, environment, standard streams, `__main__`, random seeds;
on exit it joins its threads, runs its `atexit` functions and flushes its streams.

What a forked process cannot redo, it does not pretend to: a call whose environment changes how Python or
those libraries start (PYTHON*, OMP_*, MKL_*, TORCH_*, RAY_*, ...), or that asks for a run of something
other than this interpreter, runs in a real subprocess.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["run_python"]

PRELOAD = ["torch", "numpy", "dagc", "dagc.backends", "dagc.runtime.executor", "dagc.runtime.local",
           "dagc.runtime.program", "dagc.runtime.store", "dagc.runtime.events"]
# an emitted Ray program's driver imports Ray (0.4 s): imported, Ray starts no thread, so a fork of it is safe
if importlib.util.find_spec("ray") is not None:
    PRELOAD += ["ray", "dagc.runtime.ray"]
# variables read when Python or a preloaded library starts: a run that sets them needs a real process
STARTUP_PREFIXES = ("PYTHON", "OMP_", "MKL_", "OPENBLAS_", "TORCH_", "CUDA", "KMP_", "GOMP_", "RAY_", "LD_",
                    "MALLOC", "NUMEXPR_")

# the server: imports PRELOAD, then forks one child per request and says its pid and exit status
SERVER = r'''
import atexit, importlib, io, json, os, runpy, socket, sys, threading, traceback


def serve():
    base_path = sys.path[1:]
    for name in json.loads(sys.argv[1]):
        importlib.import_module(name)
    sock = socket.socket(fileno=int(sys.argv[2]))
    for line in sock.makefile("r"):
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            sock.close()
            child(request, base_path)
        sock.sendall((json.dumps({"pid": pid}) + "\n").encode())
        _, status = os.waitpid(pid, 0)
        sock.sendall((json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n").encode())


def child(request, base_path):
    code = 1
    try:
        _setup(request, base_path)
        code = _run(request["args"])
    finally:
        try:
            _finish()
        finally:
            os._exit(code)


def _setup(request, base_path):
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, mode in ((0, request["stdin"], os.O_RDONLY), (1, request["stdout"], os.O_WRONLY),
                           (2, request["stderr"], os.O_WRONLY)):
        target = os.open(path, mode)
        os.dup2(target, fd)
        os.close(target)
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8")
    sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    args = request["args"]
    first = "" if args[0] in ("-c", "-m") else os.path.dirname(os.path.realpath(args[0]))
    sys.path[:] = [first if args[0] != "-m" else os.getcwd(), *extra, *base_path]
    import random
    random.seed()  # a new interpreter draws from a fresh seed
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()


def _run(args):
    try:
        if args[0] == "-c":
            sys.argv = ["-c", *args[2:]]
            main = type(sys)("__main__")
            main.__builtins__ = __builtins__
            sys.modules["__main__"] = main
            exec(compile(args[1], "<string>", "exec"), main.__dict__)
        elif args[0] == "-m":
            sys.argv = [args[1], *args[2:]]
            runpy._run_module_as_main(args[1], alter_argv=True)
        else:
            sys.argv = list(args)
            runpy.run_path(args[0], run_name="__main__")
    except SystemExit as exc:
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def _finish():
    try:
        threading._shutdown()
    except Exception:
        pass
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


serve()
'''


class _Server:
    """The process runs are forked from (started on first use, ended with pytest)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.dir = tempfile.mkdtemp(prefix="dagc-interpreters-")
        atexit.register(shutil.rmtree, self.dir, True)
        ours, theirs = socket.socketpair()
        self.process = subprocess.Popen([sys.executable, "-c", SERVER, json.dumps(PRELOAD), str(theirs.fileno())],
                                        pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)
        theirs.close()
        self.sock = ours
        self.buffer = b""
        self.base_env = dict(os.environ)

    def run(self, request: dict[str, Any], timeout: float | None) -> int:
        with self.lock:
            self.sock.sendall((json.dumps(request) + "\n").encode())
            pid = json.loads(self._line(None))["pid"]
            try:
                line = self._line(timeout)
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                self._line(None)  # the server reaps it
                raise
            return int(json.loads(line)["status"])

    def _line(self, timeout: float | None) -> str:
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self.sock], [], [], left)[0]:
                raise TimeoutError
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise RuntimeError(f"the interpreter server ended (exit status {self.process.poll()})")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode()


_server: list[_Server] = []


def _startup_sensitive(env: dict[str, str] | None) -> bool:
    if env is None:
        return False
    base = os.environ
    changed = {k for k in set(env) | set(base) if env.get(k) != base.get(k)}
    return any(k.startswith(STARTUP_PREFIXES) for k in changed if k != "PYTHONPATH")


def run_python(args: list[str], *, cwd: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None,
               timeout: float | None = None, capture_output: bool = False, text: bool = False,
               check: bool = False, input: str | bytes | None = None) -> subprocess.CompletedProcess:
    """`subprocess.run([sys.executable, *args], ...)`, forked from the preloaded server (see the module)."""
    command = [sys.executable, *args]
    if _startup_sensitive(env) or os.environ.get("DAGC_TEST_SUBPROCESS"):
        return subprocess.run(command, cwd=cwd, env=env, timeout=timeout, capture_output=capture_output,
                              text=text, check=check, input=input)
    if not _server:
        _server.append(_Server())
    server = _server[0]
    with tempfile.TemporaryDirectory(prefix="run-", dir=server.dir) as tmp:
        paths = {name: os.path.join(tmp, name) for name in ("stdin", "stdout", "stderr")}
        data = input.encode() if isinstance(input, str) else (input or b"")
        Path(paths["stdin"]).write_bytes(data)
        for name in ("stdout", "stderr"):
            Path(paths[name]).touch()
        request = {"args": [str(a) for a in args], "cwd": str(Path(cwd or os.getcwd()).resolve()),
                   "env": dict(env if env is not None else os.environ), **paths}
        try:
            code = server.run(request, timeout)
        except TimeoutError:
            raise subprocess.TimeoutExpired(command, timeout or 0) from None
        except (RuntimeError, OSError):  # the server is gone: the next run starts a new one
            _server.clear()
            raise
        out: Any = Path(paths["stdout"]).read_bytes()
        err: Any = Path(paths["stderr"]).read_bytes()
        if not capture_output:  # as subprocess does: onto the caller's own streams
            os.write(1, out)
            os.write(2, err)
            out = err = None
        elif text:
            out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    result = subprocess.CompletedProcess(command, code, out, err)
    if check:
        result.check_returncode()
    return result
