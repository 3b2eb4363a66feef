"""``passes.fold_linear``: ``add(matmul(x, W), b)`` of a constant matrix and a constant bias
becomes ``linear(x, t(W), b)`` (after ``constant_fold``, a constant weight), equal to the
original; what is left alone."""
import warnings

import numpy as np
import pytest

import ember
import ember.jit as jit
from ember.jit.passes import PIPELINE, fold_linear
from tests.jit.passes.helpers import kinds


def _trace(fn, *xs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jit.trace(fn, xs)


def _optimize(traced):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jit.optimize(traced)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(5, 6), (3, 4, 6), (6,)])
@pytest.mark.parametrize("bias_first", [False, True])
def test_product_and_bias_become_one_linear(dtype, shape, bias_first):
    rng = np.random.default_rng(0)
    W = ember.tensor(rng.standard_normal((6, 7)).astype(dtype))
    b = ember.tensor(rng.standard_normal(7).astype(dtype))

    def f(x):
        return b + x @ W if bias_first else x @ W + b
    x = ember.tensor(rng.standard_normal(shape).astype(dtype))
    fast = _optimize(_trace(f, x))
    assert "linear" in kinds(fast.graph) and "matmul" not in kinds(fast.graph)
    assert "add" not in kinds(fast.graph) and "t" not in kinds(fast.graph)   # t(W) folded
    for seed in (1, 2):
        y = ember.tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype))
        want = (y.numpy() @ W.numpy() + b.numpy())
        got = fast(y).numpy()
        assert got.shape == want.shape and got.dtype == want.dtype
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_what_is_left_alone():
    rng = np.random.default_rng(3)
    W = ember.tensor(rng.standard_normal((6, 7)).astype(np.float32))
    b = ember.tensor(rng.standard_normal(7).astype(np.float32))
    b2 = ember.tensor(rng.standard_normal((5, 7)).astype(np.float32))
    x = ember.tensor(rng.standard_normal((5, 6)).astype(np.float32))
    cases = [
        lambda x, w: x @ w + b,            # the matrix an input, not a constant
        lambda x, w: x @ W + b2,           # a bias of the output's shape, not a vector
        lambda x, w: (x @ W) * 2 + b,      # the product read by something else first
        lambda x, w: ((x @ W) + b, x @ W),  # the product read twice (after CSE)
        lambda x, w: x @ W - b,            # not an add
        lambda x, w: ember.add(x @ W, b, alpha=2.0),
    ]
    for f in cases:
        fast = _optimize(_trace(f, x, W * 1.0))
        assert "linear" not in kinds(fast.graph), f
        want = f(x, W * 1.0)
        got = fast(x, W * 1.0)
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-6)


def test_runs_before_constant_folding():
    names = [n for n, _ in PIPELINE]
    assert names.index("fold_linear") < names.index("constant_fold")
    assert dict(PIPELINE)["fold_linear"] is fold_linear
