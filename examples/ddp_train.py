"""Data-parallel training on N MPI ranks: DistributedDataParallel, DistributedSampler,
SyncBatchNorm, metrics all-reduced, a checkpoint saved on rank 0 and resumed on every rank.

Run:  ember run -n 2 examples/ddp_train.py --epochs 3
      ember run -n 2 examples/ddp_train.py --epochs 5 --resume   (continues from the checkpoint)
Needs `pip install 'ember[distributed]'` (mpi4py and mpich). The same code with
`import torch` and torch.distributed (backend "gloo") runs on PyTorch, apart from the data.
"""
import argparse
import os

import numpy as np

import ember
import ember.distributed as dist
from ember import nn, optim
from ember.datasets import load_digits
from ember.nn.parallel import DistributedDataParallel as DDP
from ember.utils.data import DataLoader, TensorDataset
from ember.utils.data.distributed import DistributedSampler


def build_model():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 2 * 2, 64), nn.ReLU(), nn.Linear(64, 10))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=32, help="per rank")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--checkpoint", default="out/ddp_digits.safetensors")
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args()

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    ember.manual_seed(0)  # DDP broadcasts rank 0's parameters anyway

    images, labels = load_digits(as_tensors=True)
    images = (images.unsqueeze(1) - 0.3) / 0.38  # pixels are in [0, 1]
    perm = np.random.default_rng(0).permutation(len(labels))
    test, train = ember.from_numpy(perm[:360]), ember.from_numpy(perm[360:])
    train_set = TensorDataset(images[train], labels[train])
    sampler = DistributedSampler(train_set, shuffle=True, seed=0)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)

    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(build_model()))
    opt = optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    start = 0
    if args.resume and os.path.exists(args.checkpoint):
        state = ember.load(args.checkpoint)   # every rank reads the same file
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start = int(state["epoch"])
        if rank == 0:
            print(f"resumed from {args.checkpoint} at epoch {start}")

    for epoch in range(start, args.epochs):
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        model.train()
        totals = ember.zeros(3, dtype=ember.float64)  # loss sum, correct, seen
        for xb, yb in loader:
            opt.zero_grad()
            logits = model(xb)
            loss = loss_fn(logits, yb)
            loss.backward()  # gradients averaged over ranks, overlapping backward
            opt.step()
            totals += ember.tensor([float(loss) * len(yb), float((logits.argmax(1) == yb).sum()),
                                    float(len(yb))], dtype=ember.float64)
        dist.all_reduce(totals)
        model.eval()
        with ember.no_grad():
            acc = float((model(images[test]).argmax(1) == labels[test]).float().mean())
        if rank == 0:
            loss_sum, correct, seen = totals.tolist()
            print(f"epoch {epoch + 1}: train loss {loss_sum / seen:.4f}, train accuracy "
                  f"{correct / seen:.4f} over {int(seen)} images on {world} ranks, test accuracy "
                  f"{acc:.4f}")
            os.makedirs(os.path.dirname(args.checkpoint) or ".", exist_ok=True)
            ember.save({"model": model.module.state_dict(), "optimizer": opt.state_dict(),
                        "epoch": epoch + 1}, args.checkpoint)  # atomic: never a torn file
        dist.barrier()  # the checkpoint exists before any rank may read it
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
