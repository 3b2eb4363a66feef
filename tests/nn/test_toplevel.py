"""ember.<name> for torch's top-level nn functions and losses (ember/nn/toplevel.py, and the
cells and spec ops of ember/ops/nn.py they sit with): torch's argument order and defaults,
values, dtypes, in-place variants, gradients and errors."""
import warnings

import numpy as np
import pytest

import ember
from tests.ops.test_namespace import CASES, NN_NAMES, _close, _pair, run_case

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in NN_NAMES], ids=lambda c: c[0])
def test_toplevel_nn_function_matches_torch(case):
    run_case(case)


def test_the_module_loads_on_first_use_and_names_its_errors():
    from ember.nn import toplevel
    from ember.ops import namespace
    assert set(toplevel.NAMES) == set(namespace.NN_TOPLEVEL)
    assert set(namespace.NN_TOPLEVEL) <= set(dir(ember))
    with pytest.raises(ember.EmberError, match="^conv2d: "):
        ember.conv2d(ember.ones(1, 2, 3, 3), ember.ones(1, 3, 1, 1))


def test_toplevel_norms_and_embedding_follow_torchs_argument_order():
    rs = np.random.RandomState(3)
    x, w, b = rs.randn(4, 3, 5), rs.rand(3), rs.randn(3)
    for train in (True, False):
        rm_e, rv_e = ember.zeros(3, dtype=ember.float64), ember.ones(3, dtype=ember.float64)
        rm_t, rv_t = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
        out_e = ember.batch_norm(ember.tensor(x), ember.tensor(w), ember.tensor(b), rm_e, rv_e,
                                 train, 0.3, 1e-5, False)
        out_t = torch.batch_norm(torch.tensor(x), torch.tensor(w), torch.tensor(b), rm_t, rv_t,
                                 train, 0.3, 1e-5, False)
        _close(out_e, out_t)
        _close(rm_e, rm_t)   # running statistics updated in place, as torch
        _close(rv_e, rv_t)
    out_e = ember.instance_norm(ember.tensor(x), ember.tensor(w), ember.tensor(b), None, None,
                                True, 0.1, 1e-5, False)
    _close(out_e, torch.instance_norm(torch.tensor(x), torch.tensor(w), torch.tensor(b), None,
                                      None, True, 0.1, 1e-5, False))
    x6 = rs.randn(2, 6, 4)
    _close(ember.group_norm(ember.tensor(x6), 3, ember.ones(6, dtype=ember.float64)),
           torch.group_norm(torch.tensor(x6), 3, torch.ones(6, dtype=torch.float64)))
    W, idx = rs.randn(6, 3), np.array([[0, 5, 2], [2, 2, 1]])
    we, wt = _pair(W, True)
    for pad in (-1, 2):
        oe, ot = ember.embedding(we, ember.tensor(idx), pad), torch.embedding(wt, torch.tensor(idx), pad)
        _close(oe, ot)
        oe.sum().backward()
        ot.sum().backward()
        _close(we.grad, wt.grad)   # padding_idx 2 gets no gradient
    with pytest.raises(TypeError):
        ember.batch_norm(ember.tensor(x), None, None, None, None, True, 0.1)   # all required
    with pytest.raises(RuntimeError, match="weight"):
        ember.convolution(ember.ones(1, 1, 3), ember.ones(3), None, [1], [0], [1], False, [0], 1)


