"""ember/nn/utils/clip_grad.py against torch: every norm type (torch's definition, the norm of
the per-tensor norms: for 0 the number of gradients with a nonzero element), a NaN or infinite
norm (NaN/zero gradients as torch), error_if_nonfinite, foreach accepted, clip_grad_value_ and
clip_grads_with_norm_."""
import math

import numpy as np
import pytest
import torch

import ember
import ember.nn
from ember.errors import EmberRuntimeError
from ember.nn.utils import clip_grad


GRADS = [np.array([1.0, 0.0, -2.0]), np.array([[3.0, 0.5], [0.0, -0.25]]), np.zeros(2)]


def _pair(arrays, dtype):
    es, ts = [], []
    for a in arrays:
        e = ember.nn.Parameter(ember.zeros(a.shape, dtype=getattr(ember, dtype)))
        e.grad = ember.tensor(a.astype(dtype))
        t = torch.nn.Parameter(torch.zeros(a.shape, dtype=getattr(torch, dtype)))
        t.grad = torch.from_numpy(a.astype(dtype))
        es.append(e)
        ts.append(t)
    return es, ts


def _same(es, ts, tol):
    for e, t in zip(es, ts):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("norm_type", [0, 1, 2, 3.5, 0.5, "inf", -math.inf, -1, -2])
@pytest.mark.parametrize("max_norm", [1.0, 100.0])
def test_clip_grad_norm_matches_torch(norm_type, dtype, max_norm):
    es, ts = _pair(GRADS, dtype)
    got = ember.nn.utils.clip_grad_norm_(es, max_norm, norm_type)
    want = torch.nn.utils.clip_grad_norm_(ts, max_norm, norm_type)
    tol = 1e-12 if dtype == "float64" else 1e-6
    assert got.dtype == getattr(ember, dtype) and got.shape == ()
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol)
    _same(es, ts, tol)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_nonfinite_norm_scales_as_torch_or_raises(bad):
    arrays = [np.array([1.0, bad, 2.0]), np.array([0.5])]
    es, ts = _pair(arrays, "float32")
    got = ember.nn.utils.clip_grad_norm_(es, 1.0)
    want = torch.nn.utils.clip_grad_norm_(ts, 1.0)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    for e, t in zip(es, ts):    # NaN norm: NaN gradients; infinite: 0 (NaN where inf)
        np.testing.assert_array_equal(e.grad.numpy(), t.grad.numpy())
    es, _ = _pair(arrays, "float32")
    with pytest.raises(EmberRuntimeError, match="total norm of order 2.0 .* non-finite"):
        ember.nn.utils.clip_grad_norm_(es, 1.0, error_if_nonfinite=True)
    np.testing.assert_array_equal(es[1].grad.numpy(), [0.5])   # nothing scaled


def test_foreach_is_accepted_and_empty_and_single_tensor():
    es, ts = _pair(GRADS, "float64")
    for fe in (True, False, None):
        es, ts = _pair(GRADS, "float64")
        got = ember.nn.utils.clip_grad_norm_(es, 1.0, foreach=fe)
        want = torch.nn.utils.clip_grad_norm_(ts, 1.0, foreach=fe)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
        _same(es, ts, 1e-12)
    e = ember.nn.utils.clip_grad_norm_([], 1.0)
    assert e.item() == 0.0 and e.dtype == ember.float32
    es, ts = _pair(GRADS[:1], "float64")
    np.testing.assert_allclose(ember.nn.utils.clip_grad_norm_(es[0], 0.5).numpy(),
                               torch.nn.utils.clip_grad_norm_(ts[0], 0.5).numpy())
    _same(es, ts, 1e-12)


def test_clip_grads_with_norm_and_get_total_norm_match_torch():
    es, ts = _pair(GRADS, "float64")
    n = ember.nn.utils.get_total_norm([p.grad for p in es], 3.0)
    tn = torch.nn.utils.get_total_norm([p.grad for p in ts], 3.0)
    np.testing.assert_allclose(n.numpy(), tn.numpy(), rtol=1e-12)
    clip_grad.clip_grads_with_norm_(es, 1.0, n)
    torch.nn.utils.clip_grads_with_norm_(ts, 1.0, tn)
    _same(es, ts, 1e-12)


def test_clip_grad_value_keeps_nan_as_torch():
    arrays = [np.array([1.0, math.nan, -2.0, 0.3])]
    es, ts = _pair(arrays, "float32")
    ember.nn.utils.clip_grad_value_(es, 0.5, foreach=True)
    torch.nn.utils.clip_grad_value_(ts, 0.5)
    np.testing.assert_array_equal(es[0].grad.numpy(), ts[0].grad.numpy())


def test_clip_grad_norm_and_value_on_a_layers_gradients():
    from ember.nn.utils import clip_grad_norm_, clip_grad_value_
    m = ember.nn.Linear(3, 2)
    m(ember.randn(4, 3) * 10).sum().backward()
    g = np.concatenate([p.grad.detach().numpy().ravel() for p in m.parameters()])
    total = clip_grad_norm_(m.parameters(), 0.5)
    assert float(total) == pytest.approx(np.linalg.norm(g), rel=1e-5)
    g2 = np.concatenate([p.grad.detach().numpy().ravel() for p in m.parameters()])
    assert np.linalg.norm(g2) == pytest.approx(0.5, rel=1e-4)
    clip_grad_value_(m.parameters(), 0.01)
    assert max(float(p.grad.abs().max()) for p in m.parameters()) <= 0.01 + 1e-9
    inf = clip_grad_norm_(m.parameters(), 1.0, norm_type="inf")
    assert float(inf) <= 0.01 + 1e-6
