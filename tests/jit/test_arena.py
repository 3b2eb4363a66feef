"""The programs of one compiled function and their memory plans (ember/jit/arena.py): by
default in-place reuse only, no arena; with the arena, buffers shared by shape and dtype across
the forward and backward programs, the same gradients as without and as eager, values saved
for the backward never overwritten by a later forward, nothing returned in arena memory, and a
busy arena (another thread, a call from inside a program) never written by two calls."""
import copy
import threading

import numpy as np
import pytest

import ember
from ember.compiler.frontend import CompiledAutograd
from ember.jit import arena as arena_mod
from ember.jit.arena import shared_buffers
from ember.jit.passes.memory import MemoryPlan
from tests.compiler.models import LeNet5, MLP

f64 = ember.float64


class Attention(ember.nn.Module):
    """A product whose (rows x rows) scores the forward does not save (softmax's backward reads
    its output) and the backward has a temporary of the same shape: one buffer for both."""

    def __init__(self):
        super().__init__()
        self.fc = ember.nn.Linear(20, 20)

    def forward(self, x):
        return ember.softmax(self.fc(x) @ x.t(), -1) @ x


SHAPES = {MLP: (16, 20), LeNet5: (8, 1, 28, 28), Attention: (16, 20)}
THREAD_BATCH = 256


def _plan(*buffers):
    p = MemoryPlan()
    p.buffers = [(s, np.dtype(d)) for s, d in buffers]
    return p


def test_shared_buffers_share_the_kth_buffer_of_a_shape_and_dtype():
    a = _plan(((4, 3), "f8"), ((4, 3), "f8"), ((2,), "f4"))
    b = _plan(((4, 3), "f8"), ((2,), "f8"), ((4, 3), "f8"), ((4, 3), "f8"))
    arena_a, arena_b = shared_buffers([a, b])
    assert [x.shape for x in arena_a] == [(4, 3), (4, 3), (2,)]
    assert [x.dtype for x in arena_b] == [np.dtype("f8")] * 4
    assert arena_a[0] is arena_b[0] and arena_a[1] is arena_b[2]
    assert arena_b[3] is not arena_a[0] and arena_b[3] is not arena_a[1]
    assert arena_a[2] is not arena_b[1]          # same shape, other dtype
    # per (shape, dtype) the most any one plan needs: 3 + 1 + 1 arrays, not 3 + 2 + 1 + 1
    distinct = {id(x) for x in arena_a + arena_b}
    assert len(distinct) == 5


def _runs(cls, planned, monkeypatch, calls=3, shape=None):
    """Gradients of ``calls`` forward + backward passes of a compiled ``cls`` (float64), the
    eager twin's, and the compiled entry's runner."""
    ember.compiler.reset()
    monkeypatch.setattr(arena_mod, "ARENA", planned)
    ember.manual_seed(0)
    eager = cls().double()
    twin = copy.deepcopy(eager)
    compiled = ember.compile(twin)
    rng = np.random.default_rng(1)
    grads = []
    for _ in range(calls):
        x = ember.tensor(rng.standard_normal(shape or SHAPES[cls]), dtype=f64)
        for m in (eager, twin):
            m.zero_grad()
        eager(x).pow(2).sum().backward()
        out = compiled(x)
        out.pow(2).sum().backward()
        for p, q in zip(eager.parameters(), twin.parameters()):
            np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=0, atol=1e-12)
        grads.append([q.grad.numpy() for q in twin.parameters()] + [out.detach().numpy()])
    return grads, compiled._compiled._last.traced


def test_by_default_the_programs_reuse_dying_arguments_and_keep_no_arena():
    assert arena_mod.ARENA is False
    ember.compiler.reset()
    ember.manual_seed(0)
    compiled = ember.compile(MLP().double())
    x = ember.tensor(np.random.default_rng(1).standard_normal(SHAPES[MLP]), dtype=f64)
    for _ in range(3):
        compiled(x).pow(2).sum().backward()
    runner = compiled._compiled._last.traced
    assert isinstance(runner, CompiledAutograd)
    assert not isinstance(runner._fwd, arena_mod.Program) and "arena_" not in runner.code
    assert runner.plan.into and runner.backward_plan.into
    assert not runner.plan.buffers and not runner.backward_plan.buffers


