"""What every emitted program does the same way: its run options, its run directory, and the
interpreter state its user code sees.

    python PROGRAM.py [--run-dir DIR | --resume RUN_DIR] [--cache DIR] [--result PATH] -- ARGS...

`ARGS` (everything after `--`) is what the pipeline's own script would see in `sys.argv[1:]`:
user modules are imported with `sys.argv == [SCRIPT, *ARGS]`, as in `python SCRIPT ARGS`, on the
driver, on every Ray worker and on every torch rank, in the working directory the program started
in. Default run directories go under `.dagc/runs/` in the working directory; `.dagc/` holds a
`.gitignore` of `*`, so it never shows up in the user's version control.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
from collections.abc import Sequence
from pathlib import Path

from dagc.runtime.store import Cache, RunStore, StorageError

__all__ = ["ResultError", "check_run_options", "split_argv", "prepare_interpreter", "default_run_dir", "add_run_options", "open_run", "open_cache",
           "unusable_ray_dirs",
           "run_directory", "store_result", "deliver_result", "DAGC_DIR"]

DAGC_DIR = ".dagc"


def split_argv(argv: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """(the program's own arguments, the user script's arguments after `--`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" in args:
        cut = args.index("--")
        return args[:cut], args[cut + 1:]
    return args, []


# what torchrun's agent sets for each worker (torch.distributed.elastic.agent.server.local_elastic_agent,
# `worker_env`, and LOCAL_RANK): the launcher's, which `python script.py` never sees
LAUNCHER_VARIABLES = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
    "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE",
)


def prepare_interpreter(script: str, user_args: Sequence[str], cwd: str | os.PathLike[str] | None = None) -> None:
    """Make this process look like `python SCRIPT ARGS` to user code: `sys.argv` and, when given,
    the working directory."""
    sys.argv = [str(script), *user_args]
    # on another machine of a cluster the driver's directory may not exist: stay where the worker is
    if cwd is not None and os.path.abspath(cwd) != os.getcwd() and os.path.isdir(cwd):
        os.chdir(cwd)


def dagc_dir(base: str | os.PathLike[str] | None = None) -> Path:
    """`.dagc/` under `base` (the working directory), created with a `.gitignore` that ignores it."""
    root = Path(base or ".") / DAGC_DIR
    root.mkdir(parents=True, exist_ok=True)
    ignore = root / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# written by dagc: run directories and caches, never committed\n*\n", encoding="utf-8")
    return root


def default_run_dir(pipeline: str, run_id: str, base: str | os.PathLike[str] | None = None) -> Path:
    """`.dagc/runs/PIPELINE-RUN_ID` in `base` (default: the working directory)."""
    return dagc_dir(base) / "runs" / f"{pipeline}-{run_id}"


