"""Numba kernels of linear layers (ember.kernels.linear_numba): ``gemv_chain`` and
``gemv_chain_runs``, several layers in one call, against float64 NumPy."""
import numpy as np
import pytest

pytest.importorskip("numba")

from ember.kernels import linear_numba  # noqa: E402


def _reference(x, layers):
    h = x.astype(np.float64)
    for w, b, relu in layers:
        h = h @ w.T.astype(np.float64) + b
        if relu:
            h = np.where(h < 0, 0.0, h)   # NaN kept, as the kernel's ReLU
    return h


def _check_chain(dtype, rows, dims, relu, run):
    rng = np.random.default_rng(len(dims) * 10 + rows)
    layers = [(rng.standard_normal((dims[i + 1], dims[i])).astype(dtype),
               rng.standard_normal(dims[i + 1]).astype(dtype), relu[i])
              for i in range(len(dims) - 1)]
    x = rng.standard_normal((rows, dims[0])).astype(dtype)
    x[0, 1] = np.nan
    w = np.concatenate([lw.ravel() for lw, _, _ in layers])
    b = np.concatenate([lb for _, lb, _ in layers])
    inner = max(list(dims[1:-1]) + [1])
    buf = np.full((2, rows * inner), np.nan, dtype)
    y = np.full((rows, dims[-1]), np.nan, dtype)
    run(w, b, np.array(dims, np.int64), np.array(relu, np.bool_), x, buf, y)
    want = _reference(x, layers)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y[1:], want[1:], rtol=tol, atol=tol)
    assert np.isnan(y[0]).all()


CHAINS = [((13, 7), (True,)), ((40, 9, 33, 5), (True, False, True)),
          ((6, 21, 3, 17, 2), (False, True, True, False))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [1, 2, 3])
@pytest.mark.parametrize("dims,relu", CHAINS)
def test_gemv_chain_equals_the_layers_one_by_one(dtype, rows, dims, relu):
    _check_chain(dtype, rows, dims, relu, linear_numba.gemv_chain)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [1, 2])
@pytest.mark.parametrize("parts", [0, 1, 2, 3, 7])
@pytest.mark.parametrize("dims,relu", CHAINS)
def test_gemv_chain_runs_equals_the_layers_one_by_one(dtype, rows, parts, dims, relu):
    """Every other layer split into ``parts`` runs (runs of four rows: the 9-, 3- and 5-row
    layers leave later runs empty), the others on one thread."""
    split = np.array([i % 2 == 0 for i in range(len(dims) - 1)], np.bool_)
    _check_chain(dtype, rows, dims, relu,
                 lambda w, b, d, r, x, buf, y: linear_numba.gemv_chain_runs(
                     w, b, d, r, split, parts, x, buf, y))
