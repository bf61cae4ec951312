"""A Ray Train/Tune script (a `train_func(config)` trained over a `tune.grid_search`), ported to dagc.

Kept as Ray users write it: a training function taking a `config` dict and reading `config["lr"]`,
`config["batch_size"]` and `config["epochs"]`; torch's DataLoader over a TensorDataset; a module-level
logger and device; `torch.manual_seed(config["seed"])` inside; metrics reported per epoch (here printed,
as `train.report` would); a grid of configs. Changed: `train_func` is a `@dagc.task` returning its last
metrics, and the Tuner's grid is a loop in the pipeline.
"""

import logging

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import dagc

logger = logging.getLogger(__name__)
device = torch.device("cpu")
SEARCH_SPACE = {"lr": [0.001, 0.01, 0.1], "batch_size": 16, "epochs": 4}


@dagc.task(cost="3s")
def load_data(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    y = (x.sum(dim=1) > 0).long()
    return TensorDataset(x, y)


@dagc.task(cost="60s")
def train_func(config: dict, dataset: TensorDataset) -> dict:
    torch.manual_seed(config["seed"])
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).to(device)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=0.9)
    loader = DataLoader(dataset, batch_size=config["batch_size"], shuffle=True,
                        generator=torch.Generator().manual_seed(config["seed"]))
    metrics = {}
    for epoch in range(config["epochs"]):
        model.train()
        total = 0.0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
        metrics = {"epoch": epoch, "loss": round(total / len(loader), 5), "lr": config["lr"]}
        logger.info("report %s", metrics)  # train.report(metrics)
    print(f"finished lr={config['lr']}")
    return metrics


@dagc.task(cost="1s")
def best_result(results: list) -> dict:
    return min(results, key=lambda m: m["loss"])


@dagc.pipeline
def tune(n: int = 256, seed: int = 0):
    dataset = load_data(n, seed)
    results = []
    for i, lr in enumerate(SEARCH_SPACE["lr"]):  # tune.grid_search(SEARCH_SPACE["lr"])
        config = {"lr": lr, "batch_size": SEARCH_SPACE["batch_size"], "epochs": SEARCH_SPACE["epochs"], "seed": i}
        results.append(train_func(config, dataset))
    return best_result(results), results


if __name__ == "__main__":
    print(tune())