def add_run_options(parser: argparse.ArgumentParser, source_root: Path) -> None:
    """The options every emitted program takes."""
    parser.add_argument("--run-dir", type=Path, metavar="DIR",
                        help="keep task outputs (by fingerprint) and the event log in DIR")
    parser.add_argument("--resume", type=Path, metavar="RUN_DIR",
                        help="finish an earlier run: reuse its stored outputs, run only what did not finish "
                             "(or what changed since)")
    parser.add_argument("--cache", type=Path, metavar="DIR",
                        help="reuse task outputs from DIR and add new ones to it (shared across runs and "
                             "pipelines; tasks with cache=False are always run)")
    parser.add_argument("--result", type=Path, metavar="PATH",
                        help="write the pipeline's return value to PATH (pickle)")
    parser.add_argument("--source-root", type=Path, default=source_root, metavar="DIR",
                        help="directory of the pipeline's source files (default: %(default)s)")
    parser.add_argument("--trust-shared", action="store_true",
                        help="use a run directory or cache that other users may write (dagc still loads only "
                             "what it sealed, but others could remove or replace outputs)")
    parser.add_argument("--priority", type=int, metavar="N",
                        help="this run's priority on a shared Ray cluster: higher runs first, and may preempt "
                             "tasks of lower ones (default: the pipeline's @dagc.pipeline(priority=N), else 0)")
    parser.add_argument("--store-all", action="store_true",
                        help="store every task output; by default the local program does not store a large "
                             "output that its task computes the same way again in less time than storing it "
                             "would take, and computes it again when it is needed (Ray and torch programs "
                             "store every output)")
    parser.add_argument("--check-effects", action=argparse.BooleanOptionalAction, default=None,
                        help="stop at a task that changes more than dagc assumed it may (its arguments, the "
                             "global random generators, files, module globals): where Ray or torch would then "
                             "differ from the plain run; default: on")
    parser.add_argument("--cost-store", type=Path, metavar="DIR",
                        help="where each finished task's time, CPU time, output size and memory are recorded, "
                             "for the next compile to plan with (default: $DAGC_COST_STORE, else .dagc/costs)")
    parser.add_argument("--threads", choices=("plain", "share"), default="plain",
                        help="the threads a task that declares no cpus= computes on: `plain`, as many as under "
                             "`python SCRIPT` (float results equal the plain run's to the last bit); `share`, at "
                             "most its device's share of the machine's cores where several devices share one "
                             "(faster when they all compute on the CPU, but reductions may differ in the last "
                             "bits); default: %(default)s")


def unusable_ray_dirs() -> str | None:
    """Why a Ray of the program's own could not start (None: it can): `$TMPDIR`, where it keeps its session
    (Python falls back to another directory, Ray does not), or the home directory, where it keeps its token
    (`~/.ray`), cannot hold files. One line naming the variable and the fix."""
    named = os.environ.get("TMPDIR")
    why = _cannot_hold_files(Path(named)) if named else None
    if why is not None:
        return (f"TMPDIR={named} cannot hold temporary files ({why}); set TMPDIR to a writable directory, or unset "
                "it to use the system's")
    temp = Path(named) if named else Path("/tmp")
    why = _too_full(temp)
    if why is not None:
        where = f"TMPDIR={named}" if named else f"{temp}, where Ray keeps its session,"
        return (f"{where} is on a disk too full for Ray ({why}); free some space there, or set TMPDIR to a "
                "directory on a disk with room")
    ray_dir = Path.home() / ".ray"
    checked = ray_dir if ray_dir.exists() else ray_dir.parent
    why = _cannot_hold_files(checked)
    if why is not None:
        return (f"HOME={ray_dir.parent} cannot hold Ray's token, kept in {ray_dir} ({checked}: {why}); set HOME to "
                "a writable directory")
    return None


# Ray refuses to create objects on a disk over 95% full (its local_fs_capacity_threshold), and its session (logs,
# sockets, spilled objects) needs some room of its own
RAY_DISK_FULL_FRACTION = 0.95
RAY_MIN_FREE_BYTES = 64 << 20


def _too_full(path: Path) -> str | None:
    """Why Ray could not keep its session on `path`'s disk (None: it can, or the disk cannot be asked)."""
    import shutil

    from dagc.units import format_size

    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return None
    used = 1 - usage.free / usage.total if usage.total else 0.0
    if usage.free < RAY_MIN_FREE_BYTES or used > RAY_DISK_FULL_FRACTION:
        return f"{format_size(usage.free)} free of {format_size(usage.total)}, {used:.0%} used"
    return None


def _cannot_hold_files(path: Path) -> str | None:
    if not path.exists():
        return "it does not exist"
    if not path.is_dir():
        return "it is not a directory"
    return None if os.access(path, os.W_OK | os.X_OK) else "it is not writable"


def priority_note(priority: int | None, where: str) -> None:
    """Say once that a priority orders nothing where the run has its resources to itself."""
    if priority:
        print(f"dagc: priority {priority} orders nothing here: {where}; priorities order the tasks of "
              "programs sharing a Ray cluster (a Ray program run with --address)", file=sys.stderr)


