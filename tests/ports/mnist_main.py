"""pytorch/examples `mnist/main.py`, ported to dagc (synthetic digits, tiny sizes).

Kept as the original writes it: the options parsed with argparse in `main()` (`args =
parser.parse_args()`, then `args.epochs` and `args.save_model` read there and `args` passed whole to
`train`, which reads `args.log_interval` and `args.dry_run`), `train(args, model, device, train_loader, optimizer, epoch)` that updates the model in
place and returns nothing, `test(model, device, test_loader)` printing the test set's loss and accuracy,
Adadelta with a StepLR scheduler stepped after each epoch, a `Net` with two convolutions and dropout,
`torch.manual_seed(args.seed)` before the model is built, and the two datasets built one after the
other. Changed: a pipeline body builds no objects, so `setup(args, device, dataset1, dataset2)` builds
the loaders, the model, its optimizer and scheduler and returns them, `scheduler.step()` is the task
`step(scheduler)` (returning the new learning rate), the device is a module-level `torch.device("cpu")`
(`--no-accel` is parsed but there is no accelerator to choose),
the datasets are synthetic 12x12 "digits" made by `synthetic_mnist(train)` in place of
`datasets.MNIST(...)`, and `test` also returns what it prints, so that the pipeline returns each epoch's
figures. `train`'s `model` and `test`'s `test_loader` are annotated with their classes: dagc does not
follow them out of setup's tuple, and would not see that calling the model (dropout) and iterating the
loader (its workers' seed) draw from the global generator.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset

import dagc

device = torch.device("cpu")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.conv2 = nn.Conv2d(4, 8, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(128, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


@dagc.task(cost="2s")
def synthetic_mnist(train):
    """Stands in for `datasets.MNIST('../data', train=train, transform=transform)`: each class has its own
    stroke pattern, plus noise, normalised as the original's transform does."""
    patterns = torch.rand(10, 1, 12, 12, generator=torch.Generator().manual_seed(0)).gt(0.7).float()
    g = torch.Generator().manual_seed(1 if train else 2)
    n = 256 if train else 128
    labels = torch.randint(0, 10, (n,), generator=g)
    images = patterns[labels] + 0.8 * torch.randn(n, 1, 12, 12, generator=g)
    return TensorDataset((images - 0.1307) / 0.3081, labels)


@dagc.task
def setup(args, device, dataset1, dataset2):
    torch.manual_seed(args.seed)
    train_kwargs = {'batch_size': args.batch_size}
    test_kwargs = {'batch_size': args.test_batch_size}
    train_loader = torch.utils.data.DataLoader(dataset1, **train_kwargs)
    test_loader = torch.utils.data.DataLoader(dataset2, **test_kwargs)
    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    return model, optimizer, scheduler, train_loader, test_loader


@dagc.task
def train(args, model: Net, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(  # noqa: UP032 - the original's
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))
            if args.dry_run:
                break


@dagc.task
def test(model, device, test_loader: DataLoader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction='sum').item()  # sum up batch loss
            pred = output.argmax(dim=1, keepdim=True)  # get the index of the max log-probability
            correct += pred.eq(target.view_as(pred)).sum().item()

    test_loss /= len(test_loader.dataset)

    print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'.format(  # noqa: UP032
        test_loss, correct, len(test_loader.dataset),
        100. * correct / len(test_loader.dataset)))
    return test_loss, correct


@dagc.task
def step(scheduler):
    scheduler.step()
    return scheduler.get_last_lr()[0]


@dagc.task
def save_model(model):
    torch.save(model.state_dict(), "mnist_cnn.pt")


@dagc.pipeline
def main():
    # Training settings
    parser = argparse.ArgumentParser(description='PyTorch MNIST Example')
    parser.add_argument('--batch-size', type=int, default=32, metavar='N',
                        help='input batch size for training (default: 32)')
    parser.add_argument('--test-batch-size', type=int, default=64, metavar='N',
                        help='input batch size for testing (default: 64)')
    parser.add_argument('--epochs', type=int, default=3, metavar='N',
                        help='number of epochs to train (default: 3)')
    parser.add_argument('--lr', type=float, default=1.0, metavar='LR',
                        help='learning rate (default: 1.0)')
    parser.add_argument('--gamma', type=float, default=0.7, metavar='M',
                        help='Learning rate step gamma (default: 0.7)')
    parser.add_argument('--no-accel', action='store_true',
                        help='disables accelerator')
    parser.add_argument('--dry-run', action='store_true',
                        help='quickly check a single pass')
    parser.add_argument('--seed', type=int, default=1, metavar='S',
                        help='random seed (default: 1)')
    parser.add_argument('--log-interval', type=int, default=4, metavar='N',
                        help='how many batches to wait before logging training status')
    parser.add_argument('--save-model', action='store_true',
                        help='For Saving the current Model')
    args = parser.parse_args()

    dataset1 = synthetic_mnist(train=True)
    dataset2 = synthetic_mnist(train=False)
    model, optimizer, scheduler, train_loader, test_loader = setup(args, device, dataset1, dataset2)

    history = []
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        history.append(test(model, device, test_loader))
        history.append(step(scheduler))

    if args.save_model:
        save_model(model)
    return history


if __name__ == '__main__':
    main()
