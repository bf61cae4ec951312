"""How a torch.distributed program's processes start and end: `launch_main` starts the program again under
torchrun when it is run with `python PROGRAM.py`; `take_launcher_environment` hides torchrun's variables from
user code; `hand_over` says once why the run failed (the launcher prints what the first rank to fail
said, last). Nothing here imports torch at import time."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from dagc.runtime.program import LAUNCHER_VARIABLES
from dagc.runtime.threads import passive_waiting, plain_threads, set_threads

__all__ = ["launch_main", "take_launcher_environment", "hand_over", "another_rank_failed", "FAILURE_FILE",
           "PLAIN_THREADS_VARIABLE", "stop_with_launcher"]

# how often a rank looks whether its launcher is still there: a rank outliving it stops within about this
LAUNCHER_CHECK_S = 0.5


PLAIN_THREADS_VARIABLE = "DAGC_PLAIN_OMP_NUM_THREADS"  # OMP_NUM_THREADS before torchrun set it ("": unset)


def take_launcher_environment() -> dict[str, str]:
    """Remove the launcher's per-rank variables from `os.environ` and return them, before user code is
    imported: a module that reads `RANK` at import (nanoGPT's `ddp = int(os.environ.get("RANK", -1)) != -1`)
    must see what the plain run sees, and must not start a process group of its own. torch then computes
    on the threads the plain run starts with (torchrun sets OMP_NUM_THREADS=1; dagc.runtime.threads)."""
    launcher = {name: os.environ.pop(name) for name in LAUNCHER_VARIABLES if name in os.environ}
    plain = os.environ.pop(PLAIN_THREADS_VARIABLE, None)
    if plain is not None:  # started by launch_main: OMP_NUM_THREADS as it was before torchrun
        if plain:
            os.environ["OMP_NUM_THREADS"] = plain
        else:
            os.environ.pop("OMP_NUM_THREADS", None)
    set_threads(plain_threads(os.environ))
    return launcher


def stop_with_launcher(rank: str, interval: float = LAUNCHER_CHECK_S) -> threading.Thread:
    """End this rank when the launcher that started it (its parent: torchrun's agent) is gone, killed with
    `kill -9` say: an orphaned rank would otherwise go on until its task ends (holding the run directory's
    lock) and then die on the lost rendezvous store with a traceback. A thread watches the parent's pid; rank 0
    says it in one line, and every rank exits with status 1 (the kernel then releases the run directory's
    lock). Linux's PR_SET_PDEATHSIG is not used: it fires when the parent *thread* ends, not the process."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        if rank == "0":
            sys.stderr.write(f"dagc: the launcher of this run (pid {parent}) is gone; its ranks stop\n")
            sys.stderr.flush()
        os._exit(1)  # now, from this thread: the main thread may be deep inside a task

    thread = threading.Thread(target=watch, name="dagc-launcher-watch", daemon=True)
    thread.start()
    return thread


def launch_main(path: str, argv: Sequence[str], nproc: int, max_restarts: int = 0) -> int:
    """Start `path` under torchrun on this machine with `nproc` ranks (used when a program is run
    directly with `python PROGRAM.py`)."""
    import tempfile

    from torch.distributed.run import main as torchrun

    # the ranks run under torchrun: they need no --nproc/--max-restarts, and torchrun would take
    # `--nproc` for an abbreviation of its own options
    args = ["--standalone", f"--nproc-per-node={nproc}", f"--max-restarts={max_restarts}", path,
            *_without_launch_options(argv)]
    # the ranks restore OMP_NUM_THREADS as it is here (take_launcher_environment); set, it keeps torchrun
    # from setting it to 1 with a warning about it
    plain_omp = os.environ.get("OMP_NUM_THREADS")
    os.environ[PLAIN_THREADS_VARIABLE] = plain_omp or ""
    os.environ["OMP_NUM_THREADS"] = plain_omp or str(plain_threads(os.environ))
    plain_wait = os.environ.get("OMP_WAIT_POLICY")
    passive_waiting()  # nproc ranks on the plain run's threads share these cores (dagc.runtime.threads)
    # a rank whose task fails writes one line here; it is the last thing printed, whatever torchrun says
    # torchrun's log line for a rank that exited non-zero: the run says why itself, last (or prints torchrun's
    # report when no rank did)
    quiet = _ChildExit()
    for name in _ELASTIC_LOGGERS:
        logging.getLogger(name).addFilter(quiet)
    with tempfile.TemporaryDirectory(prefix="dagc-") as tmp:
        os.environ[FAILURE_FILE] = os.path.join(tmp, "failure")
        try:
            torchrun(args)
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        except KeyboardInterrupt:  # Ctrl-C here (the ranks got it too, and said it once)
            code = 130
        except Exception as exc:  # ChildFailedError: torchrun's report, said unless a rank said why it failed
            code = 1
            exits = {getattr(f, "exitcode", None) for f in getattr(exc, "failures", {}).values()}
            if type(exc).__name__ == "SignalException":  # Ctrl-C forwarded to the ranks, which said it
                code = 130
            elif 2 in exits and exits <= {2, -signal.SIGTERM}:  # a rank refused the run (it said why; the agent
                code = 2  # then stopped the others): the program's own status for it, as on local and Ray
            elif not Path(tmp, "failure").exists():
                sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
        finally:
            for name in _ELASTIC_LOGGERS:
                logging.getLogger(name).removeFilter(quiet)
            del os.environ[FAILURE_FILE]
            del os.environ[PLAIN_THREADS_VARIABLE]
            if plain_wait is None:
                os.environ.pop("OMP_WAIT_POLICY", None)
            if plain_omp is None:
                del os.environ["OMP_NUM_THREADS"]
            else:
                os.environ["OMP_NUM_THREADS"] = plain_omp
        failure = Path(tmp, "failure")
        if code and failure.exists():  # the failed task, the user's frames and the resume hint: the last lines
            sys.stderr.write(failure.read_text(encoding="utf-8"))
    return code


_ELASTIC_LOGGERS = ("torch.distributed.elastic.multiprocessing.api", "torch.distributed.elastic.agent.server.api")


class _ChildExit(logging.Filter):
    """torchrun's lines about ranks that exited non-zero or were stopped by Ctrl-C: the run says it itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(("failed (exitcode:", "Received ", "Sending process"))


def _without_launch_options(argv: Sequence[str]) -> list[str]:
    """`argv` without the options only the launching process reads (the script's own, after `--`, kept)."""
    out: list[str] = []
    items = list(argv)
    i = 0
    while i < len(items):
        item = items[i]
        if item == "--":
            out.extend(items[i:])
            break
        if item in ("--nproc", "--max-restarts"):
            i += 2
            continue
        if item.startswith(("--nproc=", "--max-restarts=")):
            i += 1
            continue
        out.append(item)
        i += 1
    return out


FAILURE_FILE = "DAGC_FAILURE_FILE"


def hand_over(text: str) -> None:
    """Say why the run failed: to the launcher that started this rank (`launch_main`), which prints what the
    first rank to fail said, last; else on this rank's stderr."""
    path = os.environ.get(FAILURE_FILE)
    if not path:
        sys.stderr.write(text)
        sys.stderr.flush()
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)  # the first failure wins
    except OSError:
        return
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def another_rank_failed(exc: BaseException) -> bool:
    """Whether `exc` is this rank's communication breaking because another rank stopped (its failure is said
    by that rank): the rank then ends without a traceback of its own."""
    import torch.distributed as dist

    if isinstance(exc, getattr(dist, "DistError", ())) or isinstance(exc, ConnectionError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and any(
        sign in text for sign in ("Connection reset by peer", "Connection closed by peer", "Broken pipe",
                                  "Socket Timeout", "Connection refused"))
