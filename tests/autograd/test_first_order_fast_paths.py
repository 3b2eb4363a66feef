"""First-order backward fast paths (linear, relu, nll_loss): the NumPy path a backward without
create_graph takes gives the same bits as the ember-op path create_graph takes."""
import numpy as np
import pytest

import ember
from ember.autograd import formulas as F
from ember.kernels import nn as K


def _grads(fn, inputs, create_graph):
    out = fn(*inputs)
    g = ember.tensor(np.random.default_rng(1).standard_normal(out.shape).astype(
        out.detach().numpy().dtype))
    return ember.autograd.grad(out, inputs, g, create_graph=create_graph)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4)])
def test_linear_backward_numpy_path_matches_ember_ops(dtype, shape):
    r = np.random.default_rng(0)
    x = ember.tensor(r.standard_normal(shape).astype(dtype), requires_grad=True)
    w = ember.tensor(r.standard_normal((6, 4)).astype(dtype), requires_grad=True)
    b = ember.tensor(r.standard_normal(6).astype(dtype), requires_grad=True)
    fast = _grads(ember.nn.functional.linear, (x, w, b), False)
    slow = _grads(ember.nn.functional.linear, (x, w, b), True)
    for f, s in zip(fast, slow):
        assert f.grad_fn is None
        assert f.numpy().dtype == dtype and f.shape == s.shape
        assert f.numpy().tobytes() == s.detach().numpy().tobytes()
    assert slow[1].grad_fn is not None   # create_graph still records the gradient's graph


def test_linear_backward_fast_path_needs_grad_mode_off():
    g = ember.ones(3, 2)
    w = ember.ones(2, 4)
    with ember.enable_grad():
        assert not F._numpy_first_order(g, w)
    with ember.no_grad():
        assert F._numpy_first_order(g, w)
        assert not F._numpy_first_order(g, w.double())
        assert not F._numpy_first_order(g.half(), w.half())


def test_relu_backward_zero_at_nonpositive_even_for_nan_gradient():
    x = ember.tensor([-1.0, 0.0, 2.0, 3.0], requires_grad=True)
    y = ember.relu(x)
    y.backward(ember.tensor([np.nan, np.nan, 5.0, np.nan]))
    got = x.grad.numpy()
    assert got[0] == 0 and got[1] == 0 and got[2] == 5 and np.isnan(got[3])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_nll_loss_plain_path_matches_weighted_path(dtype, reduction):
    r = np.random.default_rng(0)
    x = (r.standard_normal((37, 11)) * 10).astype(dtype)
    t = r.integers(0, 11, 37)
    ones = np.ones(11, dtype)       # a weight takes the general path: the same values
    assert K._nll_plain(x.shape, x.dtype, t, None, reduction, -100)
    assert not K._nll_plain(x.shape, x.dtype, t, ones, reduction, -100)
    assert K.nll_loss(x, t, None, reduction).tobytes() == \
        K.nll_loss(x, t, ones, reduction).tobytes()
    g = np.asarray(dtype(0.37))
    assert K.nll_loss_backward(g, t, None, x.shape, reduction).tobytes() == \
        K.nll_loss_backward(g, t, ones, x.shape, reduction).tobytes()


def test_nll_loss_ignored_or_bad_target_takes_the_general_path():
    x = np.zeros((3, 4), np.float32)
    assert not K._nll_plain(x.shape, x.dtype, np.array([0, 2, 3]), None, "mean", 2)
    assert not K._nll_plain(x.shape, x.dtype, np.array([0, 4, 3]), None, "mean", -100)
    assert not K._nll_plain(x.shape, x.dtype, np.array([0, 1, 3]), None, "none", -100)
    loss = K.nll_loss(np.log(np.full((3, 4), 0.25, np.float32)), np.array([0, 2, 3]), None,
                      "mean", 2)
    assert np.isclose(loss, np.log(4.0))
    with pytest.raises(IndexError):
        K.nll_loss(x, np.array([0, 4, 3]))


def test_log_softmax_rows_read_at_argmax_keep_nan_inf_and_signed_zeros():
    x = np.array([[np.nan, 1, 2], [1, np.nan, np.inf], [np.inf, np.inf, 1],
                  [-0.0, 0.0, -1], [0.0, -0.0, 3], [-0.0, -1e30, -1e30], [1, 2, 3]],
                 np.float32)
    with np.errstate(invalid="ignore"):
        got = K.log_softmax(x, 1)
        want = x - np.max(x, axis=1, keepdims=True)
        want -= np.log(np.sum(np.exp(want), axis=1, keepdims=True))
    assert got.tobytes() == want.tobytes()


class _FakeNode:
    _saved = ("kept",)

    def __init__(self, kept):
        self.kept = kept


def test_engine_claims_fresh_results_only():
    from ember.autograd.engine import _claims
    T = ember.Tensor._make
    base = np.zeros((4, 3), np.float32)
    saved = np.ones((2, 2), np.float32)
    incoming = T(np.ones((2, 3), np.float32))
    fresh = T(np.zeros((2, 2), np.float32))
    node = _FakeNode(T(saved))
    # three results on one buffer: none owned; a saved tensor's memory: not owned
    assert _claims(node, [incoming], (True,), [T(base[:2]), T(base[2:]), T(base)]) == \
        [False, False, False]
    assert _claims(node, [incoming], (True,), [T(saved), fresh, None]) == [False, True, False]
    # an incoming gradient passed on keeps that gradient's ownership
    assert _claims(node, [incoming], (True,), [T(incoming._data[:1])]) == [True]
    assert _claims(node, [incoming], (False,), [T(incoming._data[:1])]) == [False]
