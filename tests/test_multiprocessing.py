"""ember.multiprocessing: tensors shared between processes through shared memory (fork and
spawn), Queue passing, Hogwild training of a shared model, spawn's error propagation, the
lifetime of shared blocks, and examples/mnist_hogwild.py. Every child process runs under a hard
timeout (join with a timeout, then kill)."""
import copy
import gc
import multiprocessing
import os
import pickle
import re
import subprocess
import sys
import time
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

import ember
import ember.multiprocessing as mp
from ember import nn
from ember.errors import EmberRuntimeError, EmberTypeError, UnsupportedError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 60
METHODS = ["fork", "spawn"]
# spawn starts a fresh interpreter per child (about a second each on a loaded 2-core machine)
START_METHODS = ["fork", pytest.param("spawn", marks=pytest.mark.slow)]


def _run(ctx, target, *args, n=1, timeout=TIMEOUT):
    """Start ``n`` processes of ``target(i, *args)`` and join them under a hard timeout;
    fails unless every one exits with 0."""
    procs = [ctx.Process(target=target, args=(i,) + args) for i in range(n)]
    for p in procs:
        p.start()
    end = time.monotonic() + timeout
    for p in procs:
        p.join(max(0.0, end - time.monotonic()))
    hung = [p for p in procs if p.is_alive()]
    for p in hung:
        p.kill()
        p.join()
    assert not hung, f"{len(hung)} child process(es) still running after {timeout} s"
    assert [p.exitcode for p in procs] == [0] * n


# ---------------------------------------------------------------------------- in one process
def test_share_memory_moves_data_in_place_and_keeps_view_semantics():
    t = ember.arange(12.0).reshape(3, 4)
    assert not t.is_shared()
    version = t._version
    assert t.share_memory_() is t
    assert t.is_shared() and t._version == version
    assert t.tolist() == np.arange(12.0).reshape(3, 4).tolist()
    for v in (t[1], t.t(), t.view(-1), t[:, ::2], t.detach()):
        assert v.is_shared()
    v = t[1]
    v.add_(100)
    assert t[1].tolist() == [104.0, 105.0, 106.0, 107.0]
    assert t._version == v._version == version + 1  # one counter for a tensor and its views
    assert t.share_memory_() is t and t.is_shared()  # already shared: nothing moves


def test_share_memory_keeps_strides_and_handles_empty():
    t = ember.from_numpy(np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3)))
    strides = t.stride()
    t.share_memory_()
    assert t.stride() == strides and t.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    e = ember.zeros(0, 3).share_memory_()
    assert e.is_shared() and e.shape == (0, 3)


def test_share_memory_of_a_view_moves_its_base():
    x = ember.zeros(5)
    v = x[1:3]
    v.share_memory_()
    assert v.is_shared() and x.is_shared()
    v.fill_(7)
    assert x.tolist() == [0.0, 7.0, 7.0, 0.0, 0.0]


def test_module_share_memory_shares_parameters_and_buffers_not_grads():
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    model(ember.randn(4, 3)).sum().backward()
    assert model.share_memory() is model
    for name, p in model.named_parameters():
        assert p.is_shared(), name
        assert p.grad is not None and not p.grad.is_shared(), name
    assert model[1].running_mean.is_shared()
    model.zero_grad()
    model(ember.randn(4, 3)).sum().backward()
    assert not any(p.grad.is_shared() for p in model.parameters())


def test_forking_pickler_round_trip_shares_memory_and_drops_grad():
    p = nn.Parameter(ember.ones(3))
    p.grad = ember.full((3,), 5.0)
    q = ForkingPickler.loads(ForkingPickler.dumps(p))
    assert type(q) is nn.Parameter and q.requires_grad and q.grad is None
    assert p.is_shared() and q.is_shared()
    with ember.no_grad():
        q.mul_(3)
    assert p.tolist() == [3.0, 3.0, 3.0]


def test_plain_pickle_still_refuses_tensors():
    with pytest.raises(EmberTypeError, match="not picklable"):
        pickle.dumps(ember.ones(2))


def test_non_leaf_requiring_grad_is_refused():
    y = ember.ones(2, requires_grad=True) * 2
    with pytest.raises(EmberRuntimeError, match="non-leaf tensor which requires_grad"):
        ForkingPickler.dumps(y)
    assert ForkingPickler.loads(ForkingPickler.dumps(y.detach())).tolist() == [2.0, 2.0]


def test_sharing_strategies():
    assert mp.get_sharing_strategy() == "file_descriptor"
    assert mp.get_all_sharing_strategies() == {"file_descriptor"}
    mp.set_sharing_strategy("file_descriptor")
    with pytest.raises(UnsupportedError, match="file_system"):
        mp.set_sharing_strategy("file_system")
    with pytest.raises(EmberRuntimeError, match="invalid sharing strategy"):
        mp.set_sharing_strategy("nope")


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


def _double_from_queue(i, q, done):
    t = q.get(timeout=TIMEOUT)
    t.mul_(2)
    done.put(t.is_shared())


def _send_back(i, q, ack, out):
    t = ember.arange(3.0)
    q.put(t)
    assert ack.wait(TIMEOUT)  # the sender stays alive until the receiver has mapped it
    out.put(t.tolist())