def shared_with_others(path: Path) -> str | None:
    """Why `path` (an existing run directory or cache) is not this user's alone; None when it is."""
    import stat

    try:
        info = path.stat()
    except OSError:
        return None  # made by this run: its own
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return f"{path} belongs to another user (uid {info.st_uid})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not info.st_mode & stat.S_ISVTX:
        return f"{path} may be written by other users (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def _refuse_shared(parser: argparse.ArgumentParser, args: argparse.Namespace, path: Path | None) -> None:
    if path is None or getattr(args, "trust_shared", False):
        return
    why = shared_with_others(path)
    if why is not None:
        parser.exit(2, f"error: {why}; make it yours alone (chmod go-w {path}) or pass --trust-shared to use it "
                       "anyway\n")


def open_run(parser: argparse.ArgumentParser, args: argparse.Namespace, pipeline: str, run_id: str, *,
             always: bool = False) -> RunStore | None:
    """The run directory the options ask for: `--resume`'s, `--run-dir`, or (with `always`) a new
    one under `.dagc/runs/`; None when the run keeps no outputs."""
    if args.resume is not None and args.run_dir is not None:
        parser.error("--resume RUN_DIR already names the run directory; drop --run-dir")
    store: RunStore | None = None
    _refuse_shared(parser, args, args.resume if args.resume is not None else args.run_dir)
    if args.resume is not None:
        try:
            store = RunStore.open(args.resume)
        except (OSError, ValueError) as exc:
            parser.error(f"--resume: {exc}")
    else:
        try:
            if args.run_dir is None and always:  # the directories programs make themselves are bounded
                from dagc.runtime.runs import bound_default_runs

                bound_default_runs(dagc_dir() / "runs")
            where = args.run_dir if args.run_dir is not None else default_run_dir(pipeline, run_id) if always else None
            if where is not None:
                store = RunStore(where, pipeline)
        except StorageError as exc:  # (one line naming its path already: the store key's, say)
            if exc.filename is not None and exc.message.startswith("cannot write"):
                parser.exit(2, f"error: cannot use {exc.filename} for the run directory: {exc.strerror or exc}; "
                               "give a writable --run-dir\n")
            parser.exit(2, f"error: {exc}\n")
        except OSError as exc:
            parser.exit(2, f"error: cannot use {exc.filename or args.run_dir} for the run directory: "
                           f"{exc.strerror or exc}; give a writable --run-dir\n")
    if store is not None:
        try:
            busy = store.lock(run_id)
        except StorageError as exc:
            parser.exit(2, f"error: {exc}\n")
        if busy is not None:
            parser.exit(2, f"error: {busy}\n")
    return store


# `dagc run` asks the local program to keep a run directory, as Ray and torch programs always do (under
# `.dagc/runs/`, bounded like theirs), so that a failed run's traceback and outputs are kept for --resume
KEEP_RUN_VARIABLE = "DAGC_KEEP_RUN_DIR"
INTERRUPTED = "interrupted (Ctrl-C): the tasks still running were stopped"


