"""ember/optim/_updates.py: each optimizer update with an eager and a fused path is one function,
run in place on NumPy arrays by the eager step and compiled from its symbolic form by the fused
pass; the two give the same bits."""
import numpy as np
import pytest
import torch

import ember
from ember.kernels.pointwise import compile_form
from ember.optim import _fused, _updates, algorithms


def test_the_fused_passes_compile_the_functions_the_eager_steps_run():
    assert _fused.adam_update is _updates.adam_update is algorithms.adam_update
    assert _fused.sgd_momentum_update is _updates.sgd_momentum_update \
        is algorithms.sgd_momentum_update


def _arrays(k, n=1000, dtype=np.float32):
    r = np.random.default_rng(k)
    return [r.standard_normal(n).astype(dtype) for _ in range(k)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adam_update_numpy_in_place_equals_its_symbolic_form(dtype):
    x, g, m, v = _arrays(4, dtype=dtype)
    v = np.abs(v)
    consts = (0.1, 0.999, 0.001, 0.3, 1e-8, 0.02)
    k = compile_form(_updates.adam_update, _fused._ADAM_INPUTS, (x, x, x, x) + (float,) * 6)
    want = k(x, g, m, v, *consts, backend="numpy")
    got = [a.copy() for a in (x, m, v)]
    _updates.adam_update(got[0], g, got[1], got[2], *consts, _updates.NUMPY)
    for a, b in zip(got, want):
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sgd_momentum_update_numpy_in_place_equals_its_symbolic_form(dtype):
    x, g, buf = _arrays(3, dtype=dtype)
    consts = (0.9, 0.7, 0.05)
    k = compile_form(_updates.sgd_momentum_update, _fused._SGD_INPUTS, (x, x, x) + (float,) * 3)
    want = k(x, g, buf, *consts, backend="numpy")
    got = [a.copy() for a in (x, buf)]
    _updates.sgd_momentum_update(got[0], g, got[1], *consts, _updates.NUMPY)
    for a, b in zip(got, want):
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("kw", [dict(momentum=0.9, nesterov=True), dict(momentum=0.9,
                                                                        dampening=0.5)])
def test_sgd_momentum_steps_match_torch(kw):
    """The first step (the buffer set to the gradient) and later ones, through one function."""
    w = np.random.default_rng(0).standard_normal(50).astype(np.float32)
    p, tp = ember.tensor(w.copy(), requires_grad=True), torch.tensor(w.copy(), requires_grad=True)
    opt, topt = ember.optim.SGD([p], lr=0.1, **kw), torch.optim.SGD([tp], lr=0.1, **kw)
    r = np.random.default_rng(1)
    for _ in range(4):
        g = r.standard_normal(50).astype(np.float32)
        p.grad, tp.grad = ember.tensor(g), torch.from_numpy(g.copy())
        opt.step()
        topt.step()
    np.testing.assert_allclose(p._data, tp.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_the_traceable_optimizers_steps_run_their_update_function():
    # one home per update: the eager step of each runs the _updates function that
    # ember.compile's captured step traces (ember/compiler/step.py)
    for cls, fn in ((ember.optim.RMSprop, _updates.rmsprop_update),
                    (ember.optim.Adagrad, _updates.adagrad_update),
                    (ember.optim.Adadelta, _updates.adadelta_update),
                    (ember.optim.Adamax, _updates.adamax_update),
                    (ember.optim.NAdam, _updates.nadam_update),
                    (ember.optim.RAdam, _updates.radam_update),
                    (ember.optim.ASGD, _updates.asgd_update),
                    (ember.optim.Rprop, _updates.rprop_update)):
        assert cls.update is fn and cls.step is algorithms._Traceable.step


@pytest.mark.parametrize("name,kw", [("RMSprop", dict(momentum=0.9, centered=True,
                                                      weight_decay=0.1)),
                                     ("RMSprop", dict(maximize=True)),
                                     ("Adagrad", dict(lr_decay=0.1, weight_decay=0.1,
                                                      initial_accumulator_value=0.2))])
def test_rmsprop_and_adagrad_match_torch(name, kw):
    w = np.random.default_rng(0).standard_normal(30)
    p, tp = ember.tensor(w.copy(), requires_grad=True), torch.tensor(w.copy(), requires_grad=True)
    opt, topt = getattr(ember.optim, name)([p], lr=0.05, **kw), \
        getattr(torch.optim, name)([tp], lr=0.05, **kw)
    r = np.random.default_rng(1)
    for _ in range(6):
        g = r.standard_normal(30)
        p.grad, tp.grad = ember.tensor(g), torch.from_numpy(g.copy())
        opt.step()
        topt.step()
    np.testing.assert_allclose(p._data, tp.detach().numpy(), rtol=1e-12, atol=1e-12)
