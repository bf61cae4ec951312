"""Quickstart: a small but real training pipeline.

synthetic data → split → two feature branches in parallel (standardize, random Fourier features)
→ concatenate → train a tiny MLP → evaluate.

Runs as plain Python (`python samples/quickstart.py`) in a few seconds on a CPU, and compiles with
`dagc compile samples/quickstart.py -o out` without being imported or run.
"""

from __future__ import annotations

import torch

import dagc

N_FEATURES = 8
SEED = 7

torch.set_num_threads(1)  # tiny model: threads only add overhead, and one thread is deterministic


@dagc.task(cost="2s", out_size="200KiB")
def make_data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A noisy, non-linear binary classification problem."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, N_FEATURES, generator=g)
    w = torch.randn(N_FEATURES, generator=g)
    logits = x @ w / w.norm() + 0.8 * x[:, 0] * x[:, 1] + 0.2 * torch.randn(n, generator=g)
    return x, (logits > 0).float()


@dagc.task(cost="1s", out_size="200KiB")
def split(x: torch.Tensor, y: torch.Tensor, holdout: float = 0.25) -> dict[str, torch.Tensor]:
    cut = int(len(x) * (1 - holdout))
    return {"train_x": x[:cut], "train_y": y[:cut], "test_x": x[cut:], "test_y": y[cut:]}


@dagc.task(cost="3s", out_size="200KiB")
def standardize(data: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Feature branch 1: z-scores with the training set's statistics."""
    mean = data["train_x"].mean(0)
    std = data["train_x"].std(0) + 1e-6
    return {"train": (data["train_x"] - mean) / std, "test": (data["test_x"] - mean) / std}


@dagc.task(cost="3s", out_size="400KiB")
def fourier_features(data: dict[str, torch.Tensor], width: int = 16, seed: int = 0) -> dict[str, torch.Tensor]:
    """Feature branch 2: random Fourier features, independent of branch 1."""
    g = torch.Generator().manual_seed(seed)
    proj = torch.randn(N_FEATURES, width, generator=g)
    return {"train": torch.cos(data["train_x"] @ proj), "test": torch.cos(data["test_x"] @ proj)}


@dagc.task(cost="500ms", out_size="600KiB")
def concat(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: torch.cat([a[k], b[k]], dim=1) for k in ("train", "test")}


@dagc.task(cost="20s", gpus=0, memory="1GiB", out_size="20KiB", retries=1)
def train(features: dict[str, torch.Tensor], data: dict[str, torch.Tensor], epochs: int, lr: float) -> dict:
    """Full-batch training of a two-layer MLP; returns the weights and the loss curve."""
    torch.manual_seed(SEED)
    x, y = features["train"], data["train_y"]
    model = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(epochs):
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x).squeeze(1), y)
        loss.backward()
        opt.step()
        losses.append(round(loss.item(), 5))
    return {"state": model.state_dict(), "losses": losses}


@dagc.task(cost="1s", pure=True)  # its random initialisation is overwritten: the draws do not matter
def evaluate(trained: dict, features: dict[str, torch.Tensor], data: dict[str, torch.Tensor]) -> float:
    x = features["test"]
    model = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    model.load_state_dict(trained["state"])
    with torch.no_grad():
        pred = (model(x).squeeze(1) > 0).float()
    return round((pred == data["test_y"]).float().mean().item(), 4)


@dagc.task(cost="100ms")
def report(trained: dict, accuracy: float) -> dict:
    """A small, comparable summary of the run."""
    losses = trained["losses"]
    return {"accuracy": accuracy, "first_loss": losses[0], "final_loss": losses[-1], "epochs": len(losses)}


@dagc.pipeline
def quickstart(n: int = 2000, epochs: int = 80, lr: float = 0.02):
    x, y = make_data(n, seed=SEED)
    data = split(x, y)
    scaled = standardize(data)
    fourier = fourier_features(data, width=24)
    features = concat(scaled, fourier)
    trained = train(features, data, epochs=epochs, lr=lr)
    accuracy = evaluate(trained, features, data)
    return report(trained, accuracy)


if __name__ == "__main__":
    print(quickstart())