def test_lstm_cell_matches_torch_and_the_module():
    rs = np.random.RandomState(4)
    args = [rs.randn(3, 4), rs.randn(3, 5), rs.randn(3, 5), rs.randn(20, 4), rs.randn(20, 5),
            rs.randn(20), rs.randn(20)]
    pe = [ember.tensor(a, requires_grad=True) for a in args]
    pt = [torch.tensor(a, requires_grad=True) for a in args]
    he, ce = ember.lstm_cell(pe[0], (pe[1], pe[2]), *pe[3:])
    ht, ct = torch.lstm_cell(pt[0], (pt[1], pt[2]), *pt[3:])
    _close((he, ce), (ht, ct))
    (he.sum() + (ce * ce).sum()).backward()
    (ht.sum() + (ct * ct).sum()).backward()
    for e, t in zip(pe, pt):
        _close(e.grad, t.grad, atol=1e-5)
    cell = ember.nn.LSTMCell(4, 5, dtype=ember.float64)
    h, c = cell(pe[0], (pe[1], pe[2]))
    h2, c2 = ember.lstm_cell(pe[0], (pe[1], pe[2]), cell.weight_ih, cell.weight_hh, cell.bias_ih,
                             cell.bias_hh)
    assert h.tolist() == h2.tolist() and c.tolist() == c2.tolist()
    with pytest.raises(RuntimeError, match="two tensors"):
        ember.lstm_cell(pe[0], (pe[1],), *pe[3:])


@pytest.mark.parametrize("name", ["dropout_", "alpha_dropout", "alpha_dropout_",
                                  "feature_alpha_dropout", "feature_alpha_dropout_",
                                  "feature_dropout", "feature_dropout_", "rrelu_", "celu_",
                                  "selu_", "threshold_"])
def test_dropout_and_activation_variants(name):
    x = np.random.RandomState(5).randn(4, 3, 2)
    extra = {"rrelu_": (0.1, 0.3, False), "celu_": (0.5,), "threshold_": (0.2, 9.0)}
    if "dropout" in name:
        # not training: the identity (the input itself, as torch)
        e = ember.tensor(x)
        out = getattr(ember, name)(e, 0.5, False)
        assert out is e and np.array_equal(e.numpy(), x)
        # training: the kept fraction and the in-place write
        e = ember.ones(200, 8, 4, dtype=ember.float64) * 2.0
        out = getattr(ember, name)(e, 0.25, True)
        assert (out is e) == name.endswith("_") and out.shape == e.shape
        if name.startswith("feature"):   # whole channels: one value per (N, C)
            assert (out.numpy() == out.numpy()[..., :1]).all()
        with pytest.raises(ValueError if "alpha" in name or "feature" in name else Exception):
            getattr(ember, name)(ember.ones(2, 3), 1.5, True)
        return
    e, t = _pair(x.copy())
    v = e._version
    assert getattr(ember, name)(e, *extra.get(name, ())) is e
    getattr(torch, name)(t, *extra.get(name, ()))
    assert e._version > v
    _close(e, t)


def test_rrelu_training_draws_from_its_generator():
    x = -ember.ones(1000, dtype=ember.float64)
    g1, g2 = ember.Generator().manual_seed(7), ember.Generator().manual_seed(7)
    a = ember.rrelu(x, 0.1, 0.3, True, g1)
    b = ember.rrelu(x, 0.1, 0.3, True, g2)
    assert a.tolist() == b.tolist()
    assert (a.numpy() <= -0.1).all() and (a.numpy() >= -0.3).all()


def test_toplevel_losses_take_torchs_int_reduction():
    rs = np.random.RandomState(6)
    x, t = rs.randn(3, 4), rs.rand(3, 4)
    for r in (0, 1, 2, 7):   # torch: 0 none, 1 mean, 2 sum, any other int none
        _close(ember.kl_div(ember.tensor(x), ember.tensor(t), r),
               torch.kl_div(torch.tensor(x), torch.tensor(t), r))
    # the default is torch 2.13's binding's, 0 (unreduced)
    assert ember.kl_div(ember.tensor(x), ember.tensor(t)).shape == (3, 4)
    with pytest.raises(TypeError, match="reduction"):
        ember.kl_div(ember.tensor(x), ember.tensor(t), "mean")
    lp = torch.randn(6, 2, 4, dtype=torch.float64).log_softmax(2)
    tg = torch.tensor([[1, 2, 3], [3, 1, 1]])
    for r in (0, 1, 2):
        _close(ember.ctc_loss(ember.tensor(lp.numpy()), ember.tensor(tg.numpy()), [6, 5],
                              [3, 2], 0, r),
               torch.ctc_loss(lp, tg, [6, 5], [3, 2], 0, r))


