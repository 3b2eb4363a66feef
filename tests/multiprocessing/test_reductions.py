"""How tensors cross a process boundary (ember/multiprocessing/reductions.py): ForkingPickler
round trips share memory and drop .grad, plain pickle still refuses, a non-leaf requiring grad
is refused, the sharing strategies, and Queue passing in both directions (fork and spawn)."""
import pickle
from multiprocessing.reduction import ForkingPickler

import pytest

import ember
import ember.multiprocessing as mp
from ember import nn
from ember.errors import EmberRuntimeError, EmberTypeError, UnsupportedError
from tests.multiprocessing.processes import START_METHODS, TIMEOUT


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
