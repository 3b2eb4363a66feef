"""ember.signal.windows against torch.signal.windows: every window for lengths 0 to 8,
symmetric and periodic, float64 and the default dtype; requires_grad; argument errors."""
import numpy as np
import pytest

import ember
from ember.errors import EmberError

torch = pytest.importorskip("torch")

WINDOWS = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "hamming", "hann",
           "kaiser", "nuttall", "general_hamming"]


@pytest.mark.parametrize("name", WINDOWS)
def test_windows_match_torch(name):
    for M in (0, 1, 2, 5, 8):
        for sym in (True, False):
            e = getattr(ember.signal.windows, name)(M, sym=sym, dtype=ember.float64)
            t = getattr(torch.signal.windows, name)(M, sym=sym, dtype=torch.float64)
            np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-12, atol=1e-12)
    e = ember.signal.windows.general_cosine(7, a=[0.46, 0.23, 0.31])
    t = torch.signal.windows.general_cosine(7, a=[0.46, 0.23, 0.31])
    assert e.dtype == ember.float32
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6)


def test_window_errors():
    with pytest.raises(EmberError, match="non-negative"):
        ember.signal.windows.hann(-1)
    with pytest.raises(EmberError, match="float32 or float64"):
        ember.signal.windows.hann(4, dtype=ember.int64)
    with pytest.raises(EmberError, match="center must be None"):
        ember.signal.windows.exponential(4, center=1.0)




@pytest.mark.parametrize("name, kw", [("exponential", dict(center=None, tau=0.5)),
                                      ("gaussian", dict(std=2.5)), ("kaiser", dict(beta=3.0)),
                                      ("general_hamming", dict(alpha=0.6))])
def test_window_parameters_match_torch(name, kw):
    for sym in (True, False):
        e = getattr(ember.signal.windows, name)(9, sym=sym, dtype=ember.float64, **kw)
        t = getattr(torch.signal.windows, name)(9, sym=sym, dtype=torch.float64, **kw)
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-12, atol=1e-12)
    e = ember.signal.windows.exponential(6, center=1.0, sym=False, dtype=ember.float64)
    t = torch.signal.windows.exponential(6, center=1.0, sym=False, dtype=torch.float64)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-12)


def test_requires_grad_makes_a_leaf():
    w = ember.signal.windows.hann(5, requires_grad=True)
    assert w.requires_grad and w.grad_fn is None
    assert not ember.signal.windows.hann(5).requires_grad


def test_length_must_be_an_int_and_layout_strided():
    with pytest.raises(EmberError, match="M must be an int"):
        ember.signal.windows.hamming(4.0)
    with pytest.raises(EmberError, match="M must be an int"):
        ember.signal.windows.hamming(True)
    with pytest.raises(EmberError, match="strided tensors only"):
        ember.signal.windows.hann(4, layout=ember.sparse_coo)