@pytest.mark.parametrize("method", START_METHODS)
def test_queue_passes_tensors_through_shared_memory(method):
    ctx = mp.get_context(method)
    q, done = ctx.Queue(), ctx.Queue()
    t = ember.ones(3)
    p = ctx.Process(target=_double_from_queue, args=(0, q, done))
    p.start()
    q.put(t)
    assert done.get(timeout=TIMEOUT) is True
    p.join(TIMEOUT)
    assert p.exitcode == 0
    assert t.is_shared() and t.tolist() == [2.0, 2.0, 2.0]  # moved into shared memory by put

    ack, out = ctx.Event(), ctx.Queue()
    p = ctx.Process(target=_send_back, args=(0, q, ack, out))
    p.start()
    try:
        r = q.get(timeout=TIMEOUT)
        assert r.is_shared() and r.tolist() == [0.0, 1.0, 2.0]
        r.add_(10)
        ack.set()
        assert out.get(timeout=TIMEOUT) == [10.0, 11.0, 12.0]
    finally:
        p.join(TIMEOUT)
        if p.is_alive():
            p.kill()
            p.join()
    assert p.exitcode == 0


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
    _run(mp.get_context(method), _train_head, model, 20, n=2)
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
    _run(ctx, _constant_grad_steps, w, ctx.Lock(), 25, n=2)
    assert w.tolist() == [-0.5 * 25 * 3 * c for c in (1.0, 2.0, 4.0)]


# ---------------------------------------------------------------------------- spawn
def _spawned(i, t, fail):
    if fail == "raise" and i == 1:
        raise ValueError(f"boom in process {i}")
    if fail == "exit" and i == 1:
        os._exit(3)
    if fail:
        time.sleep(TIMEOUT)  # terminated by the parent once process 1 failed
    t[i] = float(i + 1)


def test_spawn_runs_fn_with_index_and_shares_tensors():
    t = ember.zeros(2).share_memory_()
    ctx = mp.spawn(_spawned, args=(t, None), nprocs=2, join=False)
    assert isinstance(ctx, mp.ProcessContext) and len(ctx.pids()) == 2
    end = time.monotonic() + TIMEOUT
    while not ctx.join(timeout=1):
        assert time.monotonic() < end, "spawned processes did not finish"
    assert t.tolist() == [1.0, 2.0]


def test_spawn_raises_a_child_exception_with_its_index_and_traceback():
    start = time.monotonic()
    with pytest.raises(mp.ProcessRaisedException) as info:
        mp.spawn(_spawned, args=(ember.zeros(2), "raise"), nprocs=2)
    e = info.value
    assert e.error_index == 1 and isinstance(e.error_pid, int)
    assert "process 1" in str(e) and "Traceback (most recent call last)" in str(e)
    assert "ValueError: boom in process 1" in str(e) and "_spawned" in str(e)
    assert time.monotonic() - start < TIMEOUT  # process 0 was terminated, not waited for


def test_spawn_reports_a_child_that_exits_without_raising():
    with pytest.raises(mp.ProcessExitedException, match="exit code 3") as info:
        mp.start_processes(_spawned, args=(ember.zeros(2), "exit"), nprocs=2,
                           start_method="fork")
    assert info.value.error_index == 1 and info.value.exit_code == 3


def test_spawn_warns_for_another_start_method():
    t = ember.zeros(1).share_memory_()
    with pytest.warns(FutureWarning, match="start_processes"):
        mp.spawn(_spawned, args=(t, None), nprocs=1, start_method="fork")
    assert t.tolist() == [1.0]


# ---------------------------------------------------------------------------- lifetime
def _memfd_state():
    """(mappings, open descriptors) of ember's shared blocks in this process."""
    with open("/proc/self/maps") as f:
        maps = sum("ember-shared-tensor" in line for line in f)
    fds = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds += "ember-shared-tensor" in os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return maps, fds


def _memfd_state_settles_to(expected, wait=3.0):
    """Whether ``_memfd_state()`` reaches ``expected`` within ``wait`` seconds (collecting
    garbage between looks): a descriptor another test's finishing thread still holds for a
    moment is not this test's leak, a leaked one stays."""
    deadline = time.monotonic() + wait
    while True:
        state = _memfd_state()
        if state == expected or time.monotonic() > deadline:
            return state == expected
        gc.collect()
        time.sleep(0.05)


def _touch(i, t, q):
    t += 1
    q.put(t.is_shared())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and /dev/shm")
def test_shared_blocks_are_freed_when_no_process_needs_them():
    gc.collect()
    shm_before = set(os.listdir("/dev/shm"))
    base = _memfd_state()
    for _ in range(20):   # a steady starting point (see _memfd_state_settles_to)
        time.sleep(0.05)
        gc.collect()
        base, last = _memfd_state(), base
        if base == last:
            break
    for method in METHODS:
        ctx = mp.get_context(method)
        t = ember.zeros(1000).share_memory_()
        q = ctx.Queue()
        assert _memfd_state_settles_to((base[0] + 1, base[1] + 1)), (_memfd_state(), base)
        _run(ctx, _touch, t, q)
        q.put(ember.ones(10))  # a second block, sent to nobody: its descriptor is handed on
        assert q.get(timeout=TIMEOUT) is True and q.get(timeout=TIMEOUT).tolist() == [1.0] * 10
        assert t.sum().item() == 1000.0
        del t, q
    gc.collect()
    assert _memfd_state_settles_to(base), (_memfd_state(), base)
    # ember's blocks have no name: nothing of theirs is ever left in /dev/shm
    assert not [n for n in set(os.listdir("/dev/shm")) - shm_before if "ember" in n]


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
