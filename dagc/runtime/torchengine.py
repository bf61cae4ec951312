"""How a torch.distributed program executes its tasks, for the one program lifecycle (dagc.runtime.lifecycle).

The emitted program holds its tables, one function per rank and `PLAN = TorchPlan(...)`; its `main` is
`torch_main(PIPELINE_SPEC, PLAN, argv, __file__)`. Run with `python PROGRAM.py`, it starts itself again under
torchrun with the compiled number of ranks (`--nproc`, `--max-restarts`); each rank then runs its function
through `dagc.runtime.distributed.Runner`, which opens the run directory (rank 0 locks it for every rank).
Only rank 0 says what the run says once (the code that changed, Ctrl-C, the result); a rank whose task fails
hands its report to the launcher, which prints what the first rank to fail said, last.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagc.runtime.executor import TaskFailed
from dagc.runtime.launcher import (
    another_rank_failed,
    hand_over,
    launch_main,
    stop_with_launcher,
    take_launcher_environment,
)
from dagc.runtime.lifecycle import FINISHED, Pipeline, Program, SaidElsewhere
from dagc.runtime.program import ResultError, check_run_options, priority_note, run_directory
from dagc.runtime.store import RunStore, StorageError

__all__ = ["TorchPlan", "Torch", "torch_main"]

PRIORITY_SAID = "DAGC_PRIORITY_SAID"  # said once: not again by the ranks the launcher starts


@dataclass(frozen=True)
class TorchPlan:
    """What the compiler decided for a torch program: its ranks, each rank's function, the messages and
    collectives between them (dagc.runtime.distributed)."""

    ranks: int
    programs: tuple[Callable[..., Any], ...]  # rank r runs programs[r](rt, modules)
    moves: Mapping[int, tuple] = field(default_factory=dict)
    collectives: Mapping[int, tuple] = field(default_factory=dict)
    compress: Mapping[int, str] = field(default_factory=dict)
    returns: tuple[str, ...] = ()
    stages: Mapping[str, tuple[int, ...]] = field(default_factory=dict)


class Torch:
    """The torch.distributed engine (see the module docstring)."""

    backend = "torch"
    failures: tuple[type[BaseException], ...] = ()
    announces = False

    def __init__(self, plan: TorchPlan) -> None:
        self.plan = plan
        self.launcher: dict[str, str] = {}

    def describe(self, pipeline: Pipeline) -> str:
        return (f"Run pipeline {pipeline.name!r} with torch.distributed ({self.plan.ranks} ranks). Arguments after "
                "`--` are the script's own.")

    def add_options(self, parser: argparse.ArgumentParser, run_options: bool) -> None:
        if not run_options:
            return
        parser.add_argument("--timeout", type=float, default=1800.0, metavar="SECONDS",
                            help="process group timeout: how long a rank waits for a lost peer (default: 1800)")
        parser.add_argument("--dist-backend", choices=("nccl", "gloo"),
                            help="torch.distributed backend (default: nccl with CUDA, else gloo)")
        parser.add_argument("--nproc", type=int, default=self.plan.ranks, metavar="N",
                            help="ranks to start when run without torchrun (default: %(default)s)")
        parser.add_argument("--max-restarts", type=int, default=0, metavar="K",
                            help="restarts allowed when run without torchrun (default: 0)")

    def begin(self, program: Program) -> int | None:
        args = program.args
        if os.environ.get("RANK", "0") == "0" and not os.environ.get(PRIORITY_SAID):
            priority_note(args.priority, "torch.distributed ranks have their devices to themselves")
            os.environ[PRIORITY_SAID] = "1"
        if "RANK" not in os.environ:
            if args.nproc > 1 or args.max_restarts > 0:
                check_run_options(program.parser, args)  # (refused here once, not by every rank)
                return launch_main(program.path, program.argv, args.nproc, args.max_restarts)
            os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
        # user code sees the plain run's environment: no RANK, WORLD_SIZE, MASTER_ADDR, ...
        self.launcher = take_launcher_environment()
        if "TORCHELASTIC_RUN_ID" in self.launcher:  # started by torchrun's agent: a rank never outlives it
            stop_with_launcher(self.launcher.get("RANK", "0"))
        program.speaks = self.launcher.get("RANK") == "0"
        return None

    def open_store(self, program: Program) -> RunStore | None:
        """None: the ranks open the run directory themselves, once their process group is up."""
        program.run_dir = run_directory(program.parser, program.args, program.pipeline.name,
                                        self.launcher.get("TORCHELASTIC_RUN_ID"),
                                        restarts=int(self.launcher.get("TORCHELASTIC_MAX_RESTARTS", "0")) > 0)
        return None

    def execute(self, program: Program) -> object:
        from dagc.runtime.distributed import Runner

        args, plan, pipeline = program.args, self.plan, program.pipeline
        rows = program.tasks
        reusing = program.resume or args.cache is not None
        runner = Runner(pipeline.name, rows, plan.moves, plan.returns, plan.ranks, run_dir=program.run_dir,
                        timeout=args.timeout, backend=args.dist_backend, stages=plan.stages,
                        collectives=plan.collectives, compress=plan.compress, cache=program.cache,
                        check=args.check_effects is not False, launcher=self.launcher, threads_mode=args.threads,
                        final_state=pipeline.final_state, code=pipeline.code, costs=program.costs(),
                        changed=program.changed if reusing else (), resume=program.resume)
        function = plan.programs[runner.rank] if runner.rank < len(plan.programs) else None
        program.started = time.perf_counter()  # (rank 0 writes `run_start` once the process group is up)
        try:
            runner.execute(lambda rt: function(rt, program.modules) if function else None, program.finish)
        except (TaskFailed, StorageError, ResultError, KeyboardInterrupt):
            raise
        except Exception as exc:
            if another_rank_failed(exc):  # that rank says why; this one's broken connection is no news
                raise SaidElsewhere from exc
            raise
        return FINISHED

    def frames(self, program: Program, error: BaseException) -> str:
        return program.user_frames(error)

    def say(self, program: Program, text: str) -> None:
        hand_over("dagc: " + text)


def torch_main(pipeline: Pipeline, plan: TorchPlan, argv: Sequence[str] | None = None, path: str | Path = "") -> int:
    """The emitted torch program's `main` (`path`: its file, which the launcher starts under torchrun)."""
    return Program(pipeline, Torch(plan), str(path)).main(argv)
