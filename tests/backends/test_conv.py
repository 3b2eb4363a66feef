"""ember.backends.conv (ember/backends/conv.py), the convolution engine settings: every algorithm
of ALGORITHMS that can run a convolution, forced through ``algorithm``, gives torch's result and
gradients; a forced algorithm that cannot is an error naming it, an unknown one lists
ALGORITHMS; ``benchmark`` picks one of them and gives the same result."""
import numpy as np
import pytest

import ember
from ember.backends import conv as settings

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 4, 9, 9))
W = RNG.standard_normal((6, 4, 3, 3))


def _torch():
    x, w = torch.tensor(X, requires_grad=True), torch.tensor(W, requires_grad=True)
    y = torch.nn.functional.conv2d(x, w, padding=1)
    (y * y).sum().backward()
    return y.detach().numpy(), x.grad.numpy(), w.grad.numpy()


def _ember():
    x, w = ember.tensor(X, requires_grad=True), ember.tensor(W, requires_grad=True)
    y = ember.nn.functional.conv2d(x, w, padding=1)
    (y * y).sum().backward()
    return y.detach().numpy(), x.grad.numpy(), w.grad.numpy()


def _capable():
    """The algorithms that take this forward convolution (each forced in turn)."""
    out = []
    x, w = ember.tensor(X), ember.tensor(W)
    for name in settings.ALGORITHMS:
        settings.algorithm = name
        try:
            ember.nn.functional.conv2d(x, w, padding=1)
        except (ValueError, RuntimeError) as e:
            assert repr(name) in str(e) and "cannot compute" in str(e), str(e)
            continue
        finally:
            settings.algorithm = None
        out.append(name)
    return out


def test_defaults():
    assert settings.benchmark is False and settings.algorithm is None


def test_each_capable_algorithm_matches_torch(monkeypatch):
    names = _capable()
    assert "im2col" in names and "direct1x1" not in names
    want = _torch()
    for name in names:
        monkeypatch.setattr(settings, "algorithm", name)
        try:
            got = _ember()
        except (ValueError, RuntimeError) as e:  # the backward directions may need another algorithm
            assert "cannot compute" in str(e)
            continue
        for g, w, what in zip(got, want, ("output", "input grad", "weight grad")):
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-9, err_msg=f"{name} {what}")


def test_an_unknown_algorithm_lists_the_known_ones(monkeypatch):
    monkeypatch.setattr(settings, "algorithm", "nope")
    with pytest.raises(RuntimeError, match="unknown algorithm 'nope'; expected one of"):
        ember.nn.functional.conv2d(ember.tensor(X), ember.tensor(W))


def test_benchmark_gives_torchs_result(monkeypatch):
    monkeypatch.setattr(settings, "benchmark", True)
    for g, w in zip(_ember(), _torch()):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-9)
