"""The ``ember.fft`` namespace (ember/fft.py) is torch.fft's: every function torch.fft has is there
under the same name, everything ember.fft exports is a torch.fft name, and a sample of them give
torch's values (float64)."""
import numpy as np
import pytest

import ember
import ember.fft as E

torch = pytest.importorskip("torch")
T = torch.fft


def test_the_names_are_torchs():
    theirs = {n for n in dir(T) if not n.startswith("_") and callable(getattr(T, n))
              and n != "Tensor"}
    assert theirs <= set(dir(E)), sorted(theirs - set(dir(E)))
    assert set(E.__all__) <= set(dir(T)), sorted(set(E.__all__) - set(dir(T)))
    assert all(callable(getattr(E, n)) for n in E.__all__)


X = np.random.default_rng(0).standard_normal((4, 6))


@pytest.mark.parametrize("call", [lambda m, x: m.fft.fft(x), lambda m, x: m.fft.rfft2(x),
                                  lambda m, x: m.fft.ihfft(x, n=5, norm="ortho"),
                                  lambda m, x: m.fft.fftshift(x, dim=1),
                                  lambda m, x: m.fft.fftfreq(7, 0.5, dtype=m.float64)])
def test_values_are_torchs(call):
    a = call(ember, ember.tensor(X)).numpy()
    b = call(torch, torch.tensor(X)).resolve_conj().numpy()
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)

