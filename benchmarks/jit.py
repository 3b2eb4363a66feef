#!/usr/bin/env python3
"""Inference latency of the tracing JIT: MLP and LeNet(BatchNorm), batch 1 and 64.

Columns: ember eager, ember traced (unoptimised), ember traced + optimised (frozen, batch norm
folded), torch eager, torch.jit.trace. All under no_grad / inference, eval mode, same weights.
Times are medians of repeated runs (microseconds). Usage: ``python benchmarks/jit.py``.
"""
import os
import sys
import time

# torch's OpenMP threads spin after each op by default and steal the cores from the ember runs
# interleaved with them; make them sleep instead
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ember  # noqa: E402
import ember.jit  # noqa: E402
from tests.jit.models import LeNetBN, MLP  # noqa: E402


def _median_us(fn, x, seconds=0.4, min_runs=20):
    for _ in range(5):
        fn(x)
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < min_runs:
        t0 = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e6


def build(kind, lib):
    nn = lib.nn
    if kind == "MLP":
        return nn.Sequential(nn.Flatten(), nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 32),
                             nn.ReLU(), nn.Linear(32, 10))
    return nn.Sequential(nn.Conv2d(1, 6, 5), nn.BatchNorm2d(6), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 16, 3), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(144, 40), nn.BatchNorm1d(40), nn.ReLU(),
                         nn.Linear(40, 10))


def models(kind):
    """(ember model, torch model) with equal weights and random BN statistics, eval mode."""
    import torch
    tm = build(kind, torch)
    rng = np.random.default_rng(0)
    with torch.no_grad():
        for k, v in tm.state_dict().items():
            if v.dtype.is_floating_point:
                if k.endswith("running_var"):
                    v.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, v.shape).astype(np.float32)))
                elif k.endswith("running_mean"):
                    v.copy_(torch.from_numpy(rng.normal(0, 0.1, v.shape).astype(np.float32)))
    tm.eval()
    try:
        em = build(kind, ember)
        em.load_state_dict({k: ember.tensor(v.numpy().copy()) for k, v in tm.state_dict().items()})
    except (AttributeError, ImportError):  # no ember.nn: the functional test models
        em = (MLP if kind == "MLP" else LeNetBN)()
        state = dict(em.named_parameters())
        state.update(em.named_buffers())
        names = {"MLP": {"1": "fc1", "3": "fc2", "5": "fc3"},
                 "LeNet-BN": {"0": "conv1", "1": "bn1", "4": "conv2", "5": "bn2", "9": "fc1",
                              "10": "bn3", "12": "fc2"}}[kind]
        for k, v in tm.state_dict().items():
            i, _, rest = k.partition(".")
            key = f"{names[i]}.{rest}"
            if key in state:
                state[key]._data[...] = v.numpy()
    return em.eval(), tm


def bench(name, model, tmodel, shape, batch, out):
    import torch
    shape = (batch,) + tuple(shape[1:])
    x = ember.tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    tx = torch.from_numpy(x._data.copy())
    traced = ember.jit.trace(model, (x,))
    fast = ember.jit.optimize(traced)
    ttraced = torch.jit.trace(tmodel, (tx,))
    row = {}
    with ember.no_grad():
        ref = model(x)
        assert np.allclose(fast(x)._data, ref._data, atol=1e-4)
        row["ember eager"] = _median_us(model, x)
        row["traced"] = _median_us(traced, x)
        row["traced+opt"] = _median_us(fast, x)
    with torch.inference_mode():
        assert np.allclose(tmodel(tx).numpy(), ref._data, atol=1e-4)
        row["torch eager"] = _median_us(tmodel, tx)
        row["torch.jit.trace"] = _median_us(ttraced, tx)
    out.append((name, batch, row))


def main():
    import torch
    torch.set_num_threads(max(1, ember.get_num_threads()))
    out = []
    shapes = {"MLP": (1, 20), "LeNet-BN": (1, 1, 20, 20)}
    for kind in ("MLP", "LeNet-BN"):
        em, tm = models(kind)
        for batch in (1, 64):
            bench(kind, em, tm, shapes[kind], batch, out)
    cols = ["ember eager", "traced", "traced+opt", "torch eager", "torch.jit.trace"]
    print(f"{'model':10s} {'batch':>5s} " + " ".join(f"{c:>16s}" for c in cols)
          + f" {'opt/eager':>10s}")
    for name, batch, row in out:
        print(f"{name:10s} {batch:5d} " + " ".join(f"{row[c]:14.1f}us" for c in cols)
              + f" {row['traced+opt'] / row['ember eager']:10.2f}")


if __name__ == "__main__":
    main()
