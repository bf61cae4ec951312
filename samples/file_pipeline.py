"""Tasks that communicate through files: each declares the paths it reads and writes, and dagc
orders writer before reader. `{name}` in a path stands for the task's argument `name`.

Files go under `out_dir`, a pipeline parameter (default `out/file_pipeline`, relative to where the
pipeline runs): `dagc compile samples/file_pipeline.py --param out_dir=/tmp/run1 -o out`.
"""

from __future__ import annotations

import os

import torch

import dagc

torch.set_num_threads(1)  # tiny models: threads only add overhead

def _save(obj: object, path: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    torch.save(obj, path)


@dagc.task(writes=["{path}"], cost="1s")
def make_dataset(path: str, n: int, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    x = 3 * torch.randn(n, 4, generator=g) + 1
    y = ((x[:, 0] - x[:, 1] + 0.5 * x[:, 2] * x[:, 3]) > 0).float()
    _save({"x": x, "y": y}, path)


@dagc.task(reads=["{src}"], writes=["{dst}"], cost="500ms")
def normalize(src: str, dst: str) -> None:
    data = torch.load(src)
    x = data["x"]
    _save({"x": (x - x.mean(0)) / x.std(0), "y": data["y"]}, dst)


@dagc.task(reads=["{data_path}"], writes=["{model_path}"], cost="3s")
def train(data_path: str, model_path: str, epochs: int) -> float:
    torch.manual_seed(0)
    data = torch.load(data_path)
    net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.Adam(net.parameters(), lr=0.03)
    for _ in range(epochs):
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(net(data["x"]).squeeze(1), data["y"])
        loss.backward()
        opt.step()
    _save(net.state_dict(), model_path)
    return round(loss.item(), 4)


@dagc.task(reads=["{model_path}", "{data_path}"], cost="200ms", pure=True)
def evaluate(model_path: str, data_path: str) -> float:
    data = torch.load(data_path)
    net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    net.load_state_dict(torch.load(model_path))
    with torch.no_grad():
        pred = (net(data["x"]).squeeze(1) > 0).float()
    return round((pred == data["y"]).float().mean().item(), 4)


@dagc.pipeline
def file_pipeline(out_dir: str = "out/file_pipeline", n: int = 1000, epochs: int = 80):
    make_dataset(f"{out_dir}/raw.pt", n, seed=3)
    normalize(f"{out_dir}/raw.pt", f"{out_dir}/clean.pt")
    final_loss = train(f"{out_dir}/clean.pt", f"{out_dir}/model.pt", epochs)
    accuracy = evaluate(f"{out_dir}/model.pt", f"{out_dir}/clean.pt")
    return {"final_loss": final_loss, "accuracy": accuracy}


if __name__ == "__main__":
    print(file_pipeline())