def _foreign(filename: str, program: str) -> bool:
    """A frame of dagc's own code, the emitted program or an engine (Ray, torch.distributed)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the dagc package
    path = os.path.abspath(filename)
    engines = (os.sep + os.path.join("ray", ""), os.sep + os.path.join("torch", "distributed", ""))
    return path.startswith(here + os.sep) or path == program or any(e in path for e in engines)


def user_frames(text: str, program: str = "") -> str:
    """A traceback as a worker recorded it (the text of a `failure` event), with only the frames of the user's
    code kept; "" when it has none."""
    lines = text.splitlines(keepends=True)
    frames: list[list[str]] = []
    tail: list[str] = []
    for line in lines:
        if line.startswith('  File "'):
            frames.append([line])
        elif frames and line.startswith("    ") and not tail:
            frames[-1].append(line)
        elif frames and not line.startswith("Traceback"):
            tail.append(line)
    kept = [f for f in frames if not _foreign(f[0].split('"')[1], program)]
    if not kept:
        return ""
    return "".join(["Traceback (most recent call last, the user's code only):\n", *(ln for f in kept for ln in f),
                    *tail])


def user_traceback(error: BaseException | None) -> str:
    """The frames of `error`'s traceback in the user's code: dagc's own, the emitted program's and the engines'
    (Ray, torch.distributed) trimmed away; "" when none is left (or the error crossed a process)."""
    import traceback

    if error is None or error.__traceback__ is None or isinstance(error, (SystemExit, KeyboardInterrupt)):
        return ""  # (`sys.exit(...)` in a task: the line that names it says all)
    main = getattr(sys.modules.get("__main__"), "__file__", None)  # the emitted program (sys.argv[0] is the script's)
    program = os.path.abspath(main) if main else ""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not _foreign(f.filename, program)]
    if not frames:
        return ""
    lines = ["Traceback (most recent call last, the user's code only):\n", *traceback.format_list(frames),
             *traceback.format_exception_only(type(error), error)]
    return "".join(lines)


def open_cache(args: argparse.Namespace, parser: argparse.ArgumentParser | None = None) -> Cache | None:
    if getattr(args, "cache", None) is None:
        return None
    if parser is not None:
        _refuse_shared(parser, args, args.cache)
    return Cache(args.cache)


def check_run_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse (exit 2, with the usage) run-directory options that cannot work: checked where the processes open
    the run directory, and first by a launcher about to start them, so that it is said once."""
    if args.resume is not None and args.run_dir is not None:
        parser.error("--resume RUN_DIR already names the run directory; drop --run-dir")
    _refuse_shared(parser, args, args.resume if args.resume is not None else args.run_dir)
    if args.cache is not None:
        _refuse_shared(parser, args, args.cache)
    if args.resume is not None and not (args.resume / "run.json").is_file():
        parser.error(f"--resume: {args.resume} is not a dagc run directory (no run.json)")


def run_directory(parser: argparse.ArgumentParser, args: argparse.Namespace, pipeline: str, run_id: str | None, *,
                  restarts: bool = False) -> Path | None:
    """The run directory of a program whose processes open it themselves (torch ranks): `--resume`'s,
    `--run-dir`, or, when the launcher may restart the processes, `.dagc/runs/PIPELINE-RUN_ID`
    under a run id every restart shares."""
    check_run_options(parser, args)
    if args.resume is not None:
        return Path(args.resume)
    if args.run_dir is not None:
        return Path(args.run_dir)
    if restarts or os.environ.get(KEEP_RUN_VARIABLE):  # (`dagc run` keeps one, as for the other backends)
        return default_run_dir(pipeline, run_id or "run")
    return None


def store_result(store: RunStore | None, result: object) -> int | None:
    """Keep the pipeline's result in the run directory when it pickles; its size in bytes, else None
    (a result that cannot pickle is still returned, printed or written by the program itself)."""
    if store is None:
        return None
    from dagc.runtime.executor import NOT_STORABLE

    try:
        return store.save_result(result)
    except NOT_STORABLE:
        return None


class ResultError(Exception):
    """The pipeline's result cannot be delivered to `--result PATH`; the message says why and what to do."""


def deliver_result(result: object, path: Path | None) -> None:
    """The pipeline's return value: pickled to `--result PATH`, else printed as its repr."""
    if path is None:
        print(repr(result))
        return
    from dagc.runtime.executor import NOT_STORABLE, unpicklable_type
    from dagc.runtime.store import atomic_write

    try:
        data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    except NOT_STORABLE as exc:
        raise ResultError(f"the pipeline's result holds {unpicklable_type(result)}, which cannot be pickled "
                          f"({type(exc).__name__}: {exc}), so it cannot be written to {path}; return picklable "
                          "values, or run without --result to have it printed") from exc
    try:
        atomic_write(path, data)  # mode 0600: the owner's only
    except OSError as exc:
        raise ResultError(f"cannot write the result to {path}: {exc.strerror or exc}; give a writable "
                          "--result path") from exc
