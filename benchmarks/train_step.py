"""Training-step speed: ember vs PyTorch eager, in the same run, float32, 2 threads by default.

Usage: python benchmarks/train_step.py [--threads 2] [--steps 20] [--only mlp,lenet,lm]

Models (one optimizer step each: zero_grad, forward, cross-entropy, backward, SGD with momentum):
  mlp    784-512-512-10 MLP, batch 128
  lenet  LeNet-5 on 28x28 inputs, batch 64
  lm     word language model: embedding 10000x200, 2-layer LSTM 200, seq 35, batch 20, decoder
Prints ms per step (median of --steps after warm-up; ember and torch steps alternate so that
both see the same machine load, each after a 30 ms busy-wait so it does not run next to the other
library's still-spinning worker threads, see timing.settle) and the ember/torch ratio per model. Also
reports whether OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are set (it never changes them). Not a
test: nothing is asserted.
"""
import argparse
import os
import statistics
import time

import numpy as np
from timing import settle


def mlp(nn):
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def lenet(nn):
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, 10))


def word_lm(nn):
    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(10000, 200)
            self.rnn = nn.LSTM(200, 200, 2)
            self.decoder = nn.Linear(200, 10000)

        def forward(self, x):
            out, _ = self.rnn(self.encoder(x))
            return self.decoder(out).reshape(-1, 10000)

    return LM()


MODELS = {
    "mlp": (mlp, lambda r: (r.standard_normal((128, 784)).astype(np.float32),
                            r.integers(0, 10, 128))),
    "lenet": (lenet, lambda r: (r.standard_normal((64, 1, 28, 28)).astype(np.float32),
                                r.integers(0, 10, 64))),
    "lm": (word_lm, lambda r: (r.integers(0, 10000, (35, 20)), r.integers(0, 10000, 700))),
}


def time_steps(step, steps, warmup=3):
    """Median ms of ``step`` over ``steps`` calls after ``warmup``."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def time_interleaved(steps_by_name, steps, warmup=3):
    """Median ms per step of each callable, run alternately so that both see the same machine
    load (a busy machine slows both instead of skewing the ratio), each after ``settle``."""
    for _ in range(warmup):
        for fn in steps_by_name.values():
            fn()
    times = {k: [] for k in steps_by_name}
    for _ in range(steps):
        for k, fn in steps_by_name.items():
            settle()
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def ember_step(builder, x, y):
    import ember
    from ember import nn, optim
    ember.manual_seed(0)
    model = builder(nn)
    opt = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xt, yt = ember.tensor(x), ember.tensor(y)

    def step():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
    return step


def torch_step(builder, x, y):
    import torch
    torch.manual_seed(0)
    model = builder(torch.nn)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--only", default="mlp,lenet,lm")
    args = ap.parse_args()
    import ember
    ember.set_num_threads(args.threads)
    try:
        import torch
        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        print(f"{var} = {os.environ[var]!r}" if var in os.environ else f"{var} is not set")
    print(f"threads: {args.threads}; median of {args.steps} steps after 3 warm-up steps")
    print(f"{'model':8s} {'ember ms':>10s} {'torch ms':>10s} {'ratio':>7s}")
    for name in args.only.split(","):
        builder, data = MODELS[name]
        x, y = data(np.random.default_rng(0))
        if torch is not None:
            r = time_interleaved({"ember": ember_step(builder, x, y),
                                  "torch": torch_step(builder, x, y)}, args.steps)
            e, t = r["ember"], r["torch"]
            print(f"{name:8s} {e:10.2f} {t:10.2f} {e / t:7.2f}")
        else:
            e = time_steps(ember_step(builder, x, y), args.steps)
            print(f"{name:8s} {e:10.2f} {'-':>10s} {'-':>7s}")


if __name__ == "__main__":
    main()
