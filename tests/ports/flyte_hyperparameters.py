"""A Flyte workflow in the style of flytesnacks' hyperparameter examples, ported to dagc.

Kept as Flyte users write it: hyperparameters in a frozen dataclass (Flyte serialises dataclasses), a
module-level `logger = logging.getLogger(__file__)` used inside tasks, a module-level default config, a
`map_task`-style fan-out over a list of hyperparameter sets, each task seeding torch itself, and a
reducing task. Changed: `@task` is `@dagc.task`, `@workflow` is `@dagc.pipeline`, and `map_task(train)(...)`
is a list comprehension (dagc spreads the independent calls).
"""

import logging
from dataclasses import dataclass

import torch
from torch import nn

import dagc

logger = logging.getLogger(__file__)


@dataclass(frozen=True)
class Hyperparameters:
    lr: float = 0.05
    hidden: int = 8
    epochs: int = 30
    seed: int = 0


DEFAULTS = Hyperparameters()
GRID = (Hyperparameters(lr=0.01, hidden=4, seed=1), Hyperparameters(lr=0.05, hidden=8, seed=2),
        Hyperparameters(lr=0.1, hidden=8, seed=3), Hyperparameters(lr=0.2, hidden=16, seed=4))


@dagc.task(cost="2s")
def make_dataset(n: int, seed: int) -> tuple:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    y = (x[:, :1] * 2 - x[:, 1:2]).tanh()
    return x, y


@dagc.task(cost="40s")
def train(dataset: tuple, hp: Hyperparameters) -> float:
    torch.manual_seed(hp.seed)
    x, y = dataset
    model = nn.Sequential(nn.Linear(4, hp.hidden), nn.ReLU(), nn.Linear(hp.hidden, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=hp.lr)
    loss = torch.tensor(0.0)
    for _ in range(hp.epochs):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    logger.info("lr=%s hidden=%s loss=%.4f", hp.lr, hp.hidden, loss.item())
    return round(loss.item(), 5)


@dagc.task(cost="1s")
def best_of(losses: list, grid: tuple) -> dict:
    best = min(range(len(losses)), key=lambda i: losses[i])
    return {"lr": grid[best].lr, "hidden": grid[best].hidden, "loss": losses[best]}


@dagc.pipeline
def tune_wf(n: int = 256):
    dataset = make_dataset(n, DEFAULTS.seed)
    losses = [train(dataset, hp) for hp in GRID]
    return best_of(losses, GRID), losses


if __name__ == "__main__":
    print(tune_wf())
