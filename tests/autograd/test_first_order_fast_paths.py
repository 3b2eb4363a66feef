"""First-order backward fast paths: the ``backward_kernel`` of an op in the spec runs for a
backward without create_graph, its formula under create_graph, with the same bits (linear,
relu, nll_loss, ...)."""
import importlib
import os

import numpy as np
import pytest

import ember
from ember.autograd import formulas as F
from ember.autograd._generated import functions as G
from ember.kernels import nn as K
from tests.autograd.spec_samples import load_spec, parse_signature

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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


def _f(*shape, dtype=np.float32):
    return ember.tensor(np.random.default_rng(len(shape)).standard_normal(shape).astype(dtype),
                        requires_grad=True)


# op -> (its formula in ember.autograd.formulas, inputs, the call); the kernel from the spec
_KERNEL_CASES = {
    "linear": ("linear_input_grad", lambda: (_f(3, 4), _f(5, 4), _f(5)), G.linear),
    "relu": ("relu_grad", lambda: (_f(3, 4),), G.relu),
    "gelu": ("gelu_grad", lambda: (_f(1 << 15),), G.gelu),
    "layer_norm": ("layer_norm_grads", lambda: (_f(3, 4), _f(4), _f(4)),
                   lambda x, w, b: G.layer_norm(x, (4,), w, b)),
    "log_softmax": ("log_softmax_grad", lambda: (_f(3, 4),), lambda x: G.log_softmax(x, 1)),
    "softmax": ("softmax_grad", lambda: (_f(256, 128),), lambda x: G.softmax(x, -1)),
    "cumsum": ("cumsum_grad", lambda: (_f(6, 40),), lambda x: G.cumsum(x, 1)),
    "cross_entropy_loss": ("cross_entropy_loss_grad", lambda: (_f(3, 4),),
                           lambda x: G.cross_entropy_loss(x, ember.tensor([0, 3, 1]))),
    "native_batch_norm": ("batch_norm_grads", lambda: (_f(4, 3), _f(3), _f(3)),
                          lambda x, w, b: G.native_batch_norm(x, w, b, None, None, True, 0.1,
                                                              1e-5)),
    "lstm_step": ("lstm_step_grads", lambda: (_f(3, 8), _f(3, 2), _f(3, 2), _f(8, 2)),
                  G.lstm_step),
    "gru_step": ("gru_step_grads", lambda: (_f(3, 6), _f(3, 2), _f(6, 2), _f(6)), G.gru_step),
    "scaled_dot_product_attention_fused": (
        "sdpa_grads", lambda: (_f(2, 3, 4), _f(2, 5, 4), _f(2, 5, 3)),
        lambda q, k, v: G.scaled_dot_product_attention_fused(q, k, v, None, None, False, 0.5)),
    "lstm_layer": ("lstm_layer_grads", lambda: (_f(3, 2, 8), _f(2, 2), _f(2, 2), _f(8, 2)),
                   G.lstm_layer),
}


def _spec_backward_kernels():
    out = {}
    for entry in load_spec():
        if entry.get("backward_kernel"):
            name = parse_signature(entry["func"])[0]
            text = str(entry["backward_kernel"])
            out[name] = "elementwise.kept_pass" if text == "pointwise" else text.split("(")[0]
    return out


def test_every_backward_kernel_has_a_case():
    assert set(_spec_backward_kernels()) == set(_KERNEL_CASES)


@pytest.mark.parametrize("op", sorted(_KERNEL_CASES))
def test_backward_kernel_runs_only_without_create_graph(op, monkeypatch):
    """A node with a ``backward_kernel`` calls it for a first-order backward (the formula only
    for what the kernel declines) and the formula, never the kernel, under create_graph."""
    mod, fn = _spec_backward_kernels()[op].rsplit(".", 1)
    kmod = importlib.import_module(f"ember.kernels.{mod}")
    formula, make, call = _KERNEL_CASES[op]
    kernel_calls, formula_calls = [], []
    real_kernel, real_formula = getattr(kmod, fn), getattr(F, formula)

    def kernel_spy(*a):
        out = real_kernel(*a)
        kernel_calls.append(out is not None)
        return out

    def formula_spy(*a):
        g = a[0][0] if isinstance(a[0], (tuple, list)) else a[0]
        if isinstance(g, ember.Tensor):   # not on symbolic values (gelu's compiled pass)
            formula_calls.append(1)
        return real_formula(*a)
    monkeypatch.setattr(kmod, fn, kernel_spy)
    monkeypatch.setattr(F, formula, formula_spy)
    for create_graph in (False, True):
        inputs = make()
        out = call(*inputs)
        out = out[0] if isinstance(out, tuple) else out
        loss = (out * out).sum()    # a gradient that depends on the inputs (create_graph)
        kernel_calls.clear()     # the forward's (gelu's kernel is a pass too)
        formula_calls.clear()
        grads = ember.autograd.grad(loss, inputs, create_graph=create_graph)
        assert all(g is not None for g in grads)
        if create_graph:
            assert kernel_calls == [] and formula_calls, op
            assert any(g.grad_fn is not None for g in grads)
        else:
            assert len(kernel_calls) == 1, op
            assert bool(formula_calls) == (not kernel_calls[0]), op
            assert all(g.grad_fn is None for g in grads)


def test_a_backward_kernel_may_read_only_what_the_formulas_read():
    """The node saves what the formulas read; a kernel reading more is refused by the
    generator (it would keep a tensor alive for the kernel alone)."""
    spec = importlib.util.spec_from_file_location(
        "gen_autograd", os.path.join(ROOT, "tools", "gen_autograd.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    entry = {"func": "relu(Tensor self) -> Tensor", "kernel": "elementwise.relu",
             "self": "relu_grad(grad, result)", "backward_kernel": "elementwise.f(grad, self)"}
    with pytest.raises(SystemExit, match="reads \\['self_'\\], which no formula reads"):
        gen.OpSpec(entry, {"relu_grad"}, {"relu"})
    entry["backward_kernel"] = "elementwise.relu_grad(grad, result)"
    assert gen.OpSpec(entry, {"relu_grad"}, {"relu"}).backward_kernel.fn == "relu_grad"


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