@pytest.mark.parametrize("cls", [Attention, MLP, LeNet5])
def test_forward_and_backward_share_one_arena(cls, monkeypatch):
    grads, runner = _runs(cls, True, monkeypatch)
    plain, runner0 = _runs(cls, False, monkeypatch)
    assert isinstance(runner, CompiledAutograd) and isinstance(runner0, CompiledAutograd)
    fwd, bwd = runner._fwd, runner._bwd
    assert len(bwd.plan.buffers) and "arena_" in runner.backward_code
    if cls is Attention:
        assert any(a is b for a in fwd.arena for b in bwd.arena)
    assert not isinstance(runner0._fwd, arena_mod.Program) and "arena_" not in runner0.code
    arena = fwd.arena + bwd.arena
    for step, step0 in zip(grads, plain):      # results of earlier calls unchanged
        for g, g0 in zip(step, step0):
            np.testing.assert_array_equal(g, g0)
            assert not any(np.shares_memory(g, a) for a in arena)


@pytest.mark.parametrize("arena", [True, False])
def test_values_saved_by_one_forward_survive_the_next_forward(arena, monkeypatch):
    """Two forwards, then one backward through both: what the first forward saved for its
    backward is not memory the second forward reuses."""
    ember.compiler.reset()
    monkeypatch.setattr(arena_mod, "ARENA", arena)
    ember.manual_seed(0)
    eager = LeNet5().double()
    twin = copy.deepcopy(eager)
    compiled = ember.compile(twin)
    rng = np.random.default_rng(2)
    for _ in range(3):
        x1, x2 = (ember.tensor(rng.standard_normal(SHAPES[LeNet5]), dtype=f64)
                  for _ in range(2))
        for m in (eager, twin):
            m.zero_grad()
        (eager(x1).pow(2).sum() + eager(x2).sin().sum()).backward()
        (compiled(x1).pow(2).sum() + compiled(x2).sin().sum()).backward()
        for p, q in zip(eager.parameters(), twin.parameters()):
            np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=0, atol=1e-12)
    assert isinstance(compiled._compiled._last.traced, CompiledAutograd)


def test_a_call_that_finds_the_arena_busy_runs_unplanned(monkeypatch):
    grads, runner = _runs(MLP, True, monkeypatch, calls=1)
    assert runner._fwd._unplanned is None
    ember.manual_seed(0)
    eager = MLP().double()
    x = ember.tensor(np.random.default_rng(1).standard_normal(SHAPES[MLP]), dtype=f64)
    arrays = [x.numpy()] + [t._data for t in runner.fallback.state_tensors()]
    expected = runner._fwd.fn(*arrays)
    with runner._fwd._lock:       # as a thread running the backward would hold it
        got = runner._fwd(*arrays)
    assert runner._fwd._unplanned is not None and runner._bwd._unplanned is None
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)
    eager(x)    # (the twin's parameters are eager's: the outputs above are the model's)


def test_threads_running_the_programs_at_once_get_their_own_results(monkeypatch):
    """(Without the arena's lock this fails: the threads' GEMMs write the same buffers.)"""
    _, runner = _runs(MLP, True, monkeypatch, calls=1, shape=(THREAD_BATCH, 20))
    params = [t._data for t in runner.fallback.state_tensors()]
    rng = np.random.default_rng(3)
    inputs = [[rng.standard_normal((THREAD_BATCH, 20))] + params for _ in range(2)]
    expected = [runner._fwd.unplanned(*a) for a in inputs]
    failures = []
    start = threading.Barrier(2)

    def work(k):
        start.wait()
        for _ in range(200):
            got = runner._fwd(*inputs[k])
            if not all(np.array_equal(a, b) for a, b in zip(got, expected[k])):
                failures.append(k)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads) and failures == []
