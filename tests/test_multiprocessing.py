"""ember.multiprocessing: the re-exported multiprocessing API, tensors written by parent and
child through shared memory (fork and spawn), Pool workers writing one shared tensor, Hogwild
training of a shared model, and examples/mnist_hogwild.py. Every child process runs under a hard
timeout (join with a timeout, then kill)."""
import copy
import multiprocessing
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.multiprocessing as mp
from ember import nn
from tests.multiprocessing.processes import START_METHODS, TIMEOUT, run_children

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_reexports_the_multiprocessing_api():
    assert ember.multiprocessing is mp
    for name in ("Process", "Queue", "SimpleQueue", "Pool", "Lock", "Event", "Manager",
                 "get_context", "set_start_method", "get_start_method", "cpu_count",
                 "current_process", "Pipe"):
        assert getattr(mp, name) is getattr(multiprocessing, name), name
        assert name in mp.__all__
    assert {"spawn", "start_processes", "ProcessContext", "ProcessRaisedException",
            "ProcessExitedException", "set_sharing_strategy"} <= set(mp.__all__)


# ---------------------------------------------------------------------------- across processes
def _see_and_write(i, t, v, ready, go, out):
    out.put(("start", t.is_shared(), t.tolist()))
    ready.set()
    assert go.wait(TIMEOUT)
    out.put(("later", t.tolist()))  # written by the parent after this process started
    t[0] = -1.0
    v.fill_(9.0)  # a view: lands in t


@pytest.mark.parametrize("method", START_METHODS)
def test_parent_and_child_see_each_others_writes(method):
    ctx = mp.get_context(method)
    t = ember.zeros(4).share_memory_()
    t[3] = 3.0
    ready, go, out = ctx.Event(), ctx.Event(), ctx.Queue()
    p = ctx.Process(target=_see_and_write, args=(0, t, t[1:3], ready, go, out))
    p.start()
    try:
        assert ready.wait(TIMEOUT)
        assert out.get(timeout=TIMEOUT) == ("start", True, [0.0, 0.0, 0.0, 3.0])
        t[2] = 5.0
        go.set()
        assert out.get(timeout=TIMEOUT) == ("later", [0.0, 0.0, 5.0, 3.0])
    finally:
        p.join(TIMEOUT)
        if p.is_alive():
            p.kill()
            p.join()
    assert p.exitcode == 0
    assert t.tolist() == [-1.0, 9.0, 9.0, 3.0]


def _fill(args):
    t, i = args
    t[i] = float(i + 1)
    return i


def test_pool_map_writes_into_a_shared_tensor():
    # each worker's t[i] = ... writes element i only, as torch: a setitem that wrote the whole
    # tensor back undid the other worker's write made meanwhile (1-9 rounds in 40 lost one)
    for _ in range(30):
        t = ember.zeros(4).share_memory_()
        with mp.get_context("fork").Pool(2) as pool:
            assert pool.map_async(_fill, [(t, i) for i in range(4)]).get(TIMEOUT) == [0, 1, 2, 3]
        assert t.tolist() == [1.0, 2.0, 3.0, 4.0]


# ---------------------------------------------------------------------------- Hogwild
class _TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(3, 2), nn.Linear(3, 2)])


def _train_head(rank, model, steps):
    """SGD with momentum on head ``rank`` only, on data seeded by ``rank``: disjoint updates."""
    head = model.heads[rank]
    opt = ember.optim.SGD(head.parameters(), lr=0.1, momentum=0.9)
    g = ember.Generator().manual_seed(rank)
    for _ in range(steps):
        x = ember.randn(8, 3, generator=g)
        y = ember.randn(8, 2, generator=g)
        opt.zero_grad()
        nn.functional.mse_loss(head(x), y).backward()
        opt.step()


@pytest.mark.parametrize("method", START_METHODS)
def test_hogwild_updates_of_each_process_land_in_the_shared_model(method):
    ember.manual_seed(0)
    model = _TwoHeads()
    expected = copy.deepcopy(model)
    for rank in range(2):
        _train_head(rank, expected, 20)
    model.share_memory()
    before = [p.detach().clone() for p in model.parameters()]
    run_children(mp.get_context(method), _train_head, model, 20, n=2)
    for b, p, e in zip(before, model.parameters(), expected.parameters()):
        assert not np.array_equal(p.detach().numpy(), b.numpy())
        np.testing.assert_array_equal(p.detach().numpy(), e.detach().numpy())


def _constant_grad_steps(rank, w, lock, steps):
    opt = ember.optim.SGD([w], lr=0.5)
    c = ember.tensor([1.0, 2.0, 4.0]) * (rank + 1)
    for _ in range(steps):
        opt.zero_grad()
        (w * c).sum().backward()  # gradient c: updates commute, so the total is exact
        with lock:
            opt.step()


def test_hogwild_updates_of_two_processes_on_the_same_parameter_under_a_lock():
    ctx = mp.get_context("fork")
    w = nn.Parameter(ember.zeros(3)).share_memory_()
    run_children(ctx, _constant_grad_steps, w, ctx.Lock(), 25, n=2)
    assert w.tolist() == [-0.5 * 25 * 3 * c for c in (1.0, 2.0, 4.0)]


# ---------------------------------------------------------------------------- the example
@pytest.mark.slow
def test_mnist_hogwild_example_trains_the_shared_model():
    cmd = [sys.executable, os.path.join(ROOT, "examples", "mnist_hogwild.py"), "--epochs", "3",
           "--num-processes", "2", "--log-interval", "5"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    losses = {}
    for pid, loss in re.findall(r"^(\d+)\tTrain Epoch: \d+ .*Loss: ([0-9.]+)$", p.stdout, re.M):
        losses.setdefault(pid, []).append(float(loss))
    assert len(losses) == 2, p.stdout  # two training processes, each logging
    for pid, ls in losses.items():
        assert ls[-1] < ls[0], (pid, ls)
    m = re.search(r"Test set: Average loss: ([0-9.]+), Accuracy: (\d+)/(\d+)", p.stdout)
    assert m, p.stdout
    loss, correct, total = float(m[1]), int(m[2]), int(m[3])
    assert total == 297 and correct / total > 0.5 and loss < 2.0, p.stdout  # chance: 0.1, 2.3
