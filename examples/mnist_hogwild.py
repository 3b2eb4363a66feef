"""Hogwild training: several processes train one model whose parameters live in shared memory.

PyTorch's "mnist_hogwild" example (main.py and train.py in one file), on the bundled 8x8 UCI
digits instead of MNIST (no download here), with the CNN sized for 8x8 images. Swap the ember
imports for `import torch` ones and the script runs on PyTorch, apart from the data loading.

Run: python examples/mnist_hogwild.py --num-processes 2 --epochs 3
"""
import argparse
import os

import ember as torch
import ember.multiprocessing as mp
import ember.nn as nn
import ember.nn.functional as F
import ember.optim as optim
from ember.datasets import load_digits
from ember.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser(description="Hogwild digits example")
parser.add_argument("--batch-size", type=int, default=64, metavar="N",
                    help="input batch size for training (default: 64)")
parser.add_argument("--test-batch-size", type=int, default=1000, metavar="N",
                    help="input batch size for testing (default: 1000)")
parser.add_argument("--epochs", type=int, default=10, metavar="N",
                    help="number of epochs to train (default: 10)")
parser.add_argument("--lr", type=float, default=0.1, metavar="LR",
                    help="learning rate (default: 0.1)")
parser.add_argument("--momentum", type=float, default=0.5, metavar="M",
                    help="SGD momentum (default: 0.5)")
parser.add_argument("--seed", type=int, default=1, metavar="S",
                    help="random seed (default: 1)")
parser.add_argument("--log-interval", type=int, default=10, metavar="N",
                    help="how many batches to wait before logging training status")
parser.add_argument("--num-processes", type=int, default=2, metavar="N",
                    help="how many training processes to use (default: 2)")
parser.add_argument("--start-method", choices=mp.get_all_start_methods(), default=None,
                    help="multiprocessing start method (default: the platform's)")
parser.add_argument("--save-model", action="store_true", default=False,
                    help="save the trained model to digits_hogwild.safetensors")
parser.add_argument("--dry-run", action="store_true", default=False,
                    help="quickly check a single pass")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=3, padding=1)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(80, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 80)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def digits(train):
    """The first 1500 digits for training, the other 297 for testing, normalised as MNIST."""
    images, labels = load_digits()
    images = torch.from_numpy(images).float().div(16.0).sub(0.5).div(0.5).unsqueeze(1)
    labels = torch.from_numpy(labels).long()
    part = slice(0, 1500) if train else slice(1500, None)
    return TensorDataset(images[part], labels[part])


def train(rank, args, model, device, dataset, dataloader_kwargs):
    torch.manual_seed(args.seed + rank)
    train_loader = DataLoader(dataset, **dataloader_kwargs)
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    for epoch in range(1, args.epochs + 1):
        train_epoch(epoch, args, model, device, train_loader, optimizer)


def test(args, model, device, dataset, dataloader_kwargs):
    torch.manual_seed(args.seed)
    test_loader = DataLoader(dataset, **dataloader_kwargs)
    test_epoch(model, device, test_loader)


def train_epoch(epoch, args, model, device, data_loader, optimizer):
    model.train()
    pid = os.getpid()
    for batch_idx, (data, target) in enumerate(data_loader):
        optimizer.zero_grad()
        output = model(data.to(device))
        loss = F.nll_loss(output, target.to(device))
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print("{}\tTrain Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}".format(
                pid, epoch, batch_idx * len(data), len(data_loader.dataset),
                100. * batch_idx / len(data_loader), loss.item()), flush=True)
            if args.dry_run:
                break


def test_epoch(model, device, data_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in data_loader:
            output = model(data.to(device))
            test_loss += F.nll_loss(output, target.to(device), reduction="sum").item()
            pred = output.max(1)[1]
            correct += pred.eq(target.to(device)).sum().item()
    test_loss /= len(data_loader.dataset)
    print("\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n".format(
        test_loss, correct, len(data_loader.dataset),
        100. * correct / len(data_loader.dataset)), flush=True)


if __name__ == "__main__":
    args = parser.parse_args()
    device = torch.device("cpu")
    dataset1, dataset2 = digits(train=True), digits(train=False)
    kwargs = {"batch_size": args.batch_size, "shuffle": True}
    torch.manual_seed(args.seed)
    if args.start_method is not None:
        mp.set_start_method(args.start_method, force=True)

    model = Net().to(device)
    model.share_memory()  # gradients are allocated lazily, so they are not shared here

    processes = []
    for rank in range(args.num_processes):
        p = mp.Process(target=train, args=(rank, args, model, device, dataset1, kwargs))
        # We first train the model across `num_processes` processes
        p.start()
        processes.append(p)
    for p in processes:
        p.join()
    failed = [p.exitcode for p in processes if p.exitcode != 0]
    if failed:
        raise SystemExit(f"a training process failed (exit codes {failed})")

    if args.save_model:
        torch.save(model.state_dict(), "digits_hogwild.safetensors")

    # Once training is complete, we can test the model
    test(args, model, device, dataset2, kwargs)
