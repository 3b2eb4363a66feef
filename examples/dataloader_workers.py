"""Loading data in worker processes, as a PyTorch program does it: a map-style Dataset that reads
one sample file per item from a folder and augments it at random (random crop and flip drawn from
torch's RNG, which each worker seeds from the loader's generator), a DataLoader with
``num_workers=2``, ``persistent_workers=True`` and a ``worker_init_fn``, and a small CNN trained
on the result. The program is PyTorch's; only the import block differs. The images are the
bundled UCI digits scaled to 28x28, written once as .npy files (the "image folder").

Run: python examples/dataloader_workers.py --epochs 3
     EXAMPLE_BACKEND=torch python examples/dataloader_workers.py --epochs 3
"""
import argparse
import os

import numpy as np

if os.environ.get("EXAMPLE_BACKEND") == "torch":
    import torch
else:
    import ember as torch
nn, F, optim = torch.nn, torch.nn.functional, torch.optim
Dataset, DataLoader, get_worker_info = (torch.utils.data.Dataset, torch.utils.data.DataLoader,
                                        torch.utils.data.get_worker_info)


def write_image_folder(root, n):
    """The digits as one ``<index>_<label>.npy`` file per image (28x28 float32 in [0, 1])."""
    from ember.datasets import load_digits  # NumPy arrays: no framework involved
    images, labels = load_digits()
    images = np.pad(np.kron(images / 16.0, np.ones((3, 3))), ((0, 0), (2, 2), (2, 2)))
    os.makedirs(root, exist_ok=True)
    order = np.random.default_rng(0).permutation(len(labels))[:n]
    for i, k in enumerate(order):
        np.save(os.path.join(root, f"{i:05d}_{labels[k]}.npy"), images[k].astype(np.float32))


class ImageFolder(Dataset):
    """Reads one sample per item; ``augment`` draws a random 24x24 crop (padded back to 28x28)
    and a horizontal flip from torch's RNG, seeded per worker by the DataLoader."""

    def __init__(self, root, augment):
        self.files = sorted(f for f in os.listdir(root) if f.endswith(".npy"))
        self.root, self.augment = root, augment

    def __len__(self):
        return len(self.files)

    def __getitem__(self, index):
        name = self.files[index]
        image = torch.from_numpy(np.load(os.path.join(self.root, name)))
        if self.augment:
            top, left = torch.randint(0, 5, (2,)).tolist()
            image = F.pad(image[top:top + 24, left:left + 24], (2, 2, 2, 2))
            if torch.rand(1).item() < 0.5:
                image = image.flip(-1)
        label = int(name.split("_")[1].split(".")[0])
        return image.unsqueeze(0), label, os.getpid()   # the pid: which process loaded it


def worker_init_fn(worker_id):
    # each worker has its own copy of the dataset and its own seed (base_seed + worker_id)
    info = get_worker_info()
    assert info.id == worker_id and info.seed == torch.initial_seed()
    assert info.dataset is not None and info.num_workers >= 1


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 16, 5)
        self.conv2 = nn.Conv2d(16, 32, 5)
        self.fc = nn.Linear(32 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return F.log_softmax(self.fc(torch.flatten(x, 1)), dim=1)


def main(argv=None):
    parser = argparse.ArgumentParser(description="DataLoader worker processes example")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--train-size", type=int, default=1200)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", type=str, default="digits_folder")
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    if not os.path.isdir(args.data):
        write_image_folder(args.data, args.train_size)
    dataset = ImageFolder(args.data, augment=True)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                        num_workers=args.num_workers, persistent_workers=args.num_workers > 0,
                        worker_init_fn=worker_init_fn,
                        generator=torch.Generator().manual_seed(args.seed))
    model = Net()
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    for epoch in range(1, args.epochs + 1):
        model.train()
        total, correct, seen, pids = 0.0, 0, 0, set()
        for data, target, pid in loader:
            pids.update(pid.tolist())
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(target)
            correct += int((output.argmax(dim=1) == target).sum().item())
            seen += len(target)
        print(f"Epoch {epoch}: loss {total / seen:.4f}, train accuracy {correct}/{seen}, "
              f"loaded by {sorted(pids)} (main process {os.getpid()})")


if __name__ == "__main__":
    main()
