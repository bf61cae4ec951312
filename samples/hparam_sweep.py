"""Hyperparameter sweep: several configurations trained in parallel, a fan-in picks the best, and
the best is retrained for longer only if it beats a baseline (a branch on a task result).

Runs as plain Python (`python samples/hparam_sweep.py`) in a few seconds on a CPU, and compiles
with `dagc compile samples/hparam_sweep.py -o out` (try `--param n_configs=2`).
"""

from __future__ import annotations

import torch

import dagc

torch.set_num_threads(1)  # tiny models: threads only add overhead
SEED = 11
BASELINE = 0.7
CONFIGS = [
    {"lr": 0.003, "hidden": 8},
    {"lr": 0.01, "hidden": 16},
    {"lr": 0.03, "hidden": 16},
    {"lr": 0.1, "hidden": 32},
]


@dagc.task(cost="1s", out_size="100KiB")
def make_data(n: int, seed: int) -> dict[str, torch.Tensor]:
    """Two interleaved half-moons with noise: needs a non-linear model."""
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(n, generator=g) * 3.1416
    label = (torch.rand(n, generator=g) > 0.5).float()
    x = torch.stack([torch.cos(t) + label, torch.sin(t) * (1 - 2 * label) + 0.3 * label], dim=1)
    x = x + 0.2 * torch.randn(n, 2, generator=g)
    cut = int(0.75 * n)
    return {"train_x": x[:cut], "train_y": label[:cut], "test_x": x[cut:], "test_y": label[cut:]}


def _model(hidden: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(2, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1))


@dagc.task(cost="3s", out_size="20KiB")
def train(data: dict[str, torch.Tensor], lr: float, hidden: int, epochs: int) -> dict:
    torch.manual_seed(SEED)
    model = _model(hidden)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(epochs):
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(data["train_x"]).squeeze(1),
                                                                    data["train_y"])
        loss.backward()
        opt.step()
    return {"state": model.state_dict(), "config": {"lr": lr, "hidden": hidden}, "epochs": epochs}


@dagc.task(cost="200ms", pure=True)
def evaluate(model: dict, data: dict[str, torch.Tensor]) -> float:
    net = _model(model["config"]["hidden"])
    net.load_state_dict(model["state"])
    with torch.no_grad():
        pred = (net(data["test_x"]).squeeze(1) > 0).float()
    return round((pred == data["test_y"]).float().mean().item(), 4)


@dagc.task(cost="50ms")
def pick_best(models: list[dict], scores: list[float]) -> dict:
    """Fan-in: the best configuration (first one on ties)."""
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    return {"index": best, "score": scores[best], "config": models[best]["config"], "model": models[best]}


@dagc.task(cost="100ms")
def summarize(scores: list[float], best: dict, final_score: float, retrained: bool) -> dict:
    return {"scores": scores, "best_index": best["index"], "best_config": best["config"],
            "final_score": final_score, "retrained": retrained}


@dagc.pipeline
def hparam_sweep(n: int = 1200, epochs: int = 60, n_configs: int = 4):
    data = make_data(n, seed=SEED)
    models = [train(data, lr=c["lr"], hidden=c["hidden"], epochs=epochs) for c in CONFIGS[:n_configs]]
    scores = [evaluate(m, data) for m in models]
    best = pick_best(models, scores)
    if best["score"] > BASELINE:
        final = train(data, best["config"]["lr"], best["config"]["hidden"], epochs=epochs * 3)
        final_score = evaluate(final, data)
        retrained = True
    else:
        final_score = best["score"]
        retrained = False
    return summarize(scores, best, final_score, retrained)


if __name__ == "__main__":
    print(hparam_sweep())
