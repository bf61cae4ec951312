"""MNIST-style training, written the way pytorch/examples `mnist/main.py` is written.

A `Net` module, an optimizer built from the model's parameters in its own task, a learning-rate
scheduler, and per epoch a `train(model, optimizer, loader, epoch)` that updates the model in
place and returns nothing, then a `test(model, loader)` that reports loss and accuracy. dagc
infers that `train`, `test` and `scheduler_step` change their arguments, so it keeps every call,
runs them in program order, and holds the model, the optimizer and the scheduler (which share the
model's parameters) in one process on every backend. The data are synthetic 28x28 "digits" (a
class-dependent pattern plus noise), so the sample runs offline in seconds on a CPU.

Runs as plain Python (`python samples/mnist.py`) and compiles with `dagc compile samples/mnist.py -o out`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset

import dagc

torch.set_num_threads(1)  # one thread: the same floating-point sums in every process

N_CLASSES = 10


class Net(nn.Module):
    """The pytorch/examples network, narrower: two convolutions, dropout, two linear layers."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(16 * 12 * 12, 64)
        self.fc2 = nn.Linear(64, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


@dagc.task(cost="1s", out_size="4MiB")
def make_dataset(n: int, seed: int) -> TensorDataset:
    """`n` synthetic digits: each class has its own stroke pattern, plus noise."""
    patterns = torch.rand(N_CLASSES, 1, 28, 28, generator=torch.Generator().manual_seed(0)).gt(0.7).float()
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, N_CLASSES, (n,), generator=g)
    images = patterns[labels] + 0.8 * torch.randn(n, 1, 28, 28, generator=g)
    return TensorDataset((images - 0.1307) / 0.3081, labels)


@dagc.task(cost="10ms")
def make_loader(dataset: TensorDataset, batch_size: int, shuffle: bool) -> DataLoader:
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle)


@dagc.task(cost="100ms")
def make_model(seed: int) -> Net:
    torch.manual_seed(seed)
    return Net()


@dagc.task(cost="10ms")
def make_optimizer(model: Net, lr: float) -> optim.Optimizer:
    return optim.Adadelta(model.parameters(), lr=lr)


@dagc.task(cost="10ms")
def make_scheduler(optimizer: optim.Optimizer, gamma: float) -> StepLR:
    return StepLR(optimizer, step_size=1, gamma=gamma)


@dagc.task(cost="2s")
def train(model: Net, optimizer: optim.Optimizer, train_loader: DataLoader, epoch: int, log_interval: int) -> None:
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)}]\tLoss: {loss.item():.6f}")


@dagc.task(cost="500ms")
def test(model: Net, test_loader: DataLoader) -> tuple[float, float]:
    model.eval()
    test_loss = 0.0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    return round(test_loss, 4), round(correct / len(test_loader.dataset), 4)


@dagc.task(cost="1ms")
def scheduler_step(scheduler: StepLR) -> None:
    scheduler.step()


@dagc.task(cost="1ms")
def current_lr(optimizer: optim.Optimizer) -> float:
    return round(optimizer.param_groups[0]["lr"], 6)


@dagc.pipeline
def mnist(epochs: int = 3, batch_size: int = 32, lr: float = 1.0, gamma: float = 0.7, seed: int = 1,
          log_interval: int = 10):
    train_loader = make_loader(make_dataset(640, seed=seed), batch_size, shuffle=True)
    test_loader = make_loader(make_dataset(256, seed=seed + 1), 256, shuffle=False)
    model = make_model(seed)
    optimizer = make_optimizer(model, lr)
    scheduler = make_scheduler(optimizer, gamma)
    history = []
    for epoch in range(1, epochs + 1):
        train(model, optimizer, train_loader, epoch, log_interval)
        history.append(test(model, test_loader))
        scheduler_step(scheduler)
    return {"history": history, "lr": current_lr(optimizer)}


if __name__ == "__main__":
    print(mnist())
