"""Early stopping: train epoch by epoch for at most MAX_EPOCHS, stop once validation stops improving.

The loop is bounded (`range(MAX_EPOCHS)`) and leaves early on a task result, so it compiles to one
`loop` region with a maximum trip count. Runs as plain Python in a few seconds on a CPU.
"""

from __future__ import annotations

import torch

import dagc

torch.set_num_threads(1)  # tiny models: threads only add overhead
MAX_EPOCHS = 40
SEED = 5


@dagc.task(cost="1s", out_size="100KiB")
def make_data(n: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 6, generator=g)
    w = torch.randn(6, generator=g)
    y = x @ w + 0.5 * torch.sin(3 * x[:, 0]) + 0.1 * torch.randn(n, generator=g)
    cut = int(0.8 * n)
    return {"train_x": x[:cut], "train_y": y[:cut], "val_x": x[cut:], "val_y": y[cut:]}


@dagc.task(cost="100ms")
def init_model(seed: int) -> dict:
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    return {"state": net.state_dict(), "epoch": -1}


def _net(model: dict) -> torch.nn.Module:
    net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    net.load_state_dict(model["state"])
    return net


@dagc.task(cost="500ms", out_size="10KiB", readonly=["data"])
def train_epoch(model: dict, data: dict[str, torch.Tensor], epoch: int, lr: float) -> dict:
    torch.manual_seed(SEED + epoch)
    net = _net(model)
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    perm = torch.randperm(len(data["train_x"]))
    for start in range(0, len(perm), 64):
        idx = perm[start : start + 64]
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(net(data["train_x"][idx]).squeeze(1), data["train_y"][idx])
        loss.backward()
        opt.step()
    return {"state": net.state_dict(), "epoch": epoch}


@dagc.task(cost="100ms", pure=True)
def validate(model: dict, data: dict[str, torch.Tensor]) -> float:
    with torch.no_grad():
        pred = _net(model)(data["val_x"]).squeeze(1)
    return round(torch.nn.functional.mse_loss(pred, data["val_y"]).item(), 5)


@dagc.task(cost="10ms")
def record(history: list[float], loss: float) -> list[float]:
    return [*history, loss]


@dagc.task(cost="10ms")
def converged(history: list[float], min_delta: float) -> bool:
    """True when the last epoch improved the best earlier loss by less than `min_delta`."""
    if len(history) < 3:
        return False
    return min(history[:-1]) - history[-1] < min_delta


@dagc.task(cost="10ms")
def summarize(model: dict, history: list[float]) -> dict:
    return {"epochs": model["epoch"] + 1, "final_loss": history[-1], "history": history}


@dagc.pipeline
def early_stopping(n: int = 1500, lr: float = 0.02, min_delta: float = 0.01):
    data = make_data(n, seed=SEED)
    model = init_model(seed=SEED)
    history = []
    for epoch in range(MAX_EPOCHS):
        model = train_epoch(model, data, epoch, lr)
        loss = validate(model, data)
        history = record(history, loss)
        if converged(history, min_delta):
            break
    return summarize(model, history)


if __name__ == "__main__":
    print(early_stopping())
