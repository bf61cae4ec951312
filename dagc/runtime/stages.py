"""Pipeline parallelism on a torch.distributed process group: a model's layers split into stages over
the ranks of a group, trained with torch.distributed.pipelining's GPipe or 1F1B schedules (`train_pipeline`),
and the training steps the `stages` pass splits (`use_stages`, `train_layers`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["train_pipeline", "current_stages", "use_stages", "train_layers"]


# ---- pipeline parallelism ------------------------------------------------------------------------------
def train_pipeline(
    layers: Sequence[torch.nn.Module],
    stage_of: Sequence[int],
    batches: Sequence[tuple[torch.Tensor, torch.Tensor]],
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    *,
    microbatches: int,
    make_optimizer: Callable[[Any], torch.optim.Optimizer],
    schedule: str = "gpipe",
    group: Any = None,
    device: torch.device | str = "cpu",
) -> list[float]:
    """Train `layers` (in order) split into pipeline stages over the ranks of `group`.

    `stage_of[i]` is the stage of layer i (contiguous, 0 … K-1; the `stages` pass computes it and
    stores it as `stages.stage`); rank r of the group runs stage r. Each batch `(inputs, targets)`
    is cut into `microbatches` micro-batches and run with `ScheduleGPipe` or `Schedule1F1B`
    (`schedule="1f1b"`). Returns the loss of each step (the mean over its micro-batches) on every
    rank: the last stage computes it and broadcasts it.
    """
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    rank = dist.get_rank(group)
    world = dist.get_world_size(group)
    num_stages = max(stage_of) + 1
    if num_stages != world or list(stage_of) != sorted(stage_of) or set(stage_of) != set(range(num_stages)):
        raise ValueError(f"stages {list(stage_of)} must be contiguous, 0…K-1, with K = {world} ranks")
    device = torch.device(device)
    module = torch.nn.Sequential(*[layer for layer, s in zip(layers, stage_of) if s == rank]).to(device)
    stage = PipelineStage(module, rank, num_stages, device, group=group)
    kinds = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}
    runner = kinds[schedule.lower()](stage, microbatches, loss_fn=loss_fn)
    optimizer = make_optimizer(module.parameters())
    last = dist.get_global_rank(group, num_stages - 1) if group is not None else num_stages - 1
    losses: list[float] = []
    for inputs, targets in batches:
        optimizer.zero_grad()
        step_losses: list[torch.Tensor] = []
        if rank == 0 and rank == num_stages - 1:
            runner.step(inputs.to(device), target=targets.to(device), losses=step_losses)
        elif rank == 0:
            runner.step(inputs.to(device))
        elif rank == num_stages - 1:
            runner.step(target=targets.to(device), losses=step_losses)
        else:
            runner.step()
        optimizer.step()
        value = torch.zeros(1, dtype=torch.float64, device=device)
        if step_losses:
            value += torch.stack([loss.detach().double() for loss in step_losses]).mean()
        dist.broadcast(value, last, group=group)
        losses.append(float(value.item()))
    return losses


# ---- pipeline-parallel training steps ----------------------------------------------------------------
_STAGES: ContextVar[tuple[int, ...] | None] = ContextVar("dagc_stages", default=None)


def current_stages() -> tuple[int, ...] | None:
    """The stage of each layer of the running pipeline-parallel training step (the `stages` pass's
    `stages.stage`, renumbered 0 … K-1 in layer order), or None outside one."""
    return _STAGES.get()


@contextmanager
def use_stages(stages: Sequence[int] | None) -> Iterator[None]:
    """Run the block as a training step whose layers are split into `stages` (None: not split)."""
    token = _STAGES.set(tuple(stages) if stages is not None else None)
    try:
        yield
    finally:
        _STAGES.reset(token)


def train_layers(
    layers: Sequence[torch.nn.Module],
    batches: Sequence[tuple[torch.Tensor, torch.Tensor]],
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    *,
    microbatches: int,
    make_optimizer: Callable[[Any], torch.optim.Optimizer],
    schedule: str = "gpipe",
) -> list[float]:
    """Train `layers` (in order) on `batches`; the body of a pipeline-parallel training task.

    Inside an emitted torch.distributed program, where the compiler split the layers into stages
    (docs/pipeline_parallel.md), this runs `train_pipeline` on the task's ranks and then gathers
    the trained layers onto rank 0 of the task, so rank 0's `layers` hold every stage's weights.
    Everywhere else (plain Python, the local and Ray backends) it trains in this process with the
    same arithmetic: each batch cut into `microbatches` equal micro-batches, `(loss /
    microbatches).backward()` for each, one optimizer step per batch. Returns each step's loss (the
    mean over its micro-batches).
    """
    from dagc.runtime.context import context

    ctx = context()
    stages = current_stages()
    if stages is not None and ctx.world_size > 1:
        losses = train_pipeline(layers, stages, batches, loss_fn, microbatches=microbatches,
                                make_optimizer=make_optimizer, schedule=schedule, group=ctx.group,
                                device=ctx.device)
        _gather_layers(layers, stages, ctx.group)
        return losses
    model = torch.nn.Sequential(*layers)
    optimizer = make_optimizer(model.parameters())
    losses = []
    for inputs, targets in batches:
        optimizer.zero_grad()
        step = []
        for x, y in zip(inputs.tensor_split(microbatches), targets.tensor_split(microbatches)):
            loss = loss_fn(model(x), y)
            (loss / microbatches).backward()
            step.append(loss.detach().double())
        optimizer.step()
        losses.append(float(torch.stack(step).mean().item()))
    return losses


def _gather_layers(layers: Sequence[torch.nn.Module], stages: Sequence[int], group: Any) -> None:
    """Copy each stage's trained weights into rank 0's copies of its layers."""
    rank = dist.get_rank(group)
    mine = {i: {k: v.detach().cpu() for k, v in layer.state_dict().items()}
            for i, (layer, s) in enumerate(zip(layers, stages)) if s == rank}
    gathered: list[Any] = [None] * dist.get_world_size(group) if rank == 0 else []
    dst = dist.get_global_rank(group, 0) if group is not None else 0
    dist.gather_object(mine, gathered if rank == 0 else None, dst=dst, group=group)
    if rank == 0:
        for part in gathered:
            for i, state in (part or {}).items():
                layers[i].load_state_dict(state)
